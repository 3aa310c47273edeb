// The DeviceBackend contract (backend.h), checked against one backend per binary
// (ORRERY_CONTRACT_BACKEND): backend_contract_test for `host`, cuda_backend_contract_test for
// `cuda` where nvcc was found. Without a GPU the cuda binary's tests skip and say why; on a GPU
// machine (scripts/gpu-test) the very same assertions run on the device.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <string>
#include <vector>

#include "runtime/proxy/address_space.h"
#include "runtime/proxy/backend.h"
#include "runtime/proxy/kernels.h"
#ifdef ORRERY_HAVE_CUDA
#include "runtime/proxy/cuda/cuda_backend.h"
#endif

namespace orrery::runtime {
namespace {

constexpr std::uint64_t kMem = 64u << 20;

class BackendContract : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
#ifdef ORRERY_HAVE_CUDA
    if (GetParam() == "cuda") {
      if (auto s = cuda_device_usable(0); !s) GTEST_SKIP() << s.reason() << " (GPU test skipped)";
    }
#endif
    auto b = make_backend(GetParam(), 0, kMem);
    ASSERT_TRUE(b.ok()) << b.reason();
    be_ = std::move(b.value());
  }
  // A window no other test of this process uses (the host backend maps in this process).
  static std::uint64_t window() {
    static int n = 0;
    return job_window(300 + ::getpid() % 100 * 5 + n++);
  }
  static std::vector<unsigned char> pattern(std::uint64_t n, unsigned seed) {
    std::vector<unsigned char> v(n);
    for (std::uint64_t i = 0; i < n; ++i) v[i] = static_cast<unsigned char>(i * 131 + seed + (i >> 13));
    return v;
  }
  std::vector<unsigned char> read(std::uint64_t addr, std::uint64_t n) {
    std::vector<unsigned char> v(n);
    EXPECT_TRUE(be_->copy_d2h(v.data(), addr, n).ok());
    return v;
  }
  std::unique_ptr<DeviceBackend> be_;
};

TEST_P(BackendContract, MemoryIsMappedAtTheAskedAddressZeroFilledAndAccounted) {
  const std::uint64_t a = window();
  ASSERT_TRUE(be_->allocate(a, 3 * kAllocGranule).ok());
  ASSERT_TRUE(be_->allocate(a + 3 * kAllocGranule, kAllocGranule).ok());
  EXPECT_EQ(be_->mem_info().used_bytes, 4 * kAllocGranule);
  EXPECT_EQ(read(a, 4 * kAllocGranule), std::vector<unsigned char>(4 * kAllocGranule, 0));
  const auto p = pattern(4 * kAllocGranule, 1);
  ASSERT_TRUE(be_->copy_h2d(a, p.data(), p.size()).ok());
  EXPECT_EQ(read(a, p.size()), p);
  // Freed and allocated again at the same address: zero again, not the old bytes.
  ASSERT_TRUE(be_->free(a + 3 * kAllocGranule, kAllocGranule).ok());
  ASSERT_TRUE(be_->allocate(a + 3 * kAllocGranule, kAllocGranule).ok());
  EXPECT_EQ(read(a + 3 * kAllocGranule, kAllocGranule),
            std::vector<unsigned char>(kAllocGranule, 0));
  EXPECT_FALSE(be_->allocate(window(), 2 * kMem).ok()) << "more than the device has";
  ASSERT_TRUE(be_->free(a, 3 * kAllocGranule).ok());
  ASSERT_TRUE(be_->free(a + 3 * kAllocGranule, kAllocGranule).ok());
  EXPECT_EQ(be_->mem_info().used_bytes, 0u);
}

TEST_P(BackendContract, StreamingOutAndInRoundTripsAcrossChunks) {
  const std::uint64_t a = window(), n = round_granule((20u << 20) + 12345);
  ASSERT_TRUE(be_->allocate(a, n).ok());
  const auto p = pattern(n, 7);
  ASSERT_TRUE(be_->copy_h2d(a, p.data(), n).ok());
  std::vector<unsigned char> out;
  int chunks = 0;
  ASSERT_TRUE(be_->stream_out(a, n, [&](const void* d, std::uint64_t k) {
                   const auto* c = static_cast<const unsigned char*>(d);
                   out.insert(out.end(), c, c + k);
                   ++chunks;
                   return Status::Ok();
                 }).ok());
  EXPECT_EQ(out, p) << "the chunks must come in address order and hold the device's bytes";
  EXPECT_GT(chunks, 1);
  // In, into another allocation, from a source that serves the bytes in pieces.
  const std::uint64_t b = a + n;
  ASSERT_TRUE(be_->allocate(b, n).ok());
  std::uint64_t at = 0;
  ASSERT_TRUE(be_->stream_in(b, n, [&](void* d, std::uint64_t k) {
                   std::memcpy(d, p.data() + at, k);
                   at += k;
                   return Status::Ok();
                 }).ok());
  EXPECT_EQ(at, n);
  EXPECT_EQ(read(b, n), p);
  // An error from the sink stops the stream and comes back.
  int calls = 0;
  Status st = be_->stream_out(a, n, [&](const void*, std::uint64_t) {
    ++calls;
    return Status::Error("disk full");
  });
  EXPECT_FALSE(st.ok());
  EXPECT_EQ(st.reason(), "disk full");
  EXPECT_EQ(calls, 1);
  ASSERT_TRUE(be_->free(a, n).ok());
  ASSERT_TRUE(be_->free(b, n).ok());
}

