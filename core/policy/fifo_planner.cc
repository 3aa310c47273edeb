#include "core/policy/fifo_planner.h"

namespace orrery::core::policy {

FifoPlanner::FifoPlanner(const PlannerOptions& o)
    : o_(o), book_([](const SchedulerCore&, int job) { return JobBook::Key{job, 0, 0}; }) {
  book_.set_one_node_gangs(o.one_node_gangs);
}

void FifoPlanner::plan(const SchedulerCore& core, PlanContext& ctx) {
  book_.admit_all(core, ctx);
  book_.place_waiting(core, ctx, o_, /*strict=*/true, nullptr);
}

}  // namespace orrery::core::policy
