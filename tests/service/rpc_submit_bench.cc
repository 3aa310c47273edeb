// Measures the client API over loopback against a real orrery-core serve: submit latency (each
// one durable: the job's spec file and the journal synced before the answer), `jobs` with N jobs,
// and the planner's admission of them. Not a ctest test; run by hand:
//   build/tests/service/rpc_submit_bench [N]
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "rpc/client_connection.h"
#include "tests/service/cluster_harness.h"

using namespace orrery;
using namespace orrery::testing;

int main(int argc, char** argv) {
  int n = argc > 1 ? std::atoi(argv[1]) : 1000;
  const char* tmp = std::getenv("TMPDIR");
  auto dir = std::filesystem::path(tmp ? tmp : "/tmp") / ("orrery-bench-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "secret") << "s\n";
  std::ofstream(dir / "fleet") << "region r\ncluster c\nnode n1 host_mem_mib=4096\ndevices host count=4 mem_mib=256\n";
  Proc core({ORRERY_CORE_BIN, "serve", "--listen", "127.0.0.1:0", "--data", (dir / "data").string(), "--secret",
             (dir / "secret").string(), "--fleet", (dir / "fleet").string()},
            (dir / "core.log").string());
  if (!eventually(5000, [&] { return read_file((dir / "core.log").string()).find("listening") != std::string::npos; })) {
    std::fprintf(stderr, "core did not start\n");
    return 1;
  }
  std::string addr = "127.0.0.1:" + std::to_string(port_after(read_file((dir / "core.log").string()), "listening on "));
  auto api = rpc::connect_client(addr, "s");
  if (!api) {
    std::fprintf(stderr, "%s\n", api.reason().c_str());
    return 1;
  }
  service::JobSpec s;
  s.name = "bench";
  s.world = 2;
  s.max_devices = 2;
  s.command = {"orrery-train-mlp", "--steps=100"};
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < n; ++i)
    if (!(*api)->submit(s)) return 1;
  auto t1 = std::chrono::steady_clock::now();
  auto jobs = (*api)->jobs();
  auto t2 = std::chrono::steady_clock::now();
  double submit_us = std::chrono::duration<double, std::micro>(t1 - t0).count() / n;
  double jobs_ms = std::chrono::duration<double, std::milli>(t2 - t1).count();
  bool admitted = eventually(60000, [&] {
    auto js = (*api)->jobs();
    if (!js) return false;
    for (auto& j : *js)
      if (j.state == spec::JobState::kSubmitted) return false;
    return true;
  });
  auto t3 = std::chrono::steady_clock::now();
  std::printf("submit (durable, over loopback): %.0f us each, %.0f/s over %d\n", submit_us, 1e6 / submit_us, n);
  std::printf("jobs() listing %zu jobs: %.1f ms\n", jobs ? jobs->size() : 0, jobs_ms);
  std::printf("planner admitted all %s in %.0f ms\n", admitted ? "yes" : "NO",
              std::chrono::duration<double, std::milli>(t3 - t2).count());
  core.kill_group(SIGTERM);
  std::filesystem::remove_all(dir);
  return 0;
}