// Splicing's pattern: two ranks of one job at the very same addresses, parked in turn.
TEST_P(BackendContract, RanksParkedInTurnAtTheSameAddressesKeepTheirOwnBytes) {
  const std::uint64_t a = window(), n = round_granule((3u << 20) + 1000);
  const auto pa = pattern(n, 11), pb = pattern(n, 12);
  ASSERT_TRUE(be_->allocate(a, n).ok());  // rank A
  ASSERT_TRUE(be_->copy_h2d(a, pa.data(), n).ok());
  auto parked_a = be_->park(a, n);
  ASSERT_TRUE(parked_a.ok()) << parked_a.reason();
  EXPECT_EQ(be_->mem_info().used_bytes, 0u);
  ASSERT_TRUE(be_->allocate(a, n).ok());  // rank B, same address, fresh and zero
  EXPECT_EQ(read(a, n), std::vector<unsigned char>(n, 0));
  ASSERT_TRUE(be_->copy_h2d(a, pb.data(), n).ok());
  for (int round = 0; round < 5; ++round) {
    auto parked_b = be_->park(a, n);
    ASSERT_TRUE(parked_b.ok()) << parked_b.reason();
    ASSERT_TRUE(be_->unpark(a, std::move(parked_a.value())).ok());
    EXPECT_EQ(read(a, n), pa) << "round " << round;
    parked_a = be_->park(a, n);
    ASSERT_TRUE(parked_a.ok());
    ASSERT_TRUE(be_->unpark(a, std::move(parked_b.value())).ok());
    EXPECT_EQ(read(a, n), pb) << "round " << round;
  }
  std::vector<unsigned char> parked_bytes(n);
  ASSERT_TRUE((*parked_a)->read(parked_bytes.data()).ok());
  EXPECT_EQ(parked_bytes, pa) << "a parked rank's bytes";
  EXPECT_EQ(be_->mem_info().used_bytes, n);
  ASSERT_TRUE(be_->free(a, n).ok());
}

// Data-parallel splicing: two ranks whose parameters (most of the range) are equal and updated
// alike every step, and whose gradients and batch (the rest) are their own. Every switch must
// give each rank exactly its bytes; on the cuda backend, with splice dedup, the equal part is
// not copied (the counters say what moved).
TEST_P(BackendContract, DataParallelRanksStayExactThroughSwitches) {
  const std::uint64_t a = window(), n = (6u << 20) + 3 * kAllocGranule;
  const std::uint64_t own = 2u << 20;  // the last 2 MiB + 192 KiB differ between the ranks
  // What `rank` holds after `step`: parameters updated alike on both ranks, then its own part.
  auto state = [&](int rank, int step) {
    auto v = pattern(n - own, 21);
    for (int s = 1; s <= step; ++s) v[static_cast<std::size_t>(s) * 4096] ^= 0x5a;
    const auto mine = pattern(own, static_cast<unsigned>(rank * 100 + step));
    v.insert(v.end(), mine.begin(), mine.end());
    return v;
  };
  ASSERT_TRUE(be_->allocate(a, n).ok());  // rank 0
  ASSERT_TRUE(be_->copy_h2d(a, state(0, 0).data(), n).ok());
  auto parked0 = be_->park(a, n);
  ASSERT_TRUE(parked0.ok()) << parked0.reason();
  ASSERT_TRUE(be_->allocate(a, n).ok());  // rank 1, first turn
  ASSERT_TRUE(be_->copy_h2d(a, state(1, 0).data(), n).ok());
  const SpliceCounters before = be_->splice_counters();
  for (int step = 1; step <= 6; ++step) {
    // Rank 1 parks; rank 0 comes back to its bytes of the last step, and takes this one.
    auto parked1 = be_->park(a, n);
    ASSERT_TRUE(parked1.ok()) << parked1.reason();
    ASSERT_TRUE(be_->unpark(a, std::move(parked0.value())).ok());
    ASSERT_EQ(read(a, n), state(0, step - 1)) << "rank 0 at step " << step;
    ASSERT_TRUE(be_->copy_h2d(a, state(0, step).data(), n).ok());
    parked0 = be_->park(a, n);
    ASSERT_TRUE(parked0.ok());
    ASSERT_TRUE(be_->unpark(a, std::move(parked1.value())).ok());
    ASSERT_EQ(read(a, n), state(1, step - 1)) << "rank 1 at step " << step;
    ASSERT_TRUE(be_->copy_h2d(a, state(1, step).data(), n).ok());
  }
  std::vector<unsigned char> back(n);
  ASSERT_TRUE((*parked0)->read(back.data()).ok());
  EXPECT_EQ(back, state(0, 6));
  const SpliceCounters after = be_->splice_counters();
  if (GetParam() == std::string("cuda")) {
    const std::uint64_t parked = after.parked_bytes - before.parked_bytes;
    const std::uint64_t copied = after.copied_bytes - before.copied_bytes;
    EXPECT_EQ(parked, 4 * 6 * n);
    // Per switch the ranks' own chunks and the parameters' changed chunk move, not the rest.
    EXPECT_LT(copied, parked / 2) << copied << " of " << parked << " bytes copied";
  }
  ASSERT_TRUE(be_->free(a, n).ok());
}

