#include "tests/status_matchers.h"

#include <grpcpp/grpcpp.h>

#include <string>

#include "absl/status/statusor.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace profctl::testkit {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

template <typename M, typename T>
std::string Explain(const M& matcher, const T& value) {
  ::testing::StringMatchResultListener listener;
  ::testing::ExplainMatchResult(matcher, value, &listener);
  return listener.str();
}

TEST(StatusMatchersTest, IsOkTellsWhatTheStatusWas) {
  const absl::Status bad = absl::InvalidArgumentError("--duration=0 is not in 1..3600000 ms");
  EXPECT_THAT(absl::OkStatus(), IsOk());
  EXPECT_THAT(bad, Not(IsOk()));
  EXPECT_EQ(Explain(IsOk(), bad), "INVALID_ARGUMENT: --duration=0 is not in 1..3600000 ms");
  EXPECT_THAT(absl::StatusOr<int>(3), IsOk());
  EXPECT_THAT(absl::StatusOr<int>(absl::NotFoundError("gone")), Not(IsOk()));
  EXPECT_EQ(Explain(IsOk(), absl::StatusOr<int>(absl::NotFoundError("gone"))), "NOT_FOUND: gone");
  EXPECT_THAT(grpc::Status::OK, IsOk());
  const grpc::Status denied(grpc::StatusCode::PERMISSION_DENIED, "no token");
  EXPECT_THAT(denied, Not(IsOk()));
  EXPECT_EQ(Explain(IsOk(), denied), "PERMISSION_DENIED: no token");
}

TEST(StatusMatchersTest, StatusIsChecksTheCodeAndTheMessage) {
  const absl::Status bad = absl::InvalidArgumentError("request.workers: empty");
  EXPECT_THAT(bad, StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(bad, Not(StatusIs(absl::StatusCode::kNotFound)));
  EXPECT_THAT(bad, StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("workers")));
  EXPECT_THAT(bad, Not(StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("duration"))));
  EXPECT_THAT(bad, StatusIs(absl::StatusCode::kInvalidArgument, "request.workers: empty"));
  EXPECT_THAT(absl::StatusOr<int>(bad), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(grpc::Status(grpc::StatusCode::UNAVAILABLE, "down"),
              StatusIs(absl::StatusCode::kUnavailable, "down"));
  EXPECT_THAT(absl::OkStatus(), StatusIs(absl::StatusCode::kOk));
}

}  // namespace
}  // namespace profctl::testkit
