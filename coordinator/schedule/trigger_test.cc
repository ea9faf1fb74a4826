// The trigger's judgment (StepTimeWatch): medians over the window and the baseline, per host on
// its own clock, and what it does with answers that lie.
#include "coordinator/schedule/trigger.h"

#include <cstdint>
#include <string>

#include "common/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/test_time.h"

namespace profctl::coordinator::schedule {
namespace {

using ::testing::HasSubstr;

using ::profctl::test_time::kMs;
using ::profctl::test_time::kS;

TriggerConfig Config() {
  TriggerConfig c;
  c.threshold = 1.5;
  c.window_ns = 10 * kS;
  c.baseline_ns = 60 * kS;
  c.min_steps = 20;
  c.sustain = 1;
  return c;
}

// Steps of `step_ns` back to back, ending at (from, to], as an agent answers them.
profctl::v1::GetStepSignalResponse Steps(int64_t from, int64_t to, int64_t step_ns,
                                         int64_t now = 0) {
  profctl::v1::GetStepSignalResponse r;
  r.set_now_ns(now != 0 ? now : to);
  r.add_sources("synthetic");
  for (int64_t end = from + step_ns; end <= to; end += step_ns) {
    auto* s = r.add_samples();
    s->set_end_ns(end);
    s->set_duration_ns(step_ns);
  }
  return r;
}

TEST(StepTimeWatchTest, JudgesTheWindowAgainstTheBaselineBeforeIt) {
  StepTimeWatch w(Config());
  const int64_t t0 = 1'000'000 * kS;
  w.BeginPoll();
  EXPECT_EQ(w.Add("h0:1", Steps(t0, t0 + 60 * kS, 100 * kMs)), 0);
  TriggerJudgment j = w.Judge();
  EXPECT_FALSE(j.regressed);
  EXPECT_EQ(j.hosts_judged, 1);
  EXPECT_EQ(j.host, "h0:1");
  EXPECT_DOUBLE_EQ(j.baseline_ns, 100.0 * kMs);
  EXPECT_DOUBLE_EQ(j.observed_ns, 100.0 * kMs);
  EXPECT_EQ(w.SinceNs("h0:1"), t0 + 60 * kS);

  // The job slows to 160 ms steps for the last 10 s: 1.6x > 1.5x.
  w.BeginPoll();
  w.Add("h0:1", Steps(t0 + 60 * kS, t0 + 70 * kS, 160 * kMs));
  j = w.Judge();
  EXPECT_TRUE(j.regressed);
  EXPECT_DOUBLE_EQ(j.baseline_ns, 100.0 * kMs);
  EXPECT_DOUBLE_EQ(j.observed_ns, 160.0 * kMs);
  EXPECT_NEAR(j.ratio, 1.6, 1e-9);
}

TEST(StepTimeWatchTest, ASlowdownUnderTheThresholdOrOfOneStepDoesNotFire) {
  StepTimeWatch w(Config());
  const int64_t t0 = 5'000 * kS;
  w.BeginPoll();
  w.Add("h", Steps(t0, t0 + 60 * kS, 100 * kMs));
  w.BeginPoll();
  w.Add("h", Steps(t0 + 60 * kS, t0 + 70 * kS, 140 * kMs));  // 1.4x
  EXPECT_FALSE(w.Judge().regressed);

  // One 10 s hiccup among normal steps: the window's median stays normal.
  StepTimeWatch v(Config());
  v.BeginPoll();
  profctl::v1::GetStepSignalResponse r = Steps(t0, t0 + 65 * kS, 100 * kMs, t0 + 66 * kS);
  auto* s = r.add_samples();
  s->set_end_ns(t0 + 66 * kS);
  s->set_duration_ns(10 * kS);
  v.Add("h", r);
  EXPECT_FALSE(v.Judge().regressed);
  EXPECT_DOUBLE_EQ(v.Judge().observed_ns, 100.0 * kMs);
}

TEST(StepTimeWatchTest, EachHostOnItsOwnClockAndTheWorstIsReported) {
  StepTimeWatch w(Config());
  w.BeginPoll();
  // Clocks hours apart: each host's windows are its own.
  w.Add("fast:1", Steps(1'000 * kS, 1'070 * kS, 100 * kMs));
  profctl::v1::GetStepSignalResponse slow = Steps(9'000 * kS, 9'060 * kS, 100 * kMs);
  for (int64_t end = 9'060 * kS + 200 * kMs; end <= 9'070 * kS; end += 200 * kMs) {
    auto* s = slow.add_samples();
    s->set_end_ns(end);
    s->set_duration_ns(200 * kMs);
  }
  slow.set_now_ns(9'070 * kS);
  w.Add("slow:1", slow);
  const TriggerJudgment j = w.Judge();
  EXPECT_TRUE(j.regressed);
  EXPECT_EQ(j.hosts_judged, 2);
  EXPECT_EQ(j.host, "slow:1");
  EXPECT_NEAR(j.ratio, 2.0, 1e-9);
}

TEST(StepTimeWatchTest, SaysWhyItCannotJudgeYet) {
  StepTimeWatch w(Config());
  EXPECT_THAT(w.Judge().waiting, HasSubstr("no target answered"));
  w.BeginPoll();
  profctl::v1::GetStepSignalResponse none;
  none.set_now_ns(100 * kS);  // an agent whose collectors keep no step signal
  w.Add("tsl:1", none);
  EXPECT_THAT(w.Judge().waiting, HasSubstr("no step signal"));
  w.BeginPoll();
  w.Add("h:1", Steps(100 * kS, 100 * kS + 12 * kS, kS));  // 2 baseline steps, 10 in the window
  const TriggerJudgment j = w.Judge();
  EXPECT_EQ(j.hosts_judged, 0);
  EXPECT_THAT(j.waiting, HasSubstr("baseline: 2 of 20 steps"));
  // A peer without a step signal (UNIMPLEMENTED) answered, without one.
  StepTimeWatch v(Config());
  v.BeginPoll();
  v.NoSignal("grpc://tpu:9999");
  EXPECT_THAT(v.Judge().waiting, HasSubstr("no step signal"));
  // A host that did not answer this poll is not judged on its old samples.
  w.BeginPoll();
  EXPECT_THAT(w.Judge().waiting, HasSubstr("no target answered"));
}

TEST(StepTimeWatchTest, ImplausibleSamplesAreDroppedAndCounted) {
  StepTimeWatch w(Config());
  const int64_t now = 1'000 * kS;
  profctl::v1::GetStepSignalResponse r = Steps(now - 30 * kS, now - 20 * kS, kS, now);
  auto add = [&](int64_t end, int64_t duration) {
    auto* s = r.add_samples();
    s->set_end_ns(end);
    s->set_duration_ns(duration);
  };
  add(now - 19 * kS, 0);            // no duration
  add(now - 19 * kS, -5);           // negative
  add(now - 19 * kS, 90'000 * kS);  // a step of 25 hours
  add(now + 3600 * kS, kS);         // ends an hour in the agent's future
  add(now - 25 * kS, kS);           // out of order
  add(now - 18 * kS, INT64_MAX);    // overflow bait
  w.BeginPoll();
  EXPECT_EQ(w.Add("h", r), 6);
  EXPECT_EQ(w.samples("h"), 10u);
  // An answer without a clock is refused whole.
  profctl::v1::GetStepSignalResponse no_clock = Steps(0, 10 * kS, kS);
  no_clock.set_now_ns(0);
  EXPECT_EQ(w.Add("other", no_clock), 10);
  EXPECT_EQ(w.samples("other"), 0u);
}

TEST(StepTimeWatchTest, MemoryIsBoundedAndOldOrForgottenHostsGo) {
  StepTimeWatch w(Config());
  w.BeginPoll();
  // 100,000 steps of 1 ms in one answer (70,000 of them within window + baseline): thinned to
  // at most kMaxSamplesPerHost, uniformly, so the baseline keeps its share and the job can still
  // be judged; the latest step stays.
  w.Add("h", Steps(0, 100 * kS, kMs));
  EXPECT_LE(w.samples("h"), StepTimeWatch::kMaxSamplesPerHost);
  EXPECT_GE(w.samples("h"), StepTimeWatch::kMaxSamplesPerHost / 2);
  EXPECT_EQ(w.SinceNs("h"), 100 * kS);
  TriggerJudgment j = w.Judge();
  EXPECT_EQ(j.hosts_judged, 1);
  EXPECT_DOUBLE_EQ(j.baseline_ns, 1.0 * kMs);
  // It slows to 2 ms steps for the last 10 s: still seen, however many steps there are.
  w.BeginPoll();
  w.Add("h", Steps(100 * kS, 110 * kS, 2 * kMs));
  j = w.Judge();
  EXPECT_TRUE(j.regressed);
  EXPECT_DOUBLE_EQ(j.observed_ns, 2.0 * kMs);
  EXPECT_DOUBLE_EQ(j.baseline_ns, 1.0 * kMs);
  // Samples older than window + baseline are dropped as time goes on.
  StepTimeWatch v(Config());
  v.BeginPoll();
  v.Add("h", Steps(0, 60 * kS, kS));
  EXPECT_EQ(v.samples("h"), 60u);
  v.Add("h", Steps(60 * kS, 100 * kS, kS));
  EXPECT_EQ(v.samples("h"), 70u);  // (30 s, 100 s]
  // A clock that jumped back (a restarted agent) starts over.
  v.Add("h", Steps(10 * kS, 20 * kS, kS));
  EXPECT_EQ(v.samples("h"), 10u);
  v.Add("g", Steps(0, 10 * kS, kS));
  v.Retain({"g"});
  EXPECT_EQ(v.hosts(), 1u);
  EXPECT_EQ(v.samples("h"), 0u);
  EXPECT_EQ(v.SinceNs("h"), 0);
}

// Signal hang: any answering host's stall fires; the longest stall names host and source; a stall
// of no time is dropped and counted; a host whose steps resumed (no stalls) does not fire.
TEST(StepTimeWatchTest, HangFiresOnTheLongestReportedStall) {
  TriggerConfig c = Config();
  c.signal = "hang";
  StepTimeWatch w(c);
  const int64_t t0 = 1'000'000 * kS;
  w.BeginPoll();
  w.Add("h0:1", Steps(t0, t0 + 60 * kS, 100 * kMs));
  w.Add("h1:1", Steps(t0, t0 + 60 * kS, 100 * kMs));
  TriggerJudgment j = w.Judge();
  EXPECT_FALSE(j.regressed);
  EXPECT_EQ(j.hosts_judged, 2);
  EXPECT_EQ(j.waiting, "");

  auto stalled = [&](int64_t for_ns, const std::string& source) {
    profctl::v1::GetStepSignalResponse r = Steps(t0 + 60 * kS, t0 + 60 * kS, 100 * kMs,
                                                 /*now=*/t0 + 60 * kS + for_ns);
    profctl::v1::StepStall* s = r.add_stalls();
    s->set_source(source);
    s->set_last_step_end_ns(t0 + 60 * kS);
    s->set_last_step_num(599);
    s->set_median_step_ns(100 * kMs);
    s->set_stalled_for_ns(for_ns);
    return r;
  };
  w.BeginPoll();
  EXPECT_EQ(w.Add("h0:1", stalled(5 * kS, "synthetic")), 0);
  EXPECT_EQ(w.Add("h1:1", stalled(7 * kS, "cupti:pid 42")), 0);
  j = w.Judge();
  EXPECT_TRUE(j.regressed);
  EXPECT_EQ(j.host, "h1:1");
  EXPECT_EQ(j.stall_source, "cupti:pid 42");
  EXPECT_EQ(j.stall_last_step, 599);
  EXPECT_EQ(j.stalled_for_ns, 7 * kS);
  EXPECT_DOUBLE_EQ(j.baseline_ns, 100.0 * kMs);
  EXPECT_DOUBLE_EQ(j.observed_ns, 7.0 * kS);

  // A lying stall (no time) is no verdict; a host that did not answer this poll is not judged.
  w.BeginPoll();
  EXPECT_EQ(w.Add("h0:1", stalled(0, "synthetic")), 1);
  j = w.Judge();
  EXPECT_FALSE(j.regressed);
  EXPECT_EQ(j.hosts_judged, 1);

  // Steps resumed: no stalls, no fire.
  w.BeginPoll();
  w.Add("h0:1", Steps(t0 + 60 * kS, t0 + 70 * kS, 100 * kMs));
  w.Add("h1:1", Steps(t0 + 60 * kS, t0 + 70 * kS, 100 * kMs));
  EXPECT_FALSE(w.Judge().regressed);

  w.BeginPoll();
  EXPECT_EQ(w.Judge().waiting, "no target answered");
}

}  // namespace
}  // namespace profctl::coordinator::schedule
