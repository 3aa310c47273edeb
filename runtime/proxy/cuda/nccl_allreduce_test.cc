// RankOrderedAllreduce (nccl_allreduce.h) against the host's rank-ordered sum, bit for bit: on the
// GPUs present, one NCCL communicator per device (ncclCommInitAll), one host thread per device,
// for one rank per device, two spliced ranks per device and uneven placements, with counts that
// divide evenly among the devices, counts that do not (padded allgather) and counts smaller than
// D (empty shards). The contributions mix magnitudes (1e8, -1e8, 1, subnormals) so that their float
// sum depends on the order: each case first checks on the host that summing in another order
// (reverse, or device by device) gives different bits, so the bitwise comparison can tell a
// placement-dependent order from the rank order.
// Every test skips, saying so, where no CUDA device is usable (CI, the build machines); those
// needing several GPUs skip with "needs N GPUs, found M".
#include "runtime/proxy/cuda/nccl_allreduce.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <mutex>
#include <numeric>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>
#include <nccl.h>

#include "runtime/proxy/cuda/gpu_test_util.h"
#include "runtime/proxy/kernels.h"

namespace orrery::runtime::cuda {
namespace {

using u64 = std::uint64_t;
using Placement = std::vector<std::vector<int>>;
using Contributions = std::vector<std::vector<float>>;  // [global rank][element]

int visible_devices() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) return 0;
  return count;
}

#define SKIP_UNLESS_DEVICES(n)                                                     \
  do {                                                                             \
    SKIP_WITHOUT_DEVICE();                                                         \
    if (const int found_ = visible_devices(); found_ < (n)) {                      \
      GTEST_SKIP() << "needs " << (n) << " GPUs, found " << found_;                \
    }                                                                              \
  } while (0)

// Counts: 4099 (prime: unequal shards, padded allgather, for every D > 1), 1000 (equal shards
// for D = 1, 2, 4, 5, 8), 999 (equal for D = 3), 1 (empty shards for D > 1). Largest first, so a
// later, smaller call runs over scratch left dirty by a larger one.
const std::vector<u64> kCounts = {4099, 1000, 999, 1};
constexpr u64 kMaxCount = 4099;
// Floats after `count` in each output buffer that the allreduce must leave untouched.
constexpr u64 kGuard = 64;
constexpr std::uint32_t kPoison = 0xFFFFFFFFu;  // a NaN: never a sum of these contributions

int world_of(const Placement& p) {
  int w = 0;
  for (const auto& ranks : p) w += static_cast<int>(ranks.size());
  return w;
}

std::string describe(const Placement& p) {
  std::ostringstream s;
  s << "{";
  for (std::size_t e = 0; e < p.size(); ++e) {
    s << (e ? "," : "") << "[";
    for (std::size_t k = 0; k < p[e].size(); ++k) s << (k ? "," : "") << p[e][k];
    s << "]";
  }
  s << "}";
  return s.str();
}

// Contributions of `world` ranks, kMaxCount floats each; a call with count c uses the first c.
// Element 0 is 1e8, -1e8, 1, then zeros: in rank order (1e8 + -1e8) + 1 = 1, in reverse order
// (1 + -1e8) rounds to -1e8 and the sum is 0. The rest mixes huge, medium, small and subnormal
// values of both signs, so almost every other order also changes some element's bits.
Contributions make_contributions(int world, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> unit(1.0f, 2.0f);
  Contributions c(static_cast<std::size_t>(world), std::vector<float>(kMaxCount));
  for (int r = 0; r < world; ++r) {
    auto& v = c[static_cast<std::size_t>(r)];
    for (u64 i = 0; i < kMaxCount; ++i) {
      const float u = unit(rng);
      const float sign = (rng() & 1u) ? -1.0f : 1.0f;
      switch (rng() % 5) {
        case 0: v[i] = sign * 1e8f * u; break;
        case 1: v[i] = sign * 100.0f * u; break;
        case 2: v[i] = sign * 1e-3f * u; break;
        case 3: v[i] = sign * 1e-39f * u; break;  // subnormal
        default: v[i] = sign * u; break;
      }
    }
    v[0] = r == 0 ? 1e8f : r == 1 ? -1e8f : r == 2 ? 1.0f : 0.0f;
  }
  return c;
}

