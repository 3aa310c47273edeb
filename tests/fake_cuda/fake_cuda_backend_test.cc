// The cuda backend's stream and event orderings, on the fake CUDA runtime (fake_cuda.cc): ops run
// lazily, in a random order that keeps only what CUDA guarantees (program order within a stream,
// cudaStreamWaitEvent), so a missing wait shows up here as wrong bytes or as a fault. Every
// ordering test runs under each seed of kSeeds, with splice dedup on and off, and keeps a host
// mirror of what the device must hold: splicing rounds (a park's copy out against the next rank's
// zero fill, writes, kernels and unpark at the same addresses, switched as the proxy does it and
// the other way round), data-parallel ranks sharing chunks, restores right after a park, kernels
// then park or checkpoint with no synchronize between, overlapping device copies, idle segments
// released under a copy. Then the backend's failure paths (a taken window, a kernel fault, two
// backends on one device) and tests showing that the fake itself catches what it claims to (a
// read racing an unordered write sees old bytes for some seeds; work on unmapped memory aborts).
#include <cuda.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>

#include <cstdio>
#include <cstring>
#include <initializer_list>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "runtime/proxy/address_space.h"
#include "runtime/proxy/backend.h"
#include "runtime/proxy/cuda/cuda_backend.h"
#include "runtime/proxy/cuda/cuda_collective.h"
#include "runtime/proxy/kernels.h"
#include "tests/fake_cuda/fake_cuda.h"

namespace orrery::runtime {
namespace {

using Bytes = std::vector<unsigned char>;

constexpr std::uint64_t kMem = 64u << 20;
constexpr std::uint64_t kMiB = 1u << 20;
// The scheduler seeds every ordering test runs under (small ones and a few arbitrary ones).
constexpr std::uint64_t kSeeds[] = {1, 2, 3, 4, 0xc0ffee, 0x123456789};

#define ASSERT_OK(expr)                                     \
  do {                                                      \
    const auto& ok_ = (expr);                               \
    ASSERT_TRUE(ok_.ok()) << #expr << ": " << ok_.reason(); \
  } while (0)

Bytes pattern(std::uint64_t n, unsigned seed) {
  Bytes v(n);
  for (std::uint64_t i = 0; i < n; ++i) {
    v[i] = static_cast<unsigned char>(i * 131 + seed * 7 + (i >> 13));
  }
  return v;
}

std::string hex(std::uint64_t v) {
  char b[32];
  std::snprintf(b, sizeof b, "0x%llx", static_cast<unsigned long long>(v));
  return b;
}

// Windows apart from the contract test's (jobs 300 + pid % 100 * 5 + n) in the same process.
std::uint64_t window() {
  static int n = 0;
  return job_window(900 + n++ % 100);
}

// The first differing byte, for messages that say where (not 30 MB of bytes).
std::string diff(const Bytes& got, const Bytes& want) {
  if (got.size() != want.size()) return "size " + std::to_string(got.size()) + " != " +
                                         std::to_string(want.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (got[i] != want[i]) {
      return "first difference at offset " + std::to_string(i) + ": got " +
             std::to_string(got[i]) + ", want " + std::to_string(want[i]);
    }
  }
  return "equal";
}
#define EXPECT_BYTES(got, want) EXPECT_TRUE((got) == (want)) << diff((got), (want))

// A kernel argument: a scalar, or (at()) an offset into the mirrored range.
struct Arg {
  Arg(std::uint64_t value) : v(value) {}  // NOLINT: scalars read naturally in argument lists
  std::uint64_t v;
  bool ptr = false;
};
Arg at(std::uint64_t off) {
  Arg a(off);
  a.ptr = true;
  return a;
}

// A rank's device memory at [base, base + size) and its host mirror: every write and kernel is
// applied to both (the kernels' host versions on the mirror), so the device must always hold the
// mirror's bytes, whatever the fake's scheduler did in between.
class Mirror {
 public:
  Mirror(DeviceBackend* be, std::uint64_t base, std::uint64_t size)
      : be_(be), base_(base), img_(size, 0) {}
  std::uint64_t base() const { return base_; }
  std::uint64_t size() const { return img_.size(); }
  const Bytes& bytes() const { return img_; }
  Bytes& host() { return img_; }  // for what reaches the device outside write() and kernel()

  void write(std::uint64_t off, const Bytes& b) {
    ASSERT_OK(be_->copy_h2d(base_ + off, b.data(), b.size()));
    std::memcpy(img_.data() + off, b.data(), b.size());
  }
  void kernel(std::string_view name, std::initializer_list<Arg> args) {
    std::vector<std::uint64_t> dev, host;
    for (const Arg& a : args) {
      dev.push_back(a.ptr ? base_ + a.v : a.v);
      host.push_back(a.ptr ? reinterpret_cast<std::uint64_t>(img_.data() + a.v) : a.v);
    }
    const Status s = be_->launch(name, dev.data(), static_cast<int>(dev.size()));
    ASSERT_TRUE(s.ok()) << name << ": " << s.reason();
    find_kernel(name)->run_host(host.data());
  }
  // `count` floats of `value` at `off` (a multiple of 4).
  void fill(std::uint64_t off, std::uint64_t count, float value) {
    kernel("fill", {at(off), count, float_arg(value)});
  }
  Bytes device() const {
    Bytes v(img_.size());
    const Status s = be_->copy_d2h(v.data(), base_, v.size());
    EXPECT_TRUE(s.ok()) << s.reason();
    return v;
  }

