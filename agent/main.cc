// profctl-agent: serves AgentService on one host. Thin shell: parse flags, wire objects, serve
// until SIGINT/SIGTERM.
#include <grpcpp/grpcpp.h>
#include <unistd.h>

#include <csignal>
#include <iostream>
#include <memory>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "agent/agent_options.h"
#include "agent/agent_service.h"
#include "agent/capture_manager.h"
#include "agent/collectors/synthetic_collector.h"
#include "boost/asio/thread_pool.hpp"
#include "common/clock.h"
#include "common/file_util.h"
#include "common/logging.h"
#include "common/version.h"
#include "spdlog/spdlog.h"

namespace {

std::string Hostname() {
  char buf[256] = {};
  if (gethostname(buf, sizeof(buf) - 1) != 0) return "unknown";
  return buf;
}

int Run(int argc, char** argv) {
  using namespace profctl;         // NOLINT(google-build-using-namespace)
  using namespace profctl::agent;  // NOLINT(google-build-using-namespace)
  absl::StatusOr<AgentOptions> opts = ParseAgentOptions({argv + 1, argv + argc});
  if (!opts.ok()) {
    std::cerr << "profctl-agent: " << opts.status().message() << "\n";
    return 2;
  }
  if (opts->help) {
    std::cout << opts->help_text;
    return 0;
  }
  if (absl::Status s = SetupLogging("agent", opts->log_level); !s.ok()) {
    std::cerr << "profctl-agent: " << s.message() << "\n";
    return 2;
  }

  // Signals are taken synchronously by sigwait below; block them before any thread starts.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  RealClock real_clock;
  SkewedClock clock(&real_clock, opts->clock_skew_ms * kNanosPerMilli);

  std::vector<std::unique_ptr<Collector>> collectors;
  for (const std::string& name : opts->collectors) {
    if (name == "synthetic") {
      SyntheticJobConfig base;
      base.clock_skew_ns = clock.skew_ns();
      absl::StatusOr<SyntheticJobConfig> job = ParseSyntheticJobConfig(opts->synthetic, base);
      if (!job.ok()) {
        std::cerr << "profctl-agent: --synthetic: " << job.status().message() << "\n";
        return 2;
      }
      collectors.push_back(std::make_unique<SyntheticCollector>(*job));
    }
  }
  std::vector<Collector*> collector_ptrs;
  collector_ptrs.reserve(collectors.size());
  for (auto& c : collectors) collector_ptrs.push_back(c.get());

  const std::string hostname = Hostname();
  CaptureManager manager({&clock, collector_ptrs},
                         {.max_duration_ms = opts->max_duration_ms,
                          .host_name = opts->name.empty() ? hostname : opts->name});
  boost::asio::thread_pool executor(2);
  AgentServiceImpl service(&manager, &clock, &executor, {opts->name, hostname});

  const bool ipv6 = absl::StrContains(opts->bind, ':') && opts->bind.front() != '[';
  const std::string address =
      absl::StrCat(ipv6 ? "[" : "", opts->bind, ipv6 ? "]" : "", ":", opts->port);
  int selected_port = 0;
  grpc::ServerBuilder builder;
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);  // a taken port must fail loudly
  builder.AddListeningPort(address, grpc::InsecureServerCredentials(), &selected_port);
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || selected_port == 0) {
    spdlog::error("cannot listen on {} (address in use or not local?)", address);
    return 1;
  }
  if (!opts->port_file.empty()) {
    if (absl::Status s = WriteFileAtomically(opts->port_file, absl::StrCat(selected_port, "\n"));
        !s.ok()) {
      spdlog::error("--port-file: {}", s.ToString());
      server->Shutdown();
      return 1;
    }
  }
  spdlog::info("profctl-agent {} listening on {}:{} (collectors: {}, clock skew {} ms)", kVersion,
               opts->bind, selected_port, absl::StrJoin(opts->collectors, ","),
               opts->clock_skew_ms);

  int sig = 0;
  sigwait(&signals, &sig);
  spdlog::info("signal {}: shutting down", sig);
  // A running capture stops now and streams back what it recorded; in-flight transfers get two
  // seconds before gRPC cancels them.
  manager.CancelActive();
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  executor.join();
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
