// A set of small integers [0, n) as a two-level bitset: insert, erase and "smallest member >= i"
// in O(1 + n / 4096) word operations, members visited in increasing order. The placement index
// (core/policy/free_device_index.h) keeps one per (device class, scope, free count): the nodes
// with exactly that many free devices, so that the best-fitting node is found without a scan and
// ties always go to the lowest node id (placement is a function of the state, not of history).
// Storage is allocated on the first insert: most (class, scope, count) sets stay empty.
#pragma once

#include <bit>
#include <cstdint>
#include <vector>

#include "core/policy/two_level_bits.h"

namespace orrery::core::policy {

class NodeSet {
 public:
  NodeSet() = default;
  explicit NodeSet(int n) : n_(n) {}

  int universe() const { return n_; }
  int size() const { return count_; }
  bool empty() const { return count_ == 0; }
  bool contains(int i) const {
    return !w_.empty() && (w_[static_cast<std::size_t>(i) >> 6] >> (i & 63) & 1);
  }

  void insert(int i) {
    if (w_.empty()) {
      w_.assign((static_cast<std::size_t>(n_) + 63) / 64, 0);
      s_.assign((w_.size() + 63) / 64, 0);
    }
    auto& w = w_[static_cast<std::size_t>(i) >> 6];
    const std::uint64_t bit = std::uint64_t{1} << (i & 63);
    if (w & bit) return;
    w |= bit;
    s_[static_cast<std::size_t>(i) >> 12] |= std::uint64_t{1} << ((i >> 6) & 63);
    ++count_;
  }

  void erase(int i) {
    if (w_.empty()) return;
    auto& w = w_[static_cast<std::size_t>(i) >> 6];
    const std::uint64_t bit = std::uint64_t{1} << (i & 63);
    if (!(w & bit)) return;
    w &= ~bit;
    if (w == 0) s_[static_cast<std::size_t>(i) >> 12] &= ~(std::uint64_t{1} << ((i >> 6) & 63));
    --count_;
  }

  // The smallest member >= from, or -1.
  int next(int from) const {
    if (count_ == 0 || from >= n_) return -1;
    if (from < 0) from = 0;
    return two_level_next(w_, s_, from);
  }

  int first() const { return next(0); }

 private:
  int n_ = 0;
  int count_ = 0;
  std::vector<std::uint64_t> w_;  // bit i: i is a member
  std::vector<std::uint64_t> s_;  // bit k: word k of w_ is non-zero
};

}  // namespace orrery::core::policy
