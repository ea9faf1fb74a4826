// Runs the coordinator daemon's captures (API requests, schedules, triggers) side by side, each
// a CaptureEngine writing an ordinary session folder under the daemon's log dir, and tells
// watchers what happens to them (started, progress lines, finished).
//
// Threading: Start, Running, RunningSessions, Watch and Shutdown may be called from any thread
// (gRPC handlers, the scheduler's executor). Engines run on Dependencies::executor, their finish
// phases (pod outputs, session.json) on the runner's own finisher threads, so one session's end
// never stalls another's timers; a finished engine is destroyed on the runner's own reaper
// thread (an engine must not be destroyed from its own callbacks, and its destructor may wait).
#ifndef PROFCTL_COORDINATOR_SERVICE_SESSION_RUNNER_H_
#define PROFCTL_COORDINATOR_SERVICE_SESSION_RUNNER_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/executor.h"
#include "coordinator/clients/agent_client.h"
#include "coordinator/engine/capture_engine.h"
#include "coordinator/session/session_writer.h"
#include "profctl/v1/coordinator.pb.h"

namespace profctl::coordinator::service {

// One watcher's events, in order. Bounded: when a slow reader lets it fill, the oldest progress
// events are dropped first (started/finished events are kept), and `dropped` counts them.
class EventQueue {
 public:
  explicit EventQueue(std::string session_filter, size_t capacity = 1024)
      : filter_(std::move(session_filter)), capacity_(capacity) {}

  // Waits up to `timeout` for the next event. Returns false when none came, or when the queue is
  // closed and drained (then closed() is true).
  bool Next(v1::SessionEvent* event, absl::Duration timeout);
  bool closed() const;
  int64_t dropped() const;
  const std::string& filter() const { return filter_; }

  // Runner side.
  void Push(const v1::SessionEvent& event);
  void Close();

 private:
  const std::string filter_;
  const size_t capacity_;
  mutable absl::Mutex mu_;
  std::deque<v1::SessionEvent> events_ ABSL_GUARDED_BY(mu_);
  bool Ready() const ABSL_SHARED_LOCKS_REQUIRED(mu_) { return !events_.empty() || closed_; }

  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  int64_t dropped_ ABSL_GUARDED_BY(mu_) = 0;
};

// Counters for /metrics. Monotonic except `running`.
struct RunnerCounters {
  int64_t started = 0;
  int64_t running = 0;  // now (counters() reads it from the sessions)
  int64_t finished_ok = 0;
  int64_t finished_partial = 0;
  int64_t finished_failed = 0;
  int64_t start_errors = 0;  // StartSession refused (bad request, disk full, name taken)
  int64_t hosts_failed = 0;
  int64_t host_retries = 0;  // attempts after the first, over every host
  int64_t bytes_saved = 0;
  double capture_seconds_sum = 0;  // first host prepare to session.json, per finished session
  // Finished sessions whose engine (per-host traces, pod buffers) has been destroyed and whose
  // freed memory was handed back to the OS (malloc_trim): nothing of them is held after that.
  int64_t sessions_released = 0;
};

class SessionRunner {
 public:
  struct Dependencies {
    Executor* executor = nullptr;  // runs the engines; its clock is the daemon's
    WorkPool* pool = nullptr;      // validates and saves traces; null: on the executor (tests)
    AgentClientFactory* clients = nullptr;
    CaptureEngineOptions engine_options = {};
  };
  struct StartOptions {
    // The plan's session name was generated: take <name>_2, ... when it exists.
    bool make_unique = false;
    v1::SessionOrigin origin = {};
    // Called once, on the executor, when the session is over: its final manifest, or why the
    // engine could not run it. Not called when Start fails. Must not call the runner: it may run
    // while the runner's destructor waits for its last engine.
    std::function<void(const absl::StatusOr<v1::SessionManifest>&)> on_finished = nullptr;
    // Refuse (ABORTED, naming the host and the session) when one of the plan's workers is in a
    // session this runner is running: a scheduled run then is skipped instead of failing on
    // agents that are busy with our own capture.
    bool skip_if_hosts_busy = false;
  };

