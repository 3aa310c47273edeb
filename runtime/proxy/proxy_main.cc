// orrery-proxy: one process per device. Usage:
//   orrery-proxy --shm /NAME --device N [--mem-mib M] [--backend host|cuda] [--cuda-device C]
//                [--ckpt-dir DIR] [--ckpt-staging-mib S] [--spin-us U] [--parent-pid P]
// Creates the shared-memory segment /NAME (workers attach with ORRERY_PROXY=/NAME), prints one
// "ready" line and serves until SIGTERM/SIGINT or a shutdown command; exits 0 after removing the
// segment and printing its counters, 2 on bad arguments, 1 if it cannot start or its device
// became unusable (the backend's broken(): the node runtime then replaces it). With
// --parent-pid it also exits when that process stops being its parent (the node runtime died).
#include <signal.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "runtime/proxy/backend.h"
#include "runtime/proxy/proxy_server.h"

namespace {
volatile std::sig_atomic_t g_stop = 0;  // the only thing a signal handler may touch
void on_signal(int) { g_stop = 1; }

const char kUsage[] =
    "usage: orrery-proxy --shm /NAME --device N [--mem-mib M] [--backend host|cuda]\n"
    "                    [--cuda-device C] [--no-splice-dedup] [--ckpt-dir DIR]\n"
    "                    [--ckpt-staging-mib S] [--spin-us U] [--parent-pid P]\n"
    "One device's proxy, started by orrery-node: serves the workers that attach to the shared\n"
    "memory /NAME (ORRERY_PROXY=/NAME) until SIGTERM/SIGINT, then removes it. Defaults: 256 MiB,\n"
    "the host backend, checkpoint shards in ./ckpt. --backend cuda (where built) serves CUDA\n"
    "device C, by default the N-th of ORRERY_CUDA_DEVICES (a comma list: node device -> CUDA\n"
    "ordinal, e.g. 0,0,0,0 to put four devices of a test node on one GPU), else N; a splice\n"
    "switch there copies only the chunks that differ between ranks (--no-splice-dedup: all).\n"
    "Its jobs' allreduce stays on the GPU; a job spanning proxies sums over NCCL when every proxy\n"
    "can and no two share a GPU, else on the host. NCCL is loaded at run time from\n"
    "ORRERY_NCCL_LIBRARY, else libnccl.so.2; ORRERY_NCCL_INIT_TIMEOUT_S (300) bounds forming the\n"
    "communicator.\n"
    "A periodic checkpoint stalls its ranks only for a copy of their state into host memory\n"
    "(at most S MiB staged at once, default 1024; 0: written in line); the shard is written,\n"
    "fdatasync'ed and reported behind their next steps. A cut that stops the job is written in\n"
    "line.\n"
    "Exit 0 stopped, 1 cannot start or the device became unusable, 2 bad arguments.\n";

int usage(const char* why) {
  std::fprintf(stderr, "orrery-proxy: %s\n%s", why, kUsage);
  return 2;
}
}  // namespace

