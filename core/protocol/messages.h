// What the protocol (core/protocol/protocol.h) exchanges with whoever drives it: commands for the
// nodes, reports from them, and the timeouts of the in-flight operations. Plain values: no
// transport, no files, no clock. The Service turns commands into Cap'n Proto calls to node agents
// (core/service/), the simulator into simulated delays (runtime/sim/).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace orrery::protocol {

// One command to one node for one incarnation (job, epoch). A command that carries out a committed
// decision goes out only once that decision is durable (`after_seq` <= the core's durable_seq()).
// A command that follows from a job's state rather than from one decision (the stop of an
// incarnation a refused report names, what an agent's registration leads to) waits for the
// decisions it rests on: a stop for the one that ended the incarnation (a Cancel, a newer epoch),
// else the job's latest. A crash could lose them, and recovery would make a stopped incarnation
// current again, or hand a launched epoch to another one. Only a periodic cut carries out no
// decision (after_seq 0).
struct Command {
  enum class Kind {
    kLaunch,  // start this node's share of the incarnation; restore_step >= 0: from that cut
    kCut,     // take a consistent cut at the next safe point; then_stop: stop after it
    kStop,    // stop the incarnation (an older epoch, or one the core ended)
  };
  Kind kind = Kind::kLaunch;
  int node = -1;
  int job = -1;
  std::int64_t epoch = 0;
  std::int64_t restore_step = -1;  // kLaunch
  bool then_stop = false;          // kCut
  std::int64_t at_step = -1;       // kCut: the boundary to cut at (-1: the next one)
  std::uint64_t after_seq = 0;     // the commit it carries out
};

const char* command_kind_name(Command::Kind k);

// A runtime fact about one incarnation. kCutStored is the whole cut (every rank's shard of the
// step is where checkpoints are kept), so it is reported once for the job, with node -1.
struct Report {
  enum class Kind {
    kStarted,    // the node runs its share of the incarnation
    kProgress,   // the node's ranks reached `step`; gpu_ms of device time since its last report
    kCutStored,  // the cut at `step` is stored (node -1)
    kCutFailed,  // the node could not take or store the cut (or refused the command)
    kStopped,    // the node's share stopped (asked, or after a cut with then_stop)
    kCompleted,  // the node's ranks finished; detail: the workload's final words
    kCrashed,    // a worker or the node's proxy died; detail: who and how
  };
  Kind kind = Kind::kStarted;
  int job = -1;
  std::int64_t epoch = 0;
  int node = -1;
  std::int64_t step = 0;
  std::int64_t gpu_ms = 0;
  std::string detail;
  // kCrashed: the platform failed under the job (its proxy died, a shard could not be kept),
  // not the job's program: a NodeLoss, which spends the platform cap, not the job's retries.
  bool platform = false;
};

const char* report_kind_name(Report::Kind k);

// How long each in-flight operation may take before the core aborts it (Origin::kCore), and how
// often progress is committed.
struct Timeouts {
  std::int64_t launch_ms = 120000;  // Placed, Restoring: every node of the placement started
  std::int64_t cut_ms = 60000;      // Checkpointing, Migrating, Resizing: the cut stored
  std::int64_t progress_every_ms = 1000;  // Progress from reports, at most this often per job
};

// A job's periodic checkpoints (what the job spec asks for): every `every_steps` committed steps
// while it runs (0: none), the last step being `steps` (no checkpoint at or after it).
// A transparent job's periodic checkpoints: one at every multiple of every_steps below steps (the
// job's total; 0: unknown). Each is asked for at its exact boundary, ahead of time; a multiple
// the workers have passed when it is asked for (a restart put them close to it) is skipped.
struct CheckpointPolicy {
  std::int64_t every_steps = 0;
  std::int64_t steps = 0;
};

// An incarnation an agent runs, as it says when it (re)registers.
struct Running {
  int job = -1;
  std::int64_t epoch = 0;
};

}  // namespace orrery::protocol
