#include "runtime/sim/simulator.h"

#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <random>

#include "core/clock.h"
#include "core/journal.h"
#include "core/node_bootstrap.h"
#include "core/protocol/driver.h"
#include "core/policy/type_speed.h"
#include "core/protocol/protocol.h"
#include "core/scheduler_core.h"
#include "runtime/sim/event_queue.h"
#include "runtime/sim/fleet_types.h"
#include "runtime/sim/offered_load.h"
#include "runtime/sim/sim_metrics.h"

namespace orrery::sim {

namespace {

using core::Decision;
using spec::EventKind;
using spec::JobState;
using spec::Origin;

// What the simulator models of a job the core knows.
struct JobSim {
  std::int32_t w = -1;          // index in the workload
  std::uint32_t ver = 0;        // bumped whenever its finish or checkpoint times change
  double total_s = 0;           // work at full size
  double done_s = 0;            // work done (rolled back to the checkpoint on a failure)
  std::int64_t steps = 1;       // the core's steps: one per second of full-size work
  std::int64_t last_ms = 0;     // work accounted up to here
  std::int64_t paused_until = 0;  // checkpoint writing, restore, re-splice
  std::int64_t gpu_from_ms = 0;   // device time accounted (Progress gpu_ms) up to here
  std::int64_t first_start_ms = -1;
  std::int64_t end_ms = -1;
  std::int64_t devices = 0;       // held, as of the last commit
  std::int64_t cut_step = -1;     // the step of the cut being written
  std::int64_t launched_epoch = -1;  // the last incarnation whose launch was carried out
  std::int64_t cut_epoch = -1;       // ... and whose cut
  std::int32_t only_type = -1;    // the one device type that can hold it, if only one can
  bool moved = false;             // the incarnation restores on other devices (a migration)
  bool fail_next_cut = false;     // scripted: the runtime fails the next cut
  JobTimer finish, checkpoint;    // its next finish and periodic checkpoint (JobTimer)
};

class Sim final : public core::policy::PlanContext, public protocol::CommitListener {
 public:
  Sim(const Workload& w, const SimOptions& o) : w_(w), o_(o) {}

  Status init(core::Fleet fleet, const std::string& policy) {
    // A migration's whole path as the planner's cost model sees it: checkpoint, transfer, restore.
    auto po = o_.planner;
    if (po.migration_gib_per_s > 0)
      po.migration_gib_per_s = 1.0 / (1.0 / o_.cost.checkpoint_gbps + 1.0 / o_.cost.network_gbps + 1.0 / o_.cost.restore_gbps);
    // A cut and its restore, as the planner weighs a preemption or shrink inside a tier.
    if (po.cut_gib_per_s > 0) po.cut_gib_per_s = 1.0 / (1.0 / o_.cost.checkpoint_gbps + 1.0 / o_.cost.restore_gbps);
    planner_ = core::policy::make_planner(policy, po);
    if (!planner_) return Status::Error("unknown policy \"" + policy + "\"");
    if (fleet.num_devices() == 0) return Status::Error("the fleet has no devices");
    if (o_.job_records) recorder_ = std::make_unique<JobRecorder>(w_.jobs.size(), fleet.device_types);
    fleet.premium_reserve = static_cast<std::int64_t>(std::floor(o_.premium_share * fleet.num_devices()));
    if (!o_.journal_path.empty()) {
      std::error_code ec;
      std::filesystem::remove(o_.journal_path, ec);
      auto j = core::JournalWriter::open(o_.journal_path, {core::FsyncPolicy::kNever, 4096});
      if (!j) return j.status();
      journal_ = std::move(*j);
    }
    types_ = FleetTypes(w_, fleet, o_.planner.one_node_gangs);
    if (auto st = core::policy::check_type_speed(fleet, o_.planner.type_speed); !st) return st;
    speed_ = core::policy::speeds_by_type(fleet, o_.planner.type_speed);
    auto c = core::SchedulerCore::create(std::move(fleet), clock_, journal_.get());
    if (!c) return c.status();
    core_ = std::move(*c);
    if (auto st = core::bring_up_all_nodes(*core_); !st) return st;
    proto_ = std::make_unique<protocol::Protocol>(*core_);
    driver_ = std::make_unique<protocol::Driver>(*core_, *proto_, *this);
    devices_ = core_->fleet().num_devices();
    window_ = steady_window(w_.jobs.size());
    return Status::Ok();
  }

