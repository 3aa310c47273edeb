#include "core/demo_scenario.h"

#include <iomanip>

#include "core/policy/gang_placement.h"
#include "core/policy/preemption.h"

namespace orrery::core {

namespace {

using spec::EventKind;

class Script {
 public:
  Script(SchedulerCore& core, ManualClock& clock, std::ostream& out)
      : core_(core), clock_(clock), out_(out) {}

  // Commits a decision and prints it; an unexpected rejection ends the scenario.
  Result<Committed> commit(const Decision& d, std::int64_t after_ms = 1000) {
    clock_.advance(after_ms);
    auto c = core_.commit(d);
    if (!c) return Status::Error("demo step '" + d.describe() + "' rejected: " + c.reason());
    out_ << "  [t=" << std::setw(6) << clock_.now_ms() / 1000 << "s] #" << std::setw(2) << c->seq
         << "  job " << c->job << " " << std::left << std::setw(14) << core_.job_info(c->job).name
         << std::right << " " << std::setw(13) << spec::state_name(c->from) << " -> " << std::left
         << std::setw(13) << spec::state_name(c->to) << std::right << "  " << d.describe()
         << "  (row #" << c->row << ")\n";
    return c;
  }

  // Commits a node decision and prints it.
  Status node(spec::NodeEvent e, int n, spec::Origin origin = spec::Origin::kRuntime) {
    clock_.advance(1000);
    auto c = core_.commit_node(NodeDecision{e, origin, n});
    if (!c) return Status::Error("demo node step rejected: " + c.reason());
    out_ << "  [t=" << std::setw(6) << clock_.now_ms() / 1000 << "s] #" << std::setw(2) << c->seq
         << "  node " << core_.fleet().nodes[n].name << "  " << std::setw(13)
         << spec::node_state_name(c->node_from) << " -> " << std::left << std::setw(13)
         << spec::node_state_name(c->node_to) << std::right << "  "
         << NodeDecision{e, origin, n}.describe() << "  (node row #" << c->row << ")\n";
    return Status::Ok();
  }

  Result<int> submit(const std::string& name, spec::Tier tier, std::int64_t world,
                     std::int64_t min_dev, std::int64_t max_dev) {
    Decision d;
    d.event = EventKind::kSubmit;
    d.name = name;
    d.tier = tier;
    d.device_type = "H100-80G";
    d.world = world;
    d.min_devices = min_dev;
    d.max_devices = max_dev;
    d.mem_mib = 16384;
    auto c = commit(d);
    if (!c) return c.status();
    return c->job;
  }

  Status simple(EventKind e, int job, std::int64_t step = 0, std::int64_t gpu_ms = 0) {
    Decision d;
    d.event = e;
    // Admission is a planner's decision; the other events here are what node agents report.
    d.origin = e == EventKind::kAdmit ? spec::Origin::kPlanner : spec::Origin::kRuntime;
    d.job = job;
    d.step = step;
    d.gpu_ms = gpu_ms;
    return commit(d).status();
  }

  Status gang(EventKind e, int job, int want = -1) {
    auto p = policy::propose_gang(core_, job, e, want);
    if (p.kind != policy::Proposal::Kind::kOk)
      return Status::Error("placement policy for job " + std::to_string(job) + ": " + p.why.str());
    return commit(p.decision).status();
  }

  void note(const std::string& s) { out_ << "\n  -- " << s << "\n"; }

