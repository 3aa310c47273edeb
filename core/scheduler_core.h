// The scheduler core: the authoritative cluster state and the one place decisions are committed.
//
// commit(decision):
//   1. checks that the decision's origin may decide its event (spec::may_decide), resolves the job
//      and turns the decision into the spec's parameters (bad input -> error);
//   2. finds the lifecycle row for (job state, event) and evaluates its spec guard on the concrete
//      state; a decision no row accepts is rejected with the reason (the guard clause that failed)
//      and counted: a rejected proposal is a policy bug, never a broken invariant;
//   3. appends the decision to the journal;
//   4. fires the Boost.MSM machine from the job's state, which runs the row's spec effect.
// Each step costs O(|devices the decision names| + |devices the job holds|) (each device's group,
// hence node, type and memory, found in O(1) for fleets of equal runs, O(log groups) otherwise),
// whatever the number of jobs: the guards and effects read the spec's per-device owners and
// per-node counters, never a sum over jobs.
// The core is deterministic: its state is a function of the committed decisions (and the injected
// clock, which only stamps journal records), so replaying a journal rebuilds it exactly.
//
// Durability: with group commit a committed decision may still sit in the journal's buffer, and a
// crash would lose it (recovery then rebuilds the state without it, and could hand the same epoch
// to another incarnation). So a decision may be *acted on* — sent to node agents, reported to a
// user — only once durable_seq() >= its seq; sync() makes everything committed durable.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/change_feed.h"
#include "core/clock.h"
#include "core/decision.h"
#include "core/fleet.h"
#include "core/job_machine.h"
#include "core/journal.h"
#include "core/node_machine.h"
#include "base/result.h"
#include "spec/model.h"

namespace orrery::core {

struct Committed {
  std::uint64_t seq = 0;  // 1-based count of committed decisions (job and node decisions alike)
  std::int64_t time_ms = 0;
  int job = -1;   // -1 for a node decision
  spec::JobState from{};
  spec::JobState to{};
  int node = -1;  // a node decision's node, else -1
  spec::NodeState node_from{};
  spec::NodeState node_to{};
  int row = 0;  // 1-based index of the row taken, in the job table or the node table
  bool durable = false;  // already on disk per the journal's fsync policy (see durable_seq())
};

// The fleet a journal was written for: its first record. Errors name what is wrong with it.
Result<Fleet> fleet_of_journal(const std::vector<std::string>& records);

// What the core keeps about a job besides its spec variables (the device type is the fleet's name
// for the job's dtype).
struct JobInfo {
  std::string name;
  std::int32_t tenant = 0;  // SchedulerCore::tenant_name(tenant); 0 is the default tenant ""
  // What the planners weigh when they choose victims (core/policy/victims.h): how much a cut
  // costs the job (its preemption mode), and how long after a start it is not to be evicted.
  spec::Preemption mode = spec::Preemption::kTransparent;
  std::int64_t min_runtime_ms = 0;
  // The device types its spec allows when it names more than one ("A|B": the first is the one it
  // was submitted with), in its order of preference; empty when it names one. A planner may move a
  // waiting job to any of them (Retype); the core refuses any other.
  std::vector<std::int32_t> types;
};

class SchedulerCore {
 public:
  // A fresh core over `fleet`. With a journal, the fleet is written as its first record, so the
  // journal must be empty; without one (nullptr) nothing is persisted. The clock and the journal
  // must outlive the core.
  static Result<std::unique_ptr<SchedulerCore>> create(Fleet fleet, const Clock& clock,
                                                       JournalWriter* journal);

  // Rebuilds the core by replaying journal records (the fleet record first). New decisions go to
  // `journal` (normally the same journal opened for append), or nowhere when it is nullptr.
  // `on_replayed(core, committed, decision)`, if given, sees the state after every replayed job
  // decision (node decisions are replayed without it).
  template <class OnReplayed>
  static Result<std::unique_ptr<SchedulerCore>> recover(const std::vector<std::string>& records,
                                                        const Clock& clock, JournalWriter* journal,
                                                        OnReplayed&& on_replayed);
  static Result<std::unique_ptr<SchedulerCore>> recover(const std::vector<std::string>& records,
                                                        const Clock& clock,
                                                        JournalWriter* journal) {
    return recover(records, clock, journal,
                   [](const SchedulerCore&, const Committed&, const Decision&) {});
  }

  Result<Committed> commit(const Decision& decision);
  // A node lifecycle decision, checked and journaled like a job decision: the origin may decide it
  // (spec::may_decide_node), the node exists, the node table has a row for (its state, event) whose
  // guard holds; then the node machine fires.
  Result<Committed> commit_node(const NodeDecision& decision);

  // Whether commit(decision) would take it now, without committing or counting anything: the
  // origin may decide it and a row's guard holds (or why not, as commit() would say). For planners
  // that check their proposals first. Not for Submit.
  Status check(const Decision& decision) const;
  // check(decision).ok(), without composing the reason (for planners asking often).
  bool accepts(const Decision& decision) const;

