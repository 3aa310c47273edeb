// cuda_bench: the CUDA backend's figures against the raw device, side by side in one run
// (docs/performance.md, "CUDA backend"; scripts/gpu-test runs it on a GPU machine).
//   cuda_bench [--sizes=MIB,...] [--reps=N] [--calls=N] [--device=D]
// 1. checkpoint D2H and restore H2D through the backend's streams (pinned staging, the device
//    copy of chunk i+1 overlapping the sink of chunk i) against one raw cudaMemcpy between the
//    device and a pinned buffer of the same bytes; the stream's sink and source touch nothing,
//    so the figure is the pipeline's own (a second line adds CRC-32C, what a shard write adds);
// 2. a kernel launch forwarded through orrery-proxy (worker -> shm ring -> proxy -> cuda
//    backend), launch + synchronize per call, against the same kernel launched directly on a
//    stream in this process, launch + synchronize; p50 and p99;
// 3. the allreduce of W ranks spliced on one device kept on the device (cuda/cuda_collective.h:
//    contribution slots, the rank-ordered kernel, the result copied back) against the host path
//    the proxy takes otherwise (each contribution to the host, sum_in_rank_order, the result
//    back to each rank); both through the backend, bit-identical results checked.
// Exits 0 saying so when there is no usable GPU.
#include <unistd.h>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "bench/proxy_process.h"
#include "runtime/proxy/address_space.h"
#include "runtime/proxy/backend.h"
#include "runtime/proxy/crc32c_fast.h"
#include "runtime/proxy/cuda/cuda_backend.h"
#include "runtime/proxy/cuda/cuda_kernels.h"
#include "runtime/proxy/kernels.h"
#include "runtime/proxy/ring.h"
#include "runtime/worker/worker.h"

using namespace orrery;
using namespace orrery::runtime;
using Clock = std::chrono::steady_clock;

namespace {

const char kUsage[] =
    "usage: cuda_bench [--sizes=MIB,...] [--reps=N] [--calls=N] [--device=D]\n"
    "The cuda backend against the raw device, side by side: checkpoint D2H and restore H2D\n"
    "through the backend's pinned staging pipeline vs one raw pinned cudaMemcpy of the same bytes\n"
    "(medians of N, default 10; sizes default 64,256,1024,4096 MiB), and a kernel launch forwarded\n"
    "through orrery-proxy vs a direct launch (launch + synchronize each; --calls, default 20000;\n"
    "p50, p99), and the allreduce of 4 spliced ranks kept on the device vs summed on the host\n"
    "(1M and 16M floats; medians of N). Exits 0 saying so when there is no usable GPU; 2 on bad\n"
    "arguments.\n";

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}
double pct(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<std::size_t>(p * static_cast<double>(v.size())))];
}
double secs_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}
void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "cuda_bench: %s: %s\n", what, cudaGetErrorString(e));
    std::exit(1);
  }
}
void check(const Status& s, const char* what) {
  if (!s) {
    std::fprintf(stderr, "cuda_bench: %s: %s\n", what, s.reason().c_str());
    std::exit(1);
  }
}

void copies(int device, const std::vector<int>& sizes, int reps) {
  std::printf("checkpoint D2H / restore H2D, device %d (median of %d; GB/s = 1e9 bytes/s)\n", device,
              reps);
  std::printf("  %8s %12s %12s %7s %12s %12s %12s %7s\n", "MiB", "raw D2H", "stream_out", "ratio",
              "+crc32c", "raw H2D", "stream_in", "ratio");
  for (int mib : sizes) {
    const std::uint64_t n = static_cast<std::uint64_t>(mib) << 20;
    auto be = make_backend("cuda", device, n + (64u << 20));
    check(be.status(), "cuda backend");
    const std::uint64_t addr = job_window(1);
    check((*be)->allocate(addr, n), "allocate");
    void* pinned = nullptr;
    check(cudaHostAlloc(&pinned, n, cudaHostAllocDefault), "cudaHostAlloc");
    std::memset(pinned, 5, n);
    void* dev = reinterpret_cast<void*>(static_cast<std::uintptr_t>(addr));
    std::vector<double> raw_d2h, raw_h2d, out, out_crc, in;
    for (int r = 0; r < reps + 1; ++r) {  // the first round warms up
      auto t = Clock::now();
      check(cudaMemcpy(pinned, dev, n, cudaMemcpyDeviceToHost), "raw D2H");
      const double d2h = secs_since(t);
      t = Clock::now();
      check(cudaMemcpy(dev, pinned, n, cudaMemcpyHostToDevice), "raw H2D");
      const double h2d = secs_since(t);
      t = Clock::now();
      check((*be)->stream_out(addr, n, [](const void*, std::uint64_t) { return Status::Ok(); }),
            "stream_out");
      const double so = secs_since(t);
      std::uint32_t crc = 0;
      t = Clock::now();
      check((*be)->stream_out(addr, n,
                              [&](const void* p, std::uint64_t k) {
                                crc = crc32c_fast_extend(crc, p, k);
                                return Status::Ok();
                              }),
            "stream_out+crc");
      const double sc = secs_since(t);
      t = Clock::now();
      check((*be)->stream_in(addr, n, [](void*, std::uint64_t) { return Status::Ok(); }),
            "stream_in");
      const double si = secs_since(t);
      if (r == 0) continue;
      raw_d2h.push_back(d2h);
      raw_h2d.push_back(h2d);
      out.push_back(so);
      out_crc.push_back(sc);
      in.push_back(si);
    }
    const double nb = static_cast<double>(n) / 1e9;
    const double rd = nb / median(raw_d2h), so = nb / median(out), sc = nb / median(out_crc),
                 rh = nb / median(raw_h2d), si = nb / median(in);
    std::printf("  %8d %9.2f GB/s %7.2f GB/s %6.1f%% %7.2f GB/s %7.2f GB/s %7.2f GB/s %6.1f%%\n",
                mib, rd, so, 100 * so / rd, sc, rh, si, 100 * si / rh);
    cudaFreeHost(pinned);
    check((*be)->free(addr, n), "free");
  }
}

