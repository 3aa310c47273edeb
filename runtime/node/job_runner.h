// The node's device side: the proxies of this machine and the worker processes on them. The node
// agent (runtime/node/agent.*) turns the core's commands into calls here and forwards the events
// back; this layer knows nothing of Cap'n Proto or of the core.
//
// Checkpoints: a job-wide consistent cut is taken at a step boundary (after the step's allreduce,
// when every rank of the job is at the same step). Each local rank's shard (its device memory at
// stable addresses plus its registered host state) is written, checksummed, to
// `<ckpt_dir>/job-<J>/step-<S>/rank-<R>.ckpt`; restore reads the same files. Uploading shards to
// the core's checkpoint store and fetching them for a restore is the agent's business.
//
// Steps are counted as *completed* steps everywhere here: a checkpoint "at step S" holds the state
// after S steps (the job resumes with step index S), kProgress's `step` is the number of steps
// every local rank has completed. The implementation is runtime/node/node_runtime.h
// (start_node_runtime below); docs/runtime.md, "Device proxy, workers and workloads".
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/result.h"
#include "spec/limits.h"
#include "spec/vocabulary.h"

namespace orrery::runtime {

struct NodeRuntimeOptions {
  std::string node_name;       // for names of shared-memory objects and logs
  int devices = 4;             // one orrery-proxy per device
  std::int64_t device_mem_mib = 256;  // emulated device memory per device (host backend)
  std::string backend = "host";
  std::string data_dir;        // local checkpoint shards, proxy and worker logs
  std::string bin_dir;         // where orrery-proxy and orrery's programs are (<build>/bin)
};

// Where a job's ranks run on this node: local device index -> the ranks spliced on it.
struct LocalPlacement {
  int device = 0;               // 0 .. devices-1 on this node
  std::vector<int> ranks;       // ranks time-sliced on it (splice = ranks.size())
};

// One incarnation of a job on this node. The program is the user's own (`command`); how it is
// preempted is `mode` (spec::Preemption, docs/pytorch.md):
//   transparent: it runs through the worker library; cuts are taken at safe points by the proxies.
//   signal:      a cut is SIGTERM to every local rank, SIGKILL after `grace_ms`; whatever the
//                program saved in ORRERY_CHECKPOINT_DIR is its checkpoint.
//   requeue:     a cut kills the ranks at once; the job restarts from scratch.
// For signal and requeue a cut still ends in kCheckpointed: the node writes an empty marker shard
// per local rank (no device memory, no host state), so the core commits the cut and restores it
// exactly as a transparent job's (the marker restores nothing).
struct LaunchSpec {
  int job = -1;
  std::int64_t epoch = 0;
  int world = 0;                    // W, all ranks of the job, on every node
  std::vector<LocalPlacement> local;  // this node's share of the job
  // argv of every rank: command[0] is the program (without '/': looked up in PATH, with
  // NodeRuntimeOptions::bin_dir first, so "orrery-train-mlp" finds orrery's own); a relative
  // path is relative to `workdir`.
  std::vector<std::string> command;
  std::vector<std::string> env;     // "NAME=VALUE" the job sets (after orrery's own, so it wins)
  std::string workdir;              // absolute; empty: the node's data_dir
  spec::Preemption mode = spec::Preemption::kTransparent;
  std::int64_t grace_ms = spec::kDefaultGraceMs;  // signal: SIGTERM .. SIGKILL
  std::string checkpoint_dir;       // ORRERY_CHECKPOINT_DIR, created; empty: <data_dir>/user/job-J
  std::int64_t restart_count = 0;   // ORRERY_RESTART_COUNT: earlier incarnations of the job
  std::string master_addr = "127.0.0.1";  // MASTER_ADDR/MASTER_PORT for torch.distributed
  int master_port = 0;                    // 0: derived from (job, epoch)
  std::int64_t restore_step = -1;   // >= 0: restore every local rank from that step's shards
  // The collective group of this incarnation: a name all nodes of the job derive identically
  // from (job, epoch), so their proxies meet without a rendezvous service. A shm name ("/x":
  // every rank on this machine; empty: /orrery-coll-j<J>-e<E>) or "tcp://HOST:PORT/ID" across
  // machines (HOST:PORT on the node holding rank 0, whose proxy serves the mesh's rendezvous).
  std::string collective;
};

// New output of a worker (its stdout and stderr, merged as the process wrote them).
struct OutputChunk {
  int job = -1;
  std::int64_t epoch = 0;
  int rank = 0;
  std::string data;
};

struct JobEvent {
  enum class Kind {
    kStarted,       // every local rank is running (restored, if restore_step >= 0)
    kProgress,      // the job's local ranks all completed `step`
    kCheckpointed,  // the local shards of `step` are written (periodic or requested)
    kStopped,       // stopped on request (after a requested checkpoint, if any)
    kCompleted,     // every local rank finished its last step; final weights' digest in `detail`
    kCrashed,       // a worker or proxy died; `detail` says which and how
  } kind;
  int job = -1;
  std::int64_t epoch = 0;
  std::int64_t step = 0;
  std::int64_t gpu_ms = 0;  // kProgress: device time since the last report
  std::string detail;
  // kCrashed: the platform failed (the proxy died, a shard could not be written), not the job's
  // program; the core does not count it against the job's retries.
  bool platform = false;
};

class NodeRuntime {
 public:
  virtual ~NodeRuntime() = default;
  // Starts the ranks of one incarnation. Errors (program not found, bad workdir, device out of range, shards
  // missing) leave nothing running.
  virtual Status launch(const LaunchSpec& spec) = 0;
  // Asks the job's local ranks to checkpoint at a step boundary and, if `then_stop`, to exit
  // afterwards. `at_step` >= 0: at that step exactly (every node of the job is given the same
  // one); < 0: at the next boundary, agreed by all W ranks through that step's allreduce (a rank
  // whose proxy has a request pending raises a flag in its contribution), so every node of the
  // job cuts at the same step without asking each other. Completion comes as kCheckpointed (then
  // kStopped) events.
  virtual Status checkpoint(int job, std::int64_t epoch, std::int64_t at_step, bool then_stop) = 0;
  // Kills the incarnation's workers now (no checkpoint) and frees their device memory.
  virtual Status stop(int job, std::int64_t epoch) = 0;
  // What runs here: (job, epoch) pairs, for reconciliation with a restarted core.
  virtual std::vector<std::pair<int, std::int64_t>> running() const = 0;
  // Events since the last call, in order.
  virtual std::vector<JobEvent> poll() = 0;
  // Local checkpoint shard path of (job, step, rank).
  virtual std::string shard_path(int job, std::int64_t step, int rank) const = 0;
  // Workers' output written since the last call, at most about `max_bytes` in all, oldest first;
  // the output of ended incarnations is drained too.
  virtual std::vector<OutputChunk> take_output(std::size_t max_bytes) = 0;
};

// Starts the proxies (one per device) and returns the runtime over them.
Result<std::unique_ptr<NodeRuntime>> start_node_runtime(const NodeRuntimeOptions& options);

}  // namespace orrery::runtime
