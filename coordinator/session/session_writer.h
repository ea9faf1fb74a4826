// Where a capture's files go. TraceSink is the seam the engine writes through; SessionDir is the
// on-disk session folder DIR/plugins/profile/<session>/ that TensorBoard/XProf read.
#ifndef PROFCTL_COORDINATOR_SESSION_SESSION_WRITER_H_
#define PROFCTL_COORDINATOR_SESSION_SESSION_WRITER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/clock.h"
#include "coordinator/clients/worker.h"
#include "google/protobuf/message.h"
#include "profctl/v1/session.pb.h"

namespace profctl::coordinator {

// One file being streamed into the session: invisible under its final name until Commit, so a
// crash or an error never leaves a half trace where TensorBoard looks. Thread-compatible: one
// writer at a time. Destroying an uncommitted file removes it.
class TraceFile {
 public:
  virtual ~TraceFile() = default;
  virtual absl::Status Append(absl::string_view data) = 0;
  virtual uint64_t size() const = 0;
  // The bytes appended so far (for validation before Commit).
  virtual absl::StatusOr<std::string> ReadAll() = 0;
  // Makes the file visible as `name` (a plain file name) atomically; returns its path relative
  // to the session. The file cannot be appended to afterwards. Visible at once (a coordinator
  // killed afterwards keeps it), durable once the sink's SyncCommitted has returned.
  virtual absl::StatusOr<std::string> Commit(const std::string& name) = 0;
};

// Thread-safe: hosts' traces are written concurrently as they arrive. Every write is atomic.
class TraceSink {
 public:
  virtual ~TraceSink() = default;
  // Writes `name` (a plain file name) into the session; returns its path relative to the session.
  virtual absl::StatusOr<std::string> Write(const std::string& name,
                                            absl::string_view contents) = 0;
  // Starts a file to stream into; `hint` (a plain file name) names the temporary.
  virtual absl::StatusOr<std::unique_ptr<TraceFile>> Create(const std::string& hint) = 0;
  // Makes every file committed so far durable, and the folder entries that name them. Commit
  // leaves the fsync to this, so saving 1,024 traces does not wait on 1,024 device flushes one
  // after another (docs/perf.md); the engine calls it while it writes the pod outputs, and
  // writes session.json after it. An error names the files that may not survive a crash.
  virtual absl::Status SyncCommitted() = 0;
  // Reads back a file written earlier.
  virtual absl::StatusOr<std::string> Read(const std::string& name) = 0;
  // Where `name` lives on the local file system, for writers that need a path (the streaming
  // pod trace); empty when the sink is not a local folder.
  virtual std::string LocalPath(const std::string& name) const = 0;
  virtual std::string location() const = 0;
};

struct SessionDirOptions {
  // The name was generated (a UTC time): when that folder exists, take <name>_2, <name>_3, ...
  // instead of failing, so two captures started within one second both run.
  bool make_unique = false;
  // Refuse (RESOURCE_EXHAUSTED) when the log dir's file system has less space free than this for
  // an unprivileged user, before any host is contacted.
  uint64_t min_free_bytes = uint64_t{64} << 20;
};

struct UnsyncedPaths;  // committed since the last SyncCommitted (session_writer.cc)

class SessionDir final : public TraceSink {
 public:
  // Creates DIR/plugins/profile/<session>/. ALREADY_EXISTS when that session folder exists (and
  // the name is not to be made unique): a capture never overwrites an earlier one.
  // RESOURCE_EXHAUSTED when the file system is (nearly) full; PERMISSION_DENIED when the folder
  // cannot be created.
  static absl::StatusOr<SessionDir> Create(const std::string& logdir, const std::string& session,
                                           const SessionDirOptions& options = {});
  // The session's name: its folder's (differs from the one asked for after make_unique).
  std::string session() const;

  absl::StatusOr<std::string> Write(const std::string& name, absl::string_view contents) override;
  absl::StatusOr<std::unique_ptr<TraceFile>> Create(const std::string& hint) override;
  absl::Status SyncCommitted() override;
  absl::StatusOr<std::string> Read(const std::string& name) override;
  std::string LocalPath(const std::string& name) const override;
  std::string location() const override { return path_; }

 private:
  explicit SessionDir(std::string path);
  std::string path_;
  std::shared_ptr<UnsyncedPaths> unsynced_;  // shared with the TraceFiles made here
};

// A capture in progress holds this marker in its session folder (RunningSession creates it with
// the folder), so finding abandoned sessions costs one stat per folder, not one session.json
// parse per folder, however many sessions a log dir holds. The session's owner holds an exclusive
// flock(2) on it for as long as it runs: the kernel drops that lock when the process ends, however
// it ends (SIGKILL, a crash), and a pid cannot be reused to fake it. The marker is removed once
// session.json is final; a session.json that could not be finalised (disk full) keeps it, so the
// folder is still found.
inline constexpr char kRunningMarkerFileName[] = ".profctl_running";

// Whether a live process owns the session folder: it holds the lock on its running marker. A
// folder without a marker has no owner. A marker written on another host (it holds "<pid>
// <host>") counts as owned even unlocked: that lock may not reach here (NFS without locks), so
// such a folder is left to its own host's captures, as with pids before.
bool SessionHasLiveOwner(const std::string& session_dir);

// The life of a capture's session folder, one routine for `profctl capture` and the daemon: the
// folder is created (SessionDir::Create) and marked running (kRunningMarkerFileName, holding this
// process's pid, locked) until Close, so CleanAbandonedSessions finds exactly the sessions whose
// coordinator died or could not finish them. Not thread-safe; the engine writes through dir()
// while it runs.
class RunningSession {
 public:
  // The errors of SessionDir::Create. The marker is best effort: a folder that cannot hold it
  // still holds the capture (it is then not recognized as abandoned should we die).
  static absl::StatusOr<std::unique_ptr<RunningSession>> Open(const std::string& logdir,
                                                              const std::string& session,
                                                              const SessionDirOptions& options);
  ~RunningSession() { Close(); }
  RunningSession(const RunningSession&) = delete;
  RunningSession& operator=(const RunningSession&) = delete;

