// The simulator: a simulated fleet on a simulated clock, driving the real SchedulerCore with a real
// planner (core/policy/planner.h) — the same code orrery-core runs — and carrying out the core's
// decisions with modelled costs instead of processes:
//  - a job progresses at D/W of its full speed on D < W devices (replica splicing), less the
//    splicing overhead;
//  - a preemption holds the devices while the checkpoint is written (state / checkpoint
//    bandwidth), a resume restores (state / restore bandwidth) before it runs again, a migration
//    pays both plus the transfer (state / network bandwidth), a resize re-splices (a checkpoint
//    and a restore of the state), a periodic checkpoint pauses the job while it is written;
//  - nodes fail at a configurable rate (exponential times between failures, then a repair time):
//    the jobs on a failed node lose the work since their last checkpoint and are requeued by the
//    core's NodeLoss rows, and the node goes Lost, Down and back Up through the node table.
// Every decision goes through SchedulerCore::commit; with a journal path the run is journaled so
// that `--check` can replay it through the invariant checker. docs/simulator.md.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "core/fleet.h"
#include "core/decision.h"
#include "core/policy/planner.h"
#include "base/result.h"
#include "runtime/sim/job_modes.h"
#include "runtime/sim/job_records.h"
#include "runtime/sim/sim_metrics.h"
#include "runtime/sim/workload.h"

