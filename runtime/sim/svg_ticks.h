// Axis ticks of orrery-sim's charts (svg_plot.h): nice linear steps and powers of ten, with
// labels. Exposed for tests.
#pragma once

#include <string>
#include <vector>

namespace orrery::sim::plot {

struct Tick {
  double value;
  std::string label;  // empty: a tick (and grid line) without a label
};

// At most max_ticks (>= 2) ticks on one nice step (1, 2 or 5 times a power of ten) whose first
// tick is <= lo and last >= hi: the axis runs from the first to the last. lo == hi gets a range
// around the value. Labels have the same number of decimals throughout, large values a k/M/G
// suffix ("20k", "1.5M").
std::vector<Tick> linear_ticks(double lo, double hi, int max_ticks);
// Every power of ten from the one <= lo to the one >= hi (lo, hi > 0; at least two); every k-th
// labelled ("1", "10", "100", "1k", .. "0.1", "1e-05"), k the smallest that keeps at most
// max_labels labels.
std::vector<Tick> log_ticks(double lo, double hi, int max_labels);
// A power of ten as a tick label.
std::string decade_label(int exponent);

}  // namespace orrery::sim::plot
