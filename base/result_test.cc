// Status and Result<T>: codes, their names, and the one-argument Error kept for old call sites.
#include "base/result.h"

#include <gtest/gtest.h>

#include <string>

namespace orrery {
namespace {

TEST(Status, OkHasCodeOkAndNoReason) {
  Status st;
  EXPECT_TRUE(st.ok());
  EXPECT_EQ(st.code(), StatusCode::kOk);
  EXPECT_EQ(st.reason(), "");
  EXPECT_TRUE(Status::Ok().ok());
}

TEST(Status, NamedConstructorsCarryTheirCode) {
  EXPECT_EQ(Status::InvalidArgument("x").code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(Status::NotFound("x").code(), StatusCode::kNotFound);
  EXPECT_EQ(Status::AlreadyExists("x").code(), StatusCode::kAlreadyExists);
  EXPECT_EQ(Status::FailedPrecondition("x").code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(Status::Unavailable("x").code(), StatusCode::kUnavailable);
  EXPECT_EQ(Status::PermissionDenied("x").code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(Status::DeadlineExceeded("x").code(), StatusCode::kDeadlineExceeded);
  EXPECT_EQ(Status::ResourceExhausted("x").code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(Status::Aborted("x").code(), StatusCode::kAborted);
  EXPECT_EQ(Status::Internal("x").code(), StatusCode::kInternal);
  EXPECT_EQ(Status::Unknown("x").code(), StatusCode::kUnknown);
  Status st = Status::Error(StatusCode::kNotFound, "unknown job 7");
  EXPECT_FALSE(st.ok());
  EXPECT_EQ(st.code(), StatusCode::kNotFound);
  EXPECT_EQ(st.reason(), "unknown job 7");
  EXPECT_EQ(st.with_reason("cancel: unknown job 7").code(), StatusCode::kNotFound);
}

TEST(Status, ErrorWithoutACodeIsUnknown) {
  Status st = Status::Error("something");
  EXPECT_FALSE(st.ok());
  EXPECT_EQ(st.code(), StatusCode::kUnknown);
  EXPECT_EQ(st.reason(), "something");
}

TEST(Status, CodeNamesRoundTrip) {
  EXPECT_EQ(status_code_name(StatusCode::kInvalidArgument), "invalid argument");
  EXPECT_EQ(status_code_name(StatusCode::kFailedPrecondition), "failed precondition");
  for (int i = 0; i < kNumStatusCodes; ++i) {
    auto c = static_cast<StatusCode>(i);
    EXPECT_EQ(status_code_from_name(status_code_name(c)), c) << status_code_name(c);
  }
  EXPECT_FALSE(status_code_from_name("no such code"));
  EXPECT_FALSE(status_code_from_name(""));
}

Result<int> parse_digit(char c) {
  if (c < '0' || c > '9') return Status::InvalidArgument(std::string("not a digit: ") + c);
  return c - '0';
}

TEST(Result, CodeIsTheStatusCode) {
  auto ok = parse_digit('3');
  EXPECT_EQ(ok.code(), StatusCode::kOk);
  EXPECT_TRUE(ok.status().ok());
  EXPECT_EQ(parse_digit('x').code(), StatusCode::kInvalidArgument);
  Result<int> bad = Status::NotFound("unknown node \"n9\"");
  EXPECT_FALSE(bad.ok());
  EXPECT_EQ(bad.code(), StatusCode::kNotFound);
  EXPECT_EQ(bad.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(bad.reason(), "unknown node \"n9\"");
}

}  // namespace
}  // namespace orrery
