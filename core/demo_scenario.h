// The scripted scenario `orrery-core demo` (and scripts/demo) runs through the real core: a basic
// and a standard job run, a premium job arrives and the basic job is checkpointed and suspended in
// its favour, two policy bugs (a preemption in favour of a lower tier, a failure claimed by a
// planner) are rejected, the standard job is migrated and resized, the basic job resumes, grows, survives a worker crash back to its last
// checkpoint, and everything completes. Every committed transition is printed.
#pragma once

#include <ostream>

#include "core/clock.h"
#include "base/result.h"
#include "core/scheduler_core.h"

namespace orrery::core {

struct DemoSummary {
  std::uint64_t committed = 0;
  std::uint64_t rejected = 0;
};

// Runs on `core` (built over default_fleet()), advancing `clock` between steps.
Result<DemoSummary> run_demo_scenario(SchedulerCore& core, ManualClock& clock, std::ostream& out);

}  // namespace orrery::core
