// Unit tests of the job lifecycle machine (core/job_machine.h) and of the rows introspected from
// its Boost.MSM table (job_rows()): illegal events are errors that leave the machine alone, the
// table has the documented shape, and the machine takes exactly the row job_rows() describes.
#include "core/job_machine.h"

#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "core/fleet.h"
#include "core/row_desc.h"
#include "spec/invariants.h"
#include "tests/cluster_view.h"

namespace orrery::core {
namespace {

using spec::EventKind;
using spec::JobState;
using Cluster = spec::ClusterVars<spec::Concrete>;
using Params = spec::Params<spec::Concrete>;

std::string name_of(JobState s) { return std::string(spec::state_name(s)); }
std::string name_of(EventKind e) { return std::string(spec::event_name(e)); }

bool is_terminal(JobState s) {
  return s == JobState::kCompleted || s == JobState::kFailed || s == JobState::kCancelled;
}

// The default fleet (8 devices on 2 nodes) with two job slots: job 0 is driven by the machine under
// test; job 1 is a premium job waiting in Queued, the beneficiary preemption and shrink rows need.
class JobMachineTest : public ::testing::Test {
 protected:
  void SetUp() override {
    cluster_ = default_fleet().empty_cluster();
    testing::all_nodes_up(cluster_);
    spec::Concrete d;
    for (int j = 0; j < 2; ++j) spec::add_job_slot(d, cluster_);
    auto& waiting = cluster_.jobs[1];
    waiting.state = static_cast<std::int64_t>(JobState::kQueued);
    waiting.tier = static_cast<std::int64_t>(spec::Tier::kPremium);
    waiting.world = waiting.min_dev = waiting.max_dev = 1;
    waiting.mem = 1;
    cluster_.premium_admitted = {1};  // its share, so that INV-INDEX holds from the start
  }

  // Parameters the guard of a row for `e` accepts in the state the scripted path below reaches.
  Params params_for(EventKind e) const {
    const auto& job = cluster_.jobs[0];
    Params p{};
    p.beneficiary = 1;
    auto select = [&](std::vector<int> devs, int splice) {
      p.sel.assign(devs.begin(), devs.end());
      p.splice = splice;
    };
    switch (e) {
      case EventKind::kSubmit:
        p.tier = static_cast<std::int64_t>(spec::Tier::kStandard);
        p.dtype = 0;
        p.world = 4;
        p.min_dev = 1;
        p.max_dev = 4;
        p.mem = 1024;
        break;
      case EventKind::kPlace:
        select({0, 1}, 2);
        break;
      case EventKind::kResume:  // after a preemption for job 1, devices 0 and 1 are reserved for it
        select({2, 3}, 2);
        break;
      case EventKind::kMigrate:
        select({4, 5}, 2);
        break;
      case EventKind::kResizeUp:
        select({0, 1, 2, 3}, 1);
        break;
      case EventKind::kResizeDown:
        select({0}, 4);
        break;
      case EventKind::kProgress:
        p.step = job.progress + 5;
        p.gpu_ms = 100;
        break;
      case EventKind::kCheckpoint:
      case EventKind::kCheckpointDone:
        p.step = job.progress;
        break;
      case EventKind::kRetype:  // another type (the fleet's other types are the core's to know)
        p.dtype = job.dtype + 1;
        break;
      default:
        break;
    }
    return p;
  }

  // Fires `e` on job 0 with accepted parameters and mirrors the state, as the core does.
  Status fire(JobMachine& m, EventKind e) {
    auto p = params_for(e);
    FireContext ctx{&cluster_, 0, &p};
    auto st = m.fire(e, ctx);
    cluster_.jobs[0].state = static_cast<std::int64_t>(m.state());
    return st;
  }

