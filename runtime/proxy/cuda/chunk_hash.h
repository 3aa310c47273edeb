// Content hashes of device memory in fixed chunks, for splicing that moves only what differs
// between the ranks spliced on one device (splice_plan.h). Data-parallel replicas hold identical
// parameters and optimizer state, so most of a rank's memory equals the next rank's; hashing it
// on the device costs one read at device bandwidth instead of two copies over PCIe.
//
// The hash of a chunk (at most kHashChunk bytes, a multiple of 8) is 128 bits, two independent
// lanes. Each lane: kHashThreads partial hashes, thread t folding the 64-bit words t, t +
// kHashThreads, ... in order (h = mix(h ^ (word + index * K))), then the partials combined pairwise
// in a fixed tree (combine(a, b) is not symmetric), so the value is a function of the bytes and
// their positions only. chunk_hash_host computes exactly what the device kernel computes (tests
// compare them); two different chunks collide with probability about 2^-128.
#pragma once

#include <cstdint>

namespace orrery::runtime::cuda {

inline constexpr std::uint64_t kHashChunk = 1u << 20;
inline constexpr int kHashThreads = 256;

struct Hash128 {
  std::uint64_t a = 0, b = 0;
  bool operator==(const Hash128& o) const { return a == o.a && b == o.b; }
  bool operator!=(const Hash128& o) const { return !(*this == o); }
};

// The hash of the n bytes at p (n <= kHashChunk, a multiple of 8).
Hash128 chunk_hash_host(const void* p, std::uint64_t n);

// The parts shared with the device kernel (chunk_hash.cu), so both compute one function.
struct HashLane {
  std::uint64_t seed, k_index, k_mix;
};
inline constexpr HashLane kLaneA{0x243F6A8885A308D3ull, 0x9E3779B97F4A7C15ull, 0xBF58476D1CE4E5B9ull};
inline constexpr HashLane kLaneB{0x13198A2E03707344ull, 0xC2B2AE3D27D4EB4Full, 0x94D049BB133111EBull};

#if defined(__CUDACC__)
#define ORRERY_HD __host__ __device__
#else
#define ORRERY_HD
#endif

ORRERY_HD inline std::uint64_t hash_mix(std::uint64_t x, std::uint64_t k) {
  x ^= x >> 31;
  x *= k;
  x ^= x >> 29;
  x *= 0xD6E8FEB86659FD93ull;
  return x ^ (x >> 32);
}
ORRERY_HD inline std::uint64_t hash_step(std::uint64_t h, std::uint64_t word, std::uint64_t index,
                                         HashLane l) {
  return hash_mix(h ^ (word + index * l.k_index), l.k_mix);
}
// Not symmetric: the tree's order is part of the value.
ORRERY_HD inline std::uint64_t hash_combine(std::uint64_t left, std::uint64_t right,
                                            HashLane l) {
  return hash_mix(left * 0x9FB21C651E98DF25ull + (right ^ (right >> 17)) + l.seed, l.k_mix);
}

}  // namespace orrery::runtime::cuda
