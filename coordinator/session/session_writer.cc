#include "coordinator/session/session_writer.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <optional>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "common/file_util.h"
#include "common/status_macros.h"
#include "coordinator/session/proto_json.h"
#include "google/protobuf/util/json_util.h"
#include "xspace/xspace.h"

namespace profctl::coordinator {

std::string XPlaneFileName(const std::string& host) { return absl::StrCat(host, ".xplane.pb"); }
std::string RejectedXPlaneFileName(const std::string& host) {
  return absl::StrCat(host, ".xplane.pb.invalid");
}

namespace {

// Proto field names, indented; fields at their default value too when every_field.
std::string PrintJson(const google::protobuf::Message& message, bool every_field) {
  std::string json;
  google::protobuf::util::JsonPrintOptions options;
  options.add_whitespace = true;
  options.preserve_proto_field_names = true;
  options.always_print_primitive_fields = every_field;
  // Cannot fail for a message built in this process (no Any fields, valid UTF-8 checked by proto).
  (void)google::protobuf::util::MessageToJsonString(message, &json, options);
  return json;
}

}  // namespace

std::string ManifestJson(const profctl::v1::SessionManifest& manifest) {
  return ProtoJson(manifest);
}

std::string RunningManifestJson(const profctl::v1::SessionManifest& manifest) {
  return PrintJson(manifest, /*every_field=*/false);
}

std::string ProtoJson(const google::protobuf::Message& message) {
  // The same text, written directly (proto_json.h): 4-5x faster on a large session.json.
  if (SupportedByFastJson(*message.GetDescriptor())) return EveryFieldJson(message);
  return PrintJson(message, /*every_field=*/true);
}

absl::Status ValidateSessionName(absl::string_view name) {
  PROFCTL_RETURN_IF_ERROR(ValidateFileStem("session name", name));
  if (!absl::ascii_isalnum(static_cast<unsigned char>(name.front()))) {
    return absl::InvalidArgumentError(absl::StrCat(
        "session name '", name,
        "' must start with a letter or digit (then [A-Za-z0-9._-], at most 128 characters)"));
  }
  return absl::OkStatus();
}

absl::StatusOr<SessionDir> SessionDir::Create(const std::string& logdir, const std::string& session,
                                              const SessionDirOptions& options) {
  PROFCTL_RETURN_IF_ERROR(ValidateSessionName(session));
  const std::string parent = JoinPath(logdir, "plugins/profile");
  PROFCTL_RETURN_IF_ERROR(MakeDirs(parent));
  struct statvfs fs {};
  if (statvfs(parent.c_str(), &fs) == 0) {
    const uint64_t free_bytes = static_cast<uint64_t>(fs.f_bavail) * fs.f_frsize;
    if (free_bytes < options.min_free_bytes) {
      return absl::ResourceExhaustedError(absl::StrFormat(
          "only %.1f MiB free on the file system of %s (at least %.1f MiB needed to start a "
          "capture); free some space or choose another --logdir",
          static_cast<double>(free_bytes) / (1 << 20), parent,
          static_cast<double>(options.min_free_bytes) / (1 << 20)));
    }
  }
  constexpr int kMaxSuffix = 1000;
  for (int n = 1;; ++n) {
    std::string path = JoinPath(parent, n == 1 ? session : absl::StrCat(session, "_", n));
    if (mkdir(path.c_str(), 0755) == 0) {
      char resolved[PATH_MAX];
      if (realpath(path.c_str(), resolved) != nullptr) path = resolved;
      return SessionDir(std::move(path));
    }
    if (errno != EEXIST) {
      return absl::PermissionDeniedError(
          absl::StrCat("cannot create ", path, ": ", std::strerror(errno)));
    }
    struct stat st {};
    if (lstat(path.c_str(), &st) == 0 && !S_ISDIR(st.st_mode)) {
      if (options.make_unique && n < kMaxSuffix) continue;
      return absl::AlreadyExistsError(
          absl::StrCat(path,
                       " is a file, not a session folder; choose another --session or "
                       "--logdir"));
    }
    if (!options.make_unique || n == kMaxSuffix) {
      return absl::AlreadyExistsError(absl::StrCat(
          "session folder ", path, " already exists; choose another --session or --logdir"));
    }
  }
}

namespace {

std::string ThisHostName() {
  char name[256] = {};
  return gethostname(name, sizeof(name) - 1) == 0 ? std::string(name) : std::string();
}

}  // namespace

absl::StatusOr<std::unique_ptr<RunningSession>> RunningSession::Open(
    const std::string& logdir, const std::string& session, const SessionDirOptions& options) {
  absl::StatusOr<SessionDir> dir = SessionDir::Create(logdir, session, options);
  if (!dir.ok()) return dir.status();
  std::string marker = JoinPath(dir->location(), kRunningMarkerFileName);
  // Locked before anything else is written into the folder: session.json (RUNNING) comes later,
  // so whoever reads a RUNNING session.json after checking the lock sees its owner.
  int fd = open(marker.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd >= 0 && flock(fd, LOCK_EX | LOCK_NB) != 0) {
    close(fd);
    fd = -1;
  }
  if (fd >= 0) {
    // "<pid> <host>": the host for SessionHasLiveOwner, the pid for people.
    const std::string owner = absl::StrCat(getpid(), " ", ThisHostName(), "\n");
    (void)!write(fd, owner.data(), owner.size());
  }
  return std::unique_ptr<RunningSession>(
      new RunningSession(*std::move(dir), std::move(marker), fd));
}

absl::StatusOr<std::string> ReadManifestFile(const std::string& path) {
  absl::StatusOr<std::string> text =
      ReadFile(path, kMaxManifestBytes, "a session manifest may hold");
  if (text.status().code() == absl::StatusCode::kResourceExhausted) {
    return absl::InvalidArgumentError(
        absl::StrCat(text.status().message(), ": not a profctl session manifest"));
  }
  return text;
}

namespace {

// The session.json of `dir`, when it parses.
std::optional<profctl::v1::SessionManifest> ReadManifest(const std::string& dir) {
  absl::StatusOr<std::string> json = ReadManifestFile(JoinPath(dir, kManifestFileName));
  if (!json.ok()) return std::nullopt;
  profctl::v1::SessionManifest m;
  google::protobuf::util::JsonParseOptions options;
  options.ignore_unknown_fields = true;
  if (!google::protobuf::util::JsonStringToMessage(*json, &m, options).ok()) return std::nullopt;
  return m;
}

}  // namespace

void RunningSession::Close() {
  if (marker_.empty()) return;
  std::optional<profctl::v1::SessionManifest> m;
  if (!final_written_) m = ReadManifest(dir_.location());
  if (final_written_ || !m.has_value() || m->status() != profctl::v1::SESSION_STATUS_RUNNING) {
    unlink(marker_.c_str());
  }
  if (marker_fd_ >= 0) close(marker_fd_);  // releases the lock
  marker_fd_ = -1;
  marker_.clear();
}

bool SessionHasLiveOwner(const std::string& session_dir) {
  // O_NONBLOCK: a FIFO planted under the marker's name cannot hang the open.
  const int fd = open(JoinPath(session_dir, kRunningMarkerFileName).c_str(),
                      O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return false;
  // The owner holds LOCK_EX: a shared lock is refused while it lives (from another open of the
  // file, in this process too).
  const bool held = flock(fd, LOCK_SH | LOCK_NB) != 0 && errno == EWOULDBLOCK;
  close(fd);  // drops the shared lock, when taken
  if (held) return true;
  // A marker written on another host: its lock may not reach here (a network file system mounted
  // without lock support), so its owner is not judged from here, as a pid could not be.
  absl::StatusOr<std::string> text = ReadFile(JoinPath(session_dir, kRunningMarkerFileName));
  if (!text.ok()) return false;
  const std::vector<absl::string_view> words =
      absl::StrSplit(*text, absl::ByAnyChar(" \n"), absl::SkipEmpty());
  return words.size() >= 2 && words[1] != ThisHostName();
}

namespace {

// Whether `name` is a temporary file of a session: "<name>.tmp.XXXXXX" (mkstemp's six
// characters), hidden (a host's stream) or not (the pod trace, atomic writes).
bool IsTemporaryFileName(absl::string_view name) {
  const size_t at = name.rfind(".tmp.");
  return at != absl::string_view::npos && name.size() - at == 5 + 6;
}

// Removes the session's temporary files; returns how many.
int RemoveTemporaryFiles(const std::string& dir) {
  int removed = 0;
  std::error_code ec;
  for (const auto& file : std::filesystem::directory_iterator(dir, ec)) {
    if (file.is_regular_file(ec) && IsTemporaryFileName(file.path().filename().string()) &&
        std::filesystem::remove(file.path(), ec)) {
      ++removed;
    }
  }
  return removed;
}

// Why a host's file on disk is not a saved trace; OK when it is.
absl::Status CheckSavedTrace(const std::string& path) {
  absl::StatusOr<std::string> bytes = ReadFile(path);
  if (!bytes.ok()) return bytes.status();
  tensorflow::profiler::XSpace space;
  if (!space.ParseFromString(*bytes)) return absl::DataLossError("not a serialized XSpace");
  return xspace::Validate(space);
}

}  // namespace

int RecoverHostsFromDisk(const std::string& session_dir, profctl::v1::SessionManifest& manifest) {
  int saved = 0;
  for (profctl::v1::HostResult& h : *manifest.mutable_hosts()) {
    if (h.status() == profctl::v1::HOST_STATUS_FAILED && h.xplane_file().empty()) continue;
    if (h.host().empty() || !ValidateFileStem("host", h.host()).ok()) continue;
    const std::string file = XPlaneFileName(h.host());
    const std::string path = JoinPath(session_dir, file);
    const bool listed_saved = h.status() == profctl::v1::HOST_STATUS_OK ||
                              h.status() == profctl::v1::HOST_STATUS_INCOMPLETE;
    const absl::Status valid =
        PathExists(path) ? CheckSavedTrace(path) : absl::NotFoundError("no trace on disk");
    if (valid.ok()) {
      ++saved;
      h.set_xplane_file(file);
      h.set_bytes(static_cast<uint64_t>(std::filesystem::file_size(path)));
      if (!listed_saved) {
        h.set_status(profctl::v1::HOST_STATUS_OK);
        h.clear_error();
        h.set_recording_detail(
            "recovered after its coordinator stopped: a valid trace was found on disk; its "
            "recording was not checked against the window asked for");
      }
      continue;
    }
    if (h.status() == profctl::v1::HOST_STATUS_FAILED) continue;
    const bool rejected = PathExists(JoinPath(session_dir, RejectedXPlaneFileName(h.host())));
    h.set_status(profctl::v1::HOST_STATUS_FAILED);
    h.clear_xplane_file();
    auto* e = h.mutable_error();
    e->set_step(rejected ? profctl::v1::FAILURE_STEP_VALIDATE
                         : profctl::v1::FAILURE_STEP_INTERRUPTED);
    e->set_code(static_cast<int32_t>(rejected ? absl::StatusCode::kDataLoss : valid.code()));
    e->set_message(absl::StrCat(
        "recovered after its coordinator stopped: ",
        rejected ? absl::StrCat("only ", RejectedXPlaneFileName(h.host()), " is on disk")
                 : absl::StrCat(file, ": ", valid.message()),
        listed_saved ? " (session.json had listed it saved)" : ""));
  }
  return saved;
}

std::vector<std::string> CleanAbandonedSessions(const std::string& logdir) {
  std::vector<std::string> cleaned;
  const std::string parent = JoinPath(logdir, "plugins/profile");
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(parent, ec)) {
    if (!entry.is_directory(ec)) continue;
    const std::string dir = entry.path().string();
    const std::string marker = JoinPath(dir, kRunningMarkerFileName);
    if (!PathExists(marker) || SessionHasLiveOwner(dir)) continue;
    // Read after the lock was found free: an owner finalises session.json before it lets go.
    std::optional<profctl::v1::SessionManifest> m = ReadManifest(dir);
    if (!m.has_value()) continue;  // not ours to judge (no session.json yet, or a foreign one)
    if (m->status() != profctl::v1::SESSION_STATUS_RUNNING) {
      RemoveTemporaryFiles(dir);  // its owner died between the final write and the unlink
      std::filesystem::remove(marker, ec);
      continue;
    }
    const int removed = RemoveTemporaryFiles(dir);
    const int saved = RecoverHostsFromDisk(dir, *m);
    m->set_status(profctl::v1::SESSION_STATUS_ABANDONED);
    const std::string owner = m->coordinator_pid() > 0 ? absl::StrCat("pid ", m->coordinator_pid(),
                                                                      " on ", m->coordinator_host())
                                                       : std::string("unknown");
    m->add_errors(absl::StrCat(
        "abandoned: its coordinator (", owner,
        ") stopped before session.json was final (killed, or it could not write it: a full "
        "disk?); found by a later capture, which removed ",
        removed, " temporary file(s) and rebuilt the hosts from the folder: ", saved, " of ",
        m->hosts_size(), " hold a valid trace (saved), the others failed"));
    if (WriteFileAtomically(JoinPath(dir, kManifestFileName), ManifestJson(*m)).ok()) {
      std::filesystem::remove(marker, ec);  // kept on failure: a later capture tries again
      cleaned.push_back(absl::StrCat(dir, ": abandoned by coordinator ", owner, "; removed ",
                                     removed, " temporary file(s); ", saved, "/", m->hosts_size(),
                                     " host(s) saved, rebuilt from disk"));
    }
  }
  return cleaned;
}

std::string SessionDir::session() const {
  const size_t slash = path_.rfind('/');
  return slash == std::string::npos ? path_ : path_.substr(slash + 1);
}

namespace {

absl::Status CheckPlainName(const std::string& name) {
  if (name.empty() || absl::StrContains(name, '/')) {
    return absl::InvalidArgumentError(absl::StrCat("bad file name '", name, "'"));
  }
  return absl::OkStatus();
}

absl::Status Errno(absl::string_view what, const std::string& path, int err) {
  const std::string msg = absl::StrCat(what, " ", path, ": ", std::strerror(err));
  return err == ENOSPC || err == EDQUOT ? absl::ResourceExhaustedError(msg)
                                        : absl::InternalError(msg);
}

absl::Status SyncPath(const std::string& path, int flags) {
  const int fd = open(path.c_str(), flags | O_CLOEXEC);
  if (fd < 0) return Errno("cannot sync", path, errno);
  const int synced = fsync(fd);
  const int err = errno;
  close(fd);
  return synced == 0 ? absl::OkStatus() : Errno("cannot sync", path, err);
}

}  // namespace

struct UnsyncedPaths {
  absl::Mutex mu;
  std::vector<std::string> paths ABSL_GUARDED_BY(mu);
};

namespace {

// A temporary file in the session folder, renamed into place by Commit.
class TempTraceFile final : public TraceFile {
 public:
  TempTraceFile(std::string dir, std::string tmp, int fd, std::shared_ptr<UnsyncedPaths> unsynced)
      : dir_(std::move(dir)), tmp_(std::move(tmp)), fd_(fd), unsynced_(std::move(unsynced)) {}
  ~TempTraceFile() override {
    if (fd_ >= 0) close(fd_);
    if (!committed_) unlink(tmp_.c_str());
  }