  Result<SimResult> run() {
    const auto wall0 = std::chrono::steady_clock::now();
    SimResult r;
    r.policy = std::string(planner_->name());
    r.jobs = static_cast<std::int64_t>(w_.jobs.size());
    t0_ = w_.jobs.empty() ? 0 : ms(w_.jobs.front().arrival_s);
    const std::int64_t span = w_.jobs.empty() ? 0 : ms(w_.jobs.back().arrival_s) - t0_;
    sample_every_ = std::max<std::int64_t>(ms(o_.round_s), std::max<std::int64_t>(span, 3'600'000) / std::max(1, o_.series_points));
    clock_.advance(t0_);
    next_sample_ = t0_;
    if (!w_.jobs.empty()) push(t0_, Ev::kArrive, 0, 0);
    if (o_.cost.node_mtbf_h > 0) schedule_failure();
    for (std::size_t i = 0; i < o_.script.size(); ++i)
      push(t0_ + ms(o_.script[i].at_s), Ev::kScript, static_cast<int>(i), 0);
    std::uint64_t n = 0;
    auto last_report = wall0;
    while (!events_.empty() && error_.ok()) {
      const Event e = events_.pop();
      clock_.advance(e.t - clock_.now_ms());
      handle(e);
      if ((++n & 0xffff) == 0 && o_.on_progress) {
        auto now = std::chrono::steady_clock::now();
        if (now - last_report > std::chrono::milliseconds(500)) {
          last_report = now;
          o_.on_progress((clock_.now_ms() - t0_) / 1000.0, finished_, r.jobs);
        }
      }
    }
    if (!error_.ok()) return error_;
    if (journal_) {
      if (auto st = journal_->flush(); !st) return st;
    }
    if (o_.on_progress) o_.on_progress((clock_.now_ms() - t0_) / 1000.0, finished_, r.jobs);
    r.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();
    summarize(r);
    return r;
  }

  // --- PlanContext ---------------------------------------------------------------------------
  // Every proposal is committed at once; the protocol's commands carry it out (act()).
  bool propose(const Decision& d) override {
    if (!spec::planner_event(d.event)) ++rejected_;  // a policy bug
    if (!proto_->may_commit(d)) return false;
    if (d.event == EventKind::kPreempt || d.event == EventKind::kMigrate || d.event == EventKind::kResizeUp ||
        d.event == EventKind::kResizeDown)
      progress(static_cast<int>(d.job));  // the work done up to a cut is committed first
    const bool ok = commit(d).ok();
    act();
    return ok;
  }
  bool cut_pending(int j) const override { return proto_->busy(j); }
  // As orrery-core's nodes report it: progress at most a report period (protocol::Timeouts) old.
  std::int64_t unreported_gpu_ms(int j) const override {
    if (core_->state(j) != JobState::kRunning) return 0;
    const std::int64_t since = now() - jobs_[static_cast<std::size_t>(j)].gpu_from_ms;
    return since >= protocol::Timeouts{}.progress_every_ms ? core_->cluster().jobs[j].devices * since : 0;
  }
  void freshen(int j) override {
    if (unreported_gpu_ms(j) > 0) progress(j);
  }
  void replan_at(std::int64_t t) override {
    t = std::max({t, now(), last_round_ + ms(o_.round_s)});
    if (t >= wake_at_) return;  // a round comes by then anyway
    wake_at_ = t;
    push(t, Ev::kRound, 0, 0);
  }

 private:
  static std::int64_t ms(double s) { return static_cast<std::int64_t>(std::llround(s * 1000.0)); }
  std::int64_t now() const { return clock_.now_ms(); }
  JobSim& job(int j) { return jobs_[static_cast<std::size_t>(j)]; }
  double state_gb(int j) const {
    return static_cast<double>(w_.jobs[static_cast<std::size_t>(jobs_[static_cast<std::size_t>(j)].w)].state_mib()) / 1024.0;
  }
  std::int64_t checkpoint_ms(int j) const { return ms(state_gb(j) / o_.cost.checkpoint_gbps); }
  std::int64_t restore_ms(int j) const { return ms(state_gb(j) / o_.cost.restore_gbps); }
  std::int64_t transfer_ms(int j) const { return ms(state_gb(j) / o_.cost.network_gbps); }

  void push(std::int64_t t, Ev k, int a, std::uint32_t ver) { events_.push(t, k, a, ver); }

  // Commits through the protocol's driver (the same path orrery-core takes); committed() below
  // keeps the planner, the counters and the job model up to date.
  Result<core::Committed> commit(const Decision& d) { return driver_->commit(d, now()); }

