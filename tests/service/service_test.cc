// The Service in-process with a manual clock and recording node links: heartbeat monitor and
// failover from the last checkpoint, report aggregation and fencing, recovery from the journal and
// reconciliation on re-registration, deterministic (no processes, no sleeps).
#include <gtest/gtest.h>

#include <filesystem>

#include "base/crc32c.h"
#include "core/service/service.h"

namespace orrery::service {
namespace {

namespace fs = std::filesystem;

struct RecordingLink final : NodeLink {
  void launch(const LaunchCommand& c) override {
    log.push_back("launch " + std::to_string(c.job) + " epoch " + std::to_string(c.epoch) + " restore " +
                  std::to_string(c.restore_step) + " devices " + std::to_string(c.local.size()));
  }
  void checkpoint(int job, std::int64_t epoch, std::int64_t, bool then_stop) override {
    log.push_back("checkpoint " + std::to_string(job) + " epoch " + std::to_string(epoch) +
                  (then_stop ? " stop" : ""));
  }
  void stop(int job, std::int64_t epoch) override {
    log.push_back("stop " + std::to_string(job) + " epoch " + std::to_string(epoch));
  }
  bool saw(const std::string& line) const { return std::find(log.begin(), log.end(), line) != log.end(); }
  std::vector<std::string> log;
};

class ServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* tmp = std::getenv("TMPDIR");
    dir_ = fs::path(tmp ? tmp : "/tmp") / ("orrery-service-test-" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    opts_.data_dir = dir_.string();
    opts_.heartbeat_timeout_ms = 1000;
    opts_.journal.fsync = core::FsyncPolicy::kNever;
    opts_.progress_every_ms = 0;  // every report's progress committed: the test checks steps
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::unique_ptr<Service> open(bool with_fleet) {
    std::optional<core::Fleet> fleet;
    if (with_fleet) {
      auto f = core::Fleet::parse(
          "region r\ncluster c\nnode n1 host_mem_mib=4096\ndevices host count=2 mem_mib=256\n"
          "node n2 host_mem_mib=4096\ndevices host count=2 mem_mib=256\n");
      EXPECT_TRUE(f.ok()) << f.reason();
      fleet = *f;
    }
    auto s = Service::open(opts_, fleet, clock_);
    EXPECT_TRUE(s.ok()) << s.reason();
    return s.ok() ? std::move(*s) : nullptr;
  }
  static NodeReport rep(NodeReport::Kind k, int job, std::int64_t epoch, std::int64_t step) {
    NodeReport r;
    r.kind = k;
    r.job = job;
    r.epoch = epoch;
    r.step = step;
    return r;
  }
  static void upload(Service& s, const NodeSession& n, int job, std::int64_t epoch, std::int64_t step, int rank) {
    std::string bytes = "shard " + std::to_string(rank) + " of step " + std::to_string(step);
    auto up = s.upload_shard(n, job, epoch, step, rank, bytes.size(), crc32c(bytes));
    ASSERT_TRUE(up.ok()) << up.reason();
    ASSERT_TRUE((*up)->write(bytes).ok());
    ASSERT_TRUE((*up)->finish().ok());
  }
  JobSpec spec() {
    JobSpec s;
    s.name = "j";
    s.world = 2;
    s.max_devices = 2;
    s.steps = 1000;
    s.command = {"orrery-train-mlp", "--steps=1000"};
    s.tenant = "vision";
    return s;
  }
  // A job of `tier` on exactly two devices (preempted, never shrunk).
  JobSpec rigid(spec::Tier tier) {
    JobSpec s = spec();
    s.tier = tier;
    s.min_devices = 2;
    return s;
  }
  // Node n1 (two host devices) registers, running `running`, its commands recorded and unread.
  static Result<NodeSession> join_n1(Service& s, const std::vector<Incarnation>& running = {}) {
    return s.register_node("n1", {"host", 2, 256}, running, std::make_shared<RecordingLink>());
  }
  // The core restarts after `down_ms`; n1 registers again running `job` under `epoch`.
  Result<NodeSession> restart_with_n1(std::unique_ptr<Service>& s, std::int64_t down_ms, int job,
                                      std::int64_t epoch) {
    s.reset();
    clock_.advance(down_ms);
    s = open(false);
    if (!s) return Status::Error("the service did not reopen");
    return join_n1(*s, {{job, epoch}});
  }
  fs::path dir_;
  ServiceOptions opts_;
  core::ManualClock clock_{1000};
};

// Two nodes of two devices: `host` with 256 MiB, `big` with 8 GiB.
core::Fleet two_type_fleet() {
  return *core::Fleet::parse(
      "region r\ncluster c\nnode n1 host_mem_mib=4096\ndevices host count=2 mem_mib=256\n"
      "node n2 host_mem_mib=4096\ndevices big count=2 mem_mib=8192\n");
}

// A job spec may name several device types in order of preference ("A|B"): it is accepted when it
// fits the fleet on one of them, and submitted with those that can hold it (a planner runs it on
// one with room: Retype, TypeSpeedsPlaceAJobOnTheFastestTypeItNames).
TEST_F(ServiceTest, AJobNamingSeveralDeviceTypesRunsOnOneThatFits) {
  const core::Fleet f = two_type_fleet();
  auto opened = Service::open(opts_, f, clock_);
  ASSERT_TRUE(opened.ok()) << opened.reason();
  auto& s = **opened;
  auto l1 = std::make_shared<RecordingLink>();
  auto l2 = std::make_shared<RecordingLink>();
  ASSERT_TRUE(s.register_node("n1", {"host", 2, 256}, {}, l1).ok());
  ASSERT_TRUE(s.register_node("n2", {"big", 2, 8192}, {}, l2).ok());
  auto js = spec();
  js.mem_mib = 1024;  // no host device has the memory: only the big ones fit
  js.device_type = "host|big";
  auto reason = [&](const std::string& types, std::int64_t mem = 1024) {
    auto bad = js;
    bad.device_type = types;
    bad.mem_mib = mem;
    auto r = s.submit(bad);
    EXPECT_FALSE(r.ok()) << types;
    return r.reason();
  };
  EXPECT_EQ(reason("host|TPU"), "device_type \"host|TPU\": the fleet has no device of type 'TPU' (the fleet has: host, big)");
  EXPECT_NE(reason("host|host").find("device type 'host' is named twice"), std::string::npos);
  EXPECT_NE(reason("host|").find("device_type: must be a device type name"), std::string::npos);
  std::string seventeen = "host";
  for (int i = 0; i < 16; ++i) seventeen += "|t" + std::to_string(i);
  EXPECT_NE(reason(seventeen).find("or up to 16 of them separated by '|'"), std::string::npos);
  EXPECT_NE(reason("host|big", 100000).find("the job can never be placed on this fleet"), std::string::npos);
  EXPECT_NE(reason("host", 1024).find("the job can never be placed on this fleet"), std::string::npos);
  auto id = s.submit(js);
  ASSERT_TRUE(id.ok()) << id.reason();
  // No host device has memory for a worker: the type is left out, and the job is submitted with
  // the big ones (a job whose first type can never hold it would wait for a move to another).
  EXPECT_EQ(s.core().device_type(*id), "big");
  EXPECT_TRUE(s.core().job_info(*id).types.empty());
  auto listed = s.jobs();  // `orrery ls` shows the type (TYPE)
  ASSERT_TRUE(listed.ok()) << listed.reason();
  EXPECT_EQ((*listed)[static_cast<std::size_t>(*id)].device_type, "big");
  s.tick();  // admit, place
  EXPECT_EQ(s.core().state(*id), spec::JobState::kPlaced);
  EXPECT_TRUE(l2->saw("launch 0 epoch 1 restore -1 devices 2")) << (l2->log.empty() ? "" : l2->log.back());
  EXPECT_TRUE(l1->log.empty());
}

// With device type speeds (orrery-core serve --type-speed) a job naming several types is placed
// on the fastest with room, its own type first otherwise; a speed for a type the fleet lacks is
// refused when the service opens.
TEST_F(ServiceTest, TypeSpeedsPlaceAJobOnTheFastestTypeItNames) {
  const core::Fleet f = two_type_fleet();
  for (const bool speeds : {false, true}) {
    SCOPED_TRACE(speeds ? "big twice as fast" : "no speeds");
    TearDown();
    SetUp();
    auto o = opts_;
    if (speeds) o.type_speed = {{"big", 2.0}};
    auto opened = Service::open(o, f, clock_);
    ASSERT_TRUE(opened.ok()) << opened.reason();
    auto& s = **opened;
    ASSERT_TRUE(s.register_node("n1", {"host", 2, 256}, {}, std::make_shared<RecordingLink>()).ok());
    ASSERT_TRUE(s.register_node("n2", {"big", 2, 8192}, {}, std::make_shared<RecordingLink>()).ok());
    auto js = spec();
    js.mem_mib = 100;  // fits both types
    js.device_type = "host|big";
    auto id = s.submit(js);
    ASSERT_TRUE(id.ok()) << id.reason();
    s.tick();
    EXPECT_EQ(s.core().state(*id), spec::JobState::kPlaced);
    EXPECT_EQ(s.core().device_type(*id), speeds ? "big" : "host");
  }
  auto o = opts_;
  o.type_speed = {{"TPU", 2.0}};
  auto refused = Service::open(o, f, clock_);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.reason(), "type speed for \"TPU\": the fleet has no such device type");
}

// orrery-core serve --one-node: a gang that one node can hold waits for a node with room rather
// than spanning two. Two nodes of three devices with one free on each (a job of 2 on each): a
// third job of 2 spans them by default; with the option it waits (moving a job of 2 off a node
// needs 2 free elsewhere: nothing to pack). Every policy.
TEST_F(ServiceTest, OneNodeGangsWaitForANodeWithRoom) {
  const auto f = core::Fleet::parse(
      "region r\ncluster c\nnode n1 host_mem_mib=4096\ndevices host count=3 mem_mib=256\n"
      "node n2 host_mem_mib=4096\ndevices host count=3 mem_mib=256\n");
  ASSERT_TRUE(f.ok()) << f.reason();
  for (const char* policy : {"orrery", "fifo", "tiresias", "afs"})
    for (const bool one_node : {false, true}) {
      SCOPED_TRACE(std::string(policy) + (one_node ? ", one node" : ", spanning"));
      TearDown();
      SetUp();
      auto o = opts_;
      o.policy = policy;
      o.one_node_gangs = one_node;
      auto opened = Service::open(o, *f, clock_);
      ASSERT_TRUE(opened.ok()) << opened.reason();
      auto& s = **opened;
      ASSERT_TRUE(s.register_node("n1", {"host", 3, 256}, {}, std::make_shared<RecordingLink>()).ok());
      ASSERT_TRUE(s.register_node("n2", {"host", 3, 256}, {}, std::make_shared<RecordingLink>()).ok());
      std::vector<int> ids;
      for (int i = 0; i < 3; ++i) {
        auto id = s.submit(rigid(spec::Tier::kStandard));
        ASSERT_TRUE(id.ok()) << id.reason();
        ids.push_back(*id);
        s.tick();
      }
      EXPECT_EQ(s.core().state(ids[0]), spec::JobState::kPlaced);
      EXPECT_EQ(s.core().state(ids[1]), spec::JobState::kPlaced);
      EXPECT_NE(s.core().cluster().node_of(s.core().cluster().jobs[ids[0]].held[0]),
                s.core().cluster().node_of(s.core().cluster().jobs[ids[1]].held[0]));
      EXPECT_EQ(s.core().state(ids[2]), one_node ? spec::JobState::kQueued : spec::JobState::kPlaced);
    }
}

// The planner runs every tick (orrery-core: every 100 ms), whatever changed. A job naming two types
// whose gang fits neither (3 free devices on each, a gang of 4) is not moved from one to the other
// tick after tick: nothing is committed while nothing changes. Every policy.
TEST_F(ServiceTest, AJobIsNotMovedBetweenTypesWhereItsGangFitsNeither) {
  const auto f = core::Fleet::parse(
      "region r\ncluster c\nnode n1 host_mem_mib=4096\ndevices host count=4 mem_mib=256\n"
      "node n2 host_mem_mib=4096\ndevices big count=4 mem_mib=256\n");
  ASSERT_TRUE(f.ok()) << f.reason();
  for (const char* policy : {"orrery", "fifo", "tiresias", "afs"}) {
    SCOPED_TRACE(policy);
    TearDown();
    SetUp();
    auto o = opts_;
    o.policy = policy;
    auto opened = Service::open(o, *f, clock_);
    ASSERT_TRUE(opened.ok()) << opened.reason();
    auto& s = **opened;
    ASSERT_TRUE(s.register_node("n1", {"host", 4, 256}, {}, std::make_shared<RecordingLink>()).ok());
    ASSERT_TRUE(s.register_node("n2", {"big", 4, 256}, {}, std::make_shared<RecordingLink>()).ok());
    for (const char* type : {"host", "big"}) {
      auto one = spec();
      one.world = one.max_devices = 1;
      one.device_type = type;
      ASSERT_TRUE(s.submit(one).ok());
    }
    auto gang = spec();
    gang.world = gang.max_devices = 4;
    gang.min_devices = 3;  // 3 free devices on each type, but only 4 splits the world
    gang.device_type = "host|big";
    auto id = s.submit(gang);
    ASSERT_TRUE(id.ok()) << id.reason();
    s.tick();
    EXPECT_EQ(s.core().state(*id), spec::JobState::kQueued);
    const auto committed = s.core().committed();
    for (int i = 0; i < 5; ++i) {
      clock_.advance(100);
      s.tick();
    }
    EXPECT_EQ(s.core().committed(), committed);
    EXPECT_EQ(s.core().state(*id), spec::JobState::kQueued);
  }
}

TEST_F(ServiceTest, LostNodeFailsOverFromTheLastCheckpointAndARestartedCoreReconciles) {
  auto s = open(true);
  auto l1 = std::make_shared<RecordingLink>();
  auto l2 = std::make_shared<RecordingLink>();
  auto n1 = s->register_node("n1", {"host", 2, 256}, {}, l1);
  ASSERT_TRUE(n1.ok()) << n1.reason();
  auto bad = spec();
  bad.tenant = "a b";
  EXPECT_NE(s->submit(bad).reason().find("tenant: must be"), std::string::npos);
  auto id = s->submit(spec());
  ASSERT_TRUE(id.ok());
  s->tick();  // admit, place
  ASSERT_TRUE(l1->saw("launch 0 epoch 1 restore -1 devices 2")) << l1->log.size();
  ASSERT_TRUE(s->report(*n1, rep(NodeReport::Kind::kStarted, 0, 1, 0)).ok());
  EXPECT_EQ(s->core().state(0), spec::JobState::kRunning);
  // A checkpoint counts only once every rank's shard is in the store.
  upload(*s, *n1, 0, 1, 10, 0);
  ASSERT_TRUE(s->report(*n1, rep(NodeReport::Kind::kCheckpointed, 0, 1, 10)).ok());
  EXPECT_EQ(s->core().cluster().jobs[0].ckpt, -1);
  upload(*s, *n1, 0, 1, 10, 1);
  ASSERT_TRUE(s->report(*n1, rep(NodeReport::Kind::kCheckpointed, 0, 1, 10)).ok());
  EXPECT_EQ(s->core().cluster().jobs[0].ckpt, 10);
  ASSERT_TRUE(s->report(*n1, rep(NodeReport::Kind::kProgress, 0, 1, 17)).ok());
  EXPECT_EQ(s->core().cluster().jobs[0].progress, 17);

  auto n2 = s->register_node("n2", {"host", 2, 256}, {}, l2);
  ASSERT_TRUE(n2.ok());
  clock_.advance(600);
  ASSERT_TRUE(s->heartbeat(*n2).ok());
  s->tick();
  EXPECT_EQ(s->core().node_state(0), spec::NodeState::kUp);  // 600 ms of silence: not yet
  clock_.advance(600);
  ASSERT_TRUE(s->heartbeat(*n2).ok());
  s->tick();  // n1 silent for 1200 ms: Lost, NodeLoss, FailedOver; the job placed on n2
  EXPECT_EQ(s->core().node_state(0), spec::NodeState::kDown);
  EXPECT_TRUE(l2->saw("launch 0 epoch 2 restore 10 devices 2")) << (l2->log.empty() ? "" : l2->log.back());
  EXPECT_FALSE(s->heartbeat(*n1).ok());  // the lost node's session is over
  // The lost incarnation's late report is refused, and it is told to stop.
  auto stale = s->report(*n2, rep(NodeReport::Kind::kProgress, 0, 1, 30));
  EXPECT_EQ(stale.reason(), "stale epoch 1 for job 0: current epoch is 2");
  EXPECT_TRUE(l2->saw("stop 0 epoch 1"));
  ASSERT_TRUE(s->report(*n2, rep(NodeReport::Kind::kStarted, 0, 2, 10)).ok());
  EXPECT_EQ(s->core().state(0), spec::JobState::kRunning);
  auto m = s->metrics_text();
  EXPECT_NE(m.find("orrery_nodes{state=\"Down\"} 1"), std::string::npos) << m;
  EXPECT_NE(m.find("orrery_reports_rejected_total 1"), std::string::npos) << m;
  EXPECT_NE(m.find("orrery_jobs{state=\"Running\",tier=\"standard\"} 1"), std::string::npos) << m;
  auto committed = s->core().committed();

  // The core restarts from its journal: n2 comes back with the running incarnation (adopted, no
  // new decision), n1 with the stale one (stopped).
  s.reset();
  s = open(false);
  ASSERT_TRUE(s);
  EXPECT_EQ(s->core().committed(), committed);
  EXPECT_EQ(s->core().state(0), spec::JobState::kRunning);
  auto l2b = std::make_shared<RecordingLink>();
  auto n2b = s->register_node("n2", {"host", 2, 256}, {{0, 2}}, l2b);
  ASSERT_TRUE(n2b.ok()) << n2b.reason();
  EXPECT_TRUE(l2b->log.empty());
  EXPECT_EQ(s->core().committed(), committed);
  auto l1b = std::make_shared<RecordingLink>();
  auto n1b = s->register_node("n1", {"host", 2, 256}, {{0, 1}}, l1b);
  ASSERT_TRUE(n1b.ok());
  EXPECT_TRUE(l1b->saw("stop 0 epoch 1"));
  ASSERT_TRUE(s->report(*n2b, rep(NodeReport::Kind::kProgress, 0, 2, 40)).ok());
  ASSERT_TRUE(s->report(*n2b, rep(NodeReport::Kind::kCompleted, 0, 2, 1000)).ok());
  EXPECT_EQ(s->core().state(0), spec::JobState::kCompleted);
  // The spec file kept what the journal does not: the job's steps.
  auto js = s->jobs();
  ASSERT_TRUE(js.ok());
  EXPECT_EQ((*js)[0].steps, 1000);
  EXPECT_EQ((*js)[0].tenant, "vision");  // from the journal's Submit
}

TEST_F(ServiceTest, ACoreRestartedDuringACutCommitsTheStoredCutOrAbortsIt) {
  // A preemption is decided (Checkpointing, durable) and the node takes the cut; the core dies
  // before it hears of it. After the restart the agent, its workers stopped after the cut,
  // registers without them: the cut whole in the store is committed (Suspended); without one the
  // cut is aborted (a new incarnation in place, from the last checkpoint). FIFO: no planner
  // preempts or shrinks on its own here.
  opts_.policy = "fifo";
  auto s = open(true);
  auto l1 = std::make_shared<RecordingLink>();
  auto n1 = s->register_node("n1", {"host", 2, 256}, {}, l1);
  ASSERT_TRUE(n1.ok());
  auto basic = spec();
  basic.tier = spec::Tier::kBasic;
  ASSERT_TRUE(s->submit(basic).ok());
  s->tick();
  ASSERT_TRUE(s->report(*n1, rep(NodeReport::Kind::kStarted, 0, 1, 0)).ok());
  ASSERT_TRUE(s->submit(spec()).ok());  // standard: waits (n2 is down)
  s->tick();
  ASSERT_EQ(s->core().state(1), spec::JobState::kQueued);
  { auto st = s->preempt(0, 1); ASSERT_TRUE(st.ok()) << st.reason(); }
  EXPECT_EQ(s->core().state(0), spec::JobState::kCheckpointing);
  EXPECT_TRUE(l1->saw("checkpoint 0 epoch 1 stop"));
  upload(*s, *n1, 0, 1, 20, 0);
  upload(*s, *n1, 0, 1, 20, 1);
  s.reset();  // before the Checkpointed report

  s = open(false);
  ASSERT_TRUE(s);
  EXPECT_EQ(s->core().state(0), spec::JobState::kCheckpointing);
  auto l2 = std::make_shared<RecordingLink>();
  auto n2 = s->register_node("n2", {"host", 2, 256}, {}, l2);
  ASSERT_TRUE(n2.ok()) << n2.reason();
  auto l1b = std::make_shared<RecordingLink>();
  auto n1b = s->register_node("n1", {"host", 2, 256}, {}, l1b);
  ASSERT_TRUE(n1b.ok()) << n1b.reason();
  EXPECT_EQ(s->core().state(0), spec::JobState::kSuspended);
  EXPECT_EQ(s->core().cluster().jobs[0].ckpt, 20);
  EXPECT_EQ(s->core().cluster().jobs[0].failures, 0);
  s->tick();  // job 0 resumes on n2; n1's devices were reserved for job 1: it takes them
  EXPECT_TRUE(l2->saw("launch 0 epoch 2 restore 20 devices 2"));
  EXPECT_TRUE(l1b->saw("launch 1 epoch 1 restore -1 devices 2"));
  ASSERT_TRUE(s->report(*n1b, rep(NodeReport::Kind::kStarted, 1, 1, 0)).ok());
  ASSERT_TRUE(s->cancel(0).ok());

  // Job 1 is migrated to n2, and the core dies before any shard is stored: when n1 comes back
  // without the workers (stopped at the cut), the migration is aborted, not counted as a failure,
  // and the job restarts where it was, from its last checkpoint (none: from the start).
  ASSERT_TRUE(s->migrate(1, std::string("n2")).ok());
  EXPECT_EQ(s->core().state(1), spec::JobState::kMigrating);
  s.reset();
  s = open(false);
  ASSERT_TRUE(s);
  EXPECT_EQ(s->core().state(1), spec::JobState::kMigrating);
  auto l2c = std::make_shared<RecordingLink>();
  ASSERT_TRUE(s->register_node("n2", {"host", 2, 256}, {}, l2c).ok());
  auto l1c = std::make_shared<RecordingLink>();
  ASSERT_TRUE(s->register_node("n1", {"host", 2, 256}, {}, l1c).ok());
  EXPECT_EQ(s->core().state(1), spec::JobState::kPlaced);
  EXPECT_EQ(s->core().cluster().jobs[1].epoch, 2);
  EXPECT_EQ(s->core().cluster().jobs[1].failures, 0);
  EXPECT_TRUE(l1c->saw("launch 1 epoch 2 restore -1 devices 2")) << (l1c->log.empty() ? "" : l1c->log.back());
}

TEST_F(ServiceTest, ACutThatFailsOrTimesOutIsAbortedAndTheJobRestartsInPlace) {
  opts_.cut_timeout_ms = 500;
  auto s = open(true);
  auto l1 = std::make_shared<RecordingLink>();
  auto n1 = s->register_node("n1", {"host", 2, 256}, {}, l1);
  auto l2 = std::make_shared<RecordingLink>();
  auto n2 = s->register_node("n2", {"host", 2, 256}, {}, l2);
  ASSERT_TRUE(n1.ok() && n2.ok());
  ASSERT_TRUE(s->submit(spec()).ok());
  s->tick();
  ASSERT_TRUE(l1->saw("launch 0 epoch 1 restore -1 devices 2"));
  ASSERT_TRUE(s->report(*n1, rep(NodeReport::Kind::kStarted, 0, 1, 0)).ok());
  upload(*s, *n1, 0, 1, 10, 0);
  upload(*s, *n1, 0, 1, 10, 1);
  ASSERT_TRUE(s->report(*n1, rep(NodeReport::Kind::kCheckpointed, 0, 1, 10)).ok());
  ASSERT_EQ(s->core().cluster().jobs[0].ckpt, 10);

  // The node refuses the migration's cut: Abort (runtime), a new incarnation in place from step 10.
  ASSERT_TRUE(s->migrate(0, std::string("n2")).ok());
  EXPECT_EQ(s->core().state(0), spec::JobState::kMigrating);
  EXPECT_EQ(s->migrate(0, std::string("n2")).code(), StatusCode::kFailedPrecondition);  // busy
  s->command_failed(*n1, 0, 1, "checkpoint refused: no safe point");
  EXPECT_EQ(s->core().state(0), spec::JobState::kPlaced);
  EXPECT_EQ(s->core().cluster().jobs[0].epoch, 2);
  EXPECT_EQ(s->core().cluster().jobs[0].held, (std::vector<std::int32_t>{0, 1}));
  EXPECT_TRUE(l1->saw("launch 0 epoch 2 restore 10 devices 2")) << l1->log.back();
  EXPECT_EQ(s->core().cluster().jobs[0].failures, 0);
  ASSERT_TRUE(s->report(*n1, rep(NodeReport::Kind::kStarted, 0, 2, 10)).ok());
  EXPECT_EQ(s->core().state(0), spec::JobState::kRunning);

  // A cut nobody answers: the core's own timer aborts it after cut_timeout_ms.
  ASSERT_TRUE(s->migrate(0, std::string("n2")).ok());
  clock_.advance(400);
  ASSERT_TRUE(s->heartbeat(*n1).ok() && s->heartbeat(*n2).ok());
  s->tick();
  EXPECT_EQ(s->core().state(0), spec::JobState::kMigrating);
  clock_.advance(200);
  ASSERT_TRUE(s->heartbeat(*n1).ok() && s->heartbeat(*n2).ok());
  s->tick();
  EXPECT_EQ(s->core().state(0), spec::JobState::kPlaced);
  EXPECT_EQ(s->core().cluster().jobs[0].epoch, 3);
  auto logs = s->logs(0, 100);
  ASSERT_TRUE(logs.ok());
  bool timed_out = false;
  for (const auto& l : *logs) timed_out = timed_out || l.find("Migrating -> Placed: Abort job 0 (core timeout)") != std::string::npos;
  EXPECT_TRUE(timed_out);
  EXPECT_NE(s->metrics_text().find("orrery_operations_aborted_total 2"), std::string::npos);
  // The old incarnation's late report is refused (stale epoch).
  EXPECT_EQ(s->report(*n1, rep(NodeReport::Kind::kCheckpointed, 0, 2, 12)).code(),
            StatusCode::kFailedPrecondition);
}

TEST_F(ServiceTest, ThePlannerMovesAJobToAnotherRegionToMakeRoomForAGang) {
  // Two regions of one 4-device node: a gang never spans regions. A (2) on n1, B (3) on n2, C (1)
  // on n2 (best fit); B completes: 2 + 3 devices are free but neither region has 4 for D. Once D
  // has waited as long as moving C costs, the planner migrates C to n1 (Migrating: the devices
  // it chose are reserved for C while the cut is taken; the stored cut carries the move out), and
  // D starts on n2.
  auto f = core::Fleet::parse(
      "region r0\ncluster c\nnode n1 host_mem_mib=4096\ndevices host count=4 mem_mib=256\n"
      "region r1\ncluster c\nnode n2 host_mem_mib=4096\ndevices host count=4 mem_mib=256\n");
  ASSERT_TRUE(f.ok()) << f.reason();
  auto opened = Service::open(opts_, *f, clock_);
  ASSERT_TRUE(opened.ok()) << opened.reason();
  auto s = std::move(*opened);
  auto l1 = std::make_shared<RecordingLink>();
  auto l2 = std::make_shared<RecordingLink>();
  auto n1 = s->register_node("n1", {"host", 4, 256}, {}, l1);
  auto n2 = s->register_node("n2", {"host", 4, 256}, {}, l2);
  ASSERT_TRUE(n1.ok() && n2.ok());
  auto job = [&](std::int64_t world) {
    JobSpec j = spec();
    j.world = j.min_devices = j.max_devices = world;
    auto id = s->submit(j);
    EXPECT_TRUE(id.ok()) << id.reason();
    s->tick();
    return id.ok() ? *id : -1;
  };
  const int a = job(2), b = job(3);
  ASSERT_TRUE(s->report(*n1, rep(NodeReport::Kind::kStarted, a, 1, 0)).ok());
  ASSERT_TRUE(s->report(*n2, rep(NodeReport::Kind::kStarted, b, 1, 0)).ok());
  const int c = job(1);
  ASSERT_TRUE(l2->saw("launch 2 epoch 1 restore -1 devices 1")) << l2->log.back();
  ASSERT_TRUE(s->report(*n2, rep(NodeReport::Kind::kStarted, c, 1, 0)).ok());
  ASSERT_TRUE(s->report(*n2, rep(NodeReport::Kind::kCompleted, b, 1, 1000)).ok());
  ASSERT_EQ(s->core().state(b), spec::JobState::kCompleted);
  const int d = job(4);
  EXPECT_EQ(s->core().state(d), spec::JobState::kQueued);
  EXPECT_FALSE(l2->saw("checkpoint 2 epoch 1 stop"));  // waited 0 s: moving does not pay yet
  clock_.advance(1000);
  s->tick();
  ASSERT_TRUE(l2->saw("checkpoint 2 epoch 1 stop")) << l2->log.back();
  EXPECT_EQ(s->core().state(c), spec::JobState::kMigrating);
  EXPECT_EQ(s->core().cluster().jobs[c].held, (std::vector<std::int32_t>{7}));  // not moved yet
  upload(*s, *n2, c, 1, 7, 0);
  ASSERT_TRUE(s->report(*n2, rep(NodeReport::Kind::kCheckpointed, c, 1, 7)).ok());
  // The stored cut carries the move out: a new incarnation on the planner's devices.
  EXPECT_EQ(s->core().state(c), spec::JobState::kRestoring);
  EXPECT_EQ(s->core().cluster().jobs[c].held, (std::vector<std::int32_t>{2}));
  EXPECT_TRUE(l1->saw("launch 2 epoch 2 restore 7 devices 1")) << l1->log.back();
  s->tick();
  EXPECT_TRUE(l2->saw("launch 3 epoch 1 restore -1 devices 4")) << l2->log.back();
  EXPECT_EQ(s->core().state(d), spec::JobState::kPlaced);
}

TEST_F(ServiceTest, RegistrationIsCheckedAgainstTheFleet) {
  auto s = open(true);
  auto l = std::make_shared<RecordingLink>();
  EXPECT_EQ(s->register_node("n3", {"host", 2, 256}, {}, l).reason(), "unknown node \"n3\" (not in the fleet)");
  EXPECT_EQ(s->register_node("n1", {"H100", 2, 256}, {}, l).reason(),
            "node n1 brings devices of type \"H100\", the fleet configures \"host\"");
  EXPECT_EQ(s->register_node("n1", {"host", 2, 128}, {}, l).reason(),
            "node n1 brings 128 MiB per device, the fleet configures 256");
  EXPECT_EQ(s->core().node_state(0), spec::NodeState::kDown);
  EXPECT_EQ(s->core().committed(), 0u);
}

TEST_F(ServiceTest, AFleetDifferentFromTheJournalsIsRefused) {
  { auto s = open(true); }
  auto other = core::Fleet::parse("region r\ncluster c\nnode n1 host_mem_mib=4096\ndevices host count=8 mem_mib=256\n");
  auto s = Service::open(opts_, *other, clock_);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.reason().find("differs from the fleet recorded"), std::string::npos) << s.reason();
}

