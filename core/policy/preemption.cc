#include "core/policy/preemption.h"

#include <tuple>

#include "core/policy/victims.h"
#include "spec/model.h"

namespace orrery::core::policy {

std::optional<Decision> propose_preemption(const SchedulerCore& core, int beneficiary) {
  const spec::Concrete d;
  const auto& s = core.cluster();
  int best = -1;
  auto key = [&](int v) {
    const auto& j = s.jobs[v];
    // A transparent job loses least, a requeue job most (core/policy/victims.h); this helper
    // keeps no start times, so the mode alone stands for the loss.
    return std::tuple(j.tier, -mode_rank(core.job_info(v).mode), j.attained, j.devices);
  };
  for (int v = 0; v < s.num_jobs(); ++v) {
    if (core.state(v) != spec::JobState::kRunning) continue;
    if (!spec::favoured(d, s, beneficiary, v)) continue;
    if (!spec::fits_devices_of(d, s, beneficiary, v)) continue;  // its devices must be of use
    if (best < 0 || key(v) > key(best)) best = v;
  }
  if (best < 0) return std::nullopt;
  Decision dec;
  dec.event = spec::EventKind::kPreempt;
  dec.origin = spec::Origin::kPlanner;
  dec.job = best;
  dec.beneficiary = beneficiary;
  return dec;
}

}  // namespace orrery::core::policy
