// When each job of a core rebuilt from its journal entered its present state, and how long it
// waited before it was last placed, by the journal's times: what Planner::job_recovered takes, so
// that a planner's clocks of a job's wait and run, and the protections of a job placed after a
// long wait, do not start over when orrery-core restarts. Fed with every replayed job decision
// (SchedulerCore::recover's callback); used by orrery-core's service and the protocol property
// test's restarts alike.
#pragma once

#include <cstdint>
#include <vector>

#include "core/decision.h"
#include "core/scheduler_core.h"
#include "spec/model.h"

namespace orrery::core::policy {

class EnteredTimes {
 public:
  // One replayed decision, and the state after it. `same_clock`: the journal's times are on the
  // clock the core runs on now (not those of an older orrery-core's boot-relative clock); else
  // the job's time is unknown.
  void replayed(const SchedulerCore& core, const Committed& cm, const Decision& d, bool same_clock) {
    if (cm.job < 0) return;
    const auto j = static_cast<std::size_t>(cm.job);
    if (j >= since_.size()) {
      since_.resize(j + 1, -1);
      waited_.resize(j + 1, -1);
      held_.resize(j + 1, 0);
    }
    const bool was_held = held_[j] != 0;
    held_[j] = core.cluster().jobs[cm.job].hold != 0 ? 1 : 0;
    // Out of a wait into an incarnation (Place, Resume): how long that wait was.
    if (waits(cm.from) && !waits(cm.to)) waited_[j] = same_clock && since_[j] >= 0 ? cm.time_ms - since_[j] : -1;
    // A change of state, or the Release of an operator's hold (the job waits for devices from
    // then, as the planners' books count it: a held job is not waiting).
    if (cm.from != cm.to || (d.event == spec::EventKind::kRelease && was_held)) since_[j] = same_clock ? cm.time_ms : -1;
  }
  // When `job` entered its state; -1: unknown (the planners take the restart's time).
  std::int64_t since(int job) const { return at(since_, job); }
  // How long `job` waited before it was last placed or resumed; -1: unknown, or never placed.
  std::int64_t waited(int job) const { return at(waited_, job); }

 private:
  static bool waits(spec::JobState s) { return spec::waiting_state(spec::Concrete{}, static_cast<std::int64_t>(s)); }
  static std::int64_t at(const std::vector<std::int64_t>& v, int job) {
    return job >= 0 && static_cast<std::size_t>(job) < v.size() ? v[static_cast<std::size_t>(job)] : -1;
  }
  std::vector<std::int64_t> since_;
  std::vector<std::int64_t> waited_;
  std::vector<char> held_;
};

}  // namespace orrery::core::policy
