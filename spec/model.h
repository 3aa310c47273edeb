// The job and cluster model the spec reasons about, and the quantities derived from it.
//
// A cluster is a fixed set of devices, each on one node, and a set of job slots. Which job holds
// which device is the matrix hold[job][device]: 0 when the job does not hold the device, otherwise
// the epoch of the incarnation holding it. Resources are exact integers: device counts, MiB, and
// GPU-milliseconds. The *shape* (how many jobs, devices and nodes, which device is on which node)
// is plain C++ structure; every value is of the domain's type, so the checker makes them symbolic.
#pragma once

#include <array>
#include <string_view>
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
  Int failures;   // worker crashes and node losses so far
  Int attained;   // GPU-milliseconds of service received (fair share within a tier)
};

// The fields of JobVars in declaration order, for code that must visit all of them (making
// solver variables, printing counterexamples, the reference checks in tests).
template <class D>
constexpr auto job_fields() {
  using J = JobVars<D>;
  return std::array<std::pair<std::string_view, typename D::Int J::*>, 14>{{
      {"state", &J::state},       {"tier", &J::tier},         {"dtype", &J::dtype},
      {"world", &J::world},       {"min_dev", &J::min_dev},   {"max_dev", &J::max_dev},
      {"mem", &J::mem},           {"devices", &J::devices},   {"splice", &J::splice},
      {"epoch", &J::epoch},       {"progress", &J::progress}, {"ckpt", &J::ckpt},
      {"failures", &J::failures}, {"attained", &J::attained},
  }};
}

template <class D>
struct ClusterVars {
  using Int = typename D::Int;
  // Shape.
  std::vector<int> node_of;  // device -> node
  int nodes = 0;
  std::vector<std::vector<int>> node_members;  // node -> its devices (the inverse of node_of)
  // Values.
  std::vector<Int> dev_type;   // device -> device type id
  std::vector<Int> dev_mem;    // device -> MiB of device memory (each worker sees all of it)
  std::vector<Int> node_devs;  // node -> number of devices it has (its capacity)
  std::vector<Int> host_mem;   // node -> MiB of host memory for swapped-out spliced state
  std::vector<Int> premium_reserve;  // one element: devices reserved for admitted premium demand
  std::vector<JobVars<D>> jobs;
  std::vector<std::vector<Int>> hold;  // [job][device]: epoch of the holder, 0 when not held

  int num_jobs() const { return static_cast<int>(jobs.size()); }
  int num_devices() const { return static_cast<int>(node_of.size()); }
  const Int& reserve() const { return premium_reserve.front(); }

  // Sets `nodes` and `node_members` from `node_of`; builders call it once the devices are known.
  void index_shape(int node_count) {
    nodes = node_count;
    node_members.assign(static_cast<std::size_t>(node_count), {});
    for (int dev = 0; dev < static_cast<int>(node_of.size()); ++dev)
      node_members[node_of[dev]].push_back(dev);
  }
};

// Parameters of a decision (an event with its arguments). Which fields matter depends on the event:
//   Submit:            tier dtype world min_dev max_dev mem
//   Place Resume Migrate ResizeUp ResizeDown: sel (the job's full new device set) and splice
//   Progress:          step (new committed step) and gpu_ms (service since the last report)
//   Checkpoint CheckpointDone Migrate: step (the step the checkpoint captured)
//   Preempt ResizeDown: beneficiary (the waiting job this decision makes room for)
template <class D>
struct Params {
  using Int = typename D::Int;
  Int tier, dtype, world, min_dev, max_dev, mem;
  Int step, gpu_ms, splice, beneficiary;
  std::vector<typename D::Bool> sel;  // [device]
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
                 JobState::kMigrating, JobState::kRestoring});
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
                 JobState::kSuspended, JobState::kMigrating, JobState::kRestoring});
}

// Waiting for devices: the only jobs a preemption or shrink can be made in favour of.
template <class D>
typename D::Bool waiting_state(const D& d, const typename D::Int& st) {
  return one_of(d, st, {JobState::kQueued, JobState::kSuspended});
}

