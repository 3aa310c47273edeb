#include "core/service/service.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include <fcntl.h>
#include <unistd.h>

#include "base/crc32c.h"
#include "core/policy/preemption.h"
#include "spec/guards.h"

namespace orrery::service {

namespace fs = std::filesystem;
using spec::EventKind;
using spec::JobState;
using spec::NodeState;
using spec::Origin;

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

namespace {

bool holds_devices(JobState s) {
  return s == JobState::kPlaced || s == JobState::kRunning || s == JobState::kCheckpointing ||
         s == JobState::kMigrating || s == JobState::kRestoring;
}

std::string job_str(int job) { return "job " + std::to_string(job); }

}  // namespace

// ---------------------------------------------------------------------------------------------

struct Service::Track {
  JobSpec spec;
  bool have_spec = false;
  std::int64_t submitted_ms = -1;
  std::int64_t epoch = -1;  // the incarnation the sets below are about
  std::set<int> nodes;      // nodes of that incarnation's placement
  std::set<int> started, completed;
  std::map<int, std::int64_t> node_step;
  std::int64_t gpu_ms = 0;  // reported since the last committed Progress
  enum class Cut { kNone, kPeriodic, kPreempt, kMigrate, kResize } cut = Cut::kNone;
  int beneficiary = -1;                 // kPreempt
  std::optional<std::string> migrate_to;  // kMigrate
  std::vector<std::int64_t> migrate_devices;  // kMigrate by the planner: the devices it chose
  std::set<int> cut_nodes;              // nodes asked to cut
  std::set<int> old_nodes;              // kResize: the nodes before the resize
  std::set<int> stop_expected;          // nodes whose Stopped report a cut explains
  std::int64_t cut_since_ms = 0;  // when the pending cut was asked for
  std::int64_t last_progress_ms = -(std::int64_t{1} << 40);  // last Progress committed from reports
  int relaunches = 0;  // relaunches of the current epoch (resize, refused preemption): each one
                       // gets its own collective name, the same on every node
  spec::Origin cut_origin = spec::Origin::kOperator;
  std::int64_t ckpt_requested_at = -1;  // kPeriodic: progress when asked
  std::string note;
  std::deque<std::string> log;
};

struct Service::NodeConn {
  std::uint64_t session = 0;
  std::string host = "127.0.0.1";  // where other nodes reach it (TCP collectives), once registered
  std::shared_ptr<NodeLink> link;
  std::int64_t last_seen_ms = -1;  // -1: never (this run)
  bool registered = false;
};

Service::Service(ServiceOptions options, const core::Clock& clock)
    : options_(std::move(options)), clock_(clock) {}
Service::~Service() = default;

Result<std::unique_ptr<Service>> Service::open(const ServiceOptions& options,
                                               std::optional<core::Fleet> fleet,
                                               const core::Clock& clock) {
  if (options.heartbeat_timeout_ms < 50)
    return Status::Error("heartbeat timeout must be at least 50 ms");
  std::error_code ec;
  fs::create_directories(options.data_dir + "/jobs", ec);
  if (ec) return Status::Error("cannot create data directory " + options.data_dir + ": " + ec.message());
  std::unique_ptr<Service> s(new Service(options, clock));
  {
    const std::string id_path = options.data_dir + "/cluster_id";
    std::ifstream in(id_path);
    std::getline(in, s->cluster_id_);
    const bool valid = s->cluster_id_.size() == 16 &&
                       s->cluster_id_.find_first_not_of("0123456789abcdef") == std::string::npos;
    if (!valid) {
      std::random_device rd;
      char buf[17];
      std::snprintf(buf, sizeof buf, "%08x%08x", rd(), rd());
      s->cluster_id_ = buf;
      std::ofstream out(id_path, std::ios::trunc);
      out << s->cluster_id_ << "\n";
      if (!out.flush()) return Status::Error("cannot write " + id_path);
    }
  }
  auto store = CheckpointStore::open(options.data_dir + "/checkpoints");
  if (!store) return store.status();
  s->store_ = std::move(*store);
  std::string path = options.data_dir + "/journal";
  bool exists = fs::exists(path, ec);
  std::vector<std::string> records;
  if (exists) {
    auto contents = core::read_journal(path);
    if (!contents) return contents.status();
    records = std::move(contents->records);
    if (records.empty()) exists = false;  // created but never written: start fresh
  }
  if (exists) {
    auto jfleet = core::fleet_of_journal(records);
    if (!jfleet) return jfleet.status();
    if (fleet && fleet->to_text() != jfleet->to_text())
      return Status::Error("the fleet file differs from the fleet recorded in " + path +
                           "; start without --fleet or with the same fleet");
  } else if (!fleet) {
    return Status::Error("no journal in " + options.data_dir + " and no fleet given (--fleet FILE)");
  } else if (fs::exists(path, ec)) {
    fs::remove(path, ec);  // an empty journal file from an interrupted first start
  }
  auto journal = core::JournalWriter::open(path, options.journal);
  if (!journal) return journal.status();
  s->journal_ = std::move(*journal);
  if (exists) {
    Service* self = s.get();
    auto core = core::SchedulerCore::recover(
        records, clock, s->journal_.get(),
        [self](const core::SchedulerCore& c, const core::Committed& cm, const core::Decision& d) {
          ClusterEvent e;
          e.seq = cm.seq;
          e.time_ms = cm.time_ms;
          e.job = cm.job;
          e.text = job_str(cm.job) + " " + c.job_info(cm.job).name + " " +
                   std::string(spec::state_name(cm.from)) + " -> " +
                   std::string(spec::state_name(cm.to)) + ": " + d.describe();
          self->timeline_.push_back(e);
        });
    if (!core) return core.status();
    s->core_ = std::move(*core);
    s->recovery_summary_ = "recovered " + std::to_string(records.size() - 1) + " decisions, " +
                           std::to_string(s->core_->num_jobs()) + " jobs from " + path;
    if (!s->journal_->recovered_tail_error().empty())
      s->recovery_summary_ += " (torn tail cut: " + s->journal_->recovered_tail_error() + ")";
  } else {
    auto core = core::SchedulerCore::create(std::move(*fleet), clock, s->journal_.get());
    if (!core) return core.status();
    s->core_ = std::move(*core);
    auto st = s->core_->sync();
    if (!st) return st;
    s->recovery_summary_ = "new journal " + path;
  }
  s->placer_ = std::make_unique<core::policy::GangPlacer>(*s->core_);
  s->planner_ = core::policy::make_planner(options.policy);
  if (!s->planner_) return Status::Error("unknown policy \"" + options.policy + "\"");
  for (int j = 0; j < s->core_->num_jobs(); ++j) s->planner_->job_changed(*s->core_, j);
  s->conns_.resize(s->core_->fleet().nodes.size());
  for (auto& c : s->conns_) c = std::make_unique<NodeConn>();
  s->started_ms_ = clock.now_ms();
  s->load_specs();
  for (int j = 0; j < s->core_->num_jobs(); ++j) {
    s->track(j);
    auto st = s->core_->state(j);
    if (st != JobState::kCompleted && st != JobState::kFailed && st != JobState::kCancelled)
      s->active_.insert(j);
  }
  return s;
}

// --- persistence of job specs and results ---------------------------------------------------

Status Service::persist_spec(int job, const JobSpec& sp) {
  std::ostringstream o;
  o << "name=" << sp.name << "\ntier=" << spec::tier_name(sp.tier)
    << "\ndevice_type=" << sp.device_type << "\nworld=" << sp.world
    << "\nmin_devices=" << sp.min_devices << "\nmax_devices=" << sp.max_devices
    << "\nmem_mib=" << sp.mem_mib << "\nworkload=" << sp.workload << "\nsteps=" << sp.steps
    << "\ncheckpoint_every=" << sp.checkpoint_every << "\ntenant=" << sp.tenant << "\n";
  for (const auto& a : sp.args) o << "arg=" << a << "\n";
  return write_durably(options_.data_dir + "/jobs/job-" + std::to_string(job) + ".spec", o.str());
}

// The workload's final words (loss, digest of the weights), kept beside the spec so that they
// survive a restart of the core: written before Complete is committed, read back only for jobs
// the journal says completed.
Status Service::persist_result(int job, const std::string& detail) {
  std::string line = detail;
  std::replace(line.begin(), line.end(), '\n', ' ');
  return write_durably(options_.data_dir + "/jobs/job-" + std::to_string(job) + ".result", line + "\n");
}

// Writes `text` to `path` atomically: a temporary file, fsync, rename.
Status Service::write_durably(const std::string& path, const std::string& text) {
  std::string tmp = path + ".tmp";
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) return Status::Error("cannot write " + tmp);
  bool ok = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()) &&
            ::fsync(fd) == 0;
  ::close(fd);
  if (!ok || std::rename(tmp.c_str(), path.c_str()) != 0)
    return Status::Error("cannot write " + path);
  return Status::Ok();
}

