#include "coordinator/cli/interrupt_scope.h"

#include <atomic>
#include <functional>
#include <thread>
#include <utility>

#include "absl/time/time.h"
#include "common/clock.h"

namespace profctl::coordinator {

InterruptScope::InterruptScope(const StopSignal* interrupt, std::function<void()> on_interrupt)
    : interrupt_(interrupt) {
  if (interrupt_ == nullptr) return;
  if (interrupt_->stopped()) {
    on_interrupt();
    return;
  }
  watcher_ = std::thread([this, on_interrupt = std::move(on_interrupt)] {
    interrupt_->Wait(
        +[](const void* over) { return static_cast<const std::atomic<bool>*>(over)->load(); },
        &over_, absl::InfiniteDuration());
    if (!over_.load()) on_interrupt();
  });
}

InterruptScope::~InterruptScope() {
  over_ = true;
  if (watcher_.joinable()) {
    interrupt_->Poke();
    watcher_.join();
  }
}

}  // namespace profctl::coordinator
