// Client-supplied text as it may appear in a log line or an error message: bounded and printable,
// so a request cannot make the agent write megabytes into its log or a terminal escape sequence
// into someone's console.
#ifndef PROFCTL_AGENT_BOUNDED_TEXT_H_
#define PROFCTL_AGENT_BOUNDED_TEXT_H_

#include <cstddef>
#include <string>

#include "absl/strings/string_view.h"

namespace profctl::agent {

inline constexpr size_t kMaxLoggedBytes = 128;

// The first `max_bytes` bytes of `text` with every byte outside printable ASCII (and '\\', '"',
// '\'') C-escaped, followed by "...(N bytes)" when `text` was longer. At most about
// 4 * max_bytes + 24 characters, whatever `text` is.
std::string BoundedForLog(absl::string_view text, size_t max_bytes = kMaxLoggedBytes);

}  // namespace profctl::agent

#endif  // PROFCTL_AGENT_BOUNDED_TEXT_H_
