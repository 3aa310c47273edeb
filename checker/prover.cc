#include "checker/prover.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <functional>
#include <sstream>
#include <thread>

#include "checker/lifecycle_rows.h"

namespace orrery::checker {

namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

// Every invariant without the sums of INV-INDEX and INV-EXCL's count of holders (implied by the
// per-element part of INV-INDEX): what a local obligation may assume.
z3::expr local_invariants(const Z3Domain& d, const SymCluster& s) {
  auto ok = spec::fleet_wellformed(d, s) && spec::index_local(d, s);
  for (auto inv : spec::kAllInvariants)
    if (inv != spec::Inv::kIndex && inv != spec::Inv::kExcl)
      ok = ok && spec::state_invariant(d, inv, s);
  return ok;
}

// Runs one query; fills proved/unknown and, on a counterexample, the text `explain` makes of it.
template <class Explain>
void decide(z3::solver& solver, const z3::expr& negated, Obligation& ob, Explain&& explain) {
  auto t0 = Clock::now();
  solver.push();
  solver.add(negated);
  auto r = solver.check();
  ob.ms += ms_since(t0);
  ob.proved = ob.unknown = false;
  ob.counterexample.clear();
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

// The acting job's own variables, held set and target may change, and the per-device state of the
// devices the row names (those the job holds or targets, and those selected) and the counters of
// their nodes; nothing else may.
z3::expr frame(const Z3Domain& d, const SymCluster& pre, int j, const SymParams& p,
               const spec::EventKind event, const SymCluster& post) {
  auto same = d.b(true);
  constexpr auto fields = spec::job_fields<Z3Domain>();
  for (int i = 0; i < pre.num_jobs(); ++i) {
    if (i == j) continue;
    for (const auto& [name, member] : fields)
      same = same && (pre.jobs[i].*member == post.jobs[i].*member);
    for (int dev = 0; dev < pre.num_devices(); ++dev)
      same = same && pre.jobs[i].held[dev] == post.jobs[i].held[dev] &&
             pre.jobs[i].target[dev] == post.jobs[i].target[dev];
  }
  std::vector<z3::expr> node_named(static_cast<std::size_t>(pre.nodes), d.b(false));
  for (int dev = 0; dev < pre.num_devices(); ++dev) {
    auto named = pre.jobs[j].held[dev] || pre.jobs[j].target[dev];
    if (spec::selects_devices(event)) named = named || p.sel[dev];
    node_named[pre.node_of(dev)] = node_named[pre.node_of(dev)] || named;
    same = same && z3::implies(!named, pre.owner[dev] == post.owner[dev] &&
                                           pre.owner_epoch[dev] == post.owner_epoch[dev] &&
                                           pre.resv_for[dev] == post.resv_for[dev] &&
                                           pre.resv_gen[dev] == post.resv_gen[dev]);
  }
  for (int g = 0; g < pre.num_groups(); ++g)
    same = same && pre.group_type[g] == post.group_type[g] && pre.group_mem[g] == post.group_mem[g];
  for (int n = 0; n < pre.nodes; ++n)
    same = same && pre.node_devs[n] == post.node_devs[n] && pre.host_mem[n] == post.host_mem[n] &&
           pre.node_state[n] == post.node_state[n] &&
           z3::implies(!node_named[n], pre.node_held[n] == post.node_held[n] &&
                                           pre.node_swap[n] == post.node_swap[n]);
  return same && pre.reserve() == post.reserve();
}

// A node row changes node n's state and nothing else: no job, device, counter or fleet value.
z3::expr node_frame(const Z3Domain& d, SymCluster& pre, int n, SymCluster& post) {
  auto same = d.b(true);
  auto a = state_refs(pre);
  auto b = state_refs(post);
  const z3::expr* mine = &post.node_state[n];
  for (std::size_t v = 0; v < a.size(); ++v)
    if (b[v] != mine) same = same && *a[v] == *b[v];
  for (int g = 0; g < pre.num_groups(); ++g)
    same = same && pre.group_type[g] == post.group_type[g] && pre.group_mem[g] == post.group_mem[g];
  for (int m = 0; m < pre.nodes; ++m)
    same = same && pre.node_devs[m] == post.node_devs[m] && pre.host_mem[m] == post.host_mem[m];
  return same && pre.reserve() == post.reserve();
}

// The ENABLED obligation of a row: a satisfiable query is the good outcome.
Obligation enabled_obligation(z3::solver& solver, int row, const std::string& label) {
  Obligation en;
  en.kind = ObligationKind::kEnabled;
  en.row = row;
  en.row_label = label;
  auto t0 = Clock::now();
  auto r = solver.check();
  en.ms = ms_since(t0);
  en.proved = r == z3::sat;
  en.local = en.proved;
  en.unknown = r == z3::unknown;
  if (!en.proved)
    en.counterexample = r == z3::unknown
                            ? "solver returned unknown (" + solver.reason_unknown() + ")"
                            : "    the row can never fire on this shape (the invariants, its "
                              "source state and its guard are unsatisfiable together): its "
                              "other obligations hold vacuously\n";
  return en;
}

// Invariant `inv` after a row (`holds`: its state part after, and its step part), asked from the
// local assumptions first; INV-INDEX's sums, and anything the local assumptions do not give, with
// the sums before (see prover.h).
template <class Explain>
Obligation invariant_obligation(const Z3Domain& d, z3::solver& solver, spec::Inv inv, int row,
                                const std::string& label, const z3::expr& holds,
                                const SymCluster& post, const z3::expr& sums_pre,
                                Explain&& explain_for) {
  Obligation ob;
  ob.row = row;
  ob.row_label = label;
  ob.inv = inv;
  auto violates = "violates " + std::string(spec::inv_id(inv)) + " (" +
                  std::string(spec::inv_summary(inv)) + ")";
  decide(solver, !holds, ob, explain_for(violates));
  ob.local = ob.proved;
  if (inv == spec::Inv::kIndex && ob.proved) {
    // The sums: by their nature they need the sums before.
    solver.push();
    solver.add(sums_pre);
    decide(solver, !spec::index_sums(d, post), ob, explain_for(violates + ", its sums"));
    ob.local = ob.proved;  // the per-element part locally, the sums by DELTA (see above)
    solver.pop();
  } else if (!ob.proved && !ob.unknown) {
    // Not provable from the local assumptions: with the whole invariant before, it holds (if at
    // all) for the bounded shape only.
    solver.push();
    solver.add(sums_pre);
    decide(solver, !holds, ob, explain_for(violates));
    solver.pop();
  }
  return ob;
}

}  // namespace

std::string obligation_name(const Obligation& ob) {
  switch (ob.kind) {
    case ObligationKind::kInvariant: return std::string(spec::inv_id(ob.inv));
    case ObligationKind::kFrame: return "FRAME";
    case ObligationKind::kDelta: return "DELTA";
    case ObligationKind::kEnabled: return "ENABLED";
    case ObligationKind::kDeterministic: return "DETERMINISTIC";
    case ObligationKind::kIdOrder: return "ORDER";
  }
  return "?";
}

void add_obligation(ProofReport& r, Obligation ob) {
  (ob.proved ? r.proved : r.failed)++;
  r.seconds += ob.ms / 1000.0;
  r.obligations.push_back(std::move(ob));
}

bool unbounded(const ProofReport& r, spec::Inv inv) {
  // The argument needs every FRAME and DELTA obligation (and, simply, everything else) proved, and
  // each of this invariant's obligations proved from the local assumptions.
  for (const auto& ob : r.obligations) {
    if (!ob.proved) return false;
    if (ob.kind == ObligationKind::kInvariant && ob.inv == inv && !ob.local) return false;
  }
  return true;
}

ProofReport prove(const std::vector<SymRow>& rows, const Shape& shape, unsigned timeout_ms) {
  return prove(rows, node_lifecycle_rows(), shape, timeout_ms);
}

namespace {

// One prover's solver context and symbolic state. Z3 contexts are not shared between threads: each
// thread of prove() has its own, with the same shape and names, so every obligation is asked the
// same question whichever thread asks it.
class RowProver {
 public:
  RowProver(const Shape& shape, unsigned timeout_ms)
      : d_{&ctx_}, params_(ctx_), pre_(make_cluster(d_, shape, "s.")),
        p_(make_params(d_, pre_.num_devices(), "p.")), local_pre_(local_invariants(d_, pre_)),
        sums_pre_(spec::index_sums(d_, pre_)) {
    params_.set("timeout", timeout_ms);
  }

