#include "runtime/sim/fleet_builder.h"

#include <utility>

#include "spec/limits.h"
#include "spec/vocabulary.h"

namespace orrery::sim {

namespace {

Status bad_name(const char* what, const std::string& name) {
  return Status::Error(std::string(what) + " name \"" + name +
                       "\": must be " + std::string(spec::kNameRule));
}

}  // namespace

bool valid_fleet_name(const std::string& n) { return spec::valid_name(n); }

Status FleetBuilder::add_node(const std::string& region, const std::string& cluster,
                              const std::string& name, std::int64_t host_mem_mib) {
  if (!valid_fleet_name(region)) return bad_name("region", region);
  if (!valid_fleet_name(cluster)) return bad_name("cluster", cluster);
  if (!valid_fleet_name(name)) return bad_name("node", name);
  if (!fleet_.nodes.empty() && fleet_.nodes.back().num_devices() == 0)
    return Status::Error("node \"" + fleet_.nodes.back().name + "\" has no devices");
  if (host_mem_mib < 0 || host_mem_mib > spec::kMaxHostMemMib)
    return Status::Error("node \"" + name + "\": host_mem_mib " + std::to_string(host_mem_mib) +
                         " out of range [0, 2^43]");
  if (!node_names_.insert(name).second)
    return Status::Error("node \"" + name + "\" defined twice (node names are unique in a fleet)");
  const int next = fleet_.num_devices();
  fleet_.nodes.push_back(core::Node{name, cluster, region, host_mem_mib, next, next});
  return Status::Ok();
}

Status FleetBuilder::add_devices(const std::string& type, std::int64_t count,
                                 std::int64_t mem_mib) {
  if (fleet_.nodes.empty()) return Status::Error("devices before any node");
  if (!valid_fleet_name(type)) return bad_name("device type", type);
  auto& node = fleet_.nodes.back();
  if (count < 1 || node.num_devices() + count > spec::kMaxNodeDevices)
    return Status::Error("node \"" + node.name + "\": device count must be >= 1 and a node has at most " +
                         std::to_string(spec::kMaxNodeDevices) + " devices");
  if (fleet_.num_devices() + count > spec::kMaxFleetDevices)
    return Status::Error("a fleet has at most " + std::to_string(spec::kMaxFleetDevices) +
                         " devices");
  if (mem_mib < 1 || mem_mib > spec::kMaxMemMib)
    return Status::Error("device type " + type + ": mem_mib " + std::to_string(mem_mib) +
                         " out of range [1, 2^40]");
  auto [it, added] = type_ids_.try_emplace(type, static_cast<int>(fleet_.device_types.size()));
  if (added) fleet_.device_types.push_back(type);
  const int first = fleet_.num_devices();
  const int n = static_cast<int>(count);
  const int node_index = static_cast<int>(fleet_.nodes.size()) - 1;
  // A run of the same type and memory on the same node extends the last group, as the core's
  // to_text() would merge it.
  if (!fleet_.groups.empty()) {
    auto& g = fleet_.groups.back();
    if (g.node == node_index && g.type == it->second && g.mem_mib == mem_mib) {
      g.count += n;
      node.end_device = first + n;
      return Status::Ok();
    }
  }
  fleet_.groups.push_back(core::DeviceGroup{it->second, mem_mib, node_index, first, n});
  node.end_device = first + n;
  return Status::Ok();
}

Status FleetBuilder::set_premium_reserve(std::int64_t devices) {
  if (devices < 0) return Status::Error("premium_reserve must be >= 0");
  fleet_.premium_reserve = devices;
  return Status::Ok();
}

Result<core::Fleet> FleetBuilder::finish() {
  core::Fleet f = std::move(fleet_);
  fleet_ = core::Fleet{};
  node_names_.clear();
  type_ids_.clear();
  if (!f.nodes.empty() && f.nodes.back().num_devices() == 0)
    return Status::Error("node \"" + f.nodes.back().name + "\" has no devices");
  if (f.num_devices() == 0) return Status::Error("fleet has no devices");
  if (f.premium_reserve > f.num_devices())
    return Status::Error("premium_reserve " + std::to_string(f.premium_reserve) +
                         " exceeds the fleet's " + std::to_string(f.num_devices()) + " devices");
  return f;
}

}  // namespace orrery::sim
