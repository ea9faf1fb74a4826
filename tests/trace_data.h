#ifndef PROFCTL_TESTS_TRACE_DATA_H_
#define PROFCTL_TESTS_TRACE_DATA_H_

#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

#ifndef PROFCTL_TRACE_DATA_DIR
#error "tests/trace_data.h needs PROFCTL_TRACE_DATA_DIR (the test target's compile definition)"
#endif

namespace profctl::test_data {

// The path of a checked-in trace under tests/data/traces. Defined once: the test build compiles
// several test files as one unit (PROFCTL_UNITY_BUILD).
inline std::string DataPath(absl::string_view name) {
  return absl::StrCat(PROFCTL_TRACE_DATA_DIR, "/", name);
}

}  // namespace profctl::test_data

#endif  // PROFCTL_TESTS_TRACE_DATA_H_
