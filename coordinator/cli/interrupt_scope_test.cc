#include "coordinator/cli/interrupt_scope.h"

#include <atomic>

#include "absl/synchronization/notification.h"
#include "common/clock.h"
#include "gtest/gtest.h"

namespace profctl::coordinator {
namespace {

TEST(InterruptScopeTest, AnInterruptWhileTheScopeLivesCallsTheHandlerOnce) {
  StopSignal interrupt;
  std::atomic<int> calls{0};
  absl::Notification called;
  {
    const InterruptScope scope(&interrupt, [&] {
      ++calls;
      called.Notify();
    });
    interrupt.Stop();
    called.WaitForNotification();
    interrupt.Stop();  // a second stop is the same interrupt
  }
  EXPECT_EQ(calls.load(), 1);
}

TEST(InterruptScopeTest, AScopeThatEndsUninterruptedNeverCallsTheHandler) {
  StopSignal interrupt;
  std::atomic<int> calls{0};
  {
    const InterruptScope scope(&interrupt, [&] { ++calls; });
  }
  interrupt.Stop();  // after the scope: nobody is called
  EXPECT_EQ(calls.load(), 0);
}

TEST(InterruptScopeTest, AnInterruptBeforeTheScopeCallsTheHandlerAtOnceOnTheCallersThread) {
  StopSignal interrupt;
  interrupt.Stop();
  int calls = 0;  // no atomic needed: the constructor calls it inline
  {
    const InterruptScope scope(&interrupt, [&] { ++calls; });
  }
  EXPECT_EQ(calls, 1);
}

TEST(InterruptScopeTest, NoSignalWatchesNothing) {
  int calls = 0;
  {
    const InterruptScope scope(nullptr, [&] { ++calls; });
  }
  EXPECT_EQ(calls, 0);
}

}  // namespace
}  // namespace profctl::coordinator
