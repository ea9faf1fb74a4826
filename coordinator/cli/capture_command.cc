// `profctl capture`: a local capture through the engine, or one run by a coordinator daemon
// (--coordinator); the summary both print.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "common/file_util.h"
#include "common/flags.h"
#include "coordinator/cli/capture_flags.h"
#include "coordinator/cli/cli.h"
#include "coordinator/cli/command.h"
#include "coordinator/cli/interrupt_scope.h"
#include "coordinator/clients/worker.h"
#include "coordinator/engine/capture_engine.h"
#include "coordinator/plan/capture_plan.h"
#include "coordinator/session/session_writer.h"
#include "profctl/v1/coordinator.grpc.pb.h"
#include "report/breakdown_writers.h"
#include "report/html_report.h"

namespace profctl::coordinator {

namespace {
std::string HumanBytes(uint64_t b) {
  if (b >= (1u << 20)) return absl::StrFormat("%.1f MiB", static_cast<double>(b) / (1 << 20));
  if (b >= 1024) return absl::StrFormat("%.1f KiB", static_cast<double>(b) / 1024);
  return absl::StrCat(b, " B");
}

// "attempts: capture UNAVAILABLE (12 ms), fetch OK (40 ms)" for a host that needed more than one.
void AppendAttempts(const profctl::v1::HostResult& h, int width, std::string* out) {
  if (h.attempt_log_size() < 2) return;
  std::vector<std::string> parts;
  for (const profctl::v1::Attempt& a : h.attempt_log()) {
    parts.push_back(absl::StrFormat(
        "%s %s (%.0f ms)", a.kind(),
        a.code() == 0 ? "OK" : absl::StatusCodeToString(static_cast<absl::StatusCode>(a.code())),
        a.duration_ms()));
  }
  absl::StrAppendFormat(out, "  %-*s attempts: %s\n", width, "", absl::StrJoin(parts, ", "));
}

}  // namespace

std::string FormatSummary(const profctl::v1::SessionManifest& m) {
  size_t ok = 0;
  int width = 22;  // the HOST column grows to the longest name, so the columns stay aligned
  for (const auto& h : m.hosts()) {
    ok += h.status() == profctl::v1::HOST_STATUS_OK ||
          h.status() == profctl::v1::HOST_STATUS_INCOMPLETE;
    width = std::max(width, static_cast<int>(h.host().size()));
  }
  // An OK session with errors (outputs interrupted or not written) exits 3: the headline says
  // why, so the two agree.
  std::string out =
      absl::StrFormat("session %s: %s, %d/%d hosts captured%s\n", m.request().session(),
                      SessionStatusName(m.status()), ok, m.hosts_size(),
                      m.status() == profctl::v1::SESSION_STATUS_OK && !m.errors().empty()
                          ? absl::StrFormat("; %d error(s) below", m.errors_size())
                          : "");
  absl::StrAppendFormat(&out, "  %-*s %-7s %11s %9s %11s %-11s %8s %6s %8s %10s\n", width, "HOST",
                        "STATUS", "OFFSET(ms)", "+-(ms)", "START(ms)", "ALIGNED BY", "RTT(ms)",
                        "STEPS", "EVENTS", "SIZE");
  for (const auto& h : m.hosts()) {
    if (h.status() == profctl::v1::HOST_STATUS_OK ||
        h.status() == profctl::v1::HOST_STATUS_INCOMPLETE) {
      const bool complete = h.status() == profctl::v1::HOST_STATUS_OK;
      const auto& c = h.clock();
      const double unc = c.method() == "collectives"
                             ? static_cast<double>(c.residual_ns()) / kNanosPerMilli
                             : static_cast<double>(c.uncertainty_ns()) / kNanosPerMilli;
      absl::StrAppendFormat(&out, "  %-*s %-7s %+11.3f %9.3f %+11.3f %-11s %8.3f %6d %8d %10s%s\n",
                            width, h.host(), complete ? "ok" : "partial",
                            static_cast<double>(c.offset_ns()) / kNanosPerMilli, unc,
                            static_cast<double>(h.lateness_ns()) / kNanosPerMilli, c.method(),
                            static_cast<double>(c.rtt_ns()) / kNanosPerMilli, h.steps(), h.events(),
                            HumanBytes(h.bytes()), h.late() ? "  LATE" : "");
      if (!complete) absl::StrAppendFormat(&out, "  %-*s %s\n", width, "", h.recording_detail());
      if (!c.warning().empty()) absl::StrAppendFormat(&out, "  %-*s %s\n", width, "", c.warning());
      AppendAttempts(h, width, &out);
    } else {
      absl::StrAppendFormat(
          &out, "  %-*s %-7s %s: %s (%s)\n", width, h.host(), "failed",
          FailureStepName(h.error().step()),
          absl::StatusCodeToString(static_cast<absl::StatusCode>(h.error().code())),
          h.error().message());
      AppendAttempts(h, width, &out);
    }
  }
  if (m.request().past_ms() > 0 && m.start_at_ns() != 0) {
    absl::StrAppendFormat(
        &out,
        "  snapshot of the past: the %.3f s before the common instant %s, from "
        "every host's flight recorder\n",
        static_cast<double>(m.request().past_ms()) / 1000,
        absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ", absl::FromUnixNanos(m.start_at_ns()),
                         absl::UTCTimeZone()));
  }
  if (ok > 0 && m.start_at_ns() != 0) {
    absl::StrAppendFormat(&out,
                          "  realized start spread %.3f ms across %d hosts (START: realized start "
                          "minus the common start, aligned)\n",
                          static_cast<double>(m.start_spread_ns()) / kNanosPerMilli, ok);
  }
  for (const auto& e : m.errors()) absl::StrAppend(&out, "  error: ", e, "\n");
  absl::StrAppend(&out, "files: ", m.session_dir(), "/\n");
  if (!m.pod_trace_file().empty()) {
    absl::StrAppend(&out, "  TensorBoard/XProf: tensorboard --logdir ", m.request().logdir(),
                    "  (Profile tab)\n");
    absl::StrAppend(&out, "  Perfetto:          open ", m.session_dir(), "/", m.pod_trace_file(),
                    " in ui.perfetto.dev\n");
  }
  if (!m.pod_trace_json_file().empty()) {
    absl::StrAppend(&out, "  chrome://tracing:  load ", m.session_dir(), "/",
                    m.pod_trace_json_file(), "\n");
  }
  return out;
}

