// One Cap'n Proto connection to `orrery-core serve` from the calling thread (client or node side):
// its own KJ event loop, the TCP stream, the two-party RPC client and the bootstrap capability.
// Internal to rpc/.
#pragma once

#include <memory>
#include <string>

#include <capnp/rpc-twoparty.h>
#include <kj/async-io.h>

#include "bootstrap.capnp.h"
#include "base/result.h"
#include "rpc/wire_status.h"

namespace orrery::rpc {

struct Connection {
  kj::AsyncIoContext io;
  kj::Own<kj::AsyncIoStream> stream;
  kj::Own<capnp::TwoPartyClient> rpc;
  kj::Maybe<wire::Bootstrap::Client> bootstrap;
  kj::ForkedPromise<void> disconnected;
  bool lost = false;
  std::string address;
  Connection(kj::AsyncIoContext io, std::string address);
};

// Connects to `address` ("host:port", port 7070 by default); errors (kUnavailable) name the
// address.
Result<std::unique_ptr<Connection>> connect_to(const std::string& address);

// The Status of a call on `c` that threw `e` (status_of, rpc/wire_status.h); a lost connection
// (DISCONNECTED) also marks `c` lost and reads "connection to ADDR lost: ...".
Status call_failed(Connection& c, const kj::Exception& e);

}  // namespace orrery::rpc
