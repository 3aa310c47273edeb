// A planner's view of the jobs, kept up to date from Planner::job_changed() so that a round costs
// what it touches, not a walk over every job: the jobs to admit (Submitted), the jobs waiting for
// devices (Queued, Suspended) in the planner's order by device type (core/policy/wait_lanes.h),
// and the running jobs (Running).
//
// The order is a key the planner computes when a job starts waiting (its tier, attained service,
// arrival...): those do not change while a job waits, so the key stays right until it runs again.
// A book kept by tenant (the orrery planner) also keeps each tier's tenants' shares
// (core/policy/tenant_shares.h) and places fairly among tenants: its key's first element is a
// class (0 <= class < kMaxClasses; a class holds jobs of one tier), placed class by class, and
// inside a class each next job comes from the tenant holding fewest devices of its tier.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <utility>
#include <vector>

#include "core/policy/gang_placer.h"
#include "core/policy/job_id_set.h"
#include "core/policy/planner.h"
#include "core/policy/tenant_shares.h"
#include "core/policy/wait_lanes.h"

namespace orrery::core::policy {

class JobBook {
 public:
  using Key = OrderKey;  // smaller first; the job id breaks ties
  static constexpr std::int64_t kMaxClasses = 16;
  explicit JobBook(std::function<Key(const SchedulerCore&, int)> key, bool by_tenant = false)
      : key_(std::move(key)), by_tenant_(by_tenant) {}

  // Files `job` under its current state, which it entered at `since_ms` (-1: now, the time of the
  // commit that changed it; a core recovered from its journal gives the journal's time, so a wait
  // or a run does not start over with orrery-core; never later than now).
  void update(const SchedulerCore& core, int job, std::int64_t since_ms = -1);

  const std::set<int>& submitted() const { return submitted_; }
  std::int64_t waiting() const { return lanes_.size(); }  // jobs waiting
  const JobIdSet& running() const { return running_; }
  // Running transparent jobs on fewer devices than their max_devices (those that can grow), by
  // (tier, job id).
  const std::set<std::pair<std::int64_t, int>>& growable() const { return growable_; }
  // Tenant shares (kept only by a book kept by tenant).
  const TenantShares& shares() const { return shares_; }
  // The running jobs of one device type and rank (spec::rank: the tier, premium jobs admitted
  // beyond the reserve apart; where a waiting job of that type may find victims), in id order.
  const JobIdSet& running(std::int64_t dtype, std::int64_t rank) const {
    static const JobIdSet none;
    auto it = running_by_.find({dtype, rank});
    return it == running_by_.end() ? none : it->second;
  }

  // Devices held by the running jobs of one device type and rank (as they held when they started
  // running): what cutting all of them could free, O(1).
  std::int64_t running_devices(std::int64_t dtype, std::int64_t rank) const {
    auto it = running_devices_.find({dtype, rank});
    return it == running_devices_.end() ? 0 : it->second;
  }
  // The same, summed over the ranks below `rank` (those a job of that rank outranks, but for the
  // lead in service between premium's reserve and spare jobs, spec::precedes: an estimate there).
  std::int64_t running_devices_below(std::int64_t dtype, std::int64_t rank) const {
    std::int64_t n = 0;
    for (std::int64_t r = rank + 1; r < spec::kNumRanks; ++r) n += running_devices(dtype, r);
    return n;
  }

