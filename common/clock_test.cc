#include "common/clock.h"

#include <cstdlib>
#include <thread>

#include "common/clock_pair.h"
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

TEST(ClockPairTest, AReadingSplitByAPreemptionIsReadAgainAndTheTightOneKept) {
  FakeClock clock;
  const int64_t offset = clock.WallNs() - clock.MonoNs();
  clock.StallBeforeNextWallRead(5 * kNanosPerMilli);  // preempted between mono and wall
  const ClockPair p = ReadClockPair(clock);
  EXPECT_EQ(p.spread_ns, 0);
  EXPECT_EQ(p.wall_ns - p.mono_ns, offset);
  // With a single try the split reading is all there is: its spread says how unsure it is.
  clock.StallBeforeNextWallRead(5 * kNanosPerMilli);
  const ClockPair one = ReadClockPair(clock, /*tries=*/1);
  EXPECT_EQ(one.spread_ns, 2'500'000);
  EXPECT_LE(std::abs((one.wall_ns - one.mono_ns) - offset), one.spread_ns);
}

TEST(ClockPairTest, AStepIsMeasuredAndASplitReadingOnlyWidensWhatIsUnsure) {
  FakeClock clock;
  const ClockPair before = ReadClockPair(clock);
  clock.Advance(kNanosPerSecond);
  clock.JumpWall(-300 * kNanosPerMilli);
  const WallStep step = WallStepBetween(before, ReadClockPair(clock));
  EXPECT_EQ(step.step_ns, -300 * kNanosPerMilli);
  EXPECT_EQ(step.unsure_ns, 0);
  // No step, but the second reading was split by a 4 ms stall and could not be read again: the
  // apparent step is within what the readings leave unsure.
  clock.StallBeforeNextWallRead(4 * kNanosPerMilli);
  const ClockPair split = ReadClockPair(clock, /*tries=*/1);
  const WallStep none = WallStepBetween(ReadClockPair(clock), split);
  EXPECT_NE(none.step_ns, 0);
  EXPECT_LE(std::abs(none.step_ns), none.unsure_ns);
}

TEST(ClockPairTest, TheRealClocksReadTogetherAgreeWithEachOther) {
  RealClock clock;
  const ClockPair a = ReadClockPair(clock);
  const ClockPair b = ReadClockPair(clock);
  const WallStep s = WallStepBetween(a, b);
  EXPECT_GE(a.spread_ns, 0);
  EXPECT_GE(b.mono_ns, a.mono_ns);
  // No one steps this machine's clock within microseconds (NTP slews by <= 500 ppm).
  EXPECT_LE(std::abs(s.step_ns), s.unsure_ns + kNanosPerMilli);
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
