// Opening the service (recovery from the journal), committing decisions through the protocol's
// driver, and settling: sync, then act.
#include "core/service/service.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>

#include <fcntl.h>
#include <unistd.h>

#include "core/policy/entered_times.h"
#include "core/policy/type_speed.h"
#include "core/service/service_internal.h"

namespace orrery::service {

namespace fs = std::filesystem;
using spec::EventKind;
using spec::JobState;
using spec::NodeState;
using spec::Origin;

Service::Service(ServiceOptions options, const core::Clock& clock)
    : options_(std::move(options)), clock_(clock) {
  if (options_.user_checkpoint_root.empty() && !options_.data_dir.empty())
    options_.user_checkpoint_root = options_.data_dir + "/user-checkpoints";
}
Service::~Service() = default;

namespace {

// DATA/cluster_id, made once.
Result<std::string> cluster_id(const std::string& data_dir) {
  const std::string path = data_dir + "/cluster_id";
  std::string id;
  std::ifstream in(path);
  std::getline(in, id);
  if (id.size() == 16 && id.find_first_not_of("0123456789abcdef") == std::string::npos) return id;
  std::random_device rd;
  char buf[17];
  std::snprintf(buf, sizeof buf, "%08x%08x", rd(), rd());
  id = buf;
  std::ofstream out(path, std::ios::trunc);
  out << id << "\n";
  if (!out.flush()) return Status::Internal("cannot write " + path);
  return id;
}

}  // namespace

Result<std::unique_ptr<Service>> Service::open(const ServiceOptions& options,
                                               std::optional<core::Fleet> fleet,
                                               const core::Clock& clock) {
  if (options.heartbeat_timeout_ms < 50)
    return Status::InvalidArgument("heartbeat timeout must be at least 50 ms");
  std::error_code ec;
  fs::create_directories(options.data_dir + "/jobs", ec);
  if (ec)
    return Status::Internal("cannot create data directory " + options.data_dir + ": " + ec.message());
  std::unique_ptr<Service> s(new Service(options, clock));
  auto id = cluster_id(options.data_dir);
  if (!id) return id.status();
  s->cluster_id_ = *id;
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
      return Status::InvalidArgument("the fleet file differs from the fleet recorded in " + path +
                                     "; start without --fleet or with the same fleet");
  } else if (!fleet) {
    return Status::InvalidArgument("no journal in " + options.data_dir +
                                   " and no fleet given (--fleet FILE)");
  } else if (fs::exists(path, ec)) {
    fs::remove(path, ec);  // an empty journal file from an interrupted first start
  }
  auto journal = core::JournalWriter::open(path, options.journal);
  if (!journal) return journal.status();
  s->journal_ = std::move(*journal);
  core::policy::EnteredTimes entered;  // the planner's clocks of each job's wait and run go on
  if (exists) {
    Service* self = s.get();
    auto core = core::SchedulerCore::recover(
        records, clock, s->journal_.get(),
        [self, &entered](const core::SchedulerCore& c, const core::Committed& cm, const core::Decision& d) {
          ClusterEvent e;
          e.seq = cm.seq;
          e.time_ms = cm.time_ms;
          e.job = cm.job;
          e.text = job_str(cm.job) + " " + c.job_info(cm.job).name + " " +
                   std::string(spec::state_name(cm.from)) + " -> " +
                   std::string(spec::state_name(cm.to)) + ": " + d.describe();
          self->timeline_.push_back(e);
          auto& log = self->view(cm.job).log;  // `orrery logs JOB` from the journal's timeline on
          log.push_back(e.text);
          if (log.size() > 1000) log.pop_front();
          // The journaled times are this clock's unless they are boot-relative (an older
          // orrery-core's, client_api.h) and this clock's are not: then they say nothing here.
          const bool same_clock = cm.time_ms >= kWallClockFloorMs || self->clock_.now_ms() < kWallClockFloorMs;
          if (d.event == EventKind::kSubmit) {
            self->remember_spec(cm.job, d);
            // The Submit's time is when the job was submitted, for its age after a restart.
            if (same_clock) self->view(cm.job).submitted_ms = cm.time_ms;
          }
          entered.replayed(c, cm, d, same_clock);  // for Planner::job_recovered
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
    if (auto st = s->core_->sync(); !st) return st;
    s->recovery_summary_ = "new journal " + path;
  }
  s->fit_ = std::make_unique<core::FleetFit>(s->core_->fleet());
  protocol::Timeouts timeouts;
  timeouts.cut_ms = options.cut_timeout_ms;
  timeouts.launch_ms = options.launch_timeout_ms;
  timeouts.progress_every_ms = options.progress_every_ms;
  s->protocol_ = std::make_unique<protocol::Protocol>(*s->core_, timeouts);
  s->driver_ = std::make_unique<protocol::Driver>(*s->core_, *s->protocol_, *s);
  s->placer_ = std::make_unique<core::policy::GangPlacer>(*s->core_);
  s->placer_->set_one_node_gangs(options.one_node_gangs);
  if (auto st = core::policy::check_type_speed(s->core_->fleet(), options.type_speed); !st) return st;
  core::policy::PlannerOptions planner_options;
  planner_options.type_speed = options.type_speed;
  planner_options.one_node_gangs = options.one_node_gangs;
  s->planner_ = core::policy::make_planner(options.policy, planner_options);
  if (!s->planner_) return Status::InvalidArgument("unknown policy \"" + options.policy + "\"");
  for (int j = 0; j < s->core_->num_jobs(); ++j) s->planner_->job_recovered(*s->core_, j, entered.since(j), entered.waited(j));
  s->conns_.resize(s->core_->fleet().nodes.size());
  for (auto& c : s->conns_) c = std::make_unique<NodeConn>();
  s->started_ms_ = clock.now_ms();
  s->protocol_->recover(s->started_ms_);
  for (int j = 0; j < s->core_->num_jobs(); ++j) {
    auto& v = s->view(j);
    auto st = s->core_->state(j);
    if (st == JobState::kCompleted) {
      std::ifstream result(options.data_dir + "/jobs/job-" + std::to_string(j) + ".result");
      std::string line;
      if (std::getline(result, line)) v.note = line.empty() ? "completed" : "completed: " + line;
    }
    if (st != JobState::kCompleted && st != JobState::kFailed && st != JobState::kCancelled) {
      s->active_.insert(j);
      if (v.have_spec)
        s->protocol_->set_checkpoint_policy(j, {v.spec.checkpoint_every, v.spec.steps});
    }
  }
  return s;
}

// The job spec a Submit carried (journaled whole), as the client API shows it.
void Service::remember_spec(int job, const core::Decision& d) {
  auto& v = view(job);
  v.spec.name = d.name;
  v.spec.tier = d.tier;
  v.spec.device_type = d.device_type;
  v.spec.world = d.world;
  v.spec.min_devices = d.min_devices;
  v.spec.max_devices = d.max_devices;
  v.spec.mem_mib = d.mem_mib;
  v.spec.tenant = d.tenant;
  v.spec.command = d.command;
  v.spec.env.clear();
  for (const auto& e : d.env) {
    auto eq = e.find('=');
    v.spec.env.emplace_back(e.substr(0, eq), eq == std::string::npos ? "" : e.substr(eq + 1));
  }
  v.spec.workdir = d.workdir;
  v.spec.preemption = d.mode;
  v.spec.grace_ms = d.grace_ms;
  v.spec.min_runtime_ms = d.min_runtime_ms;
  v.spec.steps = d.steps;
  v.spec.checkpoint_every = d.checkpoint_every;
  v.have_spec = true;
}

Service::JobView& Service::view(int job) {
  auto& p = views_[job];
  if (!p) p = std::make_unique<JobView>();
  return *p;
}

// The workload's final words (loss, digest of the weights), kept beside the journal so that they
// survive a restart of the core: written before Complete is committed, read back only for jobs
// the journal says completed.
Status Service::persist_result(int job, const std::string& detail) {
  std::string line = detail;
  for (auto& ch : line)
    if (ch == '\n') ch = ' ';
  return write_durably(options_.data_dir + "/jobs/job-" + std::to_string(job) + ".result", line + "\n");
}

// Writes `text` to `path` atomically: a temporary file, fsync, rename.
Status Service::write_durably(const std::string& path, const std::string& text) {
  std::string tmp = path + ".tmp";
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) return Status::Internal("cannot write " + tmp);
  bool ok = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()) &&
            ::fsync(fd) == 0;
  ::close(fd);
  if (!ok || std::rename(tmp.c_str(), path.c_str()) != 0)
    return Status::Internal("cannot write " + path);
  return Status::Ok();
}