  // Drives a fresh machine to `target` along a legal path.
  void drive_to(JobMachine& m, JobState target) {
    static const std::map<JobState, std::vector<EventKind>> kPaths = {
        {JobState::kNew, {}},
        {JobState::kSubmitted, {EventKind::kSubmit}},
        {JobState::kQueued, {EventKind::kSubmit, EventKind::kAdmit}},
        {JobState::kPlaced, {EventKind::kSubmit, EventKind::kAdmit, EventKind::kPlace}},
        {JobState::kRunning,
         {EventKind::kSubmit, EventKind::kAdmit, EventKind::kPlace, EventKind::kStart}},
        {JobState::kCheckpointing,
         {EventKind::kSubmit, EventKind::kAdmit, EventKind::kPlace, EventKind::kStart,
          EventKind::kProgress, EventKind::kPreempt}},
        {JobState::kResizing,
         {EventKind::kSubmit, EventKind::kAdmit, EventKind::kPlace, EventKind::kStart,
          EventKind::kProgress, EventKind::kResizeUp}},
        {JobState::kSuspended,
         {EventKind::kSubmit, EventKind::kAdmit, EventKind::kPlace, EventKind::kStart,
          EventKind::kProgress, EventKind::kPreempt, EventKind::kCheckpointDone}},
        {JobState::kRestoring,
         {EventKind::kSubmit, EventKind::kAdmit, EventKind::kPlace, EventKind::kStart,
          EventKind::kPreempt, EventKind::kCheckpointDone, EventKind::kResume}},
        {JobState::kMigrating,
         {EventKind::kSubmit, EventKind::kAdmit, EventKind::kPlace, EventKind::kStart,
          EventKind::kProgress, EventKind::kMigrate}},
        {JobState::kCompleted,
         {EventKind::kSubmit, EventKind::kAdmit, EventKind::kPlace, EventKind::kStart,
          EventKind::kComplete}},
        {JobState::kFailed, {EventKind::kSubmit, EventKind::kAdmit, EventKind::kPlace,
                             EventKind::kWorkerCrash}},  // with failures at the limit
        {JobState::kCancelled, {EventKind::kSubmit, EventKind::kCancel}},
    };
    for (auto e : kPaths.at(target)) {
      if (target == JobState::kFailed && e == EventKind::kWorkerCrash)
        cluster_.jobs[0].failures = spec::kMaxRetries;
      auto st = fire(m, e);
      ASSERT_TRUE(st.ok()) << "on the way to " << name_of(target) << ": " << st.reason();
    }
    ASSERT_EQ(m.state(), target);
  }

  Cluster cluster_;
};

TEST_F(JobMachineTest, StartsInNew) {
  JobMachine m;
  EXPECT_EQ(m.state(), JobState::kNew);
}

TEST_F(JobMachineTest, IllegalEventIsAnErrorNamingEventAndStateAndChangesNothing) {
  JobMachine m;
  const auto before = cluster_;
  auto p = params_for(EventKind::kStart);
  FireContext ctx{&cluster_, 0, &p};
  auto st = m.fire(EventKind::kStart, ctx);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.reason().find("Start"), std::string::npos) << st.reason();
  EXPECT_NE(st.reason().find("New"), std::string::npos) << st.reason();
  EXPECT_EQ(st.reason(), "no transition for Start in state New");
  EXPECT_EQ(m.state(), JobState::kNew);
  testing::ExpectSameCluster(cluster_, before);

  // The machine still works after the rejection.
  ASSERT_TRUE(fire(m, EventKind::kSubmit).ok());
  EXPECT_EQ(m.state(), JobState::kSubmitted);
}

TEST_F(JobMachineTest, EveryEventWithoutARowIsRejectedInEveryState) {
  std::set<std::pair<JobState, EventKind>> has_row;
  for (const auto& r : job_rows()) has_row.insert({r.src, r.event});
  int rejected = 0;
  for (int s = 0; s < spec::kNumJobStates; ++s) {
    const auto state = static_cast<JobState>(s);
    for (int e = 0; e < spec::kNumEventKinds; ++e) {
      const auto event = static_cast<EventKind>(e);
      if (has_row.count({state, event})) continue;
      SetUp();  // a fresh cluster per attempt
      JobMachine m;
      drive_to(m, state);
      if (HasFatalFailure()) return;
      const auto before = cluster_;
      auto p = params_for(event);
      FireContext ctx{&cluster_, 0, &p};
      auto st = m.fire(event, ctx);
      ASSERT_FALSE(st.ok()) << name_of(event) << " in " << name_of(state);
      EXPECT_EQ(st.reason(), "no transition for " + name_of(event) + " in state " + name_of(state));
      EXPECT_EQ(m.state(), state);
      testing::ExpectSameCluster(cluster_, before);
      ++rejected;
    }
  }
  EXPECT_EQ(rejected, spec::kNumJobStates * spec::kNumEventKinds - 52);  // 52 (src, event) pairs
}

TEST_F(JobMachineTest, GuardRejectionIsAnErrorAndChangesNothing) {
  JobMachine m;
  auto p = params_for(EventKind::kSubmit);
  p.min_dev = 5;  // > max_dev
  FireContext ctx{&cluster_, 0, &p};
  const auto job_before = cluster_.jobs[0];
  auto st = m.fire(EventKind::kSubmit, ctx);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.reason(), "guard rejected Submit in state New");
  EXPECT_EQ(m.state(), JobState::kNew);
  for (const auto& [field, member] : spec::job_fields<spec::Concrete>())
    EXPECT_EQ(cluster_.jobs[0].*member, job_before.*member) << field;

