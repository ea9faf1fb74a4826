#include "agent/flight_recorder.h"

#include <memory>
#include <vector>

#include "agent/collectors/synthetic/synthetic_collector.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/fake_clock.h"
#include "tests/fake_executor.h"
#include "tests/status_matchers.h"

namespace profctl::agent {
namespace {

using ::profctl::testkit::FakeClock;
using ::profctl::testkit::FakeExecutor;
using ::profctl::testkit::IsOk;
using ::testing::ElementsAre;

// A collector that can keep no past (as tsl: a framework's server records only when asked).
class PastlessCollector final : public Collector {
 public:
  absl::string_view name() const override { return "pastless"; }
  absl::Status Prepare(const CaptureOptions&) override { return absl::OkStatus(); }
  absl::Status Start(int64_t) override { return absl::OkStatus(); }
  absl::Status Stop(int64_t) override { return absl::OkStatus(); }
  absl::Status Collect(tensorflow::profiler::XSpace*) override { return absl::OkStatus(); }
};

synthetic::SyntheticJobConfig Job(int64_t step_ms) {
  return *synthetic::ParseSyntheticJobConfig(
      absl::StrCat("world=4,rank=2,gpus=2,kernels_per_step=8,step_ms=", step_ms));
}

TEST(FlightRecorderTest, TicksKeepEveryRingUpToDateAndUnderItsShareUntilStopped) {
  FakeClock clock;
  FakeExecutor executor(&clock);
  SyntheticCollector synthetic(Job(100));
  PastlessCollector pastless;
  constexpr int64_t kCap = 8 << 20;
  absl::StatusOr<std::shared_ptr<FlightRecorder>> recorder =
      FlightRecorder::Start({{&clock, &synthetic}, {&clock, &pastless}}, &executor,
                            {.keep_ms = 5'000, .max_bytes = kCap, .tick_ms = 100});
  ASSERT_THAT(recorder, IsOk());
  EXPECT_THAT((*recorder)->recording(), ElementsAre("synthetic"));
  EXPECT_THAT((*recorder)->not_recording(), ElementsAre("pastless"));
  const int64_t started = clock.WallNs();
  executor.Advance(20 * kNanosPerSecond);
  const RecorderStats s = (*recorder)->stats();
  // 5 s of 100 ms steps, recorded by the ticks alone (no snapshot asked).
  EXPECT_NEAR(static_cast<double>(s.records), 50, 2);
  EXPECT_GT(s.evicted, 100);
  EXPECT_GE(s.since_ns, started + 14 * kNanosPerSecond);
  EXPECT_LE(s.bytes, kCap / 2);  // two collectors: half each
  (*recorder)->Stop();
  executor.Advance(20 * kNanosPerSecond);
  EXPECT_EQ((*recorder)->stats().evicted, s.evicted);
}

TEST(FlightRecorderTest, MemoryStaysUnderTheCapAtTenTimesTheRate) {
  FakeClock clock;
  FakeExecutor executor(&clock);
  SyntheticCollector normal(Job(50)), ten_x(Job(5));
  constexpr int64_t kCap = 1 << 20;
  absl::StatusOr<std::shared_ptr<FlightRecorder>> recorder =
      FlightRecorder::Start({{&clock, &normal}, {&clock, &ten_x}}, &executor,
                            {.keep_ms = 30'000, .max_bytes = kCap, .tick_ms = 100});
  ASSERT_THAT(recorder, IsOk());
  int64_t peak = 0;
  for (int i = 0; i < 600; ++i) {  // a minute
    executor.Advance(100 * kNanosPerMilli);
    peak = std::max(peak, (*recorder)->stats().bytes);
  }
  EXPECT_LE(peak, kCap);
  EXPECT_GT(peak, kCap * 9 / 10);  // the fast job filled its share
  EXPECT_GT(ten_x.recorder_stats().evicted, 0);
}

TEST(FlightRecorderTest, BoundsMustBePositive) {
  FakeClock clock;
  FakeExecutor executor(&clock);
  EXPECT_EQ(FlightRecorder::Start({}, &executor, {.keep_ms = 0, .max_bytes = 1}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace profctl::agent
