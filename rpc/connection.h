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

// Connects to `address` ("host:port", port 7070 by default); errors name the address.
Result<std::unique_ptr<Connection>> connect_to(const std::string& address);

// The reason in a KJ exception from the peer, without KJ's "remote exception: " prefix.
std::string reason_of(const kj::Exception& e);

}  // namespace orrery::rpc
