// The agent's gRPC service and the coordinator's gRPC client, talking over loopback in one
// process. The agent runs on a FakeClock, so captures wait exactly as long as the test says.
#include <grpcpp/grpcpp.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <future>
#include <thread>

#include "absl/synchronization/notification.h"
#include "agent/agent_service.h"
#include "agent/capture_manager.h"
#include "agent/collectors/synthetic_collector.h"
#include "boost/asio/thread_pool.hpp"
#include "common/xspace.h"
#include "coordinator/capture_engine.h"
#include "coordinator/grpc_agent_client.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/fake_clock.h"
#include "tests/memory_sink.h"

namespace profctl {
namespace {

using ::testing::HasSubstr;

class AgentGrpcTest : public ::testing::Test {
 protected:
  void SetUp() override {
    grpc::ServerBuilder builder;
    builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port_);
    builder.RegisterService(&service_);
    server_ = builder.BuildAndStart();
    ASSERT_NE(port_, 0);
    client_ = factory_.Connect(*coordinator::ParseWorker("127.0.0.1:" + std::to_string(port_)));
  }
  void TearDown() override {
    server_->Shutdown();
    executor_.join();
  }

  testing::FakeClock clock_;
  agent::SyntheticCollector synthetic_{agent::SyntheticJobConfig{}};
  agent::CaptureManager manager_{{&clock_, {&synthetic_}},
                                 {.max_duration_ms = 5000, .host_name = "node-7"}};
  boost::asio::thread_pool executor_{2};
  // Tiny chunks so that every trace spans many messages.
  agent::AgentServiceImpl service_{&manager_, &clock_, &executor_, {"node-7", "machine", 512}};
  int port_ = 0;
  std::unique_ptr<grpc::Server> server_;
  coordinator::GrpcAgentClientFactory factory_;
  std::unique_ptr<coordinator::AgentClient> client_;
};

TEST_F(AgentGrpcTest, GetInfoAndSyncClock) {
  absl::StatusOr<coordinator::AgentInfo> info = client_->GetInfo(5000);
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->name, "node-7");
  EXPECT_EQ(info->hostname, "machine");
  EXPECT_THAT(info->collectors, ::testing::ElementsAre("synthetic"));
  EXPECT_EQ(info->max_duration_ms, 5000);
  EXPECT_FALSE(info->busy);
  absl::StatusOr<coordinator::ClockReading> r = client_->SyncClock(5000);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->receive_ns, clock_.WallNs());  // the fake clock does not move
  EXPECT_EQ(r->send_ns, clock_.WallNs());
}

TEST_F(AgentGrpcTest, CaptureStreamsTheWholeTraceInChunks) {
  const int64_t start = clock_.WallNs() + 100 * kNanosPerMilli;
  auto reply = std::async(std::launch::async, [&] {
    return client_->Capture({"sess-1", start, 400}, 30'000);
  });
  clock_.AwaitWaiters(1);  // waiting for the start instant
  clock_.Advance(100 * kNanosPerMilli);
  clock_.AwaitWaiters(1);  // recording
  clock_.Advance(400 * kNanosPerMilli);
  absl::StatusOr<coordinator::CaptureReply> r = reply.get();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->start_ns, start);
  EXPECT_EQ(r->stop_ns, start + 400 * kNanosPerMilli);
  EXPECT_FALSE(r->cancelled);
  EXPECT_EQ(r->name, "node-7");
  EXPECT_GT(r->xspace_bytes.size(), 10u * 512);  // many chunks
  tensorflow::profiler::XSpace space;
  ASSERT_TRUE(space.ParseFromString(r->xspace_bytes));
  EXPECT_TRUE(xspace::Validate(space).ok());
  EXPECT_THAT(space.hostnames(), ::testing::ElementsAre("node-7"));
  EXPECT_NE(xspace::FindPlane(space, "/device:GPU:0"), nullptr);
}

