// The data of orrery-sim's charts: the empirical CDF and shape-keeping downsampling
// (svg_series.h).
#include "runtime/sim/svg_series.h"

#include <algorithm>
#include <utility>

#include "runtime/sim/svg_plot_internal.h"

namespace orrery::sim::plot {

Series cdf(std::string name, std::vector<double> values, std::size_t max_points) {
  Series out{std::move(name), {}, {}};
  std::erase_if(values, [](double v) { return !finite(v); });
  if (values.empty()) return out;
  std::sort(values.begin(), values.end());
  const double n = static_cast<double>(values.size());
  out.x.push_back(values.front());
  out.y.push_back(0);
  const double min_rise = max_points > 0 ? 1.0 / static_cast<double>(max_points) - 1e-12 : 0;
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (i + 1 < values.size() && values[i + 1] == values[i]) continue;  // the last of equal ones
    const double y = static_cast<double>(i + 1) / n;
    const bool last = i + 1 == values.size();
    if (!last && max_points > 0 && y - out.y.back() < min_rise) continue;
    out.x.push_back(values[i]);
    out.y.push_back(y);
  }
  return out;
}

Series downsample(const Series& s, std::size_t max_points) {
  const std::size_t n = std::min(s.x.size(), s.y.size());
  Series out{s.name, {}, {}};
  if (n <= max_points) {
    out.x.assign(s.x.begin(), s.x.begin() + n);
    out.y.assign(s.y.begin(), s.y.begin() + n);
    return out;
  }
  // The finite points: how many, whether x ascends, x's range, the lowest and highest.
  std::size_t m = 0, lo_i = 0, hi_i = 0;
  bool ascending = true;
  double x0 = 0, x1 = 0;
  for (std::size_t i = 0; i < n; ++i) {
    if (!finite(s.x[i]) || !finite(s.y[i])) continue;
    if (m == 0) {
      x0 = x1 = s.x[i];
      lo_i = hi_i = i;
    } else {
      ascending = ascending && s.x[i] >= x1;
      x1 = s.x[i];
      if (s.y[i] < s.y[lo_i]) lo_i = i;
      if (s.y[i] > s.y[hi_i]) hi_i = i;
    }
    ++m;
  }
  auto put = [&](std::size_t i) {
    out.x.push_back(s.x[i]);
    out.y.push_back(s.y[i]);
  };
  if (m <= max_points) {
    for (std::size_t i = 0; i < n; ++i)
      if (finite(s.x[i]) && finite(s.y[i])) put(i);
    return out;
  }
  if (max_points < 4) {  // too few for a bucket: the extremes
    if (max_points == 0) return out;
    if (max_points == 1 || lo_i == hi_i) {
      put(lo_i);
    } else {
      put(std::min(lo_i, hi_i));
      put(std::max(lo_i, hi_i));
    }
    return out;
  }
  const std::size_t buckets = max_points / 4;
  const double width = x1 - x0;
  std::size_t rank = 0;
  auto bucket_of = [&](std::size_t i) -> std::size_t {
    std::size_t b;
    if (ascending) {
      b = width > 0 ? static_cast<std::size_t>((s.x[i] - x0) / width * static_cast<double>(buckets))
                    : 0;
    } else {
      b = static_cast<std::size_t>(static_cast<double>(rank) / static_cast<double>(m) *
                                   static_cast<double>(buckets));
    }
    return std::min(b, buckets - 1);
  };
  bool open = false;
  std::size_t cur = 0, first = 0, last = 0, lo = 0, hi = 0;
  auto flush = [&] {
    std::size_t keep[4] = {first, lo, hi, last};
    std::sort(keep, keep + 4);
    for (int k = 0; k < 4; ++k)
      if (k == 0 || keep[k] != keep[k - 1]) put(keep[k]);
  };
  for (std::size_t i = 0; i < n; ++i) {
    if (!finite(s.x[i]) || !finite(s.y[i])) continue;
    const std::size_t b = bucket_of(i);
    ++rank;
    if (open && b == cur) {
      last = i;
      if (s.y[i] < s.y[lo]) lo = i;
      if (s.y[i] > s.y[hi]) hi = i;
      continue;
    }
    if (open) flush();
    open = true;
    cur = b;
    first = last = lo = hi = i;
  }
  if (open) flush();
  return out;
}

}  // namespace orrery::sim::plot
