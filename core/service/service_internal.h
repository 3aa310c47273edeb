// What the service's files share (core/service/service.h lists them): the per-job view and the
// per-node connection. Not part of the service's interface.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <string>

#include "core/service/service.h"

namespace orrery::service {

// What the service shows of a job beyond the core's state: its spec (from the journaled Submit),
// why it is where it is, its recent timeline. Nothing here decides anything.
struct Service::JobView {
  JobSpec spec;
  bool have_spec = false;
  std::int64_t submitted_ms = -1;  // by the service's clock; -1: unknown
  std::string note;
  std::deque<std::string> log;
};

struct Service::NodeConn {
  std::uint64_t session = 0;
  std::string host = "127.0.0.1";  // where other nodes reach it (TCP collectives), once registered
  std::shared_ptr<NodeLink> link;
  std::int64_t last_seen_ms = -1;  // -1: never (this run)
  bool registered = false;
};

inline std::string job_str(int job) { return "job " + std::to_string(job); }

}  // namespace orrery::service
