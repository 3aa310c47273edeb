// The job and cluster model the spec reasons about, and the quantities derived from it.
//
// A cluster is a fixed set of devices, each on one node, and a set of job slots. The state keeps
// what the guards need and nothing that grows with jobs x devices:
//   - per device: its owner (a job, or -1), the owner's epoch, and a reservation (a job, or -1,
//     with the reservation generation it was made under);
//   - per job: its variables and the set of devices it holds;
//   - per node: devices held and host memory used by swapped-out workers; per fleet: admitted
//     premium demand. These counters are updated by every effect by the acting job's own delta;
//     INV-INDEX ties each to the sum it stands for.
// Resources are exact integers: device counts, MiB, and GPU-milliseconds. The *shape* (how many
// jobs, devices and nodes, which device is on which node) is plain C++ structure; every value is
// of the domain's type, so the checker makes them symbolic.
#pragma once

#include <algorithm>
#include <array>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "spec/domain.h"
#include "spec/vocabulary.h"

namespace orrery::spec {

template <class D>
struct JobVars {
  using Int = typename D::Int;
  Int state;      // JobState
  Int tier;       // Tier
  Int dtype;      // device type id the job needs
  Int world;      // W: number of workers, fixed at submission
  Int min_dev;    // elastic range of device counts
  Int max_dev;
  Int mem;        // device memory per worker, MiB (what a swapped-out worker needs in host memory)
  Int devices;    // devices held now (0 when none)
  Int splice;     // workers per device now (0 when no devices)
  Int epoch;      // incarnation number; every (re)start takes a larger one
  Int progress;   // committed training step
  Int ckpt;       // step of the last committed checkpoint, -1 when none
  Int failures;   // the job's own failures so far (its program crashed or exited non-zero)
  Int attained;   // GPU-milliseconds of service received (fair share within a tier)
  Int ben;        // while Checkpointing for a preemption or Resizing to fewer devices: the job it
                  // is for (else -1)
  Int resv_gen;   // reservation generation: reservations made for this job under an older
                  // generation are void (Place, Resume, Cancel and Release start a new one)
  Int tsplice;    // while Migrating or Resizing: workers per device on the target (else 0)
  Int mode;       // Preemption: how the job's program is preempted, fixed at submission
  Int faults;     // platform faults under it so far (a node lost, a proxy killed, a superseded
                  // incarnation): they relaunch it without touching its retries
  Int hold;       // 1: an operator suspended it (a preemption for no one); it is not placed or
                  // resumed until an operator releases it (Release), 0 otherwise
  Int spare;      // 1: a premium job admitted beyond the premium reserve (INV-ADMIT). It counts
                  // nothing against the reserve, carries no guarantee and ranks below every
                  // premium job admitted within it (until one leads it in service by more than
                  // kReserveLeadGpuMs: precedes); it joins the reserve when it is (re)started and
                  // the reserve has room for it. 0 otherwise
  typename D::DevSet held;    // the devices held now
  typename D::DevSet target;  // while Migrating or Resizing: the devices the job moves to once
                              // the cut is stored (those it does not hold are reserved for it);
                              // empty otherwise
};

// The integer fields of JobVars in declaration order, for code that must visit all of them
// (making solver variables, printing counterexamples, the reference checks in tests). The device
// sets `held` and `target` are visited separately.
template <class D>
constexpr auto job_fields() {
  using J = JobVars<D>;
  return std::array<std::pair<std::string_view, typename D::Int J::*>, 21>{{
      {"state", &J::state},       {"tier", &J::tier},         {"dtype", &J::dtype},
      {"world", &J::world},       {"min_dev", &J::min_dev},   {"max_dev", &J::max_dev},
      {"mem", &J::mem},           {"devices", &J::devices},   {"splice", &J::splice},
      {"epoch", &J::epoch},       {"progress", &J::progress}, {"ckpt", &J::ckpt},
      {"failures", &J::failures}, {"attained", &J::attained}, {"ben", &J::ben},
      {"resv_gen", &J::resv_gen}, {"tsplice", &J::tsplice},   {"mode", &J::mode},
      {"faults", &J::faults},     {"hold", &J::hold},         {"spare", &J::spare},
  }};
}

template <class D>
struct ClusterVars {
  using Int = typename D::Int;
  // Shape. Devices are numbered 0..m-1 in runs of identical devices ("groups"); a group is on one
  // node. group_first has one entry per group plus the end (m).
  std::vector<int> group_first;
  std::vector<int> group_node;  // group -> node
  int nodes = 0;
  // Fleet values.
  std::vector<Int> group_type;  // group -> device type id
  std::vector<Int> group_mem;   // group -> MiB of device memory (each worker sees all of it)
  std::vector<Int> node_devs;   // node -> number of devices it has (its capacity)
  std::vector<Int> host_mem;    // node -> MiB of host memory for swapped-out spliced state
  std::vector<Int> premium_reserve;  // one element: devices reserved for admitted premium demand
  // Per device.
  std::vector<Int> owner;        // the job holding it, -1 when free
  std::vector<Int> owner_epoch;  // the owner's epoch when held, 0 when free
  std::vector<Int> resv_for;     // the job it is reserved for, -1 when none
  std::vector<Int> resv_gen;     // that job's reservation generation when it was reserved
  // Per node: its lifecycle state (NodeState; the node machine, core/node_machine_table.h).
  std::vector<Int> node_state;
  // Counters (INV-INDEX says what each stands for).
  std::vector<Int> node_held;         // node -> devices held on it
  std::vector<Int> node_swap;         // node -> MiB of host memory used by swapped-out workers
  std::vector<Int> premium_admitted;  // one element: min_dev summed over admitted premium jobs
  // Jobs.
  std::vector<JobVars<D>> jobs;

