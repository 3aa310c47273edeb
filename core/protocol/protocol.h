// The one protocol for a job's incarnations: how committed decisions become commands to the nodes,
// and how runtime reports and the passing of time become decisions to propose. The Service
// (core/service/) and the simulator (runtime/sim/) both drive every job through it, so a scenario
// commits the same sequence in both (tests/protocol/lifecycle_parity_test.cc).
//
// It has no transport, no files and no clock of its own: time is passed in, the core is read
// (never written), commands and proposals are taken out by the caller. The caller commits every
// proposal through the core (policies propose, the core commits) and tells the protocol what was
// committed or refused (core/protocol/driver.h does both); it sends a command only once the
// decision it carries out is durable (take_commands(durable_seq)).
//
// The in-flight work lives in the proved machine's states (docs/architecture.md):
//   Placed, Restoring          the nodes launch the incarnation (restoring the checkpoint);
//                              Start / RestoreDone once every node started; Abort on timeout.
//   Checkpointing, Migrating,  the nodes take a cut and stop; CheckpointDone once it is stored
//   Resizing                   (a move whose target no longer fits: Checkpoint, then Abort);
//                              Abort when a node fails the cut or on timeout (a new incarnation
//                              restarts in place from the last committed checkpoint).
// Everything the protocol keeps per job is about the current incarnation's runtime (which nodes
// started, their steps, the device time not yet committed, a periodic cut asked for); the job's
// lifecycle is the core's state alone, so after a restart recover() rebuilds it from the journal.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "base/result.h"
#include "core/decision.h"
#include "core/policy/job_id_set.h"
#include "core/protocol/messages.h"
#include "core/scheduler_core.h"

namespace orrery::protocol {

class Protocol {
 public:
  explicit Protocol(const core::SchedulerCore& core, Timeouts timeouts = {});

  // After the core was rebuilt from its journal: every job holding devices is tracked again, its
  // in-flight timer starting now; the nodes tell what runs when they register.
  void recover(std::int64_t now_ms);

  // --- inputs -----------------------------------------------------------------------------
  // A job decision the core committed (whoever proposed it); queues the commands that carry it out.
  void committed(const core::Committed& c, const core::Decision& d, std::int64_t now_ms);
  // A decision the core refused (one of this protocol's proposals, or anyone's).
  void refused(const core::Decision& d, const Status& why, std::int64_t now_ms);
  // A node's report. A report for an incarnation that is not the job's current one, or from a node
  // it is not placed on, is refused (and that node told to stop the incarnation).
  Status report(const Report& r, std::int64_t now_ms);
  // An agent (re)registered with the incarnations it runs: the current ones are adopted, the rest
  // stopped; a launch it lacks is sent again; a running job it lost crashed there.
  void node_registered(int node, const std::vector<Running>& running, std::int64_t now_ms);
  // The node is lost: NodeLoss for every job holding a device on it.
  void node_lost(int node);
  // Timeouts of in-flight operations, periodic checkpoints.
  void tick(std::int64_t now_ms);
  // Ask a running job for a periodic cut now (the simulator's time-based checkpoints; the
  // Service's come from the job's CheckpointPolicy in tick()). Only transparent jobs are cut while
  // they run on: for a signal or requeue job both are ignored (INV-MODE).
  // at_step: the boundary to cut at (-1: the next one the workers agree on).
  void request_checkpoint(int job, std::int64_t now_ms, std::int64_t at_step = -1);
  void set_checkpoint_policy(int job, CheckpointPolicy policy);

  // --- outputs ----------------------------------------------------------------------------
  std::vector<core::Decision> take_proposals();
  // The queued commands whose decision is durable (after_seq <= durable_seq), in order.
  std::vector<Command> take_commands(std::uint64_t durable_seq);
  // Why a job is where it is ("preempting for job 3", "cut failed on node n1: ..."), for users.
  std::vector<std::pair<int, std::string>> take_notes();

  // --- queries ----------------------------------------------------------------------------
  // An operation is in flight for the job (a launch, a cut, a restore), a periodic cut is pending,
  // or its incarnation has not started on every node: planners leave it alone meanwhile.
  bool busy(int job) const;
  // Whether a planner's proposal may be committed now: one of the events planners decide
  // (spec::planner_event), and one that starts a cut (Preempt, Migrate, ResizeUp, ResizeDown)
  // only for a job with nothing in flight. The core's guards judge the rest.
  bool may_commit(const core::Decision& d) const;
  // The furthest step every node of the incarnation reported (the committed progress if more).
  std::int64_t reported_step(int job) const;
  // Nodes of the job's current incarnation (sorted).
  std::vector<int> nodes_of(int job) const;
  const Timeouts& timeouts() const { return timeouts_; }

