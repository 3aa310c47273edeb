// Expected failures are values: Status (ok or an error with a reason) and Result<T> (a value or a
// Status). Bugs are assertions, not Statuses.
#pragma once

#include <cassert>
#include <string>
#include <utility>
#include <variant>

namespace orrery {

class Status {
 public:
  Status() = default;  // ok
  static Status Ok() { return Status(); }
  static Status Error(std::string reason) { return Status(std::move(reason)); }

  bool ok() const { return !error_; }
  explicit operator bool() const { return ok(); }
  const std::string& reason() const { return reason_; }

 private:
  explicit Status(std::string reason) : error_(true), reason_(std::move(reason)) {}
  bool error_ = false;
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
  const std::string& reason() const {
    static const std::string kNone;
    return ok() ? kNone : std::get<Status>(v_).reason();
  }

 private:
  std::variant<T, Status> v_;
};

}  // namespace orrery
