// AFS, Apathetic Future Share (Hwang, Kim, Kim, Shin and Park, "Elastic Resource Sharing for
// Distributed Deep Learning", NSDI 2021), as a baseline elastic scheduler in the same engine.
//
// AFS-L hands out devices one step at a time to the job at the top of a pairwise order: of two
// jobs, the one expected to finish sooner gets the next device unless the other gains more
// throughput from it, relative to what it would then have ("apathetic" to future arrivals: it
// does not hold devices back for them). Here, per device type:
//   - Throughput model: a job on c devices (world W, c dividing W, at most kSpliceLimit workers a
//     device) runs at T(c) = c / W of its full speed, less kSpliceOverhead when spliced (c < W);
//     a step goes from c to the next device count in the job's elastic range.
//   - Weight of a step c -> c': (T(c') - T(c)) / T(c') per device added, the paper's
//     (T(n+1) - T(n)) / T(n+1) for one device; a job's first step (0 -> min_devices, its smallest
//     gang, taken whole) has weight 1, so every waiting job comes before any growth.
//   - Expected remaining time: orrery's core, like a real cluster, does not know how long a job
//     will run (the paper's AFS-L takes lengths as known). The least attained service stands in
//     for the shortest remaining time, as in Tiresias' non-clairvoyant LAS.
// A round: waiting jobs are placed in order of least attained service (work-conserving); one that
// does not fit takes devices from running jobs of its type with more attained service, first by
// shrinking an elastic job whose last step had the lowest weight (nothing lost: it runs on,
// spliced), else by preempting those with the most attained service (the guard's INV-TIER binds it
// like every planner). When nothing of a type waits, idle devices go to running elastic jobs'
// next steps, the highest weight first. Not from the paper, to keep it from thrashing: a running
// job gives way only to a job with at least las_threshold_gpu_ms (one GPU-hour) less attained
// service, and not within its min_runtime_ms (victims.h); at most max_cuts_per_round waiting jobs
// look for devices a round and max_grows_per_round jobs grow. Tiers play no part in its order.
// docs/policies.md, "AFS".
#pragma once

#include <cstdint>

#include "core/policy/job_book.h"
#include "core/policy/planner.h"

namespace orrery::core::policy {

class AfsPlanner final : public Planner {
 public:
  // The speed a spliced job loses beyond W / D in the throughput model (the runtime's modelled
  // default, docs/simulator.md: --splice-overhead).
  static constexpr double kSpliceOverhead = 0.01;

  explicit AfsPlanner(const PlannerOptions& o);
  std::string_view name() const override { return "afs"; }
  void job_changed(const SchedulerCore& core, int job) override { book_.update(core, job); }
  void job_recovered(const SchedulerCore& core, int job, std::int64_t since_ms, std::int64_t /*waited_ms*/) override {
    book_.update(core, job, since_ms);
  }
  void plan(const SchedulerCore& core, PlanContext& ctx) override;

  // The model's throughput of a job of `world` workers on `c` devices, and the weight of a step
  // from `c` to `next` devices (c == 0: a first step, weight 1). Public for the tests.
  static double throughput(std::int64_t world, std::int64_t c);
  static double step_weight(std::int64_t world, std::int64_t c, std::int64_t next);
  // The next device count above `c` in [min_dev, max_dev] that splits `world` (-1: none).
  static std::int64_t next_count(std::int64_t world, std::int64_t min_dev, std::int64_t max_dev, std::int64_t c);

 private:
  void make_room(const SchedulerCore& core, PlanContext& ctx, int ben);
  void grow(const SchedulerCore& core, PlanContext& ctx);
  PlannerOptions o_;
  JobBook book_;
};

}  // namespace orrery::core::policy
