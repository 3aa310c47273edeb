#include "checker/report.h"

#include <cstdio>
#include <iomanip>
#include <map>

namespace orrery::checker {

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

void print_table(std::ostream& out, const CheckRun& run) {
  const auto& p = run.proof;
  // Per row, in order: its invariant obligations and its frame (Init has no frame).
  std::map<int, std::vector<const Obligation*>> by_row;
  std::map<int, std::string> labels;
  std::vector<const Obligation*> det;
  for (const auto& ob : p.obligations) {
    if (ob.kind == ObligationKind::kDeterministic) {
      det.push_back(&ob);
      continue;
    }
    by_row[ob.row].push_back(&ob);
    labels[ob.row] = ob.row_label;
  }
  out << "orrery-check: " << p.rows << " lifecycle rows x " << spec::kAllInvariants.size()
      << " invariants (+ Init), each row's frame, and the determinism of rows sharing an event\n\n";
  out << std::left << std::setw(62) << "row";
  for (auto inv : spec::kAllInvariants) out << std::setw(6) << std::string(spec::inv_id(inv)).substr(4, 5);
  out << std::setw(6) << "FRAME" << "    ms\n";
  for (const auto& [row, obs] : by_row) {
    double ms = 0;
    out << std::setw(62) << labels[row].substr(0, 61);
    for (const auto* ob : obs) {
      out << std::setw(6) << (ob->proved ? "ok" : ob->unknown ? "?" : "FAIL");
      ms += ob->ms;
    }
    if (obs.size() == spec::kAllInvariants.size()) out << std::setw(6) << "-";  // Init
    out << std::right << std::setw(6) << static_cast<int>(ms + 0.5) << std::left << "\n";
  }
  int det_ok = 0;
  for (const auto* ob : det) det_ok += ob->proved ? 1 : 0;
  out << "\ndeterminism: " << det_ok << " of " << det.size()
      << " pairs of rows sharing (source, event) have disjoint guards\n";
  out << "inductive proof: " << p.proved << " of " << p.obligations.size()
      << " obligations proved, " << p.failed << " failed (" << std::fixed << std::setprecision(2)
      << p.seconds << " s)\n";
  if (run.bmc_ran) {
    const auto& b = run.bmc;
    out << "bounded model check: depth " << b.depth_checked << " of " << b.depth << ", "
        << (b.ok ? "no violation" : b.unknown ? "INCONCLUSIVE" : "VIOLATION") << " ("
        << b.seconds << " s)\n";
  } else {
    out << "bounded model check: skipped\n";
  }
  for (const auto& ob : p.obligations) {
    if (ob.proved) continue;
    out << "\nFAILED " << obligation_name(ob) << " at " << ob.row_label << "\n" << ob.counterexample;
  }
  if (run.bmc_ran && !run.bmc.ok)
    out << "\nFAILED bounded model check: a run of " << run.bmc.depth_checked + 1
        << " steps from the initial state\n" << run.bmc.counterexample;
  out << "\n" << (run.ok() ? "ALL PROVED" : "FAILED") << " in " << run.seconds << " s\n";
}

void print_json(std::ostream& out, const CheckRun& run) {
  const auto& p = run.proof;
  out << std::fixed << std::setprecision(3);
  out << "{\n  \"rows\": " << p.rows << ",\n  \"invariants\": [";
  for (std::size_t i = 0; i < spec::kAllInvariants.size(); ++i)
    out << (i ? ", " : "") << json_escape(std::string(spec::inv_id(spec::kAllInvariants[i])));
  int by_kind[3] = {0, 0, 0};
  for (const auto& ob : p.obligations) ++by_kind[static_cast<int>(ob.kind)];
  out << "],\n  \"obligations\": " << p.obligations.size()
      << ",\n  \"invariant_obligations\": " << by_kind[0]
      << ",\n  \"frame_obligations\": " << by_kind[1]
      << ",\n  \"determinism_obligations\": " << by_kind[2] << ",\n  \"proved\": " << p.proved
      << ",\n  \"failed\": " << p.failed << ",\n  \"proof_seconds\": " << p.seconds;
  out << ",\n  \"bmc_ran\": " << (run.bmc_ran ? "true" : "false");
  out << ",\n  \"bmc_depth\": " << (run.bmc_ran ? run.bmc.depth_checked : 0);
  out << ",\n  \"bmc_ok\": " << (!run.bmc_ran || run.bmc.ok ? "true" : "false");
  out << ",\n  \"bmc_seconds\": " << (run.bmc_ran ? run.bmc.seconds : 0.0);
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

void print_replay(std::ostream& out, const std::string& path, const ReplayReport& r) {
  out << "orrery-check replay " << path << "\n";
  if (!r.error.empty()) out << "  ERROR: " << r.error << "\n";
  out << "  records: " << r.records << " good (" << r.decisions << " decisions replayed), "
      << r.checks << " invariant checks\n";
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
      << ", \"tail_error\": " << json_escape(r.tail_error) << ", \"violations\": [";
  for (std::size_t i = 0; i < r.violations.size(); ++i)
    out << (i ? ", " : "") << json_escape(r.violations[i]);
  out << "], \"seconds\": " << std::fixed << std::setprecision(3) << r.seconds << "}\n";
}

}  // namespace orrery::checker
