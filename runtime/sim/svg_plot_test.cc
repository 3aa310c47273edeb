// svg_plot: well-formed SVG for normal and degenerate charts, nice ticks that cover the data and
// labels that do not overlap, the empirical CDF, shape-keeping downsampling, escaping.
#include "runtime/sim/svg_plot.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "tests/temp_dir.h"

namespace orrery::sim::plot {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

// --- A small XML well-formedness check (the subset a generator of SVG may produce) -----------

bool name_start(char c) {
  return std::isalpha(static_cast<unsigned char>(c)) || c == '_' || c == ':';
}
bool name_char(char c) {
  return name_start(c) || std::isdigit(static_cast<unsigned char>(c)) || c == '-' || c == '.';
}

// "" when text (character data or an attribute value, up to end) has only valid references and
// no '<'; else the problem.
std::string check_text(const std::string& s, std::size_t b, std::size_t e) {
  for (std::size_t i = b; i < e; ++i) {
    if (s[i] == '<') return "'<' in text at " + std::to_string(i);
    if (s[i] != '&') continue;
    const std::size_t semi = s.find(';', i);
    if (semi == std::string::npos || semi > e)
      return "unterminated reference at " + std::to_string(i);
    const std::string ref = s.substr(i + 1, semi - i - 1);
    static const std::set<std::string> kNamed = {"amp", "lt", "gt", "quot", "apos"};
    bool ok = kNamed.count(ref) > 0;
    if (!ok && ref.size() > 1 && ref[0] == '#')
      ok = std::all_of(ref.begin() + 1, ref.end(),
                       [](char c) { return std::isdigit(static_cast<unsigned char>(c)); });
    if (!ok) return "bad reference &" + ref + "; at " + std::to_string(i);
  }
  return "";
}

std::string xml_problem(const std::string& s) {
  std::size_t i = 0;
  if (s.rfind("<?xml", 0) == 0) {
    i = s.find("?>");
    if (i == std::string::npos) return "unterminated XML declaration";
    i += 2;
  }
  std::vector<std::string> open;
  int roots = 0;
  while (i < s.size()) {
    if (s[i] != '<') {
      const std::size_t next = std::min(s.find('<', i), s.size());
      if (open.empty()) {
        for (std::size_t k = i; k < next; ++k)
          if (!std::isspace(static_cast<unsigned char>(s[k])))
            return "text outside the root at " + std::to_string(k);
      }
      if (auto p = check_text(s, i, next); !p.empty()) return p;
      i = next;
      continue;
    }
    if (s.compare(i, 4, "<!--") == 0) {
      const std::size_t end = s.find("-->", i + 4);
      if (end == std::string::npos) return "unterminated comment";
      i = end + 3;
      continue;
    }
    const bool closing = s.compare(i, 2, "</") == 0;
    std::size_t k = i + (closing ? 2 : 1);
    if (k >= s.size() || !name_start(s[k])) return "bad tag name at " + std::to_string(i);
    const std::size_t name_b = k;
    while (k < s.size() && name_char(s[k])) ++k;
    const std::string name = s.substr(name_b, k - name_b);
    if (closing) {
      while (k < s.size() && std::isspace(static_cast<unsigned char>(s[k]))) ++k;
      if (k >= s.size() || s[k] != '>') return "bad end tag </" + name;
      if (open.empty() || open.back() != name)
        return "</" + name + "> closes " + (open.empty() ? "nothing" : "<" + open.back() + ">");
      open.pop_back();
      i = k + 1;
      continue;
    }
    std::set<std::string> attrs;
    while (true) {
      const std::size_t ws = k;
      while (k < s.size() && std::isspace(static_cast<unsigned char>(s[k]))) ++k;
      if (k >= s.size()) return "unterminated tag <" + name;
      if (s[k] == '>' || s.compare(k, 2, "/>") == 0) break;
      if (k == ws) return "no space before an attribute of <" + name;
      if (!name_start(s[k])) return "bad attribute name in <" + name;
      const std::size_t ab = k;
      while (k < s.size() && name_char(s[k])) ++k;
      const std::string attr = s.substr(ab, k - ab);
      if (!attrs.insert(attr).second) return "duplicate attribute " + attr + " in <" + name;
      if (k + 1 >= s.size() || s[k] != '=' || (s[k + 1] != '"' && s[k + 1] != '\''))
        return "bad attribute " + attr;
      const char q = s[k + 1];
      const std::size_t vb = k + 2, ve = s.find(q, vb);
      if (ve == std::string::npos) return "unterminated value of " + attr;
      if (auto p = check_text(s, vb, ve); !p.empty()) return p;
      k = ve + 1;
    }
    const bool empty = s[k] == '/';
    if (open.empty()) ++roots;
    if (roots > 1) return "a second root <" + name;
    if (!empty) open.push_back(name);
    i = k + (empty ? 2 : 1);
  }
  if (!open.empty()) return "<" + open.back() + "> not closed";
  if (roots != 1) return "no root element";
  return "";
}

bool have_xmllint() { return std::system("xmllint --version >/dev/null 2>&1") == 0; }

// The document is well-formed (by the check above, and by xmllint where installed) and holds no
// number that is not one (nan, inf).
void ExpectWellFormed(const std::string& svg) {
  EXPECT_EQ(xml_problem(svg), "") << svg.substr(0, 2000);
  EXPECT_EQ(svg.find("nan"), std::string::npos);
  EXPECT_EQ(svg.find("inf"), std::string::npos);
  static const bool xmllint = have_xmllint();
  if (xmllint) {
    orrery::testing::TempDir dir("orrery_svg_test");
    const std::string path = dir.file("c.svg");
    orrery::testing::write_bytes(path, svg);
    EXPECT_EQ(std::system(("xmllint --noout " + path).c_str()), 0) << svg.substr(0, 2000);
  }
}

TEST(SvgPlotXmlCheck, CatchesMalformedDocuments) {  // the checker above is itself checked
  EXPECT_EQ(xml_problem("<?xml version=\"1.0\"?>\n<a x=\"1\"><b/>t &amp; u</a>\n"), "");
  EXPECT_NE(xml_problem("<a><b></a></b>"), "");
  EXPECT_NE(xml_problem("<a>x < y</a>"), "");
  EXPECT_NE(xml_problem("<a>x & y</a>"), "");
  EXPECT_NE(xml_problem("<a t=\"<\"/>"), "");
  EXPECT_NE(xml_problem("<a x=\"1\" x=\"2\"/>"), "");
  EXPECT_NE(xml_problem("<a/><b/>"), "");
  EXPECT_NE(xml_problem("<a>"), "");
}

// --- Helpers on rendered documents ----------------------------------------------------------

// The <text class="CLASS" x=".." y=".." ...>LABEL</text> elements, in document order.
struct Text {
  double x, y;
  std::string label;
};
std::vector<Text> texts(const std::string& svg, const std::string& cls) {
  std::vector<Text> out;
  const std::string key = "<text class=\"" + cls + "\" x=\"";
  for (std::size_t i = svg.find(key); i != std::string::npos; i = svg.find(key, i + 1)) {
    const double x = std::atof(svg.c_str() + i + key.size());
    const double y = std::atof(svg.c_str() + svg.find(" y=\"", i) + 4);
    const std::size_t b = svg.find('>', i) + 1, e = svg.find("</text>", b);
    out.push_back({x, y, svg.substr(b, e - b)});
  }
  return out;
}

std::size_t count(const std::string& s, const std::string& what) {
  std::size_t n = 0;
  for (std::size_t i = s.find(what); i != std::string::npos; i = s.find(what, i + 1)) ++n;
  return n;
}

// 1, 2 or 5 times a power of ten.
bool nice_step(double step) {
  const double e = std::floor(std::log10(step) + 1e-9);
  const double m = step / std::pow(10.0, e);
  return std::fabs(m - 1) < 1e-6 || std::fabs(m - 2) < 1e-6 || std::fabs(m - 5) < 1e-6;
}

Series line(std::string name, int n, double x_scale, double (*f)(double)) {
  Series s{std::move(name), {}, {}};
  for (int i = 0; i < n; ++i) {
    s.x.push_back(i * x_scale);
    s.y.push_back(f(i * x_scale));
  }
  return s;
}

Chart three_policies() {
  Chart c{.title = "Utilization", .x_label = "time (h)", .y_label = "busy GPUs / GPUs"};
  c.series.push_back(line("fifo", 500, 0.4, [](double t) { return 0.6 + 0.2 * std::sin(t / 9); }));
  c.series.push_back(
      line("tiresias", 500, 0.4, [](double t) { return 0.7 + 0.15 * std::sin(t / 7); }));
  c.series.push_back(
      line("orrery", 500, 0.4, [](double t) { return 0.85 + 0.1 * std::sin(t / 5); }));
  c.y_min = 0;
  c.y_max = 1;
  return c;
}

// --- Well-formed documents ------------------------------------------------------------------

TEST(SvgPlot, NormalChartsAreWellFormed) {
  Chart c = three_policies();
  const std::string svg = render_svg(c);
  ExpectWellFormed(svg);
  EXPECT_NE(svg.find("viewBox=\"0 0 720.0 440.0\""), std::string::npos);
  EXPECT_EQ(count(svg, "<path "), 3u);
  for (std::size_t i = 0; i < 3; ++i)
    EXPECT_NE(svg.find(std::string("stroke=\"") + series_colour(i)), std::string::npos);
  EXPECT_EQ(texts(svg, "legend").size(), 3u);
  EXPECT_NE(svg.find(">Utilization</text>"), std::string::npos);
  EXPECT_NE(svg.find(">time (h)</text>"), std::string::npos);
  EXPECT_NE(svg.find(">busy GPUs / GPUs</text>"), std::string::npos);

  c.step = true;
  ExpectWellFormed(render_svg(c));

  Chart jct{
      .title = "JCT CDF", .x_label = "job completion time (s)", .y_label = "fraction of jobs"};
  std::mt19937_64 rng(7);
  std::lognormal_distribution<double> d(7, 2);
  for (const char* p : {"fifo", "tiresias", "orrery"}) {
    std::vector<double> v(5000);
    for (double& x : v) x = d(rng);
    jct.series.push_back(cdf(p, v));
  }
  jct.step = jct.log_x = true;
  jct.y_min = 0;
  jct.y_max = 1;
  ExpectWellFormed(render_svg(jct));
}

TEST(SvgPlot, EdgeCasesRenderWellFormed) {
  std::vector<Chart> charts;
  charts.push_back(Chart{});  // nothing at all
  charts.push_back(Chart{.title = "t", .series = {Series{"empty", {}, {}}}});
  charts.push_back(Chart{.series = {Series{"one", {3}, {4}}}});
  charts.push_back(Chart{.series = {Series{"zero", {0}, {0}}}});
  charts.push_back(Chart{.series = {Series{"nonfinite", {kNaN, 1, kInf}, {1, kNaN, 2}}}});
  charts.push_back(Chart{.series = {Series{"flat", {0, 1, 2}, {5, 5, 5}}}});
  charts.push_back(Chart{.series = {Series{"vertical", {2, 2, 2}, {1, 2, 3}}}});
  charts.push_back(Chart{.series = {Series{"uneven", {0, 1, 2, 3}, {1, 2}}}});
  charts.push_back(Chart{.series = {Series{"neg", {-5, -1}, {-1e-9, -3e-9}}}});
  charts.push_back(Chart{.series = {Series{"huge", {0, 1e300}, {-1e300, 1e300}}}});
  charts.push_back(Chart{.series = {Series{"tiny", {1, 1 + 1e-12}, {1e-300, 2e-300}}}});
  charts.push_back(Chart{.series = {Series{"log", {-1, 0, 5, 50}, {0, 1, 2, 3}}}, .log_x = true});
  charts.push_back(Chart{.series = {Series{"log none", {-1, 0}, {0, 1}}}, .log_x = true});
  charts.push_back(Chart{.series = {Series{"log one", {100}, {1}}}, .step = true, .log_x = true});
  charts.push_back(Chart{.series = {Series{"bad y", {0, 1}, {0, 1}}}, .y_min = 1, .y_max = 0});
  charts.push_back(Chart{.series = {Series{"y_min only", {0, 1}, {-5, -4}}}, .y_min = 0});
  charts.push_back(Chart{.series = {Series{"y_max only", {0, 1}, {5, 6}}}, .y_max = 1});
  charts.push_back(Chart{
      .series = {Series{"outside", {0, 1, 2}, {-1e200, 0.5, 1e200}}}, .y_min = 0, .y_max = 1});
  charts.push_back(Chart{.series = {Series{"", {0, 1}, {0, 1}}}});  // no name: no legend entry
  Chart many;
  for (int i = 0; i < 20; ++i)
    many.series.push_back(Series{"series number " + std::to_string(i), {0, 1}, {0, i * 1.0}});
  charts.push_back(many);
  for (const Chart& c : charts) {
    SCOPED_TRACE(c.series.empty() ? "(no series)" : c.series[0].name);
    const std::string svg = render_svg(c);
    ExpectWellFormed(svg);
  }
  EXPECT_NE(render_svg(charts[0]).find(">no data</text>"), std::string::npos);
  EXPECT_NE(render_svg(charts[1]).find("empty (no data)"), std::string::npos);
  EXPECT_EQ(count(render_svg(charts[2]), "<circle "), 1u);  // a single point is a dot
  EXPECT_EQ(count(render_svg(charts[4]), "<circle "), 0u);  // (1, nan) and (inf, 2) skipped:
  EXPECT_EQ(count(render_svg(charts[4]), "<path "), 0u);    // nothing left to draw
  EXPECT_EQ(texts(render_svg(charts[18]), "legend").size(), 0u);
  const std::string many_svg = render_svg(many);
  EXPECT_EQ(texts(many_svg, "legend").size(), 20u);
  EXPECT_NE(many_svg.find("stroke-dasharray"), std::string::npos);  // past 8 colours: dashes
}

TEST(SvgPlot, ExplicitYRangeIsTheAxis) {
  const std::string svg = render_svg(three_policies());
  const auto y = texts(svg, "ytick");
  ASSERT_GE(y.size(), 3u);
  EXPECT_EQ(y.front().label, "0.0");
  EXPECT_EQ(y.back().label, "1.0");
}

TEST(SvgPlot, NonFiniteValuesBreakTheLine) {
  Chart c{.series = {Series{"gap", {0, 1, 2, 3, 4, 5}, {1, 2, kNaN, 3, 4, 5}}}};
  const std::string svg = render_svg(c);
  const std::size_t d = svg.find(" d=\"");
  ASSERT_NE(d, std::string::npos);
  const std::string path = svg.substr(d, svg.find('"', d + 4) - d);
  EXPECT_EQ(count(path, "M"), 2u) << path;
}

TEST(SvgPlot, LongSeriesMakeSmallDocuments) {
  // A million points, not downsampled: the renderer keeps at most four a pixel column.
  Series s{"util", {}, {}};
  std::mt19937_64 rng(1);
  std::uniform_real_distribution<double> u(0, 1);
  for (int i = 0; i < 1'000'000; ++i) {
    s.x.push_back(i / 3600.0);
    s.y.push_back(u(rng));
  }
  const std::string svg = render_svg(Chart{.series = {s}, .step = true});
  ExpectWellFormed(svg);
  EXPECT_LT(svg.size(), 100'000u);
}

TEST(SvgPlot, EscapesText) {
  EXPECT_EQ(xml_escape("a & b <c> \"d\" 'e'"), "a &amp; b &lt;c&gt; &quot;d&quot; &apos;e&apos;");
  EXPECT_EQ(xml_escape("tab\tnew\nline"), "tab\tnew\nline");
  EXPECT_EQ(xml_escape(std::string("nul\0bell\a", 9)),
            "nul\xEF\xBF\xBD"
            "bell\xEF\xBF\xBD");
  EXPECT_EQ(xml_escape("\xC2\xB5s \xE6\x97\xA5 \xF0\x9F\x93\x88"),
            "\xC2\xB5s \xE6\x97\xA5 \xF0\x9F\x93\x88");                           // µs 日 📈
  EXPECT_EQ(xml_escape("bad \xFF\xC3("), "bad \xEF\xBF\xBD\xEF\xBF\xBD(");        // invalid bytes
  EXPECT_EQ(xml_escape("\xC0\xAF"), "\xEF\xBF\xBD\xEF\xBF\xBD");                  // overlong '/'
  EXPECT_EQ(xml_escape("\xED\xA0\x80"), "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");  // a surrogate

  const std::string evil = "<script>&amp; \"x\" \x01 \xFF";
  Chart c{
      .title = evil, .x_label = evil, .y_label = evil, .series = {Series{evil, {0, 1}, {0, 1}}}};
  const std::string svg = render_svg(c);
  ExpectWellFormed(svg);
  EXPECT_EQ(svg.find("<script>"), std::string::npos);
  EXPECT_NE(svg.find("&lt;script&gt;&amp;amp; &quot;x&quot;"), std::string::npos);
}

TEST(SvgPlot, WriteSvgWritesTheDocumentAndNamesThePathOnError) {
  orrery::testing::TempDir dir("orrery_svg_test");
  const Chart c = three_policies();
  const std::string path = dir.file("u.svg");
  ASSERT_TRUE(write_svg(c, path).ok());
  EXPECT_EQ(orrery::testing::read_bytes(path), render_svg(c));
  const Status bad = write_svg(c, dir.file("no/such/dir/u.svg"));
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.reason().find(dir.file("no/such/dir/u.svg")), std::string::npos);
}

// --- Ticks ----------------------------------------------------------------------------------

TEST(SvgPlotTicks, LinearTicksAreNiceAndCoverTheRange) {
  std::mt19937_64 rng(3);
  std::uniform_real_distribution<double> u(-1, 1);
  std::uniform_int_distribution<int> mag(-6, 9), mt(3, 12);
  for (int trial = 0; trial < 20000; ++trial) {
    const double scale = std::pow(10.0, mag(rng));
    double lo = u(rng) * scale, hi = u(rng) * scale;
    if (trial % 3 == 0) lo = 0, hi = std::fabs(hi);  // counts and times start at 0
    if (lo > hi) std::swap(lo, hi);
    const int max_ticks = mt(rng);
    const auto t = linear_ticks(lo, hi, max_ticks);
    SCOPED_TRACE(std::to_string(lo) + " .. " + std::to_string(hi) + " max " +
                 std::to_string(max_ticks));
    ASSERT_GE(t.size(), 2u);
    ASSERT_LE(t.size(), static_cast<std::size_t>(max_ticks));
    EXPECT_LE(t.front().value, lo);
    EXPECT_GE(t.back().value, hi);
    const double step = t[1].value - t[0].value;
    ASSERT_GT(step, 0);
    EXPECT_TRUE(nice_step(step)) << step;
    std::set<std::string> labels;
    for (std::size_t i = 0; i < t.size(); ++i) {
      const double k = t[i].value / step;
      EXPECT_NEAR(k, std::round(k), 1e-6) << t[i].value;  // on the step's grid
      if (i > 0) {
        EXPECT_NEAR(t[i].value - t[i - 1].value, step, step * 1e-6);
      }
      EXPECT_TRUE(labels.insert(t[i].label).second) << "duplicate label " << t[i].label;
    }
    // The finest nice step that fits: the next finer one would need more than max_ticks.
    const double e = std::floor(std::log10(step) + 1e-9), m = std::round(step / std::pow(10.0, e));
    const double finer = (m == 1 ? 0.5 : m == 2 ? 1 : 2) * std::pow(10.0, e);
    const double finer_count = std::ceil(hi / finer - 1e-9) - std::floor(lo / finer + 1e-9) + 1;
    EXPECT_GT(finer_count, max_ticks) << "step " << step << " could be " << finer;
  }
}

TEST(SvgPlotTicks, LinearTickLabels) {
  auto labels = [](double lo, double hi, int n) {
    std::vector<std::string> out;
    for (const auto& t : linear_ticks(lo, hi, n)) out.push_back(t.label);
    return out;
  };
  EXPECT_EQ(labels(0, 1, 6), (std::vector<std::string>{"0.0", "0.2", "0.4", "0.6", "0.8", "1.0"}));
  EXPECT_EQ(labels(0, 168, 8), (std::vector<std::string>{"0", "50", "100", "150", "200"}));
  EXPECT_EQ(labels(0, 95000, 6),
            (std::vector<std::string>{"0", "20k", "40k", "60k", "80k", "100k"}));
  EXPECT_EQ(labels(0, 2.4e6, 6),
            (std::vector<std::string>{"0", "500k", "1000k", "1500k", "2000k", "2500k"}));
  EXPECT_EQ(labels(0, 2.4e7, 6), (std::vector<std::string>{"0", "5M", "10M", "15M", "20M", "25M"}));
  EXPECT_EQ(labels(-0.3, 0.25, 4), (std::vector<std::string>{"-0.5", "0.0", "0.5"}));
  EXPECT_EQ(labels(5, 5, 5), (std::vector<std::string>{"2", "4", "6", "8"}));  // one value
  EXPECT_EQ(labels(0, 0, 5), (std::vector<std::string>{"-1.0", "-0.5", "0.0", "0.5", "1.0"}));
}

TEST(SvgPlotTicks, LogTicksArePowersOfTenCoveringTheRange) {
  for (double lo : {1e-4, 0.3, 1.0, 7.0, 12.0, 999.0}) {
    for (double f : {1.0, 1.5, 10.0, 3e3, 1e8}) {
      const double hi = lo * f;
      for (int max_labels : {1, 3, 5, 12}) {
        const auto t = log_ticks(lo, hi, max_labels);
        ASSERT_GE(t.size(), 2u);
        EXPECT_LE(t.front().value, lo * (1 + 1e-9));
        EXPECT_GE(t.back().value, hi * (1 - 1e-9));
        int labelled = 0;
        for (std::size_t i = 0; i < t.size(); ++i) {
          const double e = std::log10(t[i].value);
          EXPECT_NEAR(e, std::round(e), 1e-9);
          if (i > 0) {
            EXPECT_NEAR(t[i].value / t[i - 1].value, 10, 1e-6);
          }
          if (!t[i].label.empty()) {
            ++labelled;
            EXPECT_EQ(t[i].label, decade_label(static_cast<int>(std::round(e))));
          }
        }
        EXPECT_GE(labelled, 1);
        EXPECT_LE(labelled, max_labels);
      }
    }
  }
  // 1 s .. 30 days with room for 3 labels: 1, 1k, 1M.
  std::vector<std::string> labels;
  for (const auto& t : log_ticks(1, 2.6e6, 3))
    if (!t.label.empty()) labels.push_back(t.label);
  EXPECT_EQ(labels, (std::vector<std::string>{"1", "1k", "1M"}));
}

TEST(SvgPlotTicks, DecadeLabels) {
  EXPECT_EQ(decade_label(0), "1");
  EXPECT_EQ(decade_label(2), "100");
  EXPECT_EQ(decade_label(3), "1k");
  EXPECT_EQ(decade_label(5), "100k");
  EXPECT_EQ(decade_label(6), "1M");
  EXPECT_EQ(decade_label(10), "10G");
  EXPECT_EQ(decade_label(12), "1e12");
  EXPECT_EQ(decade_label(-1), "0.1");
  EXPECT_EQ(decade_label(-3), "0.001");
  EXPECT_EQ(decade_label(-4), "1e-4");
}

TEST(SvgPlotTicks, RenderedTickLabelsDoNotOverlapAndStayOnTheCanvas) {
  // Tick labels' widths in DejaVu Sans (the documents' first font, wider than Helvetica/Arial)
  // at the 11 px tick font: neighbours must be at least 4 px apart, for ranges whose labels are
  // long.
  auto width = [](const std::string& label) {
    double em = 0;
    for (char c : label) {
      em += c == '.'   ? 0.318
            : c == '-' ? 0.361
            : c == 'k' ? 0.579
            : c == 'M' ? 0.863
            : c == 'G' ? 0.775
            : c == 'e' ? 0.615
                       : 0.636;  // digits
    }
    return em * 11;
  };
  std::vector<Chart> charts;
  for (double hi : {1.0, 7.0, 168.0, 1234.5, 99999.0, 1.23456789e8, 3e12, 1e15})
    charts.push_back(Chart{.series = {Series{"s", {0, hi}, {-hi, hi}}}});
  charts.push_back(Chart{.series = {Series{"s", {1.000001, 1.000002}, {0, 1}}}});
  for (double hi : {10.0, 1e3, 1e9, 1e30})
    charts.push_back(Chart{.series = {Series{"s", {1e-3, hi}, {0, 1}}}, .log_x = true});
  for (const Chart& c : charts) {
    const std::string svg = render_svg(c);
    const auto x = texts(svg, "xtick");
    SCOPED_TRACE(svg.substr(0, 3000));
    ASSERT_GE(x.size(), c.log_x ? 1u : 2u);
    for (std::size_t i = 0; i < x.size(); ++i) {
      const double w = width(x[i].label);
      EXPECT_GE(x[i].x - w / 2, 0);
      EXPECT_LE(x[i].x + w / 2, 720);
      if (i > 0) {
        const double w0 = width(x[i - 1].label);
        EXPECT_GE(x[i].x - x[i - 1].x, (w + w0) / 2 + 4) << x[i - 1].label << " | " << x[i].label;
      }
    }
    const auto y = texts(svg, "ytick");  // right-aligned at x, 11 px high: 15 px apart at least
    ASSERT_GE(y.size(), 2u);
    for (std::size_t i = 0; i < y.size(); ++i) {
      EXPECT_GE(y[i].x - width(y[i].label), 0);
      if (i > 0) {
        EXPECT_GE(std::fabs(y[i].y - y[i - 1].y), 15);
      }
    }
  }
}

// --- CDF ------------------------------------------------------------------------------------

TEST(SvgPlotCdf, IsTheEmpiricalDistribution) {
  std::mt19937_64 rng(5);
  std::uniform_int_distribution<int> v(1, 50);  // many ties
  std::vector<double> values;
  for (int i = 0; i < 1000; ++i) values.push_back(v(rng));
  values.push_back(kNaN);
  values.push_back(kInf);
  const Series s = cdf("jct", values);
  EXPECT_EQ(s.name, "jct");
  ASSERT_EQ(s.x.size(), s.y.size());
  ASSERT_GE(s.x.size(), 2u);
  EXPECT_EQ(s.y.front(), 0);
  EXPECT_EQ(s.y.back(), 1);
  EXPECT_EQ(s.x.front(), *std::min_element(values.begin(), values.begin() + 1000));
  EXPECT_EQ(s.x.back(), *std::max_element(values.begin(), values.begin() + 1000));
  for (std::size_t i = 1; i < s.x.size(); ++i) {
    EXPECT_LE(s.x[i - 1], s.x[i]);
    EXPECT_LT(s.y[i - 1], s.y[i]);
    EXPECT_GE(s.y[i], 0);
    EXPECT_LE(s.y[i], 1);
    // y is the fraction of the finite values <= x.
    const auto le =
        std::count_if(values.begin(), values.begin() + 1000, [&](double a) { return a <= s.x[i]; });
    EXPECT_DOUBLE_EQ(s.y[i], le / 1000.0);
  }
  EXPECT_EQ(std::set<double>(s.x.begin() + 1, s.x.end()).size(), s.x.size() - 1);  // distinct
}

TEST(SvgPlotCdf, EdgeCases) {
  EXPECT_TRUE(cdf("none", {}).x.empty());
  EXPECT_TRUE(cdf("nan", {kNaN, -kInf}).x.empty());
  const Series one = cdf("one", {42});
  EXPECT_EQ(one.x, (std::vector<double>{42, 42}));
  EXPECT_EQ(one.y, (std::vector<double>{0, 1}));
  const Series same = cdf("same", {3, 3, 3});
  EXPECT_EQ(same.y, (std::vector<double>{0, 1}));
}

TEST(SvgPlotCdf, ThinningBoundsPointsAndError) {
  std::mt19937_64 rng(9);
  std::lognormal_distribution<double> d(7, 2);
  std::vector<double> values(200000);
  for (double& x : values) x = d(rng);
  const Series full = cdf("f", values);
  for (std::size_t m : {1, 2, 10, 500, 1000}) {
    const Series thin = cdf("t", values, m);
    EXPECT_LE(thin.x.size(), m + 2);
    EXPECT_EQ(thin.x.front(), full.x.front());
    EXPECT_EQ(thin.x.back(), full.x.back());
    EXPECT_EQ(thin.y.back(), 1);
    // The step function through the thinned points is within 1/m of the full one everywhere.
    std::size_t j = 0;
    for (std::size_t i = 0; i < full.x.size(); ++i) {
      while (j + 1 < thin.x.size() && thin.x[j + 1] <= full.x[i]) ++j;
      EXPECT_LE(full.y[i] - thin.y[j], 1.0 / m + 1e-9) << "m=" << m << " x=" << full.x[i];
      EXPECT_GE(full.y[i] - thin.y[j], -1e-12);
    }
  }
  EXPECT_EQ(cdf("t", {1, 2, 3}, 1000).x.size(), 4u);  // fewer points than the bound: all kept
}

// --- Downsampling ---------------------------------------------------------------------------

TEST(SvgPlotDownsample, KeepsEachBucketsMinAndMaxAndCapsThePoints) {
  std::mt19937_64 rng(11);
  std::normal_distribution<double> noise(0, 1);
  Series s{"util", {}, {}};
  const int n = 1'000'000;
  for (int i = 0; i < n; ++i) {
    s.x.push_back(i);                                                                   // seconds
    s.y.push_back(std::sin(i / 50000.0) + 0.1 * noise(rng) + (i == 777'777 ? 50 : 0));  // one spike
  }
  for (std::size_t max_points : {4000, 1000, 7, 4}) {
    const Series d = downsample(s, max_points);
    EXPECT_EQ(d.name, "util");
    ASSERT_EQ(d.x.size(), d.y.size());
    EXPECT_LE(d.x.size(), max_points);
    EXPECT_GE(d.x.size(), max_points / 4);
    EXPECT_EQ(d.x.front(), 0);
    EXPECT_EQ(d.x.back(), n - 1);
    EXPECT_TRUE(std::is_sorted(d.x.begin(), d.x.end()));
    EXPECT_NE(std::find(d.y.begin(), d.y.end(), *std::max_element(s.y.begin(), s.y.end())),
              d.y.end());
    // Every bucket (max_points / 4 of equal width in x) keeps its lowest and highest point.
    const std::size_t buckets = max_points / 4;
    std::vector<double> lo(buckets, kInf), hi(buckets, -kInf);
    auto bucket = [&](double x) {
      return std::min(buckets - 1, static_cast<std::size_t>(x / (n - 1) * buckets));
    };
    for (int i = 0; i < n; ++i) {
      lo[bucket(s.x[i])] = std::min(lo[bucket(s.x[i])], s.y[i]);
      hi[bucket(s.x[i])] = std::max(hi[bucket(s.x[i])], s.y[i]);
    }
    std::map<std::size_t, std::vector<double>> kept;
    for (std::size_t i = 0; i < d.x.size(); ++i) {
      EXPECT_EQ(d.y[i], s.y[static_cast<std::size_t>(d.x[i])]);  // real points only
      kept[bucket(d.x[i])].push_back(d.y[i]);
    }
    for (std::size_t b = 0; b < buckets; ++b) {
      const auto& k = kept[b];
      EXPECT_NE(std::find(k.begin(), k.end(), lo[b]), k.end())
          << "bucket " << b << " lost its minimum";
      EXPECT_NE(std::find(k.begin(), k.end(), hi[b]), k.end())
          << "bucket " << b << " lost its maximum";
    }
  }
}

TEST(SvgPlotDownsample, ShortSeriesAndEdgeCases) {
  const Series s{"s", {0, 1, 2, 3, 4}, {5, 1, 9, 2, 3}};
  const Series same = downsample(s, 5);
  EXPECT_EQ(same.x, s.x);
  EXPECT_EQ(same.y, s.y);
  EXPECT_TRUE(downsample(s, 0).x.empty());
  EXPECT_EQ(downsample(s, 1).y, (std::vector<double>{1}));     // the lowest
  EXPECT_EQ(downsample(s, 2).y, (std::vector<double>{1, 9}));  // lowest and highest, in order
  EXPECT_EQ(downsample(s, 3).y, (std::vector<double>{1, 9}));
  EXPECT_EQ(downsample(s, 4).y,
            (std::vector<double>{5, 1, 9, 3}));  // one bucket: first, min, max, last
  EXPECT_TRUE(downsample(Series{"e", {}, {}}, 10).x.empty());
  // Non-finite points are dropped once the series must shrink.
  const Series d = downsample(Series{"n", {0, 1, 2, 3, 4, 5}, {1, kNaN, 2, kInf, 3, 4}}, 4);
  EXPECT_EQ(d.y, (std::vector<double>{1, 2, 3, 4}));
  // x not ascending: buckets of equal counts, still capped.
  Series shuffled{"z", {}, {}};
  for (int i = 0; i < 10000; ++i) {
    shuffled.x.push_back((i * 7919) % 10000);
    shuffled.y.push_back(i % 13);
  }
  EXPECT_LE(downsample(shuffled, 100).x.size(), 100u);
  // All x equal: one bucket, whose first point is also its lowest and highest, and its last.
  EXPECT_EQ(downsample(Series{"v", std::vector<double>(100, 1.0), std::vector<double>(100, 2.0)}, 8)
                .x.size(),
            2u);
}

}  // namespace
}  // namespace orrery::sim::plot
