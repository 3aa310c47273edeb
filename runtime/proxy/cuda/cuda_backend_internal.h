// The cuda backend's class (cuda_backend.h says what it does), shared by the files that define it:
// cuda_backend.cc (creation, streams, copies, launches), cuda_memory.cc (job windows and physical
// segments), cuda_splice.cc (park and unpark), cuda_checkpoint_stream.cc (checkpoint streaming).
// Not for anyone else: the rest of orrery reaches it through make_cuda_backend().
#pragma once

#include <cuda.h>
#include <cuda_runtime_api.h>

#include <array>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "runtime/proxy/address_space.h"
#include "runtime/proxy/backend.h"
#include "runtime/proxy/cuda/chunk_hash.h"
#include "runtime/proxy/cuda/cuda_collective.h"
#include "runtime/proxy/cuda/cuda_driver.h"
#include "runtime/proxy/cuda/pinned_pool.h"
#include "runtime/proxy/cuda/segment_map.h"
#include "runtime/proxy/cuda/splice_chunks.h"

namespace orrery::runtime::cuda {

// Checkpoint staging: kStaging pinned buffers of kChunk bytes. Three keep the copy engine busy
// while the sink consumes one buffer and the next is filling; 8 MiB chunks are long enough that a
// copy's fixed cost (a few us) is noise at PCIe/NVLink-C2C rates.
constexpr std::uint64_t kChunk = 8u << 20;
constexpr int kStaging = 3;

inline std::string hex(std::uint64_t v) {
  char b[32];
  std::snprintf(b, sizeof b, "0x%llx", static_cast<unsigned long long>(v));
  return b;
}
inline void* dp(std::uint64_t a) { return reinterpret_cast<void*>(static_cast<std::uintptr_t>(a)); }
inline std::uint64_t window_of(std::uint64_t addr) {
  return kVaBase + (addr - kVaBase) / kWindowBytes * kWindowBytes;
}

// Errors after which the context is unusable: every later call fails the same way.
inline bool sticky(cudaError_t e) {
  switch (e) {
    case cudaErrorIllegalAddress:
    case cudaErrorMisalignedAddress:
    case cudaErrorLaunchFailure:
    case cudaErrorIllegalInstruction:
    case cudaErrorInvalidAddressSpace:
    case cudaErrorInvalidPc:
    case cudaErrorHardwareStackError:
    case cudaErrorAssert:
    case cudaErrorECCUncorrectable:
    case cudaErrorLaunchTimeout:
      return true;
    default:
      return false;
  }
}

// A parked range: its chunks' hashes and host bytes, some of them shared with other ranks'
// parked ranges (splice_chunks.h). Registered in the backend's index while it lives, so that
// ranks parked later can share its chunks.
class CudaParked final : public ParkedMemory {
 public:
  CudaParked(cuda::ParkedIndex* index, cudaStream_t copy, cuda::ParkedRange r)
      : index_(index), copy_(copy), r_(std::move(r)) {
    index_->add(&r_);
  }
  ~CudaParked() override { index_->remove(&r_); }
  std::uint64_t size() const override { return r_.size; }
  Status read(void* dst) const override {
    // Every copy into parked bytes runs on the copy stream.
    const Status synced =
        cuda::runtime_status(cudaStreamSynchronize(copy_), "cudaStreamSynchronize (parked bytes)");
    if (!synced) return synced;
    auto* out = static_cast<unsigned char*>(dst);
    for (std::uint64_t c = 0; c < r_.chunks.size(); ++c) {
      std::memcpy(out + c * cuda::kHashChunk, r_.chunks[c].bytes, cuda::chunk_bytes(r_.size, c));
    }
    return Status::Ok();
  }
  const cuda::ParkedRange& range() const { return r_; }

 private:
  cuda::ParkedIndex* index_;
  cudaStream_t copy_;
  cuda::ParkedRange r_;
};

class CudaBackend final : public DeviceBackend {
 public:
  static Result<std::unique_ptr<CudaBackend>> create(int device, std::uint64_t mem_bytes,
                                                     const BackendOptions& options);
  ~CudaBackend() override;

  std::string name() const override { return "cuda"; }
  MemInfo mem_info() const override { return {total_, used_}; }

