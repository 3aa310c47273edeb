// A fake CUDA runtime and driver that runs on the CPU, so that CI (which has no GPU) runs the cuda
// backend's own code (runtime/proxy/cuda/cuda_backend.cc, pinned_pool.cc, cuda_driver.cc)
// including the order of its streams and events. The backend's sources are compiled unchanged
// against the real headers (<cuda_runtime_api.h>, <cuda.h>, so every definition below is checked
// against the real extern "C" declaration) and linked with this file instead of cudart; the
// device kernels are fake_cuda_kernels.cc. tests/fake_cuda/CMakeLists.txt builds the contract
// test, fake_cuda_backend_test.cc's orderings and the end-to-end suite (orrery-proxy processes)
// on it. FAKE_CUDA_SEED picks the interleaving; FAKE_CUDA_MEM_MIB the device's memory.
//
// What it emulates:
// - One device (FAKE_CUDA_DEVICES=0 makes it none) with FAKE_CUDA_MEM_MIB (1024) MiB of memory.
// - Virtual memory management over real mappings of this process: cuMemAddressReserve is an
//   mmap(PROT_NONE) at the hint (MAP_FIXED_NOREPLACE) or, when that is taken, elsewhere, as CUDA
//   treats the address as a hint; cuMemCreate is a memfd, filled with 0xCD (device memory is not
//   zeroed); cuMemMap maps it MAP_SHARED|MAP_FIXED, still PROT_NONE; cuMemSetAccess makes it
//   read-write (memory is inaccessible until then); cuMemUnmap puts PROT_NONE back. A mapping
//   outside a reservation, misaligned to the 2 MiB granule, over another, a partial unmap, or a
//   reservation freed with mappings inside is refused with CUDA_ERROR_INVALID_VALUE (and said on
//   stderr). Physical memory is freed when released and unmapped, as in CUDA.
// - Streams are queues run lazily: an asynchronous op (copy, memset, kernel, free) runs only when
//   something forces it: cudaStreamSynchronize, cudaEventSynchronize, cudaDeviceSynchronize, a
//   blocking cudaMemcpy, cudaFree(p), cudaFreeHost, cudaHostUnregister (which synchronize the
//   device on CUDA too: documented for cudaFree, observed for the other two), a query (one
//   step). Forced, the scheduler runs ops of ALL streams in a random
//   order (seed: FAKE_CUDA_SEED, 1 by default; fake_cuda_set_seed) that keeps only what CUDA
//   guarantees: program order within a stream, and an op after cudaStreamWaitEvent runs after the
//   ops that preceded the event's record. It stops as soon as what was asked for is done; the rest
//   stays queued. A missing wait thus shows up as wrong bytes for some seeds. The device also
//   makes some progress on its own: after FAKE_CUDA_EAGER percent (25) of the enqueues, up to 3
//   ops run at once, so that relying on an op not having run yet is caught too.
// - Ops that wait on something outside the device (fake_cuda_enqueue_when: the fake NCCL's
//   receives, fake_nccl.cc, wait for their peers' messages): such an op runs only once its
//   readiness predicate holds, polled by the scheduler while the op heads its queue. A
//   synchronization that needs it naps (100 us, with the fake's lock released so that the
//   process's other threads go on) and polls again, running whatever else may run meanwhile; a
//   query steps once and reports not ready. The scheduler deadlock abort remains for when nothing
//   may run and no op waits on a predicate.
// - Events: cudaEventRecord captures its stream's position at record time; a later record
//   replaces it for later waits and synchronizations; an event never recorded is complete.
// - Device accesses are checked when an op runs: a copy or memset touching memory that is not
//   mapped read-write then aborts the process with a message (a GPU would fault: use after unmap,
//   or a release that did not wait for queued work), and is refused at enqueue time when the
//   address is not device memory at all. A kernel (fake_cuda_kernels.cc) whose pointer is not
//   4-byte aligned or not in device memory poisons the context instead, as a GPU fault does: every
//   later call returns that sticky error, which cudaGetLastError cannot clear.
// - Copies between overlapping ranges are undefined on a GPU: the fake fills the destination with
//   0xEE (and counts them), so code relying on them gets wrong bytes.
// - Pinned memory: cudaHostAlloc is an aligned allocation; cudaHostRegister records the range
//   (overlaps refused), cudaHostUnregister of a pointer not registered fails. cudaMalloc and
//   cudaMallocAsync give host memory counted and checked as device memory (filled with 0xCD),
//   usable at once; cudaFreeAsync frees in stream order, cudaFree after synchronizing the device.
// - Errors: a per-thread last error (cudaGetLastError returns and clears it, cudaPeekAtLastError
//   returns it); names and strings for the codes the fake returns.
//
// What it cannot show (the GPU runs remain needed, docs/cuda.md):
// - Anything about real kernels: fake kernels are the host versions (kernels.h, chunk_hash.h),
//   so the device kernels' bit-identity, launch configuration and performance are not tested.
// - Ops are atomic: two unordered ops on overlapping bytes land in one order or the other, never
//   interleaved byte by byte as on a GPU; a race shows as one op's bytes winning, which is enough
//   to fail a comparison but does not reproduce torn data.
// - An op that is never forced may never run (a GPU would run it eventually): host code that
//   reads what a copy wrote without synchronizing sees stale bytes, which is the point. For an
//   NCCL send it means that a peer process waits until something here forces it (any
//   synchronization or query, which run other streams' ops too); a GPU would send by itself.
// - Where ops wait on predicates, the interleaving depends on timing (when a message arrives),
//   not on the seed alone.
// - Host memory is treated as pinned everywhere: a copy from pageable memory is as asynchronous
//   as from pinned memory (CUDA stages pageable H2D copies at once). Stricter, never looser.
// - The legacy default stream (0) is a queue of its own that synchronizes with nothing: streams
//   created without cudaStreamNonBlocking do not wait for it as on CUDA (the backend creates only
//   non-blocking streams and never uses stream 0). cudaStreamPerThread is that queue too.
// - cuMemUnmap and cuMemRelease do not wait for queued work (the backend must, and does): a real
//   driver may; the fake faults instead, which is the stricter reading. The other way round,
//   cudaFreeHost waiting for the device is assumed, not checked: a pinned buffer freed under a
//   queued copy is never caught (PinnedPool::trim relies on that wait since splice dedup).
// - Host memory has no protection: a host read of a pinned buffer before its copy was waited
//   for sees stale bytes (caught by comparisons), never a fault.
// - Timing, concurrency of copy engines, pageable-memory staging, IPC, peer access, multiple
//   devices, graphs, and every API the backend does not call.
#include "tests/fake_cuda/fake_cuda.h"

#include <cuda.h>
#include <cuda_runtime_api.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

