// The test-side API of the fake CUDA runtime and driver (fake_cuda.cc, which says what the fake
// emulates and what it cannot): enqueue host work on a fake stream (the fake kernels do), pick the
// scheduler's seed, cap device memory, read counters, and reset a context a test broke on purpose.
// Everything here is C++ (the CUDA entry points themselves are the extern "C" ones of the real
// headers).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <functional>

// Appends `op` to `stream`'s queue (0 is the legacy stream's own queue). It runs only when a
// synchronization forces it, in an order chosen by the seeded scheduler among what CUDA allows.
// Returns, and records as the last error, cudaErrorInvalidResourceHandle for an unknown stream or
// the context's sticky error.
cudaError_t fake_cuda_enqueue(cudaStream_t stream, std::function<void()> op);

// The same for work that may fault as a kernel on a GPU does: a non-success return poisons the
// context (every later call fails with it, broken() in the backend), and the op's stream and every
// other queued op are dropped, as a GPU does after a fault.
cudaError_t fake_cuda_enqueue_checked(cudaStream_t stream, std::function<cudaError_t()> op);

// The same for work that waits on something outside this process's device, as an NCCL kernel
// waits for its peers' data (fake_nccl.cc): `op` runs only once `ready()` holds, and after the
// ops before it on its stream, as any op. The scheduler polls ready() (under its lock: it must be
// cheap, must not block and must not call the fake's functions) whenever the op heads its queue;
// once true it is not asked again. A synchronization that must wait for such an op sleeps
// briefly with the fake's lock released (so that this process's other threads go on) and polls
// again, running any other op that may run meanwhile; a query only steps once and reports not
// ready. `op` itself fails as fake_cuda_enqueue_checked's does (a non-success poisons the
// context). ready() should become true by itself eventually (a timeout of its own): nothing
// else ends the wait.
cudaError_t fake_cuda_enqueue_when(cudaStream_t stream, std::function<bool()> ready,
                                   std::function<cudaError_t()> op);

// True when [p, p + n) is device memory a kernel may touch now: mapped with read-write access
// (cuMemMap + cuMemSetAccess) or from cudaMalloc(Async) and not freed. Callable from inside an
// op.
bool fake_cuda_device_accessible(const void* p, std::size_t n);

// Reseeds the scheduler (the environment's FAKE_CUDA_SEED, 1 if unset, seeds it at start): the
// same seed and the same calls give the same interleaving.
void fake_cuda_set_seed(std::uint64_t seed);
std::uint64_t fake_cuda_seed();

// Percent of enqueues after which the fake runs up to 3 queued ops at once (FAKE_CUDA_EAGER, 25
// if unset); 0: ops run only when a synchronization forces them.
void fake_cuda_set_eager(unsigned percent);
unsigned fake_cuda_eager();

// Device memory the fake has (FAKE_CUDA_MEM_MIB, 1024 MiB if unset): cuMemCreate and
// cudaMalloc(Async) fail past it, cudaMemGetInfo reports it.
void fake_cuda_set_capacity(std::uint64_t bytes);
std::uint64_t fake_cuda_capacity();

struct FakeCudaStats {
  std::uint64_t ops_run = 0;             // asynchronous ops executed
  std::uint64_t ops_out_of_order = 0;    // run while an op enqueued earlier elsewhere was pending
  std::uint64_t forced = 0;              // synchronizations that had queued work to run
  std::uint64_t overlapping_copies = 0;  // copies between overlapping ranges (undefined: poisoned)
  std::uint64_t pending_ops = 0;         // queued now, on every stream
  std::uint64_t device_bytes_in_use = 0; // physical segments not freed + cudaMalloc(Async)
  std::uint64_t reservations = 0;        // cuMemAddressReserve ranges not freed
  std::uint64_t mappings = 0;            // cuMemMap ranges not unmapped
  std::uint64_t handles = 0;             // cuMemCreate handles not yet freed
  std::uint64_t streams = 0;             // streams created and not destroyed
  std::uint64_t events = 0;              // events created and not destroyed
  std::uint64_t pinned_buffers = 0;      // cudaHostAlloc buffers not freed
  std::uint64_t registered_ranges = 0;   // cudaHostRegister ranges not unregistered
};
FakeCudaStats fake_cuda_stats();

// cudaDeviceReset for tests that fault the context on purpose: drops every queued op and clears
// the sticky error. Streams, events and memory stay as they are.
void fake_cuda_reset_context();
