// The coordinator captures TensorFlow/JAX/TSL profiler servers (`--workers=grpc://host:port`),
// mixed freely with profctl agents in one session: the request it sends, the
// three answer shapes, busy and empty servers, clocks that cannot be measured by RPC and are
// aligned from the collectives instead. Servers are tests/fake_tsl_server.h (shaped like the real
// ones, old and new option semantics) and real profctl-agent processes, which serve
// tensorflow.ProfilerService too.
#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/notification.h"
#include "common/executor.h"
#include "common/file_util.h"
#include "coordinator/cli/cli.h"
#include "coordinator/cli/local_agents.h"
#include "coordinator/clients/grpc_agent_client.h"
#include "coordinator/clients/tsl_agent_client.h"
#include "coordinator/engine/capture_engine.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "profctl/v1/session.pb.h"
#include "tests/build_paths.h"
#include "tests/fake_tsl_server.h"
#include "tests/loopback.h"
#include "tests/status_matchers.h"
#include "tests/temp_dir.h"
#include "tests/test_time.h"
#include "tests/trace_data.h"
#include "xspace/xspace.h"

using ::profctl::test_paths::AgentBinary;
using ::profctl::testkit::IsOk;

namespace profctl {
namespace {

using coordinator::CaptureArgs;
using coordinator::WorkerAddress;
using ::testing::HasSubstr;
using testkit::FakeTslServer;
using testkit::FakeTslServerOptions;
using Shape = FakeTslServerOptions::Shape;
using v1::SessionManifest;

using ::profctl::test_data::DataPath;
using ::profctl::test_time::kMs;

WorkerAddress Tsl(int port) {
  absl::StatusOr<WorkerAddress> w =
      coordinator::ParseWorker(absl::StrCat("grpc://127.0.0.1:", port));
  EXPECT_THAT(w, IsOk());
  return *w;
}

synthetic::SyntheticJobConfig Job(int64_t rank, int64_t world, int64_t skew_ms) {
  synthetic::SyntheticJobConfig c;
  c.rank = rank;
  c.world = world;
  c.seed = 9;
  c.step_ms = 40;
  c.gpus = 1;
  c.kernels_per_step = 4;
  c.clock_skew_ns = skew_ms * kMs;
  return c;
}

// --- the request and the answer shapes ---------------------------------------------------------

TEST(TslRequestTest, AsksForTheWindowWithNewSemanticsAndBothDurations) {
  const CaptureArgs args{"run-7", 1'800'000'000'123'456'789, 1500, "/logs/plugins/profile"};
  const tensorflow::ProfileRequest r = coordinator::MakeTslProfileRequest(args, Tsl(6000));
  EXPECT_EQ(r.opts().version(), 1u);  // 0 would make the server drop the start time
  EXPECT_EQ(r.duration_ms(), 1500u);
  EXPECT_EQ(r.opts().duration_ms(), 1500u);
  EXPECT_EQ(r.opts().start_timestamp_ns(), 1'800'000'000'123'456'789u);
  EXPECT_EQ(r.session_id(), "run-7");
  EXPECT_EQ(r.opts().session_id(), "run-7");
  EXPECT_EQ(r.host_name(), "127.0.0.1_6000");
  EXPECT_TRUE(r.emit_xspace());
  EXPECT_EQ(r.repository_root(), "/logs/plugins/profile");
  // With version 1 the server takes our tracer levels: zero would record nothing.
  EXPECT_EQ(r.opts().host_tracer_level(), coordinator::kTslHostTracerLevel);
  EXPECT_EQ(r.opts().device_tracer_level(), coordinator::kTslDeviceTracerLevel);
  EXPECT_EQ(r.opts().python_tracer_level(), 0u);
}

TEST(TslRequestTest, CarriesTheTracerLevelsAsked) {
  CaptureArgs args{"run-8", 0, 500};
  args.tracer_levels = {.host = 3, .device = 0, .python = 1};
  const tensorflow::ProfileRequest r = coordinator::MakeTslProfileRequest(args, Tsl(6000));
  EXPECT_EQ(r.opts().host_tracer_level(), 3u);
  EXPECT_EQ(r.opts().device_tracer_level(), 0u);
  EXPECT_EQ(r.opts().python_tracer_level(), 1u);
}

TEST(TslResponseTest, ReadsAllThreeShapes) {
  testkit::TempDir dir;
  tensorflow::ProfileRequest request;
  request.set_repository_root(dir.path());
  request.set_session_id("s");
  request.set_host_name("h_1");
  tensorflow::profiler::XSpace space;
  space.add_planes()->set_name("/host:CPU");
  const std::string bytes = space.SerializeAsString();
  std::string where;

  tensorflow::ProfileResponse inline_answer;
  *inline_answer.mutable_xspace() = space;
  EXPECT_EQ(*coordinator::TraceFromProfileResponse(inline_answer, request, &where), bytes);
  EXPECT_EQ(where, "inline xspace");

  tensorflow::ProfileResponse tool;
  tool.add_tool_data()->set_name("trace.json.gz");
  tool.add_tool_data()->set_name("xplane.pb");
  tool.mutable_tool_data(1)->set_data(bytes);
  EXPECT_EQ(*coordinator::TraceFromProfileResponse(tool, request, &where), bytes);
  EXPECT_EQ(where, "tool_data xplane.pb");

  tensorflow::ProfileResponse saved;  // only empty_trace=false: on the server's disk
  const std::string path = dir.path() + "/s/h_1.xplane.pb";
  absl::StatusOr<std::string> r = coordinator::TraceFromProfileResponse(saved, request);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(r.status().message(), HasSubstr("saved its trace on its own disk as " + path));
  ASSERT_THAT(MakeDirs(dir.path() + "/s"), IsOk());
  ASSERT_THAT(WriteFileAtomically(path, bytes), IsOk());
  EXPECT_EQ(*coordinator::TraceFromProfileResponse(saved, request, &where), bytes);
  EXPECT_THAT(where, HasSubstr(path));

  tensorflow::ProfileResponse empty;
  empty.set_empty_trace(true);
  EXPECT_THAT(coordinator::TraceFromProfileResponse(empty, request).status().message(),
              HasSubstr("recorded nothing"));
  request.clear_repository_root();
  EXPECT_THAT(coordinator::TraceFromProfileResponse(saved, request).status().message(),
              HasSubstr("did not say"));
}

// --- the client against a server ---------------------------------------------------------------

// Collects one capture stream's calls; Wait() returns once OnDone ran.
class RecordingStream : public coordinator::CaptureStream {
 public:
  void OnStarted(int64_t start_ns) override { started_ns = start_ns; }
  void OnHeader(const coordinator::CaptureHeaderInfo& h) override { header = h; }
  absl::Status OnData(std::string_view chunk) override {
    data.append(chunk);
    return absl::OkStatus();
  }
  void OnDone(absl::Status s) override {
    status = std::move(s);
    done.Notify();
  }
  void Wait() { done.WaitForNotification(); }