  // protocol::CommitListener.
  void committed(const core::Committed& c, const Decision& d) override {
    const int id = c.job;
    auto& js = job(id);
    const std::int64_t devices = core_->cluster().jobs[id].devices;
    ledger_.committed(id, d.event, c.to, js.devices, now());
    const std::int64_t freed = js.devices - devices;
    js.devices = devices;
    held_ -= freed;
    waiting_ += waits(c.to) - waits(c.from);
    planner_->job_changed(*core_, id);
    if (recorder_) recorder_->committed(static_cast<std::size_t>(js.w), d.event, c.to, core_->cluster().jobs[id].dtype, now());
    switch (d.event) {
      case EventKind::kPreempt: ++preemptions_; break;
      case EventKind::kMigrate: ++migrations_; break;
      case EventKind::kResizeUp:
      case EventKind::kResizeDown: ++resizes_; break;
      case EventKind::kCheckpoint: ++checkpoints_; break;
      default: break;
    }
    if (c.from == JobState::kRunning && c.to != JobState::kRunning) ++js.ver;  // no finish now
    // A requeue job's cut keeps nothing (spec commit_cut: its progress goes back to 0): it redoes
    // its steps from scratch.
    if (d.event == EventKind::kCheckpointDone && core_->job_info(id).mode == spec::Preemption::kRequeue) {
      const double lost = js.done_s * static_cast<double>(core_->cluster().jobs[id].world);
      lost_cut_gpu_s_ += lost;
      ledger_.redone(id, lost);
      js.done_s = 0;
    }
    if (c.to == JobState::kRestoring) js.moved = c.from == JobState::kMigrating;
    if (c.to == JobState::kRunning && c.from != JobState::kRunning) runs_from_now(id);
    // A round only when it may find something new to do: devices freed (a migration frees those
    // it leaves, an aborted move the devices reserved for it), a job waiting anew. (Progress,
    // checkpoints and a grow carried out do not call one; the next one sees them.)
    const bool moved_off = d.event == EventKind::kCheckpointDone && c.from == JobState::kMigrating;
    const bool unreserved = d.event == EventKind::kAbort &&
                            (c.from == JobState::kMigrating || c.from == JobState::kResizing);
    if (freed > 0 || moved_off || unreserved || (waits(c.to) && !waits(c.from)) ||
        c.to == JobState::kSubmitted)
      dirty();
  }
  // A refused report of the simulated runtime is a bug of the simulator and stops the run; a
  // refused proposal of the planner is counted; a refused move (its target taken meanwhile by a
  // job that outranks it) is the protocol's to abort.
  void refused(const Decision& d, const Status& why) override {
    if (d.origin == Origin::kPlanner) {
      ++rejected_;
    } else if (d.event != EventKind::kSubmit && d.event != EventKind::kCheckpointDone && error_.ok()) {
      error_ = Status::Internal("simulator bug: the core refused " + d.describe() + ": " + why.reason());
    }
  }