  // A gang that does not fit: the Place guard rejects, the devices stay free.
  drive_to(m, JobState::kQueued);
  auto place = params_for(EventKind::kPlace);
  place.splice = 3;  // 2 devices x 3 != world 4
  FireContext pctx{&cluster_, 0, &place};
  st = m.fire(EventKind::kPlace, pctx);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.reason(), "guard rejected Place in state Queued");
  EXPECT_EQ(m.state(), JobState::kQueued);
  EXPECT_EQ(testing::hold_row(cluster_, 0), std::vector<std::int64_t>(8, 0));
  EXPECT_EQ(cluster_.jobs[0].epoch, 0);
}

TEST_F(JobMachineTest, UnknownEventValueIsAnError) {
  JobMachine m;
  auto p = params_for(EventKind::kSubmit);
  FireContext ctx{&cluster_, 0, &p};
  auto st = m.fire(static_cast<EventKind>(spec::kNumEventKinds), ctx);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.reason(), "unknown event 20");
  EXPECT_EQ(m.state(), JobState::kNew);
}

TEST_F(JobMachineTest, FireRunsTheEffectButLeavesTheStateVariableToTheCaller) {
  JobMachine m;
  auto p = params_for(EventKind::kSubmit);
  FireContext ctx{&cluster_, 0, &p};
  ASSERT_TRUE(m.fire(EventKind::kSubmit, ctx).ok());
  EXPECT_EQ(m.state(), JobState::kSubmitted);
  EXPECT_EQ(cluster_.jobs[0].world, 4);
  EXPECT_EQ(cluster_.jobs[0].mem, 1024);
  EXPECT_EQ(cluster_.jobs[0].state, static_cast<std::int64_t>(JobState::kNew));
}

// One machine serves every job: positioned at a job's recorded state, it takes that state's rows.
TEST_F(JobMachineTest, PositionedMachineServesAnyJob) {
  JobMachine m;
  for (int s = 0; s < spec::kNumJobStates; ++s) {
    m.position(static_cast<JobState>(s));
    EXPECT_EQ(m.state(), static_cast<JobState>(s));
  }
  // Drive a job to Queued, then use the same machine for a second job still in New, and back.
  m.position(JobState::kNew);
  drive_to(m, JobState::kQueued);
  m.position(JobState::kNew);
  EXPECT_EQ(m.state(), JobState::kNew);
  auto p = params_for(EventKind::kSubmit);
  FireContext ctx{&cluster_, 1, &p};  // job 1's slot: any job index works
  cluster_.jobs[1].state = static_cast<std::int64_t>(JobState::kNew);
  ASSERT_TRUE(m.fire(EventKind::kSubmit, ctx).ok());
  EXPECT_EQ(m.state(), JobState::kSubmitted);
  m.position(JobState::kQueued);
  ASSERT_TRUE(fire(m, EventKind::kPlace).ok());  // job 0, from its recorded Queued
  EXPECT_EQ(m.state(), JobState::kPlaced);
}

TEST_F(JobMachineTest, MovedMachineKeepsItsState) {
  JobMachine a;
  drive_to(a, JobState::kQueued);
  JobMachine b(std::move(a));
  EXPECT_EQ(b.state(), JobState::kQueued);
  JobMachine c;
  c = std::move(b);
  EXPECT_EQ(c.state(), JobState::kQueued);
  ASSERT_TRUE(fire(c, EventKind::kPlace).ok());
  EXPECT_EQ(c.state(), JobState::kPlaced);
  std::vector<JobMachine> many(3);
  many.emplace_back();  // reallocation moves them
  for (const auto& x : many) EXPECT_EQ(x.state(), JobState::kNew);
}

