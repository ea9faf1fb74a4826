// The agent's protection of sessions, over real loopback gRPC: session keys (only the starting
// client can cancel or re-read a capture), Fetch of retained traces (a keyed capture whose stream
// broke records on and is served again whole), cancel reasons, and the agent protecting its host
// (memory cap for unread streams, idle stream timeout, bounded logs for oversized requests).
//
// The agent's sessions run on the real clock and executor (short windows); the trace store's
// expiry and the stream idle timers run on a FakeClock/FakeExecutor the test advances, so no test
// sleeps to make something happen. Waits for another thread are bounded (kFetchTestTimeout).
#include <grpcpp/grpcpp.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "agent/capture_manager.h"
#include "agent/collectors/synthetic/synthetic_collector.h"
#include "agent/service/agent_service.h"
#include "agent/trace_store.h"
#include "common/clock.h"
#include "common/executor.h"
#include "common/gzip.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "profctl/v1/agent.grpc.pb.h"
#include "spdlog/sinks/ostream_sink.h"
#include "spdlog/spdlog.h"
#include "tests/fake_clock.h"
#include "tests/fake_executor.h"
#include "tests/status_matchers.h"
#include "tests/tcp_proxy.h"

using ::profctl::testkit::IsOk;

namespace profctl {
namespace {

using profctl::v1::CaptureChunk;
using profctl::v1::CaptureRequest;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr absl::Duration kFetchTestTimeout = absl::Seconds(30);
constexpr char kKeyA[] = "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA";
constexpr char kKeyB[] = "BBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBB";
constexpr int64_t kIdleTimeoutMs = 30'000;

// Polls `done` (a condition another thread makes true) until it holds or kFetchTestTimeout passes.
bool WaitFor(const std::function<bool()>& done) {
  const absl::Time deadline = absl::Now() + kFetchTestTimeout;
  while (!done()) {
    if (absl::Now() > deadline) return false;
    absl::SleepFor(absl::Milliseconds(1));
  }
  return true;
}

// Everything one Capture or Fetch stream said.
struct Stream {
  grpc::Status status;
  std::optional<int64_t> started;
  std::optional<profctl::v1::CaptureHeader> header;
  std::string data;
  uint64_t chunks = 0;
  std::optional<profctl::v1::CaptureTrailer> trailer;
};

// Reads a stream to its end. `after_started` runs once 'started' arrived (e.g. to break it).
Stream ReadAll(grpc::ClientReaderInterface<CaptureChunk>* reader,
               const std::function<void()>& after_started = nullptr) {
  Stream s;
  CaptureChunk chunk;
  while (reader->Read(&chunk)) {
    if (chunk.has_started()) {
      s.started = chunk.started().start_ns();
      if (after_started) after_started();
    } else if (chunk.has_header()) {
      s.header = chunk.header();
    } else if (chunk.has_trailer()) {
      s.trailer = chunk.trailer();
    } else {
      s.data += chunk.data();
      ++s.chunks;
    }
  }
  s.status = reader->Finish();
  return s;
}

CaptureRequest Request(const std::string& id, uint64_t duration_ms, const std::string& key = "") {
  CaptureRequest r;
  r.set_session_id(id);
  r.set_duration_ms(duration_ms);
  r.set_session_key(key);
  return r;
}

std::unique_ptr<grpc::ServerBuilder> Builder(int* port) {
  auto b = std::make_unique<grpc::ServerBuilder>();
  b->AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  b->AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), port);
  return b;
}

