// Tiresias-style two-dimensional least-attained-service (Gu et al., "Tiresias: A GPU Cluster
// Manager for Distributed Deep Learning", NSDI 2019), discretised as in the paper: two queues
// split at an attained-service threshold (GPU-time, the "2D" of devices x time), FIFO inside a
// queue, work-conserving placement in queue order, and preemption of a running job of the second
// queue for a waiting job of the first. Tiers play no part in its order; the spec's preemption
// guard (INV-TIER) still binds it, so it never preempts a job of a higher tier, nor one with less
// attained service in the same tier. A baseline for comparison, in the same engine.
#pragma once

#include "core/policy/job_book.h"
#include "core/policy/planner.h"

namespace orrery::core::policy {

class TiresiasPlanner final : public Planner {
 public:
  explicit TiresiasPlanner(const PlannerOptions& o);
  std::string_view name() const override { return "tiresias"; }
  void job_changed(const SchedulerCore& core, int job) override { book_.update(core, job); }
  void job_recovered(const SchedulerCore& core, int job, std::int64_t since_ms, std::int64_t /*waited_ms*/) override {
    book_.update(core, job, since_ms);
  }
  void plan(const SchedulerCore& core, PlanContext& ctx) override;

 private:
  int queue_of(const SchedulerCore& core, int job) const;
  PlannerOptions o_;
  JobBook book_;
};

}  // namespace orrery::core::policy
