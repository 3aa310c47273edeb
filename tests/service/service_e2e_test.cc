// orrery-core serve, orrery-node agents and clients as real processes on loopback, talking Cap'n
// Proto: the end-to-end paths of docs/runtime.md (submit to completion, authentication, bad
// requests, failover from the last checkpoint after a node dies, recovery and reconciliation after
// the core is SIGKILLed). Results are checked against the workload's uninterrupted reference run
// (orrery-train-mlp --reference): a job resumed from a checkpoint must end bit-identical.
#include <gtest/gtest.h>

#include <future>
#include <map>
#include <regex>

#include "rpc/client_connection.h"
#include "rpc/connection.h"
#include "tests/service/local_cluster.h"

namespace orrery::testing {
namespace {

namespace fs = std::filesystem;

const std::string kBin = ORRERY_BIN_DIR;        // orrery-node, orrery-proxy, orrery-train-mlp
const std::string kCore = ORRERY_CORE_BIN;      // orrery-core

class Cluster : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* tmp = std::getenv("TMPDIR");
    dir_ = fs::path(tmp ? tmp : "/tmp") /
           ("orrery-svc-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    cluster_.emplace(kBin, kCore, dir_);
  }
  void TearDown() override {
    cluster_.reset();
    if (!HasFailure()) fs::remove_all(dir_);
  }
  static void write(const fs::path& p, const std::string& s) { LocalCluster::write(p, s); }

  void start_core(int port = 0) { ASSERT_EQ(cluster_->start_core(port), ""); }
  void start_node(const std::string& name, const std::string& secret_file = "secret") {
    cluster_->start_node(name, secret_file);
  }
  Proc& node_proc(const std::string& name) { return cluster_->node_proc(name); }
  template <class F>
  auto with_client(F f) { return cluster_->with_client(f); }
  std::vector<service::NodeStatus> nodes() { return cluster_->nodes(); }
  std::optional<service::JobStatus> job(int id) { return cluster_->job(id); }
  bool node_up(const std::string& name) { return cluster_->node_up(name); }
  int submit(const service::JobSpec& s) {
    auto r = cluster_->submit(s);
    EXPECT_TRUE(r.ok()) << r.reason();
    return r.ok() ? *r : -1;
  }
  std::string metrics() { return cluster_->metrics(); }
  std::string timeline(int id) { return cluster_->timeline(id); }
  std::string describe(int id) { return cluster_->describe(id); }
  bool completes(int id) { return cluster_->completes(id); }
  std::string reference_digest(int world, int steps) { return cluster_->reference_digest(world, steps); }
  static std::string digest_of(const std::string& note) { return LocalCluster::digest_of(note); }
  static service::JobSpec mlp_job(const std::string& name, int steps, int every,
                                  std::vector<std::string> args = {}) {
    return LocalCluster::mlp_job(name, steps, every, std::move(args));
  }

