// The cuda backend (cuda_backend.h): creation, the workers' streams, copies, launches and the
// device collective. Memory, splicing and checkpoint streaming are in the files that
// cuda_backend_internal.h names.
#include "runtime/proxy/cuda/cuda_backend.h"

#include <algorithm>

#include "runtime/proxy/cuda/cuda_backend_internal.h"
#include "runtime/proxy/cuda/cuda_collective.h"
#include "runtime/proxy/cuda/cuda_kernels.h"

namespace orrery::runtime::cuda {

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

}  // namespace orrery::runtime::cuda

namespace orrery::runtime {

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
  auto b = cuda::CudaBackend::create(device, mem_bytes, options);
  if (!b) return b.status();
  return std::unique_ptr<DeviceBackend>(std::move(b.value()));
}

}  // namespace orrery::runtime
