#include "runtime/proxy/cuda/pinned_pool.h"

#include "runtime/proxy/cuda/cuda_driver.h"

namespace orrery::runtime::cuda {

Result<PinnedBuffer> PinnedPool::take(std::uint64_t size) {
  auto it = free_.find(size);
  if (it != free_.end()) {
    PinnedBuffer b = it->second;
    free_.erase(it);
    pooled_ -= size;
    if (cudaError_t e = cudaEventSynchronize(b.ready); e != cudaSuccess) {
      (void)cudaGetLastError();
      cudaEventDestroy(b.ready);  // not handed out again: its last copy's fate is unknown
      cudaFreeHost(b.p);
      return Status::Error(runtime_error("cudaEventSynchronize (pinned buffer)", e));
    }
    return b;
  }
  PinnedBuffer b;
  b.size = size;
  cudaError_t e = cudaHostAlloc(&b.p, size, cudaHostAllocDefault);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    trim();  // pinned memory is scarce: give back what the pool holds, then try once more
    e = cudaHostAlloc(&b.p, size, cudaHostAllocDefault);
  }
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    return Status::Error(runtime_error("cudaHostAlloc", e) + " (" + std::to_string(size >> 20) +
                         " MiB of pinned host memory to park device memory)");
  }
  if (e = cudaEventCreateWithFlags(&b.ready, cudaEventDisableTiming); e != cudaSuccess) {
    cudaFreeHost(b.p);
    return Status::Error(runtime_error("cudaEventCreate", e));
  }
  return b;
}

void PinnedPool::give(PinnedBuffer b) {
  if (b.p == nullptr) return;
  pooled_ += b.size;
  free_.emplace(b.size, b);
}

void PinnedPool::trim() {
  if (free_.empty()) return;
  // A pooled block's `ready` event marks the copy that filled it; a later copy may still be
  // reading it (an unpark on the copy stream). Rare, so wait for the whole device.
  cudaDeviceSynchronize();
  for (auto& [size, b] : free_) {
    cudaEventSynchronize(b.ready);
    cudaEventDestroy(b.ready);
    cudaFreeHost(b.p);
  }
  free_.clear();
  pooled_ = 0;
}

}  // namespace orrery::runtime::cuda
