// The SVG document of a chart (svg_plot.h): layout, axes, series paths, legend. Its pieces:
// svg_series.h (the data), svg_ticks.h, svg_text.h.
#include "runtime/sim/svg_plot.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <utility>

#include "runtime/sim/svg_plot_internal.h"

namespace orrery::sim::plot {

namespace {

// The canvas (viewBox) and the type.
constexpr double kWidth = 720, kHeight = 440;
constexpr double kTitleFont = 15, kLabelFont = 12, kTickFont = 11, kLegendFont = 12;
constexpr double kLegendRow = 18, kLegendSwatch = 22, kLegendGap = 18;
constexpr double kLineWidth = 1.5;
constexpr double kYInset = 6;
// Pixel coordinates are kept within this distance of the canvas (a point far outside the axis
// range, with an explicit y_min/y_max, would otherwise print as a 300-digit number).
constexpr double kFar = 1e5;

constexpr const char* kOkabeIto[8] = {
    "#0072B2",  // blue
    "#D55E00",  // vermillion
    "#009E73",  // bluish green
    "#CC79A7",  // reddish purple
    "#E69F00",  // orange
    "#56B4E9",  // sky blue
    "#000000",  // black
    "#F0E442",  // yellow (last: faint on white)
};
// Past the palette's 8 colours: dashed, dotted, dash-dotted.
constexpr const char* kDashes[4] = {"", "6 3", "1.5 2.5", "8 3 2 3"};

// A pixel coordinate: one decimal, never "-0.0".
std::string px(double v) {
  v = std::clamp(v, -kFar, kFar);
  if (std::fabs(v) < 0.05) v = 0;
  return fmt("%.1f", v);
}

// One axis: its range, how values map onto pixels, its ticks.
struct Axis {
  double lo = 0, hi = 1;  // in data units
  bool log = false;
  double p0 = 0, p1 = 1;  // pixels of lo and hi
  std::vector<Tick> ticks;
  std::vector<double> minor;  // log axes: 2..9 x 10^k, unlabelled

  double t(double v) const { return log ? std::log10(v) : v; }
  double map(double v) const {
    const double a = t(lo), b = t(hi);
    return p0 + (t(v) - a) / (b - a) * (p1 - p0);  // b > a: ranges are never empty
  }
  bool contains(double v) const {
    const double eps = (t(hi) - t(lo)) * 1e-9;
    return t(v) >= t(lo) - eps && t(v) <= t(hi) + eps;
  }
};

double max_label_width(const std::vector<Tick>& ticks) {
  double w = 0;
  for (const auto& t : ticks) w = std::max(w, text_width(t.label, kTickFont));
  return w;
}

// The points of one series that can be drawn, as runs between skipped points.
struct Drawable {
  std::vector<std::vector<std::pair<double, double>>> runs;
  std::size_t points = 0;
};

Drawable drawable(const Series& s, bool log_x) {
  Drawable d;
  const std::size_t n = std::min(s.x.size(), s.y.size());
  bool open = false;
  for (std::size_t i = 0; i < n; ++i) {
    const double x = s.x[i], y = s.y[i];
    if (!finite(x) || !finite(y) || (log_x && x <= 0)) {
      open = false;
      continue;
    }
    if (!open) d.runs.emplace_back();
    open = true;
    d.runs.back().emplace_back(x, y);
    ++d.points;
  }
  return d;
}

// Builds an SVG path from pixel points, keeping per pixel column only the first, lowest, highest
// and last point (what a renderer could show of them), and no point twice in a row.
class PathBuilder {
 public:
  void move() {
    flush();
    start_ = true;
  }
  void add(double x, double y) {
    const double col = std::floor(x);
    if (have_ && col == col_) {
      last_ = {x, y};
      ++n_;
      if (y < lo_.second) lo_ = {x, y}, lo_i_ = n_;
      if (y > hi_.second) hi_ = {x, y}, hi_i_ = n_;
      return;
    }
    flush();
    have_ = true;
    col_ = col;
    first_ = last_ = lo_ = hi_ = {x, y};
    n_ = lo_i_ = hi_i_ = 0;
  }
  std::string finish() {
    flush();
    return std::move(d_);
  }

 private:
  void flush() {
    if (!have_) return;
    have_ = false;
    emit(first_);
    if (lo_i_ > 0 && hi_i_ > 0 && hi_i_ < lo_i_) {
      emit(hi_);
      emit(lo_);
    } else {
      if (lo_i_ > 0) emit(lo_);
      if (hi_i_ > 0) emit(hi_);
    }
    if (n_ > 0) emit(last_);
  }
  void emit(std::pair<double, double> p) {
    std::string x = px(p.first), y = px(p.second);
    if (!start_ && x == prev_x_ && y == prev_y_) return;
    d_ += start_ ? 'M' : 'L';
    d_ += x;
    d_ += ' ';
    d_ += y;
    start_ = false;
    prev_x_ = std::move(x);
    prev_y_ = std::move(y);
  }

