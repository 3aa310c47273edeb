// The search shared by the two-level bitsets (core/policy/node_set.h, core/policy/job_id_set.h):
// words `w` (bit i: i is a member) and a summary `s` (bit k: word k of w is non-zero).
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace orrery::core::policy {

// The smallest member >= from (from >= 0), or -1: the word of `from`, then the next non-empty word
// found from the summary, in O(1 + gap / 4096) word operations.
inline int two_level_next(const std::vector<std::uint64_t>& w, const std::vector<std::uint64_t>& s, int from) {
  std::size_t wi = static_cast<std::size_t>(from) >> 6;
  if (wi >= w.size()) return -1;
  const std::uint64_t here = w[wi] & (~std::uint64_t{0} << (from & 63));
  if (here) return static_cast<int>(wi * 64 + static_cast<std::size_t>(std::countr_zero(here)));
  std::size_t si = (wi + 1) >> 6;
  if (si >= s.size()) return -1;
  std::uint64_t sum = ((wi + 1) & 63) ? s[si] & (~std::uint64_t{0} << ((wi + 1) & 63)) : s[si];
  while (!sum) {
    if (++si >= s.size()) return -1;
    sum = s[si];
  }
  wi = si * 64 + static_cast<std::size_t>(std::countr_zero(sum));
  return static_cast<int>(wi * 64 + static_cast<std::size_t>(std::countr_zero(w[wi])));
}

}  // namespace orrery::core::policy