  Status allocate(std::uint64_t addr, std::uint64_t bytes) override;
  Status free(std::uint64_t addr, std::uint64_t bytes) override;
  Status copy_h2d(std::uint64_t dst, const void* src, std::uint64_t n) override;
  Status copy_d2h(void* dst, std::uint64_t src, std::uint64_t n) override;
  Status copy_d2d(std::uint64_t dst, std::uint64_t src, std::uint64_t n) override;
  Status launch(std::string_view kernel, const std::uint64_t* args, int nargs) override;
  Status synchronize() override;
  Status stream_out(std::uint64_t addr, std::uint64_t n, const ChunkSink& sink) override;
  Status stream_in(std::uint64_t addr, std::uint64_t n, const ChunkSource& source) override;
  const void* host_view(std::uint64_t, std::uint64_t) const override { return nullptr; }
  void bind_worker(int job, int rank) override;
  void release_worker(int job, int rank) override;
  void pin_host_memory(void* p, std::uint64_t n) override;
  Result<std::unique_ptr<ParkedMemory>> park(std::uint64_t addr, std::uint64_t bytes) override;
  Status unpark(std::uint64_t addr, std::unique_ptr<ParkedMemory> parked) override;
  std::string broken() const override { return broken_; }
  SpliceCounters splice_counters() const override { return splice_; }
  CollectiveOffer collective_offer() override;
  Result<CollectiveId> new_collective_id() override { return cuda::new_nccl_id(); }
  Result<std::unique_ptr<DeviceCollective>> open_device_collective(
      const DeviceCollectiveSetup& setup) override;

 private:
  struct WorkerStream {
    cudaStream_t s = nullptr;
    std::uint64_t seen_copy_gen = 0;  // the copy-stream generation this stream has waited for
  };

  CudaBackend(int device, Driver d, std::uint64_t granule)
      : device_(device), drv_(d), segs_(granule) {}
  // A runtime call's status; clears CUDA's last error, and remembers an error that leaves the
  // context unusable (broken()).
  Status rt(cudaError_t e, const char* call);
  // Tells every worker stream (at its next use) to wait for what the copy stream has queued.
  Status publish_copies();
  // Reserved windows with no segment left go back (free() and teardown only: an allocation in
  // progress may have reserved its window and mapped nothing yet).
  void release_empty_windows();
  // The content hashes of the n bytes at addr (chunk_hash.h), computed on the device after the
  // bound worker's queued work; waits for them.
  Result<std::vector<cuda::Hash128>> device_hashes(std::uint64_t addr, std::uint64_t n);
  // The bound worker's stream, made to wait first for copies that brought its memory back.
  cudaStream_t stream();
  // Orders the copy stream after everything queued on the bound worker's stream.
  Status copy_after_worker();
  Status reserve_window(std::uint64_t addr);
  // Backs [addr, addr + n) with physical segments (creating the missing ones) and references them.
  Status map_range(std::uint64_t addr, std::uint64_t n);
  Result<CUmemGenericAllocationHandle> create_segment(std::uint64_t size, std::uint64_t addr,
                                                      std::uint64_t n);
  // Unmaps and releases segments (waits for the device first: a parked copy may read them).
  void release(const std::vector<Range>& segments);
  Status ensure_staging();

  int device_;
  Driver drv_;
  std::uint64_t total_ = 0, used_ = 0;
  CUmemAllocationProp prop_{};
  CUmemAccessDesc access_{};
  SegmentMap segs_;
  std::map<std::uint64_t, CUmemGenericAllocationHandle> handles_;  // by segment start
  std::set<std::uint64_t> windows_;                                 // reserved window bases
  std::map<std::pair<int, int>, WorkerStream> streams_;            // by (job, rank)
  WorkerStream own_;              // for calls with no worker bound (tests, benchmarks)
  WorkerStream* bound_ = &own_;
  cudaStream_t copy_ = nullptr;   // parking, unparking, checkpoint streaming
  cudaEvent_t copy_done_ = nullptr, order_ = nullptr;
  std::uint64_t copy_gen_ = 0;
  std::array<void*, kStaging> staging_{};
  std::array<cudaEvent_t, kStaging> staging_ev_{};
  PinnedPool pool_;
  std::vector<void*> registered_;
  std::string broken_;
  // Splice dedup (BackendOptions::splice_dedup): parked ranges' chunks, what idle device memory
  // holds, and device/host buffers for the hashes.
  bool dedup_ = true;
  cuda::ParkedIndex parked_;
  cuda::DeviceContent content_;
  cuda::Hash128* hash_dev_ = nullptr;
  cuda::Hash128* hash_host_ = nullptr;
  std::uint64_t hash_cap_ = 0;
  SpliceCounters splice_;
};

}  // namespace orrery::runtime::cuda
