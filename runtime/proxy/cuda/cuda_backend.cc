#include "runtime/proxy/cuda/cuda_backend.h"

#include <cuda.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstring>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "runtime/proxy/address_space.h"
#include "runtime/proxy/cuda/cuda_collective.h"
#include "runtime/proxy/cuda/cuda_driver.h"
#include "runtime/proxy/cuda/cuda_kernels.h"
#include "runtime/proxy/cuda/pinned_pool.h"
#include "runtime/proxy/cuda/segment_map.h"
#include "runtime/proxy/cuda/splice_chunks.h"

namespace orrery::runtime {
namespace {

using cuda::Driver;
using cuda::PinnedBuffer;
using cuda::PinnedPool;
using cuda::Range;
using cuda::SegmentMap;

// Checkpoint staging: kStaging pinned buffers of kChunk bytes. Three keep the copy engine busy
// while the sink consumes one buffer and the next is filling; 8 MiB chunks are long enough that a
// copy's fixed cost (a few us) is noise at PCIe/NVLink-C2C rates.
constexpr std::uint64_t kChunk = 8u << 20;
constexpr int kStaging = 3;

std::string hex(std::uint64_t v) {
  char b[32];
  std::snprintf(b, sizeof b, "0x%llx", static_cast<unsigned long long>(v));
  return b;
}
void* dp(std::uint64_t a) { return reinterpret_cast<void*>(static_cast<std::uintptr_t>(a)); }
std::uint64_t window_of(std::uint64_t addr) {
  return kVaBase + (addr - kVaBase) / kWindowBytes * kWindowBytes;
}

// Errors after which the context is unusable: every later call fails the same way.
bool sticky(cudaError_t e) {
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

Status CudaBackend::rt(cudaError_t e, const char* call) {
  Status s = cuda::runtime_status(e, call);
  if (!s && sticky(e) && broken_.empty()) broken_ = s.reason();
  return s;
}

Result<std::unique_ptr<CudaBackend>> CudaBackend::create(int device, std::uint64_t mem_bytes,
                                                         const BackendOptions& options) {
  // No backend yet to remember a sticky error in: plain statuses.
  const auto rt = cuda::runtime_status;
  if (auto s = cuda_device_usable(device); !s) return s;
  if (auto s = rt(cudaSetDevice(device), "cudaSetDevice"); !s) return s;
  if (auto s = rt(cudaFree(nullptr), "cudaFree(0) (creating the context)"); !s) return s;
  auto d = Driver::load();
  if (!d) return d.status();
  int vmm = 0;
  if (CUresult r = d->device_get_attribute(
          &vmm, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, device);
      r != CUDA_SUCCESS || vmm == 0) {
    return Status::Error("CUDA device " + std::to_string(device) +
                         " has no virtual memory management: stable addresses need it");
  }
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = device;
  std::size_t granule = 0;
  if (CUresult r = d->mem_get_allocation_granularity(&granule, &prop,
                                                     CU_MEM_ALLOC_GRANULARITY_MINIMUM);
      r != CUDA_SUCCESS) {
    return Status::Error(d->error("cuMemGetAllocationGranularity", r));
  }
  if (granule == 0 || kWindowBytes % granule != 0) {
    return Status::Error("CUDA allocation granularity " + std::to_string(granule) +
                         " does not divide the job window");
  }
  std::unique_ptr<CudaBackend> b(new CudaBackend(device, *d, granule));
  b->dedup_ = options.splice_dedup;
  b->prop_ = prop;
  b->access_.location = prop.location;
  b->access_.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  std::size_t free_b = 0, total_b = 0;
  if (auto s = rt(cudaMemGetInfo(&free_b, &total_b), "cudaMemGetInfo"); !s) return s;
  b->total_ = std::min<std::uint64_t>(mem_bytes, total_b);
  if (auto s = rt(cudaStreamCreateWithFlags(&b->own_.s, cudaStreamNonBlocking), "cudaStreamCreate");
      !s) {
    return s;
  }
  if (auto s = rt(cudaStreamCreateWithFlags(&b->copy_, cudaStreamNonBlocking), "cudaStreamCreate");
      !s) {
    return s;
  }
  if (auto s = rt(cudaEventCreateWithFlags(&b->copy_done_, cudaEventDisableTiming),
                  "cudaEventCreate");
      !s) {
    return s;
  }
  if (auto s = rt(cudaEventCreateWithFlags(&b->order_, cudaEventDisableTiming), "cudaEventCreate");
      !s) {
    return s;
  }
  return b;
}

CudaBackend::~CudaBackend() {
  cudaDeviceSynchronize();
  for (const Range& r : segs_.all()) {
    drv_.mem_unmap(r.start, r.size);
    drv_.mem_release(handles_[r.start]);
  }
  for (std::uint64_t w : windows_) drv_.mem_address_free(w, kWindowBytes);
  for (auto& [key, w] : streams_) cudaStreamDestroy(w.s);
  if (own_.s) cudaStreamDestroy(own_.s);
  if (copy_) cudaStreamDestroy(copy_);
  if (copy_done_) cudaEventDestroy(copy_done_);
  if (order_) cudaEventDestroy(order_);
  for (int i = 0; i < kStaging; ++i) {
    if (staging_[i]) cudaFreeHost(staging_[i]);
    if (staging_ev_[i]) cudaEventDestroy(staging_ev_[i]);
  }
  pool_.trim();
  if (hash_dev_) cudaFree(hash_dev_);  // after cudaDeviceSynchronize above
  if (hash_host_) cudaFreeHost(hash_host_);
  for (void* p : registered_) cudaHostUnregister(p);
}

cudaStream_t CudaBackend::stream() {
  WorkerStream& w = *bound_;
  if (w.seen_copy_gen != copy_gen_) {
    cudaStreamWaitEvent(w.s, copy_done_, 0);
    w.seen_copy_gen = copy_gen_;
  }
  return w.s;
}

Status CudaBackend::publish_copies() {
  if (auto s = rt(cudaEventRecord(copy_done_, copy_), "cudaEventRecord"); !s) return s;
  ++copy_gen_;
  return Status::Ok();
}

Status CudaBackend::copy_after_worker() {
  if (auto s = rt(cudaEventRecord(order_, stream()), "cudaEventRecord"); !s) return s;
  return rt(cudaStreamWaitEvent(copy_, order_, 0), "cudaStreamWaitEvent");
}

void CudaBackend::bind_worker(int job, int rank) {
  auto it = streams_.find({job, rank});
  if (it == streams_.end()) {
    WorkerStream w;
    if (cudaStreamCreateWithFlags(&w.s, cudaStreamNonBlocking) != cudaSuccess) {
      (void)cudaGetLastError();
      bound_ = &own_;  // still correct, only without a stream of its own
      return;
    }
    // A new stream has waited for nothing: make it wait for the latest copy.
    w.seen_copy_gen = copy_gen_ == 0 ? 0 : copy_gen_ - 1;
    it = streams_.emplace(std::make_pair(job, rank), w).first;
  }
  bound_ = &it->second;
}

void CudaBackend::release_worker(int job, int rank) {
  auto it = streams_.find({job, rank});
  if (it == streams_.end()) return;
  cudaStreamSynchronize(it->second.s);
  cudaStreamDestroy(it->second.s);
  if (bound_ == &it->second) bound_ = &own_;
  streams_.erase(it);
  if (streams_.empty()) pool_.trim();  // no worker left: nothing will be parked soon
}

void CudaBackend::pin_host_memory(void* p, std::uint64_t n) {
  if (cudaHostRegister(p, n, cudaHostRegisterDefault) == cudaSuccess) {
    registered_.push_back(p);
  } else {
    (void)cudaGetLastError();  // best effort: copies from pageable memory are only slower
  }
}

Status CudaBackend::reserve_window(std::uint64_t addr) {
  const std::uint64_t base = window_of(addr);
  if (windows_.count(base) != 0) return Status::Ok();
  CUdeviceptr got = 0;
  if (CUresult r = drv_.mem_address_reserve(&got, kWindowBytes, segs_.granule(), base, 0);
      r != CUDA_SUCCESS) {
    return Status::Error(drv_.error("cuMemAddressReserve", r) + " (the job window at " +
                         hex(base) + ")");
  }
  if (got != base) {
    drv_.mem_address_free(got, kWindowBytes);
    return Status::Error("CUDA reserved the job window at " + hex(got) + ", not at " + hex(base) +
                         ": that address range is taken in this process, and a different one "
                         "would break the worker's pointers after a restore");
  }
  windows_.insert(base);
  return Status::Ok();
}

Result<CUmemGenericAllocationHandle> CudaBackend::create_segment(std::uint64_t size,
                                                                std::uint64_t addr,
                                                                std::uint64_t n) {
  CUmemGenericAllocationHandle h{};
  CUresult r = drv_.mem_create(&h, size, &prop_, 0);
  if (r == CUDA_ERROR_OUT_OF_MEMORY) {
    release(segs_.idle_outside(addr, n));  // idle segments this range does not reuse
    r = drv_.mem_create(&h, size, &prop_, 0);
  }
  if (r != CUDA_SUCCESS) return Status::Error(drv_.error("cuMemCreate", r));
  return h;
}

Status CudaBackend::map_range(std::uint64_t addr, std::uint64_t n) {
  const std::vector<Range> gaps = segs_.gaps(addr, n);
  std::uint64_t needed = 0;
  for (const Range& g : gaps) needed += g.size;
  if (needed > 0 && segs_.mapped_bytes() + needed > total_) {
    release(segs_.idle_outside(addr, n));  // keep physical use near the budget
  }
  std::vector<Range> made;
  Status st;
  for (const Range& g : gaps) {
    auto h = create_segment(g.size, addr, n);
    if (!h) {
      st = h.status();
      break;
    }
    if (CUresult r = drv_.mem_map(g.start, g.size, 0, *h, 0); r != CUDA_SUCCESS) {
      drv_.mem_release(*h);
      st = Status::Error(drv_.error("cuMemMap", r) + " at " + hex(g.start));
      break;
    }
    if (CUresult r = drv_.mem_set_access(g.start, g.size, &access_, 1); r != CUDA_SUCCESS) {
      drv_.mem_unmap(g.start, g.size);
      drv_.mem_release(*h);
      st = Status::Error(drv_.error("cuMemSetAccess", r) + " at " + hex(g.start));
      break;
    }
    segs_.add(g);
    handles_[g.start] = *h;
    made.push_back(g);
  }
  if (!st) {
    release(made);  // unreferenced: nothing was handed out
    return Status::Error("device " + std::to_string(device_) + ": cannot map " +
                         std::to_string(n) + " bytes at " + hex(addr) + ": " + st.reason());
  }
  segs_.ref(addr, n);
  return Status::Ok();
}

void CudaBackend::release(const std::vector<Range>& segments) {
  if (segments.empty()) return;
  // Only the streams that touch job windows (the copy stream and the workers'), not the whole
  // device: an allreduce's NCCL kernels may be waiting for a peer proxy, which may be waiting
  // for this one.
  cudaStreamSynchronize(copy_);
  cudaStreamSynchronize(own_.s);
  for (auto& [key, w] : streams_) cudaStreamSynchronize(w.s);
  for (const Range& r : segments) {
    drv_.mem_unmap(r.start, r.size);
    drv_.mem_release(handles_[r.start]);
    handles_.erase(r.start);
    segs_.remove(r.start);
    content_.forget(r.start, r.size);  // mapped again later, it holds anything
  }
}

void CudaBackend::release_empty_windows() {
  for (auto it = windows_.begin(); it != windows_.end();) {
    if (!segs_.any_within(*it, *it + kWindowBytes)) {
      drv_.mem_address_free(*it, kWindowBytes);
      it = windows_.erase(it);
    } else {
      ++it;
    }
  }
}

Status CudaBackend::allocate(std::uint64_t addr, std::uint64_t bytes) {
  if (used_ + bytes > total_) {
    return Status::Error("device " + std::to_string(device_) + " out of memory: " +
                         std::to_string(bytes) + " bytes asked, " +
                         std::to_string(total_ - used_) + " free");
  }
  if (auto s = reserve_window(addr); !s) return s;
  if (auto s = map_range(addr, bytes); !s) return s;
  content_.forget(addr, bytes);
  // Fresh memory is zero on every backend (a reused idle segment holds another rank's bytes).
  if (auto s = rt(cudaMemsetAsync(dp(addr), 0, bytes, stream()), "cudaMemsetAsync"); !s) {
    segs_.unref(addr, bytes);
    return s;
  }
  used_ += bytes;
  return Status::Ok();
}

Status CudaBackend::free(std::uint64_t addr, std::uint64_t bytes) {
  segs_.unref(addr, bytes);
  content_.forget(addr, bytes);
  used_ -= bytes;
  // Freed for good: give back every idle segment (release() waits for the device first), and the
  // windows left empty.
  release(segs_.idle());
  release_empty_windows();
  return Status::Ok();
}

Status CudaBackend::copy_h2d(std::uint64_t dst, const void* src, std::uint64_t n) {
  cudaStream_t s = stream();
  if (auto st = rt(cudaMemcpyAsync(dp(dst), src, n, cudaMemcpyHostToDevice, s), "cudaMemcpyAsync H2D");
      !st) {
    return st;
  }
  return rt(cudaStreamSynchronize(s), "cudaStreamSynchronize (after H2D)");
}

Status CudaBackend::copy_d2h(void* dst, std::uint64_t src, std::uint64_t n) {
  cudaStream_t s = stream();
  if (auto st = rt(cudaMemcpyAsync(dst, dp(src), n, cudaMemcpyDeviceToHost, s), "cudaMemcpyAsync D2H");
      !st) {
    return st;
  }
  return rt(cudaStreamSynchronize(s), "cudaStreamSynchronize (after D2H)");
}

Status CudaBackend::copy_d2d(std::uint64_t dst, std::uint64_t src, std::uint64_t n) {
  cudaStream_t s = stream();
  if (dst + n <= src || src + n <= dst) {
    return rt(cudaMemcpyAsync(dp(dst), dp(src), n, cudaMemcpyDeviceToDevice, s),
              "cudaMemcpyAsync D2D");
  }
  // Overlapping ranges (memmove on the host backend): a device copy of overlapping ranges is
  // undefined, so through a stream-ordered temporary.
  void* tmp = nullptr;
  Status st = rt(cudaMallocAsync(&tmp, n, s), "cudaMallocAsync (overlapping D2D)");
  if (!st) return st;
  st = rt(cudaMemcpyAsync(tmp, dp(src), n, cudaMemcpyDeviceToDevice, s), "cudaMemcpyAsync D2D");
  if (st) {
    st = rt(cudaMemcpyAsync(dp(dst), tmp, n, cudaMemcpyDeviceToDevice, s), "cudaMemcpyAsync D2D");
  }
  const Status fr = rt(cudaFreeAsync(tmp, s), "cudaFreeAsync");
  return st ? fr : st;
}

Status CudaBackend::launch(std::string_view kernel, const std::uint64_t* args, int nargs) {
  Status st = cuda::launch_kernel(kernel, args, nargs, stream());
  if (!st) {
    // An earlier kernel's fault may surface at this launch: the context may be gone.
    if (const cudaError_t e = cudaPeekAtLastError(); sticky(e)) (void)rt(e, "kernel launch");
  }
  return st;
}

Status CudaBackend::synchronize() {
  return rt(cudaStreamSynchronize(stream()), "cudaStreamSynchronize");
}

CollectiveOffer CudaBackend::collective_offer() {
  CollectiveOffer o;
  CUuuid u{};
  if (drv_.device_get_uuid(&u, device_) == CUDA_SUCCESS) {
    std::memcpy(o.uuid.data(), u.bytes, o.uuid.size());
    o.across_devices = cuda::can_reduce_across_devices();
  }
  return o;
}

Result<std::unique_ptr<DeviceCollective>> CudaBackend::open_device_collective(
    const DeviceCollectiveSetup& setup) {
  cuda::CudaCollectiveEnv env;
  env.device = device_;
  env.worker_stream = [this] { return stream(); };
  env.rt = [this](cudaError_t e, const char* call) { return rt(e, call); };
  return cuda::open_cuda_collective(setup, std::move(env));
}

Status CudaBackend::ensure_staging() {
  for (int i = 0; i < kStaging; ++i) {
    if (staging_[i] != nullptr) continue;
    if (auto s = rt(cudaHostAlloc(&staging_[i], kChunk, cudaHostAllocDefault),
                    "cudaHostAlloc (checkpoint staging)");
        !s) {
      staging_[i] = nullptr;
      return s;
    }
    if (auto s = rt(cudaEventCreateWithFlags(&staging_ev_[i], cudaEventDisableTiming),
                    "cudaEventCreate");
        !s) {
      cudaFreeHost(staging_[i]);  // a buffer without its event is never used
      staging_[i] = nullptr;
      staging_ev_[i] = nullptr;
      return s;
    }
  }
  return Status::Ok();
}

// Device -> staging buffer i % kStaging on the copy stream, kStaging chunks ahead of the sink:
// the copy engine fills the next buffers while the sink checksums and writes this one.
Status CudaBackend::stream_out(std::uint64_t addr, std::uint64_t n, const ChunkSink& sink) {
  if (auto s = ensure_staging(); !s) return s;
  if (auto s = copy_after_worker(); !s) return s;
  const std::uint64_t chunks = (n + kChunk - 1) / kChunk;
  auto issue = [&](std::uint64_t c) {
    const std::uint64_t off = c * kChunk, len = std::min(kChunk, n - off);
    const int b = static_cast<int>(c % kStaging);
    Status s = rt(cudaMemcpyAsync(staging_[b], dp(addr + off), len, cudaMemcpyDeviceToHost, copy_),
                  "cudaMemcpyAsync D2H (checkpoint)");
    if (s) s = rt(cudaEventRecord(staging_ev_[b], copy_), "cudaEventRecord");
    return s;
  };
  Status st;
  for (std::uint64_t c = 0; st && c < std::min<std::uint64_t>(chunks, kStaging); ++c) st = issue(c);
  for (std::uint64_t c = 0; st && c < chunks; ++c) {
    const int b = static_cast<int>(c % kStaging);
    st = rt(cudaEventSynchronize(staging_ev_[b]), "cudaEventSynchronize (checkpoint)");
    if (st) st = sink(staging_[b], std::min(kChunk, n - c * kChunk));
    if (st && c + kStaging < chunks) st = issue(c + kStaging);
  }
  if (!st) cudaStreamSynchronize(copy_);  // nothing may still write into the staging buffers
  return st;
}

// Source -> staging buffer -> device: the source fills buffer i while earlier buffers are copied.
Status CudaBackend::stream_in(std::uint64_t addr, std::uint64_t n, const ChunkSource& source) {
  content_.forget(addr, n);
  if (auto s = ensure_staging(); !s) return s;
  if (auto s = copy_after_worker(); !s) return s;  // after allocate()'s zero fill
  Status st;
  for (std::uint64_t c = 0; st && c * kChunk < n; ++c) {
    const int b = static_cast<int>(c % kStaging);
    const std::uint64_t off = c * kChunk, len = std::min(kChunk, n - off);
    if (c >= kStaging) st = rt(cudaEventSynchronize(staging_ev_[b]), "cudaEventSynchronize (restore)");
    if (st) st = source(staging_[b], len);
    if (st) {
      st = rt(cudaMemcpyAsync(dp(addr + off), staging_[b], len, cudaMemcpyHostToDevice, copy_),
              "cudaMemcpyAsync H2D (restore)");
    }
    if (st) st = rt(cudaEventRecord(staging_ev_[b], copy_), "cudaEventRecord");
  }
  const Status done = rt(cudaStreamSynchronize(copy_), "cudaStreamSynchronize (restore)");
  return st ? done : st;
}

Result<std::vector<cuda::Hash128>> CudaBackend::device_hashes(std::uint64_t addr,
                                                               std::uint64_t n) {
  const std::uint64_t nc = cuda::chunk_count(n);
  if (nc > hash_cap_) {
    cudaStream_t s = stream();
    if (hash_dev_) cudaFreeAsync(hash_dev_, s);  // stream-ordered: no wait for the device
    if (hash_host_) cudaFreeHost(hash_host_);
    hash_dev_ = nullptr;
    hash_host_ = nullptr;
    hash_cap_ = 0;
    if (auto st = rt(cudaMallocAsync(reinterpret_cast<void**>(&hash_dev_),
                                     nc * sizeof(cuda::Hash128), s),
                     "cudaMallocAsync (chunk hashes)");
        !st) {
      return st;
    }
    if (auto st = rt(cudaHostAlloc(reinterpret_cast<void**>(&hash_host_),
                                   nc * sizeof(cuda::Hash128), cudaHostAllocDefault),
                     "cudaHostAlloc (chunk hashes)");
        !st) {
      return st;
    }
    hash_cap_ = nc;
  }
  cudaStream_t s = stream();
  if (auto st = cuda::launch_chunk_hashes(dp(addr), n, hash_dev_, s); !st) return st;
  if (auto st = rt(cudaMemcpyAsync(hash_host_, hash_dev_, nc * sizeof(cuda::Hash128),
                                   cudaMemcpyDeviceToHost, s),
                   "cudaMemcpyAsync (chunk hashes)");
      !st) {
    return st;
  }
  if (auto st = rt(cudaStreamSynchronize(s), "cudaStreamSynchronize (chunk hashes)"); !st) return st;
  return std::vector<cuda::Hash128>(hash_host_, hash_host_ + nc);
}

// Park: the range's chunks go to host memory, except those whose content a parked rank of the
// job already holds at the same addresses (their host bytes are shared). The segments stay
// mapped, idle, and keep what they hold: the next rank comes back at these addresses.
Result<std::unique_ptr<ParkedMemory>> CudaBackend::park(std::uint64_t addr, std::uint64_t bytes) {
  const std::uint64_t nc = cuda::chunk_count(bytes);
  std::vector<cuda::Hash128> hashes;
  if (dedup_) {
    auto h = device_hashes(addr, bytes);
    if (!h) return h.status();
    hashes = std::move(h.value());
  }
  cuda::ParkedRange r{addr, bytes, std::vector<cuda::ParkedChunk>(nc)};
  std::vector<bool> copy(nc, true);
  std::uint64_t own = 0;  // chunks copied out into a new block
  for (std::uint64_t c = 0; c < nc; ++c) {
    if (dedup_) {
      r.chunks[c].hash = hashes[c];
      if (const cuda::ParkedChunk* same = parked_.find(addr, bytes, c, hashes[c])) {
        r.chunks[c] = *same;
        copy[c] = false;
        continue;
      }
    }
    ++own;
  }
  PinnedBuffer block{};
  if (own > 0) {
    // Whole chunks (the last one may be short): blocks of the same chunk count are reused.
    auto buf = pool_.take(own * cuda::kHashChunk);
    if (!buf) return buf.status();
    block = *buf;
    PinnedPool* pool = &pool_;
    std::shared_ptr<void> owner(block.p, [pool, block](void*) { pool->give(block); });
    std::uint64_t j = 0;
    for (std::uint64_t c = 0; c < nc; ++c) {
      if (!copy[c]) continue;
      r.chunks[c].owner = owner;
      r.chunks[c].bytes = static_cast<unsigned char*>(block.p) + j++ * cuda::kHashChunk;
    }
  }
  Status st = copy_after_worker();
  std::uint64_t copied = 0;
  for (const cuda::CopyRun& run : cuda::copy_runs(r, copy)) {
    if (!st) break;
    st = rt(cudaMemcpyAsync(run.host, dp(addr + run.first * cuda::kHashChunk), run.bytes,
                            cudaMemcpyDeviceToHost, copy_),
            "cudaMemcpyAsync D2H (park)");
    copied += run.bytes;
  }
  if (st && own > 0) st = rt(cudaEventRecord(block.ready, copy_), "cudaEventRecord");
  // The next rank may reuse these addresses at once (a zero fill, a restore, its own unpark):
  // every worker stream waits for this copy out first.
  if (st) st = publish_copies();
  if (!st) {
    cudaStreamSynchronize(copy_);
    return st;  // `r`'s owners give the block back
  }
  segs_.unref(addr, bytes);
  used_ -= bytes;
  if (dedup_) content_.set(addr, bytes, std::move(hashes));
  splice_.parked_bytes += bytes;
  splice_.copied_bytes += copied;
  return std::unique_ptr<ParkedMemory>(new CudaParked(&parked_, copy_, std::move(r)));
}

// Unpark: the chunks whose content the device does not hold already (the rank parked last at
// these addresses left its bytes there) are copied back, in order behind that rank's copy out on
// the same stream.
Status CudaBackend::unpark(std::uint64_t addr, std::unique_ptr<ParkedMemory> parked) {
  const cuda::ParkedRange& r = static_cast<CudaParked*>(parked.get())->range();
  const std::uint64_t bytes = r.size;
  if (used_ + bytes > total_) return Status::Error("device out of memory unparking " + hex(addr));
  if (auto s = reserve_window(addr); !s) return s;
  if (auto s = map_range(addr, bytes); !s) return s;
  std::vector<bool> copy(r.chunks.size(), true);
  if (const auto* held = dedup_ ? content_.find(addr, bytes) : nullptr) {
    for (std::uint64_t c = 0; c < r.chunks.size(); ++c) copy[c] = !((*held)[c] == r.chunks[c].hash);
  }
  content_.forget(addr, bytes);  // resident again: its rank writes it
  Status st;
  std::uint64_t copied = 0;
  for (const cuda::CopyRun& run : cuda::copy_runs(r, copy)) {
    if (!st) break;
    st = rt(cudaMemcpyAsync(dp(addr + run.first * cuda::kHashChunk), run.host, run.bytes,
                            cudaMemcpyHostToDevice, copy_),
            "cudaMemcpyAsync H2D (unpark)");
    copied += run.bytes;
  }
  // Every worker stream waits for these copies before its next work. The host bytes they read
  // may go back to the pool when `parked` is destroyed below: a block is only ever refilled by a
  // later copy on this same stream, so after these.
  if (st) st = publish_copies();
  if (!st) {
    segs_.unref(addr, bytes);
    cudaStreamSynchronize(copy_);
    return st;
  }
  used_ += bytes;
  splice_.parked_bytes += bytes;
  splice_.copied_bytes += copied;
  return Status::Ok();
}

}  // namespace

Status cuda_device_usable(int device) {
  int count = 0;
  if (cudaError_t e = cudaGetDeviceCount(&count); e != cudaSuccess) {
    (void)cudaGetLastError();
    return Status::Error(std::string("no CUDA device: ") + cudaGetErrorString(e));
  }
  if (count == 0) return Status::Error("no CUDA device: none found");
  if (device < 0 || device >= count) {
    return Status::Error("CUDA device " + std::to_string(device) + " does not exist (" +
                         std::to_string(count) + " device(s))");
  }
  return Status::Ok();
}

Result<std::unique_ptr<DeviceBackend>> make_cuda_backend(int device, std::uint64_t mem_bytes,
                                                         const BackendOptions& options) {
  auto b = CudaBackend::create(device, mem_bytes, options);
  if (!b) return b.status();
  return std::unique_ptr<DeviceBackend>(std::move(b.value()));
}

}  // namespace orrery::runtime
