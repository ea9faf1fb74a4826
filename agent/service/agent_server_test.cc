#include "agent/service/agent_server.h"

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <memory>
#include <set>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "agent/agent_metrics.h"
#include "agent/agent_options.h"
#include "agent/hang_detector.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "profctl/v1/agent.grpc.pb.h"
#include "spdlog/sinks/ostream_sink.h"
#include "spdlog/spdlog.h"
#include "synthetic/synthetic_job.h"
#include "tests/fake_clock.h"
#include "tests/fake_executor.h"
#include "tests/status_matchers.h"

using ::profctl::testkit::IsOk;

namespace profctl::agent {
namespace {

using ::profctl::testkit::FakeClock;
using ::profctl::testkit::FakeExecutor;
using ::testing::HasSubstr;
namespace v1 = ::profctl::v1;

AgentOptions Options(int64_t endpoints) {
  AgentOptions o;
  o.port = 0;
  o.bind = "127.0.0.1";
  o.port_file = "unused";
  o.endpoints = endpoints;
  return o;
}

TEST(EndpointSkewTest, DeterministicWithinTheSpreadAndIndependentOfTheCount) {
  EXPECT_EQ(EndpointSkewMs(5, 0), 0);
  std::set<int64_t> seen;
  for (int64_t i = 0; i < 300; ++i) {
    const int64_t skew = EndpointSkewMs(i, 40);
    EXPECT_GE(skew, -40);
    EXPECT_LE(skew, 40);
    EXPECT_EQ(skew, EndpointSkewMs(i, 40));
    seen.insert(skew);
  }
  EXPECT_GT(seen.size(), 60u);  // spread over the 81 values, not a few
}

TEST(PlanEndpointsTest, OneEndpointIsTheClassicAgent) {
  AgentOptions o = Options(1);
  o.synthetic = "rank=2,world=4";
  o.clock_skew_ms = -30;
  absl::StatusOr<std::vector<EndpointPlan>> plans = PlanEndpoints(o);
  ASSERT_THAT(plans, IsOk());
  ASSERT_EQ(plans->size(), 1u);
  EXPECT_EQ((*plans)[0].name, "");
  EXPECT_EQ((*plans)[0].clock_skew_ns, -30 * kNanosPerMilli);
  EXPECT_EQ((*plans)[0].synthetic.rank, 2);
  EXPECT_EQ((*plans)[0].synthetic.world, 4);
  EXPECT_EQ((*plans)[0].synthetic.clock_skew_ns, -30 * kNanosPerMilli);
}

TEST(PlanEndpointsTest, EndpointsAreConsecutiveRanksWithTheirOwnNamesAndSkews) {
  AgentOptions o = Options(4);
  o.name = "w";
  o.synthetic = "rank=1,world=2,step_ms=50";
  o.clock_skew_ms = 10;
  o.endpoint_skew_spread_ms = 20;
  absl::StatusOr<std::vector<EndpointPlan>> plans = PlanEndpoints(o);
  ASSERT_THAT(plans, IsOk());
  ASSERT_EQ(plans->size(), 4u);
  for (int64_t i = 0; i < 4; ++i) {
    const EndpointPlan& p = (*plans)[static_cast<size_t>(i)];
    EXPECT_EQ(p.name, absl::StrCat("w-", i));
    EXPECT_EQ(p.synthetic.rank, 1 + i);
    EXPECT_EQ(p.synthetic.world, 5);  // raised from 2 to cover ranks 1..4
    EXPECT_EQ(p.synthetic.step_ms, 50);
    EXPECT_EQ(p.clock_skew_ns, (10 + EndpointSkewMs(i, 20)) * kNanosPerMilli);
    EXPECT_EQ(p.synthetic.clock_skew_ns, p.clock_skew_ns);
    // One job: every endpoint shares the memo of its all-reduce ends, and would use it.
    ASSERT_NE(p.synthetic_memo, nullptr);
    EXPECT_EQ(p.synthetic_memo, (*plans)[0].synthetic_memo);
    EXPECT_TRUE(synthetic::SameSyntheticJob(p.synthetic_memo->job(), p.synthetic));
  }
  o.name = "";
  o.synthetic = "world=64";
  plans = PlanEndpoints(o);
  ASSERT_THAT(plans, IsOk());
  EXPECT_EQ((*plans)[3].name, "ep-3");
  EXPECT_EQ((*plans)[3].synthetic.world, 64);  // a larger world is kept
}

TEST(PlanEndpointsTest, ErrorsNameTheFlag) {
  AgentOptions o = Options(2048);
  o.synthetic = "rank=2049,world=2050";
  absl::Status s = PlanEndpoints(o).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("--endpoints=2048 with synthetic rank 2049 needs ranks up to "
                                     "4096"));
  o.synthetic = "rank=4095,world=4096";
  EXPECT_THAT(PlanEndpoints(o).status().message(), HasSubstr("at most 4096 ranks"));
  o.synthetic = "gpus=x";
  EXPECT_THAT(PlanEndpoints(o).status().message(), HasSubstr("--synthetic: "));
}

// A snapshot of the whole ring peaks the agent at about kRecorderSnapshotPeakMultiple (13) times
// its bytes: the ring is kept under --max-held-mb / 13 (64 MiB asked under the default 512:
// 39.4 MiB; measured peaks 763 MiB with 64, 484 with 39.4), and a ring that fits is left as asked.
TEST(AgentServerTest, TheRecordersRingIsKeptSmallEnoughForASnapshotToFitTheHeldCap) {
  AgentOptions o;
  o.flight_recorder_mb = 64;
  o.max_held_mb = 512;
  EXPECT_EQ(RecorderRingBytes(o), (int64_t{512} << 20) / 13);
  EXPECT_LE(RecorderRingBytes(o) * kRecorderSnapshotPeakMultiple, int64_t{512} << 20);
  o.flight_recorder_mb = 16;
  EXPECT_EQ(RecorderRingBytes(o), int64_t{16} << 20);
  o.flight_recorder_mb = 64;
  o.max_held_mb = 2048;
  EXPECT_EQ(RecorderRingBytes(o), int64_t{64} << 20);
}

TEST(AgentServerTest, PortFileListsOnePortPerLine) {
  FakeClock clock;
  FakeExecutor executor(&clock);
  absl::StatusOr<std::unique_ptr<AgentServer>> server =
      AgentServer::Start(Options(3), {.clock = &clock, .executor = &executor, .hostname = "m"});
  ASSERT_THAT(server, IsOk());
  const std::vector<int>& ports = (*server)->ports();
  ASSERT_EQ(ports.size(), 3u);
  EXPECT_EQ(AgentPortFileText(ports, /*metrics_port=*/-1),
            absl::StrCat(ports[0], "\n", ports[1], "\n", ports[2], "\n"));
  EXPECT_EQ(std::set<int>(ports.begin(), ports.end()).size(), 3u);
}

std::unique_ptr<v1::AgentService::Stub> StubFor(int port, const std::string& authority = "") {
  grpc::ChannelArguments args;
  if (!authority.empty()) args.SetString(GRPC_ARG_DEFAULT_AUTHORITY, authority);
  return v1::AgentService::NewStub(grpc::CreateCustomChannel(
      absl::StrCat("127.0.0.1:", port), grpc::InsecureChannelCredentials(), args));
}

void SetDeadline(grpc::ClientContext* ctx) {
  ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
}

TEST(AgentServerTest, EachEndpointAnswersAsItself) {
  FakeClock clock;  // frozen: SyncClock answers exactly the endpoint's skewed time
  FakeExecutor executor(&clock);
  AgentOptions o = Options(3);
  o.name = "w";
  o.clock_skew_ms = 5;
  o.endpoint_skew_spread_ms = 1000;
  absl::StatusOr<std::unique_ptr<AgentServer>> server =
      AgentServer::Start(o, {.clock = &clock, .executor = &executor, .hostname = "machine"});
  ASSERT_THAT(server, IsOk());
  for (size_t i = 0; i < 3; ++i) {
    std::unique_ptr<v1::AgentService::Stub> stub = StubFor((*server)->ports()[i]);
    grpc::ClientContext ctx;
    SetDeadline(&ctx);
    v1::GetInfoResponse info;
    ASSERT_THAT(stub->GetInfo(&ctx, v1::GetInfoRequest(), &info), IsOk());
    EXPECT_EQ(info.name(), absl::StrCat("w-", i));
    EXPECT_EQ(info.hostname(), "machine");
    EXPECT_THAT(info.collectors(), ::testing::ElementsAre("synthetic"));

    grpc::ClientContext sync_ctx;
    SetDeadline(&sync_ctx);
    v1::SyncClockResponse sync;
    ASSERT_THAT(stub->SyncClock(&sync_ctx, v1::SyncClockRequest(), &sync), IsOk());
    EXPECT_EQ(
        sync.receive_ns(),
        clock.WallNs() + (5 + EndpointSkewMs(static_cast<int64_t>(i), 1000)) * kNanosPerMilli);
  }
  // A call whose :authority names no port of the process is not guessed at.
  std::unique_ptr<v1::AgentService::Stub> lost = StubFor((*server)->ports()[0], "127.0.0.1:1");
  grpc::ClientContext ctx;
  SetDeadline(&ctx);
  v1::GetInfoResponse info;
  const grpc::Status s = lost->GetInfo(&ctx, v1::GetInfoRequest(), &info);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_THAT(s.error_message(), HasSubstr("'127.0.0.1:1'"));
}

v1::GetStepSignalResponse StepSignal(int port, bool summary_only = false) {
  grpc::ClientContext ctx;
  SetDeadline(&ctx);
  v1::GetStepSignalRequest request;
  request.set_summary_only(summary_only);
  v1::GetStepSignalResponse r;
  EXPECT_THAT(StubFor(port)->GetStepSignal(&ctx, request, &r), IsOk());
  return r;
}

TEST(AgentServerTest, StepSignalReportsAStallAfterHangFactorTimesTheMedianStep) {
  FakeClock clock;
  FakeExecutor executor(&clock);
  AgentMetrics metrics;
  const std::string base = "world=2,rank=0,seed=3,step_ms=20,jitter=0";
  const int64_t k_hang = synthetic::SyntheticJob(*synthetic::ParseSyntheticJobConfig(base))
                             .StepIndexAt(clock.WallNs()) +
                         50;
  AgentOptions o = Options(1);
  o.synthetic = absl::StrCat(base, ",hang_rank=1,hang_at_step=", k_hang);
  o.hang_factor = 10;
  const synthetic::SyntheticJob model(*synthetic::ParseSyntheticJobConfig(o.synthetic));
  absl::StatusOr<std::unique_ptr<AgentServer>> server = AgentServer::Start(
      o, {.clock = &clock, .executor = &executor, .hostname = "m", .metrics = &metrics});
  ASSERT_THAT(server, IsOk());
  const int port = (*server)->ports()[0];
  // Steps end on time: nothing stalled; /metrics says 0 for the source.
  v1::GetStepSignalResponse r = StepSignal(port);
  EXPECT_GT(r.samples_size(), 0);
  EXPECT_EQ(r.summaries_size(), 0);
  EXPECT_EQ(r.stalls_size(), 0);
  // Asked for a summary: each source's state instead of samples.
  r = StepSignal(port, /*summary_only=*/true);
  EXPECT_EQ(r.samples_size(), 0);
  EXPECT_EQ(r.stalls_size(), 0);
  EXPECT_THAT(r.sources(), ::testing::ElementsAre("synthetic"));
  ASSERT_EQ(r.summaries_size(), 1);
  EXPECT_EQ(r.summaries(0).source(), "synthetic");
  EXPECT_EQ(r.summaries(0).steps(), static_cast<uint32_t>(HangDetector::kWindow));
  EXPECT_EQ(r.summaries(0).median_step_ns(), model.PeriodNs(k_hang - 1));
  EXPECT_LE(r.summaries(0).last_step_end_ns(), r.now_ns());
  EXPECT_GT(r.summaries(0).last_step_end_ns(), r.now_ns() - 2 * r.summaries(0).median_step_ns());
  EXPECT_THAT(metrics.Render(), HasSubstr("profctl_agent_step_stalled{source=\"synthetic\"} 0\n"));
  // The hung step began (the last step end) 5 periods ago: not yet 10 x the median.
  const int64_t period = model.PeriodNs(k_hang - 1);
  while (model.StepIndexAt(clock.WallNs()) < k_hang) clock.JumpWall(period);
  clock.JumpWall(5 * period);
  r = StepSignal(port);
  EXPECT_EQ(r.stalls_size(), 0);
  // 11 periods after the last step end: stalled, with the facts of its last step.
  clock.JumpWall(6 * period);
  r = StepSignal(port);
  ASSERT_EQ(r.stalls_size(), 1);
  // The summary says the same stall, and the source's last step.
  const v1::GetStepSignalResponse summary = StepSignal(port, /*summary_only=*/true);
  ASSERT_EQ(summary.stalls_size(), 1);
  EXPECT_EQ(summary.stalls(0).last_step_end_ns(), r.stalls(0).last_step_end_ns());
  ASSERT_EQ(summary.summaries_size(), 1);
  EXPECT_EQ(summary.summaries(0).last_step_end_ns(), r.stalls(0).last_step_end_ns());
  EXPECT_EQ(summary.summaries(0).last_step_num(), r.stalls(0).last_step_num());
  const v1::StepStall& stall = r.stalls(0);
  EXPECT_EQ(stall.source(), "synthetic");
  EXPECT_EQ(stall.last_step_num(), (k_hang - 1) % 1'000'000);
  EXPECT_EQ(stall.median_step_ns(), period);
  EXPECT_EQ(stall.stalled_for_ns(), r.now_ns() - stall.last_step_end_ns());
  EXPECT_GT(stall.stalled_for_ns(), 10 * period);
  EXPECT_LE(stall.stalled_for_ns(), 12 * period);
  const std::string text = metrics.Render();
  EXPECT_THAT(text, HasSubstr("profctl_agent_step_stalled{source=\"synthetic\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("profctl_agent_seconds_since_step_end{source=\"synthetic\"} "));
}

// Real clock and executors: these captures take a few real milliseconds (no sleeps; every wait
// is for an answer).
class AgentServerCaptureTest : public ::testing::Test {
 protected:
  void SetUp() override {
    AgentOptions o = Options(3);
    o.name = "w";
    absl::StatusOr<std::unique_ptr<AgentServer>> server =
        AgentServer::Start(o, {.clock = &clock_,
                               .executor = &timeline_,
                               .collect_executor = &collect_,
                               .hostname = "machine",
                               .metrics = &metrics_});
    ASSERT_THAT(server, IsOk());
    server_ = std::move(*server);
  }

  v1::CaptureRequest Request(const std::string& id, uint64_t duration_ms) {
    v1::CaptureRequest r;
    r.set_session_id(id);
    r.set_duration_ms(duration_ms);
    return r;
  }

  RealClock clock_;
  AsioExecutor timeline_{&clock_};
  AsioExecutor collect_{&clock_};
  AgentMetrics metrics_;
  std::unique_ptr<AgentServer> server_;  // after the executors: shut down before them
};

// Reads a whole Capture stream; returns the kinds of parts in order.
std::vector<std::string> ReadAll(grpc::ClientReader<v1::CaptureChunk>* reader,
                                 v1::CaptureChunk* started, v1::CaptureHeader* header,
                                 size_t* bytes) {
  std::vector<std::string> kinds;
  v1::CaptureChunk chunk;
  while (reader->Read(&chunk)) {
    switch (chunk.part_case()) {
      case v1::CaptureChunk::kStarted:
        *started = chunk;
        kinds.emplace_back("started");
        break;
      case v1::CaptureChunk::kHeader:
        *header = chunk.header();
        kinds.emplace_back("header");
        break;
      case v1::CaptureChunk::kData:
        *bytes += chunk.data().size();
        if (kinds.empty() || kinds.back() != "data") kinds.emplace_back("data");
        break;
      case v1::CaptureChunk::kTrailer:
        kinds.emplace_back("trailer");
        break;
      case v1::CaptureChunk::PART_NOT_SET:
        kinds.emplace_back("empty");
        break;
    }
  }
  return kinds;
}

TEST_F(AgentServerCaptureTest, StartedComesFirstAndEndpointsCaptureIndependently) {
  // Endpoint 0 starts a long capture; the first message arrives as soon as recording begins.
  std::unique_ptr<v1::AgentService::Stub> stub0 = StubFor(server_->ports()[0]);
  grpc::ClientContext ctx0;
  SetDeadline(&ctx0);
  std::unique_ptr<grpc::ClientReader<v1::CaptureChunk>> long_capture =
      stub0->Capture(&ctx0, Request("long", 60'000));
  v1::CaptureChunk first;
  ASSERT_TRUE(long_capture->Read(&first));
  ASSERT_EQ(first.part_case(), v1::CaptureChunk::kStarted);
  EXPECT_GT(first.started().start_ns(), 0);

  // Endpoint 1 has its own capture slot: a short capture runs to the end meanwhile.
  std::unique_ptr<v1::AgentService::Stub> stub1 = StubFor(server_->ports()[1]);
  grpc::ClientContext ctx1;
  SetDeadline(&ctx1);
  std::unique_ptr<grpc::ClientReader<v1::CaptureChunk>> short_capture =
      stub1->Capture(&ctx1, Request("short", 5));
  v1::CaptureChunk started;
  v1::CaptureHeader header;
  size_t bytes = 0;
  EXPECT_THAT(ReadAll(short_capture.get(), &started, &header, &bytes),
              ::testing::ElementsAre("started", "header", "data", "trailer"));
  ASSERT_THAT(short_capture->Finish(), IsOk());
  EXPECT_EQ(header.name(), "w-1");
  EXPECT_EQ(header.start_ns(), started.started().start_ns());
  EXPECT_EQ(header.total_bytes(), bytes);
  EXPECT_FALSE(header.cancelled());

  // GetInfo and Cancel reach the endpoint the port names.
  for (size_t i = 0; i < 3; ++i) {
    grpc::ClientContext ctx;
    SetDeadline(&ctx);
    v1::GetInfoResponse info;
    ASSERT_THAT(StubFor(server_->ports()[i])->GetInfo(&ctx, {}, &info), IsOk());
    EXPECT_EQ(info.busy(), i == 0) << "endpoint " << i;
  }
  {
    grpc::ClientContext ctx;  // endpoint 2 only remembers the id; endpoint 0 goes on
    SetDeadline(&ctx);
    v1::CancelRequest cancel;
    cancel.set_session_id("long");
    v1::CancelResponse ignored;
    ASSERT_THAT(StubFor(server_->ports()[2])->Cancel(&ctx, cancel, &ignored), IsOk());
    EXPECT_TRUE(server_->manager_for_testing(0).busy());
  }
  grpc::ClientContext cancel_ctx;
  SetDeadline(&cancel_ctx);
  v1::CancelRequest cancel;
  cancel.set_session_id("long");
  v1::CancelResponse ignored;
  ASSERT_THAT(stub0->Cancel(&cancel_ctx, cancel, &ignored), IsOk());
  header.Clear();
  bytes = 0;
  EXPECT_THAT(ReadAll(long_capture.get(), &started, &header, &bytes),
              ::testing::ElementsAre("header", "data", "trailer"));
  ASSERT_THAT(long_capture->Finish(), IsOk());
  EXPECT_TRUE(header.cancelled());
  EXPECT_EQ(header.name(), "w-0");
  EXPECT_EQ(header.start_ns(), first.started().start_ns());
}

TEST_F(AgentServerCaptureTest, MetricsCountStreamsByOutcomeAndTheBytesSent) {
  std::unique_ptr<v1::AgentService::Stub> stub = StubFor(server_->ports()[0]);
  grpc::ClientContext ctx;
  SetDeadline(&ctx);
  auto capture = stub->Capture(&ctx, Request("m1", 5));
  v1::CaptureChunk started;
  v1::CaptureHeader header;
  size_t bytes = 0;
  ReadAll(capture.get(), &started, &header, &bytes);
  ASSERT_THAT(capture->Finish(), IsOk());
  ASSERT_GT(bytes, 0u);
  // A request without a session id: refused before anything is sent.
  grpc::ClientContext again_ctx;
  SetDeadline(&again_ctx);
  auto again = stub->Capture(&again_ctx, Request("", 5));
  v1::CaptureChunk chunk;
  while (again->Read(&chunk)) {
  }
  EXPECT_EQ(again->Finish().error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  const std::string text = metrics_.Render();
  EXPECT_THAT(text, HasSubstr("profctl_agent_captures_admitted_total 1\n"));
  EXPECT_THAT(text, HasSubstr("profctl_agent_streams_total{code=\"OK\",rpc=\"capture\"} 1\n"));
  EXPECT_THAT(
      text,
      HasSubstr("profctl_agent_streams_total{code=\"INVALID_ARGUMENT\",rpc=\"capture\"} 1\n"));
  // Every byte of the trace (plus framing); at least the trace.
  const std::string prefix = "profctl_agent_trace_bytes_sent_total{rpc=\"capture\"} ";
  const size_t at = text.find(prefix);
  ASSERT_NE(at, std::string::npos) << text;
  EXPECT_GE(std::stoull(text.substr(at + prefix.size())), bytes);
}

TEST_F(AgentServerCaptureTest, TracerLevelsOutOfRangeAreRefusedNamingTheField) {
  std::unique_ptr<v1::AgentService::Stub> stub = StubFor(server_->ports()[2]);
  grpc::ClientContext ctx;
  SetDeadline(&ctx);
  v1::CaptureRequest request = Request("levels", 100);
  request.set_host_tracer_level(4);
  std::unique_ptr<grpc::ClientReader<v1::CaptureChunk>> reader = stub->Capture(&ctx, request);
  v1::CaptureChunk chunk;
  EXPECT_FALSE(reader->Read(&chunk));
  const grpc::Status s = reader->Finish();
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("host_tracer_level=4 is not in 0..3"));
}

// A flood of refused Captures (a peer that repeats one at will) writes at most 10 log lines of
// that kind per 10 s, not one a call (the limiter's count of what it left out:
// LogLimiter.BoundsEachKindAndCountsWhatItLeftOut).
TEST_F(AgentServerCaptureTest, AFloodOfRefusedCapturesWritesABoundedLog) {
  std::ostringstream log;
  auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(log);
  spdlog::default_logger()->sinks().push_back(sink);
  std::unique_ptr<v1::AgentService::Stub> stub = StubFor(server_->ports()[1]);
  for (int i = 0; i < 200; ++i) {
    grpc::ClientContext ctx;
    SetDeadline(&ctx);
    v1::CaptureRequest request = Request(absl::StrCat("flood", i), 100);
    request.set_host_tracer_level(4);
    std::unique_ptr<grpc::ClientReader<v1::CaptureChunk>> reader = stub->Capture(&ctx, request);
    v1::CaptureChunk chunk;
    EXPECT_FALSE(reader->Read(&chunk));
    EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  }
  spdlog::default_logger()->sinks().pop_back();
  const std::string text = log.str();
  size_t lines = 0;
  for (size_t at = text.find("' rejected: "); at != std::string::npos;
       at = text.find("' rejected: ", at + 1)) {
    ++lines;
  }
  EXPECT_LE(lines, 10u) << text;
}

TEST_F(AgentServerCaptureTest, CancelThatOvertakesItsCaptureAbortsIt) {
  std::unique_ptr<v1::AgentService::Stub> stub = StubFor(server_->ports()[2]);
  {
    grpc::ClientContext ctx;
    SetDeadline(&ctx);
    v1::CancelRequest cancel;
    cancel.set_session_id("early");
    v1::CancelResponse ignored;
    ASSERT_THAT(stub->Cancel(&ctx, cancel, &ignored), IsOk());
  }
  {
    grpc::ClientContext ctx;
    SetDeadline(&ctx);
    v1::CancelRequest cancel;
    cancel.set_session_id("../bad");
    v1::CancelResponse ignored;
    EXPECT_EQ(stub->Cancel(&ctx, cancel, &ignored).error_code(),
              grpc::StatusCode::INVALID_ARGUMENT);
  }
  grpc::ClientContext ctx;
  SetDeadline(&ctx);
  std::unique_ptr<grpc::ClientReader<v1::CaptureChunk>> reader =
      stub->Capture(&ctx, Request("early", 60'000));
  v1::CaptureChunk chunk;
  EXPECT_FALSE(reader->Read(&chunk));
  const grpc::Status s = reader->Finish();
  EXPECT_EQ(s.error_code(), grpc::StatusCode::ABORTED);
  EXPECT_THAT(s.error_message(), HasSubstr("session 'early' was cancelled before it started"));
}

}  // namespace
}  // namespace profctl::agent
