#include "core/policy/tiresias_planner.h"

#include "spec/model.h"

namespace orrery::core::policy {

TiresiasPlanner::TiresiasPlanner(const PlannerOptions& o)
    : o_(o), book_([this](const SchedulerCore& core, int job) {
        return JobBook::Key{queue_of(core, job), job, 0};
      }) {}

int TiresiasPlanner::queue_of(const SchedulerCore& core, int job) const {
  return core.cluster().jobs[job].attained < o_.las_threshold_gpu_ms ? 0 : 1;
}

void TiresiasPlanner::plan(const SchedulerCore& core, PlanContext& ctx) {
  book_.admit_all(core, ctx);
  int searches = 0;  // each a walk over the running jobs: bounded per round
  const spec::Concrete d;
  book_.place_waiting(core, ctx, o_, /*strict=*/false, [&](int ben) {
    if (queue_of(core, ben) != 0 || book_.helped(ben) || searches >= o_.max_cuts_per_round) return;
    ++searches;
    // The second-queue job with the most attained service that the guard lets go for `ben`.
    int victim = -1;
    for (int v : book_.running()) {
      if (queue_of(core, v) != 1 || ctx.cut_pending(v)) continue;
      if (!spec::favoured(d, core.cluster(), ben, v) || !spec::fits_devices_of(d, core.cluster(), ben, v)) continue;
      if (victim < 0 || core.cluster().jobs[v].attained > core.cluster().jobs[victim].attained) victim = v;
    }
    if (victim < 0) return;
    Decision p;
    p.event = spec::EventKind::kPreempt;
    p.origin = spec::Origin::kPlanner;
    p.job = victim;
    p.beneficiary = ben;
    if (core.check(p).ok() && ctx.propose(p)) book_.note_cut(core, victim, ben);
  });
}

}  // namespace orrery::core::policy
