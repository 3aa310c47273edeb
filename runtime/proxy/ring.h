// The shared-memory transport between a proxy, its workers and the node runtime.
//
// One POSIX shm object per proxy (its name is ORRERY_PROXY in a worker's environment) holds a
// header and kMaxWorkers worker slots. A worker claims a free slot (CAS on its state) and then
// owns that slot's two single-producer/single-consumer rings: requests (worker -> proxy) and
// responses (proxy -> worker), plus a data area for bulk bytes (copies, host state). Nothing in
// this path is serialised: records are fixed-size PODs.
//
// Wake-ups: the consumer spins for a short while (a round trip is a few hundred ns when both
// sides are awake) and then sleeps on a futex; the producer issues FUTEX_WAKE only when the
// consumer said it sleeps (a Dekker handshake on seq_cst atomics), so a busy ring costs no
// syscalls. The proxy sleeps on one doorbell word for all its slots.
//
// The header also carries a command ring (node runtime -> proxy: checkpoint requests, freeing a
// job's memory, shutdown); per-slot counters (steps completed, last checkpoint, device time) are
// how the node runtime follows its workers without another channel.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>

#include "base/result.h"

namespace orrery::runtime {

inline constexpr std::uint32_t kProxyMagic = 0x4f525059;  // "ORPY"
inline constexpr std::uint32_t kProxyVersion = 1;
inline constexpr int kMaxWorkers = 32;
inline constexpr int kRingDepth = 8;
inline constexpr int kRingArgs = 20;
inline constexpr std::size_t kDataBytes = 1u << 20;
inline constexpr int kCommandDepth = 32;

enum class Op : std::uint32_t {
  kHello = 1,      // a[0..]: see worker.cc; first request of a slot
  kAlloc,          // a[0] bytes -> v[0] device address
  kFree,           // a[0] address
  kCopyH2D,        // a[0] dst, a[1] n (bytes in data area)
  kCopyD2H,        // a[0] src, a[1] n (-> data area)
  kCopyD2D,        // a[0] dst, a[1] src, a[2] n
  kLaunch,         // name, a[0] nargs, a[1..] args
  kSync,
  kAllreduce,      // a[0] buf, a[1] count (floats), a[2] step -> v[0] flags
  kStepBoundary,   // a[0] steps completed, a[1] nstates, data: host states -> v[0] flags
  kRestoredState,  // a[0] index -> data area, v[0] bytes
  kReport,         // data: result text (the workload's final line)
  kMemInfo,        // -> v[0] total, v[1] used
  kNop,            // round trip only (benchmarks)
  kBye,
  // The worker's bulk window: a shm object of its own (name in the data area, a[0] bytes) that
  // the proxy maps, so large buffers cross in one request instead of 1 MiB pieces. Replaces the
  // previous window; the worker unlinks the name once this is answered. a[1] 1: the same for
  // the worker's reduce buffer (Worker::host_buffer), a mapping of its own.
  kWindow,
  kCopyH2DWindow,  // a[0] dst, a[1] n (bytes at the window's start)
  kCopyD2HWindow,  // a[0] src, a[1] n (-> the window's start)
  // The allreduce on host floats: a[0] count (0: no data, the safe point and its flags only),
  // a[1] step, a[2] where (0: at the window's start; k > 0: at float k - 1 of the reduce
  // buffer) -> v[0] flags, the sum where the data were. Uses no device memory.
  kAllreduceHost,
};

// Flags carried by the allreduce and returned at the step boundary.
inline constexpr std::uint64_t kFlagCheckpoint = 1;
inline constexpr std::uint64_t kFlagStop = 2;
inline constexpr std::uint64_t kFlagCheckpointed = 4;  // step boundary: the shard is written
// Between proxies only (never to a worker): a proxy failed its part of the job's allreduce on
// the devices, so every proxy fails the step instead of waiting for it.
inline constexpr std::uint64_t kFlagReduceFailed = 8;

struct Request {
  std::uint32_t op = 0;
  std::uint32_t pad = 0;
  std::uint64_t a[kRingArgs] = {};
  char name[32] = {};
};

struct Response {
  std::int32_t code = 0;  // 0 ok, else an error whose text is in `error`
  std::uint32_t pad = 0;
  std::uint64_t v[4] = {};
  char error[200] = {};
};

enum class SlotState : std::uint32_t { kFree = 0, kClaimed = 1, kClosed = 2 };

struct alignas(64) WorkerSlot {
  std::atomic<std::uint32_t> state;
  std::int32_t pid;
  std::int32_t job;
  std::int32_t rank;
  std::int64_t epoch;
  std::atomic<std::int64_t> steps_done;        // last step boundary the worker passed
  std::atomic<std::int64_t> checkpointed;      // last boundary whose shard is durable
  std::atomic<std::int64_t> busy_ns;           // device time spent on this worker's requests
  std::atomic<std::uint32_t> hello_done;       // 1 once registered (and restored, if asked)
  char result[160];                            // kReport text
  alignas(64) std::atomic<std::uint32_t> req_head;   // written by the worker
  alignas(64) std::atomic<std::uint32_t> req_tail;   // written by the proxy
  alignas(64) std::atomic<std::uint32_t> resp_head;  // written by the proxy; worker's futex
  std::atomic<std::uint32_t> worker_sleeping;
  alignas(64) std::atomic<std::uint32_t> resp_tail;  // written by the worker
  Request req[kRingDepth];
  Response resp[kRingDepth];
  alignas(4096) unsigned char data[kDataBytes];
};

enum class CommandKind : std::uint32_t { kCheckpoint = 1, kFreeJob = 2, kShutdown = 3 };

struct Command {
  CommandKind kind;
  std::int32_t job;
  std::int64_t epoch;
  std::int64_t at_step;  // kCheckpoint: boundary, or < 0 for the next one agreed
  std::uint32_t then_stop;
};

struct alignas(64) ProxyHeader {
  std::uint32_t magic;
  std::uint32_t version;
  std::int32_t device;
  std::int32_t pid;
  std::uint64_t mem_bytes;
  std::atomic<std::uint32_t> ready;
  alignas(64) std::atomic<std::uint32_t> doorbell;  // the proxy's futex
  std::atomic<std::uint32_t> proxy_sleeping;
  alignas(64) std::atomic<std::uint32_t> cmd_head;  // node runtime (one writer, under its lock)
  std::atomic<std::uint32_t> cmd_tail;              // proxy
  Command cmds[kCommandDepth];
  char backend[16];
};

struct ProxySegment {
  ProxyHeader header;
  WorkerSlot slots[kMaxWorkers];
};

// One step of a spin loop: a CPU pause, and every 64th step a sched_yield(), so that on a
// machine with fewer free cores than spinning processes the side we wait for gets the core
// instead of waiting out our whole spin budget.
void spin_pause(int n);

// futex(2) on a shared word.
void futex_wait(std::atomic<std::uint32_t>* word, std::uint32_t expected, long timeout_ns);
void futex_wake(std::atomic<std::uint32_t>* word);

// A mapping of a named shm object.
class ShmMapping {
 public:
  ShmMapping() = default;
  ShmMapping(ShmMapping&& o) noexcept { *this = std::move(o); }
  ShmMapping& operator=(ShmMapping&& o) noexcept;
  ~ShmMapping();
  // Creates (exclusively) and maps `bytes`; fails if the name exists.
  static Result<ShmMapping> create(const std::string& name, std::size_t bytes);
  // Maps an existing object of at least `bytes`.
  static Result<ShmMapping> open(const std::string& name, std::size_t bytes);
  void* data() const { return p_; }
  std::size_t size() const { return n_; }

 private:
  void* p_ = nullptr;
  std::size_t n_ = 0;
};

// Rings over one slot, from the worker's side.
class WorkerRing {
 public:
  WorkerRing(ProxySegment* seg, int slot) : seg_(seg), s_(&seg->slots[slot]) {}
  WorkerSlot* slot() const { return s_; }
  unsigned char* data() const { return s_->data; }
  // Sends one request and waits for its response (spinning `spin_ns`, then sleeping).
  Response call(const Request& r, long spin_ns = 50'000);
  // The two halves, for requests whose answers are collected later (asynchronous launches).
  // Responses come back in request order; at most kRingDepth may be outstanding.
  void submit(const Request& r);
  Response wait(long spin_ns = 50'000);

 private:
  ProxySegment* seg_;
  WorkerSlot* s_;
};

// Publishes a response to a slot (proxy side).
void publish_response(WorkerSlot* s, const Response& r);

}  // namespace orrery::runtime
