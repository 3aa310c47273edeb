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

FleetTypes::FleetTypes(const Workload& w, const core::Fleet& fleet, bool one_node)
    : count_(fleet.device_types.size(), 0), fleet_type_(fleet_type_ids(w, fleet)), fit_(fleet), one_node_(one_node) {
  for (const auto& g : fleet.groups) count_[static_cast<std::size_t>(g.type)] += g.count;
}

std::vector<std::pair<int, std::int64_t>> FleetTypes::holding(const Workload& w, int job, core::FitLimit* closest) const {
  const auto& sj = w.jobs[static_cast<std::size_t>(job)];
  std::vector<std::pair<int, std::int64_t>> ok;
  core::FitRequest r;
  r.world = sj.world;
  r.min_devices = sj.min_devices;
  r.max_devices = sj.max_devices;
  r.mem_mib = sj.mem_mib;  // as a transparent job (runs_whole() decides whether it may be another)
  r.one_node = one_node_;
  auto consider = [&](int t) {
    if (t < 0) return;
    for (auto& [u, c] : ok)
      if (u == t) return;
    r.dtype = t;
    const auto l = fit_.limit(r);
    if (closest && (*closest == core::FitLimit::kNone || l > *closest)) *closest = l;
    if (l == core::FitLimit::kNone) ok.emplace_back(t, count_[static_cast<std::size_t>(t)]);
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
  auto closest = core::FitLimit::kNone;
  const auto ok = holding(w, job, &closest);
  std::int64_t total = 0;
  for (const auto& [t, c] : ok) total += c;
  if (total == 0) {
    switch (closest) {
      case core::FitLimit::kNone: return {-1, "its gpu_spec allows no device type the fleet has"};
      case core::FitLimit::kDeviceMemory: return {-1, "no device of an allowed type has the memory for a worker"};
      case core::FitLimit::kSplit: return {-1, "its world splits evenly over no device count in its range"};
      case core::FitLimit::kRegionDevices: return {-1, "more devices of an allowed type than one region has"};
      case core::FitLimit::kHostMemory: return {-1, "no region's nodes have the host memory for its spliced-out workers"};
    }
  }
  auto pick = static_cast<std::int64_t>(mix(static_cast<std::uint64_t>(job)) % static_cast<std::uint64_t>(total));
  for (auto& [t, c] : ok) {
    if (pick < c) return {t, nullptr};
    pick -= c;
  }
  return {ok.back().first, nullptr};
}

bool FleetTypes::runs_whole(const Workload& w, int job, int type) const {
  const auto& sj = w.jobs[static_cast<std::size_t>(job)];
  core::FitRequest r;
  r.dtype = type;
  r.world = r.min_devices = r.max_devices = sj.world;
  r.mem_mib = sj.mem_mib;
  r.mode = spec::Preemption::kSignal;
  r.one_node = one_node_;
  return fit_.limit(r) == core::FitLimit::kNone;
}

CountedJobs schedulable_jobs(const Workload& w, const core::Fleet& fleet, bool one_node) {
  const FleetTypes types(w, fleet, one_node);
  CountedJobs c(w.jobs.size(), 0);
  for (std::size_t i = 0; i < w.jobs.size(); ++i) c[i] = types.choose(w, static_cast<int>(i)).type >= 0;
  return c;
}

}  // namespace orrery::sim
