// The fleet: regions > clusters > nodes > devices, read from a small line-oriented config.
//
//   # comment
//   premium_reserve 4                     devices reserved for admitted premium demand
//   region eu-west
//   cluster c1                            belongs to the last region
//   node n1 host_mem_mib=262144           belongs to the last cluster; host memory for spliced state
//   devices H100-80G count=4 mem_mib=81920  belong to the last node (one NVLink domain;
//                                           at most 4096 devices per node, 2^20 per fleet;
//                                           mem_mib is required)
// Limits from spec/limits.h: names spec::valid_name, device memory at most spec::kMaxMemMib, host
// memory at most spec::kMaxHostMemMib, devices spec::kMaxNodeDevices per node and
// spec::kMaxFleetDevices per fleet.
// Unknown keywords or keys, repeated keys, a second premium_reserve, a node name used twice and
// malformed numbers are errors naming the line.
//
// Device types are interned: the spec sees a small integer per type name.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "spec/domain.h"
#include "spec/model.h"

namespace orrery::core {

// A run of identical devices on one node (one `devices` line of the config): devices are numbered
// in config order, so a group is the id range [first, first + count). Nothing is stored per
// device: a fleet of 100,000 devices is a few thousand groups.
struct DeviceGroup {
  int type = 0;  // index into Fleet::device_types
  std::int64_t mem_mib = 0;
  int node = 0;
  int first = 0;
  int count = 0;
};

struct Node {
  std::string name;
  std::string cluster;
  std::string region;
  std::int64_t host_mem_mib = 0;
  int first_device = 0;  // the node's devices are the id range [first_device, end_device)
  int end_device = 0;
  int num_devices() const { return end_device - first_device; }
};

struct Fleet {
  std::int64_t premium_reserve = 0;
  std::vector<std::string> device_types;
  std::vector<Node> nodes;
  std::vector<DeviceGroup> groups;

  int num_devices() const { return groups.empty() ? 0 : groups.back().first + groups.back().count; }
  // The group of device `dev` (0 <= dev < num_devices()), by binary search.
  const DeviceGroup& group_of(int dev) const;
  int device_node(int dev) const { return group_of(dev).node; }
  int device_type(int dev) const { return group_of(dev).type; }
  std::int64_t device_mem(int dev) const { return group_of(dev).mem_mib; }

  static Result<Fleet> parse(const std::string& text);
  static Result<Fleet> load(const std::string& path);
  // Text that parse() reads back to an equal fleet (stored as the journal's first record).
  std::string to_text() const;

  int type_id(const std::string& type) const;  // -1 when the fleet has no such device type
  // A job spec's device types, "A100-80G" or several in order of preference, "A100-80G|H100-80G"
  // (the Alibaba trace's gpu_spec form): their ids, each named once, or why not (a type the fleet
  // lacks, an empty name).
  Result<std::vector<int>> type_ids(std::string_view types) const;
  // The spec's view: every device and node, no job yet.
  spec::ClusterVars<spec::Concrete> empty_cluster() const;
};

// The fleet `scripts/demo` and the tests use when no config is given: one region, one cluster,
// two nodes of four H100-80G each, four devices reserved for premium.
Fleet default_fleet();

}  // namespace orrery::core
