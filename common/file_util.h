// File I/O with Status errors. Writes are atomic: a reader (or a crash) sees the old file or the
// whole new one, never a half-written file.
#ifndef PROFCTL_COMMON_FILE_UTIL_H_
#define PROFCTL_COMMON_FILE_UTIL_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace profctl {

// Writes `contents` to a temporary file beside `path`, fsyncs it and renames it over `path`.
absl::Status WriteFileAtomically(const std::string& path, absl::string_view contents);

absl::StatusOr<std::string> ReadFile(const std::string& path);

// mkdir -p.
absl::Status MakeDirs(const std::string& path);

bool PathExists(const std::string& path);

// OK when `stem` is 1-128 characters of [A-Za-z0-9._-] and not "." or "..": safe as one file or
// folder name. The error names `what` (e.g. "session id").
absl::Status ValidateFileStem(absl::string_view what, absl::string_view stem);

// `stem` if it has at most `max_chars` characters (>= 24), else its first max_chars - 17
// characters, '-' and 16 hex digits of a stable hash (FNV-1a 64) of the whole stem: distinct
// long stems stay distinct, the same stem always maps to the same name, and a file name built
// from it (plus ".xplane.pb.tmp.XXXXXX") stays under the usual 255-byte limit.
inline constexpr size_t kMaxFileStemChars = 100;
std::string BoundedFileStem(absl::string_view stem, size_t max_chars = kMaxFileStemChars);

// Joins two path parts with exactly one '/'.
std::string JoinPath(absl::string_view a, absl::string_view b);

}  // namespace profctl

#endif  // PROFCTL_COMMON_FILE_UTIL_H_
