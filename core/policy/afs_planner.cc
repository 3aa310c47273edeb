#include "core/policy/afs_planner.h"

#include <algorithm>
#include <tuple>
#include <vector>

#include "core/policy/victims.h"
#include "spec/model.h"

namespace orrery::core::policy {

using spec::EventKind;

AfsPlanner::AfsPlanner(const PlannerOptions& o)
    : o_(o), book_([](const SchedulerCore& core, int job) {
        // Every waiting job's first step weighs 1: the shortest expected (least attained) first.
        return JobBook::Key{0, core.cluster().jobs[job].attained, job};
      }) {
  book_.set_one_node_gangs(o.one_node_gangs);
}

double AfsPlanner::throughput(std::int64_t world, std::int64_t c) {
  if (c <= 0 || world <= 0) return 0;
  const double t = static_cast<double>(c) / static_cast<double>(world);
  return c < world ? t * (1.0 - kSpliceOverhead) : t;
}

double AfsPlanner::step_weight(std::int64_t world, std::int64_t c, std::int64_t next) {
  if (c <= 0) return 1;
  if (next <= c) return 0;
  const double t1 = throughput(world, next);
  return (t1 - throughput(world, c)) / t1 / static_cast<double>(next - c);
}

std::int64_t AfsPlanner::next_count(std::int64_t world, std::int64_t min_dev, std::int64_t max_dev, std::int64_t c) {
  for (std::int64_t n = std::max(c + 1, min_dev); n <= max_dev; ++n)
    if (world % n == 0 && world / n <= spec::kSpliceLimit) return n;
  return -1;
}

void AfsPlanner::plan(const SchedulerCore& core, PlanContext& ctx) {
  book_.admit_all(core, ctx);
  int searches = 0;  // each a walk over running jobs: bounded per round
  book_.place_waiting(core, ctx, o_, /*strict=*/false, [&](int ben) {
    if (book_.helped(ben) || searches >= o_.max_cuts_per_round) return;
    ++searches;
    make_room(core, ctx, ben);
  });
  grow(core, ctx);
}

void AfsPlanner::make_room(const SchedulerCore& core, PlanContext& ctx, int ben) {
  const spec::Concrete d;
  const auto& s = core.cluster();
  const auto& bj = s.jobs[ben];
  const CutNeed need = cut_need(core, book_, ben);  // what its smallest gang lacks (victims.h)
  if (need.devices == 0) return;
  // Running jobs of its type that have had at least a threshold more service, the most first.
  std::vector<int> pool;
  int looked = 0;
  std::int64_t next_candidate = INT64_MAX;  // when the first one passed over will qualify
  for (std::int64_t rank = spec::kNumRanks - 1; rank >= 0 && looked < o_.max_victim_candidates; --rank)
    for (int v : book_.running(bj.dtype, rank)) {
      if (++looked > o_.max_victim_candidates) break;
      if (ctx.cut_pending(v) || protected_now(core, book_, v)) continue;
      // Its service as of now (PlanContext::unreported_gpu_ms), committed if kept; too little yet:
      // noted for when it will have enough.
      if (const auto at = reaches_service_at(core, ctx, v, bj.attained + o_.las_threshold_gpu_ms); at > core.now_ms()) {
        next_candidate = std::min(next_candidate, at);
        continue;
      }
      ctx.freshen(v);
      if (!spec::favoured(d, s, ben, v) || !spec::fits_devices_of(d, s, ben, v)) continue;
      pool.push_back(v);
    }
  // None yet: a round when a job passed over will have had enough more service (a job crossing
  // the bound may then be enough).
  auto ask_later = [&] {
    if (next_candidate != INT64_MAX) ctx.replan_at(next_candidate);
  };
  if (pool.empty()) return ask_later();
  // A shrink first: the elastic (transparent) job whose last step weighed least, to the largest
  // count that frees what the beneficiary lacks (the whole gang from a job outside the region the
  // free devices were counted in: victims.h).
  int shrink = -1;
  std::int64_t shrink_to = 0;
  CutNeed::Option shrink_frees;
  double least = 2;
  for (int v : pool) {
    const auto& vj = s.jobs[v];
    if (vj.devices <= vj.min_dev || core.job_info(v).mode != spec::Preemption::kTransparent) continue;
    std::int64_t to = 0;
    const CutNeed::Option opt = need.for_victim(core, book_, v);
    const std::int64_t frees = opt.devices;
    for (std::int64_t c = vj.devices - frees; c >= vj.min_dev && to == 0; --c)
      if (vj.world % c == 0 && vj.world / c <= spec::kSpliceLimit) to = c;
    if (to == 0) continue;
    // The weight of its last step: from the count below its current one to it.
    std::int64_t below = 0;
    for (std::int64_t c = vj.devices - 1; c >= vj.min_dev && below == 0; --c)
      if (vj.world % c == 0 && vj.world / c <= spec::kSpliceLimit) below = c;
    const double w = step_weight(vj.world, below, vj.devices);
    if (w < least) {
      least = w;
      shrink = v;
      shrink_to = to;
      shrink_frees = opt;
    }
  }
  if (shrink >= 0 && shrink_for(core, ctx, shrink, shrink_to, ben)) {
    claim_free(core, book_, ben, need, shrink_frees);
    return;
  }
  // Else preemptions: the most attained service first (whole gangs covering its need, or none).
  std::stable_sort(pool.begin(), pool.end(), [&](int a, int b) { return s.jobs[a].attained > s.jobs[b].attained; });
  std::vector<VictimCandidate> vc;
  vc.reserve(pool.size());
  for (int v : pool)
    vc.push_back({v, s.jobs[v].devices, loss_per_device_ms(core, book_, v), mode_rank(core.job_info(v).mode), 0});
  CutNeed::Option chosen;
  if (preempt_for(core, ctx, book_, cover_need(core, book_, vc, need, &chosen), ben) > 0)
    claim_free(core, book_, ben, need, chosen);
  else
    ask_later();
}

void AfsPlanner::grow(const SchedulerCore& core, PlanContext& ctx) {
  // Running elastic jobs with a next step, by its weight (highest first), then least attained;
  // only of a type no job waits for (a waiting job's first step weighs 1, more than any growth).
  // Nothing to do where every type has jobs waiting (the usual case under load): no walk.
  if (!book_.some_type_without_waiting(core)) return;
  struct Step {
    double weight;
    std::int64_t attained;
    int job;
    std::int64_t next;
  };
  std::vector<Step> steps;
  for (const auto& [tier, j] : book_.growable()) {  // running transparent jobs below max_devices
    const auto& jv = core.cluster().jobs[j];
    if (ctx.cut_pending(j) || book_.waiting_of_type(jv.dtype) > 0) continue;
    const std::int64_t n = next_count(jv.world, jv.min_dev, jv.max_dev, jv.devices);
    if (n > 0) steps.push_back({step_weight(jv.world, jv.devices, n), jv.attained, j, n});
  }
  std::sort(steps.begin(), steps.end(), [](const Step& a, const Step& b) {
    return std::tie(b.weight, a.attained, a.job) < std::tie(a.weight, b.attained, b.job);
  });
  int grown = 0;
  for (const auto& st : steps) {
    if (grown >= o_.max_grows_per_round) break;
    // One step at a time (AFS-L hands out one device, here one valid count, per pick).
    auto p = book_.placer(core).propose(st.job, EventKind::kResizeUp, static_cast<int>(st.next));
    if (p.kind != Proposal::Kind::kOk) continue;  // no room near it: another job may still fit
    if (static_cast<std::int64_t>(p.decision.devices.size()) <= core.cluster().jobs[st.job].devices) continue;
    if (ctx.propose(p.decision)) ++grown;
  }
}

}  // namespace orrery::core::policy