 private:
  struct Track {
    std::int64_t epoch = -1;   // the incarnation the sets below are about
    std::vector<int> nodes;    // its nodes, sorted
    std::set<int> started, completed;
    // How many of `nodes` are in `started` (kept by mark_started and recount_started): whether
    // the incarnation started everywhere is asked on every report and commit of the job, and a
    // walk over a large gang's nodes each time was a twentieth of a 1M-job simulation.
    int started_here = 0;
    std::map<int, std::int64_t> node_step;
    std::int64_t gpu_ms = 0;            // reported since the last committed Progress
    std::int64_t since_ms = 0;          // when the in-flight operation began
    std::int64_t last_progress_ms = -(std::int64_t{1} << 40);
    bool periodic = false;              // a periodic cut was asked for and is not stored yet
    std::int64_t periodic_since_ms = 0;   // when it was asked for, or its boundary reached
    std::int64_t periodic_asked_at = -1;  // the boundary asked for last
    std::int64_t periodic_target = -1;    // the boundary of the cut in flight (-1: the next)
    CheckpointPolicy policy;
  };

  void committed_impl(const core::Committed& c, const core::Decision& d, std::int64_t now_ms);
  Status report_impl(const Report& r, std::int64_t now_ms);
  void node_registered_impl(int node, const std::vector<Running>& running, std::int64_t now_ms);
  // Recomputes may_be_busy_ for the job after its track changed.
  void refresh(int job);
  Track& track(int job);
  const Track* find(int job) const;
  spec::JobState state(int job) const { return core_.state(job); }
  std::vector<int> placement_nodes(int job) const;
  // A new incarnation (Placed, Restoring): stop the old one where it does not continue, launch.
  void begin_incarnation(int job, Track& t, std::uint64_t seq, std::int64_t now_ms);
  void send(Command::Kind kind, int node, int job, std::int64_t epoch, std::uint64_t seq,
            std::int64_t restore_step = -1, bool then_stop = false);
  // Commands that follow from a job's state rather than from one decision (a stop for a refused
  // report, what a registration leads to) wait for the decisions of the job's they rest on, which
  // may not be durable yet (a job's epoch, placement and holding state are functions of its own
  // decisions only). latest_decision: the seq of the job's latest decision that may not be durable
  // (0: none). ended_by: of the one that ended the incarnation (job, epoch) (left the epoch or
  // gave the devices up), if it may not be durable (0: none, or it is durable).
  std::uint64_t latest_decision(int job) const;
  std::uint64_t ended_by(int job, std::int64_t epoch) const;
  void stop_all(int job, const Track& t, std::uint64_t seq);
  void propose(core::Decision d);
  core::Decision runtime_decision(spec::EventKind e, int job) const;
  void note(int job, std::string text);
  bool started_everywhere(const Track& t) const;
  static void mark_started(Track& t, int node);
  static void recount_started(Track& t);  // after `nodes` or `started` changed otherwise
  // The smallest step every node reported, or -1 while one has not.
  std::int64_t min_node_step(const Track& t) const;
  void propose_progress(int job, Track& t, std::int64_t step);
  void abort(int job, spec::Origin origin, const std::string& why);
  void on_cut_stored(int job, Track& t, std::int64_t step, std::int64_t now_ms);
  void on_all_completed(int job, Track& t, std::int64_t step, const std::string& detail);
  void crash(int job, const std::string& why);
  void platform_fault(int job, const std::string& why);
  bool periodic_busy(int job, const Track& t) const;

  const core::SchedulerCore& core_;
  Timeouts timeouts_;
  // By job id (null: none). A flat table: a track is looked up on every commit and report, and a
  // hash map's lookups were a twentieth of a 1M-job simulation. Tracks stay where they are when
  // the table grows (references to them stay valid).
  std::vector<std::unique_ptr<Track>> tracks_;
  // The decisions that may not be durable yet, per job in commit order and for all jobs in commit
  // order (to forget them once take_commands() learns they are durable).
  struct Undurable {
    std::uint64_t seq = 0;
    std::int64_t epoch_before = 0, epoch_after = 0;
    bool held_before = false, holds_after = false;
  };
  std::unordered_map<int, std::vector<Undurable>> undurable_;
  std::deque<std::pair<std::uint64_t, int>> undurable_order_;
  // Per job: a periodic cut is pending or the incarnation has not started on every node (what
  // busy() asks beside the state), kept so that busy() needs no lookup for most jobs.
  std::vector<std::uint8_t> may_be_busy_;
  // Jobs with an in-flight operation, a periodic cut or a policy; in id order (a bitset: a job
  // joins and leaves it with nearly every operation).
  core::policy::JobIdSet watched_;
  std::vector<core::Decision> proposals_;
  std::vector<Command> commands_;
  std::vector<std::pair<int, std::string>> notes_;
};

}  // namespace orrery::protocol
