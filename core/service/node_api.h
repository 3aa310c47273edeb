// The node side of `orrery-core serve` as plain C++ (no Cap'n Proto): what a node agent reports and
// what the service commands. rpc/node.capnp is the protocol document; rpc/node_server.* and
// rpc/node_connection.* carry these types over it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/result.h"
#include "spec/limits.h"
#include "spec/vocabulary.h"

namespace orrery::service {

// What a node brings; checked against the fleet's entry for the node.
struct NodeInventory {
  std::string device_type;
  int devices = 0;
  std::int64_t device_mem_mib = 0;
};

// One incarnation of a job (the pair every command and report is fenced by).
struct Incarnation {
  int job = -1;
  std::int64_t epoch = 0;
  bool operator==(const Incarnation&) const = default;
};

// A node's share of an incarnation: a local device index and the ranks spliced on it.
struct LocalShare {
  int device = 0;
  std::vector<int> ranks;
};

struct LaunchCommand {
  int job = -1;
  std::int64_t epoch = 0;
  int world = 0;
  std::vector<LocalShare> local;
  std::vector<std::string> command;  // the program and its arguments (JobSpec::command)
  std::vector<std::string> env;      // "NAME=VALUE"
  std::string workdir;
  spec::Preemption mode = spec::Preemption::kTransparent;
  std::int64_t grace_ms = spec::kDefaultGraceMs;
  std::string checkpoint_dir;        // the job's own checkpoints (signal mode), on every node alike
  std::int64_t restart_count = 0;    // earlier incarnations that started
  std::string master_addr;           // rank 0's node and a port derived from (job, epoch)
  int master_port = 0;
  std::int64_t restore_step = -1;  // >= 0: restore from that step's shards in the store
  std::string collective;          // "/orrery-<cluster id>-jobJ-epochE" (or tcp://HOST:PORT/...):
                                   // the same on every node of the incarnation
};

struct NodeReport {
  enum class Kind { kStarted, kProgress, kCheckpointed, kStopped, kCompleted, kCrashed };
  Kind kind = Kind::kStarted;
  int job = -1;
  std::int64_t epoch = 0;
  std::int64_t step = 0;
  std::int64_t gpu_ms = 0;
  std::string detail;
  bool platform = false;  // kCrashed: the platform's fault (protocol::Report::platform), not the job's
};

const char* report_kind_name(NodeReport::Kind k);

// The core's handle on one registered agent. Commands are sent asynchronously; the transport
// reports a command the agent refused or could not receive to Service::command_failed().
class NodeLink {
 public:
  virtual ~NodeLink() = default;
  // Every (re)start of a job is a new epoch: a launch of an epoch stops the job's older
  // incarnations on the node; a node the new placement leaves gets a stop.
  virtual void launch(const LaunchCommand& cmd) = 0;
  virtual void checkpoint(int job, std::int64_t epoch, std::int64_t at_step, bool then_stop) = 0;
  virtual void stop(int job, std::int64_t epoch) = 0;
};

// A registered node connection: the node's index in the fleet and which registration it is (a
// newer registration of the same node supersedes older ones).
struct NodeSession {
  int node = -1;
  std::uint64_t session = 0;
};

}  // namespace orrery::service
