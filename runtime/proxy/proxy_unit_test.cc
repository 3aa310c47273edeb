// Unit tests of the proxy's parts that need no second process: checksums, shards, kernels'
// argument checks, the collective's rank-ordered sum, the host backend's fixed addresses.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "base/crc32c.h"
#include "runtime/proxy/address_space.h"
#include "runtime/proxy/collective.h"
#include "runtime/proxy/crc32c_fast.h"
#include "runtime/proxy/host_backend.h"
#include "runtime/proxy/kernels.h"
#include "runtime/proxy/shard.h"

namespace orrery::runtime {
namespace {

std::string temp_dir() {
  std::string t = "/tmp/orrery_proxy_unit.XXXXXX";
  return ::mkdtemp(t.data());
}

TEST(ProxyCrc32c, SameAsTheJournals) {
  std::string data(100'003, '\0');
  for (std::size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>(i * 131 + 7);
  for (std::size_t n : {0ul, 1ul, 7ul, 8ul, 9ul, 4096ul, 100'003ul}) {
    EXPECT_EQ(crc32c_fast_extend(0, data.data(), n), crc32c(std::string_view(data.data(), n)))
        << n;
  }
  const std::uint32_t a = crc32c_fast_extend(0, data.data(), 1000);
  EXPECT_EQ(crc32c_fast_extend(a, data.data() + 1000, 5000),
            crc32c(std::string_view(data.data(), 6000)));
}

TEST(ProxyShard, RoundTripAndCorruptionIsAClearError) {
  const std::string dir = temp_dir();
  const std::string path = shard_file(dir, 7, 12, 3);
  std::vector<unsigned char> a(65536), b(131072);
  for (std::size_t i = 0; i < a.size(); ++i) a[i] = static_cast<unsigned char>(i);
  for (std::size_t i = 0; i < b.size(); ++i) b[i] = static_cast<unsigned char>(i * 3);
  const char state[] = "host state";
  ShardMeta m;
  m.job = 7;
  m.epoch = 2;
  m.step = 12;
  m.rank = 3;
  m.world = 4;
  m.next_offset = 196608;
  m.alloc_seq = 2;
  m.allocs = {{job_window(7), a.size(), 0}, {job_window(7) + a.size(), b.size(), 1}};
  m.state_lens = {sizeof state};
  {
    auto w = ShardWriter::open(path, m);
    ASSERT_TRUE(w.ok()) << w.reason();
    ASSERT_TRUE(w->append(a.data(), a.size()).ok());
    ASSERT_TRUE(w->append(b.data(), b.size()).ok());
    ASSERT_TRUE(w->append(state, sizeof state).ok());
    ASSERT_TRUE(w->finish().ok());
  }

  auto r = ShardReader::open(path);
  ASSERT_TRUE(r.ok()) << r.reason();
  EXPECT_EQ(r->meta().allocs.size(), 2u);
  EXPECT_EQ(r->meta().allocs[1].addr, job_window(7) + a.size());
  std::vector<unsigned char> a2(a.size()), b2(b.size());
  char s2[sizeof state];
  ASSERT_TRUE(r->read_next(a2.data(), a2.size()).ok());
  ASSERT_TRUE(r->read_next(b2.data(), b2.size()).ok());
  ASSERT_TRUE(r->read_next(s2, sizeof s2).ok());
  ASSERT_TRUE(r->finish().ok());
  EXPECT_EQ(a, a2);
  EXPECT_EQ(b, b2);
  EXPECT_STREQ(s2, state);

  {  // flip one payload byte
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(5000);
    f.put('\x5a');
  }
  auto c = ShardReader::open(path);
  ASSERT_TRUE(c.ok());
  ASSERT_TRUE(c->read_next(a2.data(), a2.size()).ok());
  ASSERT_TRUE(c->read_next(b2.data(), b2.size()).ok());
  ASSERT_TRUE(c->read_next(s2, sizeof s2).ok());
  Status st = c->finish();
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.reason().find("checksum mismatch"), std::string::npos) << st.reason();
  EXPECT_NE(st.reason().find(path), std::string::npos);

  std::filesystem::resize_file(path, 100);
  auto t = ShardReader::open(path);
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.reason().find("corrupt"), std::string::npos) << t.reason();
  std::filesystem::remove_all(dir);
}

TEST(ProxyShard, AStreamedShardIsAllOrNothing) {
  const std::string dir = temp_dir();
  const std::string path = shard_file(dir, 9, 4, 0);
  ShardMeta m;
  m.job = 9;
  m.step = 4;
  m.world = 1;
  m.allocs = {{job_window(9), 3 * 65536, 0}};
  m.state_lens = {5};
  std::vector<unsigned char> bytes(3 * 65536);
  for (std::size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<unsigned char>(i * 7);
  {
    // Streamed in uneven pieces, as a backend's chunks come.
    auto w = ShardWriter::open(path, m);
    ASSERT_TRUE(w.ok()) << w.reason();
    ASSERT_TRUE(w->append(bytes.data(), 1000).ok());
    ASSERT_TRUE(w->append(bytes.data() + 1000, bytes.size() - 1000).ok());
    Status more = w->append("123456", 6);  // one byte more than the table announces
    EXPECT_FALSE(more.ok());
    EXPECT_NE(more.reason().find("more bytes than its table announces"), std::string::npos);
    ASSERT_TRUE(w->append("state", 5).ok());
    auto n = w->finish();
    ASSERT_TRUE(n.ok()) << n.reason();
    EXPECT_EQ(*n, std::filesystem::file_size(path));
  }
  auto r = ShardReader::open(path);
  ASSERT_TRUE(r.ok()) << r.reason();
  std::vector<unsigned char> back(bytes.size());
  char state[5];
  ASSERT_TRUE(r->read_next(back.data(), back.size()).ok());
  ASSERT_TRUE(r->read_next(state, 5).ok());
  ASSERT_TRUE(r->finish().ok());
  EXPECT_EQ(back, bytes);
  EXPECT_EQ(std::string(state, 5), "state");

  // Short of what it announced: finish() refuses, and neither the shard nor its temporary
  // file is left (a shard that exists is complete).
  const std::string short_path = shard_file(dir, 9, 5, 0);
  {
    auto w = ShardWriter::open(short_path, m);
    ASSERT_TRUE(w.ok());
    ASSERT_TRUE(w->append(bytes.data(), 100).ok());
    auto n = w->finish();
    ASSERT_FALSE(n.ok());
    EXPECT_NE(n.reason().find("announced"), std::string::npos) << n.reason();
  }
  // Abandoned midway (a backend's stream failed): destroyed without finish().
  const std::string abandoned = shard_file(dir, 9, 6, 0);
  {
    auto w = ShardWriter::open(abandoned, m);
    ASSERT_TRUE(w.ok());
    ASSERT_TRUE(w->append(bytes.data(), 100).ok());
  }
  for (const auto& p : {short_path, abandoned}) {
    EXPECT_FALSE(std::filesystem::exists(p)) << p;
    EXPECT_FALSE(std::filesystem::exists(p + ".tmp")) << p;
  }
  std::filesystem::remove_all(dir);
}

TEST(ProxyKernels, ExtentsCheckScalarsAndNamePointers) {
  const KernelDef* k = find_kernel("mlp_forward");
  ASSERT_NE(k, nullptr);
  std::vector<PointerExtent> ext;
  const std::uint64_t ok_args[] = {1, 2, 3, 4, 8, 4, 16, 2};
  ASSERT_TRUE(k->extents(ok_args, &ext).ok());
  ASSERT_EQ(ext.size(), 4u);
  EXPECT_EQ(ext[0].bytes, (MlpShape{8, 4, 16, 2}.params() * 4));
  ext.clear();
  const std::uint64_t bad[] = {1, 2, 3, 4, 0, 4, 16, 2};
  EXPECT_FALSE(k->extents(bad, &ext).ok());
  EXPECT_EQ(find_kernel("no_such_kernel"), nullptr);
}

TEST(ProxyCollective, SumsInRankOrderWhateverTheArrivalOrder) {
  const std::string name = "/orrery-unit-coll-" + std::to_string(::getpid());
  Collective::unlink(name);
  auto c = Collective::open(name, 3, 4);
  ASSERT_TRUE(c.ok()) << c.reason();
  // Values whose float sum depends on the order: (1e8 + -1e8) + 1 = 1, 1e8 + (-1e8 + 1) = 0.
  const float r0[4] = {1e8f, 1, 2, 3}, r1[4] = {-1e8f, 1, 2, 3}, r2[4] = {1, 1, 2, 3};
  ASSERT_TRUE(c->contribute(2, 0, r2, 4, 0).ok());
  EXPECT_EQ(c->result(0, nullptr), nullptr);
  ASSERT_TRUE(c->contribute(0, 0, r0, 4, kFlagCheckpoint).ok());
  ASSERT_TRUE(c->contribute(1, 0, r1, 4, 0).ok());
  std::uint64_t flags = 0;
  const float* res = c->result(0, &flags);
  ASSERT_NE(res, nullptr);
  EXPECT_EQ(res[0], 1.f);
  EXPECT_EQ(res[3], 9.f);
  EXPECT_EQ(flags, kFlagCheckpoint);
  // The next step uses the other phase; the flags do not leak into it.
  ASSERT_TRUE(c->contribute(0, 1, r0, 4, 0).ok());
  ASSERT_TRUE(c->contribute(1, 1, r1, 4, 0).ok());
  ASSERT_TRUE(c->contribute(2, 1, r2, 4, 0).ok());
  ASSERT_NE(c->result(1, &flags), nullptr);
  EXPECT_EQ(flags, 0u);
  Collective::unlink(name);
}

TEST(ProxyHostBackend, FixedAddressesAndParking) {
  auto be = make_host_backend(0, 1 << 20);
  const std::uint64_t addr = job_window(1000 + ::getpid() % 20);
  ASSERT_TRUE(be->allocate(addr, kAllocGranule).ok());
  EXPECT_FALSE(be->allocate(addr, kAllocGranule).ok());  // taken
  EXPECT_FALSE(be->allocate(addr + kAllocGranule, 2 << 20).ok());  // larger than the device
  const char msg[] = "parked bytes";
  ASSERT_TRUE(be->copy_h2d(addr, msg, sizeof msg).ok());
  auto parked = be->park(addr, kAllocGranule);
  ASSERT_TRUE(parked.ok());
  EXPECT_EQ(be->mem_info().used_bytes, 0u);
  std::vector<char> parked_bytes(kAllocGranule);
  ASSERT_TRUE((*parked)->read(parked_bytes.data()).ok());
  EXPECT_STREQ(parked_bytes.data(), msg);
  ASSERT_TRUE(be->allocate(addr, kAllocGranule).ok());  // the address is free while parked
  ASSERT_TRUE(be->free(addr, kAllocGranule).ok());
  ASSERT_TRUE(be->unpark(addr, std::move(parked.value())).ok());
  char back[sizeof msg];
  ASSERT_TRUE(be->copy_d2h(back, addr, sizeof back).ok());
  EXPECT_STREQ(back, msg);
  ASSERT_TRUE(be->free(addr, kAllocGranule).ok());
}

}  // namespace
}  // namespace orrery::runtime
