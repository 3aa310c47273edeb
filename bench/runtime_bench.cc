// runtime_bench: the device side's figures, side by side in one run (docs/performance.md,
// "Runtime"). Not a Google Benchmark program: each figure needs real processes around it.
//   runtime_bench [--calls=N] [--ckpt-mib=M] [--steps=S] [--backend=host|cuda]
// 1. proxy call round trip (worker -> orrery-proxy -> worker over the shm ring) vs a Unix-socket
//    round trip between two processes, p50/p99;
// 2. checkpoint and restore throughput through the proxy vs memcpy and a raw file write+fdatasync
//    / read of the same bytes;
// 3. splicing: W=2 workers on 1 device vs the same workers on 2 devices, beyond W/D, and the
//    proxy's own time spent switching.
// --backend=cuda runs the same on the GPU through the cuda backend (scripts/gpu-test); with one
// GPU the "2 devices" of the unspliced run share it (ORRERY_CUDA_DEVICES=0,0).
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "bench/proxy_process.h"
#include "runtime/node/node_runtime.h"
#include "runtime/proxy/crc32c_fast.h"
#include "runtime/proxy/kernels.h"
#include "runtime/proxy/ring.h"
#include "runtime/proxy/shard.h"
#include "runtime/worker/worker.h"
#ifdef ORRERY_HAVE_CUDA
#include "runtime/proxy/cuda/cuda_backend.h"
#endif

using namespace orrery::runtime;
using Clock = std::chrono::steady_clock;