// Issue 19: AGE showed 0ms forever for jobs recovered after a core restart (their submission time
// was not taken from the journal). orrery-core serve's clock is wall-clock time (rpc/server.cc), as
// is this test's from its second part on.
TEST_F(ServiceTest, ARecoveredJobKeepsItsAgeAndItsTimelineItsTimes) {
  const std::int64_t t0 = 1'795'000'000'000;  // 2026-11-18T11:06:40Z, a wall-clock time
  core::ManualClock wall(t0);
  {
    auto s = Service::open(opts_, core::Fleet::parse("region r\ncluster c\nnode n1 host_mem_mib=4096\n"
                                                     "devices host count=2 mem_mib=256\n").value(), wall);
    ASSERT_TRUE(s.ok()) << s.reason();
    ASSERT_TRUE((*s)->submit(spec()).ok());
    wall.advance(2000);
    EXPECT_EQ((*s)->jobs()->at(0).age_ms, 2000);
  }
  wall.advance(5 * 60 * 1000);  // the core is down for five minutes
  auto s = Service::open(opts_, std::nullopt, wall);
  ASSERT_TRUE(s.ok()) << s.reason();
  EXPECT_EQ((*s)->jobs()->at(0).age_ms, 2000 + 5 * 60 * 1000);
  std::vector<ClusterEvent> timeline;
  ASSERT_TRUE((*s)->watch(0, [&](const ClusterEvent& e) { timeline.push_back(e); return true; }).ok());
  ASSERT_FALSE(timeline.empty());
  EXPECT_EQ(timeline.front().time_ms, t0);  // the Submit, stamped as it was committed
}