 private:
  DeviceBackend* be_;
  std::uint64_t base_;
  Bytes img_;
};

// The MLP's buffers laid out from offset 0 of a range, each on its own 64 KiB granules.
struct MlpLayout {
  MlpShape m{16, 12, 40, 6};
  std::uint64_t P = 0, X, H, O, Y, G, end;
  MlpLayout() {
    X = P + round_granule(m.params() * 4);
    H = X + round_granule(m.batch * m.din * 4);
    O = H + round_granule(m.batch * m.hidden * 4);
    Y = O + round_granule(m.batch * m.dout * 4);
    G = Y + round_granule(m.batch * m.dout * 4);
    end = G + round_granule(m.params() * 4);
  }
  // Initial parameters, different per `seed`.
  Bytes params(unsigned seed) const {
    std::vector<float> p(m.params());
    for (std::size_t i = 0; i < p.size(); ++i) {
      p[i] = static_cast<float>((i * 37 + seed * 11) % 101) / 50.f - 1.f;
    }
    Bytes b(p.size() * 4);
    std::memcpy(b.data(), p.data(), b.size());
    return b;
  }
  // One training step's kernels, as the workload launches them.
  void step(Mirror& r, std::uint64_t data_seed, std::uint64_t rank) const {
    r.kernel("gen_batch", {at(X), at(Y), m.batch, m.din, m.dout, data_seed, rank, 3});
    r.kernel("mlp_forward", {at(P), at(X), at(H), at(O), m.batch, m.din, m.hidden, m.dout});
    r.kernel("mlp_backward",
             {at(P), at(X), at(H), at(O), at(Y), at(G), m.batch, m.din, m.hidden, m.dout});
    r.kernel("sgd", {at(P), at(G), m.params(), float_arg(0.05f), 3});
  }
};

Bytes parked_bytes(const std::unique_ptr<ParkedMemory>& p) {
  Bytes v(p->size());
  const Status s = p->read(v.data());
  EXPECT_TRUE(s.ok()) << s.reason();
  return v;
}

// One cuda backend on the fake device per test: the scheduler's seed, and splice dedup on (park
// and unpark copy only the chunks that differ, cuda/splice_chunks.h) or off (every byte copied).
class FakeCudaOrdering : public ::testing::TestWithParam<std::tuple<std::uint64_t, bool>> {
 protected:
  void SetUp() override {
    fake_cuda_set_seed(seed());
    before_ = fake_cuda_stats();
    auto b = make_backend("cuda", 0, kMem, options());
    ASSERT_TRUE(b.ok()) << b.reason();
    be_ = std::move(b.value());
  }
  std::uint64_t seed() const { return std::get<0>(GetParam()); }
  bool dedup() const { return std::get<1>(GetParam()); }
  BackendOptions options() const {
    BackendOptions o;
    o.splice_dedup = dedup();
    return o;
  }
  void TearDown() override {
    be_.reset();
    // Torn down, the backend has given everything back to the device.
    const FakeCudaStats s = fake_cuda_stats();
    EXPECT_EQ(s.mappings, 0u);
    EXPECT_EQ(s.handles, 0u);
    EXPECT_EQ(s.reservations, 0u);
    EXPECT_EQ(s.device_bytes_in_use, 0u);
    EXPECT_EQ(s.pending_ops, 0u);
    EXPECT_EQ(s.streams, before_.streams);
    EXPECT_EQ(s.events, before_.events);
    EXPECT_EQ(s.pinned_buffers, before_.pinned_buffers);
  }
  std::unique_ptr<DeviceBackend> be_;
  FakeCudaStats before_;
};

// Splicing, as the proxy does it: two ranks of a job at the very same addresses, each with two
// adjacent allocations parked as one run, switched many times, with kernels queued right before
// each park and no synchronize anywhere but the reads. A park's copy out must finish before the
// next rank's zero fill, writes or unpark touch the addresses, and must see the kernels before it.
TEST_P(FakeCudaOrdering, SplicedRanksKeepTheirBytesAcrossManySwitches) {
  const int job = 1;
  const std::uint64_t a = window();
  const std::uint64_t n1 = round_granule((3 * kMiB) + 1000), n2 = round_granule(200u << 10);
  const std::uint64_t n = n1 + n2;
  Mirror r0(be_.get(), a, n), r1(be_.get(), a, n);
  be_->bind_worker(job, 0);
  ASSERT_OK(be_->allocate(a, n1));
  ASSERT_OK(be_->allocate(a + n1, n2));
  r0.write(0, pattern(n, 11));
  r0.fill(4096, 5000, 1.5f);
  auto p0 = be_->park(a, n);
  ASSERT_OK(p0);
  // Rank 1, fresh at the same addresses: zero, whatever rank 0's park copy is doing.
  be_->bind_worker(job, 1);
  ASSERT_OK(be_->allocate(a, n1));
  ASSERT_OK(be_->allocate(a + n1, n2));
  if (seed() % 2 == 1) {  // else more ops pile up before the first forced run
    EXPECT_BYTES(r1.device(), r1.bytes());
  }
  r1.write(kAllocGranule, pattern(n - 2 * kAllocGranule, 12));
  auto p1 = be_->park(a, n);
  ASSERT_OK(p1);
  for (std::uint64_t round = 0; round < 8; ++round) {
    const std::uint64_t off = (round * 7919 * 4) % (n - 4 * 5000);
    // Even rounds as the proxy switches (switch_to_next): the next rank brought back while the
    // parked one is still bound, then bound. Odd rounds: bound first.
    const bool proxy_order = round % 2 == 0;
    if (!proxy_order) be_->bind_worker(job, 0);
    ASSERT_OK(be_->unpark(a, std::move(p0.value())));
    if (proxy_order) be_->bind_worker(job, 0);
    if (round % 3 == 0) {
      EXPECT_BYTES(r0.device(), r0.bytes()) << "round " << round;
    }
    r0.fill(off, 5000, static_cast<float>(round));
    p0 = be_->park(a, n);
    ASSERT_OK(p0);
    if (!proxy_order) be_->bind_worker(job, 1);
    ASSERT_OK(be_->unpark(a, std::move(p1.value())));
    if (proxy_order) be_->bind_worker(job, 1);
    r1.fill(n - off - 4 * 5000, 5000, -static_cast<float>(round));
    if (round % 3 == 1) {
      EXPECT_BYTES(r1.device(), r1.bytes()) << "round " << round;
    }
    if (round % 4 == 2) {
      r1.write(off % (n - 3 * kAllocGranule), pattern(3 * kAllocGranule, round & 0xff));
    }
    p1 = be_->park(a, n);
    ASSERT_OK(p1);
  }
  EXPECT_BYTES(parked_bytes(*p0), r0.bytes()) << "rank 0 as parked";
  EXPECT_BYTES(parked_bytes(*p1), r1.bytes()) << "rank 1 as parked";
  ASSERT_OK(be_->unpark(a, std::move(p0.value())));
  be_->bind_worker(job, 0);
  EXPECT_BYTES(r0.device(), r0.bytes());
  ASSERT_OK(be_->free(a, n1));
  ASSERT_OK(be_->free(a + n1, n2));
  p1 = Status::Error("dropped while parked");  // rank 1 leaves while parked
  EXPECT_EQ(be_->mem_info().used_bytes, 0u);
  be_->release_worker(job, 0);
  be_->release_worker(job, 1);
}

// A restore (allocate + stream_in, as restore_rank does) into the addresses a rank was parked
// from a moment before (two staging chunks); then that rank parked in turn and the first one
// brought back.
TEST_P(FakeCudaOrdering, RestoreIntoTheAddressesOfARankJustParked) {
  const std::uint64_t a = window(), n = round_granule(9 * kMiB + 12345);
  Mirror r0(be_.get(), a, n), r1(be_.get(), a, n);
  be_->bind_worker(2, 0);
  ASSERT_OK(be_->allocate(a, n));
  r0.write(0, pattern(n, 21));
  r0.fill(8 * kMiB - 4096, 3000, 7.f);  // straddles a checkpoint chunk boundary
  auto p0 = be_->park(a, n);
  ASSERT_OK(p0);
  be_->bind_worker(2, 1);
  ASSERT_OK(be_->allocate(a, n));
  const Bytes shard = pattern(n, 22);
  std::uint64_t served = 0;
  ASSERT_OK(be_->stream_in(a, n, [&](void* d, std::uint64_t k) {
    std::memcpy(d, shard.data() + served, k);
    served += k;
    return Status::Ok();
  }));
  ASSERT_EQ(served, n);
  // What the restored rank does first: a kernel on its own stream, over the restored bytes.
  r1.host() = shard;
  r1.fill(2 * kMiB + 4, 1000, 3.f);
  EXPECT_BYTES(r1.device(), r1.bytes());
  EXPECT_BYTES(parked_bytes(*p0), r0.bytes());
  auto p1 = be_->park(a, n);
  ASSERT_OK(p1);
  ASSERT_OK(be_->unpark(a, std::move(p0.value())));  // as the proxy: before binding the rank
  be_->bind_worker(2, 0);
  EXPECT_BYTES(r0.device(), r0.bytes());
  EXPECT_BYTES(parked_bytes(*p1), r1.bytes());
  p1 = Status::Error("dropped");
  ASSERT_OK(be_->free(a, n));
}

// A training step's kernels queued, then the rank parked at once: the park's copy must come after
// them. The next rank runs its own step at the same addresses, then the first comes back.
TEST_P(FakeCudaOrdering, AParkSeesTheKernelsQueuedBeforeIt) {
  const MlpLayout l;
  const std::uint64_t a = window();
  Mirror r0(be_.get(), a, l.end), r1(be_.get(), a, l.end);
  be_->bind_worker(3, 0);
  ASSERT_OK(be_->allocate(a, l.end));
  r0.write(l.P, l.params(1));
  l.step(r0, 5, 0);
  auto p0 = be_->park(a, l.end);
  ASSERT_OK(p0);
  be_->bind_worker(3, 1);
  ASSERT_OK(be_->allocate(a, l.end));
  r1.write(l.P, l.params(2));
  l.step(r1, 5, 1);
  l.step(r1, 6, 1);
  auto p1 = be_->park(a, l.end);
  ASSERT_OK(p1);
  EXPECT_BYTES(parked_bytes(*p0), r0.bytes());
  ASSERT_OK(be_->unpark(a, std::move(p0.value())));  // as the proxy: before binding the rank
  be_->bind_worker(3, 0);
  l.step(r0, 6, 0);
  ASSERT_OK(be_->synchronize());
  EXPECT_BYTES(r0.device(), r0.bytes());
  EXPECT_BYTES(parked_bytes(*p1), r1.bytes());
  p1 = Status::Error("dropped");
  ASSERT_OK(be_->free(a, l.end));
}

// A checkpoint (stream_out) right after kernels, with no synchronize: the chunks must hold the
// kernels' results. Then the checkpoint restored into another rank parked in beside it, which
// trains on from it: the same bytes as the original rank training on.
TEST_P(FakeCudaOrdering, ACheckpointRightAfterKernelsHoldsTheirResults) {
  const MlpLayout l;
  const std::uint64_t a = window();
  // The MLP, then a tail that a fill kernel covers: 2 chunks of the stream, or for three of the
  // seeds 4, more than the staging buffers (each refilled after the sink or source used it).
  const bool wrap = seed() <= 3;
  const std::uint64_t n = l.end + round_granule((wrap ? 25 : 9) * kMiB);
  Mirror r0(be_.get(), a, n), r1(be_.get(), a, n);
  be_->bind_worker(4, 0);
  ASSERT_OK(be_->allocate(a, n));
  r0.write(l.P, l.params(3));
  l.step(r0, 9, 0);
  r0.fill(l.end, (n - l.end) / 4, 0.25f);
  Bytes ckpt;
  int chunks = 0;
  ASSERT_OK(be_->stream_out(a, n, [&](const void* d, std::uint64_t k) {
    const auto* c = static_cast<const unsigned char*>(d);
    ckpt.insert(ckpt.end(), c, c + k);
    ++chunks;
    return Status::Ok();
  }));
  EXPECT_EQ(chunks, wrap ? 4 : 2);
  EXPECT_BYTES(ckpt, r0.bytes());
  l.step(r0, 10, 0);  // rank 0 trains on, then is parked
  auto p0 = be_->park(a, n);
  ASSERT_OK(p0);
  // Rank 1 restored from rank 0's checkpoint at the same addresses, and trains the same step.
  be_->bind_worker(4, 1);
  ASSERT_OK(be_->allocate(a, n));
  std::uint64_t at_ = 0;
  ASSERT_OK(be_->stream_in(a, n, [&](void* d, std::uint64_t k) {
    std::memcpy(d, ckpt.data() + at_, k);
    at_ += k;
    return Status::Ok();
  }));
  r1.host() = ckpt;
  l.step(r1, 10, 0);
  EXPECT_BYTES(r1.device(), r0.bytes()) << "restored and trained on = trained on";
  EXPECT_BYTES(parked_bytes(*p0), r0.bytes());
  auto p1 = be_->park(a, n);
  ASSERT_OK(p1);
  ASSERT_OK(be_->unpark(a, std::move(p0.value())));  // as the proxy: before binding the rank
  be_->bind_worker(4, 0);
  EXPECT_BYTES(r0.device(), r0.bytes());
  p1 = Status::Error("dropped");
  ASSERT_OK(be_->free(a, n));
}

// Data-parallel splicing, where splice dedup works: three ranks whose parameters (most of the
// range) are updated alike and whose own part differs, each parked right after its step's kernels.
// With dedup, a park shares the chunks another parked rank holds and an unpark skips the chunks
// the device still holds from the rank parked before: the hashes must be computed after the
// kernels, and a skipped chunk must really hold the rank's bytes, whatever the interleaving.
TEST_P(FakeCudaOrdering, DataParallelRanksSplicedRightAfterTheirKernels) {
  constexpr int kRanks = 3;
  const std::uint64_t a = window(), n = 6 * kMiB + 3 * kAllocGranule, shared = 5 * kMiB;
  std::vector<Mirror> r;
  std::vector<std::unique_ptr<ParkedMemory>> parked(kRanks);
  const Bytes params = pattern(shared, 51);
  for (int k = 0; k < kRanks; ++k) {
    r.emplace_back(be_.get(), a, n);
    be_->bind_worker(9, k);
    ASSERT_OK(be_->allocate(a, n));
    r[k].write(0, params);
    r[k].write(shared, pattern(n - shared, 60 + k));
    auto p = be_->park(a, n);
    ASSERT_OK(p);
    parked[k] = std::move(p.value());
  }
  const SpliceCounters before = be_->splice_counters();
  constexpr std::uint64_t kSteps = 3;
  for (std::uint64_t step = 1; step <= kSteps; ++step) {
    for (int k = 0; k < kRanks; ++k) {
      // As the proxy switches: brought back while the rank parked last is still bound.
      ASSERT_OK(be_->unpark(a, std::move(parked[k])));
      be_->bind_worker(9, k);
      if ((step + k) % 3 == 0) {
        EXPECT_BYTES(r[k].device(), r[k].bytes()) << "step " << step;
      }
      // The same update of the parameters on every rank, then the rank's own part.
      r[k].fill((step * 13 * 4096) % (shared - 4096), 1024, static_cast<float>(step));
      r[k].fill(shared + (step * (k + 1) * 4096) % (n - shared - 8192), 2048,
                static_cast<float>(step * 10 + k));
      auto p = be_->park(a, n);
      ASSERT_OK(p);
      parked[k] = std::move(p.value());
    }
  }
  for (int k = 0; k < kRanks; ++k) EXPECT_BYTES(parked_bytes(parked[k]), r[k].bytes()) << k;
  const SpliceCounters after = be_->splice_counters();
  const std::uint64_t moved = after.parked_bytes - before.parked_bytes;
  const std::uint64_t copied = after.copied_bytes - before.copied_bytes;
  EXPECT_EQ(moved, 2 * kSteps * kRanks * n);
  if (dedup()) {
    EXPECT_LT(copied, moved / 2) << "dedup copied " << copied << " of " << moved << " bytes";
  } else {
    EXPECT_EQ(copied, moved);
  }
  for (int k = 0; k < kRanks; ++k) be_->release_worker(9, k);  // they leave while parked
}

// The allreduce kept on the device (cuda/cuda_collective.h) with every rank on one device, as the
// proxy drives it: each spliced rank writes its gradient, contributes and is parked at once (no
// synchronize); once the sum is ready each rank gets it back, resident again, and builds its
// next contribution on it. The contribution copy must finish before the park's copy-out lets the
// next rank overwrite the addresses, the sum must wait for every copy, and a delivery must land
// before the rank's next kernels: the device must always equal the host's rank-ordered sums.
TEST_P(FakeCudaOrdering, SplicedRanksAllreduceOnTheDeviceAsTheHostSums) {
  constexpr int kRanks = 3;
  constexpr std::uint64_t kCount = 300'000;  // floats: more than one hash chunk
  const std::uint64_t a = window(), grad = 4096, n = 2 * kMiB;
  DeviceCollectiveSetup setup;
  setup.world = kRanks;
  setup.ranks_by_device = {{0, 1, 2}};
  setup.count = kCount;
  auto coll = be_->open_device_collective(setup);
  ASSERT_OK(coll);
  std::vector<Mirror> r;
  std::vector<std::unique_ptr<ParkedMemory>> parked(kRanks);
  for (int k = 0; k < kRanks; ++k) {
    r.emplace_back(be_.get(), a, n);
    be_->bind_worker(11, k);
    ASSERT_OK(be_->allocate(a, n));
    std::vector<float> g(kCount);
    for (std::uint64_t i = 0; i < kCount; ++i) g[i] = 0.1f * static_cast<float>(k + 1) + 1e-7f * i;
    Bytes b(kCount * sizeof(float));
    std::memcpy(b.data(), g.data(), b.size());
    r[k].write(grad, b);
    auto p = be_->park(a, n);
    ASSERT_OK(p);
    parked[k] = std::move(p.value());
  }
  auto floats = [&](int k) { return reinterpret_cast<float*>(r[k].host().data() + grad); };
  for (std::int64_t step = 0; step < 3; ++step) {
    for (int k = 0; k < kRanks; ++k) {
      ASSERT_OK(be_->unpark(a, std::move(parked[k])));
      be_->bind_worker(11, k);
      // The rank's own update, on what it received last step, then its contribution.
      r[k].fill(grad + 4 * static_cast<std::uint64_t>(step * 1000 + k * 7), 500,
                static_cast<float>(step) + 0.25f * static_cast<float>(k));
      ASSERT_OK(coll.value()->contribute(k, step, a + grad, kCount));
      auto p = be_->park(a, n);
      ASSERT_OK(p);
      parked[k] = std::move(p.value());
    }
    bool ready = false;
    for (int spin = 0; spin < 1'000'000 && !ready; ++spin) {
      auto rd = coll.value()->ready(step);
      ASSERT_OK(rd);
      ready = rd.value();
    }
    ASSERT_TRUE(ready) << "step " << step;
    std::vector<const float*> in;
    for (int k = 0; k < kRanks; ++k) in.push_back(floats(k));
    std::vector<float> sum(kCount);
    sum_in_rank_order(in.data(), kRanks, kCount, sum.data());
    for (int k = 0; k < kRanks; ++k) {
      ASSERT_OK(be_->unpark(a, std::move(parked[k])));
      be_->bind_worker(11, k);
      ASSERT_OK(coll.value()->deliver(k, step, a + grad, kCount));
      std::memcpy(floats(k), sum.data(), kCount * sizeof(float));
      if (k == static_cast<int>(step % kRanks)) {
        EXPECT_BYTES(r[k].device(), r[k].bytes()) << "step " << step << " rank " << k;
      }
      auto p = be_->park(a, n);
      ASSERT_OK(p);
      parked[k] = std::move(p.value());
    }
  }
  for (int k = 0; k < kRanks; ++k) EXPECT_BYTES(parked_bytes(parked[k]), r[k].bytes()) << k;
  // The same count, and only the device's own ranks.
  EXPECT_FALSE(coll.value()->contribute(0, 3, a + grad, kCount - 1).ok());
  EXPECT_FALSE(coll.value()->contribute(3, 3, a + grad, kCount).ok());
  coll.value().reset();
  for (int k = 0; k < kRanks; ++k) be_->release_worker(11, k);
}

// The allreduce across devices (cuda/cuda_collective.h over RankOrderedAllreduce and the fake
// NCCL): two proxies as two processes, W = 3 with ranks 0 and 2 spliced on device 0. Every
// element must be the host's rank-ordered sum, on both devices, for two steps. `join`: whether
// device 1 takes part; if not, device 0's allreduce must fail within ORRERY_NCCL_INIT_TIMEOUT_S
// (1 s here), not hang. Returns the child's exit status (0: as expected) and its message.
std::string device_allreduce_child(int device, const CollectiveId& id, bool expect_timeout) {
  constexpr std::uint64_t kCount = 10'001;  // not a multiple of 2: the padded allgather
  constexpr int kWorld = 3;
  const std::vector<std::vector<int>> placement = {{0, 2}, {1}};
  auto be = make_backend("cuda", 0, kMem);
  if (!be) return "backend: " + be.reason();
  DeviceCollectiveSetup setup;
  setup.world = kWorld;
  setup.ranks_by_device = placement;
  setup.device_rank = device;
  setup.id = id;
  setup.count = kCount;
  auto coll = be.value()->open_device_collective(setup);
  if (!coll) return "open: " + coll.reason();
  auto input = [&](int rank, std::int64_t step) {
    std::vector<float> v(kCount);
    for (std::uint64_t i = 0; i < kCount; ++i) {
      v[i] = (rank == 1 ? 1e7f : 0.3f) * static_cast<float>(rank + 1) + 1e-3f * i +
             static_cast<float>(step);
    }
    return v;
  };
  const std::uint64_t base = window(), n = 1 * kMiB;
  for (std::int64_t step = 0; step < 2; ++step) {
    for (int r : placement[device]) {
      be.value()->bind_worker(21, r);
      const std::uint64_t addr = base + static_cast<std::uint64_t>(r) * n;
      if (step == 0) {
        if (auto st = be.value()->allocate(addr, n); !st) return "allocate: " + st.reason();
      }
      const std::vector<float> in = input(r, step);
      if (auto st = be.value()->copy_h2d(addr, in.data(), kCount * 4); !st) return st.reason();
      if (auto st = coll.value()->contribute(r, step, addr, kCount); !st) {
        return "contribute: " + st.reason();
      }
    }
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    bool ready = false;
    while (!ready && std::chrono::steady_clock::now() < deadline) {
      auto rd = coll.value()->ready(step);
      if (!rd) {
        if (expect_timeout && rd.reason().find("was not formed within 1 s") != std::string::npos) {
          return "";
        }
        return "ready: " + rd.reason();
      }
      ready = rd.value();
    }
    if (expect_timeout) return "no timeout: the allreduce " + std::string(ready ? "ran" : "hung");
    if (!ready) return "step " + std::to_string(step) + " never summed";
    std::vector<std::vector<float>> all;
    std::vector<const float*> rows;
    for (int r = 0; r < kWorld; ++r) all.push_back(input(r, step));
    for (auto& v : all) rows.push_back(v.data());
    std::vector<float> want(kCount), got(kCount);
    sum_in_rank_order(rows.data(), kWorld, kCount, want.data());
    for (int r : placement[device]) {
      be.value()->bind_worker(21, r);
      const std::uint64_t addr = base + static_cast<std::uint64_t>(r) * n;
      if (auto st = coll.value()->deliver(r, step, addr, kCount); !st) return st.reason();
      if (auto st = be.value()->copy_d2h(got.data(), addr, kCount * 4); !st) return st.reason();
      if (std::memcmp(got.data(), want.data(), kCount * 4) != 0) {
        return "device " + std::to_string(device) + " rank " + std::to_string(r) + " step " +
               std::to_string(step) + ": not the host's rank-ordered sum";
      }
    }
  }
  return "";
}

int run_device_allreduce(bool device1_joins, std::string* why) {
  char dir[] = "/tmp/orrery-fakenccl-XXXXXX";
  if (::mkdtemp(dir) == nullptr) return -1;
  ::setenv("FAKE_NCCL_DIR", dir, 1);
  ::setenv("ORRERY_NCCL_INIT_TIMEOUT_S", "1", 1);
  auto id = cuda::new_nccl_id();
  if (!id) {
    *why = id.reason();
    return -1;
  }
  int pipes[2][2];
  pid_t pids[2];
  for (int d = 0; d < 2; ++d) {
    if (::pipe(pipes[d]) != 0) return -1;
    pids[d] = ::fork();
    if (pids[d] == 0) {
      std::string msg;
      if (d == 1 && !device1_joins) {
        ::usleep(3'000'000);  // alive, but never joins: a proxy stuck elsewhere
      } else {
        fake_cuda_set_seed(7 + d);
        msg = device_allreduce_child(d, id.value(), !device1_joins);
      }
      if (!msg.empty()) (void)!::write(pipes[d][1], msg.data(), msg.size());
      std::_Exit(msg.empty() ? 0 : 1);
    }
    ::close(pipes[d][1]);
  }
  int failed = 0;
  for (int d = 0; d < 2; ++d) {
    int status = 0;
    ::waitpid(pids[d], &status, 0);
    char buf[512];
    const ssize_t got = ::read(pipes[d][0], buf, sizeof buf);
    ::close(pipes[d][0]);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      ++failed;
      *why += "device " + std::to_string(d) + ": " +
              (got > 0 ? std::string(buf, static_cast<std::size_t>(got)) : "crashed") + "; ";
    }
  }
  ::unsetenv("FAKE_NCCL_DIR");
  ::unsetenv("ORRERY_NCCL_INIT_TIMEOUT_S");
  std::error_code ec;
  if (device1_joins && !std::filesystem::is_empty(dir, ec)) *why += "files left behind; ";
  std::filesystem::remove_all(dir, ec);
  return failed;
}

TEST(FakeCudaDeviceAllreduce, TwoProxiesOverNcclGiveTheHostSumBitForBit) {
  std::string why;
  EXPECT_EQ(run_device_allreduce(true, &why), 0) << why;
  EXPECT_TRUE(why.empty()) << why;
}

TEST(FakeCudaDeviceAllreduce, AProxyThatNeverJoinsFailsTheAllreduceInsteadOfHanging) {
  std::string why;
  EXPECT_EQ(run_device_allreduce(false, &why), 0) << why;
}

// copy_d2d between overlapping ranges is the host backend's memmove. The fake poisons a device
// copy between overlapping ranges (undefined on a GPU), so only the backend's temporary makes
// these pass.
TEST_P(FakeCudaOrdering, OverlappingDeviceCopiesAreMemmove) {
  const std::uint64_t a = window(), n = round_granule(kMiB);
  Mirror r(be_.get(), a, n);
  be_->bind_worker(5, 0);
  ASSERT_OK(be_->allocate(a, n));
  r.write(0, pattern(n, 31));
  const std::uint64_t poisoned = fake_cuda_stats().overlapping_copies;
  struct Case {
    std::uint64_t dst, src, len;
  };
  const Case cases[] = {{4096, 0, 300000}, {0, 4096, 300000}, {1, 0, 65536},  {0, 1, 65536},
                        {100, 100, 5000},  {0, 200000, 100000}, {777, 3, 500001}, {5, 9, 1}};
  int i = 0;
  for (const Case& c : cases) {
    ASSERT_OK(be_->copy_d2d(a + c.dst, a + c.src, c.len));
    std::memmove(r.host().data() + c.dst, r.host().data() + c.src, c.len);
    if (++i % 2 == 0) {
      EXPECT_BYTES(r.device(), r.bytes()) << "after case " << i;
    }
    r.fill(8192, 100, static_cast<float>(i));  // a kernel between the copies, same stream
  }
  EXPECT_BYTES(r.device(), r.bytes());
  EXPECT_EQ(fake_cuda_stats().overlapping_copies, poisoned);
  ASSERT_OK(be_->free(a, n));
}

// Device memory short (a backend of 8 MiB): a new job's allocation releases the idle segments a
// parked rank's copy out may still be reading. release() must wait for the device first; if it
// did not, the fake would abort on the unmapped memory.
TEST_P(FakeCudaOrdering, ReleasingIdleSegmentsWaitsForTheParkCopy) {
  auto small = make_backend("cuda", 0, 8 * kMiB, options());
  ASSERT_OK(small);
  DeviceBackend& be = **small;
  const std::uint64_t w1 = window(), w2 = window();
  Mirror r(&be, w1, 4 * kMiB);
  be.bind_worker(6, 0);
  ASSERT_OK(be.allocate(w1, 4 * kMiB));
  r.write(0, pattern(4 * kMiB, 41));
  r.fill(kMiB, 100000, 2.f);
  auto p = be.park(w1, 4 * kMiB);
  ASSERT_OK(p);
  be.bind_worker(7, 0);
  ASSERT_OK(be.allocate(w2, 6 * kMiB));  // 4 MiB idle + 6 MiB > 8 MiB: w1's segments go
  EXPECT_BYTES(parked_bytes(*p), r.bytes());
  ASSERT_OK(be.free(w2, 6 * kMiB));
  ASSERT_OK(be.unpark(w1, std::move(p.value())));  // mapped afresh
  be.bind_worker(6, 0);
  EXPECT_BYTES(r.device(), r.bytes());
  ASSERT_OK(be.free(w1, 4 * kMiB));
}

INSTANTIATE_TEST_SUITE_P(Seeds, FakeCudaOrdering,
                         ::testing::Combine(::testing::ValuesIn(kSeeds), ::testing::Bool()),
                         [](const auto& info) {
                           return "seed_" + hex(std::get<0>(info.param)) +
                                  (std::get<1>(info.param) ? "_dedup" : "_copy_all");
                         });

// ---- the backend's failure paths on the fake ---------------------------------------------------

// CUDA treats the reservation address as a hint: with the job's window taken in this process, the
// backend must refuse rather than hand out an address that would differ in another process.
TEST(FakeCudaBackend, AJobWindowTakenInTheProcessFailsNamingBothAddresses) {
  auto b = make_backend("cuda", 0, kMem);
  ASSERT_OK(b);
  const std::uint64_t w = window();
  void* const squat = reinterpret_cast<void*>(w + (1ull << 30));
  ASSERT_EQ(::mmap(squat, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1,
                   0),
            squat);
  const Status s = (*b)->allocate(w, kAllocGranule);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.reason().find("not at " + hex(w)), std::string::npos) << s.reason();
  EXPECT_EQ(fake_cuda_stats().reservations, 0u) << "the other address was given back";
  ::munmap(squat, 4096);
  ASSERT_OK((*b)->allocate(w, kAllocGranule));
  ASSERT_OK((*b)->free(w, kAllocGranule));
}

