// The node agent's side of rpc/node.capnp: connects to the core, logs in, registers (inventory,
// what runs now, and the NodeAgent capability through which the core commands), heartbeats, and
// drives runtime::Agent (commands in, reports and checkpoint shards out). When the core goes away
// it reconnects with exponential backoff (100 ms doubling to 5 s) and registers again with what it
// runs, so a restarted core reconciles.
#pragma once

#include <atomic>
#include <cstdint>
#include <iosfwd>
#include <string>

#include "core/service/node_api.h"
#include "runtime/node/agent.h"

namespace orrery::rpc {

struct NodeConnectionOptions {
  std::string core_address = "127.0.0.1:7070";
  std::string name;
  std::string secret;
  service::NodeInventory inventory;
  // The address other nodes reach this one at (TCP collectives of jobs spanning nodes); empty:
  // this machine's address on its connection to the core.
  std::string advertise;
  std::int64_t pump_ms = 20;  // how often runtime events are polled
};

// Runs until `stop` becomes true (e.g. set by a signal handler) or the core refuses the login or
// the registration for good (wrong secret, unknown node, inventory mismatch): then returns 1 with
// the reason printed to `err`. Progress lines ("registered with ..., heartbeat every N ms",
// "connection lost, reconnecting") go to `out`.
int run_node_connection(const NodeConnectionOptions& options, runtime::Agent& agent,
                        const std::atomic<bool>& stop, std::ostream& out, std::ostream& err);

}  // namespace orrery::rpc
