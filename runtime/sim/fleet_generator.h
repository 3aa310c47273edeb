// Generates large fleets for the simulator, as the core's Fleet: `nodes` nodes of
// `devices_per_node` devices spread evenly over `regions` x `clusters_per_region` clusters (the
// first clusters get one node more when the division is not exact). Each node's device type is
// drawn from a weighted mix with a seeded generator, per node or, with homogeneous_clusters, once
// per cluster. The same options give the same fleet on every machine.
//
// The defaults are the planet-scale fleet: 100,000 GPUs as 12,500 nodes x 8 in 4 regions
// of 5 clusters (625 nodes each), H100-80G : A100-80G : A100-40G = 5 : 3 : 2.
//
// Names: regions r0, r1, ...; clusters r0-c0, r0-c1, ...; nodes r0-c0-n000, r0-c0-n001, ...
// (numbered within their cluster, zero-padded to the widest index).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/fleet.h"
#include "base/result.h"

namespace orrery::sim {

struct DeviceMixEntry {
  std::string type;
  std::int64_t mem_mib = 0;
  double weight = 1;
};

// H100-80G : A100-80G : A100-40G = 5 : 3 : 2; the synthetic workload's default types too, so that
// generated jobs and generated fleets match.
inline std::vector<DeviceMixEntry> default_device_mix() {
  return {{"H100-80G", 81920, 5}, {"A100-80G", 81920, 3}, {"A100-40G", 40960, 2}};
}

struct FleetGenOptions {
  std::uint64_t seed = 1;
  int regions = 4;
  int clusters_per_region = 5;
  int nodes = 12500;  // in the whole fleet, at least one per cluster
  int devices_per_node = 8;
  std::int64_t host_mem_mib = std::int64_t{2} << 20;  // 2 TiB per node
  std::vector<DeviceMixEntry> device_mix = default_device_mix();
  bool homogeneous_clusters = false;  // one device type per cluster instead of per node
  std::int64_t premium_reserve = 0;   // as in the core's format (0 admits no premium job)
};

// Errors: a count out of range (regions, clusters, nodes >= clusters, devices per node in
// [1, 4096], at most 2^20 devices in all), an empty or bad device mix (names, memory, weights
// finite and >= 0 with a positive sum), premium_reserve above the device count.
Result<core::Fleet> generate_fleet(const FleetGenOptions& options);

}  // namespace orrery::sim
