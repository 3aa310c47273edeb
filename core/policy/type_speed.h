// The relative speed of device types (PlannerOptions::type_speed), as operators and the simulator
// give it on the command line: "H100-80G=2,A100-80G=1" (a type not named runs at 1).
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "core/fleet.h"

namespace orrery::core::policy {

// NAME=SPEED pairs separated by ',': each NAME a device type name (spec::valid_name) given once,
// each SPEED a number in (0, 1000]. Whether the fleet has the types is the caller's to check.
Result<std::map<std::string, double>> parse_type_speed(std::string_view text);

// Ok when every type `speeds` names is one of the fleet's and every speed is in (0, 1000], else
// why not ("type speed for \"T\": the fleet has no such device type").
Status check_type_speed(const Fleet& fleet, const std::map<std::string, double>& speeds);

// The speeds by the fleet's type id: 1 for a type `speeds` does not name (a name the fleet lacks is
// left out: check_type_speed says so).
std::vector<double> speeds_by_type(const Fleet& fleet, const std::map<std::string, double>& speeds);

}  // namespace orrery::core::policy
