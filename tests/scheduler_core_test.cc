// Unit tests of the scheduler core (core/scheduler_core.h): a scripted lifecycle of several jobs
// on the default fleet through every kind of decision, with every rejection's reason naming the
// guard clause that failed, bad input as errors, the rejected() counter, the invariants after
// every commit; then the same script with a real journal, recovery from it, and recovery from a
// journal whose tail is corrupt.
#include "tests/temp_dir.h"
#include "core/node_bootstrap.h"
#include "core/scheduler_core.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <string>
#include <vector>

#include "core/row_desc.h"
#include "tests/cluster_view.h"
#include "spec/invariants.h"

namespace orrery::core {
namespace {

using spec::EventKind;
using spec::JobState;
using spec::Tier;
using Cluster = spec::ClusterVars<spec::Concrete>;

// ---- Comparing clusters --------------------------------------------------------------------

using testing::ExpectSameCluster;
using testing::hold_row;

// Per device: the job it is live-reserved for (spec::reserved), else -1.
std::vector<std::int64_t> reserved_for(const Cluster& s) {
  std::vector<std::int64_t> out;
  for (int d = 0; d < s.num_devices(); ++d)
    out.push_back(spec::reserved(spec::Concrete{}, s, d) ? s.resv_for[d] : -1);
  return out;
}

// ---- Decisions -----------------------------------------------------------------------------

Decision submit(const std::string& name, Tier tier, std::int64_t world, std::int64_t min,
                std::int64_t max, std::int64_t mem = 1024,
                const std::string& type = "H100-80G") {
  return Decision::submit(name, tier, type, world, min, max, mem);
}

Decision ev(EventKind e, std::int64_t job) {
  Decision d;
  d.event = e;
  d.job = job;
  return d;
}

Decision on(EventKind e, std::int64_t job, std::vector<std::int64_t> devices, std::int64_t splice) {
  auto d = ev(e, job);
  d.devices = std::move(devices);
  d.splice = splice;
  return d;
}

Decision progress(std::int64_t job, std::int64_t step, std::int64_t gpu_ms) {
  auto d = ev(EventKind::kProgress, job);
  d.step = step;
  d.gpu_ms = gpu_ms;
  return d;
}

Decision at_step(EventKind e, std::int64_t job, std::int64_t step) {
  auto d = ev(e, job);
  d.step = step;
  return d;
}

Decision for_job(EventKind e, std::int64_t job, std::int64_t beneficiary) {
  auto d = ev(e, job);
  d.beneficiary = beneficiary;
  return d;
}

Decision shrink(std::int64_t job, std::vector<std::int64_t> devices, std::int64_t splice,
                std::int64_t beneficiary) {
  auto d = on(EventKind::kResizeDown, job, std::move(devices), splice);
  d.beneficiary = beneficiary;
  return d;
}

Decision migrate(std::int64_t job, std::vector<std::int64_t> devices, std::int64_t splice) {
  return on(EventKind::kMigrate, job, std::move(devices), splice);
}

// ---- The driver: commits, checks, records ---------------------------------------------------

struct Snapshot {
  Committed committed;
  Cluster cluster;
  std::vector<JobState> states;
};

class Driver {
 public:
  Driver(SchedulerCore& core, ManualClock& clock) : core_(core), clock_(clock) {}

  // Commits a decision that must be accepted; checks the result, every state invariant and every
  // step invariant; records the state after it.
  Committed ok(const Decision& d, JobState want) {
    SCOPED_TRACE(d.describe());
    clock_.advance(10);
    const spec::Concrete dom;
    Cluster pre = core_.cluster();
    auto params = core_.params_for(d);
    EXPECT_TRUE(params.ok()) << params.reason();
    const int job = d.event == EventKind::kSubmit ? core_.num_jobs() : static_cast<int>(d.job);
    const JobState from = d.event == EventKind::kSubmit ? JobState::kNew : core_.state(job);
    const auto committed_before = core_.committed();
    const auto rejected_before = core_.rejected();

    auto c = core_.commit(d);
    EXPECT_TRUE(c.ok()) << c.reason();
    if (!c.ok()) return {};
    EXPECT_EQ(c->seq, committed_before + 1);
    EXPECT_EQ(core_.committed(), committed_before + 1);
    EXPECT_EQ(core_.rejected(), rejected_before);
    EXPECT_EQ(c->time_ms, clock_.now_ms());
    EXPECT_EQ(c->job, job);
    EXPECT_EQ(c->from, from);
    EXPECT_EQ(c->to, want);
    EXPECT_EQ(core_.state(job), want);
    EXPECT_EQ(core_.cluster().jobs[job].state, static_cast<std::int64_t>(want));
    const auto& rows = job_rows();
    EXPECT_TRUE(c->row >= 1 && c->row <= static_cast<int>(rows.size()));
    if (c->row >= 1 && c->row <= static_cast<int>(rows.size())) {
      const auto& row = rows[c->row - 1];
      EXPECT_EQ(row.src, from) << row.label();
      EXPECT_EQ(row.event, d.event) << row.label();
      EXPECT_EQ(row.dst, want) << row.label();
    }

    // The concrete invariants, state and step parts, on the state after the commit.
    const auto& post = core_.cluster();
    for (auto inv : spec::kAllInvariants)
      EXPECT_TRUE(spec::state_invariant(dom, inv, post)) << spec::inv_id(inv);
    if (d.event == EventKind::kSubmit) {
      spec::add_job_slot(dom, pre);
    }
    if (params.ok()) {
      for (auto inv : spec::kAllInvariants) {
        if (!spec::has_step_part(inv)) continue;
        EXPECT_TRUE(spec::step_invariant(dom, inv, pre, job, *params, post))
            << spec::inv_id(inv) << " (step)";
      }
    }

    Snapshot snap{*c, post, {}};
    for (int j = 0; j < core_.num_jobs(); ++j) snap.states.push_back(core_.state(j));
    snapshots.push_back(std::move(snap));
    decisions.push_back(d);
    return *c;
  }

  // Commits a decision that must be rejected, with a reason containing every one of `needles`;
  // nothing may change but the rejected() counter.
  std::string rejected(const Decision& d, const std::vector<std::string>& needles) {
    SCOPED_TRACE(d.describe());
    clock_.advance(1);
    const Cluster before = core_.cluster();
    std::vector<JobState> states;
    for (int j = 0; j < core_.num_jobs(); ++j) states.push_back(core_.state(j));
    const auto committed_before = core_.committed();
    const auto rejected_before = core_.rejected();

    auto c = core_.commit(d);
    EXPECT_FALSE(c.ok()) << "accepted: row " << (c.ok() ? c->row : 0);
    if (c.ok()) return {};
    ++expected_rejections;
    for (const auto& n : needles)
      EXPECT_NE(c.reason().find(n), std::string::npos)
          << "reason '" << c.reason() << "' lacks '" << n << "'";
    EXPECT_EQ(core_.rejected(), rejected_before + 1);
    EXPECT_EQ(core_.committed(), committed_before);
    ExpectSameCluster(core_.cluster(), before);
    EXPECT_EQ(core_.num_jobs(), static_cast<int>(states.size()));
    for (int j = 0; j < core_.num_jobs(); ++j) EXPECT_EQ(core_.state(j), states[j]);
    return c.reason();
  }

  SchedulerCore& core() { return core_; }

  std::vector<Snapshot> snapshots;
  std::vector<Decision> decisions;
  std::uint64_t expected_rejections = 0;

