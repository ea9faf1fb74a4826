// `profctl sessions`: the sessions of a log dir, or of a coordinator daemon.
#include <chrono>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/flags.h"
#include "coordinator/cli/command.h"
#include "coordinator/service/coordinator_service.h"
#include "coordinator/service/session_index.h"
#include "profctl/v1/coordinator.grpc.pb.h"

namespace profctl::coordinator {

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
      // A RUNNING folder here is a capture in progress: one whose owner is gone reads as
      // ABANDONED (ListSessions; the next capture or daemon start rewrites it so).
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

}  // namespace profctl::coordinator
