// Users' own programs under the real node runtime: real orrery-proxy processes, the programs are
// shell scripts written into a temporary folder and started as LaunchSpec::command. What a signal
// and a requeue job go through on a cut, the environment every rank sees, and the reasons a
// missing program, a bad working directory and a crashing program end with.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "runtime/common/bin_dir.h"
#include "runtime/node/job_runner.h"

namespace orrery::runtime {
namespace {

namespace fs = std::filesystem;
using Kind = JobEvent::Kind;

struct Dir {
  Dir() {
    char t[] = "/tmp/orrery-usercmd-XXXXXX";
    path_ = ::mkdtemp(t);
  }
  ~Dir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }
  std::string path_;
};

std::string read(const std::string& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Writes an executable script.
std::string script(const Dir& d, const std::string& name, const std::string& body) {
  const std::string p = d.path() + "/" + name;
  std::ofstream(p) << "#!/bin/bash\n" << body;
  ::chmod(p.c_str(), 0755);
  return p;
}

std::unique_ptr<NodeRuntime> start(const Dir& dir, int devices) {
  NodeRuntimeOptions o;
  o.node_name = "usercmd";
  o.devices = devices;
  o.device_mem_mib = 16;
  o.data_dir = dir.path() + "/node";
  o.bin_dir = orrery::bin_dir(ORRERY_BIN_DIR);
  auto rt = start_node_runtime(o);
  EXPECT_TRUE(rt.ok()) << rt.reason();
  return rt.ok() ? std::move(rt.value()) : nullptr;
}

LaunchSpec job(int id, std::int64_t epoch, int world, std::vector<std::string> command,
               spec::Preemption mode) {
  LaunchSpec s;
  s.job = id;
  s.epoch = epoch;
  s.world = world;
  for (int r = 0; r < world; ++r) s.local.push_back({r, {r}});
  s.command = std::move(command);
  s.mode = mode;
  return s;
}

// Polls until an event of `kind` for `job` (or a crash), at most `seconds`.
std::vector<JobEvent> wait_for(NodeRuntime& rt, int job, Kind kind, double seconds = 20) {
  std::vector<JobEvent> seen;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(static_cast<int>(seconds * 1000));
  while (std::chrono::steady_clock::now() < deadline) {
    for (auto& e : rt.poll()) {
      seen.push_back(e);
      if (e.job == job && (e.kind == kind || e.kind == Kind::kCrashed)) return seen;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ADD_FAILURE() << "no event of kind " << static_cast<int>(kind) << " for job " << job;
  return seen;
}

bool has(const std::vector<JobEvent>& ev, Kind k) {
  for (const auto& e : ev)
    if (e.kind == k) return true;
  return false;
}

// Waits until `path` exists and holds a number >= n.
bool wait_count(const std::string& path, int n, double seconds = 20) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(static_cast<int>(seconds * 1000));
  while (std::chrono::steady_clock::now() < deadline) {
    const std::string t = read(path);
    if (!t.empty() && std::atoi(t.c_str()) >= n) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

// Counts to N; saves its count to ORRERY_CHECKPOINT_DIR on SIGTERM and resumes from it.
const char* kCounter = R"(f="$ORRERY_CHECKPOINT_DIR/count-$RANK"
i=0
if [ -f "$f" ]; then i=$(cat "$f"); echo "resumed from $i"; fi
trap 'echo $i > "$f"; echo "saved $i"; exit 0' TERM
while [ $i -lt $1 ]; do i=$((i+1)); echo $i > "$ORRERY_CHECKPOINT_DIR/progress-$RANK"; sleep 0.01; done
echo "done at $i after $ORRERY_RESTART_COUNT restarts" >> "$ORRERY_CHECKPOINT_DIR/result-$RANK"
)";

TEST(UserCommand, SignalJobResumesFromItsOwnCheckpoint) {
  Dir dir;
  auto rt = start(dir, 2);
  ASSERT_TRUE(rt);
  const std::string ckpt = dir.path() + "/own";
  auto s = job(1, 1, 2, {script(dir, "count.sh", kCounter), "400"}, spec::Preemption::kSignal);
  s.checkpoint_dir = ckpt;
  s.grace_ms = 5000;
  ASSERT_TRUE(rt->launch(s).ok());
  auto ev = wait_for(*rt, 1, Kind::kStarted);
  ASSERT_TRUE(has(ev, Kind::kStarted));
  ASSERT_TRUE(wait_count(ckpt + "/progress-0", 50));
  ASSERT_TRUE(wait_count(ckpt + "/progress-1", 50));
  // The cut of a signal job is SIGTERM; it ends as a checkpoint (marker shards) and a stop.
  ASSERT_TRUE(rt->checkpoint(1, 1, -1, true).ok());
  ev = wait_for(*rt, 1, Kind::kStopped);
  ASSERT_TRUE(has(ev, Kind::kCheckpointed));
  ASSERT_TRUE(has(ev, Kind::kStopped));
  ASSERT_FALSE(has(ev, Kind::kCrashed));
  const int saved = std::atoi(read(ckpt + "/count-0").c_str());
  EXPECT_GE(saved, 50);
  EXPECT_LT(saved, 400);
  EXPECT_TRUE(fs::exists(rt->shard_path(1, 0, 0)));  // the marker the core stores and restores
  // Orrery cannot ask a signal job to save and go on.
  s.epoch = 2;
  s.restore_step = 0;
  s.restart_count = 1;
  ASSERT_TRUE(rt->launch(s).ok());
  EXPECT_EQ(rt->checkpoint(1, 2, -1, false).code(), StatusCode::kFailedPrecondition);
  ev = wait_for(*rt, 1, Kind::kCompleted);
  ASSERT_TRUE(has(ev, Kind::kCompleted)) << (ev.empty() ? "" : ev.back().detail);
  EXPECT_NE(read(ckpt + "/result-0").find("done at 400 after 1 restarts"), std::string::npos);
  const std::string log = read(dir.path() + "/node/logs/job-1-epoch-2-rank-0.log");
  EXPECT_NE(log.find("resumed from " + std::to_string(saved)), std::string::npos) << log;
}

TEST(UserCommand, SignalJobThatIgnoresSigtermIsKilledAfterItsGracePeriod) {
  Dir dir;
  auto rt = start(dir, 1);
  ASSERT_TRUE(rt);
  const std::string up = dir.path() + "/up";
  auto s = job(2, 1, 1,
               {script(dir, "stubborn.sh", "trap '' TERM\necho 1 > \"$1\"\nwhile true; do sleep 0.01; done\n"), up},
               spec::Preemption::kSignal);
  s.grace_ms = 300;
  ASSERT_TRUE(rt->launch(s).ok());
  ASSERT_TRUE(has(wait_for(*rt, 2, Kind::kStarted), Kind::kStarted));
  ASSERT_TRUE(wait_count(up, 1));  // its trap is set
  const auto t0 = std::chrono::steady_clock::now();
  ASSERT_TRUE(rt->checkpoint(2, 1, -1, true).ok());
  auto ev = wait_for(*rt, 2, Kind::kStopped);
  const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_TRUE(has(ev, Kind::kCheckpointed));
  EXPECT_TRUE(has(ev, Kind::kStopped));
  EXPECT_GE(waited, 0.3);  // not before the grace period
  EXPECT_LT(waited, 10.0);
}

TEST(UserCommand, RequeueJobIsKilledAtOnceAndStartsFromScratch) {
  Dir dir;
  auto rt = start(dir, 1);
  ASSERT_TRUE(rt);
  const std::string marks = dir.path() + "/marks";
  auto s = job(3, 1, 1,
               {script(dir, "req.sh", "trap 'echo ignored' TERM\necho start >> \"$1\"\n"
                                      "for i in $(seq 1 $2); do sleep 0.01; done\necho end >> \"$1\"\n"),
                marks, "300"},
               spec::Preemption::kRequeue);
  s.grace_ms = 60000;  // a requeue job gets none
  ASSERT_TRUE(rt->launch(s).ok());
  ASSERT_TRUE(has(wait_for(*rt, 3, Kind::kStarted), Kind::kStarted));
  for (int i = 0; i < 500 && read(marks).empty(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  const auto t0 = std::chrono::steady_clock::now();
  ASSERT_TRUE(rt->checkpoint(3, 1, -1, true).ok());
  auto ev = wait_for(*rt, 3, Kind::kStopped);
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 5.0);
  EXPECT_TRUE(has(ev, Kind::kCheckpointed));
  EXPECT_EQ(read(marks), "start\n");
  s.epoch = 2;
  s.restore_step = 0;
  s.command[2] = "20";
  ASSERT_TRUE(rt->launch(s).ok());
  ev = wait_for(*rt, 3, Kind::kCompleted);
  ASSERT_TRUE(has(ev, Kind::kCompleted)) << (ev.empty() ? "" : ev.back().detail);
  EXPECT_EQ(read(marks), "start\nstart\nend\n");  // from scratch, then to the end
}

TEST(UserCommand, EveryRankSeesOrrerysAndTorchDistributedsEnvironmentAndItsOwn) {
  Dir dir;
  auto rt = start(dir, 2);
  ASSERT_TRUE(rt);
  auto s = job(4, 3, 2,
               {script(dir, "env.sh", "echo \"R=$RANK W=$WORLD_SIZE L=$LOCAL_RANK/$LOCAL_WORLD_SIZE "
                                      "M=$MASTER_ADDR:$MASTER_PORT C=$ORRERY_RESTART_COUNT "
                                      "P=$ORRERY_PREEMPTION X=$MY_VAR D=$(pwd) O=$ORRERY_RANK/$ORRERY_WORLD\" "
                                      "> \"out-$RANK\"\n")},
               spec::Preemption::kRequeue);
  s.env = {"MY_VAR=hello world", "MASTER_ADDR=10.1.2.3"};  // the job's own win
  s.workdir = dir.path();
  s.restart_count = 2;
  s.master_port = 29999;
  ASSERT_TRUE(rt->launch(s).ok());
  auto ev = wait_for(*rt, 4, Kind::kCompleted);
  ASSERT_TRUE(has(ev, Kind::kCompleted));
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(read(dir.path() + "/out-" + std::to_string(r)),
              "R=" + std::to_string(r) + " W=2 L=" + std::to_string(r) + "/2 M=10.1.2.3:29999 C=2 P=requeue " +
                  "X=hello world D=" + dir.path() + " O=" + std::to_string(r) + "/2\n");
  }
}

TEST(UserCommand, AMissingProgramOrABadWorkdirIsRefusedWithAClearReason) {
  Dir dir;
  auto rt = start(dir, 1);
  ASSERT_TRUE(rt);
  auto s = job(5, 1, 1, {"no-such-program-xyz", "--flag"}, spec::Preemption::kTransparent);
  auto st = rt->launch(s);
  EXPECT_EQ(st.code(), StatusCode::kNotFound);
  EXPECT_NE(st.reason().find("\"no-such-program-xyz\" not found"), std::string::npos) << st.reason();
  s.command = {"./missing.py"};
  s.workdir = dir.path();
  st = rt->launch(s);
  EXPECT_NE(st.reason().find(dir.path() + "/./missing.py not found"), std::string::npos) << st.reason();
  s.command = {"/bin/true"};
  s.workdir = dir.path() + "/nowhere";
  st = rt->launch(s);
  EXPECT_EQ(st.code(), StatusCode::kNotFound);
  EXPECT_NE(st.reason().find("workdir " + dir.path() + "/nowhere: No such file or directory"), std::string::npos)
      << st.reason();
  std::ofstream(dir.path() + "/plain.txt") << "not a program\n";
  s.command = {dir.path() + "/plain.txt"};
  s.workdir = "";
  st = rt->launch(s);
  EXPECT_NE(st.reason().find("is not an executable file"), std::string::npos) << st.reason();
  EXPECT_TRUE(rt->running().empty());  // nothing was left running
}

TEST(UserCommand, ACrashingProgramEndsWithItsExitCodeAndTheLastLinesItWrote) {
  Dir dir;
  auto rt = start(dir, 2);
  ASSERT_TRUE(rt);
  auto s = job(6, 1, 2,
               {script(dir, "crash.sh", "echo working\nif [ \"$RANK\" = 1 ]; then echo 'Traceback: boom' >&2; "
                                        "echo 'ValueError: bad batch' >&2; exit 3; fi\nsleep 30\n")},
               spec::Preemption::kSignal);
  ASSERT_TRUE(rt->launch(s).ok());
  auto ev = wait_for(*rt, 6, Kind::kCrashed);
  ASSERT_FALSE(ev.empty());
  const JobEvent& e = ev.back();
  ASSERT_EQ(e.kind, Kind::kCrashed);
  EXPECT_NE(e.detail.find("rank 1"), std::string::npos) << e.detail;
  // 3 is the worker library's "stopped after its checkpoint"; from a program outside it, a failure.
  EXPECT_NE(e.detail.find("exited with status 3"), std::string::npos) << e.detail;
  EXPECT_NE(e.detail.find("Traceback: boom | ValueError: bad batch"), std::string::npos) << e.detail;
  EXPECT_TRUE(rt->running().empty());  // the other rank was taken down with it
}

}  // namespace
}  // namespace orrery::runtime