  // A preemption of `victim` was started for the waiting job `beneficiary`: no other one
  // is started for it until that cut is over (the victim is no longer Checkpointing).
  void note_cut(const SchedulerCore& core, int victim, int beneficiary) {
    if (core.state(victim) != spec::JobState::kCheckpointing) return;  // already over
    cut_for_[victim] = beneficiary;
    if (static_cast<std::size_t>(beneficiary) >= helped_.size()) helped_.resize(static_cast<std::size_t>(beneficiary) + 1, 0);
    ++helped_[static_cast<std::size_t>(beneficiary)];
  }
  bool helped(int beneficiary) const {
    return beneficiary >= 0 && static_cast<std::size_t>(beneficiary) < helped_.size() &&
           helped_[static_cast<std::size_t>(beneficiary)] > 0;
  }
  // When a waiting job started waiting (the core's clock), this time: since its admission (which
  // follows its submission at the next round), or since it stopped running. Set before the
  // planner's key is computed, so a key may depend on it.
  std::int64_t waiting_since(int job) const { return wait_since_[static_cast<std::size_t>(job)]; }
  bool is_waiting(int job) const {
    return job >= 0 && static_cast<std::size_t>(job) < where_.size() &&
           where_[static_cast<std::size_t>(job)] == Where::kWaiting;
  }
  // The key a waiting job is filed under.
  const Key& key_of(int job) const { return key_of_[static_cast<std::size_t>(job)]; }
  // Files waiting `job` again under the key the planner computes now (a key that depends on time,
  // e.g. age-based promotion, changes while the job waits). O(log waiting).
  void refile(const SchedulerCore& core, int job);
  // Jobs waiting for devices of `dtype`.
  std::int64_t waiting_of_type(std::int64_t dtype) const {
    auto it = waiting_by_type_.find(dtype);
    return it == waiting_by_type_.end() ? 0 : it->second;
  }
  // Whether some device type of the fleet has no job waiting for it (where growth may go); O(types).
  bool some_type_without_waiting(const SchedulerCore& core) const {
    for (std::int64_t t = 0; t < static_cast<std::int64_t>(core.fleet().device_types.size()); ++t)
      if (waiting_of_type(t) == 0) return true;
    return false;
  }
  // When a running job's current incarnation started running (the core's clock, when the book
  // first saw it Running under its current epoch: a periodic checkpoint does not restart it; an
  // aborted cut restarts the job in place, a new epoch). What a victim loses and min_runtime_ms
  // are measured from here (core/policy/victims.h). A book rebuilt after a core restart takes the
  // journal's time of the job's last change of state (Planner::job_recovered), no earlier than
  // its start: a job may look younger than it is, which errs towards not evicting it.
  std::int64_t running_since(int job) const { return run_since_[static_cast<std::size_t>(job)]; }

  // Admits every submitted job, in id order (a premium job beyond the reserve spare).
  void admit_all(const SchedulerCore& core, PlanContext& ctx);

  // Places (or resumes) waiting jobs in order, each on the devices the gang placement proposes;
  // by tenant: tier by tier, each next job from the tenant holding fewest devices of the tier, in
  // order inside a tenant. A job whose spec allows several device types takes a faster one with
  // room (PlannerOptions::type_speed), else its own, else another with room
  // (place_on_another_type), before anything is cut for it.
  // A job that does not fit counts against its device type's budget of failed tries, ctx.note()
  // hears why, and if it could fit the fleet (kRetryLater) it is passed to `blocked` (a planner
  // may preempt or shrink for it there). `strict` stops a type at its first failure (FIFO: no job
  // overtakes an earlier one of the same type). `premium_budget`: premium jobs count against a
  // budget of their own, PlannerOptions::premium_round_budget. Returns the number placed.
  int place_waiting(const SchedulerCore& core, PlanContext& ctx, const PlannerOptions& o, bool strict,
                    const std::function<void(int)>& blocked, bool premium_budget = false);

  // A round begins before the next place_waiting: the free devices cuts count on (claim_free) are
  // forgotten now rather than there, so that cuts a planner makes before place_waiting (orrery's
  // overdue jobs) are counted for the rest of the round. Without it place_waiting forgets them.
  void begin_round() {
    claimed_.clear();
    claimed_node_.clear();
    round_begun_ = true;
  }

  // Free devices of `type` in `region` (-1: the fleet) that a job's cuts counted on, this round
  // (victims.h, cut_need: they are not counted again for another job's). Cleared at the start of
  // each place_waiting, or by begin_round() before it.
  void claim_free(std::int64_t type, int region, std::int64_t devices) { claimed_[{type, region}] += devices; }
  std::int64_t claimed_free(std::int64_t type, int region) const {
    auto it = claimed_.find({type, region});
    return it == claimed_.end() ? 0 : it->second;
  }
  // The same on one node, for gangs kept to one node (GangPlacer::one_node); claim_free_on_node
  // counts them in their region (`region`, as claim_free takes it) as well.
  void claim_free_on_node(std::int64_t type, int region, int node, std::int64_t devices) {
    claim_free(type, region, devices);
    claimed_node_[{type, node}] += devices;
  }
  std::int64_t claimed_free_on_node(std::int64_t type, int node) const {
    auto it = claimed_node_.find({type, node});
    return it == claimed_node_.end() ? 0 : it->second;
  }

  // Whether waiting `job` may be moved to another device type now (Retype): its spec names several,
  // and no devices are being freed for it or kept for it (they are of its type).
  bool may_retype(const SchedulerCore& core, int job);

  // Gangs that one node can hold go on one node (PlannerOptions::one_node_gangs), in the placer.
  void set_one_node_gangs(bool on) {
    one_node_gangs_ = on;
    if (placer_) placer_->set_one_node_gangs(on);
  }
  // The gang placer (core/policy/gang_placer.h) over `core`, built on first use and kept: it
  // follows the core's commits through its change feed. One core per book.
  GangPlacer& placer(const SchedulerCore& core) {
    if (!placer_ || &placer_->index().core() != &core) {
      placer_ = std::make_unique<GangPlacer>(core);
      placer_->set_one_node_gangs(one_node_gangs_);
    }
    return *placer_;
  }

