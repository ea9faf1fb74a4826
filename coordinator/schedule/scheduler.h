// Fires scheduled captures: pure timing logic on an injected Executor (and its Clock). It runs
// no capture itself; it calls Dependencies::run_capture and waits for its done callback.
//
// Fire times are wall-clock instants (UTC), waited for as monotonic deadlines on the executor
// (the wait is re-armed if the wall clock is found behind when the timer runs):
//   - interval schedules fire at every multiple of the interval since the Unix epoch
//     (1h: at :00 of every hour UTC; 1d: at 00:00 UTC), so restarts do not shift them;
//   - cron schedules fire at CronExpr::NextAfter;
//   each plus a per-run jitter in [0, jitter], a deterministic function of (seed, schedule name,
//   nominal time), so agents behind one coordinator are not all asked at once.
// A run due while the schedule's previous run is still going is skipped (ConcurrencyPolicy).
// A run whose time passed while the coordinator was down (Start's last_run_wall_ns) follows the
// schedule's MissedPolicy. A timer that runs late (a busy executor, a suspended host) skips the
// times it missed and counts them.
//
// Threading: every method must be called on the executor's sequence (tests: the test thread
// with a FakeExecutor). run_capture is called there; its done callback may be called from any
// thread, once. Destroy the Scheduler on the executor's sequence; timers and done callbacks
// still pending afterwards are ignored.
#ifndef PROFCTL_COORDINATOR_SCHEDULE_SCHEDULER_H_
#define PROFCTL_COORDINATOR_SCHEDULE_SCHEDULER_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "common/executor.h"
#include "coordinator/schedule/schedule_config.h"

namespace profctl::coordinator::schedule {

// A schedule's run: the session name (<schedule>_<YYYYMMDDTHHMMSSZ> of its start, UTC) and
// the times.
struct ScheduledRun {
  std::string run_id = {};
  int64_t nominal_wall_ns = 0;  // the interval/cron time it belongs to
  int64_t fire_wall_ns = 0;     // nominal + jitter, or the start-up time of a catch-up run
  bool catch_up = false;        // MissedPolicy::kRunOnce after downtime
};

// Counters and times of one schedule, for ListSchedules and persistence.
struct ScheduleState {
  std::string name = {};
  int64_t next_fire_wall_ns = 0;
  int64_t last_run_wall_ns = 0;     // 0: none yet (persist it: Start's last_run_wall_ns)
  std::string running_run_id = {};  // empty: idle
  int64_t runs_started = 0;
  int64_t runs_finished = 0;
  int64_t skipped_busy = 0;  // due while the previous run was still going
  int64_t missed_down = 0;   // passed while the coordinator was down
  int64_t missed_late = 0;   // passed while a timer was late
};

struct SchedulerOptions {
  // Seeds the jitter: the same seed gives the same jitter for the same schedule and time.
  uint64_t jitter_seed = 0;
};

class Scheduler {
 public:
  using DoneCallback = absl::AnyInvocable<void() &&>;
  // Starts one run; calls `done` (from any thread) when it is over, whatever its outcome.
  using RunCapture = std::function<void(const ScheduleConfig& schedule, const ScheduledRun& run,
                                        DoneCallback done)>;

  // Both required. The executor must outlive every done callback handed out.
  struct Dependencies {
    Executor* executor = nullptr;
    RunCapture run_capture = nullptr;
  };

  Scheduler(Dependencies deps, SchedulerOptions options);
  ~Scheduler();
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // Arms every schedule. `last_run_wall_ns` (schedule name -> the wall time its last run
  // started, as persisted; absent: never ran) decides the runs missed while down. Call once.
  void Start(const std::vector<ScheduleConfig>& schedules,
             const std::map<std::string, int64_t>& last_run_wall_ns);

  // Replaces the schedules. Running captures keep running (and still count as running for
  // their schedule's concurrency policy if it is kept or re-added). A schedule with the same
  // name and timing (ScheduleConfig::SameTiming) keeps its next fire time and counters; its
  // other settings apply from its next run. New or re-timed schedules are armed from now
  // (nothing counts as missed); removed ones stop firing.
  void Reload(const std::vector<ScheduleConfig>& schedules);

  // One entry per schedule, by name.
  std::vector<ScheduleState> States() const;

  // The nominal fire time strictly after `wall_ns` of `schedule` (no jitter).
  static int64_t NextNominal(const ScheduleConfig& schedule, int64_t wall_ns);
  // The jitter of the run at `nominal_wall_ns`: in [0, schedule.jitter_ns].
  static int64_t JitterNs(uint64_t seed, const ScheduleConfig& schedule, int64_t nominal_wall_ns);

  struct Impl;

 private:
  std::shared_ptr<Impl> impl_;
};

// "<schedule>_<YYYYMMDDTHHMMSSZ>" of `wall_ns` (UTC, seconds).
std::string RunId(const std::string& schedule, int64_t wall_ns);

}  // namespace profctl::coordinator::schedule

#endif  // PROFCTL_COORDINATOR_SCHEDULE_SCHEDULER_H_
