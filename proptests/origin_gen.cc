// Which origin a generated decision claims (generators.h, pick_origin).
#include "proptests/generators.h"

namespace orrery::proptest {

using spec::EventKind;

namespace {

// The origin that decides event `e` in practice (the generator's own table, for steering only):
// a planner for admission, placement, resizing and preemption, the runtime for its reports, an
// operator for Submit, Cancel and Release (users go through one). Abort has two (see pick_origin).
spec::Origin natural_origin(EventKind e) {
  if (spec::planner_event(e)) return spec::Origin::kPlanner;
  switch (e) {
    case EventKind::kSubmit:
    case EventKind::kCancel:
    case EventKind::kRelease:
      return spec::Origin::kOperator;
    default:
      return spec::Origin::kRuntime;
  }
}

// The origin a decision claims: mostly its natural one, sometimes an operator (trusted with every
// event), and one time in twenty a wrong one (a runtime Place or Cancel, a planner NodeLoss or
// Complete, the core's timers deciding anything but Abort, ...), which the core must reject before
// it looks at anything else. An Abort comes from the runtime (a cut failed or was refused) or from
// the core (a timeout, a move whose target no longer fits), sometimes from an operator, and one
// time in ten from a planner, which may not decide it. Shrinks towards the natural origin.
}  // namespace

spec::Origin pick_origin(EventKind e) {
  const int roll = uniform(0, 100);
  if (e == EventKind::kAbort) {
    if (roll < 45) return spec::Origin::kRuntime;
    if (roll < 75) return spec::Origin::kCore;
    if (roll < 90) return spec::Origin::kOperator;
    return spec::Origin::kPlanner;
  }
  const spec::Origin natural = natural_origin(e);
  if (roll < 80) return natural;
  if (roll < 95) return spec::Origin::kOperator;
  switch (natural) {
    case spec::Origin::kPlanner:
      return *rc::gen::element(spec::Origin::kRuntime, spec::Origin::kCore);
    case spec::Origin::kRuntime:
      return *rc::gen::element(spec::Origin::kPlanner, spec::Origin::kCore);
    case spec::Origin::kOperator:
    case spec::Origin::kCore:
      break;
  }
  return *rc::gen::element(spec::Origin::kPlanner, spec::Origin::kRuntime, spec::Origin::kCore);
}

}  // namespace orrery::proptest
