// tensorflow.ProfilerService as the agent serves it, through the generated C++ stub against a real
// agent server on a loopback port. Time is a FakeClock driven through a FakeExecutor: windows are
// exact to the nanosecond and nothing sleeps; a test waits (for real) only for answers and for the
// gRPC thread to hand a session its first task.
#include "agent/service/tsl_profiler_service.h"

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <filesystem>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "agent/agent_options.h"
#include "agent/service/agent_server.h"
#include "common/file_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "profctl/v1/agent.grpc.pb.h"
#include "tensorflow/profiler/profiler_service.grpc.pb.h"
#include "tests/fake_clock.h"
#include "tests/fake_executor.h"
#include "tests/status_matchers.h"
#include "tests/temp_dir.h"
#include "tests/xprof_conformance.h"
#include "xspace/xspace.h"

using ::profctl::testkit::IsOk;

namespace profctl::agent {
namespace {

using ::profctl::testkit::FakeClock;
using ::profctl::testkit::FakeExecutor;
using ::profctl::testkit::TempDir;
using ::tensorflow::ProfileRequest;
using ::tensorflow::ProfileResponse;
using ::tensorflow::profiler::XSpace;
using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

constexpr absl::Duration kTestTimeout = absl::Seconds(30);

// Forwards to a FakeExecutor and counts posts, so a test can wait until a gRPC thread has handed
// a session its first task (or stopped it) before driving time. Its tasks run as its own
// (RunsCurrentTask), as the capture manager's sequence checks expect.
class ObservedExecutor final : public Executor {
 public:
  explicit ObservedExecutor(FakeExecutor* inner) : inner_(inner) {}
  void Post(Task task) override {
    inner_->Post(AsOwn(std::move(task)));
    Count();
  }
  void PostAt(int64_t deadline_mono_ns, Task task) override {
    inner_->PostAt(deadline_mono_ns, AsOwn(std::move(task)));
    Count();
  }
  const Clock& clock() const override { return inner_->clock(); }

  int posts() const {
    absl::MutexLock lock(&mu_);
    return posts_;
  }
  // Blocks until `n` tasks in all were posted; false after kTestTimeout.
  bool AwaitPosts(int n) const {
    absl::MutexLock lock(&mu_);
    auto reached = [this, n]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return posts_ >= n; };
    return mu_.AwaitWithTimeout(absl::Condition(&reached), kTestTimeout);
  }

 private:
  Task AsOwn(Task task) {
    return [this, task = std::move(task)]() mutable {
      const TaskScope scope(this);
      std::move(task)();
    };
  }
  void Count() {
    absl::MutexLock lock(&mu_);
    ++posts_;
  }
  FakeExecutor* inner_;
  mutable absl::Mutex mu_;
  int posts_ ABSL_GUARDED_BY(mu_) = 0;
};

// One Profile call in flight (the callback API: the test thread stays free to drive time).
struct PendingProfile {
  ProfileRequest request;
  grpc::ClientContext ctx;
  ProfileResponse response;
  grpc::Status status;
  absl::Notification done;
  bool Await() { return done.WaitForNotificationWithTimeout(kTestTimeout); }
};

AgentOptions Options() {
  AgentOptions o;
  o.port = 0;
  o.bind = "127.0.0.1";
  o.port_file = "unused";
  return o;
}

ProfileRequest Request(const std::string& session_id, uint64_t duration_ms) {
  ProfileRequest r;
  r.set_session_id(session_id);
  r.set_duration_ms(duration_ms);
  r.mutable_opts()->set_version(1);
  r.mutable_opts()->set_duration_ms(duration_ms);
  return r;
}

// The trace of a response in either shape; fails the test when it has none or both.
XSpace TraceOf(const ProfileResponse& response) {
  XSpace space;
  if (response.has_xspace()) {
    EXPECT_EQ(response.tool_data_size(), 0) << "the trace must not be sent twice";
    space = response.xspace();
  } else {
    EXPECT_EQ(response.tool_data_size(), 1);
    if (response.tool_data_size() == 1) {
      EXPECT_EQ(response.tool_data(0).name(), "xplane.pb");
      EXPECT_TRUE(space.ParseFromString(response.tool_data(0).data()));
    }
  }
  return space;
}

bool HasWarningContaining(const XSpace& space, const std::string& text) {
  for (const std::string& w : space.warnings()) {
    if (absl::StrContains(w, text)) return true;
  }
  return false;
}

class TslServiceTest : public ::testing::Test {
 protected:
  void TearDown() override {
    // Ends whatever still runs, so every call has finished before the server shuts down (its
    // sessions run only when this thread drives the fake executor).
    if (server_ == nullptr) return;
    for (size_t i = 0; i < server_->endpoint_count(); ++i) {
      server_->manager_for_testing(i).CancelActive();
    }
    fake_.RunUntilIdle();
    for (auto& p : pending_) EXPECT_TRUE(p->Await()) << "a Profile call never finished";
    server_.reset();
  }

