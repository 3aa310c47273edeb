// The device seam of orrery-proxy: everything the proxy does to a device goes through this
// interface, so a CUDA backend (cuMemAddressReserve/cuMemMap for the fixed addresses, cudaMemcpy,
// a kernel table of its own) can be added without touching the proxy's protocol, the worker
// library, the node runtime or the core.
//
// Addresses are *device* addresses chosen by the proxy (a deterministic function of the job and
// the rank's allocation sequence, see address_space.h); the backend maps memory exactly there or
// fails. The proxy validates every address and length against the calling worker's own
// allocations before it reaches a backend: a backend may assume its arguments are in range.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "base/result.h"
#include "runtime/proxy/device_collective.h"

namespace orrery::runtime {

struct MemInfo {
  std::uint64_t total_bytes = 0;  // the device's memory (host backend: the emulated size)
  std::uint64_t used_bytes = 0;   // mapped now (resident allocations of every job)
};

// What splicing moved (CUDA: park and unpark copy only the chunks that differ, splice dedup).
struct SpliceCounters {
  std::uint64_t parked_bytes = 0;    // bytes parked and brought back, as asked
  std::uint64_t copied_bytes = 0;    // of which actually copied between device and host
};

struct BackendOptions {
  // CUDA: park and unpark move only the chunks whose content differs from what is already
  // parked or on the device (content hashes, cuda/chunk_hash.h). Off: every byte is copied.
  bool splice_dedup = true;
};

// Device memory parked in host memory while its owner is swapped out (splicing). Opaque to the
// proxy: a backend may copy into a buffer or move pages (the host backend moves them).
class ParkedMemory {
 public:
  virtual ~ParkedMemory() = default;
  virtual std::uint64_t size() const = 0;
  // Copies the parked bytes into dst (size() bytes), once any copy still filling them is done.
  virtual Status read(void* dst) const = 0;
};

class DeviceBackend {
 public:
  virtual ~DeviceBackend() = default;
  virtual std::string name() const = 0;
  virtual MemInfo mem_info() const = 0;

  // Maps `bytes` of device memory at exactly `addr` (page aligned), zero-filled. Fails when the
  // range is taken or the device is full.
  virtual Status allocate(std::uint64_t addr, std::uint64_t bytes) = 0;
  virtual Status free(std::uint64_t addr, std::uint64_t bytes) = 0;

  // Copies are ordered after the bound worker's earlier launches and complete before they return
  // (the host side may be reused at once); copy_d2d is ordered like a launch.
  virtual Status copy_h2d(std::uint64_t dst, const void* src, std::uint64_t n) = 0;
  virtual Status copy_d2h(void* dst, std::uint64_t src, std::uint64_t n) = 0;
  virtual Status copy_d2d(std::uint64_t dst, std::uint64_t src, std::uint64_t n) = 0;

  // Runs a kernel of the registry (kernels.h) by name; pointer arguments are device addresses.
  virtual Status launch(std::string_view kernel, const std::uint64_t* args, int nargs) = 0;
  // Waits for every launched kernel and copy of the bound worker (the host backend runs them
  // inline); an asynchronous kernel failure is reported here.
  virtual Status synchronize() = 0;

  // Checkpoint and restore, streamed: stream_out hands the n bytes at addr to `sink` in chunks,
  // in address order; stream_in fills them from `source`. The CUDA backend stages through pinned
  // buffers and overlaps the device copy of chunk i+1 with sink/source of chunk i; the host
  // backend hands out its own memory. A chunk pointer is valid only during the call. An error
  // from the sink or source stops the stream and is returned.
  using ChunkSink = std::function<Status(const void* data, std::uint64_t n)>;
  using ChunkSource = std::function<Status(void* data, std::uint64_t n)>;
  virtual Status stream_out(std::uint64_t addr, std::uint64_t n, const ChunkSink& sink) = 0;
  virtual Status stream_in(std::uint64_t addr, std::uint64_t n, const ChunkSource& source) = 0;
  // A host-readable view of device memory when the device memory *is* host memory (host
  // backend), else nullptr: lets the allreduce read a contribution without a staging copy.
  virtual const void* host_view(std::uint64_t addr, std::uint64_t n) const = 0;

  // The worker whose requests follow (CUDA: each worker has its own stream, so its launches and
  // copies stay in order among themselves). release_worker: that worker is gone.
  virtual void bind_worker(int job, int rank) { (void)job, (void)rank; }
  virtual void release_worker(int job, int rank) { (void)job, (void)rank; }
  // Host memory the backend copies from and to often (the proxy's shared-memory segment): the
  // CUDA backend page-locks it so those copies run at pinned speed. Best effort.
  virtual void pin_host_memory(void* p, std::uint64_t n) { (void)p, (void)n; }

  // Non-empty once the device is unusable (CUDA: a kernel fault poisons the context, and every
  // later call fails): why. The proxy then exits, so that its node replaces it with a fresh one.
  virtual std::string broken() const { return {}; }
  virtual SpliceCounters splice_counters() const { return {}; }

  // The job's allreduce on the device (device_collective.h, collective_negotiation.h). The host
  // backend has none: its proxies sum on the host. collective_offer: what this backend offers
  // the job's other proxies; new_collective_id: a fresh communicator bootstrap id (asked of the
  // proxy holding rank 0 only); open_device_collective: the allreduce as negotiated (devices ==
  // 1: the proxy's own ranks only), or an error saying why not, and the job sums on the host.
  virtual CollectiveOffer collective_offer() { return {}; }
  virtual Result<CollectiveId> new_collective_id() {
    return Status::Error(name() + " backend: no allreduce across devices");
  }
  virtual Result<std::unique_ptr<DeviceCollective>> open_device_collective(
      const DeviceCollectiveSetup& setup) {
    (void)setup;
    return Status::Error(name() + " backend: sums on the host");
  }

  // Splicing: moves an allocation's contents out of device memory (unmapping `addr`) into host
  // memory, and back to the same address later.
  virtual Result<std::unique_ptr<ParkedMemory>> park(std::uint64_t addr, std::uint64_t bytes) = 0;
  virtual Status unpark(std::uint64_t addr, std::unique_ptr<ParkedMemory> parked) = 0;
};

// The backend named `name` ("host"; "cuda" where built) over `device` with `mem_bytes` of memory
// (CUDA: at most the device's own; `device` is the CUDA ordinal).
Result<std::unique_ptr<DeviceBackend>> make_backend(std::string_view name, int device,
                                                    std::uint64_t mem_bytes,
                                                    const BackendOptions& options = {});

}  // namespace orrery::runtime
