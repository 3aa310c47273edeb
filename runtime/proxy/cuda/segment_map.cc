#include "runtime/proxy/cuda/segment_map.h"

#include <algorithm>
#include <cassert>

namespace orrery::runtime::cuda {

std::map<std::uint64_t, SegmentMap::Seg>::const_iterator SegmentMap::first_after(
    std::uint64_t addr) const {
  auto it = segs_.upper_bound(addr);
  if (it != segs_.begin()) {
    auto prev = std::prev(it);
    if (prev->first + prev->second.size > addr) return prev;
  }
  return it;
}

std::vector<Range> SegmentMap::gaps(std::uint64_t addr, std::uint64_t n) const {
  std::vector<Range> out;
  std::uint64_t at = down(addr);
  const std::uint64_t hi = up(addr + n);
  for (auto it = first_after(at); at < hi; ++it) {
    const std::uint64_t next = it == segs_.end() ? hi : std::min(hi, it->first);
    if (next > at) out.push_back({at, next - at});
    if (it == segs_.end()) break;
    at = std::max(at, it->first + it->second.size);
  }
  return out;
}

void SegmentMap::add(Range s) {
  assert(s.start % granule_ == 0 && s.size % granule_ == 0 && s.size > 0);
  assert(gaps(s.start, s.size) == std::vector<Range>{s});
  segs_[s.start] = Seg{s.size, 0};
  mapped_ += s.size;
}

void SegmentMap::adjust(std::uint64_t addr, std::uint64_t n, int sign) {
  const std::uint64_t end = addr + n;
  for (auto it = segs_.find(first_after(addr)->first); it != segs_.end() && it->first < end; ++it) {
    const std::uint64_t lo = std::max(addr, it->first);
    const std::uint64_t hi = std::min(end, it->first + it->second.size);
    if (sign > 0) {
      it->second.refs += hi - lo;
    } else {
      assert(it->second.refs >= hi - lo);
      it->second.refs -= hi - lo;
    }
  }
}

bool SegmentMap::ref(std::uint64_t addr, std::uint64_t n) {
  if (n == 0) return true;
  if (!gaps(addr, n).empty()) return false;
  adjust(addr, n, +1);
  return true;
}

void SegmentMap::unref(std::uint64_t addr, std::uint64_t n) {
  if (n == 0 || first_after(addr) == segs_.end()) return;
  adjust(addr, n, -1);
}

std::vector<Range> SegmentMap::idle() const {
  std::vector<Range> out;
  for (const auto& [start, s] : segs_) {
    if (s.refs == 0) out.push_back({start, s.size});
  }
  return out;
}

std::vector<Range> SegmentMap::all() const {
  std::vector<Range> out;
  for (const auto& [start, s] : segs_) out.push_back({start, s.size});
  return out;
}

std::vector<Range> SegmentMap::idle_outside(std::uint64_t addr, std::uint64_t n) const {
  const std::uint64_t lo = down(addr), hi = up(addr + n);
  std::vector<Range> out;
  for (const Range& r : idle()) {
    if (r.end() <= lo || r.start >= hi) out.push_back(r);
  }
  return out;
}

void SegmentMap::remove(std::uint64_t start) {
  auto it = segs_.find(start);
  if (it == segs_.end()) return;
  assert(it->second.refs == 0);
  mapped_ -= it->second.size;
  segs_.erase(it);
}

std::uint64_t SegmentMap::idle_bytes() const {
  std::uint64_t b = 0;
  for (const auto& [start, s] : segs_) {
    if (s.refs == 0) b += s.size;
  }
  return b;
}

bool SegmentMap::any_within(std::uint64_t lo, std::uint64_t hi) const {
  auto it = segs_.lower_bound(lo);
  return it != segs_.end() && it->first < hi;
}

}  // namespace orrery::runtime::cuda
