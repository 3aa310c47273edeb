// The fleet's device types as the simulator offers them to a workload's jobs: how many devices of
// each type there are and their largest memory, which fleet type each workload type names, and the
// one type a job is submitted with (or why none can ever hold it).
#pragma once

#include <cstdint>
#include <utility>
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
  // Every type that can ever hold job `w` (of those it allows), `first` (its choice) first, then
  // the others by device count, the most first: the job spec names them all ("A|B|C"), and a
  // planner may move it, while it waits, to any of them (Retype).
  std::vector<int> allowed(const Workload& w, int job, int first) const;
  std::int64_t count(int type) const { return count_[static_cast<std::size_t>(type)]; }

 private:
  std::vector<std::int64_t> count_, mem_;  // per fleet type: devices, largest memory (MiB)
  std::vector<int> fleet_type_;            // per workload type: the fleet's id, -1 when absent
  // The types that can ever hold job `w` (enough devices and memory) with their device counts, in
  // the fleet's order; *allowed (if given) set when the fleet has a type the job allows at all.
  std::vector<std::pair<int, std::int64_t>> holding(const Workload& w, int job, bool* allowed) const;
};

// The jobs the simulator submits on `fleet` (those counted in the offered load): a device type can
// hold them (a premium job larger than the premium reserve is admitted spare: it counts too). (A
// spec the core refuses is found only when submitted.)
CountedJobs schedulable_jobs(const Workload& w, const core::Fleet& fleet);

}  // namespace orrery::sim
