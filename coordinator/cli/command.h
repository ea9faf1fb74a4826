// The profctl commands, one file each (capture_command.cc, ping_command.cc, ...), and what they
// share. cli.cc's command table (kCommands) is the one list of them: it drives dispatch and the
// usage text.
#ifndef PROFCTL_COORDINATOR_CLI_COMMAND_H_
#define PROFCTL_COORDINATOR_CLI_COMMAND_H_

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "analysis/breakdown.h"
#include "coordinator/cli/cli_env.h"
#include "coordinator/clients/agent_credentials.h"
#include "coordinator/clients/worker.h"
#include "coordinator/engine/capture_engine.h"
#include "coordinator/plan/capture_plan.h"
#include "profctl/v1/coordinator.grpc.pb.h"
#include "profctl/v1/session.pb.h"

namespace profctl::coordinator {

// One row of the command table. `run` gets the arguments after the command's name.
struct CliCommand {
  const char* name;
  const char* summary;  // one line, for `profctl --help`
  int (*run)(const std::vector<std::string>& args, const CliEnv& env);
  // The command watches env.interrupt (a capture saves what was recorded, serve stops its
  // schedules). Without it, SIGINT/SIGTERM end the process at once: there is nothing to save.
  bool takes_interrupt = false;
};

int CaptureCommand(const std::vector<std::string>& args, const CliEnv& env);
int PingCommand(const std::vector<std::string>& args, const CliEnv& env);
int AnalyzeCommand(const std::vector<std::string>& args, const CliEnv& env);
int DiffCommand(const std::vector<std::string>& args, const CliEnv& env);
int ServeCommand(const std::vector<std::string>& args, const CliEnv& env);
int SessionsCommand(const std::vector<std::string>& args, const CliEnv& env);
int SchedulesCommand(const std::vector<std::string>& args, const CliEnv& env);
// DemoCommand: demo.h.

// Prints "profctl COMMAND: MESSAGE" and returns kExitUsage.
int UsageError(const CliEnv& env, const std::string& command, absl::string_view message);

// Loads --tls-* and --token-file and, when any was given, points `run_env` at clients that use
// them (owned by `*holder`); prints the credentials' warnings. INVALID_ARGUMENT for bad files;
// FAILED_PRECONDITION when the token would reach one of `workers` beyond loopback in clear text
// without --insecure-token (CheckTokenDestinations).
absl::Status UseAgentCredentials(const AgentCredentialFlags& flags, const CliEnv& env,
                                 CliEnv* run_env, std::unique_ptr<AgentClientFactory>* holder,
                                 const std::vector<WorkerAddress>& workers = {});

// The exit code a finished session's manifest stands for (kExitOk, kExitPartial, kExitFailed).
int ExitCodeFor(const profctl::v1::SessionManifest& m);

// Runs one engine to completion on env's executor (see command.cc).
absl::StatusOr<profctl::v1::SessionManifest> RunEngine(
    const CapturePlan& plan, TraceSink* sink, const CliEnv& env,
    std::function<void(const std::string&)> progress,
    std::optional<analysis::PodBreakdown>* breakdown,
    const std::function<void(CaptureEngine&)>& started, const std::function<void()>& before_destroy,
    std::string* manifest_json = nullptr);

// A channel to a coordinator daemon (--coordinator), with the same TLS/token flags as agents.
absl::StatusOr<std::unique_ptr<v1::CoordinatorService::Stub>> CoordinatorStub(
    const std::string& address, const AgentCredentialFlags& flags, const CliEnv& env);

// "coordinator ADDRESS: CODE: message" for a failed call to the daemon.
std::string RpcError(const std::string& address, const grpc::Status& s);

}  // namespace profctl::coordinator

#endif  // PROFCTL_COORDINATOR_CLI_COMMAND_H_
