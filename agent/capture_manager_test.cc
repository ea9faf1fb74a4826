#include "agent/capture_manager.h"

#include <thread>

#include "agent/collectors/synthetic_collector.h"
#include "common/xspace.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/fake_clock.h"

namespace profctl::agent {
namespace {

using ::profctl::testing::FakeClock;
using ::testing::HasSubstr;

// A collector whose steps fail on request and that records the calls it got.
class FakeCollector final : public Collector {
 public:
  absl::string_view name() const override { return "fake"; }
  absl::Status Prepare(const CaptureOptions&) override { return Record("prepare"); }
  absl::Status Start(int64_t wall_ns) override {
    start_ns = wall_ns;
    return Record("start");
  }
  absl::Status Stop(int64_t wall_ns) override {
    stop_ns = wall_ns;
    return Record("stop");
  }
  absl::Status Collect(tensorflow::profiler::XSpace*) override { return Record("collect"); }

  std::string fail_at;
  std::vector<std::string> calls;
  int64_t start_ns = 0, stop_ns = 0;

 private:
  absl::Status Record(const std::string& step) {
    calls.push_back(step);
    return step == fail_at ? absl::InternalError("boom") : absl::OkStatus();
  }
};

class CaptureManagerTest : public ::testing::Test {
 protected:
  FakeClock clock_;
  SyntheticCollector synthetic_{SyntheticJobConfig{}};
  FakeCollector fake_;
  CaptureManager manager_{{&clock_, {&synthetic_, &fake_}},
                          {.max_duration_ms = 10'000, .host_name = "host-a"}};

  CaptureSpec Spec(int64_t start_in_ms, int64_t duration_ms) {
    return {"s1",
            start_in_ms == 0 ? 0 : clock_.WallNs() + start_in_ms * kNanosPerMilli,
            duration_ms,
            {}};
  }
};

TEST_F(CaptureManagerTest, WaitsForStartRecordsForDurationAndCollects) {
  const CaptureSpec spec = Spec(/*start_in_ms=*/500, /*duration_ms=*/1000);
  auto session = manager_.Begin(spec);
  ASSERT_TRUE(session.ok()) << session.status();
  CaptureResult result;
  std::thread runner([&] { result = (*session)->Run(); });
  clock_.AwaitWaiters(1);
  EXPECT_TRUE(fake_.calls == std::vector<std::string>{"prepare"});  // not started early
  clock_.Advance(500 * kNanosPerMilli);
  clock_.AwaitWaiters(1);  // now recording
  EXPECT_EQ(fake_.start_ns, spec.start_at_ns);
  clock_.Advance(1000 * kNanosPerMilli);
  runner.join();

  EXPECT_FALSE(result.cancelled);
  EXPECT_EQ(result.start_ns, spec.start_at_ns);
  EXPECT_EQ(result.stop_ns, spec.start_at_ns + 1000 * kNanosPerMilli);
  EXPECT_THAT(fake_.calls, ::testing::ElementsAre("prepare", "start", "stop", "collect"));
  EXPECT_THAT(result.space.hostnames(), ::testing::ElementsAre("host-a"));
  EXPECT_NE(xspace::FindPlane(result.space, "/host:CPU"), nullptr);
  EXPECT_NE(xspace::FindPlane(result.space, "/device:GPU:0"), nullptr);
  const xspace::XPlane* env = xspace::FindPlane(result.space, xspace::kTaskEnvPlaneName);
  ASSERT_NE(env, nullptr);
  ASSERT_EQ(env->stats_size(), 2);
  EXPECT_EQ(env->stats(0).int64_value(), result.start_ns);
  EXPECT_EQ(env->stats(1).int64_value(), result.stop_ns);
  EXPECT_TRUE(result.space.errors().empty());
}

TEST_F(CaptureManagerTest, OneSessionAtATime) {
  auto first = manager_.Begin(Spec(0, 100));
  ASSERT_TRUE(first.ok());
  EXPECT_TRUE(manager_.busy());
  CaptureSpec second = Spec(0, 100);
  second.session_id = "s2";
  absl::StatusOr<std::unique_ptr<CaptureManager::Session>> rejected = manager_.Begin(second);
  EXPECT_EQ(rejected.status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_THAT(rejected.status().message(), HasSubstr("'s1' is running"));
  first->reset();
  EXPECT_FALSE(manager_.busy());
  EXPECT_TRUE(manager_.Begin(second).ok());
}

TEST_F(CaptureManagerTest, RejectsBadRequests) {
  auto code = [&](CaptureSpec spec) { return manager_.Begin(std::move(spec)).status(); };
  EXPECT_EQ(code(Spec(0, 0)).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(code(Spec(0, 10'001)).message(), HasSubstr("outside [1, 10000]"));
  EXPECT_THAT(code(Spec(61'000, 10)).message(), HasSubstr("in the future"));
  CaptureSpec bad_id = Spec(0, 10);
  bad_id.session_id = "../x";
  EXPECT_THAT(code(bad_id).message(), HasSubstr("session id '../x'"));
  CaptureSpec bad_collector = Spec(0, 10);
  bad_collector.collectors = {"cupti"};
  EXPECT_THAT(
      code(bad_collector).message(),
      HasSubstr("collector 'cupti' is not enabled on this agent (enabled: synthetic, fake)"));
  EXPECT_FALSE(manager_.busy());
}

TEST_F(CaptureManagerTest, CancelStopsEarlyAndKeepsWhatWasRecorded) {
  auto session = manager_.Begin(Spec(0, 5000));
  ASSERT_TRUE(session.ok());
  CaptureResult result;
  std::thread runner([&] { result = (*session)->Run(); });
  clock_.AwaitWaiters(1);
  clock_.Advance(300 * kNanosPerMilli);
  EXPECT_EQ(manager_.Cancel("other").code(), absl::StatusCode::kNotFound);
  ASSERT_TRUE(manager_.Cancel("s1").ok());
  runner.join();
  EXPECT_TRUE(result.cancelled);
  EXPECT_EQ(result.stop_ns - result.start_ns, 300 * kNanosPerMilli);
  EXPECT_THAT(result.space.warnings(), ::testing::Contains(HasSubstr("cancelled after 300 ms")));
  EXPECT_THAT(fake_.calls, ::testing::ElementsAre("prepare", "start", "stop", "collect"));
}

TEST_F(CaptureManagerTest, CancelActiveStopsWhateverRuns) {
  manager_.CancelActive();  // nothing running: no effect
  auto session = manager_.Begin(Spec(0, 5000));
  ASSERT_TRUE(session.ok());
  CaptureResult result;
  std::thread runner([&] { result = (*session)->Run(); });
  clock_.AwaitWaiters(1);
  clock_.Advance(40 * kNanosPerMilli);
  manager_.CancelActive();
  runner.join();
  EXPECT_TRUE(result.cancelled);
  EXPECT_EQ(result.stop_ns - result.start_ns, 40 * kNanosPerMilli);
}

TEST_F(CaptureManagerTest, CancelBeforeStartRecordsNothing) {
  auto session = manager_.Begin(Spec(1000, 100));
  ASSERT_TRUE(session.ok());
  CaptureResult result;
  std::thread runner([&] { result = (*session)->Run(); });
  clock_.AwaitWaiters(1);
  ASSERT_TRUE(manager_.Cancel("s1").ok());
  runner.join();
  EXPECT_TRUE(result.cancelled);
  EXPECT_THAT(fake_.calls, ::testing::ElementsAre("prepare"));
  EXPECT_EQ(xspace::CountEvents(result.space), 0);
}

TEST_F(CaptureManagerTest, FailingCollectorIsReportedAndOthersStillDeliver) {
  fake_.fail_at = "start";
  clock_.SetAutoAdvance(true);
  auto session = manager_.Begin(Spec(0, 200));
  ASSERT_TRUE(session.ok());
  CaptureResult result = (*session)->Run();
  EXPECT_THAT(result.space.errors(),
              ::testing::ElementsAre(HasSubstr("collector fake: start failed: INTERNAL: boom")));
  EXPECT_THAT(fake_.calls, ::testing::ElementsAre("prepare", "start"));  // skipped afterwards
  EXPECT_GT(xspace::CountEvents(result.space), 0);  // the synthetic collector's events
}

TEST_F(CaptureManagerTest, LateStartBeginsAtOnceWithAWarning) {
  clock_.SetAutoAdvance(true);
  CaptureSpec spec = Spec(0, 50);
  spec.start_at_ns = clock_.WallNs() - 20 * kNanosPerMilli;
  auto session = manager_.Begin(spec);
  ASSERT_TRUE(session.ok());
  CaptureResult result = (*session)->Run();
  EXPECT_EQ(result.start_ns, spec.start_at_ns + 20 * kNanosPerMilli);
  EXPECT_THAT(result.space.warnings(),
              ::testing::Contains(HasSubstr("20000 us after the requested start")));
}

}  // namespace
}  // namespace profctl::agent