// --- committing and acting -------------------------------------------------------------------

void Service::emit(std::uint64_t seq, int job, const std::string& node, const std::string& text) {
  ClusterEvent e;
  e.seq = seq;
  e.time_ms = clock_.now_ms();
  e.job = job;
  e.node = node;
  e.text = text;
  pending_events_.push_back(e);
  if (job >= 0 && text.find(": Progress job ") == std::string::npos) {  // progress: timeline only
    auto& log = view(job).log;
    log.push_back(text);
    if (log.size() > 1000) log.pop_front();
  }
}

Result<core::Committed> Service::commit(const core::Decision& d) {
  auto c = driver_->commit(d, clock_.now_ms());
  driver_->settle(clock_.now_ms());
  take_notes();
  return c;
}

void Service::committed(const core::Committed& c, const core::Decision& d) {
  planner_->job_changed(*core_, c.job);
  if (c.to == JobState::kCompleted || c.to == JobState::kFailed || c.to == JobState::kCancelled)
    active_.erase(c.job);
  if (d.event == EventKind::kAbort) ++aborted_;
  emit(c.seq, c.job, "",
       job_str(c.job) + " " + core_->job_info(c.job).name + " " +
           std::string(spec::state_name(c.from)) + " -> " + std::string(spec::state_name(c.to)) +
           ": " + d.describe() +
           (d.origin == Origin::kCore ? " (core timeout)" : ""));
}

void Service::refused(const core::Decision& d, const Status&) {
  if (d.origin == Origin::kPlanner) ++planner_rejected_;
}

// The protocol's notes: the NOTE of `orrery ls`, and each one also a line of the job's timeline
// (`orrery logs JOB`, `orrery watch`), so that every failure's origin and the budget it spent stay
// readable after the next note replaces it.
void Service::take_notes() {
  for (auto& [job, text] : protocol_->take_notes()) {
    if (!text.empty() && job >= 0 && job < core_->num_jobs())
      emit(0, job, "", job_str(job) + " " + core_->job_info(job).name + ": " + text);
    view(job).note = std::move(text);
  }
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

void Service::settle() {
  driver_->settle(clock_.now_ms());
  take_notes();
  // Act only on durable decisions: sync first. A failed sync leaves the commands queued (nothing
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
  for (const auto& c : protocol_->take_commands(core_->durable_seq())) send(c);
}

void Service::detach_transport() {
  watchers_.clear();
  for (auto& c : conns_) {
    c->link.reset();
    c->registered = false;
  }
}

}  // namespace orrery::service
