// `profctl serve`: the coordinator daemon (schedules, triggers, CoordinatorService, /metrics).
#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/file_util.h"
#include "common/flags.h"
#include "common/logging.h"
#include "common/net/metrics_http.h"
#include "common/port_file.h"
#include "common/version.h"
#include "coordinator/cli/command.h"
#include "coordinator/service/coordinator_service.h"
#include "coordinator/service/daemon.h"
#include "spdlog/spdlog.h"

namespace profctl::coordinator {

namespace {

struct ServeFlags {
  std::string config;
  int64_t port = 7000;
  std::string bind = "127.0.0.1";
  std::string port_file;
  int64_t metrics_port = -1;
  std::string metrics_bind;
  std::string log_level = "info";
  std::string log_format = "text";
  bool insecure = false;
  ServerSecurityFiles serve_security;
  AgentCredentialFlags credentials;

  const std::string& MetricsBind() const { return metrics_bind.empty() ? bind : metrics_bind; }
};

// Parses and checks the flags into *f. Returns the exit code when the command is done (--help,
// a usage error), nullopt when it should serve.
std::optional<int> ParseServeFlags(const std::vector<std::string>& args, const CliEnv& env,
                                   ServeFlags* f) {
  FlagSet fs("profctl serve", "--config=coordinator.yaml [--port=7000] [flags]");
  fs.String("config", &f->config, "the coordinator YAML: logdir and schedules (docs/schedules.md)");
  fs.Int64("port", &f->port, "CoordinatorService port (0: a free one, see --port-file)");
  fs.String("bind", &f->bind,
            "address to listen on; anything but loopback needs --serve-token-file or "
            "--serve-tls-ca (or --insecure)");
  fs.String("port-file", &f->port_file,
            "write the port here once listening, then metrics=PORT when --metrics-port is on "
            "(profctl-agent's --port-file format)");
  fs.Int64("metrics-port", &f->metrics_port,
           "serve Prometheus /metrics and /healthz over HTTP on this port (0: a free one; "
           "-1: off)");
  fs.String("metrics-bind", &f->metrics_bind, "address for /metrics (default: --bind)");
  fs.String("log-level", &f->log_level, "trace, debug, info, warn, error or off");
  fs.String("log-format", &f->log_format, "text, or json (one object per line)");
  fs.String("serve-tls-cert", &f->serve_security.tls_cert,
            "PEM certificate: the service speaks TLS only");
  fs.String("serve-tls-key", &f->serve_security.tls_key, "PEM private key of --serve-tls-cert");
  fs.String("serve-tls-ca", &f->serve_security.tls_ca,
            "PEM CA: callers must present client certificates it signed (mutual TLS)");
  fs.String("serve-token-file", &f->serve_security.token_file,
            "callers must send this bearer token (profctl --token-file)");
  fs.Bool("insecure", &f->insecure, "allow a non-loopback --bind with no client authentication");
  AddAgentCredentialFlags(&fs, &f->credentials);
  fs.Require("config");
  if (absl::Status s = fs.Parse(args); !s.ok()) return UsageError(env, "serve", s.message());
  if (fs.help_requested()) {
    *env.out << fs.Help();
    return kExitOk;
  }
  if (!fs.positional().empty()) {
    return UsageError(env, "serve",
                      absl::StrCat("unexpected argument '", fs.positional().front(), "'"));
  }
  if (f->port < 0 || f->port > 65535) {
    return UsageError(env, "serve", absl::StrCat("--port=", f->port, " is not in 0..65535"));
  }
  if (f->metrics_port < -1 || f->metrics_port > 65535) {
    return UsageError(env, "serve",
                      absl::StrCat("--metrics-port=", f->metrics_port, " is not in -1..65535"));
  }
  if (!IsLoopbackBind(f->bind) && f->serve_security.token_file.empty() &&
      f->serve_security.tls_ca.empty() && !f->insecure) {
    return UsageError(env, "serve",
                      absl::StrCat("--bind=", f->bind,
                                   " is not loopback: give --serve-token-file or "
                                   "--serve-tls-ca so only authorized callers start captures (or "
                                   "--insecure)"));
  }
  return std::nullopt;
}

// /metrics for `daemon` when --metrics-port asks for it (null otherwise).
absl::StatusOr<std::unique_ptr<MetricsServer>> StartMetrics(const ServeFlags& f,
                                                            service::Daemon* daemon) {
  if (f.metrics_port < 0) return nullptr;
  return MetricsServer::Start(f.MetricsBind(), static_cast<int>(f.metrics_port),
                              [daemon] { return service::RenderMetrics(*daemon); });
}

// The service's port, then "metrics=PORT" when /metrics is served: the agent's format
// (common/port_file.h).
absl::Status WritePortFile(const std::string& path, int port, const MetricsServer* metrics) {
  return WriteFileAtomically(
      path,
      PortFileText({.ports = {port}, .metrics_port = metrics != nullptr ? metrics->port() : -1}));
}

// Serves until env.interrupt fires (at once without one), reloading the config on each reload
// request (SIGHUP).
void ServeUntilInterrupted(const CliEnv& env, const std::string& config, service::Daemon* daemon) {
  if (env.hup_reloads != nullptr) env.hup_reloads->store(true);
  int reloads_seen = env.reload_requests != nullptr ? env.reload_requests->load() : 0;
  struct WaitState {
    const std::atomic<int>* requests;
    int seen;
  } wait{env.reload_requests, reloads_seen};
  while (env.interrupt != nullptr) {
    const bool stopped = env.interrupt->Wait(
        +[](const void* arg) {
          const auto* w = static_cast<const WaitState*>(arg);
          return w->requests != nullptr && w->requests->load() != w->seen;
        },
        &wait, absl::InfiniteDuration());
    if (stopped) break;
    wait.seen = wait.requests->load();
    if (absl::Status s = daemon->Reload(); s.ok()) {
      spdlog::info("reloaded {}", config);
    } else {
      spdlog::error("reload refused, the running config stays: {}", std::string(s.message()));
    }
  }
}

}  // namespace

int ServeCommand(const std::vector<std::string>& args, const CliEnv& env) {
  ServeFlags f;
  if (std::optional<int> rc = ParseServeFlags(args, env, &f)) return *rc;
  if (absl::Status s = SetupLogging("profctl-serve", f.log_level, f.log_format); !s.ok()) {
    return UsageError(env, "serve", s.message());
  }
  absl::StatusOr<ServerSecurity> security =
      LoadServerSecurityFiles(f.serve_security, "this coordinator");
  if (!security.ok()) return UsageError(env, "serve", security.status().message());
  CliEnv run_env = env;
  std::unique_ptr<AgentClientFactory> secured;
  if (absl::Status s = UseAgentCredentials(f.credentials, env, &run_env, &secured); !s.ok()) {
    return UsageError(env, "serve", s.message());
  }
  absl::StatusOr<std::unique_ptr<service::Daemon>> daemon =
      service::Daemon::Start({.executor = env.executor,
                              .pool = env.pool,
                              .clients = run_env.clients,
                              .engine_options = {},
                              .jitter_seed = 0,
                              .resolve = nullptr,
                              .log = [](const std::string& line) { spdlog::info("{}", line); }},
                             f.config);
  if (!daemon.ok()) {
    *env.err << "profctl serve: " << daemon.status().message() << "\n";
    return kExitUsage;
  }
  absl::StatusOr<std::unique_ptr<service::CoordinatorServer>> server =
      service::CoordinatorServer::Start(daemon->get(), f.bind, static_cast<int>(f.port), *security);
  if (!server.ok()) {
    *env.err << "profctl serve: " << server.status().message() << "\n";
    return kExitFailed;
  }
  absl::StatusOr<std::unique_ptr<MetricsServer>> started = StartMetrics(f, daemon->get());
  if (!started.ok()) {
    *env.err << "profctl serve: " << started.status().message() << "\n";
    return kExitFailed;
  }
  std::unique_ptr<MetricsServer> metrics = *std::move(started);
  if (!f.port_file.empty()) {
    if (absl::Status s = WritePortFile(f.port_file, (*server)->port(), metrics.get()); !s.ok()) {
      *env.err << "profctl serve: --port-file: " << s.message() << "\n";
      return kExitFailed;
    }
  }
  spdlog::info("profctl {} serving CoordinatorService on {}:{} ({}{}), sessions in {}", kVersion,
               f.bind, (*server)->port(), f.serve_security.tls_cert.empty() ? "plaintext" : "TLS",
               f.serve_security.token_file.empty() ? "" : ", bearer token", (*daemon)->logdir());
  if (metrics != nullptr)
    spdlog::info("metrics on http://{}:{}/metrics", f.MetricsBind(), metrics->port());
  ServeUntilInterrupted(env, f.config, daemon->get());
  spdlog::info("shutting down: running captures are cancelled and save what was recorded");
  (*daemon)->Shutdown();
  (*daemon)->runner().WaitIdle(absl::Seconds(30));
  (*server)->Shutdown(absl::Seconds(2));
  metrics.reset();
  daemon->reset();
  spdlog::info("stopped");
  return kExitOk;
}

}  // namespace profctl::coordinator
