#include "checker/report.h"

#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <ctime>
#include <iomanip>
#include <map>
#include <sstream>
#include <vector>

namespace orrery::checker {

namespace {

// "WORLD" for "INV-WORLD": the table's column header.
std::string short_id(spec::Inv inv) {
  std::string id(spec::inv_id(inv));
  return id.rfind("INV-", 0) == 0 ? id.substr(4) : id;
}

int inv_column(spec::Inv inv) {
  for (std::size_t i = 0; i < spec::kAllInvariants.size(); ++i)
    if (spec::kAllInvariants[i] == inv) return static_cast<int>(i);
  return -1;
}

std::string shape_text(const Shape& s) {
  return std::to_string(s.jobs) + " jobs, " + std::to_string(s.nodes) + " nodes x " +
         std::to_string(s.devices_per_node) + " devices";
}

// The BMC's shape and depth: what it reported when it ran, the configuration otherwise.
const Shape& bmc_shape(const CheckRun& run) { return run.bmc_ran ? run.bmc.shape : run.bmc_shape; }
int bmc_depth_asked(const CheckRun& run) {
  return run.bmc_ran ? run.bmc.depth : run.bmc_depth_asked;
}

// How far an invariant is proved.
struct Scope {
  bool own_proved = true;  // every obligation of this invariant (Init and each row) proved
  int own_failed = 0;
  int needs_sums = 0;      // obligations proved only with the sums of INV-INDEX assumed
  bool unbounded = false;
};

Scope scope_of(const ProofReport& p, spec::Inv inv) {
  Scope s;
  for (const auto& ob : p.obligations) {
    if (ob.kind != ObligationKind::kInvariant || ob.inv != inv) continue;
    if (!ob.proved) {
      s.own_proved = false;
      ++s.own_failed;
    } else if (!ob.local) {
      ++s.needs_sums;
    }
  }
  s.unbounded = unbounded(p, inv);
  return s;
}

std::string cell(const Obligation& ob) {
  if (ob.proved) return ob.local ? "ok" : "ok*";
  return ob.unknown ? "?" : "FAIL";
}

std::string seconds_text(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f", s < 0 ? 0.0 : s);
  return buf;
}

std::string timestamp_text(double seconds_ago) {
  std::time_t t = std::time(nullptr) - static_cast<std::time_t>(seconds_ago);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
  return buf;
}

std::string hostname_text() {
  char buf[256] = {};
  if (gethostname(buf, sizeof buf - 1) != 0) return "localhost";
  return buf;
}

struct Case {
  std::string classname;
  std::string name;
  double seconds = 0;
  enum { kPass, kFailure, kError, kSkipped } outcome = kPass;
  std::string message;  // failure/error/skipped message (one line)
  std::string type;     // failure/error type
  std::string text;     // failure/error body (the counterexample)
  std::string system_out;
};

struct Suite {
  std::string name;
  double seconds = 0;
  std::vector<std::pair<std::string, std::string>> properties;
  std::vector<Case> cases;
  int count(decltype(Case::kPass) o) const {
    return static_cast<int>(std::count_if(cases.begin(), cases.end(),
                                          [&](const Case& c) { return c.outcome == o; }));
  }
};

std::string attr(const std::string& s) { return "\"" + xml_escape(s, true) + "\""; }

void write_suites(std::ostream& out, const std::vector<Suite>& suites, double total_seconds) {
  int tests = 0, failures = 0, errors = 0, skipped = 0;
  for (const auto& s : suites) {
    tests += static_cast<int>(s.cases.size());
    failures += s.count(Case::kFailure);
    errors += s.count(Case::kError);
    skipped += s.count(Case::kSkipped);
  }
  const std::string host = hostname_text();
  const std::string stamp = timestamp_text(total_seconds);
  out << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  out << "<testsuites name=\"orrery-check\" tests=\"" << tests << "\" failures=\"" << failures
      << "\" errors=\"" << errors << "\" skipped=\"" << skipped << "\" time=\""
      << seconds_text(total_seconds) << "\">\n";
  int id = 0;
  for (const auto& s : suites) {
    out << "  <testsuite name=" << attr(s.name) << " id=\"" << id++ << "\" package=\"orrery-check\""
        << " tests=\"" << s.cases.size() << "\" failures=\"" << s.count(Case::kFailure)
        << "\" errors=\"" << s.count(Case::kError) << "\" skipped=\"" << s.count(Case::kSkipped)
        << "\" time=\"" << seconds_text(s.seconds) << "\" timestamp=\"" << stamp
        << "\" hostname=" << attr(host) << ">\n";
    if (!s.properties.empty()) {
      out << "    <properties>\n";
      for (const auto& [k, v] : s.properties)
        out << "      <property name=" << attr(k) << " value=" << attr(v) << "/>\n";
      out << "    </properties>\n";
    }
    for (const auto& c : s.cases) {
      out << "    <testcase classname=" << attr(c.classname) << " name=" << attr(c.name)
          << " time=\"" << seconds_text(c.seconds) << "\"";
      if (c.outcome == Case::kPass && c.system_out.empty()) {
        out << "/>\n";
        continue;
      }
      out << ">\n";
      switch (c.outcome) {
        case Case::kPass: break;
        case Case::kSkipped: out << "      <skipped message=" << attr(c.message) << "/>\n"; break;
        case Case::kFailure:
        case Case::kError: {
          const char* tag = c.outcome == Case::kFailure ? "failure" : "error";
          out << "      <" << tag << " message=" << attr(c.message) << " type=" << attr(c.type)
              << ">" << xml_escape(c.text) << "</" << tag << ">\n";
          break;
        }
      }
      if (!c.system_out.empty())
        out << "      <system-out>" << xml_escape(c.system_out) << "</system-out>\n";
      out << "    </testcase>\n";
    }
    out << "  </testsuite>\n";
  }
  out << "</testsuites>\n";
}

}  // namespace

std::string json_escape(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += c;
        }
    }
  }
  return out + "\"";
}

