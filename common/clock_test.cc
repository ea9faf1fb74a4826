#include "common/clock.h"

#include <thread>

#include "gtest/gtest.h"
#include "tests/fake_clock.h"

namespace profctl {
namespace {

using testkit::FakeClock;

TEST(RealClockTest, WallIsEpochAndMonotonicNeverGoesBack) {
  RealClock clock;
  EXPECT_GT(clock.WallNs(), 1'700'000'000LL * kNanosPerSecond);
  const int64_t a = clock.MonoNs();
  EXPECT_GE(clock.MonoNs(), a);
}

TEST(RealClockTest, WaitReturnsAtOnceWhenStoppedOrPast) {
  RealClock clock;
  StopSignal stop;
  EXPECT_TRUE(clock.WaitUntil(clock.MonoNs() - 1, stop));
  stop.Stop();
  // An hour-long wait returns immediately: the signal is already stopped.
  EXPECT_FALSE(clock.WaitUntil(clock.MonoNs() + 3600 * kNanosPerSecond, stop));
}

TEST(RealClockTest, StopWakesAWaiterFromAnotherThread) {
  RealClock clock;
  StopSignal stop;
  bool reached = true;
  std::thread waiter(
      [&] { reached = clock.WaitUntil(clock.MonoNs() + 3600 * kNanosPerSecond, stop); });
  stop.Stop();
  waiter.join();
  EXPECT_FALSE(reached);
}

TEST(SkewedClockTest, ShiftsWallOnly) {
  FakeClock base;
  SkewedClock skewed(&base, -5 * kNanosPerMilli);
  EXPECT_EQ(skewed.WallNs(), base.WallNs() - 5 * kNanosPerMilli);
  EXPECT_EQ(skewed.MonoNs(), base.MonoNs());
}

TEST(FakeClockTest, WaitBlocksUntilAdvancedPastDeadline) {
  FakeClock clock;
  StopSignal stop;
  const int64_t deadline = clock.MonoNs() + 100;
  bool reached = false;
  std::thread waiter([&] { reached = clock.WaitUntil(deadline, stop); });
  clock.AwaitWaiters(1);
  clock.Advance(50);  // not yet
  clock.AwaitWaiters(1);
  clock.Advance(50);
  waiter.join();
  EXPECT_TRUE(reached);
  EXPECT_EQ(clock.MonoNs(), deadline);
}

TEST(FakeClockTest, StopWakesWaiter) {
  FakeClock clock;
  StopSignal stop;
  bool reached = true;
  std::thread waiter([&] { reached = clock.WaitUntil(clock.MonoNs() + 1000, stop); });
  clock.AwaitWaiters(1);
  stop.Stop();
  waiter.join();
  EXPECT_FALSE(reached);
}

TEST(FakeClockTest, AutoAdvanceJumpsToDeadline) {
  FakeClock clock;
  clock.SetAutoAdvance(true);
  StopSignal stop;
  const int64_t wall = clock.WallNs();
  EXPECT_TRUE(clock.WaitUntil(clock.MonoNs() + 7 * kNanosPerSecond, stop));
  EXPECT_EQ(clock.WallNs(), wall + 7 * kNanosPerSecond);
}

}  // namespace
}  // namespace profctl
