#include "coordinator/engine/clock_sync.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/status_matchers.h"

using ::profctl::testkit::IsOk;

namespace profctl::coordinator {
namespace {

using ::testing::HasSubstr;

constexpr int64_t kT = 1'767'225'600LL * kNanosPerSecond;

// A reading for an agent `offset` ahead, with `up`/`down` one-way delays and `processing`.
ClockReading Reading(int64_t offset, int64_t up, int64_t down, int64_t processing = 0) {
  const int64_t t1 = kT + up + offset;
  return {t1, t1 + processing, kT, kT + up + processing + down};
}

TEST(ClockSyncTest, SymmetricPathGivesTheExactOffset) {
  absl::StatusOr<ClockOffset> o = OffsetFromReading(Reading(-42 * kNanosPerMilli + 17, 300, 300));
  ASSERT_THAT(o, IsOk());
  EXPECT_EQ(o->offset_ns, -42 * kNanosPerMilli + 17);
  EXPECT_EQ(o->rtt_ns, 600);
  EXPECT_EQ(o->uncertainty_ns(), 300);
}

TEST(ClockSyncTest, AsymmetricPathIsOffByHalfTheAsymmetryWithinTheUncertainty) {
  const int64_t up = 10 * kNanosPerMilli;
  absl::StatusOr<ClockOffset> o = OffsetFromReading(Reading(5 * kNanosPerSecond, up, 0));
  ASSERT_THAT(o, IsOk());
  EXPECT_EQ(o->offset_ns, 5 * kNanosPerSecond + up / 2);
  EXPECT_LE(std::llabs(o->offset_ns - 5 * kNanosPerSecond), o->uncertainty_ns());
}

TEST(ClockSyncTest, ProcessingTimeIsNotPartOfTheRoundTrip) {
  absl::StatusOr<ClockOffset> o = OffsetFromReading(Reading(0, 100, 100, 5000));
  ASSERT_THAT(o, IsOk());
  EXPECT_EQ(o->rtt_ns, 200);
  EXPECT_EQ(o->offset_ns, 0);
}

TEST(ClockSyncTest, SamplerKeepsTheSmallestRoundTripAndCounts) {
  ClockSampler s;
  EXPECT_TRUE(s.empty());
  s.Add(*OffsetFromReading(Reading(1000, 5000, 100)));
  s.Add(*OffsetFromReading(Reading(1000, 200, 200)));
  s.Add(*OffsetFromReading(Reading(1000, 100, 9000)));
  EXPECT_EQ(s.best().rtt_ns, 400);
  EXPECT_EQ(s.best().offset_ns, 1000);
  EXPECT_EQ(s.best().samples, 3);
}

TEST(ClockSyncTest, ImpossibleAndAbsurdAnswersAreRejected) {
  ClockReading send_before_receive = Reading(0, 100, 100);
  send_before_receive.send_ns = send_before_receive.receive_ns - 1;
  EXPECT_THAT(OffsetFromReading(send_before_receive).status().message(), HasSubstr("impossible"));
  EXPECT_THAT(OffsetFromReading(Reading(0, 100, 100, /*processing=*/0)).status().code(),
              absl::StatusCode::kOk);
  ClockReading long_processing = Reading(0, 10, 10);
  long_processing.send_ns += 1000;  // longer than the round trip
  EXPECT_EQ(OffsetFromReading(long_processing).status().code(), absl::StatusCode::kDataLoss);
  // Stamps that would overflow int64 arithmetic.
  for (int64_t bad : {INT64_MIN, int64_t{-1}, INT64_MAX, kMaxStampNs + 1}) {
    ClockReading r = Reading(0, 10, 10);
    r.receive_ns = bad;
    r.send_ns = bad;
    absl::StatusOr<ClockOffset> o = OffsetFromReading(r);
    EXPECT_EQ(o.status().code(), absl::StatusCode::kDataLoss) << bad;
    EXPECT_THAT(o.status().message(), HasSubstr("outside"));
  }
  absl::StatusOr<ClockOffset> far =
      OffsetFromReading(Reading(400LL * 24 * 3600 * kNanosPerSecond, 10, 10));
  EXPECT_THAT(far.status().message(), HasSubstr("more than a year"));
  ClockReading backwards = Reading(0, 10, 10);
  backwards.local_receive_ns = backwards.local_send_ns - 1;
  EXPECT_THAT(OffsetFromReading(backwards).status().message(), HasSubstr("before the request"));
}

}  // namespace
}  // namespace profctl::coordinator
