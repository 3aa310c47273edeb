// An orrery-proxy child process for the device-side benchmarks (runtime_bench, cuda_bench):
// started with the given arguments (its output discarded), ready once its shared-memory segment
// says so, stopped with SIGTERM when destroyed. Exits the benchmark if it does not start.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "runtime/common/bin_dir.h"
#include "runtime/proxy/ring.h"

namespace orrery::bench {

class ProxyProcess {
 public:
  // `args` follow the binary: at least --shm NAME (the segment waited for).
  ProxyProcess(const std::string& shm, std::vector<std::string> args) {
    const std::string bin = orrery::bin_dir(ORRERY_BIN_DIR) + "/orrery-proxy";
    args.insert(args.begin(), {bin, "--shm", shm});
    std::vector<char*> argv;
    for (auto& s : args) argv.push_back(s.data());
    argv.push_back(nullptr);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
    posix_spawn(&pid_, bin.c_str(), &fa, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&fa);
    for (int i = 0; i < 2000; ++i) {
      auto m = runtime::ShmMapping::open(shm, sizeof(runtime::ProxySegment));
      if (m.ok() && static_cast<runtime::ProxySegment*>(m->data())->header.ready.load() == 1) {
        map_ = std::move(m.value());
        return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    std::fprintf(stderr, "orrery-proxy (%s) did not start\n", bin.c_str());
    std::exit(1);
  }
  ~ProxyProcess() {
    ::kill(pid_, SIGTERM);
    int st;
    ::waitpid(pid_, &st, 0);
  }
  ProxyProcess(const ProxyProcess&) = delete;
  ProxyProcess& operator=(const ProxyProcess&) = delete;

  pid_t pid() const { return pid_; }
  // What the node runtime does to ask for a checkpoint at the job's next boundary.
  void checkpoint(int job) {
    runtime::ProxyHeader& h = static_cast<runtime::ProxySegment*>(map_.data())->header;
    const std::uint32_t head = h.cmd_head.load();
    h.cmds[head % runtime::kCommandDepth] =
        runtime::Command{runtime::CommandKind::kCheckpoint, job, 1, -1, 0};
    h.cmd_head.store(head + 1);
    h.doorbell.fetch_add(1);
    runtime::futex_wake(&h.doorbell);
  }

 private:
  pid_t pid_ = -1;
  runtime::ShmMapping map_;
};

}  // namespace orrery::bench
