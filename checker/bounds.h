// The bounds of orrery-check's symbolic clusters, read from a config (checker/bounds.conf).
#pragma once

#include <string>

#include "checker/symbolic.h"
#include "base/result.h"

namespace orrery::checker {

struct Bounds {
  Shape proof{3, 2, 2};
  Shape bmc{3, 2, 2};
  int bmc_depth = 12;
  int bmc_unroll = 6;  // base case unrolled from the initial state; induction closes the rest
  unsigned timeout_ms = 60000;
};

// Parses `key = value` lines (# comments); unknown keys and out-of-range values are errors that
// name the line.
Result<Bounds> parse_bounds(const std::string& text);
Result<Bounds> load_bounds(const std::string& path);

}  // namespace orrery::checker
