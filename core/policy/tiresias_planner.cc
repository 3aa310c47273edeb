#include "core/policy/tiresias_planner.h"

#include <algorithm>

#include "core/policy/victims.h"
#include "spec/model.h"

namespace orrery::core::policy {

TiresiasPlanner::TiresiasPlanner(const PlannerOptions& o)
    : o_(o), book_([this](const SchedulerCore& core, int job) {
        return JobBook::Key{queue_of(core, job), job, 0};
      }) {
  book_.set_one_node_gangs(o.one_node_gangs);
}

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
    // Second-queue jobs the guard lets go for `ben` (none within its min_runtime_ms), as many as
    // cover what its smallest gang lacks (victims.h, cut_need), those that lose least first
    // (victims.h), then the most attained service.
    const CutNeed need = cut_need(core, book_, ben);
    if (need.devices == 0) return;
    std::vector<int> candidates;
    int looked = 0;
    std::int64_t next_candidate = INT64_MAX;  // when the first one passed over will qualify
    const auto& bj = core.cluster().jobs[ben];
    for (std::int64_t rank = spec::kNumRanks - 1; rank >= 0 && looked < o_.max_victim_candidates; --rank)
      for (int v : book_.running(bj.dtype, rank)) {
        if (++looked > o_.max_victim_candidates) break;
        if (ctx.cut_pending(v) || protected_now(core, book_, v)) continue;
        // Its queue by its service as of now (PlanContext::unreported_gpu_ms), committed if kept;
        // still in the first queue: noted for when it will pass the threshold.
        if (const auto at = reaches_service_at(core, ctx, v, o_.las_threshold_gpu_ms); at > core.now_ms()) {
          next_candidate = std::min(next_candidate, at);
          continue;
        }
        ctx.freshen(v);
        if (!spec::favoured(d, core.cluster(), ben, v) || !spec::fits_devices_of(d, core.cluster(), ben, v)) continue;
        candidates.push_back(v);
      }
    std::stable_sort(candidates.begin(), candidates.end(), [&](int a, int b) {
      return core.cluster().jobs[a].attained > core.cluster().jobs[b].attained;
    });
    std::vector<VictimCandidate> vc;
    vc.reserve(candidates.size());
    for (int v : candidates)
      vc.push_back({v, core.cluster().jobs[v].devices, loss_per_device_ms(core, book_, v),
                    mode_rank(core.job_info(v).mode), 0});
    CutNeed::Option chosen;
    if (preempt_for(core, ctx, book_, cover_need(core, book_, vc, need, &chosen), ben) > 0)
      claim_free(core, book_, ben, need, chosen);
    else if (next_candidate != INT64_MAX)
      ctx.replan_at(next_candidate);  // a job crossing the threshold may then be enough
  });
}

}  // namespace orrery::core::policy
