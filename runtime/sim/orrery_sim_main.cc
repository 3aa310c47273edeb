// orrery-sim: the real core and planners on a simulated fleet and clock. docs/simulator.md.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <sstream>

#include "checker/replay.h"  // --check only: orrery_checker is linked for it (CMakeLists.txt)
#include "runtime/sim/alibaba_nodes.h"
#include "runtime/sim/alibaba_trace.h"
#include "core/policy/type_speed.h"
#include "runtime/sim/fleet_generator.h"
#include "runtime/sim/fleet_toml.h"
#include "runtime/sim/fleet_types.h"
#include "runtime/sim/offered_load.h"
#include "runtime/sim/sim_report.h"
#include "runtime/sim/simulator.h"
#include "runtime/sim/synthetic_workload.h"
#include "runtime/sim/weights.h"

namespace {

using namespace orrery;
namespace fs = std::filesystem;

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// --fleet: TOML (.toml), the Alibaba node list (.csv) or the core's line format; --fleet-gen
// NODESxDEVICES; neither: the generated 100,000-GPU fleet.
Result<core::Fleet> load_fleet(const std::string& path, const std::string& gen, std::uint64_t seed) {
  if (!path.empty()) {
    if (ends_with(path, ".toml")) return sim::load_fleet_toml(path);
    if (ends_with(path, ".csv")) {
      auto a = sim::load_alibaba_nodes(path);
      if (!a) return a.status();
      return std::move(a->fleet);
    }
    return core::Fleet::load(path);
  }
  sim::FleetGenOptions o;
  o.seed = seed;
  if (!gen.empty()) {
    auto x = gen.find('x');
    char* end = nullptr;
    long nodes = x == std::string::npos ? -1 : std::strtol(gen.c_str(), &end, 10);
    long devs = x == std::string::npos ? -1 : std::strtol(gen.c_str() + x + 1, &end, 10);
    if (nodes <= 0 || devs <= 0 || *end != '\0')
      return Status::Error("--fleet-gen: expected NODESxDEVICES (e.g. 12500x8), got \"" + gen + "\"");
    o.nodes = static_cast<int>(nodes);
    o.devices_per_node = static_cast<int>(devs);
    // 4 regions x 5 clusters from 12,500 nodes down; small fleets are one region, one cluster
    // per 100 nodes (at most 5).
    o.regions = std::clamp(o.nodes / 1000, 1, 4);
    o.clusters_per_region = std::clamp(o.nodes / o.regions / 100, 1, 5);
  }
  return sim::generate_fleet(o);
}

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ','))
    if (!item.empty()) out.push_back(item);
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "orrery-sim: replays a workload through orrery's real scheduler core and planners on a "
      "simulated fleet and clock, and reports per policy: job completion and queueing times per "
      "tier, utilization, service-level attainment, preemptions, migrations, resizes, lost work, "
      "rejected proposals and invariant violations.\n"
      "Exit status: 0 done, 1 usage or input error, 2 a run failed its --check (invariant "
      "violations, rejected proposals, or jobs left waiting when nothing was left to happen)."};
  std::string fleet_path, fleet_gen, trace, policy = "orrery", compare, plot_dir, jobs_csv, modes, tier_weights;
  std::int64_t synthetic = 0;
  int copies = 0;
  std::uint64_t seed = 1;
  double load = 0.8;
  bool json = false, check = false, quiet = false, elastic = false, no_defrag = false, no_backfill = false;
  bool one_node = false, span_nodes = false;
  orrery::sim::SimOptions o;
  app.add_option("--fleet", fleet_path,
                 "fleet file: TOML (.toml, docs/simulator.md), the Alibaba node list (.csv) or the core's "
                 "fleet format; default: a generated fleet (--fleet-gen)")
      ->check(CLI::ExistingFile);
  app.add_option("--fleet-gen", fleet_gen,
                 "generate a fleet of NODESxDEVICES (default 12500x8: 100,000 GPUs over 4 regions x 5 clusters; smaller fleets: one region below 2,000 nodes, a cluster per 100 nodes up to 5)");
  auto* tr = app.add_option("--trace", trace, "an Alibaba GPU trace CSV (columns as openb_pod_list_default.csv)")
                 ->check(CLI::ExistingFile);
  auto* sy = app.add_option("--synthetic", synthetic,
                            "N synthetic jobs (Poisson arrivals at --load, log-normal durations, gangs "
                            "1..1024, tiers 20/50/30%)")
                 ->check(CLI::Range(1, 10'000'000));
  tr->excludes(sy);
  auto* load_opt = app.add_option("--load", load,
                                  "offered load: the share of the fleet's GPU-time over the steady-state window "
                                  "(the arrivals from 10% to 90%) that the jobs would hold if each started on "
                                  "arrival (docs/simulator.md, \"Load\"); the arrival times are scaled to it. "
                                  "Default 0.8 for --synthetic; a trace keeps its own arrival times unless --load "
                                  "is given")
                       ->check(CLI::Range(0.01, 10.0));
  app.add_option("--repeat", copies,
                 "with --load: the workload's jobs this many times back to back before scaling (default for a "
                 "trace: the fewest copies that can offer twice the load, when the trace alone cannot; 1 for "
                 "--synthetic)")
      ->check(CLI::Range(1, sim::kMaxCopies));
  app.add_option("--seed", seed, "seed of the synthetic workload, the generated fleet and failures (default 1)");
  app.add_option("--policy", policy, "the planner: orrery (default), fifo, tiresias or afs (docs/policies.md)");
  app.add_option("--compare", compare,
                 "several planners on the same input, side by side, e.g. fifo,tiresias,orrery");
  app.add_flag("--json", json, "print the results as JSON (one object per policy) instead of a table");
  app.add_option("--plot", plot_dir, "write SVG figures to DIR: utilization, queue length, JCT CDF");
  app.add_option("--jobs-csv", jobs_csv,
                 "write each job's figures to FILE (CSV, a row per job and policy: tier, size, state, device "
                 "type, arrival, start, end, wait, JCT, preemptions, migrations, resizes; docs/simulator.md)");
  app.add_flag("--check", check,
               "journal each run and replay it through the invariant checker (the code of "
               "orrery-check replay, linked into orrery-sim for this option only)");
  app.add_flag("--elastic", elastic, "trace jobs may shrink to 1/f of their GPUs (f <= 8 dividing num_gpu)");
  app.add_flag("--pin-types", o.pin_types,
               "submit each job with the one device type chosen for it; by default a job that allows "
               "several (gpu_spec names several, or none) names every one that can hold it, and a planner "
               "places it on another when its own has no room");
  std::string type_speed;
  app.add_option("--type-speed", type_speed,
                 "relative speed of device types, e.g. H100-80G=2,A100-80G=1 (others 1): a job runs that much "
                 "faster there (a trace's durations are at speed 1), and every planner places a job whose spec "
                 "allows several types on the fastest with room");
  app.add_flag("-q,--quiet", quiet, "no progress bar");
  app.add_option("--round-s", o.round_s, "scheduling round, at most this often (default 10 s)")->check(CLI::Range(0.001, 86400.0));
  app.add_option("--premium-share", o.premium_share, "devices premium demand may hold (default 0.75)")
      ->check(CLI::Range(0.0, 1.0));
  app.add_option("--checkpoint-gbps", o.cost.checkpoint_gbps, "checkpoint write bandwidth per job (default 2)")
      ->check(CLI::PositiveNumber);
  app.add_option("--restore-gbps", o.cost.restore_gbps, "restore bandwidth per job (default 2)")->check(CLI::PositiveNumber);
  app.add_option("--network-gbps", o.cost.network_gbps, "migration bandwidth (default 1.25)")->check(CLI::PositiveNumber);
  app.add_option("--splice-overhead", o.cost.splice_overhead, "speed lost beyond W/D when spliced (default 0.01)")
      ->check(CLI::Range(0.0, 0.99));
  app.add_option("--checkpoint-every-s", o.cost.checkpoint_every_s, "periodic checkpoints (default 1800; 0: none)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--mtbf-h", o.cost.node_mtbf_h, "mean time between failures of a node, hours (default 0: none)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--repair-s", o.cost.repair_s, "a failed node is back after (default 3600 s)")->check(CLI::NonNegativeNumber);
  auto* one_node_opt = app.add_flag("--one-node", one_node,
                                    "every planner: a gang that one node of its type can hold is placed on one node, "
                                    "as a Kubernetes pod is (default with --trace: each of the trace's tasks is a pod)");
  app.add_flag("--span-nodes", span_nodes,
               "every planner: gangs span the nodes of a cluster, then a region (default with --synthetic)")
      ->excludes(one_node_opt);
  app.add_flag("--no-defrag", no_defrag, "orrery: no defragmentation by migration (to compare)");
  app.add_flag("--no-backfill", no_backfill,
               "every planner: no backfill behind gangs that fit nowhere, only the round's budget of tries (to compare)");
  double overdue_cap_h = static_cast<double>(o.planner.overdue_cap_ms) / 3.6e6;
  app.add_option("--overdue-cap-h", overdue_cap_h,
                 "orrery: a job that has waited this many hours, whatever its tier, is placed first (default 72; "
                 "0: no such bound, to compare; docs/policies.md)")
      ->check(CLI::Range(0.0, 1e6));
  app.add_option("--modes", modes,
                 "preemption modes drawn per job (seeded), weights transparent:signal:requeue, e.g. 60:30:10 "
                 "(default: all transparent). Signal and requeue jobs run one worker per device; a requeue "
                 "job loses its progress when preempted or migrated");
  app.add_option("--tier-weights", tier_weights,
                 "with --synthetic: the tiers' shares of the jobs, premium:standard:basic (default 20:50:30); "
                 "e.g. 0:1:0 puts every job in one tier. The jobs are otherwise the same for the same seed");
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return 1;
  }
  o.planner.one_node_gangs = one_node || (!trace.empty() && !span_nodes);
  o.job_records = !jobs_csv.empty();
  // --jobs-csv's file, with these results; false (said) where it cannot be written.
  auto write_jobs = [&](const std::vector<sim::SimResult>& rs, const sim::Workload& w) {
    auto st = sim::write_jobs_csv(rs, w, jobs_csv);
    if (!st) std::fprintf(stderr, "orrery-sim: --jobs-csv: %s\n", st.reason().c_str());
    return st.ok();
  };
  // A path that cannot be written is said now, not after a long run.
  if (o.job_records && !write_jobs({}, {})) return 1;
  if (no_defrag) o.planner.migration_gib_per_s = 0;
  if (no_backfill) o.planner.backfill = false;
  o.planner.overdue_cap_ms = static_cast<std::int64_t>(std::llround(overdue_cap_h * 3.6e6));
  if (!type_speed.empty()) {
    auto sp = core::policy::parse_type_speed(type_speed);
    if (!sp) {
      std::fprintf(stderr, "orrery-sim: --type-speed: %s\n", sp.reason().c_str());
      return 1;
    }
    o.planner.type_speed = *sp;
  }
  if (!modes.empty()) {
    auto w = sim::parse_mode_weights(modes);
    if (!w) {
      std::fprintf(stderr, "orrery-sim: %s\n", w.reason().c_str());
      return 1;
    }
    o.modes = *w;
  }
  std::array<double, 3> tiers = sim::SyntheticOptions{}.tier_weights;
  if (!tier_weights.empty()) {
    if (synthetic == 0) {
      std::fprintf(stderr, "orrery-sim: --tier-weights applies to --synthetic only (a trace's jobs have their tiers)\n");
      return 1;
    }
    auto w = sim::parse_weights3(tier_weights, "--tier-weights", "premium:standard:basic", "20:50:30");
    if (!w) {
      std::fprintf(stderr, "orrery-sim: %s\n", w.reason().c_str());
      return 1;
    }
    for (std::size_t t = 0; t < tiers.size(); ++t) tiers[t] = (*w)[t];
  }
  if (trace.empty() && synthetic == 0) {
    std::fprintf(stderr, "orrery-sim: give a workload: --trace FILE or --synthetic N (see --help)\n");
    return 1;
  }
  std::vector<std::string> policies = compare.empty() ? std::vector<std::string>{policy} : split(compare);
  for (const auto& p : policies) {
    if (!core::policy::make_planner(p)) {
      std::string known;
      for (const auto& n : core::policy::planner_names()) known += (known.empty() ? "" : ", ") + n;
      std::fprintf(stderr, "orrery-sim: unknown policy \"%s\" (known: %s)\n", p.c_str(), known.c_str());
      return 1;
    }
  }
  o.seed = seed;

  auto fleet = load_fleet(fleet_path, fleet_gen, seed);
  if (!fleet) {
    std::fprintf(stderr, "orrery-sim: %s\n", fleet.reason().c_str());
    return 1;
  }
  sim::Workload workload;
  if (!trace.empty()) {
    sim::AlibabaTraceOptions to;
    to.elastic = elastic;
    auto t = sim::load_alibaba_trace(trace, to);
    if (!t) {
      std::fprintf(stderr, "orrery-sim: %s\n", t.reason().c_str());
      return 1;
    }
    if (!quiet && !json) std::fprintf(stderr, "%s", t->summary.to_string().c_str());
    workload = std::move(t->workload);
  } else {
    sim::SyntheticOptions so;
    so.seed = seed;
    so.jobs = synthetic;
    so.tier_weights = tiers;
    // The rate the analytical means give: a first guess that scale_to_load corrects below (the
    // load is defined once, over the steady-state window).
    so.arrival_rate_per_s = sim::arrival_rate_for_load(so, fleet->num_devices(), load);
    auto w = sim::generate_synthetic(so);
    if (!w) {
      std::fprintf(stderr, "orrery-sim: %s\n", w.reason().c_str());
      return 1;
    }
    workload = std::move(*w);
    if (copies == 0) copies = 1;
  }
  sim::LoadScaling scaling;
  if (load_opt->count() > 0 || synthetic > 0) {
    auto s = sim::scale_to_load(workload, fleet->num_devices(), load, copies, [&](const sim::Workload& x) {
      return sim::schedulable_jobs(x, *fleet, o.planner.one_node_gangs);
    });
    if (!s) {
      std::fprintf(stderr, "orrery-sim: --load: %s (--repeat N repeats the workload's jobs)\n", s.reason().c_str());
      return 1;
    }
    scaling = *s;
    // Repeating a trace changes the workload: said also with --quiet.
    if (scaling.copies > 1)
      std::fprintf(stderr,
                   "orrery-sim: note: the workload is repeated %d times back to back (%zu jobs): at most %.3g "
                   "load with every job arriving at once, fewer copies cannot offer %.2f with room to spare\n",
                   scaling.copies, workload.jobs.size(), scaling.limit, load);
    if (!quiet && !json)
      std::fprintf(stderr, "arrival times scaled by %.4g for an offered load of %.2f (steady-state window)\n",
                   scaling.factor, load);
  }
  if (!quiet && !json)
    std::fprintf(stderr, "fleet: %d devices on %zu nodes; workload: %zu jobs\n", fleet->num_devices(),
                 fleet->nodes.size(), workload.jobs.size());

  std::string tmp;
  if (check) {
    tmp = (fs::temp_directory_path() / ("orrery-sim-" + std::to_string(::getpid()))).string();
    fs::create_directories(tmp);
  }
  std::vector<sim::SimResult> results;
  int exit_code = 0;
  for (const auto& p : policies) {
    sim::SimOptions run = o;
    if (check) run.journal_path = tmp + "/" + p + ".journal";
    if (!quiet) run.on_progress = sim::progress_bar(p, workload);
    auto r = sim::simulate(*fleet, workload, p, run);
    if (!quiet) std::fprintf(stderr, "\n");
    if (!r) {
      std::fprintf(stderr, "orrery-sim: %s: %s\n", p.c_str(), r.reason().c_str());
      return 1;
    }
    // Jobs this fleet cannot take are not submitted: said once (the same for every policy), with
    // their reasons, also with --quiet.
    if (r->unschedulable > 0 && results.empty()) {
      std::string why;
      for (const auto& [reason, n] : r->unschedulable_why)
        why += (why.empty() ? "" : "; ") + std::to_string(n) + " " + reason;
      std::fprintf(stderr, "orrery-sim: warning: %lld of %lld jobs cannot run on this fleet and are not submitted (%s)\n",
                   static_cast<long long>(r->unschedulable), static_cast<long long>(r->jobs), why.c_str());
    }
    // Jobs still waiting when nothing was left to happen: their JCT is in no figure, so the
    // figures do not compare. Said also without --check (which fails the run for it, below).
    if (r->unfinished > 0 && !check)
      std::fprintf(stderr,
                   "orrery-sim: warning: %s: %lld jobs were still waiting when nothing was left to happen (a "
                   "liveness bug); the JCT figures count only the %lld completed\n",
                   p.c_str(), static_cast<long long>(r->unfinished), static_cast<long long>(r->completed));
    if (check) {
      if (!quiet) std::fprintf(stderr, "%s: replaying %llu decisions through the invariant checker...\n",
                               p.c_str(), static_cast<unsigned long long>(r->decisions));
      checker::ReplayOptions ro;
      auto rep = checker::replay_journal(run.journal_path, ro);
      r->invariant_violations = static_cast<std::int64_t>(rep.violations.size());
      if (!rep.ok) {
        std::fprintf(stderr, "orrery-sim: %s: the journal does not pass the checker: %s\n", p.c_str(),
                     rep.error.empty() ? rep.violations.front().c_str() : rep.error.c_str());
        exit_code = 2;
      }
      if (r->rejected_proposals > 0) {
        std::fprintf(stderr, "orrery-sim: %s: %llu proposals rejected by the core (a policy bug)\n", p.c_str(),
                     static_cast<unsigned long long>(r->rejected_proposals));
        exit_code = 2;
      }
      if (r->unfinished > 0) {  // waiting when nothing was left to happen: a liveness bug
        std::fprintf(stderr, "orrery-sim: %s: %lld jobs never finished\n", p.c_str(),
                     static_cast<long long>(r->unfinished));
        exit_code = 2;
      }
      fs::remove(run.journal_path);
    }
    r->workload_copies = scaling.copies;
    r->arrival_factor = scaling.factor;
    results.push_back(std::move(*r));
  }
  if (check) fs::remove_all(tmp);
  if (json) std::printf("%s\n", sim::results_json(results).c_str());
  else std::printf("%s", sim::results_table(results).c_str());
  if (!plot_dir.empty()) {
    auto st = sim::write_plots(results, plot_dir);
    if (!st) {
      std::fprintf(stderr, "orrery-sim: %s\n", st.reason().c_str());
      return 1;
    }
    if (!quiet && !json) std::fprintf(stderr, "figures written to %s\n", plot_dir.c_str());
  }
  if (o.job_records) {
    if (!write_jobs(results, workload)) return 1;
    if (!quiet && !json) std::fprintf(stderr, "job records written to %s\n", jobs_csv.c_str());
  }
  return exit_code;
}
