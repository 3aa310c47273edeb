#include "rpc/connection.h"

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

Result<std::unique_ptr<Connection>> connect_to(const std::string& address) {
  std::unique_ptr<Connection> c;
  std::string error;
  KJ_IF_MAYBE(e, kj::runCatchingExceptions([&] {
    c = std::make_unique<Connection>(kj::setupAsyncIo(), address);
    auto addr = c->io.provider->getNetwork().parseAddress(address.c_str(), 7070).wait(c->io.waitScope);
    c->stream = addr->connect().wait(c->io.waitScope);
    c->rpc = kj::heap<capnp::TwoPartyClient>(*c->stream);
    Connection* raw = c.get();
    c->disconnected = c->rpc->onDisconnect().then([raw] { raw->lost = true; }).fork();
    c->bootstrap = c->rpc->bootstrap().castAs<wire::Bootstrap>();
  })) {
    error = "cannot connect to " + address + ": " + std::string(e->getDescription().cStr());
  }
  if (!error.empty()) return Status::Unavailable(error);
  return c;
}

}  // namespace orrery::rpc
