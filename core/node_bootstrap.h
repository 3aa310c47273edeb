// Bringing every node of a fresh core Up, for uses of the core without node agents: the scripted
// demo, the benchmarks, the property tests and the simulator. Each node is registered and readied
// through ordinary, journaled node decisions (origin runtime), so a journal of such a run replays
// like any other. `orrery-core serve` does not use this: there, agents register their nodes.
#pragma once

#include "core/scheduler_core.h"

namespace orrery::core {

// Registers and readies every node that is Down (Down -> Joining -> Up); other nodes are left as
// they are. An error names the node and the rejection.
Status bring_up_all_nodes(SchedulerCore& core);

}  // namespace orrery::core
