// nccl_bench: the rank-ordered allreduce (runtime/proxy/cuda/nccl_allreduce.h) against a plain
// ncclAllReduce (sum) on all visible GPUs of this machine, side by side in one run. For each size
// (MiB of floats): the median over --reps iterations (after --warmup) of the slowest device's
// cudaEvent time, and the algorithm bandwidth (bytes / time). The rank-ordered one runs with
// W = D (one rank per device) and W = 2D (two spliced ranks per device, which sends twice the
// reduce-scatter bytes). Not a Google Benchmark program: it prints its own table.
#include <algorithm>
#include <atomic>
#include <barrier>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include <cuda_runtime_api.h>
#include <nccl.h>

#include "runtime/proxy/cuda/nccl_allreduce.h"
#include "runtime/proxy/kernels.h"

namespace {

using orrery::runtime::cuda::RankOrderedAllreduce;
using u64 = std::uint64_t;

constexpr const char* kUsage =
    "usage: nccl_bench [--sizes=MiB,MiB,...] [--reps=N] [--warmup=N]\n"
    "\n"
    "Times, on every visible GPU of this machine (D = their number, one NCCL rank per device,\n"
    "communicators from ncclCommInitAll, one host thread per device):\n"
    "  ncclAllReduce            plain NCCL sum (order depends on the ring/tree and on D)\n"
    "  ordered W=D              RankOrderedAllreduce, one rank per device\n"
    "  ordered W=2D             RankOrderedAllreduce, two spliced ranks per device\n"
    "for buffers of each size in MiB of floats (default 1,16,64,256). Each figure is the median\n"
    "over --reps iterations (default 20) after --warmup iterations (default 3) of the slowest\n"
    "device's cudaEvent time for one allreduce; algbw = buffer bytes / time. 'x nccl' is the\n"
    "time relative to ncclAllReduce. After timing, device 0's output of each rank-ordered run is\n"
    "checked bit for bit against the host's rank-ordered sum (uniform inputs).\n"
    "Exits 0 printing 'no CUDA device: ...' where no GPU is usable; 1 on a CUDA/NCCL error;\n"
    "2 on a usage error.\n";

struct Options {
  std::vector<u64> sizes_mib = {1, 16, 64, 256};
  int reps = 20;
  int warmup = 3;
};

bool parse_uint(std::string_view s, u64* out) {
  if (s.empty()) return false;
  u64 v = 0;
  for (char c : s) {
    if (c < '0' || c > '9' || v > (~u64{0} - 9) / 10) return false;
    v = v * 10 + static_cast<u64>(c - '0');
  }
  *out = v;
  return true;
}

// Returns an empty string on success, else the usage error.
std::string parse(int argc, char** argv, Options* o, bool* help) {
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    u64 v = 0;
    if (a == "--help" || a == "-h") {
      *help = true;
    } else if (a.rfind("--sizes=", 0) == 0) {
      o->sizes_mib.clear();
      std::string_view rest = a.substr(8);
      while (!rest.empty()) {
        const auto comma = rest.find(',');
        const std::string_view item = rest.substr(0, comma);
        if (!parse_uint(item, &v) || v == 0 || v > 65536) {
          return "bad size '" + std::string(item) + "' (MiB, 1..65536)";
        }
        o->sizes_mib.push_back(v);
        rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
      }
      if (o->sizes_mib.empty()) return "--sizes needs at least one size";
    } else if (a.rfind("--reps=", 0) == 0) {
      if (!parse_uint(a.substr(7), &v) || v == 0 || v > 100000) return "bad --reps";
      o->reps = static_cast<int>(v);
    } else if (a.rfind("--warmup=", 0) == 0) {
      if (!parse_uint(a.substr(9), &v) || v > 100000) return "bad --warmup";
      o->warmup = static_cast<int>(v);
    } else {
      return "unknown argument '" + std::string(a) + "'";
    }
  }
  return "";
}

