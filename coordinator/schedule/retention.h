// Retention of a schedule's sessions: which session folders to delete (a pure plan), and applying
// it to a log dir.
#ifndef PROFCTL_COORDINATOR_SCHEDULE_RETENTION_H_
#define PROFCTL_COORDINATOR_SCHEDULE_RETENTION_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "coordinator/schedule/schedule_config.h"

namespace profctl::coordinator::schedule {

struct SessionFolder {
  std::string name = {};
  int64_t created_wall_ns = 0;
  int64_t bytes = 0;
  // Running (or not known to be finished): never deleted, never counted by keep_last; its bytes
  // count toward max_bytes.
  bool running = false;
};

// The folders to delete, oldest first (by creation time, then name). Finished sessions go when
//   - more than keep_last finished ones are newer than them (keep_last > 0), or
//   - they were created more than max_age before `now_wall_ns` (max_age > 0), or
//   - the schedule's sessions, oldest first, hold more than max_bytes (max_bytes > 0);
// except that the newest finished session is never deleted by max_age or max_bytes: a schedule
// always keeps its latest capture to look at (keep_last is at least 1 when set).
std::vector<std::string> PlanRetention(std::vector<SessionFolder> sessions,
                                       const RetentionConfig& retention, int64_t now_wall_ns);

// The creation time encoded in a session folder name of `schedule`
// ("<schedule>_<YYYYMMDDTHHMMSSZ>", optionally "_<n>" when made unique), or nullopt when the name
// is not one of that schedule's sessions.
std::optional<int64_t> ScheduledSessionTime(absl::string_view schedule, absl::string_view name);

struct RetentionResult {
  std::vector<std::string> deleted = {};  // folder names, oldest first
  int64_t bytes_freed = 0;
  std::vector<std::string> errors = {};  // one line per folder that could not be deleted
};

// Applies `retention` to `schedule`'s sessions under <logdir>/plugins/profile. A folder counts
// as finished only when no live coordinator owns it (SessionHasLiveOwner, session_writer.h) and
// it holds a session.json with a status: a final one, or RUNNING left by an owner that is gone
// (abandoned); anything else is left alone. Blocking file I/O: run it on a
// WorkPool, not an Executor. A missing log dir has nothing to delete.
RetentionResult ApplyRetention(const std::string& logdir, const std::string& schedule,
                               const RetentionConfig& retention, int64_t now_wall_ns);

}  // namespace profctl::coordinator::schedule

#endif  // PROFCTL_COORDINATOR_SCHEDULE_RETENTION_H_