// A kernel fault is asynchronous: it surfaces at the next synchronization, and from then on the
// context is gone (the proxy exits on broken()).
TEST(FakeCudaBackend, AKernelFaultBreaksTheBackend) {
  {
    auto b = make_backend("cuda", 0, kMem);
    ASSERT_OK(b);
    DeviceBackend& be = **b;
    const std::uint64_t a = window();
    ASSERT_OK(be.allocate(a, kAllocGranule));
    const std::uint64_t args[] = {a + 2, 16, float_arg(1.f)};  // not 4-byte aligned
    EXPECT_TRUE(be.launch("fill", args, 3).ok()) << "the launch itself succeeds";
    EXPECT_EQ(be.broken(), "");
    const Status s = be.synchronize();
    EXPECT_FALSE(s.ok());
    EXPECT_NE(s.reason().find("cudaErrorMisalignedAddress"), std::string::npos) << s.reason();
    EXPECT_NE(be.broken(), "");
    unsigned char byte = 1;
    EXPECT_FALSE(be.copy_h2d(a, &byte, 1).ok()) << "every later call fails";
    EXPECT_FALSE(be.launch("fill", args, 3).ok());
  }
  fake_cuda_reset_context();
  const FakeCudaStats s = fake_cuda_stats();
  EXPECT_EQ(s.mappings, 0u);
  EXPECT_EQ(s.reservations, 0u);
  EXPECT_EQ(s.device_bytes_in_use, 0u);
}

