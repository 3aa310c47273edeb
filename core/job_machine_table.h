// The job lifecycle as a Boost.MSM front-end: the one transition table that the core runs
// (core/job_machine.cc instantiates the back-end, in that translation unit only) and that the
// checker walks by introspection and proves (checker/). Guards and actions are thin adapters over
// the spec's guard and effect types, so the rows name spec formulas directly.
//
// Include this header only where the table itself is needed; everything else uses
// core/job_machine.h, which has no Boost dependency.
#pragma once

#include <boost/mpl/joint_view.hpp>
#include <boost/mpl/vector.hpp>
#include <boost/msm/front/functor_row.hpp>
#include <boost/msm/front/state_machine_def.hpp>

#include "core/job_machine.h"
#include "spec/effects.h"
#include "spec/guards.h"

namespace orrery::core {

// One event type per EventKind; the kind is what the checker reads back from a row.
template <spec::EventKind K>
struct Ev {
  static constexpr spec::EventKind kKind = K;
  FireContext* ctx;
};

// One state type per JobState.
template <spec::JobState S>
struct St : boost::msm::front::state<> {
  static constexpr spec::JobState kState = S;
};

// Adapters: a row's Guard/Action is SpecGuard<G>/SpecAction<E>; `spec_type` lets introspection
// find the spec formula again.
template <class G>
struct SpecGuard {
  using spec_type = G;
  template <class Evt, class Fsm, class Src, class Tgt>
  bool operator()(const Evt& e, Fsm&, Src&, Tgt&) const {
    spec::Concrete d;
    return spec::all_of(d, G::clauses(d, *e.ctx->cluster, e.ctx->job, *e.ctx->params));
  }
};

template <class E>
struct SpecAction {
  using spec_type = E;
  template <class Evt, class Fsm, class Src, class Tgt>
  void operator()(const Evt& e, Fsm&, Src&, Tgt&) const {
    E::apply(spec::Concrete{}, *e.ctx->cluster, e.ctx->job, *e.ctx->params);
  }
};

namespace lifecycle {

namespace msmf = boost::msm::front;
using spec::EventKind;
using spec::JobState;
using msmf::none;

using New = St<JobState::kNew>;
using Submitted = St<JobState::kSubmitted>;
using Queued = St<JobState::kQueued>;
using Placed = St<JobState::kPlaced>;
using Running = St<JobState::kRunning>;
using Checkpointing = St<JobState::kCheckpointing>;
using Suspended = St<JobState::kSuspended>;
using Migrating = St<JobState::kMigrating>;
using Restoring = St<JobState::kRestoring>;
using Resizing = St<JobState::kResizing>;
using Completed = St<JobState::kCompleted>;
using Failed = St<JobState::kFailed>;
using Cancelled = St<JobState::kCancelled>;

using Submit = Ev<EventKind::kSubmit>;
using Admit = Ev<EventKind::kAdmit>;
using Place = Ev<EventKind::kPlace>;
using Start = Ev<EventKind::kStart>;
using Progress = Ev<EventKind::kProgress>;
using Checkpoint = Ev<EventKind::kCheckpoint>;
using ResizeUp = Ev<EventKind::kResizeUp>;
using ResizeDown = Ev<EventKind::kResizeDown>;
using Preempt = Ev<EventKind::kPreempt>;
using CheckpointDone = Ev<EventKind::kCheckpointDone>;
using Resume = Ev<EventKind::kResume>;
using RestoreDone = Ev<EventKind::kRestoreDone>;
using Migrate = Ev<EventKind::kMigrate>;
using Complete = Ev<EventKind::kComplete>;
using WorkerCrash = Ev<EventKind::kWorkerCrash>;
using NodeLoss = Ev<EventKind::kNodeLoss>;
using Cancel = Ev<EventKind::kCancel>;
using Release = Ev<EventKind::kRelease>;
using Abort = Ev<EventKind::kAbort>;
using Retype = Ev<EventKind::kRetype>;

template <class S, class E, class T, class A = none, class G = none>
using Row = msmf::Row<S, E, T, A, G>;
template <class E>
using Do = SpecAction<E>;
template <class G>
using If = SpecGuard<G>;

// Submission, admission, placement, running, the decisions that start an operation in the
// runtime (preemption, migration, resize: in-flight states, which hold the job's devices while the
// nodes take the cut) and their completions, completion, giving up reservations.
using MainRows = boost::mpl::vector<
    //  Source        Event           Target         Action                       Guard
    Row<New,          Submit,         Submitted,     Do<spec::EffectSubmit>,      If<spec::GuardSubmit>>,
    Row<Submitted,    Admit,          Queued,        Do<spec::EffectAdmit>>,
    Row<Queued,       Place,          Placed,        Do<spec::EffectAcquire>,     If<spec::GuardGang>>,
    Row<Placed,       Start,          Running>,
    Row<Running,      Progress,       Running,       Do<spec::EffectProgress>,    If<spec::GuardProgress>>,
    Row<Running,      Checkpoint,     Running,       Do<spec::EffectCheckpoint>,  If<spec::GuardCheckpoint>>,
    Row<Running,      ResizeUp,       Resizing,      Do<spec::EffectPlanMove>,    If<spec::GuardGrow>>,
    Row<Running,      ResizeDown,     Resizing,      Do<spec::EffectPlanShrink>,  If<spec::GuardShrink>>,
    Row<Running,      Preempt,        Checkpointing, Do<spec::EffectPreempt>,     If<spec::GuardPreempt>>,
    Row<Checkpointing, CheckpointDone, Suspended,    Do<spec::EffectSuspend>,     If<spec::GuardCut>>,
    Row<Suspended,    Resume,         Restoring,     Do<spec::EffectAcquire>,     If<spec::GuardGang>>,
    Row<Restoring,    RestoreDone,    Running>,
    Row<Running,      Migrate,        Migrating,     Do<spec::EffectPlanMove>,    If<spec::GuardMigrate>>,
    Row<Migrating,    CheckpointDone, Restoring,     Do<spec::EffectMove>,        If<spec::GuardMove>>,
    Row<Resizing,     CheckpointDone, Restoring,     Do<spec::EffectMove>,        If<spec::GuardMove>>,
    Row<Running,      Complete,       Completed,     Do<spec::EffectComplete>>,
    Row<Queued,       Release,        Queued,        Do<spec::EffectUnreserve>>,
    Row<Suspended,    Release,        Suspended,     Do<spec::EffectUnreserve>>>;

// While an operation is in flight: the workers run on until the cut, so their progress and a
// periodic checkpoint may still be committed; every in-flight state has an Abort row back to a
// safe state (a cut that failed, was refused or timed out restarts the job in place from its last
// committed checkpoint; a launch or restore that failed gives the devices back and waits again);
// and a resizing job fails like every holding one.
using InFlightRows = boost::mpl::vector<
    Row<Checkpointing, Progress,    Checkpointing, Do<spec::EffectProgress>,    If<spec::GuardProgress>>,
    Row<Migrating,     Progress,    Migrating,     Do<spec::EffectProgress>,    If<spec::GuardProgress>>,
    Row<Resizing,      Progress,    Resizing,      Do<spec::EffectProgress>,    If<spec::GuardProgress>>,
    Row<Checkpointing, Checkpoint,  Checkpointing, Do<spec::EffectCheckpoint>,  If<spec::GuardCheckpoint>>,
    Row<Migrating,     Checkpoint,  Migrating,     Do<spec::EffectCheckpoint>,  If<spec::GuardCheckpoint>>,
    Row<Resizing,      Checkpoint,  Resizing,      Do<spec::EffectCheckpoint>,  If<spec::GuardCheckpoint>>,
    Row<Placed,        Abort,       Queued,        Do<spec::EffectRequeueNoFault>>,
    Row<Checkpointing, Abort,       Placed,        Do<spec::EffectRestartInPlace>>,
    Row<Migrating,     Abort,       Placed,        Do<spec::EffectRestartInPlace>>,
    Row<Resizing,      Abort,       Placed,        Do<spec::EffectRestartInPlace>>,
    Row<Restoring,     Abort,       Queued,        Do<spec::EffectRequeueNoFault>>,
    Row<Resizing,      WorkerCrash, Queued,        Do<spec::EffectRequeue>,     If<spec::GuardRetry>>,
    Row<Resizing,      WorkerCrash, Failed,        Do<spec::EffectGiveUp>,      If<spec::GuardExhausted>>,
    Row<Resizing,      NodeLoss,    Queued,        Do<spec::EffectRequeuePlatform>, If<spec::GuardFaultsLeft>>,
    Row<Resizing,      NodeLoss,    Failed,        Do<spec::EffectGiveUpPlatform>, If<spec::GuardFaultsExhausted>>>;

// Failures: back to the last committed checkpoint while the budget is not spent, failed after. A
// worker crash (the job's own failure) spends its retries; a node loss (any platform fault: the
// node lost, its proxy killed, the incarnation superseded) spends the platform cap instead. Kept
// as one flat vector of 20 rows: nested joint_views make the MSM back-end's compile-time memory
// explode.
using FailureRows = boost::mpl::vector<
    Row<Placed,        WorkerCrash, Queued, Do<spec::EffectRequeue>, If<spec::GuardRetry>>,
    Row<Placed,        WorkerCrash, Failed, Do<spec::EffectGiveUp>,  If<spec::GuardExhausted>>,
    Row<Placed,        NodeLoss,    Queued, Do<spec::EffectRequeuePlatform>, If<spec::GuardFaultsLeft>>,
    Row<Placed,        NodeLoss,    Failed, Do<spec::EffectGiveUpPlatform>, If<spec::GuardFaultsExhausted>>,
    Row<Running,       WorkerCrash, Queued, Do<spec::EffectRequeue>, If<spec::GuardRetry>>,
    Row<Running,       WorkerCrash, Failed, Do<spec::EffectGiveUp>,  If<spec::GuardExhausted>>,
    Row<Running,       NodeLoss,    Queued, Do<spec::EffectRequeuePlatform>, If<spec::GuardFaultsLeft>>,
    Row<Running,       NodeLoss,    Failed, Do<spec::EffectGiveUpPlatform>, If<spec::GuardFaultsExhausted>>,
    Row<Checkpointing, WorkerCrash, Queued, Do<spec::EffectRequeue>, If<spec::GuardRetry>>,
    Row<Checkpointing, WorkerCrash, Failed, Do<spec::EffectGiveUp>,  If<spec::GuardExhausted>>,
    Row<Checkpointing, NodeLoss,    Queued, Do<spec::EffectRequeuePlatform>, If<spec::GuardFaultsLeft>>,
    Row<Checkpointing, NodeLoss,    Failed, Do<spec::EffectGiveUpPlatform>, If<spec::GuardFaultsExhausted>>,
    Row<Migrating,     WorkerCrash, Queued, Do<spec::EffectRequeue>, If<spec::GuardRetry>>,
    Row<Migrating,     WorkerCrash, Failed, Do<spec::EffectGiveUp>,  If<spec::GuardExhausted>>,
    Row<Migrating,     NodeLoss,    Queued, Do<spec::EffectRequeuePlatform>, If<spec::GuardFaultsLeft>>,
    Row<Migrating,     NodeLoss,    Failed, Do<spec::EffectGiveUpPlatform>, If<spec::GuardFaultsExhausted>>,
    Row<Restoring,     WorkerCrash, Queued, Do<spec::EffectRequeue>, If<spec::GuardRetry>>,
    Row<Restoring,     WorkerCrash, Failed, Do<spec::EffectGiveUp>,  If<spec::GuardExhausted>>,
    Row<Restoring,     NodeLoss,    Queued, Do<spec::EffectRequeuePlatform>, If<spec::GuardFaultsLeft>>,
    Row<Restoring,     NodeLoss,    Failed, Do<spec::EffectGiveUpPlatform>, If<spec::GuardFaultsExhausted>>>;

// Cancellation from every live state; and another device type for a waiting job (last: the rows
// before kept their numbers when it came).
using CancelRows = boost::mpl::vector<
    Row<Submitted,     Cancel, Cancelled, Do<spec::EffectCancel>>,
    Row<Queued,        Cancel, Cancelled, Do<spec::EffectCancel>>,
    Row<Placed,        Cancel, Cancelled, Do<spec::EffectCancel>>,
    Row<Running,       Cancel, Cancelled, Do<spec::EffectCancel>>,
    Row<Checkpointing, Cancel, Cancelled, Do<spec::EffectCancel>>,
    Row<Suspended,     Cancel, Cancelled, Do<spec::EffectCancel>>,
    Row<Migrating,     Cancel, Cancelled, Do<spec::EffectCancel>>,
    Row<Restoring,     Cancel, Cancelled, Do<spec::EffectCancel>>,
    Row<Resizing,      Cancel, Cancelled, Do<spec::EffectCancel>>,
    Row<Queued,        Retype, Queued,    Do<spec::EffectRetype>, If<spec::GuardRetype>>,
    Row<Suspended,     Retype, Suspended, Do<spec::EffectRetype>, If<spec::GuardRetype>>>;

using Table =
    boost::mpl::joint_view<boost::mpl::joint_view<MainRows, InFlightRows>,
                           boost::mpl::joint_view<FailureRows, CancelRows>>;
}  // namespace lifecycle

// The front-end. A plain (non-template) struct on purpose: MSM repeats the front-end's type name
// inside every internal type, so a front-end templated on its table makes compile-time memory
// explode. Illegal events are reported through `rejected`, never by aborting.
struct JobFront : boost::msm::front::state_machine_def<JobFront> {
  using initial_state = lifecycle::New;
  using transition_table = lifecycle::Table;

  bool rejected = false;
  template <class Fsm, class Event>
  void no_transition(const Event&, Fsm&, int) {
    rejected = true;
  }
};

}  // namespace orrery::core