// A complete agent on loopback with a trace store. Sessions on the real clock; the store's
// expiry and the stream idle timers on `fake_clock` / `timers`.
class Agent {
 public:
  explicit Agent(agent::TraceStoreOptions store_options = {},
                 synthetic::SyntheticJobConfig job = synthetic::SyntheticJobConfig{},
                 size_t chunk_bytes = 4096)
      : synthetic_(job),
        store_({&fake_clock_, nullptr}, store_options),
        service_({{.manager = &manager_,
                   .clock = &clock_,
                   .name = "node-7",
                   .hostname = "machine",
                   .store = &store_,
                   .executor = &timers_}},
                 {.chunk_bytes = chunk_bytes, .stream_idle_timeout_ms = kIdleTimeoutMs}) {
    std::unique_ptr<grpc::ServerBuilder> builder = Builder(&port_);
    builder->RegisterService(&service_);
    server_ = builder->BuildAndStart();
    channel_ = grpc::CreateChannel(address(), grpc::InsecureChannelCredentials());
    stub_ = profctl::v1::AgentService::NewStub(channel_);
  }
  ~Agent() { server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(5)); }

  std::string address() const { return absl::StrCat("127.0.0.1:", port_); }
  bool ok() const { return server_ != nullptr && port_ != 0; }

  Stream Capture(const CaptureRequest& request,
                 const std::function<void(grpc::ClientContext*)>& after_started = nullptr,
                 profctl::v1::AgentService::Stub* stub = nullptr) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
    auto reader = (stub != nullptr ? stub : stub_.get())->Capture(&ctx, request);
    return ReadAll(reader.get(),
                   after_started ? [&] { after_started(&ctx); } : std::function<void()>());
  }
  Stream Fetch(const std::string& id, const std::string& key) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
    profctl::v1::FetchRequest request;
    request.set_session_id(id);
    request.set_session_key(key);
    auto reader = stub_->Fetch(&ctx, request);
    return ReadAll(reader.get());
  }
  grpc::Status Cancel(const std::string& id, const std::string& key) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    profctl::v1::CancelRequest request;
    request.set_session_id(id);
    request.set_session_key(key);
    profctl::v1::CancelResponse response;
    return stub_->Cancel(&ctx, request, &response);
  }

  agent::CaptureManager& manager() { return manager_; }
  agent::TraceStore& store() { return store_; }
  testkit::FakeClock& fake_clock() { return fake_clock_; }
  testkit::FakeExecutor& timers() { return timers_; }

 private:
  RealClock clock_;
  AsioExecutor executor_{&clock_};
  testkit::FakeClock fake_clock_;
  testkit::FakeExecutor timers_{&fake_clock_};
  agent::SyntheticCollector synthetic_;
  agent::CaptureManager manager_{{&clock_, {&synthetic_}, &executor_, nullptr},
                                 {.max_duration_ms = 5000, .host_name = "node-7"}};
  agent::TraceStore store_;
  agent::AgentServiceImpl service_;
  int port_ = 0;
  std::unique_ptr<grpc::Server> server_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<profctl::v1::AgentService::Stub> stub_;
};

void ExpectWhole(const Stream& s) {
  ASSERT_THAT(s.status, IsOk()) << s.status.error_message();
  ASSERT_TRUE(s.header.has_value());
  ASSERT_TRUE(s.trailer.has_value());
  EXPECT_EQ(s.data.size(), s.header->total_bytes());
  EXPECT_EQ(s.trailer->chunks(), s.chunks);
  EXPECT_EQ(s.trailer->crc32(), Crc32(0, s.data));
  tensorflow::profiler::XSpace space;
  EXPECT_TRUE(space.ParseFromString(s.data));
}

TEST(AgentFetchTest, FetchServesTheSameBytesAndCrcAsTheCapture) {
  Agent agent;
  ASSERT_THAT(agent, IsOk());
  const Stream captured = agent.Capture(Request("s1", 30, kKeyA));
  ExpectWhole(captured);
  const Stream fetched = agent.Fetch("s1", kKeyA);
  ExpectWhole(fetched);
  EXPECT_FALSE(fetched.started.has_value());  // recording is long over
  EXPECT_EQ(fetched.data, captured.data);
  EXPECT_EQ(fetched.trailer->crc32(), captured.trailer->crc32());
  EXPECT_EQ(fetched.header->SerializeAsString(), captured.header->SerializeAsString());
  EXPECT_EQ(fetched.header->name(), "node-7");
  EXPECT_EQ(fetched.header->hostname(), "machine");
  // The retained trace and the stream shared one buffer: held once, the stream's hold gone.
  EXPECT_EQ(agent.store().held_bytes(), captured.data.size());
}

