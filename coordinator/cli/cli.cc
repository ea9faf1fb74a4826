#include "coordinator/cli/cli.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <ctime>
#include <limits>
#include <optional>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/file_util.h"
#include "common/flags.h"
#include "common/logging.h"
#include "common/net/metrics_http.h"
#include "common/net/server_auth.h"
#include "common/version.h"
#include "coordinator/cli/demo.h"
#include "coordinator/clients/worker.h"
#include "coordinator/engine/analyze.h"
#include "coordinator/engine/capture_engine.h"
#include "coordinator/engine/capture_plan.h"
#include "coordinator/engine/session_writer.h"
#include "coordinator/service/coordinator_service.h"
#include "coordinator/service/daemon.h"
#include "coordinator/service/session_index.h"
#include "google/protobuf/util/json_util.h"
#include "report/breakdown_writers.h"
#include "report/html_report.h"
#include "report/tool_writers.h"
#include "spdlog/spdlog.h"

namespace profctl::coordinator {
namespace {

constexpr char kUsage[] = R"(profctl: capture performance profiles from many hosts at once.

usage: profctl <command> [flags]

Ctrl-C during a capture cancels it on every host and saves what was recorded (exit code 3).
Agents that require TLS or a token: --tls-ca, --tls-cert, --tls-key, --token-file (see
docs/security.md).

commands:
  capture   capture every --workers agent over one synchronized window
  ping      check every --workers agent: reachable, version, busy, clock offset and RTT
  analyze   the pod step breakdown of a saved session, XSpace files or PyTorch traces
  serve     run the coordinator daemon: scheduled captures and CoordinatorService
  sessions  list the sessions of a log dir, or of a coordinator daemon (--coordinator)
  schedules list a coordinator daemon's schedules: timing, next and last run, counters
  demo      start local agents running a synthetic 4-worker training job and capture them
  version   print the version

Run 'profctl <command> --help' for a command's flags.
)";

int UsageError(const CliEnv& env, const std::string& command, absl::string_view message) {
  *env.err << "profctl " << command << ": " << message << "\n";
  return kExitUsage;
}

// Loads --tls-* and --token-file and, when any was given, points `run_env` at clients that use
// them (owned by `*holder`); prints the credentials' warnings. INVALID_ARGUMENT for bad files.
absl::Status UseAgentCredentials(const AgentCredentialFlags& flags, const CliEnv& env,
                                 CliEnv* run_env, std::unique_ptr<AgentClientFactory>* holder) {
  absl::StatusOr<std::shared_ptr<const AgentCredentials>> credentials = LoadAgentCredentials(flags);
  if (!credentials.ok()) return credentials.status();
  if (*credentials == nullptr) return absl::OkStatus();
  if (!env.secure_clients) {
    return absl::InvalidArgumentError("--tls-* and --token-file are not supported here");
  }
  for (const std::string& w : AgentCredentialWarnings(**credentials)) {
    *env.err << "profctl: " << w << "\n";
  }
  *holder = env.secure_clients(*credentials);
  run_env->clients = holder->get();
  return absl::OkStatus();
}

}  // namespace

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
  std::string out = absl::StrFormat("session %s: %s, %d/%d hosts captured\n", m.request().session(),
                                    SessionStatusName(m.status()), ok, m.hosts_size());
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
    absl::StrAppend(&out, "  Perfetto/Chrome:   open ", m.session_dir(), "/", m.pod_trace_file(),
                    " in ui.perfetto.dev\n");
  }
  return out;
}

std::string FormatPing(const profctl::v1::SessionManifest& m) {
  int width = 22;
  for (const auto& h : m.hosts()) width = std::max(width, static_cast<int>(h.address().size()));
  std::string out;
  absl::StrAppendFormat(&out, "%-*s %-6s %-10s %-5s %12s %9s %8s %s\n", width, "WORKER", "STATUS",
                        "VERSION", "BUSY", "OFFSET(ms)", "+-(ms)", "RTT(ms)", "NAME");
  for (const auto& h : m.hosts()) {
    if (h.status() == profctl::v1::HOST_STATUS_OK && h.clock().method() == kClockMethodUnmeasured) {
      // A TSL profiler server (grpc://): reachable, but its clock cannot be asked.
      absl::StrAppendFormat(&out, "%-*s %-6s %-10s %-5s %12s %9s %8s %s\n", width, h.address(),
                            "ok", h.agent_version(), "?", "unmeasured", "-", "-", h.agent_name());
    } else if (h.status() == profctl::v1::HOST_STATUS_OK) {
      absl::StrAppendFormat(&out, "%-*s %-6s %-10s %-5s %+12.3f %9.3f %8.3f %s\n", width,
                            h.address(), "ok", h.agent_version(), h.agent_busy() ? "yes" : "no",
                            static_cast<double>(h.clock().offset_ns()) / kNanosPerMilli,
                            static_cast<double>(h.clock().uncertainty_ns()) / kNanosPerMilli,
                            static_cast<double>(h.clock().rtt_ns()) / kNanosPerMilli,
                            h.agent_name());
    } else {
      absl::StrAppendFormat(
          &out, "%-*s %-6s %s: %s (%s)\n", width, h.address(), "failed",
          FailureStepName(h.error().step()),
          absl::StatusCodeToString(static_cast<absl::StatusCode>(h.error().code())),
          h.error().message());
    }
  }
  return out;
}