  std::string d_;
  bool start_ = true, have_ = false;
  double col_ = 0;
  std::pair<double, double> first_, last_, lo_, hi_;
  std::size_t n_ = 0, lo_i_ = 0, hi_i_ = 0;  // points in the column after the first; indices
  std::string prev_x_, prev_y_;
};

}  // namespace

const char* series_colour(std::size_t i) { return kOkabeIto[i % 8]; }

std::string render_svg(const Chart& chart) {
  // The data that can be drawn, and its range.
  std::vector<Drawable> data;
  double x_lo = INFINITY, x_hi = -INFINITY, y_lo = INFINITY, y_hi = -INFINITY;
  for (const auto& s : chart.series) {
    data.push_back(drawable(s, chart.log_x));
    for (const auto& run : data.back().runs)
      for (auto [x, y] : run) {
        x_lo = std::min(x_lo, x), x_hi = std::max(x_hi, x);
        y_lo = std::min(y_lo, y), y_hi = std::max(y_hi, y);
      }
  }
  const bool empty = !(x_lo <= x_hi);
  if (empty) {
    x_lo = chart.log_x ? 1 : 0, x_hi = chart.log_x ? 10 : 1;
    y_lo = 0, y_hi = 1;
  }
  // Explicit y bounds (a finite one replaces the data's; an empty range falls back to the data).
  bool fix_lo = finite(chart.y_min), fix_hi = finite(chart.y_max);
  if (fix_lo && fix_hi && !(chart.y_min < chart.y_max)) fix_lo = fix_hi = false;
  if (fix_lo) {
    y_lo = chart.y_min;
    if (!fix_hi && !(y_hi > y_lo)) y_hi = y_lo + 1;
  }
  if (fix_hi) {
    y_hi = chart.y_max;
    if (!fix_lo && !(y_lo < y_hi)) y_lo = y_hi - 1;
  }

  // Legend: entries wrap into centred rows.
  struct Entry {
    std::size_t series;
    std::string text;
    double width;
  };
  std::vector<std::vector<Entry>> rows;
  const double legend_max = kWidth - 40;
  double row_w = 0;
  for (std::size_t i = 0; i < chart.series.size(); ++i) {
    if (chart.series[i].name.empty()) continue;
    std::string text = chart.series[i].name + (data[i].points == 0 ? " (no data)" : "");
    const double w = kLegendSwatch + 6 + text_width(text, kLegendFont) + kLegendGap;
    if (rows.empty() || (row_w + w > legend_max && !rows.back().empty())) {
      rows.emplace_back();
      row_w = 0;
    }
    rows.back().push_back({i, std::move(text), w});
    row_w += w;
  }

  // Vertical layout, then the y axis (its labels' width sets the left margin), then the x axis.
  const double legend_top = 44;
  const double plot_top = rows.empty() ? 44 : legend_top + rows.size() * kLegendRow + 6;
  const double plot_bottom = kHeight - 50;
  // The y range maps onto the plot area less a few pixels at each end, so that a line at the
  // range's ends (a utilization of 1, the top of a CDF) stays clear of the frame.
  Axis ya;
  ya.p0 = plot_bottom - kYInset, ya.p1 = plot_top + kYInset;
  {
    const int max_ticks = std::clamp(static_cast<int>((plot_bottom - plot_top) / 40) + 1, 3, 11);
    ya.ticks = linear_ticks(y_lo, y_hi, max_ticks);
    ya.lo = fix_lo ? y_lo : ya.ticks.front().value;
    ya.hi = fix_hi ? y_hi : ya.ticks.back().value;
    if (!(ya.hi > ya.lo)) ya.hi = ya.lo + 1;  // unreachable: ranges are checked above
    std::erase_if(ya.ticks, [&](const Tick& t) { return !ya.contains(t.value); });
  }
  const double y_label_room = chart.y_label.empty() ? 0 : 22;
  const double plot_left = 12 + y_label_room + max_label_width(ya.ticks) + 8;
  double plot_right = kWidth - 24;
  Axis xa;
  xa.log = chart.log_x;
  for (int pass = 0; pass < 2; ++pass) {  // the second pass makes room for the last label
    xa.p0 = plot_left, xa.p1 = plot_right;
    const double w = plot_right - plot_left;
    if (xa.log) {
      for (int labels = 40; labels >= 1; --labels) {
        xa.ticks = log_ticks(x_lo, x_hi, labels);
        std::vector<double> at;
        xa.lo = xa.ticks.front().value, xa.hi = xa.ticks.back().value;
        for (const auto& t : xa.ticks)
          if (!t.label.empty()) at.push_back(xa.map(t.value));
        double gap = INFINITY;
        for (std::size_t i = 1; i < at.size(); ++i) gap = std::min(gap, at[i] - at[i - 1]);
        if (gap >= max_label_width(xa.ticks) + 14) break;
      }
    } else {
      for (int max_ticks = std::clamp(static_cast<int>(w / 60) + 1, 3, 15); max_ticks >= 3;
           --max_ticks) {
        xa.ticks = linear_ticks(x_lo, x_hi, max_ticks);
        const double gap = w / static_cast<double>(xa.ticks.size() - 1);
        if (gap >= max_label_width(xa.ticks) + 14) break;
      }
      xa.lo = xa.ticks.front().value, xa.hi = xa.ticks.back().value;
    }
    const double last_half = text_width(xa.ticks.back().label, kTickFont) / 2;
    const double right = std::max(24.0, last_half + 6);
    if (kWidth - right >= plot_right) break;
    plot_right = kWidth - right;
  }
  xa.p0 = plot_left, xa.p1 = plot_right;
  if (xa.log) {
    const double decade_px = (plot_right - plot_left) / std::log10(xa.hi / xa.lo);
    if (decade_px >= 30)
      for (double d = xa.lo; d < xa.hi * 0.999; d *= 10)
        for (int m = 2; m <= 9; ++m) xa.minor.push_back(d * m);
  }

  // The document.
  std::string o;
  o.reserve(16 * 1024);
  const std::string W = px(kWidth), H = px(kHeight);
  o += "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  o += "<svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 " + W + " " + H + "\" width=\"" +
       W + "\" height=\"" + H +
       "\" font-family=\"DejaVu Sans, Helvetica, Arial, sans-serif\" fill=\"#222\">\n";
  o += "<title>" + xml_escape(chart.title) + "</title>\n";
  o += "<rect width=\"100%\" height=\"100%\" fill=\"#fff\"/>\n";
  // Title.
  o += "<text x=\"" + px(kWidth / 2) + "\" y=\"26\" font-size=\"" + px(kTitleFont) +
       "\" font-weight=\"bold\" text-anchor=\"middle\">" + xml_escape(chart.title) + "</text>\n";
  // Grid.
  const std::string L = px(plot_left), R = px(plot_right), T = px(plot_top), B = px(plot_bottom);
  o += "<g stroke=\"#e3e3e3\" stroke-width=\"1\">\n";
  for (const auto& t : ya.ticks) {
    const std::string y = px(ya.map(t.value));
    o += "<line x1=\"" + L + "\" y1=\"" + y + "\" x2=\"" + R + "\" y2=\"" + y + "\"/>\n";
  }
  for (const auto& t : xa.ticks) {
    const std::string x = px(xa.map(t.value));
    o += "<line x1=\"" + x + "\" y1=\"" + T + "\" x2=\"" + x + "\" y2=\"" + B + "\"/>\n";
  }
  o += "</g>\n";
  // Frame, ticks and their labels.
  o += "<rect x=\"" + L + "\" y=\"" + T + "\" width=\"" + px(plot_right - plot_left) +
       "\" height=\"" + px(plot_bottom - plot_top) + "\" fill=\"none\" stroke=\"#555\"/>\n";
  o += "<g stroke=\"#555\" stroke-width=\"1\">\n";
  for (const auto& t : ya.ticks) {
    const std::string y = px(ya.map(t.value));
    o += "<line x1=\"" + px(plot_left - 4) + "\" y1=\"" + y + "\" x2=\"" + L + "\" y2=\"" + y +
         "\"/>\n";
  }
  for (const auto& t : xa.ticks) {
    const std::string x = px(xa.map(t.value));
    o += "<line x1=\"" + x + "\" y1=\"" + B + "\" x2=\"" + x + "\" y2=\"" + px(plot_bottom + 4) +
         "\"/>\n";
  }
  for (double v : xa.minor) {
    const std::string x = px(xa.map(v));
    o += "<line x1=\"" + x + "\" y1=\"" + B + "\" x2=\"" + x + "\" y2=\"" + px(plot_bottom + 2.5) +
         "\"/>\n";
  }
  o += "</g>\n";
  o += "<g font-size=\"" + px(kTickFont) + "\" fill=\"#444\">\n";
  for (const auto& t : ya.ticks)
    o += "<text class=\"ytick\" x=\"" + px(plot_left - 7) + "\" y=\"" +
         px(ya.map(t.value) + kTickFont * 0.35) + "\" text-anchor=\"end\">" + xml_escape(t.label) +
         "</text>\n";
  for (const auto& t : xa.ticks)
    if (!t.label.empty())
      o += "<text class=\"xtick\" x=\"" + px(xa.map(t.value)) + "\" y=\"" + px(plot_bottom + 17) +
           "\" text-anchor=\"middle\">" + xml_escape(t.label) + "</text>\n";
  o += "</g>\n";
  // Axis labels.
  const double mid_x = (plot_left + plot_right) / 2, mid_y = (plot_top + plot_bottom) / 2;
  if (!chart.x_label.empty())
    o += "<text x=\"" + px(mid_x) + "\" y=\"" + px(kHeight - 12) + "\" font-size=\"" +
         px(kLabelFont) + "\" text-anchor=\"middle\">" + xml_escape(chart.x_label) + "</text>\n";
  if (!chart.y_label.empty())
    o += "<text transform=\"translate(20 " + px(mid_y) + ") rotate(-90)\" font-size=\"" +
         px(kLabelFont) + "\" text-anchor=\"middle\">" + xml_escape(chart.y_label) + "</text>\n";
  // The series, clipped to the plot area (with room for half a line on its edges).
  o += "<clipPath id=\"plot-area\"><rect x=\"" + px(plot_left - 2) + "\" y=\"" + px(plot_top - 2) +
       "\" width=\"" + px(plot_right - plot_left + 4) + "\" height=\"" +
       px(plot_bottom - plot_top + 4) + "\"/></clipPath>\n";
  o += "<g clip-path=\"url(#plot-area)\" fill=\"none\" stroke-width=\"" + px(kLineWidth) +
       "\" stroke-linejoin=\"round\" stroke-linecap=\"butt\">\n";
  for (std::size_t i = 0; i < data.size(); ++i) {
    const std::string colour = series_colour(i);
    const char* dash = kDashes[(i / 8) % 4];
    PathBuilder path;
    std::string dots;
    for (const auto& run : data[i].runs) {
      if (run.size() == 1) {
        dots += "<circle cx=\"" + px(xa.map(run[0].first)) + "\" cy=\"" +
                px(ya.map(run[0].second)) + "\" r=\"2.5\"/>";
        continue;
      }
      path.move();
      double prev_y = 0;
      for (std::size_t k = 0; k < run.size(); ++k) {
        const double x = xa.map(run[k].first), y = ya.map(run[k].second);
        if (chart.step && k > 0) path.add(x, prev_y);
        path.add(x, y);
        prev_y = y;
      }
    }
    const std::string d = path.finish();
    if (!d.empty()) {
      o += "<path stroke=\"" + colour + "\"";
      if (*dash) o += std::string(" stroke-dasharray=\"") + dash + "\"";
      o += " d=\"" + d + "\"/>\n";
    }
    if (!dots.empty()) o += "<g fill=\"" + colour + "\" stroke=\"none\">" + dots + "</g>\n";
  }
  o += "</g>\n";
  if (empty)
    o += "<text x=\"" + px(mid_x) + "\" y=\"" + px(mid_y) + "\" font-size=\"" + px(kLabelFont) +
         "\" fill=\"#888\" text-anchor=\"middle\">no data</text>\n";
  // Legend.
  if (!rows.empty()) {
    o += "<g font-size=\"" + px(kLegendFont) + "\">\n";
    for (std::size_t r = 0; r < rows.size(); ++r) {
      double w = -kLegendGap;
      for (const auto& e : rows[r]) w += e.width;
      double x = (kWidth - w) / 2;
      const double y = legend_top + r * kLegendRow + kLegendRow / 2;
      for (const auto& e : rows[r]) {
        const char* dash = kDashes[(e.series / 8) % 4];
        o += "<line x1=\"" + px(x) + "\" y1=\"" + px(y) + "\" x2=\"" + px(x + kLegendSwatch) +
             "\" y2=\"" + px(y) + "\" stroke=\"" + series_colour(e.series) +
             "\" stroke-width=\"2.5\"";
        if (*dash) o += std::string(" stroke-dasharray=\"") + dash + "\"";
        o += "/>";
        o += "<text class=\"legend\" x=\"" + px(x + kLegendSwatch + 6) + "\" y=\"" +
             px(y + kLegendFont * 0.35) + "\">" + xml_escape(e.text) + "</text>\n";
        x += e.width;
      }
    }
    o += "</g>\n";
  }
  o += "</svg>\n";
  return o;
}

Status write_svg(const Chart& chart, const std::string& path) {
  const std::string svg = render_svg(chart);
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f) return Status::Error(path + ": cannot open for writing: " + std::strerror(errno));
  f.write(svg.data(), static_cast<std::streamsize>(svg.size()));
  f.close();
  if (!f) return Status::Error(path + ": write failed: " + std::strerror(errno));
  return Status::Ok();
}

}  // namespace orrery::sim::plot