namespace fake_cuda_detail {

constexpr std::uint64_t kGranule = 2ull << 20;  // cuMemGetAllocationGranularity, as on H100
constexpr std::uint64_t kPage = 4096;

struct Queue;

struct Op {
  std::function<cudaError_t()> run;  // empty: a wait
  std::shared_ptr<Queue> wait_q;     // a wait: runnable once wait_q->done >= wait_pos
  std::uint64_t wait_pos = 0;
  std::uint64_t seq = 0;             // global enqueue order, for the statistics only
  std::function<bool()> ready = {};  // set: runnable once it returns true (fake_cuda_enqueue_when)
  bool ready_seen = false;           // ready() returned true once: not asked again
};

// A stream's queue. Outlives its handle while ops remain or an event refers to it.
struct Queue {
  std::deque<Op> ops;
  std::uint64_t enqueued = 0, done = 0;  // positions: ops ever appended, ops ever finished
  bool destroyed = false;
};

}  // namespace fake_cuda_detail

// The runtime's opaque handle types (declared, never defined, by the real headers).
struct CUstream_st {
  std::shared_ptr<fake_cuda_detail::Queue> q;
};
struct CUevent_st {
  std::shared_ptr<fake_cuda_detail::Queue> q;  // null until recorded
  std::uint64_t pos = 0;                       // complete when q->done >= pos
};

namespace fake_cuda_detail {
namespace {

struct Handle {
  int fd = -1;
  std::uint64_t size = 0;
  int maps = 0;
  bool released = false;
};
struct Mapping {
  std::uint64_t size = 0;
  std::uint64_t handle = 0;
  int prot = PROT_NONE;
};

std::uint64_t env_u64(const char* name, std::uint64_t dflt) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return dflt;
  return std::strtoull(v, nullptr, 0);
}

struct State {
  State() {
    seed = env_u64("FAKE_CUDA_SEED", 1);
    rng.seed(seed);
    capacity = env_u64("FAKE_CUDA_MEM_MIB", 1024) << 20;
    eager = std::min<std::uint64_t>(env_u64("FAKE_CUDA_EAGER", 25), 100);
    devices = env_u64("FAKE_CUDA_DEVICES", 1) == 0 ? 0 : 1;
    legacy = std::make_shared<Queue>();
    queues.push_back(legacy);
  }
  // Recursive: an op running under the scheduler (a fake kernel) may ask
  // fake_cuda_device_accessible.
  std::recursive_mutex mu;
  std::uint64_t seed = 1;
  std::mt19937_64 rng;
  std::uint64_t eager = 25;  // percent of enqueues after which queued ops run at once
  std::shared_ptr<Queue> legacy;
  std::vector<std::shared_ptr<Queue>> queues;  // every stream's, and destroyed ones still pending
  std::set<CUstream_st*> streams;
  std::set<CUevent_st*> events;
  std::uint64_t next_seq = 0;
  cudaError_t sticky = cudaSuccess;
  int devices = 1;

  std::map<std::uint64_t, std::uint64_t> reservations;  // start -> size
  std::map<std::uint64_t, Handle> handles;
  std::uint64_t next_handle = 1;
  std::map<std::uint64_t, Mapping> mappings;            // start -> mapping
  std::map<std::uint64_t, std::uint64_t> blocks;        // cudaMalloc(Async): start -> size
  std::set<std::uint64_t> freeing;                      // cudaFreeAsync queued
  std::map<std::uint64_t, std::uint64_t> pinned;        // cudaHostAlloc: start -> size
  std::map<std::uint64_t, std::uint64_t> registered;    // cudaHostRegister: start -> size
  std::uint64_t capacity = 0, in_use = 0;
  FakeCudaStats stats;
};

// Never destroyed: a backend torn down during static destruction still finds it.
State& S() {
  static State* s = new State();
  return *s;
}

thread_local cudaError_t last_error = cudaSuccess;

cudaError_t fail(cudaError_t e) {
  if (e != cudaSuccess) last_error = e;
  return e;
}

using Lock = std::lock_guard<std::recursive_mutex>;

void say(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
void say(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  std::fputs("fake_cuda: ", stderr);
  std::vfprintf(stderr, fmt, ap);
  std::fputc('\n', stderr);
  va_end(ap);
}

[[noreturn]] void fault(const char* what, std::uint64_t p, std::uint64_t n) {
  say("%s touches [0x%llx, 0x%llx), which is not device memory mapped read-write now: a GPU "
      "would fault here (memory unmapped or released before the queued work that uses it ran: "
      "a missing synchronization)",
      what, static_cast<unsigned long long>(p), static_cast<unsigned long long>(p + n));
  std::abort();
}

// ---- memory ------------------------------------------------------------------------------------

// [p, p + n) lies in a cudaMallocAsync block, or in consecutive mappings (read-write ones when
// `access`).
bool device_range(State& s, std::uint64_t p, std::uint64_t n, bool access) {
  if (n == 0) return true;
  if (auto a = s.blocks.upper_bound(p); a != s.blocks.begin()) {
    --a;
    if (p >= a->first && p + n <= a->first + a->second) return true;
  }
  std::uint64_t at = p;
  const std::uint64_t end = p + n;
  while (at < end) {
    auto m = s.mappings.upper_bound(at);
    if (m == s.mappings.begin()) return false;
    --m;
    if (at >= m->first + m->second.size) return false;
    if (access && m->second.prot != (PROT_READ | PROT_WRITE)) return false;
    at = m->first + m->second.size;
  }
  return true;
}

// The mappings that exactly make up [p, p + n), contiguous and whole; empty when they do not.
std::vector<std::uint64_t> whole_mappings(State& s, std::uint64_t p, std::uint64_t n) {
  std::vector<std::uint64_t> out;
  std::uint64_t at = p;
  while (at < p + n) {
    auto m = s.mappings.find(at);
    if (m == s.mappings.end()) return {};
    out.push_back(at);
    at += m->second.size;
  }
  if (at != p + n) return {};
  return out;
}

void drop_handle_if_done(State& s, std::uint64_t h) {
  auto it = s.handles.find(h);
  if (it == s.handles.end() || !it->second.released || it->second.maps > 0) return;
  ::close(it->second.fd);
  s.in_use -= it->second.size;
  s.handles.erase(it);
}

// ---- the scheduler -----------------------------------------------------------------------------

bool runnable(Queue& q) {
  if (q.ops.empty()) return false;
  Op& op = q.ops.front();
  if (op.wait_q && op.wait_q->done < op.wait_pos) return false;
  if (op.ready && !op.ready_seen) op.ready_seen = op.ready();
  return !op.ready || op.ready_seen;
}

// Some queue's head waits on its readiness predicate (fake_cuda_enqueue_when): something outside
// the device, which comes by itself, rather than another op.
bool awaiting(const State& s) {
  for (const auto& q : s.queues) {
    if (!q->ops.empty() && q->ops.front().ready && !q->ops.front().ready_seen) return true;
  }
  return false;
}

void drop_all(State& s) {
  for (auto& q : s.queues) {
    q->done += q->ops.size();
    q->ops.clear();
  }
}

// Runs one op, chosen at random among the heads of the queues that may run now. False when none
// may (nothing queued).
bool step(State& s) {
  std::vector<Queue*> ready;
  for (auto& q : s.queues) {
    if (runnable(*q)) ready.push_back(q.get());
  }
  if (ready.empty()) return false;
  Queue* q = ready[s.rng() % ready.size()];
  Op op = std::move(q->ops.front());
  q->ops.pop_front();
  if (op.run) {
    for (auto& o : s.queues) {
      if (o.get() != q && !o->ops.empty() && o->ops.front().seq < op.seq) {
        ++s.stats.ops_out_of_order;
        break;
      }
    }
    ++s.stats.ops_run;
    if (const cudaError_t e = op.run(); e != cudaSuccess) {
      s.sticky = e;  // a fault: the context is gone, and so is everything queued
      ++q->done;
      drop_all(s);
      return true;
    }
  }
  ++q->done;
  return true;
}

void prune(State& s) {
  std::erase_if(s.queues, [](const std::shared_ptr<Queue>& q) {
    return q->destroyed && q->ops.empty();
  });
}

// Runs ops until done() holds. While nothing may run but an op waits on its predicate, it naps
// with s.mu released (the callers hold it once; held twice, it would stay held), so that this
// process's other threads go on: they may be what the predicate waits for, through another
// process. They may run ops, enqueue more or destroy streams meanwhile, so done() must hold on to
// what it reads (a queue's shared_ptr, an event's record), not to the handles.
template <class Done>
cudaError_t run_until(State& s, Done done) {
  if (!done()) ++s.stats.forced;
  while (!done()) {
    if (step(s)) continue;
    if (!awaiting(s)) {
      // Waits only ever refer to positions already enqueued, so this cannot happen.
      say("scheduler deadlock: nothing may run and the condition is not met");
      std::abort();
    }
    s.mu.unlock();
    std::this_thread::sleep_for(std::chrono::microseconds(100));
    s.mu.lock();
  }
  prune(s);
  return s.sticky;
}

// Everything queued now, on every stream (what another thread queues meanwhile is not waited for).
cudaError_t drain(State& s) {
  std::vector<std::pair<std::shared_ptr<Queue>, std::uint64_t>> upto;
  for (auto& q : s.queues) upto.emplace_back(q, q->enqueued);
  return run_until(s, [&] {
    for (const auto& [q, pos] : upto) {
      if (q->done < pos) return false;
    }
    return true;
  });
}

bool event_done(const CUevent_st& e) { return !e.q || e.q->done >= e.pos; }

// The queue behind a handle: 0 and the special handles are the legacy stream's own queue.
cudaError_t queue_of(State& s, cudaStream_t h, std::shared_ptr<Queue>* out) {
  if (h == nullptr || h == cudaStreamLegacy || h == cudaStreamPerThread) {
    *out = s.legacy;
    return cudaSuccess;
  }
  if (s.streams.count(h) == 0) return cudaErrorInvalidResourceHandle;
  *out = h->q;
  return cudaSuccess;
}

// The device makes progress while the host goes on: after some enqueues (FAKE_CUDA_EAGER percent,
// 25 by default) up to 3 queued ops run at once. Laziness alone would hide the opposite mistake,
// code relying on an op not having run yet (a host write to a buffer a queued copy reads).
void progress(State& s) {
  if (s.eager == 0 || s.rng() % 100 >= s.eager) return;
  const std::uint64_t n = 1 + s.rng() % 3;
  for (std::uint64_t i = 0; i < n && s.sticky == cudaSuccess && step(s); ++i) {
  }
  prune(s);
}

void enqueue(State& s, Queue& q, Op op) {
  op.seq = s.next_seq++;
  q.ops.push_back(std::move(op));
  ++q.enqueued;
  progress(s);
}

bool overlap(std::uint64_t a, std::uint64_t b, std::uint64_t n) { return a < b + n && b < a + n; }

}  // namespace
}  // namespace fake_cuda_detail

