// The command line of orrery-node, over any NodeRuntime factory (orrery_node_main.cc passes the
// real one, node_runtime.h), connected to the core through rpc/node_connection.h:
//
//   orrery-node --core ADDR --name NODE --secret FILE --data DIR
//               [--devices N] [--device-mem-mib M] [--device-type host] [--bin-dir DIR]
//
// Prints "orrery-node: NODE registered with ADDR (...)" on every (re)registration and
// "connection to ADDR lost, reconnecting" when the core goes away. Exit 0 on SIGINT/SIGTERM (the
// runtime's workers are stopped), 1 when the core refuses the node for good (wrong secret, unknown
// node, inventory not matching the fleet) or the runtime cannot start, 2 on bad flags.
#pragma once

#include <functional>
#include <memory>

#include "base/result.h"
#include "runtime/node/job_runner.h"

namespace orrery::runtime {

using RuntimeFactory =
    std::function<Result<std::unique_ptr<NodeRuntime>>(const NodeRuntimeOptions& options)>;

int node_main(int argc, char** argv, const RuntimeFactory& make_runtime);

}  // namespace orrery::runtime
