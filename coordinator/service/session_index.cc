#include "coordinator/service/session_index.h"

#include <algorithm>
#include <ctime>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/file_util.h"
#include "coordinator/engine/capture_engine.h"
#include "coordinator/schedule/retention.h"
#include "coordinator/session/session_writer.h"
#include "google/protobuf/util/json_util.h"

namespace profctl::coordinator::service {
namespace {

std::string ProfileDir(const std::string& logdir) {
  return JoinPath(JoinPath(logdir, "plugins"), "profile");
}

v1::SessionInfo InfoFrom(const std::string& folder, const std::string& name,
                         v1::SessionManifest manifest) {
  if (manifest.status() == v1::SESSION_STATUS_RUNNING && !SessionHasLiveOwner(folder)) {
    // Its coordinator is gone (or could not finalise it): not running, whatever the file says.
    // The next capture into this log dir rebuilds and rewrites it (CleanAbandonedSessions).
    manifest.set_status(v1::SESSION_STATUS_ABANDONED);
    manifest.add_errors(
        "abandoned: session.json says RUNNING but no live coordinator owns the folder (see "
        "session_writer.h SessionHasLiveOwner); the next capture into this log dir rebuilds it");
  }
  v1::SessionInfo info;
  info.set_session(name);
  info.set_session_dir(manifest.session_dir().empty() ? folder : manifest.session_dir());
  *info.mutable_origin() = manifest.origin();
  *info.mutable_manifest() = std::move(manifest);
  return info;
}

}  // namespace

std::string FormatUtc(int64_t wall_ns) {
  if (wall_ns <= 0) return "-";
  const time_t secs = static_cast<time_t>(wall_ns / 1'000'000'000);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  return absl::StrFormat("%04d-%02d-%02d %02d:%02d:%02dZ", tm.tm_year + 1900, tm.tm_mon + 1,
                         tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec);
}

absl::StatusOr<v1::SessionManifest> ParseManifest(const std::string& json,
                                                  const std::string& source) {
  v1::SessionManifest m;
  google::protobuf::util::JsonParseOptions options;
  options.ignore_unknown_fields = true;
  if (!google::protobuf::util::JsonStringToMessage(json, &m, options).ok()) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": not a profctl session manifest"));
  }
  return m;
}

absl::StatusOr<v1::SessionInfo> ReadSession(const std::string& logdir, const std::string& session) {
  if (absl::Status s = ValidateFileStem("session", session); !s.ok()) return s;
  const std::string folder = JoinPath(ProfileDir(logdir), session);
  const std::string path = JoinPath(folder, kManifestFileName);
  if (!PathExists(path)) {
    return absl::NotFoundError(absl::StrCat("no session '", session, "' in ", logdir));
  }
  absl::StatusOr<std::string> json = ReadManifestFile(path);
  if (!json.ok()) return json.status();
  absl::StatusOr<v1::SessionManifest> m = ParseManifest(*json, path);
  if (!m.ok()) return m.status();
  return InfoFrom(folder, session, *std::move(m));
}

SessionListing ListSessions(const std::string& logdir, const std::string& schedule, size_t limit) {
  SessionListing out;
  std::error_code ec;
  std::filesystem::directory_iterator it(ProfileDir(logdir), ec);
  if (ec) return out;
  for (const auto& entry : it) {
    if (!entry.is_directory(ec)) continue;
    const std::string name = entry.path().filename().string();
    const std::string path = JoinPath(entry.path().string(), kManifestFileName);
    if (!PathExists(path)) continue;
    absl::StatusOr<std::string> json = ReadManifestFile(path);
    absl::StatusOr<v1::SessionManifest> m =
        json.ok() ? ParseManifest(*json, path) : absl::StatusOr<v1::SessionManifest>(json.status());
    if (!m.ok()) {
      out.errors.push_back(std::string(m.status().message()));
      continue;
    }
    if (!schedule.empty() && m->origin().schedule() != schedule &&
        !(m->origin().kind().empty() &&
          schedule::ScheduledSessionTime(schedule, name).has_value())) {
      continue;
    }
    m->clear_hosts();
    out.sessions.push_back(InfoFrom(entry.path().string(), name, *std::move(m)));
  }
  std::sort(out.sessions.begin(), out.sessions.end(),
            [](const v1::SessionInfo& a, const v1::SessionInfo& b) {
              const int64_t ta = a.manifest().start_at_ns(), tb = b.manifest().start_at_ns();
              if (ta != tb) return ta > tb;
              return a.session() > b.session();
            });
  if (limit > 0 && out.sessions.size() > limit) out.sessions.resize(limit);
  return out;
}

int64_t CountSessions(const std::string& logdir) {
  int64_t n = 0;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(ProfileDir(logdir), ec)) {
    n += entry.is_directory(ec) && PathExists(JoinPath(entry.path().string(), kManifestFileName));
  }
  return n;
}

std::string FormatSessionTable(const std::vector<v1::SessionInfo>& sessions) {
  int width = 24;
  for (const auto& s : sessions) width = std::max(width, static_cast<int>(s.session().size()));
  std::string out = absl::StrFormat("%-*s %-9s %5s %-20s %s\n", width, "SESSION", "STATUS", "HOSTS",
                                    "STARTED (UTC)", "ORIGIN");
  for (const auto& s : sessions) {
    const v1::SessionManifest& m = s.manifest();
    std::string origin = s.origin().kind().empty() ? "cli" : s.origin().kind();
    if (!s.origin().schedule().empty()) absl::StrAppend(&origin, " ", s.origin().schedule());
    absl::StrAppendFormat(&out, "%-*s %-9s %5d %-20s %s\n", width, s.session(),
                          s.running() ? "running" : SessionStatusName(m.status()),
                          m.request().workers_size(), FormatUtc(m.start_at_ns()), origin);
  }
  return out;
}

}  // namespace profctl::coordinator::service
