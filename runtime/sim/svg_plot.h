// Dependency-free SVG line charts for orrery-sim's --plot: plain data in, an SVG document out.
//
//   Chart c{.title = "Utilization", .x_label = "time (h)", .y_label = "busy GPUs / GPUs"};
//   c.series.push_back(downsample(Series{"orrery", hours, util}, 4000));
//   c.y_min = 0; c.y_max = 1;
//   write_svg(c, dir + "/utilization.svg");
//
// What a chart looks like (docs/simulator.md, "Plots"): a 720 x 440 viewBox (it scales to any
// size); the title on top, then a legend (one entry a series, wrapping into centred rows); a
// framed plot area (the y range inset 6 px from the frame) with light grid lines at the major
// ticks; ticks on nice values (1, 2 or 5 times a power of ten on linear axes, powers of ten with
// unlabelled 2..9 minor ticks on log axes), tick labels that never overlap (fewer ticks, or every
// k-th decade labelled, where they would), and labelled axes. Series are thin (1.5 px) lines in
// the Okabe-Ito palette, which stays distinguishable for colour-blind readers; past its 8 colours
// the lines are dashed, then dotted.
//
// Data: a series' points are (x[i], y[i]) for i below min(x.size(), y.size()). A point with a
// NaN or infinite coordinate (or x <= 0 on a log x axis) is skipped and breaks the line there; a
// point with no neighbour on either side is drawn as a dot; lines beyond an explicit y_min/y_max
// are clipped. However long a series, the document keeps at most four points of it per pixel
// column (the first, lowest, highest and last), so it stays small (tens of KB). Empty series,
// empty charts and single points render (an empty chart says "no data"); nothing divides by
// zero. Text (title, labels, names) is XML-escaped, control characters and invalid UTF-8 are
// replaced, so any name gives a well-formed document.
#pragma once

#include <cstddef>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"

namespace orrery::sim::plot {

struct Series {
  std::string name;
  std::vector<double> x, y;
};

struct Chart {
  std::string title = {}, x_label = {}, y_label = {};
  std::vector<Series> series = {};
  bool step = false;   // draw each series as a step function: y[i] holds until x[i+1]
  bool log_x = false;  // log10 x axis (points with x <= 0 are skipped)
  double y_min = std::numeric_limits<double>::quiet_NaN();  // NaN: from the data
  double y_max = std::numeric_limits<double>::quiet_NaN();  // NaN: from the data
};

// The SVG document (UTF-8, starting with the XML declaration).
std::string render_svg(const Chart& chart);
// render_svg into the file at path (replaced if it exists). Errors name the path.
Status write_svg(const Chart& chart, const std::string& path);

// The empirical CDF of the finite values: x the distinct values in ascending order, y the
// fraction of values <= x (so y rises to exactly 1 at the largest value), preceded by the point
// (smallest value, 0) so that a step chart shows the first jump. Empty without finite values.
// max_points > 0 thins a CDF with more points than that to at most max_points + 2 points, keeping
// the smallest and largest value and one point each time y has risen by 1 / max_points or more
// (so y is never off by more than 1 / max_points, on any x axis). Draw it with Chart::step.
Series cdf(std::string name, std::vector<double> values, std::size_t max_points = 0);

// A long series (x ascending, e.g. a time series) cut to at most max_points points keeping its
// shape: x's range is cut into max_points / 4 buckets of equal width and each bucket keeps its
// first, lowest, highest and last point (fewer if they coincide), in their order, so every
// bucket's minimum and maximum survive and a line through the result covers what the full line
// covered. Points with a non-finite coordinate are dropped. A series of at most max_points points
// is returned as it is. (max_points 1..3: the lowest and highest point overall, as many as fit;
// 0: empty.) If x is not ascending, buckets are runs of equal numbers of points instead.
Series downsample(const Series& series, std::size_t max_points);

// --- the pieces, exposed for tests ---

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
// Text as XML character data or attribute value: & < > " ' escaped, control characters other
// than tab and newline and invalid UTF-8 bytes replaced by U+FFFD.
std::string xml_escape(std::string_view text);
// The Okabe-Ito colour of series i (i mod 8).
const char* series_colour(std::size_t i);

}  // namespace orrery::sim::plot
