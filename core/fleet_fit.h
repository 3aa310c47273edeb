// Whether a job could ever be placed on a fleet: on every device of it, all nodes Up and nothing
// else running. A spec that fails this is refused at submission, naming the limit it breaks; one
// that passes may still wait (nodes down or drained, devices busy), and then it waits visibly.
#pragma once

#include <cstdint>
#include <string>

#include "base/result.h"
#include "core/fleet.h"
#include "spec/vocabulary.h"

namespace orrery::core {

struct FitRequest {
  int dtype = -1;  // the fleet's device type id
  std::int64_t world = 0, min_devices = 0, max_devices = 0, mem_mib = 0;
  spec::Preemption mode = spec::Preemption::kTransparent;
};

// Ok when some device count c in [min, max] with world = c * splice (splice within the spec's
// limit, 1 for a signal or requeue job) fits the fleet: c devices of the type with room for a
// worker, within one region (where the planners place a gang), on nodes whose host memory holds
// the spliced-out workers. (A premium job larger than the premium reserve is admitted spare:
// spec::EffectAdmit.) Otherwise kInvalidArgument with the limit that no count satisfies.
Status fits_fleet(const Fleet& fleet, const FitRequest& r);

}  // namespace orrery::core