std::string xml_escape(const std::string& s, bool attribute) {
  static const char kReplacement[] = "\xEF\xBF\xBD";  // U+FFFD
  std::string out;
  out.reserve(s.size() + s.size() / 8);
  const auto* b = reinterpret_cast<const unsigned char*>(s.data());
  const std::size_t n = s.size();
  for (std::size_t i = 0; i < n;) {
    const unsigned char c = b[i];
    if (c < 0x80) {
      switch (c) {
        case '&': out += "&amp;"; break;
        case '<': out += "&lt;"; break;
        case '>': out += "&gt;"; break;
        case '"': out += "&quot;"; break;
        case '\'': out += "&apos;"; break;
        case '\n': out += attribute ? "&#10;" : "\n"; break;
        case '\t': out += attribute ? "&#9;" : "\t"; break;
        case '\r': out += "&#13;"; break;
        default:
          if (c >= 0x20) out += static_cast<char>(c);  // other control characters: not XML 1.0
      }
      ++i;
      continue;
    }
    // A multi-byte UTF-8 sequence: copy it if it is well-formed and an XML character.
    std::size_t len = c >= 0xC2 && c <= 0xDF ? 2 : c >= 0xE0 && c <= 0xEF ? 3
                      : c >= 0xF0 && c <= 0xF4 ? 4 : 0;
    bool good = len > 0 && i + len <= n;
    for (std::size_t k = 1; good && k < len; ++k) good = (b[i + k] & 0xC0) == 0x80;
    if (good && len >= 3) {
      const unsigned char c1 = b[i + 1];
      if ((c == 0xE0 && c1 < 0xA0) || (c == 0xED && c1 > 0x9F) ||  // overlong, surrogates
          (c == 0xF0 && c1 < 0x90) || (c == 0xF4 && c1 > 0x8F) ||  // overlong, > U+10FFFF
          (c == 0xEF && c1 == 0xBF && b[i + 2] >= 0xBE))           // U+FFFE, U+FFFF
        good = false;
    }
    if (good) {
      out.append(s, i, len);
      i += len;
    } else {
      out += kReplacement;
      ++i;
    }
  }
  return out;
}

