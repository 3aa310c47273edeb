// The worker library: what a training process links to reach its device. Every call travels
// over the worker's shared-memory ring to its orrery-proxy (runtime/proxy/ring.h); the process
// never touches the device. Device pointers (DevPtr) are stable addresses: the same after a
// restore, a migration or a splice switch, so the workload may keep them in its host state.
//
// Cooperation asked of a workload, and nothing more:
//   - register its host state (the bytes it needs to continue: step counter, RNG state ...),
//   - call allreduce once per step (the safe point: splicing switches ranks there, and the
//     checkpoint/stop flags travel with it) and step_boundary after the step's update,
//   - skip its initialisation when restored() (its device memory and host state are back).
//
// Environment (set by the node runtime, runtime/node/node_runtime.h):
//   ORRERY_PROXY         shm name of the proxy's segment, e.g. /orrery-n1-123-dev0
//   ORRERY_JOB, ORRERY_EPOCH, ORRERY_RANK, ORRERY_WORLD
//   ORRERY_SPLICE        ranks time-sliced on the same device, in order, e.g. "0,1" (default: rank)
//   ORRERY_COLLECTIVE    shm name of the job incarnation's collective segment
//   ORRERY_RESTORE_STEP  >= 0: restore this rank from that step's shard (default -1)
#pragma once

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "runtime/proxy/ring.h"

namespace orrery::runtime {

using DevPtr = std::uint64_t;
class Collective;

// Exit status of a worker that stopped on request after its checkpoint (not a failure).
inline constexpr int kExitStopped = 3;

struct WorkerEnv {
  std::string proxy;
  std::string collective;
  int job = -1, rank = 0, world = 1;
  std::int64_t epoch = 0;
  std::int64_t restore_step = -1;
  std::vector<int> splice;  // empty: {rank}
};

Result<WorkerEnv> worker_env_from_environment();

struct StepBoundary {
  bool checkpointed = false;  // this boundary's shard was written
  bool stop = false;          // the job is asked to stop here: exit with kExitStopped
};

class Worker {
 public:
  static Result<std::unique_ptr<Worker>> connect(const WorkerEnv& env);
  static Result<std::unique_ptr<Worker>> connect_from_env();
  ~Worker();  // says goodbye: the proxy frees this rank's memory
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;

  const WorkerEnv& env() const { return env_; }
  int rank() const { return env_.rank; }
  int world() const { return env_.world; }
  bool restored() const { return restored_; }
  std::int64_t restored_step() const { return restored_ ? env_.restore_step : -1; }