  SessionRunner(Dependencies deps, std::string logdir);
  // Shutdown(), then waits for every engine to be destroyed.
  ~SessionRunner();
  SessionRunner(const SessionRunner&) = delete;
  SessionRunner& operator=(const SessionRunner&) = delete;

  // Creates the session folder (under the runner's log dir, whatever plan.logdir says) and
  // starts the capture. INVALID_ARGUMENT for a bad name, ALREADY_EXISTS for a taken one,
  // RESOURCE_EXHAUSTED for a full disk, FAILED_PRECONDITION after Shutdown, ABORTED for busy
  // hosts (StartOptions::skip_if_hosts_busy). A session's workers count as busy from Start until
  // it is over.
  absl::StatusOr<v1::StartCaptureResponse> Start(CapturePlan plan, StartOptions options);

  // A session running now (manifest as last flushed is not kept here: GetSession reads the
  // folder), or nullopt.
  std::optional<v1::SessionInfo> Running(const std::string& session) const;
  std::vector<v1::SessionInfo> RunningSessions() const;

  // A new watcher of every session (empty filter) or one. For one session, it first gets a
  // STARTED event (with the last progress line) when the session is running now.
  std::shared_ptr<EventQueue> Watch(const std::string& session);
  void Unwatch(const std::shared_ptr<EventQueue>& queue);

  // Cancels every running capture (each saves what its hosts recorded, and its session.json
  // says it was interrupted), refuses new ones, and closes every watcher once the last session
  // has finished. Idempotent; returns at once.
  void Shutdown();
  // Blocks until no session runs and every finished one is released (its engine destroyed, its
  // freed memory returned to the OS), or `timeout` passes.
  bool WaitIdle(absl::Duration timeout) const;

  RunnerCounters counters() const;
  const std::string& logdir() const { return logdir_; }

 private:
  struct Entry {
    v1::SessionInfo info;
    int64_t started_mono_ns = 0;
    std::shared_ptr<RunningSession> sink;  // the session folder: outlives the engine
    std::unique_ptr<CaptureEngine> engine;
    std::vector<std::string> targets;  // its workers' host:port, claimed in busy_targets_
  };
  void ClaimTargets(const std::vector<std::string>& targets, const std::string& session)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ReleaseTargets(const std::vector<std::string>& targets) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Publish(const v1::SessionEvent& event) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void OnProgress(const std::string& session, const std::string& line);
  void OnDone(const std::string& session, absl::StatusOr<v1::SessionManifest> result,
              const std::function<void(const absl::StatusOr<v1::SessionManifest>&)>& on_finished);

  const Dependencies deps_;
  const std::string logdir_;
  mutable absl::Mutex mu_;
  std::map<std::string, Entry> running_ ABSL_GUARDED_BY(mu_);
  // host:port -> (sessions using it, the latest of them), from Start until the session is over.
  std::map<std::string, std::pair<int, std::string>> busy_targets_ ABSL_GUARDED_BY(mu_);
  std::vector<std::shared_ptr<EventQueue>> watchers_ ABSL_GUARDED_BY(mu_);
  bool shut_down_ ABSL_GUARDED_BY(mu_) = false;
  int releasing_ ABSL_GUARDED_BY(mu_) = 0;  // finished sessions queued on the reaper
  bool Idle() const ABSL_SHARED_LOCKS_REQUIRED(mu_) { return running_.empty() && releasing_ == 0; }
  RunnerCounters counters_ ABSL_GUARDED_BY(mu_);
  // Destroys finished engines (declared last: destroyed first, joining its thread, while the
  // rest is still alive).
  std::unique_ptr<ThreadWorkPool> reaper_;
  // Runs the sessions' finish phases (CaptureEngine::Dependencies::finisher); null without a
  // pool. Idle once the reaper has joined: an engine's destructor waits for its session, which
  // its finish holds.
  std::unique_ptr<ThreadWorkPool> finisher_;
};

// "ok", "partial", "failed", ... with the host count: the FINISHED event's message.
std::string OutcomeLine(const v1::SessionManifest& manifest);

}  // namespace profctl::coordinator::service

#endif  // PROFCTL_COORDINATOR_SERVICE_SESSION_RUNNER_H_