  // Init => Inv.
  void init(const Shape& shape, std::vector<Obligation>& out) {
    auto s = make_cluster(d_, shape, "s.");
    z3::solver solver(ctx_);
    solver.set(params_);
    solver.add(spec::init_state(d_, s));
    for (auto inv : spec::kAllInvariants) {
      Obligation ob;
      ob.row_label = "Init";
      ob.inv = inv;
      decide(solver, !spec::state_invariant(d_, inv, s), ob, [&](z3::model& mdl) {
        return "    initial state: " + show_cluster(mdl, s) + "    violates " +
               std::string(spec::inv_id(inv)) + "\n";
      });
      ob.local = ob.proved;  // the initial state is given whole: nothing to assume
      out.push_back(ob);
    }
  }

  // A job row, job 0 acting: every invariant, FRAME, DELTA, ENABLED.
  void job_row(const SymRow& row, std::vector<Obligation>& out) {
    const auto& d = d_;
    const auto& pre = pre_;
    const auto& p = p_;
    z3::solver solver(ctx_);
    solver.set(params_);
    solver.add(local_pre_);
    solver.add(pre.jobs[kJ].state == d.k(static_cast<std::int64_t>(row.src)));
    if (row.guard) solver.add(spec::all_of(d, row.guard(d, pre, kJ, p)));
    auto post = fire(d, row, pre, kJ, p);
    auto explain_for = [&](const std::string& what) {
      return [&, what](z3::model& mdl) {
        std::ostringstream o;
        o << "    before: " << show_cluster(mdl, pre);
        o << "    event:  " << show_event(mdl, row, kJ, p) << "\n";
        o << "    after:  " << show_cluster(mdl, post);
        o << "    " << what << "\n";
        return o.str();
      };
    };
    // The row can fire at all: its other obligations are not vacuous.
    auto en = enabled_obligation(solver, row.index, row.label());
    for (auto inv : spec::kAllInvariants) {
      auto holds = inv == spec::Inv::kIndex ? spec::index_local(d, post)
                                            : spec::state_invariant(d, inv, post);
      if (spec::has_step_part(inv)) holds = holds && spec::step_invariant(d, inv, pre, kJ, p, post);
      out.push_back(invariant_obligation(d, solver, inv, row.index, row.label(), holds, post,
                                         sums_pre_, explain_for));
    }
    Obligation fr;
    fr.kind = ObligationKind::kFrame;
    fr.row = row.index;
    fr.row_label = row.label();
    decide(solver, !frame(d, pre, kJ, p, row.event, post), fr,
           explain_for("the effect changed another job, the fleet, or a device the row does not "
                       "name"));
    fr.local = fr.proved;
    out.push_back(fr);
    Obligation de;
    de.kind = ObligationKind::kDelta;
    de.row = row.index;
    de.row_label = row.label();
    decide(solver, !spec::counters_follow_shares(d, pre, kJ, post), de,
           explain_for("a counter did not change by exactly the acting job's change of share"));
    de.local = de.proved;
    out.push_back(de);
    out.push_back(en);
  }

