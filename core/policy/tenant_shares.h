// Fair share among tenants inside a tier (the orrery planner). A tenant's share of a tier is the
// devices its jobs of that tier hold now (placed, running, cutting: whatever SchedulerCore counts
// as held). Placement inside a tier goes to the tenant with the smallest share first (max-min
// fairness on one resource: each next device goes to the poorest tenant that can use it), its
// jobs in the planner's order; a preemption inside a tier may take devices from a tenant above
// the tier's equal split for one below it (OrreryPlanner). Kept up to date by JobBook::update(),
// so every question below costs O(1).
//
// Tenants are the core's ids (SchedulerCore::job_info(j).tenant; 0 is the default tenant), so a
// fleet without tenants has one, and the order inside a tier is the planner's plain order.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "spec/vocabulary.h"

namespace orrery::core::policy {

class TenantShares {
 public:
  // A job of `tier` and `tenant` now holds `devices` more (negative: fewer).
  void add_held(std::int64_t tier, int tenant, std::int64_t devices);
  // A job of `tier` and `tenant` started (+1) or stopped (-1) waiting.
  void add_waiting(std::int64_t tier, int tenant, int jobs);

  // Devices the tenant's jobs of `tier` hold.
  std::int64_t held(std::int64_t tier, int tenant) const;
  // The tier's equal split: the devices its jobs hold over the tenants that hold or wait in it.
  std::int64_t equal_share(std::int64_t tier) const;

 private:
  struct Account {
    std::int64_t held = 0;
    std::int64_t waiting = 0;
    bool active() const { return held > 0 || waiting > 0; }
  };
  struct Tier {
    std::vector<Account> tenants;  // by tenant id (the core's ids are dense)
    std::int64_t held = 0;
    std::int64_t active = 0;  // tenants holding or waiting
  };
  void change(std::int64_t tier, int tenant, std::int64_t held, std::int64_t waiting);
  std::array<Tier, spec::kNumTiers> tiers_;
};

}  // namespace orrery::core::policy