namespace {

int ExitCodeFor(const profctl::v1::SessionManifest& m) {
  if (m.status() == profctl::v1::SESSION_STATUS_OK && m.errors().empty()) return kExitOk;
  if (m.status() == profctl::v1::SESSION_STATUS_FAILED) return kExitFailed;
  return kExitPartial;
}

// Runs one engine to completion on env's executor; the engine is destroyed before returning.
absl::StatusOr<profctl::v1::SessionManifest> RunEngine(
    const CapturePlan& plan, TraceSink* sink, const CliEnv& env,
    std::function<void(const std::string&)> progress,
    std::optional<analysis::PodBreakdown>* breakdown,
    const std::function<void(CaptureEngine&)>& started, const std::function<void()>& before_destroy,
    std::string* manifest_json = nullptr) {
  absl::StatusOr<profctl::v1::SessionManifest> result =
      absl::InternalError("capture did not finish");
  absl::Notification finished;
  {
    CaptureEngine engine({.executor = env.executor,
                          .pool = env.pool,
                          .clients = env.clients,
                          .sink = sink,
                          .progress = std::move(progress),
                          .breakdown =
                              [breakdown](const analysis::PodBreakdown& b) {
                                if (breakdown != nullptr) *breakdown = b;
                              },
                          .manifest_written =
                              [manifest_json](std::string json) {
                                if (manifest_json != nullptr) *manifest_json = std::move(json);
                              }},
                         {});
    engine.Start(plan, [&](absl::StatusOr<profctl::v1::SessionManifest> m) {
      result = std::move(m);
      finished.Notify();
    });
    if (started) started(engine);
    if (env.await) {
      env.await(finished);
    } else {
      finished.WaitForNotification();
    }
    if (before_destroy) before_destroy();
  }
  return result;
}

}  // namespace

