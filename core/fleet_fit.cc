#include "core/fleet_fit.h"

#include <algorithm>
#include <map>
#include <vector>

#include "spec/model.h"

namespace orrery::core {

Status fits_fleet(const Fleet& fleet, const FitRequest& r) {
  const std::string& type = fleet.device_types.at(static_cast<std::size_t>(r.dtype));
  // Per node: the devices of the type with memory for one worker.
  std::vector<std::int64_t> usable(fleet.nodes.size(), 0);
  std::map<std::string, std::int64_t> in_region;
  std::int64_t total = 0, largest_mem = 0;
  for (const auto& g : fleet.groups) {
    if (g.type != r.dtype) continue;
    largest_mem = std::max(largest_mem, g.mem_mib);
    if (g.mem_mib < r.mem_mib) continue;
    usable[static_cast<std::size_t>(g.node)] += g.count;
    in_region[fleet.nodes[static_cast<std::size_t>(g.node)].region] += g.count;
  }
  for (const auto& [region, n] : in_region) total = std::max(total, n);  // the most in one region
  if (total == 0)
    return Status::InvalidArgument("no device of type \"" + type + "\" has " +
                                   std::to_string(r.mem_mib) + " MiB for a worker (the largest has " +
                                   std::to_string(largest_mem) + " MiB)");
  const spec::Concrete d;
  const int max_splice = r.mode == spec::Preemption::kTransparent ? spec::kSpliceLimit : 1;
  std::int64_t fewest = -1;  // the fewest devices a split in range needs
  for (int splice = max_splice; splice >= 1; --splice) {
    if (r.world % splice != 0) continue;
    const std::int64_t count = r.world / splice;
    if (count < r.min_devices || count > r.max_devices) continue;
    if (fewest < 0 || count < fewest) fewest = count;
    // Devices the fleet offers at this splice: each node's usable ones, as far as its host
    // memory holds their swapped-out workers.
    // A gang lies within one region (the planners place it so).
    const std::int64_t swap = spec::swap_per_device(d, splice, r.mem_mib);
    std::map<std::string, std::int64_t> offered;
    for (std::size_t n = 0; n < fleet.nodes.size(); ++n) {
      std::int64_t k = usable[n];
      if (swap > 0) k = std::min(k, fleet.nodes[n].host_mem_mib / swap);
      if ((offered[fleet.nodes[n].region] += k) >= count) return Status::Ok();
    }
  }
  if (fewest < 0)
    return Status::InvalidArgument("world " + std::to_string(r.world) +
                                   " does not split evenly over a device count in [" +
                                   std::to_string(r.min_devices) + ", " +
                                   std::to_string(r.max_devices) + "]");
  if (fewest > total)
    return Status::InvalidArgument(
        "needs at least " + std::to_string(fewest) + " devices of type \"" + type + "\" with " +
        std::to_string(r.mem_mib) + " MiB (world " + std::to_string(r.world) + ", at most " +
        std::to_string(max_splice) + " workers per device), one region of the fleet has at most " +
        std::to_string(total));
  return Status::InvalidArgument(
      "the fleet's nodes lack the host memory for the workers spliced out: world " +
      std::to_string(r.world) + " on at most " + std::to_string(total) + " devices of type \"" +
      type + "\" needs " + std::to_string(r.mem_mib) + " MiB of host memory per swapped-out worker");
}

}  // namespace orrery::core