// Two proxies on one GPU (ORRERY_CUDA_DEVICES=0,0): each sees the whole device, and physical
// memory one holds is not there for the other.
TEST(FakeCudaBackend, TwoBackendsShareTheDevicesMemory) {
  const std::uint64_t cap = fake_cuda_capacity();
  fake_cuda_set_capacity(8 * kMiB);
  {
    auto b1 = make_backend("cuda", 0, kMem), b2 = make_backend("cuda", 0, kMem);
    ASSERT_OK(b1);
    ASSERT_OK(b2);
    EXPECT_EQ((*b1)->mem_info().total_bytes, 8 * kMiB);
    const std::uint64_t w1 = window(), w2 = window();
    ASSERT_OK((*b1)->allocate(w1, 6 * kMiB));
    const Status s = (*b2)->allocate(w2, 4 * kMiB);
    EXPECT_FALSE(s.ok());
    EXPECT_NE(s.reason().find("CUDA_ERROR_OUT_OF_MEMORY"), std::string::npos) << s.reason();
    ASSERT_OK((*b1)->free(w1, 6 * kMiB));
    ASSERT_OK((*b2)->allocate(w2, 4 * kMiB));
    ASSERT_OK((*b2)->free(w2, 4 * kMiB));
  }
  fake_cuda_set_capacity(cap);
  EXPECT_EQ(fake_cuda_stats().device_bytes_in_use, 0u);
}

