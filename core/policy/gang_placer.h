// Gang placement, topology-aware, over a free-device index: an untrusted planner that proposes a
// device set and splice factor for one job. The core commits it only if the spec guard holds; the
// placer asks the core (SchedulerCore::check: the row and its guard on the current state) before
// proposing, so a proposal it returns is one the core accepts now (a rejected proposal would be a
// policy bug).
//
// Rules (docs/policies.md, "Gang placement"):
//   - Device count: the largest c in [min_devices, min(max_devices, want)] (ResizeUp: above the
//     devices held; Migrate: at least as many as held) that divides the world size with
//     world / c <= spec::kSpliceLimit workers per device and for which a placement exists.
//   - Devices: of the job's type with memory for one worker, on Up nodes, not held, not reserved
//     for another job unless this one outranks it (spec::outranks); reserved for this job is free
//     to it. On each node, host memory for the spliced-out workers must fit (the guard's rule).
//   - Topology, first that fits: ONE node, the one with the fewest free devices that still fits
//     (best fit); else ONE cluster, the one needing the fewest nodes (then the fewest free
//     devices), filled with its nodes of most free devices first and the rest on the
//     best-fitting node; else ONE region, the one needing the fewest clusters (then the fewest
//     free devices), filled with its clusters of most free devices whole and the rest in one
//     cluster by the cluster rule. Never across regions, unless allow_cross_region(job): then
//     regions of most free devices whole and the rest in one region by the region rule.
//     Ties go to the lowest node, cluster or region id: the proposal is a function of the state.
//   - With one_node_gangs (PlannerOptions::one_node_gangs), a device count that one node of the
//     job's level can hold (at most FreeDeviceIndex::max_per_node) goes on one node only, as a
//     Kubernetes pod does (and as the Alibaba trace's pods did); larger counts span nodes as above.
//   - ResizeUp keeps the held devices and grows near them: on their node (when on one), else in
//     their cluster (one node, else several), else in their region; never outside it (unless
//     allowed to cross regions). Migrate never reuses the held devices.
//   - On a node, devices reserved for this job go first, then unreserved ones, then ones whose
//     reservation this job outranks; in increasing id.
//
// Cost: propose() first catches up with the core's commits (FreeDeviceIndex::sync, O(devices the
// commits since the last call touched)); a placement then costs O(levels of buckets + devices
// picked) for one node, plus O(clusters x max devices per node) when it spans nodes, plus
// O(jobs with live reservations) and the device groups reserved for the jobs this job may take
// from (its own and those of jobs it outranks), whose nodes are then handled one by one. Spliced
// gangs (host memory) also visit the nodes with open devices whose free host memory could limit
// them. A Place or Resume that cannot fit costs O(1) where an upper bound on the free devices, or
// a remembered kRetryLater (Miss below), answers it.
//
// Not thread-safe; one placer per core, used from the thread that commits. The core must outlive
// it. A placer may be created at any time (it reads the state) and used after any number of
// commits by anyone: the core's change feed tells it what changed.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/decision.h"
#include "core/fleet_fit.h"
#include "core/policy/free_device_index.h"
#include "core/policy/gang_placement.h"
#include "core/scheduler_core.h"

namespace orrery::core::policy {

class GangPlacer {
 public:
  explicit GangPlacer(const SchedulerCore& core);

  // `event` is Place (job Queued), Resume (Suspended), Migrate or ResizeUp (Running); `want` caps
  // the device count (-1: max_devices). kOk carries a decision the core accepts now;
  // kRetryLater: no placement now (not enough free devices where the rules allow);
  // kInfeasible: never (no device count in range splits the world, no device of the type has the
  // memory, more devices than one region has, a job in the wrong state, or not a placement event).
  // `avoid_scope` (>= 0, a FreeDeviceIndex scope other than the fleet) or `avoid_node` (>= 0): no
  // device there (defragmentation moves jobs out of it).
  Proposal propose(int job, spec::EventKind event, int want = -1, int avoid_scope = -1, int avoid_node = -1);
  // propose(job, event), its answer kept by the placer (valid until the next propose_kept): no
  // Proposal is built or copied for a miss it remembers. A walk over a long queue asks again and
  // again about the same jobs (on the 1M synthetic run most of its proposals are such misses).
  const Proposal& propose_kept(int job, spec::EventKind event);

  // Whether waiting `job` (Place: Queued, Resume: Suspended) would fit now on devices of `type`
  // rather than its own, by the same rules (a Retype first: the placement is planned, not
  // proposed, and counts in no statistic).
  bool fits_on(int job, spec::EventKind event, std::int64_t type);

