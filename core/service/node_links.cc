// The node side: registrations (and reconciliation after a restart), heartbeats, reports, shard
// transfers, and the commands the protocol sends to the agents.
#include <algorithm>
#include <cstdio>
#include <map>

#include "base/crc32c.h"
#include "core/service/service.h"
#include "core/service/service_internal.h"

namespace orrery::service {

using spec::EventKind;
using spec::JobState;
using spec::NodeState;
using spec::Origin;

namespace {

bool cutting(JobState s) {
  return s == JobState::kCheckpointing || s == JobState::kMigrating || s == JobState::kResizing;
}

}  // namespace

const char* report_kind_name(NodeReport::Kind k) {
  switch (k) {
    case NodeReport::Kind::kStarted: return "started";
    case NodeReport::Kind::kProgress: return "progress";
    case NodeReport::Kind::kCheckpointed: return "checkpointed";
    case NodeReport::Kind::kStopped: return "stopped";
    case NodeReport::Kind::kCompleted: return "completed";
    case NodeReport::Kind::kCrashed: return "crashed";
  }
  return "?";
}

NodeLink* Service::link(int node) const {
  if (node < 0 || node >= static_cast<int>(conns_.size())) return nullptr;
  return conns_[static_cast<std::size_t>(node)]->link.get();
}

bool Service::session_current(const NodeSession& s) const {
  return s.node >= 0 && s.node < static_cast<int>(conns_.size()) &&
         conns_[static_cast<std::size_t>(s.node)]->session == s.session &&
         conns_[static_cast<std::size_t>(s.node)]->registered;
}

// This node's share of the job's current incarnation: device k of the placement (held devices
// sorted) runs ranks [k*splice, (k+1)*splice). The collective is the incarnation's, the same on
// every node: a shared-memory name when the job is on one node, else the TCP mesh's rendezvous
// on rank 0's node (its registered host) at a port derived from the name. Every (re)start is a
// new epoch, so the name is the job's and the epoch's.
LaunchCommand Service::launch_command(int job, int node, std::int64_t restore_step) const {
  const auto& jv = core_->cluster().jobs[job];
  const auto& v = *views_.at(job);
  LaunchCommand c;
  c.job = job;
  c.epoch = jv.epoch;
  c.world = static_cast<int>(jv.world);
  c.command = v.spec.command;
  for (const auto& [k, val] : v.spec.env) c.env.push_back(k + "=" + val);
  c.workdir = v.spec.workdir;
  c.mode = v.spec.preemption;
  c.grace_ms = v.spec.grace_ms;
  // A signal job's own checkpoints: one folder per job, the same on every node (a shared path
  // when nodes are machines of their own: --user-checkpoint-root). A requeue job gets none.
  if (c.mode == spec::Preemption::kSignal && !options_.user_checkpoint_root.empty())
    c.checkpoint_dir = options_.user_checkpoint_root + "/job-" + std::to_string(job);
  c.restart_count = jv.epoch > 0 ? jv.epoch - 1 : 0;  // every earlier incarnation
  c.restore_step = restore_step;
  std::string id = "orrery-" + cluster_id_ + "-job" + std::to_string(job) + "-epoch" + std::to_string(jv.epoch);
  // torch.distributed's rendezvous (signal and requeue programs use their own collectives): on
  // rank 0's node, at a port derived from the incarnation, like the TCP collective's below.
  if (!jv.held.empty()) {
    const int rank0 = core_->fleet().device_node(jv.held.front());
    c.master_addr = conns_[static_cast<std::size_t>(rank0)]->host;
    c.master_port = 29500 + static_cast<int>(crc32c(id + "/master") % 2000);
  }
  c.collective = "/" + id;
  if (nodes_of(job).size() > 1 && !jv.held.empty()) {
    int rank0 = core_->fleet().device_node(jv.held.front());
    c.collective = "tcp://" + conns_[static_cast<std::size_t>(rank0)]->host + ":" +
                   std::to_string(20000 + crc32c(id) % 20000) + "/" + id;
  }
  const std::int64_t splice = jv.splice > 0 ? jv.splice : 1;
  std::int64_t k = 0;
  for (auto dev : jv.held) {
    if (core_->fleet().device_node(dev) == node) {
      LocalShare share;
      share.device = dev - core_->fleet().nodes[static_cast<std::size_t>(node)].first_device;
      for (std::int64_t r = k * splice; r < (k + 1) * splice; ++r) share.ranks.push_back(static_cast<int>(r));
      c.local.push_back(std::move(share));
    }
    ++k;
  }
  return c;
}

void Service::send(const protocol::Command& c) {
  auto* l = link(c.node);
  if (!l) return;  // the node is not connected: it reconciles when it registers again
  switch (c.kind) {
    case protocol::Command::Kind::kLaunch:
      // A launch for an incarnation that is no longer current (a decision after it is durable
      // too) would be refused by the agent anyway: only the current one goes out.
      if (c.epoch == core_->cluster().jobs[c.job].epoch) l->launch(launch_command(c.job, c.node, c.restore_step));
      break;
    case protocol::Command::Kind::kCut:
      l->checkpoint(c.job, c.epoch, c.at_step, c.then_stop);
      break;
    case protocol::Command::Kind::kStop:
      l->stop(c.job, c.epoch);
      break;
  }
}

void Service::report_stored_cut(int job) {
  const auto& jv = core_->cluster().jobs[job];
  if (!cutting(core_->state(job))) return;
  auto step = store_->latest_complete(job, jv.progress, static_cast<int>(jv.world));
  if (step < 0) return;
  protocol::Report r;
  r.kind = protocol::Report::Kind::kCutStored;
  r.job = job;
  r.epoch = jv.epoch;
  r.step = step;
  (void)protocol_->report(r, clock_.now_ms());
  driver_->settle(clock_.now_ms());
}

Result<NodeSession> Service::register_node(const std::string& name, const NodeInventory& inv,
                                           const std::vector<Incarnation>& running,
                                           std::shared_ptr<NodeLink> link_ptr, const std::string& host) {
  if (host.size() > 255 || host.find_first_of(" /\n\r\t") != std::string::npos)
    return Status::InvalidArgument("node host \"" + host + "\" is not an address");
  int n = core_->node_id(name);
  if (n < 0) return Status::NotFound("unknown node \"" + name + "\" (not in the fleet)");
  const auto& nd = core_->fleet().nodes[static_cast<std::size_t>(n)];
  if (inv.devices != nd.num_devices())
    return Status::InvalidArgument("node " + name + " brings " + std::to_string(inv.devices) +
                                   " devices, the fleet configures " + std::to_string(nd.num_devices()));
  for (int dev = nd.first_device; dev < nd.end_device; ++dev) {
    const auto& type = core_->fleet().device_types[static_cast<std::size_t>(core_->fleet().device_type(dev))];
    if (type != inv.device_type)
      return Status::InvalidArgument("node " + name + " brings devices of type \"" + inv.device_type +
                                     "\", the fleet configures \"" + type + "\"");
    if (inv.device_mem_mib < core_->fleet().device_mem(dev))
      return Status::InvalidArgument("node " + name + " brings " + std::to_string(inv.device_mem_mib) +
                                     " MiB per device, the fleet configures " +
                                     std::to_string(core_->fleet().device_mem(dev)));
  }
  if (core_->node_state(n) == NodeState::kLost) {
    fail_over(n);  // finishes if nothing is held any more
    settle();
    if (core_->node_state(n) == NodeState::kLost)
      return Status::Unavailable("node " + name + " is being failed over; register again shortly");
  }
  auto& conn = *conns_[static_cast<std::size_t>(n)];
  // One agent per node name. A second one while the first is alive (connected, heartbeating) is
  // refused, and the first one's jobs are untouched; a restarted agent gets in once the old
  // connection has ended (a killed agent's socket closes at once) or its session has expired.
  if (conn.registered) {
    const auto silent = clock_.now_ms() - conn.last_seen_ms;
    if (silent < options_.heartbeat_timeout_ms)
      return Status::AlreadyExists(
          "node " + name + " is already registered by a live agent (from " + conn.host +
          ", last heartbeat " + std::to_string(silent) + " ms ago): stop that agent first, or "
          "register once its session has expired (" +
          std::to_string(options_.heartbeat_timeout_ms) + " ms without a heartbeat)");
  }
  conn.session = next_session_++;
  conn.link = std::move(link_ptr);
  conn.host = host.empty() ? "127.0.0.1" : host;
  conn.registered = true;
  conn.last_seen_ms = clock_.now_ms();
  if (core_->node_state(n) == NodeState::kDown) {
    auto c = commit_node(spec::NodeEvent::kRegister, Origin::kRuntime, n);
    if (!c) {
      conn.registered = false;
      return c.status();
    }
  }
  // A cut taken before the core restarted may be whole in the store while the agent no longer
  // runs the incarnation (it stopped after the cut): it is committed, not aborted.
  std::set<int> held_here;
  for (int dev = nd.first_device; dev < nd.end_device; ++dev)
    if (core_->cluster().owner[dev] >= 0) held_here.insert(static_cast<int>(core_->cluster().owner[dev]));
  for (int job : held_here) {
    bool runs = std::any_of(running.begin(), running.end(), [&](const Incarnation& i) {
      return i.job == job && i.epoch == core_->cluster().jobs[job].epoch;
    });
    if (!runs) report_stored_cut(job);
  }
  std::vector<protocol::Running> runs;
  for (const auto& inc : running) runs.push_back({inc.job, inc.epoch});
  protocol_->node_registered(n, runs, clock_.now_ms());
  driver_->settle(clock_.now_ms());
  if (core_->node_state(n) == NodeState::kJoining) (void)commit_node(spec::NodeEvent::kReady, Origin::kRuntime, n);
  settle();
  return NodeSession{n, conn.session};
}

Status Service::heartbeat(const NodeSession& s) {
  if (!session_current(s)) return Status::FailedPrecondition("session superseded or not registered; register again");
  conns_[static_cast<std::size_t>(s.node)]->last_seen_ms = clock_.now_ms();
  return Status::Ok();
}

Status Service::report(const NodeSession& s, const NodeReport& r) {
  if (!session_current(s)) return Status::FailedPrecondition("session superseded or not registered; register again");
  const int n = s.node;
  const std::string& node_name = core_->fleet().nodes[static_cast<std::size_t>(n)].name;
  conns_[static_cast<std::size_t>(n)]->last_seen_ms = clock_.now_ms();
  if (r.job < 0 || r.job >= core_->num_jobs()) return Status::NotFound("unknown job " + std::to_string(r.job));
  const auto& jv = core_->cluster().jobs[r.job];
  protocol::Report p;
  p.job = r.job;
  p.epoch = r.epoch;
  p.node = n;
  p.step = r.step;
  p.gpu_ms = r.gpu_ms;
  p.detail = r.detail;
  bool stored = false;
  switch (r.kind) {
    case NodeReport::Kind::kStarted: p.kind = protocol::Report::Kind::kStarted; break;
    case NodeReport::Kind::kProgress: p.kind = protocol::Report::Kind::kProgress; break;
    case NodeReport::Kind::kCheckpointed:
      // This node's shards are in; the cut is the whole job's once every rank's shard is.
      p.kind = protocol::Report::Kind::kProgress;
      p.gpu_ms = 0;
      stored = r.epoch == jv.epoch && store_->complete(r.job, r.step, static_cast<int>(jv.world));
      break;
    case NodeReport::Kind::kStopped: p.kind = protocol::Report::Kind::kStopped; break;
    case NodeReport::Kind::kCompleted: p.kind = protocol::Report::Kind::kCompleted; break;
    case NodeReport::Kind::kCrashed:
      p.kind = protocol::Report::Kind::kCrashed;
      p.platform = r.platform;
      break;
  }
  if (r.kind == NodeReport::Kind::kCompleted && r.epoch == jv.epoch) {
    // The workload's final words are kept before Complete can be committed.
    if (auto st = persist_result(r.job, r.detail); !st) {
      view(r.job).note = st.reason();
      return st;
    }
  }
  auto st = protocol_->report(p, clock_.now_ms());
  if (!st) {
    ++rejected_reports_;
    settle();  // the stop for the refused incarnation
    return st;
  }
  if (r.kind != NodeReport::Kind::kProgress)
    emit(0, r.job, node_name,
         "node " + node_name + ": " + report_kind_name(r.kind) + " epoch " + std::to_string(r.epoch) +
             " step " + std::to_string(r.step) + (r.detail.empty() ? "" : " (" + r.detail + ")"));
  if (stored) {
    protocol::Report cut = p;
    cut.kind = protocol::Report::Kind::kCutStored;
    cut.node = -1;
    (void)protocol_->report(cut, clock_.now_ms());
  }
  settle();
  return Status::Ok();
}

Result<std::unique_ptr<ShardUpload>> Service::upload_shard(const NodeSession& s, int job,
                                                           std::int64_t epoch, std::int64_t step,
                                                           int rank, std::uint64_t size,
                                                           std::uint32_t crc) {
  if (!session_current(s)) return Status::FailedPrecondition("session superseded or not registered; register again");
  if (job < 0 || job >= core_->num_jobs()) return Status::NotFound("unknown job " + std::to_string(job));
  const auto& jv = core_->cluster().jobs[job];
  if (epoch != jv.epoch)
    return Status::FailedPrecondition("stale epoch " + std::to_string(epoch) + " for job " + std::to_string(job) +
                                      ": current epoch is " + std::to_string(jv.epoch));
  if (rank < 0 || rank >= jv.world)
    return Status::InvalidArgument("rank " + std::to_string(rank) + " out of range [0, " + std::to_string(jv.world) + ")");
  auto up = store_->begin_upload(job, step, rank, size, crc);
  if (up) ++shards_uploaded_;
  return up;
}

Result<std::unique_ptr<ShardDownload>> Service::download_shard(const NodeSession& s, int job,
                                                               std::int64_t step, int rank) {
  if (!session_current(s)) return Status::FailedPrecondition("session superseded or not registered; register again");
  if (job < 0 || job >= core_->num_jobs()) return Status::NotFound("unknown job " + std::to_string(job));
  return store_->open_download(job, step, rank);
}

void Service::command_failed(const NodeSession& s, int job, std::int64_t epoch, const std::string& what,
                             bool cut) {
  ++commands_failed_;
  if (s.node < 0 || s.node >= static_cast<int>(conns_.size())) return;
  const auto& name = core_->fleet().nodes[static_cast<std::size_t>(s.node)].name;
  std::fprintf(stderr, "orrery-core: node %s: %s\n", name.c_str(), what.c_str());
  if (job >= 0 && job < core_->num_jobs() && core_->cluster().jobs[job].epoch == epoch &&
      session_current(s)) {
    // A refused cut fails the cut (an operation's: Abort, the job restarts in place; a periodic
    // one: that checkpoint is skipped); any other refused command takes the incarnation down on
    // that node.
    protocol::Report r;
    r.kind = cut || cutting(core_->state(job)) ? protocol::Report::Kind::kCutFailed
                                               : protocol::Report::Kind::kCrashed;
    r.job = job;
    r.epoch = epoch;
    r.node = s.node;
    r.detail = what;
    (void)protocol_->report(r, clock_.now_ms());
    // In the job's timeline too (`orrery logs JOB`), as node_report does for a crash: a launch
    // refused (program not found, bad workdir) is otherwise only in the note and the core's log.
    emit(0, job, name, "node " + name + ": " + what);
  }
  settle();
}

void Service::disconnected(const NodeSession& s) {
  if (!session_current(s)) return;
  auto& c = *conns_[static_cast<std::size_t>(s.node)];
  c.registered = false;
  c.link.reset();
}

}  // namespace orrery::service