  absl::Status Append(absl::string_view data) override {
    if (committed_) return absl::FailedPreconditionError("append after commit");
    while (!data.empty()) {
      const ssize_t n = write(fd_, data.data(), data.size());
      if (n < 0) {
        if (errno == EINTR) continue;
        return Errno("cannot write", tmp_, errno);
      }
      data.remove_prefix(static_cast<size_t>(n));
      size_ += static_cast<uint64_t>(n);
    }
    return absl::OkStatus();
  }

  uint64_t size() const override { return size_; }

  absl::StatusOr<std::string> ReadAll() override { return ReadFile(tmp_); }

  absl::StatusOr<std::string> Commit(const std::string& name) override {
    PROFCTL_RETURN_IF_ERROR(CheckPlainName(name));
    if (committed_) return absl::FailedPreconditionError("file already committed");
    if (fchmod(fd_, 0644) != 0) return Errno("cannot chmod", tmp_, errno);
    // Start writing it back now, without waiting; SyncCommitted's fsync waits for the rest. A
    // failure here shows there.
    (void)sync_file_range(fd_, 0, 0, SYNC_FILE_RANGE_WRITE);
    const int fd = fd_;
    fd_ = -1;
    if (close(fd) != 0) return Errno("cannot close", tmp_, errno);
    const std::string path = JoinPath(dir_, name);
    PROFCTL_RETURN_IF_ERROR(CheckReplaceable(path));
    if (rename(tmp_.c_str(), path.c_str()) != 0) return Errno("cannot rename to", path, errno);
    committed_ = true;
    absl::MutexLock lock(&unsynced_->mu);
    unsynced_->paths.push_back(path);
    return name;
  }

