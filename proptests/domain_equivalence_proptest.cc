// The spec's two readings agree: every guard, effect and invariant of the lifecycle table gives
// the same result in the core's sparse domain (spec::Concrete: device sets as member lists, node
// sums over the nodes touched) and in a dense domain that mirrors the checker's (DenseDomain:
// device sets as a membership bit per device, node sums over every node). The checker proves the
// dense reading; the core runs the sparse one. Where they differ, the proof is not about the
// running code.
//
// Each case is a cluster state of one of the test fleets:
//   - reachable: a random sequence of decisions (proptests/generators.h, steered by the reference
//     model so that reservations, preemptions and resizes are common) committed through the real
//     SchedulerCore;
//   - or perturbed: such a state with a few fields overwritten (job variables, device owners and
//     reservations, counters, held sets), so that states no decision sequence reaches are tried
//     too.
// For every row of the lifecycle table, with the acting job mostly one in the row's source state
// and random parameters (selections of free, held, reserved and arbitrary devices, beneficiaries,
// steps, job specs), in both domains:
//   - every guard clause, by name and value;
//   - the effect, as the machine fires it (effect, then the row's target state): the whole state
//     after, converted back to the sparse form;
//   - every state invariant (and index_local, index_sums, fleet_wellformed, init_state) before and
//     after, and every step invariant;
// must be identical. One difference is expected and told apart: a dense gang_fits checks node
// capacity on every node, the sparse one on the nodes the job holds or selects devices on, so the
// two differ exactly when a node the job does not touch is already over capacity (a state INV-CAP
// excludes, so never reached; the checker proves rows only from states satisfying every
// invariant). Such cases are counted and printed, every other difference fails.
//
// Besides agreement, on states satisfying every invariant where the row applies (the acting job
// is in its source state) and its guard holds, the state after satisfies every invariant and every
// step invariant holds: the checker's inductive obligation, on concrete random states.
//
// ORRERY_EQUIVALENCE_STATES sets the number of states (default 3000; each is checked against every
// row with two parameter draws); RC_PARAMS is passed on to RapidCheck.
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "core/clock.h"
#include "core/fleet.h"
#include "core/job_machine.h"
#include "core/job_machine_table.h"
#include "core/row_desc.h"
#include "core/node_bootstrap.h"
#include "core/scheduler_core.h"
#include "proptests/cluster_diff.h"
#include "proptests/dense_domain.h"
#include "proptests/generators.h"
#include "proptests/reference_model.h"
#include "spec/effects.h"
#include "spec/guards.h"
#include "spec/invariants.h"

