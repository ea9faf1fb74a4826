// gMock matchers for statuses, so a failing test prints the status it got:
//   EXPECT_THAT(ParseWorkerList("h:1"), IsOk());
//   EXPECT_THAT(Load(path), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("line 3")));
// They take absl::Status, absl::StatusOr<T> and grpc::Status alike, and IsOk anything with ok().
// Debian 12's Abseil predates absl's own status_matchers.
#ifndef PROFCTL_TESTS_STATUS_MATCHERS_H_
#define PROFCTL_TESTS_STATUS_MATCHERS_H_

#include <ostream>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"

namespace profctl::testkit {
namespace status_internal {

template <typename T>
absl::StatusCode CodeOf(const T& v) {
  if constexpr (requires { v.status().code(); }) {
    return v.status().code();  // absl::StatusOr
  } else if constexpr (requires { v.error_code(); }) {
    return static_cast<absl::StatusCode>(v.error_code());  // grpc::Status
  } else if constexpr (requires { v.code(); }) {
    return static_cast<absl::StatusCode>(v.code());  // absl::Status, protobuf's util::Status
  } else {
    return v.ok() ? absl::StatusCode::kOk : absl::StatusCode::kUnknown;  // any other ok()
  }
}

template <typename T>
std::string MessageOf(const T& v) {
  if constexpr (requires { v.status().message(); }) {
    return std::string(v.status().message());
  } else if constexpr (requires { v.error_message(); }) {
    return v.error_message();
  } else if constexpr (requires { v.message(); }) {
    return std::string(v.message().data(), v.message().size());
  } else {
    return v.ok() ? "" : "not ok()";
  }
}

template <typename T>
std::string Describe(const T& v) {
  if (v.ok()) return "OK";
  return absl::StrCat(absl::StatusCodeToString(CodeOf(v)), ": ", MessageOf(v));
}

}  // namespace status_internal

MATCHER(IsOk, negation ? "is not OK" : "is OK") {
  *result_listener << status_internal::Describe(arg);
  return arg.ok();
}

MATCHER_P(StatusIs, code,
          absl::StrCat(negation ? "has no" : "has", " code ",
                       absl::StatusCodeToString(static_cast<absl::StatusCode>(code)))) {
  *result_listener << status_internal::Describe(arg);
  return status_internal::CodeOf(arg) == static_cast<absl::StatusCode>(code);
}

MATCHER_P2(StatusIs, code, message_matcher,
           absl::StrCat(negation ? "has no" : "has", " code ",
                        absl::StatusCodeToString(static_cast<absl::StatusCode>(code)),
                        " with a message that ",
                        ::testing::DescribeMatcher<std::string>(message_matcher, negation))) {
  *result_listener << status_internal::Describe(arg);
  return status_internal::CodeOf(arg) == static_cast<absl::StatusCode>(code) &&
         ::testing::Matches(::testing::SafeMatcherCast<const std::string&>(message_matcher))(
             status_internal::MessageOf(arg));
}

}  // namespace profctl::testkit

#endif  // PROFCTL_TESTS_STATUS_MATCHERS_H_
