// Splice dedup's bookkeeping (splice_chunks.h) and the chunk hash's host reference
// (chunk_hash.h), on any machine: no device.
#include "runtime/proxy/cuda/splice_chunks.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

namespace orrery::runtime::cuda {
namespace {

std::vector<unsigned char> bytes(std::uint64_t n, unsigned seed) {
  std::vector<unsigned char> v(n);
  for (std::uint64_t i = 0; i < n; ++i) v[i] = static_cast<unsigned char>(i * 131 + seed * 7 + (i >> 9));
  return v;
}

TEST(ChunkHash, DependsOnEveryByteAndItsPosition) {
  const auto a = bytes(kHashChunk, 1);
  const Hash128 h = chunk_hash_host(a.data(), a.size());
  EXPECT_EQ(h, chunk_hash_host(a.data(), a.size()));
  for (std::uint64_t at : {0ul, 7ul, 8ul, 4095ul, kHashChunk / 2, kHashChunk - 1}) {
    auto b = a;
    b[at] ^= 1;  // one bit
    EXPECT_NE(chunk_hash_host(b.data(), b.size()), h) << "a flipped bit at " << at;
  }
  // The same words in another order (two 8-byte words swapped; two threads' words swapped).
  auto c = a;
  std::swap_ranges(c.begin(), c.begin() + 8, c.begin() + 8);
  EXPECT_NE(chunk_hash_host(c.data(), c.size()), h);
  auto d = a;
  std::swap_ranges(d.begin(), d.begin() + 8, d.begin() + 8 * kHashThreads);
  EXPECT_NE(chunk_hash_host(d.data(), d.size()), h);
  // All zeros of two lengths differ (the length is part of the value).
  std::vector<unsigned char> z(kHashChunk, 0);
  EXPECT_NE(chunk_hash_host(z.data(), 65536), chunk_hash_host(z.data(), 131072));
  EXPECT_NE(chunk_hash_host(z.data(), 65536).a, chunk_hash_host(z.data(), 65536).b);
}

ParkedRange range_of(std::uint64_t addr, const std::vector<unsigned char>& data) {
  ParkedRange r{addr, data.size(), std::vector<ParkedChunk>(chunk_count(data.size()))};
  for (std::uint64_t c = 0; c < r.chunks.size(); ++c) {
    r.chunks[c].bytes = const_cast<unsigned char*>(data.data()) + c * kHashChunk;
    r.chunks[c].hash = chunk_hash_host(r.chunks[c].bytes, chunk_bytes(data.size(), c));
  }
  return r;
}

TEST(ParkedIndex, FindsAnEqualChunkOfARangeAtTheSameAddressAndSize) {
  const std::uint64_t n = 3 * kHashChunk + 65536;
  const auto a = bytes(n, 1);
  auto b = a;
  b[kHashChunk + 5] ^= 0xff;  // chunk 1 differs
  const ParkedRange ra = range_of(1 << 30, a);
  ParkedIndex idx;
  idx.add(&ra);
  const ParkedRange rb = range_of(1 << 30, b);
  EXPECT_EQ(idx.find(1 << 30, n, 0, rb.chunks[0].hash), &ra.chunks[0]);
  EXPECT_EQ(idx.find(1 << 30, n, 1, rb.chunks[1].hash), nullptr);
  EXPECT_EQ(idx.find(1 << 30, n, 3, rb.chunks[3].hash), &ra.chunks[3]) << "the short last chunk";
  EXPECT_EQ(idx.find(1 << 30, n + 65536, 0, rb.chunks[0].hash), nullptr) << "another size";
  EXPECT_EQ(idx.find((1 << 30) + 65536, n, 0, rb.chunks[0].hash), nullptr) << "another address";
  idx.remove(&ra);
  EXPECT_EQ(idx.find(1 << 30, n, 0, rb.chunks[0].hash), nullptr);
  EXPECT_EQ(idx.ranges(), 0u);
}

TEST(DeviceContent, IsForgottenWhereverTouched) {
  DeviceContent dc;
  dc.set(1000, 500, {Hash128{1, 2}});
  dc.set(2000, 500, {Hash128{3, 4}});
  ASSERT_NE(dc.find(1000, 500), nullptr);
  EXPECT_EQ(dc.find(1000, 400), nullptr) << "only the exact range";
  dc.forget(1499, 1);  // the last byte of the first range
  EXPECT_EQ(dc.find(1000, 500), nullptr);
  ASSERT_NE(dc.find(2000, 500), nullptr);
  dc.forget(1500, 500);  // ends where the second begins: untouched
  EXPECT_NE(dc.find(2000, 500), nullptr);
  dc.set(1900, 200, {Hash128{5, 6}});  // overlaps the second: it goes
  EXPECT_EQ(dc.find(2000, 500), nullptr);
  EXPECT_EQ(dc.ranges(), 1u);
}

TEST(CopyRuns, CoalesceChunksContiguousOnBothSides) {
  const std::uint64_t n = 5 * kHashChunk + 4096;
  auto a = bytes(n, 1);
  ParkedRange r = range_of(0, a);
  // Chunk 3's bytes live elsewhere (shared with another rank): it breaks the host contiguity.
  std::vector<unsigned char> other(kHashChunk);
  r.chunks[3].bytes = other.data();
  const std::vector<bool> all(r.chunks.size(), true);
  auto runs = copy_runs(r, all);
  ASSERT_EQ(runs.size(), 3u);
  EXPECT_EQ(runs[0].first, 0u);
  EXPECT_EQ(runs[0].count, 3u);
  EXPECT_EQ(runs[0].bytes, 3 * kHashChunk);
  EXPECT_EQ(runs[1].first, 3u);
  EXPECT_EQ(runs[1].host, other.data());
  EXPECT_EQ(runs[2].first, 4u);
  EXPECT_EQ(runs[2].bytes, kHashChunk + 4096) << "the short last chunk";
  // Skipped chunks split runs; nothing to copy gives no run.
  runs = copy_runs(r, {true, false, true, false, false, true});
  ASSERT_EQ(runs.size(), 3u);
  EXPECT_EQ(runs[1].first, 2u);
  EXPECT_TRUE(copy_runs(r, std::vector<bool>(r.chunks.size(), false)).empty());
}

}  // namespace
}  // namespace orrery::runtime::cuda
