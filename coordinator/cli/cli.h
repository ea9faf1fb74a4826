// The profctl command line, as a function tests can call with fakes.
#ifndef PROFCTL_COORDINATOR_CLI_CLI_H_
#define PROFCTL_COORDINATOR_CLI_CLI_H_

#include <atomic>
#include <functional>
#include <ostream>
#include <string>
#include <vector>

#include "absl/synchronization/notification.h"
#include "common/clock.h"
#include "common/executor.h"
#include "coordinator/clients/agent_client.h"
#include "coordinator/clients/agent_credentials.h"
#include "coordinator/engine/capture_engine.h"
#include "profctl/v1/session.pb.h"

namespace profctl::coordinator {

// Exit codes.
inline constexpr int kExitOk = 0;
inline constexpr int kExitFailed = 1;   // every host failed, or an environment error
inline constexpr int kExitUsage = 2;    // bad flags or arguments; nothing was contacted
inline constexpr int kExitPartial = 3;  // some hosts failed; the others' traces are saved

struct CliEnv {
  std::ostream* out = nullptr;
  std::ostream* err = nullptr;
  const Clock* clock = nullptr;
  AgentClientFactory* clients = nullptr;
  // Runs the capture engine's tasks (its clock must be `clock`).
  Executor* executor = nullptr;
  // Path of the running profctl binary; `demo` looks for profctl-agent beside it.
  std::string self_path;
  // Stopped on SIGINT/SIGTERM; a capture in progress is then cancelled (CaptureEngine::Cancel)
  // and what the hosts recorded is saved. May be null.
  const StopSignal* interrupt = nullptr;
  // Blocks until `done` is notified. Null = wait on it (a real executor runs on its own
  // threads); tests pass one that runs their FakeExecutor until then.
  std::function<void(const absl::Notification& done)> await;
  // Where finished traces are validated and saved; null = on the executor.
  WorkPool* pool = nullptr;
  // Makes the clients capture and ping use instead of `clients` when they are given --tls-*
  // or --token-file (coordinator/clients/agent_credentials.h). Null: those flags are refused.
  std::function<std::unique_ptr<AgentClientFactory>(std::shared_ptr<const AgentCredentials>)>
      secure_clients = nullptr;
  // `profctl serve`: SIGHUP reloads the config. The daemon sets *hup_reloads (before that,
  // SIGHUP interrupts like SIGTERM); each SIGHUP then adds one to *reload_requests and pokes
  // `interrupt`. Null: no reloads by signal.
  std::atomic<bool>* hup_reloads = nullptr;
  const std::atomic<int>* reload_requests = nullptr;
};

// Creates the session folder, runs the capture, prints the summary (or the manifest with json),
// returns the exit code. `command` names the caller in errors. With `generated_session` (the
// name came from DefaultSessionName) a taken name gets a _2, _3, ... suffix instead of failing.
int RunCapture(const CapturePlan& plan, bool json, const CliEnv& env, const std::string& command,
               bool generated_session = false);

// The human summary of a finished session: one row per host, columns aligned.
std::string FormatSummary(const profctl::v1::SessionManifest& m);
// profctl ping's table: reachability, version, busy, clock offset +- uncertainty, RTT.
std::string FormatPing(const profctl::v1::SessionManifest& m);

// args: without the program name, e.g. {"capture", "--workers=h:1"}.
int RunCli(const std::vector<std::string>& args, const CliEnv& env);

}  // namespace profctl::coordinator

#endif  // PROFCTL_COORDINATOR_CLI_CLI_H_
