// The planner loop: heartbeats and node failover, the protocol's timers, migrations off draining
// nodes, and a round of the planner whose proposals are committed like any other decision.
#include "core/service/service.h"
#include "core/service/service_internal.h"

namespace orrery::service {

using spec::EventKind;
using spec::JobState;
using spec::NodeState;
using spec::Origin;

void Service::fail_over(int n) {
  if (core_->node_state(n) != NodeState::kLost) {
    auto c = commit_node(spec::NodeEvent::kHeartbeatLost, Origin::kRuntime, n);
    if (!c) return;
    auto& conn = *conns_[static_cast<std::size_t>(n)];
    conn.registered = false;
    conn.link.reset();
  }
  protocol_->node_lost(n);
  driver_->settle(clock_.now_ms());
  take_notes();
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
  // holds. Running jobs on Draining nodes are migrated off (the planner's decision: it names the
  // target devices); everything else is the planner's round.
  std::vector<int> live(active_.begin(), active_.end());
  for (int j : live) {
    if (core_->state(j) != JobState::kRunning || protocol_->busy(j)) continue;
    bool draining = false;
    for (int n : nodes_of(j))
      if (core_->node_state(n) == NodeState::kDraining) draining = true;
    if (!draining) continue;
    std::string why;
    auto d = migrate_decision(j, std::nullopt, &why);
    if (!d) {
      view(j).note = "on a draining node, nowhere to migrate: " + why;
      continue;
    }
    d->origin = Origin::kPlanner;
    auto c = commit(*d);
    if (c) view(j).note = "migrating off a draining node";
  }
  PlanLink link(this);
  planner_->plan(*core_, link);
}

// The planner's proposals are committed as they come; the protocol carries each out (a placement
// launches, a preemption, migration or resize takes its cut) once it is durable.
bool Service::PlanLink::propose(const core::Decision& d) {
  Service& s = *s_;
  const int j = static_cast<int>(d.job);
  if (!spec::planner_event(d.event)) ++s.planner_rejected_;  // a policy bug
  if (!s.protocol_->may_commit(d)) return false;
  auto c = s.commit(d);
  if (!c && j >= 0 && j < s.core_->num_jobs()) s.view(j).note = c.reason();
  return c.ok();
}

bool Service::PlanLink::cut_pending(int job) const { return s_->protocol_->busy(job); }

void Service::PlanLink::note(int job, const std::string& why) { s_->view(job).note = why; }

void Service::tick() {
  monitor_heartbeats();
  protocol_->tick(clock_.now_ms());
  driver_->settle(clock_.now_ms());
  take_notes();
  plan();
  settle();
}

}  // namespace orrery::service
