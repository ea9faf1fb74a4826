// What tests read back from a session manifest's attempt logs.
#ifndef PROFCTL_TESTS_ATTEMPT_KINDS_H_
#define PROFCTL_TESTS_ATTEMPT_KINDS_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "profctl/v1/session.pb.h"

namespace profctl::testkit {

// A host's attempt_log as "kind:CODE" ("capture:UNAVAILABLE", "fetch:OK", ...).
inline std::vector<std::string> AttemptKinds(const v1::HostResult& h) {
  std::vector<std::string> kinds;
  for (const v1::Attempt& a : h.attempt_log()) {
    kinds.push_back(absl::StrCat(
        a.kind(), ":", absl::StatusCodeToString(static_cast<absl::StatusCode>(a.code()))));
  }
  return kinds;
}

}  // namespace profctl::testkit

#endif  // PROFCTL_TESTS_ATTEMPT_KINDS_H_
