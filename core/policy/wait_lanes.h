// The waiting jobs a planning round walks, in lanes: one per (class, device type, tenant) in a book
// kept by tenant (a class is the planner's coarse order, e.g. a tier), one per device type
// otherwise (class and tenant 0). A job holds devices of its
// own type only, so jobs of different types never compete for the same devices: a round walks a
// type's lanes only while that type has placements left to try, and a type that is full, or a
// tenant with nothing waiting, costs it nothing.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <set>
#include <utility>
#include <vector>

namespace orrery::core::policy {

// A waiting job's place in the planner's order: smaller first, the job id breaking ties.
using OrderKey = std::array<std::int64_t, 3>;
using WaitEntry = std::pair<OrderKey, int>;

class WaitLanes {
 public:
  // Not copyable: a lane's jobs are pointed to (Lane::jobs) from inside the book.
  WaitLanes() = default;
  WaitLanes(const WaitLanes&) = delete;
  WaitLanes& operator=(const WaitLanes&) = delete;
  WaitLanes(WaitLanes&&) noexcept = default;
  WaitLanes& operator=(WaitLanes&&) noexcept = default;
  void add(std::int64_t cls, std::int64_t dtype, int tenant, const WaitEntry& e);
  void remove(std::int64_t cls, std::int64_t dtype, int tenant, const WaitEntry& e);
  std::int64_t size() const { return size_; }
  // Classes 0 .. classes() - 1 may have lanes.
  std::int64_t classes() const { return static_cast<std::int64_t>(slots_.size()); }

  struct Lane {
    int tenant;
    const std::set<WaitEntry>* jobs;  // valid while the book lives (lanes are never dropped)
  };
  // The non-empty lanes of a class and device type, in no set order (a round merges them by
  // their next job, whose key is unique). Valid until the next add or remove.
  const std::vector<Lane>& lanes(std::int64_t cls, std::int64_t dtype) const;

 private:
  struct TenantLane {
    std::set<WaitEntry> jobs;
    std::size_t at = 0;  // its place in Slot::nonempty while it has jobs
  };
  struct Slot {
    std::map<int, TenantLane> by_tenant;  // nodes never move: Lane::jobs stays valid
    std::vector<Lane> nonempty;           // kept as it changes: a round reads it as it is
    // Moved, never copied, when slots_ grows (a copy's lanes would point into the original).
    Slot() = default;
    Slot(const Slot&) = delete;
    Slot& operator=(const Slot&) = delete;
    Slot(Slot&&) noexcept = default;
    Slot& operator=(Slot&&) noexcept = default;
  };
  std::vector<std::vector<Slot>> slots_;  // [class][dtype], grown on demand
  std::int64_t size_ = 0;
};

}  // namespace orrery::core::policy
