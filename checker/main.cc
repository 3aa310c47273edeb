// orrery-check: proves the invariants over every row of the real lifecycle table, model-checks
// whole-cluster runs, and replays journals. Exit status 0 when everything holds, 1 on a usage or
// input error, 2 when an invariant is broken (or a proof is inconclusive).
#include <chrono>
#include <iostream>

#include <CLI/CLI.hpp>

#include "checker/bmc.h"
#include "checker/bounds.h"
#include "checker/lifecycle_rows.h"
#include "checker/prover.h"
#include "checker/replay.h"
#include "checker/report.h"

#ifndef ORRERY_DEFAULT_BOUNDS
#define ORRERY_DEFAULT_BOUNDS "checker/bounds.conf"
#endif

int main(int argc, char** argv) {
  using namespace orrery::checker;
  CLI::App app{
      "orrery-check: Z3 proofs of orrery's scheduling invariants over the lifecycle table the core "
      "runs, bounded model checking of whole-cluster runs, and journal replay.\n"
      "With no subcommand: prove every row x every invariant, then run the bounded model check."};
  std::string bounds_path = ORRERY_DEFAULT_BOUNDS;
  bool json = false;
  bool no_bmc = false;
  int depth = -1;
  int drop_guard = 0;
  app.add_option("--bounds", bounds_path, "bounds config of the symbolic clusters")
      ->capture_default_str();
  app.add_flag("--json", json, "print a JSON object instead of the table");
  app.add_flag("--no-bmc", no_bmc, "skip the bounded model check");
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
  CLI11_PARSE(app, argc, argv);

  if (replay->parsed()) {
    auto r = replay_journal(journal);
    if (json) print_replay_json(std::cout, journal, r);
    else print_replay(std::cout, journal, r);
    if (r.unreadable) return 1;
    return r.ok ? 0 : 2;
  }

  auto bounds = load_bounds(bounds_path);
  if (!bounds) {
    std::cerr << "orrery-check: " << bounds.reason() << "\n";
    return 1;
  }
  if (depth >= 0) bounds->bmc_depth = depth;

  auto t0 = std::chrono::steady_clock::now();
  auto rows = lifecycle_rows();
  if (drop_guard > 0) {
    if (drop_guard > static_cast<int>(rows.size())) {
      std::cerr << "orrery-check: --drop-guard " << drop_guard << ": the table has " << rows.size()
                << " rows\n";
      return 1;
    }
    auto& row = rows[drop_guard - 1];
    if (!json) std::cerr << "dropping the guard of " << row.label() << "\n";
    row.guard = nullptr;
    row.guard_name = "GUARD DROPPED";
  }
  CheckRun run;
  if (!json)
    std::cerr << "proving " << rows.size() << " rows x " << orrery::spec::kAllInvariants.size()
              << " invariants on " << bounds->proof.jobs << " jobs, " << bounds->proof.nodes
              << " nodes x " << bounds->proof.devices_per_node << " devices ...\n";
  run.proof = prove(rows, bounds->proof, bounds->timeout_ms);
  if (!no_bmc) {
    if (!json)
      std::cerr << "bounded model check to depth " << bounds->bmc_depth << " on "
                << bounds->bmc.jobs << " jobs, " << bounds->bmc.nodes << " nodes x "
                << bounds->bmc.devices_per_node << " devices ...\n";
    run.bmc_ran = true;
    run.bmc = bmc(rows, bounds->bmc, bounds->bmc_depth, bounds->timeout_ms);
  }
  run.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (json) print_json(std::cout, run);
  else print_table(std::cout, run);
  return run.ok() ? 0 : 2;
}