// A journal written while serve's clock was the time since boot (before issue 19): a recovered job's
// age is unknown (-1, shown "-"), not 56 years.
TEST_F(ServiceTest, AJobFromABootRelativeJournalHasNoAge) {
  { auto s = open(true); ASSERT_TRUE(s->submit(spec()).ok()); }  // clock_: 1000 ms after boot
  {
    core::ManualClock wall(1'795'000'000'000);
    auto s = Service::open(opts_, std::nullopt, wall);
    ASSERT_TRUE(s.ok()) << s.reason();
    EXPECT_EQ((*s)->jobs()->at(0).age_ms, -1);
  }
  // Both clocks boot-relative (restarts in this test, with no reboot between): the journal's time
  // is still the base of the age.
  clock_.advance(700);
  auto s = open(false);
  EXPECT_EQ(s->jobs()->at(0).age_ms, 700);
}

// A waiting job's wait counts from when it started waiting, by the journal, not from a restart of
// the core: the overdue bound (PlannerOptions::overdue_cap_ms, 72 h: an overdue job goes before
// every other waiting job, whatever its tier) holds across restarts.
TEST_F(ServiceTest, ARestartedCoreCountsAWaitingJobsWaitFromTheJournal) {
  const std::int64_t hour = 3'600'000;
  auto s = open(true);
  auto n1 = join_n1(*s);
  ASSERT_TRUE(n1.ok()) << n1.reason();
  ASSERT_TRUE(s->submit(spec()).ok());  // job 0, standard: runs on n1's two devices
  s->tick();
  ASSERT_TRUE(s->report(*n1, rep(NodeReport::Kind::kStarted, 0, 1, 0)).ok());
  auto basic = spec();
  basic.tier = spec::Tier::kBasic;
  ASSERT_TRUE(s->submit(basic).ok());  // job 1 waits for them
  s->tick();
  ASSERT_EQ(s->core().state(1), spec::JobState::kQueued);

  // The core is down at 71 h of the wait; a standard job comes after the restart.
  auto n1b = restart_with_n1(s, 71 * hour, 0, 1);
  ASSERT_TRUE(n1b.ok()) << n1b.reason();
  ASSERT_TRUE(s->submit(spec()).ok());  // job 2, standard
  s->tick();
  ASSERT_EQ(s->core().state(2), spec::JobState::kQueued);

  // At 72 h the devices free up: the basic job, overdue by the journal's times, goes first (by its
  // wait since the restart, one hour, the standard job would).
  clock_.advance(hour + 1000);
  ASSERT_TRUE(s->heartbeat(*n1b).ok());
  ASSERT_TRUE(s->report(*n1b, rep(NodeReport::Kind::kCompleted, 0, 1, 1000)).ok());
  s->tick();
  EXPECT_EQ(s->core().state(1), spec::JobState::kPlaced) << s->jobs()->at(1).note;
  EXPECT_EQ(s->core().state(2), spec::JobState::kQueued);
}

