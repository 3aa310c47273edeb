// OutputStore on real files (and in memory): one stream per (job, rank) with a header line per
// incarnation, read by stream offset; segments closed at half the rank's limit keep the newest
// output under the same offsets; a new store over the same directory (a restarted core) goes on
// where the old one stopped; memory is bounded per rank and in all.
#include "core/service/output_store.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "tests/temp_dir.h"

namespace orrery::service {
namespace {

using orrery::testing::read_bytes;
using orrery::testing::TempDir;

std::string all(OutputStore& s, int job, int rank) {
  auto r = s.read(job, rank, 0, kOutputReadMax);
  EXPECT_TRUE(r.ok()) << r.reason();
  return r.ok() ? r->data : "";
}

TEST(OutputStore, HeadersPerIncarnationAndReadsByOffset) {
  TempDir d("output_store");
  OutputStore s(d.path());
  ASSERT_TRUE(s.append(2, 0, 1, "node1", "step 1\nstep 2\npartial"));
  ASSERT_TRUE(s.append(2, 0, 1, "node1", " line\n"));
  ASSERT_TRUE(s.append(2, 0, 3, "node2", "resumed\nhalf"));
  ASSERT_TRUE(s.append(2, 0, 4, "node2", "new\n"));  // a new epoch mid-line starts a new line
  const std::string want =
      "--- epoch 1 on node node1 ---\nstep 1\nstep 2\npartial line\n"
      "--- epoch 3 on node node2 ---\nresumed\nhalf\n"
      "--- epoch 4 on node node2 ---\nnew\n";
  EXPECT_EQ(all(s, 2, 0), want);
  EXPECT_EQ(read_bytes(d.file("job-2/rank-0.log")), want);  // the file a user can tail
  auto r = s.read(2, 0, 10, 5);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->data, want.substr(10, 5));
  EXPECT_EQ(r->next_offset, 15u);
  EXPECT_EQ(r->size, want.size());
  r = s.read(2, 0, 1 << 30, 100);  // past the end: nothing, at the end
  ASSERT_TRUE(r);
  EXPECT_EQ(r->data, "");
  EXPECT_EQ(r->next_offset, want.size());
  r = s.read(2, 1, 0, 100);  // a rank that wrote nothing
  ASSERT_TRUE(r);
  EXPECT_EQ(r->size, 0u);
  EXPECT_FALSE(std::filesystem::exists(d.file("job-2/rank-1.log")));
  EXPECT_FALSE(s.append(-1, 0, 1, "n", "x"));
  EXPECT_FALSE(s.read(0, -3, 0, 10));
}

TEST(OutputStore, KeepsTheNewestOutputUnderStreamOffsets) {
  TempDir d("output_store");
  OutputLimits lim;
  lim.rank_bytes = 200;  // segments of 100 bytes
  OutputStore s(d.path(), lim);
  std::string stream;
  for (int i = 0; i < 40; ++i) {
    std::string line = "line " + std::to_string(i) + "\n";
    ASSERT_TRUE(s.append(0, 0, 1, "n", line));
    stream += (i == 0 ? "--- epoch 1 on node n ---\n" : "") + line;
  }
  auto r = s.read(0, 0, 0, kOutputReadMax);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->size, stream.size());
  EXPECT_EQ(r->next_offset, stream.size());
  const std::uint64_t first = r->next_offset - r->data.size();
  EXPECT_GT(first, 0u);  // the oldest output is gone ...
  EXPECT_LE(r->data.size(), 200u);
  EXPECT_GE(r->data.size(), 100u - 8);  // ... about the newest half of the limit at least is kept
  EXPECT_EQ(r->data, stream.substr(first));
  // A read across the two segments, at the offsets of the whole stream.
  const auto n = static_cast<std::uint32_t>(stream.size() - first - 10);
  r = s.read(0, 0, first + 5, n);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->data, stream.substr(first + 5, n));
  r = s.read(0, 0, 3, 10);  // before the oldest byte kept: from there
  ASSERT_TRUE(r);
  EXPECT_EQ(r->next_offset, first + 10);
  EXPECT_EQ(r->data, stream.substr(first, 10));
  EXPECT_TRUE(std::filesystem::exists(d.file("job-0/rank-0.log.1")));
}

TEST(OutputStore, ARestartedCoreGoesOnWhereItStopped) {
  TempDir d("output_store");
  OutputLimits lim;
  lim.rank_bytes = 100;
  std::string before;
  {
    OutputStore s(d.path(), lim);
    for (int i = 0; i < 10; ++i) ASSERT_TRUE(s.append(1, 3, 2, "node1", "0123456789abcdef\n"));
    auto r = s.read(1, 3, 0, kOutputReadMax);
    ASSERT_TRUE(r);
    before = r->data;
    EXPECT_GT(r->size, 170u);
  }
  OutputStore s(d.path(), lim);
  auto r = s.read(1, 3, 0, kOutputReadMax);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->data, before);
  const auto size = r->size;
  ASSERT_TRUE(s.append(1, 3, 2, "node1", "after\n"));
  r = s.read(1, 3, size, kOutputReadMax);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->data, "--- epoch 2 on node node1 ---\nafter\n");  // said again after the restart
}

TEST(OutputStore, MemoryIsBoundedPerRankAndInAll) {
  OutputLimits lim;
  lim.memory_rank_bytes = 1000;
  lim.memory_total_bytes = 2500;
  OutputStore s("", lim);
  for (int i = 0; i < 100; ++i) ASSERT_TRUE(s.append(0, 0, 1, "n", std::string(50, 'a')));
  auto r = s.read(0, 0, 0, kOutputReadMax);
  ASSERT_TRUE(r);
  EXPECT_LE(r->data.size(), 1000u);
  EXPECT_EQ(r->size, 5000u + std::string("--- epoch 1 on node n ---\n").size());
  EXPECT_EQ(r->data.back(), 'a');
  // Three more ranks write: the total stays within bounds, the rank written least recently loses
  // its bytes first (its offsets stay valid).
  for (int rank = 1; rank <= 3; ++rank) ASSERT_TRUE(s.append(0, rank, 1, "n", std::string(900, 'b')));
  std::uint64_t total = 0;
  for (int rank = 0; rank <= 3; ++rank) total += all(s, 0, rank).size();
  EXPECT_LE(total, 2500u);
  EXPECT_EQ(all(s, 0, 0), "");
  r = s.read(0, 0, 0, 10);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->size, 5000u + std::string("--- epoch 1 on node n ---\n").size());
  EXPECT_EQ(all(s, 0, 3).size(), 900u + std::string("--- epoch 1 on node n ---\n").size());
}

}  // namespace
}  // namespace orrery::service
