// OutputTail on real files in a temporary directory: bytes appended after a take come with the
// next one, a file that appears late is read from its first byte, the budget is shared fairly and
// never exceeded (and a huge one reads only what is there), an ended incarnation's files are dropped only once read to their end.
#include "runtime/node/output_tail.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <tuple>

#include "tests/temp_dir.h"

namespace orrery::runtime {
namespace {

using orrery::testing::TempDir;

void append(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::app) << bytes;
}

// (job, epoch, rank) -> the concatenated data of `chunks`.
std::map<std::tuple<int, std::int64_t, int>, std::string> by_file(const std::vector<OutputChunk>& chunks) {
  std::map<std::tuple<int, std::int64_t, int>, std::string> out;
  for (const auto& c : chunks) out[{c.job, c.epoch, c.rank}] += c.data;
  return out;
}

std::tuple<int, std::int64_t, int> key(int job, std::int64_t epoch, int rank) { return {job, epoch, rank}; }

std::size_t total(const std::vector<OutputChunk>& chunks) {
  std::size_t n = 0;
  for (const auto& c : chunks) n += c.data.size();
  return n;
}

TEST(OutputTail, NewBytesOnceEachInOrder) {
  TempDir d("output_tail");
  OutputTail t;
  const auto p = d.file("job-1-epoch-2-rank-0.log");
  append(p, "hello\n");
  t.add(1, 2, 0, p);
  auto c = t.take(1 << 20);
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].job, 1);
  EXPECT_EQ(c[0].epoch, 2);
  EXPECT_EQ(c[0].rank, 0);
  EXPECT_EQ(c[0].data, "hello\n");
  EXPECT_TRUE(t.take(1 << 20).empty());  // nothing new
  append(p, "world");
  append(p, "!\n");
  c = t.take(1 << 20);
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].data, "world!\n");
  EXPECT_TRUE(t.take(0).empty());
}

// A take's budget is a ceiling, not a size to allocate: the node runtime polls with large budgets
// many times a second, and allocating (and zeroing) the budget per file per take once cost the
// workers a third of their CPU on a small machine. A budget no memory could hold must work.
TEST(OutputTail, AHugeBudgetReadsOnlyWhatTheFilesHold) {
  TempDir d("output_tail");
  OutputTail t;
  const auto a = d.file("job-1-epoch-1-rank-0.log");
  const auto b = d.file("job-1-epoch-1-rank-1.log");
  append(a, "alpha\n");
  append(b, "beta\n");
  t.add(1, 1, 0, a);
  t.add(1, 1, 1, b);
  const std::size_t huge = std::size_t{1} << 50;
  auto got = by_file(t.take(huge));
  EXPECT_EQ(got[key(1, 1, 0)], "alpha\n");
  EXPECT_EQ(got[key(1, 1, 1)], "beta\n");
  EXPECT_TRUE(t.take(huge).empty());
  append(b, "gamma\n");
  got = by_file(t.take(huge));
  EXPECT_EQ(got.size(), 1u);
  EXPECT_EQ(got[key(1, 1, 1)], "gamma\n");
}

TEST(OutputTail, FileThatAppearsLateIsReadFromItsStart) {
  TempDir d("output_tail");
  OutputTail t;
  const auto p = d.file("late.log");
  t.add(3, 1, 5, p);
  EXPECT_TRUE(t.take(100).empty());
  append(p, "first line\n");
  auto c = t.take(100);
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].data, "first line\n");
  EXPECT_EQ(c[0].rank, 5);
}

TEST(OutputTail, BudgetIsNeverExceededAndSharedFairly) {
  TempDir d("output_tail");
  OutputTail t;
  const auto chatty = d.file("chatty.log"), quiet = d.file("quiet.log");
  append(chatty, std::string(10000, 'c'));
  append(quiet, "q1\n");
  t.add(1, 1, 0, chatty);  // the older file
  t.add(1, 1, 1, quiet);
  auto c = t.take(1000);
  EXPECT_EQ(total(c), 1000u);
  auto f = by_file(c);
  EXPECT_EQ(f[key(1, 1, 1)], "q1\n");  // the chatty rank does not hold the quiet one back
  EXPECT_EQ(f[key(1, 1, 0)], std::string(997, 'c'));
  ASSERT_EQ(c.size(), 2u);
  EXPECT_EQ(c[0].rank, 0);  // oldest file first
  // Two chatty files share a small budget evenly.
  append(quiet, std::string(10000, 'q'));
  c = t.take(100);
  f = by_file(c);
  EXPECT_EQ(f[key(1, 1, 0)].size(), 50u);
  EXPECT_EQ(f[key(1, 1, 1)].size(), 50u);
  // The rest comes, whole and in order, over later takes.
  std::string rest_c = std::string(997 + 50, 'c'), rest_q = "q1\n" + std::string(50, 'q');
  for (int i = 0; i < 100; ++i) {
    auto more = by_file(t.take(777));
    rest_c += more[key(1, 1, 0)];
    rest_q += more[key(1, 1, 1)];
  }
  EXPECT_EQ(rest_c, std::string(10000, 'c'));
  EXPECT_EQ(rest_q, "q1\n" + std::string(10000, 'q'));
}

TEST(OutputTail, FinishedFilesAreDroppedOnceReadToTheEnd) {
  TempDir d("output_tail");
  OutputTail t;
  const auto a = d.file("a.log"), b = d.file("b.log"), never = d.file("never.log");
  append(a, std::string(300, 'a'));
  append(b, "still running\n");
  t.add(7, 1, 0, a);
  t.add(7, 1, 1, never);  // its worker never wrote a byte
  t.add(8, 1, 0, b);
  t.finish(7, 1);
  EXPECT_EQ(t.files(), 3u);
  auto c = by_file(t.take(100));  // not all of a yet: a stays
  EXPECT_EQ(t.files(), 2u);       // never.log is gone
  EXPECT_EQ(c[key(8, 1, 0)], "still running\n");
  std::string got = c[key(7, 1, 0)];
  while (t.files() > 1) got += by_file(t.take(100))[key(7, 1, 0)];
  EXPECT_EQ(got, std::string(300, 'a'));  // a is dropped only after its last byte went out
  append(b, "more\n");
  EXPECT_EQ(by_file(t.take(100))[key(8, 1, 0)], "more\n");  // the running incarnation is still followed
  EXPECT_EQ(t.files(), 1u);
}

TEST(OutputTail, AddingAgainKeepsTheOffsetAndARemovedFileIsReadToItsEnd) {
  TempDir d("output_tail");
  OutputTail t;
  const auto p = d.file("x.log");
  append(p, "one\n");
  t.add(1, 1, 0, p);
  EXPECT_EQ(t.take(100).at(0).data, "one\n");
  t.add(1, 1, 0, p);
  EXPECT_EQ(t.files(), 1u);
  append(p, "two\n");
  std::filesystem::remove(p);  // the descriptor stays open
  auto c = t.take(100);
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].data, "two\n");
}

}  // namespace
}  // namespace orrery::runtime
