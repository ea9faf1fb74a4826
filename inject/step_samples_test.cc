#include "inject/step_samples.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "inject/step_names.h"

namespace profctl::inject {
namespace {

// The agreement with RE2 on a large table is agent/collectors/cupti/step_names_agreement_test.cc;
// these are the library's own expectations.
TEST(StepNamesTest, StepsAndNearMisses) {
  int64_t n = -1;
  EXPECT_TRUE(MatchStepName("step 5", &n));
  EXPECT_EQ(n, 5);
  EXPECT_TRUE(MatchStepName("train_step 12", &n));
  EXPECT_EQ(n, 12);
  EXPECT_TRUE(MatchStepName("ProfilerStep#7", &n));
  EXPECT_EQ(n, 7);
  EXPECT_TRUE(MatchStepName("StepMarker 0012  ", &n));
  EXPECT_EQ(n, 12);
  EXPECT_TRUE(MatchStepName("9223372036854775807 x step=9223372036854775807", &n));
  EXPECT_EQ(n, INT64_MAX);
  for (const char* no : {"", "step", "mystep 3", "step 5 x", "forward", "step -", "step##5",
                         "step 9223372036854775808", "step 99999999999999999999999"}) {
    EXPECT_FALSE(MatchStepName(no, &n)) << no;
  }
}

TEST(StepRangeTrackerTest, PairsStepRangesOnlyAndAllocatesNothing) {
  StepRangeTracker t;
  t.OnStart(1, 100, "train_step 5");
  t.OnStart(2, 110, "forward");  // not a step: not remembered
  EXPECT_EQ(t.open(), 1u);
  t.OnEnd(2, 150);
  t.OnEnd(1, 200);
  t.OnEnd(3, 300);  // an end without a start: nothing
  StepSampleEntry out[4];
  ASSERT_EQ(t.Take(out, 4), 1u);
  EXPECT_EQ(out[0].start_wall_ns, 100);
  EXPECT_EQ(out[0].end_wall_ns, 200);
  EXPECT_EQ(out[0].step_num, 5);
  EXPECT_EQ(t.Take(out, 4), 0u);
  // An end before its start is clamped to a zero-length range.
  t.OnStart(4, 500, "step 6");
  t.OnEnd(4, 400);
  ASSERT_EQ(t.Take(out, 4), 1u);
  EXPECT_EQ(out[0].end_wall_ns, 500);
  EXPECT_EQ(t.dropped(), 0u);
}

TEST(StepRangeTrackerTest, TheRingKeepsTheLatestAndCountsDrops) {
  StepRangeTracker t;
  const size_t total = StepRangeTracker::kCapacity + 10;
  for (size_t i = 0; i < total; ++i) {
    t.OnStart(static_cast<uint32_t>(i), i * 10, "step " + std::to_string(i));
    t.OnEnd(static_cast<uint32_t>(i), i * 10 + 5);
  }
  EXPECT_EQ(t.ready(), StepRangeTracker::kCapacity);
  EXPECT_EQ(t.dropped(), 10u);
  std::vector<StepSampleEntry> out(total);
  ASSERT_EQ(t.Take(out.data(), 3), 3u);
  EXPECT_EQ(out[0].step_num, 10);  // the oldest ten were overwritten
  EXPECT_EQ(out[2].step_num, 12);
  EXPECT_EQ(t.Take(out.data(), total), StepRangeTracker::kCapacity - 3);
  EXPECT_EQ(out[StepRangeTracker::kCapacity - 4].step_num, static_cast<int64_t>(total - 1));
  t.OnStart(1, 1, "step 1");
  t.OnEnd(1, 2);
  EXPECT_EQ(t.Clear(), 1u);
  EXPECT_EQ(t.dropped(), 11u);
  EXPECT_EQ(t.ready(), 0u);
}

TEST(StepRangeTrackerTest, StepsThatNeverEndAreEvictedOldestFirst) {
  StepRangeTracker t;
  for (uint32_t i = 0; i < StepRangeTracker::kMaxOpen + 1; ++i) {
    t.OnStart(i, 1000 + i, "step " + std::to_string(i));
  }
  EXPECT_EQ(t.open(), StepRangeTracker::kMaxOpen);
  EXPECT_EQ(t.dropped(), 1u);
  t.OnEnd(0, 5000);  // evicted: no sample
  t.OnEnd(StepRangeTracker::kMaxOpen, 5000);
  StepSampleEntry out[2];
  ASSERT_EQ(t.Take(out, 2), 1u);
  EXPECT_EQ(out[0].step_num, static_cast<int64_t>(StepRangeTracker::kMaxOpen));
}

}  // namespace
}  // namespace profctl::inject
