// The cuda backend's checkpoint streaming: device memory to the sink and the source to device
// memory through pinned staging buffers, the copy of one chunk overlapping the sink or source of
// another (cuda_backend.h).
#include <algorithm>

#include "runtime/proxy/cuda/cuda_backend_internal.h"

namespace orrery::runtime::cuda {

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

}  // namespace orrery::runtime::cuda
