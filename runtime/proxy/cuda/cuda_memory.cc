// The cuda backend's memory: each job's window reserved at its fixed address, physical segments
// mapped into it (created on demand, idle ones kept for the next rank or given back), and
// allocate/free over them (cuda_backend.h, segment_map.h).
#include <vector>

#include "runtime/proxy/cuda/cuda_backend_internal.h"

namespace orrery::runtime::cuda {

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

}  // namespace orrery::runtime::cuda
