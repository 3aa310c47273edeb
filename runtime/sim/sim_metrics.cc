#include "runtime/sim/sim_metrics.h"

#include <algorithm>
#include <cmath>

namespace orrery::sim {

namespace {

using spec::EventKind;
using spec::JobState;

// The q-quantile of sorted values (nearest rank).
double quantile(const std::vector<double>& sorted, double q) {
  if (sorted.empty()) return 0;
  auto idx = static_cast<std::size_t>(std::ceil(q * static_cast<double>(sorted.size())));
  return sorted[std::min(sorted.size() - 1, idx == 0 ? 0 : idx - 1)];
}
double mean(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return v.empty() ? 0 : s / static_cast<double>(v.size());
}

Action action_of(EventKind ev) {
  switch (ev) {
    case EventKind::kPreempt: return Action::kPreemption;
    case EventKind::kMigrate: return Action::kMigration;
    case EventKind::kResizeUp:
    case EventKind::kResizeDown: return Action::kResize;
    default: return Action::kNone;
  }
}

}  // namespace

void ActionLedger::committed(int job, EventKind ev, JobState to, std::int64_t devices_before, std::int64_t now_ms) {
  if (job < 0) return;
  const auto i = static_cast<std::size_t>(job);
  if (i >= open_.size()) open_.resize(i + 1);
  auto& o = open_[i];
  if (o.action != Action::kNone) {
    costs_[static_cast<std::size_t>(o.action)].stalled_gpu_s +=
        static_cast<double>(devices_before) * static_cast<double>(now_ms - o.since_ms) / 1000.0;
    o.since_ms = now_ms;
  }
  if (const Action a = action_of(ev); a != Action::kNone) {
    ++costs_[static_cast<std::size_t>(a)].count;
    o = {a, now_ms};
  }
  // Over when the job runs again, waits without devices for a placement (a failure's requeue), or
  // ends. (Suspended after a preemption holds nothing, so its wait costs nothing here: it is
  // queueing; the restore when it resumes is still the preemption's.)
  if (to == JobState::kRunning || to == JobState::kQueued || to == JobState::kCompleted ||
      to == JobState::kFailed || to == JobState::kCancelled)
    o.action = Action::kNone;
}

void ActionLedger::redone(int job, double gpu_s) {
  const auto i = static_cast<std::size_t>(job);
  if (i < open_.size() && open_[i].action != Action::kNone)
    costs_[static_cast<std::size_t>(open_[i].action)].redone_gpu_s += gpu_s;
}

void JobStats::completed(spec::Tier tier, int tenant, double jct_s, double queue_s, double sla_queue_s, bool gang) {
  const auto t = static_cast<std::size_t>(tier);
  if (gang) {
    ++gangs_[t];
    gang_queue_sum_[t] += queue_s;
  }
  jct_.push_back(jct_s);
  tier_jct_[t].push_back(jct_s);
  tier_queue_[t].push_back(queue_s);
  if (queue_s <= sla_queue_s) ++sla_ok_[t];
  if (tenant >= 0 && static_cast<std::size_t>(tenant) < tenant_done_.size()) {
    tenant_queue_sum_[static_cast<std::size_t>(tenant)] += queue_s;
    ++tenant_done_[static_cast<std::size_t>(tenant)];
  }
}

JobStats::Summary JobStats::summarize() {
  Summary s;
  s.avg_jct_s = mean(jct_);
  std::vector<double> sorted = jct_;
  std::sort(sorted.begin(), sorted.end());
  s.p50_jct_s = quantile(sorted, 0.5);
  s.p95_jct_s = quantile(sorted, 0.95);
  s.p99_jct_s = quantile(sorted, 0.99);
  for (std::size_t t = 0; t < 3; ++t) {
    auto& tr = s.tiers[t];
    tr.jobs = static_cast<std::int64_t>(tier_jct_[t].size());
    tr.avg_jct_s = mean(tier_jct_[t]);
    tr.avg_queue_s = mean(tier_queue_[t]);
    tr.gang_jobs = gangs_[t];
    const double all_sum = tr.avg_queue_s * static_cast<double>(tr.jobs);
    tr.avg_queue_gang_s = gangs_[t] ? gang_queue_sum_[t] / static_cast<double>(gangs_[t]) : 0;
    tr.avg_queue_one_s = tr.jobs > gangs_[t] ? (all_sum - gang_queue_sum_[t]) / static_cast<double>(tr.jobs - gangs_[t]) : 0;
    std::sort(tier_jct_[t].begin(), tier_jct_[t].end());
    std::sort(tier_queue_[t].begin(), tier_queue_[t].end());
    tr.p50_jct_s = quantile(tier_jct_[t], 0.5);
    tr.p99_jct_s = quantile(tier_jct_[t], 0.99);
    tr.p99_queue_s = quantile(tier_queue_[t], 0.99);
    tr.max_queue_s = tier_queue_[t].empty() ? 0 : tier_queue_[t].back();
    tr.sla_attainment = tr.jobs ? static_cast<double>(sla_ok_[t]) / static_cast<double>(tr.jobs) : 0;
  }
  for (std::size_t t = 0; t < tenant_done_.size(); ++t)
    s.tenant_avg_queue.emplace_back(tenant_done_[t],
                                    tenant_done_[t] ? tenant_queue_sum_[t] / static_cast<double>(tenant_done_[t]) : 0);
  s.jct_s = std::move(jct_);
  return s;
}

}  // namespace orrery::sim