  void StartAgent(const AgentOptions& options) {
    absl::StatusOr<std::unique_ptr<AgentServer>> server = AgentServer::Start(
        options, {.clock = &clock_, .executor = &executor_, .hostname = "machine"});
    ASSERT_THAT(server, IsOk());
    server_ = std::move(*server);
  }

  std::unique_ptr<tensorflow::ProfilerService::Stub> Stub(size_t endpoint = 0) {
    return tensorflow::ProfilerService::NewStub(
        grpc::CreateChannel(absl::StrCat("127.0.0.1:", server_->ports()[endpoint]),
                            grpc::InsecureChannelCredentials()));
  }

  static void SetDeadline(grpc::ClientContext* ctx) {
    ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  }

  // Sends `request` and returns once the agent accepted it (posted its session's first task).
  PendingProfile* StartProfile(const ProfileRequest& request, size_t endpoint = 0) {
    auto p = std::make_unique<PendingProfile>();
    p->request = request;
    SetDeadline(&p->ctx);
    const int posts = executor_.posts();
    PendingProfile* raw = p.get();
    stubs_.push_back(Stub(endpoint));
    stubs_.back()->async()->Profile(&raw->ctx, &raw->request, &raw->response,
                                    [raw](grpc::Status s) {
                                      raw->status = std::move(s);
                                      raw->done.Notify();
                                    });
    pending_.push_back(std::move(p));
    EXPECT_TRUE(executor_.AwaitPosts(posts + 1)) << "the agent never began the session";
    return raw;
  }

  // A blocking Profile call: for requests the agent answers without running a session.
  grpc::Status ProfileNow(const ProfileRequest& request, ProfileResponse* response) {
    grpc::ClientContext ctx;
    SetDeadline(&ctx);
    return Stub()->Profile(&ctx, request, response);
  }

  // Runs a whole capture of `request`: starts it, moves time `ms` forward, waits for the answer.
  PendingProfile* Capture(const ProfileRequest& request, int64_t ms) {
    PendingProfile* p = StartProfile(request);
    fake_.Advance(ms * kNanosPerMilli);
    EXPECT_TRUE(p->Await());
    return p;
  }

  grpc::Status Terminate(const std::string& session_id) {
    grpc::ClientContext ctx;
    SetDeadline(&ctx);
    tensorflow::TerminateRequest request;
    request.set_session_id(session_id);
    tensorflow::TerminateResponse response;
    return Stub()->Terminate(&ctx, request, &response);
  }

  CaptureManager& manager() { return server_->manager_for_testing(0); }

