#include "coordinator/engine/step_signal.h"

#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "coordinator/engine/capture_engine.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "synthetic/synthetic_job.h"
#include "tests/fake_agent.h"
#include "tests/fake_clock.h"
#include "tests/fake_executor.h"
#include "tests/memory_sink.h"
#include "tests/temp_dir.h"
#include "tests/test_time.h"

namespace profctl::coordinator {
namespace {

using ::profctl::testkit::FakeAgent;
using ::profctl::testkit::FakeAgentBehavior;
using ::profctl::testkit::FakeAgentFactory;
using ::profctl::testkit::FakeClock;
using ::profctl::testkit::FakeExecutor;
using ::profctl::testkit::MemorySink;
using ::profctl::v1::SessionManifest;
using ::testing::ContainsRegex;
using ::testing::HasSubstr;
using ::testing::Not;

using ::profctl::test_time::kMs;

TEST(StepSignalAtEndTest, ReducesAnAnswerPerSource) {
  v1::GetStepSignalResponse r;
  r.set_now_ns(10'000 * kMs);
  const auto sample = [&r](const std::string& source, int64_t end_ms, int64_t dur_ms, int64_t n) {
    v1::StepSignalSample* s = r.add_samples();
    s->set_source(source);
    s->set_end_ns(end_ms * kMs);
    s->set_duration_ns(dur_ms * kMs);
    s->set_step_num(n);
  };
  sample("synthetic", 9'700, 100, 7);
  sample("synthetic", 9'800, 100, 8);
  sample("synthetic", 9'900, 120, 9);
  sample("cupti pid 1 rank 1", 9'000, 90, 3);  // two steps: no median of its own
  sample("cupti pid 1 rank 1", 9'100, 90, 4);
  v1::StepStall* stall = r.add_stalls();
  stall->set_source("cupti pid 1 rank 1");
  stall->set_last_step_end_ns(9'100 * kMs);
  stall->set_last_step_num(4);
  stall->set_median_step_ns(95 * kMs);
  stall->set_stalled_for_ns(900 * kMs);

  const v1::StepSignalAtEnd at = StepSignalAtEndOf(r);
  EXPECT_TRUE(at.answered());
  EXPECT_EQ(at.now_ns(), 10'000 * kMs);
  ASSERT_EQ(at.sources_size(), 2);
  EXPECT_EQ(at.sources(0).source(), "cupti pid 1 rank 1");
  EXPECT_TRUE(at.sources(0).stalled());
  EXPECT_EQ(at.sources(0).median_step_ns(), 95 * kMs);  // the stall's
  EXPECT_EQ(at.sources(0).stalled_for_ns(), 900 * kMs);
  EXPECT_EQ(at.sources(0).last_step_num(), 4);
  EXPECT_EQ(at.sources(1).source(), "synthetic");
  EXPECT_FALSE(at.sources(1).stalled());
  EXPECT_EQ(at.sources(1).median_step_ns(), 100 * kMs);
  EXPECT_EQ(at.sources(1).last_step_end_ns(), 9'900 * kMs);
  EXPECT_EQ(at.sources(1).samples(), 3u);

  const std::optional<analysis::StepSignal> signal = HangSignalOf(at);
  ASSERT_TRUE(signal.has_value());
  EXPECT_EQ(signal->asked_ns, 10'000 * kMs);
  ASSERT_EQ(signal->sources.size(), 2u);
  EXPECT_TRUE(signal->sources[0].stalled);
  EXPECT_EQ(signal->sources[1].last_step_end_ns, 9'900 * kMs);

  // No answer: said, and no signal for the verdict.
  const v1::StepSignalAtEnd none =
      StepSignalAtEndOf(absl::UnimplementedError("GetStepSignal: this peer keeps no step signal"));
  EXPECT_FALSE(none.answered());
  EXPECT_THAT(none.error(), HasSubstr("UNIMPLEMENTED"));
  EXPECT_FALSE(HangSignalOf(none).has_value());
  // A source with no step seen has no last step end.
  v1::StepSignalAtEnd empty;
  empty.set_answered(true);
  empty.add_sources()->set_source("synthetic");
  EXPECT_EQ(HangSignalOf(empty)->sources[0].last_step_end_ns, std::numeric_limits<int64_t>::min());
}

TEST(StepSignalAtEndTest, TakesTheAgentsSummariesWhereItSentThem) {
  v1::GetStepSignalResponse r;
  r.set_now_ns(10'000 * kMs);
  const auto summary = [&r](const std::string& source, int64_t end_ms, int64_t median_ms, int64_t n,
                            uint32_t steps) {
    v1::StepSourceSummary* s = r.add_summaries();
    s->set_source(source);
    s->set_last_step_end_ns(end_ms * kMs);
    s->set_median_step_ns(median_ms * kMs);
    s->set_last_step_num(n);
    s->set_steps(steps);
  };
  summary("synthetic", 9'900, 100, 9, 16);
  summary("cupti pid 1 rank 1", 9'100, 0, 4, 2);  // two steps: no median yet
  summary("cupti pid 2 rank 2", 1'000, 95, 40, 16);
  v1::StepStall* stall = r.add_stalls();
  stall->set_source("cupti pid 2 rank 2");
  stall->set_last_step_end_ns(1'000 * kMs);
  stall->set_last_step_num(40);
  stall->set_median_step_ns(95 * kMs);
  stall->set_stalled_for_ns(9'000 * kMs);
  // Samples beside summaries (a peer mixing both) are not read: the summaries are the agent's.
  v1::StepSignalSample* s = r.add_samples();
  s->set_source("synthetic");
  s->set_end_ns(9'950 * kMs);
  s->set_duration_ns(500 * kMs);
  s->set_step_num(10);

  const v1::StepSignalAtEnd at = StepSignalAtEndOf(r);
  ASSERT_TRUE(at.answered());
  ASSERT_EQ(at.sources_size(), 3);
  EXPECT_EQ(at.sources(0).source(), "cupti pid 1 rank 1");
  EXPECT_EQ(at.sources(0).median_step_ns(), 0);
  EXPECT_EQ(at.sources(0).samples(), 2u);
  EXPECT_EQ(at.sources(0).last_step_num(), 4);
  EXPECT_FALSE(at.sources(0).stalled());
  EXPECT_EQ(at.sources(1).source(), "cupti pid 2 rank 2");
  EXPECT_TRUE(at.sources(1).stalled());
  EXPECT_EQ(at.sources(1).stalled_for_ns(), 9'000 * kMs);
  EXPECT_EQ(at.sources(1).median_step_ns(), 95 * kMs);
  EXPECT_EQ(at.sources(2).source(), "synthetic");
  EXPECT_EQ(at.sources(2).median_step_ns(), 100 * kMs);
  EXPECT_EQ(at.sources(2).last_step_end_ns(), 9'900 * kMs);
  EXPECT_EQ(at.sources(2).last_step_num(), 9);
  EXPECT_EQ(at.sources(2).samples(), 16u);
  const std::optional<analysis::StepSignal> signal = HangSignalOf(at);
  ASSERT_TRUE(signal.has_value());
  EXPECT_EQ(signal->sources[2].last_step_end_ns, 9'900 * kMs);
  EXPECT_EQ(signal->sources[2].median_step_ns, 100 * kMs);
}

// The capture's side: fake agents on a fake clock.
class StepSignalCaptureTest : public ::testing::Test {
 protected:
  void SetUp() override { sink_.dir = tmp_.path(); }
  static synthetic::SyntheticJobConfig Job(int rank, const std::string& knobs = "") {
    synthetic::SyntheticJobConfig base;
    base.world = 2;
    base.step_ms = 20;
    base.jitter = 0.02;
    synthetic::SyntheticJobConfig c = *synthetic::ParseSyntheticJobConfig(knobs, base);
    c.rank = rank;
    return c;
  }
  FakeAgent& Agent(const std::string& address, FakeAgentBehavior b,
                   const synthetic::SyntheticJobConfig& job) {
    agents_.push_back(std::make_unique<FakeAgent>(&ex_, &clock_, std::move(b), job));
    factory_.Add(address, agents_.back().get());
    return *agents_.back();
  }
  SessionManifest Run(int64_t duration_ms = 500) {
    CapturePlan plan{{}, duration_ms, "sess", "/logs"};
    for (const char* a : {"h0:1", "h1:1"}) plan.workers.push_back(*ParseWorker(a));
    CaptureEngine engine({.executor = &ex_, .clients = &factory_, .sink = &sink_}, {});
    std::optional<absl::StatusOr<SessionManifest>> result;
    engine.Start(plan, [&](absl::StatusOr<SessionManifest> m) { result = std::move(m); });
    EXPECT_TRUE(
        ex_.RunUntil([&] { return result.has_value(); }, clock_.MonoNs() + 3600 * kNanosPerSecond));
    if (!result.has_value() || !result->ok()) return {};
    return **result;
  }

  const testkit::TempDir tmp_;
  FakeClock clock_;
  FakeExecutor ex_{&clock_};
  FakeAgentFactory factory_{&ex_};
  MemorySink sink_;
  std::vector<std::unique_ptr<FakeAgent>> agents_;
};

TEST_F(StepSignalCaptureTest, EveryRecordingHostIsAskedOnceAtTheWindowsEnd) {
  FakeAgent& a = Agent("h0:1", {.name = "w0"}, Job(0));
  FakeAgent& b = Agent("h1:1", {.clock_offset_ns = 40 * kMs, .name = "w1"}, Job(1));
  const SessionManifest m = Run();
  ASSERT_EQ(m.status(), v1::SESSION_STATUS_OK);
  EXPECT_EQ(a.step_signal_calls(), 1);
  EXPECT_EQ(b.step_signal_calls(), 1);
  for (const v1::HostResult& h : m.hosts()) {
    const v1::StepSignalAtEnd& s = h.step_signal();
    EXPECT_TRUE(s.answered()) << h.host();
    // Asked when its window closed, on its own clock.
    EXPECT_GE(s.now_ns(), h.agent_stop_ns()) << h.host();
    EXPECT_LT(s.now_ns(), h.agent_stop_ns() + 50 * kMs) << h.host();
    ASSERT_EQ(s.sources_size(), 1) << h.host();
    EXPECT_EQ(s.sources(0).source(), "synthetic");
    EXPECT_NEAR(static_cast<double>(s.sources(0).median_step_ns()), 20.0 * kMs, 2.0 * kMs);
    EXPECT_LE(s.sources(0).last_step_end_ns(), s.now_ns());
    EXPECT_FALSE(s.sources(0).stalled());
  }
  // The verdict had the signal of both ranks: a healthy job, no hang.
  const std::string& json = sink_.files["pod_step_breakdown.json"];
  EXPECT_THAT(json, ContainsRegex("\"step_signal_ranks\": *2"));
  EXPECT_THAT(json, ContainsRegex("\"verdict\": *\"none\""));
}

TEST_F(StepSignalCaptureTest, AnAgentThatSummarizesGivesWhatItsSamplesGave) {
  // h0 answers the capture's summary_only ask with its sources' state, h1 (an older agent) with
  // its latest 128 samples: the same job's pace either way.
  FakeAgent& a = Agent("h0:1", {.name = "w0", .step_summaries = true}, Job(0));
  FakeAgent& b = Agent("h1:1", {.name = "w1"}, Job(1));
  const SessionManifest m = Run();
  ASSERT_EQ(m.status(), v1::SESSION_STATUS_OK);
  EXPECT_EQ(a.step_signal_calls(), 1);
  EXPECT_EQ(b.step_signal_calls(), 1);
  ASSERT_EQ(m.hosts_size(), 2);
  for (const v1::HostResult& h : m.hosts()) {
    const v1::StepSignalAtEnd& s = h.step_signal();
    ASSERT_TRUE(s.answered()) << h.host();
    ASSERT_EQ(s.sources_size(), 1) << h.host();
    EXPECT_NEAR(static_cast<double>(s.sources(0).median_step_ns()), 20.0 * kMs, 2.0 * kMs);
    EXPECT_GT(s.sources(0).last_step_end_ns(), s.now_ns() - 40 * kMs) << h.host();
    EXPECT_LE(s.sources(0).last_step_end_ns(), s.now_ns()) << h.host();
    EXPECT_FALSE(s.sources(0).stalled());
  }
  // The summary is of the agent's hang detector's last 16 steps (HangDetector::kWindow); the
  // samples were 128.
  EXPECT_EQ(m.hosts(0).step_signal().sources(0).samples(), 16u);
  EXPECT_EQ(m.hosts(1).step_signal().sources(0).samples(), kStepSignalAtEndQuery.max_samples);
  EXPECT_THAT(sink_.files["pod_step_breakdown.json"], ContainsRegex("\"verdict\": *\"none\""));
}

TEST_F(StepSignalCaptureTest, AnAgentWithoutASignalOrThatNeverAnswersCostsOneTimeoutAtMost) {
  Agent("h0:1", {.name = "w0", .step_signal_error = absl::UnimplementedError("no signal")}, Job(0));
  Agent("h1:1", {.name = "w1", .hang_step_signal = true}, Job(1));
  const SessionManifest m = Run();
  ASSERT_EQ(m.status(), v1::SESSION_STATUS_OK);
  ASSERT_EQ(m.hosts_size(), 2);
  EXPECT_FALSE(m.hosts(0).step_signal().answered());
  EXPECT_THAT(m.hosts(0).step_signal().error(), HasSubstr("UNIMPLEMENTED"));
  EXPECT_FALSE(m.hosts(1).step_signal().answered());
  EXPECT_THAT(m.hosts(1).step_signal().error(), HasSubstr("DEADLINE_EXCEEDED"));
  // The finish waited for the one that never answered: its timeout (2 s), no more.
  EXPECT_GE(m.collect_ms(), 2000);
  EXPECT_LT(m.collect_ms(), 3000);
  EXPECT_THAT(sink_.files["pod_step_breakdown.json"], ContainsRegex("\"step_signal_ranks\": *0"));
}

// A job that hung a second before the window: the traces hold no collective and no step end;
// the agents' stall says when the steps stopped, and the verdict says the window starts after
// the hang (without the stall, it cannot tell).
TEST_F(StepSignalCaptureTest, AWindowAfterTheHangIsToldFromTheAgentsStall) {
  const synthetic::SyntheticJob healthy(Job(0));
  const int64_t k = healthy.StepIndexAt(clock_.WallNs()) - 50;
  const std::string knobs = absl::StrCat("hang_rank=1,hang_at_step=", k);
  const synthetic::SyntheticJob model(Job(0, knobs));
  const int64_t last_end = model.StepStartNs(k);
  v1::GetStepSignalResponse stalled;
  stalled.set_now_ns(clock_.WallNs() + 2 * kNanosPerSecond);
  v1::StepStall* stall = stalled.add_stalls();
  stall->set_source("synthetic");
  stall->set_last_step_end_ns(last_end);
  stall->set_last_step_num(k - 1);
  stall->set_median_step_ns(model.PeriodNs(k - 1));
  stall->set_stalled_for_ns(stalled.now_ns() - last_end);
  Agent("h0:1", {.name = "w0", .step_signal_override = stalled}, Job(0, knobs));
  Agent("h1:1", {.name = "w1", .step_signal_override = stalled}, Job(1, knobs));
  const SessionManifest m = Run();
  ASSERT_EQ(m.hosts_size(), 2);
  EXPECT_TRUE(m.hosts(0).step_signal().sources(0).stalled());
  const std::string& json = sink_.files["pod_step_breakdown.json"];
  EXPECT_THAT(json, ContainsRegex("\"verdict\": *\"cannot_tell\""));
  EXPECT_THAT(json, ContainsRegex("\"missing\": *\"window_after_hang\""));
  EXPECT_THAT(json, HasSubstr(absl::StrCat("no step ended on any rank since ",
                                           analysis::FormatUtcTime(last_end),
                                           "; the window starts after the hang")));
}

TEST_F(StepSignalCaptureTest, WithoutTheStallTheSameWindowCannotTell) {
  const synthetic::SyntheticJob healthy(Job(0));
  const int64_t k = healthy.StepIndexAt(clock_.WallNs()) - 50;
  const std::string knobs = absl::StrCat("hang_rank=1,hang_at_step=", k);
  Agent("h0:1", {.name = "w0", .step_signal_error = absl::UnimplementedError("old agent")},
        Job(0, knobs));
  Agent("h1:1", {.name = "w1", .step_signal_error = absl::UnimplementedError("old agent")},
        Job(1, knobs));
  Run();
  const std::string& json = sink_.files["pod_step_breakdown.json"];
  EXPECT_THAT(json, ContainsRegex("\"verdict\": *\"cannot_tell\""));
  EXPECT_THAT(json, ContainsRegex("\"missing\": *\"collectives\""));
  EXPECT_THAT(json, Not(ContainsRegex("\"verdict\": *\"none\"")));
}

// Both directions on fake agents: a rank that never enters the all-reduce is named once the
// window holds complete steps and 2 s of waiting; a rank that waits 1.5 s for its input in each
// 100 ms step, in a 1 s window, is never called hung.
TEST_F(StepSignalCaptureTest, AHungRankIsNamed) {
  const synthetic::SyntheticJob healthy(Job(0));
  const int64_t k = healthy.StepIndexAt(clock_.WallNs() + 2 * kNanosPerSecond);
  const std::string hung = absl::StrCat("hang_rank=1,hang_at_step=", k);
  Agent("h0:1", {.name = "w0"}, Job(0, hung));
  Agent("h1:1", {.name = "w1"}, Job(1, hung));
  Run(/*duration_ms=*/4000);
  const std::string& json = sink_.files["pod_step_breakdown.json"];
  EXPECT_THAT(json, ContainsRegex("\"verdict\": *\"hung\""));
  EXPECT_THAT(json, HasSubstr(absl::StrCat("w1 (rank 1) never entered all-reduce #1 of step ",
                                           k % 1'000'000)));
}

TEST_F(StepSignalCaptureTest, ASlowRankIsNotHung) {
  const std::string slow = "step_ms=100,input_stall_rank=1,input_stall_ms=1500";
  Agent("h0:1", {.name = "w0"}, Job(0, slow));
  Agent("h1:1", {.name = "w1"}, Job(1, slow));
  Run(/*duration_ms=*/1000);
  const std::string& json = sink_.files["pod_step_breakdown.json"];
  ASSERT_THAT(json, HasSubstr("\"hang\""));
  EXPECT_THAT(json, Not(ContainsRegex("\"verdict\": *\"(hung|all_waiting)\"")));
  // The window holds no complete step and the fast rank waits for the slow one (here 119 ms,
  // over the 100 ms floor that alone called such a wait a hang); the agents' step signal gives
  // the job's pace (~1.6 s steps): no hang.
  EXPECT_THAT(json, ContainsRegex("\"verdict\": *\"none\""));
  EXPECT_THAT(json, ContainsRegex("\"pace\": *\"step_signal\""));
  EXPECT_THAT(json, ContainsRegex("\"waited_ms\": *[0-9]"));
}

}  // namespace
}  // namespace profctl::coordinator