  // A node row, node 0 acting: every invariant, FRAME and ENABLED.
  void node_row(const NodeSymRow& row, int base, std::vector<Obligation>& out) {
    const auto& d = d_;
    auto& pre = pre_;
    const int index = base + row.index;
    z3::solver solver(ctx_);
    solver.set(params_);
    solver.add(local_pre_);
    solver.add(pre.node_state[kN] == d.k(static_cast<std::int64_t>(row.src)));
    if (row.guard) solver.add(spec::all_of(d, row.guard(d, pre, kN)));
    auto post = fire_node(d, row, pre, kN);
    auto explain_for = [&](const std::string& what) {
      return [&, what](z3::model& mdl) {
        std::ostringstream o;
        o << "    before: " << show_cluster(mdl, pre);
        o << "    event:  " << show_node_event(row, kN) << "\n";
        o << "    after:  " << show_cluster(mdl, post);
        o << "    " << what << "\n";
        return o.str();
      };
    };
    auto en = enabled_obligation(solver, index, row.label());
    for (auto inv : spec::kAllInvariants) {
      // No job acts: the step parts are asked with job 0 in the acting job's place, which a node
      // row leaves unchanged like every other job.
      auto holds = inv == spec::Inv::kIndex ? spec::index_local(d, post)
                                            : spec::state_invariant(d, inv, post);
      if (spec::has_step_part(inv)) holds = holds && spec::step_invariant(d, inv, pre, 0, p_, post);
      out.push_back(invariant_obligation(d, solver, inv, index, row.label(), holds, post, sums_pre_,
                                         explain_for));
    }
    Obligation fr;
    fr.kind = ObligationKind::kFrame;
    fr.row = index;
    fr.row_label = row.label();
    decide(solver, !node_frame(d, pre, kN, post), fr,
           explain_for("the node row changed something besides the node's state"));
    fr.local = fr.proved;
    out.push_back(fr);
    out.push_back(en);
  }