// Entering one of these states starts a new incarnation of the job.
template <class D>
typename D::Bool starting_state(const D& d, const typename D::Int& st) {
  return one_of(d, st, {JobState::kPlaced, JobState::kRestoring, JobState::kMigrating});
}

// ---- Derived quantities --------------------------------------------------------------------

template <class D>
typename D::Bool held(const D& d, const ClusterVars<D>& s, int j, int dev) {
  return !(s.hold[j][dev] == d.k(0));
}

// Devices job j holds.
template <class D>
typename D::Int held_count(const D& d, const ClusterVars<D>& s, int j) {
  typename D::Int n = d.k(0);
  for (int dev = 0; dev < s.num_devices(); ++dev) n = n + indicator(d, held(d, s, j, dev));
  return n;
}

// Devices in a selection.
template <class D>
typename D::Int sel_count(const D& d, const std::vector<typename D::Bool>& sel) {
  typename D::Int n = d.k(0);
  for (const auto& b : sel) n = n + indicator(d, b);
  return n;
}

// Host memory one device of a job needs for its swapped-out workers: (splice - 1) * mem, for a
// splice in [1, kSpliceLimit] (0 otherwise). With mem <= kMaxMemMib it cannot overflow.
template <class D>
typename D::Int swap_per_device(const D& d, const typename D::Int& splice,
                                const typename D::Int& mem) {
  return times_small(d, mem, splice, kSpliceLimit - 1, /*offset=*/1);
}

// Host memory used on node n by every job except `except` (-1: none excepted).
template <class D>
typename D::Int host_use(const D& d, const ClusterVars<D>& s, int n, int except) {
  typename D::Int use = d.k(0);
  for (int j = 0; j < s.num_jobs(); ++j) {
    if (j == except) continue;
    auto per_dev = swap_per_device(d, s.jobs[j].splice, s.jobs[j].mem);
    for (int dev : s.node_members[n]) use = use + d.ite(held(d, s, j, dev), per_dev, d.k(0));
  }
  return use;
}

// Devices of node n held by any job.
template <class D>
typename D::Int node_held(const D& d, const ClusterVars<D>& s, int n) {
  typename D::Int c = d.k(0);
  for (int j = 0; j < s.num_jobs(); ++j)
    for (int dev : s.node_members[n]) c = c + indicator(d, held(d, s, j, dev));
  return c;
}

// Number of jobs holding device dev.
template <class D>
typename D::Int holders(const D& d, const ClusterVars<D>& s, int dev) {
  typename D::Int c = d.k(0);
  for (int j = 0; j < s.num_jobs(); ++j) c = c + indicator(d, held(d, s, j, dev));
  return c;
}

// Minimum device demand of admitted premium jobs.
template <class D>
typename D::Int premium_demand(const D& d, const ClusterVars<D>& s) {
  typename D::Int sum = d.k(0);
  for (const auto& job : s.jobs)
    sum = sum + d.ite(is(d, job.tier, Tier::kPremium) && admitted_state(d, job.state), job.min_dev,
                      d.k(0));
  return sum;
}

// W workers split evenly over `count` devices with `splice` workers each, within the splice limit.
template <class D>
typename D::Bool exact_split(const D& d, const typename D::Int& world, const typename D::Int& count,
                             const typename D::Int& splice) {
  return d.k(1) <= splice && splice <= d.k(kSpliceLimit) &&
         times_small(d, count, splice, kSpliceLimit) == world;
}

// The waiting job b may take resources from job v: b needs v's device type (anything else would
// free devices b cannot use), and has a strictly higher tier, or the same tier and strictly less
// attained service (the same-tier fair-share rule).
template <class D>
typename D::Bool favoured(const D& d, const ClusterVars<D>& s, const typename D::Int& b, int v) {
  const auto& victim = s.jobs[v];
  auto no = d.b(false);
  return d.select(
      s.num_jobs(), b,
      [&](int i) -> typename D::Bool {
        if (i == v) return no;
        const auto& ben = s.jobs[i];
        return waiting_state(d, ben.state) && ben.dtype == victim.dtype &&
               (ben.tier < victim.tier ||
                (ben.tier == victim.tier && ben.attained < victim.attained));
      },
      no);
}

}  // namespace orrery::spec
