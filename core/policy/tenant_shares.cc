#include "core/policy/tenant_shares.h"

namespace orrery::core::policy {

void TenantShares::change(std::int64_t tier, int tenant, std::int64_t held, std::int64_t waiting) {
  Tier& t = tiers_[static_cast<std::size_t>(tier)];
  auto it = t.tenants.try_emplace(tenant).first;
  it->second.held += held;
  it->second.waiting += waiting;
  t.held += held;
  if (!it->second.active()) t.tenants.erase(it);
}

void TenantShares::add_held(std::int64_t tier, int tenant, std::int64_t devices) {
  if (devices != 0) change(tier, tenant, devices, 0);
}

void TenantShares::add_waiting(std::int64_t tier, int tenant, int jobs) { change(tier, tenant, 0, jobs); }

std::int64_t TenantShares::held(std::int64_t tier, int tenant) const {
  const auto& ts = tiers_[static_cast<std::size_t>(tier)].tenants;
  auto it = ts.find(tenant);
  return it == ts.end() ? 0 : it->second.held;
}

std::int64_t TenantShares::equal_share(std::int64_t tier) const {
  const Tier& t = tiers_[static_cast<std::size_t>(tier)];
  return t.tenants.empty() ? 0 : t.held / static_cast<std::int64_t>(t.tenants.size());
}

}  // namespace orrery::core::policy