using namespace fake_cuda_detail;

// Every call that reaches the device fails with the sticky error once a fault poisoned the context.
#define FAKE_CUDA_GATE(s)                                   \
  do {                                                      \
    if ((s).sticky != cudaSuccess) return fail((s).sticky); \
  } while (0)

// ---- the test API ------------------------------------------------------------------------------

cudaError_t fake_cuda_enqueue_checked(cudaStream_t stream, std::function<cudaError_t()> op) {
  State& s = S();
  Lock l(s.mu);
  FAKE_CUDA_GATE(s);
  std::shared_ptr<Queue> q;
  if (cudaError_t e = queue_of(s, stream, &q); e != cudaSuccess) return fail(e);
  enqueue(s, *q, Op{std::move(op), nullptr, 0, 0});
  return cudaSuccess;
}

cudaError_t fake_cuda_enqueue_when(cudaStream_t stream, std::function<bool()> ready,
                                   std::function<cudaError_t()> op) {
  State& s = S();
  Lock l(s.mu);
  FAKE_CUDA_GATE(s);
  if (!ready || !op) return fail(cudaErrorInvalidValue);
  std::shared_ptr<Queue> q;
  if (cudaError_t e = queue_of(s, stream, &q); e != cudaSuccess) return fail(e);
  Op o{std::move(op), nullptr, 0, 0};
  o.ready = std::move(ready);
  enqueue(s, *q, std::move(o));
  return cudaSuccess;
}

cudaError_t fake_cuda_enqueue(cudaStream_t stream, std::function<void()> op) {
  return fake_cuda_enqueue_checked(stream, [op = std::move(op)] {
    op();
    return cudaSuccess;
  });
}

bool fake_cuda_device_accessible(const void* p, std::size_t n) {
  State& s = S();
  Lock l(s.mu);
  return device_range(s, reinterpret_cast<std::uintptr_t>(p), n, true);
}

void fake_cuda_set_seed(std::uint64_t seed) {
  State& s = S();
  Lock l(s.mu);
  s.seed = seed;
  s.rng.seed(seed);
}

std::uint64_t fake_cuda_seed() {
  State& s = S();
  Lock l(s.mu);
  return s.seed;
}

void fake_cuda_set_eager(unsigned percent) {
  State& s = S();
  Lock l(s.mu);
  s.eager = std::min(percent, 100u);
}

unsigned fake_cuda_eager() {
  State& s = S();
  Lock l(s.mu);
  return static_cast<unsigned>(s.eager);
}

void fake_cuda_set_capacity(std::uint64_t bytes) {
  State& s = S();
  Lock l(s.mu);
  s.capacity = bytes;
}

std::uint64_t fake_cuda_capacity() {
  State& s = S();
  Lock l(s.mu);
  return s.capacity;
}

FakeCudaStats fake_cuda_stats() {
  State& s = S();
  Lock l(s.mu);
  FakeCudaStats out = s.stats;
  out.pending_ops = 0;
  for (auto& q : s.queues) out.pending_ops += q->ops.size();
  out.device_bytes_in_use = s.in_use;
  out.reservations = s.reservations.size();
  out.mappings = s.mappings.size();
  out.handles = s.handles.size();
  out.streams = s.streams.size();
  out.events = s.events.size();
  out.pinned_buffers = s.pinned.size();
  out.registered_ranges = s.registered.size();
  return out;
}

void fake_cuda_reset_context() {
  State& s = S();
  Lock l(s.mu);
  drop_all(s);
  prune(s);
  s.sticky = cudaSuccess;
  last_error = cudaSuccess;
}

// ---- runtime API: device and errors ------------------------------------------------------------

cudaError_t CUDARTAPI cudaGetDeviceCount(int* count) {
  State& s = S();
  Lock l(s.mu);
  if (count == nullptr) return fail(cudaErrorInvalidValue);
  *count = s.devices;
  return s.devices == 0 ? fail(cudaErrorNoDevice) : cudaSuccess;
}