// A running job's start counts from its start, by the journal, not from a restart of the core: its
// min_runtime_ms (no eviction within it) ends when it would have without the restart.
TEST_F(ServiceTest, ARestartedCoreCountsARunningJobsProtectionFromItsStart) {
  const std::int64_t minute = 60'000;
  auto s = open(true);
  auto n1 = join_n1(*s);
  ASSERT_TRUE(n1.ok()) << n1.reason();
  auto basic = rigid(spec::Tier::kBasic);
  basic.min_runtime_ms = 120 * minute;
  ASSERT_TRUE(s->submit(basic).ok());  // job 0 runs on n1's two devices
  s->tick();
  ASSERT_TRUE(s->report(*n1, rep(NodeReport::Kind::kStarted, 0, 1, 0)).ok());
  ASSERT_EQ(s->core().state(0), spec::JobState::kRunning);

  auto n1b = restart_with_n1(s, 90 * minute, 0, 1);  // 90 minutes into the run
  ASSERT_TRUE(n1b.ok()) << n1b.reason();
  ASSERT_TRUE(s->submit(rigid(spec::Tier::kPremium)).ok());  // job 1 needs job 0's devices
  s->tick();
  s->tick();
  EXPECT_EQ(s->core().state(0), spec::JobState::kRunning);  // protected: 90 of its 120 minutes

  // 121 minutes after its start (31 after the restart): no longer protected, cut for job 1.
  clock_.advance(31 * minute);
  ASSERT_TRUE(s->heartbeat(*n1b).ok());
  s->tick();
  EXPECT_EQ(s->core().state(0), spec::JobState::kCheckpointing) << s->jobs()->at(1).note;
}

