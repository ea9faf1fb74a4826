// The engine's pure decisions, without a session: retries (retry_policy.h), the prepare budget
// and the start's lead (start_policy.h), and a saved host's recording verdict (saved_hosts.h).
#include <cstdint>
#include <vector>

#include "common/clock.h"
#include "coordinator/engine/retry_policy.h"
#include "coordinator/engine/saved_hosts.h"
#include "coordinator/engine/start_policy.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/status_matchers.h"
#include "tests/test_time.h"

namespace profctl::coordinator {
namespace {

using ::profctl::testkit::IsOk;
using ::profctl::testkit::StatusIs;
using ::testing::HasSubstr;

using ::profctl::test_time::kMs;

TEST(RetryPolicyTest, OnlyTransientCodesAreRetryable) {
  EXPECT_TRUE(Retryable(absl::StatusCode::kUnavailable));
  EXPECT_TRUE(Retryable(absl::StatusCode::kDataLoss));
  EXPECT_FALSE(Retryable(absl::StatusCode::kInvalidArgument));
  EXPECT_FALSE(Retryable(absl::StatusCode::kUnauthenticated));
  EXPECT_FALSE(Retryable(absl::StatusCode::kCancelled));
}

TEST(RetryPolicyTest, BackoffDoublesUpToTheCapWithJitterInTheUpperHalf) {
  RetryBackoff backoff(100, 400, /*seed=*/7);
  for (int round = 0; round < 50; ++round) {
    const int64_t first = backoff.NextNs(1);
    EXPECT_GE(first, 50 * kMs);
    EXPECT_LE(first, 100 * kMs);
    const int64_t second = backoff.NextNs(2);
    EXPECT_GE(second, 100 * kMs);
    EXPECT_LE(second, 200 * kMs);
    const int64_t capped = backoff.NextNs(10);
    EXPECT_GE(capped, 200 * kMs);
    EXPECT_LE(capped, 400 * kMs);
  }
}

TEST(RetryPolicyTest, BackoffIsReproducibleFromItsSeed) {
  RetryBackoff a(100, 2000, 42), b(100, 2000, 42);
  for (int attempt = 1; attempt < 8; ++attempt) EXPECT_EQ(a.NextNs(attempt), b.NextNs(attempt));
}

TEST(RetryPolicyTest, PrepareIsRetriedOnlyForAnAgentThatIsNotThere) {
  EXPECT_TRUE(PrepareRetryWanted(absl::StatusCode::kUnavailable, false, 1, 3));
  EXPECT_FALSE(PrepareRetryWanted(absl::StatusCode::kUnavailable, false, 4, 3));  // spent
  EXPECT_FALSE(PrepareRetryWanted(absl::StatusCode::kUnavailable, true, 1, 3));   // cancelled
  EXPECT_FALSE(PrepareRetryWanted(absl::StatusCode::kPermissionDenied, false, 1, 3));
  EXPECT_FALSE(PrepareRetryWanted(absl::StatusCode::kDeadlineExceeded, false, 1, 3));
}

TEST(RetryPolicyTest, PrepareRetryMustLandWhereTheHostCanStillJoin) {
  const PrepareRetryWindow fail_policy{.preparing = true,
                                       .late_capture = false,
                                       .prepare_deadline = 100,
                                       .window_end = 500,
                                       .deadline = 1000};
  EXPECT_TRUE(PrepareRetryFits(99, fail_policy));
  EXPECT_FALSE(PrepareRetryFits(100, fail_policy));  // past the budget with --late=fail
  PrepareRetryWindow capture = fail_policy;
  capture.late_capture = true;
  EXPECT_TRUE(PrepareRetryFits(400, capture));    // joins late
  EXPECT_FALSE(PrepareRetryFits(1000, capture));  // the deadline
  PrepareRetryWindow after = capture;
  after.preparing = false;
  EXPECT_TRUE(PrepareRetryFits(499, after));
  EXPECT_FALSE(PrepareRetryFits(500, after));  // the window closed
}

TEST(RetryPolicyTest, AFailedCaptureThatMayHaveReachedTheAgentIsFetched) {
  const CaptureFailureVerdict v = JudgeCaptureFailure(
      {.code = absl::StatusCode::kUnavailable, .fetching = false, .can_fetch = true});
  EXPECT_TRUE(v.retryable);
  EXPECT_TRUE(v.agent_may_hold);
  EXPECT_TRUE(v.fetch);
  EXPECT_TRUE(v.capture_error);
  // Without Fetch (a TSL peer), it records again.
  EXPECT_FALSE(
      JudgeCaptureFailure({.code = absl::StatusCode::kUnavailable, .can_fetch = false}).fetch);
}

TEST(RetryPolicyTest, BusyAgentDidNotTakeTheSession) {
  const CaptureFailureVerdict v =
      JudgeCaptureFailure({.code = absl::StatusCode::kAlreadyExists, .can_fetch = true});
  EXPECT_TRUE(v.retryable);
  EXPECT_FALSE(v.agent_may_hold);
  EXPECT_FALSE(v.fetch);
}

TEST(RetryPolicyTest, AFetchThatFindsNothingRecordsAgain) {
  const CaptureFailureVerdict v = JudgeCaptureFailure({.code = absl::StatusCode::kNotFound,
                                                       .fetching = true,
                                                       .agent_may_hold = true,
                                                       .can_fetch = true});
  EXPECT_TRUE(v.retryable);
  EXPECT_FALSE(v.agent_may_hold);
  EXPECT_FALSE(v.fetch);
  EXPECT_FALSE(v.capture_error);  // the Capture's error still explains the host's failure
}

TEST(RetryPolicyTest, OverTheAgentsMemoryCapIsRetriedOnlyBeforeTheTraceStarted) {
  EXPECT_TRUE(JudgeCaptureFailure({.code = absl::StatusCode::kResourceExhausted}).retryable);
  EXPECT_FALSE(
      JudgeCaptureFailure({.code = absl::StatusCode::kResourceExhausted, .header_seen = true})
          .retryable);
}

TEST(RetryPolicyTest, RecordingAgainOnlyWhileTheWindowCanBeCaught) {
  EXPECT_EQ(RecordCutoff(profctl::v1::LATE_POLICY_FAIL, 100, 900, 5), 105);
  EXPECT_EQ(RecordCutoff(profctl::v1::LATE_POLICY_CAPTURE, 100, 900, 5), 900);
  EXPECT_TRUE(CaptureRetryFits(500, /*fetch=*/false, /*cancelled=*/false, 1000, 900));
  EXPECT_FALSE(CaptureRetryFits(950, false, false, 1000, 900));  // window over: record no more
  EXPECT_TRUE(CaptureRetryFits(950, /*fetch=*/true, false, 1000, 900));  // fetching still works
  EXPECT_FALSE(CaptureRetryFits(500, false, /*cancelled=*/true, 1000, 900));
  EXPECT_FALSE(CaptureRetryFits(1000, true, false, 1000, 900));  // the deadline
}

TEST(RetryPolicyTest, RetriesOfAnAbsentAgentShareWhatIsLeftOfTheWindowInDoublingShares) {
  // 2.8 s left, 3 retries: 1/15, 2/15, 4/15 of it; the last lands with 8/15 left to record.
  EXPECT_EQ(SpreadRetryNs(2800 * kMs, 3), 2800 * kMs / 15);
  EXPECT_EQ(SpreadRetryNs(2800 * kMs, 1), 2800 * kMs / 3);
  EXPECT_EQ(SpreadRetryNs(0, 3), 0);  // nothing left: the plain backoff
  EXPECT_EQ(SpreadRetryNs(-5, 3), 0);
  EXPECT_EQ(SpreadRetryNs(2800 * kMs, 0), 0);
  EXPECT_GE(SpreadRetryNs(int64_t{1} << 62, 1000), 0);  // no overflow
  EXPECT_TRUE(SpreadRetryWanted(absl::StatusCode::kUnavailable));
  EXPECT_FALSE(SpreadRetryWanted(absl::StatusCode::kAlreadyExists));  // busy: plain backoff
  EXPECT_FALSE(SpreadRetryWanted(absl::StatusCode::kDataLoss));
  // The spread is a floor under the plain backoff, jittered to 75..100% and not capped.
  RetryBackoff backoff(100, 400, /*seed=*/7);
  for (int round = 0; round < 50; ++round) {
    const int64_t wait = backoff.NextNs(1, 1000 * kMs);
    EXPECT_GE(wait, 750 * kMs);
    EXPECT_LE(wait, 1000 * kMs);
    const int64_t plain = backoff.NextNs(3, 10 * kMs);
    EXPECT_GE(plain, 200 * kMs);
    EXPECT_LE(plain, 400 * kMs);
  }
}

PrepareBudgetRules Rules() {
  return {.min_budget_ns = 250 * kMs, .max_budget_ns = 10'000 * kMs, .min_quiet_ns = 50 * kMs};
}

TEST(StartPolicyTest, HalfTheHostsReadySetTheBudgetToFourTimesTheirMedian) {
  const std::vector<int64_t> ready = {100 * kMs, 120 * kMs};
  const PrepareBudget b = NextPrepareBudget(
      {.ready_ns = &ready, .hosts = 4, .started = 0, .now = 120 * kMs}, 10'000 * kMs, Rules());
  EXPECT_EQ(b.cap, 480 * kMs);  // 4 x the median (the upper middle of two)
  EXPECT_EQ(b.deadline, b.cap);
}

TEST(StartPolicyTest, TheBudgetIsClampedAndNeverGrows) {
  const std::vector<int64_t> fast = {1 * kMs};
  EXPECT_EQ(NextPrepareBudget({.ready_ns = &fast, .hosts = 2}, 10'000 * kMs, Rules()).cap,
            250 * kMs);  // the floor
  EXPECT_EQ(NextPrepareBudget({.ready_ns = &fast, .hosts = 2}, 100 * kMs, Rules()).cap,
            100 * kMs);  // an explicit smaller cap stays
}

TEST(StartPolicyTest, QuietRuleEndsPreparingOnceNinetyPercentAreReady) {
  std::vector<int64_t> ready(9, 10 * kMs);
  ready.back() = 400 * kMs;
  PrepareProgress p{.ready_ns = &ready,
                    .hosts = 10,
                    .started = 0,
                    .now = 400 * kMs,
                    .quiet_rule = true,
                    .one_on_its_way = true};
  // 90 %: the cap is 2 x the slowest (800 ms); a quarter of the last one's time is 100 ms.
  PrepareBudget b = NextPrepareBudget(p, 10'000 * kMs, Rules());
  EXPECT_EQ(b.cap, 800 * kMs);
  EXPECT_EQ(b.deadline, 500 * kMs);
  p.one_on_its_way = false;  // nobody left has answered anything: the floor only
  EXPECT_EQ(NextPrepareBudget(p, 10'000 * kMs, Rules()).deadline, 450 * kMs);
  p.quiet_rule = false;  // --late=fail waits for the budget
  EXPECT_EQ(NextPrepareBudget(p, 10'000 * kMs, Rules()).deadline, 800 * kMs);
}

TEST(StartPolicyTest, AHostOnItsWayIsProjectedFromItsLastRoundTrip) {
  // Answered at 1.2 s after a 600 ms round trip, 2 samples to go: 1.2 + 2 x 750 ms.
  EXPECT_EQ(ProjectedReadyNs(1200 * kMs, 600 * kMs, 2), 2700 * kMs);
  EXPECT_EQ(ProjectedReadyNs(1200 * kMs, 600 * kMs, 0), 1200 * kMs);
  EXPECT_EQ(ProjectedReadyNs(0, 600 * kMs, 2), 0);  // nothing answered yet
  EXPECT_THAT(PrepareProgressText(false, 0, 0, 0, 2000 * kMs),
              HasSubstr("GetInfo unanswered after 2000 ms"));
  EXPECT_THAT(PrepareProgressText(true, 600 * kMs, 0, 600 * kMs, 1700 * kMs),
              HasSubstr("clock sync unanswered after 1700 ms"));
  EXPECT_THAT(PrepareProgressText(true, 600 * kMs, 2, 610 * kMs, 1900 * kMs),
              HasSubstr("2 sample(s) answered, each answer took 610 ms"));
}

TEST(StartPolicyTest, LeadCoversTheRoundTripAndSendingEveryCapture) {
  EXPECT_EQ(StartLeadNs(100 * kMs, 1 * kMs, 10, 1 * kMs), 100 * kMs);  // the floor
  EXPECT_EQ(StartLeadNs(100 * kMs, 40 * kMs, 1000, 50 * kNanosPerMicro),
            80 * kMs + 1000 * 100 * kNanosPerMicro);
  EXPECT_EQ(StartLeadNs(0, 0, 1000, 0), 1000 * 20 * kNanosPerMicro);  // 20 us a host at least
}

TEST(StartPolicyTest, CaptureCannotStartWithoutEnoughHostsOrTime) {
  EXPECT_THAT(CheckCaptureCanStart(3, 4, 3, 100, 200), IsOk());
  EXPECT_THAT(CheckCaptureCanStart(2, 4, 3, 100, 200),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("only 2 of 4 hosts")));
  EXPECT_THAT(CheckCaptureCanStart(4, 4, 0, 200 + 5 * kMs, 200),
              StatusIs(absl::StatusCode::kDeadlineExceeded, HasSubstr("end 5 ms after it")));
}

TEST(SavedHostsTest, RecordingVerdicts) {
  const RecordingRules rules{.requested_ns = 1000 * kMs, .tolerance_ns = 5 * kMs};
  profctl::v1::HostResult r;
  r.set_status(profctl::v1::HOST_STATUS_OK);
  r.set_agent_start_ns(0);
  r.set_agent_stop_ns(1003 * kMs);  // within the tolerance
  EXPECT_FALSE(ClassifyRecording(r, profctl::v1::CANCEL_REASON_UNSPECIFIED, rules));
  EXPECT_EQ(r.recording(), profctl::v1::RECORDING_COMPLETE);
  EXPECT_EQ(r.status(), profctl::v1::HOST_STATUS_OK);

  r.set_agent_stop_ns(400 * kMs);
  r.set_cancelled(true);
  EXPECT_TRUE(ClassifyRecording(r, profctl::v1::CANCEL_REASON_AGENT_SHUTDOWN, rules));
  EXPECT_EQ(r.recording(), profctl::v1::RECORDING_TRUNCATED);
  EXPECT_EQ(r.truncated_by(), profctl::v1::TRUNCATED_BY_AGENT_SHUTDOWN);
  EXPECT_EQ(r.status(), profctl::v1::HOST_STATUS_INCOMPLETE);
  EXPECT_THAT(r.recording_detail(), HasSubstr("recorded 400.000 of 1000.000 ms"));

  r.set_agent_stop_ns(1200 * kMs);  // more than 10 % over
  EXPECT_TRUE(ClassifyRecording(r, profctl::v1::CANCEL_REASON_UNSPECIFIED, rules));
  EXPECT_EQ(r.recording(), profctl::v1::RECORDING_OVERLONG);
}

TEST(SavedHostsTest, ShortfallsMakeAWholeWindowPartialNamingEachWithItsAmount) {
  const RecordingRules rules{.requested_ns = 1000 * kMs, .tolerance_ns = 5 * kMs};
  profctl::v1::HostResult r;
  r.set_status(profctl::v1::HOST_STATUS_OK);
  r.set_agent_start_ns(0);
  r.set_agent_stop_ns(1000 * kMs);
  EXPECT_FALSE(ClassifyRecording(r, profctl::v1::CANCEL_REASON_UNSPECIFIED, rules));
  EXPECT_EQ(r.status(), profctl::v1::HOST_STATUS_OK);
  EXPECT_TRUE(r.recording_detail().empty());

  profctl::v1::Shortfall* batches = r.add_shortfalls();
  batches->set_kind(profctl::v1::SHORTFALL_KIND_DROPPED_RECORD_BATCHES);
  batches->set_amount(144'000'000);
  batches->set_detail("cupti: 144000000 bytes of CUDA record batches dropped");
  profctl::v1::Shortfall* kernels = r.add_shortfalls();
  kernels->set_kind(profctl::v1::SHORTFALL_KIND_UNLAUNCHED_WORK);
  kernels->set_amount(600'000);
  kernels->set_detail("cupti: 600000 kernels without a recorded launch");
  EXPECT_TRUE(ClassifyRecording(r, profctl::v1::CANCEL_REASON_UNSPECIFIED, rules));
  EXPECT_EQ(r.status(), profctl::v1::HOST_STATUS_INCOMPLETE);
  EXPECT_EQ(r.recording(), profctl::v1::RECORDING_MISSING_DATA);
  EXPECT_EQ(r.recording_detail(),
            "missing data: cupti: 144000000 bytes of CUDA record batches dropped; cupti: 600000 "
            "kernels without a recorded launch");
}

TEST(SavedHostsTest, ATruncatedRecordingSaysTheClockStepThatShortenedIt) {
  const RecordingRules rules{.requested_ns = 10'000 * kMs, .tolerance_ns = 5 * kMs};
  profctl::v1::HostResult r;
  r.set_status(profctl::v1::HOST_STATUS_OK);
  r.set_agent_start_ns(0);
  r.set_agent_stop_ns(7000 * kMs);
  profctl::v1::Shortfall* step = r.add_shortfalls();
  step->set_kind(profctl::v1::SHORTFALL_KIND_CLOCK_STEP);
  step->set_amount(3000 * kMs);
  step->set_detail("the agent's wall clock stepped 3.000 s back during the window");
  EXPECT_TRUE(ClassifyRecording(r, profctl::v1::CANCEL_REASON_UNSPECIFIED, rules));
  EXPECT_EQ(r.recording(), profctl::v1::RECORDING_TRUNCATED);
  EXPECT_THAT(r.recording_detail(),
              HasSubstr("recorded 7000.000 of 10000.000 ms (the agent stopped early without "
                        "saying why); missing data: the agent's wall clock stepped 3.000 s back "
                        "during the window"));
}

}  // namespace
}  // namespace profctl::coordinator
