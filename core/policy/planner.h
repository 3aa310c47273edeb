// The planner interface: a scheduling policy as an untrusted planner. It reads the core's state
// and proposes decisions; whoever runs it (orrery-core's service, orrery-sim) carries them out,
// and the core commits each one only if the spec's guards hold. A proposal the core rejects is a
// policy bug and is counted, so planners ask the core first (SchedulerCore::check: the same
// guards, nothing committed).
//
// Run by the caller:
//   - job_changed(core, job) after every commit that changed a job's state or held devices,
//     whoever decided it (runtime reports, operators, the planner's own proposals);
//   - plan(core, ctx) once per scheduling round. The planner proposes through ctx one decision at
//     a time and sees the state the core is in after each.
//
// Planners: "orrery" (tiers, fair share, shrink before preempt, growth; core/policy/
// orrery_planner.h), "fifo" (FIFO without preemption) and "tiresias" (two-dimensional
// least-attained-service, core/policy/tiresias_planner.h) and "afs" (AFS, an elastic baseline from
// NSDI'21, core/policy/afs_planner.h). docs/policies.md.
#pragma once

#include <cstdint>
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
};

struct PlannerOptions {
  // Tiresias: the attained service (GPU-milliseconds) that moves a job from the first queue to the
  // second (the paper's discretised 2D-LAS with two queues).
  std::int64_t las_threshold_gpu_ms = 3'600'000;  // one GPU-hour
  // At most this many placements tried and failed per device type in a round before the type is
  // considered full (bounds a round's cost on long queues). 32: on 300,000 synthetic jobs on
  // 100,000 GPUs, against 64, a round costs 23 % less for a 5 % longer average JCT.
  int max_failed_tries_per_type = 32;
  // orrery: grow elastic jobs into idle capacity (at most this many resize-ups a round).
  int max_grows_per_round = 64;
  // orrery, tiresias: waiting jobs a round looks for victims for, at most.
  int max_cuts_per_round = 16;
  // orrery, tiresias: running jobs a victim search looks at, at most (of the beneficiary's device
  // type, the lowest tier first); bounds a search on large fleets.
  int max_victim_candidates = 256;
  // orrery: a preemption inside a tier (fair share) cuts at most this many jobs for one waiting
  // job; a waiting job that needs more is helped only by lower tiers' jobs.
  int max_same_tier_victims = 1;
  // orrery: defragmentation by migration (docs/policies.md). A move costs the moved job's devices
  // for the time its state takes to checkpoint, transfer and restore at this rate (GiB/s, the
  // whole path); it is made only when the waiting job's devices times the time it has waited
  // (what it can expect to wait on) outweigh the moves' cost. 0 turns defragmentation off.
  double migration_gib_per_s = 0.5;
  // orrery: migrations one round starts for defragmentation, at most.
  int max_defrag_moves_per_round = 8;
};

class Planner {
 public:
  virtual ~Planner() = default;
  virtual std::string_view name() const = 0;
  virtual void job_changed(const SchedulerCore& core, int job) = 0;
  virtual void plan(const SchedulerCore& core, PlanContext& ctx) = 0;
};

// "orrery", "fifo", "tiresias" or "afs"; nullptr for any other name.
std::unique_ptr<Planner> make_planner(std::string_view name, const PlannerOptions& options = {});
// The names make_planner knows, for help texts and errors.
const std::vector<std::string>& planner_names();

}  // namespace orrery::core::policy
