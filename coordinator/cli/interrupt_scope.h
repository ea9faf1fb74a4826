// Turns an interrupt (SIGINT/SIGTERM: CliEnv::interrupt) into one call while a command waits on
// something that can be cut short: a capture cancels its engine, `capture --coordinator` stops
// following the daemon's session.
#ifndef PROFCTL_COORDINATOR_CLI_INTERRUPT_SCOPE_H_
#define PROFCTL_COORDINATOR_CLI_INTERRUPT_SCOPE_H_

#include <atomic>
#include <functional>
#include <thread>

#include "common/clock.h"

namespace profctl::coordinator {

// While the scope lives, `on_interrupt` runs once, on a thread of the scope's own, when
// `interrupt` is stopped; at once, on the constructing thread, when it already is. After the
// destructor returns it never runs (the destructor waits for a call in progress). A null
// `interrupt` watches nothing. Not copyable or movable.
class InterruptScope {
 public:
  InterruptScope(const StopSignal* interrupt, std::function<void()> on_interrupt);
  ~InterruptScope();
  InterruptScope(const InterruptScope&) = delete;
  InterruptScope& operator=(const InterruptScope&) = delete;

 private:
  const StopSignal* const interrupt_;
  std::atomic<bool> over_{false};
  std::thread watcher_;
};

}  // namespace profctl::coordinator

#endif  // PROFCTL_COORDINATOR_CLI_INTERRUPT_SCOPE_H_
