#include "runtime/proxy/cuda/chunk_hash.h"

#include <cstring>

namespace orrery::runtime::cuda {
namespace {

std::uint64_t lane(const unsigned char* p, std::uint64_t words, HashLane l) {
  std::uint64_t part[kHashThreads];
  for (int t = 0; t < kHashThreads; ++t) {
    std::uint64_t h = l.seed ^ static_cast<std::uint64_t>(t);
    for (std::uint64_t w = static_cast<std::uint64_t>(t); w < words; w += kHashThreads) {
      std::uint64_t v;
      std::memcpy(&v, p + w * 8, 8);
      h = hash_step(h, v, w, l);
    }
    part[t] = h;
  }
  // The device's shared-memory tree: stride kHashThreads/2, then /4, ... 1.
  for (int stride = kHashThreads / 2; stride > 0; stride /= 2) {
    for (int t = 0; t < stride; ++t) part[t] = hash_combine(part[t], part[t + stride], l);
  }
  return hash_mix(part[0] ^ words, l.k_mix);
}

}  // namespace

Hash128 chunk_hash_host(const void* p, std::uint64_t n) {
  const auto* c = static_cast<const unsigned char*>(p);
  return {lane(c, n / 8, kLaneA), lane(c, n / 8, kLaneB)};
}

}  // namespace orrery::runtime::cuda
