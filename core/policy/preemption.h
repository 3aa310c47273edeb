// Preemption policy: proposes which running job to preempt so a waiting job can be placed.
// Untrusted like every policy: the core's spec guard (GuardPreempt) decides.
//
// Candidates are running jobs the beneficiary is favoured over (spec::favoured: a strictly higher
// tier, or the same with strictly less attained service, premium's reserve and spare jobs by their
// standing and lead) whose devices have memory for its workers; it picks
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
