// orrery-check: proves the invariants over every row of the real lifecycle table, model-checks
// whole-cluster runs, and replays journals. Exit status (README.md, docs/ci.md):
//   0  everything holds;
//   1  a usage or input error: a bad command line (CLI11's own parse error codes, 105-114, are all
//      mapped to 1; --help exits 0), an unreadable bounds file or journal, an unwritable --junit;
//   2  an invariant is broken, or the solver was inconclusive (or failed).
// With --junit FILE, a JUnit XML report is written as well, whatever the outcome.
#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <iostream>

#include <CLI/CLI.hpp>

#include "checker/bmc.h"
#include "checker/bounds.h"
#include "checker/id_order.h"
#include "checker/lifecycle_rows.h"
#include "checker/prover.h"
#include "checker/replay.h"
#include "checker/report.h"

#ifndef ORRERY_DEFAULT_BOUNDS
#define ORRERY_DEFAULT_BOUNDS "checker/bounds.conf"
#endif

namespace {

constexpr int kExitOk = 0;
constexpr int kExitUsage = 1;
constexpr int kExitFailed = 2;

// The --junit report. Opened (and truncated) before the run, so that a bad path is an input error
// at once rather than after minutes of proving, and a stale report from an earlier run never
// survives a run that dies.
class JunitFile {
 public:
  // False (with errno) when the file cannot be opened for writing.
  bool open(const std::string& path) {
    path_ = path;
    if (path.empty()) return true;
    errno = 0;
    out_.open(path, std::ios::out | std::ios::trunc | std::ios::binary);
    return out_.is_open();
  }
  bool wanted() const { return !path_.empty(); }
  const std::string& path() const { return path_; }
  std::ostream& stream() { return out_; }
  // Flushes and closes; false when writing failed (e.g. a full disk).
  bool finish() {
    if (!wanted()) return true;
    out_.flush();
    bool good = out_.good();
    out_.close();
    return good && !out_.fail();
  }

 private:
  std::string path_;
  std::ofstream out_;
};

}  // namespace

