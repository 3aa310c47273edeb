// The fleet's device types as the simulator offers them to a workload's jobs: how many devices of
// each type there are and their largest memory, which fleet type each workload type names, and the
// one type a job is submitted with (or why none can ever hold it).
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "core/fleet.h"
#include "core/fleet_fit.h"
#include "runtime/sim/offered_load.h"
#include "runtime/sim/workload.h"

namespace orrery::sim {

class FleetTypes {
 public:
  FleetTypes() = default;
  // `one_node`: the planners keep a gang that one node can hold to one node
  // (PlannerOptions::one_node_gangs), and the fit says so (core::FitRequest::one_node).
  FleetTypes(const Workload& w, const core::Fleet& fleet, bool one_node = false);

  struct Choice {
    int type = -1;              // the fleet's device type id, -1 when none can hold the job
    const char* why = nullptr;  // when none: the reason it is counted unschedulable
  };
  // Job `w` of the workload: of the types it allows, one that can ever hold it (core::FleetFit,
  // the rule orrery-core's submission applies: devices with the memory, within one region, with
  // host memory for its spliced-out workers), chosen in proportion to their device counts by the job's index (the same for
  // every policy).
  Choice choose(const Workload& w, int job) const;
  // Every type that can ever hold job `w` (of those it allows), `first` (its choice) first, then
  // the others by device count, the most first: the job spec names them all ("A|B|C"), and a
  // planner may move it, while it waits, to any of them (Retype).
  std::vector<int> allowed(const Workload& w, int job, int first) const;
  // Whether job `w` fits the fleet on `type` whole, one worker per device (as a signal or requeue
  // program runs), by the same rule.
  bool runs_whole(const Workload& w, int job, int type) const;
  std::int64_t count(int type) const { return count_[static_cast<std::size_t>(type)]; }

 private:
  std::vector<std::int64_t> count_;  // per fleet type: devices
  std::vector<int> fleet_type_;      // per workload type: the fleet's id, -1 when absent
  core::FleetFit fit_;
  bool one_node_ = false;
  // The types that can ever hold job `w` (fit_) with their device counts, in the fleet's order;
  // *closest (if given): of the limits the types it allows break, the one nearest to fitting
  // (kNone when the fleet has no type it allows at all).
  std::vector<std::pair<int, std::int64_t>> holding(const Workload& w, int job, core::FitLimit* closest) const;
};

// The jobs the simulator submits on `fleet` (those counted in the offered load): a device type can
// hold them (a premium job larger than the premium reserve is admitted spare: it counts too). (A
// spec the core refuses is found only when submitted.)
CountedJobs schedulable_jobs(const Workload& w, const core::Fleet& fleet, bool one_node = false);

}  // namespace orrery::sim
