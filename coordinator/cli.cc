#include "coordinator/cli.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <ctime>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/file_util.h"
#include "common/flags.h"
#include "common/version.h"
#include "coordinator/analyze.h"
#include "coordinator/capture_engine.h"
#include "coordinator/demo.h"
#include "coordinator/report/breakdown_writers.h"
#include "coordinator/session_writer.h"
#include "coordinator/worker.h"

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

std::string DefaultSessionName(const Clock& clock, absl::string_view prefix) {
  const time_t secs = static_cast<time_t>(clock.WallNs() / kNanosPerSecond);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  return absl::StrFormat("%s%04d_%02d_%02d_%02d_%02d_%02d", prefix, tm.tm_year + 1900,
                         tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec);
}

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
    const std::function<void(CaptureEngine&)>& started,
    const std::function<void()>& before_destroy) {
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
      });
  if (!manifest.ok()) {
    *env.err << "profctl " << command << ": " << manifest.status().message() << "\n";
    return kExitFailed;
  }
  if (json) {
    *env.out << ManifestJson(*manifest);
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
  int64_t tolerance_ms = CaptureEngineOptions{}.late_tolerance_ms;
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
           "round trips (4 x the median, 250..10000 ms)");
  fs.String("late", &late,
            "a host that cannot start at the common instant: capture (flag it late) or fail");
  fs.String("step-pattern", &step_pattern,
            "RE2 pattern naming step markers (NVTX ranges, annotations); group 1 = step number");
  fs.String("align", &align,
            "collectives (refine clock offsets from collective ends in the traces) or ntp "
            "(clock sync only, +- RTT/2)");
  fs.Int64("tolerance", &tolerance_ms,
           "ms a host may start late, or record less or more than the window, and still count "
           "as complete (1..60000); beyond it the host is saved but the session is partial");
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
  absl::StatusOr<std::vector<WorkerAddress>> parsed = ParseWorkerList(workers);
  if (!parsed.ok()) return UsageError(env, "capture", parsed.status().message());
  if (duration_ms < 1 || duration_ms > 3'600'000) {
    return UsageError(env, "capture",
                      absl::StrCat("--duration=", duration_ms, " is not in 1..3600000 ms"));
  }
  if (logdir.empty()) return UsageError(env, "capture", "--logdir must not be empty");
  if (prepare_timeout_ms < 0 || prepare_timeout_ms > 600'000) {
    return UsageError(
        env, "capture",
        absl::StrCat("--prepare-timeout=", prepare_timeout_ms, " is not in 0..600000 ms"));
  }
  if (tolerance_ms < 1 || tolerance_ms > 60'000) {
    return UsageError(env, "capture",
                      absl::StrCat("--tolerance=", tolerance_ms, " is not in 1..60000 ms"));
  }
  if (retries < 0 || retries > 20) {
    return UsageError(env, "capture", absl::StrCat("--retries=", retries, " is not in 0..20"));
  }
  if (deadline_ms != 0 && (deadline_ms <= duration_ms || deadline_ms > 86'400'000)) {
    return UsageError(env, "capture",
                      absl::StrCat("--deadline=", deadline_ms, " ms cannot hold the ", duration_ms,
                                   " ms window: give more than --duration (at most 86400000), "
                                   "or 0 for the default"));
  }
  if (min_hosts < 0 || static_cast<size_t>(min_hosts) > parsed->size()) {
    return UsageError(env, "capture",
                      absl::StrCat("--min-hosts=", min_hosts, " is not in 0..", parsed->size(),
                                   " (the number of --workers)"));
  }
  if (require_all && min_hosts != 0) {
    return UsageError(env, "capture", "give --min-hosts or --require-all, not both");
  }
  CapturePlan plan{*std::move(parsed), duration_ms, session, logdir, prepare_timeout_ms};
  plan.tolerance_ms = tolerance_ms;
  plan.retries = static_cast<int>(retries);
  plan.deadline_ms = deadline_ms;
  plan.min_hosts = require_all ? plan.workers.size() : static_cast<size_t>(min_hosts);
  plan.reader.step_pattern = step_pattern;
  if (absl::Status s = analysis::ValidateReaderOptions(plan.reader); !s.ok()) {
    return UsageError(env, "capture", absl::StrCat("--step-pattern: ", s.message()));
  }
  if (late == "capture") {
    plan.late = profctl::v1::LATE_POLICY_CAPTURE;
  } else if (late == "fail") {
    plan.late = profctl::v1::LATE_POLICY_FAIL;
  } else {
    return UsageError(env, "capture",
                      absl::StrCat("--late=", late, " is not one of: capture, fail"));
  }
  if (align == "collectives") {
    plan.align = profctl::v1::ALIGN_MODE_COLLECTIVES;
  } else if (align == "ntp") {
    plan.align = profctl::v1::ALIGN_MODE_NTP;
  } else {
    return UsageError(env, "capture",
                      absl::StrCat("--align=", align, " is not one of: collectives, ntp"));
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
  FlagSet fs("profctl analyze",
             "PATH... [--json|--csv] [--step-pattern=RE] [--out=DIR] [--jobs=N]");
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
  if (absl::Status s = fs.Parse(args); !s.ok()) return UsageError(env, "analyze", s.message());
  if (fs.help_requested()) {
    *env.out << fs.Help()
             << "\nPATH: a saved session folder (LOGDIR/plugins/profile/SESSION), a folder of "
                "*.xplane.pb files (TensorFlow, JAX, profctl) or of PyTorch profiler traces "
                "(*.pt.trace.json[.gz], one per rank), or such files.\n";
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
  absl::StatusOr<AnalyzeInputs> inputs = ExpandAnalyzeInputs(fs.positional());
  if (!inputs.ok()) return UsageError(env, "analyze", inputs.status().message());
  if (out_dir.empty()) out_dir = inputs->session_dir;
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
  if (args[0] == "version" || args[0] == "--version") {
    *env.out << "profctl " << kVersion << "\n";
    return kExitOk;
  }
  *env.err << "profctl: unknown command '" << args[0] << "'\n\n" << kUsage;
  return kExitUsage;
}

}  // namespace profctl::coordinator
