#include "agent/capture_manager.h"

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "agent/collectors/synthetic/synthetic_collector.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/fake_clock.h"
#include "tests/fake_executor.h"
#include "tests/status_matchers.h"
#include "xspace/xspace.h"

using ::profctl::testkit::IsOk;

namespace profctl::agent {
namespace {

using ::profctl::testkit::FakeClock;
using ::profctl::testkit::FakeExecutor;
using ::testing::ElementsAre;
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

// A collector with a step signal: `steps` as RecentSteps' answer, in the order given (a
// collector should give them oldest first; `steps` may break that to test the fallback).
class StepsCollector final : public Collector {
 public:
  StepsCollector(std::string name, std::vector<std::pair<int64_t, int64_t>> steps)
      : name_(std::move(name)), steps_(std::move(steps)) {}
  absl::string_view name() const override { return name_; }
  absl::Status Prepare(const CaptureOptions&) override { return absl::OkStatus(); }
  absl::Status Start(int64_t) override { return absl::OkStatus(); }
  absl::Status Stop(int64_t) override { return absl::OkStatus(); }
  absl::Status Collect(tensorflow::profiler::XSpace*) override { return absl::OkStatus(); }
  bool HasStepSignal() const override { return true; }
  void RecentSteps(int64_t since, int64_t now, size_t max,
                   std::vector<StepSample>* out) const override {
    std::vector<StepSample> mine;
    for (const auto& [end, num] : steps_) {
      if (end > since && end <= now)
        mine.push_back({.end_wall_ns = end, .step_num = num, .source = name_});
    }
    if (mine.size() > max) mine.erase(mine.begin(), mine.end() - static_cast<ptrdiff_t>(max));
    out->insert(out->end(), mine.begin(), mine.end());
  }