  int64_t started_ns = 0;
  coordinator::CaptureHeaderInfo header;
  std::string data;
  absl::Status status;
  absl::Notification done;
};

template <typename T>
absl::StatusOr<T> Await(const std::function<void(coordinator::AgentClient::Callback<T>)>& start) {
  absl::Notification n;
  absl::StatusOr<T> out = absl::UnknownError("no answer");
  start([&](absl::StatusOr<T> r) {
    out = std::move(r);
    n.Notify();
  });
  n.WaitForNotification();
  return out;
}

TEST(TslClientTest, ProbesCapturesAndTerminates) {
  FakeTslServer server({.shape = Shape::kToolData, .job = Job(0, 1, 0)});
  coordinator::GrpcAgentClientFactory factory;
  std::unique_ptr<coordinator::AgentClient> client = factory.Connect(Tsl(server.port()));
  EXPECT_FALSE(client->MeasuresClock());

  absl::StatusOr<coordinator::AgentInfo> info =
      Await<coordinator::AgentInfo>([&](auto done) { client->GetInfo(2000, std::move(done)); });
  ASSERT_THAT(info, IsOk());  // Monitor's UNIMPLEMENTED proves it is there
  EXPECT_EQ(info->version, coordinator::kTslAgentVersion);
  EXPECT_EQ(info->name, absl::StrCat("grpc://127.0.0.1:", server.port()));
  absl::StatusOr<coordinator::ClockReading> clock = Await<coordinator::ClockReading>(
      [&](auto done) { client->SyncClock(2000, std::move(done)); });
  EXPECT_EQ(clock.status().code(), absl::StatusCode::kUnimplemented);

  // A start 2 s ago on the server's clock: a real server starts at once.
  const int64_t start = RealClock().WallNs() - 2000 * kMs;
  RecordingStream stream;
  client->Capture({"sess", start, 300, ""}, 10'000, &stream);
  stream.Wait();
  ASSERT_THAT(stream.status, IsOk());
  tensorflow::profiler::XSpace space;
  ASSERT_TRUE(space.ParseFromString(stream.data));
  EXPECT_GT(xspace::CountEvents(space), 0);
  EXPECT_EQ(stream.header.total_bytes, stream.data.size());
  // The window is the one the server recorded (its Task Environment), not the one asked for.
  EXPECT_EQ(stream.header.start_ns, server.last_start_ns());
  EXPECT_EQ(stream.started_ns, server.last_start_ns());
  EXPECT_EQ(stream.header.stop_ns, server.last_start_ns() + 300 * kMs);
  ASSERT_EQ(server.requests().size(), 1u);
  EXPECT_EQ(server.requests()[0].opts().start_timestamp_ns(), static_cast<uint64_t>(start));

  absl::Notification terminated;
  client->Cancel("sess", "", 2000, [&](absl::Status s) {
    EXPECT_THAT(s, IsOk());
    terminated.Notify();
  });
  terminated.WaitForNotification();
  EXPECT_THAT(server.terminated(), ::testing::ElementsAre("sess"));
}

TEST(TslClientTest, BusyEmptyAndDeadServersFailClearly) {
  coordinator::GrpcAgentClientFactory factory;
  {
    FakeTslServer busy({.busy = true, .job = Job(0, 1, 0)});
    std::unique_ptr<coordinator::AgentClient> client = factory.Connect(Tsl(busy.port()));
    RecordingStream stream;
    client->Capture({"s", 0, 100, ""}, 5000, &stream);
    stream.Wait();
    EXPECT_EQ(stream.status.code(), absl::StatusCode::kAlreadyExists);
    EXPECT_THAT(stream.status.message(), HasSubstr("Profile: "));
  }
  {
    FakeTslServer empty({.shape = Shape::kEmpty, .job = Job(0, 1, 0)});
    std::unique_ptr<coordinator::AgentClient> client = factory.Connect(Tsl(empty.port()));
    RecordingStream stream;
    client->Capture({"s", 0, 100, ""}, 5000, &stream);
    stream.Wait();
    EXPECT_EQ(stream.status.code(), absl::StatusCode::kNotFound);
    EXPECT_THAT(stream.status.message(), HasSubstr("recorded nothing"));
  }
  std::unique_ptr<coordinator::AgentClient> dead =
      factory.Connect(Tsl(testkit::ClosedLoopbackPort()));
  absl::StatusOr<coordinator::AgentInfo> info =
      Await<coordinator::AgentInfo>([&](auto done) { dead->GetInfo(2000, std::move(done)); });
  EXPECT_EQ(info.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(info.status().message(), HasSubstr("Monitor: "));
}

// --- whole sessions ----------------------------------------------------------------------------

class TslCaptureTest : public ::testing::Test {
 protected:
  int Run(const std::vector<std::string>& args, SessionManifest* manifest,
          const std::string& session) {
    coordinator::GrpcAgentClientFactory clients({.clock = &clock_});
    AsioExecutor executor(&clock_);
    ThreadWorkPool pool(/*threads=*/2);
    std::ostringstream out, err;
    const int rc = coordinator::RunCli(
        args, {&out, &err, &clock_, &clients, &executor, "", nullptr, nullptr, &pool});
    output_ = out.str() + err.str();
    if (manifest != nullptr) {
      absl::StatusOr<std::string> json = ReadFile(SessionDir(session) + "/session.json");
      EXPECT_THAT(json, IsOk()) << json.status() << "\n" << output_;
      if (json.ok()) {
        EXPECT_THAT(google::protobuf::util::JsonStringToMessage(*json, manifest), IsOk());
      }
    }
    return rc;
  }
  int Capture(const std::vector<std::string>& workers, const std::string& session,
              SessionManifest* manifest) {
    return Run({"capture", "--workers=" + absl::StrJoin(workers, ","), "--session=" + session,
                "--logdir=" + logdir_, "--duration=1000",
                // Alignment is under test, not lateness: processes share 2 loaded cores here.
                "--tolerance=500"},
               manifest, session);
  }
  std::string SessionDir(const std::string& session) const {
    return absl::StrCat(logdir_, "/plugins/profile/", session);
  }
  const v1::HostResult* Host(const SessionManifest& m, absl::string_view address) const {
    for (const v1::HostResult& h : m.hosts()) {
      if (h.address() == address) return &h;
    }
    ADD_FAILURE() << "no host " << address << " in the manifest\n" << output_;
    return nullptr;
  }

  RealClock clock_;
  const testkit::TempDir tmp_;
  const std::string logdir_ = tmp_.path() + "/logs";
  std::string output_;
};

// One job of five ranks: rank 0 a profctl agent (AgentService), ranks 1-3 TSL-shaped servers
// answering in each shape (rank 2 an old server that ignores the options), rank 4 a profctl agent
// captured through its tensorflow.ProfilerService (grpc://). The TSL ranks' clocks are off by
// hundreds of ms and cannot be measured: the collectives align them anyway.
TEST_F(TslCaptureTest, AgentsAndTslServersInOneSessionOnOneTimeline) {
  constexpr int kWorld = 5;
  const std::string job =
      absl::StrCat("world=", kWorld, ",seed=9,step_ms=40,gpus=1,kernels_per_step=4");
  coordinator::LocalAgents agents(tmp_.path());
  std::vector<int> agent_ports;
  for (int rank : {0, 4}) {
    const std::string port_file = absl::StrCat(tmp_.path(), "/agent-", rank, ".port");
    ASSERT_THAT(
        agents.Spawn(
            AgentBinary(),
            {"--port=0", "--bind=127.0.0.1", "--port-file=" + port_file,
             absl::StrCat("--name=rank-", rank), absl::StrCat("--synthetic=", job, ",rank=", rank),
             rank == 4 ? "--clock-skew-ms=-300" : "--clock-skew-ms=0", "--log-level=warn"}),
        IsOk());
    absl::StatusOr<int> port = agents.WaitForPort(agent_ports.size(), port_file, clock_);
    ASSERT_THAT(port, IsOk());
    agent_ports.push_back(*port);
  }
  constexpr int64_t kSkewMs[kWorld] = {0, 250, -120, 40, -300};
  FakeTslServer inline_server({.shape = Shape::kInlineXSpace, .job = Job(1, kWorld, kSkewMs[1])});
  FakeTslServer old_server(
      {.shape = Shape::kToolData, .ignore_options = true, .job = Job(2, kWorld, kSkewMs[2])});
  FakeTslServer disk_server({.shape = Shape::kSavedOnDisk, .job = Job(3, kWorld, kSkewMs[3])});
  const std::vector<std::string> workers = {
      testkit::LoopbackAddress(agent_ports[0]),
      absl::StrCat("grpc://127.0.0.1:", inline_server.port()),
      absl::StrCat("grpc://127.0.0.1:", old_server.port()),
      absl::StrCat("grpc://127.0.0.1:", disk_server.port()),
      absl::StrCat("grpc://127.0.0.1:", agent_ports[1]),
  };
  SessionManifest m;
  ASSERT_EQ(Capture(workers, "mixed", &m), coordinator::kExitOk) << output_;
  ASSERT_EQ(m.hosts_size(), kWorld);
  // The pod's timeline is rank 0's as clock sync placed it (within +-RTT/2 of the truth: about a
  // millisecond on a loaded machine); every other rank must agree with it to well under 1 ms.
  const v1::HostResult* rank0 = Host(m, workers[0]);
  ASSERT_NE(rank0, nullptr);
  const int64_t rank0_error = rank0->clock().offset_ns() - kSkewMs[0] * kMs;
  for (int r = 0; r < kWorld; ++r) {
    const v1::HostResult* h = Host(m, workers[static_cast<size_t>(r)]);
    ASSERT_NE(h, nullptr);
    ASSERT_EQ(h->status(), v1::HOST_STATUS_OK) << h->address() << ": " << h->error().message();
    EXPECT_TRUE(std::filesystem::exists(SessionDir("mixed") + "/" + h->xplane_file()))
        << h->xplane_file();
    if (r == 0) continue;
    // Unmeasurable by RPC, then aligned from the all-reduce ends to well under a millisecond.
    EXPECT_EQ(h->clock().method(), "collectives") << h->address() << "\n" << output_;
    EXPECT_EQ(h->clock().rtt_offset_ns(), 0) << h->address();
    EXPECT_NEAR(static_cast<double>(h->clock().offset_ns() - rank0_error),
                static_cast<double>(kSkewMs[r] * kMs), 0.5 * kMs)
        << h->address() << " (rank 0's clock-sync error " << rank0_error << " ns)";
    EXPECT_EQ(h->agent_version(), "tsl");
  }
  // What the servers were asked: the session's window, one session id, their file stems, and
  // where to save if they must.
  const std::string root = std::filesystem::absolute(logdir_ + "/plugins/profile").string();
  for (const FakeTslServer* s : {&inline_server, &old_server, &disk_server}) {
    ASSERT_EQ(s->requests().size(), 1u);
    const tensorflow::ProfileRequest r = s->requests()[0];
    EXPECT_EQ(r.opts().version(), 1u);
    EXPECT_EQ(r.opts().start_timestamp_ns(), static_cast<uint64_t>(m.start_at_ns()));
    EXPECT_EQ(r.duration_ms(), 1000u);
    EXPECT_EQ(r.opts().duration_ms(), 1000u);
    EXPECT_EQ(r.session_id(), "mixed");
    EXPECT_EQ(r.host_name(), absl::StrCat("127.0.0.1_", s->port()));
    EXPECT_EQ(r.repository_root(), root);
  }
  // The server that could only save wrote straight into the session folder, where it was picked up.
  EXPECT_TRUE(std::filesystem::exists(
      absl::StrCat(SessionDir("mixed"), "/127.0.0.1_", disk_server.port(), ".xplane.pb")));
  // The breakdown covers every rank.
  EXPECT_THAT(output_, HasSubstr("127.0.0.1_" + std::to_string(old_server.port())));
}

// The tracer levels given to `profctl capture` reach both kinds of framework server: a grpc://
// worker in its ProfileOptions, and a server a profctl-agent captures with its tsl collector,
// through CaptureRequest; session.json records them.
TEST_F(TslCaptureTest, TracerLevelsReachGrpcWorkersAndAgentsTslServers) {
  const std::string job = "world=2,seed=9,step_ms=40,gpus=1,kernels_per_step=4";
  FakeTslServer local_server({.shape = Shape::kInlineXSpace, .job = Job(0, 2, 0)});
  FakeTslServer remote_server({.shape = Shape::kInlineXSpace, .job = Job(1, 2, 0)});
  coordinator::LocalAgents agents(tmp_.path());
  const std::string port_file = tmp_.path() + "/agent.port";
  ASSERT_THAT(
      agents.Spawn(AgentBinary(), {"--port=0", "--bind=127.0.0.1", "--port-file=" + port_file,
                                   "--name=rank-0", absl::StrCat("--synthetic=", job, ",rank=0"),
                                   "--tsl-local=" + testkit::LoopbackAddress(local_server.port()),
                                   "--log-level=warn"}),
      IsOk());
  absl::StatusOr<int> port = agents.WaitForPort(0, port_file, clock_);
  ASSERT_THAT(port, IsOk());
  SessionManifest m;
  Run({"capture",
       "--workers=" + testkit::LoopbackAddress(*port) +
           ",grpc://127.0.0.1:" + std::to_string(remote_server.port()),
       "--session=levels", "--logdir=" + logdir_, "--duration=300", "--tolerance=500",
       "--host-tracer-level=3", "--device-tracer-level=0", "--python-tracer-level=1"},
      &m, "levels");
  for (const FakeTslServer* s : {&local_server, &remote_server}) {
    ASSERT_EQ(s->requests().size(), 1u) << output_;
    const tensorflow::ProfileOptions o = s->requests()[0].opts();
    EXPECT_EQ(o.host_tracer_level(), 3u);
    EXPECT_EQ(o.device_tracer_level(), 0u);
    EXPECT_EQ(o.python_tracer_level(), 1u);
  }
  EXPECT_EQ(m.request().host_tracer_level(), 3u);
  EXPECT_EQ(m.request().device_tracer_level(), 0u);
  EXPECT_EQ(m.request().python_tracer_level(), 1u);
}

// An agent whose only source is a framework server that sends nothing usable: the host is
// partial, never "ok" with no events, and the capture says which server and why.
TEST_F(TslCaptureTest, AnAgentWhoseFrameworkServerFailedIsPartialNotOk) {
  FakeTslServer broken(
      {.shape = Shape::kInlineXSpace, .job = Job(0, 1, 0), .drop_task_environment = true});
  coordinator::LocalAgents agents(tmp_.path());
  const std::string port_file = tmp_.path() + "/agent.port";
  const std::string server = testkit::LoopbackAddress(broken.port());
  ASSERT_THAT(
      agents.Spawn(AgentBinary(),
                   {"--port=0", "--bind=127.0.0.1", "--port-file=" + port_file, "--name=jax-host",
                    "--collectors=tsl", "--tsl-local=" + server, "--log-level=warn"}),
      IsOk());
  absl::StatusOr<int> port = agents.WaitForPort(0, port_file, clock_);
  ASSERT_THAT(port, IsOk());
  SessionManifest m;
  EXPECT_EQ(Run({"capture", "--workers=" + testkit::LoopbackAddress(*port), "--session=broken",
                 "--logdir=" + logdir_, "--duration=300", "--tolerance=500"},
                &m, "broken"),
            coordinator::kExitPartial)
      << output_;
  ASSERT_EQ(m.hosts_size(), 1);
  const v1::HostResult& h = m.hosts(0);
  EXPECT_EQ(h.status(), v1::HOST_STATUS_INCOMPLETE) << output_;
  EXPECT_EQ(h.recording(), v1::RECORDING_MISSING_DATA);
  ASSERT_EQ(h.shortfalls_size(), 1);
  EXPECT_EQ(h.shortfalls(0).kind(), v1::SHORTFALL_KIND_SOURCE_FAILED);
  EXPECT_THAT(h.recording_detail(),
              HasSubstr(absl::StrCat("framework profiler server ", server, " gave no planes")));
  EXPECT_THAT(output_, HasSubstr("partial"));
  // The breakdown leaves the host out and quotes why its trace is empty.
  EXPECT_THAT(output_, HasSubstr(absl::StrCat("not a host trace; the trace says: tsl ", server,
                                              ": sent a trace profctl cannot use")));
}

// A server whose lines are absolute (no Task Environment plane) is accepted and re-based, as the
// agent's tsl collector does with the same answer: each event keeps its
// absolute time; the saved file's lines are relative to the window asked for.
TEST_F(TslCaptureTest, AbsoluteLineTimesAreRebasedNotRejected) {
  FakeTslServer inline_server(
      {.shape = Shape::kInlineXSpace, .job = Job(0, 2, 0), .absolute_line_times = true});
  FakeTslServer disk_server(
      {.shape = Shape::kSavedOnDisk, .job = Job(1, 2, 0), .absolute_line_times = true});
  const std::vector<std::string> workers = {absl::StrCat("grpc://127.0.0.1:", inline_server.port()),
                                            absl::StrCat("grpc://127.0.0.1:", disk_server.port())};
  SessionManifest m;
  ASSERT_EQ(Capture(workers, "absolute", &m), coordinator::kExitOk) << output_;
  for (size_t i = 0; i < workers.size(); ++i) {
    const FakeTslServer& server = i == 0 ? inline_server : disk_server;
    const v1::HostResult* h = Host(m, workers[i]);
    ASSERT_NE(h, nullptr);
    ASSERT_EQ(h->status(), v1::HOST_STATUS_OK) << h->error().message() << "\n" << output_;
    EXPECT_EQ(h->agent_start_ns(), m.start_at_ns()) << h->address();
    absl::StatusOr<std::string> bytes = ReadFile(SessionDir("absolute") + "/" + h->xplane_file());
    ASSERT_THAT(bytes, IsOk());
    tensorflow::profiler::XSpace saved;
    ASSERT_TRUE(saved.ParseFromString(*bytes));
    EXPECT_THAT(xspace::Validate(saved), IsOk());
    EXPECT_EQ(xspace::ProfileStartNs(saved), m.start_at_ns());
    // The same first event, at the same absolute instant, in what the server sent and what we
    // saved.
    const tensorflow::profiler::XSpace sent = server.last_space();
    ASSERT_EQ(xspace::ProfileStartNs(sent), 0);
    const tensorflow::profiler::XLine* sent_line = nullptr;
    for (const auto& plane : sent.planes()) {
      for (const auto& line : plane.lines()) {
        if (sent_line == nullptr && line.events_size() > 0) sent_line = &line;
      }
    }
    ASSERT_NE(sent_line, nullptr);
    bool found = false;
    for (const auto& plane : saved.planes()) {
      for (const auto& line : plane.lines()) {
        if (found || line.id() != sent_line->id() || line.events_size() == 0) continue;
        found = true;
        EXPECT_EQ(xspace::EventStartNs(xspace::ProfileStartNs(saved), line, line.events(0)),
                  xspace::EventStartNs(0, *sent_line, sent_line->events(0)));
      }
    }
    EXPECT_TRUE(found) << h->address();
  }
}

// JAX 0.11's own server on an H200 (its recorded answer replayed, tests/data/traces/
// h200_jax_steps.xplane.pb) captured as a grpc:// worker: saved, valid (its scope-range tree
// plane keys stats by scope ids, with no metadata), with its GPU plane and its steps in the
// breakdown.
TEST_F(TslCaptureTest, ARealJaxServerIsCapturedAndBrokenDown) {
  absl::StatusOr<std::string> recorded = ReadFile(DataPath("h200_jax_steps.xplane.pb"));
  ASSERT_THAT(recorded, IsOk());
  tensorflow::profiler::XSpace jax;
  ASSERT_TRUE(jax.ParseFromString(*recorded));
  FakeTslServer server({.shape = Shape::kInlineXSpace, .job = Job(0, 1, 0), .replay = &jax});
  const std::string worker = absl::StrCat("grpc://127.0.0.1:", server.port());
  SessionManifest m;
  ASSERT_EQ(Capture({worker}, "jax", &m), coordinator::kExitOk) << output_;
  const v1::HostResult* h = Host(m, worker);
  ASSERT_NE(h, nullptr);
  ASSERT_EQ(h->status(), v1::HOST_STATUS_OK) << h->error().message() << "\n" << output_;
  EXPECT_GT(h->steps(), 50);
  absl::StatusOr<std::string> bytes = ReadFile(SessionDir("jax") + "/" + h->xplane_file());
  ASSERT_THAT(bytes, IsOk());
  tensorflow::profiler::XSpace saved;
  ASSERT_TRUE(saved.ParseFromString(*bytes));
  EXPECT_THAT(xspace::Validate(saved), IsOk());
  EXPECT_NE(xspace::FindPlane(saved, "/device:GPU:0"), nullptr);
  EXPECT_NE(xspace::FindPlane(saved, xspace::kScopeRangeCallStackPlaneName), nullptr);
}

// A server that saved a trace we refuse into the session folder leaves no file TensorBoard lists
// (*.xplane.pb): its copy becomes `.invalid`; the accepted one is there once.
TEST_F(TslCaptureTest, ARefusedSavedTraceLeavesNoFileTensorBoardLists) {
  FakeTslServer good({.shape = Shape::kSavedOnDisk, .job = Job(0, 2, 0)});
  FakeTslServer broken(
      {.shape = Shape::kSavedOnDisk, .job = Job(1, 2, 0), .drop_task_environment = true});
  const std::vector<std::string> workers = {absl::StrCat("grpc://127.0.0.1:", good.port()),
                                            absl::StrCat("grpc://127.0.0.1:", broken.port())};
  SessionManifest m;
  ASSERT_EQ(Capture(workers, "stray", &m), coordinator::kExitPartial) << output_;
  EXPECT_EQ(Host(m, workers[0])->status(), v1::HOST_STATUS_OK) << output_;
  const std::string broken_stem = absl::StrCat("127.0.0.1_", broken.port());
  EXPECT_THAT(Host(m, workers[1])->error().message(), HasSubstr("the server's copy was renamed"));
  std::vector<std::string> listed;
  for (const auto& entry : std::filesystem::directory_iterator(SessionDir("stray"))) {
    const std::string name = entry.path().filename().string();
    if (name.ends_with(".xplane.pb")) listed.push_back(name);
  }
  EXPECT_THAT(listed,
              ::testing::ElementsAre(absl::StrCat("127.0.0.1_", good.port(), ".xplane.pb")));
  EXPECT_TRUE(
      std::filesystem::exists(SessionDir("stray") + "/" + broken_stem + ".xplane.pb.invalid"));
}

// A server answering with an old trace, 187 s before the window asked for, is flagged: its clock
// is unmeasured but stated good to 1 s, so that window is not this session's.
// One 300 ms off is within that bound and stays OK.
TEST_F(TslCaptureTest, AnOldTraceOutsideTheClockBoundIsFlaggedWithHowFar) {
  FakeTslServer near(
      {.shape = Shape::kInlineXSpace, .job = Job(0, 2, 0), .stale_by_ns = -300 * kMs});
  FakeTslServer old(
      {.shape = Shape::kInlineXSpace, .job = Job(1, 2, 0), .stale_by_ns = -187'000 * kMs});
  const std::vector<std::string> workers = {absl::StrCat("grpc://127.0.0.1:", near.port()),
                                            absl::StrCat("grpc://127.0.0.1:", old.port())};
  SessionManifest m;
  ASSERT_EQ(Capture(workers, "stale", &m), coordinator::kExitPartial) << output_;
  EXPECT_EQ(Host(m, workers[0])->status(), v1::HOST_STATUS_OK) << output_;
  const v1::HostResult* h = Host(m, workers[1]);
  ASSERT_NE(h, nullptr);
  EXPECT_EQ(h->status(), v1::HOST_STATUS_INCOMPLETE);
  EXPECT_EQ(h->recording(), v1::RECORDING_OTHER_WINDOW);
  EXPECT_THAT(h->recording_detail(), HasSubstr("187.000 s before the window asked for"));
  EXPECT_THAT(output_, HasSubstr("187.000 s before"));  // the table says it too
}

TEST_F(TslCaptureTest, UnusableTslAnswersFailOnlyTheirHosts) {
  testkit::TempDir elsewhere;  // a disk this "remote" server writes to and we do not read
  FakeTslServer good({.shape = Shape::kInlineXSpace, .job = Job(0, 3, 0)});
  FakeTslServer busy({.busy = true, .job = Job(1, 3, 0)});
  FakeTslServer remote(
      {.shape = Shape::kSavedOnDisk, .job = Job(2, 3, 0), .save_root_override = elsewhere.path()});
  FakeTslServer empty({.shape = Shape::kEmpty, .job = Job(2, 3, 0)});
  const std::vector<std::string> workers = {absl::StrCat("grpc://127.0.0.1:", good.port()),
                                            absl::StrCat("grpc://127.0.0.1:", busy.port()),
                                            absl::StrCat("grpc://127.0.0.1:", remote.port()),
                                            absl::StrCat("grpc://127.0.0.1:", empty.port())};
  SessionManifest m;
  ASSERT_EQ(Capture(workers, "partial", &m), coordinator::kExitPartial) << output_;
  EXPECT_EQ(Host(m, workers[0])->status(), v1::HOST_STATUS_OK);
  // Without collectives of other hosts to match, the one good host keeps its assumption.
  EXPECT_EQ(Host(m, workers[0])->clock().method(), "unmeasured");
  EXPECT_EQ(Host(m, workers[1])->error().code(),
            static_cast<int>(absl::StatusCode::kAlreadyExists));
  EXPECT_THAT(Host(m, workers[2])->error().message(),
              HasSubstr("saved its trace on its own disk as " +
                        std::filesystem::absolute(logdir_).string()));
  EXPECT_THAT(Host(m, workers[3])->error().message(), HasSubstr("recorded nothing"));

  // ping says what it can: reachable, protocol, clock unmeasured.
  ASSERT_EQ(Run({"ping", "--workers=" + workers[0]}, nullptr, ""), coordinator::kExitOk) << output_;
  EXPECT_THAT(output_, HasSubstr("unmeasured"));
  EXPECT_THAT(output_, HasSubstr("tsl"));
}

}  // namespace
}  // namespace profctl