 private:
  SchedulerCore& core_;
  ManualClock& clock_;
  std::ostream& out_;
};

}  // namespace

Result<DemoSummary> run_demo_scenario(SchedulerCore& core, ManualClock& clock, std::ostream& out) {
  Script s(core, clock, out);

  s.note("the node agents register; each node is readied");
  for (int n = 0; n < static_cast<int>(core.fleet().nodes.size()); ++n) {
    if (auto st = s.node(spec::NodeEvent::kRegister, n); !st) return st;
    if (auto st = s.node(spec::NodeEvent::kReady, n); !st) return st;
  }

  s.note("a basic and a standard job arrive and run");
  auto basic = s.submit("resnet-basic", spec::Tier::kBasic, 8, 2, 4);
  if (!basic) return basic.status();
  const int b = *basic;
  if (auto st = s.simple(EventKind::kAdmit, b); !st) return st;
  if (auto st = s.gang(EventKind::kPlace, b); !st) return st;
  if (auto st = s.simple(EventKind::kStart, b); !st) return st;
  if (auto st = s.simple(EventKind::kProgress, b, 100, 400000); !st) return st;

  auto standard = s.submit("bert-standard", spec::Tier::kStandard, 4, 2, 4);
  if (!standard) return standard.status();
  const int st_job = *standard;
  if (auto st = s.simple(EventKind::kAdmit, st_job); !st) return st;
  if (auto st = s.gang(EventKind::kPlace, st_job, /*want=*/2); !st) return st;
  if (auto st = s.simple(EventKind::kStart, st_job); !st) return st;
  if (auto st = s.simple(EventKind::kProgress, st_job, 50, 100000); !st) return st;
  if (auto st = s.simple(EventKind::kCheckpoint, st_job, 50); !st) return st;

  s.note("a premium job arrives; no free devices: the basic job is checkpointed and suspended");
  auto premium = s.submit("llm-premium", spec::Tier::kPremium, 4, 4, 4);
  if (!premium) return premium.status();
  const int p = *premium;
  if (auto st = s.simple(EventKind::kAdmit, p); !st) return st;
  auto try_place = policy::propose_gang(core, p, EventKind::kPlace);
  out << "  placement policy for job " << p << ": "
      << (try_place.kind == policy::Proposal::Kind::kOk ? "fits" : try_place.why.str()) << "\n";
  auto victim = policy::propose_preemption(core, p);
  if (!victim) return Status::Error("preemption policy found no victim for the premium job");
  if (auto c = s.commit(*victim); !c) return c.status();
  if (auto st = s.simple(EventKind::kCheckpointDone, static_cast<int>(victim->job),
                         core.cluster().jobs[victim->job].progress);
      !st)
    return st;
  {
    std::string freed;
    for (int dev = 0; dev < core.cluster().num_devices(); ++dev)
      if (spec::reserved(spec::Concrete{}, core.cluster(), dev))
        freed += (freed.empty() ? "" : ",") + std::to_string(dev);
    out << "  devices {" << freed << "} are reserved for job " << p
        << " (the preemption was for it)\n";
  }

  s.note("the standard job's planner tries to grow onto the reserved devices: rejected");
  {
    Decision grab;
    grab.event = EventKind::kResizeUp;
    grab.origin = spec::Origin::kPlanner;
    grab.job = st_job;
    grab.devices.assign(core.cluster().jobs[st_job].held.begin(),
                        core.cluster().jobs[st_job].held.end());
    for (int dev = 0; dev < core.cluster().num_devices(); ++dev)
      if (spec::reserved(spec::Concrete{}, core.cluster(), dev) &&
          grab.devices.size() < static_cast<std::size_t>(core.cluster().jobs[st_job].max_dev))
        grab.devices.push_back(dev);
    grab.splice = core.cluster().jobs[st_job].world / static_cast<std::int64_t>(grab.devices.size());
    clock.advance(1000);
    auto c = core.commit(grab);
    if (c) return Status::Error("the core let a job take devices reserved for another");
    out << "  rejected (policy bug counted): " << c.reason() << "\n";
  }
  if (auto st = s.gang(EventKind::kPlace, p); !st) return st;
  out << "  job " << p << " took the devices reserved for it; its reservations end\n";
  if (auto st = s.simple(EventKind::kStart, p); !st) return st;
  if (auto st = s.simple(EventKind::kProgress, p, 10, 40000); !st) return st;

  s.note("a buggy policy tries to free the standard job's devices for the basic one: rejected");
  {
    Decision bad;
    bad.event = EventKind::kPreempt;
    bad.origin = spec::Origin::kPlanner;
    bad.job = st_job;
    bad.beneficiary = b;
    clock.advance(1000);
    auto c = core.commit(bad);
    if (c) return Status::Error("the core accepted a preemption in favour of a lower tier");
    out << "  rejected (policy bug counted): " << c.reason() << "\n";
    // Nor can a planner free the devices by claiming the job failed.
    Decision fake = bad;
    fake.event = EventKind::kNodeLoss;
    fake.beneficiary = -1;
    clock.advance(1000);
    auto f = core.commit(fake);
    if (f) return Status::Error("the core accepted a failure report from a planner");
    out << "  rejected (policy bug counted): " << f.reason() << "\n";
  }

  s.note("the premium job completes; the standard job is migrated: decided (its target reserved), "
         "carried out when the cut is stored (a new incarnation restores it there)");
  if (auto st = s.simple(EventKind::kComplete, p); !st) return st;
  if (auto st = s.gang(EventKind::kMigrate, st_job); !st) return st;
  if (auto st = s.simple(EventKind::kCheckpointDone, st_job, core.cluster().jobs[st_job].progress); !st)
    return st;
  if (auto st = s.simple(EventKind::kRestoreDone, st_job); !st) return st;

  s.note("the standard job is to move again, but its cut is not stored in time: the core aborts "
         "the migration (a new incarnation in place, from the last checkpoint, not counted as a "
         "failure; the devices reserved for the move are free again)");
  if (auto st = s.gang(EventKind::kMigrate, st_job); !st) return st;
  {
    Decision abort;
    abort.event = EventKind::kAbort;
    abort.origin = spec::Origin::kCore;
    abort.job = st_job;
    if (auto c = s.commit(abort); !c) return c.status();
  }
  if (auto st = s.simple(EventKind::kStart, st_job); !st) return st;

  s.note("the basic job resumes from its checkpoint on 2 devices, then grows to 4 (a resize is a "
         "cut and a new incarnation on the larger set)");
  if (auto st = s.gang(EventKind::kResume, b, /*want=*/2); !st) return st;
  if (auto st = s.simple(EventKind::kRestoreDone, b); !st) return st;
  if (auto st = s.gang(EventKind::kResizeUp, b); !st) return st;
  if (auto st = s.simple(EventKind::kCheckpointDone, b, core.cluster().jobs[b].progress); !st) return st;
  if (auto st = s.simple(EventKind::kRestoreDone, b); !st) return st;
  if (auto st = s.simple(EventKind::kProgress, b, 180, 300000); !st) return st;

  s.note("a worker of the basic job crashes: back to its last checkpoint, placed again");
  if (auto st = s.simple(EventKind::kWorkerCrash, b); !st) return st;
  out << "  progress of job " << b << " after the crash: " << core.cluster().jobs[b].progress
      << " (its checkpoint)\n";
  if (auto st = s.gang(EventKind::kPlace, b); !st) return st;
  if (auto st = s.simple(EventKind::kStart, b); !st) return st;

  s.note("everything completes");
  if (auto st = s.simple(EventKind::kProgress, b, 250, 500000); !st) return st;
  if (auto st = s.simple(EventKind::kComplete, b); !st) return st;
  if (auto st = s.simple(EventKind::kProgress, st_job, 120, 200000); !st) return st;
  if (auto st = s.simple(EventKind::kComplete, st_job); !st) return st;

  s.note("node0 is drained: a job may not be placed there; node1 misses its heartbeats");
  if (auto st = s.node(spec::NodeEvent::kDrain, 0, spec::Origin::kOperator); !st) return st;
  if (auto st = s.node(spec::NodeEvent::kHeartbeatLost, 1); !st) return st;
  {
    auto late = s.submit("late-basic", spec::Tier::kBasic, 2, 1, 2);
    if (!late) return late.status();
    if (auto st = s.simple(EventKind::kAdmit, *late); !st) return st;
    auto none = policy::propose_gang(core, *late, EventKind::kPlace);
    out << "  placement policy for job " << *late << ": "
        << (none.kind == policy::Proposal::Kind::kOk ? "fits" : none.why.str()) << "\n";
    Decision bad;
    bad.event = EventKind::kPlace;
    bad.origin = spec::Origin::kPlanner;
    bad.job = *late;
    bad.devices = {core.fleet().nodes[0].first_device};
    bad.splice = 2;
    clock.advance(1000);
    auto c = core.commit(bad);
    if (c) return Status::Error("the core placed a job on a draining node");
    out << "  rejected (policy bug counted): " << c.reason() << "\n";
    s.note("node1 holds nothing: it is failed over, rejoins, and the job runs there");
    if (auto st = s.node(spec::NodeEvent::kFailedOver, 1); !st) return st;
    if (auto st = s.node(spec::NodeEvent::kRegister, 1); !st) return st;
    if (auto st = s.node(spec::NodeEvent::kReady, 1); !st) return st;
    if (auto st = s.gang(EventKind::kPlace, *late); !st) return st;
    if (auto st = s.simple(EventKind::kStart, *late); !st) return st;
    if (auto st = s.simple(EventKind::kComplete, *late); !st) return st;
    if (auto st = s.node(spec::NodeEvent::kUndrain, 0, spec::Origin::kOperator); !st) return st;
  }

  return DemoSummary{core.committed(), core.rejected()};
}

}  // namespace orrery::core
