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
// Threading: the returned object owns a KJ event loop bound to the calling thread; use it from
// that thread only, and keep at most one per thread.
#pragma once

#include <memory>
#include <string>

#include "base/result.h"
#include "core/service/client_api.h"

namespace orrery::rpc {

// `address`: "host:port" (port defaults to 7070). `secret`: the shared secret itself (see
// read_secret_file in rpc/secret.h).
Result<std::unique_ptr<service::ClientApi>> connect_client(const std::string& address,
                                                           const std::string& secret);

}  // namespace orrery::rpc
