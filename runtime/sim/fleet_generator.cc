#include "runtime/sim/fleet_generator.h"

#include <cmath>

#include "runtime/sim/fleet_builder.h"
#include "runtime/sim/rng.h"
#include "spec/vocabulary.h"

namespace orrery::sim {

namespace {

std::string padded(std::int64_t i, std::int64_t last) {
  std::string s = std::to_string(i);
  const std::size_t width = std::to_string(last).size();
  return std::string(width - s.size(), '0') + s;
}

}  // namespace

Result<core::Fleet> generate_fleet(const FleetGenOptions& o) {
  auto bad = [](const std::string& what) { return Status::Error("fleet generator: " + what); };
  if (o.regions < 1) return bad("regions must be >= 1");
  if (o.clusters_per_region < 1) return bad("clusters_per_region must be >= 1");
  const std::int64_t clusters = std::int64_t{o.regions} * o.clusters_per_region;
  if (o.nodes < clusters)
    return bad("nodes (" + std::to_string(o.nodes) + ") must be at least one per cluster (" +
               std::to_string(clusters) + ")");
  if (o.devices_per_node < 1 || o.devices_per_node > spec::kMaxNodeDevices)
    return bad("devices_per_node must be in [1, " + std::to_string(spec::kMaxNodeDevices) + "]");
  if (std::int64_t{o.nodes} * o.devices_per_node > spec::kMaxFleetDevices)
    return bad("nodes x devices_per_node exceeds the core's " +
               std::to_string(spec::kMaxFleetDevices) + " devices per fleet");
  if (o.device_mix.empty()) return bad("device_mix is empty");
  std::vector<double> weights;
  double sum = 0;
  for (const auto& m : o.device_mix) {
    if (!valid_fleet_name(m.type)) return bad("device type \"" + m.type + "\": bad name");
    if (!std::isfinite(m.weight) || m.weight < 0) return bad("device type " + m.type + ": weight must be finite and >= 0");
    weights.push_back(m.weight);
    sum += m.weight;
  }
  if (!(sum > 0)) return bad("device_mix weights sum to zero");
  if (o.premium_reserve < 0 || o.premium_reserve > std::int64_t{o.nodes} * o.devices_per_node)
    return bad("premium_reserve must be in [0, number of devices]");

  Rng rng(o.seed);
  const WeightedChoice pick(weights);
  FleetBuilder b;
  const std::int64_t per_cluster = o.nodes / clusters;
  const std::int64_t extra = o.nodes % clusters;  // the first `extra` clusters get one node more
  std::int64_t cluster_index = 0;
  for (int r = 0; r < o.regions; ++r) {
    const std::string region = "r" + std::to_string(r);
    for (int c = 0; c < o.clusters_per_region; ++c, ++cluster_index) {
      const std::string cluster = region + "-c" + std::to_string(c);
      const std::int64_t n_nodes = per_cluster + (cluster_index < extra ? 1 : 0);
      const int cluster_type = o.homogeneous_clusters ? pick(rng) : -1;
      for (std::int64_t n = 0; n < n_nodes; ++n) {
        const auto& m = o.device_mix[cluster_type >= 0 ? cluster_type : pick(rng)];
        if (auto st = b.add_node(region, cluster, cluster + "-n" + padded(n, per_cluster + (extra ? 1 : 0) - 1),
                                 o.host_mem_mib);
            !st.ok())
          return bad(st.reason());
        if (auto st = b.add_devices(m.type, o.devices_per_node, m.mem_mib); !st.ok()) return bad(st.reason());
      }
    }
  }
  if (auto st = b.set_premium_reserve(o.premium_reserve); !st.ok()) return bad(st.reason());
  auto f = b.finish();
  if (!f) return bad(f.reason());
  return f;
}

}  // namespace orrery::sim