  // Commits what the protocol proposed, then carries out its commands: the simulated runtime
  // answers a launch with Started after the restore (and transfer) time, a cut with CutStored
  // after the checkpoint's write time. The simulated core does not crash, so every commit counts
  // as durable.
  void act() {
    driver_->settle(now());
    // A periodic cut is one command per node of the job, in a row; the simulated runtime stores it
    // once (one CutStored, one pause). Answering each node's command was as many CutStored events
    // and pauses, all but the first of them no-ops: half of a run's events.
    int periodic_job = -1;
    std::int64_t periodic_epoch = -1;
    for (const auto& cmd : proto_->take_commands(core_->committed())) {
      if (cmd.kind == protocol::Command::Kind::kCut && !cmd.then_stop) {
        if (cmd.job == periodic_job && cmd.epoch == periodic_epoch) continue;
        periodic_job = cmd.job;
        periodic_epoch = cmd.epoch;
      }
      auto& js = job(cmd.job);
      if (cmd.kind == protocol::Command::Kind::kLaunch && js.launched_epoch != cmd.epoch) {
        js.launched_epoch = cmd.epoch;
        const std::int64_t t = cmd.restore_step >= 0 ? restore_ms(cmd.job) + (js.moved ? transfer_ms(cmd.job) : 0) : 0;
        push(now() + t, Ev::kStarted, cmd.job, static_cast<std::uint32_t>(cmd.epoch));
      } else if (cmd.kind == protocol::Command::Kind::kCut && js.cut_epoch != cmd.epoch) {
        js.cut_epoch = cmd.then_stop ? cmd.epoch : -1;
        js.cut_step = core_->cluster().jobs[cmd.job].progress;
        if (!cmd.then_stop) {  // a periodic cut pauses the running job while it is written
          js.paused_until = now() + checkpoint_ms(cmd.job);
          schedule_run(cmd.job);
        }
        push(now() + checkpoint_ms(cmd.job), Ev::kCutDone, cmd.job, static_cast<std::uint32_t>(cmd.epoch));
      }
    }
    proto_->take_notes();
  }
  // The runtime's answers, for the incarnation they were asked of.
  void started(int j, std::int64_t epoch) {
    if (core_->cluster().jobs[j].epoch != epoch) return;
    for (int n : proto_->nodes_of(j)) {
      protocol::Report r;
      r.kind = protocol::Report::Kind::kStarted;
      r.job = j;
      r.epoch = epoch;
      r.node = n;
      (void)proto_->report(r, now());
    }
    act();
  }
  void cut_stored(int j, std::int64_t epoch) {
    if (core_->cluster().jobs[j].epoch != epoch) return;
    protocol::Report r;
    r.kind = protocol::Report::Kind::kCutStored;
    r.job = j;
    r.epoch = epoch;
    r.step = job(j).cut_step;
    if (job(j).fail_next_cut && core_->state(j) != JobState::kRunning) {
      job(j).fail_next_cut = false;
      r.kind = protocol::Report::Kind::kCutFailed;
      r.node = proto_->nodes_of(j).empty() ? -1 : proto_->nodes_of(j).front();
      r.detail = "scripted failure";
    }
    (void)proto_->report(r, now());
    act();
  }
  static int waits(JobState s) {
    return s == JobState::kSubmitted || s == JobState::kQueued || s == JobState::kSuspended;
  }
  void dirty() {
    if (round_pending_) return;
    round_pending_ = true;
    push(std::max(now(), last_round_ + ms(o_.round_s)), Ev::kRound, 0, 0);
  }

  // Work done up to now (nothing while paused or not running).
  void advance(int j) {
    auto& js = job(j);
    std::int64_t from = std::max(js.last_ms, js.paused_until);
    if (core_->state(j) == JobState::kRunning && now() > from)
      js.done_s = std::min(js.total_s, js.done_s + rate(j) * static_cast<double>(now() - from) / 1000.0);
    js.last_ms = now();
  }
  // The job's speed: its share of its world's devices (less the splice overhead), times its
  // device type's speed (SimOptions::planner.type_speed; a trace's durations are at speed 1).
  double rate(int j) const {
    const auto& jv = core_->cluster().jobs[j];
    double r = static_cast<double>(jv.devices) / static_cast<double>(jv.world) * speed_[static_cast<std::size_t>(jv.dtype)];
    return jv.devices < jv.world ? r * (1.0 - o_.cost.splice_overhead) : r;
  }
  // Commits the job's progress (its step and the device time since the last report).
  void progress(int j, std::int64_t step = -1) {
    advance(j);
    auto& js = job(j);
    const auto& jv = core_->cluster().jobs[j];
    Decision d;
    d.event = EventKind::kProgress;
    d.origin = Origin::kRuntime;
    d.job = j;
    d.step = std::max(jv.progress, step >= 0 ? step : std::min(js.steps - 1, static_cast<std::int64_t>(js.done_s)));
    d.gpu_ms = jv.devices * (now() - js.gpu_from_ms);
    js.gpu_from_ms = now();
    commit(d);
  }
  // The job is Running again: its work and device time count from now.
  void runs_from_now(int j) {
    auto& js = job(j);
    js.last_ms = js.gpu_from_ms = now();
    if (js.first_start_ms < 0) js.first_start_ms = now();
    schedule_run(j);
  }
  // New finish and periodic-checkpoint events for a running job.
  void schedule_run(int j) {
    auto& js = job(j);
    ++js.ver;
    if (core_->state(j) != JobState::kRunning) return;
    const std::int64_t from = std::max(now(), js.paused_until);
    const double left = std::max(0.0, js.total_s - js.done_s);
    const std::int64_t finish = from + static_cast<std::int64_t>(std::ceil(left / rate(j) * 1000.0));
    arm(j, js.finish, Ev::kFinish, finish);
    if (o_.cost.checkpoint_every_s > 0) {
      const std::int64_t ck = from + ms(o_.cost.checkpoint_every_s);
      if (ck < finish) arm(j, js.checkpoint, Ev::kCheckpoint, ck);
    }
  }
  // Job j's timers (event_queue.h), for its current version.
  void arm(int j, JobTimer& timer, Ev kind, std::int64_t t) { events_.arm(timer, kind, j, job(j).ver, t); }
  bool fire(const Event& e, JobTimer& timer) { return events_.fire(e, timer, job(e.a).ver); }

