#include "runtime/sim/fleet_types.h"

#include <algorithm>
#include <utility>

namespace orrery::sim {
namespace {

std::uint64_t mix(std::uint64_t x) {  // splitmix64: the job's device type choice
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

}  // namespace

FleetTypes::FleetTypes(const Workload& w, const core::Fleet& fleet)
    : count_(fleet.device_types.size(), 0), mem_(fleet.device_types.size(), 0),
      fleet_type_(fleet_type_ids(w, fleet)) {
  for (const auto& g : fleet.groups) {
    const auto t = static_cast<std::size_t>(g.type);
    count_[t] += g.count;
    mem_[t] = std::max(mem_[t], g.mem_mib);
  }
}

std::vector<std::pair<int, std::int64_t>> FleetTypes::holding(const Workload& w, int job, bool* allowed) const {
  const auto& sj = w.jobs[static_cast<std::size_t>(job)];
  std::vector<std::pair<int, std::int64_t>> ok;
  auto consider = [&](int t) {
    if (t < 0) return;
    if (allowed) *allowed = true;
    const auto i = static_cast<std::size_t>(t);
    if (count_[i] < sj.min_devices || mem_[i] < sj.mem_mib) return;
    for (auto& [u, c] : ok)
      if (u == t) return;
    ok.emplace_back(t, count_[i]);
  };
  if (sj.device_types == 0) {
    for (int t = 0; t < static_cast<int>(count_.size()); ++t) consider(t);
  } else {
    for (std::size_t i = 0; i < fleet_type_.size(); ++i)
      if (sj.allows_type(static_cast<int>(i))) consider(fleet_type_[i]);
  }
  return ok;
}

std::vector<int> FleetTypes::allowed(const Workload& w, int job, int first) const {
  auto ok = holding(w, job, nullptr);
  std::stable_sort(ok.begin(), ok.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  std::vector<int> out{first};
  for (const auto& [t, c] : ok)
    if (t != first) out.push_back(t);
  return out;
}

FleetTypes::Choice FleetTypes::choose(const Workload& w, int job) const {
  bool allowed = false;  // the fleet has a type the job allows, whatever its count
  const auto ok = holding(w, job, &allowed);
  std::int64_t total = 0;
  for (const auto& [t, c] : ok) total += c;
  if (total == 0)
    return {-1, allowed ? "fewer devices of an allowed type than its min_devices, or too little memory"
                        : "its gpu_spec allows no device type the fleet has"};
  auto pick = static_cast<std::int64_t>(mix(static_cast<std::uint64_t>(job)) % static_cast<std::uint64_t>(total));
  for (auto& [t, c] : ok) {
    if (pick < c) return {t, nullptr};
    pick -= c;
  }
  return {ok.back().first, nullptr};
}

CountedJobs schedulable_jobs(const Workload& w, const core::Fleet& fleet) {
  const FleetTypes types(w, fleet);
  CountedJobs c(w.jobs.size(), 0);
  for (std::size_t i = 0; i < w.jobs.size(); ++i) c[i] = types.choose(w, static_cast<int>(i)).type >= 0;
  return c;
}

}  // namespace orrery::sim