// The machine (the Boost.MSM back-end) takes exactly the row that job_rows() (introspection of the
// same table) describes: from each row's source, its event with accepted parameters leads to its
// target, and its effect ran.
TEST_F(JobMachineTest, EveryRowIsTakenByTheMachine) {
  for (const auto& row : job_rows()) {
    SCOPED_TRACE(row.label());
    SetUp();
    JobMachine m;
    drive_to(m, row.src);
    if (HasFatalFailure()) return;
    cluster_.jobs[0].failures = row.guard_name == "retries_exhausted" ? spec::kMaxRetries : 0;
    cluster_.jobs[0].faults =
        row.guard_name == "platform_faults_exhausted" ? spec::kMaxPlatformFaults : 0;
    const auto epoch = cluster_.jobs[0].epoch;
    auto st = fire(m, row.event);
    ASSERT_TRUE(st.ok()) << st.reason();
    EXPECT_EQ(m.state(), row.dst);
    spec::Concrete d;
    if (spec::starting_state(d, static_cast<std::int64_t>(row.dst)) && row.src != row.dst) {
      EXPECT_EQ(cluster_.jobs[0].epoch, epoch + 1);
    }
    if (spec::holding_state(d, static_cast<std::int64_t>(row.dst))) {
      EXPECT_GT(cluster_.jobs[0].devices, 0);
    } else {
      EXPECT_EQ(cluster_.jobs[0].devices, 0);
      EXPECT_EQ(testing::hold_row(cluster_, 0), std::vector<std::int64_t>(8, 0));
    }
    for (auto inv : spec::kAllInvariants)
      EXPECT_TRUE(spec::state_invariant(d, inv, cluster_)) << spec::inv_id(inv);
  }
}

TEST(JobRowsTest, SixtyFourRowsInTableOrder) {
  const auto& rows = job_rows();
  ASSERT_EQ(rows.size(), 64u);
  for (std::size_t i = 0; i < rows.size(); ++i) EXPECT_EQ(rows[i].index, static_cast<int>(i + 1));
  EXPECT_EQ(rows.front().label(), "#1 New --Submit--> Submitted [valid_spec / record_spec]");
  EXPECT_EQ(rows[8].label(),
            "#9 Running --Preempt--> Checkpointing [favoured_beneficiary / remember_beneficiary]");
  EXPECT_EQ(rows[13].label(),
            "#14 Migrating --CheckpointDone--> Restoring [cut_and_target_fits / "
            "checkpoint_new_epoch_take_target]");
  EXPECT_EQ(rows[16].label(),
            "#17 Queued --Release--> Queued [none / void_reservations_release_hold]");
  EXPECT_EQ(rows[62].label(), "#63 Queued --Retype--> Queued [another_type / take_type_void_reservations]");
  EXPECT_EQ(rows[26].label(), "#27 Migrating --Abort--> Placed [none / new_epoch_rollback_in_place]");
  EXPECT_EQ(rows[61].label(), "#62 Resizing --Cancel--> Cancelled [none / release_unreserve_unadmit]");
  EXPECT_EQ(rows.back().label(),
            "#64 Suspended --Retype--> Suspended [another_type / take_type_void_reservations]");
  // Guard and effect pointers are present exactly when the names are.
  for (const auto& r : rows) {
    EXPECT_EQ(r.guard == nullptr, r.guard_name == "none") << r.label();
    EXPECT_EQ(r.effect == nullptr, r.action_name == "none") << r.label();
  }
}

TEST(JobRowsTest, SeveralRowsForOneSourceAndEventHaveMutuallyExclusiveGuards) {
  std::map<std::pair<JobState, EventKind>, std::vector<const RowDesc<spec::Concrete>*>> groups;
  for (const auto& r : job_rows()) groups[{r.src, r.event}].push_back(&r);
  EXPECT_EQ(groups.size(), 52u);

  Cluster s = default_fleet().empty_cluster();
  spec::Concrete d;
  spec::add_job_slot(d, s);
  Params p{};  // no devices selected: the failure rows' guards read none

  int multi = 0;
  for (const auto& [key, rows] : groups) {
    if (rows.size() == 1) continue;
    ++multi;
    SCOPED_TRACE(name_of(key.first) + " --" + name_of(key.second) + "-->");
    EXPECT_TRUE(key.second == EventKind::kWorkerCrash || key.second == EventKind::kNodeLoss);
    ASSERT_EQ(rows.size(), 2u);
    std::set<JobState> targets;
    for (const auto* r : rows) {
      ASSERT_NE(r->guard, nullptr) << r->label() << ": an unguarded row shadows the others";
      targets.insert(r->dst);
    }
    EXPECT_EQ(targets, (std::set<JobState>{JobState::kQueued, JobState::kFailed}));
    // Exactly one guard holds for every count (exclusive and exhaustive). A worker crash (the
    // job's own failure) reads its retries only, a node loss (the platform's) its platform
    // faults only: the other budget never decides.
    const bool own = key.second == EventKind::kWorkerCrash;
    const std::int64_t cap = own ? spec::kMaxRetries : spec::kMaxPlatformFaults;
    for (std::int64_t n = -1; n <= cap + 3; ++n) {
      for (std::int64_t other : {std::int64_t{0}, std::int64_t{1000}}) {
        s.jobs[0].failures = own ? n : other;
        s.jobs[0].faults = own ? other : n;
        int holding = 0;
        for (const auto* r : rows) holding += spec::all_of(d, r->guard(d, s, 0, p)) ? 1 : 0;
        EXPECT_EQ(holding, 1) << "count=" << n;
        for (const auto* r : rows) {
          if (spec::all_of(d, r->guard(d, s, 0, p))) {
            EXPECT_EQ(r->dst, n < cap ? JobState::kQueued : JobState::kFailed) << n;
          }
        }
      }
    }
  }
  EXPECT_EQ(multi, 12);  // {Placed, Running, Checkpointing, Migrating, Resizing, Restoring} x 2 failures
}