std::string junit_name(const Obligation& ob) {
  // "#9 Running --Preempt--> Checkpointing [favoured_beneficiary / begin_checkpoint]" ->
  // "#9 Running --Preempt--> Checkpointing": the name stays the same when a guard is renamed.
  std::string label;
  const std::string& s = ob.row_label;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s.compare(i, 2, " [") == 0) {
      auto close = s.find(']', i);
      if (close != std::string::npos) {
        i = close;
        continue;
      }
    }
    label += s[i];
  }
  return label + " :: " + obligation_name(ob);
}

void print_table(std::ostream& out, const CheckRun& run) {
  const auto& p = run.proof;
  const std::size_t ninv = spec::kAllInvariants.size();
  // Columns: every invariant, FRAME, DELTA; each as wide as its header plus a space (min 6).
  std::vector<std::string> headers;
  for (auto inv : spec::kAllInvariants) headers.push_back(short_id(inv));
  headers.push_back("FRAME");
  headers.push_back("DELTA");
  headers.push_back("ENABLED");
  std::vector<int> widths;
  for (const auto& h : headers) widths.push_back(std::max<int>(6, static_cast<int>(h.size()) + 1));
  const int kFrame = static_cast<int>(ninv), kDelta = kFrame + 1, kEnabledCol = kFrame + 2;

  // Per row, its cells by column (placed by kind and invariant, not by order).
  struct Line {
    std::string label;
    std::vector<std::string> cells;
    double ms = 0;
  };
  std::map<int, Line> by_row;
  std::vector<const Obligation*> det, order;
  bool any_needs_sums = false, any_unknown = false;
  for (const auto& ob : p.obligations) {
    any_unknown |= ob.unknown;
    if (ob.kind == ObligationKind::kDeterministic) {
      det.push_back(&ob);
      continue;
    }
    if (ob.kind == ObligationKind::kIdOrder) {
      order.push_back(&ob);
      continue;
    }
    auto& line = by_row[ob.row];
    if (line.cells.empty()) line.cells.assign(headers.size(), "-");
    line.label = ob.row_label;
    line.ms += ob.ms;
    int col = ob.kind == ObligationKind::kFrame     ? kFrame
              : ob.kind == ObligationKind::kDelta   ? kDelta
              : ob.kind == ObligationKind::kEnabled ? kEnabledCol
                                                    : inv_column(ob.inv);
    if (col < 0) continue;
    line.cells[col] = cell(ob);
    any_needs_sums |= ob.proved && !ob.local;
  }

  out << "orrery-check: " << p.rows << " job lifecycle rows and " << p.node_rows
      << " node lifecycle rows x " << ninv
      << " invariants (+ Init), each row's FRAME, DELTA (job rows) and ENABLED (it can fire), and "
         "the determinism of rows sharing an event, on "
      << shape_text(run.proof_shape) << "\n\n";
  out << std::left << std::setw(62) << "row";
  for (std::size_t c = 0; c < headers.size(); ++c) out << std::setw(widths[c]) << headers[c];
  out << "    ms\n";
  for (const auto& [row, line] : by_row) {
    out << std::setw(62) << line.label.substr(0, 61);
    for (std::size_t c = 0; c < headers.size(); ++c) out << std::setw(widths[c]) << line.cells[c];
    out << std::right << std::setw(6) << static_cast<int>(line.ms + 0.5) << std::left << "\n";
  }
  out << "\nok: proved from local assumptions";
  if (any_needs_sums) out << "; ok*: proved only with the sums of INV-INDEX assumed";
  if (any_unknown) out << "; ?: the solver gave up";
  out << "; -: no such obligation\n";

  // The scope of each invariant's proof.
  out << "\n";
  for (auto inv : spec::kAllInvariants) {
    auto s = scope_of(p, inv);
    out << std::setw(13) << std::string(spec::inv_id(inv));
    if (!s.own_proved)
      out << "NOT PROVED (" << s.own_failed << " obligation" << (s.own_failed == 1 ? "" : "s")
          << " not proved)\n";
    else if (s.unbounded)
      out << "proved for every fleet size\n";
    else if (s.needs_sums > 0)
      out << "proved for the bounded shape only (" << shape_text(run.proof_shape) << "): "
          << s.needs_sums << " obligation" << (s.needs_sums == 1 ? "" : "s")
          << " need the sums of INV-INDEX\n";
    else
      out << "proved for the bounded shape only (" << shape_text(run.proof_shape)
          << "): the argument for every fleet size needs every obligation, and " << p.failed
          << (p.failed == 1 ? " is" : " are") << " not proved\n";
  }

  int det_ok = 0;
  for (const auto* ob : det) det_ok += ob->proved ? 1 : 0;
  out << "\ndeterminism: " << det_ok << " of " << det.size()
      << " pairs of rows sharing (source, event) have disjoint guards\n";
  for (const auto* ob : order)
    out << ob->row_label << " (ORDER): " << (ob->proved ? "ok" : "VIOLATED") << " ("
        << static_cast<int>(ob->ms + 0.5) << " ms; it is why each row is proved with job 0 "
        << "acting)\n";
  out << "inductive proof: " << p.proved << " of " << p.obligations.size()
      << " obligations proved, " << p.failed << " failed (" << std::fixed << std::setprecision(2)
      << p.seconds << " s)\n";
  if (run.bmc_ran) {
    const auto& b = run.bmc;
    out << "bounded model check: depth " << b.depth_checked << " of " << b.depth << " on "
        << shape_text(b.shape) << ", "
        << (b.ok ? "no violation" : b.unknown ? "INCONCLUSIVE" : "VIOLATION") << " (" << b.seconds
        << " s)\n";
    out << "  one step from any state satisfying the invariants keeps them for " << b.closed
        << " of " << b.choices << " choices (job x row, node x node row; " << b.one_step_seconds
        << " s)\n";
    out << "  unrolled from the initial state to depth " << b.unrolled << " (";
    for (std::size_t i = 0; i < b.seconds_per_depth.size(); ++i)
      out << (i ? ", " : "") << b.seconds_per_depth[i];
    out << " s per depth; solver queries per depth:";
    for (int q : b.queries_per_depth) out << " " << q;
    out << ")";
    if (b.induction_k > 0)
      out << "; the induction step of length " << b.induction_k
          << " over the whole table closes every deeper depth (" << b.induction_seconds << " s)";
    else if (b.unrolled < b.depth)
      out << "; the induction step did not close";
    out << "\n";
  } else {
    out << "bounded model check: skipped\n";
  }
  for (const auto& ob : p.obligations) {
    if (ob.proved) continue;
    out << "\nFAILED " << obligation_name(ob) << " at " << ob.row_label << "\n"
        << ob.counterexample;
    if (!ob.counterexample.empty() && ob.counterexample.back() != '\n') out << "\n";
  }
  if (run.bmc_ran && !run.bmc.ok)
    out << "\nFAILED bounded model check: "
        << (run.bmc.unknown ? "depth not established"
                            : "a run of " + std::to_string(run.bmc.unrolled + 1) +
                                  " step(s) from the initial state breaks an invariant")
        << "\n" << run.bmc.counterexample;
  out << "\n" << (run.ok() ? "ALL PROVED" : "FAILED") << " in " << run.seconds << " s\n";
}

