// The coordinator daemon's core (`profctl serve`), without its gRPC and HTTP front ends: the
// config, the scheduler and the session runner, and what survives a restart.
//
// Start-up: reads the config (coordinator.yaml, docs/schedules.md), marks sessions a previous
// coordinator left RUNNING as ABANDONED (CleanAbandonedSessions), reads each schedule's last run
// time from <logdir>/.profctl/schedules.json (the missed-run policy needs it) and arms the
// scheduler. A scheduled run resolves its targets (a list, a DNS name's every address, or a
// targets file read afresh at every run) off the executor, starts a session named
// <schedule>_<UTC time> through the SessionRunner, and applies the schedule's retention when
// the session is over. Schedules with a `trigger:` are watched by a TriggerWatcher instead and
// run the same way when it fires. Reload re-reads the config (SIGHUP): captures keep running; a
// config with errors is refused and the old one kept.
//
// Threading: Reload, Schedules and Shutdown may be called from any thread; the scheduler runs
// on Dependencies::executor. Blocking work (DNS, files, retention) runs on Dependencies::pool
// (null: inline on the executor, for tests).
#ifndef PROFCTL_COORDINATOR_SERVICE_DAEMON_H_
#define PROFCTL_COORDINATOR_SERVICE_DAEMON_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "coordinator/schedule/schedule_config.h"
#include "coordinator/schedule/scheduler.h"
#include "coordinator/service/session_runner.h"
#include "coordinator/service/trigger_watcher.h"
#include "profctl/v1/coordinator.pb.h"

namespace profctl::coordinator::service {

// The workers a schedule's targets name now. Blocking (DNS, file reads).
//   - a list: as given;
//   - a DNS name "name:port": every address it resolves to (A and AAAA; a Kubernetes headless
//     Service answers with every pod), sorted, each with the port;
//   - a targets file: the workers as `profctl capture --workers=@FILE` reads them (ParseWorkerFile:
//     by line, comma or space, '#' starts a comment), read at every run, so edits apply from the
//     next run.
// INVALID_ARGUMENT / NOT_FOUND / UNAVAILABLE naming the name or file when nothing usable is found.
absl::StatusOr<std::vector<WorkerAddress>> ResolveTargets(const schedule::Targets& targets);

// <logdir>/.profctl/schedules.json.
std::string ScheduleStatePath(const std::string& logdir);

// Counters for /metrics, besides the runner's.
struct DaemonCounters {
  int64_t reloads = 0;
  int64_t reload_errors = 0;
  int64_t runs_not_started = 0;  // targets could not be resolved, or the session not created
  // Runs skipped because a host was busy with another of this coordinator's sessions.
  int64_t runs_skipped_hosts_busy = 0;
  int64_t retention_deleted = 0;
  int64_t retention_bytes_freed = 0;
  int64_t retention_errors = 0;
  int64_t sessions_kept = 0;         // finished session folders in the log dir after retention
  int64_t last_schedule_lag_ns = 0;  // how late the latest scheduled run started after its time
  int64_t trigger_polls = 0;         // polls of condition-triggered schedules
  int64_t trigger_poll_errors = 0;   // targets that did not answer them
  int64_t triggers_fired = 0;        // captures they started
  int64_t state_writes = 0;          // schedules.json written (RequestPersist coalesces)
};

class Daemon {
 public:
  struct Dependencies {
    Executor* executor = nullptr;
    WorkPool* pool = nullptr;
    AgentClientFactory* clients = nullptr;
    CaptureEngineOptions engine_options = {};
    // Seeds schedule jitter; 0: from the config path (stable across restarts).
    uint64_t jitter_seed = 0;
    // Replaces ResolveTargets (tests).
    std::function<absl::StatusOr<std::vector<WorkerAddress>>(const schedule::Targets&)> resolve =
        nullptr;
    // Log lines for people (one per run start/end, reload, retention), any thread.
    std::function<void(const std::string&)> log = nullptr;
  };