int main(int argc, char** argv) {
  orrery::runtime::ProxyOptions o;
  long long mem_mib = 256;
  long long staging_mib = 1024;
  std::string backend = "host";
  int cuda_device = -1;
  orrery::runtime::BackendOptions bo;
  o.ckpt_dir = "ckpt";
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      std::fputs(kUsage, stdout);
      return 0;
    }
    auto val = [&](const char* name) -> const char* {
      if (a == name && i + 1 < argc) return argv[++i];
      const std::string pre = std::string(name) + "=";
      if (a.rfind(pre, 0) == 0) return argv[i] + pre.size();
      return nullptr;
    };
    if (const char* v = val("--shm")) o.shm_name = v;
    else if (const char* v = val("--device")) o.device = std::atoi(v);
    else if (const char* v = val("--mem-mib")) mem_mib = std::atoll(v);
    else if (const char* v = val("--backend")) backend = v;
    else if (const char* v = val("--cuda-device")) cuda_device = std::atoi(v);
    else if (a == "--no-splice-dedup") bo.splice_dedup = false;
    else if (const char* v = val("--ckpt-dir")) o.ckpt_dir = v;
    else if (const char* v = val("--ckpt-staging-mib")) staging_mib = std::atoll(v);
    else if (const char* v = val("--spin-us")) o.spin_ns = std::atol(v) * 1000;
    else if (const char* v = val("--parent-pid")) o.parent_pid = std::atoi(v);
    else return usage(("unknown argument " + a).c_str());
  }
  if (o.shm_name.size() < 2 || o.shm_name[0] != '/' || o.shm_name.find('/', 1) != std::string::npos) {
    return usage("--shm must be a name like /orrery-node-dev0");
  }
  if (mem_mib <= 0 || mem_mib > (1 << 24)) return usage("--mem-mib out of range");
  if (staging_mib < 0 || staging_mib > (1 << 24)) return usage("--ckpt-staging-mib out of range");
  o.ckpt_staging_bytes = static_cast<std::uint64_t>(staging_mib) << 20;
  o.stop_flag = &g_stop;
  std::signal(SIGTERM, on_signal);
  std::signal(SIGINT, on_signal);

  if (backend == "cuda" && cuda_device < 0) {
    cuda_device = o.device;
    if (const char* map = std::getenv("ORRERY_CUDA_DEVICES"); map != nullptr && *map != '\0') {
      std::vector<int> ordinals;
      for (const char* p = map; *p != '\0';) {
        char* end = nullptr;
        const long v = std::strtol(p, &end, 10);
        if (end == p || v < 0) return usage("ORRERY_CUDA_DEVICES must be a comma list of ordinals");
        ordinals.push_back(static_cast<int>(v));
        p = *end == ',' ? end + 1 : end;
        if (*end != ',' && *end != '\0') return usage("ORRERY_CUDA_DEVICES must be a comma list of ordinals");
      }
      if (o.device >= static_cast<int>(ordinals.size())) {
        return usage(("ORRERY_CUDA_DEVICES names no CUDA device for device " +
                      std::to_string(o.device)).c_str());
      }
      cuda_device = ordinals[o.device];
    }
  }
  if (backend == "cuda") {
    // Before the first CUDA call, unless the environment says otherwise. Eager module loading: a
    // kernel's first launch must not wait for the whole device (lazy loading may), where an
    // allreduce's NCCL kernel can be waiting for a peer proxy. NCCL connects its collectives
    // when the communicator forms (on a thread of its own), not at first use on this one.
    ::setenv("CUDA_MODULE_LOADING", "EAGER", 0);
    ::setenv("NCCL_RUNTIME_CONNECT", "0", 0);
  }
  auto be = orrery::runtime::make_backend(backend, backend == "cuda" ? cuda_device : o.device,
                                          static_cast<std::uint64_t>(mem_mib) << 20, bo);
  if (!be) {
    std::fprintf(stderr, "orrery-proxy: %s\n", be.reason().c_str());
    return 1;
  }
  auto server = orrery::runtime::ProxyServer::create(o, std::move(be.value()));
  if (!server) {
    std::fprintf(stderr, "orrery-proxy: %s\n", server.reason().c_str());
    return 1;
  }
  std::printf("orrery-proxy: ready shm=%s device=%d backend=%s mem_mib=%lld pid=%d\n",
              o.shm_name.c_str(), o.device, backend.c_str(), mem_mib, static_cast<int>(::getpid()));
  std::fflush(stdout);
  (*server)->run();
  const std::string failed = (*server)->failed();
  const auto& st = (*server)->stats();
  const orrery::runtime::SpliceCounters sc = (*server)->splice_counters();
  std::printf("orrery-proxy: exit device=%d requests=%llu splice_switches=%llu switch_us=%llu "
              "splice_bytes=%llu splice_copied_bytes=%llu "
              "ckpt_bytes=%llu ckpt_us=%llu ckpt_staged=%llu persist_us=%llu restore_bytes=%llu "
              "restore_us=%llu\n",
              o.device, (unsigned long long)st.requests, (unsigned long long)st.switches,
              (unsigned long long)(st.switch_ns / 1000), (unsigned long long)sc.parked_bytes,
              (unsigned long long)sc.copied_bytes, (unsigned long long)st.ckpt_bytes,
              (unsigned long long)(st.ckpt_ns / 1000), (unsigned long long)st.ckpt_staged,
              (unsigned long long)(st.persist_ns / 1000), (unsigned long long)st.restore_bytes,
              (unsigned long long)(st.restore_ns / 1000));
  if (!failed.empty()) {
    std::fprintf(stderr, "orrery-proxy: stopped: %s\n", failed.c_str());
    return 1;
  }
  return 0;
}