int RunCapture(const CapturePlan& requested, bool json, const CliEnv& env,
               const std::string& command, bool generated_session) {
  for (const std::string& line : CleanAbandonedSessions(requested.logdir)) {
    *env.err << "profctl " << command << ": " << line << "\n";
  }
  absl::StatusOr<SessionDir> dir =
      SessionDir::Create(requested.logdir, requested.session, {.make_unique = generated_session});
  if (!dir.ok()) {
    *env.err << "profctl " << command << ": " << dir.status().message() << "\n";
    return dir.status().code() == absl::StatusCode::kAlreadyExists ||
                   dir.status().code() == absl::StatusCode::kInvalidArgument
               ? kExitUsage
               : kExitFailed;
  }
  CapturePlan plan = requested;
  plan.session = dir->session();
  // Until the session is over (CleanAbandonedSessions looks for it after a crash).
  const std::string marker = JoinPath(dir->location(), kRunningMarkerFileName);
  (void)WriteFileAtomically(marker, absl::StrCat(getpid(), "\n"));
  struct RemoveMarker {
    std::string path;
    ~RemoveMarker() { unlink(path.c_str()); }
  } remove_marker{marker};
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
  std::atomic<bool> finished{false};
  std::thread watcher;
  std::optional<analysis::PodBreakdown> breakdown;
  std::string written_json;  // session.json as written: what --json prints
  absl::StatusOr<profctl::v1::SessionManifest> manifest = RunEngine(
      plan, &*dir, env, progress, &breakdown,
      [&](CaptureEngine& engine) {
        if (env.interrupt == nullptr) return;
        if (env.interrupt->stopped()) {
          announce();
          engine.Cancel();
          return;
        }
        watcher = std::thread([&] {
          env.interrupt->Wait(
              +[](const void* f) { return static_cast<const std::atomic<bool>*>(f)->load(); },
              &finished, absl::InfiniteDuration());
          if (!finished.load()) {
            announce();
            engine.Cancel();
          }
        });
      },
      [&] {  // before the engine is destroyed: the watcher must not Cancel it any more
        finished = true;
        if (watcher.joinable()) {
          env.interrupt->Poke();
          watcher.join();
        }
      },
      &written_json);
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

// A channel to a coordinator daemon, with the same TLS/token flags as agents.
absl::StatusOr<std::unique_ptr<v1::CoordinatorService::Stub>> CoordinatorStub(
    const std::string& address, const AgentCredentialFlags& flags, const CliEnv& env) {
  absl::StatusOr<WorkerAddress> parsed = ParseWorker(address);
  if (!parsed.ok() || parsed->protocol != WorkerAddress::Protocol::kAgent) {
    return absl::InvalidArgumentError(
        absl::StrCat("--coordinator=", address, ": ",
                     parsed.ok() ? "give host:port" : parsed.status().message()));
  }
  absl::StatusOr<std::shared_ptr<const AgentCredentials>> credentials = LoadAgentCredentials(flags);
  if (!credentials.ok()) return credentials.status();
  if (*credentials != nullptr) {
    for (const std::string& w : AgentCredentialWarnings(**credentials)) {
      *env.err << "profctl: " << w << "\n";
    }
  }
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(256 << 20);
  return v1::CoordinatorService::NewStub(
      CreateAgentChannel(parsed->target(), credentials->get(), args));
}

std::string RpcError(const std::string& address, const grpc::Status& s) {
  return absl::StrCat("coordinator ", address, ": ",
                      absl::StatusCodeToString(static_cast<absl::StatusCode>(s.error_code())), ": ",
                      s.error_message());
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
  // Ctrl-C stops following; the daemon's capture goes on.
  std::atomic<bool> over{false};
  std::thread watcher;
  if (env.interrupt != nullptr) {
    watcher = std::thread([&] {
      env.interrupt->Wait(
          +[](const void* f) { return static_cast<const std::atomic<bool>*>(f)->load(); }, &over,
          absl::InfiniteDuration());
      if (!over.load()) ctx.TryCancel();
    });
  }
  std::optional<v1::SessionManifest> manifest;
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
  const grpc::Status s = reader->Finish();
  over = true;
  if (watcher.joinable()) {
    env.interrupt->Poke();
    watcher.join();
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

int CaptureCommand(const std::vector<std::string>& args, const CliEnv& env) {
  std::string workers;
  int64_t duration_ms = 2000;
  std::string logdir = "profctl-logs";
  std::string session;
  bool json = false;
  int64_t prepare_timeout_ms = 0;
  std::string step_pattern(analysis::kDefaultStepPattern);
  std::string late = "capture";
  std::string align = "collectives";
  int64_t tolerance_ms = 0;
  int64_t retries = CapturePlan{}.retries;
  int64_t deadline_ms = 0;
  int64_t min_hosts = 0;
  bool require_all = false;
  FlagSet fs("profctl capture", "--workers=HOST:PORT,... [--duration=MS] [flags]");
  fs.String("workers", &workers,
            "comma-separated profctl-agent addresses, host:port or [v6]:port; grpc://host:port "
            "for a TensorFlow/JAX profiler server");
  fs.Int64("duration", &duration_ms, "capture window in milliseconds (1..3600000)");
  fs.String("logdir", &logdir, "output root; traces go to LOGDIR/plugins/profile/SESSION/");
  fs.String("session", &session, "session (run) name (default: UTC time YYYY_MM_DD_HH_MM_SS)");
  fs.Bool("json", &json, "print the session manifest as JSON on stdout instead of a table");
  fs.Int64("prepare-timeout", &prepare_timeout_ms,
           "ms to get every host's identity and clock offset; 0 = derived from the measured "
           "round trips (4 x the median, then at most 2 x the 90th percentile; 250..10000 ms; "
           "with --late=capture, once 90% are ready, it ends when no host got ready for a "
           "quarter of the time the last one took, or 50 ms when every host left has answered "
           "nothing)");
  fs.String("late", &late,
            "a host that cannot start at the common instant: capture (flag it late) or fail");
  fs.String("step-pattern", &step_pattern,
            "RE2 pattern naming step markers (NVTX ranges, annotations); group 1 = step number");
  fs.String("align", &align,
            "collectives (refine clock offsets from collective ends in the traces) or ntp "
            "(clock sync only, +- RTT/2)");
  fs.Int64("tolerance", &tolerance_ms,
           "ms a host may start late, or record less than the window, and still count as "
           "complete (0 = the default, 5; at most 60000; longer: this and 10% of the window); "
           "beyond it the host is saved but the session is partial");
  fs.Int64("retries", &retries,
           "attempts per host after the first (0..20) for transport errors, unavailable or busy "
           "agents and damaged transfers, with capped exponential backoff and jitter; a trace "
           "the agent recorded is fetched again, not recorded again");
  fs.Int64("deadline", &deadline_ms,
           "ms for the whole session: prepare, lead, window, transfers and retries; hosts not "
           "done by then fail and the rest is written (0 = the window's end + 60 s)");
  fs.Int64("min-hosts", &min_hosts,
           "fail the session (exit 1) when fewer hosts than this are saved; known before the "
           "window, nothing is captured (0 = at least one)");
  fs.Bool("require-all", &require_all, "--min-hosts = every worker");
  std::string coordinator;
  fs.String("coordinator", &coordinator,
            "HOST:PORT of a coordinator daemon (profctl serve) to run the capture: it reaches "
            "the workers and keeps the session in its log dir (--logdir is then unused)");
  for (const char* f : {"workers", "logdir", "session", "late", "step-pattern", "align"}) {
    fs.RejectEmpty(f);
  }
  AgentCredentialFlags credentials;
  AddAgentCredentialFlags(&fs, &credentials);
  fs.Require("workers");
  if (absl::Status s = fs.Parse(args); !s.ok()) return UsageError(env, "capture", s.message());
  if (fs.help_requested()) {
    *env.out << fs.Help();
    return kExitOk;
  }
  if (!fs.positional().empty()) {
    return UsageError(env, "capture",
                      absl::StrCat("unexpected argument '", fs.positional().front(), "'"));
  }
  if (logdir.empty()) return UsageError(env, "capture", "--logdir must not be empty");
  absl::StatusOr<std::vector<WorkerAddress>> parsed = ParseWorkerList(workers);
  if (!parsed.ok()) return UsageError(env, "capture", parsed.status().message());
  if (require_all && min_hosts != 0) {
    return UsageError(env, "capture", "give --min-hosts or --require-all, not both");
  }
  if (min_hosts < 0) {
    return UsageError(env, "capture",
                      absl::StrCat("--min-hosts=", min_hosts, " is not in 0..", parsed->size(),
                                   " (the number of --workers)"));
  }
  CapturePlan plan{*std::move(parsed), duration_ms, session, logdir, prepare_timeout_ms};
  plan.tolerance_ms = tolerance_ms;
  plan.retries = static_cast<int>(std::clamp<int64_t>(retries, std::numeric_limits<int>::min(),
                                                      std::numeric_limits<int>::max()));
  plan.deadline_ms = deadline_ms;
  plan.min_hosts = require_all ? plan.workers.size() : static_cast<size_t>(min_hosts);
  plan.reader.step_pattern = step_pattern;
  absl::StatusOr<profctl::v1::LatePolicy> late_policy = ParseLatePolicy(late);
  if (!late_policy.ok()) {
    return UsageError(env, "capture",
                      absl::StrCat("--late=", late, " ", late_policy.status().message()));
  }
  plan.late = *late_policy;
  absl::StatusOr<profctl::v1::AlignMode> align_mode = ParseAlignMode(align);
  if (!align_mode.ok()) {
    return UsageError(env, "capture",
                      absl::StrCat("--align=", align, " ", align_mode.status().message()));
  }
  plan.align = *align_mode;
  if (absl::Status s = ValidatePlan(plan, kFlagNames); !s.ok()) {
    return UsageError(env, "capture", s.message());
  }
  if (!coordinator.empty()) {
    return RemoteCapture(plan, coordinator, credentials, json, env);
  }
  const bool generated = plan.session.empty();
  if (generated) plan.session = DefaultSessionName(*env.clock, "");
  CliEnv run_env = env;
  std::unique_ptr<AgentClientFactory> secured;
  if (absl::Status s = UseAgentCredentials(credentials, env, &run_env, &secured); !s.ok()) {
    return UsageError(env, "capture", s.message());
  }
  return RunCapture(plan, json, run_env, "capture", generated);
}

int PingCommand(const std::vector<std::string>& args, const CliEnv& env) {
  std::string workers;
  bool json = false;
  int64_t timeout_ms = 2000;
  FlagSet fs("profctl ping", "--workers=HOST:PORT,... [--json]");
  fs.String("workers", &workers,
            "comma-separated profctl-agent addresses, host:port or [v6]:port; grpc://host:port "
            "for a TensorFlow/JAX profiler server");
  fs.Int64("timeout", &timeout_ms, "ms to wait for every worker's answers (1..600000)");
  fs.Bool("json", &json, "print the per-worker results as JSON on stdout instead of a table");
  fs.RejectEmpty("workers");
  AgentCredentialFlags credentials;
  AddAgentCredentialFlags(&fs, &credentials);
  fs.Require("workers");
  if (absl::Status s = fs.Parse(args); !s.ok()) return UsageError(env, "ping", s.message());
  if (fs.help_requested()) {
    *env.out << fs.Help();
    return kExitOk;
  }
  if (!fs.positional().empty()) {
    return UsageError(env, "ping",
                      absl::StrCat("unexpected argument '", fs.positional().front(), "'"));
  }
  absl::StatusOr<std::vector<WorkerAddress>> parsed = ParseWorkerList(workers);
  if (!parsed.ok()) return UsageError(env, "ping", parsed.status().message());
  if (timeout_ms < 1 || timeout_ms > 600'000) {
    return UsageError(env, "ping",
                      absl::StrCat("--timeout=", timeout_ms, " is not in 1..600000 ms"));
  }
  CliEnv run_env = env;
  std::unique_ptr<AgentClientFactory> secured;
  if (absl::Status s = UseAgentCredentials(credentials, env, &run_env, &secured); !s.ok()) {
    return UsageError(env, "ping", s.message());
  }
  CapturePlan plan{*std::move(parsed), /*duration_ms=*/1, "ping", "", timeout_ms};
  plan.prepare_only = true;
  absl::StatusOr<profctl::v1::SessionManifest> m =
      RunEngine(plan, nullptr, run_env, nullptr, nullptr, {}, {});
  if (!m.ok()) {
    *env.err << "profctl ping: " << m.status().message() << "\n";
    return kExitFailed;
  }
  if (json) {
    *env.out << ManifestJson(*m);
  } else {
    *env.out << FormatPing(*m);
  }
  return ExitCodeFor(*m);
}

int AnalyzeCommand(const std::vector<std::string>& args, const CliEnv& env) {
  bool json = false;
  bool csv = false;
  std::string out_dir;
  std::string step_pattern(analysis::kDefaultStepPattern);
  int64_t jobs = 0;
  std::string tool_name;
  FlagSet fs("profctl analyze",
             "PATH... [--tool=NAME] [--json|--csv] [--step-pattern=RE] [--out=DIR] [--jobs=N]");
  fs.String("tool", &tool_name,
            absl::StrCat("run one of the profiler's tools instead of the step breakdown: ",
                         analysis::ToolNamesForHelp(), ", or all (docs/tools.md)"));
  fs.Bool("json", &json, "print pod_step_breakdown.json on stdout instead of the table");
  fs.Bool("csv", &csv, "print the breakdown as CSV (one row per step x host) on stdout");
  fs.String("out", &out_dir,
            "write pod_step_breakdown.json/.csv and report.html into DIR (default: the session "
            "folder when PATH is one; else none)");
  fs.String("step-pattern", &step_pattern,
            "RE2 pattern naming step markers (NVTX ranges, annotations); group 1 = step number");
  fs.Int64("jobs", &jobs,
           absl::StrCat("hosts read at once, one thread each (0: one per core, at most ",
                        kMaxAutoJobs, "); memory grows with it (about 24 bytes per event each)"));
  fs.RejectEmpty("out");
  fs.RejectEmpty("step-pattern");
  fs.RejectEmpty("tool");
  if (absl::Status s = fs.Parse(args); !s.ok()) return UsageError(env, "analyze", s.message());
  if (fs.help_requested()) {
    *env.out << fs.Help()
             << "\nPATH: a saved session folder (LOGDIR/plugins/profile/SESSION), a folder of "
                "*.xplane.pb files (TensorFlow, JAX, profctl) or of PyTorch profiler traces "
                "(*.pt.trace.json[.gz], one per rank), or such files.\n"
             << "--tool=NAME prints that tool (--json/--csv: its JSON/CSV) and, with --out or a "
                "session folder, writes tool_NAME.json/.csv there and report.html with its tab; "
                "--tool=all does every tool.\n";
    return kExitOk;
  }
  if (json && csv) return UsageError(env, "analyze", "--json and --csv exclude each other");
  if (jobs < 0 || jobs > 256) {
    return UsageError(env, "analyze", absl::StrCat("--jobs=", jobs, ": must be 0..256"));
  }
  analysis::ReaderOptions options;
  options.step_pattern = step_pattern;
  if (absl::Status s = analysis::ValidateReaderOptions(options); !s.ok()) {
    return UsageError(env, "analyze", absl::StrCat("--step-pattern: ", s.message()));
  }
  std::vector<analysis::Tool> tools;
  if (tool_name == "all") {
    for (const analysis::ToolInfo& t : analysis::AllTools()) tools.push_back(t.tool);
    if (json || csv) {
      return UsageError(env, "analyze",
                        "--tool=all prints tables; for --json/--csv pick one tool (--out writes "
                        "every tool's JSON and CSV)");
    }
  } else if (!tool_name.empty()) {
    const std::optional<analysis::Tool> tool = analysis::ToolByName(tool_name);
    if (!tool) {
      return UsageError(env, "analyze",
                        absl::StrCat("--tool=", tool_name, ": unknown tool '", tool_name,
                                     "'; the tools are ", analysis::ToolNamesForHelp(), " or all"));
    }
    tools.push_back(*tool);
  }
  absl::StatusOr<AnalyzeInputs> inputs = ExpandAnalyzeInputs(fs.positional());
  if (!inputs.ok()) return UsageError(env, "analyze", inputs.status().message());
  if (out_dir.empty()) out_dir = inputs->session_dir;
  if (!tools.empty()) {
    // Tools: their JSON/CSV/table instead of the breakdown's; with an output folder, each tool's
    // tool_<name>.json and .csv there, and report.html with a tab per tool (all atomically).
    const AnalyzeToolResult r = AnalyzeTools(*inputs, options, tools, static_cast<int>(jobs));
    for (const std::string& e : r.breakdown.errors) *env.err << "profctl analyze: " << e << "\n";
    if (r.breakdown.hosts.empty()) {
      *env.err << "profctl analyze: no trace could be analysed\n";
      return kExitFailed;
    }
    report::ToolContext tool_context;
    tool_context.session = inputs->session.empty() ? "analyze" : inputs->session;
    std::vector<std::string> tool_jsons;
    for (const analysis::PodTools& t : r.tools) {
      tool_jsons.push_back(report::ToolJson(t, tool_context));
    }
    int tool_rc = r.breakdown.errors.empty() ? kExitOk : kExitPartial;
    if (!out_dir.empty()) {
      absl::Status s = MakeDirs(out_dir);
      for (size_t t = 0; t < r.tools.size() && s.ok(); ++t) {
        s = WriteFileAtomically(JoinPath(out_dir, report::ToolFileName(r.tools[t].tool, "json")),
                                tool_jsons[t]);
        if (s.ok()) {
          s = WriteFileAtomically(JoinPath(out_dir, report::ToolFileName(r.tools[t].tool, "csv")),
                                  report::ToolCsv(r.tools[t]));
        }
      }
      if (s.ok()) {
        // report.html: the breakdown with a tab per tool.
        report::BreakdownContext page;
        page.session = tool_context.session;
        page.source = report::BreakdownSource::kAnalyze;
        for (const TraceInput& in : inputs->files) {
          std::string link = in.path;
          if (!inputs->session_dir.empty() && out_dir == inputs->session_dir &&
              absl::StartsWith(link, inputs->session_dir + "/")) {
            link = link.substr(inputs->session_dir.size() + 1);
          }
          page.host_files[in.host].push_back(link);
        }
        s = WriteFileAtomically(JoinPath(out_dir, report::kReportHtmlFile),
                                report::HtmlReport(r.breakdown.breakdown, page, tool_jsons));
      }
      if (!s.ok()) {
        *env.err << "profctl analyze: " << s.message() << "\n";
        tool_rc = kExitPartial;
      }
    }
    for (size_t t = 0; t < r.tools.size(); ++t) {
      if (json) {
        *env.out << tool_jsons[t];
      } else if (csv) {
        *env.out << report::ToolCsv(r.tools[t]);
      } else {
        *env.out << (t > 0 ? "\n" : "") << report::FormatToolTable(r.tools[t], tool_context);
      }
    }
    return tool_rc;
  }
  const AnalyzeResult result = AnalyzeTraces(*inputs, options, static_cast<int>(jobs));
  for (const std::string& e : result.errors) *env.err << "profctl analyze: " << e << "\n";
  if (result.hosts.empty()) {
    *env.err << "profctl analyze: no trace could be analysed\n";
    return kExitFailed;
  }
  report::BreakdownContext context;
  context.session = inputs->session.empty() ? "analyze" : inputs->session;
  context.source = report::BreakdownSource::kAnalyze;
  for (const TraceInput& in : inputs->files) {
    std::string link = in.path;
    if (!inputs->session_dir.empty() && out_dir == inputs->session_dir &&
        absl::StartsWith(link, inputs->session_dir + "/")) {
      link = link.substr(inputs->session_dir.size() + 1);  // relative: the report links it
    }
    context.host_files[in.host].push_back(link);
  }
  int rc = result.errors.empty() ? kExitOk : kExitPartial;
  if (!out_dir.empty()) {
    if (absl::Status s = MakeDirs(out_dir); !s.ok()) {
      *env.err << "profctl analyze: " << s.message() << "\n";
      return kExitFailed;
    }
    context.report_path = JoinPath(out_dir, report::kReportHtmlFile);
    for (const report::BreakdownOutput& out : report::BreakdownOutputs()) {
      if (absl::Status s = WriteFileAtomically(JoinPath(out_dir, out.file_name),
                                               out.render(result.breakdown, context));
          !s.ok()) {
        *env.err << "profctl analyze: " << s.message() << "\n";
        rc = kExitPartial;
      }
    }
  }
  if (json) {
    *env.out << report::BreakdownJson(result.breakdown, context);
  } else if (csv) {
    *env.out << report::BreakdownCsv(result.breakdown);
  } else {
    *env.out << report::FormatBreakdownTable(result.breakdown, context);
  }
  return rc;
}

int SessionsCommand(const std::vector<std::string>& args, const CliEnv& env) {
  std::string logdir = "profctl-logs";
  std::string coordinator;
  std::string schedule;
  int64_t limit = 50;
  bool json = false;
  FlagSet fs("profctl sessions", "[--logdir=DIR | --coordinator=HOST:PORT] [flags]");
  fs.String("logdir", &logdir, "the log dir whose sessions to list");
  fs.String("coordinator", &coordinator,
            "HOST:PORT of a coordinator daemon: list its sessions (and which are running)");
  fs.String("schedule", &schedule, "only this schedule's sessions");
  fs.Int64("limit", &limit, "at most this many, newest first (1..10000)");
  fs.Bool("json", &json, "print the sessions as JSON (ListSessionsResponse)");
  AgentCredentialFlags credentials;
  AddAgentCredentialFlags(&fs, &credentials);
  if (absl::Status s = fs.Parse(args); !s.ok()) return UsageError(env, "sessions", s.message());
  if (fs.help_requested()) {
    *env.out << fs.Help();
    return kExitOk;
  }
  if (!fs.positional().empty()) {
    return UsageError(env, "sessions",
                      absl::StrCat("unexpected argument '", fs.positional().front(), "'"));
  }
  if (limit < 1 || limit > 10'000) {
    return UsageError(env, "sessions", absl::StrCat("--limit=", limit, " is not in 1..10000"));
  }
  v1::ListSessionsResponse response;
  if (!coordinator.empty()) {
    absl::StatusOr<std::unique_ptr<v1::CoordinatorService::Stub>> stub =
        CoordinatorStub(coordinator, credentials, env);
    if (!stub.ok()) return UsageError(env, "sessions", stub.status().message());
    v1::ListSessionsRequest request;
    request.set_schedule(schedule);
    request.set_limit(static_cast<uint32_t>(limit));
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    if (const grpc::Status s = (*stub)->ListSessions(&ctx, request, &response); !s.ok()) {
      *env.err << "profctl sessions: " << RpcError(coordinator, s) << "\n";
      return kExitFailed;
    }
  } else {
    service::SessionListing listing =
        service::ListSessions(logdir, schedule, static_cast<size_t>(limit));
    for (const std::string& e : listing.errors) *env.err << "profctl sessions: " << e << "\n";
    for (v1::SessionInfo& info : listing.sessions) {
      // A RUNNING folder here is a capture in progress (or one that died; a capture or the
      // daemon marks those ABANDONED when it starts).
      info.set_running(info.manifest().status() == v1::SESSION_STATUS_RUNNING);
      *response.add_sessions() = std::move(info);
    }
  }
  if (json) {
    *env.out << ProtoJson(response);
  } else {
    *env.out << service::FormatSessionTable(
        {response.sessions().begin(), response.sessions().end()});
  }
  return kExitOk;
}

int SchedulesCommand(const std::vector<std::string>& args, const CliEnv& env) {
  std::string coordinator;
  bool json = false;
  FlagSet fs("profctl schedules", "--coordinator=HOST:PORT [--json]");
  fs.String("coordinator", &coordinator, "HOST:PORT of a coordinator daemon (profctl serve)");
  fs.Bool("json", &json, "print the schedules as JSON (ListSchedulesResponse)");
  AgentCredentialFlags credentials;
  AddAgentCredentialFlags(&fs, &credentials);
  fs.Require("coordinator");
  if (absl::Status s = fs.Parse(args); !s.ok()) return UsageError(env, "schedules", s.message());
  if (fs.help_requested()) {
    *env.out << fs.Help();
    return kExitOk;
  }
  if (!fs.positional().empty()) {
    return UsageError(env, "schedules",
                      absl::StrCat("unexpected argument '", fs.positional().front(), "'"));
  }
  absl::StatusOr<std::unique_ptr<v1::CoordinatorService::Stub>> stub =
      CoordinatorStub(coordinator, credentials, env);
  if (!stub.ok()) return UsageError(env, "schedules", stub.status().message());
  v1::ListSchedulesResponse response;
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  if (const grpc::Status s = (*stub)->ListSchedules(&ctx, {}, &response); !s.ok()) {
    *env.err << "profctl schedules: " << RpcError(coordinator, s) << "\n";
    return kExitFailed;
  }
  if (json) {
    *env.out << ProtoJson(response);
    return kExitOk;
  }
  int width = 12;
  for (const auto& sc : response.schedules()) {
    width = std::max(width, static_cast<int>(sc.name().size()));
  }
  *env.out << absl::StrFormat("%-*s %-22s %-20s %-20s %5s %5s %7s %s\n", width, "SCHEDULE",
                              "TIMING", "NEXT (UTC)", "LAST RUN (UTC)", "RUNS", "SKIP", "MISSED",
                              "LAST OUTCOME");
  for (const auto& sc : response.schedules()) {
    const bool trigger = sc.has_trigger();
    *env.out << absl::StrFormat(
        "%-*s %-22s %-20s %-20s %5d %5d %7d %s\n", width, sc.name(),
        trigger ? "trigger (see below)" : sc.timing(), service::FormatUtc(sc.next_fire_wall_ns()),
        service::FormatUtc(sc.last_run_wall_ns()), sc.runs_started(), sc.skipped_busy(),
        sc.missed_down() + sc.missed_late(),
        sc.running_session().empty() ? sc.last_outcome()
                                     : absl::StrCat("running: ", sc.running_session()));
    if (!trigger) continue;
    // The watch's state: what it sees now and why it fires (or cannot judge yet).
    const v1::TriggerInfo& t = sc.trigger();
    *env.out << "  " << sc.timing() << "\n";
    *env.out << absl::StrFormat(
        "  now: %s; polls %d, targets not answering %d, fired %d, held back by cooldown %d%s\n",
        t.waiting().empty() ? absl::StrFormat("step %.3f ms vs baseline %.3f ms (%.2fx)",
                                              t.observed() / 1e6, t.baseline() / 1e6,
                                              t.baseline() > 0 ? t.observed() / t.baseline() : 0.0)
                            : absl::StrCat("waiting: ", t.waiting()),
        t.polls(), t.poll_errors(), t.fired(), t.suppressed_cooldown(),
        t.cooldown_until_wall_ns() > 0
            ? absl::StrCat(", cooldown until ", service::FormatUtc(t.cooldown_until_wall_ns()))
            : "");
  }
  *env.out << "config: " << response.config() << " (loaded "
           << service::FormatUtc(response.loaded_wall_ns()) << ")\n";
  return kExitOk;
}

int ServeCommand(const std::vector<std::string>& args, const CliEnv& env) {
  std::string config;
  int64_t port = 7000;
  std::string bind = "127.0.0.1";
  std::string port_file;
  int64_t metrics_port = -1;
  std::string metrics_bind;
  std::string log_level = "info";
  std::string log_format = "text";
  bool insecure = false;
  ServerSecurityFiles serve_security;
  FlagSet fs("profctl serve", "--config=coordinator.yaml [--port=7000] [flags]");
  fs.String("config", &config, "the coordinator YAML: logdir and schedules (docs/schedules.md)");
  fs.Int64("port", &port, "CoordinatorService port (0: a free one, see --port-file)");
  fs.String("bind", &bind,
            "address to listen on; anything but loopback needs --serve-token-file or "
            "--serve-tls-ca (or --insecure)");
  fs.String("port-file", &port_file,
            "write the port (and the metrics port on a second line) here once listening");
  fs.Int64("metrics-port", &metrics_port,
           "serve Prometheus /metrics and /healthz over HTTP on this port (0: a free one; "
           "-1: off)");
  fs.String("metrics-bind", &metrics_bind, "address for /metrics (default: --bind)");
  fs.String("log-level", &log_level, "trace, debug, info, warn, error or off");
  fs.String("log-format", &log_format, "text, or json (one object per line)");
  fs.String("serve-tls-cert", &serve_security.tls_cert,
            "PEM certificate: the service speaks TLS only");
  fs.String("serve-tls-key", &serve_security.tls_key, "PEM private key of --serve-tls-cert");
  fs.String("serve-tls-ca", &serve_security.tls_ca,
            "PEM CA: callers must present client certificates it signed (mutual TLS)");
  fs.String("serve-token-file", &serve_security.token_file,
            "callers must send this bearer token (profctl --token-file)");
  fs.Bool("insecure", &insecure, "allow a non-loopback --bind with no client authentication");
  AgentCredentialFlags credentials;
  AddAgentCredentialFlags(&fs, &credentials);
  fs.Require("config");
  if (absl::Status s = fs.Parse(args); !s.ok()) return UsageError(env, "serve", s.message());
  if (fs.help_requested()) {
    *env.out << fs.Help();
    return kExitOk;
  }
  if (!fs.positional().empty()) {
    return UsageError(env, "serve",
                      absl::StrCat("unexpected argument '", fs.positional().front(), "'"));
  }
  if (port < 0 || port > 65535) {
    return UsageError(env, "serve", absl::StrCat("--port=", port, " is not in 0..65535"));
  }
  if (metrics_port < -1 || metrics_port > 65535) {
    return UsageError(env, "serve",
                      absl::StrCat("--metrics-port=", metrics_port, " is not in -1..65535"));
  }
  if (!IsLoopbackBind(bind) && serve_security.token_file.empty() && serve_security.tls_ca.empty() &&
      !insecure) {
    return UsageError(env, "serve",
                      absl::StrCat("--bind=", bind,
                                   " is not loopback: give --serve-token-file or "
                                   "--serve-tls-ca so only authorized callers start captures (or "
                                   "--insecure)"));
  }
  if (absl::Status s = SetupLogging("profctl-serve", log_level, log_format); !s.ok()) {
    return UsageError(env, "serve", s.message());
  }
  absl::StatusOr<ServerSecurity> security =
      LoadServerSecurityFiles(serve_security, "this coordinator");
  if (!security.ok()) return UsageError(env, "serve", security.status().message());
  CliEnv run_env = env;
  std::unique_ptr<AgentClientFactory> secured;
  if (absl::Status s = UseAgentCredentials(credentials, env, &run_env, &secured); !s.ok()) {
    return UsageError(env, "serve", s.message());
  }
  absl::StatusOr<std::unique_ptr<service::Daemon>> daemon =
      service::Daemon::Start({.executor = env.executor,
                              .pool = env.pool,
                              .clients = run_env.clients,
                              .engine_options = {},
                              .jitter_seed = 0,
                              .resolve = nullptr,
                              .log = [](const std::string& line) { spdlog::info("{}", line); }},
                             config);
  if (!daemon.ok()) {
    *env.err << "profctl serve: " << daemon.status().message() << "\n";
    return kExitUsage;
  }
  absl::StatusOr<std::unique_ptr<service::CoordinatorServer>> server =
      service::CoordinatorServer::Start(daemon->get(), bind, static_cast<int>(port), *security);
  if (!server.ok()) {
    *env.err << "profctl serve: " << server.status().message() << "\n";
    return kExitFailed;
  }
  std::unique_ptr<MetricsServer> metrics;
  if (metrics_port >= 0) {
    service::Daemon* d = daemon->get();
    absl::StatusOr<std::unique_ptr<MetricsServer>> m = MetricsServer::Start(
        metrics_bind.empty() ? bind : metrics_bind, static_cast<int>(metrics_port),
        [d] { return service::RenderMetrics(*d); });
    if (!m.ok()) {
      *env.err << "profctl serve: " << m.status().message() << "\n";
      return kExitFailed;
    }
    metrics = *std::move(m);
  }
  if (!port_file.empty()) {
    std::string text = absl::StrCat((*server)->port(), "\n");
    if (metrics != nullptr) absl::StrAppend(&text, metrics->port(), "\n");
    if (absl::Status s = WriteFileAtomically(port_file, text); !s.ok()) {
      *env.err << "profctl serve: --port-file: " << s.message() << "\n";
      return kExitFailed;
    }
  }
  spdlog::info("profctl {} serving CoordinatorService on {}:{} ({}{}), sessions in {}", kVersion,
               bind, (*server)->port(), serve_security.tls_cert.empty() ? "plaintext" : "TLS",
               serve_security.token_file.empty() ? "" : ", bearer token", (*daemon)->logdir());
  if (metrics != nullptr)
    spdlog::info("metrics on http://{}:{}/metrics", metrics_bind.empty() ? bind : metrics_bind,
                 metrics->port());
  if (env.hup_reloads != nullptr) env.hup_reloads->store(true);
  int reloads_seen = env.reload_requests != nullptr ? env.reload_requests->load() : 0;
  struct WaitState {
    const std::atomic<int>* requests;
    int seen;
  } wait{env.reload_requests, reloads_seen};
  while (env.interrupt != nullptr) {
    const bool stopped = env.interrupt->Wait(
        +[](const void* arg) {
          const auto* w = static_cast<const WaitState*>(arg);
          return w->requests != nullptr && w->requests->load() != w->seen;
        },
        &wait, absl::InfiniteDuration());
    if (stopped) break;
    wait.seen = wait.requests->load();
    if (absl::Status s = (*daemon)->Reload(); s.ok()) {
      spdlog::info("reloaded {}", config);
    } else {
      spdlog::error("reload refused, the running config stays: {}", std::string(s.message()));
    }
  }
  spdlog::info("shutting down: running captures are cancelled and save what was recorded");
  (*daemon)->Shutdown();
  (*daemon)->runner().WaitIdle(absl::Seconds(30));
  (*server)->Shutdown(absl::Seconds(2));
  metrics.reset();
  daemon->reset();
  spdlog::info("stopped");
  return kExitOk;
}

}  // namespace

int RunCli(const std::vector<std::string>& args, const CliEnv& env) {
  if (args.empty() || args[0] == "help" || args[0] == "--help" || args[0] == "-h") {
    (args.empty() ? *env.err : *env.out) << kUsage;
    return args.empty() ? kExitUsage : kExitOk;
  }
  const std::vector<std::string> rest(args.begin() + 1, args.end());
  if (args[0] == "capture") return CaptureCommand(rest, env);
  if (args[0] == "ping") return PingCommand(rest, env);
  if (args[0] == "analyze") return AnalyzeCommand(rest, env);
  if (args[0] == "demo") return DemoCommand(rest, env);
  if (args[0] == "serve") return ServeCommand(rest, env);
  if (args[0] == "sessions") return SessionsCommand(rest, env);
  if (args[0] == "schedules") return SchedulesCommand(rest, env);
  if (args[0] == "version" || args[0] == "--version") {
    *env.out << "profctl " << kVersion << "\n";
    return kExitOk;
  }
  *env.err << "profctl: unknown command '" << args[0] << "'\n\n" << kUsage;
  return kExitUsage;
}

}  // namespace profctl::coordinator
