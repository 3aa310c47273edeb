// orrery's policy (docs/scheduling.md says why and where each part comes from). Every round:
//  1. admits every submitted job (premium beyond its reserve spare: spec::EffectAdmit);
//  2. places waiting jobs by tier (premium, standard, basic); inside a tier, jobs past the tier's
//     starvation cap first (PlannerOptions::starvation_cap_ms; premium's only by default), then
//     Tiresias' discretised LAS levels (las_levels, las_level_factor), inside a level fairly among
//     tenants (the next device to the tenant holding fewest of the tier) and, inside a tenant,
//     least attained service first, backfilling: a job that does not fit does not hold back others;
//  3. for a waiting job that does not fit, frees devices from a job of a lower tier: shrinks an
//     elastic one if it can (same world size, more splicing: nothing is lost; to the largest
//     device count that frees the waiting job's smallest gang), else preempts,
//     the lowest tier first, then the set of victims that loses least (by preemption mode: a
//     transparent job the time of its cut, signal and requeue jobs their run since they started;
//     none within its min_runtime_ms: core/policy/victims.h). Inside a tier a job may cut or
//     shrink one on a higher LAS level, or (past its cap) one with more service that has run the
//     cap, and a job of a tenant below the tier's equal split one of a tenant above it
//     (core/policy/tenant_shares.h); a shrink inside a tier only when it pays (the waiting job's
//     gang x its wait >= the re-splice's cost at cut_gib_per_s). The freed devices are reserved
//     for the waiting job by the core (the spec's Suspend and Shrink effects);
//  4. grows elastic jobs into idle devices of a type no job waits for, up to their max_devices;
//  5. defragmentation by migration (core/policy/orrery_defrag.cc): a waiting job that does not
//     fit although enough devices of its kind are free, scattered over regions (a gang spans
//     nodes and clusters, never regions) or, for a gang kept to one node
//     (PlannerOptions::one_node_gangs), over nodes, gets the region or node nearest to fitting it
//     emptied by migrating running jobs of its tier or lower (any tier's, past the overdue cap)
//     elsewhere — when moving pays (repaid): the moves' cost (devices x state /
//     PlannerOptions::migration_gib_per_s) is at most the waiting job's devices x the time it has
//     waited. Tried before shrinking or preempting (a migration
//     loses no work and keeps the moved job's devices).
// Placement itself is the gang placement policy's (core/policy/gang_placement.h). docs/policies.md.
#pragma once

#include <array>
#include <map>
#include <set>
#include <utility>
#include <vector>

#include "core/policy/job_book.h"
#include "core/policy/planner.h"

namespace orrery::core::policy {

class OrreryPlanner final : public Planner {
 public:
  explicit OrreryPlanner(const PlannerOptions& o);
  std::string_view name() const override { return "orrery"; }
  void job_changed(const SchedulerCore& core, int job) override { changed(core, job, -1); }
  void job_recovered(const SchedulerCore& core, int job, std::int64_t since_ms, std::int64_t waited_ms) override;
  void plan(const SchedulerCore& core, PlanContext& ctx) override;

  // A tier's classes: 0 for the jobs past its starvation cap, then one per LAS level.
  static constexpr std::int64_t kClassesPerTier = 5;
  // The LAS level of `attained` GPU-ms (0 .. las_levels - 1).
  std::int64_t las_level(std::int64_t attained) const;
  // Whether waiting `job` has waited its tier's starvation cap or longer.
  bool starving(const SchedulerCore& core, int job) const;

