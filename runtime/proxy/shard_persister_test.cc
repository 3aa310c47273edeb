// ShardPersister: staged shards become complete, readable files behind the caller's back; the
// staging budget holds; a graceful stop persists what is staged; a failed write is a status.
#include "runtime/proxy/shard_persister.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "runtime/proxy/address_space.h"

namespace orrery::runtime {
namespace {

std::string temp_dir() {
  std::string t = "/tmp/orrery_persister.XXXXXX";
  return ::mkdtemp(t.data());
}

// A one-allocation shard of `n` bytes whose byte i is (i * mul) & 0xff, plus a host state.
StagedShard staged(ShardPersister& p, const std::string& dir, std::int64_t step, int rank,
                   std::uint64_t n, unsigned mul) {
  const char state[] = "rng";
  StagedShard s;
  s.owner = ShardOwner{5, rank, rank, 3, step};
  s.path = shard_file(dir, 5, step, rank);
  s.meta.job = 5;
  s.meta.epoch = 3;
  s.meta.step = step;
  s.meta.rank = rank;
  s.meta.world = 2;
  s.meta.allocs = {{job_window(5), n, 0}};
  s.meta.state_lens = {sizeof state};
  s.size = n + sizeof state;
  s.bytes = p.reserve(s.size);
  EXPECT_NE(s.bytes, nullptr);
  if (s.bytes) {
    for (std::uint64_t i = 0; i < n; ++i) s.bytes[i] = static_cast<char>((i * mul) & 0xff);
    std::memcpy(s.bytes.get() + n, state, sizeof state);
  }
  return s;
}

// The shard at path holds exactly what staged() put in it.
void expect_shard(const std::string& path, std::uint64_t n, unsigned mul) {
  auto r = ShardReader::open(path);
  ASSERT_TRUE(r.ok()) << r.reason();
  ASSERT_EQ(r->meta().allocs.size(), 1u);
  std::vector<char> got(n);
  char st[4];
  ASSERT_TRUE(r->read_next(got.data(), n).ok());
  ASSERT_TRUE(r->read_next(st, sizeof st).ok());
  ASSERT_TRUE(r->finish().ok());
  for (std::uint64_t i = 0; i < n; ++i) {
    ASSERT_EQ(got[i], static_cast<char>((i * mul) & 0xff)) << "byte " << i;
  }
  EXPECT_STREQ(st, "rng");
}

TEST(ShardPersister, PersistsInTheBackgroundAndSaysSo) {
  const std::string dir = temp_dir();
  std::atomic<int> wakes{0};
  ShardPersister p(64 << 20, [&] { wakes.fetch_add(1); });
  p.submit(staged(p, dir, 10, 0, 3 << 20, 7));
  p.submit(staged(p, dir, 10, 1, 1 << 20, 11));
  p.drain();
  auto done = p.take_done();
  ASSERT_EQ(done.size(), 2u);
  EXPECT_EQ(done[0].owner.rank, 0);  // in the order staged
  EXPECT_EQ(done[1].owner.rank, 1);
  for (const auto& d : done) {
    EXPECT_TRUE(d.status.ok()) << d.status.reason();
    EXPECT_EQ(d.bytes, std::filesystem::file_size(d.path));
    EXPECT_EQ(d.owner.step, 10);
    EXPECT_EQ(d.owner.epoch, 3);
  }
  EXPECT_EQ(wakes.load(), 2);
  EXPECT_TRUE(p.take_done().empty());
  EXPECT_EQ(p.staged_bytes(), 0u);
  expect_shard(shard_file(dir, 5, 10, 0), 3 << 20, 7);
  expect_shard(shard_file(dir, 5, 10, 1), 1 << 20, 11);
  EXPECT_FALSE(std::filesystem::exists(shard_file(dir, 5, 10, 0) + ".tmp"));
  std::filesystem::remove_all(dir);
}

TEST(ShardPersister, StagingStaysWithinItsBudget) {
  const std::string dir = temp_dir();
  ShardPersister p(4 << 20, nullptr);
  auto a = p.reserve(3 << 20);
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(p.reserve(2 << 20), nullptr);  // 3 + 2 MiB > 4 MiB: the caller writes in line
  EXPECT_EQ(p.reserve(0), nullptr);
  EXPECT_EQ(p.reserve(5 << 20), nullptr);
  EXPECT_EQ(p.staged_bytes(), 3u << 20);
  p.release(3 << 20);
  EXPECT_EQ(p.staged_bytes(), 0u);
  p.submit(staged(p, dir, 4, 0, (4 << 20) - 4, 1));  // exactly the budget, state included
  EXPECT_EQ(p.reserve(1), nullptr);
  p.drain();
  EXPECT_EQ(p.staged_bytes(), 0u);  // the room comes back once the shard is durable
  EXPECT_NE(p.reserve(1 << 20), nullptr);
  std::filesystem::remove_all(dir);
}

TEST(ShardPersister, AGracefulStopPersistsWhatIsStaged) {
  const std::string dir = temp_dir();
  {
    ShardPersister p(64 << 20, nullptr);
    for (int step = 1; step <= 5; ++step) p.submit(staged(p, dir, step, 0, 1 << 20, step));
  }  // destroyed at once: every staged shard must still land
  for (int step = 1; step <= 5; ++step) expect_shard(shard_file(dir, 5, step, 0), 1 << 20, step);
  std::filesystem::remove_all(dir);
}

TEST(ShardPersister, AFailedWriteIsAStatusAndLeavesNoShard) {
  const std::string dir = temp_dir();
  std::ofstream(dir + "/blocker") << "a file where the job's folder should be";
  ShardPersister p(64 << 20, nullptr);
  StagedShard s = staged(p, dir + "/blocker", 2, 0, 4096, 3);
  const std::string path = s.path;
  p.submit(std::move(s));
  p.drain();
  auto done = p.take_done();
  ASSERT_EQ(done.size(), 1u);
  EXPECT_FALSE(done[0].status.ok());
  EXPECT_NE(done[0].status.reason().find("blocker"), std::string::npos) << done[0].status.reason();
  EXPECT_FALSE(std::filesystem::exists(path));
  EXPECT_EQ(p.staged_bytes(), 0u);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace orrery::runtime
