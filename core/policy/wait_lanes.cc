#include "core/policy/wait_lanes.h"

namespace orrery::core::policy {

void WaitLanes::add(std::int64_t cls, std::int64_t dtype, int tenant, const WaitEntry& e) {
  const auto t = static_cast<std::size_t>(cls), d = static_cast<std::size_t>(dtype);
  if (slots_.size() <= t) slots_.resize(t + 1);
  if (slots_[t].size() <= d) slots_[t].resize(d + 1);
  Slot& s = slots_[t][d];
  if (s.by_tenant[tenant].insert(e).second) ++size_;
  s.nonempty.insert(tenant);
}

void WaitLanes::remove(std::int64_t cls, std::int64_t dtype, int tenant, const WaitEntry& e) {
  Slot& s = slots_[static_cast<std::size_t>(cls)][static_cast<std::size_t>(dtype)];
  auto& jobs = s.by_tenant[tenant];
  if (jobs.erase(e) != 0) --size_;
  if (jobs.empty()) s.nonempty.erase(tenant);
}

std::vector<WaitLanes::Lane> WaitLanes::lanes(std::int64_t cls, std::int64_t dtype) const {
  std::vector<Lane> out;
  const auto t = static_cast<std::size_t>(cls), d = static_cast<std::size_t>(dtype);
  if (t >= slots_.size() || d >= slots_[t].size()) return out;
  const Slot& s = slots_[t][d];
  out.reserve(s.nonempty.size());
  for (int tenant : s.nonempty) out.push_back({tenant, &s.by_tenant.at(tenant)});
  return out;
}

}  // namespace orrery::core::policy
