// lifecycle_parity: one scenario through the real Service (in-process node links that answer like
// agents: launches start, cuts upload every rank's shard, a scripted cut fails, a node falls
// silent) and through the simulator (the same decisions and faults as a script), both driving
// their jobs through core/protocol. The committed sequences, replayed from each one's journal,
// are identical: (job, event, origin, from, to) for every job decision but Progress, whose
// granularity is the runtime's (how often nodes report), not the lifecycle's.
//
// The scenario, on nodes n0 and n1 of two devices and n2 of one (the planner is FIFO, so that
// nothing but the scenario moves a job): A (elastic, 1 or 2 devices) and F fill n0 and n1, B waits;
// A is preempted for B, resumes on n2, B takes A's devices; F is cancelled, A migrates to n1,
// grows to 2 devices, shrinks back to 1 for W, which takes the device A gave up and n2's; W is
// cancelled and A's next cut fails (Abort: a new incarnation in place); n1 is lost (NodeLoss, A
// requeued and placed on n2); A is cancelled.
#include <gtest/gtest.h>

#include <cstdio>
#include <deque>
#include <filesystem>
#include <map>
#include <set>
#include <tuple>

#include "base/crc32c.h"
#include "core/journal.h"
#include "core/scheduler_core.h"
#include "core/service/service.h"
#include "runtime/sim/simulator.h"

namespace orrery {
namespace {

namespace fs = std::filesystem;
using service::NodeReport;
constexpr int kNodes = 3;
using spec::EventKind;
using spec::JobState;
using spec::Origin;

constexpr const char* kFleet =
    "region r\ncluster c\n"
    "node n0 host_mem_mib=4096\ndevices host count=2 mem_mib=256\n"
    "node n1 host_mem_mib=4096\ndevices host count=2 mem_mib=256\n"
    "node n2 host_mem_mib=4096\ndevices host count=1 mem_mib=256\n";

struct Step {
  int job;
  EventKind event;
  Origin origin;
  JobState from, to;
  bool operator==(const Step&) const = default;
};

std::string show(const std::vector<Step>& steps) {
  std::string out;
  for (const auto& s : steps)
    out += "  job " + std::to_string(s.job) + " " + std::string(spec::event_name(s.event)) + " (" +
           std::string(spec::origin_name(s.origin)) + ") " + std::string(spec::state_name(s.from)) +
           " -> " + std::string(spec::state_name(s.to)) + "\n";
  return out;
}

// The job decisions of a journal, replayed through the core (so the sequence is also one the
// core accepts again from scratch), without Progress.
std::vector<Step> replayed(const std::string& journal) {
  std::vector<Step> out;
  auto contents = core::read_journal(journal);
  EXPECT_TRUE(contents.ok()) << contents.reason();
  if (!contents.ok()) return out;
  core::ManualClock clock;
  auto core = core::SchedulerCore::recover(
      contents->records, clock, nullptr,
      [&](const core::SchedulerCore&, const core::Committed& c, const core::Decision& d) {
        if (d.event != EventKind::kProgress) out.push_back({c.job, d.event, d.origin, c.from, c.to});
      });
  EXPECT_TRUE(core.ok()) << core.reason();
  return out;
}

// Node links that record the commands; the harness answers them as agents would.
struct Command {
  int node;
  enum { kLaunch, kCut, kStop } kind;
  service::LaunchCommand launch;
  int job = -1;
  std::int64_t epoch = 0;
  bool then_stop = false;
};
struct Link final : service::NodeLink {
  Link(int node, std::deque<Command>* q) : node(node), q(q) {}
  void launch(const service::LaunchCommand& c) override { q->push_back({node, Command::kLaunch, c, c.job, c.epoch}); }
  void checkpoint(int job, std::int64_t epoch, std::int64_t, bool then_stop) override {
    q->push_back({node, Command::kCut, {}, job, epoch, then_stop});
  }
  void stop(int job, std::int64_t epoch) override { q->push_back({node, Command::kStop, {}, job, epoch}); }
  int node;
  std::deque<Command>* q;
};

class ServiceSide {
 public:
  explicit ServiceSide(const fs::path& dir) {
    opts_.data_dir = dir.string();
    opts_.heartbeat_timeout_ms = 1000;
    opts_.policy = "fifo";
    opts_.journal.fsync = core::FsyncPolicy::kNever;
    auto fleet = core::Fleet::parse(kFleet);
    EXPECT_TRUE(fleet.ok()) << fleet.reason();
    auto s = service::Service::open(opts_, *fleet, clock_);
    EXPECT_TRUE(s.ok()) << s.reason();
    s_ = std::move(*s);
    for (int n = 0; n < kNodes; ++n) {
      links_.push_back(std::make_shared<Link>(n, &q_));
      auto session = s_->register_node("n" + std::to_string(n), {"host", n < 2 ? 2 : 1, 256}, {}, links_.back());
      EXPECT_TRUE(session.ok()) << session.reason();
      sessions_.push_back(*session);
    }
    pump();
  }
  service::Service& s() { return *s_; }
  void submit(const char* name, spec::Tier tier, int min_dev) {
    service::JobSpec spec;
    spec.name = name;
    spec.tier = tier;
    spec.world = 2;
    spec.min_devices = min_dev;
    spec.max_devices = 2;
    spec.mem_mib = 64;
    spec.steps = 1000000;
    spec.command = {"orrery-train-mlp", "--steps=1000000"};  // never run: the nodes are scripted
    auto id = s_->submit(spec);
    EXPECT_TRUE(id.ok()) << id.reason();
    pump();
  }
  void fail_next_cut(int job) { fail_cut_.insert(job); }
  // The node falls silent: the heartbeat monitor loses it.
  void lose_node(int n) {
    silent_.insert(n);
    clock_.advance(opts_.heartbeat_timeout_ms + 1);
    pump();
  }
  // Ticks and answers every command (heartbeats of the live nodes first) until nothing is left.
  void pump() {
    for (int round = 0; round < 50; ++round) {
      for (int n = 0; n < kNodes; ++n)
        if (!silent_.count(n)) (void)s_->heartbeat(sessions_[static_cast<std::size_t>(n)]);
      s_->tick();
      if (q_.empty()) return;
      // The commands sent so far are answered, then the planner runs again (what the answers
      // lead to waits for the next batch), as the simulated runtime answers after a round.
      auto batch = std::move(q_);
      q_.clear();
      for (const auto& c : batch)
        if (!silent_.count(c.node)) answer(c);
    }
    ADD_FAILURE() << "the service did not settle";
  }

