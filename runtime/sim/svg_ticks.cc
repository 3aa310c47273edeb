// Axis ticks of orrery-sim's charts (svg_ticks.h).
#include "runtime/sim/svg_ticks.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <utility>

#include "runtime/sim/svg_plot_internal.h"

namespace orrery::sim::plot {

namespace {

// Tick-label decimals for a step: 0.2 -> 1, 0.05 -> 2, 10 -> 0.
int decimals_for(double step) {
  return std::max(0, -static_cast<int>(std::floor(std::log10(step) + 1e-9)));
}

}  // namespace

std::vector<Tick> linear_ticks(double lo, double hi, int max_ticks) {
  if (!finite(lo) || !finite(hi)) lo = 0, hi = 1;
  if (lo > hi) std::swap(lo, hi);
  lo = std::max(lo, -1e300);
  hi = std::min(hi, 1e300);
  const double scale = std::max(std::fabs(lo), std::fabs(hi));
  if (hi - lo <= scale * 1e-9) {  // one value (or nearly): a range around it
    const double pad = scale > 0 ? scale * 0.5 : 1;
    lo -= pad;
    hi += pad;
  }
  max_ticks = std::max(max_ticks, 3);  // a range straddling 0 needs 3
  const double span = hi - lo;
  const double mag = std::pow(10.0, std::floor(std::log10(span / max_ticks)));
  double step = 0;
  long long i0 = 0, i1 = 0;
  for (int decade = 0; decade < 40 && step == 0; ++decade) {
    for (double m : {1.0, 2.0, 5.0}) {
      const double s = m * mag * std::pow(10.0, decade);
      const auto a = static_cast<long long>(std::floor(lo / s + 1e-9));
      const auto b = static_cast<long long>(std::ceil(hi / s - 1e-9));
      if (b - a + 1 <= max_ticks) {
        step = s, i0 = a, i1 = b;
        break;
      }
    }
  }
  // Labels: one number of decimals throughout; from 10,000 on with a k/M/G suffix.
  const double top = std::max(std::fabs(i0 * step), std::fabs(i1 * step));
  double unit = 1;
  const char* suffix = "";
  if (top >= 1e13)
    unit = 0;  // scientific
  else if (top >= 1e10)
    unit = 1e9, suffix = "G";
  else if (top >= 1e7)
    unit = 1e6, suffix = "M";
  else if (top >= 1e4)
    unit = 1e3, suffix = "k";
  std::vector<Tick> ticks;
  for (long long i = i0; i <= i1; ++i) {
    double v = static_cast<double>(i) * step;
    if (i == 0) v = 0;
    std::string label;
    if (unit == 0) {
      label = fmt("%.3g", v);
    } else if (v == 0 && *suffix) {
      label = "0";
    } else {
      char buf[64];
      std::snprintf(buf, sizeof buf, "%.*f%s", decimals_for(step / unit), v / unit, suffix);
      label = buf;
    }
    ticks.push_back({v, std::move(label)});
  }
  return ticks;
}

std::string decade_label(int e) {
  static constexpr const char* kSmall[] = {"0.001", "0.01", "0.1", "1", "10", "100"};
  if (e >= -3 && e <= 2) return kSmall[e + 3];
  if (e >= 3 && e <= 11) {
    static constexpr const char* kMant[] = {"1", "10", "100"};
    static constexpr const char* kSuffix[] = {"k", "M", "G"};
    return std::string(kMant[e % 3]) + kSuffix[e / 3 - 1];
  }
  return "1e" + std::to_string(e);
}

std::vector<Tick> log_ticks(double lo, double hi, int max_labels) {
  if (!finite(lo) || !finite(hi) || lo <= 0 || hi <= 0) lo = 1, hi = 10;
  if (lo > hi) std::swap(lo, hi);
  const int e0 = static_cast<int>(std::floor(std::log10(lo) + 1e-9));
  int e1 = static_cast<int>(std::ceil(std::log10(hi) - 1e-9));
  if (e1 <= e0) e1 = e0 + 1;
  max_labels = std::max(max_labels, 1);
  // Label the exponents that are multiples of k (1, 1k, 1M for k = 3), the smallest k that
  // keeps at most max_labels and at least one.
  auto labelled = [&](int k) {
    int n = 0;
    for (int e = e0; e <= e1; ++e) n += (e % k) == 0;
    return n;
  };
  int k = 1;
  while (k <= e1 - e0 + 1 && (labelled(k) > max_labels || labelled(k) == 0)) ++k;
  const bool none = k > e1 - e0 + 1;  // no multiple of any k fits: label the first only
  std::vector<Tick> ticks;
  for (int e = e0; e <= e1; ++e) {
    const bool label = none ? e == e0 : (e % k) == 0;
    ticks.push_back({std::pow(10.0, e), label ? decade_label(e) : std::string()});
  }
  return ticks;
}

}  // namespace orrery::sim::plot
