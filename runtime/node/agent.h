// The node agent's logic (orrery-node): turns the core's commands into NodeRuntime calls and the
// runtime's events into reports, without knowing the transport. rpc/node_connection.* connects it
// to the core over Cap'n Proto (login, register, heartbeats, reconnects) and implements CoreLink.
//
// Fencing: the agent remembers the newest epoch it has seen per job; a command with an older
// epoch is refused ("stale epoch ..."), and launching a newer epoch first stops the older one, so
// two incarnations of a job never run here at once.
//
// One epoch scheme: every (re)start of a job — placement, resume, migration, resize, an aborted
// cut's restart in place — is a new epoch in the core, so the agent runs core epoch E as the
// runtime's epoch E, and a launch of an epoch it already runs is a repeat after a reconnect.
//
// Threading: single-threaded. Commands arrive from event callbacks where blocking is not allowed,
// so they are queued (enqueue) and carried out by pump(), which the connection calls from the top
// of its loop, where it may block on the core (shard transfers).
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "base/result.h"
#include "core/service/node_api.h"
#include "runtime/node/job_runner.h"

namespace orrery::runtime {

// How the agent reaches the core. Blocking calls.
class CoreLink {
 public:
  virtual ~CoreLink() = default;
  virtual Status report(const service::NodeReport& report) = 0;
  // Streams the file at `path` as the shard of (job, step, rank) taken by incarnation `epoch`.
  virtual Status upload_shard(int job, std::int64_t epoch, std::int64_t step, int rank,
                              const std::string& path) = 0;
  // Fetches the stored shard of (job, step, rank) into `path` (checksum checked, written whole).
  virtual Status download_shard(int job, std::int64_t step, int rank, const std::string& path) = 0;
  // Ships new output of a worker (docs/runtime.md, "Workers' output"). A refusal (a stale
  // session, an unknown job or rank) drops the chunk; when the connection is gone the agent keeps
  // it for the next one.
  virtual Status output(const OutputChunk& chunk) = 0;
  // False once the connection is gone: failed reports are then kept for the next connection.
  virtual bool connected() const = 0;
};

// Workers' output shipped per pump at most, so a chatty job delays commands and reports by little.
// It also bounds what the agent holds undelivered: nothing new is taken from the runtime while
// output an earlier pump could not deliver waits (it waits in the workers' log files instead).
inline constexpr std::size_t kOutputPerPump = 256 << 10;

struct AgentCommand {
  enum class Kind { kLaunch, kCheckpoint, kStop } kind = Kind::kLaunch;
  service::LaunchCommand launch;  // kLaunch
  int job = -1;                   // kCheckpoint, kStop
  std::int64_t epoch = 0;
  std::int64_t at_step = -1;
  bool then_stop = false;
};

class Agent {
 public:
  explicit Agent(NodeRuntime& runtime) : runtime_(runtime) {}

  // Queues a command from the core; `done` gets its outcome from the pump() that carries it out.
  void enqueue(AgentCommand cmd, std::function<void(Status)> done);
  // Carries out the queued commands, then forwards the runtime's events through `core`
  // (uploading the local shards of a checkpoint before reporting it). Events the core could not
  // receive (connection lost) are kept and sent first on the next pump; reports the core refuses
  // are dropped (the core stops a stale incarnation itself).
  // Between the two it ships the workers' new output (at most kOutputPerPump): before the reports,
  // so a job's last lines reach the core before the report that ends it.
  void pump(CoreLink& core);
  // Fails the queued commands (their connection is gone).
  void drop_commands(const std::string& why);

  // What runs here, plus incarnations whose last reports are still waiting to be delivered.
  std::vector<service::Incarnation> running() const;
  std::uint64_t stale_commands() const { return stale_commands_; }
  // Output bytes the core refused (dropped).
  std::uint64_t dropped_output_bytes() const { return dropped_output_bytes_; }

 private:
  Status execute(CoreLink& core, const AgentCommand& cmd);
  Status launch(CoreLink& core, const service::LaunchCommand& c);
  Status check_epoch(int job, std::int64_t epoch) const;
  bool runs(int job, std::int64_t epoch) const;
  // false: the connection failed, keep the event.
  bool forward(CoreLink& core, const JobEvent& e);
  // Output: what an earlier pump could not deliver first, then the runtime's new output.
  void ship_output(CoreLink& core);
  // false: the connection failed, keep the chunk (a refused one is dropped).
  bool send_output(CoreLink& core, const OutputChunk& c);

  NodeRuntime& runtime_;
  std::deque<std::pair<AgentCommand, std::function<void(Status)>>> queue_;
  std::deque<JobEvent> outbox_;
  std::map<int, std::int64_t> newest_;                  // job -> newest epoch seen
  std::map<int, service::LaunchCommand> shares_;        // job -> this node's current share
  std::uint64_t stale_commands_ = 0;
  std::deque<OutputChunk> unsent_output_;  // oldest first, at most kOutputPerPump bytes
  std::uint64_t dropped_output_bytes_ = 0;
  std::pair<int, std::int64_t> last_refused_output_{-1, -1};  // said once per incarnation
};

}  // namespace orrery::runtime