int main(int argc, char** argv) {
  using namespace orrery::checker;
  CLI::App app{
      "orrery-check: Z3 proofs of orrery's scheduling invariants over the lifecycle table the core "
      "runs, bounded model checking of whole-cluster runs, and journal replay.\n"
      "With no subcommand: prove every row x every invariant, then run the bounded model check.\n"
      "Exit status: 0 all proved, 1 usage or input error, 2 an obligation failed or the solver "
      "was inconclusive."};
  // Every parse error: CLI11's message, a pointer to --help, and exit status 1 (see below).
  app.failure_message([](const CLI::App*, const CLI::Error& e) {
    return "orrery-check: " + std::string(e.what()) +
           "\nRun 'orrery-check --help' (or 'orrery-check replay --help') for usage.\n";
  });
  std::string bounds_path = ORRERY_DEFAULT_BOUNDS;
  bool json = false;
  bool no_bmc = false;
  int depth = -1;
  int drop_guard = 0;
  std::string junit_path;
  app.add_option("--bounds", bounds_path, "bounds config of the symbolic clusters")
      ->capture_default_str();
  app.add_flag("--json", json, "print a JSON object instead of the table");
  app.add_option("--junit", junit_path,
                 "also write a JUnit XML report to FILE (one testcase per obligation, one for the "
                 "bounded model check), whatever the outcome")
      ->type_name("FILE");
  app.add_flag("--no-bmc", no_bmc, "skip the bounded model check");
  bool every_path = false;
  app.add_flag("--bmc-every-path", every_path,
               "in the bounded model check's base case, ask the solver about runs ending in every "
               "choice at every depth, also those one step from any invariant state closes "
               "(slow: a cross-check)");
  app.add_option("--bmc-depth", depth, "override bmc_depth from the bounds config")
      ->check(CLI::Range(0, 64));
  app.add_option("--drop-guard", drop_guard,
                 "check the table with row ROW's guard removed (to see a counterexample: it must "
                 "fail)")
      ->check(CLI::PositiveNumber);
  std::string journal;
  auto* replay = app.add_subcommand(
      "replay", "check every state of a real journal against every invariant");
  replay->add_option("JOURNAL", journal, "journal file written by orrery-core")->required();
  replay->add_flag("--json", json, "print a JSON object instead of the report");
  replay->add_option("--junit", junit_path,
                     "also write a JUnit XML report (one testcase: the replay) to FILE")
      ->type_name("FILE");
  ReplayOptions replay_options;
  replay->add_option("--full-every", replay_options.full_every,
                     "check the whole state after every N decisions (0: only on the initial state "
                     "and after the last one), besides the incremental checks")
      ->capture_default_str()
      ->type_name("N");
  replay->add_option("--check-every", replay_options.check_every,
                     "check only every K-th decision incrementally (1: every decision); the full "
                     "checks still cover the state invariants of the others, not their steps")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000000000))
      ->type_name("K");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help prints the help and exits 0; every other parse error (CLI11 would exit 105-114)
    // is a usage error: 1.
    return app.exit(e) == 0 ? kExitOk : kExitUsage;
  }

  JunitFile junit;
  if (!junit.open(junit_path)) {
    std::cerr << "orrery-check: cannot write the JUnit report --junit " << junit_path << ": "
              << (errno ? std::strerror(errno) : "cannot open for writing") << "\n";
    return kExitUsage;
  }
  // What a run that cannot start or finish leaves in the report: one errored testcase.
  auto give_up = [&](const std::string& suite, const std::string& message, int code) {
    std::cerr << "orrery-check: " << message << "\n";
    if (junit.wanted()) {
      write_junit_error(junit.stream(), suite, code == kExitUsage ? "input" : "internal", message);
      junit.finish();
    }
    return code;
  };
  auto finish_junit = [&](int code) {
    if (!junit.finish()) {
      std::cerr << "orrery-check: writing the JUnit report " << junit.path() << " failed\n";
      return kExitUsage;
    }
    return code;
  };

  if (replay->parsed()) {
    ReplayReport r;
    try {
      r = replay_journal(journal, replay_options);
    } catch (const std::exception& e) {
      return give_up("orrery-check.replay", std::string("internal error: ") + e.what(),
                     kExitFailed);
    }
    if (json) print_replay_json(std::cout, journal, r);
    else print_replay(std::cout, journal, r);
    if (junit.wanted()) write_replay_junit(junit.stream(), journal, r);
    return finish_junit(r.unreadable ? kExitUsage : r.ok ? kExitOk : kExitFailed);
  }

  auto bounds = load_bounds(bounds_path);
  if (!bounds) return give_up("orrery-check.proof", bounds.reason(), kExitUsage);
  if (depth >= 0) bounds->bmc_depth = depth;

  auto t0 = std::chrono::steady_clock::now();
  CheckRun run;
  run.proof_shape = bounds->proof;
  run.bmc_shape = bounds->bmc;
  run.bmc_depth_asked = bounds->bmc_depth;
  try {
    auto rows = lifecycle_rows();
    auto order_rows = lifecycle_order_rows();
    if (drop_guard > 0) {
      if (drop_guard > static_cast<int>(rows.size()))
        return give_up("orrery-check.proof",
                       "--drop-guard " + std::to_string(drop_guard) + ": the table has " +
                           std::to_string(rows.size()) + " rows",
                       kExitUsage);
      auto& row = rows[drop_guard - 1];
      if (!json) std::cerr << "dropping the guard of " << row.label() << "\n";
      row.guard = nullptr;
      row.guard_name = "GUARD DROPPED";
      order_rows[drop_guard - 1].guard = nullptr;
      order_rows[drop_guard - 1].guard_name = "GUARD DROPPED";
    }
    if (!json)
      std::cerr << "proving " << rows.size() << " job rows and " << node_lifecycle_rows().size()
                << " node rows x " << orrery::spec::kAllInvariants.size()
                << " invariants on " << bounds->proof.jobs << " jobs, " << bounds->proof.nodes
                << " nodes x " << bounds->proof.devices_per_node << " devices ...\n";
    run.proof = prove(rows, bounds->proof, bounds->timeout_ms);
    // ORDER: what makes proving each row with job 0 acting (and the BMC's slot order) sound.
    add_obligation(run.proof, id_order_obligation(check_id_order(
                                  order_rows, node_lifecycle_order_rows(), bounds->proof)));
    if (!no_bmc) {
      if (!json)
        std::cerr << "bounded model check to depth " << bounds->bmc_depth << " on "
                  << bounds->bmc.jobs << " jobs, " << bounds->bmc.nodes << " nodes x "
                  << bounds->bmc.devices_per_node << " devices ...\n";
      run.bmc_ran = true;
      run.bmc = bmc(rows, bounds->bmc, bounds->bmc_depth, bounds->bmc_unroll, bounds->timeout_ms,
                    every_path);
    }
  } catch (const std::exception& e) {
    // Z3 failing (z3::exception is a std::exception) proves nothing: like a solver that gives up.
    return give_up("orrery-check.proof", std::string("internal error: ") + e.what(), kExitFailed);
  }
  run.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (json) print_json(std::cout, run);
  else print_table(std::cout, run);
  if (junit.wanted()) write_junit(junit.stream(), run);
  return finish_junit(run.ok() ? kExitOk : kExitFailed);
}
