#include "runtime/sim/svg_plot.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <utility>

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

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}
// A pixel coordinate: one decimal, never "-0.0".
std::string px(double v) {
  v = std::clamp(v, -kFar, kFar);
  if (std::fabs(v) < 0.05) v = 0;
  return fmt("%.1f", v);
}

// An estimate of a text's width: the advances of DejaVu Sans, in em, rounded up (the first font
// the documents name, and wider than Helvetica or Arial, so labels spaced by it do not overlap in
// those either). Used to keep labels apart, lay out the legend and size the margins.
double char_em(char32_t c) {
  auto in = [c](std::string_view set) {
    return c < 0x80 && set.find(static_cast<char>(c)) != set.npos;
  };
  if (c >= '0' && c <= '9') return 0.64;
  if (in(" .,:;!'|ijlI")) return 0.32;
  if (in("()[]-/ftr")) return 0.42;
  if (in("mw%")) return 0.98;
  if (in("MW")) return 1.0;
  if (c >= 'a' && c <= 'z') return 0.63;
  if (c >= 'A' && c <= 'Z') return 0.76;
  if (c < 0x80) return 0.84;  // other ASCII symbols: & @ # _ ...
  return 1.0;                 // others, CJK included
}
double text_width(std::string_view s, double font) {
  double em = 0;
  for (std::size_t i = 0; i < s.size(); ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if ((c & 0xC0) == 0x80) continue;  // continuation bytes: counted with their lead byte
    em += char_em(c < 0x80 ? c : 0x100);
  }
  return em * font;
}

bool finite(double v) { return std::isfinite(v); }

// Tick-label decimals for a step: 0.2 -> 1, 0.05 -> 2, 10 -> 0.
int decimals_for(double step) {
  return std::max(0, -static_cast<int>(std::floor(std::log10(step) + 1e-9)));
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

// ---------------------------------------------------------------------------------------------
// Text

std::string xml_escape(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const std::size_t n = s.size();
  static constexpr const char* kReplacement = "\xEF\xBF\xBD";  // U+FFFD
  for (std::size_t i = 0; i < n;) {
    const unsigned char c = p[i];
    if (c < 0x80) {
      switch (c) {
        case '&':
          out += "&amp;";
          break;
        case '<':
          out += "&lt;";
          break;
        case '>':
          out += "&gt;";
          break;
        case '"':
          out += "&quot;";
          break;
        case '\'':
          out += "&apos;";
          break;
        default:
          if (c < 0x20 && c != '\t' && c != '\n') {
            out += kReplacement;
          } else {
            out += static_cast<char>(c);
          }
      }
      ++i;
      continue;
    }
    // A multi-byte sequence: its length from the lead byte, then the code point, which must be
    // the shortest encoding and a character XML allows.
    std::size_t len = 0;
    std::uint32_t cp = 0;
    if (c >= 0xC2 && c <= 0xDF)
      len = 2, cp = c & 0x1F;
    else if (c >= 0xE0 && c <= 0xEF)
      len = 3, cp = c & 0x0F;
    else if (c >= 0xF0 && c <= 0xF4)
      len = 4, cp = c & 0x07;
    bool ok = len > 0 && i + len <= n;
    for (std::size_t k = 1; ok && k < len; ++k) {
      if ((p[i + k] & 0xC0) != 0x80) ok = false;
      cp = (cp << 6) | (p[i + k] & 0x3F);
    }
    if (ok) {
      const std::uint32_t min_cp = len == 2 ? 0x80 : len == 3 ? 0x800 : 0x10000;
      ok = cp >= min_cp && cp <= 0x10FFFF && !(cp >= 0xD800 && cp <= 0xDFFF) && cp != 0xFFFE &&
           cp != 0xFFFF;
    }
    if (ok) {
      out.append(s.substr(i, len));
      i += len;
    } else {
      out += kReplacement;
      ++i;  // resynchronise on the next byte
    }
  }
  return out;
}

const char* series_colour(std::size_t i) { return kOkabeIto[i % 8]; }

// ---------------------------------------------------------------------------------------------
// Ticks

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

// ---------------------------------------------------------------------------------------------
// Series helpers

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

// ---------------------------------------------------------------------------------------------
// Rendering

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
