// The sessions of a log dir as the daemon and `profctl sessions` show them: read from each
// session folder's session.json (<logdir>/plugins/profile/<session>/), so captures run by the
// CLI, by an earlier daemon or by this one all appear alike.
#ifndef PROFCTL_COORDINATOR_SERVICE_SESSION_INDEX_H_
#define PROFCTL_COORDINATOR_SERVICE_SESSION_INDEX_H_

#include <cstddef>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "profctl/v1/coordinator.pb.h"

namespace profctl::coordinator::service {

// Parses session.json text (unknown fields ignored: newer versions may add some).
// INVALID_ARGUMENT naming `source` when it is not a session manifest.
absl::StatusOr<v1::SessionManifest> ParseManifest(const std::string& json,
                                                  const std::string& source);

// One session: INVALID_ARGUMENT for a name that is not a plain folder name, NOT_FOUND when
// <logdir>/plugins/profile/<session>/session.json does not exist. Here and in ListSessions, a
// session.json that says RUNNING while no live coordinator owns the folder (SessionHasLiveOwner:
// it was killed, or could not finalise it) reads as ABANDONED, with an error saying why.
absl::StatusOr<v1::SessionInfo> ReadSession(const std::string& logdir, const std::string& session);

struct SessionListing {
  std::vector<v1::SessionInfo> sessions;  // newest first, without per-host results
  std::vector<std::string> errors;        // "<folder>: <problem>" for unreadable manifests
};

// Every session of `logdir` (only `schedule`'s when not empty: by session.json's origin, or by
// a name "<schedule>_<UTC time>"), newest first by start time (folder name to break ties), at
// most `limit` (0: no limit). Folders without session.json are skipped. A missing log dir has
// no sessions.
SessionListing ListSessions(const std::string& logdir, const std::string& schedule, size_t limit);

// How many session folders (with a session.json) `logdir` holds: one stat per folder.
int64_t CountSessions(const std::string& logdir);

// "2026-11-23 05:00:00Z" (UTC, seconds), or "-" for 0 and earlier (not known).
std::string FormatUtc(int64_t wall_ns);

// `profctl sessions`' table: SESSION, STATUS, HOSTS, STARTED (UTC), ORIGIN.
std::string FormatSessionTable(const std::vector<v1::SessionInfo>& sessions);

}  // namespace profctl::coordinator::service

#endif  // PROFCTL_COORDINATOR_SERVICE_SESSION_INDEX_H_