  void handle(const Event& e) {
    switch (e.kind()) {
      case Ev::kArrive:
        // The steady-state window (offered_load.h) opens and closes at the arrivals of two
        // given jobs; the arrival window closes at the last one.
        if (window_.first < window_.last && static_cast<std::size_t>(e.a) == window_.first) {
          steady_from_ms_ = now();
          steady_from_useful_ = useful_now();
        }
        if (window_.first < window_.last && static_cast<std::size_t>(e.a) == window_.last) {
          steady_to_ms_ = now();
          steady_to_useful_ = useful_now();
        }
        arrive(e.a);
        if (e.a + 1 == static_cast<int>(w_.jobs.size())) {
          window_end_ = now();
          window_useful_ = useful_now();
        }
        break;
      case Ev::kRound:
        round_pending_ = false;
        last_round_ = now();
        if (now() >= wake_at_) wake_at_ = INT64_MAX;
        sample();
        planner_->plan(*core_, *this);
        break;
      case Ev::kFail: fail(); break;
      case Ev::kScript: scripted(o_.script[static_cast<std::size_t>(e.a)]); break;
      case Ev::kRepair: repair(e.a); break;
      case Ev::kStarted: started(e.a, e.ver); break;
      case Ev::kCutDone: cut_stored(e.a, e.ver); break;
      case Ev::kFinish:
        if (fire(e, job(e.a).finish)) finish(e.a);
        break;
      case Ev::kCheckpoint:
        if (fire(e, job(e.a).checkpoint)) checkpoint(e.a);
        break;
    }
  }

  // A job that cannot run on this fleet: not submitted, counted with its reason.
  void unschedulable(const char* why) {
    ++unschedulable_;
    ++unschedulable_why_[why];
    ++finished_;
  }

  // The useful work done so far (world x full-size seconds; work a failure or a requeue cut threw
  // away is not in it): a pass over the jobs, made three times a run (the steady-state window's
  // ends and the last arrival).
  double useful_now() {
    double useful = 0;
    for (int j = 0; j < static_cast<int>(jobs_.size()); ++j) {
      advance(j);
      useful += jobs_[static_cast<std::size_t>(j)].done_s * w_.jobs[static_cast<std::size_t>(jobs_[static_cast<std::size_t>(j)].w)].world;
    }
    return useful;
  }

  void arrive(int w) {
    if (w + 1 < static_cast<int>(w_.jobs.size())) push(ms(w_.jobs[static_cast<std::size_t>(w) + 1].arrival_s), Ev::kArrive, w + 1, 0);

    const auto& sj = w_.jobs[static_cast<std::size_t>(w)];
    const auto [type, why] = types_.choose(w_, w);
    if (type < 0) return unschedulable(why);
    // Signal and requeue programs run one worker per device, on exactly their world (SimOptions).
    auto mode = draw_mode(o_.modes, o_.seed, static_cast<std::uint64_t>(w));
    if (mode != spec::Preemption::kTransparent && !types_.runs_whole(w_, w, type))
      mode = spec::Preemption::kTransparent;
    const bool whole = mode != spec::Preemption::kTransparent;
    // A workload of one tenant submits without one (the core's default tenant).
    std::string types = core_->fleet().device_types[static_cast<std::size_t>(type)];
    const bool several = sj.device_types == 0 || (sj.device_types & (sj.device_types - 1)) != 0;
    bool others = false;  // the spec names other types that can hold it
    if (several && !o_.pin_types)
      for (int t : types_.allowed(w_, w, type))
        if (t != type && (!whole || types_.runs_whole(w_, w, t))) {  // a whole job: types it runs on whole
          types += "|" + core_->fleet().device_types[static_cast<std::size_t>(t)];
          others = true;
        }
    Decision d = Decision::submit("j" + std::to_string(w), sj.tier, types, sj.world,
                                  whole ? sj.world : sj.min_devices, whole ? sj.world : sj.max_devices, sj.mem_mib,
                                  w_.tenants.size() > 1 ? w_.tenants[static_cast<std::size_t>(sj.tenant)] : "");
    d.mode = mode;
    jobs_.emplace_back();  // before the commit: job_changed may ask about it
    auto c = commit(d);
    if (!c) {  // a spec the core refuses: counted
      jobs_.pop_back();
      return unschedulable("the core refuses its spec");
    }
    auto& js = job(c->job);
    js.w = w;
    js.only_type = others ? -1 : type;
    js.total_s = std::max(sj.duration_s, 0.001);
    js.steps = std::max<std::int64_t>(1, static_cast<std::int64_t>(std::ceil(js.total_s)));
    ++submitted_;
    ++submitted_by_mode_[static_cast<std::size_t>(mode)];
  }

