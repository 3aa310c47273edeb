// Builds the core's Fleet (core/fleet.h) node by node, with the checks the core's fleet parser
// makes, so that every fleet source of the simulator (the TOML format, the generator, the Alibaba
// node list) gives a fleet the core accepts: Fleet::parse(fleet.to_text()) reads it back equal.
//
// The checks: names are spec::valid_name, spec/limits.h (they become words of the core's
// line format, where blanks, '#' and '=' mean something); node names are unique in the fleet; a
// node has 1 to spec::kMaxNodeDevices devices, the fleet at most spec::kMaxFleetDevices; device
// and host memory are in [1, 2^40] and [0, 2^43] MiB (spec::kMaxMemMib, spec::kMaxHostMemMib); premium_reserve is at most the fleet's
// device count. Errors say what was wrong; callers prefix where it came from (file:line).
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <unordered_set>

#include "core/fleet.h"
#include "base/result.h"

namespace orrery::sim {

class FleetBuilder {
 public:
  // Starts a node in cluster `cluster` of region `region`; the devices added next belong to it.
  Status add_node(const std::string& region, const std::string& cluster, const std::string& name,
                  std::int64_t host_mem_mib);
  // Adds `count` devices of `type`, `mem_mib` each, to the last node (one NVLink domain).
  Status add_devices(const std::string& type, std::int64_t count, std::int64_t mem_mib);
  Status set_premium_reserve(std::int64_t devices);

  int num_devices() const { return fleet_.num_devices(); }
  int num_nodes() const { return static_cast<int>(fleet_.nodes.size()); }

  // The fleet. Errors: no device at all, a node without devices, premium_reserve above the
  // device count. The builder is left empty.
  Result<core::Fleet> finish();

 private:
  core::Fleet fleet_;
  std::unordered_set<std::string> node_names_;
  std::unordered_map<std::string, int> type_ids_;
};

// spec::valid_name: 1 to spec::kMaxNameLength characters of A-Z a-z 0-9 . _ - starting with a
// letter or digit (what FleetBuilder accepts as a name, and the job-spec validation as a device type).
bool valid_fleet_name(const std::string& name);

}  // namespace orrery::sim