  // The sink the engine writes the session through.
  SessionDir& dir() { return dir_; }
  // The folder's name (differs from the one asked for after make_unique).
  std::string session() const { return dir_.session(); }
  // The session is over: its lock is released, and the marker removed unless session.json still
  // says RUNNING (its final write failed), which leaves the folder for the next capture, `profctl
  // sessions` and retention to see as abandoned. Idempotent; also on destruction.
  void Close();
  // The final session.json was written (the engine's manifest_written): Close then removes the
  // marker without reading session.json back (parsing 1,024 hosts' manifest took 36 ms).
  void MarkFinal() { final_written_ = true; }

 private:
  RunningSession(SessionDir dir, std::string marker, int marker_fd)
      : dir_(std::move(dir)), marker_(std::move(marker)), marker_fd_(marker_fd) {}
  SessionDir dir_;
  std::string marker_;  // empty once closed
  int marker_fd_;       // holds the lock; -1 without one
  bool final_written_ = false;
};

// The names `--session` and the daemon accept: 1-128 characters of [A-Za-z0-9._-] starting with a
// letter or digit (so never an option-like "-rf", a hidden ".x" or a dot-only "..."), no path
// separators. INVALID_ARGUMENT naming the rule otherwise.
absl::Status ValidateSessionName(absl::string_view name);

// TensorBoard-style run name from the wall clock in UTC: <prefix>YYYY_MM_DD_HH_MM_SS.
std::string DefaultSessionName(const Clock& clock, absl::string_view prefix);

// Sessions under <logdir>/plugins/profile that hold kRunningMarkerFileName while no live process
// owns them (SessionHasLiveOwner) and whose session.json says RUNNING: their coordinator died, or
// could not finalise session.json. Every temporary file ("*.tmp.XXXXXX": the hosts' streams, the
// pod trace, the breakdown files, session.json's own) and the marker are removed, each host's
// status is rebuilt from the folder (RecoverHostsFromDisk) and session.json is marked ABANDONED
// (atomically), so the folder says what it holds and `profctl analyze` reads it. A marker left
// beside a final session.json is removed quietly. Returns one line per session cleaned.
std::vector<std::string> CleanAbandonedSessions(const std::string& logdir);

// Rebuilds the hosts of a session whose coordinator did not finish it from what its folder holds
// (session.json's RUNNING snapshots are written at most once a second, so they lag): a host whose
// <host>.xplane.pb parses and passes xspace::Validate is saved (status OK unless the snapshot
// already said INCOMPLETE; recording_detail says it was recovered and that its recording was not
// checked against the window); a host with only a .invalid file, or none, that the snapshot did
// not list as FAILED becomes FAILED (interrupted), saying so; a saved host whose file is gone or
// invalid becomes FAILED too. Returns the number of hosts saved.
int RecoverHostsFromDisk(const std::string& session_dir, profctl::v1::SessionManifest& manifest);

// session.json's text: the manifest as JSON with proto field names, every field printed.
std::string ManifestJson(const profctl::v1::SessionManifest& manifest);
// The same without the fields at their default value (what a proto JSON parser reads back the
// same): for the snapshots rewritten while a session runs. Printing every field is about 5 x
// slower (27 ms against 5 ms for a 1,024-host manifest), and those are written several times.
std::string RunningManifestJson(const profctl::v1::SessionManifest& manifest);
// Any message the same way (proto field names, every field printed, indented).
std::string ProtoJson(const google::protobuf::Message& message);

// File names inside a session.
std::string XPlaneFileName(const std::string& host);          // <host>.xplane.pb
std::string RejectedXPlaneFileName(const std::string& host);  // <host>.xplane.pb.invalid
inline constexpr char kManifestFileName[] = "session.json";
inline constexpr char kPodTraceFileName[] = "pod.perfetto-trace.gz";  // Perfetto's format
inline constexpr char kPodTraceJsonFileName[] = "pod.trace.json.gz";  // Chrome trace-event JSON

// A manifest holds 1-2 KB per host (a 10,000-host session's is ~20 MB): a larger file is not one.
inline constexpr uint64_t kMaxManifestBytes = uint64_t{64} << 20;
// The text of the session.json at `path`, read as common/file_util.h's ReadFile: a regular file
// only, and at most kMaxManifestBytes counted on the bytes read (a link to /dev/zero is refused
// unread). Larger: INVALID_ARGUMENT "PATH: N bytes, more than a session manifest may hold (M
// bytes): not a profctl session manifest".
absl::StatusOr<std::string> ReadManifestFile(const std::string& path);

// Picks each host's file stem: the agent's name when it has a valid one, else the address stem;
// a stem already taken falls back to the address stem, then gets "-2", "-3", ...
std::vector<std::string> AssignHostStems(const std::vector<WorkerAddress>& workers,
                                         const std::vector<std::string>& agent_names);

// Canonical names for people ("ok", "failed", "partial", "clock sync", ...).
std::string HostStatusName(profctl::v1::HostStatus s);
std::string SessionStatusName(profctl::v1::SessionStatus s);
std::string FailureStepName(profctl::v1::FailureStep s);

}  // namespace profctl::coordinator

#endif  // PROFCTL_COORDINATOR_SESSION_SESSION_WRITER_H_