  fs::path dir_;
  std::optional<LocalCluster> cluster_;
};

TEST_F(Cluster, SubmitRunsToCompletionWithTheReferenceResult) {
  start_core();
  start_node("n1");
  ASSERT_TRUE(eventually(5000, [&] { return node_up("n1"); })) << node_proc("n1").output();
  // 5 ms steps: the core asks for periodic checkpoints from the progress it sees at its ticks
  // (every 100 ms), so 200 unstretched steps (~80 ms) could finish before the first one.
  auto spec = mlp_job("train", 200, 50, {"--step-delay-us=5000"});
  int id = submit(spec);
  ASSERT_GE(id, 0);
  ASSERT_TRUE(completes(id)) << describe(id);
  auto j = *job(id);
  EXPECT_EQ(j.progress, 200);
  EXPECT_GE(j.checkpoint, 50);  // periodic checkpoints committed (shards in the store)
  EXPECT_EQ(digest_of(j.note), reference_digest(2, 200));
  EXPECT_TRUE(fs::exists(dir_ / "data" / "checkpoints" / ("job-" + std::to_string(id))));
  auto m = metrics();
  EXPECT_NE(m.find("orrery_jobs{state=\"Completed\",tier=\"standard\"} 1"), std::string::npos) << m;
  EXPECT_NE(m.find("orrery_nodes{state=\"Up\"} 1"), std::string::npos) << m;
  EXPECT_NE(m.find("orrery_journal_durability_lag 0"), std::string::npos) << m;
  // The timeline holds the whole lifecycle, in order.
  std::string all = timeline(id);
  for (const char* want : {"New -> Submitted", "Submitted -> Queued", "Queued -> Placed",
                           "Placed -> Running", "Running -> Completed"})
    EXPECT_NE(all.find(want), std::string::npos) << want << "\n" << all;
  // The finished job's shared-memory collective goes once its workers exit; a clean stop leaves
  // nothing behind.
  EXPECT_TRUE(eventually(3000, [&] { return cluster_->segments().empty(); })) << cluster_->segments()[0];
  cluster_->stop_all();
  EXPECT_TRUE(cluster_->segments().empty()) << cluster_->segments()[0];
}

TEST_F(Cluster, CleanStopOfARunningClusterLeavesNoSharedMemory) {
  start_core();
  start_node("n1");
  start_node("n2");
  ASSERT_TRUE(eventually(5000, [&] { return node_up("n1") && node_up("n2"); }));
  auto wide = mlp_job("wide", 100000, 0);
  wide.world = 4;
  wide.min_devices = wide.max_devices = 2;  // two ranks per device, both on one node
  int id = submit(wide);
  ASSERT_TRUE(eventually(10000, [&] {
    auto j = job(id);
    return j && j->state == spec::JobState::kRunning && j->progress > 0;
  }));
  std::vector<std::string> devices;  // the proxies' device segments of both nodes
  for (const auto& e : fs::directory_iterator("/dev/shm"))
    for (auto& p : {node_proc("n1").pid(), node_proc("n2").pid()})
      if (e.path().filename().string().find("-" + std::to_string(p) + "-dev") != std::string::npos)
        devices.push_back(e.path().string());
  EXPECT_EQ(devices.size(), 4u);
  EXPECT_EQ(cluster_->segments().size(), 1u);  // the running job's collective
  cluster_->stop_all();  // SIGTERM: agents stop their proxies, proxies drop their sessions
  EXPECT_TRUE(cluster_->segments().empty()) << cluster_->segments()[0];
  for (const auto& d : devices) EXPECT_FALSE(fs::exists(d)) << d;
}

TEST_F(Cluster, WrongSecretIsRefusedForClientsAndNodes) {
  start_core();
  auto api = std::async(std::launch::async, [&] { return rpc::connect_client(cluster_->addr(), "not-it").status(); }).get();
  ASSERT_FALSE(api.ok());
  EXPECT_EQ(api.code(), StatusCode::kPermissionDenied);  // the code crossed the wire
  auto nobody = std::async(std::launch::async, [&] { return rpc::connect_client("127.0.0.1:1", "x").status(); }).get();
  EXPECT_EQ(nobody.code(), StatusCode::kUnavailable) << nobody.reason();
  EXPECT_NE(api.reason().find("authentication failed: wrong secret"), std::string::npos) << api.reason();
  write(dir_ / "wrong", "not-it\n");
  start_node("n1", "wrong");
  EXPECT_EQ(node_proc("n1").wait_exit(5000), 1);
  EXPECT_NE(node_proc("n1").output().find("authentication failed: wrong secret"), std::string::npos)
      << node_proc("n1").output();
  EXPECT_FALSE(node_up("n1"));
}

TEST_F(Cluster, MalformedRequestsGetClearErrorsAndChangeNothing) {
  start_core();
  start_node("n9");  // not in the fleet
  EXPECT_EQ(node_proc("n9").wait_exit(5000), 1);
  EXPECT_NE(node_proc("n9").output().find("unknown node \"n9\""), std::string::npos) << node_proc("n9").output();
  auto before = metrics();
  with_client([](service::ClientApi& c) {
    auto bad = Cluster::mlp_job("bad", 10, 0);
    bad.world = 0;
    auto r = c.submit(bad);
    EXPECT_FALSE(r.ok());
    EXPECT_EQ(r.code(), StatusCode::kInvalidArgument);
    EXPECT_NE(r.reason().find("world: 0 out of range [1, 4096]"), std::string::npos) << r.reason();
    bad = Cluster::mlp_job("bad", 10, 0);
    bad.device_type = "TPU";
    r = c.submit(bad);
    EXPECT_NE(r.reason().find("device_type \"TPU\": the fleet has no device of type 'TPU' (the fleet has: host)"),
              std::string::npos)
        << r.reason();
    bad = Cluster::mlp_job("bad", 10, 0);
    bad.max_devices = 3;
    r = c.submit(bad);
    EXPECT_EQ(r.code(), StatusCode::kInvalidArgument);
    EXPECT_NE(r.reason().find("max_devices: 3 out of range [1, 2]"), std::string::npos) << r.reason();
    auto st = c.cancel(99);
    EXPECT_EQ(st.reason(), "unknown job 99");
    st = c.preempt(-5, -1);
    EXPECT_EQ(st.reason(), "unknown job -5");
    st = c.drain("nowhere");
    EXPECT_EQ(st.reason(), "unknown node \"nowhere\"");
    st = c.migrate(7, std::string("n1"));
    EXPECT_EQ(st.reason(), "unknown job 7");
    auto lg = c.logs(3, 10);
    EXPECT_EQ(lg.reason(), "unknown job 3");
    auto js = c.jobs();
    EXPECT_TRUE(js.ok() && js->empty());
    return Status::Ok();
  });
  auto after = metrics();
  auto committed = [](const std::string& m) {
    std::smatch s;
    std::regex_search(m, s, std::regex("orrery_decisions_committed_total (\\d+)"));
    return s[1].str();
  };
  EXPECT_EQ(committed(before), committed(after));
  EXPECT_TRUE(cluster_->core().running()) << "the core must still run";
}

TEST_F(Cluster, NodeKilledJobResumesElsewhereFromItsLastCheckpoint) {
  start_core();
  start_node("n1");
  ASSERT_TRUE(eventually(5000, [&] { return node_up("n1"); }));
  const int steps = 3000;
  int id = submit(mlp_job("failover", steps, 100));
  ASSERT_TRUE(eventually(10000, [&] {
    auto j = job(id);
    return j && j->state == spec::JobState::kRunning && j->checkpoint >= 100;
  })) << job(id)->note;
  start_node("n2");
  ASSERT_TRUE(eventually(5000, [&] { return node_up("n2"); }));
  auto before = *job(id);
  ASSERT_EQ(before.nodes, std::vector<std::string>{"n1"});
  node_proc("n1").kill_group(SIGKILL);  // the machine dies: agent, proxies, workers
  auto killed = std::chrono::steady_clock::now();
  ASSERT_TRUE(eventually(10000, [&] {
    auto j = job(id);
    return j && j->epoch > before.epoch && j->nodes == std::vector<std::string>{"n2"} &&
           j->state == spec::JobState::kRunning;
  })) << job(id)->note;
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - killed).count();
  std::printf("failover: running again on n2 %lld ms after n1 was killed (heartbeat timeout 1500 ms)\n",
              static_cast<long long>(ms));
  auto moved = *job(id);
  EXPECT_GE(moved.checkpoint, before.checkpoint);
  ASSERT_TRUE(completes(id)) << describe(id);
  EXPECT_EQ(digest_of(job(id)->note), reference_digest(2, steps));
  std::string all = timeline(id);
  EXPECT_NE(all.find("NodeLoss"), std::string::npos) << all;
  for (auto& n : nodes())
    if (n.name == "n1") { EXPECT_EQ(n.state, spec::NodeState::kDown); }
}

