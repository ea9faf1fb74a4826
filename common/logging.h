// Logging setup for binaries: spdlog to stderr. Libraries log through spdlog's default logger.
#ifndef PROFCTL_COMMON_LOGGING_H_
#define PROFCTL_COMMON_LOGGING_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "common/clock.h"

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

// Bounds log lines that a peer can repeat at will (a flood of refused requests): per kind, at most
// `burst` lines per `window_ns`; the others are not logged but counted, and the next line of that
// kind that is logged says how many were left out. A kind is a short text the caller makes from
// fixed words and a status code (never client text), so few exist; past max_kinds they are all
// forgotten at once. Thread-safe.
class LogLimiter {
 public:
  struct Options {
    int burst = 10;
    int64_t window_ns = int64_t{10} * 1'000'000'000;
    size_t max_kinds = 256;
  };
  // `clock` (monotonic time) outlives the limiter.
  explicit LogLimiter(const Clock* clock, Options options);
  explicit LogLimiter(const Clock* clock) : LogLimiter(clock, Options{}) {}

  // nullopt: do not log this line. Else log it, followed by the returned text: empty, or
  // " (N more like it not logged in the last S s)" when lines of its kind were left out.
  std::optional<std::string> Admit(absl::string_view kind);

 private:
  struct Kind {
    int64_t window_start_mono = 0;
    int logged = 0;        // in this window
    int64_t left_out = 0;  // since the last line logged
    int64_t left_out_since_mono = 0;
  };
  const Clock* const clock_;
  const Options options_;
  absl::Mutex mu_;
  absl::flat_hash_map<std::string, Kind> kinds_ ABSL_GUARDED_BY(mu_);
};

}  // namespace profctl

#endif  // PROFCTL_COMMON_LOGGING_H_
