// profctl-agent: serves AgentService and tensorflow.ProfilerService on one host (or, for tests and
// benchmarks, N endpoints in one process: --endpoints). Thin shell: parse flags, wire objects,
// serve until SIGINT/SIGTERM.
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "agent/agent_metrics.h"
#include "agent/agent_options.h"
#include "agent/auth.h"
#include "agent/collectors/cupti/inject_server.h"
#include "agent/service/agent_server.h"
#include "common/clock.h"
#include "common/executor.h"
#include "common/file_util.h"
#include "common/logging.h"
#include "common/net/metrics_http.h"
#include "common/process_setup.h"
#include "common/status_macros.h"
#include "common/version.h"
#include "spdlog/spdlog.h"

namespace {

std::string Hostname() {
  char buf[256] = {};
  if (gethostname(buf, sizeof(buf) - 1) != 0) return "unknown";
  return buf;
}

// Each endpoint holds a listening socket and usually one connection: raise the soft limit on
// open files to the hard one so a few hundred endpoints fit.
void RaiseOpenFileLimit(int64_t endpoints) {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0) return;
  if (limit.rlim_cur < limit.rlim_max) {
    limit.rlim_cur = limit.rlim_max;
    setrlimit(RLIMIT_NOFILE, &limit);
  }
  const auto needed = static_cast<rlim_t>(2 * endpoints + 64);
  if (limit.rlim_cur != RLIM_INFINITY && limit.rlim_cur < needed) {
    spdlog::warn("open-file limit {} is low for {} endpoints (want about {})", limit.rlim_cur,
                 endpoints, needed);
  }
}

using profctl::agent::AgentOptions;

// What is wrong with the settings beyond their syntax (logging, endpoints, credential files): a
// usage error like a bad flag. AgentServer::Start reads the credential files again.
absl::Status CheckUsage(const AgentOptions& opts) {
  using namespace profctl::agent;  // NOLINT(google-build-using-namespace)
  PROFCTL_RETURN_IF_ERROR(profctl::SetupLogging("agent", opts.log_level, opts.log_format));
  PROFCTL_RETURN_IF_ERROR(PlanEndpoints(opts).status());
  return LoadServerSecurity(opts).status();
}

// The socket CUDA processes running libprofctl_inject.so connect to, when the cupti collector
// runs (null otherwise). Logs why it could not start.
absl::StatusOr<std::unique_ptr<profctl::agent::cupti::InjectServer>> StartInjectServer(
    const AgentOptions& opts) {
  using namespace profctl::agent;  // NOLINT(google-build-using-namespace)
  if (!UsesCollector(opts, kCuptiCollector)) return nullptr;
  cupti::InjectServerOptions inject;
  inject.socket_path = opts.inject_socket;
  inject.socket_mode = *cupti::ParseSocketMode(opts.inject_socket_mode);  // validated
  // What a window may bring, so that collecting it stays under --max-held-mb.
  absl::StatusOr<std::unique_ptr<cupti::InjectServer>> started = cupti::InjectServer::Start(
      cupti::WithWindowCapsUnder(opts.max_held_mb << 20, std::move(inject)));
  if (!started.ok()) {
    spdlog::error("--inject-socket: {}", started.status().ToString());
    return started.status();
  }
  spdlog::info(
      "cupti: CUDA processes with CUDA_INJECTION64_PATH=libprofctl_inject.so and "
      "PROFCTL_AGENT_SOCKET={} report here",
      opts.inject_socket);
  return started;
}

// Prometheus /metrics and /healthz when --metrics-port asks for them (null otherwise). Logs why
// it could not start.
absl::StatusOr<std::unique_ptr<profctl::MetricsServer>> StartMetricsServer(
    const AgentOptions& opts, profctl::agent::AgentMetrics* metrics) {
  if (opts.metrics_port < 0) return nullptr;
  const std::string bind = opts.metrics_bind.empty() ? opts.bind : opts.metrics_bind;
  absl::StatusOr<std::unique_ptr<profctl::MetricsServer>> m = profctl::MetricsServer::Start(
      bind, static_cast<int>(opts.metrics_port), [metrics] { return metrics->Render(); });
  if (!m.ok()) {
    spdlog::error("--metrics-port: {}", m.status().ToString());
    return m.status();
  }
  spdlog::info("metrics on http://{}:{}/metrics", bind, (*m)->port());
  return m;
}