// A job placed overdue keeps its quantum (overdue_quantum_ms, 1 h: no higher tier cuts it) across a
// restart of the core: the journal has the wait before its placement.
TEST_F(ServiceTest, AJobPlacedOverdueKeepsItsQuantumAcrossARestart) {
  const std::int64_t minute = 60'000, hour = 60 * minute;
  auto s = open(true);
  auto n1 = join_n1(*s);
  ASSERT_TRUE(n1.ok()) << n1.reason();
  ASSERT_TRUE(s->submit(rigid(spec::Tier::kStandard)).ok());  // job 0 runs on n1's two devices
  s->tick();
  ASSERT_TRUE(s->report(*n1, rep(NodeReport::Kind::kStarted, 0, 1, 0)).ok());
  ASSERT_TRUE(s->submit(rigid(spec::Tier::kBasic)).ok());  // job 1 waits 72 h for them
  s->tick();
  clock_.advance(72 * hour + 1000);
  ASSERT_TRUE(s->heartbeat(*n1).ok());
  ASSERT_TRUE(s->report(*n1, rep(NodeReport::Kind::kCompleted, 0, 1, 1000)).ok());
  s->tick();
  ASSERT_EQ(s->core().state(1), spec::JobState::kPlaced);
  ASSERT_TRUE(s->report(*n1, rep(NodeReport::Kind::kStarted, 1, 1, 0)).ok());

  auto n1b = restart_with_n1(s, 10 * minute, 1, 1);  // 10 minutes into its run
  ASSERT_TRUE(n1b.ok()) << n1b.reason();
  ASSERT_TRUE(s->submit(rigid(spec::Tier::kPremium)).ok());  // job 2 needs job 1's devices
  s->tick();
  s->tick();
  EXPECT_EQ(s->core().state(1), spec::JobState::kRunning);  // within its quantum

  clock_.advance(23 * hour + 51 * minute);  // 24 h 1 min since it started (the quantum: 24 h)
  ASSERT_TRUE(s->heartbeat(*n1b).ok());
  s->tick();
  EXPECT_EQ(s->core().state(1), spec::JobState::kCheckpointing) << s->jobs()->at(2).note;
}

}  // namespace
}  // namespace orrery::service