  FakeClock clock_;
  FakeExecutor fake_{&clock_};
  ObservedExecutor executor_{&fake_};
  std::vector<std::unique_ptr<tensorflow::ProfilerService::Stub>> stubs_;
  std::unique_ptr<AgentServer> server_;
  std::vector<std::unique_ptr<PendingProfile>> pending_;  // destroyed before the server
};

TEST_F(TslServiceTest, Version1HonoursStartTimestampOnTheAgentsClockAndOptsDuration) {
  AgentOptions o = Options();
  o.clock_skew_ms = 250;  // the agent's clock, not the test's, is the reference
  StartAgent(o);
  const int64_t agent_now = clock_.WallNs() + 250 * kNanosPerMilli;
  ProfileRequest request = Request("v1", /*duration_ms=*/999);
  request.mutable_opts()->set_duration_ms(300);  // opts.duration_ms wins
  request.mutable_opts()->set_start_timestamp_ns(agent_now + 2 * kNanosPerSecond);
  PendingProfile* p = StartProfile(request);

  fake_.Advance(2 * kNanosPerSecond - 1);
  EXPECT_FALSE(p->done.HasBeenNotified());
  EXPECT_TRUE(manager().busy());
  fake_.Advance(1 + 300 * kNanosPerMilli);
  ASSERT_TRUE(p->Await());
  ASSERT_THAT(p->status, IsOk()) << p->status.error_message();
  EXPECT_FALSE(p->response.empty_trace());
  const XSpace space = TraceOf(p->response);
  EXPECT_EQ(xspace::ProfileStartNs(space), agent_now + 2 * kNanosPerSecond);
  EXPECT_EQ(xspace::ProfileStopNs(space), agent_now + 2 * kNanosPerSecond + 300 * kNanosPerMilli);
  EXPECT_GT(xspace::CountEvents(space), 0);
  EXPECT_THAT(xspace::Validate(space), IsOk()) << xspace::Validate(space);  // relative lines
  EXPECT_FALSE(HasWarningContaining(space, "after the requested start instant"));
}

TEST_F(TslServiceTest, Version1FallsBackToTheRequestDurationAndStartsAPastInstantAtOnce) {
  StartAgent(Options());
  const int64_t now = clock_.WallNs();
  ProfileRequest request = Request("fallback", /*duration_ms=*/40);
  request.mutable_opts()->set_duration_ms(0);
  request.mutable_opts()->set_start_timestamp_ns(now - 5 * kNanosPerSecond);
  PendingProfile* p = Capture(request, 40);
  ASSERT_THAT(p->status, IsOk()) << p->status.error_message();
  const XSpace space = TraceOf(p->response);
  EXPECT_EQ(xspace::ProfileStartNs(space), now);
  EXPECT_EQ(xspace::ProfileStopNs(space), now + 40 * kNanosPerMilli);
  EXPECT_FALSE(HasWarningContaining(space, "after the requested start instant"));
}

TEST_F(TslServiceTest, Version0IgnoresOptsLikeTslServers) {
  StartAgent(Options());
  const int64_t now = clock_.WallNs();
  ProfileRequest request = Request("req-id", /*duration_ms=*/25);
  request.mutable_opts()->set_version(0);
  request.mutable_opts()->set_duration_ms(7);
  request.mutable_opts()->set_start_timestamp_ns(now + 5 * kNanosPerSecond);
  request.mutable_opts()->set_session_id("opts-id");
  PendingProfile* p = StartProfile(request);

  // The session is named by the request's session_id, not by the ignored opts.session_id.
  ProfileResponse ignored;
  const grpc::Status busy = ProfileNow(Request("other", 10), &ignored);
  EXPECT_EQ(busy.error_code(), grpc::StatusCode::ALREADY_EXISTS);
  EXPECT_EQ(manager().active_id_for_testing(), "req-id");

  fake_.Advance(25 * kNanosPerMilli);
  ASSERT_TRUE(p->Await());
  ASSERT_THAT(p->status, IsOk()) << p->status.error_message();
  const XSpace space = TraceOf(p->response);
  EXPECT_EQ(xspace::ProfileStartNs(space), now);  // at once: opts.start_timestamp_ns ignored
  EXPECT_EQ(xspace::ProfileStopNs(space), now + 25 * kNanosPerMilli);  // duration_ms, not opts'
}

TEST_F(TslServiceTest, BusyIsAlreadyExistsForBothServicesAndNamesTheSession) {
  StartAgent(Options());
  ProfileRequest request = Request("req-id", 10'000);
  request.mutable_opts()->set_session_id("opts-id");  // version 1: opts.session_id wins
  StartProfile(request);

  ProfileResponse ignored;
  const grpc::Status second = ProfileNow(Request("second", 10), &ignored);
  EXPECT_EQ(second.error_code(), grpc::StatusCode::ALREADY_EXISTS);
  // How long the running session has left, never its id (another client's).
  EXPECT_THAT(second.error_message(), HasSubstr("busy with another capture for ~10000 ms more"));
  EXPECT_THAT(second.error_message(), ::testing::Not(HasSubstr("opts-id")));
  EXPECT_EQ(manager().active_id_for_testing(), "opts-id");

  // One capture slot for both protocols.
  auto agent = profctl::v1::AgentService::NewStub(grpc::CreateChannel(
      absl::StrCat("127.0.0.1:", server_->ports()[0]), grpc::InsecureChannelCredentials()));
  grpc::ClientContext ctx;
  SetDeadline(&ctx);
  profctl::v1::CaptureRequest capture;
  capture.set_session_id("ours");
  capture.set_duration_ms(10);
  auto reader = agent->Capture(&ctx, capture);
  profctl::v1::CaptureChunk chunk;
  EXPECT_FALSE(reader->Read(&chunk));
  EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::ALREADY_EXISTS);
}

TEST_F(TslServiceTest, TerminateMidCaptureReturnsThePartialTrace) {
  StartAgent(Options());
  const int64_t now = clock_.WallNs();
  PendingProfile* p = StartProfile(Request("long", 10'000));
  fake_.Advance(kNanosPerSecond);
  EXPECT_FALSE(p->done.HasBeenNotified());

  ASSERT_THAT(Terminate("long"), IsOk());
  fake_.RunUntilIdle();  // the stop Terminate posted, then the collect
  ASSERT_TRUE(p->Await());
  ASSERT_THAT(p->status, IsOk()) << p->status.error_message();
  EXPECT_FALSE(p->response.empty_trace());
  const XSpace space = TraceOf(p->response);
  EXPECT_EQ(xspace::ProfileStartNs(space), now);
  EXPECT_EQ(xspace::ProfileStopNs(space), now + kNanosPerSecond);
  EXPECT_GT(xspace::CountEvents(space), 0);
  EXPECT_TRUE(HasWarningContaining(space, "cancelled after 1000 ms of 10000 ms"));
  EXPECT_FALSE(manager().busy());

  // The id is remembered, as AgentService.Cancel does: a late Profile with it is refused.
  ProfileResponse ignored;
  const grpc::Status again = ProfileNow(Request("long", 10), &ignored);
  EXPECT_EQ(again.error_code(), grpc::StatusCode::ABORTED);
  EXPECT_THAT(again.error_message(), HasSubstr("session 'long' was cancelled"));
}

TEST_F(TslServiceTest, TerminateOfAnUnknownIdIsOkAndOfABadIdInvalid) {
  StartAgent(Options());
  EXPECT_THAT(Terminate("never-ran"), IsOk());
  const grpc::Status bad = Terminate("../x");
  EXPECT_EQ(bad.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(bad.error_message(), HasSubstr("TerminateRequest.session_id '../x'"));
}

TEST_F(TslServiceTest, TerminateBeforeTheStartAnswersAnEmptyTrace) {
  StartAgent(Options());
  ProfileRequest request = Request("early", 100);
  request.mutable_opts()->set_start_timestamp_ns(clock_.WallNs() + kNanosPerSecond);
  PendingProfile* p = StartProfile(request);
  fake_.RunUntilIdle();  // waiting for the start instant
  ASSERT_THAT(Terminate("early"), IsOk());
  fake_.RunUntilIdle();
  ASSERT_TRUE(p->Await());
  ASSERT_THAT(p->status, IsOk()) << p->status.error_message();
  EXPECT_TRUE(p->response.empty_trace());  // nothing was recorded
  const XSpace space = TraceOf(p->response);
  EXPECT_EQ(xspace::CountEvents(space), 0);
  EXPECT_TRUE(HasWarningContaining(space, "cancelled before its start instant"));
}

TEST_F(TslServiceTest, EmitXspaceAnswersInlineOtherwiseOneToolDataEntry) {
  AgentOptions o = Options();
  o.name = "worker-3";
  StartAgent(o);
  PendingProfile* tool = Capture(Request("tool", 300), 300);
  ASSERT_THAT(tool->status, IsOk()) << tool->status.error_message();
  EXPECT_FALSE(tool->response.has_xspace());
  ASSERT_EQ(tool->response.tool_data_size(), 1);
  EXPECT_EQ(tool->response.tool_data(0).name(), "xplane.pb");
  XSpace from_tool;
  ASSERT_TRUE(from_tool.ParseFromString(tool->response.tool_data(0).data()));
  EXPECT_GT(xspace::CountEvents(from_tool), 0);
  EXPECT_THAT(from_tool.hostnames(), Contains("worker-3"));

  ProfileRequest request = Request("inline", 300);
  request.set_emit_xspace(true);
  PendingProfile* inline_space = Capture(request, 300);
  ASSERT_THAT(inline_space->status, IsOk()) << inline_space->status.error_message();
  EXPECT_FALSE(inline_space->response.empty_trace());
  EXPECT_TRUE(inline_space->response.has_xspace());
  EXPECT_EQ(inline_space->response.tool_data_size(), 0);
  EXPECT_GT(xspace::CountEvents(inline_space->response.xspace()), 0);
  EXPECT_THAT(inline_space->response.xspace().hostnames(), Contains("worker-3"));
}

// A stock client dials "10.0.0.7:6000", sends that as host_name and saves the answer as
// 10.0.0.7_6000.xplane.pb: the trace names itself so (XProf wants hostnames[0] in the stem), and
// passes the conformance checker under that stem.
TEST_F(TslServiceTest, AnswerIsNamedAsTheClientWillSaveIt) {
  AgentOptions o = Options();
  o.name = "worker-3";
  StartAgent(o);
  ProfileRequest request = Request("dialled", 300);
  request.set_host_name("10.0.0.7:6000");
  PendingProfile* p = Capture(request, 300);
  ASSERT_THAT(p->status, IsOk()) << p->status.error_message();
  const XSpace space = TraceOf(p->response);
  EXPECT_THAT(space.hostnames(), ElementsAre("10.0.0.7_6000"));
  EXPECT_THAT(testkit::CheckXProfConformance(space, "10.0.0.7_6000"), IsEmpty());
}

TEST_F(TslServiceTest, NoSessionIdGetsAGeneratedOne) {
  StartAgent(Options());
  ProfileRequest request = Request("", 20);
  StartProfile(request);
  ProfileResponse ignored;
  const grpc::Status busy = ProfileNow(Request("other", 10), &ignored);
  EXPECT_EQ(busy.error_code(), grpc::StatusCode::ALREADY_EXISTS);
  EXPECT_THAT(manager().active_id_for_testing(), ::testing::StartsWith("tsl_2026_01_01_00_00_00_"));
}

TEST_F(TslServiceTest, ClientThatGoesAwayStopsTheCapture) {
  StartAgent(Options());
  PendingProfile* p = StartProfile(Request("gone", 10'000));
  fake_.RunUntilIdle();  // recording
  const int posts = executor_.posts();
  p->ctx.TryCancel();
  ASSERT_TRUE(executor_.AwaitPosts(posts + 1));  // the agent saw it and stopped the session
  fake_.RunUntilIdle();
  ASSERT_TRUE(p->Await());
  EXPECT_EQ(p->status.error_code(), grpc::StatusCode::CANCELLED);
  EXPECT_FALSE(manager().busy());
}

TEST_F(TslServiceTest, BadRequestsAreInvalidArgumentAndStartNothing) {
  StartAgent(Options());
  struct Case {
    std::string what;
    ProfileRequest request;
    std::string message;
  };
  std::vector<Case> cases;
  {
    ProfileRequest r = Request("d0", 0);
    cases.push_back({"no duration", r, "ProfileRequest has no duration"});
    r.mutable_opts()->set_version(0);
    r.mutable_opts()->set_duration_ms(5);
    cases.push_back({"version 0 reads only duration_ms", r, "ProfileRequest.duration_ms is 0"});
  }
  cases.push_back({"too long", Request("long", 60'001),
                   "ProfileRequest.opts.duration_ms=60001 is above this agent's limit of 60000"});
  {
    ProfileRequest r = Request("old-field", 60'001);
    r.mutable_opts()->set_duration_ms(0);
    cases.push_back({"too long, old field", r, "ProfileRequest.duration_ms=60001 is above"});
  }
  {
    ProfileRequest r = Request("far", 10);
    r.mutable_opts()->set_start_timestamp_ns(clock_.WallNs() + 3600 * kNanosPerSecond);
    cases.push_back(
        {"start an hour ahead", r, "is 3600000 ms ahead of this agent's clock; at most 60000 ms"});
    r.mutable_opts()->set_start_timestamp_ns(UINT64_MAX);
    cases.push_back({"start beyond int64", r, "ProfileRequest.opts.start_timestamp_ns="});
  }
  cases.push_back({"bad session id", Request("a/b", 10), "ProfileRequest.session_id 'a/b'"});
  {
    ProfileRequest r = Request("fine", 10);
    r.mutable_opts()->set_session_id("..");
    cases.push_back({"bad opts.session_id", r, "ProfileRequest.opts.session_id '..'"});
  }
  for (const Case& c : cases) {
    ProfileResponse response;
    const grpc::Status s = ProfileNow(c.request, &response);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << c.what;
    EXPECT_THAT(s.error_message(), HasSubstr(c.message)) << c.what;
  }
  EXPECT_FALSE(manager().busy());
  EXPECT_EQ(executor_.posts(), 0);

  grpc::ClientContext ctx;
  SetDeadline(&ctx);
  tensorflow::MonitorResponse monitor;
  const grpc::Status s = Stub()->Monitor(&ctx, tensorflow::MonitorRequest(), &monitor);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNIMPLEMENTED);
  EXPECT_THAT(s.error_message(), HasSubstr("Monitor"));
}

TEST_F(TslServiceTest, WithoutTheOptInNothingIsWrittenWhateverRepositoryRootSays) {
  TempDir logdir;
  StartAgent(Options());
  ProfileRequest request = Request("run1", 300);
  request.set_repository_root(JoinPath(logdir.path(), "plugins/profile"));
  request.set_host_name("10.0.0.7:6000");
  PendingProfile* p = Capture(request, 300);
  ASSERT_THAT(p->status, IsOk()) << p->status.error_message();
  EXPECT_GT(xspace::CountEvents(TraceOf(p->response)), 0);  // back in tool_data instead
  EXPECT_FALSE(PathExists(JoinPath(logdir.path(), "plugins")));
}

// What the agent answers, in each shape, is a file every XProf tool reads (the XProf conformance
// checker, docs/xprof-compatibility.md). A stock client that dialled the host by name
// ("worker-3:6000") saves it as worker-3_6000.xplane.pb, which contains the XSpace's host name.
TEST_F(TslServiceTest, EveryAnswerShapePassesTheXProfConformanceChecker) {
  TempDir root;
  AgentOptions o = Options();
  o.name = "worker-3";
  o.synthetic = "gpus=2,step_ms=50";
  o.tsl_save_root = root.path();
  StartAgent(o);
  constexpr absl::string_view kStem = "worker-3_6000";

  ProfileRequest request = Request("tool", 300);
  request.set_host_name("worker-3:6000");
  PendingProfile* p = Capture(request, 300);
  ASSERT_THAT(p->status, IsOk()) << p->status.error_message();
  ASSERT_EQ(p->response.tool_data_size(), 1);
  const XSpace from_tool = TraceOf(p->response);
  EXPECT_GT(xspace::CountEvents(from_tool), 0);
  EXPECT_THAT(testkit::CheckXProfConformance(from_tool, kStem), IsEmpty());

  request.set_session_id("inline");
  request.set_emit_xspace(true);
  p = Capture(request, 300);
  ASSERT_THAT(p->status, IsOk()) << p->status.error_message();
  ASSERT_TRUE(p->response.has_xspace());
  EXPECT_GT(xspace::CountEvents(p->response.xspace()), 0);
  EXPECT_THAT(testkit::CheckXProfConformance(p->response.xspace(), kStem), IsEmpty());

  request.set_session_id("saved");
  request.set_emit_xspace(false);
  request.set_repository_root(JoinPath(root.path(), "logs/plugins/profile"));
  p = Capture(request, 300);
  ASSERT_THAT(p->status, IsOk()) << p->status.error_message();
  absl::StatusOr<std::string> data =
      ReadFile(JoinPath(root.path(), "logs/plugins/profile/saved/worker-3_6000.xplane.pb"));
  ASSERT_THAT(data, IsOk());
  XSpace saved;
  ASSERT_TRUE(saved.ParseFromString(*data));
  EXPECT_GT(xspace::CountEvents(saved), 0);
  EXPECT_THAT(testkit::CheckXProfConformance(saved, kStem), IsEmpty());
}

TEST_F(TslServiceTest, WithTheOptInTheTraceIsSavedInsideTheSaveRootLikeTsl) {
  TempDir root;
  AgentOptions o = Options();
  o.tsl_save_root = root.path();
  StartAgent(o);
  ProfileRequest request = Request("run1", 300);
  request.set_repository_root(JoinPath(root.path(), "logs/plugins/profile/"));
  request.set_host_name("10.0.0.7:6000");
  PendingProfile* p = Capture(request, 300);
  ASSERT_THAT(p->status, IsOk()) << p->status.error_message();
  EXPECT_FALSE(p->response.empty_trace());
  EXPECT_EQ(p->response.tool_data_size(), 0);  // TSL's shape: the file is the answer
  EXPECT_FALSE(p->response.has_xspace());

  const std::string file =
      JoinPath(root.path(), "logs/plugins/profile/run1/10.0.0.7_6000.xplane.pb");
  absl::StatusOr<std::string> data = ReadFile(file);
  ASSERT_THAT(data, IsOk());
  XSpace space;
  ASSERT_TRUE(space.ParseFromString(*data));
  EXPECT_GT(xspace::CountEvents(space), 0);
  EXPECT_EQ(xspace::ProfileStopNs(space), xspace::ProfileStartNs(space) + 300 * kNanosPerMilli);

  // override_hostname names the file instead of host_name.
  request.set_session_id("run2");
  request.mutable_opts()->set_override_hostname("trainer-0");
  p = Capture(request, 300);
  ASSERT_THAT(p->status, IsOk()) << p->status.error_message();
  EXPECT_TRUE(PathExists(JoinPath(root.path(), "logs/plugins/profile/run2/trainer-0.xplane.pb")));

  // emit_xspace: inline, never written (as TSL).
  request.set_session_id("run3");
  request.set_emit_xspace(true);
  p = Capture(request, 300);
  ASSERT_THAT(p->status, IsOk()) << p->status.error_message();
  EXPECT_TRUE(p->response.has_xspace());
  EXPECT_FALSE(PathExists(JoinPath(root.path(), "logs/plugins/profile/run3")));
}

TEST_F(TslServiceTest, RepositoryRootsOutsideTheSaveRootGetTheTraceBackInstead) {
  TempDir root;
  TempDir elsewhere;
  AgentOptions o = Options();
  o.tsl_save_root = root.path();
  StartAgent(o);
  std::filesystem::create_directory_symlink(elsewhere.path(), JoinPath(root.path(), "link"));
  const std::vector<std::string> roots = {
      JoinPath(elsewhere.path(), "plugins/profile"),  // outside
      JoinPath(root.path(), "link/plugins/profile"),  // inside by name, outside once resolved
      "logs/plugins/profile",                         // relative: the client's folder
  };
  for (size_t i = 0; i < roots.size(); ++i) {
    ProfileRequest request = Request(absl::StrCat("run", i), 300);
    request.set_repository_root(roots[i]);
    request.set_host_name("h");
    PendingProfile* p = Capture(request, 300);
    ASSERT_THAT(p->status, IsOk()) << roots[i] << ": " << p->status.error_message();
    EXPECT_GT(xspace::CountEvents(TraceOf(p->response)), 0) << roots[i];
  }
  EXPECT_FALSE(PathExists(JoinPath(elsewhere.path(), "plugins")));
}

TEST_F(TslServiceTest, BadSavePathsAreInvalidArgument) {
  TempDir root;
  AgentOptions o = Options();
  o.tsl_save_root = root.path();
  StartAgent(o);
  ProfileRequest dots = Request("run", 20);
  dots.set_repository_root(JoinPath(root.path(), "a/../../etc"));
  ProfileResponse response;
  grpc::Status s = ProfileNow(dots, &response);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("ProfileRequest.repository_root"));
  EXPECT_THAT(s.error_message(), HasSubstr("contains '..'"));

  ProfileRequest host = Request("run", 20);
  host.set_repository_root(root.path());
  host.set_host_name("a/b");
  s = ProfileNow(host, &response);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("host name"));
  EXPECT_THAT(s.error_message(), HasSubstr("'a/b'"));

  host.set_host_name("");  // no host: the agent's own name ("machine" here)
  host.mutable_opts()->set_override_hostname("..");
  s = ProfileNow(host, &response);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_FALSE(manager().busy());
  EXPECT_FALSE(PathExists(JoinPath(root.path(), "run")));
}

TEST_F(TslServiceTest, EachEndpointServesItsOwnProfiles) {
  AgentOptions o = Options();
  o.endpoints = 2;
  StartAgent(o);
  PendingProfile* held = StartProfile(Request("held", 10'000), /*endpoint=*/0);
  ProfileRequest request = Request("free", 30);
  request.set_emit_xspace(true);
  PendingProfile* p = StartProfile(request, /*endpoint=*/1);
  fake_.Advance(30 * kNanosPerMilli);
  ASSERT_TRUE(p->Await());
  ASSERT_THAT(p->status, IsOk()) << p->status.error_message();
  EXPECT_THAT(p->response.xspace().hostnames(), Contains("ep-1"));
  EXPECT_FALSE(held->done.HasBeenNotified());
  EXPECT_TRUE(server_->manager_for_testing(0).busy());
}

// PlanTslProfile alone.
TslPlanContext Context() {
  return {.now_wall_ns = FakeClock::kDefaultWallNs,
          .max_duration_ms = 60'000,
          .max_start_delay_ms = 60'000,
          .save_root = "/srv/traces",
          .default_host_name = "agent-host",
          .generated_session_id = "generated"};
}

TEST(PlanTslProfileTest, SessionIdAndHostNamePrecedence) {
  ProfileRequest r = Request("", 10);
  absl::StatusOr<TslProfilePlan> plan = PlanTslProfile(r, Context());
  ASSERT_THAT(plan, IsOk());
  EXPECT_EQ(plan->spec.session_id, "generated");
  EXPECT_EQ(plan->spec.start_at_ns, 0);
  EXPECT_TRUE(plan->spec.collectors.empty());

  r.set_repository_root("/srv/traces/logs/plugins/profile");
  r.set_session_id("run");
  plan = PlanTslProfile(r, Context());
  ASSERT_THAT(plan, IsOk());
  EXPECT_EQ(plan->save_path, "/srv/traces/logs/plugins/profile/run/agent-host.xplane.pb");

  r.set_host_name("[::1]:6000");  // not a safe stem even with ':' read as '_'
  EXPECT_EQ(PlanTslProfile(r, Context()).status().code(), absl::StatusCode::kInvalidArgument);
  r.set_host_name("10.0.0.1:6000");
  (*r.mutable_opts()->mutable_advanced_configuration())["override_hostname"].set_string_value(
      "adv:1");
  plan = PlanTslProfile(r, Context());
  ASSERT_THAT(plan, IsOk());
  EXPECT_EQ(plan->save_path, "/srv/traces/logs/plugins/profile/run/adv_1.xplane.pb");
  r.mutable_opts()->set_override_hostname("field");
  r.mutable_opts()->set_session_id("opts-run");
  plan = PlanTslProfile(r, Context());
  ASSERT_THAT(plan, IsOk());
  EXPECT_EQ(plan->save_path, "/srv/traces/logs/plugins/profile/opts-run/field.xplane.pb");
}

TEST(PlanTslProfileTest, SaveIsSkippedWithAReasonNotFailed) {
  ProfileRequest r = Request("run", 10);
  r.set_repository_root("/home/user/logs/plugins/profile");
  TslPlanContext c = Context();
  c.save_root.clear();
  absl::StatusOr<TslProfilePlan> plan = PlanTslProfile(r, c);
  ASSERT_THAT(plan, IsOk());
  EXPECT_EQ(plan->save_path, "");
  EXPECT_THAT(plan->save_skipped, HasSubstr("--tsl-save-root"));

  plan = PlanTslProfile(r, Context());
  ASSERT_THAT(plan, IsOk());
  EXPECT_EQ(plan->save_path, "");
  EXPECT_THAT(plan->save_skipped, HasSubstr("outside --tsl-save-root=/srv/traces"));

  r.set_repository_root("/srv/traces-other/x");  // a sibling sharing the prefix is outside
  plan = PlanTslProfile(r, Context());
  ASSERT_THAT(plan, IsOk());
  EXPECT_EQ(plan->save_path, "");

  r.set_repository_root("/srv/traces/x");
  r.set_emit_xspace(true);  // inline answers are never saved
  plan = PlanTslProfile(r, Context());
  ASSERT_THAT(plan, IsOk());
  EXPECT_EQ(plan->save_path, "");
  EXPECT_TRUE(plan->emit_xspace);
}

TEST(PlanTslProfileTest, FutureStartIsKeptPastStartIsAtOnce) {
  ProfileRequest r = Request("run", 10);
  r.mutable_opts()->set_start_timestamp_ns(FakeClock::kDefaultWallNs + 60'000 * kNanosPerMilli);
  absl::StatusOr<TslProfilePlan> plan = PlanTslProfile(r, Context());
  ASSERT_THAT(plan, IsOk());
  EXPECT_EQ(plan->spec.start_at_ns, FakeClock::kDefaultWallNs + 60'000 * kNanosPerMilli);
  r.mutable_opts()->set_start_timestamp_ns(FakeClock::kDefaultWallNs + 60'001 * kNanosPerMilli);
  EXPECT_EQ(PlanTslProfile(r, Context()).status().code(), absl::StatusCode::kInvalidArgument);
  r.mutable_opts()->set_start_timestamp_ns(1);
  plan = PlanTslProfile(r, Context());
  ASSERT_THAT(plan, IsOk());
  EXPECT_EQ(plan->spec.start_at_ns, 0);
}

TEST(CanonicalSaveRootTest, MustBeAnExistingAbsoluteDirectory) {
  TempDir dir;
  absl::StatusOr<std::string> root = CanonicalSaveRoot(dir.path() + "/");
  ASSERT_THAT(root, IsOk());
  EXPECT_EQ(*root, std::filesystem::canonical(dir.path()).string());
  EXPECT_THAT(CanonicalSaveRoot("relative").status().message(),
              HasSubstr("--tsl-save-root=relative must be an absolute path"));
  EXPECT_THAT(CanonicalSaveRoot(dir.path() + "/missing").status().message(),
              HasSubstr("is not an existing directory"));
  AgentOptions o = Options();
  o.tsl_save_root = dir.path() + "/missing";
  FakeClock clock;
  FakeExecutor executor(&clock);
  EXPECT_EQ(AgentServer::Start(o, {.clock = &clock, .executor = &executor, .hostname = "m"})
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace profctl::agent
