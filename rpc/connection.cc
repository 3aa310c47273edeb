#include "rpc/connection.h"

namespace orrery::rpc {

Connection::Connection(kj::AsyncIoContext io_, std::string addr)
    : io(kj::mv(io_)), disconnected(kj::Promise<void>(kj::NEVER_DONE).fork()), address(std::move(addr)) {}

std::string reason_of(const kj::Exception& e) {
  std::string d = e.getDescription().cStr();
  const std::string prefix = "remote exception: ";
  if (d.rfind(prefix, 0) == 0) d = d.substr(prefix.size());
  if (e.getType() == kj::Exception::Type::DISCONNECTED) return "connection lost: " + d;
  return d;
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
  if (!error.empty()) return Status::Error(error);
  return c;
}

}  // namespace orrery::rpc
