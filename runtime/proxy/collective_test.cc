// The chunk-parallel allreduce is bit-identical to the sequential rank-order sum: for W = 1..8,
// odd sizes and sizes at chunk boundaries, with values whose float sum depends on the order
// (each case checks that it does), in one process and across processes summing concurrently
// (the TCP collective: tcp_collective_test.cc).
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "runtime/proxy/collective.h"
#include "runtime/proxy/collective_chunks.h"
#include "runtime/proxy/rank_order_inputs.h"

namespace orrery::runtime {
namespace {

using testing::inputs;
using testing::rank_order_sum;

// The same values summed in reverse rank order: where this differs from the reference, a
// collective that summed out of order would be caught.
bool order_matters(const std::vector<std::vector<float>>& x) {
  std::vector<float> s = x.back();
  for (int r = static_cast<int>(x.size()) - 2; r >= 0; --r) {
    for (std::size_t i = 0; i < s.size(); ++i) s[i] += x[r][i];
  }
  return std::memcmp(s.data(), rank_order_sum(x).data(), s.size() * sizeof(float)) != 0;
}

std::vector<std::uint64_t> sizes_for(int world) {
  const std::uint64_t cf = chunk_floats(300'001, world);
  return {1, 3, 1023, 4097, chunk_floats(50'000, world) * 3, cf * 2 - 1, cf * 2 + 1, 300'001};
}

std::string shm_name(const char* what) {
  return std::string("/orrery-colltest-") + what + "-" + std::to_string(::getpid());
}

TEST(CollectiveChunks, PlanCoversTheBufferAndDependsOnCountAndWorldOnly) {
  for (int w = 1; w <= 8; ++w) {
    for (std::uint64_t n : sizes_for(w)) {
      const std::uint64_t cf = chunk_floats(n, w), nch = chunk_count(n, w);
      EXPECT_GE(cf * nch, n);
      EXPECT_LT(cf * (nch - 1), n);
      EXPECT_LE(nch, max_chunks(n));
    }
  }
  EXPECT_GT(chunk_count(1 << 24, 4), 16u);  // a 64 MiB buffer is split among many summers
}

TEST(CollectiveChunks, ChunkSumIsTheRankOrderSumEvenInPlace) {
  auto x = inputs(5, 5000, 1);
  ASSERT_TRUE(order_matters(x));
  const auto want = rank_order_sum(x);
  std::vector<const float*> in;
  for (auto& v : x) in.push_back(v.data());
  sum_chunk_in_rank_order(in.data(), 5, 5000, x[0].data());  // out == in[0]
  EXPECT_EQ(std::memcmp(x[0].data(), want.data(), want.size() * sizeof(float)), 0);
}

// The TCP collective sums a chunk straight into its own rank's buffer, whatever that rank is:
// out == in[r] for a later r must still read in[r] before it is overwritten.
TEST(CollectiveChunks, ChunkSumIsTheRankOrderSumInPlaceIntoAnyRanksInput) {
  for (int r = 0; r < 5; ++r) {
    auto x = inputs(5, 5003, 7 + r);  // not a multiple of the 2048-float block
    ASSERT_TRUE(order_matters(x));
    const auto want = rank_order_sum(x);
    std::vector<const float*> in;
    for (auto& v : x) in.push_back(v.data());
    sum_chunk_in_rank_order(in.data(), 5, 5003, x[r].data());
    EXPECT_EQ(std::memcmp(x[r].data(), want.data(), want.size() * sizeof(float)), 0) << "rank " << r;
  }
}

// One process contributes every rank, in a scrambled order, for two steps of each size.
TEST(CollectiveShm, BitIdenticalToTheSequentialSumForEveryWorldAndSize) {
  for (int w = 1; w <= 8; ++w) {
    const std::string name = shm_name("seq");
    Collective::unlink(name);
    auto c = Collective::open(name, w, 300'001);
    ASSERT_TRUE(c.ok()) << c.reason();
    std::int64_t step = 0;
    for (std::uint64_t n : sizes_for(w)) {
      auto x = inputs(w, n, static_cast<unsigned>(w * 1000 + n));
      if (w >= 3 && n >= 1023) {
        ASSERT_TRUE(order_matters(x));
      }
      const auto want = rank_order_sum(x);
      for (int k = 0; k < w; ++k) {
        const int r = (2 * w - 1 - k + static_cast<int>(step)) % w;  // rotated, reversed arrival
        ASSERT_TRUE(c->contribute(r, step, x[r].data(), n, r == 0 ? 1u : 0u).ok());
        if (k + 1 < w) {
          EXPECT_EQ(c->result(step, nullptr), nullptr);
        }
      }
      std::uint64_t flags = 0;
      const float* res = c->result(step, &flags);
      ASSERT_NE(res, nullptr) << "w=" << w << " n=" << n;
      EXPECT_EQ(std::memcmp(res, want.data(), n * sizeof(float)), 0) << "w=" << w << " n=" << n;
      EXPECT_EQ(flags, 1u);
      ++step;
    }
    Collective::unlink(name);
  }
}

// W processes, each contributing its rank and waiting (helping to sum) for the result; several
// steps so that both phases are reused.
TEST(CollectiveShm, ConcurrentProcessesSumBitIdentically) {
  for (int w : {2, 3, 4, 7}) {
    const std::string name = shm_name("proc");
    Collective::unlink(name);
    const std::uint64_t n = chunk_floats(200'003, w) * 5 + 5;
    std::vector<pid_t> kids;
    for (int r = 0; r < w; ++r) {
      pid_t pid = ::fork();
      if (pid == 0) {
        auto c = Collective::open(name, w, n);
        if (!c.ok()) ::_exit(10);
        for (std::int64_t step = 0; step < 4; ++step) {
          const auto x = inputs(w, n, static_cast<unsigned>(step * 31 + w));
          if (!c->contribute(r, step, x[r].data(), n, 1ull << r).ok()) ::_exit(11);
          std::uint64_t flags = 0;
          const float* res = nullptr;
          while ((res = c->result(step, &flags)) == nullptr) c->wait(step, 1'000'000);
          const auto want = rank_order_sum(x);
          if (std::memcmp(res, want.data(), n * sizeof(float)) != 0) ::_exit(12);
          if (flags != (1ull << w) - 1) ::_exit(13);
        }
        ::_exit(0);
      }
      kids.push_back(pid);
    }
    for (pid_t pid : kids) {
      int st = 0;
      ::waitpid(pid, &st, 0);
      EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << "w=" << w << " status " << st;
    }
    Collective::unlink(name);
  }
}

// A flags-only contribution (one float, as a proxy failing its part sends) still completes the
// step, and its flags reach everyone.
TEST(CollectiveShm, AShorterContributionCompletesTheStep) {
  const std::string name = shm_name("short");
  Collective::unlink(name);
  auto c = Collective::open(name, 3, 100'000);
  ASSERT_TRUE(c.ok()) << c.reason();
  const std::vector<float> big(100'000, 1.f);
  const float one = 0.f;
  ASSERT_TRUE(c->contribute(0, 4, big.data(), big.size(), 0).ok());
  ASSERT_TRUE(c->contribute(1, 4, &one, 1, 8).ok());
  ASSERT_TRUE(c->contribute(2, 4, big.data(), big.size(), 0).ok());
  std::uint64_t flags = 0;
  EXPECT_NE(c->result(4, &flags), nullptr);
  EXPECT_EQ(flags, 8u);
  Collective::unlink(name);
}

}  // namespace
}  // namespace orrery::runtime