namespace {

std::string g_backend = "host";

double ns_since(Clock::time_point t) {
  return std::chrono::duration<double, std::nano>(Clock::now() - t).count();
}

struct Pct {
  double p50, p99;
};
Pct pct(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return {v[v.size() / 2], v[v.size() * 99 / 100]};
}

// An orrery-proxy of the backend under test with `mem_mib` of device memory.
class Proxy : public orrery::bench::ProxyProcess {
 public:
  Proxy(const std::string& shm, const std::string& ckpt, int mem_mib)
      : ProxyProcess(shm, {"--mem-mib", std::to_string(mem_mib), "--ckpt-dir", ckpt, "--backend",
                           g_backend}) {}
};

WorkerEnv env(const std::string& proxy, int job, std::int64_t restore = -1) {
  WorkerEnv e;
  e.proxy = proxy;
  e.collective = "/orrery-bench-coll-" + std::to_string(::getpid()) + "-" + std::to_string(job) +
                 (restore >= 0 ? "r" : "");
  e.job = job;
  e.epoch = 1;
  e.restore_step = restore;
  return e;
}

void round_trips(int calls) {
  const std::string shm = "/orrery-bench-rt-" + std::to_string(::getpid());
  Proxy proxy(shm, "/tmp", 64);
  auto w = Worker::connect(env(shm, 1));
  if (!w) {
    std::fprintf(stderr, "%s\n", w.reason().c_str());
    std::exit(1);
  }
  std::vector<double> ring(calls);
  for (int i = 0; i < 2000; ++i) (void)(*w)->nop();
  for (int i = 0; i < calls; ++i) {
    auto t = Clock::now();
    (void)(*w)->nop();
    ring[i] = ns_since(t);
  }
  // Asynchronous launches (a one-float fill each), then one synchronize: the cost per launch when
  // the worker does not wait for each.
  auto one = (*w)->alloc(64);
  double async_ns = 0;
  {
    const auto t = Clock::now();
    for (int i = 0; i < calls; ++i) (void)(*w)->launch("fill", {*one, 1, float_arg(1.f)});
    (void)(*w)->synchronize();
    async_ns = ns_since(t) / calls;
  }
  // The same with the proxy and this worker pinned to different cores: the transport's own cost,
  // without the scheduler putting both on one core (the machine's other load still runs).
  std::vector<double> pinned;
  if (std::thread::hardware_concurrency() >= 2) {
    cpu_set_t a, b;
    CPU_ZERO(&a);
    CPU_ZERO(&b);
    CPU_SET(0, &a);
    CPU_SET(1, &b);
    cpu_set_t old;
    ::sched_getaffinity(0, sizeof old, &old);
    if (::sched_setaffinity(proxy.pid(), sizeof a, &a) == 0 && ::sched_setaffinity(0, sizeof b, &b) == 0) {
      pinned.resize(calls);
      for (int i = 0; i < 2000; ++i) (void)(*w)->nop();
      for (int i = 0; i < calls; ++i) {
        auto t = Clock::now();
        (void)(*w)->nop();
        pinned[i] = ns_since(t);
      }
    }
    ::sched_setaffinity(0, sizeof old, &old);
  }
  // Unix socket: the same request/response shape (a 64-byte request, a 64-byte answer).
  int sv[2];
  ::socketpair(AF_UNIX, SOCK_STREAM, 0, sv);
  pid_t child = ::fork();
  if (child == 0) {
    ::close(sv[0]);
    char b[64];
    while (::read(sv[1], b, sizeof b) == static_cast<ssize_t>(sizeof b)) {
      if (::write(sv[1], b, sizeof b) != static_cast<ssize_t>(sizeof b)) break;
    }
    ::_exit(0);
  }
  ::close(sv[1]);
  std::vector<double> sock(calls);
  char b[64] = {};
  auto once = [&] {
    if (::write(sv[0], b, sizeof b) != 64 || ::read(sv[0], b, sizeof b) != 64) std::exit(1);
  };
  for (int i = 0; i < 2000; ++i) once();
  for (int i = 0; i < calls; ++i) {
    auto t = Clock::now();
    once();
    sock[i] = ns_since(t);
  }
  ::close(sv[0]);
  int st;
  ::waitpid(child, &st, 0);
  const Pct r = pct(ring), s = pct(sock);
  std::printf("round trip (%d calls each)\n", calls);
  std::printf("  proxy call (shm ring, nop)      p50 %8.2f us   p99 %8.2f us\n", r.p50 / 1e3, r.p99 / 1e3);
  std::printf("  unix socket (64 B each way)     p50 %8.2f us   p99 %8.2f us\n", s.p50 / 1e3, s.p99 / 1e3);
  std::printf("  asynchronous launch (fill), per launch, %d queued then one synchronize: %.2f us\n",
              calls, async_ns / 1e3);
  if (!pinned.empty()) {
    const Pct q = pct(pinned);
    std::printf("  proxy call, pinned to 2 cores   p50 %8.2f us   p99 %8.2f us\n", q.p50 / 1e3, q.p99 / 1e3);
  }
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Checkpoint and restore three times each through real proxies, and the baselines three times
// each on the same bytes (1 MiB writes and reads, like the shard code); medians are printed.
void checkpoint_restore(int mib) {
  const std::string dir = "/tmp/orrery_bench_ckpt." + std::to_string(::getpid());
  std::filesystem::create_directories(dir);
  const std::uint64_t n = static_cast<std::uint64_t>(mib) << 20;
  const std::uint64_t chunk = 1 << 20;
  const int job = 7, reps = 3;
  std::vector<double> ckpt, restore, copy, write, read;
  std::uint64_t file_bytes = 0;
  // The baselines run interleaved with the proxy's operations (this VM's disk varies over time).
  void* a = ::mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  std::memset(a, 7, n);
  auto raw_write = [&](int k) {
    const std::string raw = dir + "/raw" + std::to_string(k) + ".bin";  // a new file, like a shard
    std::this_thread::sleep_for(std::chrono::milliseconds(50));  // as before each checkpoint
    auto t = Clock::now();
    int fd = ::open(raw.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    for (std::uint64_t off = 0; off < n; off += chunk) {
      if (::write(fd, static_cast<char*>(a) + off, chunk) != static_cast<ssize_t>(chunk)) std::exit(1);
    }
    ::fdatasync(fd);
    ::close(fd);
    write.push_back(ns_since(t));
  };
  auto raw_read_and_copy = [&](int k) {
    // A fresh mapping, as a restore has to fault its pages in too.
    void* d = ::mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    auto t = Clock::now();
    int fd = ::open((dir + "/raw" + std::to_string(k) + ".bin").c_str(), O_RDONLY);
    for (std::uint64_t off = 0; off < n; off += chunk) {
      if (::read(fd, static_cast<char*>(d) + off, chunk) != static_cast<ssize_t>(chunk)) std::exit(1);
    }
    ::close(fd);
    read.push_back(ns_since(t));
    t = Clock::now();
    std::memcpy(d, a, n);
    copy.push_back(ns_since(t));
    ::munmap(d, n);
  };
  {
    const std::string shm = "/orrery-bench-ck-" + std::to_string(::getpid());
    Proxy proxy(shm, dir, mib + 64);
    auto w = Worker::connect(env(shm, job));
    auto p = (*w)->alloc(n);
    auto small = (*w)->alloc(4096);
    for (std::uint64_t off = 0; off < n; off += chunk) {
      (void)(*w)->copy_h2d(*p + off, static_cast<char*>(a) + off, chunk);
    }
    std::int64_t state = 1;
    (void)(*w)->register_host_state(&state, sizeof state);
    for (int k = 0; k < reps; ++k) {
      proxy.checkpoint(job);
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      (void)(*w)->allreduce(*small, 16, k);
      auto t = Clock::now();
      auto b = (*w)->step_boundary(k + 1);
      ckpt.push_back(ns_since(t));
      if (!b || !b->checkpointed) {
        std::fprintf(stderr, "checkpoint failed: %s\n", b ? "not written" : b.reason().c_str());
        std::exit(1);
      }
      raw_write(k);
    }
    file_bytes = std::filesystem::file_size(shard_file(dir, job, 1, 0));
  }
  {
    // Restore on a fresh proxy: opening the shard, mapping at the same addresses, reading and
    // checking the checksum happen in the hello.
    const std::string shm = "/orrery-bench-rs-" + std::to_string(::getpid());
    Proxy proxy(shm, dir, mib + 64);
    for (int k = 0; k < reps; ++k) {
      auto t = Clock::now();
      auto w = Worker::connect(env(shm, job, k + 1));
      restore.push_back(ns_since(t));
      if (!w || !(*w)->restored()) {
        std::fprintf(stderr, "restore failed: %s\n", w ? "" : w.reason().c_str());
        std::exit(1);
      }
      w->reset();
      raw_read_and_copy(k);
    }
  }
  ::munmap(a, n);
  std::filesystem::remove_all(dir);
  const double nb = static_cast<double>(n);
  const double ck = median(ckpt), rs = median(restore), cp = median(copy), wr = median(write),
               rd = median(read);
  std::printf("checkpoint / restore (%d MiB of device memory, shard %llu bytes, median of %d)\n",
              mib, static_cast<unsigned long long>(file_bytes), reps);
  std::printf("  checkpoint through the proxy    %7.2f GB/s  (%6.1f ms, crc32c %s, fdatasync)\n",
              nb / ck, ck / 1e6, crc32c_fast_is_hardware() ? "sse4.2" : "software");
  std::printf("  raw write+fdatasync, same bytes %7.2f GB/s  -> checkpoint at %.0f%% of it\n",
              nb / wr, 100.0 * wr / ck);
  std::printf("  restore through the proxy       %7.2f GB/s  (%6.1f ms, incl. the hello round trip)\n",
              nb / rs, rs / 1e6);
  std::printf("  raw read (page cache), same     %7.2f GB/s  -> restore at %.0f%% of it\n",
              nb / rd, 100.0 * rd / rs);
  std::printf("  memcpy, same bytes              %7.2f GB/s  -> checkpoint at %.0f%%, restore at %.0f%% of it\n",
              nb / cp, 100.0 * cp / ck, 100.0 * cp / rs);
}

struct SpliceRun {
  double wall_ms = 0;
  std::uint64_t switch_us = 0;
  std::uint64_t splice_bytes = 0, copied_bytes = 0;  // what splicing parked, and moved of it
};

// The proxies' counters, from their exit lines in the node's logs (orrery-proxy: exit ...).
void counters_from_logs(const std::string& dir, SpliceRun* out) {
  auto field = [](const std::string& line, const std::string& key) -> std::uint64_t {
    const auto p = line.find(" " + key + "=");
    return p == std::string::npos ? 0 : std::strtoull(line.c_str() + p + key.size() + 2, nullptr, 10);
  };
  for (const auto& e : std::filesystem::directory_iterator(dir + "/logs")) {
    if (e.path().filename().string().rfind("proxy-dev", 0) != 0) continue;
    std::ifstream in(e.path());
    for (std::string line; std::getline(in, line);) {
      if (line.find("orrery-proxy: exit") == std::string::npos) continue;
      out->switch_us += field(line, "switch_us");
      out->splice_bytes += field(line, "splice_bytes");
      out->copied_bytes += field(line, "splice_copied_bytes");
    }
  }
}

SpliceRun run_job(std::vector<LocalPlacement> local, int devices, int steps, int batch, int hidden) {
  const std::string dir = "/tmp/orrery_bench_splice." + std::to_string(::getpid());
  std::filesystem::remove_all(dir);
  SpliceRun out{};
  {
    NodeRuntimeOptions o;
    o.node_name = "bench";
    o.devices = devices;
    o.backend = g_backend;
    o.data_dir = dir;
    o.bin_dir = orrery::bin_dir(ORRERY_BIN_DIR);
    auto rt = start_node_runtime(o);
    if (!rt) {
      std::fprintf(stderr, "%s\n", rt.reason().c_str());
      std::exit(1);
    }
    LaunchSpec s;
    s.job = 1;
    s.epoch = 1;
    s.world = 2;
    s.local = std::move(local);
    s.command = {"orrery-train-mlp", "--steps=" + std::to_string(steps), "--batch=" + std::to_string(batch), "--din=64",
              "--hidden=" + std::to_string(hidden), "--dout=16"};
    s.collective = "/orrery-bench-splice-" + std::to_string(::getpid()) + "-" + std::to_string(devices);
    auto t = Clock::now();
    if (auto st = (*rt)->launch(s); !st) {
      std::fprintf(stderr, "%s\n", st.reason().c_str());
      std::exit(1);
    }
    for (bool done = false; !done;) {
      for (auto& e : (*rt)->poll()) {
        if (e.kind == JobEvent::Kind::kCompleted) done = true;
        if (e.kind == JobEvent::Kind::kCrashed) {
          std::fprintf(stderr, "crashed: %s\n", e.detail.c_str());
          std::exit(1);
        }
      }
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    out.wall_ms = ns_since(t) / 1e6;
  }  // proxies exit and log their counters
  counters_from_logs(dir, &out);
  std::filesystem::remove_all(dir);
  return out;
}

void splicing(int steps, int batch, int hidden) {
  const SpliceRun un = run_job({{0, {0}}, {1, {1}}}, 2, steps, batch, hidden);
  const SpliceRun sp = run_job({{0, {0, 1}}}, 1, steps, batch, hidden);
  std::printf("splicing (W=2, %d steps, MLP 64-%d-16, batch %d)\n", steps, hidden, batch);
  std::printf("  unspliced, 2 devices            %8.1f ms\n", un.wall_ms);
  std::printf("  spliced, 1 device               %8.1f ms  = %.3f x unspliced (W/D = 2)\n",
              sp.wall_ms, sp.wall_ms / un.wall_ms);
  std::printf("  time in splice switches         %8.3f ms  = %.3f%% of the spliced run (%.1f us per step of a rank)\n",
              sp.switch_us / 1e3, 100.0 * (sp.switch_us / 1e3) / sp.wall_ms,
              static_cast<double>(sp.switch_us) / (2.0 * steps));
  if (sp.splice_bytes > 0) {
    std::printf("  parked and brought back          %8.1f MiB, of which copied %.1f MiB (%.1f%%: "
                "splice dedup)\n",
                sp.splice_bytes / 1048576.0, sp.copied_bytes / 1048576.0,
                100.0 * static_cast<double>(sp.copied_bytes) / static_cast<double>(sp.splice_bytes));
  }
}

}  // namespace

int main(int argc, char** argv) {
  int calls = 100000, mib = 256, steps = 200;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a.rfind("--calls=", 0) == 0) calls = std::atoi(a.c_str() + 8);
    else if (a.rfind("--ckpt-mib=", 0) == 0) mib = std::atoi(a.c_str() + 11);
    else if (a.rfind("--steps=", 0) == 0) steps = std::atoi(a.c_str() + 8);
    else if (a.rfind("--backend=", 0) == 0) g_backend = a.substr(10);
    else {
      std::fprintf(stderr,
                   "usage: runtime_bench [--calls=N] [--ckpt-mib=M] [--steps=S] [--backend=host|cuda]\n");
      return 2;
    }
  }
  if (g_backend == "cuda") {
#ifdef ORRERY_HAVE_CUDA
    if (auto s = cuda_device_usable(0); !s) {
      std::printf("runtime_bench: %s: nothing measured\n", s.reason().c_str());
      return 0;
    }
    if (!cuda_device_usable(1)) ::setenv("ORRERY_CUDA_DEVICES", "0,0", 0);  // one GPU: share it
#else
    std::printf("runtime_bench: this build has no cuda backend (no nvcc): nothing measured\n");
    return 0;
#endif
  } else if (g_backend != "host") {
    std::fprintf(stderr, "runtime_bench: unknown backend '%s'\n", g_backend.c_str());
    return 2;
  }
  if (calls < 100 || mib < 1 || steps < 1) return 2;
  {  // the figures below depend on how busy the machine is: say so
    std::ifstream la("/proc/loadavg");
    std::string l1, l5;
    la >> l1 >> l5;
    std::printf("runtime_bench: %s backend, %u cores, load average %s (1 min) %s (5 min) at start\n",
                g_backend.c_str(), std::thread::hardware_concurrency(), l1.c_str(), l5.c_str());
  }
  round_trips(calls);
  checkpoint_restore(mib);
  splicing(steps, 128, 256);
  splicing(std::max(1, steps / 4), 256, 1024);  // 16x the work per step, the same switches
  if (g_backend == "host") {
    std::printf("  (host backend: a device is a CPU core; %u cores here, so the unspliced runs' two\n"
                "   devices compete with everything else on the machine)\n",
                std::thread::hardware_concurrency());
  } else {
    splicing(std::max(1, steps / 4), 1024, 4096);  // GPU-sized steps
  }
  return 0;
}
