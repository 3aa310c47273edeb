// What orrery-sim prints and draws: the results of several policies side by side (a table for
// people, JSON for programs), a progress bar for long runs, and the SVG figures of --plot.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "base/result.h"
#include "runtime/sim/simulator.h"

namespace orrery::sim {

// One column per policy: jobs, JCT (average, p50, p95, p99; per tier average and p99), queueing
// per tier (average, p99, longest), SLA attainment per tier, offered load and utilization (steady
// state, arrival window, makespan), preemptions, migrations and resizes with the GPU-hours each
// held idle and threw away, lost GPU-hours, decisions, rejected proposals, invariant violations,
// wall time, decisions/s, peak RSS.
std::string results_table(const std::vector<SimResult>& results);

// A JSON array, one object per policy, with the keys of docs/simulator.md ("Output"): jobs,
// avg_jct_s, p50_jct_s, p99_jct_s, avg_queue_s and p99_queue_s and sla_attainment per tier,
// utilization, preemptions, migrations, resizes, lost_gpu_s, rejected_proposals,
// invariant_violations (null when not checked), wall_s, decisions_per_s, peak_rss_mib, and more.
std::string results_json(const std::vector<SimResult>& results);

// A progress callback for SimOptions::on_progress drawing "orrery  [=====>    ] 41%  day 61 of 149
// 2,512 of 6,203 jobs done" on stderr (one line, redrawn).
std::function<void(double, std::int64_t, std::int64_t)> progress_bar(const std::string& policy,
                                                                     const Workload& workload);

// DIR/utilization.svg, DIR/queue.svg and DIR/jct_cdf.svg, one line per policy.
Status write_plots(const std::vector<SimResult>& results, const std::string& dir);

}  // namespace orrery::sim