// The sum over `order` (a sequence of global ranks) of the first `count` floats, by the host's
// sum_in_rank_order: the reference when order is 0..W-1.
std::vector<float> host_sum(const Contributions& c, const std::vector<int>& order, u64 count) {
  std::vector<const float*> in;
  for (int r : order) in.push_back(c[static_cast<std::size_t>(r)].data());
  std::vector<float> out(count);
  sum_in_rank_order(in.data(), static_cast<int>(in.size()), count, out.data());
  return out;
}

std::vector<int> rank_order(int world) {
  std::vector<int> order(static_cast<std::size_t>(world));
  std::iota(order.begin(), order.end(), 0);
  return order;
}

std::vector<int> device_major_order(const Placement& p) {
  std::vector<int> order;
  for (const auto& ranks : p) order.insert(order.end(), ranks.begin(), ranks.end());
  return order;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// The host-side checks that make the device comparison meaningful for this case: the reference
// differs in bits from the sums in reverse order and, where the placement's device-by-device
// order is another order, from that one too (float addition of two terms commutes: W >= 3 only).
void expect_order_sensitive(const Contributions& c, const Placement& p, u64 count) {
  const int world = world_of(p);
  if (world < 3) return;
  const std::vector<int> order = rank_order(world);
  const std::vector<float> ref = host_sum(c, order, count);
  std::vector<int> reverse(order.rbegin(), order.rend());
  EXPECT_FALSE(same_bits(ref, host_sum(c, reverse, count)))
      << "contributions not order-sensitive (reverse order), count " << count;
  const std::vector<int> by_device = device_major_order(p);
  if (by_device != order && count >= 999) {
    EXPECT_FALSE(same_bits(ref, host_sum(c, by_device, count)))
        << "contributions not order-sensitive (device-major order " << describe(p) << "), count "
        << count;
  }
}

std::string hex_bits(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, 4);
  char buf[16];
  std::snprintf(buf, sizeof buf, "%08x", u);
  return buf;
}

// Communicators over devices 0..n-1; destroyed at scope exit unless aborted (a hang).
class LocalComms {
 public:
  explicit LocalComms(int n) {
    auto made = make_local_comms(n);
    if (!made) {
      error_ = made.reason();
      return;
    }
    comms_ = std::move(made).value();
  }
  ~LocalComms() {
    if (!aborted_) destroy_comms(comms_);
  }
  LocalComms(const LocalComms&) = delete;
  LocalComms& operator=(const LocalComms&) = delete;
  const std::string& error() const { return error_; }
  ncclComm_t operator[](int d) const { return comms_[static_cast<std::size_t>(d)]; }
  void abort_all() {
    for (ncclComm_t c : comms_) ncclCommAbort(c);
    aborted_ = true;
  }

 private:
  std::vector<ncclComm_t> comms_;
  std::string error_;
  bool aborted_ = false;
};

// Runs fn(d) on one host thread per device and returns each thread's error ("" = fine). A
// failure on one device leaves its peers blocked in NCCL: after `timeout` the communicators are
// aborted (which unblocks them) and the hang is reported as an error.
std::vector<std::string> on_each_device(int devices, LocalComms& comms,
                                        const std::function<std::string(int)>& fn,
                                        std::chrono::seconds timeout = std::chrono::seconds(120)) {
  std::vector<std::string> errors(static_cast<std::size_t>(devices));
  std::mutex m;
  std::condition_variable cv;
  int done = 0;
  std::vector<std::thread> threads;
  for (int d = 0; d < devices; ++d) {
    threads.emplace_back([&, d] {
      std::string err = fn(d);
      std::lock_guard<std::mutex> lock(m);
      errors[static_cast<std::size_t>(d)] = std::move(err);
      ++done;
      cv.notify_all();
    });
  }
  bool hung = false;
  {
    std::unique_lock<std::mutex> lock(m);
    hung = !cv.wait_for(lock, timeout, [&] { return done == devices; });
  }
  if (hung) comms.abort_all();
  for (auto& t : threads) t.join();
  if (hung) {
    errors.push_back("timed out after " + std::to_string(timeout.count()) +
                     " s: communicators aborted");
  }
  return errors;
}