// ---- the fake itself: what it claims to catch ---------------------------------------------------

// Not vacuous: a write on stream X and a read on stream Y with no wait between them run in either
// order depending on the seed, so the read sees the old bytes for some seeds. With the event wait
// CUDA requires, every seed sees the write.
TEST(FakeCuda, AReadNotOrderedAfterAWriteSeesOldBytesForSomeSeeds) {
  cudaStream_t x = nullptr, y = nullptr;
  cudaEvent_t e = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&x, cudaStreamNonBlocking), cudaSuccess);
  ASSERT_EQ(cudaStreamCreateWithFlags(&y, cudaStreamNonBlocking), cudaSuccess);
  ASSERT_EQ(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), cudaSuccess);
  void* buf = nullptr;
  constexpr std::size_t kN = 4096;
  ASSERT_EQ(cudaMallocAsync(&buf, kN, x), cudaSuccess);
  unsigned char host[kN];
  int stale = 0, fresh = 0;
  for (std::uint64_t seed = 1; seed <= 32; ++seed) {
    fake_cuda_set_seed(seed);
    ASSERT_EQ(cudaMemsetAsync(buf, 0, kN, x), cudaSuccess);  // the old bytes
    ASSERT_EQ(cudaStreamSynchronize(x), cudaSuccess);
    ASSERT_EQ(cudaMemsetAsync(buf, 0x5a, kN, x), cudaSuccess);  // the write, on X
    ASSERT_EQ(cudaMemcpyAsync(host, buf, kN, cudaMemcpyDeviceToHost, y), cudaSuccess);  // no wait
    ASSERT_EQ(cudaStreamSynchronize(y), cudaSuccess);
    (host[0] == 0 ? stale : fresh) += 1;
    ASSERT_EQ(cudaStreamSynchronize(x), cudaSuccess);
  }
  EXPECT_GT(stale, 0) << "the read never ran before the unordered write";
  EXPECT_GT(fresh, 0) << "the read always ran first: the scheduler is not random";
  for (std::uint64_t seed = 1; seed <= 32; ++seed) {
    fake_cuda_set_seed(seed);
    ASSERT_EQ(cudaMemsetAsync(buf, 0, kN, x), cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(x), cudaSuccess);
    ASSERT_EQ(cudaMemsetAsync(buf, 0x5a, kN, x), cudaSuccess);
    ASSERT_EQ(cudaEventRecord(e, x), cudaSuccess);
    ASSERT_EQ(cudaMemsetAsync(buf, 0x77, kN, x), cudaSuccess);  // after the record: may or may not
    ASSERT_EQ(cudaStreamWaitEvent(y, e, 0), cudaSuccess);
    ASSERT_EQ(cudaMemcpyAsync(host, buf, kN, cudaMemcpyDeviceToHost, y), cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(y), cudaSuccess);
    EXPECT_TRUE(host[0] == 0x5a || host[0] == 0x77) << "seed " << seed << ": " << int(host[0]);
    ASSERT_EQ(cudaStreamSynchronize(x), cudaSuccess);
  }
  ASSERT_EQ(cudaFreeAsync(buf, x), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(x), cudaSuccess);
  EXPECT_EQ(cudaEventDestroy(e), cudaSuccess);
  EXPECT_EQ(cudaStreamDestroy(x), cudaSuccess);
  EXPECT_EQ(cudaStreamDestroy(y), cudaSuccess);
  EXPECT_GT(fake_cuda_stats().ops_out_of_order, 0u);
}

