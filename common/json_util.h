// Minimal JSON text helpers for writers that stream large documents (trace JSON) without building
// a DOM.
#ifndef PROFCTL_COMMON_JSON_UTIL_H_
#define PROFCTL_COMMON_JSON_UTIL_H_

#include <string>

#include "absl/strings/string_view.h"

namespace profctl {

// Appends `s` as a quoted JSON string (UTF-8 passed through; control characters, quotes and
// backslashes escaped; invalid UTF-8 bytes replaced by U+FFFD so the output stays valid JSON).
void AppendJsonString(std::string* out, absl::string_view s);

// Appends a double as a JSON number (finite values only; NaN/inf become null).
void AppendJsonDouble(std::string* out, double v);

}  // namespace profctl

#endif  // PROFCTL_COMMON_JSON_UTIL_H_
