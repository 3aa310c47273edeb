// Commits decisions through the core and keeps the protocol told: the one place where the Service
// and the simulator turn a decision into a commit and its consequences. Whoever drives a job
// (a planner's proposal, an operator's request, the protocol's own proposals) commits through
// commit(); settle() then commits what the protocol proposed in reply, until it proposes nothing.
#pragma once

#include <cstdint>

#include "base/result.h"
#include "core/decision.h"
#include "core/protocol/protocol.h"
#include "core/scheduler_core.h"

namespace orrery::protocol {

// What the caller does besides: log, tell watchers, keep planners' indexes.
class CommitListener {
 public:
  virtual ~CommitListener() = default;
  virtual void committed(const core::Committed& c, const core::Decision& d) = 0;
  virtual void refused(const core::Decision& d, const Status& why) {
    (void)d;
    (void)why;
  }
};

class Driver {
 public:
  Driver(core::SchedulerCore& core, Protocol& protocol, CommitListener& listener)
      : core_(core), protocol_(protocol), listener_(listener) {}

  // Commits one decision; the protocol and the listener learn the outcome either way.
  Result<core::Committed> commit(const core::Decision& d, std::int64_t now_ms);
  // Commits the protocol's proposals, and the proposals those commits lead to, in order.
  void settle(std::int64_t now_ms);

 private:
  core::SchedulerCore& core_;
  Protocol& protocol_;
  CommitListener& listener_;
};

}  // namespace orrery::protocol
