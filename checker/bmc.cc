#include "checker/bmc.h"

#include <chrono>
#include <sstream>

#include "checker/lifecycle_rows.h"
#include "spec/invariants.h"

namespace orrery::checker {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

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

// A run of states s0, s1, ... linked by steps of the whole table, its constraints collected in
// `constraints` (the caller decides which solver they go to).
class Run {
 public:
  Run(const Z3Domain& d, const std::vector<SymRow>& rows, const std::vector<NodeSymRow>& node_rows,
      const Shape& shape, const std::string& name)
      : d_(d), rows_(rows), node_rows_(node_rows), shape_(shape), name_(name) {
    states_.push_back(make_cluster(d, shape, name + "0."));
  }

  const SymCluster& state(std::size_t t) const { return states_[t]; }
  const SymCluster& last() const { return states_.back(); }
  std::size_t steps() const { return choices_.size(); }
  const z3::expr& last_choice() const { return choices_.back(); }
  // Choices per step: a job and a job row, or a node and a node row.
  int choices() const {
    return shape_.jobs * static_cast<int>(rows_.size()) +
           shape_.nodes * static_cast<int>(node_rows_.size());
  }
  std::vector<z3::expr> constraints;

  // Every state invariant of state t.
  z3::expr invariants(std::size_t t) const {
    auto ok = d_.b(true);
    for (auto inv : spec::kAllInvariants)
      ok = ok && spec::state_invariant(d_, inv, states_[t]);
    return ok;
  }
  // Every step invariant of step t (from state t-1 to state t), for whichever job acted.
  const z3::expr& step_invariants(std::size_t t) const { return step_ok_[t - 1]; }

  // Adds a step from the last state to a new one. With `slot_order`, jobs leave New (are
  // submitted) in slot order: job slots are interchangeable in the initial state and in every
  // guard, effect and invariant (job ids are only compared), so every run is a permutation of one
  // that submits in slot order, and checking those finds every violation (symmetry reduction).
  //
  // With `only` >= 0 the step is that one choice (job * rows + row, or after those node * node
  // rows + row): the same constraints as the whole table's step with the choice fixed, without
  // the other choices' branches.
  void extend(bool slot_order = false, int only = -1) {
    const int nrows = static_cast<int>(rows_.size());
    const int t = static_cast<int>(states_.size());
    const auto& pre = states_.back();
    auto post = make_cluster(d_, shape_, name_ + std::to_string(t) + ".", &states_[0]);
    auto p = make_params(d_, pre.num_devices(), "p" + name_ + std::to_string(t) + ".");
    auto c = d_.ctx->int_const(("choice" + name_ + std::to_string(t)).c_str());
    constraints.push_back(only >= 0 ? c == d_.k(only) : d_.k(0) <= c && c < d_.k(choices()));
    auto considered = [&](int choice) { return only < 0 || choice == only; };
    // Per variable of the next state, the choices that change it.
    auto pre_vars = state_refs(const_cast<SymCluster&>(pre));
    auto post_vars = state_refs(post);
    std::vector<std::vector<std::pair<z3::expr, z3::expr>>> changes(pre_vars.size());
    auto step_ok = d_.b(true);
    for (int j = 0; j < shape_.jobs; ++j) {
      if (only >= 0 && (only < j * nrows || only >= (j + 1) * nrows)) continue;
      for (int r = 0; r < nrows; ++r) {
        if (!considered(j * nrows + r)) continue;
        const auto& row = rows_[r];
        auto chosen = c == d_.k(j * nrows + r);
        auto fired = fire(d_, row, pre, j, p);
        auto enabled = pre.jobs[j].state == d_.k(static_cast<std::int64_t>(row.src));
        if (row.guard) enabled = enabled && spec::all_of(d_, row.guard(d_, pre, j, p));
        if (slot_order && j > 0 && row.src == spec::JobState::kNew)
          enabled = enabled &&
                    !(pre.jobs[j - 1].state == d_.k(static_cast<std::int64_t>(spec::JobState::kNew)));
        constraints.push_back(z3::implies(chosen, enabled));
        // Whatever the row changes, of any job or device (an effect should change only what
        // FRAME allows, but the run must follow what the effect really does).
        auto fired_vars = state_refs(fired);
        for (std::size_t v = 0; v < pre_vars.size(); ++v)
          if (!z3::eq(*fired_vars[v], *pre_vars[v]))
            changes[v].emplace_back(chosen, *fired_vars[v]);
      }
      auto step_j = d_.b(true);
      for (auto inv : spec::kAllInvariants)
        if (spec::has_step_part(inv))
          step_j = step_j && spec::step_invariant(d_, inv, pre, j, p, post);
      // The acting job is c / nrows.
      step_ok = step_ok && z3::implies(d_.k(j * nrows) <= c && c < d_.k((j + 1) * nrows), step_j);
    }
    // Node rows: choice jobs * nrows + n * nnode + r. No job acts; the step invariants are asked
    // with job 0 in the acting job's place (a node row changes no job).
    const int nnode = static_cast<int>(node_rows_.size());
    const bool node_considered = only < 0 || only >= shape_.jobs * nrows;
    auto node_step = d_.b(true);
    if (node_considered)
      for (auto inv : spec::kAllInvariants)
        if (spec::has_step_part(inv))
          node_step = node_step && spec::step_invariant(d_, inv, pre, 0, p, post);
    for (int n = 0; n < shape_.nodes; ++n)
      for (int r = 0; r < nnode; ++r) {
        if (!considered(shape_.jobs * nrows + n * nnode + r)) continue;
        const auto& row = node_rows_[r];
        auto chosen = c == d_.k(shape_.jobs * nrows + n * nnode + r);
        auto enabled = pre.node_state[n] == d_.k(static_cast<std::int64_t>(row.src));
        if (row.guard) enabled = enabled && spec::all_of(d_, row.guard(d_, pre, n));
        constraints.push_back(z3::implies(chosen, enabled));
        auto fired = fire_node(d_, row, pre, n);
        auto fired_vars = state_refs(fired);
        for (std::size_t v = 0; v < pre_vars.size(); ++v)
          if (!z3::eq(*fired_vars[v], *pre_vars[v]))
            changes[v].emplace_back(chosen, *fired_vars[v]);
      }
    if (nnode > 0 && node_considered)
      step_ok = step_ok && z3::implies(d_.k(shape_.jobs * nrows) <= c, node_step);
    for (std::size_t v = 0; v < pre_vars.size(); ++v)
      constraints.push_back(define(*post_vars[v], *pre_vars[v], changes[v]));
    states_.push_back(post);
    params_.push_back(p);
    choices_.push_back(c);
    step_ok_.push_back(step_ok);
  }

