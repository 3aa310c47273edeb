// The relative speed of device types (PlannerOptions::type_speed), as operators and the simulator
// give it on the command line: "H100-80G=2,A100-80G=1" (a type not named runs at 1).
#pragma once

#include <map>
#include <string>
#include <string_view>

#include "base/result.h"

namespace orrery::core::policy {

// NAME=SPEED pairs separated by ',': each NAME a device type name (spec::valid_name) given once,
// each SPEED a number in (0, 1000]. Whether the fleet has the types is the caller's to check.
Result<std::map<std::string, double>> parse_type_speed(std::string_view text);

}  // namespace orrery::core::policy
