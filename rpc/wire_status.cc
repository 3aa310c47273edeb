#include "rpc/wire_status.h"

#include <string_view>

namespace orrery::rpc {

kj::Exception exception_of(const Status& st) {
  std::string d = "[" + std::string(status_code_name(st.code())) + "] " + st.reason();
  return kj::Exception(kj::Exception::Type::FAILED, __FILE__, __LINE__, kj::str(d.c_str()));
}

std::string description_of(const kj::Exception& e) {
  std::string d = e.getDescription().cStr();
  const std::string prefix = "remote exception: ";
  if (d.rfind(prefix, 0) == 0) d = d.substr(prefix.size());
  return d;
}

Status status_of(const kj::Exception& e) {
  std::string d = description_of(e);
  switch (e.getType()) {
    case kj::Exception::Type::DISCONNECTED:
      return Status::Unavailable("connection lost: " + d);
    case kj::Exception::Type::OVERLOADED:
      return Status::Unavailable("peer overloaded: " + d);
    case kj::Exception::Type::UNIMPLEMENTED:
      return Status::Internal("not implemented by the peer: " + d);
    case kj::Exception::Type::FAILED:
      break;
  }
  // "[code name] reason"; anything else is a failure without a code.
  if (!d.empty() && d.front() == '[') {
    auto close = d.find("] ");
    if (close != std::string::npos) {
      auto code = status_code_from_name(std::string_view(d).substr(1, close - 1));
      if (code && *code != StatusCode::kOk) return Status::Error(*code, d.substr(close + 2));
    }
  }
  return Status::Unknown(d);
}

std::string reason_of(const kj::Exception& e) { return status_of(e).reason(); }

}  // namespace orrery::rpc
