#include "coordinator/plan/capture_plan.h"

#include <algorithm>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"

namespace profctl::coordinator {
namespace {

absl::Status NotIn(const char* name, int64_t value, int64_t lo, int64_t hi,
                   absl::string_view unit = " ms", absl::string_view note = "") {
  return absl::InvalidArgumentError(
      absl::StrCat(name, "=", value, " is not in ", lo, "..", hi, unit, note));
}

}  // namespace

absl::Status ValidatePlanOptions(const CapturePlan& plan, const PlanFieldNames& names) {
  if (plan.duration_ms < 1 || plan.duration_ms > PlanLimits::kMaxDurationMs) {
    return NotIn(names.duration, plan.duration_ms, 1, PlanLimits::kMaxDurationMs);
  }
  if (plan.prepare_timeout_ms < 0 || plan.prepare_timeout_ms > PlanLimits::kMaxPrepareTimeoutMs) {
    return NotIn(names.prepare_timeout, plan.prepare_timeout_ms, 0,
                 PlanLimits::kMaxPrepareTimeoutMs, " ms", " (0: derived from the round trips)");
  }
  if (plan.tolerance_ms < 0 || plan.tolerance_ms > PlanLimits::kMaxToleranceMs) {
    return NotIn(names.tolerance, plan.tolerance_ms, 0, PlanLimits::kMaxToleranceMs, " ms",
                 " (0: the default)");
  }
  if (plan.retries < 0 || plan.retries > PlanLimits::kMaxRetries) {
    return NotIn(names.retries, plan.retries, 0, PlanLimits::kMaxRetries, "");
  }
  if (plan.deadline_ms != 0 &&
      (plan.deadline_ms <= plan.duration_ms || plan.deadline_ms > PlanLimits::kMaxDeadlineMs)) {
    return absl::InvalidArgumentError(
        absl::StrCat(names.deadline, "=", plan.deadline_ms, " ms cannot hold the ",
                     plan.duration_ms, " ms window: give more than ", names.duration, " (at most ",
                     PlanLimits::kMaxDeadlineMs, "), or 0 for the default"));
  }
  if (plan.past_ms < 0 || plan.past_ms > PlanLimits::kMaxPastMs) {
    return NotIn(names.past, plan.past_ms, 0, PlanLimits::kMaxPastMs, " ms",
                 " (0: a recording from the common instant on)");
  }
  if (absl::Status s = tsl::ValidateTracerLevels(
          plan.host_tracer_level, plan.device_tracer_level, plan.python_tracer_level,
          {names.host_tracer_level, names.device_tracer_level, names.python_tracer_level});
      !s.ok()) {
    return s;
  }
  if (plan.past_ms > 0 && plan.past_ms != plan.duration_ms) {
    return absl::InvalidArgumentError(absl::StrCat(
        names.past, "=", plan.past_ms, " ms and ", names.duration, "=", plan.duration_ms,
        " ms: a snapshot's window is its past, so give one of them (or both equal)"));
  }
  if (absl::Status s = analysis::ValidateReaderOptions(plan.reader); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(names.step_pattern, ": ", s.message()));
  }
  if (plan.late != profctl::v1::LATE_POLICY_CAPTURE && plan.late != profctl::v1::LATE_POLICY_FAIL) {
    return absl::InvalidArgumentError(
        absl::StrCat("late policy ", plan.late, " is not one of: ", "capture, fail"));
  }
  if (plan.align != profctl::v1::ALIGN_MODE_COLLECTIVES &&
      plan.align != profctl::v1::ALIGN_MODE_NTP) {
    return absl::InvalidArgumentError(
        absl::StrCat("align mode ", plan.align, " is not one of: collectives, ntp"));
  }
  return absl::OkStatus();
}

absl::Status ValidatePlan(const CapturePlan& plan, const PlanFieldNames& names) {
  if (plan.workers.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(names.workers, ": no workers given"));
  }
  if (absl::Status s = ValidatePlanOptions(plan, names); !s.ok()) return s;
  if (plan.min_hosts > plan.workers.size()) {
    return absl::InvalidArgumentError(absl::StrCat(names.min_hosts, "=", plan.min_hosts,
                                                   " is not in 0..", plan.workers.size(),
                                                   " (the number of ", names.workers, ")"));
  }
  if (plan.past_ms > 0) {
    for (const WorkerAddress& w : plan.workers) {
      if (w.protocol != WorkerAddress::Protocol::kAgent) {
        return absl::InvalidArgumentError(absl::StrCat(
            names.past, ": ", w.address,
            " is a framework's profiler server, which keeps no past; a snapshot takes it from "
            "profctl-agent workers started with --flight-recorder (docs/flight-recorder.md)"));
      }
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<int64_t> ParsePastMs(absl::string_view text) {
  absl::Duration d;
  if (!absl::ParseDuration(text, &d) || d <= absl::ZeroDuration() ||
      d > absl::Milliseconds(PlanLimits::kMaxPastMs) ||
      absl::Trunc(d, absl::Milliseconds(1)) != d) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", text, "' is not a past of whole milliseconds with a unit, 1ms..",
                     PlanLimits::kMaxPastMs / 1000, "s (e.g. 30s, 500ms, 2m)"));
  }
  return absl::ToInt64Milliseconds(d);
}

absl::StatusOr<profctl::v1::LatePolicy> ParseLatePolicy(absl::string_view text) {
  if (text == "capture") return profctl::v1::LATE_POLICY_CAPTURE;
  if (text == "fail") return profctl::v1::LATE_POLICY_FAIL;
  return absl::InvalidArgumentError("is not one of: capture, fail");
}

