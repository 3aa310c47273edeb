// The CUDA backend's physical-segment bookkeeping (segment_map.h), on any machine: no device.
#include "runtime/proxy/cuda/segment_map.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>

namespace orrery::runtime::cuda {
namespace {

constexpr std::uint64_t G = 2u << 20;   // the CUDA allocation granularity on H100
constexpr std::uint64_t K64 = 64u << 10;  // the proxy's allocation granule
constexpr std::uint64_t W = 1ull << 36;   // a job window's base

// Maps every gap as the backend does, then takes the references.
void map_and_ref(SegmentMap& m, std::uint64_t addr, std::uint64_t n) {
  for (const Range& g : m.gaps(addr, n)) m.add(g);
  ASSERT_TRUE(m.ref(addr, n));
}

TEST(SegmentMap, SmallAllocationsShareOneGranule) {
  SegmentMap m(G);
  EXPECT_EQ(m.gaps(W, K64), (std::vector<Range>{{W, G}}));
  map_and_ref(m, W, K64);
  // The next 64 KiB allocation lies in the same granule: nothing to map.
  EXPECT_TRUE(m.gaps(W + K64, K64).empty());
  map_and_ref(m, W + K64, K64);
  EXPECT_EQ(m.segments(), 1u);
  EXPECT_EQ(m.mapped_bytes(), G);
  m.unref(W, K64);
  EXPECT_TRUE(m.idle().empty()) << "the second allocation still holds the granule";
  m.unref(W + K64, K64);
  EXPECT_EQ(m.idle(), (std::vector<Range>{{W, G}}));
}

TEST(SegmentMap, AnAllocationAcrossASegmentsEndMapsOnlyWhatIsMissing) {
  SegmentMap m(G);
  map_and_ref(m, W, G - K64);                // granule 0
  const std::uint64_t a = W + G - K64;       // starts in granule 0, ends in granule 3
  EXPECT_EQ(m.gaps(a, 3 * G), (std::vector<Range>{{W + G, 3 * G}}));
  map_and_ref(m, a, 3 * G);
  EXPECT_EQ(m.segments(), 2u);
  m.unref(W, G - K64);
  EXPECT_TRUE(m.idle().empty()) << "granule 0 is shared with the second allocation";
  m.unref(a, 3 * G);
  EXPECT_EQ(m.idle_bytes(), 4 * G);
}

TEST(SegmentMap, ParkedRangesComeBackOntoTheirIdleSegments) {
  SegmentMap m(G);
  map_and_ref(m, W, 5 * G + K64);  // rank A resident
  m.unref(W, 5 * G + K64);         // A parked: the segments stay mapped, idle
  EXPECT_EQ(m.idle_bytes(), 6 * G);
  // Rank B of the same job: the same addresses, nothing to map.
  EXPECT_TRUE(m.gaps(W, 5 * G + K64).empty());
  ASSERT_TRUE(m.ref(W, 5 * G + K64));
  EXPECT_TRUE(m.idle().empty());
  // A range larger than the idle segments: only the tail is new.
  m.unref(W, 5 * G + K64);
  EXPECT_EQ(m.gaps(W, 7 * G), (std::vector<Range>{{W + 6 * G, G}}));
}

// The proxy parks a rank's adjacent allocations as one run: dropping the run must release what
// the allocations took one by one (a reference per range would leave the segment held for good).
TEST(SegmentMap, ARunOfAdjacentAllocationsIsDroppedAtOnce) {
  SegmentMap m(G);
  for (int i = 0; i < 7; ++i) map_and_ref(m, W + i * K64, K64);  // seven buffers, one granule
  map_and_ref(m, W + 7 * K64, 3 * G);                            // and a large one after them
  m.unref(W, 7 * K64 + 3 * G);                                   // parked as one range
  EXPECT_EQ(m.idle_bytes(), m.mapped_bytes());
  EXPECT_EQ(m.idle().size(), m.segments());
  // Brought back as one range, then freed one by one: idle again.
  ASSERT_TRUE(m.ref(W, 7 * K64 + 3 * G));
  EXPECT_TRUE(m.idle().empty());
  for (int i = 0; i < 7; ++i) m.unref(W + i * K64, K64);
  EXPECT_TRUE(m.idle().empty()) << "the large buffer still holds both segments";
  m.unref(W + 7 * K64, 3 * G);
  EXPECT_EQ(m.idle_bytes(), m.mapped_bytes());
}

TEST(SegmentMap, RefRefusesAnUncoveredRangeAndTakesNothing) {
  SegmentMap m(G);
  map_and_ref(m, W, G);
  EXPECT_FALSE(m.ref(W, 2 * G));
  m.unref(W, G);
  EXPECT_EQ(m.idle_bytes(), G) << "the failed ref must not have taken a reference";
}

TEST(SegmentMap, IdleOutsideKeepsWhatTheNextRangeReuses) {
  SegmentMap m(G);
  map_and_ref(m, W, G);
  map_and_ref(m, W + 4 * G, G);
  m.unref(W, G);
  m.unref(W + 4 * G, G);
  EXPECT_EQ(m.idle_outside(W + 4 * G + K64, K64), (std::vector<Range>{{W, G}}));
  m.remove(W);
  EXPECT_EQ(m.mapped_bytes(), G);
  EXPECT_TRUE(m.any_within(W, W + 8 * G));
  m.remove(W + 4 * G);
  EXPECT_FALSE(m.any_within(W, W + 8 * G));
  EXPECT_EQ(m.segments(), 0u);
}

// Random allocate/free/park/unpark sequences against a per-granule reference count.
TEST(SegmentMap, RandomSequencesMatchAPerGranuleModel) {
  std::mt19937_64 rng(7);
  for (int round = 0; round < 200; ++round) {
    SegmentMap m(G);
    std::map<std::uint64_t, int> refs;  // granule -> live ranges touching it (the model)
    std::vector<Range> live;
    std::uint64_t next = W;
    for (int op = 0; op < 60; ++op) {
      if (!live.empty() && rng() % 5 == 0) {
        // Splicing: the whole run of adjacent live ranges parked as one range and brought back
        // as one; nothing the model sees changes, and nothing may be released in between.
        std::vector<Range> sorted = live;
        std::sort(sorted.begin(), sorted.end(),
                  [](const Range& a, const Range& b) { return a.start < b.start; });
        std::uint64_t lo = sorted[0].start, hi = sorted[0].end();
        for (std::size_t i = 1; i < sorted.size() && sorted[i].start == hi; ++i) hi = sorted[i].end();
        m.unref(lo, hi - lo);
        ASSERT_TRUE(m.gaps(lo, hi - lo).empty()) << "a parked run's segments stay mapped";
        ASSERT_TRUE(m.ref(lo, hi - lo));
      } else if (live.empty() || rng() % 3 != 0) {
        const Range r{next, (1 + rng() % 80) * K64};
        next += r.size;  // the proxy's bump allocator never reuses an address of its window
        map_and_ref(m, r.start, r.size);
        for (std::uint64_t g = r.start / G; g * G < r.end(); ++g) ++refs[g];
        live.push_back(r);
      } else {
        const std::size_t i = rng() % live.size();
        const Range r = live[i];
        live.erase(live.begin() + static_cast<long>(i));
        m.unref(r.start, r.size);
        for (std::uint64_t g = r.start / G; g * G < r.end(); ++g) --refs[g];
        if (rng() % 2 == 0) {
          for (const Range& s : m.idle()) m.remove(s.start);
        }
      }
      // Every granule a live range touches is mapped; an unreferenced granule is idle or gone.
      for (const auto& [g, n] : refs) {
        if (n > 0) {
          ASSERT_TRUE(m.gaps(g * G, G).empty()) << "granule " << g << " of a live range unmapped";
        }
      }
      std::uint64_t idle_model = 0;
      for (const Range& s : m.idle()) {
        for (std::uint64_t g = s.start / G; g * G < s.end(); ++g) {
          ASSERT_EQ(refs[g], 0) << "an idle segment holds granule " << g << " of a live range";
        }
        idle_model += s.size;
      }
      ASSERT_EQ(idle_model, m.idle_bytes());
    }
  }
}

}  // namespace
}  // namespace orrery::runtime::cuda
