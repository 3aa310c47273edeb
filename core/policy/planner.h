// The planner interface: a scheduling policy as an untrusted planner. It reads the core's state
// and proposes decisions; whoever runs it (orrery-core's service, orrery-sim) carries them out,
// and the core commits each one only if the spec's guards hold. A proposal the core rejects is a
// policy bug and is counted, so planners ask the core first (SchedulerCore::check: the same
// guards, nothing committed).
//
// Run by the caller:
//   - job_changed(core, job) after every commit that changed a job's state or held devices,
//     whoever decided it (runtime reports, operators, the planner's own proposals);
//   - job_recovered(core, job, since_ms, waited_ms) instead, for each job of a core rebuilt from
//     its journal;
//   - plan(core, ctx) once per scheduling round. The planner proposes through ctx one decision at
//     a time and sees the state the core is in after each.
//
// Planners: "orrery" (tiers, fair share, shrink before preempt, growth; core/policy/
// orrery_planner.h), "fifo" (FIFO without preemption) and "tiresias" (two-dimensional
// least-attained-service, core/policy/tiresias_planner.h) and "afs" (AFS, an elastic baseline from
// NSDI'21, core/policy/afs_planner.h). docs/policies.md.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/decision.h"
#include "core/scheduler_core.h"

namespace orrery::core::policy {

// The caller's side of a round.
class PlanContext {
 public:
  virtual ~PlanContext() = default;
  // Every proposal is committed at once through the core's guards; the runtime's work that carries
  // it out (a launch, a cut, a restore) happens inside the state it enters, driven by the protocol
  // (core/protocol/protocol.h): the nodes (orrery-core) or the simulator's cost model (orrery-sim).
  // True when the proposal was committed; false when the core refused it (or the job is busy).
  virtual bool propose(const Decision& d) = 0;
  // An operation is in flight for `job` (launch, cut, restore, or a periodic checkpoint): planners
  // leave it alone until it ends.
  virtual bool cut_pending(int job) const = 0;
  // Why a waiting job was not placed this round (for `orrery ls`); the default drops it.
  virtual void note(int /*job*/, const std::string& /*why*/) {}
  // The planner wants a round at `time_ms` (core clock) even if nothing changes by then: a move
  // that does not pay yet may pay by then. orrery-core plans every 100 ms anyway (default: nothing).
  virtual void replan_at(std::int64_t /*time_ms*/) {}
  // A running job's attained service is weighed against a waiting job's inside a tier
  // (spec::precedes: inside a rank a victim must have had strictly more; between premium's reserve
  // and spare jobs, their lead decides). unreported_gpu_ms(job): the device
  // time it has run since its service was last committed, as a node's report would have it now;
  // freshen(job) commits it (its progress as of now), so that the guard sees what the planner
  // weighed. Planners weigh committed + unreported and freshen only the jobs they then keep as
  // candidates (a commit each: on the 1M-job run most jobs looked at are not kept).
  // orrery-core commits the nodes' reports every progress_every_ms (1 s) anyway: nothing to add
  // (the defaults). orrery-sim reports what its model ran since the last commit, where that is
  // more than a report period ago.
  virtual std::int64_t unreported_gpu_ms(int /*job*/) const { return 0; }
  virtual void freshen(int /*job*/) {}
};

struct PlannerOptions {
  // Every planner: the relative speed of each device type (its name -> speed > 0; a type not named
  // runs at 1). A job whose spec allows several types is placed on the fastest of them with room
  // for it, its own type only if none faster has room (Gavel's idea, with one speed per type for
  // every job). Empty: the spec's order, its own type first.
  std::map<std::string, double> type_speed;
  // Every planner: a gang that one node of its type can hold is placed on one node, as a
  // Kubernetes pod is (GangPlacer::set_one_node_gangs); cuts for it free devices on one node
  // (victims.h) and orrery's defragmentation packs a node for it. false: gangs span the nodes of a
  // cluster, then a region, as the placer's topology rules allow.
  bool one_node_gangs = false;
  // Tiresias: the attained service (GPU-milliseconds) that moves a job from the first queue to the
  // second (the paper's discretised 2D-LAS with two queues).
  std::int64_t las_threshold_gpu_ms = 3'600'000;  // one GPU-hour
  // At most this many placements tried and failed per device type in a round before the type is
  // considered full (bounds a round's cost on long queues). 32: on 300,000 synthetic jobs on
  // 100,000 GPUs, against 64, a round costs 23 % less for a 5 % longer average JCT.
  int max_failed_tries_per_type = 32;
  // Every planner but FIFO: after a type ran out of tries, the first waiting jobs in order whose
  // smallest gang fits its open devices are placed (JobBook::backfill; docs/scheduling.md,
  // "Backfill behind gangs that fit nowhere"). false: the walk's tries only (to compare).
  bool backfill = true;
  // orrery: grow elastic jobs into idle capacity (at most this many resize-ups a round).
  int max_grows_per_round = 64;
  // orrery, tiresias: waiting jobs a round looks for victims for, at most.
  int max_cuts_per_round = 16;
  // orrery: premium jobs (the tier's promise: no wait) have budgets of their own: this many failed
  // placements a device type in place of max_failed_tries_per_type, and victim searches past
  // max_cuts_per_round while the devices they are for add up to at most premium_burst_share of
  // the fleet's devices in a round. So a burst of small premium jobs on a full fleet (the Alibaba
  // trace has bursts of 1,500 one-GPU jobs in five minutes) is served in a few rounds, not 16 a
  // round, while large premium gangs still cut at the usual pace (cutting for all of them at once
  // cost synthetic workloads with gangs up to 1,024 GPUs 20-45 % of their average JCT). A search
  // that finds nothing still backs off (search_backoff_ms).
  int premium_round_budget = 1024;
  double premium_burst_share = 0.02;
  // orrery, tiresias: running jobs a victim search looks at, at most (of the beneficiary's device
  // type, the lowest tier first); bounds a search on large fleets.
  int max_victim_candidates = 256;
  // orrery: a preemption inside a tier (fair share) cuts at most this many jobs for one waiting
  // job; a waiting job that needs more is helped only by lower tiers' jobs. Not for a gang past its
  // tier's starvation cap that one node can hold: it may cut as many of its tier as it needs (each
  // by the cap's rule), else it waited for the small jobs of its tier on its type to end.
  int max_same_tier_victims = 1;
  // orrery: defragmentation by migration (docs/policies.md). A move costs the moved job's devices
  // for the time its state takes to checkpoint, transfer and restore at this rate (GiB/s, the
  // whole path); it is made only when the waiting job's devices times the time it has waited
  // (what it can expect to wait on) outweigh the moves' cost. 0 turns defragmentation off.
  double migration_gib_per_s = 0.5;
  // orrery: migrations one round starts for defragmentation, at most.
  int max_defrag_moves_per_round = 8;
  // orrery: Tiresias' discretised LAS inside each tier with more queues (the paper's K-queue
  // form): a job's level is how many of the thresholds las_threshold_gpu_ms x las_level_factor^k
  // (k = 0 .. las_levels - 2) its attained service has passed. A waiting job may cut (or shrink) a
  // running job of its own tier whose level is higher, when the cut pays (cut_gib_per_s). 1..4.
  int las_levels = 4;
  std::int64_t las_level_factor = 4;
  // orrery: the starvation cap per tier (premium, standard, basic; milliseconds of wait since
  // admission): a job that has waited this long goes ahead of every other job of its tier (the
  // least attained service first) and may cut a job of its tier with more than twice its attained
  // service that has run at least the cap; placed, it is not cut inside its tier for the cap (a
  // quantum). (Twice: on a device type whose tier's demand never ends, starving jobs with about
  // as much service took turns every cap, 371,126 cuts on one run of a trace variant; each turn
  // now at least doubles the service between two cuts of a job.) <= 0: no cap for the tier. Premium only by
  // default: caps of 30 min and 4 h for standard and basic made average JCT and the tails worse on
  // every synthetic workload measured (docs/scheduling.md). Premium's is 2 min: its p99 wait is
  // the cap plus the victims' cut and its restore, and the tier's promise is 5 min (with 5 min,
  // the trace's cluster at load 1.1 had a premium p99 wait of 7.1-7.5 min; docs/scheduling.md).
  std::array<std::int64_t, 3> starvation_cap_ms = {120'000, 0, 0};
  // orrery: the bound on any job's wait, whatever its tier (milliseconds since it started waiting;
  // <= 0: none). A job that has waited this long is overdue: overdue jobs are placed before every
  // other waiting job, the longest waiting first, and room is made for the oldest of each device
  // type by the usual cuts (a lower tier's jobs, INV-TIER, and inside its own tier by its rules).
  // Placed, an overdue job is not cut, shrunk or moved by a higher tier before it has run
  // overdue_quantum_ms (its own tier's rules are those of any job). Without it the tiers' order
  // bounds nothing on a device type whose higher tiers alone ask more than it has: a lower tier's
  // job there waited until their demand ended (135 days on a variant of the trace;
  // docs/scheduling.md, "Starvation across tiers").
  // 72 h: 24 h bounded the trace variant's waits as well, but cost the 1M-job synthetic run's
  // standard tier (p99 wait 417 s -> 33 h) as its overloaded basic gangs went first.
  // The quantum, 24 h: with 1 h a lower tier's job on such a type ran an hour in every 73 (cut by
  // the higher tier once its quantum was over, overdue again 72 h later), and its completion
  // time, not its wait, went unbounded (docs/scheduling.md, "Starvation across tiers").
  std::int64_t overdue_cap_ms = 259'200'000;     // 72 h
  std::int64_t overdue_quantum_ms = 86'400'000;  // 24 h
  // orrery: the rate (GiB/s) at which a job's state (world x memory per worker) is cut and restored
  // again: what a preemption or shrink costs its victim's devices, weighed against what the waiting
  // job has waited before a cut inside a tier is made. The default is what the runtime measured
  // (docs/performance.md: checkpoint 0.46-0.69 GB/s, restore 0.94-1.40 GB/s); orrery-sim sets it
  // from its own cost model. 0: cuts inside a tier are never weighed (always made).
  double cut_gib_per_s = 0.33;
  // orrery: a victim search that found nothing for a waiting job is not repeated for it for this
  // long (a blocked gang would cost a walk over up to max_victim_candidates running jobs every
  // round, for nothing: the largest part of a 1M-job run's time before).
  std::int64_t search_backoff_ms = 60'000;
};

class Planner {
 public:
  virtual ~Planner() = default;
  virtual std::string_view name() const = 0;
  virtual void job_changed(const SchedulerCore& core, int job) = 0;
  // A job of a core recovered from its journal (orrery-core restarted): `since_ms` is when it
  // entered its present state by the journal's times (-1: unknown; then now). A waiting job's wait
  // (its starvation and overdue clocks) and a running job's run (its protection against cuts)
  // count from then, not from the restart. `waited_ms`: how long it waited before it was last
  // placed or resumed (-1: unknown), for the protections a job placed after a long wait has
  // (orrery's quanta). core/policy/entered_times.h computes both from the replay.
  virtual void job_recovered(const SchedulerCore& core, int job, std::int64_t since_ms, std::int64_t waited_ms) = 0;
  virtual void plan(const SchedulerCore& core, PlanContext& ctx) = 0;
};

// "orrery", "fifo", "tiresias" or "afs"; nullptr for any other name.
std::unique_ptr<Planner> make_planner(std::string_view name, const PlannerOptions& options = {});
// The names make_planner knows, for help texts and errors.
const std::vector<std::string>& planner_names();

}  // namespace orrery::core::policy
