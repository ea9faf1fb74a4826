#ifndef PROFCTL_TESTS_TRACE_DATA_H_
#define PROFCTL_TESTS_TRACE_DATA_H_

#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "tests/build_paths.h"

namespace profctl::test_data {

// The path of a checked-in trace under tests/data/traces.
inline std::string DataPath(absl::string_view name) {
  return test_paths::SourcePath(absl::StrCat("tests/data/traces/", name));
}

}  // namespace profctl::test_data

#endif  // PROFCTL_TESTS_TRACE_DATA_H_