 private:
  std::string dir_;
  std::string tmp_;
  int fd_;
  std::shared_ptr<UnsyncedPaths> unsynced_;
  uint64_t size_ = 0;
  bool committed_ = false;
};

}  // namespace

SessionDir::SessionDir(std::string path)
    : path_(std::move(path)), unsynced_(std::make_shared<UnsyncedPaths>()) {}

absl::Status SessionDir::SyncCommitted() {
  std::vector<std::string> paths;
  {
    absl::MutexLock lock(&unsynced_->mu);
    paths.swap(unsynced_->paths);
  }
  if (paths.empty()) return absl::OkStatus();
  absl::Status first;
  size_t failed = 0;
  const auto note = [&](absl::Status s) {
    if (s.ok()) return;
    if (failed++ == 0) first = std::move(s);
  };
  for (const std::string& path : paths) note(SyncPath(path, O_RDONLY));
  note(SyncPath(path_, O_RDONLY | O_DIRECTORY));  // the renames
  if (failed == 0) return absl::OkStatus();
  return absl::Status(
      first.code(),
      absl::StrCat(first.message(), failed > 1 ? absl::StrCat(" (and ", failed - 1, " more)") : "",
                   ": it may not survive a crash of this machine"));
}

absl::StatusOr<std::unique_ptr<TraceFile>> SessionDir::Create(const std::string& hint) {
  PROFCTL_RETURN_IF_ERROR(CheckPlainName(hint));
  std::string tmp = JoinPath(path_, absl::StrCat(".", hint, ".tmp.XXXXXX"));
  const int fd = mkstemp(tmp.data());
  if (fd < 0) return Errno("cannot create", tmp, errno);
  return std::make_unique<TempTraceFile>(path_, std::move(tmp), fd, unsynced_);
}

absl::StatusOr<std::string> SessionDir::Read(const std::string& name) {
  PROFCTL_RETURN_IF_ERROR(CheckPlainName(name));
  return ReadFile(JoinPath(path_, name));
}

std::string SessionDir::LocalPath(const std::string& name) const {
  return CheckPlainName(name).ok() ? JoinPath(path_, name) : std::string();
}

absl::StatusOr<std::string> SessionDir::Write(const std::string& name, absl::string_view contents) {
  PROFCTL_RETURN_IF_ERROR(CheckPlainName(name));
  PROFCTL_RETURN_IF_ERROR(WriteFileAtomically(JoinPath(path_, name), contents));
  return name;
}

std::string DefaultSessionName(const Clock& clock, absl::string_view prefix) {
  const time_t secs = static_cast<time_t>(clock.WallNs() / kNanosPerSecond);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  return absl::StrFormat("%s%04d_%02d_%02d_%02d_%02d_%02d", prefix, tm.tm_year + 1900,
                         tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec);
}

std::string HostStatusName(profctl::v1::HostStatus s) {
  switch (s) {
    case profctl::v1::HOST_STATUS_OK:
      return "ok";
    case profctl::v1::HOST_STATUS_INCOMPLETE:
      return "incomplete";
    case profctl::v1::HOST_STATUS_FAILED:
      return "failed";
    default:
      return "unknown";
  }
}

std::string SessionStatusName(profctl::v1::SessionStatus s) {
  switch (s) {
    case profctl::v1::SESSION_STATUS_OK:
      return "ok";
    case profctl::v1::SESSION_STATUS_PARTIAL:
      return "partial";
    case profctl::v1::SESSION_STATUS_FAILED:
      return "failed";
    case profctl::v1::SESSION_STATUS_RUNNING:
      return "running";
    case profctl::v1::SESSION_STATUS_ABANDONED:
      return "abandoned";
    default:
      return "unknown";
  }
}

std::string FailureStepName(profctl::v1::FailureStep s) {
  switch (s) {
    case profctl::v1::FAILURE_STEP_GET_INFO:
      return "get info";
    case profctl::v1::FAILURE_STEP_CLOCK_SYNC:
      return "clock sync";
    case profctl::v1::FAILURE_STEP_PREPARE:
      return "prepare";
    case profctl::v1::FAILURE_STEP_PREPARE_TIMEOUT:
      return "prepare timeout";
    case profctl::v1::FAILURE_STEP_CAPTURE:
      return "capture";
    case profctl::v1::FAILURE_STEP_LATE:
      return "late";
    case profctl::v1::FAILURE_STEP_VALIDATE:
      return "validate";
    case profctl::v1::FAILURE_STEP_WRITE:
      return "write";
    case profctl::v1::FAILURE_STEP_INTERRUPTED:
      return "interrupted";
    default:
      return "unknown";
  }
}

std::vector<std::string> AssignHostStems(const std::vector<WorkerAddress>& workers,
                                         const std::vector<std::string>& agent_names) {
  std::vector<std::string> stems;
  absl::flat_hash_set<std::string> taken;
  for (size_t i = 0; i < workers.size(); ++i) {
    const std::string& name = i < agent_names.size() ? agent_names[i] : std::string();
    std::string stem =
        (!name.empty() && ValidateFileStem("name", name).ok()) ? name : workers[i].file_stem();
    if (taken.contains(stem)) stem = workers[i].file_stem();
    const std::string base = stem;
    for (int n = 2; taken.contains(stem); ++n) stem = absl::StrCat(base, "-", n);
    taken.insert(stem);
    stems.push_back(stem);
  }
  return stems;
}

}  // namespace profctl::coordinator
