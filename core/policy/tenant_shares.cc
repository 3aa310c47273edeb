#include "core/policy/tenant_shares.h"

namespace orrery::core::policy {

void TenantShares::change(std::int64_t tier, int tenant, std::int64_t held, std::int64_t waiting) {
  Tier& t = tiers_[static_cast<std::size_t>(tier)];
  const auto i = static_cast<std::size_t>(tenant);
  if (i >= t.tenants.size()) t.tenants.resize(i + 1);
  Account& a = t.tenants[i];
  const bool was = a.active();
  a.held += held;
  a.waiting += waiting;
  t.held += held;
  t.active += static_cast<std::int64_t>(a.active()) - static_cast<std::int64_t>(was);
}

void TenantShares::add_held(std::int64_t tier, int tenant, std::int64_t devices) {
  if (devices != 0) change(tier, tenant, devices, 0);
}

void TenantShares::add_waiting(std::int64_t tier, int tenant, int jobs) { change(tier, tenant, 0, jobs); }

std::int64_t TenantShares::held(std::int64_t tier, int tenant) const {
  const auto& ts = tiers_[static_cast<std::size_t>(tier)].tenants;
  const auto i = static_cast<std::size_t>(tenant);
  return i < ts.size() ? ts[i].held : 0;
}

std::int64_t TenantShares::equal_share(std::int64_t tier) const {
  const Tier& t = tiers_[static_cast<std::size_t>(tier)];
  return t.active == 0 ? 0 : t.held / t.active;
}

}  // namespace orrery::core::policy
