// FIFO without preemption, the baseline: jobs are admitted as they come and placed in submission
// order, per device type; a job that does not fit holds back every later job of its type (no
// backfilling), and nothing is ever preempted, shrunk, grown or moved.
#pragma once

#include "core/policy/job_book.h"
#include "core/policy/planner.h"

namespace orrery::core::policy {

class FifoPlanner final : public Planner {
 public:
  explicit FifoPlanner(const PlannerOptions& o);
  std::string_view name() const override { return "fifo"; }
  void job_changed(const SchedulerCore& core, int job) override { book_.update(core, job); }
  void job_recovered(const SchedulerCore& core, int job, std::int64_t since_ms, std::int64_t /*waited_ms*/) override {
    book_.update(core, job, since_ms);
  }
  void plan(const SchedulerCore& core, PlanContext& ctx) override;

 private:
  PlannerOptions o_;
  JobBook book_;
};

}  // namespace orrery::core::policy
