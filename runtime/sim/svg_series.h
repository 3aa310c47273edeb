// The data of orrery-sim's charts (svg_plot.h): a series of points, and the two ways a long one
// is made drawable, its empirical CDF and a downsampling that keeps its shape.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace orrery::sim::plot {

struct Series {
  std::string name;
  std::vector<double> x, y;
};

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

}  // namespace orrery::sim::plot