std::string cuda_err(const char* what, cudaError_t e) {
  return std::string(what) + ": " + cudaGetErrorString(e);
}
std::string nccl_err(const char* what, ncclResult_t r) {
  return std::string(what) + ": " + ncclGetErrorString(r);
}

#define CUDA_OR_FAIL(expr)                                         \
  do {                                                             \
    if (const cudaError_t e_ = (expr); e_ != cudaSuccess) {        \
      return fail(cuda_err(#expr, e_));                            \
    }                                                              \
  } while (0)

// Device buffers of one device, freed at scope exit.
struct Buffers {
  std::vector<float*> ptrs;
  float* alloc(u64 count, cudaError_t* err) {
    void* p = nullptr;
    *err = cudaMalloc(&p, count * sizeof(float));
    if (*err != cudaSuccess) return nullptr;
    ptrs.push_back(static_cast<float*>(p));
    return static_cast<float*>(p);
  }
  ~Buffers() {
    for (float* p : ptrs) cudaFree(p);
  }
};

constexpr int kPlainNccl = 0;  // ranks_per_device 0: ncclAllReduce
constexpr int kFillByte = 0x3C;  // every input float is 0x3C3C3C3C (~0.0115)

struct VariantResult {
  std::vector<double> ms;  // per timed iteration, the slowest device's time
  std::string error;       // empty when fine
  std::string check;       // the bitwise check's outcome (rank-ordered variants)
};

// One variant at one size on every device, one host thread per device.
VariantResult run_variant(const std::vector<ncclComm_t>& comms, u64 count, int ranks_per_device,
                          const Options& opt) {
  const int devices = static_cast<int>(comms.size());
  const int iters = opt.warmup + opt.reps;
  std::vector<std::vector<float>> times(static_cast<std::size_t>(devices),
                                        std::vector<float>(static_cast<std::size_t>(iters)));
  std::vector<std::string> errors(static_cast<std::size_t>(devices));
  std::string check;
  std::atomic<bool> failed{false};
  std::barrier<> sync(devices);

  // Placement for W = ranks_per_device * D: device d holds d, d + D, d + 2D, ...
  std::vector<std::vector<int>> placement(static_cast<std::size_t>(devices));
  for (int d = 0; d < devices; ++d) {
    for (int k = 0; k < ranks_per_device; ++k) {
      placement[static_cast<std::size_t>(d)].push_back(d + k * devices);
    }
  }

  auto worker = [&](int d) -> std::string {
    bool dropped = false;
    auto fail = [&](std::string why) {
      failed = true;
      if (!dropped) sync.arrive_and_drop();
      dropped = true;
      return why;
    };
    CUDA_OR_FAIL(cudaSetDevice(d));
    cudaStream_t stream = nullptr;
    CUDA_OR_FAIL(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    cudaEvent_t start = nullptr, stop = nullptr;
    CUDA_OR_FAIL(cudaEventCreate(&start));
    CUDA_OR_FAIL(cudaEventCreate(&stop));
    struct Cleanup {
      cudaStream_t s;
      cudaEvent_t a, b;
      ~Cleanup() {
        if (a) cudaEventDestroy(a);
        if (b) cudaEventDestroy(b);
        if (s) cudaStreamDestroy(s);
      }
    } cleanup{stream, start, stop};

    Buffers bufs;
    cudaError_t err = cudaSuccess;
    std::vector<const float*> inputs;
    const int local = ranks_per_device == kPlainNccl ? 1 : ranks_per_device;
    for (int k = 0; k < local; ++k) {
      float* p = bufs.alloc(count, &err);
      if (p == nullptr) return fail(cuda_err("cudaMalloc (input)", err));
      CUDA_OR_FAIL(cudaMemset(p, kFillByte, count * sizeof(float)));
      inputs.push_back(p);
    }
    float* out = bufs.alloc(count, &err);
    if (out == nullptr) return fail(cuda_err("cudaMalloc (output)", err));

    std::vector<RankOrderedAllreduce> ordered;
    if (ranks_per_device != kPlainNccl) {
      auto made = RankOrderedAllreduce::create(comms[static_cast<std::size_t>(d)], d, placement,
                                               count, stream);
      if (!made) return fail("RankOrderedAllreduce::create: " + made.reason());
      ordered.push_back(std::move(made).value());
    }
    CUDA_OR_FAIL(cudaDeviceSynchronize());

    for (int it = 0; it < iters; ++it) {
      sync.arrive_and_wait();
      if (failed.load()) {
        sync.arrive_and_drop();
        dropped = true;
        return "stopped: another device failed";
      }
      CUDA_OR_FAIL(cudaEventRecord(start, stream));
      if (ranks_per_device == kPlainNccl) {
        if (ncclResult_t r = ncclAllReduce(inputs[0], out, count, ncclFloat, ncclSum,
                                           comms[static_cast<std::size_t>(d)], stream);
            r != ncclSuccess) {
          return fail(nccl_err("ncclAllReduce", r));
        }
      } else if (auto st = ordered[0].allreduce(inputs, out, count); !st) {
        return fail("RankOrderedAllreduce::allreduce: " + st.reason());
      }
      CUDA_OR_FAIL(cudaEventRecord(stop, stream));
      CUDA_OR_FAIL(cudaEventSynchronize(stop));
      float ms = 0;
      CUDA_OR_FAIL(cudaEventElapsedTime(&ms, start, stop));
      times[static_cast<std::size_t>(d)][static_cast<std::size_t>(it)] = ms;
    }
    sync.arrive_and_drop();
    dropped = true;

    if (ranks_per_device != kPlainNccl && d == 0) {
      // Every input element is the same float: the rank-ordered sum of W copies, by the host.
      float v;
      std::uint32_t bits = 0x01010101u * static_cast<std::uint32_t>(kFillByte);
      std::memcpy(&v, &bits, 4);
      const int world = ranks_per_device * devices;
      std::vector<const float*> in(static_cast<std::size_t>(world), &v);
      float want = 0;
      orrery::runtime::sum_in_rank_order(in.data(), world, 1, &want);
      std::vector<float> got(count);
      CUDA_OR_FAIL(cudaMemcpy(got.data(), out, count * sizeof(float), cudaMemcpyDeviceToHost));
      u64 bad = 0;
      for (u64 i = 0; i < count; ++i) bad += std::memcmp(&got[i], &want, 4) != 0;
      check = bad == 0 ? "ok" : std::to_string(bad) + " of " + std::to_string(count) +
                                    " floats differ from the host's rank-ordered sum";
    }
    return "";
  };

  std::vector<std::thread> threads;
  for (int d = 0; d < devices; ++d) {
    threads.emplace_back([&, d] { errors[static_cast<std::size_t>(d)] = worker(d); });
  }
  for (auto& t : threads) t.join();

  VariantResult res;
  res.check = check;
  for (int d = 0; d < devices; ++d) {
    const std::string& e = errors[static_cast<std::size_t>(d)];
    if (!e.empty() && e.rfind("stopped:", 0) != 0) {
      res.error = "device " + std::to_string(d) + ": " + e;
      return res;
    }
  }
  for (int it = opt.warmup; it < iters; ++it) {
    double slowest = 0;
    for (int d = 0; d < devices; ++d) {
      slowest = std::max(slowest, static_cast<double>(
                                      times[static_cast<std::size_t>(d)][static_cast<std::size_t>(it)]));
    }
    res.ms.push_back(slowest);
  }
  return res;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

}  // namespace

int main(int argc, char** argv) {
  Options opt;
  bool help = false;
  if (const std::string err = parse(argc, argv, &opt, &help); !err.empty()) {
    std::fprintf(stderr, "nccl_bench: %s\n%s", err.c_str(), kUsage);
    return 2;
  }
  if (help) {
    std::fputs(kUsage, stdout);
    return 0;
  }

  int devices = 0;
  if (const cudaError_t e = cudaGetDeviceCount(&devices); e != cudaSuccess) {
    std::printf("no CUDA device: %s (nccl_bench skipped)\n", cudaGetErrorString(e));
    return 0;
  }
  if (devices == 0) {
    std::printf("no CUDA device: no devices found (nccl_bench skipped)\n");
    return 0;
  }

  int nccl_version = 0;
  ncclGetVersion(&nccl_version);
  std::printf("nccl_bench: rank-ordered allreduce vs ncclAllReduce, D = %d GPU%s, NCCL %d.%d.%d\n",
              devices, devices == 1 ? "" : "s", nccl_version / 10000, nccl_version / 100 % 100,
              nccl_version % 100);
  for (int d = 0; d < devices; ++d) {
    cudaDeviceProp prop{};
    if (const cudaError_t e = cudaGetDeviceProperties(&prop, d); e != cudaSuccess) {
      std::fprintf(stderr, "nccl_bench: %s\n", cuda_err("cudaGetDeviceProperties", e).c_str());
      return 1;
    }
    std::printf("device %d: %s, %.1f GiB\n", d, prop.name,
                static_cast<double>(prop.totalGlobalMem) / (1024.0 * 1024.0 * 1024.0));
  }
  std::printf("median of %d after %d warm-up%s; time = slowest device's cudaEvent time; "
              "algbw = bytes / time\n",
              opt.reps, opt.warmup, opt.warmup == 1 ? "" : "s");
  std::printf("bytes sent per device for N bytes: ncclAllReduce (ring) 2N(D-1)/D; "
              "ordered W=D the same; ordered W=2D 3N(D-1)/D\n");

  auto comms = orrery::runtime::cuda::make_local_comms(devices);
  if (!comms) {
    std::fprintf(stderr, "nccl_bench: %s\n", comms.reason().c_str());
    return 1;
  }

  std::printf("\n%8s  %-9s | %9s %8s | %9s %8s %7s | %9s %8s %7s | %s\n", "MiB", "shards",
              "nccl ms", "GB/s", "W=D ms", "GB/s", "x nccl", "W=2D ms", "GB/s", "x nccl",
              "check");
  int rc = 0;
  for (u64 mib : opt.sizes_mib) {
    const u64 count = mib * 1024 * 1024 / sizeof(float);
    const double bytes = static_cast<double>(count * sizeof(float));
    const char* shards = count % static_cast<u64>(devices) == 0 ? "equal" : "padded";
    double ms[3] = {0, 0, 0};
    std::string checks;
    bool ok = true;
    const int variants[3] = {kPlainNccl, 1, 2};
    for (int v = 0; v < 3 && ok; ++v) {
      VariantResult r = run_variant(*comms, count, variants[v], opt);
      if (!r.error.empty()) {
        std::fprintf(stderr, "nccl_bench: %llu MiB, %s: %s\n",
                     static_cast<unsigned long long>(mib),
                     v == 0 ? "ncclAllReduce" : v == 1 ? "ordered W=D" : "ordered W=2D",
                     r.error.c_str());
        ok = false;
        rc = 1;
        break;
      }
      ms[v] = median(r.ms);
      if (v > 0) {
        checks += std::string(checks.empty() ? "" : "; ") + (v == 1 ? "W=D " : "W=2D ") + r.check;
        if (r.check != "ok") rc = 1;
      }
    }
    if (!ok) continue;
    auto gbps = [&](double t) { return t > 0 ? bytes / (t * 1e-3) / 1e9 : 0.0; };
    std::printf("%8llu  %-9s | %9.3f %8.1f | %9.3f %8.1f %7.2f | %9.3f %8.1f %7.2f | %s\n",
                static_cast<unsigned long long>(mib), shards, ms[0], gbps(ms[0]), ms[1],
                gbps(ms[1]), ms[0] > 0 ? ms[1] / ms[0] : 0.0, ms[2], gbps(ms[2]),
                ms[0] > 0 ? ms[2] / ms[0] : 0.0, checks.c_str());
    std::fflush(stdout);
  }
  if (auto st = orrery::runtime::cuda::destroy_comms(*comms); !st) {
    std::fprintf(stderr, "nccl_bench: %s\n", st.reason().c_str());
    rc = 1;
  }
  return rc;
}