  void finish(int j) {
    auto& js = job(j);
    js.done_s = js.total_s;
    progress(j, js.steps);
    Decision d;
    d.event = EventKind::kComplete;
    d.origin = Origin::kRuntime;
    d.job = j;
    const bool ok = commit(d).ok();
    act();
    if (!ok) return;
    js.end_ms = now();
    ++js.ver;
    ++finished_;
  }
  // A periodic checkpoint: the step reached is committed and a cut of it asked for (through the
  // protocol, like the nodes' periodic cuts); the job pauses while it is written.
  // A signal or requeue job takes no cut while it runs (INV-MODE: its only cut stops it): it only
  // reports its progress then (its attained service, which the planners read), and runs on.
  void checkpoint(int j) {
    progress(j);
    if (core_->job_info(j).mode != spec::Preemption::kTransparent) {
      schedule_run(j);
      return;
    }
    proto_->request_checkpoint(j, now());
    act();
  }

  void scripted(const ScriptStep& step) {
    switch (step.kind) {
      case ScriptStep::Kind::kDecide: {
        const int j = static_cast<int>(step.decision.job);
        if (j >= 0 && j < static_cast<int>(jobs_.size()) && core_->state(j) == JobState::kRunning) progress(j);
        (void)commit(step.decision);
        act();
        break;
      }
      case ScriptStep::Kind::kFailNextCut:
        if (step.job >= 0 && step.job < static_cast<int>(jobs_.size())) job(step.job).fail_next_cut = true;
        break;
      case ScriptStep::Kind::kLoseNode:
        if (step.node >= 0 && step.node < static_cast<int>(core_->fleet().nodes.size())) lose_node(step.node);
        break;
    }
  }

  void schedule_failure() {
    if (submitted_ + unschedulable_ == static_cast<std::int64_t>(w_.jobs.size()) && held_ == 0 && waiting_ == 0)
      return;  // nothing left that a failure could touch
    const double per_ms = static_cast<double>(core_->fleet().nodes.size()) / (o_.cost.node_mtbf_h * 3600e3);
    std::exponential_distribution<double> gap(per_ms);
    push(now() + 1 + static_cast<std::int64_t>(gap(rng_)), Ev::kFail, 0, 0);
  }
  void node_event(spec::NodeEvent ev, int n) {
    core::NodeDecision d;
    d.event = ev;
    d.origin = Origin::kRuntime;
    d.node = n;
    auto c = core_->commit_node(d);
    if (!c && error_.ok()) error_ = Status::Error("simulator bug: the core refused " + d.describe() + ": " + c.reason());
    dirty();
  }
  void fail() {
    const auto& nodes = core_->fleet().nodes;
    lose_node(static_cast<int>(std::uniform_int_distribution<std::size_t>(0, nodes.size() - 1)(rng_)));
    schedule_failure();
  }
  void lose_node(int n) {
    const auto& nodes = core_->fleet().nodes;
    if (core_->node_state(n) == spec::NodeState::kUp) {
      ++node_failures_;
      node_event(spec::NodeEvent::kHeartbeatLost, n);
      std::vector<int> on;
      for (int dev = nodes[static_cast<std::size_t>(n)].first_device; dev < nodes[static_cast<std::size_t>(n)].end_device; ++dev) {
        auto o = core_->cluster().owner[dev];
        if (o >= 0 && std::find(on.begin(), on.end(), static_cast<int>(o)) == on.end()) on.push_back(static_cast<int>(o));
      }
      for (int j : on) {
        advance(j);
        auto& js = job(j);
        const auto& jv = core_->cluster().jobs[j];
        const double kept = static_cast<double>(std::max<std::int64_t>(jv.ckpt, 0));
        lost_gpu_s_ += std::max(0.0, js.done_s - kept) * static_cast<double>(jv.world);
      }
      proto_->node_lost(n);  // NodeLoss for each of them, as orrery-core's heartbeat monitor does
      act();
      for (int j : on) {
        auto& js = job(j);
        js.done_s = std::min(js.done_s, static_cast<double>(core_->cluster().jobs[j].progress));
        ++js.ver;
        if (core_->state(j) == JobState::kFailed) ++finished_;
      }
      node_event(spec::NodeEvent::kFailedOver, n);
      push(now() + ms(o_.cost.repair_s), Ev::kRepair, n, 0);
    }
  }
  void repair(int n) {
    node_event(spec::NodeEvent::kRegister, n);
    node_event(spec::NodeEvent::kReady, n);
  }

