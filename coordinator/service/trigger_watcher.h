// Condition-triggered captures (docs/schedules.md): for every schedule with a `trigger:`, polls
// its targets' step signal (AgentService.GetStepSignal) every `poll`, judges it
// (schedule::StepTimeWatch) and starts a capture of the schedule's targets when a host's step
// time stayed over threshold x its baseline for `sustain` polls, at most once per `cooldown`
// (signal hang: when a host reported a stalled step source; the run is then the daemon's
// snapshot of the pod's past, and the stalled source goes into the origin too).
//
// A poll resolves the targets afresh (a list, a DNS name, a targets file: ResolveTargets), keeps
// one client per target across polls, and asks every target at once with a short deadline
// (min(2 s, poll / 2)); a target that does not answer only counts as a poll error. No poll runs
// while the schedule's own capture does (its concurrency policy, and the capture's own overhead
// must not read as a regression). The trigger, the baseline and the observed value (the worst
// host's) go into the session's origin (session.json).
//
// Threading: every method on the executor's sequence (tests: a FakeExecutor), where the watcher
// is also created and destroyed; RPC answers and the capture's done callback may come from any
// thread (they are posted back). Callbacks still pending after destruction are ignored.
#ifndef PROFCTL_COORDINATOR_SERVICE_TRIGGER_WATCHER_H_
#define PROFCTL_COORDINATOR_SERVICE_TRIGGER_WATCHER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/executor.h"
#include "coordinator/clients/agent_client.h"
#include "coordinator/clients/worker.h"
#include "coordinator/schedule/schedule_config.h"
#include "coordinator/schedule/scheduler.h"
#include "profctl/v1/coordinator.pb.h"
#include "profctl/v1/session.pb.h"

namespace profctl::coordinator::service {

struct TriggerState {
  schedule::ScheduleState schedule;  // next_fire_wall_ns: the next poll
  v1::TriggerInfo trigger;
};

class TriggerWatcher {
 public:
  using RunCapture = std::function<void(
      const schedule::ScheduleConfig& schedule, const schedule::ScheduledRun& run,
      const v1::SessionOrigin& origin, schedule::Scheduler::DoneCallback done)>;

  struct Dependencies {
    Executor* executor = nullptr;
    AgentClientFactory* clients = nullptr;
    // Runs a blocking job (target resolution) off the executor, or inline.
    std::function<void(Executor::Task)> blocking = nullptr;
    std::function<absl::StatusOr<std::vector<WorkerAddress>>(const schedule::Targets&)> resolve =
        nullptr;
    RunCapture run_capture = nullptr;
    // After every poll: how many targets did not answer (for /metrics). Optional.
    std::function<void(int64_t errors)> on_poll = nullptr;
    std::function<void(const std::string&)> log = nullptr;
  };

  explicit TriggerWatcher(Dependencies deps);
  ~TriggerWatcher();
  TriggerWatcher(const TriggerWatcher&) = delete;
  TriggerWatcher& operator=(const TriggerWatcher&) = delete;

  // Watches the schedules that have a trigger (others are ignored). The first poll of each is
  // posted at once.
  void Start(const std::vector<schedule::ScheduleConfig>& schedules);
  // A schedule with the same name and trigger settings keeps its samples, counters and cooldown;
  // its other settings (targets, capture options) apply from its next poll. Changed or new ones
  // start afresh; removed ones stop polling (a capture they started runs on).
  void Reload(const std::vector<schedule::ScheduleConfig>& schedules);
  std::vector<TriggerState> States() const;

  struct Impl;

 private:
  std::shared_ptr<Impl> impl_;
};

// "step_time > 1.5x its 10m baseline (median over 30s), poll 10s, cooldown 30m".
std::string TriggerTiming(const schedule::TriggerConfig& t);

}  // namespace profctl::coordinator::service

#endif  // PROFCTL_COORDINATOR_SERVICE_TRIGGER_WATCHER_H_
