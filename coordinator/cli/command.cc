// What the profctl commands share: usage errors, credentials, running one engine, the
// daemon's stub.
#include "coordinator/cli/command.h"

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "common/status_macros.h"
#include "coordinator/clients/worker.h"
#include "coordinator/engine/capture_engine.h"
#include "coordinator/plan/capture_plan.h"
#include "coordinator/session/session_writer.h"
#include "profctl/v1/coordinator.grpc.pb.h"

namespace profctl::coordinator {

int UsageError(const CliEnv& env, const std::string& command, absl::string_view message) {
  *env.err << "profctl " << command << ": " << message << "\n";
  return kExitUsage;
}

absl::Status UseAgentCredentials(const AgentCredentialFlags& flags, const CliEnv& env,
                                 CliEnv* run_env, std::unique_ptr<AgentClientFactory>* holder,
                                 const std::vector<WorkerAddress>& workers) {
  absl::StatusOr<std::shared_ptr<const AgentCredentials>> credentials = LoadAgentCredentials(flags);
  if (!credentials.ok()) return credentials.status();
  if (*credentials == nullptr) return absl::OkStatus();
  if (!env.secure_clients) {
    return absl::InvalidArgumentError("--tls-* and --token-file are not supported here");
  }
  std::vector<std::string> warnings = AgentCredentialWarnings(**credentials);
  PROFCTL_RETURN_IF_ERROR(CheckTokenDestinations(**credentials, workers, &warnings));
  for (const std::string& w : warnings) *env.err << "profctl: " << w << "\n";
  *holder = env.secure_clients(*credentials);
  run_env->clients = holder->get();
  return absl::OkStatus();
}

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
    std::string* manifest_json) {
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

}  // namespace profctl::coordinator
