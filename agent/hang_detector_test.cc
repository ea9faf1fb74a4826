#include "agent/hang_detector.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/test_time.h"

namespace profctl::agent {
namespace {

using ::profctl::test_time::kMs;

// `n` steps of `source`, each `step_ms` long, the first ending at `first_end_ms`.
std::vector<StepSample> Steps(const std::string& source, int n, int64_t step_ms,
                              int64_t first_end_ms, int64_t first_num = 0) {
  std::vector<StepSample> out;
  for (int i = 0; i < n; ++i) {
    out.push_back({.end_wall_ns = (first_end_ms + i * step_ms) * kMs,
                   .duration_ns = step_ms * kMs,
                   .step_num = first_num + i,
                   .source = source});
  }
  return out;
}

TEST(HangDetectorTest, StalledOnlyPastFactorTimesTheMedianStep) {
  HangDetector d(10);
  d.Observe(Steps("synthetic", 5, 20, 100));                           // last end at 180 ms, step 4
  std::vector<StepSourceStatus> st = d.Status(180 * kMs + 200 * kMs);  // exactly 10 x 20 ms
  ASSERT_EQ(st.size(), 1u);
  EXPECT_EQ(st[0].source, "synthetic");
  EXPECT_EQ(st[0].median_step_ns, 20 * kMs);
  EXPECT_EQ(st[0].last_step_end_ns, 180 * kMs);
  EXPECT_EQ(st[0].last_step_num, 4);
  EXPECT_EQ(st[0].since_step_end_ns, 200 * kMs);
  EXPECT_FALSE(st[0].stalled);
  st = d.Status(180 * kMs + 201 * kMs);
  EXPECT_TRUE(st[0].stalled);
  EXPECT_EQ(Stalled(st).size(), 1u);
  // A step ends again: no longer stalled.
  d.Observe(Steps("synthetic", 1, 20, 400, 5));
  st = d.Status(401 * kMs);
  EXPECT_FALSE(st[0].stalled);
  EXPECT_EQ(st[0].last_step_num, 5);
}

TEST(HangDetectorTest, NoVerdictBeforeThreeSteps) {
  HangDetector d(2);
  d.Observe(Steps("cupti pid 7 rank 0", 2, 10, 10));
  std::vector<StepSourceStatus> st = d.Status(int64_t{3600} * 1000 * kMs);
  ASSERT_EQ(st.size(), 1u);
  EXPECT_FALSE(st[0].stalled);
  EXPECT_EQ(st[0].median_step_ns, 0);
  d.Observe(Steps("cupti pid 7 rank 0", 1, 10, 30, 2));
  EXPECT_TRUE(d.Status(int64_t{3600} * 1000 * kMs)[0].stalled);
}

TEST(HangDetectorTest, MedianIgnoresOneSlowStepAndUsesTheRecentWindow) {
  HangDetector d(3);
  // 20 steps of 100 ms (pushed out of the 16-step window), then 16 of 10 ms with one of 500 ms.
  std::vector<StepSample> steps = Steps("synthetic", 20, 100, 100);
  int64_t end = steps.back().end_wall_ns / kMs;
  for (int i = 0; i < 16; ++i) {
    const int64_t dur = i == 7 ? 500 : 10;
    end += dur;
    steps.push_back({.end_wall_ns = end * kMs,
                     .duration_ns = dur * kMs,
                     .step_num = 20 + i,
                     .source = "synthetic"});
  }
  d.Observe(steps);
  std::vector<StepSourceStatus> st = d.Status((end + 31) * kMs);
  EXPECT_EQ(st[0].median_step_ns, 10 * kMs);
  EXPECT_TRUE(st[0].stalled);
  EXPECT_FALSE(d.Status((end + 30) * kMs)[0].stalled);
}

TEST(HangDetectorTest, SourcesAreJudgedApartAndRepeatsIgnored) {
  HangDetector d(10);
  const std::vector<StepSample> a = Steps("cupti pid 1 rank 0", 10, 10, 0);
  const std::vector<StepSample> b = Steps("cupti pid 2 rank 1", 4, 10, 0);
  d.Observe(a);
  d.Observe(b);
  d.Observe(b);  // the same steps again (overlapping polls) change nothing
  // rank 0's last end: 90 ms; rank 1's: 30 ms. At 135 ms only rank 1 passed 10 x 10 ms.
  std::vector<StepSourceStatus> st = d.Status(135 * kMs);
  ASSERT_EQ(st.size(), 2u);
  EXPECT_FALSE(st[0].stalled);
  EXPECT_TRUE(st[1].stalled);
  EXPECT_EQ(st[1].source, "cupti pid 2 rank 1");
  EXPECT_EQ(st[1].last_step_num, 3);
  EXPECT_EQ(st[1].median_step_ns, 10 * kMs);
}

TEST(HangDetectorTest, SummariesCarryEverySourceAndStallsOnlyTheStalled) {
  const std::vector<StepSourceStatus> status = {{.source = "a",
                                                 .last_step_end_ns = 5 * kMs,
                                                 .last_step_num = 7,
                                                 .median_step_ns = 2 * kMs,
                                                 .since_step_end_ns = 1 * kMs,
                                                 .stalled = false,
                                                 .steps = 16},
                                                {.source = "b",
                                                 .last_step_end_ns = 3 * kMs,
                                                 .last_step_num = -1,
                                                 .median_step_ns = 0,
                                                 .since_step_end_ns = 90 * kMs,
                                                 .stalled = true,
                                                 .steps = 3}};
  profctl::v1::GetStepSignalResponse r;
  AddStepSummaries(status, &r);
  ASSERT_EQ(r.summaries_size(), 2);
  EXPECT_EQ(r.summaries(0).source(), "a");
  EXPECT_EQ(r.summaries(0).last_step_end_ns(), 5 * kMs);
  EXPECT_EQ(r.summaries(0).last_step_num(), 7);
  EXPECT_EQ(r.summaries(0).median_step_ns(), 2 * kMs);
  EXPECT_EQ(r.summaries(0).steps(), 16u);
  EXPECT_EQ(r.summaries(1).source(), "b");
  EXPECT_EQ(r.summaries(1).steps(), 3u);
  ASSERT_EQ(r.stalls_size(), 1);
  EXPECT_EQ(r.stalls(0).source(), "b");
  EXPECT_EQ(r.stalls(0).stalled_for_ns(), 90 * kMs);
  EXPECT_EQ(r.stalls(0).last_step_end_ns(), 3 * kMs);
  EXPECT_EQ(r.samples_size(), 0);
}

TEST(HangDetectorTest, SamplesKeepTheirOrderAndEveryField) {
  const std::vector<StepSample> steps = {
      {.end_wall_ns = 10 * kMs, .duration_ns = 2 * kMs, .step_num = 4, .source = "a"},
      {.end_wall_ns = 12 * kMs, .duration_ns = 3 * kMs, .step_num = -1, .source = "b"}};
  profctl::v1::GetStepSignalResponse r;
  AddStepSamples(steps, &r);
  ASSERT_EQ(r.samples_size(), 2);
  EXPECT_EQ(r.samples(0).end_ns(), 10 * kMs);
  EXPECT_EQ(r.samples(0).duration_ns(), 2 * kMs);
  EXPECT_EQ(r.samples(0).step_num(), 4);
  EXPECT_EQ(r.samples(0).source(), "a");
  EXPECT_EQ(r.samples(1).source(), "b");
  EXPECT_EQ(r.samples(1).step_num(), -1);
  EXPECT_EQ(r.summaries_size(), 0);
}

}  // namespace
}  // namespace profctl::agent
