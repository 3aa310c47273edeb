// The Alibaba 2023 GPU trace (openb_pod_list_*.csv; ../shared/traces/alibaba-2023/README.md) as a
// simulator workload. Any CSV whose header names these columns loads, in any order, other columns
// ignored: num_gpu, gpu_milli, gpu_spec, qos, creation_time, scheduled_time, deletion_time (and,
// optionally, a tenant column, see below).
//
// Every data row is validated, whatever becomes of it, and falls into exactly one category, taken
// in this order (AlibabaLoadSummary counts each; rows == the sum of the five):
//   cpu_only         num_gpu == 0: nothing for a GPU scheduler to place. Skipped.
//   never_scheduled  scheduled_time empty: the task never ran in production, so it has no service
//                    demand to replay. Skipped.
//   unfinished       scheduled_time given, deletion_time empty: still running when the trace
//                    ended, service demand unknown (censored). Skipped.
//   fractional       gpu_milli < 1000: a GPU-sharing task. orrery never shares a device between
//                    jobs, so by default (FractionalPolicy::kWholeDevice) it becomes a job of
//                    num_gpu whole devices whose per-worker memory is the same share of
//                    worker_mem_mib; with FractionalPolicy::kSkip it is skipped.
//   whole            every other row: a job as the row says.
// A job's fields:
//   arrival_s   = creation_time (seconds, as in the file)
//   duration_s  = deletion_time - scheduled_time (how long it ran in production, on num_gpu GPUs)
//   world       = num_gpu; min_devices = max_devices = num_gpu (the trace's tasks are rigid),
//                 unless `elastic`: then min_devices = num_gpu / f, f the largest divisor of
//                 num_gpu up to spec::kSpliceLimit (the most splicing the core allows)
//   tier        = premium for qos LS and Guaranteed, standard for Burstable, basic for BE
//   device_types = the types of gpu_spec ('|'-separated), any type when it is empty
//   mem_mib     = worker_mem_mib, or ceil(worker_mem_mib * gpu_milli / 1000) for fractional rows
//   tenant      = the value of the column named tenant_column when the header has one (the 2023
//                 trace has none), else tenant 0 ("all")
//   name        = the `name` column, where the header has one (Workload::names)
// Jobs are in arrival order (the file's order among equal arrivals).
//
// Errors name PATH:LINE and the column: a missing column in the header, a record with the wrong
// number of fields, a value that is not a number in range (num_gpu in [0, 2^20], gpu_milli in
// [0, 1000] and >= 1 when num_gpu >= 1, times finite and >= 0), an unknown qos, a bad gpu_spec
// name or more than 64 device types in one file, scheduled_time before creation_time,
// deletion_time before scheduled_time (or, never scheduled, before creation_time).
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "base/result.h"
#include "runtime/sim/workload.h"

namespace orrery::sim {

enum class FractionalPolicy { kWholeDevice, kSkip };

struct AlibabaTraceOptions {
  FractionalPolicy fractional = FractionalPolicy::kWholeDevice;
  // A whole-GPU worker's device memory, MiB. The trace does not give it; 16 GiB fits every GPU
  // of the trace's cluster (alibaba_nodes.h).
  std::int64_t worker_mem_mib = 16384;
  bool elastic = false;
  std::string tenant_column = "user";
};

struct AlibabaLoadSummary {
  std::int64_t rows = 0;             // data rows read
  std::int64_t cpu_only = 0;         // skipped
  std::int64_t never_scheduled = 0;  // skipped
  std::int64_t unfinished = 0;       // skipped
  std::int64_t fractional = 0;       // loaded as whole devices, or skipped with kSkip
  bool fractional_loaded = true;     // the policy: false with FractionalPolicy::kSkip
  std::int64_t whole = 0;            // loaded
  std::int64_t jobs = 0;             // jobs in the workload
  std::int64_t zero_duration = 0;    // jobs with deletion_time == scheduled_time (loaded)
  std::array<std::int64_t, 3> jobs_per_tier{};   // indexed by spec::Tier
  std::array<double, 3> gpu_seconds_per_tier{};  // sum of world * duration_s
  double first_arrival_s = 0, last_arrival_s = 0;

  // A few lines for people: every category with its count and what was done with it.
  std::string to_string() const;
};

struct AlibabaTrace {
  Workload workload;
  AlibabaLoadSummary summary;
};

Result<AlibabaTrace> load_alibaba_trace(const std::string& path,
                                        const AlibabaTraceOptions& options = {});

}  // namespace orrery::sim