cudaError_t CUDARTAPI cudaSetDevice(int device) {
  State& s = S();
  Lock l(s.mu);
  if (s.devices == 0) return fail(cudaErrorNoDevice);
  if (device < 0 || device >= s.devices) return fail(cudaErrorInvalidDevice);
  FAKE_CUDA_GATE(s);
  return cudaSuccess;
}

cudaError_t CUDARTAPI cudaGetDevice(int* device) {
  State& s = S();
  Lock l(s.mu);
  if (device == nullptr) return fail(cudaErrorInvalidValue);
  if (s.devices == 0) return fail(cudaErrorNoDevice);
  *device = 0;
  return cudaSuccess;
}

// For the benchmarks' banner: a name, the fake's memory and an H100's compute capability.
cudaError_t CUDARTAPI cudaGetDeviceProperties(cudaDeviceProp* prop, int device) {
  State& s = S();
  Lock l(s.mu);
  if (prop == nullptr) return fail(cudaErrorInvalidValue);
  if (device < 0 || device >= s.devices) return fail(cudaErrorInvalidDevice);
  *prop = cudaDeviceProp{};
  std::snprintf(prop->name, sizeof prop->name, "fake CUDA device (tests/fake_cuda)");
  prop->totalGlobalMem = s.capacity;
  prop->major = 9;
  prop->minor = 0;
  prop->multiProcessorCount = 132;
  return cudaSuccess;
}

cudaError_t CUDARTAPI cudaDeviceSynchronize(void) {
  State& s = S();
  Lock l(s.mu);
  FAKE_CUDA_GATE(s);
  return fail(drain(s));
}

cudaError_t CUDARTAPI cudaGetLastError(void) {
  const cudaError_t e = last_error;
  State& s = S();
  Lock l(s.mu);
  last_error = s.sticky;  // a sticky error cannot be cleared
  return e;
}

cudaError_t CUDARTAPI cudaPeekAtLastError(void) {
  State& s = S();
  Lock l(s.mu);
  return last_error != cudaSuccess ? last_error : s.sticky;
}

#define FAKE_CUDA_ERRORS(X)                                                                    \
  X(cudaSuccess, "no error")                                                                   \
  X(cudaErrorInvalidValue, "invalid argument")                                                 \
  X(cudaErrorMemoryAllocation, "out of memory")                                                \
  X(cudaErrorNoDevice, "no CUDA-capable device is detected")                                   \
  X(cudaErrorInvalidDevice, "invalid device ordinal")                                          \
  X(cudaErrorInvalidResourceHandle, "invalid resource handle")                                 \
  X(cudaErrorSymbolNotFound, "named symbol not found")                                         \
  X(cudaErrorNotReady, "device not ready")                                                     \
  X(cudaErrorIllegalAddress, "an illegal memory access was encountered")                       \
  X(cudaErrorMisalignedAddress, "misaligned address")                                          \
  X(cudaErrorLaunchFailure, "unspecified launch failure")                                      \
  X(cudaErrorHostMemoryAlreadyRegistered,                                                      \
    "part or all of the requested memory range is already mapped")                             \
  X(cudaErrorHostMemoryNotRegistered, "pointer does not correspond to a registered memory region") \
  X(cudaErrorNotSupported, "operation not supported")                                          \
  X(cudaErrorUnknown, "unknown error")

const char* CUDARTAPI cudaGetErrorName(cudaError_t error) {
  switch (error) {
#define FAKE_CUDA_NAME(code, text) \
  case code:                       \
    return #code;
    FAKE_CUDA_ERRORS(FAKE_CUDA_NAME)
#undef FAKE_CUDA_NAME
    default:
      return "unrecognized error code";
  }
}

const char* CUDARTAPI cudaGetErrorString(cudaError_t error) {
  switch (error) {
#define FAKE_CUDA_TEXT(code, text) \
  case code:                       \
    return text;
    FAKE_CUDA_ERRORS(FAKE_CUDA_TEXT)
#undef FAKE_CUDA_TEXT
    default:
      return "unrecognized error code";
  }
}

// ---- runtime API: streams and events -----------------------------------------------------------

cudaError_t CUDARTAPI cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned int flags) {
  State& s = S();
  Lock l(s.mu);
  if (stream == nullptr || (flags != cudaStreamDefault && flags != cudaStreamNonBlocking)) {
    return fail(cudaErrorInvalidValue);
  }
  FAKE_CUDA_GATE(s);
  auto* h = new CUstream_st{std::make_shared<Queue>()};
  s.queues.push_back(h->q);
  s.streams.insert(h);
  *stream = h;
  return cudaSuccess;
}

cudaError_t CUDARTAPI cudaStreamCreate(cudaStream_t* stream) {
  return cudaStreamCreateWithFlags(stream, cudaStreamDefault);
}

// As in CUDA: returns at once; work already queued still runs (when forced).
cudaError_t CUDARTAPI cudaStreamDestroy(cudaStream_t stream) {
  State& s = S();
  Lock l(s.mu);
  if (s.streams.erase(stream) == 0) return fail(cudaErrorInvalidResourceHandle);
  stream->q->destroyed = true;
  delete stream;
  prune(s);
  return cudaSuccess;
}

cudaError_t CUDARTAPI cudaStreamSynchronize(cudaStream_t stream) {
  State& s = S();
  Lock l(s.mu);
  FAKE_CUDA_GATE(s);
  std::shared_ptr<Queue> q;
  if (cudaError_t e = queue_of(s, stream, &q); e != cudaSuccess) return fail(e);
  const std::uint64_t upto = q->enqueued;
  return fail(run_until(s, [&] { return q->done >= upto; }));
}

// A query lets the device make one step, so that code polling it makes progress.
cudaError_t CUDARTAPI cudaStreamQuery(cudaStream_t stream) {
  State& s = S();
  Lock l(s.mu);
  FAKE_CUDA_GATE(s);
  std::shared_ptr<Queue> q;
  if (cudaError_t e = queue_of(s, stream, &q); e != cudaSuccess) return fail(e);
  if (q->ops.empty()) return cudaSuccess;
  step(s);
  prune(s);
  FAKE_CUDA_GATE(s);
  return q->ops.empty() ? cudaSuccess : cudaErrorNotReady;  // not an error: not recorded
}

cudaError_t CUDARTAPI cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event,
                                          unsigned int flags) {
  State& s = S();
  Lock l(s.mu);
  if (flags != cudaEventWaitDefault) return fail(cudaErrorInvalidValue);
  if (s.events.count(event) == 0) return fail(cudaErrorInvalidResourceHandle);
  FAKE_CUDA_GATE(s);
  std::shared_ptr<Queue> q;
  if (cudaError_t e = queue_of(s, stream, &q); e != cudaSuccess) return fail(e);
  if (!event->q) return cudaSuccess;  // never recorded: nothing to wait for
  // The record as it is now: a later record of the same event does not move this wait.
  enqueue(s, *q, Op{{}, event->q, event->pos, 0});
  return cudaSuccess;
}

