// The client API's submissions, cancellations and queries.
#include <algorithm>

#include "core/fleet_fit.h"
#include "core/service/service.h"
#include "core/service/service_internal.h"

namespace orrery::service {

using spec::EventKind;
using spec::JobState;
using spec::Origin;

Result<int> Service::submit(const JobSpec& spec) {
  if (auto st = validate_job_spec(spec); !st) return st;
  // One device type, or several in order of preference ("A|B": a planner may run it on any).
  const auto types = core_->fleet().type_ids(spec.device_type);
  if (!types) {
    std::string known;
    for (const auto& t : core_->fleet().device_types) known += (known.empty() ? "" : ", ") + t;
    return Status::InvalidArgument("device_type \"" + spec.device_type + "\": " + types.reason() +
                                   " (the fleet has: " + known + ")");
  }
  // A spec no placement on this fleet could ever satisfy (on any of its types) is refused now,
  // naming the limit (of its first type), rather than left Queued forever. Of several types, those
  // that can never hold it are left out: it is submitted with the first that can.
  core::FitRequest fit;
  fit.world = spec.world;
  fit.min_devices = spec.min_devices;
  fit.max_devices = spec.max_devices;
  fit.mem_mib = spec.mem_mib;
  fit.mode = spec.preemption;
  fit.one_node = options_.one_node_gangs;
  Status first_limit = Status::Ok();
  std::string usable;
  for (int type : *types) {
    fit.dtype = type;
    auto fits = fit_->fits(fit);
    if (fits.ok()) usable += (usable.empty() ? "" : "|") + core_->fleet().device_types[static_cast<std::size_t>(type)];
    else if (first_limit.ok()) first_limit = fits;
  }
  if (usable.empty())
    return Status::InvalidArgument("the job can never be placed on this fleet: " + first_limit.reason());
  // The whole spec is journaled with the Submit: the journal alone rebuilds every job.
  core::Decision d = core::Decision::submit(spec.name, spec.tier, usable, spec.world,
                                            spec.min_devices, spec.max_devices, spec.mem_mib,
                                            spec.tenant);
  d.mode = spec.preemption;
  d.command = spec.command;
  for (const auto& [k, v] : spec.env) d.env.push_back(k + "=" + v);
  d.workdir = spec.workdir;
  d.grace_ms = spec.grace_ms;
  d.min_runtime_ms = spec.min_runtime_ms;
  d.steps = spec.steps;
  d.checkpoint_every = spec.checkpoint_every;
  auto c = commit(d);
  if (!c) return c.status();
  remember_spec(c->job, d);
  auto& v = view(c->job);
  active_.insert(c->job);
  v.submitted_ms = clock_.now_ms();
  protocol_->set_checkpoint_policy(c->job, {spec.checkpoint_every, spec.steps});
  settle();
  if (core_->durable_seq() < c->seq)
    return Status::Unavailable("job accepted but the journal could not be synced");
  return c->job;
}

Status Service::cancel(int job) {
  if (job < 0 || job >= core_->num_jobs()) return Status::NotFound("unknown job " + std::to_string(job));
  core::Decision d;
  d.event = EventKind::kCancel;
  d.origin = Origin::kOperator;
  d.job = job;
  auto c = commit(d);
  if (!c) return Status::FailedPrecondition(c.reason());
  settle();
  return Status::Ok();
}

std::set<int> Service::nodes_of(int job) const {
  std::set<int> out;
  for (auto dev : core_->cluster().jobs[job].held) out.insert(core_->fleet().device_node(dev));
  return out;
}

Result<std::vector<JobStatus>> Service::jobs() {
  std::vector<JobStatus> out;
  std::int64_t now = clock_.now_ms();
  for (int j = 0; j < core_->num_jobs(); ++j) {
    const auto& jv = core_->cluster().jobs[j];
    const auto& v = view(j);
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
    // A signal or requeue program reports no steps: its progress is unknown, not 0 of N.
    s.steps = v.spec.preemption == spec::Preemption::kTransparent ? v.spec.steps : 0;
    s.checkpoint = jv.ckpt;
    for (int n : nodes_of(j)) s.nodes.push_back(core_->fleet().nodes[static_cast<std::size_t>(n)].name);
    s.age_ms = v.submitted_ms >= 0 ? std::max<std::int64_t>(now - v.submitted_ms, 0) : -1;
    s.note = v.note;
    s.device_type = core_->device_type(j);
    if (jv.spare != 0 && spec::admitted_state(spec::Concrete{}, jv.state))
      s.note = "spare: admitted beyond the premium reserve, no guarantee" +
               (v.note.empty() ? "" : "; " + v.note);
    if (jv.hold != 0 && !spec::terminal_state(spec::Concrete{}, jv.state))
      s.note = "held: suspended by an operator; `orrery resume " + std::to_string(j) +
               "` releases it" + (v.note.empty() ? "" : " (" + v.note + ")");
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

Status Service::watch(std::uint64_t after_seq, const std::function<bool(const ClusterEvent&)>& on_event) {
  for (const auto& e : timeline_)
    if (e.seq > after_seq && !on_event(e)) return Status::Ok();
  watchers_.push_back(on_event);
  return Status::Ok();
}

Result<std::vector<std::string>> Service::logs(int job, int max_lines) {
  if (job < 0 || job >= core_->num_jobs()) return Status::NotFound("unknown job " + std::to_string(job));
  if (max_lines < 0) return Status::InvalidArgument("max_lines must be >= 0");
  const auto& log = view(job).log;
  std::vector<std::string> out;
  std::size_t from = log.size() > static_cast<std::size_t>(max_lines) ? log.size() - max_lines : 0;
  // (After a restart the log starts with the journal's timeline: Service::open.)
  for (std::size_t i = from; i < log.size(); ++i) out.push_back(log[i]);
  return out;
}

}  // namespace orrery::service
