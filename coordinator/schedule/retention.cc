#include "coordinator/schedule/retention.h"

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/time/civil_time.h"
#include "absl/time/time.h"
#include "common/file_util.h"
#include "coordinator/session/session_writer.h"
#include "google/protobuf/util/json_util.h"
#include "profctl/v1/session.pb.h"

namespace profctl::coordinator::schedule {
namespace {

constexpr size_t kTimeChars = 16;  // YYYYMMDDTHHMMSSZ

bool Older(const SessionFolder& a, const SessionFolder& b) {
  return a.created_wall_ns != b.created_wall_ns ? a.created_wall_ns < b.created_wall_ns
                                                : a.name < b.name;
}

// Whether the folder holds a finished session: no live owner, and session.json present and parsed,
// with a final status or RUNNING (its owner is gone: abandoned).
bool IsFinished(const std::string& dir) {
  if (SessionHasLiveOwner(dir)) return false;
  const absl::StatusOr<std::string> text = ReadManifestFile(JoinPath(dir, kManifestFileName));
  if (!text.ok()) return false;
  profctl::v1::SessionManifest manifest;
  google::protobuf::util::JsonParseOptions options;
  options.ignore_unknown_fields = true;
  if (!google::protobuf::util::JsonStringToMessage(*text, &manifest, options).ok()) return false;
  return manifest.status() != profctl::v1::SESSION_STATUS_UNSPECIFIED;
}

int64_t FolderBytes(const std::filesystem::path& dir) {
  int64_t bytes = 0;
  std::error_code ec;
  for (auto it = std::filesystem::recursive_directory_iterator(dir, ec);
       !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
    std::error_code size_ec;
    if (it->is_regular_file(size_ec)) {
      const uintmax_t size = it->file_size(size_ec);
      if (!size_ec) bytes += static_cast<int64_t>(size);
    }
  }
  return bytes;
}

}  // namespace

std::vector<std::string> PlanRetention(std::vector<SessionFolder> sessions,
                                       const RetentionConfig& retention, int64_t now_wall_ns) {
  std::sort(sessions.begin(), sessions.end(), Older);
  std::vector<const SessionFolder*> finished;
  int64_t total_bytes = 0;
  for (const SessionFolder& s : sessions) {
    total_bytes += s.bytes;
    if (!s.running) finished.push_back(&s);
  }
  std::vector<bool> remove(finished.size(), false);
  if (retention.keep_last > 0 && std::cmp_greater(finished.size(), retention.keep_last)) {
    const size_t excess = finished.size() - static_cast<size_t>(retention.keep_last);
    for (size_t i = 0; i < excess; ++i) remove[i] = true;
  }
  // The newest finished session (the last) is exempt from max_age and max_bytes.
  const size_t exempt = finished.empty() ? 0 : finished.size() - 1;
  if (retention.max_age_ns > 0) {
    for (size_t i = 0; i < exempt; ++i) {
      if (finished[i]->created_wall_ns < now_wall_ns - retention.max_age_ns) remove[i] = true;
    }
  }
  for (size_t i = 0; i < finished.size(); ++i) {
    if (remove[i]) total_bytes -= finished[i]->bytes;
  }
  if (retention.max_bytes > 0) {
    for (size_t i = 0; i < exempt && total_bytes > retention.max_bytes; ++i) {
      if (remove[i]) continue;
      remove[i] = true;
      total_bytes -= finished[i]->bytes;
    }
  }
  std::vector<std::string> out;
  for (size_t i = 0; i < finished.size(); ++i) {
    if (remove[i]) out.push_back(finished[i]->name);
  }
  return out;
}

std::optional<int64_t> ScheduledSessionTime(absl::string_view schedule, absl::string_view name) {
  if (!absl::ConsumePrefix(&name, schedule) || !absl::ConsumePrefix(&name, "_")) {
    return std::nullopt;
  }
  if (name.size() < kTimeChars) return std::nullopt;
  const absl::string_view suffix = name.substr(kTimeChars);
  if (!suffix.empty()) {
    uint32_t n = 0;
    if (suffix.size() < 2 || suffix[0] != '_' || !absl::SimpleAtoi(suffix.substr(1), &n) ||
        !absl::ascii_isdigit(static_cast<unsigned char>(suffix[1]))) {
      return std::nullopt;
    }
  }
  // YYYYMMDDTHHMMSSZ (absl::ParseTime's %Y would read every digit as the year).
  const absl::string_view text = name.substr(0, kTimeChars);
  if (text[8] != 'T' || text[15] != 'Z') return std::nullopt;
  int f[6] = {};
  constexpr size_t kPos[6] = {0, 4, 6, 9, 11, 13};
  constexpr size_t kLen[6] = {4, 2, 2, 2, 2, 2};
  for (size_t i = 0; i < 6; ++i) {
    const absl::string_view digits = text.substr(kPos[i], kLen[i]);
    for (const char c : digits) {
      if (!absl::ascii_isdigit(static_cast<unsigned char>(c))) return std::nullopt;
    }
    if (!absl::SimpleAtoi(digits, &f[i])) return std::nullopt;
  }
  const absl::CivilSecond cs(f[0], f[1], f[2], f[3], f[4], f[5]);
  if (cs.month() != f[1] || cs.day() != f[2] || cs.hour() != f[3] || cs.minute() != f[4] ||
      cs.second() != f[5]) {
    return std::nullopt;  // not a real date (normalized)
  }
  return absl::ToUnixNanos(absl::FromCivil(cs, absl::UTCTimeZone()));
}

RetentionResult ApplyRetention(const std::string& logdir, const std::string& schedule,
                               const RetentionConfig& retention, int64_t now_wall_ns) {
  RetentionResult result;
  const std::filesystem::path parent = JoinPath(logdir, "plugins/profile");
  std::vector<SessionFolder> sessions;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(parent, ec)) {
    std::error_code dir_ec;
    if (!entry.is_directory(dir_ec)) continue;
    const std::string name = entry.path().filename().string();
    const std::optional<int64_t> created = ScheduledSessionTime(schedule, name);
    if (!created.has_value()) continue;
    sessions.push_back(SessionFolder{name, *created, FolderBytes(entry.path()),
                                     /*running=*/!IsFinished(entry.path().string())});
  }
  for (const std::string& name : PlanRetention(sessions, retention, now_wall_ns)) {
    const std::filesystem::path dir = parent / name;
    // Re-checked just before deleting: a session is never removed while it runs.
    if (!IsFinished(dir.string())) continue;
    const int64_t bytes = FolderBytes(dir);
    std::error_code rm_ec;
    std::filesystem::remove_all(dir, rm_ec);
    if (rm_ec) {
      result.errors.push_back(absl::StrCat("cannot delete ", dir.string(), ": ", rm_ec.message()));
      continue;
    }
    result.deleted.push_back(name);
    result.bytes_freed += bytes;
  }
  return result;
}

}  // namespace profctl::coordinator::schedule