 private:
  void answer(const Command& c) {
    const auto& session = sessions_[static_cast<std::size_t>(c.node)];
    if (c.kind == Command::kLaunch) {
      if (c.launch.local.empty()) return;
      for (const auto& share : c.launch.local)
        for (int r : share.ranks) ranks_[{c.job, c.epoch, c.node}].push_back(r);
      EXPECT_TRUE(s_->report(session, rep(NodeReport::Kind::kStarted, c.job, c.epoch, 0)).ok());
    } else if (c.kind == Command::kCut && c.then_stop) {
      if (fail_cut_.erase(c.job)) {
        s_->command_failed(session, c.job, c.epoch, "scripted failure");
        return;
      }
      // This node's ranks' shards (from the launch it was sent), at the job's cut step.
      auto [it, fresh] = cut_step_.try_emplace({c.job, c.epoch}, s_->core().cluster().jobs[c.job].progress + 5);
      (void)fresh;
      const auto step = it->second;
      for (int rank : ranks_[{c.job, c.epoch, c.node}]) {
        std::string bytes = "job " + std::to_string(c.job) + " rank " + std::to_string(rank);
        auto up = s_->upload_shard(session, c.job, c.epoch, step, rank, bytes.size(), crc32c(bytes));
        ASSERT_TRUE(up.ok()) << up.reason();
        ASSERT_TRUE((*up)->write(bytes).ok());
        ASSERT_TRUE((*up)->finish().ok());
      }
      EXPECT_TRUE(s_->report(session, rep(NodeReport::Kind::kCheckpointed, c.job, c.epoch, step)).ok());
    }
  }
  static NodeReport rep(NodeReport::Kind k, int job, std::int64_t epoch, std::int64_t step) {
    NodeReport r;
    r.kind = k;
    r.job = job;
    r.epoch = epoch;
    r.step = step;
    return r;
  }
  service::ServiceOptions opts_;
  core::ManualClock clock_{1000};
  std::unique_ptr<service::Service> s_;
  std::deque<Command> q_;
  std::vector<std::shared_ptr<Link>> links_;
  std::vector<service::NodeSession> sessions_;
  std::set<int> fail_cut_;
  std::set<int> silent_;
  std::map<std::tuple<int, std::int64_t, int>, std::vector<int>> ranks_;  // (job, epoch, node)
  std::map<std::pair<int, std::int64_t>, std::int64_t> cut_step_;
};

core::Decision op(EventKind e, int job) {
  core::Decision d;
  d.event = e;
  d.origin = Origin::kOperator;
  d.job = job;
  return d;
}

TEST(LifecycleParity, ServiceAndSimulatorCommitTheSameSequence) {
  const auto dir = fs::path(std::getenv("TMPDIR") ? std::getenv("TMPDIR") : "/tmp") /
                   ("orrery-parity-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  // Jobs, by submission (the same ids on both sides): 0 A basic [1,2]; 1 F basic; 2 B standard;
  // 3 W standard.
  ServiceSide svc(dir / "core");
  auto& s = svc.s();
  svc.submit("A", spec::Tier::kBasic, 1);
  svc.submit("F", spec::Tier::kBasic, 2);
  ASSERT_EQ(s.core().state(0), JobState::kRunning);
  ASSERT_EQ(s.core().state(1), JobState::kRunning);
  const auto a_first = s.core().cluster().jobs[0].held;
  ASSERT_EQ(a_first.size(), 2u);
  svc.submit("B", spec::Tier::kStandard, 2);  // waits: one device is free
  ASSERT_EQ(s.core().state(2), JobState::kQueued);
  ASSERT_TRUE(s.preempt(0, 2).ok());
  svc.pump();
  ASSERT_EQ(s.core().state(0), JobState::kRunning);  // resumed on n2, spliced
  ASSERT_EQ(s.core().cluster().jobs[0].held, std::vector<std::int32_t>{4});
  ASSERT_EQ(s.core().state(2), JobState::kRunning);  // on A's devices, reserved for it
  ASSERT_TRUE(s.cancel(1).ok());
  svc.pump();
  ASSERT_TRUE(s.migrate(0, std::string("n1")).ok());
  svc.pump();
  ASSERT_EQ(s.core().state(0), JobState::kRunning);
  ASSERT_EQ(s.core().cluster().jobs[0].held, std::vector<std::int32_t>{2});
  ASSERT_TRUE(s.resize(0, 2, -1).ok());
  svc.pump();
  ASSERT_EQ(s.core().cluster().jobs[0].devices, 2);
  const auto a_grown = s.core().cluster().jobs[0].held;
  svc.submit("W", spec::Tier::kStandard, 2);  // waits: one device is free
  ASSERT_EQ(s.core().state(3), JobState::kQueued);
  ASSERT_TRUE(s.resize(0, 1, 3).ok());
  svc.pump();
  ASSERT_EQ(s.core().cluster().jobs[0].devices, 1);
  ASSERT_EQ(s.core().state(3), JobState::kRunning);
  const auto a_shrunk = s.core().cluster().jobs[0].held;
  ASSERT_TRUE(s.cancel(3).ok());
  svc.pump();
  svc.fail_next_cut(0);
  ASSERT_TRUE(s.migrate(0, std::string("n2")).ok());
  svc.pump();
  ASSERT_EQ(s.core().state(0), JobState::kRunning);
  ASSERT_EQ(s.core().cluster().jobs[0].held, a_shrunk);  // the move aborted: still there
  svc.lose_node(1);
  ASSERT_EQ(s.core().state(0), JobState::kRunning);
  ASSERT_EQ(s.core().cluster().jobs[0].failures, 0);  // a platform fault: not the job's own
  ASSERT_EQ(s.core().cluster().jobs[0].faults, 1);
  ASSERT_EQ(s.core().cluster().jobs[0].held, std::vector<std::int32_t>{4});
  ASSERT_TRUE(s.cancel(0).ok());
  ASSERT_TRUE(s.cancel(2).ok());
  svc.pump();
  const auto service_steps = replayed((dir / "core" / "journal").string());

  // The same scenario as the simulator's script: arrivals for submissions, scripted decisions
  // (with the devices the service chose), a failed cut, a lost node.
  sim::Workload w;
  auto job = [](double at, spec::Tier tier, int min_dev) {
    sim::SimJob j;
    j.arrival_s = at;
    j.duration_s = 1e7;
    j.mem_mib = 64;
    j.world = 2;
    j.min_devices = min_dev;
    j.max_devices = 2;
    j.tier = tier;
    return j;
  };
  w.jobs = {job(0, spec::Tier::kBasic, 1), job(1, spec::Tier::kBasic, 2), job(10, spec::Tier::kStandard, 2),
            job(100, spec::Tier::kStandard, 2)};
  sim::SimOptions o;
  o.cost.checkpoint_every_s = 0;
  o.cost.repair_s = 1e9;
  // The runtime answers at once, in the order it was asked (as the service's harness does): the
  // interleaving of different jobs' answers is then the same on both sides.
  o.cost.checkpoint_gbps = o.cost.restore_gbps = o.cost.network_gbps = 1e12;
  o.round_s = 1;
  o.journal_path = (dir / "sim.journal").string();
  auto preempt = op(EventKind::kPreempt, 0);
  preempt.beneficiary = 2;
  auto move = [&](EventKind e, std::vector<std::int64_t> devices, int beneficiary = -1) {
    auto d = op(e, 0);
    d.splice = 2 / static_cast<std::int64_t>(devices.size());
    d.devices = std::move(devices);
    d.beneficiary = beneficiary;
    return d;
  };
  using K = sim::ScriptStep::Kind;
  o.script = {
      {20, K::kDecide, preempt},
      {40, K::kDecide, op(EventKind::kCancel, 1)},
      {60, K::kDecide, move(EventKind::kMigrate, {2})},
      {80, K::kDecide, move(EventKind::kResizeUp, {a_grown.begin(), a_grown.end()})},
      {110, K::kDecide, move(EventKind::kResizeDown, {a_shrunk.begin(), a_shrunk.end()}, 3)},
      {140, K::kDecide, op(EventKind::kCancel, 3)},
      {160, K::kFailNextCut, {}, 0},
      {160, K::kDecide, move(EventKind::kMigrate, {4})},
      {200, K::kLoseNode, {}, -1, 1},
      {300, K::kDecide, op(EventKind::kCancel, 0)},
      {300, K::kDecide, op(EventKind::kCancel, 2)},
  };
  auto fleet = core::Fleet::parse(kFleet);
  ASSERT_TRUE(fleet.ok());
  auto r = sim::simulate(*fleet, w, "fifo", o);
  // The jobs never end by themselves here: the simulation stops when nothing is left to happen,
  // which is fine for what is compared.
  ASSERT_TRUE(r.ok()) << r.reason();
  const auto sim_steps = replayed(o.journal_path);

  ASSERT_FALSE(service_steps.empty());
  EXPECT_TRUE(service_steps == sim_steps) << "orrery-core:\n" << show(service_steps) << "orrery-sim:\n" << show(sim_steps);
  // What the scenario is about, on both sides.
  std::set<std::pair<EventKind, JobState>> seen;
  for (const auto& st : sim_steps) seen.insert({st.event, st.from});
  for (auto [e, from] : {std::pair{EventKind::kPlace, JobState::kQueued},
                         {EventKind::kStart, JobState::kPlaced},
                         {EventKind::kPreempt, JobState::kRunning},
                         {EventKind::kMigrate, JobState::kRunning},
                         {EventKind::kCheckpointDone, JobState::kCheckpointing},
                         {EventKind::kResume, JobState::kSuspended},
                         {EventKind::kCheckpointDone, JobState::kMigrating},
                         {EventKind::kCheckpointDone, JobState::kResizing},
                         {EventKind::kResizeDown, JobState::kRunning},
                         {EventKind::kResizeUp, JobState::kRunning},
                         {EventKind::kAbort, JobState::kMigrating},
                         {EventKind::kNodeLoss, JobState::kRunning},
                         {EventKind::kRestoreDone, JobState::kRestoring},
                         {EventKind::kCancel, JobState::kRunning}})
    EXPECT_TRUE(seen.count({e, from})) << spec::event_name(e) << " from " << spec::state_name(from)
                                       << "\n" << show(sim_steps);
  std::printf("lifecycle_parity: %zu committed job decisions (Progress aside), identical in orrery-core "
              "and orrery-sim:\n%s",
              sim_steps.size(), show(sim_steps).c_str());
  fs::remove_all(dir);
}

}  // namespace
}  // namespace orrery