  // Two node rows sharing (source, event): their guards exclude each other.
  void node_pair(const NodeSymRow& ra, const NodeSymRow& rb, int base, std::vector<Obligation>& out) {
    const auto& d = d_;
    z3::solver solver(ctx_);
    solver.set(params_);
    solver.add(local_pre_);
    solver.add(pre_.node_state[kN] == d.k(static_cast<std::int64_t>(ra.src)));
    Obligation ob;
    ob.kind = ObligationKind::kDeterministic;
    ob.row = base + ra.index;
    ob.other_row = base + rb.index;
    ob.row_label = ra.label() + " and " + rb.label();
    auto ga = ra.guard ? spec::all_of(d, ra.guard(d, pre_, kN)) : d.b(true);
    auto gb = rb.guard ? spec::all_of(d, rb.guard(d, pre_, kN)) : d.b(true);
    decide(solver, ga && gb, ob, [&](z3::model& mdl) {
      return "    state:  " + show_cluster(mdl, pre_) + "    both node rows are enabled\n";
    });
    ob.local = ob.proved;
    out.push_back(ob);
  }

  // Two job rows sharing (source, event): their guards exclude each other.
  void job_pair(const SymRow& ra, const SymRow& rb, std::vector<Obligation>& out) {
    const auto& d = d_;
    z3::solver solver(ctx_);
    solver.set(params_);
    solver.add(local_pre_);
    solver.add(pre_.jobs[kJ].state == d.k(static_cast<std::int64_t>(ra.src)));
    Obligation ob;
    ob.kind = ObligationKind::kDeterministic;
    ob.row = ra.index;
    ob.other_row = rb.index;
    ob.row_label = ra.label() + " and " + rb.label();
    auto ga = ra.guard ? spec::all_of(d, ra.guard(d, pre_, kJ, p_)) : d.b(true);
    auto gb = rb.guard ? spec::all_of(d, rb.guard(d, pre_, kJ, p_)) : d.b(true);
    decide(solver, ga && gb, ob, [&](z3::model& mdl) {
      std::ostringstream o;
      o << "    state:  " << show_cluster(mdl, pre_);
      o << "    event:  " << spec::event_name(ra.event) << " job" << kJ
        << show_params(mdl, p_, ra.event) << "\n";
      o << "    both rows #" << ra.index << " and #" << rb.index << " are enabled\n";
      return o.str();
    });
    ob.local = ob.proved;
    out.push_back(ob);
  }

