#include "core/policy/wait_lanes.h"

namespace orrery::core::policy {

void WaitLanes::add(std::int64_t cls, std::int64_t dtype, int tenant, const WaitEntry& e) {
  const auto t = static_cast<std::size_t>(cls), d = static_cast<std::size_t>(dtype);
  if (slots_.size() <= t) slots_.resize(t + 1);
  if (slots_[t].size() <= d) slots_[t].resize(d + 1);
  Slot& s = slots_[t][d];
  TenantLane& lane = s.by_tenant[tenant];
  const bool was_empty = lane.jobs.empty();
  if (!lane.jobs.insert(e).second) return;
  ++size_;
  if (was_empty) {
    lane.at = s.nonempty.size();
    s.nonempty.push_back({tenant, &lane.jobs});
  }
}

void WaitLanes::remove(std::int64_t cls, std::int64_t dtype, int tenant, const WaitEntry& e) {
  Slot& s = slots_[static_cast<std::size_t>(cls)][static_cast<std::size_t>(dtype)];
  TenantLane& lane = s.by_tenant[tenant];
  if (lane.jobs.erase(e) == 0) return;
  --size_;
  if (!lane.jobs.empty()) return;
  // Out of the non-empty lanes: the last one takes its place.
  const Lane last = s.nonempty.back();
  s.nonempty[lane.at] = last;
  s.by_tenant.find(last.tenant)->second.at = lane.at;
  s.nonempty.pop_back();
}

const std::vector<WaitLanes::Lane>& WaitLanes::lanes(std::int64_t cls, std::int64_t dtype) const {
  static const std::vector<Lane> none;
  const auto t = static_cast<std::size_t>(cls), d = static_cast<std::size_t>(dtype);
  if (t >= slots_.size() || d >= slots_[t].size()) return none;
  return slots_[t][d].nonempty;
}

}  // namespace orrery::core::policy
