// Helpers shared by svg_plot.cc, svg_series.cc and svg_ticks.cc; not for anyone else.
#pragma once

#include <cmath>
#include <cstdio>
#include <string>

namespace orrery::sim::plot {

inline std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

inline bool finite(double v) { return std::isfinite(v); }

}  // namespace orrery::sim::plot