int RunCapture(const CapturePlan& requested, bool json, const CliEnv& env,
               const std::string& command, bool generated_session) {
  for (const std::string& line : CleanAbandonedSessions(requested.logdir)) {
    *env.err << "profctl " << command << ": " << line << "\n";
  }
  absl::StatusOr<std::unique_ptr<RunningSession>> running =
      RunningSession::Open(requested.logdir, requested.session, {.make_unique = generated_session});
  if (!running.ok()) {
    *env.err << "profctl " << command << ": " << running.status().message() << "\n";
    return running.status().code() == absl::StatusCode::kAlreadyExists ||
                   running.status().code() == absl::StatusCode::kInvalidArgument
               ? kExitUsage
               : kExitFailed;
  }
  CapturePlan plan = requested;
  plan.session = (*running)->session();
  const bool show_progress = plan.duration_ms > 1000;
  auto progress = [&](const std::string& line) {
    if (show_progress) *env.err << "profctl: " << line << std::endl;
  };
  // Turns an interrupt into CaptureEngine::Cancel while the capture runs; one that came before
  // (during validation) cancels it up front.
  auto announce = [&] {
    *env.err << "profctl: interrupted: cancelling the capture, saving what was recorded "
                "(interrupt again to quit at once)"
             << std::endl;
  };
  std::optional<InterruptScope> interrupt_scope;
  std::optional<analysis::PodBreakdown> breakdown;
  std::string written_json;  // session.json as written: what --json prints
  absl::StatusOr<profctl::v1::SessionManifest> manifest = RunEngine(
      plan, &(*running)->dir(), env, progress, &breakdown,
      [&](CaptureEngine& engine) {
        interrupt_scope.emplace(env.interrupt, [&] {
          announce();
          engine.Cancel();
        });
      },
      // Before the engine is destroyed: an interrupt must not Cancel it any more.
      [&] { interrupt_scope.reset(); }, &written_json);
  if (!written_json.empty()) (*running)->MarkFinal();
  if (!manifest.ok()) {
    *env.err << "profctl " << command << ": " << manifest.status().message() << "\n";
    return kExitFailed;
  }
  if (json) {
    // The text session.json got (printing 1,024 hosts' manifest again took 35 ms); printed
    // afresh only when that write failed, its error then being part of the manifest.
    *env.out << (written_json.empty() ? ManifestJson(*manifest) : written_json);
  } else {
    *env.out << FormatSummary(*manifest);
    if (breakdown.has_value()) {
      report::BreakdownContext context;
      context.session = plan.session;
      context.report_path = absl::StrCat(manifest->session_dir(), "/", report::kReportHtmlFile);
      *env.out << "\n" << report::FormatBreakdownTable(*breakdown, context);
    }
  }
  return ExitCodeFor(*manifest);
}

