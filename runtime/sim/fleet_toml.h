// Fleet descriptions in TOML, for the simulator: the same fleet as the core's line-based config
// (core/fleet.h), with device types declared once and runs of identical nodes written once.
//
//   premium_reserve = 16                # optional (default 0, as in the core's format): devices
//                                       # reserved for admitted premium demand
//   [device_types]                      # every device type the nodes use, with its memory
//   H100-80G = { mem_mib = 81920 }
//   A100-40G = { mem_mib = 40960 }
//
//   [[region]]
//   name = "us-east"
//
//   [[region.cluster]]                  # a cluster of the last region
//   name = "c0"
//
//   [[region.cluster.node]]             # a node (or `count` identical nodes) of the last cluster
//   name = "h100"                       # count > 1: h100-00, h100-01, ... h100-15
//   count = 16                          # optional, default 1
//   host_mem_mib = 2097152              # host memory for spliced-out workers' state
//   devices = [{ type = "H100-80G", count = 8 }]   # one NVLink domain per node
//
// Parsing is strict: unknown keys, values of the wrong type or out of range, a missing required
// key, an undeclared device type, a node name used twice (names are unique in the whole fleet),
// a node without devices, more than spec::kMaxNodeDevices devices on a node or
// spec::kMaxFleetDevices in the fleet are errors naming "SOURCE:LINE:COLUMN". The file must be
// ASCII (Debian's toml++ 3.3 misbehaves on some non-ASCII input; a fleet file has no use for it).
// docs/simulator.md describes the format with an example.
#pragma once

#include <string>
#include <string_view>

#include "core/fleet.h"
#include "base/result.h"

namespace orrery::sim {

// Parses `text`; `source` names it in errors (a path, "<string>").
Result<core::Fleet> parse_fleet_toml(std::string_view text, std::string_view source);

// Reads and parses the file at `path`.
Result<core::Fleet> load_fleet_toml(const std::string& path);

}  // namespace orrery::sim
