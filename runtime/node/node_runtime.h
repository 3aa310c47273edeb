// The local implementation of NodeRuntime (job_runner.h): one orrery-proxy child process per
// device, worker processes launched from LaunchSpecs, supervision by waitpid and by the counters
// each worker's slot in its proxy's segment carries (ring.h). No thread of its own: poll() reaps
// children and turns what changed into events, so the caller decides how often to look.
//
// Files under NodeRuntimeOptions::data_dir:
//   ckpt/job-J/step-S/rank-R.ckpt     checkpoint shards (written and read by the proxies)
//   logs/proxy-devD.log               each proxy's stdout and stderr
//   logs/job-J-epoch-E-rank-R.log     each worker's stdout and stderr
//   user/job-J/                       a job's ORRERY_CHECKPOINT_DIR unless the launch names one
// Binaries in bin_dir: orrery-proxy; a command's program without '/' is looked up there first
// (orrery-train-mlp), then in PATH (runtime/node/worker_spawn.h).
// Worker environment: see runtime/worker/worker.h.
//
// Epoch fencing here: launch, checkpoint and stop with an epoch older than the newest this node
// has seen for the job are rejected, and so is a launch of an epoch launched here before or while
// an incarnation of the job runs.
// A crashed worker takes its incarnation down: the other local ranks are killed and their device
// memory freed (they would wait forever in the allreduce), and kCrashed says who died and how.
// A dead proxy takes down the incarnations on its device (kCrashed) and is replaced by a fresh
// one, so the device stays usable.
#pragma once

#include <string>
#include <string_view>

#include "runtime/node/job_runner.h"

namespace orrery::runtime {

inline constexpr const char* kProxyBinary = "orrery-proxy";

// The collective name all nodes derive for an incarnation when LaunchSpec::collective is empty.
std::string default_collective_name(int job, std::int64_t epoch);

}  // namespace orrery::runtime
