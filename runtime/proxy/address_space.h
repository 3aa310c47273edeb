// Stable device addresses. Every job owns a fixed window of the device address space, and a
// rank's n-th allocation lands at window(job) + (sum of its earlier allocations' rounded sizes).
// Addresses are therefore a function of (job, the rank's allocation sequence) only: the same on
// every device and node, the same after a restore, and the same for ranks spliced on one device
// (each sees the whole device while it runs). A migrated or restored worker's pointers stay valid.
#pragma once

#include <cstdint>

namespace orrery::runtime {

inline constexpr std::uint64_t kVaBase = 0x200000000000ull;    // 32 TiB
inline constexpr std::uint64_t kWindowBytes = 1ull << 36;      // 64 GiB per job
inline constexpr std::uint64_t kWindows = 1024;                // up to 96 TiB: below 128 TiB
inline constexpr std::uint64_t kAllocGranule = 64 * 1024;

inline std::uint64_t job_window(std::int64_t job) {
  return kVaBase + (static_cast<std::uint64_t>(job) % kWindows) * kWindowBytes;
}
inline std::uint64_t round_granule(std::uint64_t n) {
  return (n + kAllocGranule - 1) / kAllocGranule * kAllocGranule;
}

}  // namespace orrery::runtime
