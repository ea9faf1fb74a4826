#include "coordinator/cli/demo.h"

#include <unistd.h>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "common/file_util.h"
#include "common/flags.h"
#include "coordinator/cli/capture_flags.h"
#include "coordinator/cli/cli.h"
#include "coordinator/cli/local_agents.h"
#include "coordinator/session/session_writer.h"

namespace profctl::coordinator {
namespace {
constexpr int64_t kDemoToleranceMs = 50;
}  // namespace
namespace {

std::string FindAgentBinary(const std::string& self_path) {
  const size_t slash = self_path.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : self_path.substr(0, slash);
  for (const std::string& candidate :
       {JoinPath(dir, "profctl-agent"), JoinPath(dir, "../agent/profctl-agent")}) {
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return "";
}

}  // namespace

std::string DemoSyntheticKnobs(const DemoJob& job, int64_t rank) {
  return absl::StrCat(
      "rank=", rank, ",world=", job.workers, ",seed=", job.seed, ",step_ms=", job.step_ms,
      ",gpus=", job.gpus, ",straggler_rank=", job.workers > 1 ? 1 : -1, ",straggler_factor=1.5",
      ",input_stall_rank=", job.workers > 2 ? 2 : -1, ",input_stall_ms=", job.step_ms * 2 / 10);
}

int64_t DemoClockSkewMs(int64_t rank) {
  // Rank 0 keeps the true clock; the others are off by -40..+40 ms, as unsynced hosts are.
  return rank == 0 ? 0 : (rank * 29) % 81 - 40;
}

int DemoCommand(const std::vector<std::string>& args, const CliEnv& env) {
  DemoJob job;
  std::string duration = "2000";
  std::string logdir = "profctl-logs";
  std::string session;
  std::string agent_binary;
  std::string work_dir;
  bool json = false;
  FlagSet fs("profctl demo", "[--workers=4] [--duration=2s] [--logdir=DIR]");
  fs.Int64("workers", &job.workers, "number of local agents (ranks of the synthetic job), 1..64");
  fs.String("duration", &duration,
            "capture window: milliseconds (2000) or a duration with a unit (2s, 500ms), "
            "1 ms..60 s");
  fs.Int64("step-ms", &job.step_ms, "nominal step time of the synthetic job (1..10000)");
  fs.String("logdir", &logdir, "output root; traces go to LOGDIR/plugins/profile/SESSION/");
  fs.String("session", &session, "session (run) name (default: demo_ + UTC time)");
  fs.String("agent-binary", &agent_binary, "profctl-agent to start (default: beside profctl)");
  fs.String("work-dir", &work_dir,
            "folder (made if missing, kept) for the agents' logs and port files (default: a new "
            "/tmp/profctl-demo-XXXXXX, removed when the demo succeeds)");
  for (const char* f : {"logdir", "session", "agent-binary", "work-dir"}) fs.RejectEmpty(f);
  fs.Bool("json", &json, "print the session manifest as JSON on stdout");
  auto usage = [&](absl::string_view msg) {
    *env.err << "profctl demo: " << msg << "\n";
    return kExitUsage;
  };
  if (absl::Status s = fs.Parse(args); !s.ok()) return usage(s.message());
  if (fs.help_requested()) {
    *env.out << fs.Help();
    return kExitOk;
  }
  if (!fs.positional().empty()) {
    return usage(absl::StrCat("unexpected argument '", fs.positional().front(), "'"));
  }
  if (job.workers < 1 || job.workers > 64) {
    return usage(absl::StrCat("--workers=", job.workers, " is not in 1..64"));
  }
  const absl::StatusOr<int64_t> duration_ms = ParseWindowMs(duration);
  if (!duration_ms.ok()) return usage(absl::StrCat("--duration=", duration_ms.status().message()));
  if (*duration_ms < 1 || *duration_ms > 60'000) {
    return usage(absl::StrCat("--duration=", *duration_ms, " is not in 1..60000 ms"));
  }
  if (job.step_ms < 1 || job.step_ms > 10'000) {
    return usage(absl::StrCat("--step-ms=", job.step_ms, " is not in 1..10000"));
  }
  if (logdir.empty()) return usage("--logdir must not be empty");
  if (agent_binary.empty()) agent_binary = FindAgentBinary(env.self_path);
  if (agent_binary.empty() || access(agent_binary.c_str(), X_OK) != 0) {
    return usage(absl::StrCat("cannot find an executable profctl-agent",
                              agent_binary.empty() ? " beside profctl" : " at " + agent_binary,
                              "; pass --agent-binary=PATH"));
  }
  const bool generated = session.empty();
  if (generated) session = DefaultSessionName(*env.clock, "demo_");

  const bool own_scratch = work_dir.empty();
  if (own_scratch) {
    char scratch_template[] = "/tmp/profctl-demo-XXXXXX";
    if (mkdtemp(scratch_template) == nullptr) {
      *env.err << "profctl demo: cannot create a scratch folder in /tmp\n";
      return kExitFailed;
    }
    work_dir = scratch_template;
  } else if (absl::Status s = MakeDirs(work_dir); !s.ok()) {
    *env.err << "profctl demo: --work-dir: " << s.message() << "\n";
    return kExitFailed;
  }
  const std::string scratch = work_dir;
  LocalAgents agents(scratch);
  std::vector<std::string> port_files;
  for (int64_t r = 0; r < job.workers; ++r) {
    port_files.push_back(JoinPath(scratch, absl::StrCat("agent-", r, ".port")));
    // A --work-dir may hold an earlier run's port files: never read one as this agent's.
    unlink(port_files[r].c_str());
    absl::Status s = agents.Spawn(
        agent_binary, {"--port=0", "--bind=127.0.0.1", absl::StrCat("--port-file=", port_files[r]),
                       absl::StrCat("--name=worker-", r), "--collectors=synthetic",
                       absl::StrCat("--synthetic=", DemoSyntheticKnobs(job, r)),
                       absl::StrCat("--clock-skew-ms=", DemoClockSkewMs(r)), "--log-level=warn"});
    if (!s.ok()) {
      *env.err << "profctl demo: " << s.message() << "\n";
      return kExitFailed;
    }
  }
  CapturePlan plan{{}, *duration_ms, session, logdir};
  // All the demo's agents share this machine's cores and start their sessions at one instant:
  // a few ms of lateness is the machine, not a problem to report.
  plan.tolerance_ms = kDemoToleranceMs;
  for (int64_t r = 0; r < job.workers; ++r) {
    absl::StatusOr<int> port =
        agents.WaitForPort(static_cast<size_t>(r), port_files[r], *env.clock, env.interrupt);
    if (!port.ok()) {
      *env.err << "profctl demo: " << port.status().message() << "\n";
      return kExitFailed;
    }
    plan.workers.push_back(*ParseWorker(absl::StrCat("127.0.0.1:", *port)));
  }
  if (!json) {
    *env.err << "profctl demo: " << job.workers
             << " local agents running a synthetic data-parallel job (" << job.gpus
             << " GPUs each, rank 1 straggles x1.5, rank 2 waits " << job.step_ms * 2 / 10
             << " ms for input every step, clocks skewed by";
    for (int64_t r = 0; r < job.workers; ++r) *env.err << " " << DemoClockSkewMs(r);
    *env.err << " ms); their logs: " << scratch << "/\n";
  }
  const int rc = RunCapture(plan, json, env, "demo", generated);
  agents.StopAll();
  if (rc == kExitOk) {
    for (const std::string& f : port_files) unlink(f.c_str());
    for (int64_t r = 0; r < job.workers; ++r) {
      unlink(JoinPath(scratch, absl::StrCat("agent-", r, ".log")).c_str());
    }
    if (own_scratch) rmdir(scratch.c_str());
  } else {
    *env.err << "profctl demo: agent logs kept in " << scratch << "\n";
  }
  return rc;
}

}  // namespace profctl::coordinator