void Service::load_specs() {
  for (int j = 0; j < core_->num_jobs(); ++j) {
    std::ifstream in(options_.data_dir + "/jobs/job-" + std::to_string(j) + ".spec");
    if (!in) continue;
    auto& t = track(j);
    std::string line;
    while (std::getline(in, line)) {
      auto eq = line.find('=');
      if (eq == std::string::npos) continue;
      std::string k = line.substr(0, eq), v = line.substr(eq + 1);
      auto num = [&](std::int64_t& out) {
        try { out = std::stoll(v); } catch (...) {}
      };
      if (k == "name") t.spec.name = v;
      else if (k == "tier") t.spec.tier = spec::parse_tier(v).value_or(spec::Tier::kStandard);
      else if (k == "device_type") t.spec.device_type = v;
      else if (k == "world") num(t.spec.world);
      else if (k == "min_devices") num(t.spec.min_devices);
      else if (k == "max_devices") num(t.spec.max_devices);
      else if (k == "mem_mib") num(t.spec.mem_mib);
      else if (k == "workload") t.spec.workload = v;
      else if (k == "steps") num(t.spec.steps);
      else if (k == "checkpoint_every") num(t.spec.checkpoint_every);
      else if (k == "arg") t.spec.args.push_back(v);
      else if (k == "tenant") t.spec.tenant = v;
    }
    t.have_spec = true;
    std::ifstream result(options_.data_dir + "/jobs/job-" + std::to_string(j) + ".result");
    if (core_->state(j) == JobState::kCompleted && std::getline(result, line))
      t.note = line.empty() ? "completed" : "completed: " + line;
  }
}

// --- committing and acting -------------------------------------------------------------------

Service::Track& Service::track(int job) {
  auto& p = tracks_[job];
  if (!p) p = std::make_unique<Track>();
  return *p;
}

void Service::emit(std::uint64_t seq, int job, const std::string& node, const std::string& text) {
  ClusterEvent e;
  e.seq = seq;
  e.time_ms = clock_.now_ms();
  e.job = job;
  e.node = node;
  e.text = text;
  pending_events_.push_back(e);
  if (job >= 0 && text.find(": Progress job ") == std::string::npos) {  // progress: timeline only
    auto& log = track(job).log;
    log.push_back(text);
    if (log.size() > 1000) log.pop_front();
  }
}

Result<core::Committed> Service::commit(const core::Decision& d) {
  JobState from = d.event == EventKind::kSubmit ? JobState::kNew : core_->state(static_cast<int>(d.job));
  auto c = core_->commit(d);
  if (!c) {
    if (d.origin == Origin::kPlanner) ++planner_rejected_;
    return c;
  }
  planner_->job_changed(*core_, c->job);
  emit(c->seq, c->job, "",
       job_str(c->job) + " " + core_->job_info(c->job).name + " " +
           std::string(spec::state_name(from)) + " -> " + std::string(spec::state_name(c->to)) +
           ": " + d.describe());
  return c;
}

Result<core::Committed> Service::commit_node(spec::NodeEvent e, Origin origin, int node) {
  core::NodeDecision d{e, origin, node};
  NodeState from = core_->node_state(node);
  auto c = core_->commit_node(d);
  if (!c) return c;
  const auto& name = core_->fleet().nodes[static_cast<std::size_t>(node)].name;
  emit(c->seq, -1, name,
       "node " + name + " " + std::string(spec::node_state_name(from)) + " -> " +
           std::string(spec::node_state_name(c->node_to)) + ": " +
           std::string(spec::node_event_name(e)));
  return c;
}

void Service::after_durable(std::function<void()> action) { actions_.push_back(std::move(action)); }

