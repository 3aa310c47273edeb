#include "core/fleet_fit.h"

#include <algorithm>
#include <map>

#include "spec/model.h"

namespace orrery::core {

FleetFit::FleetFit(const Fleet& fleet) : types_(fleet.device_types), levels_(fleet.device_types.size()) {
  std::map<std::string, int> region_id;
  std::vector<int> node_region(fleet.nodes.size());
  for (std::size_t n = 0; n < fleet.nodes.size(); ++n)
    node_region[n] = region_id.emplace(fleet.nodes[n].region, static_cast<int>(region_id.size())).first->second;
  const std::size_t regions = region_id.size();
  for (std::size_t t = 0; t < levels_.size(); ++t) {
    std::vector<std::int64_t> mems;
    for (const auto& g : fleet.groups)
      if (g.type == static_cast<int>(t)) mems.push_back(g.mem_mib);
    std::sort(mems.begin(), mems.end());
    mems.erase(std::unique(mems.begin(), mems.end()), mems.end());
    for (std::int64_t mem : mems) {
      Level lv{mem, std::vector<Region>(regions)};
      std::vector<std::int64_t> usable(fleet.nodes.size(), 0);  // per node
      for (const auto& g : fleet.groups)
        if (g.type == static_cast<int>(t) && g.mem_mib >= mem) usable[static_cast<std::size_t>(g.node)] += g.count;
      for (std::size_t n = 0; n < fleet.nodes.size(); ++n) {
        if (usable[n] == 0) continue;
        Region& r = lv.regions[static_cast<std::size_t>(node_region[n])];
        const std::int64_t host = fleet.nodes[n].host_mem_mib;
        r.least_host = r.nodes.empty() ? host : std::min(r.least_host, host);
        r.total += usable[n];
        r.most_on_a_node = std::max(r.most_on_a_node, usable[n]);
        r.nodes.emplace_back(usable[n], host);
      }
      levels_[t].push_back(std::move(lv));
    }
  }
}

std::int64_t FleetFit::host_limited(const Region& reg, std::int64_t swap, std::int64_t enough) {
  if (swap == 0 || reg.least_host / swap >= reg.most_on_a_node) return reg.total;  // no node limits it
  std::int64_t offered = 0;
  for (const auto& [usable, host] : reg.nodes)
    if ((offered += std::min(usable, host / swap)) >= enough) break;
  return offered;
}

FitLimit FleetFit::limit(const FitRequest& r, std::string* why) const {
  auto broken = [&](FitLimit l, const std::string& text) {
    if (why) *why = text;
    return l;
  };
  if (r.dtype < 0 || static_cast<std::size_t>(r.dtype) >= types_.size())
    return broken(FitLimit::kDeviceMemory, "no device type " + std::to_string(r.dtype) + " in the fleet");
  const std::string& type = types_[static_cast<std::size_t>(r.dtype)];
  const auto& levels = levels_[static_cast<std::size_t>(r.dtype)];
  // The devices with memory for one worker: the first level of at least r.mem_mib.
  const auto lv = std::lower_bound(levels.begin(), levels.end(), r.mem_mib,
                                   [](const Level& l, std::int64_t mem) { return l.mem < mem; });
  std::int64_t total = 0;  // the most in one region (in the fleet, across_regions)
  std::int64_t most_on_a_node = 0;
  if (lv != levels.end())
    for (const auto& reg : lv->regions) {
      total = r.across_regions ? total + reg.total : std::max(total, reg.total);
      most_on_a_node = std::max(most_on_a_node, reg.most_on_a_node);
    }
  if (total == 0)
    return broken(FitLimit::kDeviceMemory, "no device of type \"" + type + "\" has " +
                                   std::to_string(r.mem_mib) + " MiB for a worker (the largest has " +
                                   std::to_string(levels.empty() ? 0 : levels.back().mem) + " MiB)");
  const spec::Concrete d;
  const int max_splice = r.mode == spec::Preemption::kTransparent ? spec::kSpliceLimit : 1;
  std::int64_t fewest = -1;  // the fewest devices a split in range needs
  for (int splice = max_splice; splice >= 1; --splice) {
    if (r.world % splice != 0) continue;
    const std::int64_t count = r.world / splice;
    if (count < r.min_devices || count > r.max_devices) continue;
    if (fewest < 0 || count < fewest) fewest = count;
    // Devices a region offers at this splice: each node's usable ones, as far as its host memory
    // holds their swapped-out workers. A gang lies within one region (the planners place it so).
    if (count > total) continue;
    const std::int64_t swap = spec::swap_per_device(d, splice, r.mem_mib);
    if (r.one_node && count <= most_on_a_node) {  // one node holds the devices and the workers
      for (const auto& reg : lv->regions)
        for (const auto& [usable, host] : reg.nodes)
          if (usable >= count && (swap == 0 || host / swap >= count)) return FitLimit::kNone;
      continue;
    }
    std::int64_t offered = 0;  // across_regions: summed over the regions
    for (const auto& reg : lv->regions) {
      if (!r.across_regions) offered = 0;
      if (offered + reg.total < count) {  // even unlimited, not enough
        if (r.across_regions) offered += host_limited(reg, swap);
        continue;
      }
      const std::int64_t limited = host_limited(reg, swap, count - offered);
      if ((offered += limited) >= count) return FitLimit::kNone;
    }
  }
  if (fewest < 0)
    return broken(FitLimit::kSplit, "world " + std::to_string(r.world) +
                                   " does not split evenly over a device count in [" +
                                   std::to_string(r.min_devices) + ", " +
                                   std::to_string(r.max_devices) + "]");
  if (fewest > total)
    return broken(
        FitLimit::kRegionDevices,
        "needs at least " + std::to_string(fewest) + " devices of type \"" + type + "\" with " +
        std::to_string(r.mem_mib) + " MiB (world " + std::to_string(r.world) + ", at most " +
        std::to_string(max_splice) + " workers per device), one region of the fleet has at most " +
        std::to_string(total));
  return broken(
      FitLimit::kHostMemory,
      "the fleet's nodes lack the host memory for the workers spliced out: world " +
      std::to_string(r.world) + " on at most " + std::to_string(total) + " devices of type \"" +
      type + "\" needs " + std::to_string(r.mem_mib) + " MiB of host memory per swapped-out worker");
}

Status FleetFit::fits(const FitRequest& r) const {
  std::string why;
  return limit(r, &why) == FitLimit::kNone ? Status::Ok() : Status::InvalidArgument(why);
}

Status fits_fleet(const Fleet& fleet, const FitRequest& r) { return FleetFit(fleet).fits(r); }

}  // namespace orrery::core