cudaError_t CUDARTAPI cudaEventCreateWithFlags(cudaEvent_t* event, unsigned int flags) {
  State& s = S();
  Lock l(s.mu);
  constexpr unsigned kKnown =
      cudaEventBlockingSync | cudaEventDisableTiming | cudaEventInterprocess;
  if (event == nullptr || (flags & ~kKnown) != 0) return fail(cudaErrorInvalidValue);
  FAKE_CUDA_GATE(s);
  auto* e = new CUevent_st{};
  s.events.insert(e);
  *event = e;
  return cudaSuccess;
}

cudaError_t CUDARTAPI cudaEventCreate(cudaEvent_t* event) {
  return cudaEventCreateWithFlags(event, cudaEventDefault);
}

cudaError_t CUDARTAPI cudaEventDestroy(cudaEvent_t event) {
  State& s = S();
  Lock l(s.mu);
  if (s.events.erase(event) == 0) return fail(cudaErrorInvalidResourceHandle);
  delete event;
  return cudaSuccess;
}

cudaError_t CUDARTAPI cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
  State& s = S();
  Lock l(s.mu);
  if (s.events.count(event) == 0) return fail(cudaErrorInvalidResourceHandle);
  FAKE_CUDA_GATE(s);
  std::shared_ptr<Queue> q;
  if (cudaError_t e = queue_of(s, stream, &q); e != cudaSuccess) return fail(e);
  event->q = q;
  event->pos = q->enqueued;
  return cudaSuccess;
}

cudaError_t CUDARTAPI cudaEventSynchronize(cudaEvent_t event) {
  State& s = S();
  Lock l(s.mu);
  if (s.events.count(event) == 0) return fail(cudaErrorInvalidResourceHandle);
  FAKE_CUDA_GATE(s);
  const CUevent_st now = *event;  // the record as it is at this call
  return fail(run_until(s, [&] { return event_done(now); }));
}

cudaError_t CUDARTAPI cudaEventQuery(cudaEvent_t event) {
  State& s = S();
  Lock l(s.mu);
  if (s.events.count(event) == 0) return fail(cudaErrorInvalidResourceHandle);
  FAKE_CUDA_GATE(s);
  if (event_done(*event)) return cudaSuccess;
  step(s);
  prune(s);
  FAKE_CUDA_GATE(s);
  return event_done(*event) ? cudaSuccess : cudaErrorNotReady;
}

// ---- runtime API: memory -----------------------------------------------------------------------

cudaError_t CUDARTAPI cudaMemGetInfo(size_t* free, size_t* total) {
  State& s = S();
  Lock l(s.mu);
  if (free == nullptr || total == nullptr) return fail(cudaErrorInvalidValue);
  FAKE_CUDA_GATE(s);
  *total = s.capacity;
  *free = s.in_use < s.capacity ? s.capacity - s.in_use : 0;
  return cudaSuccess;
}

namespace {

// Whether each side of a copy is device memory; false when a side said to be device memory is
// not (CUDA refuses such a copy when it is issued).
bool copy_sides(State& s, void* dst, const void* src, size_t n, cudaMemcpyKind kind, bool* ddev,
                bool* sdev) {
  const auto d = reinterpret_cast<std::uintptr_t>(dst);
  const auto p = reinterpret_cast<std::uintptr_t>(src);
  switch (kind) {
    case cudaMemcpyHostToHost: *ddev = false, *sdev = false; break;
    case cudaMemcpyHostToDevice: *ddev = true, *sdev = false; break;
    case cudaMemcpyDeviceToHost: *ddev = false, *sdev = true; break;
    case cudaMemcpyDeviceToDevice: *ddev = true, *sdev = true; break;
    case cudaMemcpyDefault:
      *ddev = device_range(s, d, n, false);
      *sdev = device_range(s, p, n, false);
      return true;
    default:
      return false;
  }
  return (!*ddev || device_range(s, d, n, false)) && (!*sdev || device_range(s, p, n, false));
}

cudaError_t enqueue_copy(State& s, void* dst, const void* src, size_t n, cudaMemcpyKind kind,
                         cudaStream_t stream, const char* call) {
  if (n == 0) return cudaSuccess;
  if (dst == nullptr || src == nullptr) return fail(cudaErrorInvalidValue);
  FAKE_CUDA_GATE(s);
  std::shared_ptr<Queue> q;
  if (cudaError_t e = queue_of(s, stream, &q); e != cudaSuccess) return fail(e);
  bool ddev = false, sdev = false;
  if (!copy_sides(s, dst, src, n, kind, &ddev, &sdev)) {
    say("%s(dst %p, src %p, %zu bytes, kind %d) refused: a side said to be device memory is not "
        "mapped device memory", call, dst, src, n, static_cast<int>(kind));
    return fail(cudaErrorInvalidValue);
  }
  const auto d = reinterpret_cast<std::uintptr_t>(dst);
  const auto p = reinterpret_cast<std::uintptr_t>(src);
  enqueue(s, *q, Op{[&s, d, p, n, ddev, sdev, call] {
                      if (ddev && !device_range(s, d, n, true)) fault(call, d, n);
                      if (sdev && !device_range(s, p, n, true)) fault(call, p, n);
                      if (overlap(d, p, n)) {
                        // Undefined on a GPU (copy engines do not memmove): garbage.
                        ++s.stats.overlapping_copies;
                        say("%s between overlapping ranges: undefined, destination poisoned",
                            call);
                        std::memset(reinterpret_cast<void*>(d), 0xEE, n);
                      } else {
                        std::memcpy(reinterpret_cast<void*>(d), reinterpret_cast<void*>(p), n);
                      }
                      return cudaSuccess;
                    },
                    nullptr, 0, 0});
  return cudaSuccess;
}

}  // namespace

cudaError_t CUDARTAPI cudaMemcpyAsync(void* dst, const void* src, size_t count,
                                      enum cudaMemcpyKind kind, cudaStream_t stream) {
  State& s = S();
  Lock l(s.mu);
  return enqueue_copy(s, dst, src, count, kind, stream, "cudaMemcpyAsync");
}

// Blocking: on the legacy stream's queue, which it then runs to its end.
cudaError_t CUDARTAPI cudaMemcpy(void* dst, const void* src, size_t count,
                                 enum cudaMemcpyKind kind) {
  State& s = S();
  Lock l(s.mu);
  if (cudaError_t e = enqueue_copy(s, dst, src, count, kind, nullptr, "cudaMemcpy");
      e != cudaSuccess) {
    return e;
  }
  const std::uint64_t upto = s.legacy->enqueued;
  return fail(run_until(s, [&] { return s.legacy->done >= upto; }));
}

cudaError_t CUDARTAPI cudaMemsetAsync(void* ptr, int value, size_t count, cudaStream_t stream) {
  State& s = S();
  Lock l(s.mu);
  if (count == 0) return cudaSuccess;
  if (ptr == nullptr) return fail(cudaErrorInvalidValue);
  FAKE_CUDA_GATE(s);
  std::shared_ptr<Queue> q;
  if (cudaError_t e = queue_of(s, stream, &q); e != cudaSuccess) return fail(e);
  const auto d = reinterpret_cast<std::uintptr_t>(ptr);
  if (!device_range(s, d, count, false)) {
    say("cudaMemsetAsync(%p, %zu bytes) refused: not mapped device memory", ptr, count);
    return fail(cudaErrorInvalidValue);
  }
  enqueue(s, *q, Op{[&s, d, value, count] {
                      if (!device_range(s, d, count, true)) fault("cudaMemsetAsync", d, count);
                      std::memset(reinterpret_cast<void*>(d), value, count);
                      return cudaSuccess;
                    },
                    nullptr, 0, 0});
  return cudaSuccess;
}

