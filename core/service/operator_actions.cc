// The operator's requests through the client API: preempt, suspend, resume, migrate, resize,
// drain. Each is one decision (origin operator) committed through the spec's guards; the runtime's
// work that carries it out happens inside the state it enters (Checkpointing, Migrating,
// Resizing), as the protocol commands, and ends with CheckpointDone or an Abort.
#include <algorithm>

#include "core/service/service.h"
#include "core/service/service_internal.h"
#include "spec/guards.h"

namespace orrery::service {

using spec::EventKind;
using spec::JobState;
using spec::Origin;

Status Service::check_running_idle(int job, const char* what) const {
  if (job < 0 || job >= core_->num_jobs()) return Status::NotFound("unknown job " + std::to_string(job));
  if (core_->state(job) != JobState::kRunning)
    return Status::FailedPrecondition(job_str(job) + " is " +
                                      std::string(spec::state_name(core_->state(job))) +
                                      ", only a Running job can be " + what);
  if (protocol_->busy(job))
    return Status::FailedPrecondition(job_str(job) +
                                      " is starting or taking a checkpoint; retry shortly");
  return Status::Ok();
}

int Service::pick_beneficiary(int victim) const {
  // The most favoured waiting job the spec lets `victim` be preempted for: dry-run GuardPreempt.
  std::vector<int> waiting;
  for (int j : active_) {
    auto s = core_->state(j);
    if (j != victim && (s == JobState::kQueued || s == JobState::kSuspended) &&
        core_->cluster().jobs[j].hold == 0)
      waiting.push_back(j);
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
    if (core_->accepts(d)) return b;
  }
  return -1;
}

// An operator's explicit beneficiary of a preemption or shrink: a job that waits for devices (the
// spec's guards say the rest, clause by clause).
Status Service::check_beneficiary(int b) const {
  if (b >= core_->num_jobs()) return Status::NotFound("unknown beneficiary job " + std::to_string(b));
  auto st = core_->state(b);
  if (!spec::waiting_state(spec::Concrete{}, static_cast<std::int64_t>(st)))
    return Status::FailedPrecondition(
        "job " + std::to_string(b) + " is " + std::string(spec::state_name(st)) +
        ", not waiting: devices are freed only for a Queued or Suspended job");
  if (core_->cluster().jobs[b].hold != 0)
    return Status::FailedPrecondition("job " + std::to_string(b) +
                                      " is held by an operator: resume it first (orrery resume " +
                                      std::to_string(b) + ")");
  return Status::Ok();
}

Status Service::preempt(int job, int beneficiary) {
  if (auto st = check_running_idle(job, "preempted"); !st) return st;
  if (beneficiary < 0) {
    beneficiary = pick_beneficiary(job);
    if (beneficiary < 0)
      return Status::FailedPrecondition(
          "no waiting job that " + job_str(job) +
          " may be preempted for (a preemption frees devices for a favoured waiting job: "
          "INV-TIER); to stop it until you resume it: orrery suspend " + std::to_string(job));
  } else if (auto st = check_beneficiary(beneficiary); !st) {
    return st;
  }
  core::Decision d;
  d.event = EventKind::kPreempt;
  d.origin = Origin::kOperator;
  d.job = job;
  d.beneficiary = beneficiary;
  auto c = commit(d);
  if (!c)
    return Status::FailedPrecondition("preempting " + job_str(job) + " for job " +
                                      std::to_string(beneficiary) + " is refused: " + c.reason());
  settle();
  return Status::Ok();
}

std::optional<core::Decision> Service::migrate_decision(int job, const std::optional<std::string>& to,
                                                        std::string* why) const {
  if (!to) {
    auto p = placer_->propose(job, EventKind::kMigrate);
    if (p.kind != core::policy::Proposal::Kind::kOk) {
      *why = p.why.str();
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
  d.splice = jv.splice;
  const auto& cl = core_->cluster();
  for (int dev = nd.first_device;
       dev < nd.end_device && static_cast<std::int64_t>(d.devices.size()) < jv.devices; ++dev)
    if (cl.owner[dev] == -1 && (cl.resv_for[dev] == -1 || cl.resv_for[dev] == job) &&
        core_->fleet().device_type(dev) == jv.dtype)
      d.devices.push_back(dev);
  if (static_cast<std::int64_t>(d.devices.size()) < jv.devices) {
    *why = "node " + *to + " has " + std::to_string(d.devices.size()) +
           " free devices of the job's type, it needs " + std::to_string(jv.devices);
    return std::nullopt;
  }
  return d;
}

Status Service::migrate(int job, std::optional<std::string> to_node) {
  if (auto st = check_running_idle(job, "migrated"); !st) return st;
  std::string why;
  auto d = migrate_decision(job, to_node, &why);
  if (!d) return Status::FailedPrecondition("cannot migrate " + job_str(job) + ": " + why);
  d->origin = Origin::kOperator;
  auto c = commit(*d);
  if (!c) return Status::FailedPrecondition("cannot migrate " + job_str(job) + ": " + c.reason());
  settle();
  return Status::Ok();
}

Status Service::resize(int job, int devices, int beneficiary) {
  if (job < 0 || job >= core_->num_jobs()) return Status::NotFound("unknown job " + std::to_string(job));
  const auto& jv = core_->cluster().jobs[job];
  // What can never work first, whatever the job is doing now.
  if (devices < jv.min_dev || devices > jv.max_dev)
    return Status::InvalidArgument("devices must be within the job's elastic range [" +
                                   std::to_string(jv.min_dev) + ", " + std::to_string(jv.max_dev) +
                                   "], got " + std::to_string(devices));
  if (auto st = check_running_idle(job, "resized"); !st) return st;
  if (devices == jv.devices)
    return Status::FailedPrecondition(job_str(job) + " already holds " + std::to_string(devices) + " devices");
  if (jv.world % devices != 0 || jv.world / devices > spec::kSpliceLimit)
    return Status::InvalidArgument("world " + std::to_string(jv.world) +
                                   " does not split evenly over " + std::to_string(devices) +
                                   " devices within the splice limit");
  core::Decision d;
  if (devices > jv.devices) {
    auto p = placer_->propose(job, EventKind::kResizeUp, devices);
    if (p.kind != core::policy::Proposal::Kind::kOk)
      return Status::FailedPrecondition("cannot grow " + job_str(job) + ": " + p.why.str());
    if (static_cast<int>(p.decision.devices.size()) != devices)
      return Status::FailedPrecondition("cannot grow " + job_str(job) + " to " + std::to_string(devices) +
                                        " devices: only " + std::to_string(p.decision.devices.size()) + " fit");
    d = p.decision;
  } else {
    // For a named waiting job (its devices reserved for it), or for no one (-1): an operator
    // may shrink a job at will (spec::operator_for_no_one); the devices are then simply free.
    if (beneficiary >= 0)
      if (auto st = check_beneficiary(beneficiary); !st) return st;
    d.event = EventKind::kResizeDown;
    d.job = job;
    d.beneficiary = beneficiary;
    d.splice = jv.world / devices;
    d.devices.assign(jv.held.begin(), jv.held.begin() + devices);
  }
  d.origin = Origin::kOperator;
  auto c = commit(d);
  if (!c) return Status::FailedPrecondition("cannot resize " + job_str(job) + ": " + c.reason());
  settle();
  return Status::Ok();
}

Status Service::suspend(int job) {
  if (job >= 0 && job < core_->num_jobs() && core_->cluster().jobs[job].hold != 0)
    return Status::FailedPrecondition(job_str(job) + " is already suspended by an operator (" +
                                      std::string(spec::state_name(core_->state(job))) + ")");
  if (auto st = check_running_idle(job, "suspended"); !st) return st;
  core::Decision d;
  d.event = EventKind::kPreempt;  // for no one, by an operator: the spec holds the job
  d.origin = Origin::kOperator;
  d.job = job;
  d.beneficiary = -1;
  auto c = commit(d);
  if (!c) return Status::FailedPrecondition("suspending " + job_str(job) + " is refused: " + c.reason());
  settle();
  return Status::Ok();
}

Status Service::resume(int job) {
  if (job < 0 || job >= core_->num_jobs()) return Status::NotFound("unknown job " + std::to_string(job));
  const auto s = core_->state(job);
  if (core_->cluster().jobs[job].hold == 0)
    return Status::FailedPrecondition(job_str(job) + " is " + std::string(spec::state_name(s)) +
                                      ", not suspended by an operator: nothing to resume");
  if (s == JobState::kCheckpointing)
    return Status::FailedPrecondition(job_str(job) +
                                      " is still taking the cut that suspends it; resume it once "
                                      "it is Suspended (orrery ls)");
  core::Decision d;
  d.event = EventKind::kRelease;  // ends the hold; the planners resume it when devices are free
  d.origin = Origin::kOperator;
  d.job = job;
  auto c = commit(d);
  if (!c) return Status::FailedPrecondition("resuming " + job_str(job) + " is refused: " + c.reason());
  settle();
  return Status::Ok();
}

Status Service::drain(const std::string& node) {
  int n = core_->node_id(node);
  if (n < 0) return Status::NotFound("unknown node \"" + node + "\"");
  auto c = commit_node(spec::NodeEvent::kDrain, Origin::kOperator, n);
  if (!c) return Status::FailedPrecondition(c.reason());
  settle();
  return Status::Ok();
}

Status Service::undrain(const std::string& node) {
  int n = core_->node_id(node);
  if (n < 0) return Status::NotFound("unknown node \"" + node + "\"");
  auto c = commit_node(spec::NodeEvent::kUndrain, Origin::kOperator, n);
  if (!c) return Status::FailedPrecondition(c.reason());
  settle();
  return Status::Ok();
}

}  // namespace orrery::service