void print_json(std::ostream& out, const CheckRun& run) {
  const auto& p = run.proof;
  out << std::fixed << std::setprecision(3);
  out << "{\n  \"rows\": " << p.rows << ",\n  \"node_rows\": " << p.node_rows
      << ",\n  \"invariants\": [";
  for (std::size_t i = 0; i < spec::kAllInvariants.size(); ++i)
    out << (i ? ", " : "") << json_escape(std::string(spec::inv_id(spec::kAllInvariants[i])));
  int n_inv = 0, n_frame = 0, n_delta = 0, n_enabled = 0, n_det = 0, n_order = 0;
  for (const auto& ob : p.obligations) {
    switch (ob.kind) {
      case ObligationKind::kInvariant: ++n_inv; break;
      case ObligationKind::kFrame: ++n_frame; break;
      case ObligationKind::kDelta: ++n_delta; break;
      case ObligationKind::kEnabled: ++n_enabled; break;
      case ObligationKind::kDeterministic: ++n_det; break;
      case ObligationKind::kIdOrder: ++n_order; break;
    }
  }
  out << "],\n  \"obligations\": " << p.obligations.size()
      << ",\n  \"invariant_obligations\": " << n_inv << ",\n  \"frame_obligations\": " << n_frame
      << ",\n  \"delta_obligations\": " << n_delta
      << ",\n  \"enabled_obligations\": " << n_enabled
      << ",\n  \"determinism_obligations\": " << n_det
      << ",\n  \"order_obligations\": " << n_order << ",\n  \"proved\": " << p.proved
      << ",\n  \"failed\": " << p.failed << ",\n  \"proof_seconds\": " << p.seconds;
  const auto& ps = run.proof_shape;
  out << ",\n  \"proof_shape\": {\"jobs\": " << ps.jobs << ", \"nodes\": " << ps.nodes
      << ", \"devices\": " << ps.nodes * ps.devices_per_node
      << ", \"devices_per_node\": " << ps.devices_per_node << "}";
  out << ",\n  \"unbounded\": {";
  for (std::size_t i = 0; i < spec::kAllInvariants.size(); ++i) {
    auto inv = spec::kAllInvariants[i];
    out << (i ? ", " : "") << json_escape(std::string(spec::inv_id(inv))) << ": "
        << (unbounded(p, inv) ? "true" : "false");
  }
  out << "}";
  const auto& bs = bmc_shape(run);
  out << ",\n  \"bmc_ran\": " << (run.bmc_ran ? "true" : "false");
  out << ",\n  \"bmc_shape\": {\"jobs\": " << bs.jobs << ", \"nodes\": " << bs.nodes
      << ", \"devices\": " << bs.nodes * bs.devices_per_node
      << ", \"devices_per_node\": " << bs.devices_per_node << "}";
  out << ",\n  \"bmc_depth_asked\": " << bmc_depth_asked(run);
  out << ",\n  \"bmc_depth\": " << (run.bmc_ran ? run.bmc.depth_checked : 0);
  out << ",\n  \"bmc_ok\": " << (!run.bmc_ran || run.bmc.ok ? "true" : "false");
  out << ",\n  \"bmc_unknown\": " << (run.bmc_ran && run.bmc.unknown ? "true" : "false");
  out << ",\n  \"bmc_seconds\": " << (run.bmc_ran ? run.bmc.seconds : 0.0);
  // How the depth was established: unrolled from the initial state, then k-induction.
  out << ",\n  \"bmc_unrolled\": " << (run.bmc_ran ? run.bmc.unrolled : 0);
  out << ",\n  \"bmc_seconds_per_depth\": [";
  if (run.bmc_ran)
    for (std::size_t i = 0; i < run.bmc.seconds_per_depth.size(); ++i)
      out << (i ? ", " : "") << run.bmc.seconds_per_depth[i];
  out << "]";
  out << ",\n  \"bmc_queries_per_depth\": [";
  if (run.bmc_ran)
    for (std::size_t i = 0; i < run.bmc.queries_per_depth.size(); ++i)
      out << (i ? ", " : "") << run.bmc.queries_per_depth[i];
  out << "]";
  out << ",\n  \"bmc_choices\": " << (run.bmc_ran ? run.bmc.choices : 0);
  out << ",\n  \"bmc_closed_choices\": " << (run.bmc_ran ? run.bmc.closed : 0);
  out << ",\n  \"bmc_one_step_seconds\": " << (run.bmc_ran ? run.bmc.one_step_seconds : 0.0);
  out << ",\n  \"bmc_induction_k\": " << (run.bmc_ran ? run.bmc.induction_k : 0);
  out << ",\n  \"bmc_induction_seconds\": " << (run.bmc_ran ? run.bmc.induction_seconds : 0.0);
  out << ",\n  \"bmc_all_depths\": " << (run.bmc_ran && run.bmc.all_depths ? "true" : "false");
  out << ",\n  \"seconds\": " << run.seconds;
  out << ",\n  \"ok\": " << (run.ok() ? "true" : "false");
  out << ",\n  \"failures\": [";
  bool first = true;
  for (const auto& ob : p.obligations) {
    if (ob.proved) continue;
    out << (first ? "\n" : ",\n") << "    {\"row\": " << ob.row
        << ", \"row_label\": " << json_escape(ob.row_label)
        << ", \"invariant\": " << json_escape(obligation_name(ob))
        << ", \"unknown\": " << (ob.unknown ? "true" : "false")
        << ", \"counterexample\": " << json_escape(ob.counterexample) << "}";
    first = false;
  }
  if (run.bmc_ran && !run.bmc.ok) {
    out << (first ? "\n" : ",\n") << "    {\"row\": -1, \"row_label\": \"bmc\", \"invariant\": "
        << "\"\", \"unknown\": " << (run.bmc.unknown ? "true" : "false")
        << ", \"counterexample\": " << json_escape(run.bmc.counterexample) << "}";
    first = false;
  }
  out << (first ? "]" : "\n  ]") << "\n}\n";
}

