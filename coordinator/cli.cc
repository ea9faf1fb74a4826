#include "coordinator/cli.h"

#include <algorithm>
#include <atomic>
#include <ctime>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/flags.h"
#include "common/version.h"
#include "coordinator/capture_engine.h"
#include "coordinator/demo.h"
#include "coordinator/session_writer.h"
#include "coordinator/worker.h"

namespace profctl::coordinator {
namespace {

constexpr char kUsage[] = R"(profctl: capture performance profiles from many hosts at once.

usage: profctl <command> [flags]

Ctrl-C during a capture cancels it on every host and saves what was recorded (exit code 3).

commands:
  capture   capture every --workers agent over one synchronized window
  demo      start local agents running a synthetic 4-worker training job and capture them
  version   print the version

Run 'profctl <command> --help' for a command's flags.
)";

int UsageError(const CliEnv& env, const std::string& command, absl::string_view message) {
  *env.err << "profctl " << command << ": " << message << "\n";
  return kExitUsage;
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

}  // namespace

std::string FormatSummary(const profctl::v1::SessionManifest& m) {
  size_t ok = 0;
  int width = 22;  // the HOST column grows to the longest name, so the columns stay aligned
  for (const auto& h : m.hosts()) {
    ok += h.status() == "ok";
    width = std::max(width, static_cast<int>(h.host().size()));
  }
  std::string out = absl::StrFormat("session %s: %s, %d/%d hosts captured\n", m.request().session(),
                                    m.status(), ok, m.hosts_size());
  absl::StrAppendFormat(&out, "  %-*s %-7s %11s %8s %6s %8s %10s\n", width, "HOST", "STATUS",
                        "OFFSET(ms)", "RTT(ms)", "STEPS", "EVENTS", "SIZE");
  for (const auto& h : m.hosts()) {
    if (h.status() == "ok") {
      absl::StrAppendFormat(&out, "  %-*s %-7s %+11.3f %8.3f %6d %8d %10s\n", width, h.host(),
                            h.status(), static_cast<double>(h.clock().offset_ns()) / kNanosPerMilli,
                            static_cast<double>(h.clock().rtt_ns()) / kNanosPerMilli, h.steps(),
                            h.events(), HumanBytes(h.bytes()));
    } else {
      absl::StrAppendFormat(&out, "  %-*s %-7s %s\n", width, h.host(), h.status(), h.error());
    }
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

namespace {

int ExitCodeFor(const profctl::v1::SessionManifest& m) {
  if (m.status() == "ok" && m.errors().empty()) return kExitOk;
  if (m.status() == "failed") return kExitFailed;
  return kExitPartial;
}

}  // namespace

int RunCapture(const CapturePlan& plan, bool json, const CliEnv& env, const std::string& command) {
  absl::StatusOr<SessionDir> dir = SessionDir::Create(plan.logdir, plan.session);
  if (!dir.ok()) {
    *env.err << "profctl " << command << ": " << dir.status().message() << "\n";
    return dir.status().code() == absl::StatusCode::kAlreadyExists ||
                   dir.status().code() == absl::StatusCode::kInvalidArgument
               ? kExitUsage
               : kExitFailed;
  }
  const bool show_progress = plan.duration_ms > 1000;
  CaptureEngine engine({.clock = env.clock,
                        .clients = env.clients,
                        .sink = &*dir,
                        .progress =
                            [&](const std::string& line) {
                              if (show_progress) *env.err << "profctl: " << line << std::endl;
                            }},
                       {});
  // Turns an interrupt into CaptureEngine::Cancel while the capture runs; one that came before
  // (during validation) cancels it up front.
  auto announce = [&] {
    *env.err << "profctl: interrupted: cancelling the capture, saving what was recorded "
                "(interrupt again to quit at once)"
             << std::endl;
  };
  const bool already_interrupted = env.interrupt != nullptr && env.interrupt->stopped();
  if (already_interrupted) {
    announce();
    engine.Cancel();
  }
  std::atomic<bool> finished{false};
  std::thread watcher;
  if (env.interrupt != nullptr) {
    watcher = std::thread([&] {
      env.interrupt->Wait(
          +[](const void* f) { return static_cast<const std::atomic<bool>*>(f)->load(); },
          &finished, absl::InfiniteDuration());
      if (!finished.load() && !already_interrupted) {
        announce();
        engine.Cancel();
      }
    });
  }
  absl::StatusOr<profctl::v1::SessionManifest> manifest = engine.Run(plan);
  finished = true;
  if (watcher.joinable()) {
    env.interrupt->Poke();
    watcher.join();
  }
  if (!manifest.ok()) {
    *env.err << "profctl " << command << ": " << manifest.status().message() << "\n";
    return kExitFailed;
  }
  if (json) {
    *env.out << ManifestJson(*manifest);
  } else {
    *env.out << FormatSummary(*manifest);
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
  FlagSet fs("profctl capture", "--workers=HOST:PORT,... [--duration=MS] [flags]");
  fs.String("workers", &workers, "comma-separated profctl-agent addresses, host:port or [v6]:port");
  fs.Int64("duration", &duration_ms, "capture window in milliseconds (1..3600000)");
  fs.String("logdir", &logdir, "output root; traces go to LOGDIR/plugins/profile/SESSION/");
  fs.String("session", &session, "session (run) name (default: UTC time YYYY_MM_DD_HH_MM_SS)");
  fs.Bool("json", &json, "print the session manifest as JSON on stdout instead of a table");
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
  if (session.empty()) session = DefaultSessionName(*env.clock, "");
  return RunCapture({*std::move(parsed), duration_ms, session, logdir}, json, env, "capture");
}

}  // namespace

int RunCli(const std::vector<std::string>& args, const CliEnv& env) {
  if (args.empty() || args[0] == "help" || args[0] == "--help" || args[0] == "-h") {
    (args.empty() ? *env.err : *env.out) << kUsage;
    return args.empty() ? kExitUsage : kExitOk;
  }
  const std::vector<std::string> rest(args.begin() + 1, args.end());
  if (args[0] == "capture") return CaptureCommand(rest, env);
  if (args[0] == "demo") return DemoCommand(rest, env);
  if (args[0] == "version" || args[0] == "--version") {
    *env.out << "profctl " << kVersion << "\n";
    return kExitOk;
  }
  *env.err << "profctl: unknown command '" << args[0] << "'\n\n" << kUsage;
  return kExitUsage;
}

}  // namespace profctl::coordinator