namespace {

// cudaMalloc and cudaMallocAsync: host memory the fake counts and checks as device memory.
cudaError_t device_block(State& s, void** ptr, size_t size) {
  if (size == 0) {
    *ptr = nullptr;
    return cudaSuccess;
  }
  if (s.in_use + size > s.capacity) return fail(cudaErrorMemoryAllocation);
  void* p = std::aligned_alloc(256, (size + 255) / 256 * 256);
  if (p == nullptr) return fail(cudaErrorMemoryAllocation);
  std::memset(p, 0xCD, size);  // not zeroed on a GPU either
  s.blocks[reinterpret_cast<std::uintptr_t>(p)] = size;
  s.in_use += size;
  *ptr = p;
  return cudaSuccess;
}

}  // namespace

cudaError_t CUDARTAPI cudaMalloc(void** ptr, size_t size) {
  State& s = S();
  Lock l(s.mu);
  if (ptr == nullptr) return fail(cudaErrorInvalidValue);
  FAKE_CUDA_GATE(s);
  return device_block(s, ptr, size);
}

// Usable at once by any stream here (CUDA: in stream order; the fake does not delay it).
cudaError_t CUDARTAPI cudaMallocAsync(void** ptr, size_t size, cudaStream_t stream) {
  State& s = S();
  Lock l(s.mu);
  if (ptr == nullptr) return fail(cudaErrorInvalidValue);
  FAKE_CUDA_GATE(s);
  std::shared_ptr<Queue> q;
  if (cudaError_t e = queue_of(s, stream, &q); e != cudaSuccess) return fail(e);
  return device_block(s, ptr, size);
}

// Freed in stream order: when the stream reaches this point.
cudaError_t CUDARTAPI cudaFreeAsync(void* ptr, cudaStream_t stream) {
  State& s = S();
  Lock l(s.mu);
  if (ptr == nullptr) return cudaSuccess;
  FAKE_CUDA_GATE(s);
  std::shared_ptr<Queue> q;
  if (cudaError_t e = queue_of(s, stream, &q); e != cudaSuccess) return fail(e);
  const auto p = reinterpret_cast<std::uintptr_t>(ptr);
  if (s.blocks.count(p) == 0 || s.freeing.count(p) != 0) return fail(cudaErrorInvalidValue);
  s.freeing.insert(p);
  enqueue(s, *q, Op{[&s, p] {
                      s.in_use -= s.blocks[p];
                      s.blocks.erase(p);
                      s.freeing.erase(p);
                      std::free(reinterpret_cast<void*>(p));
                      return cudaSuccess;
                    },
                    nullptr, 0, 0});
  return cudaSuccess;
}

// cudaFree(0) creates the context; cudaFree(p) synchronizes the device first, as in CUDA.
cudaError_t CUDARTAPI cudaFree(void* ptr) {
  State& s = S();
  Lock l(s.mu);
  if (s.devices == 0) return fail(cudaErrorNoDevice);
  FAKE_CUDA_GATE(s);
  if (ptr == nullptr) return cudaSuccess;
  const auto p = reinterpret_cast<std::uintptr_t>(ptr);
  if (s.blocks.count(p) == 0 || s.freeing.count(p) != 0) return fail(cudaErrorInvalidValue);
  if (cudaError_t e = drain(s); e != cudaSuccess) return fail(e);
  if (s.blocks.count(p) == 0 || s.freeing.count(p) != 0) {
    return fail(cudaErrorInvalidValue);  // freed by another thread while the drain waited
  }
  s.in_use -= s.blocks[p];
  s.blocks.erase(p);
  std::free(ptr);
  return cudaSuccess;
}

cudaError_t CUDARTAPI cudaHostAlloc(void** ptr, size_t size, unsigned int flags) {
  State& s = S();
  Lock l(s.mu);
  constexpr unsigned kKnown = cudaHostAllocPortable | cudaHostAllocMapped |
                              cudaHostAllocWriteCombined;
  if (ptr == nullptr || size == 0 || (flags & ~kKnown) != 0) return fail(cudaErrorInvalidValue);
  FAKE_CUDA_GATE(s);
  void* p = std::aligned_alloc(kPage, (size + kPage - 1) / kPage * kPage);
  if (p == nullptr) return fail(cudaErrorMemoryAllocation);
  s.pinned[reinterpret_cast<std::uintptr_t>(p)] = size;
  *ptr = p;
  return cudaSuccess;
}

// Synchronizes the device first (as CUDA does in practice): no queued copy may still use it.
cudaError_t CUDARTAPI cudaFreeHost(void* ptr) {
  State& s = S();
  Lock l(s.mu);
  if (ptr == nullptr) return cudaSuccess;
  if (s.pinned.erase(reinterpret_cast<std::uintptr_t>(ptr)) == 0) {
    return fail(cudaErrorInvalidValue);
  }
  drain(s);
  std::free(ptr);
  return cudaSuccess;
}

cudaError_t CUDARTAPI cudaHostRegister(void* ptr, size_t size, unsigned int flags) {
  State& s = S();
  Lock l(s.mu);
  if (ptr == nullptr || size == 0 || flags > 0xf) return fail(cudaErrorInvalidValue);
  FAKE_CUDA_GATE(s);
  const auto p = reinterpret_cast<std::uintptr_t>(ptr);
  for (const auto& [start, n] : s.registered) {
    if (p < start + n && start < p + size) {
      return fail(cudaErrorHostMemoryAlreadyRegistered);
    }
  }
  s.registered[p] = size;
  return cudaSuccess;
}

cudaError_t CUDARTAPI cudaHostUnregister(void* ptr) {
  State& s = S();
  Lock l(s.mu);
  if (ptr == nullptr) return fail(cudaErrorInvalidValue);
  if (s.registered.erase(reinterpret_cast<std::uintptr_t>(ptr)) == 0) {
    return fail(cudaErrorHostMemoryNotRegistered);
  }
  drain(s);  // no queued copy may still use it as pinned memory
  return cudaSuccess;
}

// ---- driver API (reached through cudaGetDriverEntryPointByVersion) -----------------------------

namespace {

CUresult refuse(const char* call, const char* why, std::uint64_t p, std::uint64_t n,
                CUresult r = CUDA_ERROR_INVALID_VALUE) {
  say("%s(0x%llx, %llu bytes) refused: %s", call, static_cast<unsigned long long>(p),
      static_cast<unsigned long long>(n), why);
  return r;
}

}  // namespace