TEST_F(Cluster, CoreKilledRecoversAndReconcilesRunningJobs) {
  start_core();
  start_node("n1");
  ASSERT_TRUE(eventually(5000, [&] { return node_up("n1"); }));
  const int steps = 2500;
  int id = submit(mlp_job("survivor", steps, 100));
  ASSERT_TRUE(eventually(10000, [&] {
    auto j = job(id);
    return j && j->state == spec::JobState::kRunning && j->progress > 0;
  }));
  auto before = *job(id);
  cluster_->kill_core();
  start_core(cluster_->port());  // same address: the agent reconnects and registers with what it runs
  ASSERT_TRUE(eventually(5000, [&] {
    return node_proc("n1").output().find("reconnecting") != std::string::npos && node_up("n1");
  })) << node_proc("n1").output();
  auto after = *job(id);
  EXPECT_EQ(after.epoch, before.epoch);  // adopted, not restarted
  EXPECT_GE(after.progress, before.progress);
  ASSERT_TRUE(completes(id)) << describe(id);
  EXPECT_EQ(digest_of(job(id)->note), reference_digest(2, steps));
  EXPECT_EQ(job(id)->epoch, before.epoch);
  // The result survives another restart (DATA/jobs/job-J.result).
  cluster_->kill_core();
  start_core(cluster_->port());
  EXPECT_EQ(digest_of(job(id)->note), reference_digest(2, steps));
}

