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
    std::size_t wi = static_cast<std::size_t>(from) >> 6;
    std::uint64_t w = w_[wi] & (~std::uint64_t{0} << (from & 63));
    if (w) return static_cast<int>(wi * 64 + static_cast<std::size_t>(std::countr_zero(w)));
    // The next non-empty word, from the summary.
    std::size_t si = (wi + 1) >> 6;
    if (si >= s_.size()) return -1;
    std::uint64_t s = ((wi + 1) & 63) ? s_[si] & (~std::uint64_t{0} << ((wi + 1) & 63)) : s_[si];
    while (!s) {
      if (++si >= s_.size()) return -1;
      s = s_[si];
    }
    wi = si * 64 + static_cast<std::size_t>(std::countr_zero(s));
    return static_cast<int>(wi * 64 + static_cast<std::size_t>(std::countr_zero(w_[wi])));
  }
  int first() const { return next(0); }

 private:
  int n_ = 0;
  int count_ = 0;
  std::vector<std::uint64_t> w_;  // bit i: i is a member
  std::vector<std::uint64_t> s_;  // bit k: word k of w_ is non-zero
};

}  // namespace orrery::core::policy