// The MLP's kernels through the backend give exactly what their host versions give.
TEST_P(BackendContract, KernelsMatchTheHostReferenceBitForBit) {
  const MlpShape m{16, 12, 40, 6};
  const std::uint64_t a = window();
  const std::uint64_t np = m.params() * 4, nx = m.batch * m.din * 4, nh = m.batch * m.hidden * 4,
                      no = m.batch * m.dout * 4;
  const std::uint64_t P = a, X = P + round_granule(np), H = X + round_granule(nx),
                      O = H + round_granule(nh), Y = O + round_granule(no),
                      G = Y + round_granule(no), end = G + round_granule(np);
  ASSERT_TRUE(be_->allocate(a, end - a).ok());
  std::vector<float> params(m.params());
  for (std::size_t i = 0; i < params.size(); ++i) params[i] = static_cast<float>((i * 37 % 101)) / 50.f - 1.f;
  ASSERT_TRUE(be_->copy_h2d(P, params.data(), np).ok());
  // Host reference on host buffers.
  std::vector<float> x(m.batch * m.din), y(m.batch * m.dout), h(m.batch * m.hidden),
      o(m.batch * m.dout), g(m.params()), p2 = params;
  auto host = [](std::string_view k, std::vector<std::uint64_t> args) {
    find_kernel(k)->run_host(args.data());
  };
  auto ptr = [](auto& v) { return reinterpret_cast<std::uint64_t>(v.data()); };
  host("gen_batch", {ptr(x), ptr(y), m.batch, m.din, m.dout, 5, 1, 3});
  host("mlp_forward", {ptr(p2), ptr(x), ptr(h), ptr(o), m.batch, m.din, m.hidden, m.dout});
  host("mlp_backward", {ptr(p2), ptr(x), ptr(h), ptr(o), ptr(y), ptr(g), m.batch, m.din, m.hidden, m.dout});
  host("sgd", {ptr(p2), ptr(g), m.params(), float_arg(0.05f), 3});
  // The same through the backend.
  auto dev = [&](std::string_view k, std::vector<std::uint64_t> args) {
    Status s = be_->launch(k, args.data(), static_cast<int>(args.size()));
    ASSERT_TRUE(s.ok()) << k << ": " << s.reason();
  };
  dev("gen_batch", {X, Y, m.batch, m.din, m.dout, 5, 1, 3});
  dev("mlp_forward", {P, X, H, O, m.batch, m.din, m.hidden, m.dout});
  dev("mlp_backward", {P, X, H, O, Y, G, m.batch, m.din, m.hidden, m.dout});
  dev("sgd", {P, G, m.params(), float_arg(0.05f), 3});
  ASSERT_TRUE(be_->synchronize().ok());
  auto bytes = [](const std::vector<float>& v) {
    std::vector<unsigned char> b(v.size() * 4);
    std::memcpy(b.data(), v.data(), b.size());
    return b;
  };
  EXPECT_EQ(read(X, nx), bytes(x));
  EXPECT_EQ(read(O, no), bytes(o));
  EXPECT_EQ(read(G, np), bytes(g));
  EXPECT_EQ(read(P, np), bytes(p2));
  const std::uint64_t bad[] = {P, 1};
  EXPECT_FALSE(be_->launch("no_such_kernel", bad, 2).ok());
  ASSERT_TRUE(be_->free(a, end - a).ok());
}

INSTANTIATE_TEST_SUITE_P(Backend, BackendContract, ::testing::Values(ORRERY_CONTRACT_BACKEND),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace orrery::runtime