TEST_F(Cluster, PremiumJobPreemptsBasicJobWhichResumesLaterBitIdentical) {
  start_core();
  start_node("n1");
  ASSERT_TRUE(eventually(5000, [&] { return node_up("n1"); }));
  const int steps = 3000;
  auto basic = mlp_job("basic", steps, 100);
  basic.tier = spec::Tier::kBasic;
  basic.min_devices = 2;  // takes the whole node
  int b = submit(basic);
  ASSERT_TRUE(eventually(10000, [&] {
    auto j = job(b);
    return j && j->state == spec::JobState::kRunning && j->progress > 0;
  }));
  auto premium = mlp_job("premium", 300, 0);
  premium.tier = spec::Tier::kPremium;
  premium.min_devices = 2;
  int p = submit(premium);
  ASSERT_TRUE(eventually(10000, [&] {
    auto j = job(b);
    return j && j->state == spec::JobState::kSuspended;
  })) << describe(b) << "premium: " << describe(p);
  ASSERT_TRUE(completes(p)) << describe(p);
  ASSERT_TRUE(completes(b)) << describe(b);
  EXPECT_EQ(digest_of(job(p)->note), reference_digest(2, 300));
  EXPECT_EQ(digest_of(job(b)->note), reference_digest(2, steps));
  std::string all = timeline(b);
  EXPECT_NE(all.find("Running -> Checkpointing: Preempt job 0 for job 1"), std::string::npos) << all;
  EXPECT_NE(all.find("Checkpointing -> Suspended"), std::string::npos) << all;
  EXPECT_NE(all.find("Suspended -> Restoring"), std::string::npos) << all;
}

TEST_F(Cluster, DrainMigratesJobsOffTheNodeBitIdentical) {
  start_core();
  start_node("n1");
  ASSERT_TRUE(eventually(5000, [&] { return node_up("n1"); }));
  const int steps = 3000;
  int id = submit(mlp_job("mover", steps, 0));
  ASSERT_TRUE(eventually(10000, [&] {
    auto j = job(id);
    return j && j->state == spec::JobState::kRunning && j->progress > 0;
  }));
  start_node("n2");
  ASSERT_TRUE(eventually(5000, [&] { return node_up("n2"); }));
  auto st = with_client([](service::ClientApi& c) { return c.drain("n1"); });
  ASSERT_TRUE(st.ok()) << st.reason();
  ASSERT_TRUE(eventually(10000, [&] {
    auto j = job(id);
    return j && j->nodes == std::vector<std::string>{"n2"};
  })) << describe(id);
  ASSERT_TRUE(completes(id)) << describe(id);
  EXPECT_EQ(digest_of(job(id)->note), reference_digest(2, steps));
  for (auto& n : nodes())
    if (n.name == "n1") { EXPECT_EQ(n.state, spec::NodeState::kDraining); }
}

