#include "agent/collectors/synthetic/synthetic_collector.h"

#include <vector>

#include "common/clock.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"
#include "tests/status_matchers.h"
#include "tests/test_time.h"
#include "xspace/xspace.h"

using ::profctl::testkit::IsOk;

namespace profctl::agent {
namespace {

using ::profctl::test_time::kT0;

synthetic::SyntheticJobConfig Job(int64_t rank) {
  return *synthetic::ParseSyntheticJobConfig(
      "world=4,seed=11,step_ms=50,gpus=2,kernels_per_step=5,straggler_rank=1,"
      "straggler_factor=2,input_stall_rank=2,input_stall_ms=20,rank=" +
      std::to_string(rank));
}

TEST(SyntheticCollectorTest, StepSignalIsTheModelsFinishedStepsOnTheAgentClock) {
  synthetic::SyntheticJobConfig c = Job(0);
  c.clock_skew_ns = 3 * kNanosPerSecond;
  const int64_t at = kT0 + 10 * kNanosPerSecond;
  c.slowdown_at_ms = at / kNanosPerMilli;
  c.slowdown_factor = 2;
  const SyntheticCollector collector(c);
  const synthetic::SyntheticJob& job = collector.job();
  EXPECT_TRUE(collector.HasStepSignal());
  const int64_t skew = c.clock_skew_ns;
  // 20 s around the slowdown, on the agent's clock.
  std::vector<StepSample> steps;
  collector.RecentSteps(kT0 + skew, kT0 + 20 * kNanosPerSecond + skew, 100'000, &steps);
  ASSERT_GT(steps.size(), 100u);
  for (size_t i = 0; i < steps.size(); ++i) {
    EXPECT_EQ(steps[i].source, "synthetic");
    EXPECT_GT(steps[i].end_wall_ns, kT0 + skew);
    EXPECT_LE(steps[i].end_wall_ns, kT0 + 20 * kNanosPerSecond + skew);
    if (i > 0) {
      // Back to back: each ends one duration after the previous one.
      EXPECT_EQ(steps[i].end_wall_ns - steps[i - 1].end_wall_ns, steps[i].duration_ns);
    }
  }
  EXPECT_EQ(steps.front().duration_ns, job.period_ns());
  synthetic::SyntheticJobConfig longer = Job(0);
  longer.step_ms = 100;
  EXPECT_EQ(steps.back().duration_ns, synthetic::SyntheticJob(longer).period_ns());
  // `max` keeps the latest; an empty or inverted range gives nothing.
  std::vector<StepSample> last3;
  collector.RecentSteps(kT0 + skew, kT0 + 20 * kNanosPerSecond + skew, 3, &last3);
  ASSERT_EQ(last3.size(), 3u);
  EXPECT_EQ(last3.back().end_wall_ns, steps.back().end_wall_ns);
  std::vector<StepSample> none;
  collector.RecentSteps(kT0, kT0, 10, &none);
  collector.RecentSteps(kT0 + kNanosPerSecond, kT0, 10, &none);
  EXPECT_TRUE(none.empty());
}

TEST(SyntheticCollectorTest, CollectsTheRecordedWindowOnTheAgentClock) {
  synthetic::SyntheticJobConfig c = Job(2);
  c.clock_skew_ns = 263 * kNanosPerMilli;
  SyntheticCollector collector(c);
  const int64_t start = kT0 + c.clock_skew_ns, stop = start + 500 * kNanosPerMilli;
  ASSERT_THAT(collector.Prepare({}), IsOk());
  ASSERT_THAT(collector.Start(start), IsOk());
  ASSERT_THAT(collector.Stop(stop), IsOk());
  tensorflow::profiler::XSpace space;
  ASSERT_THAT(collector.Collect(&space), IsOk());
  ASSERT_THAT(xspace::Validate(space), IsOk()) << xspace::Validate(space);
  EXPECT_EQ(xspace::ProfileStartNs(space), start);
  EXPECT_EQ(xspace::ProfileStopNs(space), stop);
  // Same events as the job generates for the true window.
  tensorflow::profiler::XSpace expected;
  collector.job().Generate(kT0, kT0 + 500 * kNanosPerMilli, &expected);
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(space, expected));
  // A session-level writer recording the same window again leaves one Task Environment plane.
  xspace::SetProfileWindow(&space, start, stop);
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(space, expected));
}

// Plane by plane equality of two traces, ignoring nothing.
bool SameTrace(const tensorflow::profiler::XSpace& a, const tensorflow::profiler::XSpace& b) {
  return google::protobuf::util::MessageDifferencer::Equals(a, b);
}

TEST(SyntheticCollectorTest, ASnapshotIsTheWindowsTraceWhileRecordingGoesOn) {
  synthetic::SyntheticJobConfig c = Job(1);
  c.clock_skew_ns = 41 * kNanosPerMilli;
  SyntheticCollector collector(c);
  const int64_t skew = c.clock_skew_ns;
  EXPECT_FALSE(collector.Recording());
  ASSERT_THAT(
      collector.StartRecorder({.keep_ns = 60 * kNanosPerSecond, .max_bytes = 64 << 20}, kT0 + skew),
      IsOk());
  EXPECT_TRUE(collector.Recording());
  // The agent's ticks: every 100 ms for 5 s.
  for (int64_t t = kT0; t <= kT0 + 5 * kNanosPerSecond; t += 100 * kNanosPerMilli) {
    collector.RecordUntil(t + skew);
  }
  EXPECT_GT(collector.recorder_stats().records, 50);
  const int64_t from = kT0 + 2 * kNanosPerSecond + 7 * kNanosPerMilli;
  const int64_t to = kT0 + 4 * kNanosPerSecond + 13 * kNanosPerMilli;
  tensorflow::profiler::XSpace first;
  ASSERT_THAT(collector.Snapshot(from + skew, to + skew, &first), IsOk());
  ASSERT_THAT(xspace::Validate(first), IsOk());
  tensorflow::profiler::XSpace expected;
  collector.job().Generate(from, to, &expected);
  EXPECT_TRUE(SameTrace(first, expected));
  EXPECT_EQ(xspace::ProfileStartNs(first), from + skew);
  EXPECT_EQ(xspace::ProfileStopNs(first), to + skew);
  // Recording goes on; the same window again is the same trace, and the latest second (whose
  // last step is still running: kept as far as it went) is the model's too.
  for (int64_t t = kT0 + 5 * kNanosPerSecond; t <= kT0 + 9 * kNanosPerSecond;
       t += 100 * kNanosPerMilli) {
    collector.RecordUntil(t + skew);
  }
  tensorflow::profiler::XSpace again;
  ASSERT_THAT(collector.Snapshot(from + skew, to + skew, &again), IsOk());
  EXPECT_TRUE(SameTrace(again, first));
  const int64_t now = kT0 + 9 * kNanosPerSecond + 31 * kNanosPerMilli;
  tensorflow::profiler::XSpace latest, latest_expected;
  ASSERT_THAT(collector.Snapshot(now - kNanosPerSecond + skew, now + skew, &latest), IsOk());
  collector.job().Generate(now - kNanosPerSecond, now, &latest_expected);
  EXPECT_TRUE(SameTrace(latest, latest_expected));
  EXPECT_EQ(latest.warnings_size(), 0);
  // Before the recorder started there is nothing, and the snapshot says how much it holds.
  tensorflow::profiler::XSpace early;
  ASSERT_THAT(
      collector.Snapshot(kT0 - kNanosPerSecond + skew, kT0 + kNanosPerSecond + skew, &early),
      IsOk());
  ASSERT_EQ(early.warnings_size(), 1);
  EXPECT_THAT(early.warnings(0), ::testing::HasSubstr("holds the last"));
}

TEST(SyntheticCollectorTest, TheRingWrapsAtItsCapAndStaysUnderItAtTenTimesTheRate) {
  constexpr int64_t kCap = 512 << 10;
  synthetic::SyntheticJobConfig normal = Job(0), fast = Job(0);
  fast.step_ms = normal.step_ms / 10;
  fast.input_stall_ms = normal.input_stall_ms / 10;
  SyntheticCollector slow_rate(normal), ten_x(fast);
  for (SyntheticCollector* c : {&slow_rate, &ten_x}) {
    ASSERT_THAT(c->StartRecorder({.keep_ns = 60 * kNanosPerSecond, .max_bytes = kCap}, kT0),
                IsOk());
  }
  for (int64_t t = kT0; t <= kT0 + 120 * kNanosPerSecond; t += 100 * kNanosPerMilli) {
    for (SyntheticCollector* c : {&slow_rate, &ten_x}) {
      c->RecordUntil(t);
      ASSERT_LE(c->recorder_stats().bytes, kCap);
    }
  }
  const RecorderStats a = slow_rate.recorder_stats(), b = ten_x.recorder_stats();
  // Both wrapped at the byte cap: they hold about as many steps, the fast job's a tenth as long.
  EXPECT_GT(a.evicted, 0);
  EXPECT_GT(b.evicted, 9 * a.evicted);
  EXPECT_NEAR(static_cast<double>(b.records), static_cast<double>(a.records),
              0.05 * static_cast<double>(a.records));
  EXPECT_GT(kCap - b.bytes, 0);
  EXPECT_LT(kCap - b.bytes, kCap / 20);  // full, less than one step from the cap
  // What it still holds is whole steps: the latest 100 ms snapshot is the model's window.
  const int64_t now = kT0 + 120 * kNanosPerSecond;
  tensorflow::profiler::XSpace got, expected;
  ASSERT_THAT(ten_x.Snapshot(now - 100 * kNanosPerMilli, now, &got), IsOk());
  ten_x.job().Generate(now - 100 * kNanosPerMilli, now, &expected);
  EXPECT_TRUE(SameTrace(got, expected));
  // Its whole 60 s are not there: the snapshot says what it holds.
  tensorflow::profiler::XSpace all;
  ASSERT_THAT(ten_x.Snapshot(now - 60 * kNanosPerSecond, now, &all), IsOk());
  ASSERT_EQ(all.warnings_size(), 1);
  EXPECT_THAT(all.warnings(0), ::testing::HasSubstr("of 60000 ms asked"));
}

TEST(SyntheticCollectorTest, WithoutARecorderASnapshotFails) {
  SyntheticCollector collector(Job(0));
  tensorflow::profiler::XSpace space;
  EXPECT_EQ(collector.Snapshot(kT0, kT0 + kNanosPerSecond, &space).code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(collector.StartRecorder({.keep_ns = 0, .max_bytes = 1}, kT0).code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace profctl::agent
