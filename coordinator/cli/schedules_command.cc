// `profctl schedules`: a coordinator daemon's schedules.
#include <algorithm>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/flags.h"
#include "coordinator/cli/command.h"
#include "coordinator/service/coordinator_service.h"
#include "coordinator/service/session_index.h"
#include "profctl/v1/coordinator.grpc.pb.h"

namespace profctl::coordinator {

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
        service::FormatUtc(sc.last_run_wall_ns()), sc.runs_started(),
        sc.skipped_busy() + sc.skipped_hosts_busy(), sc.missed_down() + sc.missed_late(),
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

}  // namespace profctl::coordinator