 private:
  // job_changed, and job_recovered with when the job entered its state (-1: now).
  void changed(const SchedulerCore& core, int job, std::int64_t since_ms) {
    const bool was_starving = book_.is_waiting(job) && book_.key_of(job)[0] % kClassesPerTier == 0;
    book_.update(core, job, since_ms);
    track_age(core, job);
    const auto st = core.state(job);
    if ((st == spec::JobState::kPlaced || st == spec::JobState::kRestoring) && was_starving)
      quantum_.insert(job);  // placed past its cap: not cut inside its tier for a quantum (the cap)
    else if (st == spec::JobState::kQueued || st == spec::JobState::kSuspended || st == spec::JobState::kCompleted ||
             st == spec::JobState::kFailed || st == spec::JobState::kCancelled)
      quantum_.erase(job);
    track_wait(core, job);
    if (!moving_for_.empty() && core.state(job) != spec::JobState::kQueued &&
        core.state(job) != spec::JobState::kSuspended)
      moving_for_.erase(job);
  }
  JobBook::Key key(const SchedulerCore& core, int job) const;
  // Keeps aging_ in step with the book: waiting jobs not yet past their cap, by when they started.
  void track_age(const SchedulerCore& core, int job);
  // Files the jobs that reached their tier's cap under the tier's first class; asks for a round
  // when the next one will.
  void promote_starving(const SchedulerCore& core, PlanContext& ctx);
  // Device-seconds a cut (or re-splice) of running job v costs: its devices idle while its state
  // is cut and restored, and the work a signal or requeue job loses.
  double cut_cost_s(const SchedulerCore& core, int v) const;
  // Whether what waiting `ben` has waited (its smallest gang x its wait so far: what it can expect
  // to wait on) outweighs `cost_s` device-seconds of cuts or moves made for it; if not yet, a round
  // is asked for when it will.
  bool repaid(const SchedulerCore& core, PlanContext& ctx, int ben, double cost_s);
  std::array<std::set<std::pair<std::int64_t, int>>, spec::kNumTiers> aging_;
  std::vector<std::int64_t> aging_since_;  // the entry in aging_, -1: none
  std::set<int> quantum_;  // jobs placed past their cap, until their quantum is over
  // Starvation across tiers (PlannerOptions::overdue_cap_ms).
  // Keeps by_wait_ in step with the book: every waiting job, by when it started waiting.
  void track_wait(const SchedulerCore& core, int job);
  // Places the overdue jobs (up to 4 x max_cuts_per_round of the oldest), the longest waiting
  // first, before the round's other placements; room is sought (free_for, at most
  // max_cuts_per_round searches) for the oldest of each type that does not fit. Asks for a round
  // when the next waiting job will be overdue.
  void place_overdue(const SchedulerCore& core, PlanContext& ctx);
  // Whether running `v` was placed overdue and has not yet run its quantum (not to be cut by a
  // higher tier).
  bool in_overdue_quantum(const SchedulerCore& core, int v);
  std::set<std::pair<std::int64_t, int>> by_wait_;
  std::vector<std::int64_t> by_wait_since_;  // the entry in by_wait_, -1: none
  std::set<int> overdue_placed_;  // placed overdue: not cut by a higher tier within the quantum
  std::set<int> overdue_now_;     // this round's overdue jobs (place_overdue)
  std::vector<std::int64_t> next_search_;  // by job: no victim search for it before this time
  // Whether a victim search for `job` found nothing less than search_backoff_ms ago.
  bool backed_off(const SchedulerCore& core, int job) const {
    return static_cast<std::size_t>(job) < next_search_.size() &&
           core.now_ms() < next_search_[static_cast<std::size_t>(job)];
  }
  // Frees devices for the waiting job `ben` by a shrink or a preemption; true if one started.
  bool free_for(const SchedulerCore& core, PlanContext& ctx, int ben);
  // Moves waiting `ben` (Retype) to the device type its spec allows where the most devices are
  // free or held by lower ranks, if that is not its own and covers its smallest gang; true if moved.
  bool move_to_roomiest_type(const SchedulerCore& core, PlanContext& ctx, int ben);
  // Defragmentation by migration for `ben` (step 5); true if migrations started.
  bool defragment_for(const SchedulerCore& core, PlanContext& ctx, int ben);
  // The same for a gang kept to one node (GangPlacer::one_node) whose device level is `level`:
  // the node that the cheapest moves empty enough for it (core/policy/orrery_defrag.cc).
  bool pack_node_for(const SchedulerCore& core, PlanContext& ctx, int ben, int level);
  // Device-seconds migrating running job v costs: its devices idle while it moves, and the work a
  // signal or requeue job loses.
  double move_cost_s(const SchedulerCore& core, int v) const;
  // The running jobs of `ben`'s type that may move out of its way now: of its tier or lower (of
  // any tier for a job past the overdue cap), the lowest first, at most max_victim_candidates
  // looked at.
  std::vector<int> movable_for(const SchedulerCore& core, PlanContext& ctx, int ben);
  // Proposes the moves of `movers` off `avoid_scope` or `avoid_node`, then `ben`'s placement;
  // true if a move started.
  bool start_moves(const SchedulerCore& core, PlanContext& ctx, int ben, const std::vector<int>& movers,
                   int avoid_scope, int avoid_node, const std::string& where);
  int moves_ = 0;  // defragmentation migrations started this round
  std::map<int, std::vector<int>> moving_for_;  // waiting job -> the jobs moving out of its way
  void grow(const SchedulerCore& core, PlanContext& ctx);
  PlannerOptions o_;
  JobBook book_;
};

}  // namespace orrery::core::policy
