// Expected failures are values: Status (ok, or an error with a code and a reason) and Result<T> (a
// value or a Status). Bugs are assertions, not Statuses.
//
// The code says what kind of failure it is, for callers to branch on (never on the reason's text):
// the RPC layer carries it across the wire (rpc/common.capnp, "Errors") and the CLI's exit codes
// come from it (runtime/cli/commands.h). The reason is for people: it names what was wrong.
//
//   kInvalidArgument     bad input from outside: a request, a job spec, a trace, a config file
//   kNotFound            an unknown job, node or file
//   kAlreadyExists       something to be created exists already
//   kFailedPrecondition  the request does not fit the current state (a job in the wrong state, a
//                        stale epoch, a superseded session)
//   kUnavailable         the peer cannot be reached or went away (connection refused or lost);
//                        retrying later may work
//   kPermissionDenied    a wrong or missing secret
//   kDeadlineExceeded    gave up waiting
//   kResourceExhausted   out of room: devices, memory, a queue's bound
//   kAborted             interrupted by a concurrent change; retrying may work
//   kInternal            a bug or an I/O failure on this side (cannot write a file, a damaged
//                        journal)
//   kUnknown             not classified (Status::Error(reason) without a code, or a peer's error
//                        without one)
#pragma once

#include <cassert>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace orrery {

enum class StatusCode {
  kOk,
  kInvalidArgument,
  kNotFound,
  kAlreadyExists,
  kFailedPrecondition,
  kUnavailable,
  kPermissionDenied,
  kDeadlineExceeded,
  kResourceExhausted,
  kAborted,
  kInternal,
  kUnknown,
};
inline constexpr int kNumStatusCodes = static_cast<int>(StatusCode::kUnknown) + 1;

// "ok", "invalid argument", "not found", ..., "unknown": for messages, and the RPC layer's tag.
constexpr std::string_view status_code_name(StatusCode c) {
  switch (c) {
    case StatusCode::kOk: return "ok";
    case StatusCode::kInvalidArgument: return "invalid argument";
    case StatusCode::kNotFound: return "not found";
    case StatusCode::kAlreadyExists: return "already exists";
    case StatusCode::kFailedPrecondition: return "failed precondition";
    case StatusCode::kUnavailable: return "unavailable";
    case StatusCode::kPermissionDenied: return "permission denied";
    case StatusCode::kDeadlineExceeded: return "deadline exceeded";
    case StatusCode::kResourceExhausted: return "resource exhausted";
    case StatusCode::kAborted: return "aborted";
    case StatusCode::kInternal: return "internal";
    case StatusCode::kUnknown: return "unknown";
  }
  return "unknown";
}

// The inverse of status_code_name; nullopt for any other text.
constexpr std::optional<StatusCode> status_code_from_name(std::string_view name) {
  for (int i = 0; i < kNumStatusCodes; ++i) {
    auto c = static_cast<StatusCode>(i);
    if (status_code_name(c) == name) return c;
  }
  return std::nullopt;
}

class Status {
 public:
  Status() = default;  // ok
  static Status Ok() { return Status(); }
  // An error. `code` must not be kOk.
  static Status Error(StatusCode code, std::string reason) {
    assert(code != StatusCode::kOk);
    return Status(code, std::move(reason));
  }
  // An error without a code (kUnknown). Being replaced by the named constructors below: new code
  // says what kind of failure it reports.
  static Status Error(std::string reason) { return Status(StatusCode::kUnknown, std::move(reason)); }

  static Status InvalidArgument(std::string r) { return Status(StatusCode::kInvalidArgument, std::move(r)); }
  static Status NotFound(std::string r) { return Status(StatusCode::kNotFound, std::move(r)); }
  static Status AlreadyExists(std::string r) { return Status(StatusCode::kAlreadyExists, std::move(r)); }
  static Status FailedPrecondition(std::string r) {
    return Status(StatusCode::kFailedPrecondition, std::move(r));
  }
  static Status Unavailable(std::string r) { return Status(StatusCode::kUnavailable, std::move(r)); }
  static Status PermissionDenied(std::string r) { return Status(StatusCode::kPermissionDenied, std::move(r)); }
  static Status DeadlineExceeded(std::string r) { return Status(StatusCode::kDeadlineExceeded, std::move(r)); }
  static Status ResourceExhausted(std::string r) {
    return Status(StatusCode::kResourceExhausted, std::move(r));
  }
  static Status Aborted(std::string r) { return Status(StatusCode::kAborted, std::move(r)); }
  static Status Internal(std::string r) { return Status(StatusCode::kInternal, std::move(r)); }
  static Status Unknown(std::string r) { return Status(StatusCode::kUnknown, std::move(r)); }

  bool ok() const { return code_ == StatusCode::kOk; }
  explicit operator bool() const { return ok(); }
  StatusCode code() const { return code_; }
  const std::string& reason() const { return reason_; }
  // The same kind of failure with a reason that says more ("reading job 3: " + reason()).
  Status with_reason(std::string reason) const {
    assert(!ok());
    return Status(code_, std::move(reason));
  }

 private:
  Status(StatusCode code, std::string reason) : code_(code), reason_(std::move(reason)) {}
  StatusCode code_ = StatusCode::kOk;
  std::string reason_;
};

template <class T>
class Result {
 public:
  Result(T value) : v_(std::move(value)) {}                       // NOLINT: implicit by design
  Result(Status error) : v_(std::move(error)) { assert(!std::get<Status>(v_).ok()); }  // NOLINT

  bool ok() const { return std::holds_alternative<T>(v_); }
  explicit operator bool() const { return ok(); }

  T& value() & { assert(ok()); return std::get<T>(v_); }
  const T& value() const& { assert(ok()); return std::get<T>(v_); }
  T&& value() && { assert(ok()); return std::get<T>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

  Status status() const { return ok() ? Status::Ok() : std::get<Status>(v_); }
  StatusCode code() const { return ok() ? StatusCode::kOk : std::get<Status>(v_).code(); }
  const std::string& reason() const {
    static const std::string kNone;
    return ok() ? kNone : std::get<Status>(v_).reason();
  }

 private:
  std::variant<T, Status> v_;
};

}  // namespace orrery