 private:
  enum class Where : std::uint8_t { kNone, kSubmitted, kWaiting, kRunning };
  struct Tries;
  std::int64_t lane_class(const Key& k) const { return by_tenant_ ? k[0] : 0; }
  // Tries to place or resume waiting job j (place_waiting's step); true if placed.
  bool try_place(const SchedulerCore& core, PlanContext& ctx, int j, Tries& t,
                 const std::function<void(int)>& blocked);
  // For waiting job j: the first other type its spec allows (in the spec's order, or the fastest
  // first where PlannerOptions::type_speed gives speeds; `faster_only`: only types faster than its
  // own, else only the others) where its gang fits now; j is moved there (Retype) and placed. True
  // if placed.
  bool place_on_another_type(const SchedulerCore& core, PlanContext& ctx, int j, Tries& t, bool faster_only);
  // The walk's order of placements for waiting job j (try_place, backfill): a faster type of its
  // spec where it fits now, then its own type, then another of its spec (place_on_another_type).
  // True if placed (counted in t.placed). Else `own` points to the placer's answer on its own type
  // (GangPlacer::propose_kept: valid until the placer's next such answer), or stays null where a
  // Retype to a faster type moved it without placing it.
  bool place_in_order(const SchedulerCore& core, PlanContext& ctx, int j, Tries& t, const Proposal*& own);
  std::function<Key(const SchedulerCore&, int)> key_;
  std::map<std::pair<std::int64_t, int>, std::int64_t> claimed_;  // claim_free, this round
  std::map<std::pair<std::int64_t, int>, std::int64_t> claimed_node_;  // claim_free_on_node, by (type, node)
  bool by_tenant_;
  TenantShares shares_;
  WaitLanes lanes_;
  std::vector<Where> where_;
  std::vector<Key> key_of_;
  std::vector<std::int64_t> wait_since_;
  std::vector<std::int64_t> run_since_;
  std::vector<std::int64_t> run_epoch_;  // the epoch run_since_ is for (-1: none yet)
  std::vector<std::int64_t> held_of_;  // by tenant: devices counted in shares_ for the job
  std::map<std::int64_t, std::int64_t> waiting_by_type_;
  std::set<int> submitted_;
  JobIdSet running_;
  std::set<std::pair<std::int64_t, int>> growable_;
  std::map<std::pair<std::int64_t, std::int64_t>, std::int64_t> running_devices_;  // (dtype, rank)
  std::vector<std::int64_t> run_devices_;  // devices counted in running_devices_ for the job
  std::vector<std::int64_t> run_rank_;     // the rank it is filed under in running_by_
  std::vector<std::int64_t> wait_type_;    // the device type it is filed under while waiting
  // Waiting jobs whose spec names several device types, by the type they wait on, in order: the
  // ones place_waiting offers the other types when their own ran out of tries in a round.
  std::map<std::int64_t, std::set<WaitEntry>> movable_;
  // Every waiting job by the type it waits on and the size class of its smallest gang
  // (size_class), in order: where backfill() finds the first jobs that could fit the open devices.
  static constexpr int kSizeClasses = 12;  // 1, 2, 3-4, 5-8, ..., 513-1024, above
  static int size_class(std::int64_t min_dev);
  std::vector<std::set<WaitEntry>> by_size_;  // [type * kSizeClasses + class]
  std::set<WaitEntry>& size_set(std::int64_t type, int cls) {
    const auto k = static_cast<std::size_t>(type * kSizeClasses + cls);
    if (k >= by_size_.size()) by_size_.resize(k + 1);
    return by_size_[k];
  }
  std::vector<std::int8_t> wait_size_;  // the size class it is filed under while waiting
  // place_waiting's last step: the devices a type still has open after its budget of tries ran
  // out go to the first jobs in order, past the ones tried, whose smallest gang one region's open
  // devices could hold (nothing is cut for them). The number placed.
  int backfill(const SchedulerCore& core, PlanContext& ctx, Tries& t, int limit);
  bool round_begun_ = false;           // begin_round() since the last place_waiting
  std::uint32_t round_ = 0;            // place_waiting calls, the current one's number
  std::vector<std::uint32_t> tried_in_;  // by job: the round try_place last tried it in
  std::map<std::pair<std::int64_t, std::int64_t>, JobIdSet> running_by_;  // (dtype, rank)
  std::map<int, int> cut_for_;  // victim -> beneficiary, while the victim's cut is under way
  std::vector<int> helped_;     // by beneficiary: how many of those cuts are for it
  std::unique_ptr<GangPlacer> placer_;
  bool one_node_gangs_ = false;  // set_one_node_gangs
};

}  // namespace orrery::core::policy
