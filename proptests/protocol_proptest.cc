// Property test of the one protocol (core/protocol/protocol.h): random interleavings of planner
// rounds, operator decisions, node answers, lost, duplicated and late reports, clock ticks, journal
// syncs, agent reconnects and crashes, and core restarts, through the real SchedulerCore with a real
// group-commit journal (FsyncPolicy::kGroup: durable_seq() lags committed() until a group is written
// or sync() runs) in a temp dir, a real planner ("orrery" or "fifo") and simulated node agents.
//
// The harness plays everything around the protocol, as orrery-core's Service does:
//   - the core and the protocol, a Driver committing the planner's, the operator's and the
//     protocol's own decisions; after every step the protocol's proposals are settled and its
//     commands taken with take_commands(core.durable_seq()) -- never more -- and put in the inbox
//     of their node (each agent reads its inbox in order, when a "deliver" step says so);
//   - three agents of two devices each. An agent runs at most one epoch of a job (a launch of a
//     newer epoch stops the older one there; a launch older than the newest epoch it saw is
//     refused); a stop ends that incarnation; a cut stores the node's shard (then_stop: and stops
//     it), or fails (the workers go on, or, sometimes, stop anyway); the cut is stored (CutStored,
//     node -1) once every node the incarnation was launched on stored its shard. Steps of work send
//     Progress; jobs complete (Completed from every node) or crash on a node (Crashed). Every
//     report goes into one network that delivers any report next (late, out of order, after a
//     newer epoch), loses some and duplicates some. An agent may reconnect (node_registered with
//     what it runs) or crash (it loses its incarnations and its inbox, and registers empty later);
//     a reconnecting agent has carried out the commands of its old connection before, or lost
//     them with it: none arrives after it registered;
//   - a core restart: the process dies, the journal keeps the groups written so far (the durable
//     prefix) and sometimes a torn piece or whole records of the group being written; a new core
//     is rebuilt by SchedulerCore::recover from what JournalWriter::open and read_journal find, the
//     protocol by Protocol::recover(now), the planner by job_recovered on every job (with when it
//     entered its state, by the journal: core/policy/entered_times.h), and every agent
//     that is up reconnects (as above) and registers again with what it runs. Reports in the
//     network survive the restart.
//
// The properties, each checked where it is stated and able to fail (each was seen to fail with a
// bug planted in a scratch copy of the protocol: see the commit that added this test):
//
// P1 (durability) No command goes out for a decision that is not durable. Every command that
//    take_commands(d) returns has after_seq <= d, and what it carries out is in the journal's first
//    d decisions ("the durable view": the job's state, epoch and nodes after its last decision with
//    seq <= d, mirrored from the commits the harness saw): a launch's epoch was created by a
//    decision with seq <= d; a cut with then_stop is for an epoch that entered a cutting state by
//    a decision with seq <= d; a periodic cut is for a durable epoch; a stop is for an incarnation
//    that is not, in the durable view, the job's current one on that node (epoch, holding state,
//    node). And across restarts: the recovered core knows every epoch that was launched, no
//    incarnation that took a then_stop cut is Running again at that epoch, and no stopped
//    incarnation is current again on its node.
//
// P2 (one incarnation) At most one live incarnation per job on the nodes. An incarnation (J, E) is
//    live on node n while n's agent runs it. It is *fenced* on n while a command that ends it is on
//    its way to n (taken from the protocol, in n's inbox, not yet carried out; a command lost with
//    an agent's connection fences nothing): a stop of (J, E) or a launch of (J, E') with E' > E.
//    After every step (once every command whose decision is durable has been taken), for every
//    live, unfenced (J, E) on n: E is J's epoch in the durable view, J is in a holding state there
//    and n is one of its nodes there. Hence no two different epochs of one job are both live and
//    unfenced (also checked directly). The durable view, not the core's memory, is the reference:
//    a newer epoch whose decision is not durable yet must not be acted on, so the old incarnation
//    legitimately runs unfenced until it is.
//
// P3 (timeouts) Every in-flight operation ends, done or aborted, within its timeout: a job in
//    Placed or Restoring (launch_ms) or Checkpointing, Migrating or Resizing (cut_ms) leaves that
//    state (or takes a new epoch in another in-flight state) at the first tick after its timeout
//    has passed since it entered the state or the core restarted. Checked after every tick (ticks
//    come at most kMaxAdvanceMs apart), and every case ends with ticks past every timeout.
//
// P4 (replay) At the end of every case the whole journal (every restart's recovered prefix and
//    what followed) replays through the checker (checker/replay.h) with no violation.
//
// The summary printed at the end counts what the cases exercised (restarts, lost and stale
// reports, timeout aborts, Migrating/Resizing, commands held back for durability, fenced
// incarnations still running ...), so that the properties are not vacuous.
//
// ORRERY_PROTOCOL_CASES sets the number of cases (default 10000, about 7 s on the 2-core build
// machines; the rarest planted bug, a move that leaves its old node running, took about 900 cases
// to show); RC_PARAMS is passed on to RapidCheck (e.g. RC_PARAMS="seed=42", or "reproduce=...").
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <climits>
#include <cstdlib>
#include <deque>
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "checker/replay.h"
#include "core/clock.h"
#include "core/decision.h"
#include "core/fleet.h"
#include "core/journal.h"
#include "core/node_bootstrap.h"
#include "core/policy/entered_times.h"
#include "core/policy/planner.h"
#include "core/protocol/driver.h"
#include "core/protocol/protocol.h"
#include "core/scheduler_core.h"
#include "proptests/generators.h"
#include "tests/temp_dir.h"