namespace orrery::sim {

struct CostModel {
  double checkpoint_gbps = 2.0;   // per job: writing its state to the checkpoint store
  double restore_gbps = 2.0;      // reading it back
  double network_gbps = 1.25;     // moving it to another node (10 Gb/s)
  double splice_overhead = 0.01;  // fraction of speed lost beyond W/D when spliced
  double checkpoint_every_s = 1800;  // periodic checkpoints of running jobs (0: none)
  double node_mtbf_h = 0;         // mean time between failures of one node (0: no failures)
  double repair_s = 3600;         // a failed node is back Up after this long
};

// A scripted step of a scenario, at `at_s` simulated seconds after the first arrival: what the
// lifecycle parity test (tests/protocol/lifecycle_parity_test.cc) replays through the simulator and
// through orrery-core side by side. The simulated runtime answers everything else as usual.
struct ScriptStep {
  enum class Kind {
    kDecide,       // commit `decision` as it is (an operator's preempt, migrate, resize, cancel)
    kFailNextCut,  // the runtime fails the next cut of `job` (it reports CutFailed)
    kLoseNode,     // node `node` fails (its jobs: NodeLoss; repaired after CostModel::repair_s)
  };
  double at_s = 0;
  Kind kind = Kind::kDecide;
  core::Decision decision;
  int job = -1;
  int node = -1;
};

struct SimOptions {
  CostModel cost;
  core::policy::PlannerOptions planner;
  double round_s = 10;  // a scheduling round at most this often (after something changed)
  // Premium admission: the share of the fleet's devices premium demand may hold (the core's
  // premium_reserve is set to it).
  double premium_share = 0.75;
  // A job meets its tier's service level when its queueing delay (arrival to first start) is at
  // most this: premium, standard, basic.
  std::array<double, 3> sla_queue_s = {60, 1800, 4 * 3600};
  std::uint64_t seed = 1;       // node failures, the draw of preemption modes
  // Preemption modes drawn per job (runtime/sim/job_modes.h; default: all transparent). A signal
  // or requeue job runs one worker per device (min = max = world); one whose device type has
  // fewer devices than its world stays transparent.
  ModeWeights modes = kAllTransparent;
  // A job that allows several device types (the trace's gpu_spec names several, or none: any type)
  // is submitted naming every one that can hold it, the type chosen for it first (FleetTypes): a
  // planner places it on another when its own has no room (Retype). pin_types: only the chosen
  // one, as before job specs could name several.
  bool pin_types = false;
  std::string journal_path;     // empty: no journal
  // Keep each job's own figures (SimResult::job_records; orrery-sim --jobs-csv).
  bool job_records = false;
  // Called now and then with (simulated seconds, jobs finished, jobs in the workload) — for a
  // progress bar.
  std::function<void(double, std::int64_t, std::int64_t)> on_progress;
  int series_points = 2000;  // samples of the time series, about
  std::vector<ScriptStep> script;  // tests: scripted decisions and faults
};

struct TierResult {
  std::int64_t jobs = 0;  // completed
  double avg_jct_s = 0, p50_jct_s = 0, p99_jct_s = 0;
  double avg_queue_s = 0, p99_queue_s = 0;
  double max_queue_s = 0;  // the longest wait of a completed job (starvation)
  double sla_attainment = 0;  // of the tier's completed jobs, the share within its queueing target
  double offered_load = 0;    // the tier's jobs' part of SimResult::offered_load
  // Apart by size (the mix of sizes differs between tiers: in the Alibaba trace standard's jobs
  // are mostly 8-device gangs, basic's one-device jobs): completed gangs (smallest gang > 1
  // device), and the average waits of the one-device jobs and of the gangs.
  std::int64_t gang_jobs = 0;
  double avg_queue_one_s = 0, avg_queue_gang_s = 0;
  // The offered load of the tier's jobs that only one device type can hold (their spec names one,
  // or only one of those it names can hold them; every job with --pin-types), over that type's
  // devices: per type, for the types that have such jobs. A tier whose fleet-wide load is within a
  // share can still ask more than the share of a type it is pinned to.
  std::vector<std::pair<std::string, double>> pinned_load;
};

struct TenantResult {
  std::string name;
  std::int64_t jobs = 0;  // completed
  double avg_queue_s = 0;
};

struct SimResult {
  std::string policy;
  std::int64_t jobs = 0;         // in the workload
  std::int64_t submitted = 0;    // accepted by the core
  std::int64_t unschedulable = 0;  // no device type of the fleet can take them (not submitted)
  // Why, per reason (unschedulable_reason()): nothing is dropped silently.
  std::map<std::string, std::int64_t> unschedulable_why;
  std::int64_t completed = 0, failed = 0, unfinished = 0;
  double avg_jct_s = 0, p50_jct_s = 0, p95_jct_s = 0, p99_jct_s = 0;
  // The mean over the completed jobs of their run time at full size: a floor under avg_jct_s that
  // no schedule goes below (a job runs at most at full speed, and never before it arrives).
  double avg_run_s = 0;
  std::array<TierResult, 3> tiers{};
  // Workloads of more than one tenant: each tenant with completed jobs, and the mean over them of
  // their average queueing delay (each tenant counts once, however many jobs it has: what fair
  // share among tenants lowers when a few tenants submit most of the jobs).
  std::vector<TenantResult> tenants;
  double tenant_mean_queue_s = 0;
  // The offered load of the submitted jobs over the steady-state window (offered_load.h): the
  // utilization a fleet that never made a job wait would have had there.
  double offered_load = 0;
  // Useful GPU-seconds (world x full-size seconds of work done, less work thrown away) over
  // capacity GPU-seconds, over the steady-state window (offered_load.h: from the arrival of the
  // job at 10% of the arrivals to that of the job at 90%; seconds since the first arrival below):
  // what the fleet did while it was warm and work kept coming. Fewer than two jobs: the makespan's.
  double utilization = 0;
  double steady_from_s = 0, steady_to_s = 0;
  // The same from the first arrival to the last one (a single arrival time: the makespan's).
  double utilization_arrivals = 0;
  // The same from the first arrival to the last completion (the drain at the end included).
  double utilization_makespan = 0;
  double useful_gpu_s = 0, capacity_gpu_s = 0;  // the makespan's
  std::int64_t preemptions = 0, migrations = 0, resizes = 0, checkpoints = 0, node_failures = 0;
  // Per planner action (preemption, migration, resize): how many, the device time they held idle,
  // the work they threw away (sim_metrics.h).
  std::array<ActionCost, kNumActions> actions{};
  double lost_gpu_s = 0;  // work thrown away: progress since the last checkpoint of failed jobs
  // Work thrown away by cuts: a requeue job's progress when it is preempted or migrated (it
  // restarts from scratch). Transparent and signal jobs resume from their cut.
  double lost_cut_gpu_s = 0;
  std::array<std::int64_t, spec::kNumPreemptions> submitted_by_mode{};  // transparent, signal, requeue
  std::uint64_t decisions = 0;          // committed by the core
  std::uint64_t rejected_proposals = 0;  // the planner's proposals the core refused
  std::int64_t invariant_violations = -1;
  // How orrery-sim made the workload (--load, --repeat): its copies back to back, and the factor
  // its arrival times were scaled by. simulate() leaves them at 1.
  int workload_copies = 1;
  double arrival_factor = 1;  // from the journal replay (--check); -1: not checked
  double sim_s = 0;       // simulated time, first arrival to the end
  double wall_s = 0;
  double decisions_per_s = 0;
  double peak_rss_mib = 0;
  // Time series (x in hours since the first arrival) and the completed jobs' JCTs, for plots.
  std::vector<double> t_h, utilization_series, queue_series;
  std::vector<double> jct_s;
  // Each workload job's own figures, by its index in the workload (SimOptions::job_records; else
  // empty).
  std::vector<JobRecord> job_records;
};

// Runs `workload` on `fleet` with the planner `policy` ("orrery", "fifo", "tiresias", "afs"). Errors:
// an unknown policy, a fleet without devices, a journal that cannot be written.
Result<SimResult> simulate(const core::Fleet& fleet, const Workload& workload, const std::string& policy,
                           const SimOptions& options);

}  // namespace orrery::sim