TEST(AgentFetchTest, AKeyedCaptureWhoseConnectionBreaksRecordsOnAndIsFetchedWhole) {
  Agent agent;
  ASSERT_THAT(agent, IsOk());
  absl::StatusOr<std::unique_ptr<testkit::TcpProxy>> proxy =
      testkit::TcpProxy::Start("127.0.0.1", std::stoi(agent.address().substr(10)));
  ASSERT_THAT(proxy, IsOk());
  auto via_proxy = profctl::v1::AgentService::NewStub(
      grpc::CreateChannel((*proxy)->address(), grpc::InsecureChannelCredentials()));
  const Stream broken = agent.Capture(
      Request("s1", 300, kKeyA), [&](grpc::ClientContext*) { (*proxy)->ResetAll(); },
      via_proxy.get());
  EXPECT_FALSE(broken.status.ok());
  ASSERT_TRUE(broken.started.has_value());
  EXPECT_FALSE(broken.header.has_value());
  // Still recording: this Fetch waits for the end of the window.
  EXPECT_TRUE(agent.manager().busy());
  const Stream fetched = agent.Fetch("s1", kKeyA);
  ExpectWhole(fetched);
  EXPECT_FALSE(fetched.header->cancelled());
  EXPECT_EQ(fetched.header->start_ns(), *broken.started);
  EXPECT_GE(fetched.header->stop_ns() - fetched.header->start_ns(), 299 * kNanosPerMilli);
  EXPECT_EQ(fetched.header->cancel_reason(), profctl::v1::CANCEL_REASON_UNSPECIFIED);
  // Served again, byte for byte.
  const Stream again = agent.Fetch("s1", kKeyA);
  EXPECT_EQ(again.data, fetched.data);
}

