#include "rpc/connection.h"

#include <cstdio>

namespace orrery::rpc {

Connection::Connection(kj::AsyncIoContext io_, std::string addr)
    : io(kj::mv(io_)), disconnected(kj::Promise<void>(kj::NEVER_DONE).fork()), address(std::move(addr)) {}

Status call_failed(Connection& c, const kj::Exception& e) {
  if (e.getType() == kj::Exception::Type::DISCONNECTED) {
    c.lost = true;
    return Status::Unavailable("connection to " + c.address + " lost: " + description_of(e));
  }
  return status_of(e);
}

Status deadline_status(const Connection& c) {
  char secs[32];
  std::snprintf(secs, sizeof secs, "%g", static_cast<double>(c.timeout_ms) / 1000.0);
  return Status::DeadlineExceeded(c.address + " did not answer within " + secs + " s");
}

kj::Maybe<kj::TimePoint> call_deadline(Connection& c) {
  if (c.timeout_ms <= 0) return nullptr;
  return c.io.provider->getTimer().now() + c.timeout_ms * kj::MILLISECONDS;
}

Result<std::unique_ptr<Connection>> connect_to(const std::string& address, std::int64_t timeout_ms) {
  std::unique_ptr<Connection> c;
  KJ_IF_MAYBE(e, kj::runCatchingExceptions([&] {
    c = std::make_unique<Connection>(kj::setupAsyncIo(), address);
    c->timeout_ms = timeout_ms;
    c->connect_by = call_deadline(*c);
    auto addr = by_deadline(*c, c->io.provider->getNetwork().parseAddress(address.c_str(), 7070), c->connect_by)
                    .wait(c->io.waitScope);
    c->stream = by_deadline(*c, addr->connect(), c->connect_by).wait(c->io.waitScope);
    c->rpc = kj::heap<capnp::TwoPartyClient>(*c->stream);
    Connection* raw = c.get();
    c->disconnected = c->rpc->onDisconnect().then([raw] { raw->lost = true; }).fork();
    c->bootstrap = c->rpc->bootstrap().castAs<wire::Bootstrap>();
  })) {
    auto st = status_of(*e);
    if (st.code() == StatusCode::kDeadlineExceeded) return st;
    return Status::Unavailable("cannot connect to " + address + ": " + std::string(e->getDescription().cStr()));
  }
  return c;
}

}  // namespace orrery::rpc
