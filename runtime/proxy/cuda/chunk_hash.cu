// The device side of chunk_hash.h: one block of kHashThreads threads per chunk, both lanes.
#include <cuda_runtime.h>

#include <string>

#include "runtime/proxy/cuda/chunk_hash.h"
#include "runtime/proxy/cuda/cuda_kernels.h"

namespace orrery::runtime::cuda {
namespace {

__device__ std::uint64_t lane(const std::uint64_t* p, std::uint64_t words, HashLane l,
                              std::uint64_t* part) {
  const int t = static_cast<int>(threadIdx.x);
  std::uint64_t h = l.seed ^ static_cast<std::uint64_t>(t);
  for (std::uint64_t w = static_cast<std::uint64_t>(t); w < words; w += kHashThreads) {
    h = hash_step(h, p[w], w, l);
  }
  part[t] = h;
  __syncthreads();
  for (int stride = kHashThreads / 2; stride > 0; stride /= 2) {
    if (t < stride) part[t] = hash_combine(part[t], part[t + stride], l);
    __syncthreads();
  }
  const std::uint64_t out = hash_mix(part[0] ^ words, l.k_mix);
  __syncthreads();  // part[] is reused by the next lane
  return out;
}

// Block c hashes chunk c of [base, base + n): kHashChunk bytes, the last one possibly fewer.
__global__ void chunk_hashes(const unsigned char* base, std::uint64_t n, Hash128* out) {
  __shared__ std::uint64_t part[kHashThreads];
  const std::uint64_t c = blockIdx.x;
  const std::uint64_t off = c * kHashChunk;
  const std::uint64_t len = n - off < kHashChunk ? n - off : kHashChunk;
  const auto* p = reinterpret_cast<const std::uint64_t*>(base + off);
  const std::uint64_t a = lane(p, len / 8, kLaneA, part);
  const std::uint64_t b = lane(p, len / 8, kLaneB, part);
  if (threadIdx.x == 0) out[c] = Hash128{a, b};
}

}  // namespace

Status launch_chunk_hashes(const void* dev, std::uint64_t n, Hash128* out, cudaStream_t stream) {
  if (n == 0) return Status::Ok();
  if (n % 8 != 0 || reinterpret_cast<std::uintptr_t>(dev) % 8 != 0) {
    return Status::Error("chunk_hashes: the range must be 8-byte aligned and sized");
  }
  const std::uint64_t chunks = (n + kHashChunk - 1) / kHashChunk;
  if (chunks > 0x7fffffffull) return Status::Error("chunk_hashes: range too large");
  chunk_hashes<<<static_cast<unsigned>(chunks), kHashThreads, 0, stream>>>(
      static_cast<const unsigned char*>(dev), n, out);
  if (const cudaError_t e = cudaGetLastError(); e != cudaSuccess) {
    return Status::Error(std::string("kernel chunk_hashes: launch failed: ") + cudaGetErrorName(e) +
                         ": " + cudaGetErrorString(e));
  }
  return Status::Ok();
}

}  // namespace orrery::runtime::cuda