 private:
  // The acting job and node. Job 0 stands for any job: ORDER (checker/id_order.h) checks that no
  // guard, effect or invariant orders job ids, which is what makes that so.
  static constexpr int kJ = 0;
  static constexpr int kN = 0;
  z3::context ctx_;
  Z3Domain d_;
  z3::params params_;
  SymCluster pre_;
  SymParams p_;
  z3::expr local_pre_;
  z3::expr sums_pre_;
};

// How many threads prove (each with its own solver context): ORRERY_CHECK_THREADS, else the
// machine's cores, at most 8.
unsigned prover_threads() {
  if (const char* e = std::getenv("ORRERY_CHECK_THREADS")) {
    char* end = nullptr;
    const long n = std::strtol(e, &end, 10);
    if (end != e && *end == '\0' && n >= 1 && n <= 64) return static_cast<unsigned>(n);
  }
  const unsigned hw = std::thread::hardware_concurrency();
  return std::clamp(hw, 1u, 8u);
}

}  // namespace

ProofReport prove(const std::vector<SymRow>& rows, const std::vector<NodeSymRow>& node_rows,
                  const Shape& shape, unsigned timeout_ms) {
  auto t0 = Clock::now();
  ProofReport report;
  report.rows = static_cast<int>(rows.size());
  report.node_rows = static_cast<int>(node_rows.size());

  // The obligations as tasks, in report order: Init; every job row; every node row; the node rows'
  // and the job rows' determinism pairs. Each task is proved by one thread; the report keeps
  // task order whatever thread proved what.
  using Task = std::function<void(RowProver&, std::vector<Obligation>&)>;
  std::vector<Task> tasks;
  tasks.emplace_back([&](RowProver& pr, std::vector<Obligation>& out) { pr.init(shape, out); });
  for (const auto& row : rows)
    tasks.emplace_back([&row](RowProver& pr, std::vector<Obligation>& out) { pr.job_row(row, out); });
  const int base = static_cast<int>(rows.size());
  for (const auto& row : node_rows)
    tasks.emplace_back(
        [&row, base](RowProver& pr, std::vector<Obligation>& out) { pr.node_row(row, base, out); });
  for (std::size_t a = 0; a < node_rows.size(); ++a)
    for (std::size_t b = a + 1; b < node_rows.size(); ++b)
      if (node_rows[a].src == node_rows[b].src && node_rows[a].event == node_rows[b].event)
        tasks.emplace_back([&ra = node_rows[a], &rb = node_rows[b], base](
                               RowProver& pr, std::vector<Obligation>& out) {
          pr.node_pair(ra, rb, base, out);
        });
  for (std::size_t a = 0; a < rows.size(); ++a)
    for (std::size_t b = a + 1; b < rows.size(); ++b)
      if (rows[a].src == rows[b].src && rows[a].event == rows[b].event)
        tasks.emplace_back([&ra = rows[a], &rb = rows[b]](RowProver& pr, std::vector<Obligation>& out) {
          pr.job_pair(ra, rb, out);
        });

  std::vector<std::vector<Obligation>> results(tasks.size());
  std::atomic<std::size_t> next{0};
  auto work = [&] {
    RowProver pr(shape, timeout_ms);
    for (std::size_t t = next++; t < tasks.size(); t = next++) tasks[t](pr, results[t]);
  };
  const unsigned threads = std::min<unsigned>(prover_threads(), static_cast<unsigned>(tasks.size()));
  std::vector<std::thread> pool;
  for (unsigned i = 1; i < threads; ++i) pool.emplace_back(work);
  work();
  for (auto& th : pool) th.join();
  for (auto& r : results)
    for (auto& ob : r) report.obligations.push_back(std::move(ob));

  for (const auto& ob : report.obligations) (ob.proved ? report.proved : report.failed)++;
  report.seconds = ms_since(t0) / 1000.0;
  return report;
}

}  // namespace orrery::checker
