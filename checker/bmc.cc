#include "checker/bmc.h"

#include <chrono>
#include <sstream>

#include "spec/invariants.h"

namespace orrery::checker {

namespace {

using Clock = std::chrono::steady_clock;

// next == ite(c1, v1, ite(c2, v2, ... current)) over the choices whose value differs from the
// current one: one defining equation per variable, so the solver sees a function, not a
// disjunction of whole-state equalities.
z3::expr define(const z3::expr& next, const z3::expr& current,
                const std::vector<std::pair<z3::expr, z3::expr>>& changes) {
  z3::expr value = current;
  for (auto it = changes.rbegin(); it != changes.rend(); ++it)
    value = z3::ite(it->first, it->second, value);
  return next == value;
}

}  // namespace

BmcReport bmc(const std::vector<SymRow>& rows, const Shape& shape, int depth, unsigned timeout_ms) {
  auto t0 = Clock::now();
  z3::context ctx;
  Z3Domain d{&ctx};
  BmcReport report;
  report.depth = depth;
  report.shape = shape;
  const int m = shape.nodes * shape.devices_per_node;
  const int nrows = static_cast<int>(rows.size());

  z3::solver solver(ctx);
  z3::params params(ctx);
  params.set("timeout", timeout_ms);
  solver.set(params);

  std::vector<SymCluster> states;
  std::vector<SymParams> ps;
  std::vector<z3::expr> choice;  // step t: job * nrows + row
  states.push_back(make_cluster(d, shape, "t0."));
  solver.add(spec::init_state(d, states[0]));

  for (int t = 1; t <= depth; ++t) {
    auto td = Clock::now();
    const auto& pre = states.back();
    auto post = make_cluster(d, shape, "t" + std::to_string(t) + ".", &states[0]);
    auto p = make_params(d, m, "p" + std::to_string(t) + ".");
    auto c = ctx.int_const(("choice" + std::to_string(t)).c_str());
    solver.add(d.k(0) <= c && c < d.k(shape.jobs * nrows));
    // Per variable of the next state, the choices that change it.
    auto pre_vars = state_refs(const_cast<SymCluster&>(pre));
    auto post_vars = state_refs(post);
    using Changes = std::vector<std::pair<z3::expr, z3::expr>>;
    std::vector<Changes> changes(pre_vars.size());
    auto step_ok = d.b(true);
    for (int j = 0; j < shape.jobs; ++j) {
      for (int r = 0; r < nrows; ++r) {
        const auto& row = rows[r];
        auto chosen = c == d.k(j * nrows + r);
        auto fired = fire(d, row, pre, j, p);
        auto enabled = pre.jobs[j].state == d.k(static_cast<std::int64_t>(row.src));
        if (row.guard) enabled = enabled && spec::all_of(d, row.guard(d, pre, j, p));
        solver.add(z3::implies(chosen, enabled));
        // Whatever the row changes, of any job or device (an effect should change only what
        // FRAME allows, but the run must follow what the effect really does).
        auto fired_vars = state_refs(fired);
        for (std::size_t v = 0; v < pre_vars.size(); ++v)
          if (!z3::eq(*fired_vars[v], *pre_vars[v])) changes[v].emplace_back(chosen, *fired_vars[v]);
      }
      auto step_j = d.b(true);
      for (auto inv : spec::kAllInvariants)
        if (spec::has_step_part(inv)) step_j = step_j && spec::step_invariant(d, inv, pre, j, p, post);
      // The acting job is c / nrows.
      step_ok = step_ok && z3::implies(d.k(j * nrows) <= c && c < d.k((j + 1) * nrows), step_j);
    }
    for (std::size_t v = 0; v < pre_vars.size(); ++v)
      solver.add(define(*post_vars[v], *pre_vars[v], changes[v]));
    states.push_back(post);
    ps.push_back(p);
    choice.push_back(c);

    auto inv_ok = d.b(true);
    for (auto inv : spec::kAllInvariants) inv_ok = inv_ok && spec::state_invariant(d, inv, post);
    solver.push();
    solver.add(!(inv_ok && step_ok));
    auto r = solver.check();
    report.seconds_per_depth.push_back(
        std::chrono::duration<double>(Clock::now() - td).count());
    if (r == z3::sat) {
      report.ok = false;
      auto mdl = solver.get_model();
      std::ostringstream out;
      out << "    step 0: " << show_cluster(mdl, states[0]);
      for (int s = 1; s <= t; ++s) {
        std::int64_t cv = 0;
        mdl.eval(choice[s - 1], true).is_numeral_i64(cv);
        int j = static_cast<int>(cv / nrows);
        const auto& row = rows[static_cast<std::size_t>(cv % nrows)];
        out << "    step " << s << ": " << show_event(mdl, row, j, ps[s - 1]) << "\n";
        for (int i = 0; i < shape.jobs; ++i) out << "      " << show_job(mdl, states[s], i) << "\n";
      }
      for (auto inv : spec::kAllInvariants) {
        bool st = mdl.eval(spec::state_invariant(d, inv, states[t]), true).is_true();
        out << (st ? "" : "    violates " + std::string(spec::inv_id(inv)) + " (state)\n");
      }
      std::int64_t cv = 0;
      mdl.eval(choice[t - 1], true).is_numeral_i64(cv);
      for (auto inv : spec::kAllInvariants) {
        if (!spec::has_step_part(inv)) continue;
        auto e = spec::step_invariant(d, inv, states[t - 1], static_cast<int>(cv / nrows), ps[t - 1],
                                      states[t]);
        if (!mdl.eval(e, true).is_true())
          out << "    violates " << spec::inv_id(inv) << " (step)\n";
      }
      report.counterexample = out.str();
      solver.pop();
      break;
    }
    solver.pop();
    if (r == z3::unsat) {
      // No run of t steps breaks an invariant: every state reachable in t steps satisfies them,
      // a proven fact that is sound to assert and that keeps the next depth's query small.
      solver.add(inv_ok && step_ok);
    }
    if (r == z3::unknown) {
      report.ok = false;
      report.unknown = true;
      report.counterexample = "solver returned unknown at depth " + std::to_string(t) + " (" +
                              solver.reason_unknown() + ")";
      break;
    }
    report.depth_checked = t;
  }
  report.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  return report;
}

}  // namespace orrery::checker