namespace {

// Follows `session` at the daemon by asking for it (GetSession) every 500 ms until it finished:
// for when its watch stream was refused or broke (RESOURCE_EXHAUSTED: the daemon's cap on watch
// streams, which anyone's idle streams can fill). Gives up after 5 failed calls in a row or once
// the session outlived its plan by a minute; nullopt then, or on Ctrl-C (`*why` says which).
std::optional<v1::SessionManifest> PollSession(v1::CoordinatorService::Stub& stub,
                                               const std::string& address,
                                               const std::string& session, const CapturePlan& plan,
                                               const CliEnv& env, std::string* why) {
  const int64_t plan_ms = plan.deadline_ms > 0 ? plan.deadline_ms : plan.duration_ms + 300'000;
  const int64_t give_up_ns = env.clock->MonoNs() + (plan_ms + 60'000) * kNanosPerMilli;
  int failures = 0;
  while (true) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    v1::GetSessionRequest request;
    request.set_session(session);
    v1::SessionInfo info;
    const grpc::Status s = stub.GetSession(&ctx, request, &info);
    if (s.ok()) {
      failures = 0;
      if (!info.running() && info.manifest().status() != v1::SESSION_STATUS_RUNNING) {
        return info.manifest();
      }
    } else if (++failures >= 5) {
      *why = RpcError(address, s);
      return std::nullopt;
    }
    if (env.clock->MonoNs() >= give_up_ns) {
      *why = absl::StrCat("still running ", plan_ms + 60'000, " ms after it started");
      return std::nullopt;
    }
    const StopSignal never;
    const StopSignal* interrupt = env.interrupt != nullptr ? env.interrupt : &never;
    if (interrupt->Wait(
            +[](const void*) { return false; }, nullptr, absl::Milliseconds(500))) {
      *why = "interrupted";
      return std::nullopt;
    }
  }
}

// profctl capture --coordinator: the daemon runs the capture; this follows its events and prints
// the same summary as a local capture.
int RemoteCapture(const CapturePlan& plan, const std::string& address,
                  const AgentCredentialFlags& flags, bool json, const CliEnv& env) {
  absl::StatusOr<std::unique_ptr<v1::CoordinatorService::Stub>> stub =
      CoordinatorStub(address, flags, env);
  if (!stub.ok()) return UsageError(env, "capture", stub.status().message());
  v1::StartCaptureResponse started;
  {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    const grpc::Status s = (*stub)->StartCapture(&ctx, RequestFromPlan(plan), &started);
    if (!s.ok()) {
      *env.err << "profctl capture: " << RpcError(address, s) << "\n";
      return s.error_code() == grpc::StatusCode::INVALID_ARGUMENT ||
                     s.error_code() == grpc::StatusCode::ALREADY_EXISTS
                 ? kExitUsage
                 : kExitFailed;
    }
  }
  *env.err << "profctl: session " << started.session() << " running on coordinator " << address
           << " (" << started.session_dir() << ")" << std::endl;
  grpc::ClientContext ctx;
  v1::WatchSessionsRequest watch;
  watch.set_session(started.session());
  std::unique_ptr<grpc::ClientReader<v1::SessionEvent>> reader =
      (*stub)->WatchSessions(&ctx, watch);
  std::optional<v1::SessionManifest> manifest;
  grpc::Status s;
  {
    // Ctrl-C stops following; the daemon's capture goes on.
    const InterruptScope interrupt_scope(env.interrupt, [&] { ctx.TryCancel(); });
    v1::SessionEvent event;
    while (reader->Read(&event)) {
      if (event.kind() == v1::SESSION_EVENT_KIND_PROGRESS && plan.duration_ms > 1000) {
        *env.err << "profctl: " << event.message() << std::endl;
      }
      if (event.kind() == v1::SESSION_EVENT_KIND_FINISHED) {
        manifest = event.manifest();
        break;
      }
    }
    if (manifest.has_value()) ctx.TryCancel();
    s = reader->Finish();
  }
  if (!manifest.has_value() && !(env.interrupt != nullptr && env.interrupt->stopped())) {
    // The watch was refused or broke; the session runs on at the daemon: ask for it instead.
    *env.err << "profctl: cannot watch session " << started.session() << " ("
             << RpcError(address, s) << "); following it by asking the coordinator" << std::endl;
    std::string why;
    manifest = PollSession(**stub, address, started.session(), plan, env, &why);
    if (!manifest.has_value() && why != "interrupted") {
      *env.err << "profctl capture: lost session " << started.session() << ": " << why << "\n";
      return kExitFailed;
    }
  }
  if (!manifest.has_value()) {
    if (env.interrupt != nullptr && env.interrupt->stopped()) {
      *env.err << "profctl capture: stopped following; session " << started.session()
               << " goes on at the coordinator (profctl sessions --coordinator=" << address
               << ")\n";
    } else {
      *env.err << "profctl capture: lost session " << started.session() << ": "
               << RpcError(address, s) << "\n";
    }
    return kExitFailed;
  }
  if (json) {
    *env.out << ManifestJson(*manifest);
  } else {
    *env.out << FormatSummary(*manifest);
  }
  return ExitCodeFor(*manifest);
}

}  // namespace

int CaptureCommand(const std::vector<std::string>& args, const CliEnv& env) {
  CaptureFlags flags;
  FlagSet fs("profctl capture",
             "--workers=HOST:PORT,...|@FILE [--duration=MS|2s | --last=DURATION] [flags]");
  AddCaptureFlags(&fs, &flags);
  if (absl::Status s = fs.Parse(args); !s.ok()) return UsageError(env, "capture", s.message());
  if (fs.help_requested()) {
    *env.out << fs.Help();
    return kExitOk;
  }
  absl::StatusOr<CapturePlan> plan = PlanFromCaptureFlags(flags, fs);
  if (!plan.ok()) return UsageError(env, "capture", plan.status().message());
  if (!flags.coordinator.empty()) {
    return RemoteCapture(*plan, flags.coordinator, flags.credentials, flags.json, env);
  }
  const bool generated = plan->session.empty();
  if (generated) plan->session = DefaultSessionName(*env.clock, "");
  CliEnv run_env = env;
  std::unique_ptr<AgentClientFactory> secured;
  if (absl::Status s =
          UseAgentCredentials(flags.credentials, env, &run_env, &secured, plan->workers);
      !s.ok()) {
    return UsageError(env, "capture", s.message());
  }
  return RunCapture(*plan, flags.json, run_env, "capture", generated);
}

}  // namespace profctl::coordinator
