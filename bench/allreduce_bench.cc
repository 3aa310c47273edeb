// orrery's side of scripts/bench-allreduce: W ranks of allreduce_bench_worker started by real
// node runtimes (start_node_runtime: one orrery-proxy per device, workers through the worker
// library), on one node (the shm collective) or split over two node runtimes (the TCP
// collective on loopback, rank 0's node serving it), each rank on its own device.
//
//   allreduce_bench --world W --counts N[,N...] [--iters K] [--warmup M] [--nodes 1|2]
//                   [--mode shared|host|staged] [--splice K] [--timeout-s S]
//
// --splice K: K ranks time-sliced on each device (its proxy), as the scheduler splices them.
//
// Prints "RESULT count=N median_us=U ok=1" per count: per rank the median time of one allreduce
// (host buffer in, reduced host buffer out), then the slowest rank's. Exit 0 when every rank
// checked its results bit for bit, 1 otherwise. Give the largest count first: a job's proxies
// size their collective group at its first allreduce (the staged and TCP paths).
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "runtime/common/bin_dir.h"
#include "runtime/common/loopback_port.h"
#include "runtime/node/job_runner.h"

namespace {

using namespace orrery::runtime;

int fail(const std::string& why) {
  std::fprintf(stderr, "allreduce_bench: %s\n", why.c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  int world = 2, nodes = 1, iters = 10, warmup = 2, timeout_s = 120, splice = 1;
  std::string counts = "262144";
  std::string mode = "shared";  // allreduce_bench_worker.cc says what each mode is
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i], v = argv[i + 1];
    if (a == "--world") world = std::atoi(v.c_str());
    else if (a == "--counts") counts = v;
    else if (a == "--iters") iters = std::atoi(v.c_str());
    else if (a == "--warmup") warmup = std::atoi(v.c_str());
    else if (a == "--nodes") nodes = std::atoi(v.c_str());
    else if (a == "--mode") mode = v;
    else if (a == "--timeout-s") timeout_s = std::atoi(v.c_str());
    else if (a == "--splice") splice = std::max(1, std::atoi(v.c_str()));
    else return fail("unknown argument " + a);
  }
  if (world < 1 || world > 16 || (nodes != 1 && nodes != 2) || world < nodes) {
    return fail("usage: --world 1..16 --counts N[,N...] [--nodes 1|2] (world >= nodes)");
  }
  const std::string tmp = "/tmp/orrery-allreduce-bench-" + std::to_string(::getpid());
  std::vector<std::unique_ptr<NodeRuntime>> rts;
  const int per_node = (world + nodes - 1) / nodes;
  for (int n = 0; n < nodes; ++n) {
    NodeRuntimeOptions o;
    o.node_name = "arb" + std::to_string(::getpid()) + "n" + std::to_string(n);
    o.devices = (std::min(per_node, world - n * per_node) + splice - 1) / splice;
    std::uint64_t most = 0;
    for (const char* p = counts.c_str(); *p != '\0';) {
      char* end = nullptr;
      most = std::max<std::uint64_t>(most, std::strtoull(p, &end, 10));
      p = *end == ',' ? end + 1 : end;
      if (end == p && *p != '\0') return fail("bad --counts " + counts);
    }
    o.device_mem_mib = static_cast<std::int64_t>(most * sizeof(float) >> 20) + 16;
    o.backend = "host";
    o.data_dir = tmp + "/node" + std::to_string(n);
    o.bin_dir = orrery::bin_dir(ORRERY_BIN_DIR);
    std::filesystem::create_directories(o.data_dir);
    auto rt = start_node_runtime(o);
    if (!rt) return fail("node runtime: " + rt.reason());
    rts.push_back(std::move(rt.value()));
  }
  const int job = 7;
  LaunchSpec spec;
  spec.job = job;
  spec.epoch = 1;
  spec.world = world;
  spec.command = {"allreduce_bench_worker", "--counts", counts, "--iters",
                  std::to_string(iters), "--warmup", std::to_string(warmup), "--mode", mode};
  std::optional<LoopbackPort> port;  // held until the job is over (loopback_port.h)
  if (nodes > 1 && !port.emplace().ok()) return fail("no free loopback port");
  spec.collective = nodes == 1 ? "/orrery-arb-" + std::to_string(::getpid())
                               : "tcp://127.0.0.1:" + std::to_string(port->port()) + "/arb";
  // The far node first: its proxies wait for the hub on rank 0's node.
  for (int n = nodes - 1; n >= 0; --n) {
    LaunchSpec s = spec;
    for (int i = 0; i < per_node && n * per_node + i < world; ++i) {
      if (i % splice == 0) s.local.push_back(LocalPlacement{i / splice, {}});
      s.local.back().ranks.push_back(n * per_node + i);
    }
    if (auto st = rts[n]->launch(s); !st) return fail("launch: " + st.reason());
  }
  std::string out;
  std::vector<bool> done(nodes, false);
  bool crashed = false;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
  while (std::count(done.begin(), done.end(), true) < nodes) {
    if (std::chrono::steady_clock::now() > deadline) return fail("timed out");
    for (int n = 0; n < nodes; ++n) {
      for (const auto& e : rts[n]->poll()) {
        if (e.job != job) continue;
        if (e.kind == JobEvent::Kind::kCompleted) done[n] = true;
        if (e.kind == JobEvent::Kind::kCrashed) {
          crashed = true;
          done[n] = true;
          std::fprintf(stderr, "allreduce_bench: node %d: %s\n", n, e.detail.c_str());
        }
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  rts.clear();
  port.reset();
  // Each rank's output, from the log the node runtime keeps of it.
  for (const auto& e : std::filesystem::recursive_directory_iterator(tmp)) {
    if (!e.is_regular_file() || e.path().filename().string().rfind("job-", 0) != 0) continue;
    std::ifstream in(e.path());
    out += std::string(std::istreambuf_iterator<char>(in), {});
  }
  std::filesystem::remove_all(tmp);
  // Per count: the slowest rank's median, and how many ranks checked their result.
  std::map<std::uint64_t, std::pair<double, int>> by_count;
  std::vector<std::uint64_t> order;
  int lines = 0;
  for (std::size_t p = out.find("ALLREDUCE "); p != std::string::npos;
       p = out.find("ALLREDUCE ", p + 1)) {
    const auto c = out.find("count=", p), m = out.find("median_us=", p), k = out.find("ok=", p);
    if (c == std::string::npos || m == std::string::npos || k == std::string::npos) break;
    const std::uint64_t n = std::strtoull(out.c_str() + c + 6, nullptr, 10);
    if (!by_count.count(n)) order.push_back(n);
    auto& [worst, ok] = by_count[n];
    worst = std::max(worst, std::atof(out.c_str() + m + 10));
    ok += out[k + 3] == '1';
    ++lines;
  }
  if (crashed || lines != world * static_cast<int>(order.size()) || order.empty()) {
    std::fprintf(stderr, "%s", out.c_str());
    return fail(std::to_string(lines) + " results from " + std::to_string(world) + " ranks");
  }
  bool all = true;
  for (std::uint64_t n : order) {
    const auto& [worst, ok] = by_count[n];
    std::printf("RESULT count=%llu median_us=%.1f ok=%d\n", static_cast<unsigned long long>(n),
                worst, ok == world ? 1 : 0);
    all = all && ok == world;
  }
  return all ? 0 : 1;
}
