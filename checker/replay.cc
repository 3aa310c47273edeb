#include "checker/replay.h"

#include <chrono>

#include "core/clock.h"
#include "core/journal.h"
#include "core/scheduler_core.h"
#include "spec/invariants.h"

namespace orrery::checker {

ReplayReport replay_journal(const std::string& path) {
  auto t0 = std::chrono::steady_clock::now();
  ReplayReport rep;
  auto finish = [&]() -> ReplayReport& {
    rep.ok = rep.error.empty() && rep.violations.empty();
    rep.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return rep;
  };
  auto contents = core::read_journal(path);
  if (!contents) {
    rep.error = contents.reason();
    rep.unreadable = true;
    return finish();
  }
  rep.records = contents->records.size();
  rep.clean_tail = contents->clean;
  rep.tail_error = contents->tail_error;
  rep.unreadable = true;  // until the fleet record has been read
  auto fleet = core::fleet_of_journal(contents->records);
  if (!fleet) {
    rep.error = fleet.reason();
    return finish();
  }
  rep.unreadable = false;

  const spec::Concrete d;
  auto prev = fleet->empty_cluster();
  auto check_state = [&](const spec::ClusterVars<spec::Concrete>& s, const std::string& where) {
    for (auto inv : spec::kAllInvariants) {
      ++rep.checks;
      if (!spec::state_invariant(d, inv, s))
        rep.violations.push_back(where + ": " + std::string(spec::inv_id(inv)) + " (" +
                                 std::string(spec::inv_summary(inv)) + ")");
    }
  };
  check_state(prev, "initial state");

  core::ManualClock clock;
  std::uint64_t index = 1;
  auto on_replayed = [&](const core::SchedulerCore& core, const core::Committed& c,
                         const core::Decision& decision) {
    ++index;
    ++rep.decisions;
    std::string where = "record " + std::to_string(index) + " (" + decision.describe() + ", " +
                        std::string(spec::state_name(c.from)) + " -> " +
                        std::string(spec::state_name(c.to)) + ")";
    if (decision.event == spec::EventKind::kSubmit) {  // the slot the submission filled
      spec::add_job_slot(d, prev);
    }
    const auto& post = core.cluster();
    check_state(post, where);
    auto params = core.params_for(decision);
    if (!params) {
      rep.violations.push_back(where + ": " + params.reason());
    } else {
      for (auto inv : spec::kAllInvariants) {
        if (!spec::has_step_part(inv)) continue;
        ++rep.checks;
        if (!spec::step_invariant(d, inv, prev, c.job, *params, post))
          rep.violations.push_back(where + ": " + std::string(spec::inv_id(inv)) + " (step: " +
                                   std::string(spec::inv_summary(inv)) + ")");
      }
    }
    prev = post;
  };
  auto core = core::SchedulerCore::recover(contents->records, clock, nullptr, on_replayed);
  if (!core) rep.error = core.reason();
  return finish();
}

}  // namespace orrery::checker