  // The run under a model, step by step, and what its last state and step break.
  std::string show(z3::model& mdl) const {
    const int nrows = static_cast<int>(rows_.size());
    std::ostringstream out;
    out << "    step 0: " << show_cluster(mdl, states_[0]);
    const std::int64_t job_choices = static_cast<std::int64_t>(shape_.jobs) * nrows;
    const int nnode = static_cast<int>(node_rows_.size());
    auto choice = [&](std::size_t s) {
      std::int64_t cv = 0;
      mdl.eval(choices_[s - 1], true).is_numeral_i64(cv);
      return cv;
    };
    // The acting job and its row; for a node step, job 0 (see extend()) and no row.
    auto acting = [&](std::size_t s) {
      auto cv = choice(s);
      if (cv >= job_choices) return std::pair{0, rows_.size()};
      return std::pair{static_cast<int>(cv / nrows), static_cast<std::size_t>(cv % nrows)};
    };
    for (std::size_t s = 1; s < states_.size(); ++s) {
      auto [j, r] = acting(s);
      if (r < rows_.size()) {
        out << "    step " << s << ": " << show_event(mdl, rows_[r], j, params_[s - 1]) << "\n";
      } else {
        auto k = choice(s) - job_choices;
        out << "    step " << s << ": "
            << show_node_event(node_rows_[static_cast<std::size_t>(k % nnode)],
                               static_cast<int>(k / nnode))
            << "\n";
      }
      for (int i = 0; i < shape_.jobs; ++i)
        out << "      " << show_job(mdl, states_[s], i) << "\n";
    }
    const std::size_t t = steps();
    for (auto inv : spec::kAllInvariants)
      if (!mdl.eval(spec::state_invariant(d_, inv, states_[t]), true).is_true())
        out << "    violates " << spec::inv_id(inv) << " (state)\n";
    if (t > 0) {
      auto [j, r] = acting(t);
      for (auto inv : spec::kAllInvariants)
        if (spec::has_step_part(inv) &&
            !mdl.eval(spec::step_invariant(d_, inv, states_[t - 1], j, params_[t - 1], states_[t]),
                      true)
                 .is_true())
          out << "    violates " << spec::inv_id(inv) << " (step)\n";
    }
    return out.str();
  }