TEST_F(Cluster, ResizeDownForAWaitingJobThenBackUpKeepsTheResult) {
  start_core();
  start_node("n1");
  ASSERT_TRUE(eventually(5000, [&] { return node_up("n1"); }));
  const int steps = 4000;
  auto elastic = mlp_job("elastic", steps, 0);
  elastic.tier = spec::Tier::kBasic;
  int id = submit(elastic);
  ASSERT_TRUE(eventually(10000, [&] {
    auto j = job(id);
    return j && j->state == spec::JobState::kRunning && j->progress > 0 && j->devices == 2;
  }));
  auto before = *job(id);
  auto st = with_client([id](service::ClientApi& c) { return c.resize(id, 3, -1); });
  EXPECT_NE(st.reason().find("elastic range [1, 2]"), std::string::npos) << st.reason();
  auto small = mlp_job("small", 200, 0);
  small.world = 1;
  small.max_devices = 1;
  small.tier = spec::Tier::kBasic;  // the same tier: the planner shrinks only for a higher one
  int s = submit(small);
  ASSERT_TRUE(eventually(3000, [&] {
    auto j = job(s);
    return j && j->state == spec::JobState::kQueued;
  }));
  st = with_client([id, s](service::ClientApi& c) { return c.resize(id, 1, s); });  // for it
  ASSERT_TRUE(st.ok()) << st.reason();
  // Decided (Resizing: the job keeps its devices), carried out once the cut is stored.
  ASSERT_TRUE(eventually(10000, [&] {
    auto j = job(id);
    return j && j->devices == 1 && j->splice == 2;  // both ranks spliced on one device
  })) << job(id)->note;
  ASSERT_TRUE(completes(s)) << describe(s);
  EXPECT_EQ(digest_of(job(s)->note), reference_digest(1, 200));
  // Nothing waits any more: the planner grows the elastic job back.
  ASSERT_TRUE(eventually(10000, [&] {
    auto j = job(id);
    return j && (j->devices == 2 || j->state == spec::JobState::kCompleted);
  })) << job(id)->note;
  ASSERT_TRUE(completes(id)) << describe(id);
  std::string all = timeline(id);
  // Each resize is a cut and a new incarnation from it (one epoch scheme): two of them.
  EXPECT_EQ(job(id)->epoch, before.epoch + 2) << all;
  EXPECT_EQ(digest_of(job(id)->note), reference_digest(2, steps));
  EXPECT_NE(all.find("ResizeDown"), std::string::npos) << all;
  EXPECT_NE(all.find("ResizeUp"), std::string::npos) << all;
}

TEST_F(Cluster, JobSpanningTwoNodesMeetsInATcpCollective) {
  start_core();
  start_node("n1");
  start_node("n2");
  ASSERT_TRUE(eventually(5000, [&] { return node_up("n1") && node_up("n2"); }));
  auto wide = mlp_job("wide", 400, 100);
  wide.world = 4;
  wide.min_devices = 4;
  wide.max_devices = 4;
  int id = submit(wide);
  ASSERT_TRUE(completes(id)) << describe(id);
  EXPECT_EQ(digest_of(job(id)->note), reference_digest(4, 400));
  EXPECT_GE(job(id)->checkpoint, 100);
}

// A node agent speaking the protocol by hand, to send what a real agent never would.
class RawAgent final : public rpc::wire::NodeAgent::Server {
 public:
  explicit RawAgent(std::vector<std::string>* log) : log_(log) {}
  kj::Promise<void> launch(LaunchContext ctx) override {
    auto l = ctx.getParams().getLaunch();
    log_->push_back("launch " + std::to_string(l.getJob()) + " " + std::to_string(l.getEpoch()));
    return kj::READY_NOW;
  }
  kj::Promise<void> stop(StopContext ctx) override {
    log_->push_back("stop " + std::to_string(ctx.getParams().getJob()) + " " +
                    std::to_string(ctx.getParams().getEpoch()));
    return kj::READY_NOW;
  }

 private:
  std::vector<std::string>* log_;
};

