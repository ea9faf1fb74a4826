#include "coordinator/cli/capture_flags.h"

#include <sys/stat.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "analysis/op_classify.h"
#include "common/file_util.h"
#include "common/flags.h"
#include "coordinator/clients/agent_credentials.h"
#include "coordinator/clients/worker.h"
#include "coordinator/plan/capture_plan.h"

namespace profctl::coordinator {
namespace {

CaptureFlag Str(const char* name, std::string CaptureFlags::*field, std::string help,
                bool non_empty = false) {
  return {name, field, nullptr, nullptr, std::move(help), non_empty};
}
CaptureFlag Int(const char* name, int64_t CaptureFlags::*field, std::string help) {
  return {name, nullptr, field, nullptr, std::move(help)};
}
CaptureFlag Bool(const char* name, bool CaptureFlags::*field, std::string help) {
  return {name, nullptr, nullptr, field, std::move(help)};
}

}  // namespace

const std::vector<CaptureFlag>& CaptureFlagTable() {
  using F = CaptureFlags;
  static const auto* const kFlags = new std::vector<CaptureFlag>{
      Str("workers", &F::workers, std::string(kWorkersFlagHelp),
          /*non_empty=*/true),
      Str("duration", &F::duration,
          "capture window: milliseconds (2000) or a duration with a unit (2s, 500ms, 1m), "
          "1 ms..1 h"),
      Str("last", &F::last,
          "take the past instead of recording: the last DURATION (30s, 500ms, 2m) of every "
          "worker's flight recorder (profctl-agent --flight-recorder), at one common instant; "
          "the window is [instant - DURATION, instant] (docs/flight-recorder.md)"),
      Str("logdir", &F::logdir, "output root; traces go to LOGDIR/plugins/profile/SESSION/",
          /*non_empty=*/true),
      Str("session", &F::session, "session (run) name (default: UTC time YYYY_MM_DD_HH_MM_SS)",
          /*non_empty=*/true),
      Bool("json", &F::json, "print the session manifest as JSON on stdout instead of a table"),
      Bool("pod-trace-json", &F::pod_trace_json,
           "also write the pod timeline as Chrome trace-event JSON (pod.trace.json.gz, for "
           "chrome://tracing; about 3x the size and 2x the CPU of the Perfetto trace, "
           "pod.perfetto-trace.gz, always written)"),
      Int("prepare-timeout", &F::prepare_timeout_ms,
          "ms to get every host's identity and clock offset; 0 = derived from the measured "
          "round trips (4 x the median, then at most 2 x the 90th percentile; 250..10000 ms; "
          "with --late=capture, once 90% are ready, it ends when no host got ready for a "
          "quarter of the time the last one took, or 50 ms when every host left has answered "
          "nothing; while fewer than 90% are ready it waits for every GetInfo in flight, up "
          "to its 2 s timeout: a slow link, or 500 ms for a host whose kernel answers a "
          "TCP handshake while its agent says nothing: frozen; a capture of a pod another "
          "capture reserved waits within it for that capture when it is the older, else gives "
          "up whole)"),
      Str("late", &F::late,
          "a host that cannot start at the common instant: capture (flag it late) or fail",
          /*non_empty=*/true),
      Str("step-pattern", &F::step_pattern,
          "RE2 pattern naming step markers (NVTX ranges, annotations); group 1 = step number",
          /*non_empty=*/true),
      Str("align", &F::align,
          "collectives (refine clock offsets from collective ends in the traces) or ntp "
          "(clock sync only, +- RTT/2)",
          /*non_empty=*/true),
      Int("tolerance", &F::tolerance_ms,
          "ms a host may start late, or record less than the window, and still count as "
          "complete (0 = the default, 5; at most 60000; longer: this and 10% of the window); "
          "beyond it the host is saved but the session is partial"),
      Int("retries", &F::retries,
          "attempts per host after the first (0..20) for transport errors, unavailable or busy "
          "agents and damaged transfers, with capped exponential backoff and jitter; a trace "
          "the agent recorded is fetched again, not recorded again"),
      Int("deadline", &F::deadline_ms,
          "ms for the whole session: prepare, lead, window, transfers and retries; hosts not "
          "done by then fail and the rest is written (0 = the window's end + 60 s)"),
      Int("min-hosts", &F::min_hosts,
          "fail the session (exit 1) when fewer hosts than this are saved; known before the "
          "window, nothing is captured (0 = at least one)"),
      Bool("require-all", &F::require_all, "--min-hosts = every worker"),
      Int("host-tracer-level", &F::host_tracer_level,
          "framework profiler servers (grpc:// workers, agents' tsl collector): host tracer "
          "level, 0 off, 1 user annotations, 2 also framework ops, 3 verbose"),
      Int("device-tracer-level", &F::device_tracer_level,
          "framework profiler servers: device (GPU/TPU) tracer, 0 off or 1 on"),
      Int("python-tracer-level", &F::python_tracer_level,
          "framework profiler servers: Python function tracer, 0 off or 1 on"),
      Str("coordinator", &F::coordinator,
          "HOST:PORT of a coordinator daemon (profctl serve) to run the capture: it reaches "
          "the workers and keeps the session in its log dir (--logdir is then unused)"),
  };
  return *kFlags;
}

void AddCaptureFlags(FlagSet* fs, CaptureFlags* flags) {
  for (const CaptureFlag& f : CaptureFlagTable()) {
    if (f.string_field != nullptr) {
      fs->String(f.name, &(flags->*f.string_field), f.help);
    } else if (f.int_field != nullptr) {
      fs->Int64(f.name, &(flags->*f.int_field), f.help);
    } else {
      fs->Bool(f.name, &(flags->*f.bool_field), f.help);
    }
    if (f.non_empty) fs->RejectEmpty(f.name);
  }
  AddAgentCredentialFlags(fs, &flags->credentials);
  fs->Require("workers");
}

absl::StatusOr<int64_t> ParseWindowMs(absl::string_view text) {
  int64_t ms = 0;
  if (!text.empty() && std::all_of(text.begin(), text.end(), absl::ascii_isdigit)) {
    if (absl::SimpleAtoi(text, &ms)) return ms;
  } else {
    absl::Duration d;
    if (absl::ParseDuration(text, &d) && absl::Trunc(d, absl::Milliseconds(1)) == d &&
        d >= absl::ZeroDuration() && d <= absl::Hours(24 * 365)) {
      return absl::ToInt64Milliseconds(d);
    }
  }
  return absl::InvalidArgumentError(
      absl::StrCat("'", text,
                   "' is not a window: give whole milliseconds (2000) or a duration with a unit "
                   "(2s, 500ms, 1m30s)"));
}

absl::StatusOr<std::vector<WorkerAddress>> WorkersFromFlag(const std::string& value) {
  if (!absl::StartsWith(value, "@")) {
    absl::StatusOr<std::vector<WorkerAddress>> list = ParseWorkerList(value);
    // A file named without its '@' ("--workers=pod.txt") reads as a worker with no port.
    struct stat st {};
    if (!list.ok() && !absl::StrContains(value, ',') && stat(value.c_str(), &st) == 0 &&
        S_ISREG(st.st_mode)) {
      return absl::Status(list.status().code(),
                          absl::StrCat(list.status().message(),
                                       " (a file of workers? write --workers=@", value, ")"));
    }
    return list;
  }
  const std::string path = value.substr(1);
  if (path.empty()) {
    return absl::InvalidArgumentError("--workers=@ names no file: give --workers=@FILE");
  }
  absl::StatusOr<std::string> text = ReadFile(path, kMaxWorkerFileBytes, "a worker file may hold");
  if (!text.ok()) {
    return absl::Status(text.status().code(),
                        absl::StrCat("--workers=", value, ": ", text.status().message()));
  }
  return ParseWorkerFile(*text, path);
}

absl::StatusOr<CapturePlan> PlanFromCaptureFlags(const CaptureFlags& flags, const FlagSet& fs) {
  if (!fs.positional().empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("unexpected argument '", fs.positional().front(), "'"));
  }
  absl::StatusOr<std::vector<WorkerAddress>> workers = WorkersFromFlag(flags.workers);
  if (!workers.ok()) return workers.status();
  if (flags.require_all && flags.min_hosts != 0) {
    return absl::InvalidArgumentError("give --min-hosts or --require-all, not both");
  }
  if (flags.min_hosts < 0) {
    return absl::InvalidArgumentError(absl::StrCat("--min-hosts=", flags.min_hosts,
                                                   " is not in 0..", workers->size(),
                                                   " (the number of --workers)"));
  }
  absl::StatusOr<int64_t> duration_ms = ParseWindowMs(flags.duration);
  if (!duration_ms.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("--duration=", duration_ms.status().message()));
  }
  int64_t past_ms = 0;
  if (fs.WasSet("last")) {
    absl::StatusOr<int64_t> past = ParsePastMs(flags.last);
    if (!past.ok())
      return absl::InvalidArgumentError(absl::StrCat("--last=", past.status().message()));
    if (fs.WasSet("duration") && *duration_ms != *past) {
      return absl::InvalidArgumentError(absl::StrCat(
          "give --last or --duration, not both: a snapshot's window is its past (--last=",
          flags.last, " is ", *past, " ms, --duration=", flags.duration, ")"));
    }
    past_ms = *past;
    duration_ms = *past;
  }
  CapturePlan plan{*std::move(workers), *duration_ms, flags.session, flags.logdir,
                   flags.prepare_timeout_ms};
  plan.past_ms = past_ms;
  plan.tolerance_ms = flags.tolerance_ms;
  plan.retries = static_cast<int>(std::clamp<int64_t>(
      flags.retries, std::numeric_limits<int>::min(), std::numeric_limits<int>::max()));
  plan.deadline_ms = flags.deadline_ms;
  plan.min_hosts = flags.require_all ? plan.workers.size() : static_cast<size_t>(flags.min_hosts);
  plan.reader.step_pattern = flags.step_pattern;
  plan.host_tracer_level = flags.host_tracer_level;
  plan.device_tracer_level = flags.device_tracer_level;
  plan.python_tracer_level = flags.python_tracer_level;
  plan.pod_trace_json = flags.pod_trace_json;
  absl::StatusOr<profctl::v1::LatePolicy> late = ParseLatePolicy(flags.late);
  if (!late.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--late=", flags.late, " ", late.status().message()));
  }
  plan.late = *late;
  absl::StatusOr<profctl::v1::AlignMode> align = ParseAlignMode(flags.align);
  if (!align.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--align=", flags.align, " ", align.status().message()));
  }
  plan.align = *align;
  if (absl::Status s = ValidatePlan(plan, kFlagNames); !s.ok()) return s;
  return plan;
}

}  // namespace profctl::coordinator