void launches(int device, int calls) {
  // Direct: this process's own context, the same kernel and arguments.
  check(cudaSetDevice(device), "cudaSetDevice");
  float* buf = nullptr;
  check(cudaMalloc(reinterpret_cast<void**>(&buf), 64), "cudaMalloc");
  cudaStream_t s;
  check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate");
  const std::uint64_t args[] = {reinterpret_cast<std::uint64_t>(buf), 1, float_arg(1.f)};
  std::vector<double> direct(calls), fwd(calls);
  for (int i = 0; i < 1000 + calls; ++i) {
    const auto t = Clock::now();
    check(cuda::launch_kernel("fill", args, 3, s), "direct launch");
    check(cudaStreamSynchronize(s), "direct synchronize");
    if (i >= 1000) direct[i - 1000] = secs_since(t) * 1e6;
  }
  cudaStreamDestroy(s);
  cudaFree(buf);
  // Forwarded: a worker of this process, its proxy in another.
  const std::string shm = "/orrery-cuda-bench-" + std::to_string(::getpid());
  bench::ProxyProcess proxy(shm, {"--backend", "cuda", "--device", "0", "--cuda-device",
                                  std::to_string(device), "--mem-mib", "256", "--ckpt-dir", "/tmp"});
  WorkerEnv e;
  e.proxy = shm;
  e.collective = shm + "-coll";
  e.job = 1;
  e.epoch = 1;
  auto w = Worker::connect(e);
  check(w.status(), "worker connect");
  auto p = (*w)->alloc(64);
  check(p.status(), "alloc");
  for (int i = 0; i < 1000 + calls; ++i) {
    const auto t = Clock::now();
    check((*w)->launch("fill", {*p, 1, float_arg(1.f)}), "forwarded launch");
    check((*w)->synchronize(), "forwarded synchronize");
    if (i >= 1000) fwd[i - 1000] = secs_since(t) * 1e6;
  }
  w->reset();
  std::printf("kernel launch + synchronize (fill, 1 float; %d calls each after 1000 warm-up)\n",
              calls);
  std::printf("  direct, this process        p50 %7.2f us   p99 %7.2f us\n", pct(direct, 0.5),
              pct(direct, 0.99));
  std::printf("  through orrery-proxy        p50 %7.2f us   p99 %7.2f us   (+%.2f us p50)\n",
              pct(fwd, 0.5), pct(fwd, 0.99), pct(fwd, 0.5) - pct(direct, 0.5));
}

}  // namespace