 private:
  const Z3Domain& d_;
  const std::vector<SymRow>& rows_;
  const std::vector<NodeSymRow>& node_rows_;
  Shape shape_;
  std::string name_;
  std::vector<SymCluster> states_;
  std::vector<SymParams> params_;
  std::vector<z3::expr> choices_;  // step t: job * nrows + row, or after those node * nnode + row
  std::vector<z3::expr> step_ok_;
};

// Base-case depths from which each depth is asked one query per choice of its last step.
constexpr int kSplitFromDepth = 6;

// A solver that first simplifies and eliminates the next-state definitions: for these unrolled
// queries it is about three times faster than one incremental solver (push/pop turns Z3's
// preprocessing off).
z3::solver preprocessing_solver(z3::context& ctx, unsigned timeout_ms) {
  auto tactic = z3::tactic(ctx, "simplify") & z3::tactic(ctx, "propagate-values") &
                z3::tactic(ctx, "solve-eqs") & z3::tactic(ctx, "elim-uncnstr") &
                z3::tactic(ctx, "smt");
  z3::solver s = tactic.mk_solver();
  z3::params params(ctx);
  params.set("timeout", timeout_ms);
  s.set(params);
  return s;
}

}  // namespace

BmcReport bmc(const std::vector<SymRow>& rows, const Shape& shape, int depth, int unroll,
              unsigned timeout_ms, bool every_path) {
  return bmc(rows, node_lifecycle_rows(), shape, depth, unroll, timeout_ms, every_path);
}