  // Loads `config_path` and starts the schedules (the first fire is a task on the executor).
  // INVALID_ARGUMENT for a bad config (file:line: key: problem), or a log dir that cannot be
  // created.
  static absl::StatusOr<std::unique_ptr<Daemon>> Start(Dependencies deps,
                                                       const std::string& config_path);
  // Shutdown(), then waits for running captures to end.
  ~Daemon();
  Daemon(const Daemon&) = delete;
  Daemon& operator=(const Daemon&) = delete;

  // Re-reads the config. On an error the running config stays and the error is returned.
  // A changed logdir is refused (sessions would split across two places): restart for that.
  absl::Status Reload();

  // The schedules and their counters, delivered on the executor.
  void Schedules(std::function<void(v1::ListSchedulesResponse)> done);

  // Stops firing schedules and cancels running captures (they save what was recorded).
  void Shutdown();
  // Shut down and nothing of it left to run on the executor or the pool (tests driving a fake
  // executor run it until then before destroying the daemon).
  bool Idle() const;

  SessionRunner& runner() { return *runner_; }
  const SessionRunner& runner() const { return *runner_; }
  const Clock& clock() const { return deps_.executor->clock(); }
  const std::string& logdir() const { return logdir_; }
  const std::string& config_path() const { return config_path_; }
  DaemonCounters counters() const;

 private:
  Daemon(Dependencies deps, std::string config_path, schedule::CoordinatorConfig config);
  void Arm(const std::map<std::string, int64_t>& last_runs);
  // A scheduled (origin kind "schedule") or triggered run.
  void RunScheduled(const schedule::ScheduleConfig& schedule, const schedule::ScheduledRun& run,
                    const v1::SessionOrigin& origin, schedule::Scheduler::DoneCallback done);
  void RunResolved(const schedule::ScheduleConfig& schedule, const schedule::ScheduledRun& run,
                   const v1::SessionOrigin& origin,
                   std::shared_ptr<schedule::Scheduler::DoneCallback> done);
  void Finished(const std::string& schedule, const std::string& outcome);
  void ApplyRetention(const schedule::ScheduleConfig& schedule);
  // schedules.json as persisted_ stands, written soon on the pool: coalesced, so runs that start
  // or finish together cost a few writes, not one each (each writes every schedule and fsyncs,
  // one at a time, on the pool the captures save their traces with). At most one write waits
  // behind the one in progress, and it writes the state as it is when it starts.
  void RequestPersist();
  void Persist();  // the write (blocking; any thread)
  void Log(const std::string& line) const;
  void Blocking(Executor::Task job);  // on the pool, or inline

  Dependencies deps_;
  const std::string config_path_;
  const std::string logdir_;
  std::unique_ptr<SessionRunner> runner_;
  // Only on the executor.
  std::unique_ptr<schedule::Scheduler> scheduler_;
  std::unique_ptr<TriggerWatcher> triggers_;
  std::vector<schedule::ScheduleConfig> schedules_;

  mutable absl::Mutex mu_;
  std::map<std::string, v1::SchedulePersistedState::Schedule> persisted_ ABSL_GUARDED_BY(mu_);
  int64_t loaded_wall_ns_ ABSL_GUARDED_BY(mu_) = 0;
  DaemonCounters counters_ ABSL_GUARDED_BY(mu_);
  // Per schedule: runs skipped because their hosts were busy with our own sessions.
  std::map<std::string, int64_t> skipped_hosts_busy_ ABSL_GUARDED_BY(mu_);
  bool shut_down_ ABSL_GUARDED_BY(mu_) = false;
  // Scheduled runs not yet fully over (retention included), and the scheduler's destruction
  // after Shutdown: the destructor waits for 0.
  int in_flight_ ABSL_GUARDED_BY(mu_) = 0;
  // A write of schedules.json is queued and has not taken its snapshot yet.
  bool persist_queued_ ABSL_GUARDED_BY(mu_) = false;
  // Serializes schedules.json writes; taken before mu_.
  absl::Mutex persist_mu_;
};

// The daemon's /metrics text (Prometheus): captures started/running/finished by outcome, start
// errors, failed hosts, retries, bytes saved, capture seconds, retention, sessions kept, config
// reloads and schedule lag.
std::string RenderMetrics(const Daemon& daemon);

}  // namespace profctl::coordinator::service

#endif  // PROFCTL_COORDINATOR_SERVICE_DAEMON_H_