void write_junit(std::ostream& out, const CheckRun& run) {
  const auto& p = run.proof;
  Suite proof;
  proof.name = "orrery-check.proof";
  proof.seconds = p.seconds;
  proof.properties.emplace_back("shape", shape_text(run.proof_shape));
  proof.properties.emplace_back("rows", std::to_string(p.rows));
  for (auto inv : spec::kAllInvariants)
    proof.properties.emplace_back("unbounded." + std::string(spec::inv_id(inv)),
                                  unbounded(p, inv) ? "true" : "false");
  for (const auto& ob : p.obligations) {
    Case c;
    c.classname = proof.name;
    c.name = junit_name(ob);
    c.seconds = ob.ms / 1000.0;
    if (!ob.proved) {
      c.text = ob.counterexample;
      if (ob.unknown) {
        c.outcome = Case::kError;
        c.type = "inconclusive";
        c.message = "the solver gave up on " + obligation_name(ob) + " at " + ob.row_label;
      } else {
        c.outcome = Case::kFailure;
        c.type = "counterexample";
        c.message = ob.kind == ObligationKind::kDeterministic
                        ? "both guards can hold: " + ob.row_label
                    : ob.kind == ObligationKind::kIdOrder
                        ? "a formula orders job ids (ORDER): job slots are not interchangeable"
                    : ob.kind == ObligationKind::kEnabled
                        ? "the row can never fire on this shape: " + ob.row_label
                        : obligation_name(ob) + " violated at " + ob.row_label;
      }
    }
    proof.cases.push_back(std::move(c));
  }

  Suite bmc;
  bmc.name = "orrery-check.bmc";
  const auto& bs = bmc_shape(run);
  bmc.properties.emplace_back("shape", shape_text(bs));
  bmc.properties.emplace_back("depth_asked", std::to_string(bmc_depth_asked(run)));
  Case c;
  c.classname = bmc.name;
  c.name = "bounded model check :: depth " + std::to_string(bmc_depth_asked(run)) + " on " +
           shape_text(bs);
  if (!run.bmc_ran) {
    c.outcome = Case::kSkipped;
    c.message = "bounded model check skipped (--no-bmc)";
  } else {
    const auto& b = run.bmc;
    bmc.seconds = c.seconds = b.seconds;
    std::ostringstream so;
    so << "depth " << b.depth_checked << " of " << b.depth << " established; one step keeps the "
       << "invariants for " << b.closed << " of " << b.choices << " choices ("
       << seconds_text(b.one_step_seconds) << " s); unrolled to depth " << b.unrolled
       << ", seconds per depth:";
    for (double s : b.seconds_per_depth) so << " " << seconds_text(s);
    so << ", solver queries per depth:";
    for (int q : b.queries_per_depth) so << " " << q;
    if (b.induction_k > 0)
      so << "; induction step of length " << b.induction_k << " closes every deeper depth ("
         << seconds_text(b.induction_seconds) << " s)";
    so << "\n";
    c.system_out = so.str();
    if (!b.ok) {
      c.text = b.counterexample;
      if (b.unknown) {
        c.outcome = Case::kError;
        c.type = "inconclusive";
        c.message = "depth " + std::to_string(b.depth) + " not established";
      } else {
        c.outcome = Case::kFailure;
        c.type = "counterexample";
        c.message = "a run of " + std::to_string(b.unrolled + 1) +
                    " step(s) from the initial state breaks an invariant";
      }
    }
  }
  bmc.cases.push_back(std::move(c));
  write_suites(out, {proof, bmc}, run.seconds);
}

