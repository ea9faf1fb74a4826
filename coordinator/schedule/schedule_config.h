// The coordinator's YAML config: `logdir` and the `schedules:` list (docs/schedules.md).
//
// Parsing is strict: unknown keys, wrong types and out-of-range values are INVALID_ARGUMENT
// errors that name the file, the line and the key, e.g.
//   coordinator.yaml:7: schedules[1].interval: "1x" is not a duration (use 30s, 5m, 1h, 1d)
#ifndef PROFCTL_COORDINATOR_SCHEDULE_SCHEDULE_CONFIG_H_
#define PROFCTL_COORDINATOR_SCHEDULE_SCHEDULE_CONFIG_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "coordinator/plan/capture_plan.h"
#include "coordinator/schedule/cron.h"
#include "profctl/v1/session.pb.h"
#include "xspace/tsl_profile.h"

namespace profctl::coordinator::schedule {

// "250ms", "2s", "5m", "1h", "1d", or a sum of those ("1h30m"); "0" alone is zero. Returns ns.
// INVALID_ARGUMENT for anything else (no unit, negative, overflow).
absl::StatusOr<int64_t> ParseDuration(absl::string_view text);

// "1048576", "500MB", "10GiB" (K/M/G/T are powers of 1000, Ki/Mi/Gi/Ti of 1024; the B is
// optional). Returns bytes.
absl::StatusOr<int64_t> ParseByteSize(absl::string_view text);

// Where a schedule's hosts come from. Only kList is resolved today; kDns and kFile are parsed and
// kept for target discovery (a later slice).
enum class TargetsKind { kList, kDns, kFile };

struct Targets {
  TargetsKind kind = TargetsKind::kList;
  std::vector<std::string> list = {};  // kList: host:port, grpc://host:port, ...
  std::string source = {};             // kDns: a DNS name (host:port); kFile: a file path
  bool operator==(const Targets&) const = default;
};

// What each run captures: the options of `profctl capture`, checked by ValidatePlanOptions
// (coordinator/plan/capture_plan.h) like every other front door's.
struct ScheduleCaptureOptions {
  int64_t duration_ms = 2000;                                          // duration
  profctl::v1::LatePolicy late = profctl::v1::LATE_POLICY_CAPTURE;     // late: capture|fail
  profctl::v1::AlignMode align = profctl::v1::ALIGN_MODE_COLLECTIVES;  // align: collectives|ntp
  int retries = 3;                                                     // retries: 0..20
  int64_t tolerance_ms = 0;  // tolerance (a duration, at most 60s); 0: the engine's default
  int64_t deadline_ms = 0;   // deadline (a duration); 0: derived
  // > 0: each run is a snapshot of the past (CapturePlan.past_ms; duration_ms equals it). Not a
  // YAML key: a trigger's snapshot run sets it from the trigger's `past`.
  int64_t past_ms = 0;
  // host_tracer_level 0..3, device_tracer_level 0..1, python_tracer_level 0..1: what framework
  // profiler servers record (CapturePlan's tracer levels).
  int64_t host_tracer_level = tsl::kTslHostTracerLevel;
  int64_t device_tracer_level = tsl::kTslDeviceTracerLevel;
  int64_t python_tracer_level = tsl::kTslPythonTracerLevel;
  bool operator==(const ScheduleCaptureOptions&) const = default;
  // The plan of one run, without its workers and session name.
  CapturePlan ToPlan() const;
};

// 0 means no limit. See PlanRetention (retention.h).
struct RetentionConfig {
  int64_t keep_last = 0;
  int64_t max_age_ns = 0;
  int64_t max_bytes = 0;
  bool operator==(const RetentionConfig&) const = default;
};

// What happens to a run that comes due while the schedule's previous run is still going. Only
// kSkip exists: it is skipped (and counted). Queueing would pile up behind a slow pod, and
// overlapping runs would ask the same agents to capture twice at once (they refuse).
enum class ConcurrencyPolicy { kSkip };

// Runs that came due while the coordinator was down (known from the last run's time, persisted
// by the caller): kSkip forgets them (the next run is the next regular one); kRunOnce runs once
// at start-up however many were missed, then resumes the regular times.
enum class MissedPolicy { kSkip, kRunOnce };

// A condition-triggered schedule (`trigger:`, docs/schedules.md): instead of firing at times it
// polls the targets' step signal (AgentService.GetStepSignal) and captures the pod when a host's
// recent step time regresses past `threshold` times its own baseline (signal step_time), or
// when a host reports steps that stopped (signal hang: GetStepSignalResponse.stalls).
struct TriggerConfig {
  static constexpr int64_t kDefaultMaxPastNs = 60'000'000'000;  // the agents' default recorder
  std::string signal = "step_time";  // step_time | hang (kTriggerSignals)
  // Fires when observed > baseline * threshold (threshold: 1.5, or "50%" for 1.5).
  double threshold = 1.5;
  int64_t poll_ns = 10'000'000'000;  // poll: how often the signal is read
  // window: the observed value is the median step time of the steps that ended in the last
  // window; baseline: the baseline is the median over the baseline window before that.
  int64_t window_ns = 30'000'000'000;
  int64_t baseline_ns = 600'000'000'000;
  int64_t min_steps = 20;  // min_steps: baseline steps a host needs before it is judged
  int64_t sustain = 2;     // sustain: consecutive polls over the threshold before firing
  // cooldown: after a triggered capture starts, regressions are only counted until this passed.
  int64_t cooldown_ns = 1'800'000'000'000;
  // past: how much of the pod's past a firing takes as a snapshot (the agents' --flight-recorder
  // must hold it): a hang trigger's only session; a step_time trigger's first session, before
  // the next window (0: none, the next window only). Default: the window, at most
  // kDefaultMaxPastNs.
  int64_t past_ns = 30'000'000'000;
  bool operator==(const TriggerConfig&) const = default;
};

// The trigger signals `signal:` accepts, for its error message.
inline constexpr const char* kTriggerSignals[] = {"step_time", "hang"};

struct ScheduleConfig {
  std::string name = {};  // a file stem: sessions are <name>_<UTC time>
  Targets targets = {};
  // Exactly one of interval_ns (> 0), cron and trigger is set.
  int64_t interval_ns = 0;
  std::optional<CronExpr> cron = std::nullopt;
  std::optional<TriggerConfig> trigger = std::nullopt;
  int64_t jitter_ns = 0;
  ScheduleCaptureOptions capture = {};
  RetentionConfig retention = {};
  ConcurrencyPolicy concurrency = ConcurrencyPolicy::kSkip;
  MissedPolicy missed = MissedPolicy::kSkip;
  int line = 0;  // 1-based line of the entry in its file, for messages

  // Whether the two fire at the same times (interval or cron text, and jitter), or watch with
  // the same trigger settings.
  bool SameTiming(const ScheduleConfig& other) const;
};

struct CoordinatorConfig {
  std::string logdir = {};
  std::vector<ScheduleConfig> schedules = {};
};

// One line per host that several schedules capture (list entries compared as host:port; a DNS
// name or a targets file by its text), naming them, e.g. "schedules a, b capture the same host
// h0:6000: a run whose hosts are busy with another schedule's session is skipped (counted)";
// at most 10 lines and one saying how many more hosts are shared.
std::vector<std::string> OverlapWarnings(const std::vector<ScheduleConfig>& schedules);

// Parses the YAML text `yaml`; `source` (the file name) starts every error message.
absl::StatusOr<CoordinatorConfig> ParseCoordinatorConfig(const std::string& yaml,
                                                         const std::string& source);
// Reads and parses the file at `path`.
absl::StatusOr<CoordinatorConfig> LoadCoordinatorConfig(const std::string& path);

}  // namespace profctl::coordinator::schedule

#endif  // PROFCTL_COORDINATOR_SCHEDULE_SCHEDULE_CONFIG_H_
