#include "core/policy/job_book.h"

#include <algorithm>
#include <climits>

namespace orrery::core::policy {

using spec::EventKind;
using spec::JobState;

void JobBook::update(const SchedulerCore& core, int job) {
  if (job < 0) return;
  if (static_cast<std::size_t>(job) >= where_.size()) {
    where_.resize(static_cast<std::size_t>(job) + 1, Where::kNone);
    key_of_.resize(where_.size());
  }
  auto& w = where_[static_cast<std::size_t>(job)];
  switch (w) {
    case Where::kSubmitted: submitted_.erase(job); break;
    case Where::kWaiting: waiting_.erase({key_of_[static_cast<std::size_t>(job)], job}); break;
    case Where::kRunning:
      running_.erase(job);
      running_by_[{core.cluster().jobs[job].dtype, core.cluster().jobs[job].tier}].erase(job);
      break;
    case Where::kNone: break;
  }
  w = Where::kNone;
  if (auto c = cut_for_.find(job); c != cut_for_.end() && core.state(job) != JobState::kCheckpointing) {
    helped_.erase(helped_.find(c->second));
    cut_for_.erase(c);
  }
  switch (core.state(job)) {
    case JobState::kSubmitted:
      submitted_.insert(job);
      w = Where::kSubmitted;
      break;
    case JobState::kQueued:
    case JobState::kSuspended:
      key_of_[static_cast<std::size_t>(job)] = key_(core, job);
      waiting_.insert({key_of_[static_cast<std::size_t>(job)], job});
      w = Where::kWaiting;
      break;
    case JobState::kRunning:
      running_.insert(job);
      running_by_[{core.cluster().jobs[job].dtype, core.cluster().jobs[job].tier}].insert(job);
      w = Where::kRunning;
      break;
    default: break;
  }
}

void JobBook::admit_all(const SchedulerCore& core, PlanContext& ctx) {
  std::vector<int> ids(submitted_.begin(), submitted_.end());
  // Premium admission is bounded by the reserve: once a premium job of some size is refused, so
  // is every larger one this round.
  std::int64_t refused_min = INT64_MAX;
  for (int j : ids) {
    const auto& jv = core.cluster().jobs[j];
    const bool premium = jv.tier == static_cast<std::int64_t>(spec::Tier::kPremium);
    if (premium && jv.min_dev >= refused_min) continue;
    Decision d;
    d.event = EventKind::kAdmit;
    d.origin = spec::Origin::kPlanner;
    d.job = j;
    if (core.accepts(d)) ctx.propose(d);  // premium beyond its reserve waits for admission
    else if (premium) refused_min = std::min(refused_min, jv.min_dev);
  }
}

int JobBook::place_waiting(const SchedulerCore& core, PlanContext& ctx, const PlannerOptions& o,
                           bool strict, const std::function<void(int)>& blocked) {
  const int types = static_cast<int>(core.fleet().device_types.size());
  std::vector<int> failed(static_cast<std::size_t>(types), 0);
  int full = 0;  // device types out of budget
  int placed = 0;
  // A proposal changes only its own job's entry (it leaves the set): the next one stays valid.
  for (auto it = waiting_.begin(); it != waiting_.end() && full < types;) {
    const int j = it->second;
    ++it;
    const auto t = static_cast<std::size_t>(core.cluster().jobs[j].dtype);
    if (failed[t] >= (strict ? 1 : o.max_failed_tries_per_type)) continue;
    if (ctx.cut_pending(j)) continue;
    const auto ev = core.state(j) == JobState::kQueued ? EventKind::kPlace : EventKind::kResume;
    auto p = placer(core).propose(j, ev);
    // A kOk proposal is one the core accepts now: the placer asked it (gang_placer.h).
    if (p.kind == Proposal::Kind::kOk && ctx.propose(p.decision)) {
      ++placed;
      continue;
    }
    if (p.kind != Proposal::Kind::kOk) ctx.note(j, p.why);
    // Room can be made only for a job that fits the fleet at all.
    if (blocked && p.kind == Proposal::Kind::kRetryLater) blocked(j);
    if (++failed[t] == (strict ? 1 : o.max_failed_tries_per_type)) ++full;
  }
  return placed;
}

}  // namespace orrery::core::policy
