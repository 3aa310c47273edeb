// A ClientApi (core/service/client_api.h) backed by a Cap'n Proto connection to
// `orrery-core serve` (rpc/client.capnp): what the `orrery` CLI and the tests use.
//
//   auto api = orrery::rpc::connect_client("127.0.0.1:7070", secret);
//   if (!api) { std::cerr << api.reason() << "\n"; return 2; }
//   auto id = (*api)->submit(spec);
//
// connect_client() connects and logs in (rpc/bootstrap.capnp): an unreachable address or a wrong
// secret is an error naming which (kUnavailable, kPermissionDenied). Every call afterwards waits
// for the core's answer; a refused request comes back as a Status with the core's code and reason
// (kNotFound, "unknown job 7"), a lost connection as kUnavailable "connection to ADDR lost: ...",
// and every later call on it the same. watch() blocks, delivering events until `on_event` returns
// false or the connection ends.
//
// Deadlines: with `timeout_ms` > 0, connecting and logging in together, and then each call, must be
// done within timeout_ms, or fail with kDeadlineExceeded "ADDR did not answer within N s" (a TCP
// listener that accepts and never answers, a port that is not orrery's, a host that is gone).
// watch() has no overall deadline: it pings the core every kWatchHeartbeatMs under the call
// deadline, so a core that stops answering ends it within kWatchHeartbeatMs + timeout_ms (one that
// dies closes the connection: at once). timeout_ms 0: no deadline, no ping.
//
// Threading: the returned object owns a KJ event loop bound to the calling thread; use it from
// that thread only, and keep at most one per thread.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "base/result.h"
#include "core/service/client_api.h"

namespace orrery::rpc {

inline constexpr std::int64_t kWatchHeartbeatMs = 2000;

// `address`: "host:port" (port defaults to 7070). `secret`: the shared secret itself (see
// read_secret_file in rpc/secret.h).
Result<std::unique_ptr<service::ClientApi>> connect_client(const std::string& address,
                                                           const std::string& secret,
                                                           std::int64_t timeout_ms = 0);

}  // namespace orrery::rpc