TEST(JobRowsTest, TerminalStatesHaveNoOutgoingRows) {
  for (const auto& r : job_rows()) EXPECT_FALSE(is_terminal(r.src)) << r.label();
  // ... and are reached only by completion, failure or cancellation.
  for (const auto& r : job_rows()) {
    if (r.dst == JobState::kCompleted) {
      EXPECT_EQ(r.event, EventKind::kComplete) << r.label();
    }
    if (r.dst == JobState::kCancelled) {
      EXPECT_EQ(r.event, EventKind::kCancel) << r.label();
    }
    if (r.dst == JobState::kFailed) {  // a budget spent: the job's retries or the platform cap
      EXPECT_EQ(r.guard_name, r.event == EventKind::kWorkerCrash ? "retries_exhausted"
                                                                 : "platform_faults_exhausted")
          << r.label();
    }
  }
}

TEST(JobRowsTest, EveryLiveStateHasACancelRow) {
  std::map<JobState, int> cancels;
  for (const auto& r : job_rows()) {
    if (r.event != EventKind::kCancel) continue;
    EXPECT_EQ(r.dst, JobState::kCancelled) << r.label();
    EXPECT_EQ(r.guard, nullptr) << r.label() << ": cancellation is unconditional";
    EXPECT_EQ(r.action_name, "release_unreserve_unadmit") << r.label();
    ++cancels[r.src];
  }
  for (int s = 0; s < spec::kNumJobStates; ++s) {
    const auto state = static_cast<JobState>(s);
    if (is_terminal(state) || state == JobState::kNew) {
      EXPECT_EQ(cancels.count(state), 0u) << name_of(state);
    } else {
      EXPECT_EQ(cancels[state], 1) << name_of(state) << " has no (single) Cancel row";
    }
  }
}

// One lifecycle: every state in which the runtime carries out a decision has an Abort row back to
// a safe state, unguarded (a failure, refusal or timeout must always be able to end it).
TEST(JobRowsTest, EveryInFlightStateHasAnAbortRow) {
  std::map<JobState, JobState> abort_to;
  for (const auto& r : job_rows()) {
    if (r.event != EventKind::kAbort) continue;
    EXPECT_EQ(r.guard, nullptr) << r.label();
    EXPECT_TRUE(abort_to.emplace(r.src, r.dst).second) << r.label();
  }
  spec::Concrete d;
  for (int s = 0; s < spec::kNumJobStates; ++s) {
    const auto state = static_cast<JobState>(s);
    EXPECT_EQ(abort_to.count(state) == 1, spec::in_flight_state(d, static_cast<std::int64_t>(state)))
        << name_of(state);
  }
  EXPECT_EQ(abort_to[JobState::kPlaced], JobState::kQueued);
  EXPECT_EQ(abort_to[JobState::kRestoring], JobState::kQueued);
  for (auto cut : {JobState::kCheckpointing, JobState::kMigrating, JobState::kResizing})
    EXPECT_EQ(abort_to[cut], JobState::kPlaced) << name_of(cut);
}

TEST(JobRowsTest, EveryStateIsReachableFromNew) {
  std::set<JobState> reached{JobState::kNew};
  for (bool grew = true; grew;) {
    grew = false;
    for (const auto& r : job_rows())
      if (reached.count(r.src) && reached.insert(r.dst).second) grew = true;
  }
  EXPECT_EQ(reached.size(), static_cast<std::size_t>(spec::kNumJobStates));
}

}  // namespace
}  // namespace orrery::core
