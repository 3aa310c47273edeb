// How a job's allreduce cuts its buffer into chunks, and the rank-ordered sum of one chunk.
//
// Chunks are what makes the allreduce parallel and pipelined without changing a single bit of
// its result: element i of the sum is always ((x0[i] + x1[i]) + x2[i]) + ... in rank order, and
// which process sums which chunk, in which order, or while which other chunk is still in flight,
// never changes that expression. The chunk size is a function of (count, world) only, so every
// participant of a step derives the same plan without talking.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>

namespace orrery::runtime {

// Floats per chunk: about 4 chunks per rank (so that W summers all find work), a multiple of
// 1024 floats (4 KiB pages), between 16 KiB and 256 KiB of floats (small enough to stay in a
// core's L2 while W inputs stream through it, large enough that per-chunk bookkeeping is noise).
inline constexpr std::uint64_t kMinChunkFloats = 4096;
inline constexpr std::uint64_t kMaxChunkFloats = 65536;

inline std::uint64_t chunk_floats(std::uint64_t count, int world) {
  const std::uint64_t per = (count + 4ull * static_cast<std::uint64_t>(world) - 1) /
                            (4ull * static_cast<std::uint64_t>(world));
  const std::uint64_t rounded = (per + 1023) / 1024 * 1024;
  return std::clamp(rounded, kMinChunkFloats, kMaxChunkFloats);
}

inline std::uint64_t chunk_count(std::uint64_t count, int world) {
  const std::uint64_t c = chunk_floats(count, world);
  return (count + c - 1) / c;
}

// The most chunks a buffer of `capacity` floats can have (for sizing bookkeeping arrays).
inline std::uint64_t max_chunks(std::uint64_t capacity) {
  return (capacity + kMinChunkFloats - 1) / kMinChunkFloats;
}

// out[i] = ((in[0][i] + in[1][i]) + in[2][i]) + ..., exactly kernels.h's sum_in_rank_order, but
// `out` may be any one of the inputs (a caller may sum in place into its own rank's buffer,
// whatever its rank). Blocked so that a block of `out` stays in L1 while each rank's block is
// added to it; when `out` is a later rank's input, a block is summed in a buffer on the stack
// first (that rank's block is still to be read), so the expression and its bits are the same.
inline void sum_chunk_in_rank_order(const float* const* in, int ranks, std::uint64_t n,
                                    float* out) {
  constexpr std::uint64_t kBlock = 2048;
  bool later_alias = false;
  for (int r = 1; r < ranks; ++r) later_alias = later_alias || in[r] == out;
  alignas(64) float tmp[kBlock];  // 8 KiB: used only when later_alias
  for (std::uint64_t lo = 0; lo < n; lo += kBlock) {
    const std::uint64_t k = std::min(kBlock, n - lo);
    float* o = later_alias ? tmp : out + lo;
    if (o != in[0] + lo) std::memcpy(o, in[0] + lo, k * sizeof(float));
    for (int r = 1; r < ranks; ++r) {
      const float* s = in[r] + lo;
      for (std::uint64_t i = 0; i < k; ++i) o[i] += s[i];
    }
    if (later_alias) std::memcpy(out + lo, tmp, k * sizeof(float));
  }
}

// A counter tagged with the step it counts for, in one 64-bit word (step << 20 | n), so that
// per-chunk counters never need a reset between steps: a word from an older step counts as 0.
namespace tagged {
inline constexpr int kBits = 20;
inline constexpr std::uint64_t kMask = (1ull << kBits) - 1;
inline std::uint64_t count(std::uint64_t word, std::int64_t step) {
  return static_cast<std::int64_t>(word >> kBits) == step ? (word & kMask) : 0;
}
// Adds one for `step`; returns the new count, or 0 if the word already counts a later step.
inline std::uint64_t add(std::atomic<std::uint64_t>& w, std::int64_t step) {
  std::uint64_t cur = w.load(std::memory_order_acquire);
  for (;;) {
    const auto tag = static_cast<std::int64_t>(cur >> kBits);
    std::uint64_t next;
    if (tag == step) {
      next = cur + 1;
    } else if (tag < step) {
      next = (static_cast<std::uint64_t>(step) << kBits) | 1;
    } else {
      return 0;
    }
    if (w.compare_exchange_weak(cur, next, std::memory_order_acq_rel)) return next & kMask;
  }
}
}  // namespace tagged

}  // namespace orrery::runtime