void write_replay_junit(std::ostream& out, const std::string& path, const ReplayReport& r) {
  Suite suite;
  suite.name = "orrery-check.replay";
  suite.seconds = r.seconds;
  suite.properties.emplace_back("journal", path);
  Case c;
  c.classname = suite.name;
  c.name = "replay " + path;
  c.seconds = r.seconds;
  std::ostringstream so;
  so << r.records << " good records, " << r.decisions << " decisions replayed, " << r.checks
     << " invariant checks\n";
  if (!r.clean_tail) so << "torn/corrupt tail ignored: " << r.tail_error << "\n";
  c.system_out = so.str();
  if (!r.ok) {
    std::ostringstream text;
    if (!r.error.empty()) text << r.error << "\n";
    for (const auto& v : r.violations) text << "VIOLATION " << v << "\n";
    c.text = text.str();
    if (r.unreadable) {
      c.outcome = Case::kError;
      c.type = "unreadable";
      c.message = "cannot read the journal: " + r.error;
    } else {
      c.outcome = Case::kFailure;
      c.type = r.violations.empty() ? "does-not-replay" : "violation";
      c.message = !r.violations.empty()
                      ? std::to_string(r.violations.size()) + " invariant violation" +
                            (r.violations.size() == 1 ? "" : "s") + ": " + r.violations.front()
                      : r.error;
    }
  }
  suite.cases.push_back(std::move(c));
  write_suites(out, {suite}, r.seconds);
}