CUresult CUDAAPI cuMemAddressReserve(CUdeviceptr* ptr, size_t size, size_t alignment,
                                     CUdeviceptr addr, unsigned long long flags) {
  State& s = S();
  Lock l(s.mu);
  if (ptr == nullptr || size == 0 || size % kPage != 0 || addr % kPage != 0 || flags != 0 ||
      (alignment & (alignment - 1)) != 0) {
    return refuse("cuMemAddressReserve", "bad arguments", addr, size);
  }
  void* got = MAP_FAILED;
  constexpr int kFlags = MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE;
  if (addr != 0) {
    got = ::mmap(reinterpret_cast<void*>(addr), size, PROT_NONE, kFlags | MAP_FIXED_NOREPLACE, -1,
                 0);
    if (got != MAP_FAILED && got != reinterpret_cast<void*>(addr)) {  // an old kernel's hint
      ::munmap(got, size);
      got = MAP_FAILED;
    }
  }
  if (got == MAP_FAILED) {  // the hint is taken: somewhere else, as CUDA may do
    const std::uint64_t align = std::max<std::uint64_t>(alignment, kGranule);
    void* raw = ::mmap(nullptr, size + align, PROT_NONE, kFlags, -1, 0);
    if (raw == MAP_FAILED) return CUDA_ERROR_OUT_OF_MEMORY;
    const auto r = reinterpret_cast<std::uintptr_t>(raw);
    const std::uint64_t a = (r + align - 1) / align * align;
    if (a > r) ::munmap(raw, a - r);
    if (r + size + align > a + size) {
      ::munmap(reinterpret_cast<void*>(a + size), r + size + align - (a + size));
    }
    got = reinterpret_cast<void*>(a);
  }
  s.reservations[reinterpret_cast<std::uintptr_t>(got)] = size;
  *ptr = reinterpret_cast<std::uintptr_t>(got);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemAddressFree(CUdeviceptr ptr, size_t size) {
  State& s = S();
  Lock l(s.mu);
  auto it = s.reservations.find(ptr);
  if (it == s.reservations.end() || it->second != size) {
    return refuse("cuMemAddressFree", "not a reservation of that size", ptr, size);
  }
  if (auto m = s.mappings.lower_bound(ptr); m != s.mappings.end() && m->first < ptr + size) {
    return refuse("cuMemAddressFree", "memory is still mapped in the range", ptr, size);
  }
  ::munmap(reinterpret_cast<void*>(ptr), size);
  s.reservations.erase(it);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemCreate(CUmemGenericAllocationHandle* handle, size_t size,
                             const CUmemAllocationProp* prop, unsigned long long flags) {
  State& s = S();
  Lock l(s.mu);
  if (handle == nullptr || prop == nullptr || size == 0 || size % kGranule != 0 || flags != 0 ||
      prop->type != CU_MEM_ALLOCATION_TYPE_PINNED ||
      prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE) {
    return refuse("cuMemCreate", "bad arguments (size not a multiple of 2 MiB?)", 0, size);
  }
  if (prop->location.id < 0 || prop->location.id >= s.devices) return CUDA_ERROR_INVALID_DEVICE;
  if (s.in_use + size > s.capacity) return CUDA_ERROR_OUT_OF_MEMORY;
  const int fd = ::memfd_create("fake_cuda_segment", MFD_CLOEXEC);
  if (fd < 0 || ::ftruncate(fd, static_cast<off_t>(size)) != 0) {
    say("cuMemCreate: memfd: %s", std::strerror(errno));
    if (fd >= 0) ::close(fd);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  // Fresh device memory holds whatever was there: never zeros that code could rely on.
  static const std::vector<unsigned char> poison(1 << 20, 0xCD);
  for (std::uint64_t off = 0; off < size; off += poison.size()) {
    if (::pwrite(fd, poison.data(), poison.size(), static_cast<off_t>(off)) < 0) break;
  }
  const std::uint64_t h = s.next_handle++;
  s.handles[h] = Handle{fd, size, 0, false};
  s.in_use += size;
  *handle = h;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemRelease(CUmemGenericAllocationHandle handle) {
  State& s = S();
  Lock l(s.mu);
  auto it = s.handles.find(handle);
  if (it == s.handles.end() || it->second.released) {
    return refuse("cuMemRelease", "no such handle (released twice?)", handle, 0);
  }
  it->second.released = true;
  drop_handle_if_done(s, handle);  // freed now, or at its last unmap
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemMap(CUdeviceptr ptr, size_t size, size_t offset,
                          CUmemGenericAllocationHandle handle, unsigned long long flags) {
  State& s = S();
  Lock l(s.mu);
  if (flags != 0 || size == 0 || ptr % kGranule != 0 || size % kGranule != 0 ||
      offset % kGranule != 0) {
    return refuse("cuMemMap", "not aligned to the 2 MiB granularity", ptr, size);
  }
  auto h = s.handles.find(handle);
  if (h == s.handles.end() || h->second.released || offset + size > h->second.size) {
    return refuse("cuMemMap", "no such handle, or the range exceeds it", ptr, size);
  }
  auto r = s.reservations.upper_bound(ptr);
  if (r == s.reservations.begin() || (--r, ptr + size > r->first + r->second)) {
    return refuse("cuMemMap", "not within a reserved range", ptr, size);
  }
  if (auto m = s.mappings.lower_bound(ptr); m != s.mappings.end() && m->first < ptr + size) {
    return refuse("cuMemMap", "already mapped", ptr, size);
  }
  if (auto m = s.mappings.upper_bound(ptr); m != s.mappings.begin()) {
    --m;
    if (m->first + m->second.size > ptr) return refuse("cuMemMap", "already mapped", ptr, size);
  }
  void* got = ::mmap(reinterpret_cast<void*>(ptr), size, PROT_NONE, MAP_SHARED | MAP_FIXED,
                     h->second.fd, static_cast<off_t>(offset));
  if (got != reinterpret_cast<void*>(ptr)) {
    say("cuMemMap: mmap: %s", std::strerror(errno));
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  s.mappings[ptr] = Mapping{size, handle, PROT_NONE};
  ++h->second.maps;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemSetAccess(CUdeviceptr ptr, size_t size, const CUmemAccessDesc* desc,
                                size_t count) {
  State& s = S();
  Lock l(s.mu);
  if (desc == nullptr || count == 0) return refuse("cuMemSetAccess", "no descriptor", ptr, size);
  int prot = -1;
  for (size_t i = 0; i < count; ++i) {
    if (desc[i].location.type != CU_MEM_LOCATION_TYPE_DEVICE) {
      return refuse("cuMemSetAccess", "only device locations are emulated", ptr, size);
    }
    if (desc[i].location.id < 0 || desc[i].location.id >= s.devices) {
      return CUDA_ERROR_INVALID_DEVICE;
    }
    switch (desc[i].flags) {
      case CU_MEM_ACCESS_FLAGS_PROT_NONE: prot = PROT_NONE; break;
      case CU_MEM_ACCESS_FLAGS_PROT_READ: prot = PROT_READ; break;
      case CU_MEM_ACCESS_FLAGS_PROT_READWRITE: prot = PROT_READ | PROT_WRITE; break;
      default: return refuse("cuMemSetAccess", "unknown access flags", ptr, size);
    }
  }
  const std::vector<std::uint64_t> ms = whole_mappings(s, ptr, size);
  if (ms.empty()) {
    return refuse("cuMemSetAccess", "not a fully mapped range of whole mappings", ptr, size);
  }
  for (std::uint64_t m : ms) {
    Mapping& mp = s.mappings[m];
    ::mprotect(reinterpret_cast<void*>(m), mp.size, prot);
    mp.prot = prot;
  }
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemUnmap(CUdeviceptr ptr, size_t size) {
  State& s = S();
  Lock l(s.mu);
  const std::vector<std::uint64_t> ms = whole_mappings(s, ptr, size);
  if (ms.empty()) {
    return refuse("cuMemUnmap", "not whole mappings (CUDA unmaps no sub-range)", ptr, size);
  }
  for (std::uint64_t m : ms) {
    const Mapping mp = s.mappings[m];
    // Back to a bare reservation: any access from now on faults.
    ::mmap(reinterpret_cast<void*>(m), mp.size, PROT_NONE,
           MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
    s.mappings.erase(m);
    --s.handles[mp.handle].maps;
    drop_handle_if_done(s, mp.handle);
  }
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemGetAllocationGranularity(size_t* granularity,
                                               const CUmemAllocationProp* prop,
                                               CUmemAllocationGranularity_flags option) {
  if (granularity == nullptr || prop == nullptr ||
      (option != CU_MEM_ALLOC_GRANULARITY_MINIMUM &&
       option != CU_MEM_ALLOC_GRANULARITY_RECOMMENDED)) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  *granularity = kGranule;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceGetAttribute(int* pi, CUdevice_attribute attrib, CUdevice dev) {
  State& s = S();
  Lock l(s.mu);
  if (pi == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (dev < 0 || dev >= s.devices) return CUDA_ERROR_INVALID_DEVICE;
  switch (attrib) {
    case CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED: *pi = 1; break;
    case CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING: *pi = 1; break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: *pi = 9; break;  // an H100
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: *pi = 0; break;
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: *pi = 132; break;
    default: *pi = 0; break;
  }
  return CUDA_SUCCESS;
}

// Each process's fake device is a device of its own (its memory is the process's), so its UUID
// names the process; FAKE_CUDA_UUID=<text> gives every process that sets the same text one UUID
// (as proxies sharing one GPU have).
CUresult CUDAAPI cuDeviceGetUuid(CUuuid* uuid, CUdevice dev) {
  State& s = S();
  Lock l(s.mu);
  if (uuid == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (dev < 0 || dev >= s.devices) return CUDA_ERROR_INVALID_DEVICE;
  const char* same = std::getenv("FAKE_CUDA_UUID");
  std::uint64_t a = 0xcbf29ce484222325ull, b = static_cast<std::uint64_t>(::getpid());
  if (same != nullptr) {
    for (const char* c = same; *c != '\0'; ++c) {
      a = (a ^ static_cast<unsigned char>(*c)) * 0x100000001b3ull;
    }
    b = 0;
  }
  b = (b << 8) | static_cast<std::uint64_t>(dev);
  std::memcpy(uuid->bytes, &a, 8);
  std::memcpy(uuid->bytes + 8, &b, 8);
  return CUDA_SUCCESS;
}

#define FAKE_CU_ERRORS(X)                                  \
  X(CUDA_SUCCESS, "no error")                              \
  X(CUDA_ERROR_INVALID_VALUE, "invalid argument")          \
  X(CUDA_ERROR_OUT_OF_MEMORY, "out of memory")             \
  X(CUDA_ERROR_NOT_INITIALIZED, "initialization error")    \
  X(CUDA_ERROR_INVALID_DEVICE, "invalid device ordinal")   \
  X(CUDA_ERROR_INVALID_HANDLE, "invalid resource handle")  \
  X(CUDA_ERROR_NOT_PERMITTED, "operation not permitted")   \
  X(CUDA_ERROR_NOT_SUPPORTED, "operation not supported")   \
  X(CUDA_ERROR_ILLEGAL_ADDRESS, "an illegal memory access was encountered")

CUresult CUDAAPI cuGetErrorName(CUresult error, const char** str) {
  if (str == nullptr) return CUDA_ERROR_INVALID_VALUE;
  switch (error) {
#define FAKE_CU_NAME(code, text) \
  case code:                     \
    *str = #code;                \
    return CUDA_SUCCESS;
    FAKE_CU_ERRORS(FAKE_CU_NAME)
#undef FAKE_CU_NAME
    default:
      *str = nullptr;
      return CUDA_ERROR_INVALID_VALUE;
  }
}

CUresult CUDAAPI cuGetErrorString(CUresult error, const char** str) {
  if (str == nullptr) return CUDA_ERROR_INVALID_VALUE;
  switch (error) {
#define FAKE_CU_TEXT(code, text) \
  case code:                     \
    *str = text;                 \
    return CUDA_SUCCESS;
    FAKE_CU_ERRORS(FAKE_CU_TEXT)
#undef FAKE_CU_TEXT
    default:
      *str = nullptr;
      return CUDA_ERROR_INVALID_VALUE;
  }
}

cudaError_t CUDARTAPI cudaGetDriverEntryPointByVersion(
    const char* symbol, void** funcPtr, unsigned int cudaVersion, unsigned long long flags,
    enum cudaDriverEntryPointQueryResult* driverStatus) {
  struct Entry {
    const char* name;
    void* fn;
    unsigned since;  // the driver API version that introduced it
  };
  static const Entry kTable[] = {
      {"cuMemAddressReserve", reinterpret_cast<void*>(&cuMemAddressReserve), 10020},
      {"cuMemAddressFree", reinterpret_cast<void*>(&cuMemAddressFree), 10020},
      {"cuMemCreate", reinterpret_cast<void*>(&cuMemCreate), 10020},
      {"cuMemRelease", reinterpret_cast<void*>(&cuMemRelease), 10020},
      {"cuMemMap", reinterpret_cast<void*>(&cuMemMap), 10020},
      {"cuMemUnmap", reinterpret_cast<void*>(&cuMemUnmap), 10020},
      {"cuMemSetAccess", reinterpret_cast<void*>(&cuMemSetAccess), 10020},
      {"cuMemGetAllocationGranularity", reinterpret_cast<void*>(&cuMemGetAllocationGranularity),
       10020},
      {"cuDeviceGetAttribute", reinterpret_cast<void*>(&cuDeviceGetAttribute), 2000},
      {"cuGetErrorName", reinterpret_cast<void*>(&cuGetErrorName), 6000},
      {"cuDeviceGetUuid", reinterpret_cast<void*>(&cuDeviceGetUuid), 11040},
      {"cuGetErrorString", reinterpret_cast<void*>(&cuGetErrorString), 6000},
  };
  if (symbol == nullptr || funcPtr == nullptr ||
      (flags & ~static_cast<unsigned long long>(cudaEnableLegacyStream |
                                                cudaEnablePerThreadDefaultStream)) != 0) {
    return fail(cudaErrorInvalidValue);
  }
  *funcPtr = nullptr;
  cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
  for (const Entry& e : kTable) {
    if (std::strcmp(e.name, symbol) != 0) continue;
    if (cudaVersion < e.since) {
      q = cudaDriverEntryPointVersionNotSufficent;
    } else {
      q = cudaDriverEntryPointSuccess;
      *funcPtr = e.fn;
    }
    break;
  }
  if (driverStatus != nullptr) *driverStatus = q;
  return cudaSuccess;
}
