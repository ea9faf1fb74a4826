// The coordinator daemon's core on a fake clock: the session runner (events, folders, shutdown),
// scheduled runs over days of schedule with retention and persisted last runs, reload, target
// discovery; and its metrics text.
#include <unistd.h>

#include <algorithm>
#include <deque>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "common/file_util.h"
#include "coordinator/schedule/scheduler.h"
#include "coordinator/service/coordinator_service.h"
#include "coordinator/service/daemon.h"
#include "coordinator/service/session_index.h"
#include "coordinator/service/session_runner.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "tests/build_paths.h"
#include "tests/fake_agent.h"
#include "tests/status_matchers.h"
#include "tests/temp_dir.h"

using ::profctl::test_paths::SourcePath;
using ::profctl::testkit::IsOk;

namespace profctl::coordinator::service {
namespace {

using ::profctl::testkit::FakeAgent;
using ::profctl::testkit::FakeAgentFactory;
using ::profctl::testkit::FakeClock;
using ::profctl::testkit::FakeExecutor;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

constexpr int64_t kHourNs = 3600 * kNanosPerSecond;

synthetic::SyntheticJobConfig Rank(int r) {
  synthetic::SyntheticJobConfig c;
  c.rank = r;
  c.world = 2;
  c.step_ms = 20;
  return c;
}

class ServiceTest : public ::testing::Test {
 protected:
  ServiceTest() {
    for (int r = 0; r < 2; ++r) {
      agents_.push_back(
          std::make_unique<FakeAgent>(&ex_, &clock_, testkit::FakeAgentBehavior{}, Rank(r)));
      factory_.Add(absl::StrCat("h", r, ":1"), agents_.back().get());
    }
  }

  CapturePlan Plan(const std::string& session, int64_t duration_ms = 200) {
    CapturePlan plan;
    plan.workers = {*ParseWorker("h0:1"), *ParseWorker("h1:1")};
    plan.duration_ms = duration_ms;
    plan.session = session;
    return plan;
  }

  // Runs the fake executor until `done` or an hour of fake time passes.
  bool RunUntil(const std::function<bool()>& done) {
    return ex_.RunUntil(done, clock_.MonoNs() + kHourNs);
  }

  std::string WriteConfig(const std::string& schedules) {
    const std::string path = JoinPath(tmp_.path(), "coordinator.yaml");
    EXPECT_THAT(WriteFileAtomically(path, absl::StrCat("logdir: ", logdir(), "\n", schedules)),
                IsOk());
    return path;
  }
  std::string logdir() const { return JoinPath(tmp_.path(), "logs"); }

  std::unique_ptr<Daemon> StartDaemon(const std::string& config) {
    absl::StatusOr<std::unique_ptr<Daemon>> d =
        Daemon::Start({.executor = &ex_,
                       .pool = nullptr,
                       .clients = &factory_,
                       .engine_options = {},
                       .jitter_seed = 1,
                       .resolve = nullptr,
                       .log = [this](const std::string& line) { log_.push_back(line); }},
                      config);
    EXPECT_THAT(d, IsOk());
    return d.ok() ? *std::move(d) : nullptr;
  }
  void StopDaemon(std::unique_ptr<Daemon>& d) {
    d->Shutdown();
    EXPECT_TRUE(RunUntil([&] { return d->Idle() && d->runner().RunningSessions().empty(); }));
    d.reset();
  }
  std::vector<std::string> SessionNames(const std::string& schedule = "") const {
    std::vector<std::string> names;
    for (const auto& s : ListSessions(logdir(), schedule, 0).sessions) names.push_back(s.session());
    return names;
  }

