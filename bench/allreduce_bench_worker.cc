// One rank of scripts/bench-allreduce's orrery side: a worker process started by a node
// runtime (its ORRERY_* environment), doing what a training job's gradient sync does: a host
// buffer in, the reduced host buffer out, once per step, through the worker library.
//
//   allreduce_bench_worker --counts N[,N...] --iters K [--warmup M] [--mode shared|host|staged]
//
// --mode shared (default): Worker::allreduce_host on gradients kept in the worker's reduce
// buffer (Worker::host_buffer, as a framework keeps its flat gradient bucket; DDP's own buckets
// are its allocation too). --mode host: the same on a buffer of the process's own (across
// machines: copied into the bulk window and back). --mode staged: what a job paid before
// allreduce_host, copy_h2d + allreduce + copy_d2h of a device buffer. The first step's result is checked bit
// for bit against the rank-order sum (every rank can compute every rank's input). Prints a line
// per count, "ALLREDUCE count=N rank=R median_us=U min_us=U ok=0|1", and exits 0 when all ok.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "runtime/worker/worker.h"

namespace {

using orrery::runtime::Worker;

// Rank r's input: values spread over many binary orders of magnitude, so that any other
// summation order would change some bits of the result.
float input(int rank, std::uint64_t i) {
  std::uint64_t x = (i + 1) * 0x9E3779B97F4A7C15ull ^ (static_cast<std::uint64_t>(rank) << 40);
  x ^= x >> 29;
  x *= 0xBF58476D1CE4E5B9ull;
  x ^= x >> 32;
  const float m = 1.0f + static_cast<float>(x & 0xFFFFFF) / 16777216.0f;
  const int e = static_cast<int>((x >> 24) % 31) - 15;
  return std::ldexp((x >> 60) & 1 ? -m : m, e);
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::uint64_t> counts;
  int iters = 10, warmup = 2;
  std::string mode = "shared";
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--counts") {
      for (char* p = argv[i + 1]; *p != '\0';) {
        counts.push_back(std::strtoull(p, &p, 10));
        if (*p == ',') ++p;
        else if (*p != '\0') counts = {0};
      }
    }
    else if (a == "--iters") iters = std::atoi(argv[i + 1]);
    else if (a == "--warmup") warmup = std::atoi(argv[i + 1]);
    else if (a == "--mode") mode = argv[i + 1];
  }
  if (counts.empty() || *std::min_element(counts.begin(), counts.end()) == 0 || iters < 1 || warmup < 0 || (mode != "shared" && mode != "host" && mode != "staged")) {
    std::fprintf(stderr, "usage: allreduce_bench_worker --counts N[,N...] --iters K [--warmup M] "
                         "[--mode shared|host|staged]\n");
    return 2;
  }
  auto w = Worker::connect_from_env();
  if (!w) {
    std::fprintf(stderr, "allreduce_bench_worker: %s\n", w.reason().c_str());
    return 1;
  }
  Worker& wk = **w;
  const int rank = wk.rank(), world = wk.world();
  orrery::runtime::DevPtr dev = 0;
  std::int64_t step = 0;
  bool all_ok = true;
  for (const std::uint64_t count : counts) {
    std::vector<float> mine(count), own(count), want(count);
    float* buf = own.data();
    if (mode == "shared") {
      auto b = wk.host_buffer(count);
      if (!b) {
        std::fprintf(stderr, "allreduce_bench_worker: %s\n", b.reason().c_str());
        return 1;
      }
      buf = b.value();
    }
    for (std::uint64_t i = 0; i < count; ++i) {
      mine[i] = input(rank, i);
      want[i] = input(0, i);
    }
    for (int r = 1; r < world; ++r) {
      for (std::uint64_t i = 0; i < count; ++i) want[i] += input(r, i);
    }
    if (mode == "staged" && dev == 0) {  // sized for the largest count
      auto d = wk.alloc(*std::max_element(counts.begin(), counts.end()) * sizeof(float));
      if (!d) {
        std::fprintf(stderr, "allreduce_bench_worker: %s\n", d.reason().c_str());
        return 1;
      }
      dev = d.value();
    }
    bool ok = true;
    std::vector<double> us;
    for (int i = 0; i < warmup + iters; ++i, ++step) {
      std::memcpy(buf, mine.data(), count * sizeof(float));  // the step's fresh gradients
      const auto t0 = std::chrono::steady_clock::now();
      orrery::Status st;
      if (mode != "staged") {
        auto f = wk.allreduce_host(buf, count, step);
        if (!f) st = f.status();
      } else {
        st = wk.copy_h2d(dev, buf, count * sizeof(float));
        if (st) {
          auto f = wk.allreduce(dev, count, step);
          if (!f) st = f.status();
        }
        if (st) st = wk.copy_d2h(buf, dev, count * sizeof(float));
      }
      const auto t1 = std::chrono::steady_clock::now();
      if (!st) {
        std::fprintf(stderr, "allreduce_bench_worker rank %d: %s\n", rank, st.reason().c_str());
        return 1;
      }
      if (i == 0) ok = std::memcmp(buf, want.data(), count * sizeof(float)) == 0;
      if (i >= warmup) us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
      if (auto b = wk.step_boundary(step + 1); !b) {
        std::fprintf(stderr, "allreduce_bench_worker rank %d: %s\n", rank, b.reason().c_str());
        return 1;
      }
    }
    std::sort(us.begin(), us.end());
    std::printf("ALLREDUCE count=%llu rank=%d median_us=%.1f min_us=%.1f ok=%d\n",
                static_cast<unsigned long long>(count), rank, us[us.size() / 2], us.front(),
                ok ? 1 : 0);
    std::fflush(stdout);
    all_ok = all_ok && ok;
  }
  (void)wk.report(all_ok ? "ok" : "wrong result");
  return all_ok ? 0 : 1;
}
