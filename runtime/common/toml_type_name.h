// The name of a TOML value's type as error messages say it ("expected an integer, got a string"),
// for every reader of TOML files (job specs in runtime/cli, fleets in runtime/sim).
#pragma once

#include <string_view>
#include <toml++/toml.h>

namespace orrery::runtime {

inline std::string_view toml_type_name(toml::node_type t) {
  switch (t) {
    case toml::node_type::none: return "nothing";
    case toml::node_type::table: return "a table";
    case toml::node_type::array: return "an array";
    case toml::node_type::string: return "a string";
    case toml::node_type::integer: return "an integer";
    case toml::node_type::floating_point: return "a float";
    case toml::node_type::boolean: return "a boolean";
    case toml::node_type::date: return "a date";
    case toml::node_type::time: return "a time";
    case toml::node_type::date_time: return "a date-time";
  }
  return "a value";
}

}  // namespace orrery::runtime
