// Gang placement policy: proposes a device set and splice factor for a job. An untrusted planner:
// it reads the core's state and proposes; the core checks the spec guard before committing.
//
// propose_gang() is the topology-aware placer (core/policy/gang_placer.h: one node, else one
// cluster, else one region; best fit; reservations; host memory; the proposal checked against the
// spec guard) run once on the state as it is: it builds the placer's index, O(devices), per call.
// Planners that place often keep one GangPlacer instead, which follows the core's commits.
//
// propose_gang_scan() is the first policy, kept as the baseline the placer is measured and tested
// against (bench/placement_bench.cc, tests/gang_placer_test.cc): it scans every device per call
// and picks the largest device count c in [min_devices, min(max_devices, want)] that divides W
// with W / c <= kSpliceLimit and for which enough free devices of the job's type exist, taking
// devices node by node from the node with the most free ones, whatever the cluster or region.
// Devices reserved for another job are not free to it, unless it outranks that job; devices
// reserved for this job are. Only devices on Up nodes are taken; devices a resize keeps stay
// wherever they are. It does not check device or host memory.
#pragma once

#include <string>

#include "core/decision.h"
#include "core/scheduler_core.h"

namespace orrery::core::policy {

struct Proposal {
  enum class Kind { kOk, kRetryLater, kInfeasible } kind = Kind::kOk;
  Decision decision;  // kOk
  std::string why;    // otherwise
};

// `event` is Place, Resume, Migrate or ResizeUp; `want` caps the device count (-1: max_devices).
// For Migrate the job's own devices are not reused; for ResizeUp they are kept.
Proposal propose_gang(const SchedulerCore& core, int job, spec::EventKind event, int want = -1);
Proposal propose_gang_scan(const SchedulerCore& core, int job, spec::EventKind event,
                           int want = -1);

}  // namespace orrery::core::policy