namespace orrery::proptest {
namespace {

using spec::JobState;
using Sparse = spec::Concrete;
using Dense = DenseDomain;
using DCluster = spec::ClusterVars<Dense>;
using SParams = spec::Params<Sparse>;
using DParams = spec::Params<Dense>;

constexpr std::string_view kCapClause = "node capacity and host memory for swapped-out workers";

// ---- Conversions ------------------------------------------------------------------------------

Dense::DevSet to_mask(const Sparse::DevSet& s, int m) {
  Dense::DevSet mask(static_cast<std::size_t>(m), 0);
  for (auto dev : s) mask[static_cast<std::size_t>(dev)] = 1;
  return mask;
}

Sparse::DevSet to_list(const Dense::DevSet& mask) {
  Sparse::DevSet s;
  for (std::size_t dev = 0; dev < mask.size(); ++dev)
    if (mask[dev]) s.push_back(static_cast<std::int32_t>(dev));
  return s;
}

// The same state with every device set converted by `set` (sparse <-> dense); every other field
// is copied as it is.
template <class To, class From, class ConvertSet>
spec::ClusterVars<To> with_sets(const spec::ClusterVars<From>& s, ConvertSet set) {
  spec::ClusterVars<To> t;
  t.group_first = s.group_first;
  t.group_node = s.group_node;
  t.nodes = s.nodes;
  t.group_type = s.group_type;
  t.group_mem = s.group_mem;
  t.node_devs = s.node_devs;
  t.host_mem = s.host_mem;
  t.premium_reserve = s.premium_reserve;
  t.owner = s.owner;
  t.owner_epoch = s.owner_epoch;
  t.resv_for = s.resv_for;
  t.resv_gen = s.resv_gen;
  t.node_state = s.node_state;
  t.node_held = s.node_held;
  t.node_swap = s.node_swap;
  t.premium_admitted = s.premium_admitted;
  constexpr auto from = spec::job_fields<From>();
  constexpr auto to = spec::job_fields<To>();
  for (const auto& job : s.jobs) {
    spec::JobVars<To> tj;
    for (std::size_t i = 0; i < from.size(); ++i) tj.*(to[i].second) = job.*(from[i].second);
    tj.held = set(job.held);
    tj.target = set(job.target);
    t.jobs.push_back(std::move(tj));
  }
  return t;
}

DCluster to_dense(const Cluster& s) {
  return with_sets<Dense>(s, [&](const Sparse::DevSet& set) {
    return to_mask(set, s.num_devices());
  });
}

Cluster to_sparse(const DCluster& d) {
  return with_sets<Sparse>(d, [](const Dense::DevSet& set) { return to_list(set); });
}

DParams to_dense(const SParams& p, int m) {
  DParams d{p.tier, p.dtype, p.world, p.min_dev, p.max_dev, p.mem,
            p.step, p.gpu_ms, p.splice, p.beneficiary, p.mode, p.op, to_mask(p.sel, m)};
  return d;
}

// ---- The rows, in both domains ----------------------------------------------------------------

const std::vector<core::RowDesc<Dense>>& dense_rows() {
  static const auto rows = core::rows_of<Dense, core::JobFront::transition_table>();
  return rows;
}

// ---- Statistics -------------------------------------------------------------------------------

struct Stats {
  std::uint64_t states = 0, perturbed = 0, perturbed_violating = 0;
  std::uint64_t cases = 0;            // (state, row, parameters)
  std::uint64_t clauses = 0, clauses_true = 0;
  std::uint64_t guards_held = 0;      // all clauses true (rows with a guard)
  std::uint64_t inductive = 0;        // invariant preservation checked (see the file comment)
  std::map<int, std::uint64_t> row_inductive;  // the same, per lifecycle row (1-based index)
  std::uint64_t invariant_values = 0, invariant_false = 0;  // state invariants compared
  std::uint64_t step_values = 0, step_false = 0;            // step invariants compared
  std::uint64_t reserved_states = 0;  // states with a live reservation
  std::uint64_t untouched_over_capacity = 0;  // the expected difference (file comment)
  std::string untouched_example;
};
Stats g_stats;

// ---- Random states ----------------------------------------------------------------------------

// A reachable state: a random decision sequence through the core, steered by the model.
Cluster reachable_state(int fleet) {
  core::ManualClock clock(1'000);
  auto parsed = core::Fleet::parse(test_fleets().at(fleet).to_text());
  RC_ASSERT(parsed.ok());
  auto made = core::SchedulerCore::create(std::move(*parsed), clock, nullptr);
  RC_ASSERT(made.ok());
  auto& sched = **made;
  RC_ASSERT(core::bring_up_all_nodes(sched).ok());
  RefModel m = RefModel::from_fleet(fleet, 1'000);
  const int steps = uniform(0, 120);
  for (int i = 0; i < steps; ++i) {
    const Step step = next_step(m);
    for (const auto& d : step.decisions(m)) {
      predict(m, d);
      (void)sched.commit(d);  // rejections are part of the walk; lifecycle_proptest checks them
    }
    // Reservations are short-lived (the beneficiary is soon placed, or gives them up): stop
    // early, some of the time, while one is live, so that many states have one.
    const bool live = std::any_of(m.reserved_for.begin(), m.reserved_for.end(),
                                  [](int r) { return r >= 0; });
    if (live && uniform(0, 3) == 0) break;
  }
  return sched.cluster();
}

// A value near `v` or small, for perturbing an integer field.
std::int64_t near(std::int64_t v, std::int64_t hi) {
  switch (uniform(0, 4)) {
    case 0: return v + 1;
    case 1: return v - 1;
    case 2: return -1;
    default: return uniform<std::int64_t>(-2, hi + 1);
  }
}

// Overwrites a few fields of s with values no decision sequence might produce. Values stay small
// (or at the spec's bounds), so no formula leaves int64 in either domain.
void perturb(Cluster& s) {
  const int m = s.num_devices();
  const int n = s.num_jobs();
  const int k = uniform(1, 5);
  for (int i = 0; i < k; ++i) {
    switch (uniform(0, 7)) {
      case 0:
      case 1: {  // a job variable
        if (n == 0) break;
        auto& job = s.jobs[static_cast<std::size_t>(uniform(0, n))];
        constexpr auto fields = spec::job_fields<Sparse>();
        const auto f = fields[static_cast<std::size_t>(uniform(0, static_cast<int>(fields.size())))];
        job.*(f.second) = near(job.*(f.second), std::max(12, n + 1));
        break;
      }
      case 2: {  // a held set (the device count following it or not) or a move's target set:
                 // one device in or out
        if (n == 0 || m == 0) break;
        auto& job = s.jobs[static_cast<std::size_t>(uniform(0, n))];
        const bool held = uniform(0, 3) != 0;
        auto& set = held ? job.held : job.target;
        const auto dev = static_cast<std::int32_t>(uniform(0, m));
        auto it = std::lower_bound(set.begin(), set.end(), dev);
        if (it != set.end() && *it == dev) set.erase(it);
        else set.insert(it, dev);
        if (held && uniform(0, 2) == 0) job.devices = static_cast<std::int64_t>(job.held.size());
        break;
      }
      case 3: {  // a device's owner or owner epoch
        if (m == 0) break;
        const auto dev = static_cast<std::size_t>(uniform(0, m));
        if (uniform(0, 2) == 0) s.owner[dev] = uniform<std::int64_t>(-2, n + 1);
        else s.owner_epoch[dev] = near(s.owner_epoch[dev], 6);
        break;
      }
      case 4: {  // a device's reservation
        if (m == 0) break;
        const auto dev = static_cast<std::size_t>(uniform(0, m));
        if (uniform(0, 2) == 0) s.resv_for[dev] = uniform<std::int64_t>(-2, n + 1);
        else s.resv_gen[dev] = near(s.resv_gen[dev], 6);
        break;
      }
      case 5: {  // a per-node counter or the node's lifecycle state
        const auto node = static_cast<std::size_t>(uniform(0, s.nodes));
        const int what = uniform(0, 3);
        if (what == 0) s.node_held[node] = near(s.node_held[node], 8);
        else if (what == 1) s.node_swap[node] = near(s.node_swap[node], 16);
        else s.node_state[node] = uniform<std::int64_t>(-1, spec::kNumNodeStates + 1);
        break;
      }
      default:  // the premium counter
        s.premium_admitted.front() = near(s.premium_admitted.front(), 8);
        break;
    }
  }
}

// Random parameters for job j in state s.
SParams random_params(const Cluster& s, int j) {
  const int m = s.num_devices();
  const int n = s.num_jobs();
  const bool real = j >= 0 && j < n;
  const auto* job = real ? &s.jobs[static_cast<std::size_t>(j)] : nullptr;
  SParams p{};
  // A job spec (for Submit): mostly small and near valid, sometimes at the spec's bounds.
  p.tier = uniform<std::int64_t>(-1, 4);
  p.dtype = uniform<std::int64_t>(-1, 3);
  p.world = uniform<std::int64_t>(-1, 17);
  p.min_dev = uniform<std::int64_t>(-1, 9);
  p.max_dev = uniform<std::int64_t>(p.min_dev, 12);
  p.mem = uniform<std::int64_t>(-1, 5);
  if (uniform(0, 10) == 0) p.world = spec::kMaxWorld + uniform(0, 2);
  if (uniform(0, 10) == 0) p.mem = spec::kMaxMemMib + uniform(0, 2);
  // Steps and service.
  const std::int64_t progress = real ? job->progress : 0;
  const std::int64_t ckpt = real ? job->ckpt : -1;
  const std::int64_t attained = real ? job->attained : 0;
  switch (uniform(0, 4)) {
    case 0: p.step = progress; break;
    case 1: p.step = progress + uniform(-1, 3); break;
    case 2: p.step = ckpt + uniform(-1, 2); break;
    default: p.step = uniform(-2, 20); break;
  }
  p.gpu_ms = uniform(0, 8) == 0 ? spec::kMaxAttained - attained + uniform(0, 2)
                                : uniform<std::int64_t>(-1, 400);
  // A beneficiary: a waiting job of the same device type that comes before the acting one
  // (spec::precedes: a higher tier, or the same with less service or, between the premium reserve
  // and spare jobs, its standing and lead; what a preemption or a shrink needs), any waiting job,
  // any job, or none.
  std::vector<int> waiting, ahead;
  for (int b = 0; b < n; ++b) {
    const auto& bj = s.jobs[static_cast<std::size_t>(b)];
    const auto st = static_cast<JobState>(bj.state);
    if (b == j || (st != JobState::kQueued && st != JobState::kSuspended)) continue;
    waiting.push_back(b);
    if (real && spec::precedes(spec::Concrete{}, bj, *job))
      ahead.push_back(b);
  }
  const int broll = uniform(0, 4);
  p.beneficiary = !ahead.empty() && broll < 2     ? *rc::gen::elementOf(ahead)
                  : !waiting.empty() && broll < 3 ? *rc::gen::elementOf(waiting)
                                                  : uniform<std::int64_t>(-2, n + 1);
  // An operator's decision (op 1) about a third of the time, sometimes an out-of-range value.
  p.op = uniform(0, 3) == 0 ? 1 : uniform(0, 9) == 0 ? uniform<std::int64_t>(-1, 3) : 0;
  // A selection: devices from the pools a planner would draw from (the job's own, free ones of
  // its type, ones reserved for it or for others), or anything.
  std::vector<int> own, free_typed, mine, others, all;
  for (int dev = 0; dev < m; ++dev) {
    all.push_back(dev);
    const bool owned = real && std::binary_search(job->held.begin(), job->held.end(), dev);
    if (owned) own.push_back(dev);
    if (s.owner[dev] != -1) continue;
    if (real && s.dev_type(dev) == job->dtype) free_typed.push_back(dev);
    if (s.resv_for[dev] == j) mine.push_back(dev);
    else if (s.resv_for[dev] >= 0) others.push_back(dev);
  }
  auto some = [&](const std::vector<int>& from) {
    std::vector<int> out;
    for (int dev : from)
      if (uniform(0, 2) == 0) out.push_back(dev);
    return out;
  };
  // A shrink to a device count the job's world splits over (else any subset of its devices).
  auto shrink = [&]() {
    std::vector<int> counts;
    for (int c = 1; real && c < static_cast<int>(own.size()); ++c)
      if (job->world % c == 0 && job->world / c <= spec::kSpliceLimit && job->min_dev <= c &&
          c <= job->max_dev)
        counts.push_back(c);
    if (counts.empty() || uniform(0, 2) == 0) return some(own);
    std::vector<int> out = own;
    const auto keep = static_cast<std::size_t>(*rc::gen::elementOf(counts));
    while (out.size() > keep) out.erase(out.begin() + uniform<std::ptrdiff_t>(0, out.size()));
    return out;
  };
  std::vector<int> sel;
  switch (uniform(0, 6)) {
    case 0: sel = some(free_typed); break;                   // a placement
    case 1: sel = own; for (int d : some(free_typed)) sel.push_back(d); break;  // growth
    case 2: sel = shrink(); break;                           // a shrink
    case 3: sel = some(mine); for (int d : some(others)) sel.push_back(d); break;  // reserved
    case 4: sel = some(free_typed); for (int d : some(others)) sel.push_back(d); break;
    default: sel = some(all); break;                         // anything
  }
  std::sort(sel.begin(), sel.end());
  sel.erase(std::unique(sel.begin(), sel.end()), sel.end());
  p.sel.assign(sel.begin(), sel.end());
  const std::int64_t world = real ? job->world : 0;
  p.splice = !sel.empty() && uniform(0, 4) != 0 ? world / static_cast<std::int64_t>(sel.size())
                                                : uniform<std::int64_t>(-1, 10);
  return p;
}

// ---- Comparison -------------------------------------------------------------------------------

std::string show_state(const Cluster& s) {
  std::ostringstream o;
  for (int j = 0; j < s.num_jobs(); ++j) {
    const auto& job = s.jobs[static_cast<std::size_t>(j)];
    o << "    job " << j << ":";
    constexpr auto fields = spec::job_fields<Sparse>();
    for (const auto& [name, member] : fields) o << " " << name << "=" << job.*member;
    o << " held=" << show_devset(job.held) << " target=" << show_devset(job.target) << "\n";
  }
  o << "    devices:";
  for (int d = 0; d < s.num_devices(); ++d)
    o << " " << d << "[node " << s.node_of(d) << " type " << s.dev_type(d) << " owner "
      << s.owner[d] << "@" << s.owner_epoch[d] << " resv " << s.resv_for[d] << "/" << s.resv_gen[d]
      << "]";
  o << "\n    nodes:";
  for (int n = 0; n < s.nodes; ++n)
    o << " " << n << "[held " << s.node_held[n] << "/" << s.node_devs[n] << " swap "
      << s.node_swap[n] << "/" << s.host_mem[n] << "]";
  o << "\n    premium_admitted " << s.premium_admitted.front() << " of reserve " << s.reserve()
    << "\n";
  return o.str();
}

std::string show_params(const SParams& p) {
  std::ostringstream o;
  o << "tier=" << p.tier << " dtype=" << p.dtype << " world=" << p.world << " min_dev="
    << p.min_dev << " max_dev=" << p.max_dev << " mem=" << p.mem << " step=" << p.step
    << " gpu_ms=" << p.gpu_ms << " splice=" << p.splice << " beneficiary=" << p.beneficiary
    << " sel=" << show_devset(p.sel);
  return o.str();
}

// A node the acting job neither holds nor selects a device on is over its capacity or host
// memory already: the sparse gang_fits does not look at it, the dense one does. The selection is
// the decision's, or for a move's cut (cut_and_target_fits) the target the job stored.
bool untouched_node_over_capacity(const Cluster& s, int j, const SParams& p, bool stored_target) {
  std::vector<char> touched(static_cast<std::size_t>(s.nodes), 0);
  const auto& job = s.jobs[static_cast<std::size_t>(j)];
  for (auto dev : job.held) touched[s.node_of(dev)] = 1;
  for (auto dev : stored_target ? job.target : p.sel) touched[s.node_of(dev)] = 1;
  for (int n = 0; n < s.nodes; ++n)
    if (!touched[n] && (s.node_held[n] > s.node_devs[n] || s.node_swap[n] > s.host_mem[n]))
      return true;
  return false;
}

// Every state-level formula, in both domains, on one state. Returns whether every invariant holds.
// `where` describes the state for a failure message (built only then).
bool compare_state_formulas(const Cluster& s, const DCluster& ds,
                            const std::function<std::string()>& where) {
  const Sparse sd;
  const Dense dd;
  auto same = [&](const char* what, bool a, bool b) {
    if (a != b)
      RC_FAIL(std::string(what) + " differs on " + where() + ": sparse " +
              (a ? "true" : "false") + ", dense " + (b ? "true" : "false") + "\n" + show_state(s));
  };
  bool all = true;
  for (auto inv : spec::kAllInvariants) {
    const bool a = spec::state_invariant(sd, inv, s);
    const bool b = spec::state_invariant(dd, inv, ds);
    if (a != b) same(std::string(spec::inv_id(inv)).c_str(), a, b);
    ++g_stats.invariant_values;
    if (!a) ++g_stats.invariant_false;
    all = all && a;
  }
  same("index_local", spec::index_local(sd, s), spec::index_local(dd, ds));
  same("index_sums", spec::index_sums(sd, s), spec::index_sums(dd, ds));
  same("fleet_wellformed", spec::fleet_wellformed(sd, s), spec::fleet_wellformed(dd, ds));
  same("init_state", spec::init_state(sd, s), spec::init_state(dd, ds));
  return all;
}

// One row on one (state, job, parameters) in both domains.
void check_row(const core::RowDesc<Sparse>& sr, const core::RowDesc<Dense>& dr, const Cluster& s,
               const DCluster& ds, bool pre_ok, int j, const SParams& p) {
  const Sparse sd;
  const Dense dd;
  const DParams dp = to_dense(p, s.num_devices());
  ++g_stats.cases;
  auto where = [&] {
    return sr.label() + " for job " + std::to_string(j) + " with " + show_params(p) +
           "\n  state before:\n" + show_state(s);
  };

  // Guard, clause by clause.
  bool guard = true;
  if (sr.guard) {
    const auto a = sr.guard(sd, s, j, p);
    const auto b = dr.guard(dd, ds, j, dp);
    if (a.size() != b.size())
      RC_FAIL("guard " + std::string(sr.guard_name) + " has " + std::to_string(a.size()) +
              " clauses sparse and " + std::to_string(b.size()) + " dense: " + where());
    for (std::size_t i = 0; i < a.size(); ++i) {
      if (a[i].name != b[i].name)
        RC_FAIL("guard clause " + std::to_string(i) + " is '" + std::string(a[i].name) +
                "' sparse and '" + std::string(b[i].name) + "' dense: " + where());
      ++g_stats.clauses;
      if (a[i].holds) ++g_stats.clauses_true;
      guard = guard && a[i].holds;
      if (a[i].holds == b[i].holds) continue;
      if (a[i].name == kCapClause && a[i].holds && !b[i].holds &&
          untouched_node_over_capacity(s, j, p, sr.guard_name == spec::GuardMove::name)) {
        if (g_stats.untouched_over_capacity++ == 0)
          g_stats.untouched_example = where();
        continue;
      }
      RC_FAIL("guard " + std::string(sr.guard_name) + " clause '" + std::string(a[i].name) +
              "' is " + (a[i].holds ? "true" : "false") + " sparse but " +
              (b[i].holds ? "true" : "false") + " dense: " + where());
    }
    if (guard) ++g_stats.guards_held;
  }

  // The effect as the machine fires it: the row's effect, then its target state.
  Cluster post = s;
  DCluster dpost = ds;
  if (sr.effect) {
    sr.effect(sd, post, j, p);
    dr.effect(dd, dpost, j, dp);
  }
  post.jobs[static_cast<std::size_t>(j)].state = static_cast<std::int64_t>(sr.dst);
  dpost.jobs[static_cast<std::size_t>(j)].state = static_cast<std::int64_t>(dr.dst);
  if (auto diff = cluster_diff(post, to_sparse(dpost)); !diff.empty())
    RC_FAIL("effect " + std::string(sr.action_name) + " leaves different states (sparse vs " +
            "dense):\n" + diff + "  for " + where());

  // Invariants after, and the step invariants.
  const bool post_ok =
      compare_state_formulas(post, dpost, [&] { return "the state after " + where(); });
  bool step_ok = true;
  for (auto inv : spec::kAllInvariants) {
    if (!spec::has_step_part(inv)) continue;
    const bool a = spec::step_invariant(sd, inv, s, j, p, post);
    const bool b = spec::step_invariant(dd, inv, ds, j, dp, dpost);
    ++g_stats.step_values;
    if (!a) ++g_stats.step_false;
    if (a != b)
      RC_FAIL(std::string(spec::inv_id(inv)) + " step part is " + (a ? "true" : "false") +
              " sparse but " + (b ? "true" : "false") + " dense: " + where());
    step_ok = step_ok && a;
  }

  // The checker's obligation on this concrete case: Inv /\ Guard /\ Effect => Inv' and Step.
  if (pre_ok && guard && s.jobs[static_cast<std::size_t>(j)].state ==
                             static_cast<std::int64_t>(sr.src)) {
    ++g_stats.inductive;
    ++g_stats.row_inductive[sr.index];
    if (!post_ok || !step_ok) {
      std::string broken;
      for (auto inv : spec::kAllInvariants) {
        if (!spec::state_invariant(sd, inv, post)) broken += " " + std::string(spec::inv_id(inv));
        if (spec::has_step_part(inv) && !spec::step_invariant(sd, inv, s, j, p, post))
          broken += " " + std::string(spec::inv_id(inv)) + "(step)";
      }
      RC_FAIL("from a state satisfying every invariant, with its guard true, " + sr.label() +
              " breaks" + broken + ": " + where() + "  state after:\n" + show_state(post));
    }
  }
}

// A job to act for row r: mostly one in the row's source state, else any; Submit acts on a fresh
// slot in state New (as the core adds one) or, rarely, on an existing job.
int pick_actor(const Cluster& s, JobState src) {
  std::vector<int> in_src;
  for (int j = 0; j < s.num_jobs(); ++j)
    if (s.jobs[static_cast<std::size_t>(j)].state == static_cast<std::int64_t>(src))
      in_src.push_back(j);
  if (!in_src.empty() && uniform(0, 5) != 0) return *rc::gen::elementOf(in_src);
  return s.num_jobs() > 0 ? uniform(0, s.num_jobs()) : -1;
}

}  // namespace

TEST(DomainEquivalence, RowTablesAgree) {
  const auto& sparse = core::job_rows();
  const auto& dense = dense_rows();
  ASSERT_EQ(sparse.size(), dense.size());
  for (std::size_t i = 0; i < sparse.size(); ++i) {
    EXPECT_EQ(sparse[i].label(), dense[i].label());
    EXPECT_EQ(sparse[i].guard != nullptr, dense[i].guard != nullptr) << sparse[i].label();
    EXPECT_EQ(sparse[i].effect != nullptr, dense[i].effect != nullptr) << sparse[i].label();
  }
}

TEST(DomainEquivalence, DenseDomainBasics) {
  const Dense d;
  const auto empty = d.no_devices(5);
  EXPECT_EQ(empty.size(), 5u);
  EXPECT_EQ(d.size(empty), 0);
  Dense::DevSet s = {0, 1, 0, 1, 1};
  EXPECT_EQ(d.size(s), 3);
  EXPECT_TRUE(d.contains(s, 1));
  EXPECT_FALSE(d.contains(s, 2));
  int visited = 0, members = 0;
  d.members(s, [&](int, bool in) {
    ++visited;
    members += in ? 1 : 0;
  });
  EXPECT_EQ(visited, 5);  // every device, unlike spec::Concrete
  EXPECT_EQ(members, 3);
  auto sums = d.node_sums(3);
  sums.add(1, 2, 7);
  int nodes = 0;
  sums.for_each([&](int n, std::int64_t devs, std::int64_t mem) {
    ++nodes;
    EXPECT_EQ(devs, n == 1 ? 2 : 0);
    EXPECT_EQ(mem, n == 1 ? 7 : 0);
  });
  EXPECT_EQ(nodes, 3);  // every node, unlike spec::Concrete
  EXPECT_EQ(d.select(3, 1, [](int i) { return std::int64_t{10} * i; }, -1), 10);
  EXPECT_EQ(d.select(3, 3, [](int i) { return std::int64_t{10} * i; }, -1), -1);
}

RC_GTEST_PROP(DomainEquivalence, SparseAndDenseAgreeOnEveryRow, ()) {
  const int fleet = uniform(0, static_cast<int>(test_fleets().size()));
  Cluster s = reachable_state(fleet);
  ++g_stats.states;
  const bool perturbed = uniform(0, 3) == 0;
  if (perturbed) {
    perturb(s);
    ++g_stats.perturbed;
  }
  for (int dev = 0; dev < s.num_devices(); ++dev)
    if (live_reservation(s, dev) >= 0) {
      ++g_stats.reserved_states;
      break;
    }
  const DCluster ds = to_dense(s);
  const bool pre_ok = compare_state_formulas(s, ds, [] { return std::string("the state"); });
  if (!pre_ok && perturbed) ++g_stats.perturbed_violating;

  // Submit acts on a new slot, which the core appends before evaluating the row.
  Cluster with_slot = s;
  const int slot = spec::add_job_slot(Sparse{}, with_slot);
  const DCluster ds_slot = to_dense(with_slot);
  const bool slot_ok = compare_state_formulas(
      with_slot, ds_slot, [] { return std::string("the state with a new job slot"); });

  const auto& sparse = core::job_rows();
  const auto& dense = dense_rows();
  for (std::size_t r = 0; r < sparse.size(); ++r) {
    for (int draw = 0; draw < 2; ++draw) {
      if (sparse[r].event == spec::EventKind::kSubmit && uniform(0, 4) != 0) {
        check_row(sparse[r], dense[r], with_slot, ds_slot, slot_ok, slot,
                  random_params(with_slot, slot));
        continue;
      }
      const int j = pick_actor(s, sparse[r].src);
      if (j < 0) continue;  // no job yet: only Submit applies
      // The rows of a job out of retries need one: reachable states seldom have one in a cut or a
      // restore, and no invariant constrains the failure count, so half of the time the acting
      // job is given its last.
      // Likewise the rows of a job at the platform cap.
      const bool own = sparse[r].guard_name == spec::GuardExhausted::name;
      const bool platform = sparse[r].guard_name == spec::GuardFaultsExhausted::name;
      auto& jv = s.jobs[static_cast<std::size_t>(j)];
      if (((own && jv.failures < spec::kMaxRetries) ||
           (platform && jv.faults < spec::kMaxPlatformFaults)) &&
          uniform(0, 2) == 0) {
        Cluster worn = s;
        auto& wj = worn.jobs[static_cast<std::size_t>(j)];
        if (own) wj.failures = spec::kMaxRetries + uniform(0, 2);
        else wj.faults = spec::kMaxPlatformFaults + uniform(0, 2);
        const DCluster dworn = to_dense(worn);
        const bool worn_ok = compare_state_formulas(
            worn, dworn, [] { return std::string("the state with a job out of retries"); });
        check_row(sparse[r], dense[r], worn, dworn, worn_ok, j, random_params(worn, j));
        continue;
      }
      check_row(sparse[r], dense[r], s, ds, pre_ok, j, random_params(s, j));
    }
  }
}

void print_stats(std::ostream& os) {
  const Stats& s = g_stats;
  os << "\n=== domain_equivalence_proptest: " << s.states << " states (" << s.perturbed
     << " perturbed, " << s.perturbed_violating << " of them breaking an invariant; "
     << s.reserved_states << " with a live reservation), " << s.cases
     << " (state, row, parameters) cases ===\n"
     << "guard clauses compared: " << s.clauses << " (" << s.clauses_true << " true); guards held: "
     << s.guards_held << "\n"
     << "state invariants compared: " << s.invariant_values << " (" << s.invariant_false
     << " false); step invariants compared: " << s.step_values << " (" << s.step_false
     << " false)\n"
     << "invariant preservation checked (Inv, guard true, job in the row's source state): "
     << s.inductive << "\n"
     << "expected difference, '" << kCapClause
     << "' true sparse and false dense because a node the job does not touch is over capacity: "
     << s.untouched_over_capacity << " cases\n";
  if (!s.untouched_example.empty())
    os << "  first such case: " << s.untouched_example;
  std::uint64_t least = ~std::uint64_t{0};
  for (const auto& r : core::job_rows()) {
    auto it = s.row_inductive.find(r.index);
    const std::uint64_t n = it == s.row_inductive.end() ? 0 : it->second;
    least = std::min(least, n);
    if (n == 0) os << "  invariant preservation never checked for " << r.label() << "\n";
  }
  os << "invariant preservation checked for every row at least " << least << " times\n";
}

}  // namespace orrery::proptest

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  const auto states = orrery::proptest::count_from_env("ORRERY_EQUIVALENCE_STATES", 3000);
  if (!states) return 2;
  // RapidCheck reads RC_PARAMS once, on first use: complete it before any property runs.
  std::string params = std::getenv("RC_PARAMS") ? std::getenv("RC_PARAMS") : "";
  if (params.find("max_success") == std::string::npos)
    params += " max_success=" + std::to_string(*states);
  setenv("RC_PARAMS", params.c_str(), 1);

  int rc = RUN_ALL_TESTS();
  orrery::proptest::print_stats(std::cout);
  return rc;
}