  void sample() {
    if (now() < next_sample_) return;
    next_sample_ = now() + sample_every_;
    t_h_.push_back(static_cast<double>(now() - t0_) / 3.6e6);
    util_.push_back(static_cast<double>(held_) / static_cast<double>(devices_));
    queue_.push_back(static_cast<double>(waiting_));
  }

  void summarize(SimResult& r) {
    r.submitted = submitted_;
    r.unschedulable = unschedulable_;
    r.unschedulable_why = unschedulable_why_;
    JobStats stats(w_.tenants.size());
    CountedJobs submitted(w_.jobs.size(), 0);
    std::int64_t end = t0_;
    for (int j = 0; j < static_cast<int>(jobs_.size()); ++j) {
      const auto& js = jobs_[static_cast<std::size_t>(j)];
      const auto& sj = w_.jobs[static_cast<std::size_t>(js.w)];
      submitted[static_cast<std::size_t>(js.w)] = 1;
      const auto st = core_->state(j);
      if (st == JobState::kFailed) ++r.failed;
      if (st != JobState::kCompleted) {
        if (st != JobState::kFailed) ++r.unfinished;
        r.useful_gpu_s += js.done_s * sj.world;
        continue;
      }
      ++r.completed;
      end = std::max(end, js.end_ms);
      r.useful_gpu_s += js.total_s * sj.world;
      r.avg_run_s += js.total_s;
      const double c = static_cast<double>(js.end_ms - ms(sj.arrival_s)) / 1000.0;
      const double q = static_cast<double>(js.first_start_ms - ms(sj.arrival_s)) / 1000.0;
      stats.completed(sj.tier, sj.tenant, c, q, o_.sla_queue_s[static_cast<std::size_t>(sj.tier)],
                      core_->cluster().jobs[j].min_dev > 1);  // as submitted (signal and requeue jobs: whole)
    }
    auto sum = stats.summarize();
    if (w_.tenants.size() > 1) {
      double total = 0;
      for (std::size_t t = 0; t < w_.tenants.size(); ++t) {
        const auto [done, avg] = sum.tenant_avg_queue[t];
        if (done == 0) continue;
        r.tenants.push_back({w_.tenants[t], done, avg});
        total += avg;
      }
      if (!r.tenants.empty()) r.tenant_mean_queue_s = total / static_cast<double>(r.tenants.size());
    }
    r.avg_jct_s = sum.avg_jct_s;
    if (r.completed > 0) r.avg_run_s /= static_cast<double>(r.completed);
    r.p50_jct_s = sum.p50_jct_s;
    r.p95_jct_s = sum.p95_jct_s;
    r.p99_jct_s = sum.p99_jct_s;
    for (std::size_t t = 0; t < 3; ++t) {
      const auto& a = sum.tiers[t];
      r.tiers[t] = {a.jobs, a.avg_jct_s, a.p50_jct_s, a.p99_jct_s, a.avg_queue_s, a.p99_queue_s, a.max_queue_s, a.sla_attainment, 0,
                    a.gang_jobs, a.avg_queue_one_s, a.avg_queue_gang_s, {}};
    }
    r.offered_load = offered_load(w_, devices_, submitted);
    // Each tier's part of it; and per tier and device type, the load of the jobs only that type
    // can hold, over its devices (TierResult::pinned_load).
    const int types = static_cast<int>(core_->fleet().device_types.size());
    std::vector<int> tier_of(submitted.size(), -1), pinned(submitted.size(), -1);
    for (std::size_t i = 0; i < tier_of.size(); ++i)
      if (submitted[i]) tier_of[i] = static_cast<int>(w_.jobs[i].tier);
    for (const auto& js : jobs_)
      if (js.only_type >= 0) pinned[static_cast<std::size_t>(js.w)] = tier_of[static_cast<std::size_t>(js.w)] * types + js.only_type;
    for (const auto& [t, load] : offered_load_by_group(w_, tier_of, [&](int) { return devices_; }))
      r.tiers[static_cast<std::size_t>(t)].offered_load = load;
    for (const auto& [g, load] : offered_load_by_group(w_, pinned, [&](int g) { return types_.count(g % types); }))
      r.tiers[static_cast<std::size_t>(g / types)].pinned_load.emplace_back(
          core_->fleet().device_types[static_cast<std::size_t>(g % types)], load);
    r.actions = ledger_.costs();
    r.sim_s = static_cast<double>(std::max(end, now()) - t0_) / 1000.0;
    r.capacity_gpu_s = static_cast<double>(devices_) * static_cast<double>(end - t0_) / 1000.0;
    r.utilization_makespan = r.capacity_gpu_s > 0 ? r.useful_gpu_s / r.capacity_gpu_s : 0;
    const double window_capacity = static_cast<double>(devices_) * static_cast<double>(window_end_ - t0_) / 1000.0;
    r.utilization_arrivals = window_capacity > 0 ? window_useful_ / window_capacity : r.utilization_makespan;
    const double steady_capacity = static_cast<double>(devices_) * static_cast<double>(steady_to_ms_ - steady_from_ms_) / 1000.0;
    r.utilization = steady_capacity > 0 ? (steady_to_useful_ - steady_from_useful_) / steady_capacity : r.utilization_makespan;
    r.steady_from_s = static_cast<double>(steady_from_ms_ - t0_) / 1000.0;
    r.steady_to_s = static_cast<double>(steady_to_ms_ - t0_) / 1000.0;
    r.preemptions = preemptions_;
    r.migrations = migrations_;
    r.resizes = resizes_;
    r.checkpoints = checkpoints_;
    r.node_failures = node_failures_;
    r.lost_gpu_s = lost_gpu_s_;
    r.lost_cut_gpu_s = lost_cut_gpu_s_;
    r.submitted_by_mode = submitted_by_mode_;
    r.decisions = core_->committed();
    r.rejected_proposals = rejected_;
    r.decisions_per_s = r.wall_s > 0 ? static_cast<double>(r.decisions) / r.wall_s : 0;
    rusage ru{};
    getrusage(RUSAGE_SELF, &ru);
    r.peak_rss_mib = static_cast<double>(ru.ru_maxrss) / 1024.0;
    r.t_h = std::move(t_h_);
    r.utilization_series = std::move(util_);
    r.queue_series = std::move(queue_);
    r.jct_s = std::move(sum.jct_s);
    if (recorder_) r.job_records = recorder_->take();
  }

