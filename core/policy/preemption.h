// Preemption policy: proposes which running job to preempt so a waiting job can be placed.
// Untrusted like every policy: the core's spec guard (GuardPreempt) decides.
//
// Candidates are running jobs the beneficiary is favoured over (strictly higher tier, or same
// tier with strictly less attained service) whose devices have memory for its workers; it picks
// the lowest tier, then the mode that loses least (transparent, signal, requeue), then the most
// attained service, then the most devices. O(jobs): for the demo scenario; the planners choose
// with core/policy/victims.h.
#pragma once

#include <optional>

#include "core/decision.h"
#include "core/scheduler_core.h"

namespace orrery::core::policy {

std::optional<Decision> propose_preemption(const SchedulerCore& core, int beneficiary);

}  // namespace orrery::core::policy
