// A set of job ids (non-negative ints) as a two-level bitset that grows with the largest id:
// insert and erase in O(1), members visited in increasing id order, the next member found from
// the summary (one bit per 64 ids' word) in O(1 + gap / 4096) word operations. The job book
// (core/policy/job_book.h) keeps its running jobs in these: a planner's victim search walks a few
// hundred of them in id order every search, and a std::set's node per member made that walk (and
// every start and stop of a job) a chain of cache misses. A million ids take 128 KiB.
#pragma once

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <vector>

#include "core/policy/two_level_bits.h"

namespace orrery::core::policy {

class JobIdSet {
 public:
  class Iterator {
   public:
    using iterator_category = std::forward_iterator_tag;
    using value_type = int;
    using difference_type = std::ptrdiff_t;
    using pointer = const int*;
    using reference = int;
    Iterator() = default;
    Iterator(const JobIdSet* set, int at) : set_(set), at_(at) {}
    int operator*() const { return at_; }
    Iterator& operator++() {
      at_ = set_->next(at_ + 1);
      return *this;
    }
    Iterator operator++(int) {
      Iterator old = *this;
      ++*this;
      return old;
    }
    bool operator==(const Iterator& o) const { return at_ == o.at_; }

   private:
    const JobIdSet* set_ = nullptr;
    int at_ = -1;  // -1: the end
  };

  std::size_t size() const { return count_; }
  bool empty() const { return count_ == 0; }
  bool contains(int i) const {
    const auto wi = static_cast<std::size_t>(i) >> 6;
    return i >= 0 && wi < w_.size() && (w_[wi] >> (i & 63) & 1);
  }

  // i >= 0.
  void insert(int i) {
    const auto wi = static_cast<std::size_t>(i) >> 6;
    if (wi >= w_.size()) {
      w_.resize(std::max(wi + 1, 2 * w_.size()), 0);
      s_.resize((w_.size() + 63) / 64, 0);
    }
    const std::uint64_t bit = std::uint64_t{1} << (i & 63);
    if (w_[wi] & bit) return;
    w_[wi] |= bit;
    s_[wi >> 6] |= std::uint64_t{1} << (wi & 63);
    ++count_;
  }

  void erase(int i) {
    if (!contains(i)) return;
    const auto wi = static_cast<std::size_t>(i) >> 6;
    w_[wi] &= ~(std::uint64_t{1} << (i & 63));
    if (w_[wi] == 0) s_[wi >> 6] &= ~(std::uint64_t{1} << (wi & 63));
    --count_;
  }

  // The smallest member >= from, or -1.
  int next(int from) const {
    if (count_ == 0) return -1;
    if (from < 0) from = 0;
    return two_level_next(w_, s_, from);
  }


  Iterator begin() const { return Iterator(this, next(0)); }
  Iterator end() const { return Iterator(this, -1); }

 private:
  std::size_t count_ = 0;
  std::vector<std::uint64_t> w_;  // bit i: i is a member
  std::vector<std::uint64_t> s_;  // bit k: word k of w_ is non-zero
};

}  // namespace orrery::core::policy