  const Workload& w_;
  SimOptions o_;
  core::ManualClock clock_;
  std::unique_ptr<core::JournalWriter> journal_;
  std::unique_ptr<core::SchedulerCore> core_;
  std::unique_ptr<core::policy::Planner> planner_;
  std::unique_ptr<JobRecorder> recorder_;  // SimOptions::job_records
  std::unique_ptr<protocol::Protocol> proto_;
  std::unique_ptr<protocol::Driver> driver_;
  FleetTypes types_;
  std::vector<double> speed_;  // by device type
  std::vector<JobSim> jobs_;  // by core job id
  EventQueue events_;
  std::mt19937_64 rng_{o_.seed};
  Status error_;
  bool round_pending_ = false;
  std::int64_t last_round_ = INT64_MIN / 2;
  std::int64_t wake_at_ = INT64_MAX;  // the earliest round a planner asked for (replan_at)
  std::int64_t t0_ = 0, next_sample_ = 0, sample_every_ = 1;
  std::int64_t devices_ = 0, held_ = 0, waiting_ = 0;
  std::int64_t submitted_ = 0, unschedulable_ = 0, finished_ = 0;
  std::map<std::string, std::int64_t> unschedulable_why_;
  std::int64_t preemptions_ = 0, migrations_ = 0, resizes_ = 0, checkpoints_ = 0, node_failures_ = 0;
  std::uint64_t rejected_ = 0;
  double lost_gpu_s_ = 0, lost_cut_gpu_s_ = 0;
  std::array<std::int64_t, spec::kNumPreemptions> submitted_by_mode_{};
  std::int64_t window_end_ = 0;  // the last arrival
  double window_useful_ = 0;
  SteadyWindow window_;  // the steady-state window's jobs (offered_load.h)
  std::int64_t steady_from_ms_ = 0, steady_to_ms_ = 0;
  double steady_from_useful_ = 0, steady_to_useful_ = 0;
  ActionLedger ledger_;
  std::vector<double> t_h_, util_, queue_;
};

}  // namespace

Result<SimResult> simulate(const core::Fleet& fleet, const Workload& workload, const std::string& policy,
                           const SimOptions& options) {
  Sim sim(workload, options);
  if (auto st = sim.init(fleet, policy); !st) return st;
  return sim.run();
}

}  // namespace orrery::sim
