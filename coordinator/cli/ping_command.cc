// `profctl ping`: every worker prepared (identity, clock offset, RTT), nothing captured.
#include <algorithm>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/flags.h"
#include "coordinator/cli/capture_flags.h"
#include "coordinator/cli/cli.h"
#include "coordinator/cli/command.h"
#include "coordinator/clients/worker.h"
#include "coordinator/plan/capture_plan.h"
#include "coordinator/session/session_writer.h"

namespace profctl::coordinator {

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

int PingCommand(const std::vector<std::string>& args, const CliEnv& env) {
  std::string workers;
  bool json = false;
  int64_t timeout_ms = 2000;
  FlagSet fs("profctl ping", "--workers=HOST:PORT,...|@FILE [--json]");
  fs.String("workers", &workers, std::string(kWorkersFlagHelp));
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
  absl::StatusOr<std::vector<WorkerAddress>> parsed = WorkersFromFlag(workers);
  if (!parsed.ok()) return UsageError(env, "ping", parsed.status().message());
  if (timeout_ms < 1 || timeout_ms > 600'000) {
    return UsageError(env, "ping",
                      absl::StrCat("--timeout=", timeout_ms, " is not in 1..600000 ms"));
  }
  CliEnv run_env = env;
  std::unique_ptr<AgentClientFactory> secured;
  if (absl::Status s = UseAgentCredentials(credentials, env, &run_env, &secured, *parsed);
      !s.ok()) {
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

}  // namespace profctl::coordinator
