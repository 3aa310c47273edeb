// A workload: the jobs a simulation replays, in arrival order, with the names their small
// integer fields stand for. Produced by the Alibaba trace loader (alibaba_trace.h) and the
// synthetic generator (synthetic_workload.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/fleet.h"
#include "base/result.h"
#include "runtime/sim/sim_job.h"

namespace orrery::sim {

// At most this many distinct device types in one workload: a job's allowed types are a 64-bit mask.
inline constexpr int kMaxWorkloadDeviceTypes = 64;

struct Workload {
  std::vector<std::string> device_types;  // bit i of SimJob::device_types names device_types[i]
  std::vector<std::string> tenants;       // SimJob::tenant indexes this
  std::vector<SimJob> jobs;               // sorted by arrival_s (ties in input order)
  // Each job's name where the source has one (a trace's `name` column), in the order of `jobs`;
  // empty where it has none (synthetic workloads: a million names would be a third of their
  // memory). What orrery-sim --jobs-csv prints beside the job.
  std::vector<std::string> names;

  // The index of a device type name, added if new; -1 when the workload already has
  // kMaxWorkloadDeviceTypes other types.
  int intern_device_type(const std::string& name);
};

// The job breaks the SimJob field contract (sim_job.h): the reason, or Ok.
Status check_job(const SimJob& job, const Workload& w);

// For each of the workload's device types, the fleet's type id of the same name (-1 when the fleet
// has none): what the simulator passes to the core as the job's device type.
std::vector<int> fleet_type_ids(const Workload& w, const core::Fleet& fleet);

// The GPU-seconds the workload asks for (world x duration, summed).
double demand_gpu_s(const Workload& w);
// (Offered load and scaling the arrivals to one: runtime/sim/offered_load.h.)

}  // namespace orrery::sim
