#include "agent/collectors/synthetic/synthetic_collector.h"

#include <vector>

#include "common/clock.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"
#include "tests/status_matchers.h"
#include "xspace/xspace.h"

using ::profctl::testkit::IsOk;

namespace profctl::agent {
namespace {

constexpr int64_t kT0 = 1'767'225'600LL * kNanosPerSecond;  // 2026-01-01

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

}  // namespace
}  // namespace profctl::agent