  int num_jobs() const { return static_cast<int>(jobs.size()); }
  int num_devices() const { return group_first.empty() ? 0 : group_first.back(); }
  int num_groups() const { return static_cast<int>(group_node.size()); }
  const Int& reserve() const { return premium_reserve.front(); }
  int group_of(int dev) const {
    // Fleets are mostly runs of equal size (a node's devices): the proportional guess is right
    // in O(1) then, and a binary search finds any other.
    const int groups = num_groups();
    const auto guess =
        static_cast<int>(static_cast<std::int64_t>(dev) * groups / num_devices());
    if (guess < groups && group_first[guess] <= dev && dev < group_first[guess + 1]) return guess;
    auto it = std::upper_bound(group_first.begin(), group_first.end() - 1, dev);
    return static_cast<int>(it - group_first.begin()) - 1;
  }
  int node_of(int dev) const { return group_node[group_of(dev)]; }
  const Int& dev_type(int dev) const { return group_type[group_of(dev)]; }
  const Int& dev_mem(int dev) const { return group_mem[group_of(dev)]; }
};

// Visits every *state* variable of a cluster (everything but the shape and the fleet values) as
// (name, Int&) — and every device-set membership through `on_set(name, DevSet&)`.
template <class D, class C, class FInt, class FSet>
void for_each_state_var(C& s, FInt&& on_int, FSet&& on_set) {
  static_assert(std::is_same_v<std::remove_const_t<C>, ClusterVars<D>>);
  const int m = s.num_devices();
  auto dev = [](const char* what, int i) { return std::string(what) + "[" + std::to_string(i) + "]"; };
  for (int i = 0; i < m; ++i) {
    on_int(dev("owner", i), s.owner[i]);
    on_int(dev("owner_epoch", i), s.owner_epoch[i]);
    on_int(dev("resv_for", i), s.resv_for[i]);
    on_int(dev("resv_gen", i), s.resv_gen[i]);
  }
  for (int n = 0; n < s.nodes; ++n) {
    on_int(dev("node_state", n), s.node_state[n]);
    on_int(dev("node_held", n), s.node_held[n]);
    on_int(dev("node_swap", n), s.node_swap[n]);
  }
  on_int(std::string("premium_admitted"), s.premium_admitted.front());
  constexpr auto fields = job_fields<D>();
  for (int j = 0; j < s.num_jobs(); ++j) {
    std::string p = "j" + std::to_string(j) + ".";
    for (const auto& [name, member] : fields) on_int(p + std::string(name), s.jobs[j].*member);
    on_set(p + "held", s.jobs[j].held);
    on_set(p + "target", s.jobs[j].target);
  }
}

// Parameters of a decision (an event with its arguments). Which fields matter depends on the event:
//   Submit:            tier dtype world min_dev max_dev mem
//   Place Resume Migrate ResizeUp ResizeDown: sel (the job's full new device set) and splice
//   Progress:          step (new committed step) and gpu_ms (service since the last report)
//   Checkpoint CheckpointDone: step (the step the checkpoint captured)
//   Preempt ResizeDown: beneficiary (the waiting job this decision makes room for)
template <class D>
struct Params {
  using Int = typename D::Int;
  Int tier, dtype, world, min_dev, max_dev, mem;
  Int step, gpu_ms, splice, beneficiary, mode;
  Int op;  // 1 when an operator decided the event (Origin::kOperator; the core sets it from the
           // decision's origin, so no planner can claim it), else 0
  typename D::DevSet sel;
};

// A guard is a conjunction of named clauses, so the core can say which one rejected a decision and
// the checker can name it in a counterexample.
template <class D>
struct Clause {
  std::string_view name;
  typename D::Bool holds;
};
template <class D>
using Clauses = std::vector<Clause<D>>;

template <class D>
typename D::Bool all_of(const D& d, const Clauses<D>& cs) {
  typename D::Bool acc = d.b(true);
  for (const auto& c : cs) acc = acc && c.holds;
  return acc;
}

// ---- State classes -------------------------------------------------------------------------

template <class D>
typename D::Bool holding_state(const D& d, const typename D::Int& st) {
  return one_of(d, st,
                {JobState::kPlaced, JobState::kRunning, JobState::kCheckpointing,
                 JobState::kMigrating, JobState::kResizing, JobState::kRestoring});
}

// A move is in flight: the job holds its devices while the nodes take the cut, and `target` names
// where it goes once the cut is stored.
template <class D>
typename D::Bool moving_state(const D& d, const typename D::Int& st) {
  return one_of(d, st, {JobState::kMigrating, JobState::kResizing});
}

// An operation is in flight in the runtime: each of these states has an Abort row back to a safe
// state (docs/spec.md, "In-flight states").
template <class D>
typename D::Bool in_flight_state(const D& d, const typename D::Int& st) {
  return one_of(d, st,
                {JobState::kPlaced, JobState::kCheckpointing, JobState::kMigrating,
                 JobState::kResizing, JobState::kRestoring});
}

template <class D>
typename D::Bool terminal_state(const D& d, const typename D::Int& st) {
  return one_of(d, st, {JobState::kCompleted, JobState::kFailed, JobState::kCancelled});
}

// Admitted and not finished: counts against the premium reservation.
template <class D>
typename D::Bool admitted_state(const D& d, const typename D::Int& st) {
  return one_of(d, st,
                {JobState::kQueued, JobState::kPlaced, JobState::kRunning, JobState::kCheckpointing,
                 JobState::kSuspended, JobState::kMigrating, JobState::kResizing,
                 JobState::kRestoring});
}

// Waiting for devices: the only jobs a preemption or shrink can be made in favour of, and the only
// ones devices can be reserved for.
template <class D>
typename D::Bool waiting_state(const D& d, const typename D::Int& st) {
  return one_of(d, st, {JobState::kQueued, JobState::kSuspended});
}

// Devices may be reserved for a job in these states: waiting, or moving (its target devices).
template <class D>
typename D::Bool reserving_state(const D& d, const typename D::Int& st) {
  return waiting_state(d, st) || moving_state(d, st);
}

// The job runs through orrery's worker library: only such a job is spliced, resized or cut while it
// runs on (INV-MODE).
template <class D>
typename D::Bool transparent(const D& d, const JobVars<D>& job) {
  return is(d, job.mode, Preemption::kTransparent);
}

// Entering one of these states starts a new incarnation of the job.
template <class D>
typename D::Bool starting_state(const D& d, const typename D::Int& st) {
  return one_of(d, st, {JobState::kPlaced, JobState::kRestoring});
}

// The events whose decisions carry a device selection (p.sel, p.splice).
constexpr bool selects_devices(EventKind e) {
  return e == EventKind::kPlace || e == EventKind::kResume || e == EventKind::kMigrate ||
         e == EventKind::kResizeUp || e == EventKind::kResizeDown;
}

// ---- Derived quantities --------------------------------------------------------------------

// A node in this state may have devices held on it: Up, Draining (its jobs are being moved off),
// Lost (its jobs are being failed over). Down and Joining nodes hold nothing (INV-NODE).
template <class D>
typename D::Bool node_may_hold(const D& d, const typename D::Int& st) {
  return one_of(d, st, {NodeState::kUp, NodeState::kDraining, NodeState::kLost});
}

// Device dev is on a node that is Up: the only devices a job may newly take (INV-NODE).
template <class D>
typename D::Bool on_up_node(const D& d, const ClusterVars<D>& s, int dev) {
  return is(d, s.node_state[s.node_of(dev)], NodeState::kUp);
}

// Visits the devices of node n: f(dev). O(groups + the node's devices).
template <class D, class F>
void for_each_node_device(const ClusterVars<D>& s, int n, F&& f) {
  for (int g = 0; g < s.num_groups(); ++g)
    if (s.group_node[g] == n)
      for (int dev = s.group_first[g]; dev < s.group_first[g + 1]; ++dev) f(dev);
}

// Job b (any value: it may come from a decision) is a job that is waiting for devices.
template <class D>
typename D::Bool waiting_job(const D& d, const ClusterVars<D>& s, const typename D::Int& b) {
  return d.select(
      s.num_jobs(), b, [&](int i) { return waiting_state(d, s.jobs[i].state); }, d.b(false));
}

// Device dev carries a live reservation: made for a job that is waiting or moving, under that
// job's current reservation generation.
template <class D>
typename D::Bool reserved(const D& d, const ClusterVars<D>& s, int dev) {
  return d.select(
      s.num_jobs(), s.resv_for[dev],
      [&](int i) {
        return s.resv_gen[dev] == s.jobs[i].resv_gen && reserving_state(d, s.jobs[i].state);
      },
      d.b(false));
}

// Host memory one device of a job needs for its swapped-out workers: (splice - 1) * mem, for a
// splice in [1, kSpliceLimit] (0 otherwise). With mem <= kMaxMemMib it cannot overflow.
template <class D>
typename D::Int swap_per_device(const D& d, const typename D::Int& splice,
                                const typename D::Int& mem) {
  return times_small(d, mem, splice, kSpliceLimit - 1, /*offset=*/1);
}

// Job j's share of the fleet counter: its min_dev when it is a premium job admitted within the
// reserve (a spare one counts nothing).
template <class D>
typename D::Int premium_share(const D& d, const JobVars<D>& job) {
  return d.ite(is(d, job.tier, Tier::kPremium) && admitted_state(d, job.state) &&
                   job.spare == d.k(0),
               job.min_dev, d.k(0));
}

// A premium job of min_dev devices fits within the premium reserve now.
template <class D>
typename D::Bool fits_reserve(const D&, const ClusterVars<D>& s, const typename D::Int& min_dev) {
  return s.premium_admitted.front() + min_dev <= s.reserve();
}

// The job's rank for precedence: its tier, with a spare premium job (admitted beyond the reserve)
// between the premium jobs admitted within it and the standard tier (between those two, a lead in
// service reverses it: precedes). Smaller ranks first; a tier's ranks are kRanksPerTier * tier and
// the next one.
inline constexpr int kRanksPerTier = 2;
inline constexpr int kNumRanks = kRanksPerTier * kNumTiers;
template <class D>
typename D::Int rank(const D& d, const JobVars<D>& job) {
  return job.tier * d.k(kRanksPerTier) + job.spare;
}

// Job j's share of the per-node counters, added into `held` and `swap` (one entry per node).
template <class D>
void add_node_shares(const D& d, const ClusterVars<D>& s, int j, std::vector<typename D::Int>& held,
                     std::vector<typename D::Int>& swap) {
  const auto& job = s.jobs[j];
  auto per_dev = swap_per_device(d, job.splice, job.mem);
  d.members(job.held, [&](int dev, const typename D::Bool& in) {
    int n = s.node_of(dev);
    held[n] = held[n] + indicator(d, in);
    swap[n] = swap[n] + d.ite(in, per_dev, d.k(0));
  });
}

// Every member of x is a member of y. O(|x| log |y|) on concrete values.
template <class D>
typename D::Bool subset(const D& d, const typename D::DevSet& x, const typename D::DevSet& y) {
  auto ok = d.b(true);
  d.members(x, [&](int dev, const typename D::Bool& in) {
    ok = ok && d.implies(in, d.contains(y, dev));
  });
  return ok;
}

// W workers split evenly over `count` devices with `splice` workers each, within the splice limit.
template <class D>
typename D::Bool exact_split(const D& d, const typename D::Int& world, const typename D::Int& count,
                             const typename D::Int& splice) {
  return d.k(1) <= splice && splice <= d.k(kSpliceLimit) &&
         times_small(d, count, splice, kSpliceLimit) == world;
}

// The reserve's order between premium jobs gives way to service once one has had far more: a
// spare premium job takes precedence over one within the reserve that has had more than this much
// more attained service (GPU-ms: 24 GPU-hours), and one within the reserve takes it back only once
// its lead is at most half of it. Else a premium job within the reserve could hold a type that
// spare ones wait for, for as long as it runs (months, on a type of a few devices); and with one
// threshold the two would take turns each time either received a moment's service.
inline constexpr std::int64_t kReserveLeadGpuMs = std::int64_t{24} * 3600 * 1000;

// Job `ben` takes precedence over job `victim` for devices: it is waiting, needs the victim's
// device type (anything else would free devices it cannot use), and
//  - has a higher tier; or
//  - is of the same tier and rank (both premium within the reserve, both spare, or both of a lower
//    tier) and has had strictly less attained service (the same-tier fair-share rule); or
//  - is a premium job within the reserve, the victim a spare one, and its lead in attained service
//    over the victim is at most kReserveLeadGpuMs / 2; or
//  - is a spare premium job, the victim one within the reserve, with a lead of more than
//    kReserveLeadGpuMs over `ben`.
// Never both ways between two jobs (the last two need the lead of the job within the reserve to be
// at most kReserveLeadGpuMs / 2 and more than kReserveLeadGpuMs).
template <class D>
typename D::Bool precedes(const D& d, const JobVars<D>& ben, const JobVars<D>& victim) {
  const auto rb = rank(d, ben), rv = rank(d, victim);
  const auto same_tier = ben.tier == victim.tier;
  const auto reserve_first = rb < rv && ben.attained <= victim.attained + d.k(kReserveLeadGpuMs / 2);
  const auto lead_given_way = rv < rb && ben.attained + d.k(kReserveLeadGpuMs) < victim.attained;
  return waiting_state(d, ben.state) && ben.dtype == victim.dtype &&
         ((!same_tier && rb < rv) || (rb == rv && ben.attained < victim.attained) ||
          (same_tier && (reserve_first || lead_given_way)));
}

// An operator's decision for no one (a suspension or a shrink no waiting job asked for): the core
// sets `op` from the decision's origin, so a planner can never make one.
template <class D>
typename D::Bool operator_for_no_one(const D& d, const Params<D>& p) {
  return p.op == d.k(1) && p.beneficiary == d.k(-1);
}

// The job b (any value: it comes from a decision) may take resources from job v: another job that
// takes precedence over v.
template <class D>
typename D::Bool favoured(const D& d, const ClusterVars<D>& s, const typename D::Int& b, int v) {
  auto no = d.b(false);
  return d.select(
      s.num_jobs(), b,
      [&](int i) -> typename D::Bool { return i == v ? no : precedes(d, s.jobs[i], s.jobs[v]); },
      no);
}

// Job j takes precedence over the job `holder` (any value: a device's reservation) — so a
// reservation for `holder` does not keep j off the device: a reservation protects its job from the
// jobs it outranks, never from those that outrank it.
template <class D>
typename D::Bool outranks(const D& d, const ClusterVars<D>& s, int j, const typename D::Int& holder) {
  auto no = d.b(false);
  return d.select(
      s.num_jobs(), holder,
      [&](int i) -> typename D::Bool { return i == j ? no : precedes(d, s.jobs[j], s.jobs[i]); },
      no);
}

// Job b's workers fit, one at a time, on every device job v holds (device memory), so the devices a
// preemption or shrink of v frees are of use to b (favoured() already asks for the device type).
template <class D>
typename D::Bool fits_devices_of(const D& d, const ClusterVars<D>& s, const typename D::Int& b,
                                 int v) {
  return d.select(
      s.num_jobs(), b,
      [&](int i) {
        auto ok = d.b(true);
        d.members(s.jobs[v].held, [&](int dev, const typename D::Bool& in) {
          ok = ok && d.implies(in, s.jobs[i].mem <= s.dev_mem(dev));
        });
        return ok;
      },
      d.b(false));
}

}  // namespace orrery::spec