TEST_F(Cluster, StaleEpochReportsAreRefusedAndTheStaleIncarnationStopped) {
  start_core();
  auto conn = rpc::connect_to(cluster_->addr());
  ASSERT_TRUE(conn.ok()) << conn.reason();
  auto& c = **conn;
  auto& ws = c.io.waitScope;
  std::vector<std::string> log;
  auto expect_refused = [&](auto&& promise, const std::string& want) {
    std::string got = "(accepted)";
    KJ_IF_MAYBE(e, kj::runCatchingExceptions([&] { promise.wait(ws); })) { got = rpc::reason_of(*e); }
    EXPECT_NE(got.find(want), std::string::npos) << got;
  };
  KJ_IF_MAYBE(b, c.bootstrap) {
    auto login = b->loginNodeRequest();
    login.setSecret("test-secret");
    auto api = login.send().wait(ws).getApi();
    auto reg = [&](const char* name, int devices) {
      auto r = api.registerRequest();
      r.setName(name);
      r.getInventory().setDeviceType("host");
      r.getInventory().setDevices(devices);
      r.getInventory().setDeviceMemMib(256);
      r.setAgent(kj::heap<RawAgent>(&log));
      return r.send();
    };
    expect_refused(reg("n7", 2), "unknown node \"n7\" (not in the fleet)");
    expect_refused(reg("n1", 3), "node n1 brings 3 devices, the fleet configures 2");
    auto session = reg("n1", 2).wait(ws).getSession();
    auto pump_until = [&](const std::string& line) {
      for (int i = 0; i < 200; ++i) {
        if (std::find(log.begin(), log.end(), line) != log.end()) return true;
        session.heartbeatRequest().send().wait(ws);
        c.io.provider->getTimer().afterDelay(20 * kj::MILLISECONDS).wait(ws);
      }
      return false;
    };
    auto spec = mlp_job("raw", 100, 0);
    auto submitted = std::async(std::launch::async, [&] {
      auto api2 = rpc::connect_client(cluster_->addr(), "test-secret");
      return (*api2)->submit(spec);
    });
    ASSERT_TRUE(pump_until("launch 0 1")) << "no launch";
    ASSERT_TRUE(submitted.get().ok());
    auto report = [&](int job, std::int64_t epoch, rpc::wire::JobReport::Kind kind, std::int64_t step) {
      auto r = session.reportRequest();
      r.getReport().setKind(kind);
      r.getReport().setJob(job);
      r.getReport().setEpoch(epoch);
      r.getReport().setStep(step);
      return r.send();
    };
    report(0, 1, rpc::wire::JobReport::Kind::STARTED, 0).wait(ws);
    expect_refused(report(0, 0, rpc::wire::JobReport::Kind::PROGRESS, 5),
                   "stale epoch 0 for job 0: current epoch is 1");
    ASSERT_TRUE(pump_until("stop 0 0")) << "the stale incarnation was not told to stop";
    expect_refused(report(42, 1, rpc::wire::JobReport::Kind::PROGRESS, 5), "unknown job 42");
    expect_refused(report(0, 1, rpc::wire::JobReport::Kind::PROGRESS, -3), "report step must be >= 0");
    auto up = session.uploadShardRequest();
    up.setJob(0);
    up.setEpoch(0);
    up.setStep(0);
    up.setRank(0);
    expect_refused(up.send(), "stale epoch 0 for job 0");
    auto up2 = session.uploadShardRequest();
    up2.setJob(0);
    up2.setEpoch(1);
    up2.setStep(0);
    up2.setRank(5);
    expect_refused(up2.send(), "rank 5 out of range [0, 2)");
    // A shard whose bytes do not match the announced checksum is not stored.
    auto up3 = session.uploadShardRequest();
    up3.setJob(0);
    up3.setEpoch(1);
    up3.setStep(0);
    up3.setRank(0);
    up3.setSize(3);
    up3.setCrc32c(12345);
    auto sink = up3.send().wait(ws).getSink();
    auto w = sink.writeRequest();
    const capnp::byte bytes[] = {1, 2, 3};
    w.setChunk(kj::arrayPtr(bytes, 3));
    w.send().wait(ws);
    expect_refused(sink.doneRequest().send(), "shard checksum mismatch");
    EXPECT_FALSE(fs::exists(dir_ / "data" / "checkpoints" / "job-0" / "step-0" / "rank-0.ckpt"));
  }
  auto j = std::async(std::launch::async, [&] { return job(0); }).get();
  ASSERT_TRUE(j.has_value());
  EXPECT_EQ(j->state, spec::JobState::kRunning);
  EXPECT_EQ(j->progress, 0);  // nothing from the stale incarnation was committed
  EXPECT_NE(metrics().find("orrery_reports_rejected_total 1"), std::string::npos);
}

}  // namespace
}  // namespace orrery::testing