void LogListening(const AgentOptions& opts, const std::vector<int>& ports) {
  using namespace profctl::agent;  // NOLINT(google-build-using-namespace)
  spdlog::info(
      "profctl-agent {} listening on {}:{}{} (AgentService and tensorflow.ProfilerService; "
      "collectors: {}{}, clock skew {} ms{}; ProfilerService saves: {})",
      profctl::kVersion, opts.bind, ports.front(),
      ports.size() > 1 ? absl::StrCat(" and ", ports.size() - 1, " more endpoints") : "",
      absl::StrJoin(opts.collectors, ","),
      opts.collectors_given
          ? ""
          : (UsesCollector(opts, kCuptiCollector)
                 ? " (the default on a host with an NVIDIA driver)"
                 : " (the default without an NVIDIA driver: a simulated job; --collectors "
                   "names real ones)"),
      opts.clock_skew_ms,
      opts.endpoint_skew_spread_ms > 0
          ? absl::StrCat(" +- ", opts.endpoint_skew_spread_ms, " per endpoint")
          : "",
      opts.tsl_save_root.empty() ? std::string("never (traces go back in the response)")
                                 : absl::StrCat("inside ", opts.tsl_save_root));
}

int Run(int argc, char** argv) {
  using namespace profctl;         // NOLINT(google-build-using-namespace)
  using namespace profctl::agent;  // NOLINT(google-build-using-namespace)
  absl::StatusOr<AgentOptions> opts = ParseAgentOptions({argv + 1, argv + argc});
  if (!opts.ok()) {
    std::cerr << "profctl-agent: " << opts.status().message() << "\n";
    return 2;
  }
  if (opts->version) {
    std::cout << "profctl-agent " << VersionDescription() << "\n";
    return 0;
  }
  if (opts->help) {
    std::cout << opts->help_text;
    return 0;
  }
  if (absl::Status s = CheckUsage(*opts); !s.ok()) {
    std::cerr << "profctl-agent: " << s.message() << "\n";
    return 2;
  }
  spdlog::info("security: {}", SecuritySummary(*opts));
  for (const std::string& warning : SecurityWarnings(*opts)) spdlog::warn("{}", warning);
  if (opts->endpoints > 1) RaiseOpenFileLimit(opts->endpoints);

  // Signals are taken synchronously by sigwait below; block them before any thread starts.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  DisableMutexDeadlockDetection();
  // A big trace's buffers go back to the system when freed (and the agent malloc_trim()s after
  // freeing a big capture's XSpace): an idle agent must not keep a capture's peak.
  ReturnLargeBuffersToTheSystem();
  RealClock clock;
  // Every endpoint's session timeline (waits, start, stop: cheap tasks) on one thread; collecting
  // and serializing traces on another, so a slow collect never shifts another window.
  AsioExecutor timeline(&clock, /*threads=*/1);
  AsioExecutor collect(&clock, /*threads=*/1);
  absl::StatusOr<std::unique_ptr<cupti::InjectServer>> inject_server = StartInjectServer(*opts);
  if (!inject_server.ok()) return 1;
  AgentMetrics metrics;
  absl::StatusOr<std::unique_ptr<AgentServer>> server =
      AgentServer::Start(*opts, {.clock = &clock,
                                 .executor = &timeline,
                                 .collect_executor = &collect,
                                 .hostname = Hostname(),
                                 .inject_server = inject_server->get(),
                                 .metrics = &metrics});
  if (!server.ok()) {
    spdlog::error("{}", std::string(server.status().message()));
    return 1;
  }
  absl::StatusOr<std::unique_ptr<MetricsServer>> metrics_server =
      StartMetricsServer(*opts, &metrics);
  if (!metrics_server.ok()) return 1;
  if (!opts->port_file.empty()) {
    if (absl::Status s = WriteFileAtomically(
            opts->port_file,
            AgentPortFileText((*server)->ports(),
                              *metrics_server != nullptr ? (*metrics_server)->port() : -1));
        !s.ok()) {
      spdlog::error("--port-file: {}", s.ToString());
      return 1;
    }
  }
  LogListening(*opts, (*server)->ports());

  int sig = 0;
  sigwait(&signals, &sig);
  spdlog::info("signal {}: shutting down", sig);
  // A running capture stops now and streams back what it recorded; in-flight transfers get two
  // seconds before gRPC cancels them. The executors outlive the server (declared before it).
  (*server)->Shutdown(absl::Seconds(2));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return Run(argc, argv);
  } catch (const std::exception& e) {  // e.g. std::bad_alloc: report, never abort silently
    std::cerr << "profctl-agent: fatal: " << e.what() << "\n";
    return 1;
  }
}
