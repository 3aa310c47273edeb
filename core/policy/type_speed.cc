#include "core/policy/type_speed.h"

#include <charconv>
#include <cmath>

#include "spec/limits.h"

namespace orrery::core::policy {

Result<std::map<std::string, double>> parse_type_speed(std::string_view text) {
  std::map<std::string, double> out;
  auto bad = [&](const std::string& why) {
    return Status::Error("type speed \"" + std::string(text) + "\": " + why + " (expected NAME=SPEED,... e.g. H100-80G=2,A100-80G=1)");
  };
  for (std::size_t at = 0; at <= text.size();) {
    const std::size_t comma = std::min(text.find(',', at), text.size());
    const std::string_view pair = text.substr(at, comma - at);
    const std::size_t eq = pair.find('=');
    if (eq == std::string_view::npos) return bad("\"" + std::string(pair) + "\" has no '='");
    const std::string name(pair.substr(0, eq));
    const std::string_view num = pair.substr(eq + 1);
    if (!spec::valid_name(name)) return bad("\"" + name + "\" is not a device type name");
    double speed = 0;
    const auto [end, ec] = std::from_chars(num.data(), num.data() + num.size(), speed);
    if (ec != std::errc() || end != num.data() + num.size() || !std::isfinite(speed) || speed <= 0 || speed > 1000)
      return bad("the speed of " + name + " must be a number in (0, 1000], got \"" + std::string(num) + "\"");
    if (!out.emplace(name, speed).second) return bad(name + " is given twice");
    at = comma + 1;
  }
  return out;
}

Status check_type_speed(const Fleet& fleet, const std::map<std::string, double>& speeds) {
  for (const auto& [name, speed] : speeds) {
    if (fleet.type_id(name) < 0)
      return Status::InvalidArgument("type speed for \"" + name + "\": the fleet has no such device type");
    if (!(speed > 0) || speed > 1000)
      return Status::InvalidArgument("type speed for " + name + ": must be in (0, 1000]");
  }
  return Status::Ok();
}

std::vector<double> speeds_by_type(const Fleet& fleet, const std::map<std::string, double>& speeds) {
  std::vector<double> out(fleet.device_types.size(), 1.0);
  for (const auto& [name, speed] : speeds)
    if (const int id = fleet.type_id(name); id >= 0) out[static_cast<std::size_t>(id)] = speed;
  return out;
}

}  // namespace orrery::core::policy
