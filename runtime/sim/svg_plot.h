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
#include <vector>

#include "base/result.h"
// The pieces: the data (Series, cdf, downsample), axis ticks and text (the last two exposed for
// tests).
#include "runtime/sim/svg_series.h"
#include "runtime/sim/svg_text.h"
#include "runtime/sim/svg_ticks.h"

namespace orrery::sim::plot {

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

// The Okabe-Ito colour of series i (i mod 8).
const char* series_colour(std::size_t i);

}  // namespace orrery::sim::plot