  // For waiting `job` (Place: Queued, Resume: Suspended): how many more devices of its type its
  // smallest gang needs than are free to it now (open, or reserved for it or for jobs it
  // outranks), in the region where the most are among those with devices enough for the gang
  // (`region`; -1 for a job allowed across regions: the fleet), and in each such region
  // (`regions`), planned by the same rules as propose(). 0 where it fits now. -1 where that count
  // is not what stands in the way: the job cannot be placed at all (kInfeasible), or enough
  // devices are free in some region and host memory or the topology refused them. Costs a
  // placement query and a walk over the jobs with live reservations; counts in no statistic.
  struct Shortfall {
    std::int64_t devices = -1;
    int region = -1;
    // Every region with devices enough for the gang, with what it lacks there, the least first
    // (ties: the lowest region; `devices` and `region` are the first); one entry, region -1, for
    // a job allowed across regions. Empty where `devices` is not positive.
    std::vector<std::pair<int, std::int64_t>> regions;
  };
  Shortfall shortfall(int job, spec::EventKind event);

  // Lets `job` (or no longer) be placed across regions. A planner-side attribute, not journaled:
  // whoever runs the planner sets it again after a restart.
  void allow_cross_region(int job, bool allowed = true);
  bool cross_region(int job) const {
    return job >= 0 && static_cast<std::size_t>(job) < cross_region_.size() && cross_region_[static_cast<std::size_t>(job)];
  }

  // Gangs that one node can hold go on one node (the rule above). A planner-wide setting, not
  // journaled: whoever runs the planner sets it again after a restart.
  void set_one_node_gangs(bool on) { one_node_gangs_ = on; }
  bool one_node_gangs() const { return one_node_gangs_; }
  // Whether one node of `job`'s level (its type, with memory for a worker) can hold its smallest
  // gang (min_devices).
  bool fits_one_node(int job) const;
  // Whether waiting or running `job`'s smallest gang is kept to one node: one_node_gangs, and
  // fits_one_node (its devices then come from one node, and cuts for it must free them there:
  // victims.h).
  bool one_node(int job) const { return one_node_gangs_ && fits_one_node(job); }

  // Catches up with the core now (propose() does it anyway).
  void sync() { index_.sync(); }
  const FreeDeviceIndex& index() const { return index_; }

  struct Stats {
    std::uint64_t proposals = 0;  // propose() calls
    std::uint64_t placed = 0;     // kOk answers
    // A proposal the spec guard refused although the index chose it: the index was rebuilt and
    // the placement planned again. Always 0 unless there is a bug; tests check it.
    std::uint64_t repairs = 0;
    std::uint64_t misses_remembered = 0;  // kRetryLater answers given again without a query
  };
  const Stats& stats() const { return stats_; }

 private:
  struct Pick {
    int node;
    int count;
  };
  Proposal plan(int job, spec::EventKind event, int want);
  // propose()'s two halves: a miss remembered for `job` (counted; null if none), else the plan,
  // checked with the core.
  const Proposal* remembered_miss(int job, spec::EventKind event, int want, int avoid_scope, int avoid_node);
  Proposal plan_checked(int job, spec::EventKind event, int want);
  // Why the core would refuse the decision now (SchedulerCore::check), or "".
  std::string check(const Decision& d) const;
  // Whether `job` could never be placed on the type planned for (type_override_ or its own), by
  // fit_, with why: remembered per job (fit_memo_). `ask`: ask fit_ where nothing is remembered
  // for that type (else: false).
  bool never_fits(int job, bool cross, bool ask, std::string* why);

  // ---- one query (job, level, device count) ----
  void begin_query();
  void adjust(int node);  // records the node's free devices for this query if they differ
  int base(int node) const { return index_.up(node) ? index_.open(level_, node) : 0; }
  int eff(int node) const {
    return adj_stamp_[static_cast<std::size_t>(node)] == stamp_ ? adj_eff_[static_cast<std::size_t>(node)]
                                                                 : base(node);
  }
  bool adjusted(int node) const { return adj_stamp_[static_cast<std::size_t>(node)] == stamp_; }
  std::int64_t scope_total(int scope) const;
  // The adjusted nodes of the scope with their free devices, (free desc, node asc).
  std::vector<std::pair<int, int>> adjusted_in(int scope) const;
  // The best-fitting node of the scope for `need` devices (not excluded), or -1.
  int best_node(int scope, int need) const;
  // Nodes a fill of `need` devices takes in the scope (most free first), or INT32_MAX.
  int nodes_needed(int scope, int need) const;
  // Visits the scope's nodes with free devices, most free first (ties: lowest id): f(node, free)
  // -> false stops.
  template <class F>
  void for_each_desc(int scope, F&& f) const;
  bool fill_cluster(int c, int need, std::vector<Pick>& picks);
  void take_whole(int scope, std::vector<Pick>& picks);
  int clusters_needed(int r, int need) const;
  int choose_cluster(const std::vector<int>& candidates, int need) const;
  bool fill_region(int r, int need, std::vector<Pick>& picks);
  bool place_in_region(int r, int need, std::vector<Pick>& picks);
  bool place_in_fleet(int need, bool cross_region, std::vector<Pick>& picks);
  void exclude(int node) { excl_stamp_[static_cast<std::size_t>(node)] = excl_gen_; }
  bool excluded(int node) const { return excl_stamp_[static_cast<std::size_t>(node)] == excl_gen_; }