namespace orrery::proptest {
namespace {

using protocol::Command;
using protocol::Report;
using spec::EventKind;
using spec::JobState;
using spec::Origin;

constexpr int kNodes = 3;
constexpr std::int64_t kLaunchMs = 1000;
constexpr std::int64_t kCutMs = 600;
constexpr std::int64_t kProgressEveryMs = 50;
constexpr std::int64_t kMaxAdvanceMs = 400;  // a tick comes at most this long after the last one

constexpr const char* kFleet =
    "premium_reserve 2\n"
    "region r\ncluster c\n"
    "node n0 host_mem_mib=8192\ndevices gpu count=2 mem_mib=1024\n"
    "node n1 host_mem_mib=8192\ndevices gpu count=2 mem_mib=1024\n"
    "node n2 host_mem_mib=8192\ndevices gpu count=2 mem_mib=1024\n";

bool holding(JobState s) { return spec::holding_state(spec::Concrete{}, static_cast<std::int64_t>(s)); }
bool launching(JobState s) { return s == JobState::kPlaced || s == JobState::kRestoring; }
bool cutting(JobState s) {
  return s == JobState::kCheckpointing || s == JobState::kMigrating || s == JobState::kResizing;
}
bool in_flight(JobState s) { return launching(s) || cutting(s); }
bool terminal(JobState s) {
  return s == JobState::kCompleted || s == JobState::kFailed || s == JobState::kCancelled;
}
bool waiting(JobState s) { return s == JobState::kQueued || s == JobState::kSuspended; }

// ---- Actions ------------------------------------------------------------------------------------

enum class Act {
  kSubmit,     // an operator submits a job
  kPlan,       // a planner round
  kOperator,   // an operator decides: preempt, migrate, resize up or down, cancel
  kDeliver,    // an agent reads commands from its inbox and carries them out
  kReport,     // the network delivers one report (any of them: late, out of order)
  kLose,       // the network loses one report
  kDuplicate,  // the network delivers one report and keeps a copy
  kWork,       // an incarnation makes steps (Progress from each of its nodes)
  kComplete,   // an incarnation's workers finish (Completed from each of its nodes)
  kCrash,      // a node's share of an incarnation dies (Crashed)
  kTick,       // the clock advances; the protocol's timers run
  kSync,       // the journal is synced
  kRestart,    // the core crashes and restarts from its journal
  kAgent,      // an agent reconnects with what it runs, crashes, or comes back empty
  kPeriodic,   // a periodic cut is asked of a job
  kQuiet,      // a quiet spell: the journal synced, every command carried out, every report
               // delivered in order, a few times over (so that operations can run to their end)
};
constexpr int kNumActs = 16;
const char* act_name(Act a) {
  static constexpr const char* names[kNumActs] = {
      "submit", "plan", "operator", "deliver", "report", "lose", "duplicate", "work",
      "complete", "crash", "tick", "sync", "restart", "agent", "periodic", "quiet"};
  return names[static_cast<int>(a)];
}

struct Action {
  Act act = Act::kTick;
  int a = 0, b = 0, c = 0;  // choices, taken modulo whatever there is to choose from
};

void showValue(const Action& x, std::ostream& os) {
  os << act_name(x.act) << "(" << x.a << "," << x.b << "," << x.c << ")";
}

rc::Gen<Action> gen_action() {
  return rc::gen::apply(
      [](Act act, int a, int b, int c) { return Action{act, a, b, c}; },
      rc::gen::weightedElement<Act>({{5, Act::kSubmit},
                                     {10, Act::kPlan},
                                     {6, Act::kOperator},
                                     {22, Act::kDeliver},
                                     {22, Act::kReport},
                                     {3, Act::kLose},
                                     {3, Act::kDuplicate},
                                     {8, Act::kWork},
                                     {2, Act::kComplete},
                                     {2, Act::kCrash},
                                     {10, Act::kTick},
                                     {6, Act::kSync},
                                     {2, Act::kRestart},
                                     {2, Act::kAgent},
                                     {3, Act::kPeriodic},
                                     {4, Act::kQuiet}}),
      rc::gen::inRange(0, 1 << 20), rc::gen::inRange(0, 1 << 20), rc::gen::inRange(0, 1 << 20));
}

// ---- Statistics over the whole run -------------------------------------------------------------

struct Stats {
  std::uint64_t cases = 0, actions = 0;
  std::map<std::string, std::uint64_t> cases_with;  // cases in which something happened >= once
  std::map<std::string, std::uint64_t> count;       // how often it happened in all
  std::array<std::array<std::uint64_t, spec::kNumOrigins>, spec::kNumEventKinds> committed{};
  std::array<std::uint64_t, spec::kNumJobStates> entered{};
  std::uint64_t replayed_decisions = 0;
  double max_inflight_age_ratio = 0;  // the longest in-flight age seen at a tick / its timeout
};
Stats g_stats;

// ---- The harness -------------------------------------------------------------------------------

// A job decision as committed: the durable view of a job at seq d is its last entry with seq <= d.
struct Entry {
  std::uint64_t seq = 0;
  EventKind event{};
  Origin origin{};
  JobState from{}, to{};
  std::int64_t epoch = 0;
  std::vector<int> nodes;  // the nodes of the devices it holds after the decision
};

struct Agent {
  bool up = true;
  std::map<int, std::int64_t> running;  // job -> the epoch this agent runs (at most one)
  std::map<int, std::int64_t> seen;     // job -> the newest epoch launched or stopped here
  std::deque<Command> inbox;
};

// An incarnation as the agents run it.
struct Incarnation {
  std::set<int> nodes;  // where it was launched
  std::int64_t step = 0;
  struct Cut {
    std::set<int> stored;  // nodes whose shard of the cut is stored
    std::int64_t step = -1;
  };
  Cut final_cut, periodic_cut;  // then_stop, and not
};

// A fresh directory for one case's journal, removed with it: under /dev/shm where there is one (the
// journal's fdatasync is what makes a group durable on a disk, but crashes here are simulated by
// cutting the file back to its durable prefix, so they would only cost time), else under /tmp.
class ScratchDir {
 public:
  ScratchDir() {
    std::string tmpl = (::access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp") + std::string("/orrery_protocol.XXXXXX");
    if (::mkdtemp(tmpl.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    path_ = tmpl;
  }
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

class Harness final : public core::policy::PlanContext, public protocol::CommitListener {
 public:
  Harness(const std::string& planner, std::size_t group) : planner_name_(planner), group_(group) {
    path_ = dir_.file("journal");
    auto fleet = core::Fleet::parse(kFleet);
    if (!fleet) throw std::runtime_error("fleet: " + fleet.reason());
    auto j = core::JournalWriter::open(path_, {core::FsyncPolicy::kGroup, group_});
    if (!j) throw std::runtime_error("journal: " + j.reason());
    journal_ = std::move(*j);
    auto c = core::SchedulerCore::create(std::move(*fleet), clock_, journal_.get());
    if (!c) throw std::runtime_error("core: " + c.reason());
    core_ = std::move(*c);
    if (auto st = core::bring_up_all_nodes(*core_); !st) throw std::runtime_error("nodes: " + st.reason());
    start_protocol();
    agents_.resize(kNodes);
  }

  void run(const Action& x) {
    ++g_stats.actions;
    std::ostringstream os;
    showValue(x, os);
    trace("-- " + os.str() + " @" + std::to_string(now()));
    switch (x.act) {
      case Act::kSubmit: submit(x); break;
      case Act::kPlan: planner_->plan(*core_, *this); break;
      case Act::kOperator: operate(x); break;
      case Act::kDeliver:
        deliver_commands(x.a % kNodes, x.b % 4 == 0 ? SIZE_MAX : static_cast<std::size_t>(1 + x.b % 3), x.c, true);
        break;
      case Act::kReport: deliver_report(x.a, /*keep=*/false); break;
      case Act::kLose: lose_report(x.a); break;
      case Act::kDuplicate: deliver_report(x.a, /*keep=*/true); break;
      case Act::kWork: work(x); break;
      case Act::kComplete: complete(x); break;
      case Act::kCrash: crash(x); break;
      case Act::kTick:  // mostly short, so that operations get the time to end; pumps and checks itself
        tick(x.b % 4 == 0 ? 1 + x.a % kMaxAdvanceMs : 1 + x.a % (kMaxAdvanceMs / 8));
        return;
      case Act::kSync: sync(); break;
      case Act::kRestart: restart(x); return;
      case Act::kAgent: agent(x); break;
      case Act::kPeriodic:
        if (core_->num_jobs() > 0) proto_->request_checkpoint(x.a % core_->num_jobs(), now());
        break;
      case Act::kQuiet:
        quiet(1 + x.a % 3, x.c);
        return;
    }
    pump();
  }

  // The end of a case: every command delivered and every report answered for a while, ticks past
  // every timeout (P3 checked at each), then the journal through the checker (P4).
  void finish() {
    trace("-- finish");
    quiet(6, 0xffffff);
    // Without planner rounds an operation ends in at most two in-flight states (a cut aborted by
    // timeout restarts in place, Placed, whose launch may time out too).
    for (int i = 0; i < 2 + static_cast<int>((kLaunchMs + kCutMs) / kMaxAdvanceMs); ++i) tick(kMaxAdvanceMs);
    for (int j = 0; j < core_->num_jobs(); ++j)
      if (in_flight(core_->state(j))) fail("P3", "job " + std::to_string(j) + " still in flight at the end");
    if (auto st = core_->sync(); !st) fail("journal", "sync: " + st.reason());
    auto r = checker::replay_journal(path_);
    if (!r.ok || !r.violations.empty()) {
      std::string v;
      for (const auto& s : r.violations) v += "\n  " + s;
      fail("P4", "the journal does not replay clean: " + r.error + v);
    }
    if (r.records != core_->committed() + 1)
      fail("P4", "replay read " + std::to_string(r.records) + " records, the core committed " +
                     std::to_string(core_->committed()));
    g_stats.replayed_decisions += r.decisions;
    ++g_stats.cases;
    for (const auto& k : happened_) ++g_stats.cases_with[k];
  }

  // --- PlanContext: the planner's proposals, committed like the Service's PlanLink does --------
  bool propose(const core::Decision& d) override {
    if (!proto_->may_commit(d)) return false;
    return driver_->commit(d, now()).ok();
  }
  bool cut_pending(int job) const override { return proto_->busy(job); }

  // --- CommitListener ----------------------------------------------------------------------
  void committed(const core::Committed& c, const core::Decision& d) override {
    record(c, d, *core_);
    planner_->job_changed(*core_, c.job);
    ++g_stats.committed[static_cast<std::size_t>(d.event)][static_cast<std::size_t>(d.origin)];
    if (c.from != c.to) ++g_stats.entered[static_cast<std::size_t>(c.to)];
    if (in_flight(c.to) && c.from != c.to) since_[c.job] = now();
    if (!c.durable) note("decision committed before it is durable");
    if (d.event == EventKind::kAbort)
      note(d.origin == Origin::kCore ? "Abort by timeout (origin core)" : "Abort by the runtime");
    if (c.to == JobState::kMigrating && c.from != c.to) note("Migrating entered");
    if (c.to == JobState::kResizing && c.from != c.to) note("Resizing entered");
    if (c.to == JobState::kCheckpointing && c.from != c.to) note("Checkpointing entered");
    if (c.to == JobState::kRestoring && c.from != c.to) note("Restoring entered");
    if (d.event == EventKind::kComplete) note("Complete committed");
    if (d.event == EventKind::kWorkerCrash) note("WorkerCrash committed");
    if (d.event == EventKind::kCheckpointDone) note("CheckpointDone committed");
    trace("   commit #" + std::to_string(c.seq) + (c.durable ? "" : " (not durable)") + " job " +
          std::to_string(c.job) + " " + std::string(spec::event_name(d.event)) + " (" +
          std::string(spec::origin_name(d.origin)) + ") " + std::string(spec::state_name(c.from)) + " -> " +
          std::string(spec::state_name(c.to)) + " epoch " + std::to_string(core_->cluster().jobs[c.job].epoch));
  }
  void refused(const core::Decision& d, const Status& why) override {
    trace("   refused " + d.describe() + " (" + std::string(spec::origin_name(d.origin)) + "): " + why.reason());
    if (d.origin == Origin::kOperator) note("operator decision refused");
    else if (d.origin != Origin::kPlanner) note("protocol proposal refused: " + std::string(spec::event_name(d.event)));
  }

 private:
  std::int64_t now() const { return clock_.now_ms(); }

  void trace(std::string line) {
    trace_.push_back(std::move(line));
    if (trace_.size() > 400) trace_.erase(trace_.begin(), trace_.begin() + 100);
  }
  void note(const std::string& what) {
    happened_.insert(what);
    ++g_stats.count[what];
  }
  [[noreturn]] void fail(const std::string& property, const std::string& what) {
    std::string t;
    const std::size_t from = trace_.size() > 150 ? trace_.size() - 150 : 0;
    for (std::size_t i = from; i < trace_.size(); ++i) t += trace_[i] + "\n";
    RC_FAIL(property + " violated: " + what + "\n" + describe() + "last steps:\n" + t);
  }

  std::string describe() const {
    std::ostringstream o;
    if (!core_) return "core: none (restarting)\n";
    o << "core: committed " << core_->committed() << ", durable " << core_->durable_seq() << "\n";
    for (int j = 0; j < core_->num_jobs(); ++j) {
      const auto& jv = core_->cluster().jobs[j];
      o << "  job " << j << " " << spec::state_name(core_->state(j)) << " epoch " << jv.epoch << " devices";
      for (auto dev : jv.held) o << " " << dev;
      o << " progress " << jv.progress << " ckpt " << jv.ckpt;
      if (const Entry* e = durable_view(j, core_->durable_seq()))
        o << "; durable: " << spec::state_name(e->to) << " epoch " << e->epoch;
      o << "\n";
    }
    for (int n = 0; n < kNodes; ++n) {
      const auto& a = agents_[static_cast<std::size_t>(n)];
      o << "  agent n" << n << (a.up ? "" : " (down)") << " runs";
      for (auto [job, epoch] : a.running) o << " " << job << "@" << epoch << (fenced(job, epoch, n) ? "(fenced)" : "");
      o << "; inbox " << a.inbox.size() << "\n";
    }
    o << "  network: " << net_.size() << " reports\n";
    return o.str();
  }

  void start_protocol() {
    protocol::Timeouts t;
    t.launch_ms = kLaunchMs;
    t.cut_ms = kCutMs;
    t.progress_every_ms = kProgressEveryMs;
    proto_ = std::make_unique<protocol::Protocol>(*core_, t);
    driver_ = std::make_unique<protocol::Driver>(*core_, *proto_, *this);
    planner_ = core::policy::make_planner(planner_name_);
    if (!planner_) throw std::runtime_error("no planner " + planner_name_);
    // After a restart each job with when it entered its state, by the journal (as orrery-core).
    for (int j = 0; j < core_->num_jobs(); ++j) planner_->job_recovered(*core_, j, entered_.since(j), entered_.waited(j));
  }

  static std::vector<int> nodes_of(const core::SchedulerCore& core, int job) {
    std::set<int> s;
    for (auto dev : core.cluster().jobs[job].held) s.insert(core.fleet().device_node(dev));
    return {s.begin(), s.end()};
  }

  void record(const core::Committed& c, const core::Decision& d, const core::SchedulerCore& core) {
    Entry e;
    e.seq = c.seq;
    e.event = d.event;
    e.origin = d.origin;
    e.from = c.from;
    e.to = c.to;
    e.epoch = core.cluster().jobs[c.job].epoch;
    e.nodes = nodes_of(core, c.job);
    auto& v = log_[c.job];
    if (!v.empty() && v.back().seq >= e.seq) fail("harness", "commit seqs out of order");
    v.push_back(std::move(e));
  }

  const Entry* durable_view(int job, std::uint64_t d) const {
    auto it = log_.find(job);
    if (it == log_.end()) return nullptr;
    const Entry* best = nullptr;
    for (const auto& e : it->second) {
      if (e.seq > d) break;
      best = &e;
    }
    return best;
  }
  // The seq of the decision that created the job's epoch, if any did.
  std::optional<std::uint64_t> epoch_seq(int job, std::int64_t epoch) const {
    auto it = log_.find(job);
    if (it == log_.end()) return std::nullopt;
    for (const auto& e : it->second)
      if (e.epoch == epoch) return e.seq;
    return std::nullopt;
  }

  // A command that ends the incarnation is on its way to the node (sent, not yet carried out):
  // once carried out, the agent no longer runs it (or runs it again because of a later launch,
  // which is judged afresh); a command lost with its connection fences nothing.
  bool fenced(int job, std::int64_t epoch, int node) const {
    for (const auto& c : agents_[static_cast<std::size_t>(node)].inbox)
      if (c.job == job && ((c.kind == Command::Kind::kStop && c.epoch == epoch) ||
                           (c.kind == Command::Kind::kLaunch && c.epoch > epoch)))
        return true;
    return false;
  }

  // ---- The protocol's outputs -----------------------------------------------------------------

  // Settles the protocol's proposals and sends the commands whose decisions are durable; then P2.
  void pump() {
    driver_->settle(now());
    const std::uint64_t d = core_->durable_seq();
    if (d > core_->committed()) fail("journal", "durable_seq() > committed()");
    if (d < core_->committed()) note("commands waited for durability");
    for (auto& c : proto_->take_commands(d)) {
      check_command(c, d);
      trace(std::string("   send ") + protocol::command_kind_name(c.kind) + " n" + std::to_string(c.node) + " job " +
            std::to_string(c.job) + "@" + std::to_string(c.epoch) + (c.then_stop ? " then_stop" : "") +
            " after #" + std::to_string(c.after_seq) + " (durable " + std::to_string(d) + ")");
      ++g_stats.count[std::string("command sent: ") + protocol::command_kind_name(c.kind)];
      if (c.kind == Command::Kind::kLaunch) launched_.insert({c.job, c.epoch});
      if (c.kind == Command::Kind::kCut && c.then_stop) cut_sent_.insert({c.job, c.epoch});
      if (c.kind == Command::Kind::kStop) stopped_sent_.insert({c.job, c.epoch, c.node});
      auto& a = agents_[static_cast<std::size_t>(c.node)];
      if (a.up) a.inbox.push_back(c);  // a crashed agent's connection is gone: lost
    }
    (void)proto_->take_notes();
    check_incarnations();
  }

  // P1, when the command is taken with durable_seq d.
  void check_command(const Command& c, std::uint64_t d) {
    const std::string what = std::string(protocol::command_kind_name(c.kind)) + " of job " + std::to_string(c.job) +
                             " epoch " + std::to_string(c.epoch) + " to n" + std::to_string(c.node);
    if (c.node < 0 || c.node >= kNodes || c.job < 0 || c.job >= core_->num_jobs()) fail("P1", "bad command: " + what);
    if (c.after_seq > d)
      fail("P1", what + " carries out decision #" + std::to_string(c.after_seq) + " but only #" +
                     std::to_string(d) + " is durable");
    switch (c.kind) {
      case Command::Kind::kLaunch: {
        auto s = epoch_seq(c.job, c.epoch);
        if (!s || *s > d)
          fail("P1", what + ": the decision that created the epoch (" + (s ? "#" + std::to_string(*s) : "none") +
                         ") is not durable (durable #" + std::to_string(d) + ")");
        break;
      }
      case Command::Kind::kCut: {
        if (!c.then_stop) {
          auto s = epoch_seq(c.job, c.epoch);
          if (!s || *s > d) fail("P1", what + ": periodic cut of an epoch that is not durable");
          break;
        }
        bool ok = false;
        for (const auto& e : log_[c.job])
          if (e.seq <= d && e.epoch == c.epoch && cutting(e.to) && e.from == JobState::kRunning) ok = true;
        if (!ok) fail("P1", what + ": no durable decision started a cut of that epoch (durable #" + std::to_string(d) + ")");
        break;
      }
      case Command::Kind::kStop: {
        const Entry* v = durable_view(c.job, d);
        if (v && v->epoch == c.epoch && holding(v->to) &&
            std::binary_search(v->nodes.begin(), v->nodes.end(), c.node))
          fail("P1", what + ": in the durable view (#" + std::to_string(d) + ") that is the job's current incarnation (" +
                         std::string(spec::state_name(v->to)) + ") on that node");
        break;
      }
    }
  }

  // P2, after every step.
  void check_incarnations() {
    const std::uint64_t d = core_->durable_seq();
    std::map<int, std::set<std::int64_t>> unfenced, live;
    for (int n = 0; n < kNodes; ++n) {
      const auto& a = agents_[static_cast<std::size_t>(n)];
      for (auto [job, epoch] : a.running) {
        live[job].insert(epoch);
        if (fenced(job, epoch, n)) {
          note("fenced incarnation still running (its stop in flight)");
          continue;
        }
        unfenced[job].insert(epoch);
        const Entry* v = durable_view(job, d);
        if (!v || v->epoch != epoch || !holding(v->to) ||
            !std::binary_search(v->nodes.begin(), v->nodes.end(), n))
          fail("P2", "n" + std::to_string(n) + " runs job " + std::to_string(job) + " epoch " + std::to_string(epoch) +
                         ", not fenced, but the durable view (#" + std::to_string(d) + ") has " +
                         (v ? std::string(spec::state_name(v->to)) + " epoch " + std::to_string(v->epoch) : "no such job"));
      }
    }
    for (const auto& [job, epochs] : unfenced)
      if (epochs.size() > 1) fail("P2", "two unfenced epochs of job " + std::to_string(job) + " are live");
    for (const auto& [job, epochs] : live)
      if (epochs.size() > 1) note("two epochs of a job live at once (the older fenced)");
  }

  // P3, after every tick.
  void check_timeouts() {
    for (int j = 0; j < core_->num_jobs(); ++j) {
      const auto s = core_->state(j);
      if (!in_flight(s)) continue;
      const std::int64_t limit = launching(s) ? kLaunchMs : kCutMs;
      const std::int64_t age = now() - since_[j];
      g_stats.max_inflight_age_ratio =
          std::max(g_stats.max_inflight_age_ratio, static_cast<double>(age) / static_cast<double>(limit));
      if (age > limit)
        fail("P3", "job " + std::to_string(j) + " has been " + std::string(spec::state_name(s)) + " for " +
                       std::to_string(age) + " ms, its timeout is " + std::to_string(limit) + " ms");
    }
  }

  // ---- Steps ------------------------------------------------------------------------------------

  void submit(const Action& x) {
    static constexpr std::array<std::array<int, 3>, 7> shapes{{
        {1, 1, 1}, {2, 1, 2}, {2, 2, 2}, {4, 1, 2}, {4, 2, 4}, {3, 1, 3}, {4, 4, 4}}};
    if (core_->num_jobs() >= 12) return;
    const auto& sh = shapes[static_cast<std::size_t>(x.a) % shapes.size()];
    auto d = core::Decision::submit("j" + std::to_string(core_->num_jobs()), static_cast<spec::Tier>(x.b % 3), "gpu",
                                    sh[0], sh[1], sh[2], 256);
    // All three preemption modes; a signal or requeue job runs one worker per device.
    d.mode = static_cast<spec::Preemption>(x.c % spec::kNumPreemptions);
    if (d.mode != spec::Preemption::kTransparent) d.min_devices = d.max_devices = d.world;
    (void)driver_->commit(d, now());
  }

  std::vector<int> jobs_where(bool (*pred)(JobState)) const {
    std::vector<int> out;
    for (int j = 0; j < core_->num_jobs(); ++j)
      if (pred(core_->state(j))) out.push_back(j);
    return out;
  }
  static bool is_running(JobState s) { return s == JobState::kRunning; }
  static bool is_live(JobState s) { return !terminal(s) && s != JobState::kNew; }

  void operate(const Action& x) {
    const auto running = jobs_where(&is_running);
    const auto waiters = jobs_where(&waiting);
    core::Decision d;
    d.origin = Origin::kOperator;
    const int kind = x.a % 8;  // 0, 1 preempt; 2, 3 migrate; 4 grow; 5, 6 shrink; 7 cancel
    if (kind == 7) {  // cancel
      const auto live = jobs_where(&is_live);
      if (live.empty()) return;
      d.event = EventKind::kCancel;
      d.job = live[static_cast<std::size_t>(x.b) % live.size()];
      (void)driver_->commit(d, now());
      return;
    }
    if (running.empty()) return;
    const int j = running[static_cast<std::size_t>(x.b) % running.size()];
    const auto& jv = core_->cluster().jobs[j];
    d.job = j;
    const int ben = waiters.empty() ? -1 : waiters[static_cast<std::size_t>(x.c) % waiters.size()];
    if (kind <= 1) {
      d.event = EventKind::kPreempt;
      d.beneficiary = ben;
      (void)driver_->commit(d, now());
      return;
    }
    // A target: the free devices (and, growing, the held ones), rotated by c.
    std::vector<std::int64_t> free, held(jv.held.begin(), jv.held.end());
    for (int dev = 0; dev < core_->fleet().num_devices(); ++dev)
      if (core_->cluster().owner[dev] < 0) free.push_back(dev);
    if (!free.empty()) std::rotate(free.begin(), free.begin() + x.c % static_cast<int>(free.size()), free.end());
    std::vector<std::int64_t> counts;
    for (std::int64_t k = jv.min_dev; k <= jv.max_dev; ++k)
      if (jv.world % k == 0) counts.push_back(k);
    auto pick = [&](auto ok) -> std::int64_t {
      std::vector<std::int64_t> fit;
      for (auto n : counts)
        if (ok(n)) fit.push_back(n);
      return fit.empty() ? -1 : fit[static_cast<std::size_t>(x.c / 7) % fit.size()];
    };
    std::int64_t k = -1;
    if (kind == 2) {  // migrate to free devices
      d.event = EventKind::kMigrate;
      k = pick([&](std::int64_t n) { return n >= jv.devices && n <= static_cast<std::int64_t>(free.size()); });
      if (k < 0) return;
      d.devices.assign(free.begin(), free.begin() + k);
    } else if (kind == 4) {  // grow
      d.event = EventKind::kResizeUp;
      k = pick([&](std::int64_t n) { return n > jv.devices && n - jv.devices <= static_cast<std::int64_t>(free.size()); });
      if (k < 0) return;
      d.devices = held;
      d.devices.insert(d.devices.end(), free.begin(), free.begin() + (k - jv.devices));
    } else if (kind == 5 || kind == 6) {  // shrink, for a waiting job
      d.event = EventKind::kResizeDown;
      k = pick([&](std::int64_t n) { return n < jv.devices; });
      if (k < 0) return;
      d.devices.assign(held.begin(), held.begin() + k);
      d.beneficiary = ben;
    } else {  // migrate within (or onto) the free devices and those it holds
      d.event = EventKind::kMigrate;
      std::vector<std::int64_t> pool = free;
      pool.insert(pool.end(), held.begin(), held.end());
      std::rotate(pool.begin(), pool.begin() + x.c % static_cast<int>(pool.size()), pool.end());
      k = pick([&](std::int64_t n) { return n >= jv.devices && n <= static_cast<std::int64_t>(pool.size()); });
      if (k < 0) return;
      d.devices.assign(pool.begin(), pool.begin() + k);
    }
    std::sort(d.devices.begin(), d.devices.end());
    d.splice = jv.world / k;
    (void)driver_->commit(d, now());
  }

  void queue(Report::Kind kind, int job, std::int64_t epoch, int node, std::int64_t step = 0, std::string detail = {}) {
    Report r;
    r.kind = kind;
    r.job = job;
    r.epoch = epoch;
    r.node = node;
    r.step = step;
    r.gpu_ms = kind == Report::Kind::kProgress ? 7 : 0;
    r.detail = std::move(detail);
    net_.push_back(std::move(r));
  }

  // Agent n reads `count` commands from its inbox (or all of them) and carries them out; the bits
  // of `luck` decide how its cuts go (when they may fail at all).
  void deliver_commands(int n, std::size_t count, int luck, bool cuts_may_fail) {
    auto& a = agents_[static_cast<std::size_t>(n)];
    if (!a.up) return;
    for (std::size_t i = 0; i < count && !a.inbox.empty(); ++i) {
      Command c = a.inbox.front();
      a.inbox.pop_front();
      carry_out(n, c, cuts_may_fail ? (luck >> (3 * (i % 9))) & 7 : 7);
    }
  }

  // luck (0..7) for a cut: 0 it fails and the workers go on, 1 it fails and they stop, else it is
  // stored.
  void carry_out(int n, const Command& c, int luck) {
    auto& a = agents_[static_cast<std::size_t>(n)];
    auto run = a.running.find(c.job);
    const bool runs_it = run != a.running.end() && run->second == c.epoch;
    auto seen = a.seen.find(c.job);
    const std::int64_t newest = seen == a.seen.end() ? -1 : seen->second;
    const std::pair<int, std::int64_t> key{c.job, c.epoch};
    switch (c.kind) {
      case Command::Kind::kLaunch:
        if (c.epoch < newest) {  // fenced by epoch: an older launch than one seen here
          note("agent refused a stale launch");
          return;
        }
        a.seen[c.job] = c.epoch;
        if (!runs_it) {
          if (run != a.running.end()) note("launch superseded an older epoch on its node");
          a.running[c.job] = c.epoch;
          auto& inc = incs_[key];
          if (inc.nodes.empty()) inc.step = std::max<std::int64_t>(c.restore_step, 0);
          inc.nodes.insert(n);
        }
        queue(Report::Kind::kStarted, c.job, c.epoch, n);
        return;
      case Command::Kind::kStop:
        a.seen[c.job] = std::max(newest, c.epoch);
        if (runs_it) {
          a.running.erase(run);
          queue(Report::Kind::kStopped, c.job, c.epoch, n);
        }
        return;
      case Command::Kind::kCut: {
        if (!runs_it) {
          queue(Report::Kind::kCutFailed, c.job, c.epoch, n, 0, "not running");
          return;
        }
        if (luck == 0 || luck == 1) {  // the cut fails; the workers go on (0) or stop (1)
          note("cut failed on a node");
          queue(Report::Kind::kCutFailed, c.job, c.epoch, n, 0, "scripted");
          if (luck == 1 && c.then_stop) {
            a.running.erase(run);
            queue(Report::Kind::kStopped, c.job, c.epoch, n);
          }
          return;
        }
        auto& inc = incs_[key];
        auto& cut = c.then_stop ? inc.final_cut : inc.periodic_cut;
        if (cut.step < 0) cut.step = inc.step;
        cut.stored.insert(n);
        if (c.then_stop) {
          a.running.erase(run);
          queue(Report::Kind::kStopped, c.job, c.epoch, n);
        }
        if (std::includes(cut.stored.begin(), cut.stored.end(), inc.nodes.begin(), inc.nodes.end())) {
          queue(Report::Kind::kCutStored, c.job, c.epoch, -1, cut.step);
          cut = Incarnation::Cut{};
        }
        return;
      }
    }
  }

  void deliver_report(int i, bool keep) {
    if (net_.empty()) return;
    const std::size_t k = static_cast<std::size_t>(i) % net_.size();
    Report r = net_[k];
    if (!keep) net_.erase(net_.begin() + static_cast<std::ptrdiff_t>(k));
    if (keep) note("report duplicated");
    if (k != 0) note("report delivered out of order");
    if (r.job < core_->num_jobs() && r.epoch < core_->cluster().jobs[r.job].epoch) note("report of an older epoch delivered");
    auto st = proto_->report(r, now());
    trace(std::string("   report ") + protocol::report_kind_name(r.kind) + " job " + std::to_string(r.job) + "@" +
          std::to_string(r.epoch) + " n" + std::to_string(r.node) + " step " + std::to_string(r.step) +
          (st ? "" : " refused: " + st.reason()));
    if (!st) note("report refused");
  }

  void lose_report(int i) {
    if (net_.empty()) return;
    const std::size_t k = static_cast<std::size_t>(i) % net_.size();
    trace(std::string("   lost ") + protocol::report_kind_name(net_[k].kind) + " job " + std::to_string(net_[k].job) +
          "@" + std::to_string(net_[k].epoch));
    net_.erase(net_.begin() + static_cast<std::ptrdiff_t>(k));
    note("report lost");
  }

  // The incarnations some agent runs.
  std::vector<std::pair<int, std::int64_t>> live_incarnations() const {
    std::set<std::pair<int, std::int64_t>> s;
    for (const auto& a : agents_)
      for (auto [job, epoch] : a.running) s.insert({job, epoch});
    return {s.begin(), s.end()};
  }

  void work(const Action& x) {
    const auto live = live_incarnations();
    if (live.empty()) return;
    const auto key = live[static_cast<std::size_t>(x.a) % live.size()];
    auto& inc = incs_[key];
    inc.step += 1 + x.b % 7;
    for (int n = 0; n < kNodes; ++n) {
      auto& a = agents_[static_cast<std::size_t>(n)];
      auto it = a.running.find(key.first);
      if (it != a.running.end() && it->second == key.second) queue(Report::Kind::kProgress, key.first, key.second, n, inc.step);
    }
  }

  void complete(const Action& x) {
    const auto live = live_incarnations();
    if (live.empty()) return;
    const auto key = live[static_cast<std::size_t>(x.a) % live.size()];
    for (int n = 0; n < kNodes; ++n) {
      auto& a = agents_[static_cast<std::size_t>(n)];
      auto it = a.running.find(key.first);
      if (it != a.running.end() && it->second == key.second) {
        a.running.erase(it);
        queue(Report::Kind::kCompleted, key.first, key.second, n, incs_[key].step, "done");
      }
    }
  }

  void crash(const Action& x) {
    const int n = x.a % kNodes;
    auto& a = agents_[static_cast<std::size_t>(n)];
    if (a.running.empty()) return;
    auto it = a.running.begin();
    std::advance(it, x.b % static_cast<int>(a.running.size()));
    queue(Report::Kind::kCrashed, it->first, it->second, n, 0, "worker died");
    a.running.erase(it);
  }

  // Rounds of: sync, every agent carries out its whole inbox (cuts going as `luck` says, from its
  // low bits on), every report is delivered in order, a short tick.
  void quiet(int rounds, int luck) {
    for (int round = 0; round < rounds; ++round) {
      sync();
      pump();
      for (int n = 0; n < kNodes; ++n) deliver_commands(n, SIZE_MAX, luck >> n, /*cuts_may_fail=*/(luck & 7) == 0);
      pump();
      for (int i = 0; i < 200 && !net_.empty(); ++i) {
        deliver_report(0, false);
        pump();
      }
      tick(1 + (luck >> round) % 50);
    }
  }

  void tick(std::int64_t ms) {
    clock_.advance(ms);
    proto_->tick(now());
    pump();
    check_timeouts();
  }

  void sync() {
    if (auto st = core_->sync(); !st) fail("journal", "sync: " + st.reason());
    if (core_->durable_seq() != core_->committed()) fail("journal", "durable_seq() != committed() after sync()");
  }

  void agent(const Action& x) {
    const int n = x.a % kNodes;
    auto& a = agents_[static_cast<std::size_t>(n)];
    if (!a.up) {  // the agent comes back, running nothing
      a.up = true;
      note("agent registered empty after a crash");
      proto_->node_registered(n, {}, now());
      return;
    }
    if (x.b % 2) {  // the agent dies with its workers; its connection (and inbox) with it
      a = Agent{};
      a.up = false;
      note("agent crashed");
      return;
    }
    note("agent reconnected");
    reconnect_inbox(n, x.c);
    proto_->node_registered(n, running_list(a), now());
  }

  static std::vector<protocol::Running> running_list(const Agent& a) {
    std::vector<protocol::Running> out;
    for (auto [job, epoch] : a.running) out.push_back({job, epoch});
    return out;
  }

  // The core dies: what the journal holds is the groups written so far, plus (when x.a says so) a
  // piece of the group that was being written, which may hold whole records beyond the durable
  // ones or end torn. Everything is rebuilt from it.
  void restart(const Action& x) {
    const std::uint64_t durable = core_->durable_seq(), committed = core_->committed();
    const std::string on_disk = testing::read_bytes(path_);
    proto_.reset();
    driver_.reset();
    planner_.reset();
    core_.reset();
    journal_.reset();  // its destructor writes the buffered group: cut back below
    const std::string flushed = testing::read_bytes(path_);
    std::size_t keep = on_disk.size();
    if (flushed.size() > on_disk.size() && x.a % 3 == 0)
      keep += static_cast<std::size_t>(x.b) % (flushed.size() - on_disk.size() + 1);
    testing::write_bytes(path_, flushed.substr(0, keep));
    note("core restarted");
    if (committed > durable) note("restart lost decisions that were not durable");
    if (keep > on_disk.size()) note("restart found part of the group being written");
    g_stats.count["decisions lost by restarts"] += committed - durable;

    auto j = core::JournalWriter::open(path_, {core::FsyncPolicy::kGroup, group_});
    if (!j) fail("restart", "cannot open the journal: " + j.reason());
    journal_ = std::move(*j);
    if (!journal_->recovered_tail_error().empty()) note("restart cut a torn tail");
    auto contents = core::read_journal(path_);
    if (!contents) fail("restart", "cannot read the journal: " + contents.reason());
    log_.clear();
    entered_ = {};
    auto c = core::SchedulerCore::recover(
        contents->records, clock_, journal_.get(),
        [&](const core::SchedulerCore& core, const core::Committed& cm, const core::Decision& d) {
          record(cm, d, core);
          entered_.replayed(core, cm, d, /*same_clock=*/true);
        });
    if (!c) fail("restart", "recover: " + c.reason());
    core_ = std::move(*c);
    trace("   restarted: " + std::to_string(core_->committed()) + " decisions recovered (durable was " +
          std::to_string(durable) + ", committed " + std::to_string(committed) + ")");
    if (core_->committed() < durable)
      fail("P1", "the journal lost durable decisions: " + std::to_string(core_->committed()) + " recovered, " +
                     std::to_string(durable) + " were durable");
    if (core_->durable_seq() != core_->committed()) fail("journal", "recovered decisions are not all durable");

    // P1 across the crash: what went out is in the recovered core.
    for (auto [job, epoch] : launched_) {
      if (job >= core_->num_jobs() || core_->cluster().jobs[job].epoch < epoch)
        fail("P1", "launch of job " + std::to_string(job) + " epoch " + std::to_string(epoch) +
                       " went out, but the recovered core does not know that epoch");
    }
    for (auto [job, epoch] : cut_sent_) {
      if (core_->cluster().jobs[job].epoch == epoch && core_->state(job) == JobState::kRunning)
        fail("P1", "a cut (then_stop) of job " + std::to_string(job) + " epoch " + std::to_string(epoch) +
                       " went out, but the recovered core has that incarnation Running");
    }
    for (auto [job, epoch, node] : stopped_sent_) {
      const auto nodes = nodes_of(*core_, job);
      if (core_->cluster().jobs[job].epoch == epoch && holding(core_->state(job)) &&
          std::binary_search(nodes.begin(), nodes.end(), node))
        fail("P1", "a stop of job " + std::to_string(job) + " epoch " + std::to_string(epoch) + " went to n" +
                       std::to_string(node) + ", but the recovered core has that incarnation current there");
    }

    start_protocol();
    proto_->recover(now());
    for (int job = 0; job < core_->num_jobs(); ++job)
      if (in_flight(core_->state(job))) since_[job] = now();
    for (int n = 0; n < kNodes; ++n) {
      const auto& a = agents_[static_cast<std::size_t>(n)];
      if (!a.up) continue;
      reconnect_inbox(n, x.c >> n);
      proto_->node_registered(n, running_list(a), now());
    }
    pump();
  }

  // An agent registers again on a new connection: the commands still in flight on the old one were
  // either carried out before (bit 0 of `choice` set) or are lost with it; none arrives after the
  // registration, which says what the agent runs.
  void reconnect_inbox(int n, int choice) {
    auto& a = agents_[static_cast<std::size_t>(n)];
    if (a.inbox.empty()) return;
    if (choice & 1) {
      deliver_commands(n, SIZE_MAX, choice >> 1, true);
    } else {
      note("commands lost with an agent's connection");
      a.inbox.clear();
    }
  }

  std::string planner_name_;
  std::size_t group_;
  ScratchDir dir_;
  std::string path_;
  core::ManualClock clock_{1000};
  std::unique_ptr<core::JournalWriter> journal_;
  std::unique_ptr<core::SchedulerCore> core_;
  std::unique_ptr<protocol::Protocol> proto_;
  std::unique_ptr<protocol::Driver> driver_;
  std::unique_ptr<core::policy::Planner> planner_;
  core::policy::EnteredTimes entered_;  // filled at a restart, from the replayed journal

  std::map<int, std::vector<Entry>> log_;  // job -> its decisions in the journal, in seq order
  std::map<int, std::int64_t> since_;      // job -> when it entered its in-flight state (or restart)
  std::vector<Agent> agents_;
  std::map<std::pair<int, std::int64_t>, Incarnation> incs_;
  std::vector<Report> net_;
  // What has been sent (taken from the protocol), for P1's checks after a restart.
  std::set<std::pair<int, std::int64_t>> launched_, cut_sent_;
  std::set<std::tuple<int, std::int64_t, int>> stopped_sent_;
  std::set<std::string> happened_;
  std::vector<std::string> trace_;
};

// ---- The property ------------------------------------------------------------------------------

RC_GTEST_PROP(Protocol, DurableFencedTimelyAndReplayable, ()) {
  const std::string planner = *rc::gen::element<std::string>("orrery", "fifo");
  const auto group = static_cast<std::size_t>(*rc::gen::inRange(2, 9));
  const int length = *rc::gen::inRange(20, 300);
  const auto actions = *rc::gen::container<std::vector<Action>>(static_cast<std::size_t>(length), gen_action());
  RC_TAG(planner);
  Harness h(planner, group);
  for (const auto& a : actions) h.run(a);
  h.finish();
}

void print_stats(std::ostream& os) {
  const auto& s = g_stats;
  os << "protocol_proptest: " << s.cases << " cases passed, " << s.actions << " steps, "
     << s.replayed_decisions << " decisions replayed clean through the checker (P4)\n";
  os << "cases in which (of " << s.cases << "), and how often in all:\n";
  for (const auto& [what, n] : s.cases_with)
    os << "  " << std::setw(6) << n << " cases  " << std::setw(8) << s.count.at(what) << "  " << what << "\n";
  for (const auto& [what, n] : s.count)
    if (!s.cases_with.count(what)) os << "  " << std::setw(22) << n << "  " << what << "\n";
  os << "states entered:";
  for (int st = 0; st < spec::kNumJobStates; ++st)
    if (s.entered[static_cast<std::size_t>(st)])
      os << " " << spec::state_name(static_cast<JobState>(st)) << "=" << s.entered[static_cast<std::size_t>(st)];
  os << "\ncommitted (event: planner/runtime/operator/core):";
  for (int e = 0; e < spec::kNumEventKinds; ++e) {
    const auto& c = s.committed[static_cast<std::size_t>(e)];
    if (c[0] + c[1] + c[2] + c[3] == 0) continue;
    os << " " << spec::event_name(static_cast<EventKind>(e)) << "=" << c[0] << "/" << c[1] << "/" << c[2] << "/" << c[3];
  }
  os << "\nlongest in-flight age seen at a tick: " << s.max_inflight_age_ratio << " of its timeout (P3)\n";
}

}  // namespace
}  // namespace orrery::proptest

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  const auto cases = orrery::proptest::count_from_env("ORRERY_PROTOCOL_CASES", 10000);
  if (!cases) return 2;
  std::string params = std::getenv("RC_PARAMS") ? std::getenv("RC_PARAMS") : "";
  if (params.find("max_success") == std::string::npos) params += " max_success=" + std::to_string(*cases);
  setenv("RC_PARAMS", params.c_str(), 1);
  int rc = RUN_ALL_TESTS();
  orrery::proptest::print_stats(std::cout);
  return rc;
}
