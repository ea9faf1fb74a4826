// Logging setup for binaries: spdlog to stderr. Libraries log through spdlog's default logger.
#ifndef PROFCTL_COMMON_LOGGING_H_
#define PROFCTL_COMMON_LOGGING_H_

#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace profctl {

// level: trace, debug, info, warn, error, off. `program` names the logger.
// format "text": "[2026-11-23 05:00:00.123 agent info] message" (local time);
// format "json": one JSON object per line, for log collectors:
//   {"time":"2026-11-23T05:00:00.123456Z","level":"info","logger":"agent","msg":"..."}
// (UTC, the message JSON-escaped).
absl::Status SetupLogging(const std::string& program, const std::string& level,
                          const std::string& format = "text");

// `text` as the contents of a JSON string (quotes, backslashes and control characters escaped;
// bytes >= 0x80 kept).
std::string JsonEscape(absl::string_view text);

}  // namespace profctl

#endif  // PROFCTL_COMMON_LOGGING_H_
