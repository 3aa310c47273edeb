// pytorch_run_job: one job through a real node runtime on this machine, for scripts/bench-pytorch
// (and by hand): proxies as processes, the ranks started from the command given, checkpoints
// asked at given steps. Prints each event as it comes, with the seconds since the launch:
//   event <started|progress|checkpointed|stopped|completed|crashed> step <S> t <sec> <detail>
// then every rank's output under "--- rank R", then the proxies' checkpoint lines. Exit 0 when the job completed, 1 otherwise, 2 on
// bad arguments.
//
//   pytorch_run_job --devices N --world W --place "D:R,R D:R" [--checkpoints S,S,...]
//                   [--workdir DIR] [--env NAME=VALUE]... [--data-dir DIR] -- COMMAND...
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "runtime/node/node_runtime.h"

namespace {

using orrery::runtime::JobEvent;
using Kind = JobEvent::Kind;

const char* kind_name(Kind k) {
  switch (k) {
    case Kind::kStarted: return "started";
    case Kind::kProgress: return "progress";
    case Kind::kCheckpointed: return "checkpointed";
    case Kind::kStopped: return "stopped";
    case Kind::kCompleted: return "completed";
    case Kind::kCrashed: return "crashed";
  }
  return "?";
}

int usage(const char* why) {
  std::fprintf(stderr,
               "pytorch_run_job: %s\nusage: pytorch_run_job --devices N --world W --place \"D:R,R D:R\" "
               "[--checkpoints S,S] [--workdir DIR] [--env NAME=VALUE]... [--data-dir DIR] -- COMMAND...\n",
               why);
  return 2;
}

std::vector<int> ints(const std::string& s) {
  std::vector<int> v;
  std::stringstream ss(s);
  for (std::string x; std::getline(ss, x, ',');)
    if (!x.empty()) v.push_back(std::atoi(x.c_str()));
  return v;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace orrery::runtime;
  NodeRuntimeOptions o;
  o.node_name = "bench" + std::to_string(::getpid());
  o.device_mem_mib = 256;
  o.bin_dir = ORRERY_BIN_DIR;
  LaunchSpec spec;
  spec.job = 1;
  spec.epoch = 1;
  spec.mode = orrery::spec::Preemption::kTransparent;
  std::vector<int> checkpoints;
  std::string data_dir;
  int i = 1;
  for (; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--") break;
    if (i + 1 >= argc) return usage(("missing value of " + a).c_str());
    const std::string v = argv[++i];
    if (a == "--devices") o.devices = std::atoi(v.c_str());
    else if (a == "--world") spec.world = std::atoi(v.c_str());
    else if (a == "--checkpoints") checkpoints = ints(v);
    else if (a == "--workdir") spec.workdir = std::filesystem::absolute(v).string();
    else if (a == "--env") spec.env.push_back(v);
    else if (a == "--data-dir") data_dir = v;
    else if (a == "--place") {
      std::stringstream ss(v);
      for (std::string d; ss >> d;) {
        const auto colon = d.find(':');
        if (colon == std::string::npos) return usage("--place: D:R,R ...");
        spec.local.push_back({std::atoi(d.substr(0, colon).c_str()), ints(d.substr(colon + 1))});
      }
    } else {
      return usage(("unknown option " + a).c_str());
    }
  }
  for (++i; i < argc; ++i) spec.command.push_back(argv[i]);
  if (spec.command.empty() || spec.world <= 0 || spec.local.empty()) return usage("nothing to run");
  const bool own_dir = data_dir.empty();
  if (own_dir) {
    std::string t = "/tmp/orrery_run_job.XXXXXX";
    data_dir = ::mkdtemp(t.data());
  }
  o.data_dir = data_dir;
  spec.collective = "/orrery-runjob-" + std::to_string(::getpid());
  auto rt = start_node_runtime(o);
  if (!rt) return usage(rt.reason().c_str());
  const auto t0 = std::chrono::steady_clock::now();
  if (auto st = (*rt)->launch(spec); !st) {
    std::fprintf(stderr, "pytorch_run_job: %s\n", st.reason().c_str());
    return 1;
  }
  std::size_t next_ckpt = 0;
  if (next_ckpt < checkpoints.size()) (void)(*rt)->checkpoint(1, 1, checkpoints[next_ckpt++], false);
  std::map<int, std::string> output;
  bool done = false, completed = false;
  while (!done) {
    for (auto& e : (*rt)->poll()) {
      const double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      std::printf("event %s step %lld t %.4f %s\n", kind_name(e.kind),
                  static_cast<long long>(e.step), t, e.detail.c_str());
      if (e.kind == Kind::kCheckpointed && next_ckpt < checkpoints.size()) {
        (void)(*rt)->checkpoint(1, 1, checkpoints[next_ckpt++], false);
      }
      if (e.kind == Kind::kCompleted || e.kind == Kind::kCrashed || e.kind == Kind::kStopped) {
        done = true;
        completed = e.kind == Kind::kCompleted;
      }
    }
    for (auto& c : (*rt)->take_output(1 << 24)) output[c.rank] += c.data;
    std::fflush(stdout);
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  for (auto& c : (*rt)->take_output(1 << 24)) output[c.rank] += c.data;
  if (output.empty()) {  // a runtime that hands out no output yet: its workers' log files
    for (const auto& lp : spec.local)
      for (int r : lp.ranks) {
        std::ifstream in(data_dir + "/logs/job-1-epoch-1-rank-" + std::to_string(r) + ".log");
        std::stringstream text;
        text << in.rdbuf();
        output[r] = text.str();
      }
  }
  for (const auto& [rank, text] : output) std::printf("--- rank %d\n%s", rank, text.c_str());
  rt->reset();
  // The proxies' checkpoint lines, once they have stopped: each shard's size and, for a periodic
  // cut persisted in the background, how long it took to become durable (bench-pytorch).
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(data_dir + "/logs", ec)) {
    if (e.path().filename().string().rfind("proxy-", 0) != 0) continue;
    std::ifstream in(e.path());
    for (std::string line; std::getline(in, line);)
      if (line.find(": checkpoint job ") != std::string::npos) std::printf("%s\n", line.c_str());
  }
  if (own_dir) std::filesystem::remove_all(data_dir);
  return completed ? 0 : 1;
}