 private:
  SchedulerCore& core_;
  ManualClock& clock_;
};

// The scripted lifecycle. On the default fleet: devices 0-3 on node0, 4-7 on node1, all H100-80G;
// premium reserve 4.
//   job 0 alpha   standard W=4 [1,4]: placed, preempted, resumed, migrated, resized, completed
//   job 1 beta    standard W=2 [1,2]: runs with much GPU time, crashes, later fails for good
//   job 2 gamma   basic    W=2 [1,2]: waits, cancelled
//   job 3 delta   premium  W=2 [2,2]: the favoured beneficiary; placed, completed
//   job 4 epsilon premium  W=4 [3,4]: admitted spare (beyond the premium reserve), cancelled
void run_scenario(Driver& t) {
  using E = EventKind;
  using S = JobState;
  const std::string clause_favoured = "beneficiary favoured by rank or fair share";

  // Submission and admission.
  EXPECT_EQ(t.ok(submit("alpha", Tier::kStandard, 4, 1, 4), S::kSubmitted).row, 1);
  t.ok(submit("beta", Tier::kStandard, 2, 1, 2, 2048), S::kSubmitted);
  t.ok(submit("gamma", Tier::kBasic, 2, 1, 2), S::kSubmitted);
  t.ok(submit("delta", Tier::kPremium, 2, 2, 2), S::kSubmitted);
  EXPECT_EQ(t.core().job_info(1).name, "beta");
  EXPECT_EQ(t.core().device_type(1), "H100-80G");

  // Infeasible or malformed specs are rejected and leave no job slot behind.
  t.rejected(submit("nine", Tier::kStandard, 9, 2, 2),
             {"rejected Submit for job 4 in state New", "valid_spec",
              "world splits evenly over a device count in range"});
  t.rejected(submit("too-spliced", Tier::kStandard, 18, 2, 2),
             {"world splits evenly over a device count in range"});
  t.rejected(submit("backwards", Tier::kStandard, 4, 3, 2),
             {"1 <= min_devices <= max_devices <= world <= 2^20"});
  t.rejected(submit("wide", Tier::kStandard, 4, 1, 5), {"1 <= min_devices <= max_devices <= world <= 2^20"});
  t.rejected(submit("nomem", Tier::kStandard, 4, 1, 4, 0), {"1 <= memory per worker <= 2^40 MiB"});
  t.rejected(submit("a100", Tier::kStandard, 4, 1, 4, 1024, "A100-40G"),
             {"the fleet has no device of type 'A100-40G'"});
  auto bad_tier = submit("tier", Tier::kStandard, 4, 1, 4);
  bad_tier.tier = static_cast<Tier>(7);
  t.rejected(bad_tier, {"tier known"});
  EXPECT_EQ(t.core().num_jobs(), 4);

  for (int j = 0; j < 4; ++j) t.ok(ev(E::kAdmit, j), S::kQueued);
  // Beyond the premium reserve a premium job is admitted spare: it counts nothing against it.
  const auto counted = t.core().cluster().premium_admitted.front();
  t.ok(submit("epsilon", Tier::kPremium, 4, 3, 4), S::kSubmitted);
  t.ok(ev(E::kAdmit, 4), S::kQueued);
  EXPECT_EQ(t.core().cluster().jobs[4].spare, 1);
  EXPECT_EQ(t.core().cluster().premium_admitted.front(), counted);
  t.ok(ev(E::kCancel, 4), S::kCancelled);
  EXPECT_EQ(t.core().cluster().premium_admitted.front(), counted);

  // beta runs, accumulates much GPU time, crashes and waits again (failures 1, attained 10000).
  t.ok(on(E::kPlace, 1, {4}, 2), S::kPlaced);
  t.ok(ev(E::kStart, 1), S::kRunning);
  t.ok(progress(1, 5, 10000), S::kRunning);
  EXPECT_EQ(t.ok(ev(E::kWorkerCrash, 1), S::kQueued).row, 38);
  {
    const auto& beta = t.core().cluster().jobs[1];
    EXPECT_EQ(beta.failures, 1);
    EXPECT_EQ(beta.attained, 10000);
    EXPECT_EQ(beta.progress, 0);  // rolled back: no checkpoint yet
    EXPECT_EQ(beta.devices, 0);
  }

  // Bad input, not guard rejections: errors all the same, and counted.
  t.rejected(progress(99, 1, 1), {"unknown job 99"});
  t.rejected(progress(-1, 1, 1), {"unknown job -1"});
  t.rejected(on(E::kPlace, 0, {8}, 4), {"device 8 is not in the fleet (0..7)"});
  t.rejected(on(E::kPlace, 0, {-1}, 4), {"device -1 is not in the fleet"});
  t.rejected(on(E::kPlace, 0, {0, 3, 0}, 2), {"device 0 listed twice"});
  t.rejected(ev(E::kStart, 0), {"no transition: Start for job 0 in state Queued"});

  // alpha is placed; gangs that do not fit are rejected with the clause that fails.
  t.rejected(on(E::kPlace, 0, {0, 1, 2}, 1),
             {"rejected Place for job 0 in state Queued", "gang_fits",
              "world == devices * splice, splice <= limit"});
  t.rejected(on(E::kPlace, 0, {0, 1, 2, 3, 4}, 1), {"device count in [min_devices, max_devices]"});
  t.rejected(on(E::kPlace, 0, {}, 4), {"device count in [min_devices, max_devices]"});
  t.rejected(on(E::kPlace, 0, {0}, 8), {"world == devices * splice, splice <= limit"});
  auto placed = t.ok(on(E::kPlace, 0, {0, 1}, 2), S::kPlaced);
  EXPECT_EQ(placed.row, 3);
  EXPECT_EQ(t.core().cluster().jobs[0].epoch, 1);
  EXPECT_EQ(hold_row(t.core().cluster(), 0), (std::vector<std::int64_t>{1, 1, 0, 0, 0, 0, 0, 0}));
  // Device 0 is alpha's now: nobody else may take it.
  t.rejected(on(E::kPlace, 2, {0}, 2), {"devices not held by another job"});
  t.ok(ev(E::kStart, 0), S::kRunning);
  t.ok(progress(0, 10, 500), S::kRunning);
  t.rejected(progress(0, 9, 1), {"monotone_step", "step >= current step"});
  t.rejected(progress(0, 11, -1), {"0 <= gpu_ms <= 2^62 - attained"});

  // Preemption: never for a lower tier, nor for the same tier with more attained service, nor for
  // itself or a job that does not exist.
  t.rejected(for_job(E::kPreempt, 0, 2),
             {"rejected Preempt for job 0 in state Running", "favoured_beneficiary",
              clause_favoured});
  t.rejected(for_job(E::kPreempt, 0, 1), {"favoured_beneficiary", clause_favoured});
  t.rejected(for_job(E::kPreempt, 0, 0), {clause_favoured});
  t.rejected(for_job(E::kPreempt, 0, 99), {clause_favoured});
  t.rejected(for_job(E::kPreempt, 0, 4), {clause_favoured});  // premium but cancelled, not waiting

  // Periodic checkpoint.
  t.rejected(at_step(E::kCheckpoint, 0, 11),
             {"checkpoint_in_range", "last checkpoint <= step <= current step"});
  t.ok(at_step(E::kCheckpoint, 0, 10), S::kRunning);
  EXPECT_EQ(t.core().cluster().jobs[0].ckpt, 10);
  t.rejected(at_step(E::kCheckpoint, 0, 9), {"last checkpoint <= step <= current step"});

  // Elastic resize: up to 4 devices (no splicing), then down to 2 for the premium job. A resize
  // is decided first (Resizing: the devices it grows onto are reserved for it, it keeps its own),
  // and carried out when its cut is stored (CheckpointDone: a new incarnation on the target).
  t.rejected(on(E::kResizeUp, 0, {0, 2}, 2),
             {"grows_and_fits", "keeps every held device", "more devices than now"});
  t.ok(on(E::kResizeUp, 0, {0, 1, 2, 3}, 1), S::kResizing);
  EXPECT_EQ(t.core().cluster().jobs[0].devices, 2);  // nothing moves before the cut
  EXPECT_EQ(reserved_for(t.core().cluster()), (std::vector<std::int64_t>{-1, -1, 0, 0, -1, -1, -1, -1}));
  t.rejected(on(E::kPlace, 2, {2, 3}, 1), {"devices not reserved for another job"});
  t.rejected(at_step(E::kCheckpointDone, 0, 9), {"cut_and_target_fits", "checkpoint cut at the current step"});
  t.ok(at_step(E::kCheckpointDone, 0, 10), S::kRestoring);
  EXPECT_EQ(t.core().cluster().jobs[0].devices, 4);
  EXPECT_EQ(t.core().cluster().jobs[0].splice, 1);
  EXPECT_EQ(t.core().cluster().jobs[0].epoch, 2);  // every restart is a new incarnation
  EXPECT_EQ(reserved_for(t.core().cluster()), std::vector<std::int64_t>(8, -1));
  t.ok(ev(E::kRestoreDone, 0), S::kRunning);
  t.rejected(shrink(0, {0, 1}, 2, 2), {"shrinks_for_favoured", clause_favoured});
  t.rejected(shrink(0, {0, 1}, 2, 1), {"shrinks_for_favoured", clause_favoured});
  t.rejected(shrink(0, {4, 5}, 2, 3), {"keeps a subset of the held devices"});
  t.ok(shrink(0, {0, 1}, 2, 3), S::kResizing);
  EXPECT_EQ(t.core().cluster().jobs[0].devices, 4);  // held until the cut is stored
  t.ok(at_step(E::kCheckpointDone, 0, 10), S::kRestoring);
  EXPECT_EQ(t.core().cluster().jobs[0].devices, 2);
  EXPECT_EQ(hold_row(t.core().cluster(), 0), (std::vector<std::int64_t>{3, 3, 0, 0, 0, 0, 0, 0}));
  // The devices the shrink gave up are reserved for the premium job it was for: nobody else may
  // take them, until a planner releases the reservation.
  EXPECT_EQ(reserved_for(t.core().cluster()), (std::vector<std::int64_t>{-1, -1, 3, 3, -1, -1, -1, -1}));
  t.rejected(on(E::kPlace, 1, {2, 3}, 1),
             {"rejected Place for job 1 in state Queued", "devices not reserved for another job"});
  t.ok(ev(E::kRestoreDone, 0), S::kRunning);
  t.rejected(ev(E::kRelease, 0), {"no transition: Release for job 0 in state Running"});
  t.ok(ev(E::kRelease, 3), S::kQueued);
  EXPECT_EQ(reserved_for(t.core().cluster()), std::vector<std::int64_t>(8, -1));

  // Preemption for the waiting premium job: checkpoint at the current step, then release.
  EXPECT_EQ(t.ok(for_job(E::kPreempt, 0, 3), S::kCheckpointing).row, 9);
  EXPECT_EQ(t.core().cluster().jobs[0].devices, 2);  // held until the checkpoint is committed
  t.rejected(at_step(E::kCheckpointDone, 0, 9), {"cut_at_progress", "checkpoint cut at the current step"});
  t.ok(at_step(E::kCheckpointDone, 0, 10), S::kSuspended);
  EXPECT_EQ(t.core().cluster().jobs[0].devices, 0);
  EXPECT_EQ(hold_row(t.core().cluster(), 0), std::vector<std::int64_t>(8, 0));
  // ... reserved for the job the preemption was for.
  EXPECT_EQ(reserved_for(t.core().cluster()), (std::vector<std::int64_t>{3, 3, -1, -1, -1, -1, -1, -1}));
  t.rejected(on(E::kPlace, 1, {0, 1}, 1), {"devices not reserved for another job"});

  // The premium job takes the freed devices; placing it ends its reservations.
  t.ok(on(E::kPlace, 3, {0, 1}, 1), S::kPlaced);
  EXPECT_EQ(reserved_for(t.core().cluster()), std::vector<std::int64_t>(8, -1));
  t.ok(ev(E::kStart, 3), S::kRunning);

  // alpha resumes elsewhere (new epoch) and restores.
  t.rejected(on(E::kResume, 0, {0, 1}, 2), {"gang_fits", "devices not held by another job"});
  t.ok(on(E::kResume, 0, {2, 3}, 2), S::kRestoring);
  EXPECT_EQ(t.core().cluster().jobs[0].epoch, 4);
  t.ok(ev(E::kRestoreDone, 0), S::kRunning);

  // Migration to the other node, not onto fewer devices: decided (the target reserved), carried
  // out when the cut at the current step is stored.
  t.rejected(migrate(0, {6}, 4), {"gang_fits_target", "not fewer devices than now"});
  t.rejected(migrate(0, {1, 4}, 2), {"devices not held by another job"});
  t.ok(migrate(0, {4, 5}, 2), S::kMigrating);
  EXPECT_EQ(t.core().cluster().jobs[0].epoch, 4);
  EXPECT_EQ(hold_row(t.core().cluster(), 0), (std::vector<std::int64_t>{0, 0, 4, 4, 0, 0, 0, 0}));
  EXPECT_EQ(reserved_for(t.core().cluster()), (std::vector<std::int64_t>{-1, -1, -1, -1, 0, 0, -1, -1}));
  t.rejected(at_step(E::kCheckpointDone, 0, 7), {"checkpoint cut at the current step"});
  t.ok(at_step(E::kCheckpointDone, 0, 10), S::kRestoring);
  EXPECT_EQ(t.core().cluster().jobs[0].epoch, 5);
  EXPECT_EQ(hold_row(t.core().cluster(), 0), (std::vector<std::int64_t>{0, 0, 0, 0, 5, 5, 0, 0}));
  t.ok(ev(E::kRestoreDone, 0), S::kRunning);

  // A cut that fails or times out is aborted: a new incarnation in place, from the last checkpoint;
  // the target's reservations are void. Only the runtime, the core's own timer or an operator may
  // abort: a planner may not.
  t.ok(migrate(0, {6, 7}, 2), S::kMigrating);
  auto abort = ev(E::kAbort, 0);
  abort.origin = spec::Origin::kPlanner;
  t.rejected(abort, {"a planner may not decide Abort"});
  abort.origin = spec::Origin::kCore;
  t.ok(abort, S::kPlaced);
  EXPECT_EQ(hold_row(t.core().cluster(), 0), (std::vector<std::int64_t>{0, 0, 0, 0, 6, 6, 0, 0}));
  EXPECT_EQ(t.core().cluster().jobs[0].target.size(), 0u);
  EXPECT_EQ(t.core().cluster().jobs[0].failures, 0);  // not the job's failure
  EXPECT_EQ(reserved_for(t.core().cluster()), std::vector<std::int64_t>(8, -1));
  t.ok(ev(E::kStart, 0), S::kRunning);

  // Completion.
  t.ok(progress(0, 20, 1000), S::kRunning);
  t.ok(ev(E::kComplete, 0), S::kCompleted);
  EXPECT_EQ(hold_row(t.core().cluster(), 0), std::vector<std::int64_t>(8, 0));
  t.rejected(ev(E::kComplete, 0), {"no transition: Complete for job 0 in state Completed"});
  t.rejected(ev(E::kCancel, 0), {"no transition: Cancel for job 0 in state Completed"});
  {
    const auto& alpha = t.core().cluster().jobs[0];
    EXPECT_EQ(alpha.progress, 20);
    EXPECT_EQ(alpha.ckpt, 10);
    EXPECT_EQ(alpha.attained, 1500);
    EXPECT_EQ(alpha.failures, 0);
  }
  t.ok(progress(3, 3, 50), S::kRunning);
  t.ok(ev(E::kComplete, 3), S::kCompleted);
  t.ok(ev(E::kCancel, 2), S::kCancelled);

  // beta loses its node (the platform's fault: its retries untouched), then fails on its own
  // three more times (a crash while placed, two while running), the last one for good.
  t.ok(on(E::kPlace, 1, {6, 7}, 1), S::kPlaced);
  t.ok(ev(E::kStart, 1), S::kRunning);
  EXPECT_EQ(t.ok(ev(E::kNodeLoss, 1), S::kQueued).row, 40);
  EXPECT_EQ(t.core().cluster().jobs[1].failures, 1);
  EXPECT_EQ(t.core().cluster().jobs[1].faults, 1);
  t.ok(on(E::kPlace, 1, {6, 7}, 1), S::kPlaced);
  EXPECT_EQ(t.ok(ev(E::kWorkerCrash, 1), S::kQueued).row, 34);
  EXPECT_EQ(t.core().cluster().jobs[1].failures, 2);
  t.ok(on(E::kPlace, 1, {6, 7}, 1), S::kPlaced);
  t.ok(ev(E::kStart, 1), S::kRunning);
  EXPECT_EQ(t.ok(ev(E::kWorkerCrash, 1), S::kQueued).row, 38);
  EXPECT_EQ(t.core().cluster().jobs[1].failures, 3);
  t.ok(on(E::kPlace, 1, {6, 7}, 1), S::kPlaced);
  t.ok(ev(E::kStart, 1), S::kRunning);
  EXPECT_EQ(t.ok(ev(E::kWorkerCrash, 1), S::kFailed).row, 39);
  EXPECT_EQ(t.core().cluster().jobs[1].failures, 4);
  EXPECT_EQ(t.core().cluster().jobs[1].faults, 1);
  t.rejected(on(E::kPlace, 1, {6, 7}, 1), {"no transition: Place for job 1 in state Failed"});

  // Nothing is held at the end.
  EXPECT_EQ(t.core().cluster().owner, std::vector<std::int64_t>(8, -1));
  EXPECT_EQ(t.core().cluster().node_held, (std::vector<std::int64_t>{0, 0}));
}

// The node decisions bring_up_all_nodes() commits on the default fleet (2 nodes: Register, Ready).
constexpr std::size_t kNodeDecisions = 4;

class SchedulerCoreTest : public ::testing::Test {
 protected:

