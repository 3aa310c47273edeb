// orrery-node: the node agent with the real device side (proxies and workers,
// runtime/node/node_runtime.*). See runtime/node/node_main.h for flags and output.
#include "runtime/node/job_runner.h"
#include "runtime/node/node_main.h"

int main(int argc, char** argv) {
  return orrery::runtime::node_main(argc, argv, orrery::runtime::start_node_runtime);
}
