#include "checker/prover.h"

#include <chrono>
#include <sstream>

namespace orrery::checker {

namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

z3::expr all_state_invariants(const Z3Domain& d, const SymCluster& s) {
  auto ok = d.b(true);
  for (auto inv : spec::kAllInvariants) ok = ok && spec::state_invariant(d, inv, s);
  return ok;
}

// Runs one query; fills proved/unknown and, on a counterexample, the text `explain` makes of it.
template <class Explain>
void decide(z3::solver& solver, const z3::expr& negated, Obligation& ob, Explain&& explain) {
  auto t0 = Clock::now();
  solver.push();
  solver.add(negated);
  auto r = solver.check();
  ob.ms = ms_since(t0);
  if (r == z3::unsat) {
    ob.proved = true;
  } else if (r == z3::sat) {
    auto m = solver.get_model();
    ob.counterexample = explain(m);
  } else {
    ob.unknown = true;
    ob.counterexample = "solver returned unknown (" + solver.reason_unknown() + ")";
  }
  solver.pop();
}

// The acting job's own variables may change; nothing else may.
z3::expr frame(const Z3Domain& d, const SymCluster& pre, int j, const SymCluster& post) {
  auto same = d.b(true);
  constexpr auto fields = spec::job_fields<Z3Domain>();
  for (int i = 0; i < pre.num_jobs(); ++i) {
    if (i == j) continue;
    for (const auto& [name, member] : fields) same = same && (pre.jobs[i].*member == post.jobs[i].*member);
    for (int dev = 0; dev < pre.num_devices(); ++dev) same = same && pre.hold[i][dev] == post.hold[i][dev];
  }
  for (int dev = 0; dev < pre.num_devices(); ++dev)
    same = same && pre.dev_type[dev] == post.dev_type[dev] && pre.dev_mem[dev] == post.dev_mem[dev];
  for (int n = 0; n < pre.nodes; ++n)
    same = same && pre.node_devs[n] == post.node_devs[n] && pre.host_mem[n] == post.host_mem[n];
  return same && pre.reserve() == post.reserve();
}

}  // namespace

std::string obligation_name(const Obligation& ob) {
  switch (ob.kind) {
    case ObligationKind::kInvariant: return std::string(spec::inv_id(ob.inv));
    case ObligationKind::kFrame: return "FRAME";
    case ObligationKind::kDeterministic: return "DETERMINISTIC";
  }
  return "?";
}

ProofReport prove(const std::vector<SymRow>& rows, const Shape& shape, unsigned timeout_ms) {
  auto t0 = Clock::now();
  z3::context ctx;
  Z3Domain d{&ctx};
  ProofReport report;
  report.rows = static_cast<int>(rows.size());
  const int m = shape.nodes * shape.devices_per_node;

  z3::params params(ctx);
  params.set("timeout", timeout_ms);

  // Init => Inv.
  {
    auto s = make_cluster(d, shape, "s.");
    z3::solver solver(ctx);
    solver.set(params);
    solver.add(spec::init_state(d, s));
    for (auto inv : spec::kAllInvariants) {
      Obligation ob;
      ob.row_label = "Init";
      ob.inv = inv;
      decide(solver, !spec::state_invariant(d, inv, s), ob, [&](z3::model& mdl) {
        return "    initial state: " + show_cluster(mdl, s) + "    violates " +
               std::string(spec::inv_id(inv)) + "\n";
      });
      report.obligations.push_back(ob);
    }
  }

  // Every row, every invariant.
  auto pre = make_cluster(d, shape, "s.");
  auto p = make_params(d, m, "p.");
  auto pre_ok = spec::fleet_wellformed(d, pre) && all_state_invariants(d, pre);
  const int j = 0;
  for (const auto& row : rows) {
    z3::solver solver(ctx);
    solver.set(params);
    solver.add(pre_ok);
    solver.add(pre.jobs[j].state == d.k(static_cast<std::int64_t>(row.src)));
    if (row.guard) solver.add(spec::all_of(d, row.guard(d, pre, j, p)));
    auto post = fire(d, row, pre, j, p);
    for (auto inv : spec::kAllInvariants) {
      Obligation ob;
      ob.row = row.index;
      ob.row_label = row.label();
      ob.inv = inv;
      auto holds = spec::state_invariant(d, inv, post);
      if (spec::has_step_part(inv)) holds = holds && spec::step_invariant(d, inv, pre, j, p, post);
      decide(solver, !holds, ob, [&](z3::model& mdl) {
        std::ostringstream out;
        out << "    before: " << show_cluster(mdl, pre);
        out << "    event:  " << show_event(mdl, row, j, p) << "\n";
        out << "    after:  " << show_job(mdl, post, j) << "\n";
        out << "    violates " << spec::inv_id(inv) << " (" << spec::inv_summary(inv) << ")\n";
        return out.str();
      });
      report.obligations.push_back(ob);
    }
    Obligation fr;
    fr.kind = ObligationKind::kFrame;
    fr.row = row.index;
    fr.row_label = row.label();
    decide(solver, !frame(d, pre, j, post), fr, [&](z3::model& mdl) {
      std::ostringstream out;
      out << "    before: " << show_cluster(mdl, pre);
      out << "    event:  " << show_event(mdl, row, j, p) << "\n";
      out << "    after:  " << show_cluster(mdl, post);
      out << "    the effect changed another job or the fleet\n";
      return out.str();
    });
    report.obligations.push_back(fr);
  }

  // Rows sharing a source and an event: their guards must exclude each other.
  for (std::size_t a = 0; a < rows.size(); ++a) {
    for (std::size_t b = a + 1; b < rows.size(); ++b) {
      const auto& ra = rows[a];
      const auto& rb = rows[b];
      if (ra.src != rb.src || ra.event != rb.event) continue;
      z3::solver solver(ctx);
      solver.set(params);
      solver.add(pre_ok);
      solver.add(pre.jobs[j].state == d.k(static_cast<std::int64_t>(ra.src)));
      Obligation ob;
      ob.kind = ObligationKind::kDeterministic;
      ob.row = ra.index;
      ob.other_row = rb.index;
      ob.row_label = ra.label() + " and " + rb.label();
      auto ga = ra.guard ? spec::all_of(d, ra.guard(d, pre, j, p)) : d.b(true);
      auto gb = rb.guard ? spec::all_of(d, rb.guard(d, pre, j, p)) : d.b(true);
      decide(solver, ga && gb, ob, [&](z3::model& mdl) {
        std::ostringstream out;
        out << "    state:  " << show_cluster(mdl, pre);
        out << "    event:  " << spec::event_name(ra.event) << " job" << j
            << show_params(mdl, p, ra.event) << "\n";
        out << "    both rows #" << ra.index << " and #" << rb.index << " are enabled\n";
        return out.str();
      });
      report.obligations.push_back(ob);
    }
  }

  for (const auto& ob : report.obligations) (ob.proved ? report.proved : report.failed)++;
  report.seconds = ms_since(t0) / 1000.0;
  return report;
}

}  // namespace orrery::checker