  std::string file_bytes() const { return orrery::testing::read_bytes(path_); }
  void set_file_bytes(const std::string& bytes) const {
    orrery::testing::write_bytes(path_, bytes);
  }

  // Runs the scenario with a journal at path_; returns the driver (its snapshots) and leaves the
  // journal flushed and closed.
  void run_journaled(std::vector<Snapshot>& snapshots, std::vector<Decision>& decisions,
                     Cluster& final_cluster) {
    auto w = JournalWriter::open(path_, {FsyncPolicy::kNever, 4});
    ASSERT_TRUE(w.ok()) << w.reason();
    ManualClock clock(1000);
    auto core = SchedulerCore::create(default_fleet(), clock, w->get());
    ASSERT_TRUE(core.ok()) << core.reason();
    ASSERT_TRUE(bring_up_all_nodes(**core).ok());
    Driver t(**core, clock);
    run_scenario(t);
    ASSERT_TRUE((*w)->flush().ok());
    // Rejected decisions are not journaled.
    EXPECT_EQ((*w)->records(), 1 + kNodeDecisions + t.snapshots.size());
    snapshots = t.snapshots;
    decisions = t.decisions;
    final_cluster = (*core)->cluster();
  }

  orrery::testing::TempDir tmp_{"orrery_core_test"};
  const std::string& dir_ = tmp_.path();
  std::string path_ = tmp_.file("decisions.jrnl");
};

TEST_F(SchedulerCoreTest, ScriptedLifecycle) {
  ManualClock clock(1000);
  auto core = SchedulerCore::create(default_fleet(), clock, nullptr);
  ASSERT_TRUE(core.ok()) << core.reason();
  ASSERT_TRUE(bring_up_all_nodes(**core).ok());
  EXPECT_EQ((*core)->num_jobs(), 0);
  EXPECT_EQ((*core)->fleet().num_devices(), 8);
  Driver t(**core, clock);
  run_scenario(t);
  EXPECT_EQ((*core)->committed(), kNodeDecisions + t.snapshots.size());
  EXPECT_EQ((*core)->rejected(), t.expected_rejections);
  EXPECT_EQ(t.expected_rejections, 45u);  // every t.rejected() in the script
  const JobState want[] = {JobState::kCompleted, JobState::kFailed, JobState::kCancelled,
                           JobState::kCompleted, JobState::kCancelled};
  ASSERT_EQ((*core)->num_jobs(), 5);
  for (int j = 0; j < 5; ++j) EXPECT_EQ((*core)->state(j), want[j]) << "job " << j;
  // Every kind of event was committed at least once, but Retype: the default fleet has one device
  // type (AWaitingJobTakesAnotherTypeItsSpecAllows commits it).
  std::vector<bool> seen(spec::kNumEventKinds, false);
  for (const auto& d : t.decisions) seen[static_cast<int>(d.event)] = true;
  for (int e = 0; e < spec::kNumEventKinds; ++e)
    EXPECT_EQ(seen[e], static_cast<EventKind>(e) != EventKind::kRetype) << spec::event_name(static_cast<EventKind>(e));
}

// A job spec may name several device types ("A|B"); a waiting job takes another of them (Retype),
// and the devices reserved for it, of its old type, are given up with it. Every commit is checked
// against every invariant, state and step parts (Driver).
TEST_F(SchedulerCoreTest, AWaitingJobTakesAnotherTypeItsSpecAllows) {
  using E = EventKind;
  using S = JobState;
  ManualClock clock(1000);
  auto fleet = Fleet::parse(
      "premium_reserve 4\n"
      "region local\n"
      "cluster c0\n"
      "node a host_mem_mib=262144\n"
      "devices A100-80G count=4 mem_mib=81920\n"
      "node h host_mem_mib=262144\n"
      "devices H100-80G count=4 mem_mib=81920\n");
  ASSERT_TRUE(fleet.ok()) << fleet.reason();
  auto core = SchedulerCore::create(std::move(*fleet), clock, nullptr);
  ASSERT_TRUE(core.ok()) << core.reason();
  ASSERT_TRUE(bring_up_all_nodes(**core).ok());
  auto& c = **core;
  Driver t(c, clock);
  auto retype = [](std::int64_t job, const std::string& type) {
    auto d = ev(E::kRetype, job);
    d.device_type = type;
    return d;
  };
  const std::string both = "A100-80G|H100-80G";
  t.ok(submit("flex", Tier::kStandard, 4, 4, 4, 1024, both), S::kSubmitted);           // job 0
  t.ok(submit("pinned", Tier::kBasic, 4, 4, 4, 1024, "A100-80G"), S::kSubmitted);     // job 1
  EXPECT_EQ(c.job_info(0).types, (std::vector<std::int32_t>{0, 1}));
  EXPECT_TRUE(c.job_info(1).types.empty());
  EXPECT_EQ(c.device_type(0), "A100-80G");  // the first it names
  EXPECT_TRUE(c.allows_type(0, 1));
  EXPECT_FALSE(c.allows_type(1, 1));
  t.rejected(submit("typo", Tier::kStandard, 4, 4, 4, 1024, "A100-80G|T4"), {"the fleet has no device of type 'T4'"});
  t.rejected(submit("empty", Tier::kStandard, 4, 4, 4, 1024, "A100-80G||H100-80G"), {"has an empty name"});
  t.rejected(submit("twice", Tier::kStandard, 4, 4, 4, 1024, "A100-80G|A100-80G"), {"named twice"});
  t.rejected(retype(0, "H100-80G"), {"no transition: Retype for job 0 in state Submitted"});
  t.ok(ev(E::kAdmit, 0), S::kQueued);
  t.ok(ev(E::kAdmit, 1), S::kQueued);
  t.ok(on(E::kPlace, 1, {0, 1, 2, 3}, 1), S::kPlaced);
  t.ok(ev(E::kStart, 1), S::kRunning);

  // Only a type the spec allows, another than its own; a planner may decide it. A waiting job of
  // one type (the spec's guard alone would let it move) may not.
  t.ok(submit("single", Tier::kBasic, 2, 2, 2, 1024, "H100-80G"), S::kSubmitted);  // job 2, stays
  t.ok(ev(E::kAdmit, 2), S::kQueued);
  EXPECT_FALSE(c.check(retype(2, "A100-80G")).ok());  // a dry run answers as the commit does
  t.rejected(retype(2, "A100-80G"), {"job 2's spec does not allow device type 'A100-80G' (it allows H100-80G)"});
  t.ok(ev(E::kCancel, 2), S::kCancelled);
  t.rejected(retype(1, "H100-80G"), {"job 1's spec does not allow device type 'H100-80G' (it allows A100-80G)"});
  t.rejected(retype(0, "A100-80G"), {"another type than its own"});
  t.rejected(retype(0, "T4"), {"the fleet has no device of type 'T4'"});
  auto by_planner = retype(0, "H100-80G");
  by_planner.origin = spec::Origin::kPlanner;
  EXPECT_TRUE(c.check(by_planner).ok());
  t.ok(by_planner, S::kQueued);
  EXPECT_EQ(c.device_type(0), "H100-80G");
  t.rejected(on(E::kPlace, 0, {0, 1, 2, 3}, 1), {"devices of the job's type"});
  t.ok(on(E::kPlace, 0, {4, 5, 6, 7}, 1), S::kPlaced);
  t.ok(ev(E::kStart, 0), S::kRunning);
  t.rejected(retype(0, "A100-80G"), {"no transition: Retype for job 0 in state Running"});

  // A premium job on H100s cuts job 0; the devices are reserved for it. It takes the A100s
  // instead: the reservation goes (job 0 may have its devices back), and it may cut job 1 there.
  t.ok(submit("prem", Tier::kPremium, 4, 4, 4, 1024, "H100-80G|A100-80G"), S::kSubmitted);  // job 3
  t.ok(ev(E::kAdmit, 3), S::kQueued);
  t.rejected(for_job(E::kPreempt, 1, 3), {"beneficiary favoured by rank or fair share"});  // not its type
  t.ok(for_job(E::kPreempt, 0, 3), S::kCheckpointing);
  t.ok(at_step(E::kCheckpointDone, 0, 0), S::kSuspended);
  EXPECT_EQ(reserved_for(c.cluster()), (std::vector<std::int64_t>{-1, -1, -1, -1, 3, 3, 3, 3}));
  t.ok(retype(3, "A100-80G"), S::kQueued);
  EXPECT_EQ(reserved_for(c.cluster()), std::vector<std::int64_t>(8, -1));
  t.ok(on(E::kResume, 0, {4, 5, 6, 7}, 1), S::kRestoring);
  t.ok(for_job(E::kPreempt, 1, 3), S::kCheckpointing);
  t.ok(at_step(E::kCheckpointDone, 1, 0), S::kSuspended);
  t.ok(on(E::kPlace, 3, {0, 1, 2, 3}, 1), S::kPlaced);

  // A suspended job may move too, but not one an operator holds.
  auto op_cut = ev(E::kPreempt, 0);
  t.ok(ev(E::kRestoreDone, 0), S::kRunning);
  t.ok(op_cut, S::kCheckpointing);
  t.ok(at_step(E::kCheckpointDone, 0, 0), S::kSuspended);
  t.rejected(retype(0, "A100-80G"), {"not held by an operator"});
  t.ok(ev(E::kRelease, 0), S::kSuspended);
  t.ok(retype(0, "A100-80G"), S::kSuspended);
  EXPECT_EQ(c.device_type(0), "A100-80G");
  EXPECT_EQ(c.rejected(), t.expected_rejections);
}

// Resources are exact integers (design.md): the checker proves the guards over unbounded integers,
// so the core must not accept on int64 what is false over the integers. A job spec with a huge
// per-worker memory makes (splice - 1) * mem overflow in the host memory clause of GuardGang.
TEST_F(SchedulerCoreTest, HostMemoryClauseDoesNotWrapAround) {
  ManualClock clock;
  auto core = SchedulerCore::create(default_fleet(), clock, nullptr);
  ASSERT_TRUE(core.ok());
  ASSERT_TRUE(bring_up_all_nodes(**core).ok());
  auto& c = **core;
  // W=4 on exactly one device: splice 4, so 3 workers' memory must wait in host memory.
  auto s = c.commit(submit("huge", Tier::kStandard, 4, 1, 1, std::int64_t{1} << 62));
  if (!s.ok()) return;  // rejecting the spec outright is fine too
  ASSERT_TRUE(c.commit(ev(EventKind::kAdmit, 0)).ok());
  // 3 * 2^62 MiB does not fit in node0's 262144 MiB.
  auto placed = c.commit(on(EventKind::kPlace, 0, {0}, 4));
  EXPECT_FALSE(placed.ok()) << "placed a gang needing 3 * 2^62 MiB of host memory on a node with "
                            << c.fleet().nodes[0].host_mem_mib << " MiB";
  if (!placed.ok()) {
    EXPECT_NE(placed.reason().find("host memory for swapped-out workers"), std::string::npos)
        << placed.reason();
  }
}

// Reserved devices (INV-RESERVE): a reservation protects its job from the jobs it outranks, never
// from those that outrank it; a preemption is only for a job that can use the devices; a victim
// that fails before its checkpoint is committed still leaves the devices to the job they were
// freed for; only an operator may give a reservation up.
TEST_F(SchedulerCoreTest, ReservationsProtectTheBeneficiaryButNeverBlockAHigherTier) {
  using E = EventKind;
  ManualClock clock;
  auto core = SchedulerCore::create(default_fleet(), clock, nullptr);
  ASSERT_TRUE(core.ok());
  ASSERT_TRUE(bring_up_all_nodes(**core).ok());
  auto& c = **core;
  auto as_planner = [](Decision d) {
    d.origin = spec::Origin::kPlanner;
    return d;
  };
  auto must = [&](const Decision& d) {
    auto r = c.commit(d);
    EXPECT_TRUE(r.ok()) << d.describe() << ": " << r.reason();
  };
  auto refused = [&](const Decision& d, const std::string& why) {
    auto r = c.commit(d);
    ASSERT_FALSE(r.ok()) << d.describe() << " was accepted";
    EXPECT_NE(r.reason().find(why), std::string::npos) << r.reason();
  };
  // Job 0, basic, holds all eight devices.
  must(submit("victim", Tier::kBasic, 8, 8, 8));
  must(as_planner(ev(E::kAdmit, 0)));
  must(as_planner(on(E::kPlace, 0, {0, 1, 2, 3, 4, 5, 6, 7}, 1)));
  must(ev(E::kStart, 0));
  // Job 1 needs more device memory per worker than any device has: no preemption is for it.
  must(submit("too-big", Tier::kStandard, 1, 1, 1, 100000));
  must(as_planner(ev(E::kAdmit, 1)));
  refused(as_planner(for_job(E::kPreempt, 0, 1)), "beneficiary's workers fit the devices");
  // Job 2 fits: job 0 is preempted for it, and crashes before its checkpoint is committed.
  must(submit("standard", Tier::kStandard, 2, 2, 2));
  must(as_planner(ev(E::kAdmit, 2)));
  must(as_planner(for_job(E::kPreempt, 0, 2)));
  Decision crash = ev(E::kWorkerCrash, 0);
  crash.origin = spec::Origin::kRuntime;
  must(crash);
  EXPECT_EQ(reserved_for(c.cluster()), std::vector<std::int64_t>(8, 2));
  // A basic job may not take them, and a planner may not give the reservation up.
  must(submit("other-basic", Tier::kBasic, 1, 1, 1));
  must(as_planner(ev(E::kAdmit, 3)));
  refused(as_planner(on(E::kPlace, 3, {0}, 1)), "devices not reserved for another job");
  refused(as_planner(ev(E::kRelease, 2)), "a planner may not decide Release");
  // A premium job outranks job 2: the reservation does not keep it waiting.
  must(submit("premium", Tier::kPremium, 1, 1, 1));
  must(as_planner(ev(E::kAdmit, 4)));
  must(as_planner(on(E::kPlace, 4, {0}, 1)));
  // Job 2 takes two of its devices: its reservations end, the others are free for anyone.
  must(as_planner(on(E::kPlace, 2, {1, 2}, 1)));
  EXPECT_EQ(reserved_for(c.cluster()), std::vector<std::int64_t>(8, -1));
  must(as_planner(on(E::kPlace, 3, {3}, 1)));
  EXPECT_EQ(c.rejected(), 3u);
  for (auto inv : spec::kAllInvariants)
    EXPECT_TRUE(spec::state_invariant(spec::Concrete{}, inv, c.cluster())) << spec::inv_id(inv);
}

// A core over the default fleet (8 devices, premium reserve 4) with every node Up, and a commit
// that must be accepted.
struct UpCore {
  ManualClock clock;
  std::unique_ptr<SchedulerCore> core;
  UpCore() {
    auto c = SchedulerCore::create(default_fleet(), clock, nullptr);
    EXPECT_TRUE(c.ok());
    if (!c.ok()) return;
    core = std::move(*c);
    EXPECT_TRUE(bring_up_all_nodes(*core).ok());
  }
  void must(const Decision& d) {
    auto r = core->commit(d);
    EXPECT_TRUE(r.ok()) << d.describe() << ": " << r.reason();
  }
};

// A premium job beyond the premium reserve is admitted spare: it counts nothing against the reserve,
// ranks below every premium job within it (neither its lower attained service, short of a lead of
// more than spec::kReserveLeadGpuMs (the next test), nor its tier lets it cut one, and one within
// the reserve may cut it on equal service), and joins the reserve when a restart finds room.
TEST_F(SchedulerCoreTest, APremiumJobBeyondTheReserveIsSpareUntilARestartFindsRoom) {
  UpCore up;
  ASSERT_TRUE(up.core);
  auto& c = *up.core;
  auto must = [&](const Decision& d) { up.must(d); };
  auto spare = [&](int j) { return c.cluster().jobs[j].spare; };
  auto counted = [&] { return c.cluster().premium_admitted.front(); };
  must(submit("within", Tier::kPremium, 4, 4, 4));
  must(ev(EventKind::kAdmit, 0));
  must(submit("beyond", Tier::kPremium, 4, 4, 4));
  must(ev(EventKind::kAdmit, 1));
  EXPECT_EQ(spare(0), 0);
  EXPECT_EQ(spare(1), 1);
  EXPECT_EQ(counted(), 4);
  must(on(EventKind::kPlace, 1, {0, 1, 2, 3}, 1));  // the spare job runs on the devices left
  must(ev(EventKind::kStart, 1));
  must(on(EventKind::kPlace, 0, {4, 5, 6, 7}, 1));
  must(ev(EventKind::kStart, 0));
  EXPECT_EQ(spare(1), 1);  // started with no room in the reserve: still spare
  must(progress(0, 10, 1000000));  // job 0 has had far more service than anyone
  // Job 2, spare too, waits with less service than job 0, but may not cut it; job 1 has had no
  // more service than job 2, so the same-rank rule does not let job 2 cut it either.
  must(submit("spare-waiting", Tier::kPremium, 4, 4, 4));
  must(ev(EventKind::kAdmit, 2));
  EXPECT_EQ(spare(2), 1);
  auto cut0 = c.commit(for_job(EventKind::kPreempt, 0, 2));
  ASSERT_FALSE(cut0.ok());
  EXPECT_NE(cut0.reason().find("beneficiary favoured by rank"), std::string::npos) << cut0.reason();
  EXPECT_FALSE(c.commit(for_job(EventKind::kPreempt, 1, 2)).ok());
  must(ev(EventKind::kCancel, 2));
  // Job 0 completes; job 3 is admitted within the reserve and cuts the spare job 1 on equal service.
  must(ev(EventKind::kComplete, 0));
  EXPECT_EQ(counted(), 0);
  must(submit("within-2", Tier::kPremium, 4, 4, 4));
  must(ev(EventKind::kAdmit, 3));
  EXPECT_EQ(spare(3), 0);
  must(for_job(EventKind::kPreempt, 1, 3));
  must(at_step(EventKind::kCheckpointDone, 1, 0));
  must(on(EventKind::kPlace, 3, {0, 1, 2, 3}, 1));
  must(ev(EventKind::kStart, 3));
  // Job 1 resumes on the other devices; the reserve is full: still spare.
  must(on(EventKind::kResume, 1, {4, 5, 6, 7}, 1));
  EXPECT_EQ(spare(1), 1);
  must(ev(EventKind::kRestoreDone, 1));
  // Job 3 completes; job 1 is cut (an operator's suspension) and resumed: it joins the reserve.
  must(ev(EventKind::kComplete, 3));
  must(for_job(EventKind::kPreempt, 1, -1));
  must(at_step(EventKind::kCheckpointDone, 1, 0));
  must(ev(EventKind::kRelease, 1));
  must(on(EventKind::kResume, 1, {0, 1, 2, 3}, 1));
  EXPECT_EQ(spare(1), 0);
  EXPECT_EQ(counted(), 4);
  for (auto inv : spec::kAllInvariants)
    EXPECT_TRUE(spec::state_invariant(spec::Concrete{}, inv, c.cluster())) << spec::inv_id(inv);
}

// The reserve's order gives way to a lead in service (spec::kReserveLeadGpuMs, M): a spare premium
// job cuts one within the reserve that has had more than M more service than it, and the one cut
// takes precedence again only once its lead is at most M / 2 (so the two do not take turns each
// time either has had a moment's service).
TEST_F(SchedulerCoreTest, ASparePremiumJobCutsOneWithinTheReserveThatLeadsByMoreThanADay) {
  constexpr std::int64_t kM = spec::kReserveLeadGpuMs;
  UpCore up;
  ASSERT_TRUE(up.core);
  auto& c = *up.core;
  auto must = [&](const Decision& d) { up.must(d); };
  auto refused = [&](const Decision& d) {
    auto r = c.commit(d);
    ASSERT_FALSE(r.ok()) << d.describe();
    EXPECT_NE(r.reason().find("beneficiary favoured by rank"), std::string::npos) << r.reason();
  };
  must(submit("within", Tier::kPremium, 4, 4, 4));
  must(ev(EventKind::kAdmit, 0));
  must(submit("spare", Tier::kPremium, 4, 4, 4));
  must(ev(EventKind::kAdmit, 1));
  ASSERT_EQ(c.cluster().jobs[1].spare, 1);
  must(on(EventKind::kPlace, 0, {4, 5, 6, 7}, 1));
  must(ev(EventKind::kStart, 0));
  must(submit("standard", Tier::kStandard, 4, 4, 4));  // a lower tier: never, whatever the lead
  must(ev(EventKind::kAdmit, 2));
  // A lead of exactly M does not let the spare job cut it; one of M + 1 does.
  must(progress(0, 1, kM));
  refused(for_job(EventKind::kPreempt, 0, 1));
  must(progress(0, 2, 1));
  refused(for_job(EventKind::kPreempt, 0, 2));
  must(for_job(EventKind::kPreempt, 0, 1));
  must(at_step(EventKind::kCheckpointDone, 0, 2));
  EXPECT_EQ(reserved_for(c.cluster())[4], 1);  // its devices are kept for the spare job
  must(on(EventKind::kPlace, 1, {4, 5, 6, 7}, 1));
  must(ev(EventKind::kStart, 1));
  EXPECT_EQ(c.cluster().jobs[1].spare, 1);  // the reserve still counts job 0: no room to join
  EXPECT_EQ(c.cluster().jobs[0].spare, 0);  // and job 0 keeps its guarantee (INV-ADMIT)
  // Job 0, waiting, leads by M + 1: it may not cut the spare job back until its lead is M / 2.
  refused(for_job(EventKind::kPreempt, 1, 0));
  must(progress(1, 1, kM / 2));
  refused(for_job(EventKind::kPreempt, 1, 0));
  must(progress(1, 2, 1));
  must(for_job(EventKind::kPreempt, 1, 0));
  for (auto inv : spec::kAllInvariants)
    EXPECT_TRUE(spec::state_invariant(spec::Concrete{}, inv, c.cluster())) << spec::inv_id(inv);
}

// Attained service is what the same-tier fair-share rule compares: it must never wrap around to a
// negative value (which would make a job that received the most service look the most deprived).
TEST_F(SchedulerCoreTest, AttainedServiceDoesNotWrapAround) {
  ManualClock clock;
  auto core = SchedulerCore::create(default_fleet(), clock, nullptr);
  ASSERT_TRUE(core.ok());
  ASSERT_TRUE(bring_up_all_nodes(**core).ok());
  auto& c = **core;
  ASSERT_TRUE(c.commit(submit("a", Tier::kStandard, 1, 1, 1)).ok());
  ASSERT_TRUE(c.commit(ev(EventKind::kAdmit, 0)).ok());
  ASSERT_TRUE(c.commit(on(EventKind::kPlace, 0, {0}, 1)).ok());
  ASSERT_TRUE(c.commit(ev(EventKind::kStart, 0)).ok());
  ASSERT_TRUE(c.commit(progress(0, 1, 1000)).ok());
  for (std::int64_t gpu_ms : {std::numeric_limits<std::int64_t>::max(), std::int64_t{10}}) {
    const auto before = c.cluster().jobs[0].attained;
    auto r = c.commit(progress(0, c.cluster().jobs[0].progress + 1, gpu_ms));
    if (r.ok()) {
      EXPECT_GE(c.cluster().jobs[0].attained, before)
          << "attained went from " << before << " to " << c.cluster().jobs[0].attained
          << " after +" << gpu_ms << " gpu-ms";
    }
  }
}

TEST_F(SchedulerCoreTest, CreateNeedsAnEmptyJournal) {
  auto w = JournalWriter::open(path_, {FsyncPolicy::kNever, 1});
  ASSERT_TRUE(w.ok()) << w.reason();
  ASSERT_TRUE((*w)->append("something").ok());
  ManualClock clock;
  auto core = SchedulerCore::create(default_fleet(), clock, w->get());
  ASSERT_FALSE(core.ok());
  EXPECT_NE(core.reason().find("journal already has records"), std::string::npos) << core.reason();
}

TEST_F(SchedulerCoreTest, JournalFirstRecordIsTheFleet) {
  {
    auto w = JournalWriter::open(path_, {FsyncPolicy::kNever, 8});
    ASSERT_TRUE(w.ok());
    ManualClock clock;
    auto core = SchedulerCore::create(default_fleet(), clock, w->get());
    ASSERT_TRUE(core.ok());
  }
  auto c = read_journal(path_);
  ASSERT_TRUE(c.ok()) << c.reason();
  ASSERT_EQ(c->records.size(), 1u);
  auto rec = decode_record(c->records[0]);
  ASSERT_TRUE(rec.ok()) << rec.reason();
  EXPECT_EQ(rec->kind, RecordKind::kFleet);
  EXPECT_EQ(rec->fleet_text, default_fleet().to_text());
}

TEST_F(SchedulerCoreTest, RecoveryRebuildsTheSameCluster) {
  std::vector<Snapshot> snaps;
  std::vector<Decision> decisions;
  Cluster final_cluster;
  run_journaled(snaps, decisions, final_cluster);
  if (HasFatalFailure()) return;

  auto contents = read_journal(path_);
  ASSERT_TRUE(contents.ok()) << contents.reason();
  EXPECT_TRUE(contents->clean) << contents->tail_error;
  ASSERT_EQ(contents->records.size(), 1 + kNodeDecisions + snaps.size());

  ManualClock clock(0);
  std::size_t i = 0;
  auto core = SchedulerCore::recover(
      contents->records, clock, nullptr,
      [&](const SchedulerCore& c, const Committed& committed, const Decision& d) {
        ASSERT_LT(i, snaps.size());
        SCOPED_TRACE("decision " + std::to_string(i + 1) + ": " + d.describe());
        EXPECT_EQ(d.describe(), decisions[i].describe());
        EXPECT_EQ(committed.seq, snaps[i].committed.seq);
        EXPECT_EQ(committed.time_ms, snaps[i].committed.time_ms);
        EXPECT_EQ(committed.job, snaps[i].committed.job);
        EXPECT_EQ(committed.from, snaps[i].committed.from);
        EXPECT_EQ(committed.to, snaps[i].committed.to);
        EXPECT_EQ(committed.row, snaps[i].committed.row);
        ExpectSameCluster(c.cluster(), snaps[i].cluster);
        ++i;
      });
  ASSERT_TRUE(core.ok()) << core.reason();
  EXPECT_EQ(i, snaps.size());
  ExpectSameCluster((*core)->cluster(), final_cluster);
  EXPECT_EQ((*core)->committed(), kNodeDecisions + snaps.size());
  EXPECT_EQ((*core)->rejected(), 0u);
  ASSERT_EQ((*core)->num_jobs(), 5);
  for (int j = 0; j < 5; ++j) EXPECT_EQ((*core)->state(j), snaps.back().states[j]);
  EXPECT_EQ((*core)->job_info(0).name, "alpha");
  EXPECT_EQ((*core)->job_info(4).name, "epsilon");
  EXPECT_EQ((*core)->fleet().to_text(), default_fleet().to_text());
}

// A corrupt or torn tail: recovery stops at the last good record, with the state the original had
// after that many decisions; the journal reopened for append drops the tail, and committing the
// lost decision again brings back the original final state.
TEST_F(SchedulerCoreTest, RecoveryStopsAtTheLastGoodRecord) {
  std::vector<Snapshot> snaps;
  std::vector<Decision> decisions;
  Cluster final_cluster;
  run_journaled(snaps, decisions, final_cluster);
  if (HasFatalFailure()) return;
  const std::string good = file_bytes();
  const std::size_t n = snaps.size();

  for (int variant = 0; variant < 3; ++variant) {
    SCOPED_TRACE(variant == 0 ? "flipped last bytes" : variant == 1 ? "truncated" : "garbage appended");
    std::string bad = good;
    std::size_t want_decisions = n - 1;
    if (variant == 0) {
      for (std::size_t k = bad.size() - 3; k < bad.size(); ++k) bad[k] = static_cast<char>(~bad[k]);
    } else if (variant == 1) {
      bad.resize(bad.size() - 5);
    } else {
      bad += std::string("\x10\x00\x00\x00\xde\xad\xbe\xef partial", 16);
      want_decisions = n;
    }
    set_file_bytes(bad);

    auto contents = read_journal(path_);
    ASSERT_TRUE(contents.ok()) << contents.reason();
    EXPECT_FALSE(contents->clean);
    EXPECT_FALSE(contents->tail_error.empty());
    ASSERT_EQ(contents->records.size(), 1 + kNodeDecisions + want_decisions);
    ManualClock clock;
    auto core = SchedulerCore::recover(contents->records, clock, nullptr);
    ASSERT_TRUE(core.ok()) << core.reason();
    EXPECT_EQ((*core)->committed(), kNodeDecisions + want_decisions);
    ExpectSameCluster((*core)->cluster(), snaps[want_decisions - 1].cluster);
    for (int j = 0; j < (*core)->num_jobs(); ++j)
      EXPECT_EQ((*core)->state(j), snaps[want_decisions - 1].states[j]);
  }

  // Reopen for append (drops the torn tail), recover into it, commit the lost decision again.
  set_file_bytes(good.substr(0, good.size() - 2));
  {
    auto w = JournalWriter::open(path_, {FsyncPolicy::kNever, 4});
    ASSERT_TRUE(w.ok()) << w.reason();
    EXPECT_FALSE((*w)->recovered_tail_error().empty());
    EXPECT_EQ((*w)->records(), kNodeDecisions + n);
    auto contents = read_journal(path_);
    ASSERT_TRUE(contents.ok());
    EXPECT_TRUE(contents->clean);
    ManualClock clock(1'000'000);
    auto core = SchedulerCore::recover(contents->records, clock, w->get());
    ASSERT_TRUE(core.ok()) << core.reason();
    auto c = (*core)->commit(decisions.back());
    ASSERT_TRUE(c.ok()) << c.reason();
    EXPECT_EQ(c->seq, kNodeDecisions + n);
    ExpectSameCluster((*core)->cluster(), final_cluster);
    ASSERT_TRUE((*w)->flush().ok());
  }
  auto contents = read_journal(path_);
  ASSERT_TRUE(contents.ok());
  EXPECT_TRUE(contents->clean) << contents->tail_error;
  ASSERT_EQ(contents->records.size(), 1 + kNodeDecisions + n);
  ManualClock clock;
  auto core = SchedulerCore::recover(contents->records, clock, nullptr);
  ASSERT_TRUE(core.ok()) << core.reason();
  ExpectSameCluster((*core)->cluster(), final_cluster);
}

TEST_F(SchedulerCoreTest, RecoveryErrors) {
  ManualClock clock;
  const std::string fleet = encode_fleet_record(default_fleet().to_text());
  auto err = [&](const std::vector<std::string>& records, const std::string& needle) {
    auto core = SchedulerCore::recover(records, clock, nullptr);
    ASSERT_FALSE(core.ok());
    EXPECT_NE(core.reason().find(needle), std::string::npos) << core.reason();
  };
  err({}, "journal has no fleet record");
  err({encode_decision_record(submit("a", Tier::kBasic, 1, 1, 1), 0)},
      "journal record 1 is not the fleet record");
  err({"garbage"}, "journal record 1: ");
  err({encode_fleet_record("region r\n")}, "journal record 1: fleet has no devices");
  err({fleet, fleet}, "journal record 2: a second fleet record");
  err({fleet, "D\x01"}, "journal record 2: bad decision record");
  // A decision that the state does not allow: the journal is not from this core.
  err({fleet, encode_decision_record(submit("a", Tier::kBasic, 1, 1, 1), 0),
       encode_decision_record(ev(EventKind::kStart, 0), 0)},
      "journal record 3 (Start job 0) does not replay: no transition: Start for job 0 in state "
      "Submitted");
  err({fleet, encode_decision_record(submit("nine", Tier::kBasic, 9, 2, 2), 0)},
      "journal record 2 (Submit 'nine'");
}

// At the largest memory a spec may ask for (2^40 MiB per worker), the host-memory sum is exact.
TEST_F(SchedulerCoreTest, HostMemoryClauseAtTheMemoryBound) {
  ManualClock clock;
  auto core = SchedulerCore::create(default_fleet(), clock, nullptr);
  ASSERT_TRUE(core.ok());
  ASSERT_TRUE(bring_up_all_nodes(**core).ok());
  auto& c = **core;
  ASSERT_TRUE(c.commit(submit("huge", Tier::kStandard, 4, 1, 1, spec::kMaxMemMib)).ok());
  EXPECT_FALSE(c.commit(submit("huger", Tier::kStandard, 4, 1, 1, spec::kMaxMemMib + 1)).ok());
  ASSERT_TRUE(c.commit(ev(EventKind::kAdmit, 0)).ok());
  auto placed = c.commit(on(EventKind::kPlace, 0, {0}, 4));
  ASSERT_FALSE(placed.ok());
  EXPECT_NE(placed.reason().find("host memory for swapped-out workers"), std::string::npos)
      << placed.reason();
  EXPECT_NE(placed.reason().find("with memory for a worker"), std::string::npos) << placed.reason();
}

// A worker must fit in the memory of the device it is placed on.
TEST_F(SchedulerCoreTest, DeviceMemoryMustHoldAWorker) {
  auto fleet = Fleet::parse(
      "region r\ncluster c\nnode n host_mem_mib=1000000\n"
      "devices A100-40G count=2 mem_mib=40960\n");
  ASSERT_TRUE(fleet.ok()) << fleet.reason();
  ManualClock clock;
  auto core = SchedulerCore::create(*fleet, clock, nullptr);
  ASSERT_TRUE(core.ok());
  ASSERT_TRUE(bring_up_all_nodes(**core).ok());
  auto& c = **core;
  ASSERT_TRUE(c.commit(submit("big", Tier::kStandard, 2, 1, 2, 50000, "A100-40G")).ok());
  ASSERT_TRUE(c.commit(submit("fits", Tier::kStandard, 2, 1, 2, 40960, "A100-40G")).ok());
  ASSERT_TRUE(c.commit(ev(EventKind::kAdmit, 0)).ok());
  ASSERT_TRUE(c.commit(ev(EventKind::kAdmit, 1)).ok());
  auto big = c.commit(on(EventKind::kPlace, 0, {0, 1}, 1));
  ASSERT_FALSE(big.ok());
  EXPECT_NE(big.reason().find("with memory for a worker"), std::string::npos) << big.reason();
  EXPECT_TRUE(c.commit(on(EventKind::kPlace, 1, {0, 1}, 1)).ok());
}

// Planners decide placement and preemption only: they cannot free devices by reporting a failure,
// completing or cancelling a job. The runtime reports; it does not place. Operators may do anything.
TEST_F(SchedulerCoreTest, OriginsAreEnforced) {
  ManualClock clock;
  auto core = SchedulerCore::create(default_fleet(), clock, nullptr);
  ASSERT_TRUE(core.ok());
  ASSERT_TRUE(bring_up_all_nodes(**core).ok());
  auto& c = **core;
  auto as = [](Decision d, spec::Origin o) {
    d.origin = o;
    return d;
  };
  using spec::Origin;
  ASSERT_TRUE(c.commit(submit("a", Tier::kBasic, 4, 4, 4)).ok());
  EXPECT_FALSE(c.commit(as(submit("b", Tier::kBasic, 4, 4, 4), Origin::kRuntime)).ok());
  EXPECT_FALSE(c.commit(as(submit("b", Tier::kBasic, 4, 4, 4), Origin::kPlanner)).ok());
  ASSERT_TRUE(c.commit(as(ev(EventKind::kAdmit, 0), Origin::kPlanner)).ok());
  auto place = on(EventKind::kPlace, 0, {0, 1, 2, 3}, 1);
  auto by_runtime = c.commit(as(place, Origin::kRuntime));
  ASSERT_FALSE(by_runtime.ok());
  EXPECT_NE(by_runtime.reason().find("a runtime may not decide Place"), std::string::npos)
      << by_runtime.reason();
  ASSERT_TRUE(c.commit(as(place, Origin::kPlanner)).ok());
  EXPECT_FALSE(c.commit(as(ev(EventKind::kStart, 0), Origin::kPlanner)).ok());
  ASSERT_TRUE(c.commit(as(ev(EventKind::kStart, 0), Origin::kRuntime)).ok());
  for (auto e : {EventKind::kWorkerCrash, EventKind::kNodeLoss, EventKind::kComplete,
                 EventKind::kCancel, EventKind::kProgress}) {
    auto r = c.commit(as(ev(e, 0), Origin::kPlanner));
    ASSERT_FALSE(r.ok()) << spec::event_name(e);
    EXPECT_NE(r.reason().find("a planner may not decide"), std::string::npos) << r.reason();
    EXPECT_EQ(c.state(0), JobState::kRunning);
  }
  EXPECT_FALSE(c.commit(as(ev(EventKind::kCancel, 0), Origin::kRuntime)).ok());
  EXPECT_TRUE(c.commit(as(ev(EventKind::kNodeLoss, 0), Origin::kOperator)).ok());
  EXPECT_EQ(c.state(0), JobState::kQueued);
}

// A decision may be acted on only once durable: durable_seq() follows the journal's group commit.
TEST_F(SchedulerCoreTest, DurableSeqFollowsGroupCommit) {
  JournalOptions opts;
  opts.fsync = FsyncPolicy::kGroup;
  opts.group_records = 4;
  auto w = JournalWriter::open(path_, opts);
  ASSERT_TRUE(w.ok()) << w.reason();
  ManualClock clock;
  auto core = SchedulerCore::create(default_fleet(), clock, w->get());
  ASSERT_TRUE(core.ok());
  auto& c = **core;
  EXPECT_EQ(c.durable_seq(), 0u);
  for (int i = 0; i < 3; ++i) {
    auto r = c.commit(submit("j" + std::to_string(i), Tier::kBasic, 1, 1, 1));
    ASSERT_TRUE(r.ok());
    EXPECT_FALSE(r->durable);
  }
  EXPECT_EQ(c.durable_seq(), 0u);
  auto fourth = c.commit(submit("j3", Tier::kBasic, 1, 1, 1));  // fills the group: written, synced
  ASSERT_TRUE(fourth.ok());
  EXPECT_TRUE(fourth->durable);
  EXPECT_EQ(c.durable_seq(), 4u);
  ASSERT_TRUE(c.commit(submit("j4", Tier::kBasic, 1, 1, 1)).ok());
  EXPECT_EQ(c.durable_seq(), 4u);
  ASSERT_TRUE(c.sync().ok());
  EXPECT_EQ(c.durable_seq(), 5u);
  EXPECT_EQ(c.committed(), 5u);
}

TEST_F(SchedulerCoreTest, NothingIsDurableWithoutAJournal) {
  ManualClock clock;
  auto core = SchedulerCore::create(default_fleet(), clock, nullptr);
  ASSERT_TRUE(core.ok());
  auto r = (*core)->commit(submit("a", Tier::kBasic, 1, 1, 1));
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->durable);
  EXPECT_EQ((*core)->durable_seq(), 0u);
}

}  // namespace
}  // namespace orrery::core