#define CUDA_OR_RETURN(expr)                                                         \
  do {                                                                               \
    if (const cudaError_t err_ = (expr); err_ != cudaSuccess) {                      \
      return std::string(#expr) + ": " + cudaGetErrorString(err_);                   \
    }                                                                                \
  } while (0)

// Device memory freed at scope exit.
struct DeviceFloats {
  float* p = nullptr;
  ~DeviceFloats() {
    if (p != nullptr) cudaFree(p);
  }
};

struct StreamHolder {
  cudaStream_t s = nullptr;
  ~StreamHolder() {
    if (s != nullptr) cudaStreamDestroy(s);
  }
};

// The whole case: every device runs allreduce for every count of kCounts with one object (so
// scratch is reused across counts); outputs[count index][device] (count + kGuard floats, the
// guard poisoned) are then compared here with the host's sum, and the guard must be intact.
void run_case(const Placement& placement, std::uint32_t seed) {
  const int devices = static_cast<int>(placement.size());
  const int world = world_of(placement);
  SCOPED_TRACE("placement " + describe(placement) + ", D = " + std::to_string(devices) +
               ", W = " + std::to_string(world));
  const Contributions contribs = make_contributions(world, seed);
  for (u64 count : kCounts) expect_order_sensitive(contribs, placement, count);

  LocalComms comms(devices);
  ASSERT_TRUE(comms.error().empty()) << comms.error();

  std::vector<std::vector<std::vector<float>>> outputs(
      kCounts.size(), std::vector<std::vector<float>>(static_cast<std::size_t>(devices)));
  std::atomic<bool> failed{false};

  auto device_main = [&](int d) -> std::string {
    const auto& mine = placement[static_cast<std::size_t>(d)];
    CUDA_OR_RETURN(cudaSetDevice(d));
    StreamHolder stream;
    CUDA_OR_RETURN(cudaStreamCreateWithFlags(&stream.s, cudaStreamNonBlocking));
    std::vector<DeviceFloats> local(mine.size());
    std::vector<const float*> ptrs;
    for (std::size_t k = 0; k < mine.size(); ++k) {
      CUDA_OR_RETURN(cudaMalloc(&local[k].p, kMaxCount * sizeof(float)));
      CUDA_OR_RETURN(cudaMemcpy(local[k].p, contribs[static_cast<std::size_t>(mine[k])].data(),
                                kMaxCount * sizeof(float), cudaMemcpyHostToDevice));
      ptrs.push_back(local[k].p);
    }
    DeviceFloats out;
    CUDA_OR_RETURN(cudaMalloc(&out.p, (kMaxCount + kGuard) * sizeof(float)));

    auto made = RankOrderedAllreduce::create(comms[d], d, placement, kMaxCount, stream.s);
    if (!made) return "create: " + made.reason();
    RankOrderedAllreduce ar = std::move(made).value();

    for (std::size_t ci = 0; ci < kCounts.size(); ++ci) {
      if (failed.load()) return "stopped: another device failed";
      const u64 count = kCounts[ci];
      CUDA_OR_RETURN(cudaMemsetAsync(out.p, 0xFF, (count + kGuard) * sizeof(float), stream.s));
      if (auto st = ar.allreduce(ptrs, out.p, count); !st) {
        return "allreduce(count " + std::to_string(count) + "): " + st.reason();
      }
      CUDA_OR_RETURN(cudaStreamSynchronize(stream.s));
      auto& host = outputs[ci][static_cast<std::size_t>(d)];
      host.resize(count + kGuard);
      CUDA_OR_RETURN(cudaMemcpy(host.data(), out.p, (count + kGuard) * sizeof(float),
                                cudaMemcpyDeviceToHost));
    }
    // The contributions are inputs only.
    for (std::size_t k = 0; k < mine.size(); ++k) {
      std::vector<float> back(kMaxCount);
      CUDA_OR_RETURN(cudaMemcpy(back.data(), local[k].p, kMaxCount * sizeof(float),
                                cudaMemcpyDeviceToHost));
      if (!same_bits(back, contribs[static_cast<std::size_t>(mine[k])])) {
        return "the contribution of rank " + std::to_string(mine[k]) + " was modified";
      }
    }
    return "";
  };

  const std::vector<std::string> errors = on_each_device(devices, comms, [&](int d) {
    std::string err = device_main(d);
    if (!err.empty()) failed = true;  // the others stop at their next count
    return err;
  });
  bool any_error = false;
  for (std::size_t d = 0; d < errors.size(); ++d) {
    if (!errors[d].empty()) {
      ADD_FAILURE() << (d < static_cast<std::size_t>(devices) ? "device " + std::to_string(d)
                                                              : std::string("watchdog"))
                    << ": " << errors[d];
      any_error = true;
    }
  }
  if (any_error) return;

  for (std::size_t ci = 0; ci < kCounts.size(); ++ci) {
    const u64 count = kCounts[ci];
    const std::vector<float> ref = host_sum(contribs, rank_order(world), count);
    for (int d = 0; d < devices; ++d) {
      const auto& got = outputs[ci][static_cast<std::size_t>(d)];
      ASSERT_EQ(got.size(), count + kGuard);
      const std::vector<float> head(got.begin(), got.begin() + static_cast<long>(count));
      if (!same_bits(head, ref)) {
        u64 i = 0;
        while (i < count && std::memcmp(&head[i], &ref[i], 4) == 0) ++i;
        ADD_FAILURE() << "device " << d << ", count " << count << ": not bitwise equal to the "
                      << "host's sum_in_rank_order; first difference at element " << i
                      << ": got " << hex_bits(head[i]) << " (" << head[i] << "), want "
                      << hex_bits(ref[i]) << " (" << ref[i] << ")";
      }
      for (u64 g = count; g < count + kGuard; ++g) {
        std::uint32_t u;
        std::memcpy(&u, &got[g], 4);
        if (u != kPoison) {
          ADD_FAILURE() << "device " << d << ", count " << count << ": wrote past the output, "
                        << "element " << g;
          break;
        }
      }
    }
  }
}

Placement one_rank_per_device(int devices) {
  Placement p(static_cast<std::size_t>(devices));
  for (int d = 0; d < devices; ++d) p[static_cast<std::size_t>(d)] = {d};
  return p;
}

// Device d holds ranks 2D-1-d and d: local order is not rank order.
Placement two_ranks_per_device(int devices) {
  Placement p(static_cast<std::size_t>(devices));
  for (int d = 0; d < devices; ++d) p[static_cast<std::size_t>(d)] = {2 * devices - 1 - d, d};
  return p;
}

// Device e holds e+1 ranks of a shuffled permutation: W = D(D+1)/2 (36 for 8 GPUs: more than
// the 32 ranks one sum kernel launch takes).
Placement uneven_placement(int devices, std::uint32_t seed) {
  const int world = devices * (devices + 1) / 2;
  std::vector<int> perm = rank_order(world);
  std::mt19937 rng(seed);
  std::shuffle(perm.begin(), perm.end(), rng);
  Placement p(static_cast<std::size_t>(devices));
  int next = 0;
  for (int e = 0; e < devices; ++e) {
    for (int k = 0; k <= e; ++k) p[static_cast<std::size_t>(e)].push_back(perm[next++]);
  }
  return p;
}

TEST(RankOrderedAllreduce, OneDeviceHoldsEveryRank) {
  SKIP_WITHOUT_DEVICE();
  run_case({{3, 0, 5, 1, 4, 2}}, 1);
}

TEST(RankOrderedAllreduce, OneDeviceFortyRanks) {
  SKIP_WITHOUT_DEVICE();
  // 40 ranks: the sum kernel takes 32 per launch, so this chains two launches.
  Placement p(1);
  for (int r = 39; r >= 0; --r) p[0].push_back(r);
  run_case(p, 2);
}

TEST(RankOrderedAllreduce, OneRankPerDeviceOnAllDevices) {
  SKIP_WITHOUT_DEVICE();
  run_case(one_rank_per_device(visible_devices()), 3);
}

TEST(RankOrderedAllreduce, TwoSplicedRanksPerDeviceOnAllDevices) {
  SKIP_WITHOUT_DEVICE();
  run_case(two_ranks_per_device(visible_devices()), 4);
}

TEST(RankOrderedAllreduce, UnevenTwoDevices) {
  SKIP_UNLESS_DEVICES(2);
  run_case({{3, 0, 2}, {1}}, 5);
}

TEST(RankOrderedAllreduce, UnevenThreeDevices) {
  SKIP_UNLESS_DEVICES(3);
  run_case({{0, 3}, {1}, {2, 4, 5}}, 6);
}

TEST(RankOrderedAllreduce, UnevenOnAllDevices) {
  SKIP_UNLESS_DEVICES(2);
  run_case(uneven_placement(visible_devices(), 7), 8);
}

TEST(RankOrderedAllreduce, RejectsBadArguments) {
  SKIP_WITHOUT_DEVICE();
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  LocalComms comms(1);
  ASSERT_TRUE(comms.error().empty()) << comms.error();

  auto has = [](const Result<RankOrderedAllreduce>& r, const std::string& words) {
    return !r.ok() && r.reason().find(words) != std::string::npos;
  };
  auto null_comm = RankOrderedAllreduce::create(nullptr, 0, {{0}}, 16, nullptr);
  EXPECT_TRUE(has(null_comm, "null NCCL communicator")) << null_comm.reason();
  auto not_perm = RankOrderedAllreduce::create(comms[0], 0, {{0, 2}}, 16, nullptr);
  EXPECT_TRUE(has(not_perm, "permutation")) << not_perm.reason();
  auto twice = RankOrderedAllreduce::create(comms[0], 0, {{1, 1}}, 16, nullptr);
  EXPECT_TRUE(has(twice, "appears on device 0 and on device 0")) << twice.reason();
  auto too_many = RankOrderedAllreduce::create(comms[0], 0, {{0}, {1}}, 16, nullptr);
  EXPECT_TRUE(has(too_many, "communicator has 1 ranks, the placement 2 devices"))
      << too_many.reason();
  auto wrong_rank = RankOrderedAllreduce::create(comms[0], 1, {{0}}, 16, nullptr);
  EXPECT_TRUE(has(wrong_rank, "device rank 1 outside")) << wrong_rank.reason();

  auto made = RankOrderedAllreduce::create(comms[0], 0, {{1, 0}}, 16, nullptr);
  ASSERT_TRUE(made.ok()) << made.reason();
  RankOrderedAllreduce ar = std::move(made).value();
  EXPECT_EQ(ar.world(), 2);
  EXPECT_EQ(ar.devices(), 1);
  EXPECT_EQ(ar.cuda_device(), 0);

  DeviceFloats a, b, out;
  ASSERT_EQ(cudaMalloc(&a.p, 32 * sizeof(float)), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&b.p, 32 * sizeof(float)), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&out.p, 32 * sizeof(float)), cudaSuccess);
  ASSERT_EQ(cudaMemset(out.p, 0xFF, 32 * sizeof(float)), cudaSuccess);

  const Status one = ar.allreduce({a.p}, out.p, 8);
  EXPECT_FALSE(one.ok());
  EXPECT_NE(one.reason().find("holds 2 ranks, got 1 contributions"), std::string::npos)
      << one.reason();
  const Status big = ar.allreduce({a.p, b.p}, out.p, 17);
  EXPECT_FALSE(big.ok());
  EXPECT_NE(big.reason().find("exceeds max_count 16"), std::string::npos) << big.reason();
  const Status alias = ar.allreduce({a.p, b.p}, b.p + 4, 8);
  EXPECT_FALSE(alias.ok());
  EXPECT_NE(alias.reason().find("overlaps the contribution of rank 0"), std::string::npos)
      << alias.reason();
  const Status null_in = ar.allreduce({a.p, nullptr}, out.p, 8);
  EXPECT_FALSE(null_in.ok());
  EXPECT_NE(null_in.reason().find("null contribution for rank 0"), std::string::npos)
      << null_in.reason();

  // count 0: nothing to do, nothing written.
  EXPECT_TRUE(ar.allreduce({a.p, b.p}, out.p, 0).ok());
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  std::vector<std::uint32_t> back(32);
  ASSERT_EQ(cudaMemcpy(back.data(), out.p, 32 * sizeof(float), cudaMemcpyDeviceToHost),
            cudaSuccess);
  for (std::uint32_t u : back) ASSERT_EQ(u, kPoison);
}

}  // namespace
}  // namespace orrery::runtime::cuda
