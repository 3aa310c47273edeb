// The cuda backend's splicing: park a range into pinned host memory (sharing the chunks a parked
// rank of the job already holds), unpark it at the same addresses, copying back only what the
// device does not hold already (cuda_backend.h, splice_chunks.h).
#include <memory>
#include <utility>
#include <vector>

#include "runtime/proxy/cuda/chunk_hash.h"
#include "runtime/proxy/cuda/cuda_backend_internal.h"
#include "runtime/proxy/cuda/cuda_kernels.h"

namespace orrery::runtime::cuda {

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

}  // namespace orrery::runtime::cuda