  // A Place or Resume that found too few free devices (kRetryLater), remembered with the supply
  // counters (FreeDeviceIndex::supply) as they were. Asked again for the same incarnation, the
  // answer is the same, and is given without a query, while
  //  - the level's supply has grown by less than `deficit`: the fewest devices any count in range
  //    needs, less the most that any scope the job may span had free to it (open, or reserved for
  //    it or for jobs it outranks; host memory aside) — no scope can have gained enough; or,
  //    where the deficit was not positive (host memory or the topology refused it),
  //  - neither the level's supply nor (for a job that may be spliced) the host supply moved.
  // Under load most proposals are of gangs that fit nowhere, round after round.
  struct Miss {
    std::uint64_t supply = 0, host = 0;  // host: 0 where the job is never spliced
    std::int64_t epoch = -1;             // -1: none
    std::int32_t deficit = 0;
    std::int32_t dtype = -1;             // the job's type then (a Retype makes the miss stale)
    spec::EventKind event = spec::EventKind::kPlace;
    bool cross = false;
  };
  // The remembered answer for `job`, if it still holds.
  bool missed_again(int job, spec::EventKind event);
  void remember_miss(int job, spec::EventKind event);
  Why retry_later_why(bool cross) const;

  const SchedulerCore& core_;
  FreeDeviceIndex index_;
  core::FleetFit fit_;  // whether a job could ever be placed (host memory: the capacity above is not)
  struct FitMemo {
    int type = -1;  // the type it was asked for (-1: not yet)
    bool cross = false;
    bool fits = false;
  };
  std::vector<FitMemo> fit_memo_;  // per job: fit_'s answer for its type (plan(), on a miss)
  std::vector<char> cross_region_;  // by job
  std::vector<Miss> misses_;        // by job
  Proposal miss_answer_[2];         // a remembered miss's answer, by Miss::cross
  bool rememberable_ = false;       // the proposal under way may be remembered as a miss
  Proposal kept_;                   // propose_kept's last planned answer
  Stats stats_;

  // Query state, reused across calls (no allocation per query once warm).
  int job_ = -1;
  int level_ = -1;
  std::int64_t type_override_ = -1;  // fits_on(): the type planned for, in place of the job's
  Shortfall shortfall_;              // plan()'s, where it answers kRetryLater for too few devices
  bool count_tags_ = false;          // shortfall(): no skipping the walk over the reservations
  std::uint32_t stamp_ = 0;  // adjustments and exclusions of the current count
  std::uint32_t excl_gen_ = 0;   // nodes a fill took whole
  std::uint32_t tag_stamp_ = 0;  // tagged devices usable by the current job
  std::vector<std::uint32_t> adj_stamp_, excl_stamp_, tag_seen_;
  std::vector<int> adj_eff_, tag_usable_, held_on_;
  std::vector<int> adj_nodes_;   // nodes adjusted for the current count
  std::vector<std::int64_t> scope_delta_;  // by scope: the adjusted nodes' effect on its total
  std::vector<int> delta_scopes_;          // the scopes with a delta (to clear)
  std::vector<int> tag_nodes_;   // Up nodes with tagged devices usable by the job
  std::vector<int> held_nodes_;  // nodes where the job holds devices (held_on_ counts them)
  std::int64_t per_new_ = 0, per_old_ = 0;  // host MiB per device for the new and old splice
  bool keep_held_ = false;  // ResizeUp: held devices stay (and count on their nodes)
  bool retry_later_ = false;  // plan() found too few free devices (its last answer)
  std::int64_t deficit_ = 0;  // ... and by how many at least (Miss::deficit)
  std::vector<std::int64_t> region_tagged_;  // by region: tagged devices free to the job
  int avoid_scope_ = -1;  // its nodes count as full for the query
  int avoid_node_ = -1;   // counts as full for the query
  bool one_node_gangs_ = false;
};

}  // namespace orrery::core::policy
