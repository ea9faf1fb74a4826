// A capture's plan, and the one place that says what each of its options may be, what their
// names are, and how a plan travels on the wire. `profctl capture`, the daemon's StartCapture
// and schedules all build a CapturePlan and call ValidatePlan (or ValidatePlanOptions): no other
// code checks a bound, so the three front doors cannot drift apart.
#ifndef PROFCTL_COORDINATOR_PLAN_CAPTURE_PLAN_H_
#define PROFCTL_COORDINATOR_PLAN_CAPTURE_PLAN_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "analysis/op_classify.h"
#include "coordinator/clients/worker.h"
#include "profctl/v1/coordinator.pb.h"
#include "profctl/v1/session.pb.h"
#include "xspace/tsl_profile.h"

namespace profctl::coordinator {

struct CapturePlan {
  std::vector<WorkerAddress> workers;
  int64_t duration_ms = 2000;
  std::string session;
  std::string logdir;  // recorded in the manifest
  // Budget for preparing every host; 0 = derived from the measured round trips.
  int64_t prepare_timeout_ms = 0;
  profctl::v1::LatePolicy late = profctl::v1::LATE_POLICY_CAPTURE;
  profctl::v1::AlignMode align = profctl::v1::ALIGN_MODE_COLLECTIVES;
  // Stop after preparing (profctl ping): identity and clock of every host, nothing captured or
  // written.
  bool prepare_only = false;
  // How the step breakdown finds steps (--step-pattern).
  analysis::ReaderOptions reader = {};
  // A host is late, and its recording truncated or overlong, beyond this many ms
  // (--tolerance); 0: CaptureEngineOptions::late_tolerance_ms.
  int64_t tolerance_ms = 0;
  // Attempts per host after the first (--retries), with capped exponential backoff and jitter,
  // for what may pass: transport errors, UNAVAILABLE, a busy agent (ALREADY_EXISTS), a damaged
  // transfer (DATA_LOSS). Never for what the agent meant (INVALID_ARGUMENT, UNAUTHENTICATED,
  // PERMISSION_DENIED, ...). A trace the agent recorded is fetched again (AgentService.Fetch),
  // not recorded again. Also covers GetInfo of a host that is down when the session starts.
  // Retries of an agent that is not there (UNAVAILABLE) while its window can still be caught are
  // spread over what is left of the window (retry_policy.h SpreadRetryNs), so one that comes
  // back inside it is recorded again (late); a Fetch that finds nothing uses up no retry.
  int retries = 3;
  // The whole session's budget from its start (--deadline), ms: prepare, lead, the window,
  // transfers and retries all fit in it; a host not done by then fails DEADLINE_EXCEEDED and
  // the rest is written. 0: derived (the window's end + CaptureEngineOptions::transfer_timeout_ms).
  int64_t deadline_ms = 0;
  // Fewer saved hosts than this fails the session (--min-hosts; --require-all = every worker).
  // 0: at least one. Known too few at the end of preparing: nothing is captured.
  size_t min_hosts = 0;
  // What started the session, when a coordinator daemon runs it (session.json's origin).
  profctl::v1::SessionOrigin origin = {};
  // A snapshot (--last, docs/flight-recorder.md): > 0 takes the past of every host's flight
  // recorder at the common instant start_at, [start_at - past_ms, start_at], instead of recording
  // from it on. duration_ms must equal it (the window's length: the engine's deadlines and the
  // recording checks hold as for a capture). profctl-agent workers only.
  int64_t past_ms = 0;
  // The tracer levels asked of framework profiler servers (--host-tracer-level,
  // --device-tracer-level, --python-tracer-level): grpc:// workers get them in their
  // ProfileOptions, profctl-agents pass them to their `tsl` collector. Signed so a bad flag value
  // is named as given; ValidatePlanOptions checks tsl::ValidateTracerLevels' ranges.
  int64_t host_tracer_level = tsl::kTslHostTracerLevel;
  int64_t device_tracer_level = tsl::kTslDeviceTracerLevel;
  int64_t python_tracer_level = tsl::kTslPythonTracerLevel;
  // Also write the pod timeline as Chrome JSON (--pod-trace-json), for chrome://tracing; the
  // Perfetto trace is always written.
  bool pod_trace_json = false;
};

// The validated levels of `plan`, as the clients send them.
tsl::TracerLevels PlanTracerLevels(const CapturePlan& plan);

// The bounds of a plan's options: one set for every front door.
struct PlanLimits {
  static constexpr int64_t kMaxDurationMs = 3'600'000;      // duration: 1..this
  static constexpr int64_t kMaxPrepareTimeoutMs = 600'000;  // 0 = derived
  static constexpr int64_t kMaxToleranceMs = 60'000;        // 0 = the engine's default
  static constexpr int kMaxRetries = 20;
  static constexpr int64_t kMaxDeadlineMs = 86'400'000;  // 0 = derived; else > duration
  static constexpr int64_t kMaxPastMs = 3'600'000;       // 0 = a recording; else = duration
};

// How a front door spells the plan's options in its errors.
struct PlanFieldNames {
  const char* workers;
  const char* duration;
  const char* prepare_timeout;
  const char* tolerance;
  const char* retries;
  const char* deadline;
  const char* min_hosts;
  const char* step_pattern;
  const char* past;
  const char* host_tracer_level;
  const char* device_tracer_level;
  const char* python_tracer_level;
};
// `profctl capture`'s flags.
inline constexpr PlanFieldNames kFlagNames = {
    "--workers", "--duration",          "--prepare-timeout",     "--tolerance",
    "--retries", "--deadline",          "--min-hosts",           "--step-pattern",
    "--last",    "--host-tracer-level", "--device-tracer-level", "--python-tracer-level"};
// StartCaptureRequest's fields.
inline constexpr PlanFieldNames kRequestNames = {"request.workers",
                                                 "request.duration_ms",
                                                 "request.prepare_timeout_ms",
                                                 "tolerance_ms",
                                                 "request.retries",
                                                 "request.deadline_ms",
                                                 "request.min_hosts",
                                                 "step_pattern",
                                                 "request.past_ms",
                                                 "request.host_tracer_level",
                                                 "request.device_tracer_level",
                                                 "request.python_tracer_level"};
// A schedule's keys in coordinator.yaml.
inline constexpr PlanFieldNames kScheduleNames = {
    "targets", "duration",          "prepare_timeout",     "tolerance",
    "retries", "deadline",          "min_hosts",           "step_pattern",
    "last",    "host_tracer_level", "device_tracer_level", "python_tracer_level"};

// Every option of `plan` but its workers and session name, against PlanLimits: INVALID_ARGUMENT
// naming the option as `names` spell it, its value and what it may be.
absl::Status ValidatePlanOptions(const CapturePlan& plan, const PlanFieldNames& names);
// `--last`'s value: a duration with a unit ("30s", "500ms", "2m", "1m30s"), in whole ms, > 0.
// INVALID_ARGUMENT saying what it must be (the caller puts the flag in front).
absl::StatusOr<int64_t> ParsePastMs(absl::string_view text);
// ValidatePlanOptions, and the workers: at least one, min_hosts at most their number, and with
// past_ms profctl-agent workers only (a framework's profiler server keeps no past).
absl::Status ValidatePlan(const CapturePlan& plan, const PlanFieldNames& names);

// The names of the late policy and the align mode, as flags, YAML and session.json's readers
// spell them. Parse* give INVALID_ARGUMENT "is not one of: ..." (the caller puts the text as its
// users wrote it in front).
absl::StatusOr<profctl::v1::LatePolicy> ParseLatePolicy(absl::string_view text);
absl::StatusOr<profctl::v1::AlignMode> ParseAlignMode(absl::string_view text);
absl::string_view LatePolicyName(profctl::v1::LatePolicy late);
absl::string_view AlignModeName(profctl::v1::AlignMode align);

// The plan as session.json's `request` records it (every option, the log dir included).
profctl::v1::SessionRequest SessionRequestFromPlan(const CapturePlan& plan);
// A daemon's StartCapture request -> a validated plan (workers parsed as --workers are;
// unspecified enums take their defaults). INVALID_ARGUMENT naming the bad field.
absl::StatusOr<CapturePlan> PlanFromRequest(const profctl::v1::StartCaptureRequest& request);
// The inverse, for `profctl capture --coordinator`: the log dir is the daemon's, so not sent.
profctl::v1::StartCaptureRequest RequestFromPlan(const CapturePlan& plan);

}  // namespace profctl::coordinator

#endif  // PROFCTL_COORDINATOR_PLAN_CAPTURE_PLAN_H_
