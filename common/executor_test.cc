#include "common/executor.h"

#include <atomic>
#include <string>
#include <vector>

#include "absl/synchronization/notification.h"
#include "common/check.h"
#include "common/clock.h"
#include "gtest/gtest.h"
#include "tests/fake_clock.h"
#include "tests/fake_executor.h"

namespace profctl {
namespace {

using testkit::FakeClock;
using testkit::FakeExecutor;

TEST(FakeExecutorTest, RunsDueTasksInDeadlineThenPostingOrderAsTimeAdvances) {
  FakeClock clock;
  FakeExecutor ex(&clock);
  const int64_t t0 = clock.MonoNs();
  std::vector<std::string> ran;
  std::vector<int64_t> at;
  auto record = [&](std::string name) {
    return [&, name] {
      ran.push_back(name);
      at.push_back(clock.MonoNs() - t0);
    };
  };
  ex.PostAt(t0 + 30, record("c"));
  ex.PostAt(t0 + 10, record("a"));
  ex.PostAt(t0 + 10, record("b"));
  ex.Post(record("now"));
  EXPECT_EQ(ex.RunUntilIdle(), 1);
  EXPECT_EQ(ran, (std::vector<std::string>{"now"}));
  ex.Advance(20);
  EXPECT_EQ(ran, (std::vector<std::string>{"now", "a", "b"}));
  EXPECT_EQ(at, (std::vector<int64_t>{0, 10, 10}));
  EXPECT_EQ(clock.MonoNs() - t0, 20);
  EXPECT_EQ(ex.pending(), 1u);
  ex.Advance(100);
  EXPECT_EQ(ran.back(), "c");
  EXPECT_EQ(at.back(), 30);  // ran at its deadline, not at the end of the advance
  EXPECT_EQ(ex.pending(), 0u);
}

TEST(FakeExecutorTest, TasksPostedByTasksRunInTheSameAdvance) {
  FakeClock clock;
  FakeExecutor ex(&clock);
  int chain = 0;
  std::function<void()> step = [&] {
    if (++chain < 5) ex.PostAt(clock.MonoNs() + 7, [&] { step(); });
  };
  ex.Post([&] { step(); });
  ex.Advance(100);
  EXPECT_EQ(chain, 5);
}

TEST(FakeExecutorTest, RunUntilJumpsToTheNextDeadlineAndStopsAtTheLimit) {
  FakeClock clock;
  FakeExecutor ex(&clock);
  const int64_t t0 = clock.MonoNs();
  bool fired = false;
  ex.PostAt(t0 + kNanosPerSecond, [&] { fired = true; });
  EXPECT_FALSE(ex.RunUntil([&] { return fired; }, t0 + kNanosPerMilli));
  EXPECT_EQ(clock.MonoNs(), t0);  // did not jump past the limit
  EXPECT_TRUE(ex.RunUntil([&] { return fired; }, t0 + 2 * kNanosPerSecond));
  EXPECT_EQ(clock.MonoNs(), t0 + kNanosPerSecond);
}

TEST(AsioExecutorTest, RunsPostedAndTimedTasksOneAtATime) {
  RealClock clock;
  AsioExecutor ex(&clock, /*threads=*/4);
  std::atomic<int> running{0};
  std::atomic<int> overlaps{0};
  std::atomic<int> done{0};
  absl::Notification all;
  constexpr int kTasks = 200;
  auto task = [&] {
    if (running.fetch_add(1) != 0) overlaps.fetch_add(1);
    running.fetch_sub(1);
    if (done.fetch_add(1) + 1 == kTasks) all.Notify();
  };
  for (int i = 0; i < kTasks / 2; ++i) {
    ex.Post(task);
    ex.PostAt(clock.MonoNs() + (i % 5) * kNanosPerMilli, task);
  }
  ASSERT_TRUE(all.WaitForNotificationWithTimeout(absl::Seconds(30)));
  EXPECT_EQ(overlaps.load(), 0);
}

TEST(AsioExecutorTest, TimedTaskWaitsForItsDeadline) {
  RealClock clock;
  AsioExecutor ex(&clock);
  absl::Notification fired;
  int64_t ran_at = 0;
  const int64_t deadline = clock.MonoNs() + 20 * kNanosPerMilli;
  ex.PostAt(deadline, [&] {
    ran_at = clock.MonoNs();
    fired.Notify();
  });
  ASSERT_TRUE(fired.WaitForNotificationWithTimeout(absl::Seconds(30)));
  EXPECT_GE(ran_at, deadline);
}

TEST(AsioExecutorTest, DestructorDropsTimersNotYetDue) {
  RealClock clock;
  std::atomic<bool> fired{false};
  {
    AsioExecutor ex(&clock);
    ex.PostAt(clock.MonoNs() + 3600 * kNanosPerSecond, [&] { fired = true; });
  }  // must not wait an hour
  EXPECT_FALSE(fired.load());
}

// The sequence checks of executor-bound code (PROFCTL_DCHECK_ON_SEQUENCE): true only inside one of
// that executor's tasks, not on the thread that posts, nor inside another executor's task.
TEST(ExecutorTest, RunsCurrentTaskOnlyInsideThatExecutorsTasks) {
  FakeClock clock;
  FakeExecutor a(&clock);
  FakeExecutor b(&clock);
  EXPECT_FALSE(a.RunsCurrentTask());
  std::vector<bool> seen;
  a.Post([&] {
    seen.push_back(a.RunsCurrentTask());
    seen.push_back(b.RunsCurrentTask());
    b.Post([&] { seen.push_back(a.RunsCurrentTask()); });
    b.RunUntilIdle();  // b's task, nested in a's: a's scope is restored after it
    seen.push_back(a.RunsCurrentTask());
  });
  a.RunUntilIdle();
  EXPECT_EQ(seen, (std::vector<bool>{true, false, false, true}));
  EXPECT_FALSE(a.RunsCurrentTask());

  RealClock real;
  AsioExecutor asio(&real, 2);
  absl::Notification done;
  std::atomic<bool> on_sequence{false};
  asio.Post([&] {
    on_sequence = asio.RunsCurrentTask();
    done.Notify();
  });
  done.WaitForNotification();
  EXPECT_TRUE(on_sequence);
  EXPECT_FALSE(asio.RunsCurrentTask());
}

#ifndef NDEBUG
TEST(ExecutorDeathTest, TheSequenceCheckAbortsOffItsExecutor) {
  FakeClock clock;
  FakeExecutor executor(&clock);
  EXPECT_DEATH(PROFCTL_DCHECK_ON_SEQUENCE(executor), "RunsCurrentTask");
  executor.Post([&] { PROFCTL_DCHECK_ON_SEQUENCE(executor); });  // silent on it
  EXPECT_EQ(executor.RunUntilIdle(), 1);
}
#endif

}  // namespace
}  // namespace profctl