// A re-recorded event moves later waits, not earlier ones; an event never recorded is complete.
TEST(FakeCuda, EventsCaptureTheirStreamsPositionAtRecordTime) {
  cudaStream_t x = nullptr;
  cudaEvent_t e = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&x, cudaStreamNonBlocking), cudaSuccess);
  ASSERT_EQ(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), cudaSuccess);
  EXPECT_EQ(cudaEventSynchronize(e), cudaSuccess);
  const unsigned eager = fake_cuda_eager();
  fake_cuda_set_eager(0);  // only forced runs, to see where they stop
  int ran = 0;
  ASSERT_EQ(fake_cuda_enqueue(x, [&] { ran = 1; }), cudaSuccess);
  ASSERT_EQ(cudaEventRecord(e, x), cudaSuccess);
  ASSERT_EQ(fake_cuda_enqueue(x, [&] { ran = 2; }), cudaSuccess);
  EXPECT_EQ(ran, 0) << "nothing runs until forced";
  ASSERT_EQ(cudaEventSynchronize(e), cudaSuccess);
  EXPECT_EQ(ran, 1) << "the event covers the ops before its record, and the fake stops there";
  ASSERT_EQ(cudaEventRecord(e, x), cudaSuccess);
  ASSERT_EQ(cudaEventSynchronize(e), cudaSuccess);
  EXPECT_EQ(ran, 2);
  fake_cuda_set_eager(eager);
  EXPECT_EQ(cudaEventDestroy(e), cudaSuccess);
  EXPECT_EQ(cudaStreamDestroy(x), cudaSuccess);
  EXPECT_EQ(cudaStreamSynchronize(x), cudaErrorInvalidResourceHandle);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidResourceHandle);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess) << "read and cleared";
}

