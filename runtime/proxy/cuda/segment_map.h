// Which physical segments back which device addresses, for a backend whose physical memory comes
// in coarse granules (CUDA's virtual memory management: cuMemCreate/cuMemMap work in multiples of
// the allocation granularity, 2 MiB on current GPUs) while the proxy hands out addresses at
// 64 KiB granules (address_space.h). Pure bookkeeping, no device calls: the CUDA backend asks it
// what to create and what to release, so it is tested on machines without a GPU.
//
// A segment is one physical allocation mapped at one granule-aligned range. Each live range
// (an allocation, or a parked rank's allocation being brought back) references the bytes it
// overlaps in every segment; two ranges may share the granule at their boundary. References are
// counted in bytes, not ranges, so that dropping a run of adjacent allocations at once (the proxy
// parks a rank's adjacent allocations as one range) releases exactly what they took one by one.
// Live ranges never overlap each other. A segment whose last referenced byte is dropped stays
// mapped as *idle*: splicing parks one rank's memory and brings the
// next rank's back at the very same addresses (the same job window), so an idle segment is
// reused at once instead of unmapped and mapped again. The backend releases idle segments when
// memory is freed for good or when it needs room.
#pragma once

#include <cstdint>
#include <map>
#include <vector>

namespace orrery::runtime::cuda {

struct Range {
  std::uint64_t start = 0, size = 0;
  std::uint64_t end() const { return start + size; }
  bool operator==(const Range&) const = default;
};

class SegmentMap {
 public:
  explicit SegmentMap(std::uint64_t granule) : granule_(granule) {}
  std::uint64_t granule() const { return granule_; }

  // The granule-aligned ranges within the hull of [addr, addr + n) that no segment covers yet:
  // what the caller must create and map (one segment per gap) before ref().
  std::vector<Range> gaps(std::uint64_t addr, std::uint64_t n) const;
  // Records a segment the caller has mapped (granule-aligned, overlapping none), unreferenced.
  void add(Range segment);
  // References the bytes of [addr, addr + n) in every segment it overlaps; false (and nothing
  // taken) when part of the range is not covered.
  bool ref(std::uint64_t addr, std::uint64_t n);
  // Drops those references: for the same bytes, in one range or in several.
  void unref(std::uint64_t addr, std::uint64_t n);
  // Idle segments (no reference), in address order; and forgetting one the caller released.
  std::vector<Range> idle() const;
  // Every segment, referenced or not (teardown).
  std::vector<Range> all() const;
  // Idle segments not overlapping the hull of [addr, addr + n): what may be released to make
  // room for that range without undoing what ref() would reuse.
  std::vector<Range> idle_outside(std::uint64_t addr, std::uint64_t n) const;
  void remove(std::uint64_t start);

  std::uint64_t mapped_bytes() const { return mapped_; }
  std::uint64_t idle_bytes() const;
  std::size_t segments() const { return segs_.size(); }
  // Segments within [lo, hi): lets the backend see that a job window is empty.
  bool any_within(std::uint64_t lo, std::uint64_t hi) const;

 private:
  struct Seg {
    std::uint64_t size = 0;
    std::uint64_t refs = 0;  // referenced bytes
  };
  // Adds `sign` x the overlap of [addr, addr + n) to every segment it meets.
  void adjust(std::uint64_t addr, std::uint64_t n, int sign);
  std::uint64_t down(std::uint64_t a) const { return a / granule_ * granule_; }
  std::uint64_t up(std::uint64_t a) const { return (a + granule_ - 1) / granule_ * granule_; }
  // The first segment that ends after `addr`.
  std::map<std::uint64_t, Seg>::const_iterator first_after(std::uint64_t addr) const;

  std::uint64_t granule_;
  std::map<std::uint64_t, Seg> segs_;  // by start address
  std::uint64_t mapped_ = 0;
};

}  // namespace orrery::runtime::cuda