  // The spec parameters a decision stands for (bad devices or device type -> error). For a Submit
  // the job is the next free id.
  Result<spec::Params<spec::Concrete>> params_for(const Decision& decision) const;
  // A Retype's part that is the core's, not the spec's: the type is one the job's spec allows
  // (JobInfo::types). Ok for every other event.
  Status allowed_by_spec(const Decision& d, const spec::Params<spec::Concrete>& p) const;

  const Fleet& fleet() const { return fleet_; }
  // The injected clock's time: what planners measure waiting with.
  std::int64_t now_ms() const { return clock_.now_ms(); }
  const spec::ClusterVars<spec::Concrete>& cluster() const { return cluster_; }
  int num_jobs() const { return cluster_.num_jobs(); }
  spec::JobState state(int job) const {
    return static_cast<spec::JobState>(cluster_.jobs[job].state);
  }
  const JobInfo& job_info(int job) const { return info_[job]; }
  // Whether job `job`'s spec allows devices of type `type` (its own type, or one of JobInfo::types).
  bool allows_type(int job, int type) const;
  // Tenants by first appearance; 0 is the default tenant "" (a Submit without one).
  int num_tenants() const { return static_cast<int>(tenants_.size()); }
  const std::string& tenant_name(int tenant) const { return tenants_[static_cast<std::size_t>(tenant)]; }
  spec::NodeState node_state(int node) const {
    return static_cast<spec::NodeState>(cluster_.node_state[node]);
  }
  // The node called `name`, or -1.
  int node_id(const std::string& name) const;
  const std::string& device_type(int job) const {
    return fleet_.device_types[static_cast<std::size_t>(cluster_.jobs[job].dtype)];
  }
  std::uint64_t committed() const { return committed_; }
  // Every decision with seq <= durable_seq() is in the journal and synced per its fsync policy
  // (without a journal nothing is durable: 0).
  std::uint64_t durable_seq() const;
  // Writes and syncs every committed decision; afterwards durable_seq() == committed().
  Status sync();
  std::uint64_t rejected() const { return rejected_; }
  // The devices, jobs and nodes each commit touched, for planners that keep indexes of the state
  // (core/change_feed.h). Costs a commit O(|devices the job held| + |devices it holds|).
  const ChangeFeed& changes() const { return changes_; }

 private:
  SchedulerCore(Fleet fleet, const Clock& clock, JournalWriter* journal);
  // commit() at a given time; `journaled` when the decision comes from the journal already.
  Result<Committed> apply(const Decision& decision, std::int64_t time_ms, bool journaled);
  Result<Committed> apply_node(const NodeDecision& decision, std::int64_t time_ms, bool journaled);
  // The first row for (job j's state, event) whose guard holds on p, or nullptr (and why, if asked).
  const RowDesc<spec::Concrete>* find_row(int j, spec::EventKind event,
                                          const spec::Params<spec::Concrete>& p, std::string* why) const;
  // Counts one more committed decision (job or node) taken by row `row`: its seq, time and
  // durability; the caller fills in what it was about.
  Committed count_committed(std::int64_t time_ms, int row);
  // A node record replays with no decision to report: the pair's Decision is then unused and
  // Committed::job is -1.
  Result<std::pair<Committed, Decision>> replay_one(const std::string& record,
                                                    std::uint64_t index);

  Fleet fleet_;
  const Clock& clock_;
  JournalWriter* journal_;
  spec::ClusterVars<spec::Concrete> cluster_;
  // One Boost.MSM machine for every job: positioned at the job's recorded state (cluster_.jobs[j]
  // .state, which it alone updates) before each event, so a job record carries no machine.
  JobMachine machine_;
  NodeMachine node_machine_;  // likewise for every node
  std::vector<JobInfo> info_;
  std::vector<std::string> tenants_{std::string()};
  std::unordered_map<std::string, std::int32_t> tenant_ids_{{std::string(), 0}};
  std::uint64_t committed_ = 0;
  std::uint64_t rejected_ = 0;
  ChangeFeed changes_;
  std::vector<std::int32_t> held_before_;    // apply()'s scratch: the job's devices before the effect
  std::vector<std::int32_t> target_before_;  // ... and its move's target
};

template <class OnReplayed>
Result<std::unique_ptr<SchedulerCore>> SchedulerCore::recover(
    const std::vector<std::string>& records, const Clock& clock, JournalWriter* journal,
    OnReplayed&& on_replayed) {
  auto fleet = fleet_of_journal(records);
  if (!fleet) return fleet.status();
  std::unique_ptr<SchedulerCore> core(new SchedulerCore(std::move(*fleet), clock, nullptr));
  for (std::size_t i = 1; i < records.size(); ++i) {
    auto c = core->replay_one(records[i], i + 1);
    if (!c) return c.status();
    if (c->first.job >= 0) on_replayed(static_cast<const SchedulerCore&>(*core), c->first, c->second);
  }
  core->journal_ = journal;
  return core;
}

}  // namespace orrery::core
