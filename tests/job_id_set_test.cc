// JobIdSet (core/policy/job_id_set.h) against std::set<int>: the same members, in the same order,
// under random inserts and erases over a growing id range.
#include "core/policy/job_id_set.h"

#include <gtest/gtest.h>

#include <random>
#include <set>
#include <vector>

namespace orrery::core::policy {
namespace {

std::vector<int> members(const JobIdSet& s) { return std::vector<int>(s.begin(), s.end()); }

TEST(JobIdSet, EmptyAndSingle) {
  JobIdSet s;
  EXPECT_TRUE(s.empty());
  EXPECT_EQ(s.begin(), s.end());
  EXPECT_EQ(s.next(0), -1);
  s.erase(5);  // absent: nothing
  s.insert(70000);
  EXPECT_EQ(s.size(), 1u);
  EXPECT_TRUE(s.contains(70000));
  EXPECT_FALSE(s.contains(69999));
  EXPECT_FALSE(s.contains(1 << 30));
  EXPECT_EQ(s.next(0), 70000);
  EXPECT_EQ(s.next(70001), -1);
  EXPECT_EQ(members(s), std::vector<int>{70000});
  s.insert(70000);  // twice: once
  EXPECT_EQ(s.size(), 1u);
  s.erase(70000);
  EXPECT_TRUE(s.empty());
  EXPECT_EQ(s.next(0), -1);
}

TEST(JobIdSet, MatchesAStdSetUnderRandomInsertsAndErases) {
  for (std::uint64_t seed = 1; seed <= 20; ++seed) {
    std::mt19937_64 rng(seed);
    JobIdSet s;
    std::set<int> ref;
    // Ids clustered like a simulation's running jobs: a window moving up a growing range, and a
    // few old ones far below it.
    int top = 100;
    for (int step = 0; step < 20000; ++step) {
      top += static_cast<int>(rng() % 3);
      const bool old = rng() % 16 == 0;
      const int lo = old ? 0 : std::max(0, top - 5000);
      const int id = lo + static_cast<int>(rng() % static_cast<std::uint64_t>(top - lo));
      if (rng() % 2) {
        s.insert(id);
        ref.insert(id);
      } else {
        s.erase(id);
        ref.erase(id);
      }
      if (step % 997 == 0) {
        ASSERT_EQ(s.size(), ref.size()) << "seed " << seed << " step " << step;
        ASSERT_EQ(members(s), std::vector<int>(ref.begin(), ref.end())) << "seed " << seed;
        const int from = static_cast<int>(rng() % static_cast<std::uint64_t>(top + 100));
        auto it = ref.lower_bound(from);
        EXPECT_EQ(s.next(from), it == ref.end() ? -1 : *it) << "seed " << seed << " from " << from;
      }
      ASSERT_EQ(s.contains(id), ref.count(id) == 1);
    }
  }
}

}  // namespace
}  // namespace orrery::core::policy