void write_junit_error(std::ostream& out, const std::string& suite_name, const std::string& type,
                       const std::string& message) {
  Suite suite;
  suite.name = suite_name;
  Case c;
  c.classname = suite_name;
  c.name = "orrery-check";
  c.outcome = Case::kError;
  c.type = type;
  c.message = message;
  c.text = message;
  suite.cases.push_back(std::move(c));
  write_suites(out, {suite}, 0);
}

void print_replay(std::ostream& out, const std::string& path, const ReplayReport& r) {
  out << "orrery-check replay " << path << "\n";
  if (!r.error.empty()) out << "  ERROR: " << r.error << "\n";
  out << "  records: " << r.records << " good (" << r.decisions << " decisions replayed), "
      << r.checks << " invariant checks\n";
  out << "  checked incrementally: " << r.checked_decisions << " of " << r.decisions
      << " decisions; full checks: " << r.full_checks << " (every "
      << (r.full_every ? std::to_string(r.full_every) + " decisions" : std::string("replay"))
      << " and at both ends, " << std::fixed << std::setprecision(3) << r.full_check_seconds
      << " s in all)\n";
  if (!r.clean_tail) out << "  torn/corrupt tail ignored: " << r.tail_error << "\n";
  for (const auto& v : r.violations) out << "  VIOLATION " << v << "\n";
  out << "  " << (r.ok ? "OK: every state satisfies every invariant" : "FAILED") << " ("
      << std::fixed << std::setprecision(3) << r.seconds << " s)\n";
}

void print_replay_json(std::ostream& out, const std::string& path, const ReplayReport& r) {
  out << "{\"journal\": " << json_escape(path) << ", \"ok\": " << (r.ok ? "true" : "false")
      << ", \"error\": " << json_escape(r.error) << ", \"records\": " << r.records
      << ", \"decisions\": " << r.decisions << ", \"checks\": " << r.checks
      << ", \"clean_tail\": " << (r.clean_tail ? "true" : "false")
      << ", \"tail_error\": " << json_escape(r.tail_error)
      << ", \"checked_decisions\": " << r.checked_decisions << ", \"full_every\": " << r.full_every
      << ", \"full_checks\": " << r.full_checks
      << ", \"full_check_seconds\": " << std::fixed << std::setprecision(3) << r.full_check_seconds
      << ", \"violations\": [";
  for (std::size_t i = 0; i < r.violations.size(); ++i)
    out << (i ? ", " : "") << json_escape(r.violations[i]);
  out << "], \"seconds\": " << std::fixed << std::setprecision(3) << r.seconds << "}\n";
}

}  // namespace orrery::checker