// The virtual memory rules the backend must follow: memory is inaccessible until cuMemSetAccess;
// no mapping outside a reservation, off the granule, over another, or unmapped in part; no
// reservation freed while mapped; physical memory counted until released and unmapped.
TEST(FakeCuda, VirtualMemoryFollowsCudasRules) {
  constexpr std::uint64_t kG = 2 * kMiB;
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = 0;
  std::size_t gran = 0;
  ASSERT_EQ(cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM),
            CUDA_SUCCESS);
  EXPECT_EQ(gran, kG);
  CUdeviceptr va = 0;
  ASSERT_EQ(cuMemAddressReserve(&va, 4 * kG, kG, 0, 0), CUDA_SUCCESS);
  CUmemGenericAllocationHandle h = 0;
  ASSERT_EQ(cuMemCreate(&h, 2 * kG, &prop, 0), CUDA_SUCCESS);
  EXPECT_EQ(cuMemCreate(&h, kG + 4096, &prop, 0), CUDA_ERROR_INVALID_VALUE);
  const std::uint64_t used = fake_cuda_stats().device_bytes_in_use;
  EXPECT_EQ(cuMemMap(va + 4096, 2 * kG, 0, h, 0), CUDA_ERROR_INVALID_VALUE) << "off the granule";
  EXPECT_EQ(cuMemMap(va + 3 * kG, 2 * kG, 0, h, 0), CUDA_ERROR_INVALID_VALUE) << "past the range";
  ASSERT_EQ(cuMemMap(va, 2 * kG, 0, h, 0), CUDA_SUCCESS);
  EXPECT_EQ(cuMemMap(va + kG, kG, 0, h, 0), CUDA_ERROR_INVALID_VALUE) << "over a mapping";
  EXPECT_FALSE(fake_cuda_device_accessible(reinterpret_cast<void*>(va), 16)) << "no access yet";
  CUmemAccessDesc acc{};
  acc.location = prop.location;
  acc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  EXPECT_EQ(cuMemSetAccess(va, kG, &acc, 1), CUDA_ERROR_INVALID_VALUE) << "part of a mapping";
  ASSERT_EQ(cuMemSetAccess(va, 2 * kG, &acc, 1), CUDA_SUCCESS);
  EXPECT_TRUE(fake_cuda_device_accessible(reinterpret_cast<void*>(va), 2 * kG));
  EXPECT_FALSE(fake_cuda_device_accessible(reinterpret_cast<void*>(va), 2 * kG + 1));
  std::memset(reinterpret_cast<void*>(va), 1, 2 * kG);
  EXPECT_EQ(cuMemUnmap(va, kG), CUDA_ERROR_INVALID_VALUE) << "CUDA unmaps no sub-range";
  EXPECT_EQ(cuMemAddressFree(va, 4 * kG), CUDA_ERROR_INVALID_VALUE) << "still mapped";
  ASSERT_EQ(cuMemRelease(h), CUDA_SUCCESS);
  EXPECT_EQ(fake_cuda_stats().device_bytes_in_use, used) << "mapped: not freed yet";
  ASSERT_EQ(cuMemUnmap(va, 2 * kG), CUDA_SUCCESS);
  EXPECT_EQ(fake_cuda_stats().device_bytes_in_use, used - 2 * kG);
  EXPECT_EQ(cuMemRelease(h), CUDA_ERROR_INVALID_VALUE) << "released twice";
  ASSERT_EQ(cuMemAddressFree(va, 4 * kG), CUDA_SUCCESS);
  // A hint that is taken gives another address, as CUDA may.
  CUdeviceptr v1 = 0, v2 = 0;
  ASSERT_EQ(cuMemAddressReserve(&v1, kG, kG, 0, 0), CUDA_SUCCESS);
  ASSERT_EQ(cuMemAddressReserve(&v2, kG, kG, v1, 0), CUDA_SUCCESS);
  EXPECT_NE(v1, v2);
  EXPECT_EQ(v2 % kG, 0u);
  EXPECT_EQ(cuMemAddressFree(v1, kG), CUDA_SUCCESS);
  EXPECT_EQ(cuMemAddressFree(v2, kG), CUDA_SUCCESS);
}

