// The reference model's own table of who may decide what (reference_model.h, ref_may_decide).
#include "proptests/reference_model.h"

namespace orrery::proptest {

using spec::EventKind;

namespace {

// Who may decide what. One row per event; an event without a row, or an origin outside the four,
// may not be decided at all.
struct Authority {
  EventKind event;
  bool planner;
  bool runtime;
  bool op;    // operator
  bool core;  // the core's own timers
};
constexpr Authority kAuthority[] = {
    //                            planner runtime operator core
    {EventKind::kSubmit,          false,  false,  true,    false},  // users, through an operator
    {EventKind::kAdmit,           true,   false,  true,    false},
    {EventKind::kPlace,           true,   false,  true,    false},
    {EventKind::kStart,           false,  true,   true,    false},
    {EventKind::kProgress,        false,  true,   true,    false},
    {EventKind::kCheckpoint,      false,  true,   true,    false},
    {EventKind::kResizeUp,        true,   false,  true,    false},
    {EventKind::kResizeDown,      true,   false,  true,    false},
    {EventKind::kPreempt,         true,   false,  true,    false},
    {EventKind::kCheckpointDone,  false,  true,   true,    false},
    {EventKind::kResume,          true,   false,  true,    false},
    {EventKind::kRestoreDone,     false,  true,   true,    false},
    {EventKind::kMigrate,         true,   false,  true,    false},
    {EventKind::kComplete,        false,  true,   true,    false},
    {EventKind::kWorkerCrash,     false,  true,   true,    false},
    {EventKind::kNodeLoss,        false,  true,   true,    false},
    {EventKind::kCancel,          false,  false,  true,    false},  // users and operators only
    {EventKind::kRelease,         false,  false,  true,    false},  // an operator gives up a reservation
    // A cut refused or failed on a node (the runtime), an operation past its timeout or a move
    // whose target no longer fits (the core's timers); never a planner's to decide.
    {EventKind::kAbort,           false,  true,   true,    true},
    {EventKind::kRetype,          true,   false,  true,    false},  // another type the spec allows
};

}  // namespace

bool ref_may_decide(spec::Origin o, EventKind e) {
  for (const auto& a : kAuthority) {
    if (a.event != e) continue;
    switch (o) {
      case spec::Origin::kPlanner: return a.planner;
      case spec::Origin::kRuntime: return a.runtime;
      case spec::Origin::kOperator: return a.op;
      case spec::Origin::kCore: return a.core;
    }
    return false;
  }
  return false;
}

}  // namespace orrery::proptest
