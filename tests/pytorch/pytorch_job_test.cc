// examples/pytorch/train_orrery.py through the real node runtime (proxies as processes, the
// Python workers started from a LaunchSpec's command): its final parameters' digest is the same
// whatever happens to the job — spliced, cut and resized, stopped and restored.
//
// Every rank prints "digest <sha256>" and reports "... digest=<sha256>" (the completion note);
// both are checked. The model is small and the runs short (--width 8 --hidden 64 --batch 4) so
// that each test stays well under a minute on two shared cores; the mechanism does not depend
// on the size. Skips (exit 77, "SKIPPED: ...") only when /usr/bin/python3 cannot import torch.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "runtime/node/node_runtime.h"

namespace orrery::runtime {
namespace {

using Kind = JobEvent::Kind;
constexpr const char* kPython = "/usr/bin/python3";

class TorchEnvironment : public ::testing::Environment {
 public:
  void SetUp() override {
    if (std::system("/usr/bin/python3 -c 'import torch' >/dev/null 2>&1") != 0) {
      std::printf("SKIPPED: /usr/bin/python3 cannot import torch (apt-get install python3-torch); "
                  "the PyTorch job tests did not run\n");
      std::fflush(stdout);
      std::_Exit(77);
    }
  }
};
const auto* const kTorchEnvironment = ::testing::AddGlobalTestEnvironment(new TorchEnvironment);

class Dir {
 public:
  Dir() {
    std::string t = "/tmp/orrery_pytorch_test.XXXXXX";
    path_ = ::mkdtemp(t.data());
  }
  ~Dir() {
    if (std::getenv("ORRERY_TEST_KEEP") == nullptr) std::filesystem::remove_all(path_);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

std::unique_ptr<NodeRuntime> start(const Dir& dir, int devices) {
  NodeRuntimeOptions o;
  o.node_name = "pyt" + std::to_string(::getpid());
  o.devices = devices;
  o.device_mem_mib = 64;
  o.backend = "host";
  o.data_dir = dir.path();
  o.bin_dir = ORRERY_BIN_DIR;
  auto rt = start_node_runtime(o);
  EXPECT_TRUE(rt.ok()) << rt.reason();
  return rt.ok() ? std::move(rt.value()) : nullptr;
}

std::string logs(const Dir& dir) { return dir.path() + "/logs"; }

constexpr int kSteps = 12;

LaunchSpec spec(int job, std::int64_t epoch, int world, std::vector<LocalPlacement> local,
                std::int64_t restore_step = -1, int steps = kSteps) {
  LaunchSpec s;
  s.job = job;
  s.epoch = epoch;
  s.world = world;
  s.local = std::move(local);
  s.command = {kPython, "train_orrery.py", "--steps", std::to_string(steps), "--batch", "4",
               "--width", "8", "--hidden", "64", "--log-every", "4"};
  s.env = {"ORRERY_TORCH_LOG=1"};
  s.workdir = ORRERY_EXAMPLES_DIR;
  s.mode = spec::Preemption::kTransparent;
  s.restore_step = restore_step;
  s.collective = "/orrery-pyt-" + std::to_string(::getpid()) + "-" + std::to_string(job) + "-" +
                 std::to_string(epoch);
  return s;
}

// What one incarnation left: its events, and each rank's output.
struct Incarnation {
  std::vector<JobEvent> events;
  std::map<int, std::string> output;  // rank -> stdout and stderr
  const JobEvent* last() const { return events.empty() ? nullptr : &events.back(); }
  const JobEvent* find(Kind k) const {
    for (const auto& e : events)
      if (e.kind == k) return &e;
    return nullptr;
  }
  // The digest each rank printed ("digest <hex>"), rank -> hex.
  std::map<int, std::string> digests() const {
    std::map<int, std::string> d;
    for (const auto& [rank, text] : output) {
      std::size_t at = 0;
      while (at < text.size()) {
        std::size_t end = text.find('\n', at);
        if (end == std::string::npos) end = text.size();
        if (text.compare(at, 7, "digest ") == 0) d[rank] = text.substr(at + 7, end - at - 7);
        at = end + 1;
      }
    }
    return d;
  }
  std::string dump() const {
    std::string s;
    for (const auto& e : events)
      s += "event " + std::to_string(static_cast<int>(e.kind)) + " step " + std::to_string(e.step) +
           " " + e.detail + "\n";
    for (const auto& [rank, text] : output) s += "--- rank " + std::to_string(rank) + "\n" + text;
    return s;
  }
};

// Polls until `job` reaches an event of `kind` (or crashes, or its incarnation ends), collecting
// its output; on the way, `on_event` may act (ask for a checkpoint ...).
Incarnation wait_for(NodeRuntime& rt, const std::string& log_dir, int job, Kind kind,
                     double seconds = 90) {
  Incarnation run;
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::milliseconds(static_cast<int>(seconds * 1000));
  bool done = false;
  while (!done && std::chrono::steady_clock::now() < deadline) {
    for (auto& e : rt.poll()) {
      if (e.job != job) continue;
      run.events.push_back(e);
      if (e.kind == kind || e.kind == Kind::kCrashed || e.kind == Kind::kCompleted ||
          e.kind == Kind::kStopped) {
        done = true;
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  for (auto& c : rt.take_output(1 << 24)) {
    if (c.job == job) run.output[c.rank] += c.data;
  }
  if (run.output.empty() && !log_dir.empty() && !run.events.empty()) {
    // A runtime that hands out no output yet: the workers' log files it writes
    // (<data_dir>/logs/job-J-epoch-E-rank-R.log).
    const std::string prefix = "job-" + std::to_string(job) + "-epoch-" +
                               std::to_string(run.events.back().epoch) + "-rank-";
    std::error_code ec;
    for (const auto& f : std::filesystem::directory_iterator(log_dir, ec)) {
      const std::string name = f.path().filename().string();
      if (name.rfind(prefix, 0) != 0) continue;
      std::ifstream in(f.path());
      std::stringstream text;
      text << in.rdbuf();
      run.output[std::atoi(name.c_str() + prefix.size())] = text.str();
    }
  }
  if (!done) ADD_FAILURE() << "job " << job << ": no event " << static_cast<int>(kind) << "\n" << run.dump();
  return run;
}

// The digest every rank printed, checked equal across ranks and against the completion note.
std::string digest_of(const Incarnation& run, int world) {
  EXPECT_NE(run.last(), nullptr);
  if (run.last() == nullptr) return "";
  EXPECT_EQ(run.last()->kind, Kind::kCompleted) << run.dump();
  auto d = run.digests();
  EXPECT_EQ(static_cast<int>(d.size()), world) << run.dump();
  std::set<std::string> distinct;
  for (const auto& [rank, hex] : d) distinct.insert(hex);
  EXPECT_EQ(distinct.size(), 1u) << "ranks disagree\n" << run.dump();
  if (d.empty()) return "";
  const std::string hex = d.begin()->second;
  EXPECT_EQ(hex.size(), 64u);
  EXPECT_NE(run.last()->detail.find("digest=" + hex), std::string::npos)
      << "completion note: " << run.last()->detail;
  return hex;
}

std::string uninterrupted(NodeRuntime& rt, const Dir& dir, int job, int world,
                          int steps = kSteps) {
  std::vector<LocalPlacement> pl;
  for (int r = 0; r < world; ++r) pl.push_back({r, {r}});
  EXPECT_TRUE(rt.launch(spec(job, 1, world, pl, -1, steps)).ok());
  return digest_of(wait_for(rt, logs(dir), job, Kind::kCompleted), world);
}

TEST(PytorchJob, TwoRanksOnTwoDevicesAgree) {
  Dir dir;
  auto rt = start(dir, 2);
  ASSERT_TRUE(rt);
  const std::string d = uninterrupted(*rt, dir, 1, 2);
  EXPECT_FALSE(d.empty());
}

TEST(PytorchJob, SplicedOnOneDeviceGivesTheSameDigest) {
  Dir dir;
  auto rt = start(dir, 2);
  ASSERT_TRUE(rt);
  const std::string d = uninterrupted(*rt, dir, 1, 2);
  ASSERT_FALSE(d.empty());
  ASSERT_TRUE(rt->launch(spec(2, 1, 2, {{1, {1, 0}}})).ok());  // both ranks on device 1
  EXPECT_EQ(digest_of(wait_for(*rt, logs(dir), 2, Kind::kCompleted), 2), d);
}

// A checkpoint the job goes on from (at step 3), then a stop at the next boundary all ranks
// agree on (as a preemption asks), and a restore on the same devices. More steps than the other
// tests: the job must still be running when the stop is asked for (steps take milliseconds).
TEST(PytorchJob, StopAfterACheckpointAndRestoreOnTheSameDevices) {
  constexpr int kLong = 60;
  Dir dir;
  auto rt = start(dir, 2);
  ASSERT_TRUE(rt);
  const std::string d = uninterrupted(*rt, dir, 1, 2, kLong);
  ASSERT_FALSE(d.empty());
  const int job = 3;
  ASSERT_TRUE(rt->launch(spec(job, 1, 2, {{0, {0}}, {1, {1}}}, -1, kLong)).ok());
  ASSERT_TRUE(rt->checkpoint(job, 1, 3, false).ok());  // Python starts slower than step 3 comes
  Incarnation a = wait_for(*rt, logs(dir), job, Kind::kCheckpointed);
  ASSERT_NE(a.find(Kind::kCheckpointed), nullptr) << a.dump();
  EXPECT_EQ(a.find(Kind::kCheckpointed)->step, 3);
  ASSERT_TRUE(rt->checkpoint(job, 1, -1, true).ok());
  Incarnation b = wait_for(*rt, logs(dir), job, Kind::kStopped);
  ASSERT_NE(b.last(), nullptr);
  ASSERT_EQ(b.last()->kind, Kind::kStopped) << b.dump();
  const JobEvent* ck = b.find(Kind::kCheckpointed);
  ASSERT_NE(ck, nullptr) << b.dump();
  ASSERT_GT(ck->step, 3);
  ASSERT_LT(ck->step, kLong);
  ASSERT_TRUE(rt->launch(spec(job, 2, 2, {{0, {0}}, {1, {1}}}, ck->step, kLong)).ok());
  Incarnation c = wait_for(*rt, logs(dir), job, Kind::kCompleted);
  EXPECT_EQ(digest_of(c, 2), d);
  EXPECT_NE(c.output[0].find("restored step " + std::to_string(ck->step)), std::string::npos)
      << c.dump();
}

// W=4 on 4 devices, cut at step 4 and relaunched on 2 devices (2 ranks spliced on each), cut at
// step 8 and relaunched on 4 devices again: the uninterrupted W=4 digest.
TEST(PytorchJob, ShrinkToTwoDevicesAndGrowBackGivesTheSameDigest) {
  Dir dir;
  auto rt = start(dir, 4);
  ASSERT_TRUE(rt);
  const std::string d = uninterrupted(*rt, dir, 1, 4);
  ASSERT_FALSE(d.empty());
  const int job = 4;
  const std::vector<LocalPlacement> four = {{0, {0}}, {1, {1}}, {2, {2}}, {3, {3}}};
  ASSERT_TRUE(rt->launch(spec(job, 1, 4, four)).ok());
  ASSERT_TRUE(rt->checkpoint(job, 1, 4, true).ok());  // Python starts slower than step 4 comes
  Incarnation a = wait_for(*rt, logs(dir), job, Kind::kStopped);
  ASSERT_EQ(a.last()->kind, Kind::kStopped) << a.dump();
  ASSERT_NE(a.find(Kind::kCheckpointed), nullptr);
  ASSERT_EQ(a.find(Kind::kCheckpointed)->step, 4);
  ASSERT_TRUE(rt->launch(spec(job, 2, 4, {{2, {0, 1}}, {3, {2, 3}}}, 4)).ok());
  ASSERT_TRUE(rt->checkpoint(job, 2, 8, true).ok());
  Incarnation b = wait_for(*rt, logs(dir), job, Kind::kStopped);
  ASSERT_EQ(b.last()->kind, Kind::kStopped) << b.dump();
  ASSERT_NE(b.find(Kind::kCheckpointed), nullptr);
  ASSERT_EQ(b.find(Kind::kCheckpointed)->step, 8);
  ASSERT_TRUE(rt->launch(spec(job, 3, 4, {{3, {0}}, {2, {1}}, {1, {2}}, {0, {3}}}, 8)).ok());
  EXPECT_EQ(digest_of(wait_for(*rt, logs(dir), job, Kind::kCompleted), 4), d);
}

}  // namespace
}  // namespace orrery::runtime