  Result<DevPtr> alloc(std::uint64_t bytes);
  Status free(DevPtr p);
  Status copy_h2d(DevPtr dst, const void* src, std::uint64_t n);
  Status copy_d2h(void* dst, DevPtr src, std::uint64_t n);
  Status copy_d2d(DevPtr dst, DevPtr src, std::uint64_t n);
  // Asynchronous, like a CUDA launch: queued on the ring without waiting (up to kRingDepth - 1
  // in flight); an error of a queued launch is returned by the next call that waits (any other
  // call, or synchronize()). Launches run in order with everything else the worker sends.
  Status launch(std::string_view kernel, std::initializer_list<std::uint64_t> args);
  Status synchronize();
  // Sum of `count` floats at buf across the job's ranks, in rank order, in place. One per step
  // (`step` counts from 0); the safe point of splicing. Returns the agreed flags (ring.h).
  Result<std::uint64_t> allreduce(DevPtr buf, std::uint64_t count, std::int64_t step);
  // The same allreduce on host memory (a PyTorch job's CPU gradients), without copying the data
  // to the device and back: the same bits (element i is ((x0[i] + x1[i]) + ...) in rank order),
  // the same returned flags, the same safe point and splicing behaviour as allreduce(), in
  // place in `data`. Within one machine (a shm ORRERY_COLLECTIVE) the data go straight from
  // `data` into a shm segment the job's workers share (<collective>-h<log2 capacity>, removed
  // once every rank has it open), where all of them sum its chunks in rank order
  // (runtime/proxy/collective.h), while a one-float allreduce through the proxy is the safe
  // point: it carries the flags, and a spliced rank waits there for its turn. Order: our data
  // in, then the safe point (so a rank never waits on another rank's data before its turn), then
  // the sum and the result out; the one-float device buffer is allocated at the first call (a
  // device allocation orrery.torch's allocation log counts on). Across machines (a tcp://
  // collective) the proxy sums over the TCP collective straight from host memory it shares with
  // this worker (Op::kAllreduceHost) and leaves the sum there, allocating no device memory:
  // `data` inside host_buffer()'s buffer is summed where it lies (no copy at all on the
  // worker's side); anywhere else it is copied into the bulk window and the sum back out (two
  // copies of the buffer). Every rank must call it with the same counts in the same order, as
  // with allreduce(); count is 1 .. 2^28.
  Result<std::uint64_t> allreduce_host(float* data, std::uint64_t count, std::int64_t step);
  // Host memory for at least `count` floats that this worker's proxy maps too (the reduce
  // buffer): a job that keeps its gradients here (a flat gradient bucket, as DDP keeps its
  // buckets) has them allreduced across machines without a copy on either side of the proxy's
  // sockets. The same buffer on every call; one that must grow is mapped anew with the old
  // contents copied over, and earlier pointers into it become invalid. Not the bulk window
  // (large copies stage through that one), and not state: a checkpoint does not include it.
  Result<float*> host_buffer(std::uint64_t count);
  // Registers host bytes to checkpoint; after a restore, fills them with the restored bytes
  // (registrations must come in the same order and sizes as before the checkpoint).
  Status register_host_state(void* p, std::uint64_t n);
  // The boundary after `steps_done` steps: writes the checkpoint if one was agreed for it.
  Result<StepBoundary> step_boundary(std::int64_t steps_done);
  // The workload's final line, readable by the node runtime (kCompleted's detail).
  Status report(std::string_view text);
  Status nop();  // one round trip (benchmarks)
  // The device's memory: total, and what is mapped now (resident ranks of every job).
  Result<std::pair<std::uint64_t, std::uint64_t>> mem_info();

 private:
  Worker() = default;
  Response call(Request& r);
  void drain(std::uint32_t keep);  // collects responses until at most `keep` are outstanding
  Status status_of(const Response& r, const char* what);
  Result<std::uint64_t> allreduce_window(float* data, std::uint64_t count, std::int64_t step);
  // The host allreduce's request to the proxy: count floats (0: flags only) at the bulk
  // window's start (`where` 0) or at float where - 1 of the reduce buffer.
  Result<std::uint64_t> safe_point(std::uint64_t count, std::int64_t step, std::uint64_t where);
  // Maps a bulk window of at least `bytes` (capped at 1 GiB) into this worker and its proxy.
  Status ensure_window(std::uint64_t bytes);
  // A new shm mapping of `size` bytes shared with the proxy (Op::kWindow's `which`).
  Result<ShmMapping> map_shared(std::uint64_t size, std::uint64_t which);

  WorkerEnv env_;
  ShmMapping map_;
  ProxySegment* seg_ = nullptr;
  std::unique_ptr<WorkerRing> ring_;
  bool restored_ = false;
  std::uint64_t restored_states_ = 0;
  bool dead_ = false;
  std::uint64_t last_flags_ = 0;
  std::uint32_t inflight_ = 0;   // asynchronous launches not yet answered
  std::string launch_error_;     // the first failed asynchronous launch, until reported
  std::vector<std::pair<void*, std::uint64_t>> states_;
  // allreduce_host: the shared host segment (its capacity, name, the group steps taken on it,
  // whether its name is removed yet), the one-float buffer of the safe point; the bulk window
  // (large copies, the TCP allreduce_host).
  std::unique_ptr<Collective> host_coll_;
  std::uint64_t host_cap_ = 0;
  std::string host_name_;
  std::int64_t host_seq_ = 0;
  bool host_unlinked_ = false;
  DevPtr flag_buf_ = 0;
  ShmMapping window_;
  ShmMapping reduce_buf_;  // host_buffer()
  std::uint64_t window_gen_ = 0;
};

}  // namespace orrery::runtime
