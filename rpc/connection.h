// One Cap'n Proto connection to `orrery-core serve` from the calling thread (client or node side):
// its own KJ event loop, the TCP stream, the two-party RPC client and the bootstrap capability.
// Internal to rpc/.
#pragma once

#include <cstdint>
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
  // How long connecting (and logging in), and then each call, may take; 0: no limit.
  std::int64_t timeout_ms = 0;
  // When connecting and logging in must be done by (connect_to's start + timeout_ms).
  kj::Maybe<kj::TimePoint> connect_by;
  Connection(kj::AsyncIoContext io, std::string address);
};

// Connects to `address` ("host:port", port 7070 by default); errors (kUnavailable) name the
// address. `timeout_ms` > 0: the connection's timeout_ms; resolving and connecting past it is
// kDeadlineExceeded.
Result<std::unique_ptr<Connection>> connect_to(const std::string& address, std::int64_t timeout_ms = 0);

// The Status of a call on `c` that threw `e` (status_of, rpc/wire_status.h); a lost connection
// (DISCONNECTED) also marks `c` lost and reads "connection to ADDR lost: ...".
Status call_failed(Connection& c, const kj::Exception& e);

// kDeadlineExceeded "ADDR did not answer within N s": a wait past its deadline.
Status deadline_status(const Connection& c);

// `p`, failing with exception_of(deadline_status(c)) unless it is done by `deadline` (a time on
// c's timer; null: never fails so). When the deadline comes, the loop first runs what has already
// arrived once more: an answer that came while this thread was away (a `watch` blocked writing to
// a full pipe) is not taken for silence.
template <class T>
kj::Promise<T> by_deadline(Connection& c, kj::Promise<T>&& p, kj::Maybe<kj::TimePoint> deadline) {
  KJ_IF_MAYBE(d, deadline) {
    auto& timer = c.io.provider->getTimer();
    return p.exclusiveJoin(timer.atTime(*d).then([&timer] { return timer.afterDelay(0 * kj::NANOSECONDS); })
                               .then([&c]() -> kj::Promise<T> { return exception_of(deadline_status(c)); }));
  }
  return kj::mv(p);
}

// The deadline of a call started now: c.timeout_ms from now (null when there is no limit).
kj::Maybe<kj::TimePoint> call_deadline(Connection& c);

// Waits for one call's `p` under call_deadline(c).
template <class T>
T wait_call(Connection& c, kj::Promise<T>&& p) {
  return by_deadline(c, kj::mv(p), call_deadline(c)).wait(c.io.waitScope);
}

}  // namespace orrery::rpc
