// Each job's own figures from a simulation (orrery-sim --jobs-csv): when it arrived, started and
// ended, how long it waited and took, and what the planner did to it. The report's averages and
// percentiles (sim_report.h) summarize these; the rows let a user find which jobs make a tail.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/result.h"
#include "spec/vocabulary.h"

namespace orrery::sim {

struct JobRecord {
  // "completed", "failed", "unfinished" (left waiting or running when the run ended) or
  // "unschedulable" (no device type of the fleet can hold it: never submitted).
  const char* state = "unschedulable";
  std::string device_type;  // where it ran last, the type it was submitted for if it never ran
  double start_s = -1;      // its first start (-1: never started); workload seconds, as arrival_s
  double end_s = -1;        // its completion or failure (-1: none)
  std::int32_t preemptions = 0, migrations = 0, resizes = 0;  // the planners' actions on it
};

// Keeps the records while a simulation runs, from the core's commits.
class JobRecorder {
 public:
  // `jobs` in the workload (each unschedulable until it is submitted), the fleet's type names.
  JobRecorder(std::size_t jobs, std::vector<std::string> type_names);
  // A commit for the job at workload index `w` (`event`, its state now `to`, its device type
  // `dtype`), `now_ms` on the sim clock (workload milliseconds).
  void committed(std::size_t w, spec::EventKind event, spec::JobState to, std::int64_t dtype, std::int64_t now_ms);
  std::vector<JobRecord> take();

 private:
  std::vector<JobRecord> records_;
  std::vector<std::int64_t> type_;  // by workload index: the device type last committed (-1: none)
  std::vector<std::string> names_;
};

struct SimResult;
struct Workload;

// The CSV header and one row per workload job and policy, in the order of `results` then of the
// workload (its arrival order): policy, job (its index in the workload), name (Workload::names;
// empty where it has none), tier, tenant, world,
// min_devices, max_devices, state, device_type, arrival_s, run_s (its run at full size), start_s,
// end_s, queue_s (start - arrival), jct_s (end - arrival), preemptions, migrations, resizes. A time
// that did not happen is empty. Every result must hold its records (SimOptions::job_records).
std::string jobs_csv(const std::vector<SimResult>& results, const Workload& w);
// jobs_csv(results, w) written to `path`; an error names the path.
Status write_jobs_csv(const std::vector<SimResult>& results, const Workload& w, const std::string& path);

}  // namespace orrery::sim
