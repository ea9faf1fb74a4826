// profctl: the command-line front end. Thin shell over RunCli.
#include <unistd.h>

#include <atomic>
#include <climits>
#include <csignal>
#include <cstdio>
#include <iostream>
#include <thread>

#include "common/clock.h"
#include "common/executor.h"
#include "common/process_setup.h"
#include "coordinator/cli/cli.h"
#include "coordinator/clients/grpc_agent_client.h"

int main(int argc, char** argv) {
  profctl::LimitMallocArenas(2);  // before the first thread takes an arena of its own
  // SIGINT/SIGTERM are taken by a thread with sigwait. A command that watches the interrupt
  // (CliEnv::interrupt_taken) gets the first: a capture is cancelled and saves what was recorded;
  // a second one quits at once. Every other command quits at once on the first.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  static profctl::StopSignal interrupt;  // these outlive the detached thread
  static std::atomic<bool> hup_reloads{false};
  static std::atomic<int> reload_requests{0};
  static std::atomic<bool> interrupt_taken{false};
  std::thread([signals] {
    int sig = 0;
    for (;;) {
      sigwait(&signals, &sig);
      if (sig == SIGHUP && hup_reloads.load()) {  // profctl serve: reload the config
        reload_requests.fetch_add(1);
        interrupt.Poke();
        continue;
      }
      if (interrupt.stopped() || !interrupt_taken.load()) _exit(128 + sig);
      interrupt.Stop();
    }
  }).detach();

  profctl::DisableMutexDeadlockDetection();
  profctl::RaiseOpenFileLimit();
  profctl::ReturnLargeBuffersToTheSystem();
  profctl::RealClock clock;
  profctl::AsioExecutor executor(&clock, /*threads=*/1);
  // Validating and fsyncing traces: CPU and disk waits, so a few more threads than cores.
  profctl::ThreadWorkPool pool(/*threads=*/4);
  profctl::coordinator::GrpcAgentClientFactory clients({.clock = &clock});
  char self[PATH_MAX] = {};
  const ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
  profctl::coordinator::CliEnv env{
      &std::cout,        &std::cerr, &clock,
      &clients,          &executor,  n > 0 ? std::string(self, static_cast<size_t>(n)) : argv[0],
      &interrupt,
      /*await=*/nullptr, &pool};
  // capture and ping given --tls-* or --token-file.
  env.hup_reloads = &hup_reloads;
  env.reload_requests = &reload_requests;
  env.interrupt_taken = &interrupt_taken;
  env.secure_clients = [&clock](std::shared_ptr<const profctl::coordinator::AgentCredentials> c)
      -> std::unique_ptr<profctl::coordinator::AgentClientFactory> {
    return std::make_unique<profctl::coordinator::GrpcAgentClientFactory>(
        profctl::coordinator::GrpcAgentClientOptions{.clock = &clock, .credentials = std::move(c)});
  };
  int rc = 1;
  try {
    rc = profctl::coordinator::RunCli({argv + 1, argv + argc}, env);
  } catch (const std::exception& e) {  // e.g. std::bad_alloc: report, never abort silently
    std::cerr << "profctl: fatal: " << e.what() << "\n";
  }
  // Whatever ends the process next (an atexit handler that calls _exit, as LeakSanitizer's does)
  // must not take the answer with it: stdout is block-buffered when it is a pipe.
  std::cout.flush();
  std::fflush(nullptr);
  return rc;
}