TEST_F(AgentGrpcTest, SecondCaptureIsRejectedWhileOneRunsAndCancelReturnsPartialTrace) {
  auto first = std::async(std::launch::async, [&] {
    return client_->Capture({"long", 0, 5000}, 30'000);
  });
  clock_.AwaitWaiters(1);
  clock_.Advance(250 * kNanosPerMilli);
  auto other = factory_.Connect(*coordinator::ParseWorker("127.0.0.1:" + std::to_string(port_)));
  absl::StatusOr<coordinator::CaptureReply> second = other->Capture({"short", 0, 10}, 5000);
  EXPECT_EQ(second.status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_THAT(second.status().message(), HasSubstr("session 'long' is running"));
  EXPECT_TRUE(other->GetInfo(5000)->busy);
  EXPECT_EQ(other->Cancel("nope", 5000).code(), absl::StatusCode::kNotFound);
  ASSERT_TRUE(other->Cancel("long", 5000).ok());
  absl::StatusOr<coordinator::CaptureReply> r = first.get();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->cancelled);
  EXPECT_EQ(r->stop_ns - r->start_ns, 250 * kNanosPerMilli);
  tensorflow::profiler::XSpace space;
  ASSERT_TRUE(space.ParseFromString(r->xspace_bytes));
  EXPECT_GT(xspace::CountEvents(space), 0);
}

TEST_F(AgentGrpcTest, InvalidArgumentsCrossTheWire) {
  absl::StatusOr<coordinator::CaptureReply> r = client_->Capture({"x", 0, 0}, 5000);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(), HasSubstr("duration_ms=0"));
  r = client_->Capture({"x", 0, 6000}, 5000);
  EXPECT_THAT(r.status().message(), HasSubstr("outside [1, 5000]"));
  r = client_->Capture({"bad id", 0, 10}, 5000);
  EXPECT_THAT(r.status().message(), HasSubstr("session id 'bad id'"));
  EXPECT_FALSE(manager_.busy());
}

// A peer that accepts TCP connections and never says a word.
class SilentPeer {
 public:
  SilentPeer() {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
    listen(fd_, 16);  // the kernel completes handshakes; nobody ever reads
    socklen_t len = sizeof(addr);
    getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
  }
  ~SilentPeer() { close(fd_); }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }

 private:
  int fd_ = -1;
  int port_ = 0;
};

TEST_F(AgentGrpcTest, AHangingPeerTimesOutWithoutHoldingUpTheOthers) {
  SilentPeer silent;
  RealClock real;
  testing::MemorySink sink;
  coordinator::CaptureEngine engine({&real, &factory_, &sink, nullptr},
                                    {.rpc_timeout_ms = 300, .min_lead_ms = 50});
  coordinator::CapturePlan plan{{*coordinator::ParseWorker("127.0.0.1:" + std::to_string(port_)),
                                 *coordinator::ParseWorker(silent.address())},
                                /*duration_ms=*/20,
                                "hang",
                                "/logs"};
  // The healthy agent runs on the fake clock: let its waits pass as soon as they begin.
  clock_.SetAutoAdvance(true);
  absl::StatusOr<profctl::v1::SessionManifest> m = engine.Run(plan);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->status(), "partial");
  EXPECT_EQ(m->hosts(0).status(), "ok") << m->hosts(0).error();
  EXPECT_THAT(m->hosts(1).error(), HasSubstr("prepare: DEADLINE_EXCEEDED"));
  EXPECT_LT(m->hosts(1).prepare_ms(), 5000);
  EXPECT_TRUE(sink.files.contains("node-7.xplane.pb"));
}

