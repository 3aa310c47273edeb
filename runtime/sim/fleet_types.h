// The fleet's device types as the simulator offers them to a workload's jobs: how many devices of
// each type there are and their largest memory, which fleet type each workload type names, and the
// one type a job is submitted with (or why none can ever hold it).
#pragma once

#include <cstdint>
#include <vector>

#include "core/fleet.h"
#include "runtime/sim/offered_load.h"
#include "runtime/sim/workload.h"

namespace orrery::sim {

class FleetTypes {
 public:
  FleetTypes() = default;
  FleetTypes(const Workload& w, const core::Fleet& fleet);

  struct Choice {
    int type = -1;              // the fleet's device type id, -1 when none can hold the job
    const char* why = nullptr;  // when none: the reason it is counted unschedulable
  };
  // Job `w` of the workload: of the types it allows, one that can ever hold it (enough devices
  // and memory), chosen in proportion to their device counts by the job's index (the same for
  // every policy).
  Choice choose(const Workload& w, int job) const;
  std::int64_t count(int type) const { return count_[static_cast<std::size_t>(type)]; }

 private:
  std::vector<std::int64_t> count_, mem_;  // per fleet type: devices, largest memory (MiB)
  std::vector<int> fleet_type_;            // per workload type: the fleet's id, -1 when absent
};

// The jobs the simulator submits on `fleet` (those counted in the offered load): a device type can
// hold them (a premium job larger than the premium reserve is admitted spare: it counts too). (A
// spec the core refuses is found only when submitted.)
CountedJobs schedulable_jobs(const Workload& w, const core::Fleet& fleet);

}  // namespace orrery::sim
