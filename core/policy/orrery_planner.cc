#include "core/policy/orrery_planner.h"

#include <algorithm>
#include <tuple>

#include "core/policy/victims.h"
#include "spec/model.h"

namespace orrery::core::policy {

using spec::EventKind;

OrreryPlanner::OrreryPlanner(const PlannerOptions& o)
    : o_(o), book_([o](const SchedulerCore& core, int job) {
        const auto& j = core.cluster().jobs[job];
        // Class: the tier, then (as in Tiresias' discretised LAS) whether the job has had its
        // turn; inside a class tenants share fairly, inside a tenant least attained first.
        const std::int64_t had_turn = j.attained >= o.las_threshold_gpu_ms ? 1 : 0;
        return JobBook::Key{2 * j.tier + had_turn, j.attained, job};
      }, /*by_tenant=*/true) {}

void OrreryPlanner::plan(const SchedulerCore& core, PlanContext& ctx) {
  book_.admit_all(core, ctx);
  int searches = 0;  // each a walk over the running jobs: bounded per round
  book_.place_waiting(core, ctx, o_, /*strict=*/false, [&](int ben) {
    if (book_.helped(ben) || searches >= o_.max_cuts_per_round) return;
    ++searches;
    free_for(core, ctx, ben);
  });
  if (book_.waiting() == 0) grow(core, ctx);
}

bool OrreryPlanner::free_for(const SchedulerCore& core, PlanContext& ctx, int ben) {
  const spec::Concrete d;
  const auto& s = core.cluster();
  const auto& bj = s.jobs[ben];
  // Candidates: running jobs of a strictly lower tier whose devices the guard lets go for `ben`.
  int shrink = -1;
  std::int64_t shrink_to = 0;
  std::vector<int> candidates;
  auto lost = [&](int v) { return s.jobs[v].progress - std::max<std::int64_t>(s.jobs[v].ckpt, 0); };
  const TenantShares& shares = book_.shares();
  auto tenant = [&](int j) { return core.job_info(j).tenant; };
  // The lowest tier first, then the tenant holding most of it, then the least work lost.
  auto preempt_key = [&](int v) {
    return std::tuple(-s.jobs[v].tier, -shares.held(s.jobs[v].tier, tenant(v)), lost(v),
                      -s.jobs[v].devices);  // smaller is better
  };
  // Fair share among tenants inside the tier: `ben`'s tenant, with `ben` placed, would hold no
  // more than the tier's equal split, so it may take devices from a tenant that, without the
  // victim, would still hold at least as much (the move narrows the gap and never reverses it).
  const std::int64_t ben_held = shares.held(bj.tier, tenant(ben)) + bj.min_dev;
  const bool ben_poor = ben_held <= shares.equal_share(bj.tier);
  // The beneficiary's device type only (no other frees devices it can use), the lowest tier first.
  std::vector<int> pool;
  for (std::int64_t tier = spec::kNumTiers - 1; tier >= bj.tier; --tier)
    for (int v : book_.running(bj.dtype, tier)) {
      if (static_cast<int>(pool.size()) >= o_.max_victim_candidates) break;
      pool.push_back(v);
    }
  for (int v : pool) {
    const auto& vj = s.jobs[v];
    // A lower tier, or (fair share inside a tier) a job of the same tier that has had a long
    // turn already while `ben` has had almost none.
    const bool same_tier_turn =
        vj.tier == bj.tier &&
        ((vj.attained >= o_.las_threshold_gpu_ms && bj.attained < o_.las_threshold_gpu_ms) ||
         (ben_poor && tenant(v) != tenant(ben) && shares.held(vj.tier, tenant(v)) - vj.devices >= ben_held));
    if ((vj.tier < bj.tier || (vj.tier == bj.tier && !same_tier_turn)) || ctx.cut_pending(v)) continue;
    if (!spec::favoured(d, s, ben, v) || !spec::fits_devices_of(d, s, ben, v)) continue;
    candidates.push_back(v);
    if (vj.tier == bj.tier || shrink >= 0) continue;  // a shrink only for a higher tier
    // The largest device count the job may shrink to (a divisor of its world within the splice
    // limit, at least min_devices) that frees the beneficiary's smallest gang.
    for (std::int64_t c = vj.devices - bj.min_dev; c >= vj.min_dev && shrink < 0; --c)
      if (vj.world % c == 0 && vj.world / c <= spec::kSpliceLimit) {
        shrink = v;
        shrink_to = c;
      }
  }
  // A shrink (the first candidate, lowest tier first, that can free the whole smallest gang):
  // nothing is lost, the job runs on with more workers a device.
  if (shrink >= 0) {
    const auto& vj = s.jobs[shrink];
    Decision p;
    p.event = EventKind::kResizeDown;
    p.origin = spec::Origin::kPlanner;
    p.job = shrink;
    p.beneficiary = ben;
    p.splice = vj.world / shrink_to;
    p.devices.assign(vj.held.begin(), vj.held.begin() + shrink_to);
    if (core.accepts(p) && ctx.propose(p)) return true;
  }
  // Else preemptions, the lowest tier first, then the least work lost since the last
  // checkpoint, as many as cover the beneficiary's smallest gang (or none: victims.h).
  std::stable_sort(candidates.begin(), candidates.end(),
                   [&](int a, int b) { return preempt_key(a) < preempt_key(b); });
  return preempt_for(core, ctx, book_, victims_covering(core, candidates, bj.min_dev), ben) > 0;
}

void OrreryPlanner::grow(const SchedulerCore& core, PlanContext& ctx) {
  int grown = 0;
  std::vector<int> candidates;
  for (int j : book_.running()) {
    const auto& jv = core.cluster().jobs[j];
    if (jv.devices < jv.max_dev && !ctx.cut_pending(j)) candidates.push_back(j);
    if (static_cast<int>(candidates.size()) >= o_.max_grows_per_round) break;
  }
  for (int j : candidates) {
    auto p = book_.placer(core).propose(j, EventKind::kResizeUp);
    if (p.kind != Proposal::Kind::kOk) break;  // no idle devices of any use left
    if (static_cast<std::int64_t>(p.decision.devices.size()) <= core.cluster().jobs[j].devices) continue;
    if (ctx.propose(p.decision) && ++grown >= o_.max_grows_per_round) break;  // checked by the placer
  }
}

}  // namespace orrery::core::policy
