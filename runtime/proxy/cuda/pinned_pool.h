// Page-locked host buffers for parking spliced ranks, kept for reuse by size: a splice switch
// parks and brings back the same sizes step after step, while cudaHostAlloc costs milliseconds per
// hundred MiB (it pins every page). Each buffer carries an event recorded after the copy that
// filled it, so a buffer is handed out again only once that copy is done; copies that read it
// later (unparks) run on the same copy stream as the next fill, so they come first.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <map>

#include "base/result.h"

namespace orrery::runtime::cuda {

struct PinnedBuffer {
  void* p = nullptr;
  std::uint64_t size = 0;
  cudaEvent_t ready = nullptr;  // recorded after the copy that filled p
};

class PinnedPool {
 public:
  PinnedPool() = default;
  PinnedPool(const PinnedPool&) = delete;
  PinnedPool& operator=(const PinnedPool&) = delete;
  ~PinnedPool() { trim(); }

  // A buffer of exactly `size` bytes, whose earlier copies have finished.
  Result<PinnedBuffer> take(std::uint64_t size);
  // Back into the pool; its `ready` event says when it may be used again.
  void give(PinnedBuffer b);
  // Frees every buffer in the pool, after every copy the device has queued.
  void trim();
  std::uint64_t bytes_pooled() const { return pooled_; }

 private:
  std::multimap<std::uint64_t, PinnedBuffer> free_;
  std::uint64_t pooled_ = 0;
};

}  // namespace orrery::runtime::cuda