TEST(GrpcAgentClientTest, UnreachableAgentIsUnavailable) {
  // Port 1 on loopback: nothing listens there.
  coordinator::GrpcAgentClientFactory factory;
  auto client = factory.Connect(*coordinator::ParseWorker("127.0.0.1:1"));
  absl::StatusOr<coordinator::AgentInfo> info = client->GetInfo(2000);
  EXPECT_EQ(info.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(info.status().message(), HasSubstr("GetInfo"));
}

// A peer that answers Capture with a scripted, possibly broken, stream.
class LyingAgent final : public profctl::v1::AgentService::Service {
 public:
  std::vector<profctl::v1::CaptureChunk> script;
  bool stall_after_script = false;  // then say nothing more until the caller gives up
  grpc::Status Capture(grpc::ServerContext* ctx, const profctl::v1::CaptureRequest*,
                       grpc::ServerWriter<profctl::v1::CaptureChunk>* writer) override {
    for (const auto& c : script) writer->Write(c);
    if (stall_after_script) {
      absl::Notification never;
      while (!ctx->IsCancelled()) never.WaitForNotificationWithTimeout(absl::Milliseconds(10));
    }
    return grpc::Status::OK;
  }
};

profctl::v1::CaptureChunk Header(uint64_t total) {
  profctl::v1::CaptureChunk c;
  c.mutable_header()->set_total_bytes(total);
  return c;
}
profctl::v1::CaptureChunk Data(const std::string& d) {
  profctl::v1::CaptureChunk c;
  c.set_data(d);
  return c;
}
profctl::v1::CaptureChunk Trailer(uint64_t chunks) {
  profctl::v1::CaptureChunk c;
  c.mutable_trailer()->set_chunks(chunks);
  return c;
}

TEST(GrpcAgentClientTest, BrokenStreamsFromALyingPeerAreDataLoss) {
  struct Case {
    std::vector<profctl::v1::CaptureChunk> script;
    absl::StatusCode code;
    const char* message;
  } cases[] = {
      {{Header(4), Data("ab"), Data("cd"), Trailer(2)}, absl::StatusCode::kOk, ""},
      {{}, absl::StatusCode::kDataLoss, "ended before its header"},
      {{Data("ab")}, absl::StatusCode::kDataLoss, "outside header..trailer"},
      {{Header(4), Data("ab"), Trailer(1)}, absl::StatusCode::kDataLoss, "after 2 of 4 bytes"},
      {{Header(2), Data("abc")}, absl::StatusCode::kDataLoss, "more than the announced 2"},
      {{Header(2), Data("ab")}, absl::StatusCode::kDataLoss, "after 2 of 2 bytes"},
      {{Header(2), Data("ab"), Trailer(5)}, absl::StatusCode::kDataLoss, "counts 5 chunks"},
      {{Header(1), Header(1)}, absl::StatusCode::kDataLoss, "second header"},
      {{Header(uint64_t{1} << 40)}, absl::StatusCode::kResourceExhausted, "limit"},
  };
  for (Case& c : cases) {
    LyingAgent liar;
    liar.script = c.script;
    int port = 0;
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    builder.RegisterService(&liar);
    std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
    coordinator::GrpcAgentClientFactory factory;
    auto client = factory.Connect(*coordinator::ParseWorker("127.0.0.1:" + std::to_string(port)));
    absl::StatusOr<coordinator::CaptureReply> r = client->Capture({"s", 0, 1}, 5000);
    EXPECT_EQ(r.status().code(), c.code) << c.message << ": " << r.status();
    EXPECT_THAT(r.status().message(), HasSubstr(c.message));
    if (r.ok()) {
      EXPECT_EQ(r->xspace_bytes, "abcd");
    }
    server->Shutdown();
  }
}

TEST(GrpcAgentClientTest, APeerThatStallsMidTransferHitsTheDeadline) {
  LyingAgent staller;
  staller.script = {Header(1000), Data(std::string(100, 'x'))};
  staller.stall_after_script = true;
  int port = 0;
  grpc::ServerBuilder builder;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(&staller);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  coordinator::GrpcAgentClientFactory factory;
  auto client = factory.Connect(*coordinator::ParseWorker("127.0.0.1:" + std::to_string(port)));
  absl::StatusOr<coordinator::CaptureReply> r = client->Capture({"s", 0, 1}, /*timeout_ms=*/300);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kDeadlineExceeded) << r.status();
  server->Shutdown();
}

}  // namespace
}  // namespace profctl
