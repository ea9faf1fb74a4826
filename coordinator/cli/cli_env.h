// What every profctl command runs with (CliEnv: its streams, clock, clients, executor, interrupt)
// and the exit codes it returns. The command table is command.h's, the entry point cli.h's.
#ifndef PROFCTL_COORDINATOR_CLI_CLI_ENV_H_
#define PROFCTL_COORDINATOR_CLI_CLI_ENV_H_

#include <atomic>
#include <functional>
#include <memory>
#include <ostream>
#include <string>

#include "absl/synchronization/notification.h"
#include "common/clock.h"
#include "common/executor.h"
#include "coordinator/clients/agent_client.h"
#include "coordinator/clients/agent_credentials.h"

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
  // Set by RunCli before the command runs: true when it watches `interrupt` (capture, demo,
  // serve). While it is false the process quits at once on SIGINT/SIGTERM (exit 128 + signal).
  // Null: not told.
  std::atomic<bool>* interrupt_taken = nullptr;
};

}  // namespace profctl::coordinator

#endif  // PROFCTL_COORDINATOR_CLI_CLI_ENV_H_
