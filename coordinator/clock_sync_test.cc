#include "coordinator/clock_sync.h"

#include <deque>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/fake_agent.h"
#include "tests/fake_clock.h"

namespace profctl::coordinator {
namespace {

using ::profctl::testing::FakeAgent;
using ::profctl::testing::FakeClock;

TEST(ClockSyncTest, RecoversOffsetAndRoundTripWithSymmetricDelay) {
  FakeClock clock;
  clock.SetAutoAdvance(true);
  FakeAgent agent(&clock, {.clock_offset_ns = -42 * kNanosPerMilli + 17,
                           .one_way_delay_ns = 300 * kNanosPerMicro});
  auto client = agent.NewClient();
  absl::StatusOr<ClockOffset> o = EstimateClockOffset(*client, clock, 5, 1000);
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->offset_ns, -42 * kNanosPerMilli + 17);
  EXPECT_EQ(o->rtt_ns, 600 * kNanosPerMicro);
  EXPECT_EQ(o->samples, 5);
}

// Answers scripted readings, advancing the clock by scripted delays around each one.
class ScriptedClient final : public AgentClient {
 public:
  struct Step {
    int64_t before_ns;  // request travel time
    int64_t after_ns;   // reply travel time
    absl::Status error;
    int64_t processing_ns = 0;
  };
  ScriptedClient(FakeClock* clock, int64_t offset, std::deque<Step> steps)
      : clock_(clock), offset_(offset), steps_(std::move(steps)) {}
  absl::StatusOr<ClockReading> SyncClock(int64_t) override {
    Step s = steps_.front();
    steps_.pop_front();
    clock_->Advance(s.before_ns);
    const int64_t t1 = clock_->WallNs() + offset_;
    clock_->Advance(s.processing_ns + s.after_ns);
    if (!s.error.ok()) return s.error;
    return ClockReading{t1, t1 + s.processing_ns};
  }
  absl::StatusOr<AgentInfo> GetInfo(int64_t) override { return AgentInfo{}; }
  absl::StatusOr<CaptureReply> Capture(const CaptureArgs&, int64_t) override {
    return absl::UnimplementedError("");
  }
  absl::Status Cancel(const std::string&, int64_t) override { return absl::OkStatus(); }

 private:
  FakeClock* clock_;
  int64_t offset_;
  std::deque<Step> steps_;
};

TEST(ClockSyncTest, KeepsTheSampleWithTheSmallestRoundTrip) {
  FakeClock clock;
  // A congested first sample (asymmetric: 9 ms out, 1 ms back) would be 4 ms off; the quiet
  // second one gives the truth.
  ScriptedClient client(&clock, 10 * kNanosPerMilli,
                        {{9 * kNanosPerMilli, 1 * kNanosPerMilli, absl::OkStatus()},
                         {100'000, 100'000, absl::OkStatus(), 50'000},
                         {2 * kNanosPerMilli, 2 * kNanosPerMilli, absl::UnavailableError("x")}});
  absl::StatusOr<ClockOffset> o = EstimateClockOffset(client, clock, 3, 1000);
  ASSERT_TRUE(o.ok());
  EXPECT_EQ(o->offset_ns, 10 * kNanosPerMilli);
  EXPECT_EQ(o->rtt_ns, 200'000);  // agent processing excluded
  EXPECT_EQ(o->samples, 2);       // the failed sample is skipped
}

TEST(ClockSyncTest, AllSamplesFailingReturnsTheLastError) {
  FakeClock clock;
  ScriptedClient client(
      &clock, 0,
      {{1, 1, absl::UnavailableError("down")}, {1, 1, absl::DeadlineExceededError("slow")}});
  EXPECT_EQ(EstimateClockOffset(client, clock, 2, 1000).status().code(),
            absl::StatusCode::kDeadlineExceeded);
}

TEST(ClockSyncTest, ImpossibleAnswerIsRejected) {
  FakeClock clock;
  // Answers that it sent its reply before receiving the request.
  class Liar final : public AgentClient {
   public:
    absl::StatusOr<ClockReading> SyncClock(int64_t) override { return ClockReading{10, 5}; }
    absl::StatusOr<AgentInfo> GetInfo(int64_t) override { return AgentInfo{}; }
    absl::StatusOr<CaptureReply> Capture(const CaptureArgs&, int64_t) override {
      return absl::UnimplementedError("");
    }
    absl::Status Cancel(const std::string&, int64_t) override { return absl::OkStatus(); }
  } liar;
  absl::StatusOr<ClockOffset> o = EstimateClockOffset(liar, clock, 3, 1000);
  EXPECT_EQ(o.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(o.status().message(), ::testing::HasSubstr("impossible"));
}

}  // namespace
}  // namespace profctl::coordinator