TEST(AgentFetchTest, AKeylessCaptureWhoseClientLeavesStopsAndIsNotRetained) {
  Agent agent;
  ASSERT_THAT(agent, IsOk());
  const Stream gone =
      agent.Capture(Request("s1", 5000), [](grpc::ClientContext* ctx) { ctx->TryCancel(); });
  EXPECT_EQ(gone.status.error_code(), grpc::StatusCode::CANCELLED);
  ASSERT_TRUE(WaitFor([&] { return !agent.manager().busy(); }));  // stopped, not 5 s later
  EXPECT_EQ(agent.Fetch("s1", "").status.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(agent.store().retained_count(), 0u);
}

TEST(AgentFetchTest, FetchWithAnotherKeyOrIdIsTheSameNotFound) {
  Agent agent;
  ASSERT_THAT(agent, IsOk());
  ExpectWhole(agent.Capture(Request("s1", 10, kKeyA)));
  const Stream wrong_key = agent.Fetch("s1", kKeyB);
  const Stream no_key = agent.Fetch("s1", "");
  const Stream wrong_id = agent.Fetch("s2", kKeyA);
  for (const Stream* s : {&wrong_key, &no_key, &wrong_id}) {
    EXPECT_EQ(s->status.error_code(), grpc::StatusCode::NOT_FOUND);
    EXPECT_EQ(s->status.error_message(), wrong_id.status.error_message());
    EXPECT_FALSE(s->header.has_value());
  }
  EXPECT_THAT(wrong_key.status.error_message(), Not(HasSubstr("s1")));
}

TEST(AgentFetchTest, CancelWithAnotherKeyIsPermissionDeniedAndTheCaptureCompletes) {
  Agent agent;
  ASSERT_THAT(agent, IsOk());
  std::vector<grpc::Status> denied;
  const Stream s = agent.Capture(Request("s1", 100, kKeyA), [&](grpc::ClientContext*) {
    denied.push_back(agent.Cancel("s1", kKeyB));
    denied.push_back(agent.Cancel("s1", ""));
  });
  ASSERT_EQ(denied.size(), 2u);
  for (const grpc::Status& d : denied) {
    EXPECT_EQ(d.error_code(), grpc::StatusCode::PERMISSION_DENIED) << d.error_message();
    EXPECT_THAT(d.error_message(), Not(HasSubstr(kKeyA)));
  }
  ExpectWhole(s);
  EXPECT_FALSE(s.header->cancelled());
  EXPECT_GE(s.header->stop_ns() - s.header->start_ns(), 99 * kNanosPerMilli);

  // The owner's Cancel stops it, as CLIENT.
  grpc::Status owner;
  const Stream stopped = agent.Capture(
      Request("s2", 5000, kKeyA), [&](grpc::ClientContext*) { owner = agent.Cancel("s2", kKeyA); });
  EXPECT_THAT(owner, IsOk()) << owner.error_message();
  ExpectWhole(stopped);
  EXPECT_TRUE(stopped.header->cancelled());
  EXPECT_EQ(stopped.header->cancel_reason(), profctl::v1::CANCEL_REASON_CLIENT);
}

TEST(AgentFetchTest, APreCancelWithAnotherKeyDoesNotAbortTheCapture) {
  Agent agent;
  ASSERT_THAT(agent, IsOk());
  ASSERT_THAT(agent.Cancel("s1", kKeyB), IsOk());
  const Stream s = agent.Capture(Request("s1", 10, kKeyA));
  ExpectWhole(s);
  EXPECT_FALSE(s.header->cancelled());
  // With the right key it does.
  ASSERT_THAT(agent.Cancel("s2", kKeyA), IsOk());
  EXPECT_EQ(agent.Capture(Request("s2", 10, kKeyA)).status.error_code(), grpc::StatusCode::ABORTED);
}

TEST(AgentFetchTest, TheBusyAnswerSaysHowLongNeverWhose) {
  Agent agent;
  ASSERT_THAT(agent, IsOk());
  Stream second;
  agent.Capture(Request("secret-session-id", 5000, kKeyA), [&](grpc::ClientContext*) {
    second = agent.Capture(Request("mine", 10));
    ASSERT_THAT(agent.Cancel("secret-session-id", kKeyA), IsOk());
  });
  EXPECT_EQ(second.status.error_code(), grpc::StatusCode::ALREADY_EXISTS);
  EXPECT_THAT(second.status.error_message(),
              ::testing::MatchesRegex("the agent is busy with another capture for ~[0-9]+ ms "
                                      "more.*"));
  EXPECT_THAT(second.status.error_message(), Not(HasSubstr("secret")));
}

TEST(AgentFetchTest, ShutdownAndKeylessCancelsSayWhoStoppedTheCapture) {
  Agent agent;
  ASSERT_THAT(agent, IsOk());
  const Stream shutdown = agent.Capture(Request("s1", 5000, kKeyA), [&](grpc::ClientContext*) {
    agent.manager().CancelActive();  // what AgentServer::Shutdown does on SIGTERM
  });
  ExpectWhole(shutdown);
  EXPECT_TRUE(shutdown.header->cancelled());
  EXPECT_EQ(shutdown.header->cancel_reason(), profctl::v1::CANCEL_REASON_AGENT_SHUTDOWN);
  const Stream other = agent.Capture(Request("s2", 5000), [&](grpc::ClientContext*) {
    ASSERT_THAT(agent.Cancel("s2", ""), IsOk());
  });
  ExpectWhole(other);
  EXPECT_EQ(other.header->cancel_reason(), profctl::v1::CANCEL_REASON_OTHER_CLIENT);
}

TEST(AgentFetchTest, RetainedTracesAreEvictedBySizeThenByTime) {
  // Room for a few traces. A 20 ms trace's size varies with where the (real-time) window falls
  // in the job's step, about twofold, so the budget is four probes' worth (the largest trace
  // fits) and traces are recorded until the store has had to evict (four fixed ones all fitted
  // now and then).
  size_t one = 0;
  {
    Agent probe;
    ASSERT_THAT(probe, IsOk());
    one = probe.Capture(Request("p", 20, kKeyA)).data.size();
    ASSERT_GT(one, 0u);
  }
  const auto budget = static_cast<int64_t>(4 * one);
  Agent agent({.retain_ms = 60'000, .retain_bytes = budget});
  ASSERT_THAT(agent, IsOk());
  std::string last;
  std::string last_id;
  size_t recorded = 0;
  while (recorded < 3 || (agent.store().retained_count() == recorded && recorded < 16)) {
    last_id = absl::StrCat("s", ++recorded);
    const Stream s = agent.Capture(Request(last_id, 20, kKeyA));
    ExpectWhole(s);
    last = s.data;
  }
  ASSERT_LT(agent.store().retained_count(), recorded) << "nothing evicted";
  // The oldest went first; what is kept fits the budget.
  EXPECT_EQ(agent.Fetch("s1", kKeyA).status.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_LE(agent.store().retained_bytes(), static_cast<uint64_t>(budget));
  EXPECT_GE(agent.store().retained_count(), 1u);
  ASSERT_LE(last.size(), static_cast<size_t>(budget));
  EXPECT_EQ(agent.Fetch(last_id, kKeyA).data, last);
  agent.fake_clock().Advance(59'999 * kNanosPerMilli);
  ExpectWhole(agent.Fetch(last_id, kKeyA));
  agent.fake_clock().Advance(1 * kNanosPerMilli);
  EXPECT_EQ(agent.Fetch(last_id, kKeyA).status.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(agent.store().retained_count(), 0u);
  // The last whole fetch's stream lets go of the buffer when the server side ends the call, which
  // comes after the client has read its status (under load, a few ms after).
  EXPECT_TRUE(WaitFor([&] { return agent.store().held_bytes() == 0; }))
      << agent.store().held_bytes() << " bytes still held";
}

TEST(AgentFetchTest, AnUnreadStreamOverTheHeldCapRefusesCapturesUntilTheIdleTimeoutEndsIt) {
  // A big trace (several MB) that cannot fit the HTTP/2 windows of a stalled connection.
  synthetic::SyntheticJobConfig job;
  job.step_ms = 2;
  job.gpus = 8;
  job.kernels_per_step = 64;
  Agent agent({.max_held_bytes = 1 << 20}, job, /*chunk_bytes=*/64 << 10);
  ASSERT_THAT(agent, IsOk());
  absl::StatusOr<std::unique_ptr<testkit::TcpProxy>> proxy =
      testkit::TcpProxy::Start("127.0.0.1", std::stoi(agent.address().substr(10)));
  ASSERT_THAT(proxy, IsOk());
  auto via_proxy = profctl::v1::AgentService::NewStub(
      grpc::CreateChannel((*proxy)->address(), grpc::InsecureChannelCredentials()));
  Stream stalled;
  std::thread reader([&] {
    stalled = agent.Capture(
        Request("big", 300), [&](grpc::ClientContext*) { (*proxy)->Stall(true); }, via_proxy.get());
  });
  // The trace is ready and a write waits on the client: memory held, the idle timer armed.
  ASSERT_TRUE(WaitFor(
      [&] { return agent.store().held_bytes() > (1u << 20) && agent.timers().pending() > 0; }));
  const Stream refused = agent.Capture(Request("next", 10));
  EXPECT_EQ(refused.status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(refused.status.error_message(), HasSubstr("--max-held-mb"));

  // Nobody reads for the timeout. (The timer finds no write in flight if it fires in the instant
  // between two writes while the stall has not yet filled the windows; time moves again then.)
  ASSERT_TRUE(WaitFor([&] {
    agent.timers().Advance(kIdleTimeoutMs * kNanosPerMilli);
    return agent.store().held_bytes() == 0;
  }));
  ExpectWhole(agent.Capture(Request("next", 10)));
  (*proxy)->Stall(false);
  reader.join();
  EXPECT_FALSE(stalled.status.ok());
  ASSERT_TRUE(stalled.started.has_value());
  EXPECT_FALSE(stalled.trailer.has_value());
}

TEST(AgentFetchTest, OversizedRequestFieldsLeaveBoundedLogsAndErrors) {
  std::ostringstream log;
  auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(log);
  std::shared_ptr<spdlog::logger> saved = spdlog::default_logger();
  spdlog::set_default_logger(std::make_shared<spdlog::logger>("capture", sink));
  std::vector<grpc::Status> errors;
  {
    Agent agent;
    ASSERT_THAT(agent, IsOk());
    const std::string huge(1 << 20, 'x');
    const std::string nasty = "\x1b[2J\n" + huge;
    errors.push_back(agent.Capture(Request(huge, 10)).status);
    errors.push_back(agent.Capture(Request(nasty, 10)).status);
    CaptureRequest bad_collector = Request("s1", 10);
    bad_collector.add_collectors(nasty);
    errors.push_back(agent.Capture(bad_collector).status);
    errors.push_back(agent.Capture(Request("s1", 10, huge)).status);
    errors.push_back(agent.Cancel(huge, ""));
    errors.push_back(agent.Cancel("s1", nasty));
    errors.push_back(agent.Fetch(nasty, kKeyA).status);
    errors.push_back(agent.Fetch("s1", huge).status);
  }
  spdlog::set_default_logger(saved);
  for (const grpc::Status& e : errors) {
    EXPECT_EQ(e.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << e.error_message();
    EXPECT_LT(e.error_message().size(), 1000u);
    EXPECT_THAT(e.error_message(), Not(HasSubstr("\x1b")));
  }
  const std::string text = log.str();
  EXPECT_LT(text.size(), 16u << 10);
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    EXPECT_LT(line.size(), 1000u) << line.substr(0, 200);
  }
  EXPECT_THAT(text, Not(HasSubstr("\x1b")));
  EXPECT_THAT(text, HasSubstr("(1048576 bytes)"));
}

}  // namespace
}  // namespace profctl
