// How a Status crosses the wire (rpc/common.capnp, "Errors"): the side that refuses a request
// throws exception_of(status), a Cap'n Proto exception of type FAILED whose description is the
// status code's name in brackets, then the reason ("[not found] unknown job 7"); the caller turns
// what it caught back into a Status with status_of(), the same code and reason. Exceptions KJ
// raises itself map by type: DISCONNECTED and OVERLOADED are kUnavailable, UNIMPLEMENTED (a peer
// without the method) kInternal, and a FAILED description without a tag (an older peer, a KJ
// error) kUnknown. Internal to rpc/.
#pragma once

#include <string>

#include <kj/exception.h>

#include "base/result.h"

namespace orrery::rpc {

// The exception that carries `st` (not ok) to the peer.
kj::Exception exception_of(const Status& st);

// The Status in an exception caught from a call (the peer's refusal, or KJ's own failure).
Status status_of(const kj::Exception& e);

// status_of(e).reason(): the reason without KJ's "remote exception: " prefix and the code's tag.
std::string reason_of(const kj::Exception& e);

// The exception's description without KJ's "remote exception: " prefix (tag, if any, kept).
std::string description_of(const kj::Exception& e);

}  // namespace orrery::rpc
