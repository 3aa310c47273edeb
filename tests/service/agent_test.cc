// runtime::Agent in-process: epoch fencing of commands, shards uploaded before a checkpoint is
// reported, shards fetched before a restore, reports kept while the core is unreachable. The
// NodeRuntime and CoreLink here are recording stand-ins: the real ones are exercised between real
// processes by service_e2e_test.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>

#include "runtime/node/agent.h"

namespace orrery::runtime {
namespace {

// The runtime's epoch is the core's: every (re)start of a job is a new epoch.
std::string gen(std::int64_t epoch) { return std::to_string(epoch); }

class RecordingRuntime final : public NodeRuntime {
 public:
  Status launch(const LaunchSpec& s) override {
    calls.push_back("launch " + std::to_string(s.job) + "/" + gen(s.epoch) + " restore " +
                    std::to_string(s.restore_step));
    run.insert({s.job, s.epoch});
    return Status::Ok();
  }
  Status checkpoint(int job, std::int64_t epoch, std::int64_t, bool then_stop) override {
    calls.push_back("checkpoint " + std::to_string(job) + "/" + gen(epoch) + (then_stop ? " stop" : ""));
    return Status::Ok();
  }
  Status stop(int job, std::int64_t epoch) override {
    calls.push_back("stop " + std::to_string(job) + "/" + gen(epoch));
    run.erase({job, epoch});
    return Status::Ok();
  }
  std::vector<std::pair<int, std::int64_t>> running() const override { return {run.begin(), run.end()}; }
  std::vector<JobEvent> poll() override { return std::exchange(events, {}); }
  std::vector<OutputChunk> take_output(std::size_t) override { return {}; }
  std::string shard_path(int job, std::int64_t step, int rank) const override {
    return dir + "/" + std::to_string(job) + "-" + std::to_string(step) + "-" + std::to_string(rank);
  }
  // Local shards live here (the agent checks they exist before uploading).
  std::string dir = (std::filesystem::temp_directory_path() / ("orrery-agent-test-" + std::to_string(::getpid()))).string();
  RecordingRuntime() { std::filesystem::create_directories(dir); }
  ~RecordingRuntime() override { std::filesystem::remove_all(dir); }
  void write_shard(int job, std::int64_t step, int rank) { std::ofstream(shard_path(job, step, rank)) << "x"; }
  std::vector<std::string> calls;
  std::set<std::pair<int, std::int64_t>> run;
  std::vector<JobEvent> events;
};

class RecordingCore final : public CoreLink {
 public:
  Status output(const OutputChunk&) override { return up ? Status::Ok() : Status::Unavailable("connection lost"); }
  Status report(const service::NodeReport& r) override {
    if (!up) return Status::Error("connection lost");
    log.push_back("report " + std::string(service::report_kind_name(r.kind)) + " step " + std::to_string(r.step));
    return Status::Ok();
  }
  Status upload_shard(int job, std::int64_t epoch, std::int64_t step, int rank, const std::string& path) override {
    if (!up) return Status::Error("connection lost");
    log.push_back("upload " + std::to_string(job) + "/" + std::to_string(epoch) + " step " + std::to_string(step) +
                  " rank " + std::to_string(rank) + " from " + path);
    return Status::Ok();
  }
  Status download_shard(int job, std::int64_t step, int rank, const std::string& path) override {
    log.push_back("download " + std::to_string(job) + " step " + std::to_string(step) + " rank " +
                  std::to_string(rank) + " to " + path);
    return Status::Ok();
  }
  bool connected() const override { return up; }
  bool up = true;
  std::vector<std::string> log;
};

AgentCommand launch_cmd(int job, std::int64_t epoch, std::int64_t restore = -1) {
  AgentCommand c;
  c.kind = AgentCommand::Kind::kLaunch;
  c.launch.job = job;
  c.launch.epoch = epoch;
  c.launch.world = 2;
  c.launch.local = {{0, {0}}, {1, {1}}};
  c.launch.command = {"orrery-train-mlp"};
  c.launch.restore_step = restore;
  return c;
}

Status run_one(Agent& a, CoreLink& core, AgentCommand c) {
  Status out = Status::Error("not carried out");
  a.enqueue(std::move(c), [&](Status s) { out = s; });
  a.pump(core);
  return out;
}

TEST(Agent, RefusesCommandsOfAnOlderEpochAndStopsOlderIncarnations) {
  RecordingRuntime rt;
  RecordingCore core;
  Agent a(rt);
  ASSERT_TRUE(run_one(a, core, launch_cmd(0, 3)).ok());
  AgentCommand ck;
  ck.kind = AgentCommand::Kind::kCheckpoint;
  ck.job = 0;
  ck.epoch = 2;
  auto st = run_one(a, core, ck);
  EXPECT_EQ(st.reason(), "stale epoch 2 for job 0: this node has seen epoch 3");
  EXPECT_FALSE(run_one(a, core, launch_cmd(0, 1)).ok());
  EXPECT_EQ(a.stale_commands(), 2u);
  ASSERT_TRUE(run_one(a, core, launch_cmd(0, 4, 100)).ok());
  std::vector<std::string> want = {"launch 0/3 restore -1", "stop 0/3", "launch 0/4 restore 100"};
  EXPECT_EQ(rt.calls, want);
  // The restore's shards were fetched from the core before the launch.
  EXPECT_EQ(core.log.size(), 2u);
  EXPECT_EQ(core.log[0], "download 0 step 100 rank 0 to " + rt.shard_path(0, 100, 0));
  AgentCommand stop_old;
  stop_old.kind = AgentCommand::Kind::kStop;
  stop_old.job = 0;
  stop_old.epoch = 3;
  EXPECT_FALSE(run_one(a, core, stop_old).ok());
  EXPECT_EQ(rt.run.size(), 1u);
}

TEST(Agent, UploadsShardsBeforeReportingACheckpointAndKeepsReportsWhileDisconnected) {
  RecordingRuntime rt;
  RecordingCore core;
  Agent a(rt);
  ASSERT_TRUE(run_one(a, core, launch_cmd(5, 1)).ok());
  core.up = false;
  const std::int64_t e1 = 1;
  rt.write_shard(5, 40, 0);
  rt.write_shard(5, 40, 1);
  rt.events.push_back({JobEvent::Kind::kCheckpointed, 5, e1, 40, 0, ""});
  rt.events.push_back({JobEvent::Kind::kProgress, 5, e1, 41, 7, ""});
  a.pump(core);
  EXPECT_TRUE(core.log.empty());
  core.up = true;  // reconnected
  a.pump(core);
  std::vector<std::string> want = {"upload 5/1 step 40 rank 0 from " + rt.shard_path(5, 40, 0),
                                   "upload 5/1 step 40 rank 1 from " + rt.shard_path(5, 40, 1),
                                   "report checkpointed step 40", "report progress step 41"};
  EXPECT_EQ(core.log, want);
  // A checkpoint with a local shard missing cannot be restored from: reported as a crash.
  core.log.clear();
  rt.write_shard(5, 50, 0);
  rt.events.push_back({JobEvent::Kind::kCheckpointed, 5, e1, 50, 0, ""});
  a.pump(core);
  std::vector<std::string> crashed = {"report crashed step 50"};
  EXPECT_EQ(core.log, crashed);
}

TEST(Agent, ALaunchSentAgainAfterAReconnectIsARepeatAndANewerEpochReplacesTheOld) {
  RecordingRuntime rt;
  RecordingCore core;
  Agent a(rt);
  ASSERT_TRUE(run_one(a, core, launch_cmd(2, 7)).ok());
  ASSERT_TRUE(run_one(a, core, launch_cmd(2, 7)).ok());  // the same incarnation: nothing to do
  ASSERT_TRUE(run_one(a, core, launch_cmd(2, 8, 50)).ok());  // a resize's new incarnation
  std::vector<std::string> want = {"launch 2/7 restore -1", "stop 2/7", "launch 2/8 restore 50"};
  EXPECT_EQ(rt.calls, want);
  std::vector<service::Incarnation> running = {{2, 8}};
  EXPECT_EQ(a.running(), running);
  // The replaced incarnation's last events still go out, carrying its own epoch (the core refuses
  // them as stale); the new one's are reported as they come.
  core.log.clear();
  rt.events.push_back({JobEvent::Kind::kStarted, 2, 8, 50, 0, ""});
  a.pump(core);
  std::vector<std::string> reports = {"report started step 50"};
  EXPECT_EQ(core.log, reports);
}

}  // namespace
}  // namespace orrery::runtime
