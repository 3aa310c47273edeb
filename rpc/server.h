// `orrery-core serve`: the Service (core/service/service.h) over Cap'n Proto on TCP — the login
// bootstrap (rpc/bootstrap.capnp) handing out the client and node APIs — plus /metrics over HTTP
// (kj-http) and the planner loop on a timer.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <string>

#include <capnp/capability.h>

#include "core/service/service.h"

namespace orrery::rpc {

// The bootstrap capability of one server: login with `secret` gives the APIs of `service`, which
// must outlive every capability handed out.
capnp::Capability::Client make_bootstrap(service::Service& service, std::string secret);

struct ServeOptions {
  std::string listen = "127.0.0.1:7070";
  std::string data_dir;
  std::string secret_file;
  std::string fleet_file;    // required on the first start (no journal yet)
  std::string metrics;       // "host:port" for /metrics over HTTP; empty: none
  std::int64_t heartbeat_timeout_ms = 5000;
  std::int64_t cut_timeout_ms = 60000;      // a cut not stored by then is aborted
  std::string user_checkpoint_root;         // signal jobs' own checkpoints (empty: DATA/user-checkpoints)
  std::int64_t launch_timeout_ms = 120000;  // a launch or restore not started by then is aborted
  std::int64_t tick_ms = 100;  // planner loop period
  std::string policy = "orrery";  // the planner (core/policy/planner.h)
  std::string type_speed;         // "NAME=SPEED,...": the planner's device type speeds; empty: none
  bool one_node_gangs = false;    // a gang one node can hold goes on one node (ServiceOptions)
};

// Runs until SIGINT or SIGTERM. Prints "orrery-core serve: listening on HOST:PORT" (the real port
// when 0 was asked) and, with --metrics, "metrics on http://HOST:PORT/metrics", to `out`; errors
// to `err`. Returns 0 on a clean stop, 1 when it cannot start (the reason printed).
int serve(const ServeOptions& options, std::ostream& out, std::ostream& err);

}  // namespace orrery::rpc