// Work queued on memory that is unmapped before the work runs is what a GPU faults on: the fake
// aborts, loudly, when the work is forced.
TEST(FakeCudaDeathTest, WorkOnMemoryUnmappedBeforeItRanAborts) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        constexpr std::uint64_t kG = 2 * kMiB;
        CUmemAllocationProp prop{};
        prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
        prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
        CUmemAccessDesc acc{};
        acc.location = prop.location;
        acc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
        CUdeviceptr va = 0;
        CUmemGenericAllocationHandle h = 0;
        cudaStream_t s = nullptr;
        cuMemAddressReserve(&va, kG, kG, 0, 0);
        cuMemCreate(&h, kG, &prop, 0);
        cuMemMap(va, kG, 0, h, 0);
        cuMemSetAccess(va, kG, &acc, 1);
        cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
        cudaMemsetAsync(reinterpret_cast<void*>(va), 1, 4096, s);
        cuMemUnmap(va, kG);  // no synchronize first
        cudaStreamSynchronize(s);
      },
      "a GPU would fault here");
}

// A device copy between overlapping ranges is undefined: the fake makes it garbage, so that only
// code that avoids it (the backend's temporary) gets memmove's bytes.
TEST(FakeCuda, AnOverlappingDeviceCopyIsPoisoned) {
  void* buf = nullptr;
  ASSERT_EQ(cudaMallocAsync(&buf, 4096, nullptr), cudaSuccess);
  auto* b = static_cast<unsigned char*>(buf);
  ASSERT_EQ(cudaMemsetAsync(buf, 1, 4096, nullptr), cudaSuccess);
  ASSERT_EQ(cudaMemcpyAsync(b + 1, b, 1000, cudaMemcpyDeviceToDevice, nullptr), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(nullptr), cudaSuccess);
  EXPECT_EQ(b[500], 0xEE);
  ASSERT_EQ(cudaFree(buf), cudaSuccess);
}

}  // namespace
}  // namespace orrery::runtime
