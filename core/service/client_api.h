// The client API of `orrery-core serve` as a plain C++ interface: what `orrery` (the CLI) and the
// tests call. The service implements it in-process (core/service/), rpc/ carries it over Cap'n
// Proto (rpc/client.capnp: the protocol document) and hands clients an implementation backed by a
// connection, so neither side sees generated types.
//
// Every call is an *operator* request: the service turns it into decisions (origin operator, with
// devices chosen by the placement policy) and commits them through the core's spec guards, so a
// request the spec forbids gets the guard's reason back (e.g. a preemption needs a waiting job it
// makes room for: INV-TIER). A successful call returns once its decision is durable.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "base/result.h"
#include "spec/limits.h"
#include "spec/vocabulary.h"

namespace orrery::service {

// A job as submitted (orrery submit JOB.toml; docs/runtime.md lists the keys).
struct JobSpec {
  std::string name;
  spec::Tier tier = spec::Tier::kStandard;
  std::string device_type = "host";
  std::int64_t world = 1;        // W workers, fixed for the job's life
  std::int64_t min_devices = 1;  // elastic range
  std::int64_t max_devices = 1;
  std::int64_t mem_mib = 64;     // device memory per worker
  // The user's program (docs/pytorch.md): argv, extra environment, working directory (absolute;
  // empty: the node's data directory), and how it is preempted.
  std::vector<std::string> command;
  std::vector<std::pair<std::string, std::string>> env;
  std::string workdir;
  spec::Preemption preemption = spec::Preemption::kTransparent;
  std::int64_t grace_ms = spec::kDefaultGraceMs;  // signal: SIGTERM .. SIGKILL
  std::int64_t min_runtime_ms = 0;  // a planner does not evict it within this long of its start
  std::int64_t steps = 0;           // training steps the program runs (progress display); 0: unknown
  std::int64_t checkpoint_every = 0;  // periodic checkpoint every N steps (transparent; 0: none)
  std::string tenant;  // who submits it: the planner shares a tier fairly among tenants ("": default)
};

struct JobStatus {
  int job = -1;
  std::string name;
  std::string tenant;
  spec::Tier tier = spec::Tier::kStandard;
  spec::JobState state = spec::JobState::kNew;
  std::int64_t epoch = 0;
  std::int64_t world = 0;
  std::int64_t devices = 0;  // held now
  std::int64_t splice = 0;   // workers per device now
  std::int64_t progress = 0;  // last committed step
  std::int64_t steps = 0;     // of the job's total
  std::int64_t checkpoint = -1;  // step of the last committed checkpoint
  std::vector<std::string> nodes;  // nodes of the devices held
  std::int64_t age_ms = 0;    // since submission; -1 when unknown (see kWallClockFloorMs)
  std::string note;           // why it waits, why it failed, final weights' digest when done
  std::string device_type;    // the type it runs on or waits for now (a planner may move a waiting
                              // job among the types its spec names)
};

struct NodeStatus {
  std::string name;
  spec::NodeState state = spec::NodeState::kDown;
  int devices = 0;
  int held = 0;                   // devices held by jobs
  std::int64_t heartbeat_age_ms = -1;  // since the last heartbeat, -1 when never registered
};

// Times the service hands out (ClusterEvent::time_ms, and the submission times behind
// JobStatus::age_ms) are its clock's. orrery-core serve's clock is wall-clock, milliseconds since
// the Unix epoch (rpc/server.cc), and the journal keeps each decision's, so they hold across
// restarts. A time before kWallClockFloorMs (2001-09-09) is not a wall-clock time: journals written
// before serve's clock was (orrery before issue 19) stamped the time since the host booted.
inline constexpr std::int64_t kWallClockFloorMs = 1'000'000'000'000;

// One line of the cluster's timeline: a committed decision (job or node) or a runtime report.
struct ClusterEvent {
  std::uint64_t seq = 0;    // the decision's seq; 0 for reports that commit nothing
  std::int64_t time_ms = 0;  // when it was committed (or reported), by the service's clock
  int job = -1;             // -1 for node events
  std::string node;         // node events
  std::string text;         // "job 2 train-a Running -> Checkpointing: Preempt job 2 for job 3"
};

// A window of one rank's output (ClientApi::output; docs/runtime.md, "Workers' output").
struct WorkerOutput {
  std::string data;               // the stream's bytes [next_offset - data.size(), next_offset)
  std::uint64_t next_offset = 0;  // where the next read goes on
  std::uint64_t size = 0;         // the stream's end: all the rank wrote so far
  bool job_ended = false;         // Completed, Failed or Cancelled: no incarnation writes more
};

class ClientApi {
 public:
  virtual ~ClientApi() = default;
  virtual Result<int> submit(const JobSpec& spec) = 0;  // the new job's id
  virtual Status cancel(int job) = 0;
  virtual Result<std::vector<JobStatus>> jobs() = 0;
  virtual Result<std::vector<NodeStatus>> nodes() = 0;
  // Preempt `job` for the waiting job `beneficiary` (-1: the service picks the most favoured one
  // the spec allows; none -> an error saying so).
  virtual Status preempt(int job, int beneficiary) = 0;
  // Move `job` to other devices (on `to_node` when given).
  virtual Status migrate(int job, std::optional<std::string> to_node) = 0;
  // Change the device count at fixed world size, within the job's elastic range. A shrink frees
  // the devices for the waiting job `beneficiary` (reserved for it), or for no one (-1).
  virtual Status resize(int job, int devices, int beneficiary) = 0;
  // Suspend a Running job for no one: a cut, then its devices are free, and the job is held (no
  // planner starts it again) until resume(). Bit-identical to never having stopped.
  virtual Status suspend(int job) = 0;
  // Release a job an operator suspended: the planners resume it once devices are free.
  virtual Status resume(int job) = 0;
  virtual Status drain(const std::string& node) = 0;
  virtual Status undrain(const std::string& node) = 0;
  // The timeline from `after_seq` on, then every new event as it happens, until `on_event`
  // returns false or the connection ends.
  virtual Status watch(std::uint64_t after_seq,
                       const std::function<bool(const ClusterEvent&)>& on_event) = 0;
  // A job's timeline and its workers' output lines (the last `max_lines`).
  virtual Result<std::vector<std::string>> logs(int job, int max_lines) = 0;
  // What rank `rank` of `job` wrote (stdout and stderr, every incarnation), from stream offset
  // `offset` on, at most `max_bytes` (the core caps it at 1 MiB). An offset past the end reads
  // nothing; one before the oldest byte kept reads from there. Unknown job or rank: kNotFound.
  virtual Result<WorkerOutput> output(int job, int rank, std::uint64_t offset, std::uint32_t max_bytes) = 0;
};

}  // namespace orrery::service
