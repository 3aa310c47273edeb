#include "core/protocol/protocol.h"

#include <algorithm>

namespace orrery::protocol {

using spec::EventKind;
using spec::JobState;
using spec::Origin;

const char* command_kind_name(Command::Kind k) {
  switch (k) {
    case Command::Kind::kLaunch: return "launch";
    case Command::Kind::kCut: return "cut";
    case Command::Kind::kStop: return "stop";
  }
  return "?";
}

const char* report_kind_name(Report::Kind k) {
  switch (k) {
    case Report::Kind::kStarted: return "started";
    case Report::Kind::kProgress: return "progress";
    case Report::Kind::kCutStored: return "cut stored";
    case Report::Kind::kCutFailed: return "cut failed";
    case Report::Kind::kStopped: return "stopped";
    case Report::Kind::kCompleted: return "completed";
    case Report::Kind::kCrashed: return "crashed";
  }
  return "?";
}

namespace {

bool holds(JobState s) {
  return spec::holding_state(spec::Concrete{}, static_cast<std::int64_t>(s));
}
bool launching(JobState s) { return s == JobState::kPlaced || s == JobState::kRestoring; }
bool cutting(JobState s) {
  return s == JobState::kCheckpointing || s == JobState::kMigrating || s == JobState::kResizing;
}
bool in_flight(JobState s) { return launching(s) || cutting(s); }

std::string job_str(int job) { return "job " + std::to_string(job); }

}  // namespace

Protocol::Protocol(const core::SchedulerCore& core, Timeouts timeouts)
    : core_(core), timeouts_(timeouts) {}

Protocol::Track& Protocol::track(int job) {
  const auto i = static_cast<std::size_t>(job);
  if (i >= tracks_.size()) tracks_.resize(std::max(i + 1, tracks_.size() * 2));
  if (!tracks_[i]) tracks_[i] = std::make_unique<Track>();
  return *tracks_[i];
}

const Protocol::Track* Protocol::find(int job) const {
  const auto i = static_cast<std::size_t>(job);
  return job >= 0 && i < tracks_.size() ? tracks_[i].get() : nullptr;
}

std::vector<int> Protocol::placement_nodes(int job) const {
  std::vector<int> out;
  for (auto dev : core_.cluster().jobs[job].held) out.push_back(core_.fleet().device_node(dev));
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

void Protocol::recover(std::int64_t now_ms) {
  for (int j = 0; j < core_.num_jobs(); ++j) {
    if (!holds(state(j))) continue;
    auto& t = track(j);
    t.epoch = core_.cluster().jobs[j].epoch;
    t.nodes = placement_nodes(j);
    t.started.clear();
    t.started_here = 0;
    t.completed.clear();
    t.node_step.clear();
    t.since_ms = now_ms;
    t.periodic = false;
    t.periodic_asked_at = -1;
    watched_.insert(j);
  }
  for (int j = 0; j < static_cast<int>(tracks_.size()); ++j)
    if (tracks_[static_cast<std::size_t>(j)]) refresh(j);
}

void Protocol::send(Command::Kind kind, int node, int job, std::int64_t epoch, std::uint64_t seq,
                    std::int64_t restore_step, bool then_stop) {
  Command c;
  c.kind = kind;
  c.node = node;
  c.job = job;
  c.epoch = epoch;
  c.restore_step = restore_step;
  c.then_stop = then_stop;
  c.after_seq = seq;
  commands_.push_back(c);
}

void Protocol::stop_all(int job, const Track& t, std::uint64_t seq) {
  for (int n : t.nodes) send(Command::Kind::kStop, n, job, t.epoch, seq);
}

void Protocol::propose(core::Decision d) { proposals_.push_back(std::move(d)); }

core::Decision Protocol::runtime_decision(EventKind e, int job) const {
  core::Decision d;
  d.event = e;
  d.origin = Origin::kRuntime;
  d.job = job;
  return d;
}

void Protocol::note(int job, std::string text) { notes_.emplace_back(job, std::move(text)); }

bool Protocol::started_everywhere(const Track& t) const {
  return t.started_here == static_cast<int>(t.nodes.size());
}

void Protocol::mark_started(Track& t, int node) {
  if (t.started.insert(node).second && std::binary_search(t.nodes.begin(), t.nodes.end(), node)) ++t.started_here;
}

void Protocol::recount_started(Track& t) {
  t.started_here = 0;
  for (int n : t.nodes) t.started_here += static_cast<int>(t.started.count(n));
}

std::int64_t Protocol::min_node_step(const Track& t) const {
  std::int64_t m = -1;
  for (int n : t.nodes) {
    auto it = t.node_step.find(n);
    if (it == t.node_step.end()) return -1;
    m = m < 0 ? it->second : std::min(m, it->second);
  }
  return m;
}

void Protocol::begin_incarnation(int job, Track& t, std::uint64_t seq, std::int64_t now_ms) {
  const auto& jv = core_.cluster().jobs[job];
  auto old_nodes = t.nodes;
  auto old_epoch = t.epoch;
  t.epoch = jv.epoch;
  t.nodes = placement_nodes(job);
  t.started.clear();
  t.started_here = 0;
  t.completed.clear();
  t.node_step.clear();
  t.gpu_ms = 0;
  t.since_ms = now_ms;
  t.periodic = false;
  t.periodic_asked_at = -1;  // from its checkpoint on, every multiple again
  // Where the old incarnation does not go on, it is stopped; where it does, the newer launch
  // stops it (agents fence by epoch).
  if (old_epoch >= 0 && old_epoch != t.epoch)
    for (int n : old_nodes)
      if (!std::binary_search(t.nodes.begin(), t.nodes.end(), n))
        send(Command::Kind::kStop, n, job, old_epoch, seq);
  const std::int64_t restore = jv.ckpt >= 0 ? jv.ckpt : -1;
  for (int n : t.nodes) send(Command::Kind::kLaunch, n, job, t.epoch, seq, restore);
}

std::uint64_t Protocol::latest_decision(int job) const {
  auto it = undurable_.find(job);
  return it == undurable_.end() || it->second.empty() ? 0 : it->second.back().seq;
}

std::uint64_t Protocol::ended_by(int job, std::int64_t epoch) const {
  auto it = undurable_.find(job);
  if (it == undurable_.end()) return 0;
  for (const auto& u : it->second)
    if (u.held_before && u.epoch_before == epoch && (u.epoch_after != epoch || !u.holds_after))
      return u.seq;
  return 0;
}

void Protocol::committed(const core::Committed& c, const core::Decision& d, std::int64_t now_ms) {
  committed_impl(c, d, now_ms);
  if (c.job >= 0) refresh(c.job);
}

void Protocol::committed_impl(const core::Committed& c, const core::Decision& d, std::int64_t now_ms) {
  if (c.job < 0) return;
  const int j = c.job;
  {
    // Every new incarnation (the rows into Placed or Restoring from elsewhere) takes the next
    // epoch; no other row changes it.
    Undurable u;
    u.seq = c.seq;
    u.epoch_after = core_.cluster().jobs[j].epoch;
    u.epoch_before = launching(c.to) && c.from != c.to ? u.epoch_after - 1 : u.epoch_after;
    u.held_before = holds(c.from);
    u.holds_after = holds(c.to);
    undurable_[j].push_back(u);
    undurable_order_.emplace_back(c.seq, j);
  }
  auto& t = track(j);
  const JobState from = c.from, to = c.to;
  // A move or a restore carried out: the note that said it was under way is stale.
  if (to == JobState::kRunning && from == JobState::kRestoring) note(j, "");
  if (launching(to) && from != to) {
    begin_incarnation(j, t, c.seq, now_ms);
    watched_.insert(j);
    if (from == JobState::kQueued || from == JobState::kSuspended) note(j, "");  // no longer waits
    return;
  }
  if (cutting(to) && from == JobState::kRunning) {
    t.since_ms = now_ms;
    t.periodic = false;
      for (int n : t.nodes) send(Command::Kind::kCut, n, j, t.epoch, c.seq, -1, /*then_stop=*/true);
    watched_.insert(j);
    if (to == JobState::kCheckpointing && d.beneficiary < 0)
      note(j, "suspending (an operator's; held until orrery resume)");
    else if (to == JobState::kCheckpointing)
      note(j, "preempting for job " + std::to_string(d.beneficiary));
    else if (to == JobState::kMigrating)
      note(j, "migrating");
    else
      note(j, "resizing to " + std::to_string(core_.cluster().jobs[j].target.size()) + " devices");
    return;
  }
  if (holds(from) && !holds(to)) {
    // The workers are told to stop, whatever the reason. Suspended (the cut stopped them) and
    // Completed (they exited) included: a node may run the incarnation still (its then_stop cut
    // failed while an earlier periodic cut completed the preemption; it relaunched its share after
    // a core restart before the completion was known), on devices the core has just freed. A stop
    // of an incarnation a node does not run costs it nothing.
    stop_all(j, t, c.seq);
    if (to == JobState::kSuspended) note(j, "suspended at step " + std::to_string(d.step));
    t.nodes.clear();
    t.started.clear();
    t.started_here = 0;
    t.completed.clear();
    t.node_step.clear();
    t.periodic = false;
      if (t.policy.every_steps == 0) watched_.erase(j);
    if (spec::terminal_state(spec::Concrete{}, static_cast<std::int64_t>(to))) {
      watched_.erase(j);
      tracks_[static_cast<std::size_t>(j)].reset();
    }
    return;
  }
  if (!holds(from) && spec::terminal_state(spec::Concrete{}, static_cast<std::int64_t>(to))) {
    watched_.erase(j);
    tracks_[static_cast<std::size_t>(j)].reset();
  }
}

void Protocol::refused(const core::Decision& d, const Status& why, std::int64_t) {
  if (d.job < 0 || d.job >= core_.num_jobs()) return;
  const int j = static_cast<int>(d.job);
  auto s = state(j);
  if (d.event == EventKind::kCheckpointDone && (s == JobState::kMigrating || s == JobState::kResizing)) {
    // The cut is stored but the target no longer fits (a job that outranks this one took a
    // reserved device, or a target node left Up): keep the cut as the checkpoint, and restart in
    // place from it.
    const auto& jv = core_.cluster().jobs[j];
    if (d.step > jv.ckpt && d.step <= jv.progress) {
      auto ck = runtime_decision(EventKind::kCheckpoint, j);
      ck.step = d.step;
      propose(ck);
    }
    abort(j, Origin::kCore, "the move cannot be carried out (" + why.reason() + ")");
    return;
  }
  if (d.origin != Origin::kPlanner && d.origin != Origin::kOperator)
    note(j, std::string(spec::event_name(d.event)) + " not committed: " + why.reason());
}

void Protocol::propose_progress(int job, Track& t, std::int64_t step) {
  const auto& jv = core_.cluster().jobs[job];
  if (step <= jv.progress && t.gpu_ms == 0) return;
  auto d = runtime_decision(EventKind::kProgress, job);
  d.step = std::max(step, jv.progress);
  d.gpu_ms = t.gpu_ms;
  t.gpu_ms = 0;
  propose(d);
}

void Protocol::abort(int job, Origin origin, const std::string& why) {
  auto d = runtime_decision(EventKind::kAbort, job);
  d.origin = origin;
  propose(d);
  note(job, std::string(spec::state_name(state(job))) + " aborted: " + why);
}

// The job's own failure (its program crashed or exited non-zero, or its launch was refused):
// WorkerCrash, which spends one of its retries.
void Protocol::crash(int job, const std::string& why) {
  const auto used = core_.cluster().jobs[job].failures + 1;
  propose(runtime_decision(EventKind::kWorkerCrash, job));
  note(job, why + (used > spec::kMaxRetries
                       ? " (the job's own failure; no retry left of " + std::to_string(spec::kMaxRetries) + ")"
                       : " (the job's own failure: retry " + std::to_string(used) + " of " +
                             std::to_string(spec::kMaxRetries) + ")"));
}

// The platform failed under the job (its node lost or restarted, its proxy killed, a shard lost):
// NodeLoss, which relaunches it from its last committed checkpoint without touching its retries,
// up to the platform cap.
void Protocol::platform_fault(int job, const std::string& why) {
  const auto used = core_.cluster().jobs[job].faults + 1;
  propose(runtime_decision(EventKind::kNodeLoss, job));
  note(job, why + (used > spec::kMaxPlatformFaults
                       ? " (platform fault " + std::to_string(used) + ": over the platform cap of " +
                             std::to_string(spec::kMaxPlatformFaults) + " for one job)"
                       : " (platform fault " + std::to_string(used) + " of " +
                             std::to_string(spec::kMaxPlatformFaults) +
                             "; restarting from checkpoint " +
                             std::to_string(core_.cluster().jobs[job].ckpt) +
                             ", the job's retries untouched)"));
}

void Protocol::on_cut_stored(int job, Track& t, std::int64_t step, std::int64_t now_ms) {
  const auto& jv = core_.cluster().jobs[job];
  const auto s = state(job);
  if (cutting(s) && step >= jv.progress) {
    propose_progress(job, t, step);
    auto done = runtime_decision(EventKind::kCheckpointDone, job);
    done.step = step;
    propose(done);
    return;
  }
  // A periodic cut (or one asked for before the operation began): committed as a checkpoint.
  if (s == JobState::kRunning || cutting(s)) {
    if (s == JobState::kRunning) {
      propose_progress(job, t, step);
      t.last_progress_ms = now_ms;
    }
    if (step > jv.ckpt) {
      auto ck = runtime_decision(EventKind::kCheckpoint, job);
      ck.step = step;
      propose(ck);
    }
    t.periodic = false;
  }
}

void Protocol::on_all_completed(int job, Track& t, std::int64_t step, const std::string& detail) {
  if (state(job) == JobState::kRunning) {
    propose_progress(job, t, step);
    propose(runtime_decision(EventKind::kComplete, job));
    note(job, detail.empty() ? "completed" : "completed: " + detail);
  } else if (cutting(state(job))) {
    // The workers finished before the cut's safe point: the cut will not come. The operation is
    // aborted; the job finishes again from its last checkpoint.
    abort(job, Origin::kRuntime, "the workers completed before the cut");
  }
}

Status Protocol::report(const Report& r, std::int64_t now_ms) {
  auto st = report_impl(r, now_ms);
  if (r.job >= 0 && r.job < core_.num_jobs()) refresh(r.job);
  return st;
}

Status Protocol::report_impl(const Report& r, std::int64_t now_ms) {
  if (r.job < 0 || r.job >= core_.num_jobs())
    return Status::NotFound("unknown job " + std::to_string(r.job));
  const auto& jv = core_.cluster().jobs[r.job];
  const auto s = state(r.job);
  auto refuse = [&](const std::string& why) {
    // The incarnation is not current because of a decision of the job's (a newer epoch, a cancel,
    // a move off the node), which may not be durable yet: a crash could bring the incarnation back
    // as current. So the stop waits for that decision (ended_by).
    if (r.node >= 0) send(Command::Kind::kStop, r.node, r.job, r.epoch, ended_by(r.job, r.epoch));
    return Status::FailedPrecondition(why);
  };
  if (r.epoch != jv.epoch)
    return refuse("stale epoch " + std::to_string(r.epoch) + " for job " + std::to_string(r.job) +
                  ": current epoch is " + std::to_string(jv.epoch));
  if (!holds(s))
    return refuse(job_str(r.job) + " is " + std::string(spec::state_name(s)) + ": its incarnation " +
                  std::to_string(r.epoch) + " must not run");
  auto& t = track(r.job);
  if (t.epoch != jv.epoch) {  // first report after a restart of the core, or a bug: catch up
    t.epoch = jv.epoch;
    t.nodes = placement_nodes(r.job);
    recount_started(t);
  }
  if (r.node >= 0 && !std::binary_search(t.nodes.begin(), t.nodes.end(), r.node))
    return refuse(job_str(r.job) + " is not placed on node " + core_.fleet().nodes[static_cast<std::size_t>(r.node)].name);
  switch (r.kind) {
    case Report::Kind::kStarted:
      mark_started(t, r.node);
      if (started_everywhere(t)) {
        if (s == JobState::kPlaced) propose(runtime_decision(EventKind::kStart, r.job));
        else if (s == JobState::kRestoring) propose(runtime_decision(EventKind::kRestoreDone, r.job));
      }
      break;
    case Report::Kind::kProgress: {
      if (r.gpu_ms > 0 && r.gpu_ms < (std::int64_t{1} << 40)) t.gpu_ms += r.gpu_ms;
      auto& ns = t.node_step[r.node];
      ns = std::max(ns, r.step);
      if (s != JobState::kRunning && !cutting(s)) break;
      // Committed at most every progress_every_ms per job: cuts and completion commit the step
      // they need at once, so a journal record per report would buy nothing.
      const auto m = min_node_step(t);
      // A signal or requeue program reports no steps, only its service (device time): that is
      // committed at the same step, or no same-tier job would ever be favoured over it.
      const bool service_only = core_.job_info(r.job).mode != spec::Preemption::kTransparent &&
                                t.gpu_ms > 0 && m >= jv.progress;
      if ((m > jv.progress || service_only) &&
          now_ms - t.last_progress_ms >= timeouts_.progress_every_ms) {
        propose_progress(r.job, t, m);
        t.last_progress_ms = now_ms;
      }
      break;
    }
    case Report::Kind::kCutStored:
      on_cut_stored(r.job, t, r.step, now_ms);
      break;
    case Report::Kind::kCutFailed:
      if (cutting(s)) {
        abort(r.job, Origin::kRuntime,
              "the cut failed" + (r.node >= 0 ? " on node " + core_.fleet().nodes[static_cast<std::size_t>(r.node)].name : std::string()) +
                  (r.detail.empty() ? "" : ": " + r.detail));
      } else if (t.periodic) {
        t.periodic = false;
        note(r.job, "periodic checkpoint failed: " + r.detail);
      }
      break;
    case Report::Kind::kStopped:
      // Expected after a cut (then_stop) or a stop; while running, nobody asked for it.
      if (s == JobState::kRunning) platform_fault(r.job, "node " + core_.fleet().nodes[static_cast<std::size_t>(r.node)].name + " stopped the job unasked");
      break;
    case Report::Kind::kCompleted:
      t.completed.insert(r.node);
      if (t.completed.size() >= t.nodes.size() &&
          std::includes(t.completed.begin(), t.completed.end(), t.nodes.begin(), t.nodes.end()))
        on_all_completed(r.job, t, r.step, r.detail);
      break;
    case Report::Kind::kCrashed: {
      const std::string why = "node " + core_.fleet().nodes[static_cast<std::size_t>(r.node)].name +
                              ": " + (r.detail.empty() ? "worker crashed" : r.detail);
      if (r.platform) platform_fault(r.job, why);
      else crash(r.job, why);
      break;
    }
  }
  return Status::Ok();
}

void Protocol::node_registered(int node, const std::vector<Running>& running, std::int64_t now_ms) {
  node_registered_impl(node, running, now_ms);
  for (const auto& inc : running)
    if (inc.job >= 0 && inc.job < core_.num_jobs()) refresh(inc.job);
  const auto& nd = core_.fleet().nodes[static_cast<std::size_t>(node)];
  for (int dev = nd.first_device; dev < nd.end_device; ++dev)
    if (core_.cluster().owner[dev] >= 0) refresh(static_cast<int>(core_.cluster().owner[dev]));
}

void Protocol::node_registered_impl(int node, const std::vector<Running>& running, std::int64_t) {
  // What is sent here follows from the jobs' states, which may rest on decisions not durable yet
  // (a Cancel, a Place, a Preempt): a stop waits for the decision that ended the incarnation, a
  // launch or a cut for the job's latest decision.
  std::set<int> runs_current;
  for (const auto& inc : running) {
    const bool current = inc.job >= 0 && inc.job < core_.num_jobs() &&
                         inc.epoch == core_.cluster().jobs[inc.job].epoch && holds(state(inc.job));
    auto nodes = current ? placement_nodes(inc.job) : std::vector<int>{};
    if (!current || !std::binary_search(nodes.begin(), nodes.end(), node)) {
      send(Command::Kind::kStop, node, inc.job, inc.epoch, ended_by(inc.job, inc.epoch));
      continue;
    }
    runs_current.insert(inc.job);
    auto& t = track(inc.job);
    if (t.epoch != inc.epoch) {
      t.epoch = inc.epoch;
      t.nodes = nodes;
      recount_started(t);
    }
    mark_started(t, node);
    // A cut asked for before the agent reconnected may never have reached it: ask again.
    if (cutting(state(inc.job)))
      send(Command::Kind::kCut, node, inc.job, inc.epoch, latest_decision(inc.job), -1, true);
  }
  const auto& nd = core_.fleet().nodes[static_cast<std::size_t>(node)];
  std::set<int> held_here;
  for (int dev = nd.first_device; dev < nd.end_device; ++dev)
    if (core_.cluster().owner[dev] >= 0) held_here.insert(static_cast<int>(core_.cluster().owner[dev]));
  for (int job : held_here) {
    if (runs_current.count(job)) continue;
    const auto s = state(job);
    const auto& jv = core_.cluster().jobs[job];
    auto& t = track(job);
    if (t.epoch != jv.epoch) {
      t.epoch = jv.epoch;
      t.nodes = placement_nodes(job);
      recount_started(t);
    }
    if (s == JobState::kRunning) {
      platform_fault(job, "node " + nd.name + " registered without its workers");
    } else if (launching(s)) {
      send(Command::Kind::kLaunch, node, job, jv.epoch, latest_decision(job),
           jv.ckpt >= 0 ? jv.ckpt : -1);
    } else if (cutting(s)) {
      // The workers are gone (stopped after the cut, or lost with the agent). A stored cut is
      // reported by whoever keeps the shards (CutStored); without one this restarts in place.
      abort(job, Origin::kRuntime, "node " + nd.name + " registered without its workers during the cut");
    }
  }
  for (int job : runs_current) {
    auto& t = track(job);
    if (!started_everywhere(t)) continue;
    if (state(job) == JobState::kPlaced) propose(runtime_decision(EventKind::kStart, job));
    else if (state(job) == JobState::kRestoring) propose(runtime_decision(EventKind::kRestoreDone, job));
  }
}

void Protocol::node_lost(int node) {
  const auto& nd = core_.fleet().nodes[static_cast<std::size_t>(node)];
  std::set<int> jobs;
  for (int dev = nd.first_device; dev < nd.end_device; ++dev)
    if (core_.cluster().owner[dev] >= 0) jobs.insert(static_cast<int>(core_.cluster().owner[dev]));
  for (int job : jobs) platform_fault(job, "node " + nd.name + " lost");
}

void Protocol::tick(std::int64_t now_ms) {
  for (auto it = watched_.begin(); it != watched_.end();) {
    const int j = *it;
    ++it;
    const auto s = state(j);
    Track* tp = j >= 0 && static_cast<std::size_t>(j) < tracks_.size() ? tracks_[static_cast<std::size_t>(j)].get() : nullptr;
    if (!tp) continue;
    auto& t = *tp;
    if (launching(s) && now_ms - t.since_ms > timeouts_.launch_ms) {
      abort(j, Origin::kCore, "not started on every node within " + std::to_string(timeouts_.launch_ms) + " ms");
      t.since_ms = now_ms;  // one abort per timeout, whatever becomes of it
      continue;
    }
    if (cutting(s) && now_ms - t.since_ms > timeouts_.cut_ms) {
      abort(j, Origin::kCore, "the cut was not stored within " + std::to_string(timeouts_.cut_ms) + " ms");
      t.since_ms = now_ms;
      continue;
    }
    if (s != JobState::kRunning) continue;
    const auto& jv = core_.cluster().jobs[j];
    const auto reported = std::max(jv.progress, min_node_step(t));
    // A cut asked for ahead of its boundary is timed from when the workers reach it.
    if (t.periodic && t.periodic_target > 0 && reported < t.periodic_target) t.periodic_since_ms = now_ms;
    if (t.periodic && now_ms - t.periodic_since_ms > timeouts_.cut_ms) {
      t.periodic = false;
      note(j, "periodic checkpoint not stored within " + std::to_string(timeouts_.cut_ms) + " ms");
    }
    if (t.periodic || t.policy.every_steps <= 0 || !started_everywhere(t)) continue;
    // The next multiple of every_steps past what is stored and reported, asked for at once: the
    // workers cut exactly there.
    const auto every = t.policy.every_steps;
    // (At least 2 steps ahead of what is reported: a node's ranks may be a step past it.)
    auto next = (std::max({reported, jv.ckpt, t.periodic_asked_at, std::int64_t{0}}) / every + 1) * every;
    if (next < reported + 2) next += every;
    if (t.policy.steps <= 0 || next < t.policy.steps) {
      t.periodic_asked_at = next;
      request_checkpoint(j, now_ms, next);
    }
  }
  for (int j : watched_) refresh(j);
}

void Protocol::request_checkpoint(int job, std::int64_t now_ms, std::int64_t at_step) {
  if (state(job) != JobState::kRunning) return;
  // Only a transparent job is cut while it runs on (GuardCheckpoint, INV-MODE): a signal or
  // requeue job's only cut stops it.
  if (core_.job_info(job).mode != spec::Preemption::kTransparent) return;
  auto& t = track(job);
  if (t.periodic) return;
  t.periodic = true;
  t.periodic_since_ms = now_ms;
  t.periodic_target = at_step;
  watched_.insert(job);
  for (int n : t.nodes) {
    send(Command::Kind::kCut, n, job, t.epoch, 0, -1, /*then_stop=*/false);
    commands_.back().at_step = at_step;
  }
  refresh(job);
}

void Protocol::set_checkpoint_policy(int job, CheckpointPolicy policy) {
  if (core_.job_info(job).mode != spec::Preemption::kTransparent) policy.every_steps = 0;
  track(job).policy = policy;
  if (policy.every_steps > 0) watched_.insert(job);
}

std::vector<core::Decision> Protocol::take_proposals() {
  auto out = std::move(proposals_);
  proposals_.clear();
  return out;
}

std::vector<Command> Protocol::take_commands(std::uint64_t durable_seq) {
  // Forget the decisions that are durable now (each job's list is short: its decisions since the
  // last sync).
  while (!undurable_order_.empty() && undurable_order_.front().first <= durable_seq) {
    auto it = undurable_.find(undurable_order_.front().second);
    undurable_order_.pop_front();
    if (it == undurable_.end()) continue;
    auto& v = it->second;
    v.erase(v.begin(), std::find_if(v.begin(), v.end(), [&](const Undurable& u) { return u.seq > durable_seq; }));
    if (v.empty()) undurable_.erase(it);
  }
  std::vector<Command> out, keep;
  for (auto& c : commands_) (c.after_seq <= durable_seq ? out : keep).push_back(std::move(c));
  commands_ = std::move(keep);
  return out;
}

std::vector<std::pair<int, std::string>> Protocol::take_notes() {
  auto out = std::move(notes_);
  notes_.clear();
  return out;
}

void Protocol::refresh(int job) {
  if (job < 0) return;
  if (static_cast<std::size_t>(job) >= may_be_busy_.size())
    may_be_busy_.resize(std::max<std::size_t>(static_cast<std::size_t>(job) + 1, may_be_busy_.size() * 2), 0);
  const Track* t = find(job);
  // A cache of "may be busy" (busy() decides): any periodic cut, whether or not its boundary is near.
  may_be_busy_[static_cast<std::size_t>(job)] = t && (t->periodic || !started_everywhere(*t));
}

// A periodic cut makes the job busy once the workers may be taking it: asked for the next boundary,
// or for one they have (nearly) reached. One asked for a boundary still ahead is only pending at
// the proxies, and a preemption, migration or resize may start meanwhile: its cut replaces the
// pending one there (the proxy keeps the newest request).
bool Protocol::periodic_busy(int job, const Track& t) const {
  if (!t.periodic) return false;
  if (t.periodic_target <= 0) return true;
  const auto reported = std::max(core_.cluster().jobs[job].progress, min_node_step(t));
  return reported + 1 >= t.periodic_target;
}

bool Protocol::busy(int job) const {
  const auto s = state(job);
  if (in_flight(s)) return true;
  // The planners ask for every candidate of a round: most are neither cutting nor starting.
  if (static_cast<std::size_t>(job) >= may_be_busy_.size() || !may_be_busy_[static_cast<std::size_t>(job)])
    return false;
  const Track* t = find(job);
  if (!t) return false;
  return periodic_busy(job, *t) || (s == JobState::kRunning && !started_everywhere(*t));
}

bool Protocol::may_commit(const core::Decision& d) const {
  if (!spec::planner_event(d.event)) return false;
  const bool starts_cut = d.event == EventKind::kPreempt || d.event == EventKind::kMigrate ||
                          d.event == EventKind::kResizeUp || d.event == EventKind::kResizeDown;
  if (!starts_cut) return true;
  return d.job >= 0 && d.job < core_.num_jobs() && !busy(static_cast<int>(d.job));
}

std::int64_t Protocol::reported_step(int job) const {
  const auto progress = core_.cluster().jobs[job].progress;
  const Track* t = find(job);
  return t ? std::max(progress, min_node_step(*t)) : progress;
}

std::vector<int> Protocol::nodes_of(int job) const {
  const Track* t = find(job);
  return t ? t->nodes : std::vector<int>{};
}

}  // namespace orrery::protocol
