// Offered load: the one definition that `--load` (traces and synthetic workloads alike), the
// simulator's steady-state utilization and the tests share. docs/simulator.md, "Load".
//
// The offered load of a workload on a fleet of C devices is the share of the fleet's GPU-time
// over the steady-state window [t_lo, t_hi] that the jobs would hold if each one started the
// moment it arrived, on `world` devices of its own, and ran for its duration:
//
//     load = sum_j world_j x |[a_j, a_j + d_j) ∩ [t_lo, t_hi]|  /  (C x (t_hi - t_lo))
//
// so a fleet that never makes a job wait has exactly this utilization over the window, and a
// fleet that does has less. For a stationary workload whose durations are short beside the
// window it is the textbook arrival rate x mean GPU-seconds per job / C; unlike that figure it
// stays true for heavy-tailed durations (the Alibaba 2023 trace has 90% of its GPU-seconds in 1% of
// its jobs, which run for weeks): a job counts only for the part of its run inside the window.
//
// Devices count whole: a job holds `world` whole devices at full size (a trace row asking for a
// fraction of a GPU, gpu_milli < 1000, is loaded as a whole device: orrery never shares one), and
// every device type of the fleet counts in C (a job that allows only a scarce type loads that
// type more than the figure says). Jobs the fleet cannot take at all (unschedulable) are left out.
//
// The steady-state window runs from the arrival of the job at index floor(N / 10) to that of the
// job at index N - 1 - floor(N / 10) (N jobs in arrival order): the first tenth of the arrivals
// warms the fleet up, the last tenth keeps work coming while the window ends, so neither the
// empty start nor the drain after the last arrival is in it. It depends on the workload only, so
// every policy is measured over the same window.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <vector>

#include "base/result.h"
#include "runtime/sim/workload.h"

namespace orrery::sim {

// The share of the arrivals left out at each end of the steady-state window.
inline constexpr double kSteadyTrim = 0.1;

// The steady-state window as indices into the jobs (both included); first == last when it is
// empty (fewer than two jobs).
struct SteadyWindow {
  std::size_t first = 0, last = 0;
};
SteadyWindow steady_window(std::size_t jobs);

// Which jobs count (by index into the workload's jobs); empty: every job.
using CountedJobs = std::vector<char>;

// The offered load over the steady-state window (above); 0 when the window has no length.
double offered_load(const Workload& w, std::int64_t devices, const CountedJobs& counted = {});
// Each group's offered load over its own devices: `group[i]` is job i's group (< 0: in none),
// `devices(g)` the devices group g's load is counted against (a tier's part of the fleet's load,
// or the jobs one device type alone can hold, over that type). Only groups with jobs, by group.
std::map<int, double> offered_load_by_group(const Workload& w, const std::vector<int>& group,
                                            const std::function<std::int64_t(int)>& devices);
// The most that compressing the arrival times can offer: the load as every gap between arrivals
// goes to zero, with every job running on past the window's end. A workload whose jobs are too few
// for the fleet cannot reach a load above it by scaling time alone (scale_to_load repeats it).
double offered_load_limit(const Workload& w, std::int64_t devices, const CountedJobs& counted = {});

// `copies` of the workload back to back: copy k's arrivals shifted by k x (the arrival span plus
// one mean gap between arrivals), the same jobs otherwise. The jobs stay in arrival order.
Workload repeat_workload(const Workload& w, int copies);

// What scale_to_load did.
struct LoadScaling {
  double factor = 1;  // the arrival times (relative to the first) were multiplied by this
  int copies = 1;     // the workload was repeated this many times first
  double limit = 0;   // offered_load_limit of the (repeated) workload
};

// Scales the arrival times (relative to the first) so that offered_load(w) == load, within 1e-6.
// `copies` > 0 repeats the workload that many times first; 0 chooses the fewest copies (up to
// kMaxCopies) whose limit is at least twice `load`: at half the limit the arrivals stay spread
// out, nearer to it almost every job arrives at once. `counted(w)` gives the jobs that count in
// the workload as it is when called (it is called again on the repeated one). Errors: fewer than
// two distinct arrival times, a load at or above the limit (of kMaxCopies copies, or of the copies
// asked for), no devices, a load <= 0.
inline constexpr int kMaxCopies = 64;
Result<LoadScaling> scale_to_load(Workload& w, std::int64_t devices, double load, int copies,
                                  const std::function<CountedJobs(const Workload&)>& counted = {});

// Scales the arrivals by `factor` relative to the first arrival.
void scale_arrivals(Workload& w, double factor);

}  // namespace orrery::sim