void allreduces(int device, int reps) {
  constexpr int kRanks = 4;
  std::printf("allreduce of %d ranks spliced on device %d (median of %d per step)\n", kRanks, device,
              reps);
  std::printf("  %10s %14s %14s %8s\n", "floats", "on the device", "via the host", "speedup");
  for (std::uint64_t count : {1ull << 20, 16ull << 20}) {
    const std::uint64_t bytes = count * sizeof(float), slot = round_granule(bytes);
    auto be = make_backend("cuda", device, kRanks * slot + (256ull << 20));
    check(be.status(), "cuda backend");
    DeviceCollectiveSetup setup;
    setup.world = kRanks;
    setup.ranks_by_device = {{0, 1, 2, 3}};
    setup.count = count;
    auto coll = (*be)->open_device_collective(setup);
    check(coll.status(), "device collective");
    const std::uint64_t base = job_window(2);
    std::vector<std::vector<float>> in(kRanks, std::vector<float>(count));
    for (int r = 0; r < kRanks; ++r) {
      for (std::uint64_t i = 0; i < count; ++i) in[r][i] = 0.25f * (r + 1) + 1e-6f * (i % 4099);
    }
    auto load = [&] {
      for (int r = 0; r < kRanks; ++r) {
        (*be)->bind_worker(7, r);
        check((*be)->copy_h2d(base + r * slot, in[r].data(), bytes), "h2d");
      }
    };
    for (int r = 0; r < kRanks; ++r) {
      (*be)->bind_worker(7, r);
      check((*be)->allocate(base + r * slot, slot), "allocate");
    }
    std::vector<double> dev_t, host_t;
    std::vector<float> got(count), host_sum(count), want(count);
    std::vector<const float*> rows;
    for (auto& v : in) rows.push_back(v.data());
    sum_in_rank_order(rows.data(), kRanks, count, want.data());
    for (int rep = 0; rep < reps + 1; ++rep) {
      load();
      auto t = Clock::now();
      for (int r = 0; r < kRanks; ++r) {
        (*be)->bind_worker(7, r);
        check((*coll)->contribute(r, rep, base + r * slot, count), "contribute");
      }
      for (;;) {
        auto rd = (*coll)->ready(rep);
        check(rd.status(), "ready");
        if (rd.value()) break;
      }
      for (int r = 0; r < kRanks; ++r) {
        (*be)->bind_worker(7, r);
        check((*coll)->deliver(r, rep, base + r * slot, count), "deliver");
        check((*be)->synchronize(), "synchronize");
      }
      const double d = secs_since(t);
      (*be)->bind_worker(7, kRanks - 1);
      check((*be)->copy_d2h(got.data(), base + (kRanks - 1) * slot, bytes), "d2h");
      if (std::memcmp(got.data(), want.data(), bytes) != 0) {
        std::fprintf(stderr, "cuda_bench: the device allreduce differs from the host sum\n");
        std::exit(1);
      }
      load();
      t = Clock::now();
      // As the proxy's host path: each contribution into pageable staging, the sum in the
      // collective's (pageable) shared memory, the result back to each rank.
      for (int r = 0; r < kRanks; ++r) {
        (*be)->bind_worker(7, r);
        check((*be)->copy_d2h(in[r].data(), base + r * slot, bytes), "d2h");
      }
      sum_in_rank_order(rows.data(), kRanks, count, host_sum.data());
      for (int r = 0; r < kRanks; ++r) {
        (*be)->bind_worker(7, r);
        check((*be)->copy_h2d(base + r * slot, host_sum.data(), bytes), "h2d");
      }
      const double h = secs_since(t);
      if (rep == 0) continue;
      dev_t.push_back(d);
      host_t.push_back(h);
    }
    const double md = median(dev_t), mh = median(host_t);
    std::printf("  %10llu %11.3f ms %11.3f ms %7.1fx\n", static_cast<unsigned long long>(count),
                md * 1e3, mh * 1e3, mh / md);
    coll->reset();
    for (int r = 0; r < kRanks; ++r) {
      check((*be)->free(base + r * slot, slot), "free");
      (*be)->release_worker(7, r);
    }
  }
}

int main(int argc, char** argv) {
  std::vector<int> sizes = {64, 256, 1024, 4096};
  int reps = 10, calls = 20000, device = 0;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      std::fputs(kUsage, stdout);
      return 0;
    } else if (a.rfind("--sizes=", 0) == 0) {
      sizes.clear();
      std::stringstream ss(a.substr(8));
      for (std::string item; std::getline(ss, item, ',');) {
        const int v = std::atoi(item.c_str());
        if (v < 1 || v > 65536) {
          std::fprintf(stderr, "cuda_bench: --sizes: '%s' is not a size in MiB\n%s", item.c_str(), kUsage);
          return 2;
        }
        sizes.push_back(v);
      }
    } else if (a.rfind("--reps=", 0) == 0 && std::atoi(a.c_str() + 7) > 0) {
      reps = std::atoi(a.c_str() + 7);
    } else if (a.rfind("--calls=", 0) == 0 && std::atoi(a.c_str() + 8) >= 100) {
      calls = std::atoi(a.c_str() + 8);
    } else if (a.rfind("--device=", 0) == 0) {
      device = std::atoi(a.c_str() + 9);
    } else {
      std::fprintf(stderr, "cuda_bench: bad argument '%s'\n%s", a.c_str(), kUsage);
      return 2;
    }
  }
  if (auto s = cuda_device_usable(device); !s) {
    std::printf("cuda_bench: %s: nothing measured\n", s.reason().c_str());
    return 0;
  }
  cudaDeviceProp prop{};
  cudaGetDeviceProperties(&prop, device);
  std::printf("cuda_bench: device %d: %s, %zu MiB\n", device, prop.name, prop.totalGlobalMem >> 20);
  copies(device, sizes, reps);
  launches(device, calls);
  allreduces(device, reps);
  return 0;
}