namespace orrery::service {
namespace {

// The operator's day in-process (docs/operations.md): a second agent under a live node's name is
// refused and the job is untouched; suspend holds a job until resume releases it; a shrink needs
// no waiting job; a platform fault spends the platform cap, not the job's retries; specs no
// placement could satisfy are refused at submit, naming the limit.
TEST_F(ServiceTest, OperatorActionsFaultAccountingNodeIdentityAndAdmission) {
  auto s = open(true);
  auto l1 = std::make_shared<RecordingLink>();
  auto l2 = std::make_shared<RecordingLink>();
  auto n1 = s->register_node("n1", {"host", 2, 256}, {}, l1);
  auto n2 = s->register_node("n2", {"host", 2, 256}, {}, l2);
  ASSERT_TRUE(n1.ok() && n2.ok());
  auto elastic = spec();
  elastic.min_devices = 1;
  ASSERT_TRUE(s->submit(elastic).ok());
  s->tick();
  ASSERT_EQ(s->core().cluster().jobs[0].devices, 2);
  auto& runs_on = s->core().cluster().jobs[0].held[0] < 2 ? *n1 : *n2;
  ASSERT_TRUE(s->report(runs_on, rep(NodeReport::Kind::kStarted, 0, 1, 0)).ok());
  ASSERT_EQ(s->core().state(0), spec::JobState::kRunning);

  // Node identity: refused while the first agent is alive; its session and the job go on.
  auto dup = s->register_node("n1", {"host", 2, 256}, {}, std::make_shared<RecordingLink>());
  EXPECT_EQ(dup.status().code(), StatusCode::kAlreadyExists);
  EXPECT_NE(dup.reason().find("already registered by a live agent"), std::string::npos) << dup.reason();
  EXPECT_TRUE(s->heartbeat(*n1).ok());
  EXPECT_EQ(s->core().state(0), spec::JobState::kRunning);
  EXPECT_EQ(s->core().cluster().jobs[0].epoch, 1);

  // Suspend for no one: a cut, then Suspended and held; nothing resumes it until resume.
  EXPECT_NE(s->preempt(0, -1).reason().find("orrery suspend 0"), std::string::npos);
  EXPECT_NE(s->resume(0).reason().find("not suspended by an operator"), std::string::npos);
  ASSERT_TRUE(s->suspend(0).ok());
  EXPECT_EQ(s->core().state(0), spec::JobState::kCheckpointing);
  EXPECT_NE(s->suspend(0).reason().find("already suspended"), std::string::npos);
  EXPECT_NE(s->resume(0).reason().find("still taking the cut"), std::string::npos);
  upload(*s, runs_on, 0, 1, 30, 0);
  upload(*s, runs_on, 0, 1, 30, 1);
  ASSERT_TRUE(s->report(runs_on, rep(NodeReport::Kind::kProgress, 0, 1, 30)).ok());
  ASSERT_TRUE(s->report(runs_on, rep(NodeReport::Kind::kCheckpointed, 0, 1, 30)).ok());
  ASSERT_EQ(s->core().state(0), spec::JobState::kSuspended);
  for (int i = 0; i < 3; ++i) {
    clock_.advance(200);
    (void)s->heartbeat(*n1);
    (void)s->heartbeat(*n2);
    s->tick();
  }
  EXPECT_EQ(s->core().state(0), spec::JobState::kSuspended);  // 4 devices free, and it waits
  auto js = s->jobs();
  ASSERT_TRUE(js.ok());
  EXPECT_NE((*js)[0].note.find("held"), std::string::npos) << (*js)[0].note;
  ASSERT_TRUE(s->resume(0).ok());
  s->tick();
  EXPECT_EQ(s->core().state(0), spec::JobState::kRestoring);
  const auto& jv = s->core().cluster().jobs[0];
  auto& now_on = jv.held[0] < 2 ? *n1 : *n2;
  ASSERT_TRUE(s->report(now_on, rep(NodeReport::Kind::kStarted, 0, 2, 30)).ok());
  ASSERT_EQ(s->core().state(0), spec::JobState::kRunning);

  // A shrink on demand, for no one (no job waits).
  auto shrink = s->resize(0, 1, -1);
  ASSERT_TRUE(shrink.ok()) << shrink.reason();
  EXPECT_EQ(s->core().state(0), spec::JobState::kResizing);
  EXPECT_EQ(s->core().cluster().jobs[0].ben, -1);
  ASSERT_TRUE(s->cancel(0).ok());

  // Fault accounting: a proxy's death (platform) spends the platform cap; the program's own
  // crash spends a retry.
  ASSERT_TRUE(s->submit(spec()).ok());
  s->tick();
  auto& on = s->core().cluster().jobs[1].held[0] < 2 ? *n1 : *n2;
  ASSERT_TRUE(s->report(on, rep(NodeReport::Kind::kStarted, 1, 1, 0)).ok());
  auto proxy = rep(NodeReport::Kind::kCrashed, 1, 1, 5);
  proxy.detail = "the proxy of device 0 killed by signal 9";
  proxy.platform = true;
  ASSERT_TRUE(s->report(on, proxy).ok());
  EXPECT_EQ(s->core().cluster().jobs[1].failures, 0);
  EXPECT_EQ(s->core().cluster().jobs[1].faults, 1);
  s->tick();
  auto& on2 = s->core().cluster().jobs[1].held[0] < 2 ? *n1 : *n2;
  ASSERT_TRUE(s->report(on2, rep(NodeReport::Kind::kStarted, 1, 2, 0)).ok());
  auto own = rep(NodeReport::Kind::kCrashed, 1, 2, 5);
  own.detail = "rank 0 (pid 7) exited with status 7: boom";
  ASSERT_TRUE(s->report(on2, own).ok());
  EXPECT_EQ(s->core().cluster().jobs[1].failures, 1);
  EXPECT_EQ(s->core().cluster().jobs[1].faults, 1);
  js = s->jobs();
  ASSERT_TRUE(js.ok());
  EXPECT_NE((*js)[1].note.find("the job's own failure: retry 1 of 3"), std::string::npos) << (*js)[1].note;

  // Admission: never placeable on this fleet (2 nodes x 2 devices of 256 MiB, no premium
  // reserve) -> refused, naming the limit.
  auto wide = spec();
  wide.world = wide.max_devices = 4096;  // the largest world a job may have
  wide.min_devices = 512;
  EXPECT_NE(s->submit(wide).reason().find("needs at least 512 devices"), std::string::npos)
      << s->submit(wide).reason();
  auto fat = spec();
  fat.mem_mib = 1024;
  EXPECT_NE(s->submit(fat).reason().find("has 1024 MiB for a worker (the largest has 256 MiB)"),
            std::string::npos)
      << s->submit(fat).reason();
  // A premium job on a fleet without a premium reserve is accepted: admitted spare, it runs
  // ahead of the lower tiers without the reserve's guarantee (spec::EffectAdmit).
  auto vip = spec();
  vip.tier = spec::Tier::kPremium;
  EXPECT_TRUE(s->submit(vip).ok()) << s->submit(vip).reason();
  // 8 workers spliced on each of 2 devices (7 swapped out: 1792 MiB of host memory per device)
  // fits: accepted.
  auto spliced = spec();
  spliced.world = 16;
  spliced.min_devices = spliced.max_devices = 2;
  spliced.mem_mib = 256;
  auto ok = s->submit(spliced);
  EXPECT_TRUE(ok.ok()) << ok.reason();
}

}  // namespace
}  // namespace orrery::service