BmcReport bmc(const std::vector<SymRow>& rows, const std::vector<NodeSymRow>& node_rows,
              const Shape& shape, int depth, int unroll, unsigned timeout_ms, bool every_path) {
  auto t0 = Clock::now();
  z3::context ctx;
  Z3Domain d{&ctx};
  BmcReport report;
  report.shape = shape;
  report.depth = depth;
  report.unroll = std::min(unroll, depth);
  auto fail = [&](std::string why, bool unknown) {
    report.ok = false;
    report.unknown = unknown;
    report.counterexample = std::move(why);
    report.seconds = seconds_since(t0);
    return report;
  };

  // 1. The base case: runs from the initial state, the initial state itself first.
  Run run(d, rows, node_rows, shape, "t");
  run.constraints.push_back(spec::init_state(d, run.state(0)));
  {
    auto solver = preprocessing_solver(ctx, timeout_ms);
    for (const auto& c : run.constraints) solver.add(c);
    solver.add(!run.invariants(0));
    auto r = solver.check();
    if (r == z3::sat) {
      auto mdl = solver.get_model();
      return fail(run.show(mdl), false);
    }
    if (r == z3::unknown)
      return fail("solver returned unknown on the initial state (" + solver.reason_unknown() + ")",
                  true);
    run.constraints.push_back(run.invariants(0));
  }

  // 2. One step from any state satisfying the invariants, per choice (job x row, node x node row):
  // the induction step of length 1, split into its cases. A choice for which it is unsat
  // ("closed") can break nothing after any run whose states satisfy the invariants, so the base
  // case's query for that choice as the last step, at any depth, is unsat too: its constraints
  // contain this query's (the invariants of the state before the last step are a proved lemma
  // there, the fleet is the same, the last step the same). The base case asks the solver only
  // about the choices that are not closed; every depth is still decided for every choice.
  const int choices = run.choices();
  report.choices = choices;
  std::vector<bool> closed(static_cast<std::size_t>(choices), false);
  std::string one_step_why;  // the first choice that does not close, as a run of one step
  {
    auto t1 = Clock::now();
    Run base(d, rows, node_rows, shape, "c");
    base.constraints.push_back(spec::fleet_wellformed(d, base.state(0)));
    base.constraints.push_back(base.invariants(0));
    for (int c = 0; c < choices; ++c) {
      Run one = base;
      one.extend(/*slot_order=*/false, /*only=*/c);
      auto solver = preprocessing_solver(ctx, timeout_ms);
      for (const auto& constraint : one.constraints) solver.add(constraint);
      solver.add(!(one.invariants(1) && one.step_invariants(1)));
      auto r = solver.check();
      closed[static_cast<std::size_t>(c)] = r == z3::unsat;
      if (r == z3::unsat) ++report.closed;
      if (!one_step_why.empty()) continue;
      if (r == z3::sat) {
        auto mdl = solver.get_model();
        one_step_why = "the induction step of length 1 does not close (its states need not be "
                       "reachable):\n" + one.show(mdl);
      } else if (r == z3::unknown) {
        one_step_why = "solver returned unknown in the induction step of length 1 (" +
                       solver.reason_unknown() + ")";
      }
    }
    report.one_step_seconds = seconds_since(t1);
  }
  std::vector<int> open;  // the choices the base case asks about
  for (int c = 0; c < choices; ++c)
    if (!closed[static_cast<std::size_t>(c)] || every_path) open.push_back(c);

  for (int t = 1; t <= report.unroll; ++t) {
    auto td = Clock::now();
    run.extend(/*slot_order=*/true);
    auto property = run.invariants(t) && run.step_invariants(t);
    auto r = z3::unsat;
    z3::solver solver(ctx);
    int queries = 0;
    if (open.empty()) {
      // Every choice is closed: no run of t steps breaks an invariant (see above).
    } else if (t < kSplitFromDepth) {
      solver = preprocessing_solver(ctx, timeout_ms);
      for (const auto& constraint : run.constraints) solver.add(constraint);
      auto some_open = d.b(false);
      for (int c : open) some_open = some_open || run.last_choice() == d.k(c);
      solver.add(some_open);
      solver.add(!property);
      r = solver.check();
      ++queries;
    } else {
      // One query per choice of the last step, as in the induction step below: each query then
      // grows about twice per depth instead of eight times, at a fixed cost that pays off from
      // this depth on.
      for (std::size_t i = 0; i < open.size() && r == z3::unsat; ++i) {
        solver = preprocessing_solver(ctx, timeout_ms);
        for (const auto& constraint : run.constraints) solver.add(constraint);
        solver.add(run.last_choice() == d.k(open[i]));
        solver.add(!property);
        r = solver.check();
        ++queries;
      }
    }
    report.seconds_per_depth.push_back(seconds_since(td));
    report.queries_per_depth.push_back(queries);
    if (r == z3::sat) {
      auto mdl = solver.get_model();
      return fail(run.show(mdl), false);
    }
    if (r == z3::unknown)
      return fail("solver returned unknown at depth " + std::to_string(t) + " (" +
                      solver.reason_unknown() + ")",
                  true);
    // No run of t steps breaks an invariant: every state reachable in t steps satisfies them, a
    // proven fact that is sound to assert for the deeper queries.
    run.constraints.push_back(property);
    report.unrolled = report.depth_checked = t;
  }

  // 3. The induction step, for k = 1 .. the depth unrolled + 1: k states satisfying every
  // invariant, linked by steps satisfying the step invariants, then one more step of the whole
  // table. The base case covers depths 0 .. k-1, which is what a step of length k needs. Length 1
  // is the one-step queries above; a longer one is asked only of the choices they left open (a
  // closed choice's query at length k contains the one-step query).
  if (report.unrolled < depth) {
    auto ti = Clock::now();
    std::string why = one_step_why;
    std::vector<int> unclosed;
    for (int c = 0; c < choices; ++c)
      if (!closed[static_cast<std::size_t>(c)]) unclosed.push_back(c);
    if (unclosed.empty()) report.induction_k = 1;
    for (int k = 2; k <= report.unrolled + 1 && report.induction_k == 0; ++k) {
      Run free(d, rows, node_rows, shape, "k" + std::to_string(k) + "s");
      free.constraints.push_back(spec::fleet_wellformed(d, free.state(0)));
      free.constraints.push_back(free.invariants(0));
      for (int i = 1; i < k; ++i) {
        free.extend();
        free.constraints.push_back(free.invariants(i) && free.step_invariants(i));
      }
      // One query per open choice of the last step.
      auto r = z3::unsat;
      for (std::size_t i = 0; i < unclosed.size() && r == z3::unsat; ++i) {
        Run last = free;
        last.extend(/*slot_order=*/false, /*only=*/unclosed[i]);
        auto solver = preprocessing_solver(ctx, timeout_ms);
        for (const auto& constraint : last.constraints) solver.add(constraint);
        solver.add(!(last.invariants(k) && last.step_invariants(k)));
        r = solver.check();
        if (r == z3::sat) {
          auto mdl = solver.get_model();
          why = "the induction step of length " + std::to_string(k) +
                " does not close (its states need not be reachable):\n" + last.show(mdl);
        } else if (r == z3::unknown) {
          why = "solver returned unknown in the induction step of length " + std::to_string(k) +
                " (" + solver.reason_unknown() + ")";
        }
      }
      if (r == z3::unsat) report.induction_k = k;
    }
    report.induction_seconds = report.one_step_seconds + seconds_since(ti);
    if (report.induction_k > 0) {
      report.all_depths = true;
      report.depth_checked = depth;
    } else {
      return fail("depth " + std::to_string(depth) + " not established: unrolled to " +
                      std::to_string(report.unrolled) + "; " + why,
                  true);
    }
  }
  report.seconds = seconds_since(t0);
  return report;
}

}  // namespace orrery::checker