  const testkit::TempDir tmp_;
  FakeClock clock_;
  FakeExecutor ex_{&clock_};
  FakeAgentFactory factory_{&ex_};
  std::vector<std::unique_ptr<FakeAgent>> agents_;
  std::vector<std::string> log_;
};

TEST_F(ServiceTest, RunnerStartsASessionFolderAndReportsItsEvents) {
  SessionRunner runner({.executor = &ex_, .pool = nullptr, .clients = &factory_}, logdir());
  std::shared_ptr<EventQueue> all = runner.Watch("");
  v1::SessionOrigin origin;
  origin.set_kind("api");
  std::optional<v1::SessionManifest> finished;
  absl::StatusOr<v1::StartCaptureResponse> started = runner.Start(
      Plan("s1", 1500), {.make_unique = false, .origin = origin, .on_finished = [&](const auto& m) {
                           ASSERT_THAT(m, IsOk());
                           finished = *m;
                         }});
  ASSERT_THAT(started, IsOk());
  EXPECT_EQ(started->session(), "s1");
  EXPECT_EQ(started->session_dir(), JoinPath(logdir(), "plugins/profile/s1"));
  ASSERT_TRUE(runner.Running("s1").has_value());
  EXPECT_TRUE(PathExists(JoinPath(started->session_dir(), kRunningMarkerFileName)));
  // A second watcher of that session alone joins while it runs.
  std::shared_ptr<EventQueue> one = runner.Watch("s1");

  // The same name again while it runs: refused, nothing started.
  EXPECT_EQ(runner.Start(Plan("s1"), {}).status().code(), absl::StatusCode::kAlreadyExists);

  ASSERT_TRUE(RunUntil([&] { return finished.has_value(); }));
  EXPECT_TRUE(runner.WaitIdle(absl::Seconds(10)));
  EXPECT_EQ(finished->status(), v1::SESSION_STATUS_OK);
  EXPECT_EQ(finished->origin().kind(), "api");
  EXPECT_FALSE(PathExists(JoinPath(started->session_dir(), kRunningMarkerFileName)));

  // session.json on disk says the same, origin included.
  absl::StatusOr<v1::SessionInfo> info = ReadSession(logdir(), "s1");
  ASSERT_THAT(info, IsOk());
  EXPECT_EQ(info->manifest().status(), v1::SESSION_STATUS_OK);
  EXPECT_EQ(info->origin().kind(), "api");
  EXPECT_EQ(info->manifest().hosts_size(), 2);

  std::vector<v1::SessionEventKind> kinds;
  v1::SessionEvent e;
  while (all->Next(&e, absl::ZeroDuration())) kinds.push_back(e.kind());
  ASSERT_GE(kinds.size(), 3u);  // started, progress lines (a 1.5 s window), finished
  EXPECT_EQ(kinds.front(), v1::SESSION_EVENT_KIND_STARTED);
  EXPECT_EQ(kinds.back(), v1::SESSION_EVENT_KIND_FINISHED);
  EXPECT_NE(std::find(kinds.begin(), kinds.end(), v1::SESSION_EVENT_KIND_PROGRESS), kinds.end());

  ASSERT_TRUE(one->Next(&e, absl::ZeroDuration()));
  EXPECT_EQ(e.kind(), v1::SESSION_EVENT_KIND_STARTED);
  v1::SessionEvent last;
  while (one->Next(&e, absl::ZeroDuration())) last = e;
  EXPECT_EQ(last.kind(), v1::SESSION_EVENT_KIND_FINISHED);
  EXPECT_EQ(last.manifest().status(), v1::SESSION_STATUS_OK);
  EXPECT_THAT(last.message(), HasSubstr("2/2 hosts"));

  const RunnerCounters c = runner.counters();
  EXPECT_EQ(c.started, 1);
  EXPECT_EQ(c.finished_ok, 1);
  EXPECT_EQ(c.start_errors, 1);
  EXPECT_EQ(c.running, 0);
  EXPECT_GT(c.bytes_saved, 0);
  // Idle means released: the engine (its hosts' traces) is gone and its memory handed back.
  EXPECT_EQ(c.sessions_released, 1);
}

TEST_F(ServiceTest, ShutdownCancelsRunningCapturesWhichSaveWhatWasRecorded) {
  SessionRunner runner({.executor = &ex_, .pool = nullptr, .clients = &factory_}, logdir());
  std::optional<v1::SessionManifest> finished;
  ASSERT_THAT(runner.Start(Plan("long", 60'000),
                           {.on_finished = [&](const auto& m) { finished = m.value(); }}),
              IsOk());
  std::shared_ptr<EventQueue> watcher = runner.Watch("");
  // Into the window, then shut down.
  ex_.Advance(2 * kNanosPerSecond);
  ASSERT_FALSE(finished.has_value());
  runner.Shutdown();
  EXPECT_EQ(runner.Start(Plan("late"), {}).status().code(), absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(RunUntil([&] { return finished.has_value(); }));
  EXPECT_THAT(absl::StrJoin(finished->errors(), "\n"), HasSubstr("interrupt"));
  EXPECT_EQ(finished->hosts_size(), 2);
  for (const auto& h : finished->hosts()) EXPECT_EQ(h.status(), v1::HOST_STATUS_INCOMPLETE);
  // Watchers end once the last session is over.
  v1::SessionEvent e;
  while (watcher->Next(&e, absl::ZeroDuration())) {
  }
  EXPECT_TRUE(watcher->closed());
}

TEST_F(ServiceTest, EventQueueDropsProgressFirstWhenAReaderLagsBehind) {
  EventQueue q("", /*capacity=*/3);
  auto ev = [](v1::SessionEventKind k, const std::string& m) {
    v1::SessionEvent e;
    e.set_kind(k);
    e.set_message(m);
    return e;
  };
  q.Push(ev(v1::SESSION_EVENT_KIND_STARTED, "s"));
  q.Push(ev(v1::SESSION_EVENT_KIND_PROGRESS, "p1"));
  q.Push(ev(v1::SESSION_EVENT_KIND_PROGRESS, "p2"));
  q.Push(ev(v1::SESSION_EVENT_KIND_FINISHED, "f"));
  EXPECT_EQ(q.dropped(), 1);
  std::vector<std::string> got;
  v1::SessionEvent e;
  while (q.Next(&e, absl::ZeroDuration())) got.push_back(e.message());
  EXPECT_THAT(got, ElementsAre("s", "p2", "f"));
  // A filtered queue ignores other sessions.
  EventQueue only("a");
  v1::SessionEvent other = ev(v1::SESSION_EVENT_KIND_STARTED, "x");
  other.set_session("b");
  only.Push(other);
  EXPECT_FALSE(only.Next(&e, absl::ZeroDuration()));
}

TEST_F(ServiceTest, HourlyScheduleRunsForDaysKeepsItsRetentionAndSurvivesARestart) {
  const std::string config = WriteConfig(R"(schedules:
  - name: hourly
    targets: [h0:1, h1:1]
    interval: 1h
    duration: 200ms
    missed: run_once
    retention: {keep_last: 3}
)");
  std::unique_ptr<Daemon> d = StartDaemon(config);
  ASSERT_NE(d, nullptr);
  // Two days of schedule.
  ex_.AdvanceTo(clock_.MonoNs() + 48 * kHourNs + 10 * kNanosPerSecond);
  ASSERT_TRUE(RunUntil([&] { return d->runner().RunningSessions().empty(); }));
  std::vector<std::string> names = SessionNames("hourly");
  ASSERT_EQ(names.size(), 3u) << absl::StrJoin(log_, "\n");
  // Newest first, named by the UTC time of each run (2026-01-01 is when the fake clock starts).
  EXPECT_EQ(names[0], "hourly_20260103T000000Z");
  EXPECT_EQ(names[2], "hourly_20260102T220000Z");
  for (const auto& s : ListSessions(logdir(), "hourly", 0).sessions) {
    EXPECT_EQ(s.manifest().status(), v1::SESSION_STATUS_OK) << s.session();
    EXPECT_EQ(s.origin().kind(), "schedule");
    EXPECT_EQ(s.origin().schedule(), "hourly");
  }
  DaemonCounters c = d->counters();
  EXPECT_EQ(c.retention_deleted, 45);  // 48 runs, 3 kept
  EXPECT_EQ(c.sessions_kept, 3);
  EXPECT_EQ(d->runner().counters().finished_ok, 48);

  std::optional<v1::ListSchedulesResponse> schedules;
  d->Schedules([&](v1::ListSchedulesResponse r) { schedules = std::move(r); });
  ex_.RunUntilIdle();
  ASSERT_TRUE(schedules.has_value());
  ASSERT_EQ(schedules->schedules_size(), 1);
  EXPECT_EQ(schedules->schedules(0).runs_finished(), 48);
  EXPECT_EQ(schedules->schedules(0).timing(), "every 3600s");
  EXPECT_THAT(schedules->schedules(0).last_outcome(), HasSubstr("ok, 2/2 hosts"));

  // What a restart needs is on disk.
  absl::StatusOr<std::string> state = ReadFile(ScheduleStatePath(logdir()));
  ASSERT_THAT(state, IsOk());
  EXPECT_THAT(*state, HasSubstr("\"last_run_wall_ns\""));
  StopDaemon(d);

  // Down for 5 hours: run_once catches up once at start-up, then the regular times resume.
  ex_.AdvanceTo(clock_.MonoNs() + 5 * kHourNs);
  d = StartDaemon(config);
  ASSERT_NE(d, nullptr);
  ex_.Advance(60 * kNanosPerSecond);
  ASSERT_TRUE(RunUntil([&] { return d->runner().RunningSessions().empty(); }));
  EXPECT_EQ(d->runner().counters().started, 1);
  schedules.reset();
  d->Schedules([&](v1::ListSchedulesResponse r) { schedules = std::move(r); });
  ex_.RunUntilIdle();
  ASSERT_TRUE(schedules.has_value());
  EXPECT_EQ(schedules->schedules(0).missed_down(), 5);
  StopDaemon(d);
}

TEST_F(ServiceTest, OverlappingSchedulesWarnAtLoadAndARunOnBusyHostsIsSkipped) {
  // Both fire at every hour's :00 on the same hosts: whichever starts second finds them busy.
  const std::string config = WriteConfig(R"(schedules:
  - name: a
    targets: [h0:1, h1:1]
    interval: 1h
    duration: 200ms
  - name: b
    targets: [h1:1, h0:1]
    interval: 1h
    duration: 200ms
)");
  std::unique_ptr<Daemon> d = StartDaemon(config);
  ASSERT_NE(d, nullptr);
  const std::string log = absl::StrJoin(log_, "\n");
  EXPECT_THAT(log, HasSubstr("warning: schedules a, b capture the same host h0:1: a run whose "
                             "hosts are busy with another schedule's session is skipped"));
  EXPECT_THAT(log, HasSubstr("warning: schedules a, b capture the same host h1:1"));
  ex_.AdvanceTo(clock_.MonoNs() + 2 * kHourNs + 10 * kNanosPerSecond);
  ASSERT_TRUE(RunUntil([&] { return d->runner().RunningSessions().empty(); }));
  // Two hours: one session per hour, the other run skipped, none failed.
  EXPECT_EQ(SessionNames("a").size() + SessionNames("b").size(), 2u) << absl::StrJoin(log_, "\n");
  EXPECT_EQ(d->runner().counters().finished_ok, 2);
  EXPECT_EQ(d->counters().runs_skipped_hosts_busy, 2);
  EXPECT_EQ(d->counters().runs_not_started, 0);
  EXPECT_THAT(absl::StrJoin(log_, "\n"), HasSubstr(" skipped: host h"));
  EXPECT_THAT(absl::StrJoin(log_, "\n"), HasSubstr(" is busy with session "));
  std::optional<v1::ListSchedulesResponse> schedules;
  d->Schedules([&](v1::ListSchedulesResponse r) { schedules = std::move(r); });
  ex_.RunUntilIdle();
  ASSERT_TRUE(schedules.has_value());
  int64_t skipped = 0;
  for (const v1::ScheduleInfo& info : schedules->schedules()) skipped += info.skipped_hosts_busy();
  EXPECT_EQ(skipped, 2);
  EXPECT_THAT(RenderMetrics(*d),
              HasSubstr("profctl_coordinator_runs_skipped_hosts_busy_total 2\n"));
  StopDaemon(d);
}

TEST(OverlapWarningsTest, NamesSharedHostsOnceAndStaysShort) {
  std::vector<schedule::ScheduleConfig> many(300);
  for (size_t i = 0; i < many.size(); ++i) {
    many[i].name = absl::StrCat("s", i);
    many[i].targets.list = {"h0:1", "[::1]:2", absl::StrCat("own", i, ":1")};
  }
  const std::vector<std::string> lines = schedule::OverlapWarnings(many);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_THAT(lines[0], HasSubstr("schedules s0, s1, s2, s3, s4 and 295 more capture the same "
                                  "host [::1]:2"));
  EXPECT_THAT(lines[1], HasSubstr("host h0:1"));
  many.resize(1);
  EXPECT_THAT(schedule::OverlapWarnings(many), IsEmpty());
}

TEST_F(ServiceTest, ReloadAppliesANewScheduleAndRefusesABadConfig) {
  const std::string config = WriteConfig(R"(schedules:
  - name: a
    targets: [h0:1]
    interval: 1h
    duration: 100ms
)");
  std::unique_ptr<Daemon> d = StartDaemon(config);
  ASSERT_NE(d, nullptr);
  ex_.RunUntilIdle();
  // A config with an error is refused, naming file, line and key; the old one keeps running.
  WriteConfig("schedules:\n  - name: a\n    targets: [h0:1]\n    interval: 1x\n");
  absl::Status bad = d->Reload();
  EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.message(), HasSubstr("coordinator.yaml:")) << bad;
  EXPECT_THAT(bad.message(), HasSubstr(": schedules[0].interval")) << bad;
  // A changed log dir is refused too.
  ASSERT_THAT(WriteFileAtomically(config, "logdir: /elsewhere\nschedules: []\n"), IsOk());
  EXPECT_THAT(d->Reload().message(), HasSubstr("logdir changed"));
  // A good one: schedule b every 15 minutes replaces a.
  WriteConfig(R"(schedules:
  - name: b
    targets: [h1:1]
    interval: 15m
    duration: 100ms
)");
  ASSERT_THAT(d->Reload(), IsOk());
  ex_.AdvanceTo(clock_.MonoNs() + kHourNs + kNanosPerSecond);
  ASSERT_TRUE(RunUntil([&] { return d->runner().RunningSessions().empty(); }));
  EXPECT_EQ(SessionNames("a").size(), 0u);
  EXPECT_EQ(SessionNames("b").size(), 4u);
  EXPECT_EQ(d->counters().reloads, 1);
  EXPECT_EQ(d->counters().reload_errors, 2);
  StopDaemon(d);
}

TEST_F(ServiceTest, ARunWhoseTargetsCannotBeResolvedIsCountedAndTheScheduleGoesOn) {
  const std::string config = WriteConfig(absl::StrCat(R"(schedules:
  - name: f
    targets: )",
                                                      JoinPath(tmp_.path(), "missing.txt"), R"(
    interval: 1h
    duration: 100ms
)"));
  std::unique_ptr<Daemon> d = StartDaemon(config);
  ASSERT_NE(d, nullptr);
  ex_.AdvanceTo(clock_.MonoNs() + kHourNs + kNanosPerSecond);
  EXPECT_EQ(d->counters().runs_not_started, 1);
  EXPECT_THAT(absl::StrJoin(log_, "\n"), HasSubstr("missing.txt"));
  // The file appears: the next run reads it.
  ASSERT_THAT(WriteFileAtomically(JoinPath(tmp_.path(), "missing.txt"),
                                  "# the trainers\nh0:1\n\nh1:1  # rank 1\n"),
              IsOk());
  ex_.AdvanceTo(clock_.MonoNs() + kHourNs);
  ASSERT_TRUE(RunUntil([&] { return d->runner().RunningSessions().empty(); }));
  ASSERT_EQ(SessionNames("f").size(), 1u);
  EXPECT_EQ(ListSessions(logdir(), "f", 0).sessions[0].manifest().request().workers_size(), 2);
  StopDaemon(d);
}

// 300 schedules due at one instant: each run's start and end changed the schedules' state, and
// each change wrote (and fsynced) all of it, one write at a time on the pool the captures save
// with: 600 writes of 300 schedules. The writes are coalesced: here 2, and the file holds every
// schedule's last run and outcome.
TEST_F(ServiceTest, ManySchedulesDueTogetherWriteTheirStateAFewTimes) {
  std::string schedules = "schedules:\n";
  for (int i = 0; i < 300; ++i) {
    absl::StrAppend(&schedules, "  - name: s", i,
                    "\n    targets: [h0:1]\n    interval: 1h\n    duration: 100ms\n");
  }
  const std::string config = WriteConfig(schedules);
  // Runs nothing until told.
  struct ManualPool final : WorkPool {
    void Submit(Executor::Task job) override { jobs.push_back(std::move(job)); }
    void RunAll() {
      while (!jobs.empty()) {
        Executor::Task job = std::move(jobs.front());
        jobs.pop_front();
        std::move(job)();
      }
    }
    std::deque<Executor::Task> jobs;
  } pool;
  absl::StatusOr<std::unique_ptr<Daemon>> d = Daemon::Start(
      {.executor = &ex_,
       .pool = &pool,
       .clients = &factory_,
       .jitter_seed = 1,
       .resolve = [](const schedule::Targets&) -> absl::StatusOr<std::vector<WorkerAddress>> {
         return absl::UnavailableError("no such pod");
       },
       .log = [this](const std::string& line) { log_.push_back(line); }},
      config);
  ASSERT_THAT(d, IsOk());
  ex_.AdvanceTo(clock_.MonoNs() + kHourNs + kNanosPerSecond);  // every schedule fires
  pool.RunAll();
  EXPECT_EQ((*d)->counters().runs_not_started, 300);
  EXPECT_EQ((*d)->counters().state_writes, 2);
  absl::StatusOr<std::string> state = ReadFile(ScheduleStatePath(logdir()));
  ASSERT_THAT(state, IsOk());
  v1::SchedulePersistedState persisted;
  ASSERT_THAT(google::protobuf::util::JsonStringToMessage(*state, &persisted), IsOk());
  ASSERT_EQ(persisted.schedules_size(), 300);
  for (const auto& sc : persisted.schedules()) {
    EXPECT_GT(sc.last_run_wall_ns(), 0) << sc.name();
    EXPECT_THAT(sc.last_outcome(), HasSubstr("not started: no such pod")) << sc.name();
  }
  (*d)->Shutdown();
  ASSERT_TRUE(RunUntil([&] {
    pool.RunAll();
    return (*d)->Idle();
  }));
  d->reset();
}

TEST_F(ServiceTest, TargetsResolveFromListsFilesAndDns) {
  schedule::Targets list{.kind = schedule::TargetsKind::kList, .list = {"a:1", "grpc://b:2"}};
  absl::StatusOr<std::vector<WorkerAddress>> w = ResolveTargets(list);
  ASSERT_THAT(w, IsOk());
  EXPECT_EQ(w->size(), 2u);

  const std::string file = JoinPath(tmp_.path(), "targets.txt");
  ASSERT_THAT(WriteFileAtomically(file, "a:1\nnot a worker\n"), IsOk());
  w = ResolveTargets({.kind = schedule::TargetsKind::kFile, .source = file});
  EXPECT_EQ(w.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(w.status().message(), HasSubstr("targets.txt:2"));
  ASSERT_THAT(WriteFileAtomically(file, "# nothing\n"), IsOk());
  EXPECT_THAT(
      ResolveTargets({.kind = schedule::TargetsKind::kFile, .source = file}).status().message(),
      HasSubstr("no workers"));
  // The file --workers=@FILE takes: by line, comma or space.
  ASSERT_THAT(WriteFileAtomically(file, "# rack 1\na:1, b:1 grpc://c:2\nd:1\n"), IsOk());
  w = ResolveTargets({.kind = schedule::TargetsKind::kFile, .source = file});
  ASSERT_THAT(w, IsOk());
  ASSERT_EQ(w->size(), 4u);
  EXPECT_EQ((*w)[2].address, "grpc://c:2");
  ASSERT_THAT(WriteFileAtomically(file, "a:1\nb:1\na:1\n"), IsOk());
  EXPECT_THAT(
      ResolveTargets({.kind = schedule::TargetsKind::kFile, .source = file}).status().message(),
      HasSubstr("targets.txt:3: worker 'a:1' is listed twice (first on line 1)"));

  // localhost resolves locally (no network): every address it has, with the port.
  w = ResolveTargets({.kind = schedule::TargetsKind::kDns, .source = "localhost:6000"});
  ASSERT_THAT(w, IsOk());
  std::vector<std::string> addresses;
  for (const WorkerAddress& a : *w) addresses.push_back(a.address);
  EXPECT_THAT(addresses, ::testing::Contains("127.0.0.1:6000"));
  EXPECT_EQ(
      ResolveTargets({.kind = schedule::TargetsKind::kDns, .source = "no-such-host.invalid:6000"})
          .status()
          .code(),
      absl::StatusCode::kUnavailable);
}

TEST_F(ServiceTest, StartCaptureRequestsAreCheckedLikeCaptureFlags) {
  CapturePlan plan = Plan("x", 500);
  plan.retries = 2;
  plan.min_hosts = 2;
  plan.reader.step_pattern = R"(step (\d+))";
  absl::StatusOr<CapturePlan> back = PlanFromRequest(RequestFromPlan(plan));
  ASSERT_THAT(back, IsOk());
  EXPECT_EQ(back->workers.size(), 2u);
  EXPECT_EQ(back->duration_ms, 500);
  EXPECT_EQ(back->retries, 2);
  EXPECT_EQ(back->min_hosts, 2u);
  EXPECT_EQ(back->reader.step_pattern, plan.reader.step_pattern);

  v1::StartCaptureRequest r = RequestFromPlan(plan);
  r.mutable_request()->set_duration_ms(0);
  EXPECT_THAT(PlanFromRequest(r).status().message(), HasSubstr("duration_ms=0"));
  r = RequestFromPlan(plan);
  r.mutable_request()->clear_workers();
  EXPECT_THAT(PlanFromRequest(r).status().message(), HasSubstr("workers"));
  r = RequestFromPlan(plan);
  r.mutable_request()->set_min_hosts(3);
  EXPECT_THAT(PlanFromRequest(r).status().message(), HasSubstr("min_hosts=3"));
  r = RequestFromPlan(plan);
  r.set_step_pattern("(");
  EXPECT_THAT(PlanFromRequest(r).status().message(), HasSubstr("step_pattern"));
}

TEST_F(ServiceTest, MetricsTextNamesCapturesRetentionAndReloads) {
  const std::string config = WriteConfig(R"(schedules:
  - name: m
    targets: [h0:1, h1:1]
    interval: 1h
    duration: 100ms
    retention: {keep_last: 1}
)");
  std::unique_ptr<Daemon> d = StartDaemon(config);
  ASSERT_NE(d, nullptr);
  ex_.AdvanceTo(clock_.MonoNs() + 2 * kHourNs + kNanosPerSecond);
  ASSERT_TRUE(RunUntil([&] { return d->runner().RunningSessions().empty(); }));
  // Idle: the reaper has freed both finished sessions (it runs on its own thread).
  ASSERT_TRUE(d->runner().WaitIdle(absl::Seconds(30)));
  const std::string text = RenderMetrics(*d);
  EXPECT_THAT(text, HasSubstr("# TYPE profctl_coordinator_captures_started_total counter\n"
                              "profctl_coordinator_captures_started_total 2\n"));
  EXPECT_THAT(text, HasSubstr("profctl_coordinator_captures_finished_total{outcome=\"ok\"} 2\n"));
  EXPECT_THAT(text, HasSubstr("profctl_coordinator_retention_deleted_total 1\n"));
  EXPECT_THAT(text, HasSubstr("profctl_coordinator_sessions_kept 1\n"));
  EXPECT_THAT(text, HasSubstr("# TYPE profctl_coordinator_sessions_released_total counter\n"
                              "profctl_coordinator_sessions_released_total 2\n"));
  // HELP/TYPE once per family.
  size_t count = 0;
  for (size_t p = text.find("# TYPE profctl_coordinator_captures_finished_total");
       p != std::string::npos;
       p = text.find("# TYPE profctl_coordinator_captures_finished_total", p + 1)) {
    ++count;
  }
  EXPECT_EQ(count, 1u);
  StopDaemon(d);
}

// A job that slows down 20 minutes in (2x step_ms from one instant on every rank): the trigger
// captures the pod once, a few polls after the slowdown, records why in the session, and does
// not fire again (cooldown, then a baseline that has caught up). A healthy job never fires.
TEST_F(ServiceTest, TriggerCapturesThePodOnceWhenItsStepTimeRegresses) {
  const int64_t slow_at = clock_.WallNs() + 20 * 60 * kNanosPerSecond;
  std::vector<std::unique_ptr<FakeAgent>> slowing;
  for (int r = 0; r < 2; ++r) {
    synthetic::SyntheticJobConfig job = Rank(r);
    job.slowdown_at_ms = slow_at / kNanosPerMilli;
    job.slowdown_factor = 2;
    // Clocks seconds apart: each host's signal is judged on its own clock.
    slowing.push_back(std::make_unique<FakeAgent>(
        &ex_, &clock_, testkit::FakeAgentBehavior{.clock_offset_ns = (r + 1) * 7 * kNanosPerSecond},
        job));
    factory_.Add(absl::StrCat("s", r, ":1"), slowing.back().get());
  }
  const std::string config = WriteConfig(R"(schedules:
  - name: slowdown
    targets: [s0:1, s1:1]
    trigger: {threshold: 1.3, poll: 10s, window: 30s, baseline: 5m, min_steps: 20, sustain: 2,
              cooldown: 1h}
    duration: 200ms
  - name: healthy
    targets: [h0:1, h1:1]
    trigger: {threshold: 1.3, poll: 10s, window: 30s, baseline: 5m}
    duration: 200ms
)");
  std::unique_ptr<Daemon> d = StartDaemon(config);
  ASSERT_NE(d, nullptr);
  auto schedules = [&] {
    std::optional<v1::ListSchedulesResponse> got;
    d->Schedules([&](v1::ListSchedulesResponse r) { got = std::move(r); });
    ex_.RunUntilIdle();
    std::map<std::string, v1::ScheduleInfo> by_name;
    for (const auto& i : got.value().schedules()) by_name[i.name()] = i;
    return by_name;
  };

  ex_.AdvanceTo(clock_.MonoNs() + 19 * 60 * kNanosPerSecond);
  EXPECT_THAT(SessionNames(), IsEmpty());
  std::map<std::string, v1::ScheduleInfo> info = schedules();
  const v1::TriggerInfo& watching = info["slowdown"].trigger();
  EXPECT_THAT(info["slowdown"].timing(), HasSubstr("trigger step_time > 1.3x its 5m baseline"));
  EXPECT_GE(watching.polls(), 100);
  EXPECT_EQ(watching.poll_errors(), 0);
  EXPECT_EQ(watching.waiting(), "");
  EXPECT_GT(watching.baseline(), 0);
  EXPECT_DOUBLE_EQ(watching.observed(), watching.baseline());
  const double healthy_step = watching.baseline();

  ex_.AdvanceTo(clock_.MonoNs() + 6 * 60 * kNanosPerSecond);
  ASSERT_TRUE(RunUntil([&] { return d->runner().RunningSessions().empty(); }));
  std::vector<std::string> names = SessionNames("slowdown");
  std::sort(names.begin(), names.end());
  // One firing, two sessions: the snapshot of the past that fired it (the trigger's window,
  // 30 s, by default), then the next window.
  ASSERT_EQ(names.size(), 2u) << absl::StrJoin(log_, "\n");
  EXPECT_EQ(names[1], absl::StrCat(names[0], "-past"));
  // Fired within a minute of the slowdown (half a window of slow steps, then 2 polls).
  EXPECT_GE(names[0], "slowdown_20260101T002010Z");
  EXPECT_LE(names[0], "slowdown_20260101T002100Z");
  absl::StatusOr<v1::SessionInfo> past = ReadSession(logdir(), names[1]);
  ASSERT_THAT(past, IsOk());
  EXPECT_EQ(past->manifest().request().past_ms(), 30'000u);
  EXPECT_EQ(past->manifest().request().duration_ms(), 30'000u);
  EXPECT_EQ(past->origin().trigger_part(), "past");
  EXPECT_EQ(past->origin().trigger_linked_session(), names[0]);
  EXPECT_EQ(past->origin().trigger_signal(), "step_time");
  absl::StatusOr<v1::SessionInfo> session = ReadSession(logdir(), names[0]);
  ASSERT_THAT(session, IsOk());
  EXPECT_EQ(session->origin().trigger_part(), "next");
  EXPECT_EQ(session->origin().trigger_linked_session(), names[1]);
  EXPECT_EQ(session->manifest().request().past_ms(), 0u);
  // The past's instant comes first; the next window starts after it.
  EXPECT_LT(past->manifest().start_at_ns(), session->manifest().start_at_ns());
  EXPECT_EQ(session->manifest().status(), v1::SESSION_STATUS_OK);
  const v1::SessionOrigin& origin = session->origin();
  EXPECT_EQ(origin.kind(), "trigger");
  EXPECT_EQ(origin.schedule(), "slowdown");
  EXPECT_EQ(origin.trigger_signal(), "step_time");
  EXPECT_DOUBLE_EQ(origin.trigger_threshold(), 1.3);
  EXPECT_DOUBLE_EQ(origin.trigger_baseline(), healthy_step);
  EXPECT_GT(origin.trigger_observed(), 1.3 * healthy_step);
  EXPECT_THAT(origin.trigger_host(), ::testing::AnyOf("s0:1", "s1:1"));
  EXPECT_THAT(absl::StrJoin(log_, "\n"), HasSubstr("trigger slowdown: s"));

  // Two more hours: cooling down, then the 5 m baseline is the new normal. One capture in all.
  ex_.AdvanceTo(clock_.MonoNs() + 2 * kHourNs);
  ASSERT_TRUE(RunUntil([&] { return d->runner().RunningSessions().empty(); }));
  EXPECT_EQ(SessionNames("slowdown").size(), 2u);
  EXPECT_THAT(SessionNames("healthy"), IsEmpty());
  info = schedules();
  EXPECT_EQ(info["slowdown"].trigger().fired(), 1);
  EXPECT_GE(info["slowdown"].trigger().suppressed_cooldown(), 1);
  EXPECT_EQ(info["slowdown"].runs_finished(), 1);
  EXPECT_DOUBLE_EQ(info["slowdown"].trigger().baseline(), origin.trigger_observed());
  EXPECT_EQ(info["healthy"].trigger().fired(), 0);
  EXPECT_EQ(d->counters().triggers_fired, 1);
  EXPECT_THAT(RenderMetrics(*d), HasSubstr("profctl_coordinator_triggers_fired_total 1\n"));
  StopDaemon(d);
}

// Targets that hang, fail, lie or keep no step signal cost only poll errors and a waiting
// reason; nothing fires and the daemon shuts down promptly.
TEST_F(ServiceTest, TriggerPollsSurviveHungFailingAndLyingAgents) {
  std::vector<std::unique_ptr<FakeAgent>> bad;
  auto add = [&](const std::string& address, testkit::FakeAgentBehavior b) {
    bad.push_back(std::make_unique<FakeAgent>(&ex_, &clock_, std::move(b), Rank(0)));
    factory_.Add(address, bad.back().get());
  };
  add("hang:1", {.hang_step_signal = true});
  add("fail:1", {.step_signal_error = absl::UnimplementedError("old agent")});
  v1::GetStepSignalResponse lie;
  lie.set_now_ns(clock_.WallNs());
  lie.add_sources("synthetic");
  for (int i = 0; i < 5000; ++i) {
    auto* s = lie.add_samples();
    s->set_end_ns(INT64_MAX - i);  // in the far future, out of order
    s->set_duration_ns(-1);
  }
  add("liar:1", {.step_signal_override = lie});
  const std::string config = WriteConfig(R"(schedules:
  - name: t
    targets: [hang:1, fail:1, liar:1, nobody:1]
    trigger: {threshold: 1.1, poll: 10s, sustain: 1}
)");
  std::unique_ptr<Daemon> d = StartDaemon(config);
  ASSERT_NE(d, nullptr);
  ex_.AdvanceTo(clock_.MonoNs() + 15 * 60 * kNanosPerSecond);
  std::optional<v1::ListSchedulesResponse> got;
  d->Schedules([&](v1::ListSchedulesResponse r) { got = std::move(r); });
  ex_.RunUntilIdle();
  ASSERT_EQ(got->schedules_size(), 1);
  const v1::TriggerInfo& t = got->schedules(0).trigger();
  // 90 polls (every 10 s, the hung target holding each to its 2 s deadline), 2 errors each (the
  // hung and the unreachable target; UNIMPLEMENTED is an answer: no signal there).
  EXPECT_GE(t.polls(), 85);
  EXPECT_EQ(t.poll_errors(), 2 * t.polls());
  EXPECT_EQ(t.fired(), 0);
  EXPECT_THAT(t.waiting(), HasSubstr("baseline: 0 of 20 steps"));
  EXPECT_THAT(SessionNames(), IsEmpty());
  EXPECT_THAT(absl::StrJoin(log_, "\n"), HasSubstr("liar:1: dropped 5000 implausible"));
  EXPECT_EQ(d->counters().trigger_poll_errors, t.poll_errors());
  StopDaemon(d);
}

// A host whose steps stopped (its agent reports a stall) fires a hang trigger after `sustain`
// polls: one snapshot of the whole pod's past (no next window), naming the stalled host and
// source in the log and the session's origin; a pod without stalls never fires.
TEST_F(ServiceTest, HangTriggerTakesOneSnapshotOfThePodsPast) {
  v1::GetStepSignalResponse stalled;
  stalled.set_now_ns(clock_.WallNs());
  stalled.add_sources("synthetic");
  v1::StepStall* stall = stalled.add_stalls();
  stall->set_source("synthetic");
  stall->set_last_step_num(1234);
  stall->set_median_step_ns(20 * kNanosPerMilli);
  stall->set_stalled_for_ns(3 * kNanosPerSecond);
  FakeAgent hung(&ex_, &clock_, {.step_signal_override = stalled}, Rank(1));
  factory_.Add("hung:1", &hung);
  const std::string config = WriteConfig(R"(schedules:
  - name: hang
    targets: [h0:1, hung:1]
    trigger: {signal: hang, poll: 10s, sustain: 2, cooldown: 1h, past: 20s}
  - name: healthy
    targets: [h0:1, h1:1]
    trigger: {signal: hang, poll: 10s, sustain: 1}
)");
  std::unique_ptr<Daemon> d = StartDaemon(config);
  ASSERT_NE(d, nullptr);
  ex_.AdvanceTo(clock_.MonoNs() + 15 * kNanosPerSecond);
  ASSERT_TRUE(RunUntil([&] { return d->runner().RunningSessions().empty(); }));
  ex_.AdvanceTo(clock_.MonoNs() + 30 * 60 * kNanosPerSecond);
  ASSERT_TRUE(RunUntil([&] { return d->runner().RunningSessions().empty(); }));
  const std::vector<std::string> names = SessionNames("hang");
  ASSERT_EQ(names.size(), 1u) << absl::StrJoin(log_, "\n");
  EXPECT_THAT(SessionNames("healthy"), IsEmpty());
  absl::StatusOr<v1::SessionInfo> session = ReadSession(logdir(), names[0]);
  ASSERT_THAT(session, IsOk());
  EXPECT_EQ(session->manifest().request().past_ms(), 20'000u);
  EXPECT_EQ(session->manifest().request().duration_ms(), 20'000u);
  EXPECT_EQ(session->manifest().request().workers_size(), 2);
  const v1::SessionOrigin& origin = session->origin();
  EXPECT_EQ(origin.kind(), "trigger");
  EXPECT_EQ(origin.trigger_signal(), "hang");
  EXPECT_EQ(origin.trigger_host(), "hung:1");
  EXPECT_EQ(origin.trigger_source(), "synthetic");
  EXPECT_DOUBLE_EQ(origin.trigger_observed(), 3.0 * kNanosPerSecond);
  EXPECT_DOUBLE_EQ(origin.trigger_baseline(), 20.0 * kNanosPerMilli);
  EXPECT_THAT(absl::StrJoin(log_, "\n"),
              HasSubstr("trigger hang: hung:1: synthetic stopped stepping 3.000 s ago (last step "
                        "1234, median step 20.000 ms; 2 polls): snapshot of the pod's past 20s"));
  std::optional<v1::ListSchedulesResponse> got;
  d->Schedules([&](v1::ListSchedulesResponse r) { got = std::move(r); });
  ex_.RunUntilIdle();
  ASSERT_EQ(got.value().schedules_size(), 2);
  EXPECT_THAT(got->schedules(0).timing(),
              HasSubstr("trigger hang (an agent reports stopped steps), snapshot of the past 20s"));
  EXPECT_EQ(got->schedules(0).trigger().fired(), 1);  // the cooldown holds the rest
  EXPECT_GE(got->schedules(0).trigger().suppressed_cooldown(), 100);
  EXPECT_EQ(got->schedules(1).trigger().fired(), 0);
  StopDaemon(d);
}

// A reload that keeps a trigger's settings keeps its samples (its baseline survives); one that
// changes them starts afresh.
TEST_F(ServiceTest, ReloadKeepsAnUnchangedTriggersBaseline) {
  const std::string body = R"(schedules:
  - name: t
    targets: [h0:1, h1:1]
    trigger: {threshold: 1.5, poll: 10s, window: 30s, baseline: 5m}
)";
  const std::string config = WriteConfig(body);
  std::unique_ptr<Daemon> d = StartDaemon(config);
  ASSERT_NE(d, nullptr);
  ex_.AdvanceTo(clock_.MonoNs() + 6 * 60 * kNanosPerSecond);
  auto trigger = [&] {
    std::optional<v1::ListSchedulesResponse> got;
    d->Schedules([&](v1::ListSchedulesResponse r) { got = std::move(r); });
    ex_.RunUntilIdle();
    return got.value().schedules(0).trigger();
  };
  const int64_t polls = trigger().polls();
  EXPECT_GE(polls, 30);
  WriteConfig(body + "    duration: 1s\n");  // not a trigger setting
  ASSERT_THAT(d->Reload(), IsOk());
  ex_.Advance(10 * kNanosPerSecond);
  EXPECT_GT(trigger().polls(), polls);
  EXPECT_EQ(trigger().waiting(), "");
  WriteConfig(absl::StrReplaceAll(body, {{"1.5", "1.6"}}));
  ASSERT_THAT(d->Reload(), IsOk());
  ex_.RunUntilIdle();
  EXPECT_LE(trigger().polls(), 1);
  EXPECT_DOUBLE_EQ(trigger().threshold(), 1.6);
  StopDaemon(d);
}

TEST_F(ServiceTest, IdleWatchersCannotTakeTheThreadsOfOtherCalls) {
  std::unique_ptr<Daemon> d = StartDaemon(WriteConfig("schedules: []\n"));
  ASSERT_NE(d, nullptr);
  absl::StatusOr<std::unique_ptr<CoordinatorServer>> server = CoordinatorServer::Start(
      d.get(), "127.0.0.1", 0,
      {.credentials = grpc::InsecureServerCredentials(), .authenticator = nullptr});
  ASSERT_THAT(server, IsOk());
  std::unique_ptr<v1::CoordinatorService::Stub> stub =
      v1::CoordinatorService::NewStub(grpc::CreateChannel(
          absl::StrCat("127.0.0.1:", (*server)->port()), grpc::InsecureChannelCredentials()));
  // Every watcher the cap allows, each registered (its initial metadata came back).
  struct Watcher {
    grpc::ClientContext ctx;
    std::unique_ptr<grpc::ClientReader<v1::SessionEvent>> reader;
  };
  std::vector<std::unique_ptr<Watcher>> watchers;
  for (int i = 0; i < kMaxWatchStreams; ++i) {
    watchers.push_back(std::make_unique<Watcher>());
    watchers.back()->reader = stub->WatchSessions(&watchers.back()->ctx, {});
    watchers.back()->reader->WaitForInitialMetadata();
  }
  // Two more are refused, each with a message that says why.
  for (int i = 0; i < 2; ++i) {
    grpc::ClientContext ctx;
    // Without the cap the stream would be served (and wait): the deadline makes that a failure.
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    std::unique_ptr<grpc::ClientReader<v1::SessionEvent>> extra = stub->WatchSessions(&ctx, {});
    v1::SessionEvent event;
    EXPECT_FALSE(extra->Read(&event));
    const grpc::Status st = extra->Finish();
    EXPECT_EQ(st.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
    EXPECT_THAT(st.error_message(), HasSubstr("32 WatchSessions streams are open"));
  }
  // The unary calls still get threads.
  for (int i = 0; i < 8; ++i) {
    grpc::ClientContext list_ctx;
    list_ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    v1::ListSessionsResponse listed;
    EXPECT_TRUE(stub->ListSessions(&list_ctx, {}, &listed).ok());
    grpc::ClientContext start_ctx;
    start_ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    v1::StartCaptureResponse started;
    // Reaches the handler, which checks the (empty) request.
    EXPECT_EQ(stub->StartCapture(&start_ctx, {}, &started).error_code(),
              grpc::StatusCode::INVALID_ARGUMENT);
  }
  for (auto& w : watchers) w->ctx.TryCancel();
  for (auto& w : watchers) EXPECT_EQ(w->reader->Finish().error_code(), grpc::StatusCode::CANCELLED);
  (*server)->Shutdown(absl::ZeroDuration());
  StopDaemon(d);
}

TEST_F(ServiceTest, AStartUpMarksSessionsAnEarlierCoordinatorLeftRunning) {
  // A session folder left RUNNING by a process that is gone (pid 0x7fffffff does not exist).
  const std::string dir = JoinPath(logdir(), "plugins/profile/crashed");
  ASSERT_THAT(MakeDirs(dir), IsOk());
  v1::SessionManifest m;
  m.set_status(v1::SESSION_STATUS_RUNNING);
  m.set_coordinator_pid(0x7fffffff);
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  m.set_coordinator_host(host);
  ASSERT_THAT(WriteFileAtomically(JoinPath(dir, "session.json"), ManifestJson(m)), IsOk());
  ASSERT_THAT(WriteFileAtomically(JoinPath(dir, kRunningMarkerFileName), "1\n"), IsOk());
  std::unique_ptr<Daemon> d = StartDaemon(WriteConfig("schedules: []\n"));
  ASSERT_NE(d, nullptr);
  absl::StatusOr<v1::SessionInfo> info = ReadSession(logdir(), "crashed");
  ASSERT_THAT(info, IsOk());
  EXPECT_EQ(info->manifest().status(), v1::SESSION_STATUS_ABANDONED);
  EXPECT_THAT(absl::StrJoin(log_, "\n"), HasSubstr("crashed"));
  StopDaemon(d);
}

TEST(ExampleConfigTest, TheShippedCoordinatorYamlParses) {
  absl::StatusOr<schedule::CoordinatorConfig> c =
      schedule::LoadCoordinatorConfig(SourcePath("examples/coordinator.yaml"));
  ASSERT_THAT(c, IsOk());
  ASSERT_EQ(c->schedules.size(), 4u);
  EXPECT_EQ(c->schedules[1].targets.kind, schedule::TargetsKind::kDns);
  EXPECT_EQ(c->schedules[2].targets.kind, schedule::TargetsKind::kFile);
  ASSERT_TRUE(c->schedules[3].trigger.has_value());
  EXPECT_DOUBLE_EQ(c->schedules[3].trigger->threshold, 1.5);
}

// The Kubernetes ConfigMaps' configs parse with the daemon's own parser (the deploy checks only
// see YAML), each with an hourly and a triggered schedule.
TEST(ExampleConfigTest, TheKubernetesCoordinatorConfigsParse) {
  for (const char* overlay : {"base", "overlays/dev", "overlays/production"}) {
    const std::string path = SourcePath(absl::StrCat("deploy/k8s/", overlay, "/coordinator.yaml"));
    absl::StatusOr<schedule::CoordinatorConfig> c = schedule::LoadCoordinatorConfig(path);
    ASSERT_THAT(c, IsOk());
    ASSERT_EQ(c->schedules.size(), 2u) << path;
    EXPECT_FALSE(c->schedules[0].trigger.has_value()) << path;
    EXPECT_TRUE(c->schedules[1].trigger.has_value()) << path;
  }
}

}  // namespace
}  // namespace profctl::coordinator::service
