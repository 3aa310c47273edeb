// The core's change feed: which devices and nodes its commits touched, for planners that keep
// their own indexes of the state (core/policy/free_device_index.h) and must catch up with every
// commit — a planner's own, an operator's, a runtime report's — without rescanning the fleet.
//
// Every job commit whose effect changed the job's held device set records each device the job
// held before and holds after, and one that changed its move's target (a Migrate or resize
// reserving the target's new devices) each device targeted before and after (together a superset
// of the devices whose owner or reservation changed: the effects change owners and reservations
// only on those); a job commit that changed the job's
// reservation generation records the job (the reservations made for it ended: spec::reserved
// changes on devices no commit touched); every node commit records its node.
// Entries are numbered from 0 in commit order. A reader remembers end() after it has read the
// state, and later visits the entries since then with since(); only the last kCapacity entries
// are kept, so a reader that fell further behind is told so and must rebuild from the state.
//
// Not part of the spec's state and never journaled: replaying a journal records the same entries
// again, and a reader built after recovery starts from end().
#pragma once

#include <cstdint>
#include <vector>

#include "spec/vocabulary.h"

namespace orrery::core {

class ChangeFeed {
 public:
  static constexpr std::size_t kCapacity = std::size_t{1} << 16;

  // Entries recorded so far (the number of the next one).
  std::uint64_t end() const { return end_; }

  void device(int dev) { put(dev); }
  void node(int n) { put(-1 - n); }
  void job(int j) { put(kJobBase + j); }

  // Visits the entries [from, end()) in order: on_device(dev), on_node(node) or on_job(job).
  // False, visiting nothing, when some of them are no longer kept (from < end() - kCapacity) or
  // from > end().
  template <class OnDevice, class OnNode, class OnJob>
  bool since(std::uint64_t from, OnDevice&& on_device, OnNode&& on_node, OnJob&& on_job) const {
    if (from > end_ || end_ - from > ring_.size()) return false;
    for (std::uint64_t i = from; i < end_; ++i) {
      const std::int32_t e = ring_[static_cast<std::size_t>(i % kCapacity)];
      if (e < 0)
        on_node(static_cast<int>(-1 - e));
      else if (e < kJobBase)
        on_device(static_cast<int>(e));
      else
        on_job(static_cast<int>(e - kJobBase));
    }
    return true;
  }

 private:
  // Device ids are below the fleet limit; job ids are stored above it.
  static constexpr std::int32_t kJobBase = static_cast<std::int32_t>(spec::kMaxFleetDevices);

  void put(std::int32_t e) {
    // The ring grows to kCapacity on demand, so a small core (tests) keeps a small one.
    if (ring_.size() < kCapacity)
      ring_.push_back(e);
    else
      ring_[static_cast<std::size_t>(end_ % kCapacity)] = e;
    ++end_;
  }

  std::vector<std::int32_t> ring_;
  std::uint64_t end_ = 0;
};

}  // namespace orrery::core
