// Status <-> Cap'n Proto exception (rpc/wire_status.h, rpc/common.capnp "Errors"): every code
// survives the trip with its reason; KJ's own exception types map as documented. (The same over a
// real connection: service_e2e_test's MalformedRequestsGetClearErrorsAndChangeNothing and
// WrongSecretIsRefusedForClientsAndNodes.)
#include "rpc/wire_status.h"

#include <gtest/gtest.h>

namespace orrery::rpc {
namespace {

// What the caller catches: KJ prefixes the peer's description with "remote exception: ".
kj::Exception from_peer(const kj::Exception& sent) {
  return kj::Exception(sent.getType(), __FILE__, __LINE__,
                       kj::str("remote exception: ", sent.getDescription()));
}

TEST(WireStatus, EveryCodeAndItsReasonCrossTheWire) {
  for (int i = 1; i < kNumStatusCodes; ++i) {
    auto code = static_cast<StatusCode>(i);
    // Reasons may hold brackets and "] " themselves.
    Status sent = Status::Error(code, "world must be in [1, 2^20], got 0] and more");
    kj::Exception e = exception_of(sent);
    EXPECT_EQ(e.getType(), kj::Exception::Type::FAILED);
    EXPECT_EQ(std::string(e.getDescription().cStr()),
              "[" + std::string(status_code_name(code)) + "] " + sent.reason());
    Status got = status_of(from_peer(e));
    EXPECT_EQ(got.code(), code) << status_code_name(code);
    EXPECT_EQ(got.reason(), sent.reason());
    EXPECT_EQ(reason_of(from_peer(e)), sent.reason());
    EXPECT_EQ(status_of(e).code(), code);  // without the prefix too
  }
}

TEST(WireStatus, KjExceptionTypesMapByType) {
  auto make = [](kj::Exception::Type t, const char* d) { return kj::Exception(t, __FILE__, __LINE__, kj::str(d)); };
  Status st = status_of(make(kj::Exception::Type::DISCONNECTED, "Peer disconnected."));
  EXPECT_EQ(st.code(), StatusCode::kUnavailable);
  EXPECT_EQ(st.reason(), "connection lost: Peer disconnected.");
  EXPECT_EQ(status_of(make(kj::Exception::Type::OVERLOADED, "too many calls")).code(), StatusCode::kUnavailable);
  EXPECT_EQ(status_of(make(kj::Exception::Type::UNIMPLEMENTED, "method not implemented")).code(),
            StatusCode::kInternal);
  // A disconnect keeps its type whatever the text says.
  EXPECT_EQ(status_of(make(kj::Exception::Type::DISCONNECTED, "[not found] x")).code(), StatusCode::kUnavailable);
}

TEST(WireStatus, UntaggedOrUnknownTagIsUnknownWithTheWholeText) {
  auto failed = [](const char* d) {
    return kj::Exception(kj::Exception::Type::FAILED, __FILE__, __LINE__, kj::str(d));
  };
  for (const char* d : {"unknown job 7", "[no such code] unknown job 7", "[not found]unknown job 7",
                        "[ok] fine", "[", ""}) {
    Status st = status_of(failed(d));
    EXPECT_EQ(st.code(), StatusCode::kUnknown) << d;
    EXPECT_EQ(st.reason(), d);
  }
  EXPECT_EQ(status_of(from_peer(failed("unknown job 7"))).reason(), "unknown job 7");
}

}  // namespace
}  // namespace orrery::rpc