absl::StatusOr<profctl::v1::AlignMode> ParseAlignMode(absl::string_view text) {
  if (text == "collectives") return profctl::v1::ALIGN_MODE_COLLECTIVES;
  if (text == "ntp") return profctl::v1::ALIGN_MODE_NTP;
  return absl::InvalidArgumentError("is not one of: collectives, ntp");
}

absl::string_view LatePolicyName(profctl::v1::LatePolicy late) {
  switch (late) {
    case profctl::v1::LATE_POLICY_FAIL:
      return "fail";
    case profctl::v1::LATE_POLICY_CAPTURE:
      return "capture";
    default:
      return "unspecified";
  }
}

absl::string_view AlignModeName(profctl::v1::AlignMode align) {
  switch (align) {
    case profctl::v1::ALIGN_MODE_NTP:
      return "ntp";
    case profctl::v1::ALIGN_MODE_COLLECTIVES:
      return "collectives";
    default:
      return "unspecified";
  }
}

profctl::v1::SessionRequest SessionRequestFromPlan(const CapturePlan& plan) {
  profctl::v1::SessionRequest r;
  for (const WorkerAddress& w : plan.workers) r.add_workers(w.address);
  r.set_duration_ms(static_cast<uint64_t>(plan.duration_ms));
  r.set_logdir(plan.logdir);
  r.set_session(plan.session);
  r.set_prepare_timeout_ms(static_cast<uint64_t>(std::max<int64_t>(0, plan.prepare_timeout_ms)));
  r.set_late(plan.late);
  r.set_align(plan.align);
  r.set_retries(static_cast<uint32_t>(std::max(0, plan.retries)));
  r.set_deadline_ms(static_cast<uint64_t>(std::max<int64_t>(0, plan.deadline_ms)));
  r.set_min_hosts(static_cast<uint32_t>(plan.min_hosts));
  r.set_past_ms(static_cast<uint64_t>(std::max<int64_t>(0, plan.past_ms)));
  const tsl::TracerLevels levels = PlanTracerLevels(plan);
  r.set_host_tracer_level(levels.host);
  r.set_device_tracer_level(levels.device);
  r.set_python_tracer_level(levels.python);
  r.set_pod_trace_json(plan.pod_trace_json);
  return r;
}

tsl::TracerLevels PlanTracerLevels(const CapturePlan& plan) {
  auto level = [](int64_t v) {
    return static_cast<uint32_t>(std::clamp<int64_t>(v, 0, std::numeric_limits<uint32_t>::max()));
  };
  return {.host = level(plan.host_tracer_level),
          .device = level(plan.device_tracer_level),
          .python = level(plan.python_tracer_level)};
}

absl::StatusOr<CapturePlan> PlanFromRequest(const profctl::v1::StartCaptureRequest& request) {
  const profctl::v1::SessionRequest& r = request.request();
  const PlanFieldNames& names = kRequestNames;
  if (r.workers().empty()) {
    return absl::InvalidArgumentError(absl::StrCat(names.workers, ": empty"));
  }
  absl::StatusOr<std::vector<WorkerAddress>> workers =
      ParseWorkers(std::vector<std::string>(r.workers().begin(), r.workers().end()));
  if (!workers.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(names.workers, ": ", workers.status().message()));
  }
  // Unsigned on the wire; anything past int64 is past every bound too.
  auto bounded = [](uint64_t v) {
    return static_cast<int64_t>(std::min<uint64_t>(v, std::numeric_limits<int64_t>::max()));
  };
  CapturePlan plan;
  plan.workers = *std::move(workers);
  plan.duration_ms = bounded(r.duration_ms());
  plan.prepare_timeout_ms = bounded(r.prepare_timeout_ms());
  plan.tolerance_ms = bounded(request.tolerance_ms());
  plan.retries = static_cast<int>(
      std::min<uint32_t>(r.retries(), static_cast<uint32_t>(std::numeric_limits<int>::max())));
  plan.deadline_ms = bounded(r.deadline_ms());
  plan.min_hosts = static_cast<size_t>(r.min_hosts());
  plan.past_ms = bounded(r.past_ms());
  if (r.has_host_tracer_level()) plan.host_tracer_level = r.host_tracer_level();
  if (r.has_device_tracer_level()) plan.device_tracer_level = r.device_tracer_level();
  if (r.has_python_tracer_level()) plan.python_tracer_level = r.python_tracer_level();
  plan.pod_trace_json = r.pod_trace_json();
  plan.late = r.late() == profctl::v1::LATE_POLICY_UNSPECIFIED ? profctl::v1::LATE_POLICY_CAPTURE
                                                               : r.late();
  plan.align = r.align() == profctl::v1::ALIGN_MODE_UNSPECIFIED
                   ? profctl::v1::ALIGN_MODE_COLLECTIVES
                   : r.align();
  if (!request.step_pattern().empty()) plan.reader.step_pattern = request.step_pattern();
  plan.session = r.session();
  if (absl::Status s = ValidatePlan(plan, names); !s.ok()) return s;
  return plan;
}

profctl::v1::StartCaptureRequest RequestFromPlan(const CapturePlan& plan) {
  profctl::v1::StartCaptureRequest out;
  *out.mutable_request() = SessionRequestFromPlan(plan);
  out.mutable_request()->clear_logdir();
  if (plan.reader.step_pattern != analysis::kDefaultStepPattern) {
    out.set_step_pattern(plan.reader.step_pattern);
  }
  out.set_tolerance_ms(static_cast<uint64_t>(plan.tolerance_ms));
  return out;
}

}  // namespace profctl::coordinator