void Service::settle() {
  // Act only on durable decisions: sync first. A failed sync leaves the actions queued (nothing
  // is acted on that could be lost); the next settle() tries again.
  if (core_->durable_seq() < core_->committed()) {
    auto st = core_->sync();
    if (!st) {
      std::fprintf(stderr, "orrery-core: journal sync failed: %s\n", st.reason().c_str());
      return;
    }
  }
  auto events = std::move(pending_events_);
  pending_events_.clear();
  for (auto& e : events) {
    if (e.seq > 0) timeline_.push_back(e);
    for (std::size_t i = 0; i < watchers_.size();) {
      if (watchers_[i](e)) ++i;
      else watchers_.erase(watchers_.begin() + static_cast<long>(i));
    }
  }
  while (!actions_.empty()) {
    auto actions = std::move(actions_);
    actions_.clear();
    for (auto& a : actions) a();
  }
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

std::set<int> Service::nodes_of(int job) const {
  std::set<int> out;
  for (auto dev : core_->cluster().jobs[job].held) out.insert(core_->fleet().device_node(dev));
  return out;
}

std::vector<std::pair<int, LaunchCommand>> Service::launches(int job, std::int64_t restore_step) const {
  const auto& jv = core_->cluster().jobs[job];
  const auto& t = *tracks_.at(job);
  std::vector<std::pair<int, LaunchCommand>> out;
  std::map<int, std::size_t> by_node;
  // The incarnation's collective, the same on every node: a shared-memory name when the job is on
  // one node; else a TCP hub on rank 0's node (its registered host) at a port derived from the name.
  std::string id = "orrery-" + cluster_id_ + "-job" + std::to_string(job) + "-epoch" + std::to_string(jv.epoch) +
                   (t.relaunches ? "-r" + std::to_string(t.relaunches) : "");
  std::string collective = "/" + id;
  if (nodes_of(job).size() > 1 && !jv.held.empty()) {
    int rank0 = core_->fleet().device_node(jv.held.front());
    collective = "tcp://" + conns_[static_cast<std::size_t>(rank0)]->host + ":" +
                 std::to_string(20000 + crc32c(id) % 20000) + "/" + id;
  }
  std::int64_t splice = jv.splice > 0 ? jv.splice : 1;
  int k = 0;
  for (auto dev : jv.held) {  // sorted: device k of the placement runs ranks [k*splice, (k+1)*splice)
    int node = core_->fleet().device_node(dev);
    auto it = by_node.find(node);
    if (it == by_node.end()) {
      LaunchCommand c;
      c.job = job;
      c.epoch = jv.epoch;
      c.world = static_cast<int>(jv.world);
      c.workload = t.spec.workload.empty() ? "mlp" : t.spec.workload;
      c.args = t.spec.args;
      c.args.push_back("--steps=" + std::to_string(t.spec.steps));
      c.restore_step = restore_step;
      // A shared-memory style name ("/..."), the same on every node of the incarnation.
      c.collective = collective;
      by_node[node] = out.size();
      out.emplace_back(node, std::move(c));
      it = by_node.find(node);
    }
    LocalShare share;
    share.device = dev - core_->fleet().nodes[static_cast<std::size_t>(node)].first_device;
    for (std::int64_t r = k * splice; r < (k + 1) * splice; ++r) share.ranks.push_back(static_cast<int>(r));
    out[it->second].second.local.push_back(std::move(share));
    ++k;
  }
  return out;
}

void Service::begin_incarnation(int job) {
  auto& t = track(job);
  t.relaunches = 0;
  t.epoch = core_->cluster().jobs[job].epoch;
  t.nodes = nodes_of(job);
  t.started.clear();
  t.completed.clear();
  t.node_step.clear();
  t.gpu_ms = 0;
  t.cut = Track::Cut::kNone;
  t.cut_nodes.clear();
  t.old_nodes.clear();
}

void Service::send_launches(int job, std::int64_t restore_step, bool relaunch) {
  // The commands are computed now, from the state the decisions just committed, and sent once
  // those decisions are durable.
  auto cmds = launches(job, restore_step);
  std::vector<std::pair<int, LaunchCommand>> leaving;
  if (relaunch) {
    std::set<int> targeted;
    for (auto& [n, c] : cmds) targeted.insert(n);
    for (int n : track(job).old_nodes)
      if (!targeted.count(n)) {
        LaunchCommand c;  // empty share: the node leaves the job
        c.job = job;
        c.epoch = core_->cluster().jobs[job].epoch;
        c.world = static_cast<int>(core_->cluster().jobs[job].world);
        c.restore_step = restore_step;
        leaving.emplace_back(n, std::move(c));
      }
    track(job).old_nodes.clear();
  }
  after_durable([this, cmds = std::move(cmds), leaving = std::move(leaving), relaunch] {
    for (const auto& [n, c] : cmds)
      if (auto* l = link(n)) {
        if (relaunch) l->relaunch(c);
        else l->launch(c);
      }
    for (const auto& [n, c] : leaving)
      if (auto* l = link(n)) l->relaunch(c);
  });
}

void Service::send_stop_all(int job, std::int64_t epoch, const std::set<int>& nodes) {
  for (int n : nodes)
    if (auto* l = link(n)) l->stop(job, epoch);
}

void Service::send_cut(int job) {
  auto& t = track(job);
  t.cut_since_ms = clock_.now_ms();
  t.cut_nodes = t.nodes;
  if (t.cut != Track::Cut::kPeriodic) t.stop_expected = t.nodes;
  std::int64_t epoch = t.epoch;
  std::set<int> nodes = t.nodes;
  bool stop = t.cut != Track::Cut::kPeriodic;
  after_durable([this, job, epoch, nodes, stop] {
    for (int n : nodes)
      if (auto* l = link(n)) l->checkpoint(job, epoch, -1, stop);
  });
}

Status Service::ensure_progress(int job, std::int64_t step) {
  const auto& jv = core_->cluster().jobs[job];
  if (jv.progress >= step) return Status::Ok();
  core::Decision d;
  d.event = EventKind::kProgress;
  d.origin = Origin::kRuntime;
  d.job = job;
  d.step = step;
  d.gpu_ms = track(job).gpu_ms;
  auto c = commit(d);
  if (!c) return c.status();
  track(job).gpu_ms = 0;
  return Status::Ok();
}

void Service::crash(int job, const std::string& why) {
  if (!holds_devices(core_->state(job))) return;
  auto& t = track(job);
  std::int64_t epoch = core_->cluster().jobs[job].epoch;
  std::set<int> nodes = nodes_of(job);
  core::Decision d;
  d.event = EventKind::kWorkerCrash;
  d.origin = Origin::kRuntime;
  d.job = job;
  auto c = commit(d);
  if (!c) return;
  t.note = why;
  t.cut = Track::Cut::kNone;
  after_durable([this, job, epoch, nodes] { send_stop_all(job, epoch, nodes); });
}

// --- client API ------------------------------------------------------------------------------

Result<int> Service::submit(const JobSpec& spec) {
  if (auto st = validate_job_spec(spec); !st) return st;
  if (core_->fleet().type_id(spec.device_type) < 0) {
    std::string types;
    for (const auto& t : core_->fleet().device_types) types += (types.empty() ? "" : ", ") + t;
    return Status::Error("unknown device type \"" + spec.device_type + "\" (the fleet has: " + types + ")");
  }
  int id = core_->num_jobs();
  if (auto st = persist_spec(id, spec); !st) return st;
  core::Decision d;
  d.event = EventKind::kSubmit;
  d.origin = Origin::kOperator;
  d.name = spec.name;
  d.tier = spec.tier;
  d.device_type = spec.device_type;
  d.world = spec.world;
  d.min_devices = spec.min_devices;
  d.max_devices = spec.max_devices;
  d.mem_mib = spec.mem_mib;
  d.tenant = spec.tenant;
  auto c = commit(d);
  if (!c) {
    std::remove((options_.data_dir + "/jobs/job-" + std::to_string(id) + ".spec").c_str());
    return c.status();
  }
  auto& t = track(c->job);
  active_.insert(c->job);
  t.spec = spec;
  t.have_spec = true;
  t.submitted_ms = clock_.now_ms();
  settle();
  if (core_->durable_seq() < c->seq) return Status::Error("job accepted but the journal could not be synced");
  return c->job;
}

Status Service::cancel(int job) {
  if (job < 0 || job >= core_->num_jobs()) return Status::Error("unknown job " + std::to_string(job));
  std::int64_t epoch = core_->cluster().jobs[job].epoch;
  std::set<int> nodes = nodes_of(job);
  core::Decision d;
  d.event = EventKind::kCancel;
  d.origin = Origin::kOperator;
  d.job = job;
  auto c = commit(d);
  if (!c) return c.status();
  track(job).cut = Track::Cut::kNone;
  after_durable([this, job, epoch, nodes] { send_stop_all(job, epoch, nodes); });
  settle();
  return Status::Ok();
}

Result<std::vector<JobStatus>> Service::jobs() {
  std::vector<JobStatus> out;
  std::int64_t now = clock_.now_ms();
  for (int j = 0; j < core_->num_jobs(); ++j) {
    const auto& jv = core_->cluster().jobs[j];
    const auto& t = track(j);
    JobStatus s;
    s.job = j;
    s.name = core_->job_info(j).name;
    s.tenant = core_->tenant_name(core_->job_info(j).tenant);
    s.tier = static_cast<spec::Tier>(jv.tier);
    s.state = core_->state(j);
    s.epoch = jv.epoch;
    s.world = jv.world;
    s.devices = jv.devices;
    s.splice = jv.splice;
    s.progress = jv.progress;
    s.steps = t.spec.steps;
    s.checkpoint = jv.ckpt;
    for (int n : nodes_of(j)) s.nodes.push_back(core_->fleet().nodes[static_cast<std::size_t>(n)].name);
    s.age_ms = t.submitted_ms >= 0 ? now - t.submitted_ms : 0;
    s.note = t.note;
    out.push_back(std::move(s));
  }
  return out;
}

Result<std::vector<NodeStatus>> Service::nodes() {
  std::vector<NodeStatus> out;
  std::int64_t now = clock_.now_ms();
  for (std::size_t n = 0; n < core_->fleet().nodes.size(); ++n) {
    NodeStatus s;
    s.name = core_->fleet().nodes[n].name;
    s.state = core_->node_state(static_cast<int>(n));
    s.devices = core_->fleet().nodes[n].num_devices();
    s.held = static_cast<int>(core_->cluster().node_held[n]);
    s.heartbeat_age_ms = conns_[n]->last_seen_ms >= 0 ? now - conns_[n]->last_seen_ms : -1;
    out.push_back(std::move(s));
  }
  return out;
}

int Service::pick_beneficiary(int victim) const {
  // The most favoured waiting job the spec lets `victim` be preempted for: dry-run GuardPreempt.
  std::vector<int> waiting;
  for (int j : active_) {
    auto s = core_->state(j);
    if (j != victim && (s == JobState::kQueued || s == JobState::kSuspended)) waiting.push_back(j);
  }
  std::sort(waiting.begin(), waiting.end(), [&](int a, int b) {
    const auto& ja = core_->cluster().jobs[a];
    const auto& jb = core_->cluster().jobs[b];
    if (ja.tier != jb.tier) return ja.tier < jb.tier;
    return ja.attained < jb.attained;
  });
  for (int b : waiting) {
    core::Decision d;
    d.event = EventKind::kPreempt;
    d.origin = Origin::kOperator;
    d.job = victim;
    d.beneficiary = b;
    auto p = core_->params_for(d);
    if (!p) continue;
    bool ok = true;
    for (const auto& cl : spec::GuardPreempt::clauses(spec::Concrete{}, core_->cluster(), victim, *p))
      ok = ok && cl.holds;
    if (ok) return b;
  }
  return -1;
}

// An operator's explicit beneficiary of a preemption or shrink: a job that waits for devices (the
// spec's guards say the rest, clause by clause).
Status Service::check_beneficiary(int b) const {
  if (b >= core_->num_jobs()) return Status::Error("unknown beneficiary job " + std::to_string(b));
  auto st = core_->state(b);
  if (!spec::waiting_state(spec::Concrete{}, static_cast<std::int64_t>(st)))
    return Status::Error("job " + std::to_string(b) + " is " + std::string(spec::state_name(st)) +
                         ", not waiting: devices are freed only for a Queued or Suspended job");
  return Status::Ok();
}

Status Service::preempt(int job, int beneficiary) {
  if (job < 0 || job >= core_->num_jobs()) return Status::Error("unknown job " + std::to_string(job));
  if (core_->state(job) != JobState::kRunning)
    return Status::Error(job_str(job) + " is " + std::string(spec::state_name(core_->state(job))) +
                         ", only a Running job can be preempted");
  auto& t = track(job);
  if (t.cut != Track::Cut::kNone)
    return Status::Error(job_str(job) + " is being checkpointed (periodic, preemption, migration or resize); retry shortly");
  if (beneficiary < 0) {
    beneficiary = pick_beneficiary(job);
    if (beneficiary < 0)
      return Status::Error("no waiting job that " + job_str(job) +
                           " may be preempted for (a preemption needs a favoured waiting job: INV-TIER)");
  } else {
    if (auto st = check_beneficiary(beneficiary); !st) return st;
    core::Decision d;
    d.event = EventKind::kPreempt;
    d.origin = Origin::kOperator;
    d.job = job;
    d.beneficiary = beneficiary;
    auto p = core_->params_for(d);
    if (!p) return p.status();
    for (const auto& cl : spec::GuardPreempt::clauses(spec::Concrete{}, core_->cluster(), job, *p))
      if (!cl.holds)
        return Status::Error("preempting " + job_str(job) + " for job " + std::to_string(beneficiary) +
                             " is refused: " + std::string(cl.name) + " does not hold");
  }
  // The spec commits Preempt then CheckpointDone at the job's committed step, so the cut is taken
  // first and both are committed once every shard of it is in the store (on_cut_done).
  t.cut = Track::Cut::kPreempt;
  t.cut_origin = Origin::kOperator;
  t.beneficiary = beneficiary;
  t.note = "preempting for job " + std::to_string(beneficiary);
  send_cut(job);
  settle();
  return Status::Ok();
}

std::optional<core::Decision> Service::migrate_decision(int job, const std::optional<std::string>& to,
                                                        std::string* why) const {
  if (!to) {
    auto p = placer_->propose(job, EventKind::kMigrate);
    if (p.kind != core::policy::Proposal::Kind::kOk) {
      *why = p.why;
      return std::nullopt;
    }
    return p.decision;
  }
  int node = core_->node_id(*to);
  if (node < 0) {
    *why = "unknown node \"" + *to + "\"";
    return std::nullopt;
  }
  const auto& jv = core_->cluster().jobs[job];
  const auto& nd = core_->fleet().nodes[static_cast<std::size_t>(node)];
  core::Decision d;
  d.event = EventKind::kMigrate;
  d.origin = Origin::kOperator;
  d.job = job;
  d.step = jv.progress;
  d.splice = jv.splice;
  for (int dev = nd.first_device; dev < nd.end_device && static_cast<std::int64_t>(d.devices.size()) < jv.devices; ++dev) {
    const auto& cl = core_->cluster();
    if (cl.owner[dev] == -1 && (cl.resv_for[dev] == -1 || cl.resv_for[dev] == job) &&
        core_->fleet().device_type(dev) == jv.dtype)
      d.devices.push_back(dev);
  }
  if (static_cast<std::int64_t>(d.devices.size()) < jv.devices) {
    *why = "node " + *to + " has " + std::to_string(d.devices.size()) + " free devices of the job's type, it needs " +
           std::to_string(jv.devices);
    return std::nullopt;
  }
  return d;
}

Status Service::migrate(int job, std::optional<std::string> to_node) {
  if (job < 0 || job >= core_->num_jobs()) return Status::Error("unknown job " + std::to_string(job));
  if (core_->state(job) != JobState::kRunning)
    return Status::Error(job_str(job) + " is " + std::string(spec::state_name(core_->state(job))) +
                         ", only a Running job can be migrated");
  auto& t = track(job);
  if (t.cut != Track::Cut::kNone)
    return Status::Error(job_str(job) + " is being checkpointed (periodic, preemption, migration or resize); retry shortly");
  std::string why;
  if (!migrate_decision(job, to_node, &why)) return Status::Error("cannot migrate " + job_str(job) + ": " + why);
  t.cut = Track::Cut::kMigrate;
  t.cut_origin = Origin::kOperator;
  t.migrate_to = to_node;
  t.note = "migrating";
  send_cut(job);
  settle();
  return Status::Ok();
}

Status Service::resize(int job, int devices, int beneficiary) {
  if (job < 0 || job >= core_->num_jobs()) return Status::Error("unknown job " + std::to_string(job));
  if (core_->state(job) != JobState::kRunning)
    return Status::Error(job_str(job) + " is " + std::string(spec::state_name(core_->state(job))) +
                         ", only a Running job can be resized");
  auto& t = track(job);
  if (t.cut != Track::Cut::kNone)
    return Status::Error(job_str(job) + " is being checkpointed; resize it afterwards");
  const auto& jv = core_->cluster().jobs[job];
  if (devices < jv.min_dev || devices > jv.max_dev)
    return Status::Error("devices must be within the job's elastic range [" + std::to_string(jv.min_dev) +
                         ", " + std::to_string(jv.max_dev) + "], got " + std::to_string(devices));
  if (devices == jv.devices) return Status::Error(job_str(job) + " already holds " + std::to_string(devices) + " devices");
  if (jv.world % devices != 0 || jv.world / devices > spec::kSpliceLimit)
    return Status::Error("world " + std::to_string(jv.world) + " does not split evenly over " +
                         std::to_string(devices) + " devices within the splice limit");
  core::Decision d;
  if (devices > jv.devices) {
    auto p = placer_->propose(job, EventKind::kResizeUp, devices);
    if (p.kind != core::policy::Proposal::Kind::kOk) return Status::Error("cannot grow " + job_str(job) + ": " + p.why);
    if (static_cast<int>(p.decision.devices.size()) != devices)
      return Status::Error("cannot grow " + job_str(job) + " to " + std::to_string(devices) + " devices: only " +
                           std::to_string(p.decision.devices.size()) + " fit");
    d = p.decision;
    d.origin = Origin::kOperator;
  } else {
    if (beneficiary < 0) {
      for (int b : active_) {
        auto s = core_->state(b);
        if (b != job && (s == JobState::kQueued || s == JobState::kSuspended)) {
          beneficiary = b;
          break;
        }
      }
      if (beneficiary < 0) return Status::Error("shrinking needs a waiting job to give the devices to; none waits");
    } else if (auto st = check_beneficiary(beneficiary); !st) {
      return st;
    }
    d.event = EventKind::kResizeDown;
    d.origin = Origin::kOperator;
    d.job = job;
    d.beneficiary = beneficiary;
    d.splice = jv.world / devices;
    d.devices.assign(jv.held.begin(), jv.held.begin() + devices);
  }
  auto old_nodes = nodes_of(job);
  auto c = commit(d);
  if (!c) return c.status();
  // Same incarnation, new placement: the runtime re-splices by a checkpoint-and-stop cut and a
  // relaunch of every node's new share from it (same epoch).
  t.cut = Track::Cut::kResize;
  t.old_nodes = old_nodes;
  t.nodes = old_nodes;
  send_cut(job);
  settle();
  return Status::Ok();
}

Status Service::drain(const std::string& node) {
  int n = core_->node_id(node);
  if (n < 0) return Status::Error("unknown node \"" + node + "\"");
  auto c = commit_node(spec::NodeEvent::kDrain, Origin::kOperator, n);
  if (!c) return c.status();
  settle();
  return Status::Ok();
}

Status Service::undrain(const std::string& node) {
  int n = core_->node_id(node);
  if (n < 0) return Status::Error("unknown node \"" + node + "\"");
  auto c = commit_node(spec::NodeEvent::kUndrain, Origin::kOperator, n);
  if (!c) return c.status();
  settle();
  return Status::Ok();
}

Status Service::watch(std::uint64_t after_seq, const std::function<bool(const ClusterEvent&)>& on_event) {
  for (const auto& e : timeline_)
    if (e.seq > after_seq && !on_event(e)) return Status::Ok();
  watchers_.push_back(on_event);
  return Status::Ok();
}

Result<std::vector<std::string>> Service::logs(int job, int max_lines) {
  if (job < 0 || job >= core_->num_jobs()) return Status::Error("unknown job " + std::to_string(job));
  if (max_lines < 0) return Status::Error("max_lines must be >= 0");
  const auto& log = track(job).log;
  std::vector<std::string> out;
  std::size_t from = log.size() > static_cast<std::size_t>(max_lines) ? log.size() - max_lines : 0;
  for (std::size_t i = from; i < log.size(); ++i) out.push_back(log[i]);
  if (out.empty() && max_lines > 0) {
    // After a restart the log starts from the journal's timeline.
    for (const auto& e : timeline_)
      if (e.job == job) out.push_back(e.text);
    if (out.size() > static_cast<std::size_t>(max_lines)) out.erase(out.begin(), out.end() - max_lines);
  }
  return out;
}

// --- node side -------------------------------------------------------------------------------

Result<NodeSession> Service::register_node(const std::string& name, const NodeInventory& inv,
                                           const std::vector<Incarnation>& running,
                                           std::shared_ptr<NodeLink> link_ptr, const std::string& host) {
  if (host.size() > 255 || host.find_first_of(" /\n\r\t") != std::string::npos)
    return Status::Error("node host \"" + host + "\" is not an address");
  int n = core_->node_id(name);
  if (n < 0) return Status::Error("unknown node \"" + name + "\" (not in the fleet)");
  const auto& nd = core_->fleet().nodes[static_cast<std::size_t>(n)];
  if (inv.devices != nd.num_devices())
    return Status::Error("node " + name + " brings " + std::to_string(inv.devices) +
                         " devices, the fleet configures " + std::to_string(nd.num_devices()));
  for (int dev = nd.first_device; dev < nd.end_device; ++dev) {
    const auto& type = core_->fleet().device_types[static_cast<std::size_t>(core_->fleet().device_type(dev))];
    if (type != inv.device_type)
      return Status::Error("node " + name + " brings devices of type \"" + inv.device_type +
                           "\", the fleet configures \"" + type + "\"");
    if (inv.device_mem_mib < core_->fleet().device_mem(dev))
      return Status::Error("node " + name + " brings " + std::to_string(inv.device_mem_mib) +
                           " MiB per device, the fleet configures " +
                           std::to_string(core_->fleet().device_mem(dev)));
  }
  if (core_->node_state(n) == NodeState::kLost) {
    fail_over(n);  // finishes if nothing is held any more
    settle();
    if (core_->node_state(n) == NodeState::kLost)
      return Status::Error("node " + name + " is being failed over; register again shortly");
  }
  auto& conn = *conns_[static_cast<std::size_t>(n)];
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
  // Reconciliation: adopt the current incarnations on this node, stop the rest.
  std::set<int> runs_current;
  for (const auto& inc : running) {
    bool adopt = inc.job >= 0 && inc.job < core_->num_jobs() &&
                 inc.epoch == core_->cluster().jobs[inc.job].epoch &&
                 holds_devices(core_->state(inc.job)) && nodes_of(inc.job).count(n);
    if (!adopt) {
      int job = inc.job;
      std::int64_t epoch = inc.epoch;
      after_durable([this, n, job, epoch] {
        if (auto* l = link(n)) l->stop(job, epoch);
      });
      continue;
    }
    runs_current.insert(inc.job);
    auto& t = track(inc.job);
    if (t.epoch != inc.epoch) begin_incarnation(inc.job);
    t.started.insert(n);
  }
  std::set<int> held_here;
  for (int dev = nd.first_device; dev < nd.end_device; ++dev)
    if (core_->cluster().owner[dev] >= 0) held_here.insert(static_cast<int>(core_->cluster().owner[dev]));
  for (int job : held_here) {
    if (runs_current.count(job)) continue;
    auto st = core_->state(job);
    auto& t = track(job);
    if (t.epoch != core_->cluster().jobs[job].epoch) begin_incarnation(job);
    if (st == JobState::kRunning) {
      crash(job, "node " + name + " registered without its workers");
    } else if (holds_devices(st)) {
      // Launched (or about to be) but not running here: send this node its share again.
      auto restore = core_->cluster().jobs[job].ckpt;
      for (auto& [node, c] : launches(job, st == JobState::kPlaced && restore < 0 ? -1 : restore))
        if (node == n)
          after_durable([this, n, c = c] {
            if (auto* l = link(n)) l->launch(c);
          });
    }
  }
  for (int job : runs_current) {
    auto& t = track(job);
    bool all = std::includes(t.started.begin(), t.started.end(), t.nodes.begin(), t.nodes.end());
    if (!all) continue;
    core::Decision d;
    d.origin = Origin::kRuntime;
    d.job = job;
    if (core_->state(job) == JobState::kPlaced) d.event = EventKind::kStart;
    else if (core_->state(job) == JobState::kRestoring || core_->state(job) == JobState::kMigrating)
      d.event = EventKind::kRestoreDone;
    else continue;
    (void)commit(d);
  }
  if (core_->node_state(n) == NodeState::kJoining) (void)commit_node(spec::NodeEvent::kReady, Origin::kRuntime, n);
  settle();
  return NodeSession{n, conn.session};
}

Status Service::heartbeat(const NodeSession& s) {
  if (!session_current(s)) return Status::Error("session superseded or not registered; register again");
  conns_[static_cast<std::size_t>(s.node)]->last_seen_ms = clock_.now_ms();
  return Status::Ok();
}

Status Service::report(const NodeSession& s, const NodeReport& r) {
  if (!session_current(s)) return Status::Error("session superseded or not registered; register again");
  int n = s.node;
  const std::string& node_name = core_->fleet().nodes[static_cast<std::size_t>(n)].name;
  conns_[static_cast<std::size_t>(n)]->last_seen_ms = clock_.now_ms();
  if (r.job < 0 || r.job >= core_->num_jobs()) return Status::Error("unknown job " + std::to_string(r.job));
  const auto& jv = core_->cluster().jobs[r.job];
  auto& t = track(r.job);
  auto state = core_->state(r.job);
  auto refuse = [&](const std::string& why) {
    ++rejected_reports_;
    int job = r.job;
    std::int64_t epoch = r.epoch;
    after_durable([this, n, job, epoch] {
      if (auto* l = link(n)) l->stop(job, epoch);
    });
    settle();
    return Status::Error(why);
  };
  if (r.epoch != jv.epoch)
    return refuse("stale epoch " + std::to_string(r.epoch) + " for job " + std::to_string(r.job) +
                  ": current epoch is " + std::to_string(jv.epoch));
  if (!holds_devices(state))
    return refuse(job_str(r.job) + " is " + std::string(spec::state_name(state)) +
                  ": its incarnation " + std::to_string(r.epoch) + " must not run");
  if (!t.nodes.count(n) && !t.old_nodes.count(n) && !nodes_of(r.job).count(n))
    return refuse(job_str(r.job) + " is not placed on node " + node_name);
  if (t.epoch != jv.epoch) begin_incarnation(r.job);
  std::string line = "node " + node_name + ": " + report_kind_name(r.kind) + " epoch " +
                     std::to_string(r.epoch) + " step " + std::to_string(r.step) +
                     (r.detail.empty() ? "" : " (" + r.detail + ")");
  if (r.kind != NodeReport::Kind::kProgress) emit(0, r.job, node_name, line);
  switch (r.kind) {
    case NodeReport::Kind::kStarted: {
      t.started.insert(n);
      t.stop_expected.erase(n);
      if (std::includes(t.started.begin(), t.started.end(), t.nodes.begin(), t.nodes.end())) {
        core::Decision d;
        d.origin = Origin::kRuntime;
        d.job = r.job;
        if (state == JobState::kPlaced) d.event = EventKind::kStart;
        else if (state == JobState::kRestoring || state == JobState::kMigrating) d.event = EventKind::kRestoreDone;
        else break;
        auto c = commit(d);
        if (!c) t.note = c.reason();
      }
      break;
    }
    case NodeReport::Kind::kProgress: {
      if (r.gpu_ms > 0 && r.gpu_ms < (std::int64_t{1} << 40)) t.gpu_ms += r.gpu_ms;
      auto& ns = t.node_step[n];
      ns = std::max(ns, r.step);
      if (state != JobState::kRunning) break;
      std::int64_t m = -1;
      for (int node : t.nodes) {
        auto it = t.node_step.find(node);
        if (it == t.node_step.end()) { m = -1; break; }
        m = m < 0 ? it->second : std::min(m, it->second);
      }
      // Progress is committed at most once a second per job from reports (every cut, checkpoint
      // and completion commits it exactly where it is needed): a journal record per report would
      // grow the journal by tens of records a second per job for nothing.
      if (m > jv.progress && clock_.now_ms() - t.last_progress_ms >= options_.progress_every_ms) {
        (void)ensure_progress(r.job, m);
        t.last_progress_ms = clock_.now_ms();
      }
      break;
    }
    case NodeReport::Kind::kCheckpointed:
      if (store_->complete(r.job, r.step, static_cast<int>(jv.world))) on_checkpointed(r.job, r.step);
      break;
    case NodeReport::Kind::kStopped:
      if (t.stop_expected.count(n)) break;  // the cut (or a relaunch) explains it
      if (state == JobState::kRunning && t.cut == Track::Cut::kNone && t.nodes.count(n)) {
        // A stop nobody here asked for: a cut requested before this core restarted. When that
        // cut is stored and committed, the incarnation carries on from it (relaunched at the same
        // epoch on every node); otherwise it is a crash.
        if (jv.ckpt == r.step && store_->complete(r.job, r.step, static_cast<int>(jv.world))) {
          relaunch_same(r.job, r.step, "stopped after the checkpoint of step " + std::to_string(r.step) +
                                           " by an earlier request; resumed from it");
          t.stop_expected = t.nodes;
        } else {
          crash(r.job, "node " + node_name + " stopped the job unasked");
        }
      }
      break;
    case NodeReport::Kind::kCompleted: {
      t.completed.insert(n);
      if (state == JobState::kRunning &&
          std::includes(t.completed.begin(), t.completed.end(), t.nodes.begin(), t.nodes.end())) {
        if (auto st = ensure_progress(r.job, r.step); !st) {
          t.note = st.reason();
          break;
        }
        if (auto st = persist_result(r.job, r.detail); !st) {
          t.note = st.reason();
          break;
        }
        core::Decision d;
        d.event = EventKind::kComplete;
        d.origin = Origin::kRuntime;
        d.job = r.job;
        auto c = commit(d);
        if (c) t.note = r.detail.empty() ? "completed" : "completed: " + r.detail;
        else t.note = c.reason();
      }
      break;
    }
    case NodeReport::Kind::kCrashed:
      crash(r.job, "node " + node_name + ": " + (r.detail.empty() ? "worker crashed" : r.detail));
      break;
  }
  settle();
  return Status::Ok();
}

void Service::on_checkpointed(int job, std::int64_t step) {
  auto& t = track(job);
  const auto& jv = core_->cluster().jobs[job];
  if (core_->state(job) != JobState::kRunning) return;
  if (t.cut == Track::Cut::kPreempt || t.cut == Track::Cut::kMigrate || t.cut == Track::Cut::kResize) {
    on_cut_done(job, step);
    return;
  }
  t.cut = Track::Cut::kNone;
  if (step <= jv.ckpt) return;
  if (auto st = ensure_progress(job, step); !st) {
    t.note = "checkpoint at step " + std::to_string(step) + " not committed: " + st.reason();
    return;
  }
  core::Decision d;
  d.event = EventKind::kCheckpoint;
  d.origin = Origin::kRuntime;
  d.job = job;
  d.step = step;
  auto c = commit(d);
  if (!c) t.note = c.reason();
}

void Service::relaunch_same(int job, std::int64_t step, const std::string& why) {
  auto& t = track(job);
  t.cut = Track::Cut::kNone;
  t.note = why;
  t.started.clear();
  t.node_step.clear();
  ++t.relaunches;
  send_launches(job, step, false);
}

void Service::on_cut_done(int job, std::int64_t step) {
  auto& t = track(job);
  if (auto st = ensure_progress(job, step); !st) {
    crash(job, "cut at step " + std::to_string(step) + " not committed: " + st.reason());
    return;
  }
  auto cut = t.cut;
  if (cut == Track::Cut::kPreempt) {
    core::Decision d;
    d.event = EventKind::kPreempt;
    d.origin = t.cut_origin;
    d.job = job;
    d.beneficiary = t.beneficiary;
    auto c = commit(d);
    if (!c) {
      relaunch_same(job, step, "preemption refused (" + c.reason() + "); resumed from step " + std::to_string(step));
      return;
    }
    core::Decision done;
    done.event = EventKind::kCheckpointDone;
    done.origin = Origin::kRuntime;
    done.job = job;
    done.step = step;
    auto c2 = commit(done);
    if (!c2) {
      crash(job, "preemption checkpoint not committed: " + c2.reason());
      return;
    }
    t.cut = Track::Cut::kNone;
    t.note = "suspended for job " + std::to_string(t.beneficiary);
    return;
  }
  if (cut == Track::Cut::kMigrate) {
    std::string why;
    std::optional<core::Decision> d;
    if (!t.migrate_devices.empty()) {  // the planner's devices (defragmentation), if still free
      core::Decision p;
      p.event = EventKind::kMigrate;
      p.origin = Origin::kPlanner;
      p.job = job;
      p.step = core_->cluster().jobs[job].progress;
      p.devices = std::move(t.migrate_devices);
      p.splice = core_->cluster().jobs[job].world / static_cast<std::int64_t>(p.devices.size());
      t.migrate_devices.clear();
      if (core_->accepts(p)) d = std::move(p);
    }
    if (!d) d = migrate_decision(job, t.migrate_to, &why);
    if (d) {
      d->origin = t.cut_origin;
      auto c = commit(*d);
      if (c) {
        begin_incarnation(job);
        t.note = "";
        send_launches(job, step, false);
        return;
      }
      why = c.reason();
    }
    relaunch_same(job, step, "migration not possible (" + why + "); resumed in place from step " + std::to_string(step));
    return;
  }
  if (cut == Track::Cut::kResize) {
    t.cut = Track::Cut::kNone;
    t.nodes = nodes_of(job);
    t.started.clear();
    t.node_step.clear();
    ++t.relaunches;
    send_launches(job, step, true);
  }
}

Result<std::unique_ptr<ShardUpload>> Service::upload_shard(const NodeSession& s, int job,
                                                           std::int64_t epoch, std::int64_t step,
                                                           int rank, std::uint64_t size,
                                                           std::uint32_t crc) {
  if (!session_current(s)) return Status::Error("session superseded or not registered; register again");
  if (job < 0 || job >= core_->num_jobs()) return Status::Error("unknown job " + std::to_string(job));
  const auto& jv = core_->cluster().jobs[job];
  if (epoch != jv.epoch)
    return Status::Error("stale epoch " + std::to_string(epoch) + " for job " + std::to_string(job) +
                         ": current epoch is " + std::to_string(jv.epoch));
  if (rank < 0 || rank >= jv.world)
    return Status::Error("rank " + std::to_string(rank) + " out of range [0, " + std::to_string(jv.world) + ")");
  auto up = store_->begin_upload(job, step, rank, size, crc);
  if (up) ++shards_uploaded_;
  return up;
}

Result<std::unique_ptr<ShardDownload>> Service::download_shard(const NodeSession& s, int job,
                                                               std::int64_t step, int rank) {
  if (!session_current(s)) return Status::Error("session superseded or not registered; register again");
  if (job < 0 || job >= core_->num_jobs()) return Status::Error("unknown job " + std::to_string(job));
  return store_->open_download(job, step, rank);
}

void Service::command_failed(const NodeSession& s, int job, std::int64_t epoch, const std::string& what) {
  ++commands_failed_;
  if (s.node < 0 || s.node >= static_cast<int>(conns_.size())) return;
  const auto& name = core_->fleet().nodes[static_cast<std::size_t>(s.node)].name;
  std::fprintf(stderr, "orrery-core: node %s: %s\n", name.c_str(), what.c_str());
  if (job >= 0 && job < core_->num_jobs() && core_->cluster().jobs[job].epoch == epoch &&
      session_current(s))
    crash(job, "node " + name + ": " + what);
  settle();
}

void Service::disconnected(const NodeSession& s) {
  if (!session_current(s)) return;
  auto& c = *conns_[static_cast<std::size_t>(s.node)];
  c.registered = false;
  c.link.reset();
}

// --- planner loop ----------------------------------------------------------------------------

void Service::fail_over(int n) {
  const auto& nd = core_->fleet().nodes[static_cast<std::size_t>(n)];
  if (core_->node_state(n) != NodeState::kLost) {
    auto c = commit_node(spec::NodeEvent::kHeartbeatLost, Origin::kRuntime, n);
    if (!c) return;
    auto& conn = *conns_[static_cast<std::size_t>(n)];
    conn.registered = false;
    conn.link.reset();
  }
  std::set<int> jobs;
  for (int dev = nd.first_device; dev < nd.end_device; ++dev)
    if (core_->cluster().owner[dev] >= 0) jobs.insert(static_cast<int>(core_->cluster().owner[dev]));
  for (int job : jobs) {
    std::int64_t epoch = core_->cluster().jobs[job].epoch;
    auto nodes = nodes_of(job);
    nodes.erase(n);
    core::Decision d;
    d.event = EventKind::kNodeLoss;
    d.origin = Origin::kRuntime;
    d.job = job;
    auto c = commit(d);
    if (!c) continue;
    auto& t = track(job);
    t.note = "node " + nd.name + " lost; restarting from checkpoint " +
             std::to_string(core_->cluster().jobs[job].ckpt);
    t.cut = Track::Cut::kNone;
    after_durable([this, job, epoch, nodes] { send_stop_all(job, epoch, nodes); });
  }
  if (core_->cluster().node_held[static_cast<std::size_t>(n)] == 0)
    (void)commit_node(spec::NodeEvent::kFailedOver, Origin::kRuntime, n);
}

void Service::monitor_heartbeats() {
  std::int64_t now = clock_.now_ms();
  for (int n = 0; n < static_cast<int>(conns_.size()); ++n) {
    auto st = core_->node_state(n);
    if (st == NodeState::kLost) {
      fail_over(n);
      continue;
    }
    if (st != NodeState::kJoining && st != NodeState::kUp && st != NodeState::kDraining) continue;
    auto last = conns_[static_cast<std::size_t>(n)]->last_seen_ms;
    if (last < 0) last = started_ms_;
    if (now - last > options_.heartbeat_timeout_ms) fail_over(n);
  }
}

void Service::plan() {
  // Only jobs not yet finished: a tick costs O(live jobs), however many finished ones the journal
  // holds.
  std::vector<int> live;
  for (auto it = active_.begin(); it != active_.end();) {
    auto s = core_->state(*it);
    if (s == JobState::kCompleted || s == JobState::kFailed || s == JobState::kCancelled) {
      it = active_.erase(it);
      continue;
    }
    live.push_back(*it);
    ++it;
  }
  // What only the runtime knows about: cuts not stored in time, nodes being drained, periodic
  // checkpoints. Placement, admission, preemption, shrinking and growth are the planner's.
  for (int j : live) {
    auto& t = track(j);
    auto state = core_->state(j);
    const auto& jv = core_->cluster().jobs[j];
    if (state == JobState::kRunning && t.cut != Track::Cut::kNone &&
        clock_.now_ms() - t.cut_since_ms > options_.cut_timeout_ms) {
      crash(j, "checkpoint cut not stored within " + std::to_string(options_.cut_timeout_ms) + " ms");
      continue;
    }
    if (state != JobState::kRunning || t.cut != Track::Cut::kNone || !started_everywhere(j)) continue;
    bool draining = false;
    for (int n : nodes_of(j))
      if (core_->node_state(n) == NodeState::kDraining) draining = true;
    std::string why;
    if (draining) {
      if (migrate_decision(j, std::nullopt, &why)) {
        t.cut = Track::Cut::kMigrate;
        t.cut_origin = Origin::kPlanner;
        t.migrate_to.reset();
        t.note = "migrating off a draining node";
        send_cut(j);
      } else {
        t.note = "on a draining node, nowhere to migrate: " + why;
      }
      continue;
    }
    // Periodic checkpoints follow the reported step (committed progress may lag by a second).
    std::int64_t reported = jv.progress;
    if (!t.nodes.empty()) {
      std::int64_t m = -1;
      for (int node : t.nodes) {
        auto it = t.node_step.find(node);
        if (it == t.node_step.end()) { m = -1; break; }
        m = m < 0 ? it->second : std::min(m, it->second);
      }
      reported = std::max(reported, m);
    }
    if (t.spec.checkpoint_every > 0 && reported > t.ckpt_requested_at &&
        reported - std::max<std::int64_t>(jv.ckpt, 0) >= t.spec.checkpoint_every &&
        reported < t.spec.steps) {
      t.cut = Track::Cut::kPeriodic;
      t.ckpt_requested_at = reported;
      send_cut(j);
    }
  }
  PlanLink link(this);
  planner_->plan(*core_, link);
}

bool Service::started_everywhere(int job) {
  auto& t = track(job);
  return std::includes(t.started.begin(), t.started.end(), t.nodes.begin(), t.nodes.end());
}

// The planner's proposals, carried out the runtime's way: placements are committed and launched
// once durable; a preemption or migration takes its checkpoint cut first and is committed when the
// cut is stored (on_cut_done); a resize is committed, then re-spliced by a cut and a relaunch.
bool Service::PlanLink::propose(const core::Decision& d) {
  Service& s = *s_;
  const int j = static_cast<int>(d.job);
  auto& t = s.track(j);
  switch (d.event) {
    case EventKind::kAdmit: {
      auto c = s.commit(d);
      if (!c) t.note = "not admitted: " + c.reason();
      return c.ok();
    }
    case EventKind::kPlace:
    case EventKind::kResume: {
      auto c = s.commit(d);
      if (!c) {
        t.note = c.reason();
        return false;
      }
      s.begin_incarnation(j);
      t.note = "";
      s.send_launches(j, s.core_->cluster().jobs[j].ckpt, false);
      return true;
    }
    case EventKind::kPreempt:
    case EventKind::kMigrate: {
      if (s.core_->state(j) != JobState::kRunning || t.cut != Track::Cut::kNone || !s.started_everywhere(j))
        return false;
      if (d.event == EventKind::kPreempt) {
        t.cut = Track::Cut::kPreempt;
        t.beneficiary = static_cast<int>(d.beneficiary);
        t.note = "preempting for job " + std::to_string(d.beneficiary);
      } else {
        t.cut = Track::Cut::kMigrate;
        t.migrate_to.reset();
        t.migrate_devices = d.devices;
        t.note = "migrating";
      }
      t.cut_origin = Origin::kPlanner;
      s.send_cut(j);
      return true;
    }
    case EventKind::kResizeUp:
    case EventKind::kResizeDown: {
      if (t.cut != Track::Cut::kNone || !s.started_everywhere(j)) return false;
      auto old_nodes = s.nodes_of(j);
      auto c = s.commit(d);
      if (!c) return false;
      t.cut = Track::Cut::kResize;
      t.old_nodes = old_nodes;
      t.nodes = old_nodes;
      s.send_cut(j);
      return true;
    }
    default:
      ++s.planner_rejected_;
      return false;
  }
}

bool Service::PlanLink::cut_pending(int job) const {
  auto& t = s_->track(job);
  return t.cut != Track::Cut::kNone ||
         (s_->core_->state(job) == JobState::kRunning && !s_->started_everywhere(job));
}

void Service::PlanLink::note(int job, const std::string& why) { s_->track(job).note = why; }

void Service::tick() {
  monitor_heartbeats();
  plan();
  settle();
}

void Service::detach_transport() {
  watchers_.clear();
  for (auto& c : conns_) {
    c->link.reset();
    c->registered = false;
  }
}

// --- metrics ---------------------------------------------------------------------------------

std::string Service::metrics_text() const {
  std::ostringstream o;
  std::map<std::pair<int, int>, int> per;  // (state, tier) -> jobs
  for (int j = 0; j < core_->num_jobs(); ++j)
    ++per[{static_cast<int>(core_->state(j)), static_cast<int>(core_->cluster().jobs[j].tier)}];
  o << "# HELP orrery_jobs Jobs by lifecycle state and service tier.\n# TYPE orrery_jobs gauge\n";
  for (int s = 0; s < spec::kNumJobStates; ++s)
    for (int t = 0; t < spec::kNumTiers; ++t) {
      auto it = per.find({s, t});
      o << "orrery_jobs{state=\"" << spec::state_name(static_cast<JobState>(s)) << "\",tier=\""
        << spec::tier_name(static_cast<spec::Tier>(t)) << "\"} " << (it == per.end() ? 0 : it->second) << "\n";
    }
  o << "# HELP orrery_decisions_committed_total Decisions committed (job and node), since the journal began.\n"
    << "# TYPE orrery_decisions_committed_total counter\n"
    << "orrery_decisions_committed_total " << core_->committed() << "\n";
  o << "# HELP orrery_decisions_rejected_total Decisions the spec guards rejected, since this start.\n"
    << "# TYPE orrery_decisions_rejected_total counter\n"
    << "orrery_decisions_rejected_total " << core_->rejected() << "\n";
  o << "# HELP orrery_planner_decisions_rejected_total Planner proposals rejected (policy bugs).\n"
    << "# TYPE orrery_planner_decisions_rejected_total counter\n"
    << "orrery_planner_decisions_rejected_total " << planner_rejected_ << "\n";
  o << "# HELP orrery_journal_durability_lag Committed decisions not yet durable.\n"
    << "# TYPE orrery_journal_durability_lag gauge\n"
    << "orrery_journal_durability_lag " << (core_->committed() - core_->durable_seq()) << "\n";
  std::map<int, int> ns;
  for (int n = 0; n < static_cast<int>(conns_.size()); ++n) ++ns[static_cast<int>(core_->node_state(n))];
  o << "# HELP orrery_nodes Nodes by lifecycle state.\n# TYPE orrery_nodes gauge\n";
  for (int s = 0; s < spec::kNumNodeStates; ++s)
    o << "orrery_nodes{state=\"" << spec::node_state_name(static_cast<NodeState>(s)) << "\"} " << ns[s] << "\n";
  o << "# HELP orrery_reports_rejected_total Node reports refused (stale epoch, job not placed there).\n"
    << "# TYPE orrery_reports_rejected_total counter\n"
    << "orrery_reports_rejected_total " << rejected_reports_ << "\n";
  o << "# HELP orrery_checkpoint_shard_uploads_total Checkpoint shard uploads started.\n"
    << "# TYPE orrery_checkpoint_shard_uploads_total counter\n"
    << "orrery_checkpoint_shard_uploads_total " << shards_uploaded_ << "\n";
  o << "# HELP orrery_node_commands_failed_total Commands a node refused or could not receive.\n"
    << "# TYPE orrery_node_commands_failed_total counter\n"
    << "orrery_node_commands_failed_total " << commands_failed_ << "\n";
  return o.str();
}

}  // namespace orrery::service