 private:
  std::string name_;
  std::vector<std::pair<int64_t, int64_t>> steps_;  // end, step number
};

// What a session reported through its callbacks, in order.
struct Outcome {
  std::vector<std::string> events;  // "started", "done"
  std::vector<int64_t> started_ns;
  std::optional<CaptureResult> result;
  bool busy_at_done = true;
};

class CaptureManagerTest : public ::testing::Test {
 protected:
  FakeClock clock_;
  FakeExecutor executor_{&clock_};
  SyntheticCollector synthetic_{synthetic::SyntheticJobConfig{}};
  FakeCollector fake_;
  CaptureManager manager_{{&clock_, {&synthetic_, &fake_}, &executor_},
                          {.max_duration_ms = 10'000, .host_name = "host-a"}};

  CaptureSpec Spec(int64_t start_in_ms, int64_t duration_ms, std::string id = "s1") {
    return {std::move(id),
            start_in_ms == 0 ? 0 : clock_.WallNs() + start_in_ms * kNanosPerMilli,
            duration_ms,
            {}};
  }

  // Runs `session` with callbacks that fill `out` (which must outlive the session's on_done).
  void Run(CaptureManager::Session& session, Outcome* out, CaptureManager* manager = nullptr) {
    if (manager == nullptr) manager = &manager_;
    session.Run({.on_started =
                     [out](int64_t start_ns) {
                       out->events.push_back("started");
                       out->started_ns.push_back(start_ns);
                     },
                 .on_done =
                     [out, manager](CaptureResult result) {
                       out->events.push_back("done");
                       out->busy_at_done = manager->busy();
                       out->result.emplace(std::move(result));
                     }});
  }

  // Begins and runs a 1 s capture starting now (kept in running_), filling `out`; returns its
  // start on the agent's wall clock. The late-stop tests then move the clocks around its end.
  int64_t RunOneSecondWindow(Outcome* out) {
    auto session = manager_.Begin(Spec(0, 1000));
    EXPECT_THAT(session, IsOk());
    if (!session.ok()) return 0;
    running_ = *std::move(session);
    Run(*running_, out);
    executor_.RunUntilIdle();
    EXPECT_EQ(out->started_ns.size(), 1u);
    return out->started_ns.empty() ? 0 : out->started_ns[0];
  }

  std::unique_ptr<CaptureManager::Session> running_;
};

TEST_F(CaptureManagerTest, ASnapshotTakesThePastAtItsInstantFromEveryRecordingCollector) {
  CaptureSpec snap = Spec(/*start_in_ms=*/500, /*duration_ms=*/2000);
  snap.past_ms = 2000;
  // Without a recorder there is no past to take.
  EXPECT_EQ(manager_.Begin(snap).status().code(), absl::StatusCode::kFailedPrecondition);
  const int64_t recorder_start = clock_.WallNs();
  ASSERT_THAT(synthetic_.StartRecorder({.keep_ns = 10 * kNanosPerSecond, .max_bytes = 1 << 20},
                                       recorder_start),
              IsOk());
  executor_.Advance(5 * kNanosPerSecond);  // the past to take (the recorder needs no tick)
  snap.start_at_ns = clock_.WallNs() + 500 * kNanosPerMilli;
  CaptureSpec bad = snap;
  bad.past_ms = 1000;
  EXPECT_EQ(manager_.Begin(bad).status().code(), absl::StatusCode::kInvalidArgument);
  auto session = manager_.Begin(snap);
  ASSERT_THAT(session, IsOk());
  Outcome out;
  Run(**session, &out);
  executor_.RunUntilIdle();
  EXPECT_TRUE(out.events.empty());  // waits for its instant
  executor_.Advance(500 * kNanosPerMilli);
  ASSERT_TRUE(out.result.has_value());
  EXPECT_THAT(out.events, ElementsAre("started", "done"));
  EXPECT_THAT(out.started_ns, ElementsAre(snap.start_at_ns));
  EXPECT_TRUE(fake_.calls.empty());  // neither prepared, started nor collected
  const CaptureResult& result = *out.result;
  EXPECT_EQ(result.stop_ns, snap.start_at_ns);
  EXPECT_EQ(result.start_ns, snap.start_at_ns - 2 * kNanosPerSecond);
  EXPECT_EQ(xspace::ProfileStartNs(result.space), result.start_ns);
  EXPECT_EQ(xspace::ProfileStopNs(result.space), result.stop_ns);
  ASSERT_EQ(result.space.errors_size(), 1);
  EXPECT_THAT(result.space.errors(0), HasSubstr("collector fake: keeps no past"));
  // The synthetic past is the job's trace of that window.
  tensorflow::profiler::XSpace expected;
  synthetic_.job().Generate(result.start_ns, result.stop_ns, &expected);
  const tensorflow::profiler::XPlane* gpu = xspace::FindPlane(result.space, "/device:GPU:0");
  ASSERT_NE(gpu, nullptr);
  int64_t events = 0, expected_events = 0;
  for (const auto& line : gpu->lines()) events += line.events_size();
  for (const auto& line : xspace::FindPlane(expected, "/device:GPU:0")->lines()) {
    expected_events += line.events_size();
  }
  EXPECT_GT(events, 100);
  EXPECT_EQ(events, expected_events);
  EXPECT_FALSE(manager_.busy());
}

TEST_F(CaptureManagerTest, WaitsForStartRecordsForDurationAndCollects) {
  const CaptureSpec spec = Spec(/*start_in_ms=*/500, /*duration_ms=*/1000);
  auto session = manager_.Begin(spec);
  ASSERT_THAT(session, IsOk());
  Outcome out;
  Run(**session, &out);
  executor_.RunUntilIdle();
  EXPECT_THAT(fake_.calls, ElementsAre("prepare"));  // not started early
  EXPECT_TRUE(out.events.empty());
  executor_.Advance(500 * kNanosPerMilli);
  EXPECT_THAT(fake_.calls, ElementsAre("prepare", "start"));
  EXPECT_EQ(fake_.start_ns, spec.start_at_ns);
  EXPECT_THAT(out.events, ElementsAre("started"));
  executor_.Advance(999 * kNanosPerMilli);
  EXPECT_FALSE(out.result.has_value());  // still recording
  executor_.Advance(1 * kNanosPerMilli);
  ASSERT_TRUE(out.result.has_value());

  const CaptureResult& result = *out.result;
  EXPECT_FALSE(result.cancelled);
  EXPECT_EQ(result.start_ns, spec.start_at_ns);
  EXPECT_EQ(result.stop_ns, spec.start_at_ns + 1000 * kNanosPerMilli);
  EXPECT_THAT(fake_.calls, ElementsAre("prepare", "start", "stop", "collect"));
  EXPECT_THAT(result.space.hostnames(), ElementsAre("host-a"));
  EXPECT_NE(xspace::FindPlane(result.space, "/host:CPU"), nullptr);
  EXPECT_NE(xspace::FindPlane(result.space, "/device:GPU:0"), nullptr);
  EXPECT_EQ(xspace::ProfileStartNs(result.space), result.start_ns);
  EXPECT_EQ(xspace::ProfileStopNs(result.space), result.stop_ns);
  EXPECT_TRUE(result.space.errors().empty());
  EXPECT_FALSE(out.busy_at_done);  // the slot is free before on_done
  EXPECT_EQ(executor_.pending(), 0u);
  // The trace is built on the result's own arena (planes, lines and events too), and moving
  // the result moves it along without a copy.
  ASSERT_NE(result.arena, nullptr);
  EXPECT_EQ(result.space.GetArena(), result.arena.get());
  const tensorflow::profiler::XPlane* host = xspace::FindPlane(result.space, "/host:CPU");
  EXPECT_EQ(host->GetArena(), result.arena.get());
  CaptureResult moved(std::move(*out.result));
  EXPECT_EQ(&moved.space, static_cast<const void*>(&result.space));
  EXPECT_EQ(moved.space.GetArena(), moved.arena.get());
  EXPECT_EQ(xspace::FindPlane(moved.space, "/host:CPU"), host);
}

TEST_F(CaptureManagerTest, StartedReportsTheActualStartOnTheAgentClockBeforeDone) {
  // A skewed agent clock: the start is reported on it, not on the fake clock underneath.
  SkewedClock agent_clock(&clock_, 7 * kNanosPerSecond);
  CaptureManager manager({&agent_clock, {&fake_}, &executor_}, {.host_name = "skewed"});
  CaptureSpec spec = Spec(0, 100);
  spec.start_at_ns = agent_clock.WallNs() + 250 * kNanosPerMilli;
  auto session = manager.Begin(spec);
  ASSERT_THAT(session, IsOk());
  Outcome out;
  Run(**session, &out, &manager);
  executor_.Advance(250 * kNanosPerMilli);
  ASSERT_THAT(out.started_ns, ElementsAre(spec.start_at_ns));
  EXPECT_EQ(out.started_ns[0], fake_.start_ns);
  executor_.Advance(100 * kNanosPerMilli);
  EXPECT_THAT(out.events, ElementsAre("started", "done"));
  EXPECT_EQ(out.result->start_ns, out.started_ns[0]);
}

TEST_F(CaptureManagerTest, StartedIsTheRealStartWhenStartAtHasPassed) {
  CaptureSpec spec = Spec(0, 50);
  spec.start_at_ns = clock_.WallNs() - 20 * kNanosPerMilli;
  auto session = manager_.Begin(spec);
  ASSERT_THAT(session, IsOk());
  Outcome out;
  Run(**session, &out);
  executor_.RunUntilIdle();
  EXPECT_THAT(out.started_ns, ElementsAre(spec.start_at_ns + 20 * kNanosPerMilli));
  executor_.Advance(50 * kNanosPerMilli);
  ASSERT_TRUE(out.result.has_value());
  EXPECT_EQ(out.result->start_ns, spec.start_at_ns + 20 * kNanosPerMilli);
  EXPECT_THAT(out.result->space.warnings(),
              ::testing::Contains(HasSubstr("20000 us after the requested start")));
}

TEST_F(CaptureManagerTest, OneSessionAtATime) {
  auto first = manager_.Begin(Spec(0, 100));
  ASSERT_THAT(first, IsOk());
  EXPECT_TRUE(manager_.busy());
  CaptureSpec second = Spec(0, 100, "s2");
  absl::StatusOr<std::unique_ptr<CaptureManager::Session>> rejected = manager_.Begin(second);
  EXPECT_EQ(rejected.status().code(), absl::StatusCode::kAlreadyExists);
  // How long the running one has left, never its id: it is another client's.
  EXPECT_THAT(rejected.status().message(),
              HasSubstr("the agent is busy with another capture for ~100 ms more"));
  EXPECT_THAT(rejected.status().message(), ::testing::Not(HasSubstr("s1")));
  first->reset();  // never run: destroying it frees the slot
  EXPECT_FALSE(manager_.busy());
  auto again = manager_.Begin(second);
  ASSERT_THAT(again, IsOk());
  Outcome out;
  Run(**again, &out);
  again->reset();  // once running, the session lives on without its handle
  EXPECT_TRUE(manager_.busy());
  executor_.Advance(100 * kNanosPerMilli);
  ASSERT_TRUE(out.result.has_value());
  EXPECT_FALSE(out.result->cancelled);
  EXPECT_FALSE(manager_.busy());
}

TEST_F(CaptureManagerTest, RejectsBadRequests) {
  auto code = [&](CaptureSpec spec) { return manager_.Begin(std::move(spec)).status(); };
  EXPECT_EQ(code(Spec(0, 0)).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(code(Spec(0, 10'001)).message(), HasSubstr("outside [1, 10000]"));
  EXPECT_THAT(code(Spec(61'000, 10)).message(), HasSubstr("in the future"));
  EXPECT_THAT(code(Spec(0, 10, "../x")).message(), HasSubstr("session id '../x'"));
  CaptureSpec bad_collector = Spec(0, 10);
  bad_collector.collectors = {"cupti"};
  EXPECT_THAT(
      code(bad_collector).message(),
      HasSubstr("collector 'cupti' is not enabled on this agent (enabled: synthetic, fake)"));
  EXPECT_FALSE(manager_.busy());
}

TEST_F(CaptureManagerTest, CancelStopsEarlyAndKeepsWhatWasRecorded) {
  auto session = manager_.Begin(Spec(0, 5000));
  ASSERT_THAT(session, IsOk());
  Outcome out;
  Run(**session, &out);
  executor_.Advance(300 * kNanosPerMilli);
  EXPECT_THAT(manager_.Cancel("other"), IsOk());  // not running: only remembered
  EXPECT_FALSE(out.result.has_value());
  ASSERT_THAT(manager_.Cancel("s1"), IsOk());
  executor_.RunUntilIdle();  // no time passes
  ASSERT_TRUE(out.result.has_value());
  EXPECT_TRUE(out.result->cancelled);
  EXPECT_EQ(out.result->stop_ns - out.result->start_ns, 300 * kNanosPerMilli);
  EXPECT_THAT(out.result->space.warnings(),
              ::testing::Contains(HasSubstr("cancelled after 300 ms")));
  EXPECT_THAT(fake_.calls, ElementsAre("prepare", "start", "stop", "collect"));
  // The stop timer of the original window finds the session over and does nothing.
  executor_.Advance(5000 * kNanosPerMilli);
  EXPECT_THAT(out.events, ElementsAre("started", "done"));
  EXPECT_THAT(fake_.calls, ElementsAre("prepare", "start", "stop", "collect"));
}

TEST_F(CaptureManagerTest, CancelActiveStopsWhateverRunsWithoutRememberingIt) {
  manager_.CancelActive();  // nothing running: no effect
  auto session = manager_.Begin(Spec(0, 5000));
  ASSERT_THAT(session, IsOk());
  Outcome out;
  Run(**session, &out);
  executor_.Advance(40 * kNanosPerMilli);
  manager_.CancelActive();
  executor_.RunUntilIdle();
  ASSERT_TRUE(out.result.has_value());
  EXPECT_TRUE(out.result->cancelled);
  EXPECT_EQ(out.result->stop_ns - out.result->start_ns, 40 * kNanosPerMilli);
  EXPECT_EQ(manager_.cancelled_ids_for_testing(), 0u);
}

TEST_F(CaptureManagerTest, CancelDuringTheStartWaitEndsItAtOnce) {
  auto session = manager_.Begin(Spec(/*start_in_ms=*/1000, /*duration_ms=*/100));
  ASSERT_THAT(session, IsOk());
  Outcome out;
  Run(**session, &out);
  executor_.RunUntilIdle();  // prepared, now waiting for start_at
  const int64_t before = clock_.MonoNs();
  ASSERT_THAT(manager_.Cancel("s1"), IsOk());
  executor_.RunUntilIdle();
  EXPECT_EQ(clock_.MonoNs(), before);  // ended without waiting
  ASSERT_TRUE(out.result.has_value());
  EXPECT_THAT(out.events, ElementsAre("done"));  // never started
  EXPECT_TRUE(out.result->cancelled);
  EXPECT_THAT(fake_.calls, ElementsAre("prepare"));
  EXPECT_EQ(xspace::CountEvents(out.result->space), 0);
  EXPECT_THAT(out.result->space.warnings(),
              ElementsAre(HasSubstr("cancelled before its start instant")));
  EXPECT_FALSE(manager_.busy());
  executor_.Advance(2000 * kNanosPerMilli);  // the start timer fires into a finished session
  EXPECT_THAT(fake_.calls, ElementsAre("prepare"));
  EXPECT_THAT(out.events, ElementsAre("done"));
}

TEST_F(CaptureManagerTest, CancelThatOvertakesItsCaptureMakesItFailWithAborted) {
  ASSERT_THAT(manager_.Cancel("s1"), IsOk());
  absl::StatusOr<std::unique_ptr<CaptureManager::Session>> session = manager_.Begin(Spec(0, 100));
  EXPECT_EQ(session.status().code(), absl::StatusCode::kAborted);
  EXPECT_THAT(session.status().message(),
              HasSubstr("session 's1' was cancelled before it started"));
  EXPECT_FALSE(manager_.busy());
  EXPECT_TRUE(fake_.calls.empty());                         // its window never ran
  EXPECT_THAT(manager_.Begin(Spec(0, 100, "s2")), IsOk());  // other ids are unaffected
}

TEST_F(CaptureManagerTest, CancelBetweenBeginAndRunRecordsNothing) {
  auto session = manager_.Begin(Spec(0, 100));
  ASSERT_THAT(session, IsOk());
  ASSERT_THAT(manager_.Cancel("s1"), IsOk());
  Outcome out;
  Run(**session, &out);
  executor_.RunUntilIdle();
  ASSERT_TRUE(out.result.has_value());
  EXPECT_TRUE(out.result->cancelled);
  EXPECT_THAT(out.events, ElementsAre("done"));
  EXPECT_THAT(fake_.calls, ElementsAre("prepare"));
}

TEST_F(CaptureManagerTest, CancelOfACapturedIdAbortsItsRetry) {
  auto session = manager_.Begin(Spec(0, 100));
  ASSERT_THAT(session, IsOk());
  Outcome out;
  Run(**session, &out);
  executor_.Advance(10 * kNanosPerMilli);
  ASSERT_THAT(manager_.Cancel("s1"), IsOk());
  executor_.RunUntilIdle();
  ASSERT_TRUE(out.result.has_value());
  EXPECT_EQ(manager_.Begin(Spec(0, 100)).status().code(), absl::StatusCode::kAborted);
}

TEST_F(CaptureManagerTest, SessionStopDoesNotRememberTheId) {
  // Session::Stop is for a client that went away: its retry may reuse the id.
  auto session = manager_.Begin(Spec(0, 100));
  ASSERT_THAT(session, IsOk());
  Outcome out;
  Run(**session, &out);
  executor_.Advance(10 * kNanosPerMilli);
  (*session)->Stop();
  (*session)->Stop();  // idempotent
  executor_.RunUntilIdle();
  ASSERT_TRUE(out.result.has_value());
  EXPECT_TRUE(out.result->cancelled);
  EXPECT_THAT(manager_.Begin(Spec(0, 100)), IsOk());
}

TEST_F(CaptureManagerTest, CancelRejectsInvalidIds) {
  absl::Status s = manager_.Cancel("../x");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("session id '../x'"));
  EXPECT_EQ(manager_.Cancel("").code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(manager_.cancelled_ids_for_testing(), 0u);
}

TEST_F(CaptureManagerTest, RememberedIdsAreBoundedInNumberAndTime) {
  CaptureManager manager({&clock_, {&fake_}, &executor_},
                         {.host_name = "h", .cancelled_id_ttl_ms = 1000, .max_cancelled_ids = 3});
  auto aborted = [&](const std::string& id) {
    absl::StatusOr<std::unique_ptr<CaptureManager::Session>> s = manager.Begin(Spec(0, 10, id));
    return s.status().code() == absl::StatusCode::kAborted;
  };
  for (const char* id : {"a", "b", "c", "c", "d"}) ASSERT_THAT(manager.Cancel(id), IsOk());
  EXPECT_EQ(manager.cancelled_ids_for_testing(), 3u);
  EXPECT_FALSE(aborted("a"));  // the oldest was forgotten to make room
  EXPECT_TRUE(aborted("b"));
  EXPECT_TRUE(aborted("c"));
  EXPECT_TRUE(aborted("d"));
  clock_.Advance(600 * kNanosPerMilli);
  ASSERT_THAT(manager.Cancel("e"), IsOk());  // evicts b
  clock_.Advance(400 * kNanosPerMilli);      // b, c, d are 1000 ms old now: expired
  EXPECT_FALSE(aborted("c"));
  EXPECT_FALSE(aborted("d"));
  EXPECT_TRUE(aborted("e"));
  EXPECT_EQ(manager.cancelled_ids_for_testing(), 1u);
  clock_.Advance(600 * kNanosPerMilli);  // e is 1000 ms old
  EXPECT_FALSE(aborted("e"));
  EXPECT_EQ(manager.cancelled_ids_for_testing(), 0u);
}

TEST_F(CaptureManagerTest, DefaultBoundIs4096IdsForTenMinutes) {
  EXPECT_EQ(manager_.options().max_cancelled_ids, 4096);
  EXPECT_EQ(manager_.options().cancelled_id_ttl_ms, 600'000);
  for (int i = 0; i <= 4096; ++i) ASSERT_THAT(manager_.Cancel(absl::StrCat("id-", i)), IsOk());
  EXPECT_EQ(manager_.cancelled_ids_for_testing(), 4096u);
  EXPECT_THAT(manager_.Begin(Spec(0, 10, "id-0")), IsOk());  // forgotten: the oldest
  EXPECT_EQ(manager_.Begin(Spec(0, 10, "id-1")).status().code(), absl::StatusCode::kAborted);
}

TEST_F(CaptureManagerTest, CollectRunsOnTheCollectExecutorAndNeverDelaysTheTimeline) {
  FakeExecutor collect(&clock_);
  CaptureManager manager({&clock_, {&fake_}, &executor_, &collect}, {.host_name = "h"});
  auto session = manager.Begin(Spec(0, 100));
  ASSERT_THAT(session, IsOk());
  Outcome out;
  Run(**session, &out, &manager);
  collect.RunUntilIdle();  // Prepare
  EXPECT_THAT(fake_.calls, ElementsAre("prepare"));
  executor_.RunUntilIdle();  // started
  executor_.Advance(100 * kNanosPerMilli);
  EXPECT_THAT(fake_.calls, ElementsAre("prepare", "start", "stop"));  // stopped on time
  EXPECT_FALSE(out.result.has_value());
  collect.RunUntilIdle();
  EXPECT_THAT(fake_.calls, ElementsAre("prepare", "start", "stop", "collect"));
  ASSERT_TRUE(out.result.has_value());
  EXPECT_EQ(out.result->stop_ns - out.result->start_ns, 100 * kNanosPerMilli);
}

TEST_F(CaptureManagerTest, FailingCollectorIsReportedAndOthersStillDeliver) {
  fake_.fail_at = "start";
  auto session = manager_.Begin(Spec(0, 200));
  ASSERT_THAT(session, IsOk());
  Outcome out;
  Run(**session, &out);
  executor_.Advance(200 * kNanosPerMilli);
  ASSERT_TRUE(out.result.has_value());
  EXPECT_THAT(out.result->space.errors(),
              ElementsAre(HasSubstr("collector fake: start failed: INTERNAL: boom")));
  EXPECT_THAT(fake_.calls, ElementsAre("prepare", "start"));  // skipped afterwards
  EXPECT_GT(xspace::CountEvents(out.result->space), 0);       // the synthetic collector's events
}

// Writes a /host:CPU plane of its own (the synthetic collector writes one too) and counts Aborts.
class HostThreadCollector final : public Collector {
 public:
  absl::string_view name() const override { return "host-thread"; }
  absl::Status Prepare(const CaptureOptions&) override { return absl::OkStatus(); }
  absl::Status Start(int64_t wall_ns) override {
    start_ns = wall_ns;
    return absl::OkStatus();
  }
  absl::Status Stop(int64_t) override { return absl::OkStatus(); }
  absl::Status Collect(tensorflow::profiler::XSpace* space) override {
    xspace::XPlaneBuilder b(space->add_planes(), 49, xspace::kHostPlaneName, start_ns);
    b.AddEvent(b.AddLine(/*id=*/1000, "loader thread", start_ns), b.EventMetadataId("load"),
               start_ns, /*duration_ns=*/10);
    return absl::OkStatus();
  }
  void Abort() override { ++aborts; }

  int64_t start_ns = 0;
  int aborts = 0;
};

TEST_F(CaptureManagerTest, PlanesTwoCollectorsWroteUnderOneNameAreMergedIntoOne) {
  HostThreadCollector host_thread;
  CaptureManager manager({&clock_, {&host_thread, &synthetic_}, &executor_},
                         {.max_duration_ms = 10'000, .host_name = "host-a"});
  auto session = manager.Begin(Spec(0, 100));
  ASSERT_THAT(session, IsOk());
  Outcome out;
  Run(**session, &out, &manager);
  executor_.Advance(100 * kNanosPerMilli);
  ASSERT_TRUE(out.result.has_value());
  int host_planes = 0;
  std::vector<std::string> lines;
  for (const auto& plane : out.result->space.planes()) {
    if (plane.name() != xspace::kHostPlaneName) continue;
    ++host_planes;
    for (const auto& line : plane.lines()) lines.push_back(line.name());
  }
  EXPECT_EQ(host_planes, 1);
  EXPECT_THAT(lines, ::testing::Contains("loader thread"));
  EXPECT_GT(lines.size(), 1u);  // the synthetic job's threads are there too
  EXPECT_THAT(xspace::Validate(out.result->space), IsOk());
}

TEST_F(CaptureManagerTest, CancelBeforeTheStartAbortsThePreparedCollectors) {
  HostThreadCollector host_thread;
  fake_.fail_at = "prepare";  // not prepared: not aborted either
  CaptureManager manager({&clock_, {&host_thread, &fake_}, &executor_},
                         {.max_duration_ms = 10'000, .host_name = "host-a"});
  auto session = manager.Begin(Spec(/*start_in_ms=*/1000, /*duration_ms=*/100));
  ASSERT_THAT(session, IsOk());
  Outcome out;
  Run(**session, &out, &manager);
  executor_.RunUntilIdle();
  EXPECT_EQ(host_thread.aborts, 0);
  ASSERT_THAT(manager.Cancel("s1"), IsOk());
  executor_.RunUntilIdle();
  ASSERT_TRUE(out.result.has_value());
  EXPECT_EQ(host_thread.aborts, 1);
  EXPECT_THAT(fake_.calls, ElementsAre("prepare"));
}

constexpr char kKeyA[] = "aaaaaaaaaaaaaaaaaaaaaaaa";
constexpr char kKeyB[] = "bbbbbbbbbbbbbbbbbbbbbbbb";

TEST_F(CaptureManagerTest, SessionKeysAreValidatedAndNeverQuoted) {
  for (const std::string& key :
       std::vector<std::string>{"tooshort", std::string(129, 'k'), "has a space in it......"}) {
    CaptureSpec spec = Spec(0, 10);
    spec.session_key = key;
    const absl::Status s = manager_.Begin(spec).status();
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << key;
    EXPECT_THAT(s.message(), ::testing::Not(HasSubstr(key)));
    EXPECT_THAT(s.message(), HasSubstr("session_key"));
  }
  CaptureSpec ok = Spec(0, 10);
  ok.session_key = std::string(16, 'k');
  EXPECT_THAT(manager_.Begin(ok), IsOk());
}

TEST_F(CaptureManagerTest, CancelWithAnotherKeyIsPermissionDeniedAndStopsNothing) {
  CaptureSpec spec = Spec(0, 100);
  spec.session_key = kKeyA;
  auto session = manager_.Begin(spec);
  ASSERT_THAT(session, IsOk());
  Outcome out;
  Run(**session, &out);
  executor_.Advance(10 * kNanosPerMilli);
  for (const char* key : {kKeyB, ""}) {
    const absl::Status s = manager_.Cancel("s1", key);
    EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied) << key;
    EXPECT_THAT(s.message(), ::testing::Not(HasSubstr(kKeyA)));
  }
  EXPECT_EQ(manager_.cancelled_ids_for_testing(), 0u);  // nothing remembered either
  executor_.Advance(90 * kNanosPerMilli);
  ASSERT_TRUE(out.result.has_value());
  EXPECT_FALSE(out.result->cancelled);
  EXPECT_EQ(out.result->cancel_reason, CancelReason::kNone);
  EXPECT_EQ(out.result->stop_ns - out.result->start_ns, 100 * kNanosPerMilli);
}

TEST_F(CaptureManagerTest, TheOwnersCancelStopsItAsClient) {
  CaptureSpec spec = Spec(0, 100);
  spec.session_key = kKeyA;
  auto session = manager_.Begin(spec);
  ASSERT_THAT(session, IsOk());
  Outcome out;
  Run(**session, &out);
  executor_.Advance(10 * kNanosPerMilli);
  ASSERT_THAT(manager_.Cancel("s1", kKeyA), IsOk());
  executor_.RunUntilIdle();
  ASSERT_TRUE(out.result.has_value());
  EXPECT_TRUE(out.result->cancelled);
  EXPECT_EQ(out.result->cancel_reason, CancelReason::kClient);
}

TEST_F(CaptureManagerTest, ARememberedCancelAbortsOnlyACaptureWithTheSameIdAndKey) {
  ASSERT_THAT(manager_.Cancel("s1", kKeyB), IsOk());  // someone else's pre-cancel
  CaptureSpec spec = Spec(0, 100);
  spec.session_key = kKeyA;
  auto session = manager_.Begin(spec);
  ASSERT_THAT(session, IsOk());
  session->reset();
  ASSERT_THAT(manager_.Cancel("s1", kKeyA), IsOk());  // the owner's
  EXPECT_EQ(manager_.Begin(spec).status().code(), absl::StatusCode::kAborted);
}

TEST_F(CaptureManagerTest, EveryWayToStopEarlyHasItsReason) {
  struct Case {
    const char* name;
    std::function<void(CaptureManager::Session&)> stop;
    CancelReason reason;
  } cases[] = {
      {"keyless cancel",
       [&](CaptureManager::Session& s) { ASSERT_THAT(manager_.Cancel(s.id()), IsOk()); },
       CancelReason::kOtherClient},
      {"shutdown", [&](CaptureManager::Session&) { manager_.CancelActive(); },
       CancelReason::kAgentShutdown},
      {"client gone", [](CaptureManager::Session& s) { s.Stop(); }, CancelReason::kClientGone},
  };
  int n = 0;
  for (const Case& c : cases) {
    auto session = manager_.Begin(Spec(0, 100, absl::StrCat("r", ++n)));
    ASSERT_THAT(session, IsOk()) << c.name;
    Outcome out;
    Run(**session, &out);
    executor_.Advance(10 * kNanosPerMilli);
    c.stop(**session);
    (*session)->Stop();  // a later stop does not change the first one's reason
    executor_.RunUntilIdle();
    ASSERT_TRUE(out.result.has_value()) << c.name;
    EXPECT_TRUE(out.result->cancelled) << c.name;
    EXPECT_EQ(out.result->cancel_reason, c.reason) << c.name;
  }
}

TEST_F(CaptureManagerTest, TerminateReachesOnlySessionsOfItsOwnService) {
  // A profctl capture and a TensorFlow Terminate with its id: nothing stops.
  auto session = manager_.Begin(Spec(0, 100));
  ASSERT_THAT(session, IsOk());
  Outcome out;
  Run(**session, &out);
  executor_.Advance(10 * kNanosPerMilli);
  ASSERT_THAT(manager_.Cancel("s1", "", SessionOrigin::kTslService), IsOk());
  executor_.Advance(90 * kNanosPerMilli);
  ASSERT_TRUE(out.result.has_value());
  EXPECT_FALSE(out.result->cancelled);
  // ... nor does that remembered Terminate abort a profctl retry with the id.
  EXPECT_THAT(manager_.Begin(Spec(0, 100)), IsOk());
}

TEST_F(CaptureManagerTest, ATslSessionIsNotStoppedByAnAgentServiceCancel) {
  CaptureSpec spec = Spec(0, 100);
  spec.origin = SessionOrigin::kTslService;
  auto session = manager_.Begin(spec);
  ASSERT_THAT(session, IsOk());
  Outcome out;
  Run(**session, &out);
  executor_.Advance(10 * kNanosPerMilli);
  ASSERT_THAT(manager_.Cancel("s1"), IsOk());
  executor_.Advance(90 * kNanosPerMilli);
  ASSERT_TRUE(out.result.has_value());
  EXPECT_FALSE(out.result->cancelled);
}

TEST_F(CaptureManagerTest, PerCaptureCapsDropEventsAndSaySo) {
  CaptureManager capped({&clock_, {&synthetic_}, &executor_},
                        {.max_duration_ms = 10'000, .host_name = "h", .max_trace_events = 25});
  auto session = capped.Begin(Spec(0, 200));
  ASSERT_THAT(session, IsOk());
  Outcome out;
  Run(**session, &out, &capped);
  executor_.Advance(200 * kNanosPerMilli);
  ASSERT_TRUE(out.result.has_value());
  EXPECT_GT(out.result->dropped_events, 0u);
  EXPECT_EQ(xspace::CountEvents(out.result->space), 25);
  EXPECT_THAT(out.result->space.warnings(),
              ::testing::Contains(HasSubstr(absl::StrCat("dropped ", out.result->dropped_events))));
}

TEST_F(CaptureManagerTest, AStopThatFiresLateIsTrimmedToTheWindowAskedFor) {
  Outcome out;
  const int64_t start = RunOneSecondWindow(&out);
  ASSERT_EQ(out.started_ns.size(), 1u);
  // The timeline is busy for 110 ms just before the window's end: the stop timer fires late.
  executor_.PostAt(clock_.MonoNs() + 990 * kNanosPerMilli,
                   [this] { clock_.Advance(110 * kNanosPerMilli); });
  executor_.Advance(2000 * kNanosPerMilli);
  ASSERT_TRUE(out.result.has_value());
  const CaptureResult& r = *out.result;
  // The collectors recorded until the late stop ...
  EXPECT_EQ(fake_.stop_ns, start + 1100 * kNanosPerMilli);
  // ... and the trace is the window asked for: its stop, its profile window, its events.
  EXPECT_EQ(r.stop_ns, start + 1000 * kNanosPerMilli);
  EXPECT_FALSE(r.cancelled);
  EXPECT_EQ(xspace::ProfileStopNs(r.space), start + 1000 * kNanosPerMilli);
  const int64_t profile_start = xspace::ProfileStartNs(r.space);
  int64_t events = 0;
  int64_t cut_at_stop = 0;  // events running past the window's end: clipped to it and marked
  for (const auto& plane : r.space.planes()) {
    const xspace::XPlaneReader reader(plane);
    for (const auto& line : plane.lines()) {
      for (const auto& e : line.events()) {
        ++events;
        EXPECT_LT(xspace::EventStartNs(profile_start, line, e), r.stop_ns);
        const int64_t end = xspace::EventEndNs(profile_start, line, e);
        EXPECT_LE(end, r.stop_ns);
        if (end == r.stop_ns && reader.IntStat(e, xspace::kStatStepCut) == 1) ++cut_at_stop;
      }
    }
  }
  EXPECT_GT(events, 0);
  // The synthetic job's step running at the window's end ran on to the late stop.
  EXPECT_GT(cut_at_stop, 0);
  EXPECT_THAT(r.space.warnings(), ::testing::Contains(HasSubstr("trimmed to the window")));
  EXPECT_THAT(r.space.warnings(), ::testing::Contains(HasSubstr("100000 us after")));
  EXPECT_THAT(r.space.warnings(), ::testing::Not(::testing::Contains(HasSubstr(" 0 event(s)"))));
}

TEST_F(CaptureManagerTest, AStopTimerThatFiresMicrosecondsLateIsTrimmedWithoutAWarning) {
  Outcome out;
  const int64_t start = RunOneSecondWindow(&out);
  // 60 µs late, as every timer on an idle host: trimmed, and nothing for a person to read.
  executor_.PostAt(clock_.MonoNs() + 999'990 * kNanosPerMicro,
                   [this] { clock_.Advance(70 * kNanosPerMicro); });
  executor_.Advance(2000 * kNanosPerMilli);
  ASSERT_TRUE(out.result.has_value());
  EXPECT_EQ(fake_.stop_ns, start + 1'000'060 * kNanosPerMicro);
  EXPECT_EQ(out.result->stop_ns, start + 1000 * kNanosPerMilli);
  EXPECT_THAT(out.result->space.warnings(),
              ::testing::Not(::testing::Contains(HasSubstr("after the window's end"))));
}

TEST_F(CaptureManagerTest, ALateStopAcrossAClockJumpIsKeptAsMeasured) {
  Outcome out;
  const int64_t start = RunOneSecondWindow(&out);
  // The wall clock steps 200 ms forward mid-window, and the stop is late too.
  executor_.PostAt(clock_.MonoNs() + 500 * kNanosPerMilli,
                   [this] { clock_.JumpWall(200 * kNanosPerMilli); });
  executor_.PostAt(clock_.MonoNs() + 990 * kNanosPerMilli,
                   [this] { clock_.Advance(20 * kNanosPerMilli); });
  executor_.Advance(2000 * kNanosPerMilli);
  ASSERT_TRUE(out.result.has_value());
  EXPECT_EQ(out.result->stop_ns, start + 1210 * kNanosPerMilli);
  EXPECT_THAT(out.result->space.warnings(), ::testing::Contains(HasSubstr("clock jump")));
  EXPECT_THAT(out.result->space.warnings(),
              ::testing::Not(::testing::Contains(HasSubstr("trimmed"))));
}

TEST_F(CaptureManagerTest, AStopSoLateTheAgentMustHaveBeenFrozenIsKeptAsMeasured) {
  Outcome out;
  const int64_t start = RunOneSecondWindow(&out);
  executor_.PostAt(clock_.MonoNs() + 400 * kNanosPerMilli,
                   [this] { clock_.Advance(1600 * kNanosPerMilli); });
  executor_.Advance(3000 * kNanosPerMilli);
  ASSERT_TRUE(out.result.has_value());
  EXPECT_EQ(out.result->stop_ns, start + 2000 * kNanosPerMilli);
  EXPECT_THAT(out.result->space.warnings(), ::testing::Contains(HasSubstr("frozen?")));
}

TEST_F(CaptureManagerTest, AReservationHoldsTheSlotForItsSessionUntilTakenReleasedOrLapsed) {
  const std::string key_a(20, 'a'), key_b(20, 'b');
  ASSERT_THAT(manager_.Reserve("sa", key_a, 1000), IsOk());
  ASSERT_THAT(manager_.Reserve("sa", key_a, 1000), IsOk());  // refreshed by its own session
  // Another session can neither reserve nor begin.
  EXPECT_EQ(manager_.Reserve("sb", key_b, 1000).code(), absl::StatusCode::kAlreadyExists);
  CaptureSpec other = Spec(0, 100, "sb");
  other.session_key = key_b;
  const absl::Status refused = manager_.Begin(other).status();
  EXPECT_EQ(refused.code(), absl::StatusCode::kAlreadyExists);
  EXPECT_THAT(refused.message(), HasSubstr("reserved for another capture"));
  EXPECT_THAT(refused.message(), ::testing::Not(HasSubstr("sa")));
  // Its own Begin takes it.
  CaptureSpec own = Spec(0, 100, "sa");
  own.session_key = key_a;
  {
    auto session = manager_.Begin(own);
    ASSERT_THAT(session, IsOk());
    EXPECT_EQ(manager_.Reserve("sb", key_b, 1000).code(), absl::StatusCode::kAlreadyExists);
  }  // never run: the slot is free again, and no reservation is left
  EXPECT_THAT(manager_.Reserve("sb", key_b, 1000), IsOk());
  // Cancel with the same id and key releases it; another key does not.
  ASSERT_THAT(manager_.Cancel("sb", key_a), IsOk());
  EXPECT_EQ(manager_.Reserve("sc", key_a, 1000).code(), absl::StatusCode::kAlreadyExists);
  ASSERT_THAT(manager_.Cancel("sb", key_b), IsOk());
  EXPECT_THAT(manager_.Reserve("sc", key_a, 1000), IsOk());
  // It lapses after its TTL.
  executor_.Advance(1001 * kNanosPerMilli);
  EXPECT_THAT(manager_.Reserve("sd", key_b, 1000), IsOk());
  // Bad requests.
  EXPECT_EQ(manager_.Reserve("se", "", 1000).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(manager_.Reserve("se", key_b, 0).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(manager_.Reserve("se", key_b, 60'001).code(), absl::StatusCode::kInvalidArgument);
}

// Wait-die needs to know whose reservation refused a session: the refusal carries the holder's
// priority and remaining time; a running capture's refusal carries none (nothing to wait for).
TEST_F(CaptureManagerTest, AReservationRefusedByAnotherReservationSaysWhoseItIs) {
  const std::string key_a(20, 'a'), key_b(20, 'b');
  const int64_t now = clock_.WallNs();
  const ReservationPriority older{now - 2'000, 7}, younger{now - 1'000, 3};
  ASSERT_THAT(manager_.Reserve("sa", key_a, 1000, older), IsOk());
  const absl::Status refused = manager_.Reserve("sb", key_b, 1000, younger);
  EXPECT_EQ(refused.code(), absl::StatusCode::kAlreadyExists);
  std::optional<ReservationConflict> conflict = ReservationConflictOf(refused);
  ASSERT_TRUE(conflict.has_value());
  EXPECT_EQ(conflict->holder, older);
  EXPECT_EQ(conflict->remaining_ms, 1000);
  EXPECT_TRUE(older.OlderThan(younger));
  EXPECT_FALSE(younger.OlderThan(older));
  EXPECT_FALSE(older.OlderThan(older));
  EXPECT_TRUE((ReservationPriority{now - 2'000, 3}).OlderThan(older));  // the ticket breaks a tie
  EXPECT_FALSE(ReservationPriority{}.OlderThan(younger));               // unset: never older
  EXPECT_FALSE(older.OlderThan(ReservationPriority{}));
  // A refresh by its own session keeps the priority it gives.
  executor_.Advance(400 * kNanosPerMilli);
  conflict = ReservationConflictOf(manager_.Reserve("sb", key_b, 1000, younger));
  ASSERT_TRUE(conflict.has_value());
  EXPECT_EQ(conflict->remaining_ms, 600);
  // Its own Begin takes it: a running capture refuses with no conflict to wait for.
  CaptureSpec own = Spec(0, 100, "sa");
  own.session_key = key_a;
  auto session = manager_.Begin(own);
  ASSERT_THAT(session, IsOk());
  const absl::Status busy = manager_.Reserve("sb", key_b, 1000, younger);
  EXPECT_EQ(busy.code(), absl::StatusCode::kAlreadyExists);
  EXPECT_THAT(busy.message(), HasSubstr("busy with another capture"));
  EXPECT_FALSE(ReservationConflictOf(busy).has_value());
}

TEST_F(CaptureManagerTest, AnOversizedIdOrCollectorIsQuotedBounded) {
  const std::string huge(1 << 20, 'x');
  const absl::Status bad_id = manager_.Begin(Spec(0, 10, huge + "/")).status();
  EXPECT_EQ(bad_id.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_LT(bad_id.message().size(), 400u);
  EXPECT_THAT(bad_id.message(), HasSubstr("(1048577 bytes)"));
  CaptureSpec spec = Spec(0, 10);
  spec.collectors = {huge + "\x1b[2J"};
  const absl::Status bad_collector = manager_.Begin(spec).status();
  EXPECT_LT(bad_collector.message().size(), 400u);
  EXPECT_EQ(manager_.Cancel(huge).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_LT(manager_.Cancel(huge).message().size(), 400u);
}

TEST_F(CaptureManagerTest, AClockStepBetweenTheClockSyncAndTheWindowMakesTheTracePartial) {
  manager_.NoteClockSync();  // the coordinator measured the offset now
  const CaptureSpec spec = Spec(/*start_in_ms=*/500, /*duration_ms=*/1000);
  clock_.JumpWall(-3 * kNanosPerSecond);  // then the agent's clock stepped back 3 s
  auto session = manager_.Begin(spec);
  ASSERT_THAT(session, IsOk());
  Outcome out;
  Run(**session, &out);
  executor_.Advance(6 * kNanosPerSecond);
  ASSERT_TRUE(out.result.has_value());
  ASSERT_EQ(out.result->shortfalls.size(), 1u);
  const profctl::v1::Shortfall& s = out.result->shortfalls[0];
  EXPECT_EQ(s.kind(), profctl::v1::SHORTFALL_KIND_CLOCK_STEP);
  EXPECT_EQ(s.amount(), static_cast<uint64_t>(3 * kNanosPerSecond));
  EXPECT_THAT(s.detail(), HasSubstr("stepped 3.000 s back between its clock sync"));
  EXPECT_THAT(out.result->space.warnings(),
              ::testing::Contains(HasSubstr("partial: the agent's wall clock")));
}

TEST_F(CaptureManagerTest, AClockThatOnlySlewsOrWasNeverSyncedLeavesTheTraceWhole) {
  // No clock sync seen: nothing to compare the start with.
  {
    auto session = manager_.Begin(Spec(500, 1000, "unsynced"));
    ASSERT_THAT(session, IsOk());
    Outcome out;
    Run(**session, &out);
    executor_.Advance(2 * kNanosPerSecond);
    ASSERT_TRUE(out.result.has_value());
    EXPECT_TRUE(out.result->shortfalls.empty());
  }
  // Synced 10 s before, the wall clock slewed 4 ms (400 ppm) since and 0.4 ms in the window.
  manager_.NoteClockSync();
  executor_.Advance(10 * kNanosPerSecond);
  clock_.JumpWall(4 * kNanosPerMilli);
  auto session = manager_.Begin(Spec(500, 1000, "slewed"));
  ASSERT_THAT(session, IsOk());
  Outcome out;
  Run(**session, &out);
  executor_.Advance(1000 * kNanosPerMilli);
  clock_.JumpWall(400 * kNanosPerMicro);
  executor_.Advance(2 * kNanosPerSecond);
  ASSERT_TRUE(out.result.has_value());
  EXPECT_TRUE(out.result->shortfalls.empty());
  EXPECT_THAT(out.result->space.warnings(),
              ::testing::Not(::testing::Contains(HasSubstr("partial:"))));
}

// A loaded machine preempts the timeline thread for milliseconds between reading the monotonic
// and the wall clock; that is not a clock step (a loaded CI run once failed a whole GPU check on
// a "partial" host this way). A step of a few milliseconds is still told (the test below).
TEST_F(CaptureManagerTest, AThreadPreemptedBetweenItsTwoClockReadsIsNotAClockStep) {
  manager_.NoteClockSync();
  const int64_t t0 = clock_.MonoNs();
  auto session = manager_.Begin(Spec(/*start_in_ms=*/500, /*duration_ms=*/1000));
  ASSERT_THAT(session, IsOk());
  Outcome out;
  Run(**session, &out);
  // Just before the start and the stop, a 5 ms preemption lands between the two reads.
  executor_.PostAt(t0 + 500 * kNanosPerMilli - 1,
                   [this] { clock_.StallBeforeNextWallRead(5 * kNanosPerMilli); });
  executor_.PostAt(t0 + 1500 * kNanosPerMilli - 1,
                   [this] { clock_.StallBeforeNextWallRead(5 * kNanosPerMilli); });
  executor_.Advance(3 * kNanosPerSecond);
  ASSERT_TRUE(out.result.has_value());
  EXPECT_TRUE(out.result->shortfalls.empty());
  EXPECT_THAT(out.result->space.warnings(),
              ::testing::Not(::testing::Contains(HasSubstr("partial:"))));
  EXPECT_THAT(out.result->space.warnings(),
              ::testing::Not(::testing::Contains(HasSubstr("clock jump"))));
}

TEST_F(CaptureManagerTest, AClockStepOfAFewMillisecondsInAWindowIsStillTold) {
  manager_.NoteClockSync();
  Outcome out;
  RunOneSecondWindow(&out);
  executor_.PostAt(clock_.MonoNs() + 400 * kNanosPerMilli,
                   [this] { clock_.JumpWall(3 * kNanosPerMilli); });
  executor_.Advance(2000 * kNanosPerMilli);
  ASSERT_TRUE(out.result.has_value());
  ASSERT_EQ(out.result->shortfalls.size(), 1u);
  EXPECT_EQ(out.result->shortfalls[0].amount(), static_cast<uint64_t>(3 * kNanosPerMilli));
}

TEST_F(CaptureManagerTest, AClockStepDuringTheWindowMakesTheTracePartialWithItsSize) {
  manager_.NoteClockSync();
  Outcome out;
  RunOneSecondWindow(&out);
  executor_.PostAt(clock_.MonoNs() + 400 * kNanosPerMilli,
                   [this] { clock_.JumpWall(-300 * kNanosPerMilli); });
  executor_.Advance(2000 * kNanosPerMilli);
  ASSERT_TRUE(out.result.has_value());
  ASSERT_EQ(out.result->shortfalls.size(), 1u);
  const profctl::v1::Shortfall& s = out.result->shortfalls[0];
  EXPECT_EQ(s.kind(), profctl::v1::SHORTFALL_KIND_CLOCK_STEP);
  EXPECT_EQ(s.amount(), static_cast<uint64_t>(300 * kNanosPerMilli));
  EXPECT_THAT(s.detail(), HasSubstr("stepped 0.300 s back during the window: 1.000 s were "
                                    "recorded, the wall clock says 0.700 s"));
}

TEST_F(CaptureManagerTest, ASnapshotLongerThanTheRecorderHoldsSaysHowMuchIsMissing) {
  ASSERT_THAT(synthetic_.StartRecorder({.keep_ns = 10 * kNanosPerSecond, .max_bytes = 1 << 20},
                                       clock_.WallNs()),
              IsOk());
  executor_.Advance(3 * kNanosPerSecond);  // the recorder holds 3 s
  for (const int64_t past_ms : {2000, 8000}) {
    CaptureSpec snap = Spec(/*start_in_ms=*/0, past_ms, absl::StrCat("snap", past_ms));
    snap.past_ms = past_ms;
    snap.collectors = {"synthetic"};
    auto session = manager_.Begin(snap);
    ASSERT_THAT(session, IsOk());
    Outcome out;
    Run(**session, &out);
    executor_.RunUntilIdle();
    ASSERT_TRUE(out.result.has_value());
    if (past_ms == 2000) {
      EXPECT_TRUE(out.result->shortfalls.empty());
      continue;
    }
    ASSERT_EQ(out.result->shortfalls.size(), 1u);
    const profctl::v1::Shortfall& s = out.result->shortfalls[0];
    EXPECT_EQ(s.kind(), profctl::v1::SHORTFALL_KIND_SHORT_RECORDER);
    // The synthetic job's first step held starts at or after the recorder's start.
    EXPECT_GE(s.amount(), static_cast<uint64_t>(5 * kNanosPerSecond));
    EXPECT_LT(s.amount(), static_cast<uint64_t>(6 * kNanosPerSecond));
    EXPECT_THAT(s.detail(), HasSubstr("synthetic: the flight recorder held the last "));
    EXPECT_THAT(s.detail(), HasSubstr("ms only of the 8000 ms asked"));
  }
}

TEST_F(CaptureManagerTest, AReservationIsAShortLeaseThatRenewalsKeepUpToItsLongestLife) {
  const std::string key_a(20, 'a'), key_b(20, 'b');
  int64_t granted_ms = 0;
  // Whatever ttl is asked, the lease is 2 s: a dead coordinator's lapses within it.
  ASSERT_THAT(manager_.Reserve("sa", key_a, 60'000, {}, "ipv4:10.0.0.1", &granted_ms), IsOk());
  EXPECT_EQ(granted_ms, 2000);
  executor_.Advance(1999 * kNanosPerMilli);
  EXPECT_EQ(manager_.Reserve("sb", key_b, 1000).code(), absl::StatusCode::kAlreadyExists);
  executor_.Advance(1 * kNanosPerMilli);
  // Lapsed: another session may reserve.
  ASSERT_THAT(manager_.Reserve("sb", key_b, 60'000, {}, "ipv4:10.0.0.2"), IsOk());
  // The live coordinator renews every second: held, but never past 10 s from its first grant.
  for (int s = 1; s <= 9; ++s) {
    executor_.Advance(1000 * kNanosPerMilli);
    ASSERT_THAT(manager_.Reserve("sb", key_b, 60'000, {}, "ipv4:10.0.0.2", &granted_ms), IsOk());
    EXPECT_EQ(granted_ms, s < 9 ? 2000 : 1000) << s;
    EXPECT_EQ(manager_.Reserve("sc", key_a, 1000).code(), absl::StatusCode::kAlreadyExists);
  }
  executor_.Advance(1000 * kNanosPerMilli);
  EXPECT_THAT(manager_.Reserve("sc", key_a, 1000), IsOk());
}

// The coordinator renews its reservation until its agent says the capture started, so a renewal
// may cross its own Capture: it reserves nothing, during the capture or after it, so nothing
// lapses (no probation) and another session gets the slot the moment the capture ends.
TEST_F(CaptureManagerTest, ARenewalThatCrossedItsOwnCaptureReservesNothing) {
  const std::string key(20, 'a'), other(20, 'b');
  const std::string peer = "ipv4:10.0.0.1";
  ASSERT_THAT(manager_.Reserve("s1", key, 2000, {}, peer), IsOk());
  CaptureSpec spec = Spec(0, 100, "s1");
  spec.session_key = key;
  absl::StatusOr<std::unique_ptr<CaptureManager::Session>> session = manager_.Begin(spec);
  ASSERT_THAT(session, IsOk());
  Outcome out;
  Run(**session, &out);
  int64_t granted_ms = -1;
  ASSERT_THAT(manager_.Reserve("s1", key, 2000, {}, peer, &granted_ms), IsOk());
  EXPECT_EQ(granted_ms, 0);
  executor_.Advance(200 * kNanosPerMilli);
  ASSERT_TRUE(out.result.has_value());
  granted_ms = -1;
  ASSERT_THAT(manager_.Reserve("s1", key, 2000, {}, peer, &granted_ms), IsOk());
  EXPECT_EQ(granted_ms, 0);
  // Free at once, and still free after a lease: nothing lapsed, so the peer is on no probation.
  ASSERT_THAT(manager_.Reserve("s2", other, 2000, {}, "ipv4:10.0.0.2"), IsOk());
  ASSERT_THAT(manager_.Cancel("s2", other), IsOk());
  executor_.Advance(3000 * kNanosPerMilli);
  ASSERT_THAT(manager_.Reserve("s3", key, 2000, {}, peer), IsOk());
  EXPECT_EQ(manager_.Reserve("s4", other, 2000, {}, "ipv4:10.0.0.2").code(),
            absl::StatusCode::kAlreadyExists);  // s3's holds: its peer yields to no one
  // Another key under the same id is another session: it reserves as usual (and is refused).
  EXPECT_EQ(manager_.Reserve("s1", other, 2000).code(), absl::StatusCode::kAlreadyExists);
}

TEST_F(CaptureManagerTest, APeerWhoseReservationLapsedWithoutItsCaptureYieldsToOthers) {
  const std::string key_a(20, 'a'), key_b(20, 'b'), key_c(20, 'c');
  const std::string idle_peer = "ipv4:10.0.0.9", other_peer = "ipv4:10.0.0.7";
  ASSERT_THAT(manager_.Reserve("r1", key_a, 1000, {}, idle_peer), IsOk());
  executor_.Advance(1001 * kNanosPerMilli);  // lapsed, never captured
  // Its next reservations, under any id, are granted but hold against no one.
  ASSERT_THAT(manager_.Reserve("r2", key_a, 1000, {}, idle_peer), IsOk());
  ASSERT_THAT(manager_.Reserve("s1", key_b, 1000, {}, other_peer), IsOk());
  EXPECT_EQ(manager_.Reserve("r3", key_a, 1000, {}, idle_peer).code(),
            absl::StatusCode::kAlreadyExists);  // the other peer's holds
  ASSERT_THAT(manager_.Cancel("s1", key_b), IsOk());
  ASSERT_THAT(manager_.Reserve("r4", key_a, 1000, {}, idle_peer), IsOk());
  CaptureSpec capture = Spec(0, 100, "s2");
  capture.session_key = key_c;
  {
    auto session = manager_.Begin(capture);  // a capture of another session starts at once
    EXPECT_THAT(session, IsOk());
  }
  // A peer whose reservation was taken by its capture is on no probation.
  ASSERT_THAT(manager_.Reserve("s3", key_b, 1000, {}, other_peer), IsOk());
  CaptureSpec own = Spec(0, 100, "s3");
  own.session_key = key_b;
  { ASSERT_THAT(manager_.Begin(own), IsOk()); }
  ASSERT_THAT(manager_.Reserve("s4", key_b, 1000, {}, other_peer), IsOk());
  EXPECT_EQ(manager_.Reserve("r5", key_a, 1000, {}, idle_peer).code(),
            absl::StatusCode::kAlreadyExists);
  // Probation ends 10 s after the lapse.
  ASSERT_THAT(manager_.Cancel("s4", key_b), IsOk());
  executor_.Advance(10'000 * kNanosPerMilli);
  ASSERT_THAT(manager_.Reserve("r6", key_a, 1000, {}, idle_peer), IsOk());
  EXPECT_EQ(manager_.Reserve("s5", key_b, 1000, {}, other_peer).code(),
            absl::StatusCode::kAlreadyExists);
}

TEST_F(CaptureManagerTest, AReservationsPriorityIsJudgedOnTheAgentsClock) {
  const std::string key(20, 'a'), other(20, 'b');
  const int64_t now = clock_.WallNs();
  const auto at = [&](int64_t ms_from_now) {
    return ReservationPriority{now + ms_from_now * kNanosPerMilli, 1};
  };
  // Whose reservation refuses another: the priority it is kept with.
  const auto holder = [&](const std::string& id, ReservationPriority p) {
    EXPECT_THAT(manager_.Reserve(id, key, 1000, p), IsOk());
    std::optional<ReservationConflict> c =
        ReservationConflictOf(manager_.Reserve("x", other, 1000, at(0)));
    EXPECT_THAT(manager_.Cancel(id, key), IsOk());
    return c.has_value() ? c->holder : ReservationPriority{-1, 0};
  };
  // Beyond the bounds: granted, but ordered against no one (nobody waits for it).
  EXPECT_EQ(holder("f1", at(10'001)), ReservationPriority{});
  EXPECT_EQ(holder("o1", at(-20'001)), ReservationPriority{});
  // Within them: kept.
  EXPECT_EQ(holder("f2", at(9'000)), at(9'000));
  EXPECT_EQ(holder("o2", at(-19'000)), at(-19'000));
}

// Every collector's steps, oldest first over all of them (a tie keeps the collectors' order),
// the latest `max`; a collector that answered out of order is put in order, not trusted.
TEST(CaptureManagerStepsTest, StepsOfEveryCollectorAreMergedOldestFirst) {
  FakeClock clock;
  FakeExecutor executor(&clock);
  StepsCollector a("a", {{10, 1}, {30, 2}, {50, 3}, {70, 4}});
  StepsCollector b("b", {{20, 1}, {30, 2}, {60, 3}});
  StepsCollector c("c", {{65, 9}, {15, 8}});  // out of order
  CaptureManager manager({&clock, {&a, &b, &c}, &executor}, {.host_name = "h"});
  std::vector<std::string> sources;
  const std::vector<StepSample> all = manager.RecentSteps(0, 100, 100, &sources);
  std::vector<std::string> got;
  for (const StepSample& s : all) got.push_back(absl::StrCat(s.source, s.end_wall_ns));
  EXPECT_THAT(got, ElementsAre("a10", "c15", "b20", "a30", "b30", "a50", "b60", "c65", "a70"));
  EXPECT_THAT(sources, ElementsAre("a", "b", "c"));

  got.clear();
  for (const StepSample& s : manager.RecentSteps(15, 65, 3)) {
    got.push_back(absl::StrCat(s.source, s.end_wall_ns));
  }
  EXPECT_THAT(got, ElementsAre("a50", "b60", "c65"));
  EXPECT_TRUE(manager.RecentSteps(0, 100, 0).empty());
}

}  // namespace
}  // namespace profctl::agent
