// The coordinator's gRPC client (GrpcAgentClient, callback API) against the agent's gRPC service
// in the same process, and against scripted peers that break the protocol on purpose.
//
// The in-process agent runs on the real clock and a real executor: these tests exercise the
// transport, so its captures are short (tens of ms) or cancelled, and every assertion on time is
// a lower bound. Each wait on a callback is bounded (kTestTimeout) so a bug fails, not hangs.
#include <arpa/inet.h>
#include <grpcpp/grpcpp.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "agent/capture_manager.h"
#include "agent/collectors/synthetic/synthetic_collector.h"
#include "agent/service/agent_service.h"
#include "common/clock.h"
#include "common/executor.h"
#include "common/gzip.h"
#include "common/reservation.h"
#include "coordinator/clients/grpc_agent_client.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "profctl/v1/agent.grpc.pb.h"
#include "tests/fake_clock.h"
#include "tests/loopback.h"
#include "tests/status_matchers.h"
#include "xspace/xspace.h"

using ::profctl::testkit::IsOk;

namespace profctl {
namespace {

using coordinator::AgentClient;
using coordinator::AgentInfo;
using coordinator::ClockReading;
using profctl::v1::CaptureChunk;
using ::testing::HasSubstr;
using ::testing::MatchesRegex;

// Bounds every wait for a callback: far above any healthy run, so only a bug reaches it.
constexpr absl::Duration kTestTimeout = absl::Seconds(30);

// The outcome of one unary call, delivered by its callback. R is absl::StatusOr<T> or
// absl::Status. The state is shared with the callback, so a test that gave up waiting does not
// leave the callback writing into a dead object.
template <typename R>
class Reply {
 public:
  absl::AnyInvocable<void(R) &&> Callback() {
    return [state = state_](R result) {
      state->thread = std::this_thread::get_id();
      state->result = std::move(result);
      state->done.Notify();
    };
  }
  R Await() const {
    if (!state_->done.WaitForNotificationWithTimeout(kTestTimeout)) {
      return absl::DeadlineExceededError("test: the callback never ran");
    }
    return state_->result;
  }
  bool done() const { return state_->done.HasBeenNotified(); }
  // The thread the callback ran on; valid once done().
  std::thread::id thread() const { return state_->thread; }

 private:
  struct State {
    absl::Notification done;
    R result = absl::UnknownError("unset");
    std::thread::id thread;
  };
  std::shared_ptr<State> state_ = std::make_shared<State>();
};

absl::StatusOr<AgentInfo> GetInfoNow(AgentClient& client, int64_t timeout_ms) {
  Reply<absl::StatusOr<AgentInfo>> reply;
  client.GetInfo(timeout_ms, reply.Callback());
  return reply.Await();
}

absl::StatusOr<ClockReading> SyncClockNow(AgentClient& client, int64_t timeout_ms) {
  Reply<absl::StatusOr<ClockReading>> reply;
  client.SyncClock(timeout_ms, reply.Callback());
  return reply.Await();
}

absl::Status CancelNow(AgentClient& client, const std::string& session_id, int64_t timeout_ms) {
  Reply<absl::Status> reply;
  client.Cancel(session_id, /*session_key=*/"", timeout_ms, reply.Callback());
  return reply.Await();
}

// Records one Capture stream: the order of calls as letters (S started, H header, D data, E done)
// and what they carried. Can be told to fail OnData at a given chunk. Destroying it while its
// capture runs aborts the capture and waits for OnDone, so a failed ASSERT never leaves the
// client calling into a dead stream.
class RecordingStream final : public coordinator::CaptureStream {
 public:
  explicit RecordingStream(AgentClient* client, int fail_at_chunk = 0)
      : client_(client), fail_at_chunk_(fail_at_chunk) {}
  ~RecordingStream() override {
    if (!done_.HasBeenNotified()) {
      client_->AbortCapture();
      done_.WaitForNotificationWithTimeout(kTestTimeout);
    }
  }

  void OnStarted(int64_t agent_start_ns) override {
    {
      absl::MutexLock lock(&mu_);
      events_ += 'S';
      started_ns_ = agent_start_ns;
    }
    started_.Notify();
  }
  void OnHeader(const coordinator::CaptureHeaderInfo& header) override {
    absl::MutexLock lock(&mu_);
    events_ += 'H';
    header_ = header;
  }
  absl::Status OnData(std::string_view chunk) override {
    absl::MutexLock lock(&mu_);
    events_ += 'D';
    data_.append(chunk);
    if (++chunks_ == fail_at_chunk_) return absl::ResourceExhaustedError("test: disk full");
    return absl::OkStatus();
  }
  void OnDone(absl::Status status) override {
    {
      absl::MutexLock lock(&mu_);
      events_ += 'E';
      status_ = std::move(status);
    }
    done_.Notify();
  }

  // Waits (bounded) for OnStarted.
  bool AwaitStarted() { return started_.WaitForNotificationWithTimeout(kTestTimeout); }
  // Waits (bounded) for OnDone and returns its status.
  absl::Status Await() {
    if (!done_.WaitForNotificationWithTimeout(kTestTimeout)) {
      return absl::DeadlineExceededError("test: OnDone never ran");
    }
    absl::MutexLock lock(&mu_);
    return status_;
  }
  bool done() const { return done_.HasBeenNotified(); }

  std::string events() const {
    absl::MutexLock lock(&mu_);
    return events_;
  }
  int64_t started_ns() const {
    absl::MutexLock lock(&mu_);
    return started_ns_;
  }
  coordinator::CaptureHeaderInfo header() const {
    absl::MutexLock lock(&mu_);
    return header_;
  }
  std::string data() const {
    absl::MutexLock lock(&mu_);
    return data_;
  }

 private:
  AgentClient* const client_;
  const int fail_at_chunk_;
  absl::Notification started_;
  absl::Notification done_;
  mutable absl::Mutex mu_;
  std::string events_ ABSL_GUARDED_BY(mu_);
  int64_t started_ns_ ABSL_GUARDED_BY(mu_) = 0;
  coordinator::CaptureHeaderInfo header_ ABSL_GUARDED_BY(mu_);
  std::string data_ ABSL_GUARDED_BY(mu_);
  int chunks_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Status status_ ABSL_GUARDED_BY(mu_);
};

// A gRPC server for one service on 127.0.0.1, port 0.
class TestServer {
 public:
  explicit TestServer(grpc::Service* service) {
    grpc::ServerBuilder builder;
    builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port_);
    builder.RegisterService(service);
    server_ = builder.BuildAndStart();
  }
  ~TestServer() {
    // Calls still running after the grace period are cancelled.
    server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(5));
  }
  bool ok() const { return server_ != nullptr && port_ != 0; }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }

 private:
  int port_ = 0;
  std::unique_ptr<grpc::Server> server_;
};

std::unique_ptr<AgentClient> Connect(coordinator::AgentClientFactory& factory,
                                     const std::string& address) {
  absl::StatusOr<coordinator::WorkerAddress> worker = coordinator::ParseWorker(address);
  EXPECT_THAT(worker, IsOk());
  return factory.Connect(*worker);
}

constexpr size_t kChunkBytes = 64;

// A complete agent in this process: the real clock and executor, the synthetic collector, tiny
// chunks (kChunkBytes) so that every trace spans many messages.

class InProcessAgent {
 public:
  InProcessAgent() : server_(&service_) {}
  // The server goes first (its Shutdown ends every call, hence every session), then what the
  // sessions use.
  ~InProcessAgent() = default;

  std::string address() const { return server_.address(); }
  bool ok() const { return server_.ok(); }
  const Clock& clock() const { return clock_; }

 private:
  RealClock clock_;
  AsioExecutor executor_{&clock_};
  agent::SyntheticCollector synthetic_{synthetic::SyntheticJobConfig{}};
  agent::CaptureManager manager_{{&clock_, {&synthetic_}, &executor_, nullptr},
                                 {.max_duration_ms = 5000, .host_name = "node-7"}};
  agent::AgentServiceImpl service_{{{&manager_, &clock_, "node-7", "machine"}},
                                   {.chunk_bytes = kChunkBytes}};
  TestServer server_;
};

class AgentGrpcTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_THAT(agent_, IsOk());
    client_ = Connect(factory_, agent_.address());
  }

  InProcessAgent agent_;
  coordinator::GrpcAgentClientFactory factory_;
  std::unique_ptr<AgentClient> client_;
};

TEST_F(AgentGrpcTest, GetInfoCrossesTheWire) {
  absl::StatusOr<AgentInfo> info = GetInfoNow(*client_, 5000);
  ASSERT_THAT(info, IsOk());
  EXPECT_EQ(info->name, "node-7");
  EXPECT_EQ(info->hostname, "machine");
  EXPECT_THAT(info->collectors, ::testing::ElementsAre("synthetic"));
  EXPECT_EQ(info->max_duration_ms, 5000);
  EXPECT_FALSE(info->busy);
  // One agent, reached under two addresses, says it is one: the same instance id.
  EXPECT_FALSE(info->instance_id.empty());
  std::unique_ptr<AgentClient> by_name =
      Connect(factory_, "localhost:" + agent_.address().substr(agent_.address().rfind(':') + 1));
  absl::StatusOr<AgentInfo> again = GetInfoNow(*by_name, 5000);
  ASSERT_THAT(again, IsOk());
  EXPECT_EQ(again->instance_id, info->instance_id);
  // Another agent process (here: another server) is another instance.
  InProcessAgent other;
  ASSERT_THAT(other, IsOk());
  std::unique_ptr<AgentClient> other_client = Connect(factory_, other.address());
  absl::StatusOr<AgentInfo> other_info = GetInfoNow(*other_client, 5000);
  ASSERT_THAT(other_info, IsOk());
  EXPECT_NE(other_info->instance_id, info->instance_id);
}

TEST_F(AgentGrpcTest, GetInfoReservesTheSlotAndCancelReleasesIt) {
  const coordinator::Reservation a{"sess-a", std::string(24, 'a'), 5000};
  const coordinator::Reservation b{"sess-b", std::string(24, 'b'), 5000};
  Reply<absl::StatusOr<AgentInfo>> first;
  client_->GetInfo(a, 5000, first.Callback());
  ASSERT_THAT(first.Await(), IsOk());
  std::unique_ptr<AgentClient> other = Connect(factory_, agent_.address());
  Reply<absl::StatusOr<AgentInfo>> refused;
  other->GetInfo(b, 5000, refused.Callback());
  const absl::StatusOr<AgentInfo> r = refused.Await();
  EXPECT_EQ(r.status().code(), absl::StatusCode::kAlreadyExists) << r.status();
  EXPECT_THAT(r.status().message(), HasSubstr("reserved for another capture"));
  EXPECT_THAT(GetInfoNow(*other, 5000), IsOk());  // a plain GetInfo still answers
  Reply<absl::Status> released;
  client_->Cancel(a.session_id, a.session_key, 5000, released.Callback());
  ASSERT_THAT(released.Await(), IsOk());
  Reply<absl::StatusOr<AgentInfo>> now_free;
  other->GetInfo(b, 5000, now_free.Callback());
  EXPECT_THAT(now_free.Await(), IsOk());
}

// Over gRPC, a refusal by another session's reservation names that reservation's priority (the
// trailers), which the client hands back on the status; an unordered holder's priority is unset.
TEST_F(AgentGrpcTest, AReservationRefusalCarriesTheHoldersPriority) {
  // Priorities are believed within seconds of the agent's clock (docs/agent-protection.md).
  const int64_t now = RealClock().WallNs();
  const coordinator::Reservation a{
      "sess-a", std::string(24, 'a'), 5000, {now - 2 * kNanosPerSecond, 42}};
  const coordinator::Reservation b{
      "sess-b", std::string(24, 'b'), 5000, {now - kNanosPerSecond, 1}};
  Reply<absl::StatusOr<AgentInfo>> first;
  client_->GetInfo(a, 5000, first.Callback());
  ASSERT_THAT(first.Await(), IsOk());
  std::unique_ptr<AgentClient> other = Connect(factory_, agent_.address());
  Reply<absl::StatusOr<AgentInfo>> refused;
  other->GetInfo(b, 5000, refused.Callback());
  const absl::StatusOr<AgentInfo> r = refused.Await();
  ASSERT_EQ(r.status().code(), absl::StatusCode::kAlreadyExists) << r.status();
  const std::optional<ReservationConflict> conflict = ReservationConflictOf(r.status());
  ASSERT_TRUE(conflict.has_value()) << r.status();
  EXPECT_EQ(conflict->holder, a.priority);
  EXPECT_GT(conflict->remaining_ms, 0);
  EXPECT_LE(conflict->remaining_ms, 5000);
  EXPECT_TRUE(a.priority.OlderThan(b.priority));
  // Released, then held by a session that sent no priority (an older coordinator).
  Reply<absl::Status> released;
  client_->Cancel(a.session_id, a.session_key, 5000, released.Callback());
  ASSERT_THAT(released.Await(), IsOk());
  const coordinator::Reservation unordered{"sess-c", std::string(24, 'c'), 5000};
  Reply<absl::StatusOr<AgentInfo>> held;
  client_->GetInfo(unordered, 5000, held.Callback());
  ASSERT_THAT(held.Await(), IsOk());
  Reply<absl::StatusOr<AgentInfo>> refused_again;
  other->GetInfo(b, 5000, refused_again.Callback());
  const absl::StatusOr<AgentInfo> r2 = refused_again.Await();
  ASSERT_EQ(r2.status().code(), absl::StatusCode::kAlreadyExists) << r2.status();
  ASSERT_TRUE(ReservationConflictOf(r2.status()).has_value());
  EXPECT_FALSE(ReservationConflictOf(r2.status())->holder.set());
}

TEST_F(AgentGrpcTest, CallbacksRunOnATransportThreadNeverInline) {
  Reply<absl::StatusOr<AgentInfo>> reply;
  client_->GetInfo(5000, reply.Callback());
  ASSERT_THAT(reply.Await(), IsOk());
  EXPECT_NE(reply.thread(), std::this_thread::get_id());
}

TEST_F(AgentGrpcTest, SyncClockLocalStampsBracketTheAgentStampsWhenTheClocksAreEqual) {
  // Agent and client both read this host's real wall clock: one clock, so the agent's stamps
  // must fall inside the client's round trip.
  RealClock real;
  coordinator::GrpcAgentClientFactory factory({.clock = &real});
  std::unique_ptr<AgentClient> client = Connect(factory, agent_.address());
  for (int i = 0; i < 5; ++i) {
    absl::StatusOr<ClockReading> r = SyncClockNow(*client, 5000);
    ASSERT_THAT(r, IsOk());
    EXPECT_LE(r->local_send_ns, r->receive_ns);
    EXPECT_LE(r->receive_ns, r->send_ns);
    EXPECT_LE(r->send_ns, r->local_receive_ns);
  }
}

TEST_F(AgentGrpcTest, SyncClockStampsWithTheInjectedClock) {
  testkit::FakeClock fake;
  coordinator::GrpcAgentClientFactory factory({.clock = &fake});
  std::unique_ptr<AgentClient> client = Connect(factory, agent_.address());
  absl::StatusOr<ClockReading> r = SyncClockNow(*client, 5000);
  ASSERT_THAT(r, IsOk());
  EXPECT_EQ(r->local_send_ns, fake.WallNs());  // the fake clock does not move
  EXPECT_EQ(r->local_receive_ns, fake.WallNs());
  EXPECT_GT(r->receive_ns, 0);  // the agent's own (real) clock
}

TEST_F(AgentGrpcTest, CaptureStreamsStartedHeaderAndTheWholeTraceInChunks) {
  RecordingStream stream(client_.get());
  client_->Capture({"sess-1", /*start_at_ns=*/0, /*duration_ms=*/30}, 30'000, &stream);
  ASSERT_THAT(stream.Await(), IsOk()) << stream.Await();
  const std::string events = stream.events();
  EXPECT_THAT(events, MatchesRegex("SHD+E"));
  const coordinator::CaptureHeaderInfo header = stream.header();
  // Cut into kChunkBytes pieces, several of them.
  EXPECT_EQ(static_cast<uint64_t>(std::count(events.begin(), events.end(), 'D')),
            (header.total_bytes + kChunkBytes - 1) / kChunkBytes);
  EXPECT_GE(header.total_bytes, 5 * kChunkBytes);
  EXPECT_EQ(stream.started_ns(), header.start_ns);
  // Wall-clock stamps of a window timed on the monotonic clock: allow for clock slew.
  EXPECT_GE(header.stop_ns - header.start_ns, 29 * kNanosPerMilli);
  EXPECT_FALSE(header.cancelled);
  EXPECT_EQ(header.name, "node-7");
  EXPECT_EQ(header.hostname, "machine");
  const std::string data = stream.data();
  EXPECT_EQ(data.size(), header.total_bytes);
  tensorflow::profiler::XSpace space;
  ASSERT_TRUE(space.ParseFromString(data));
  EXPECT_THAT(xspace::Validate(space), IsOk());
  EXPECT_THAT(space.hostnames(), ::testing::ElementsAre("node-7"));
  EXPECT_NE(xspace::FindPlane(space, "/device:GPU:0"), nullptr);
}

TEST_F(AgentGrpcTest, StartedArrivesWhileTheWindowIsOpenAndCancelReturnsThePartialTrace) {
  RecordingStream stream(client_.get());
  client_->Capture({"long", 0, /*duration_ms=*/5000}, 30'000, &stream);
  ASSERT_TRUE(stream.AwaitStarted()) << "the agent never sent 'started'";
  EXPECT_EQ(stream.events(), "S");  // recording, nothing else yet

  // The agent's single slot is taken.
  std::unique_ptr<AgentClient> other = Connect(factory_, agent_.address());
  RecordingStream second(other.get());
  other->Capture({"short", 0, 10}, 5000, &second);
  const absl::Status rejected = second.Await();
  EXPECT_EQ(rejected.code(), absl::StatusCode::kAlreadyExists) << rejected;
  EXPECT_THAT(rejected.message(), HasSubstr("Capture: "));
  // How long the running capture has left, never its id (another client's).
  EXPECT_THAT(rejected.message(), HasSubstr("the agent is busy with another capture for ~"));
  EXPECT_THAT(rejected.message(), ::testing::Not(HasSubstr("long")));
  EXPECT_EQ(second.events(), "E");
  absl::StatusOr<AgentInfo> info = GetInfoNow(*other, 5000);
  ASSERT_THAT(info, IsOk());
  EXPECT_TRUE(info->busy);

  ASSERT_THAT(CancelNow(*other, "long", 5000), IsOk());
  ASSERT_THAT(stream.Await(), IsOk()) << stream.Await();
  EXPECT_THAT(stream.events(), MatchesRegex("SHD+E"));
  EXPECT_TRUE(stream.header().cancelled);
  EXPECT_EQ(stream.header().start_ns, stream.started_ns());
  EXPECT_LT(stream.header().stop_ns - stream.header().start_ns, 5000 * kNanosPerMilli);
  tensorflow::profiler::XSpace space;
  ASSERT_TRUE(space.ParseFromString(stream.data()));
}

TEST_F(AgentGrpcTest, InvalidArgumentsCrossTheWire) {
  struct Case {
    coordinator::CaptureArgs args;
    const char* message;
  } cases[] = {
      {{"x", 0, 0}, "duration_ms=0"},
      {{"x", 0, 6000}, "outside [1, 5000]"},
      {{"bad id", 0, 10}, "session id 'bad id'"},
  };
  for (const Case& c : cases) {
    RecordingStream stream(client_.get());
    client_->Capture(c.args, 5000, &stream);
    const absl::Status status = stream.Await();
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
    EXPECT_THAT(status.message(), HasSubstr(c.message));
    EXPECT_TRUE(absl::StartsWith(status.message(), "Capture: ")) << status;
    EXPECT_EQ(stream.events(), "E");
  }
}

TEST_F(AgentGrpcTest, AnOnDataErrorAbortsTheStreamWithThatError) {
  RecordingStream stream(client_.get(), /*fail_at_chunk=*/3);
  client_->Capture({"full", 0, 20}, 30'000, &stream);
  const absl::Status status = stream.Await();
  EXPECT_EQ(status, absl::ResourceExhaustedError("test: disk full"));
  // No chunk after the failing one reached the stream.
  EXPECT_THAT(stream.events(), MatchesRegex("SHDDDE"));
}

TEST_F(AgentGrpcTest, AbortCaptureEndsTheCaptureInFlightAsCancelled) {
  RecordingStream stream(client_.get());
  client_->Capture({"aborted", 0, 5000}, 30'000, &stream);
  ASSERT_TRUE(stream.AwaitStarted());
  client_->AbortCapture();
  const absl::Status status = stream.Await();
  EXPECT_EQ(status.code(), absl::StatusCode::kCancelled) << status;
  EXPECT_THAT(status.message(), HasSubstr("Capture: aborted by the caller"));
  EXPECT_EQ(stream.events(), "SE");
  // The client stays usable.
  EXPECT_THAT(GetInfoNow(*client_, 5000), IsOk());
}

// A peer that accepts TCP connections and never says a word.
class SilentPeer {
 public:
  SilentPeer() {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(addr);
    // The kernel completes handshakes; nobody ever reads.
    ok_ = fd_ >= 0 && bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
          listen(fd_, 16) == 0 && getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len) == 0;
    port_ = ntohs(addr.sin_port);
  }
  ~SilentPeer() {
    if (fd_ >= 0) close(fd_);
  }
  SilentPeer(const SilentPeer&) = delete;
  SilentPeer& operator=(const SilentPeer&) = delete;
  bool ok() const { return ok_; }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }

 private:
  int fd_ = -1;
  int port_ = 0;
  bool ok_ = false;
};

TEST_F(AgentGrpcTest, DestroyingTheClientCancelsWhatIsInFlightAndWaitsForTheCallbacks) {
  auto client = Connect(factory_, agent_.address());
  RecordingStream stream(client.get());
  client->Capture({"doomed", 0, 5000}, 60'000, &stream);
  ASSERT_TRUE(stream.AwaitStarted());
  // And a unary call that would otherwise wait a minute for a peer that never answers.
  SilentPeer silent;
  ASSERT_THAT(silent, IsOk());
  auto hung = Connect(factory_, silent.address());
  Reply<absl::StatusOr<AgentInfo>> info;
  hung->GetInfo(60'000, info.Callback());

  client.reset();
  hung.reset();
  // Both destructors returned only after the callbacks ran.
  EXPECT_TRUE(stream.done());
  EXPECT_TRUE(info.done());
  const absl::Status status = stream.Await();
  EXPECT_EQ(status.code(), absl::StatusCode::kCancelled) << status;
  EXPECT_THAT(status.message(), HasSubstr("Capture: the client was destroyed"));
  EXPECT_EQ(info.Await().status().code(), absl::StatusCode::kCancelled);
  EXPECT_THAT(info.Await().status().message(), HasSubstr("GetInfo: "));
}

// The process's thread count, from /proc/self/status.
int ThreadCount() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("Threads:", 0) == 0) return std::stoi(line.substr(8));
  }
  return -1;
}

TEST_F(AgentGrpcTest, AThousandClientsEachWithItsOwnChannelNeedNoThreadEach) {
  ASSERT_THAT(GetInfoNow(*client_, 5000), IsOk());  // gRPC's own threads are up
  const int threads_before = ThreadCount();
  constexpr int kClients = 1024;
  std::vector<std::unique_ptr<AgentClient>> clients;
  std::vector<Reply<absl::StatusOr<AgentInfo>>> replies(kClients);
  for (int i = 0; i < kClients; ++i) {
    clients.push_back(Connect(factory_, agent_.address()));
    clients.back()->GetInfo(30'000, replies[i].Callback());
  }
  int ok = 0;
  for (const auto& reply : replies) ok += reply.Await().ok() ? 1 : 0;
  EXPECT_EQ(ok, kClients);
  const int threads_after = ThreadCount();
  EXPECT_LT(threads_after - threads_before, 64)
      << threads_before << " threads before, " << threads_after << " after";
  clients.clear();
}

TEST(GrpcAgentClientTest, UnreachableAgentIsUnavailable) {
  // A loopback port nothing listens on (port 1 is not: a root process may hold it).
  coordinator::GrpcAgentClientFactory factory;
  auto client = Connect(factory, testkit::LoopbackAddress(testkit::ClosedLoopbackPort()));
  absl::StatusOr<AgentInfo> info = GetInfoNow(*client, 2000);
  EXPECT_EQ(info.status().code(), absl::StatusCode::kUnavailable) << info.status();
  EXPECT_THAT(info.status().message(), HasSubstr("GetInfo"));
}

TEST(GrpcAgentClientTest, AHangingPeerHitsTheDeadline) {
  SilentPeer silent;
  ASSERT_THAT(silent, IsOk());
  coordinator::GrpcAgentClientFactory factory;
  auto client = Connect(factory, silent.address());
  absl::StatusOr<AgentInfo> info = GetInfoNow(*client, /*timeout_ms=*/300);
  EXPECT_EQ(info.status().code(), absl::StatusCode::kDeadlineExceeded) << info.status();
  EXPECT_THAT(info.status().message(), HasSubstr("GetInfo: "));
  RecordingStream stream(client.get());
  client->Capture({"s", 0, 1}, /*timeout_ms=*/300, &stream);
  EXPECT_EQ(stream.Await().code(), absl::StatusCode::kDeadlineExceeded) << stream.Await();
  EXPECT_THAT(stream.Await().message(), HasSubstr("Capture: "));
}

// A peer that answers Capture with a scripted, possibly broken, stream. It can hold the stream
// before message `pause_at` until Resume(), and stay silent after the script until the caller
// gives up (hang_at_end) instead of finishing with OK.
class ScriptedAgent final : public profctl::v1::AgentService::CallbackService {
 public:
  static constexpr size_t kNoPause = ~size_t{0};

  explicit ScriptedAgent(std::vector<CaptureChunk> script, bool hang_at_end = false,
                         size_t pause_at = kNoPause)
      : script_(std::move(script)), hang_at_end_(hang_at_end), pause_at_(pause_at) {}

  grpc::ServerWriteReactor<CaptureChunk>* Capture(grpc::CallbackServerContext* /*ctx*/,
                                                  const profctl::v1::CaptureRequest*) override {
    auto* writer = new Writer(this);
    absl::MutexLock lock(&mu_);
    streams_[writer] = {};
    WriteNextLocked(writer);
    return writer;
  }

  // Lets a stream held at pause_at go on.
  void Resume() {
    absl::MutexLock lock(&mu_);
    resumed_ = true;
    if (paused_ != nullptr) WriteNextLocked(std::exchange(paused_, nullptr));
  }

  // Notified when a stream saw its caller cancel.
  absl::Notification saw_cancel;

 private:
  // Every stream's state lives in the agent under its mu_ (the agent outlives every writer), so
  // that OnDone, which takes mu_ before deleting, never frees a writer another thread is still
  // in. StartWrite and Finish never run a reaction inline, so calling them under mu_ is safe.
  class Writer final : public grpc::ServerWriteReactor<CaptureChunk> {
   public:
    explicit Writer(ScriptedAgent* agent) : agent_(agent) {}

    void OnWriteDone(bool ok) override {
      absl::MutexLock lock(&agent_->mu_);
      if (ok) {
        agent_->WriteNextLocked(this);
      } else {
        agent_->FinishLocked(this, grpc::Status(grpc::StatusCode::CANCELLED, "client went away"));
      }
    }
    void OnCancel() override {
      absl::MutexLock lock(&agent_->mu_);
      if (!agent_->saw_cancel.HasBeenNotified()) agent_->saw_cancel.Notify();
      agent_->FinishLocked(this, grpc::Status(grpc::StatusCode::CANCELLED, "cancelled"));
    }
    void OnDone() override {
      {
        absl::MutexLock lock(&agent_->mu_);
        if (agent_->paused_ == this) agent_->paused_ = nullptr;
        agent_->streams_.erase(this);
      }
      delete this;
    }

   private:
    ScriptedAgent* const agent_;
  };

  struct Stream {
    size_t next = 0;  // script index of the next message
    bool finished = false;
  };

  void WriteNextLocked(Writer* w) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    Stream& stream = streams_[w];
    if (stream.finished) return;
    if (stream.next == pause_at_ && !resumed_) {
      paused_ = w;
      return;
    }
    if (stream.next < script_.size()) {
      w->StartWrite(&script_[stream.next++]);
    } else if (!hang_at_end_) {
      FinishLocked(w, grpc::Status::OK);
    }
  }

  void FinishLocked(Writer* w, const grpc::Status& status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    Stream& stream = streams_[w];
    if (stream.finished) return;
    stream.finished = true;
    w->Finish(status);
  }

  const std::vector<CaptureChunk> script_;
  const bool hang_at_end_;
  const size_t pause_at_;
  absl::Mutex mu_;
  bool resumed_ ABSL_GUARDED_BY(mu_) = false;
  Writer* paused_ ABSL_GUARDED_BY(mu_) = nullptr;
  absl::flat_hash_map<Writer*, Stream> streams_ ABSL_GUARDED_BY(mu_);
};

CaptureChunk Started(int64_t start_ns) {
  CaptureChunk c;
  c.mutable_started()->set_start_ns(start_ns);
  return c;
}
CaptureChunk Header(uint64_t total) {
  CaptureChunk c;
  c.mutable_header()->set_total_bytes(total);
  return c;
}
CaptureChunk Data(const std::string& d) {
  CaptureChunk c;
  c.set_data(d);
  return c;
}
CaptureChunk Trailer(uint64_t chunks) {
  CaptureChunk c;
  c.mutable_trailer()->set_chunks(chunks);
  return c;
}

CaptureChunk TrailerWithCrc(uint64_t chunks, uint32_t crc) {
  CaptureChunk c = Trailer(chunks);
  c.mutable_trailer()->set_crc32(crc);
  return c;
}

TEST(GrpcAgentClientTest, BrokenStreamsFromALyingPeerAreViolations) {
  struct Case {
    std::vector<CaptureChunk> script;
    absl::StatusCode code;
    const char* message;
    const char* events;  // the CaptureStream calls that must have happened, in order
  } cases[] = {
      {{Header(4), Data("ab"), Data("cd"), Trailer(2)}, absl::StatusCode::kOk, "", "HDDE"},
      {{Started(7), Header(4), Data("ab"), Data("cd"), Trailer(2)},
       absl::StatusCode::kOk,
       "",
       "SHDDE"},
      {{}, absl::StatusCode::kDataLoss, "ended before its header", "E"},
      {{Started(7)}, absl::StatusCode::kDataLoss, "ended before its header", "SE"},
      {{Data("ab")}, absl::StatusCode::kDataLoss, "outside header..trailer", "E"},
      {{Header(4), Data("ab"), Trailer(1)},
       absl::StatusCode::kDataLoss,
       "after 2 of 4 bytes",
       "HDE"},
      {{Header(2), Data("abc")}, absl::StatusCode::kDataLoss, "more than the announced 2", "HE"},
      {{Header(2), Data("ab")}, absl::StatusCode::kDataLoss, "after 2 of 2 bytes", "HDE"},
      {{Header(2), Data("ab"), Trailer(5)}, absl::StatusCode::kDataLoss, "counts 5 chunks", "HDE"},
      {{Header(2), Data("ab"), Trailer(1), Data("c")},
       absl::StatusCode::kDataLoss,
       "outside header..trailer",
       "HDE"},
      {{Header(4), Data("ab"), Data("cd"), TrailerWithCrc(2, Crc32(0, "abcd"))},
       absl::StatusCode::kOk,
       "",
       "HDDE"},
      // One flipped bit in the data: framing is intact, the checksum is not.
      {{Header(4), Data("ab"), Data("cc"), TrailerWithCrc(2, Crc32(0, "abcd"))},
       absl::StatusCode::kDataLoss,
       "checksum mismatch",
       "HDDE"},
      {{Header(1), Header(1)}, absl::StatusCode::kDataLoss, "second header", "HE"},
      {{Header(1), Started(7)}, absl::StatusCode::kDataLoss, "'started' after the header", "HE"},
      {{Started(7), Started(8)}, absl::StatusCode::kDataLoss, "second 'started'", "SE"},
      {{Header(1), CaptureChunk()}, absl::StatusCode::kDataLoss, "empty chunk", "HE"},
      {{Header(uint64_t{1} << 40)}, absl::StatusCode::kResourceExhausted, "limit", "HE"},
  };
  for (Case& c : cases) {
    ScriptedAgent liar(c.script);
    TestServer server(&liar);
    ASSERT_THAT(server, IsOk());
    coordinator::GrpcAgentClientFactory factory;
    auto client = Connect(factory, server.address());
    RecordingStream stream(client.get());
    client->Capture({"s", 0, 1}, 5000, &stream);
    const absl::Status status = stream.Await();
    EXPECT_EQ(status.code(), c.code) << c.message << ": " << status;
    EXPECT_THAT(status.message(), HasSubstr(c.message));
    if (!status.ok()) {
      EXPECT_TRUE(absl::StartsWith(status.message(), "Capture: ")) << status;
    }
    EXPECT_EQ(stream.events(), c.events) << c.message;
    if (status.ok()) {
      EXPECT_EQ(stream.data(), "abcd");
    }
  }
}

TEST(GrpcAgentClientTest, StartedArrivesBeforeTheHeaderAndOnStartedGetsItsTime) {
  // The peer says 'started', then holds the rest of the stream until the test lets it go: the
  // client must hand 'started' on at once, not with the header.
  ScriptedAgent agent({Started(1234), Header(2), Data("ab"), Trailer(1)}, /*hang_at_end=*/false,
                      /*pause_at=*/1);
  TestServer server(&agent);
  ASSERT_THAT(server, IsOk());
  coordinator::GrpcAgentClientFactory factory;
  auto client = Connect(factory, server.address());
  RecordingStream stream(client.get());
  client->Capture({"s", 0, 1}, 30'000, &stream);
  ASSERT_TRUE(stream.AwaitStarted());
  EXPECT_EQ(stream.started_ns(), 1234);
  EXPECT_EQ(stream.events(), "S");
  agent.Resume();
  ASSERT_THAT(stream.Await(), IsOk()) << stream.Await();
  EXPECT_EQ(stream.events(), "SHDE");
  EXPECT_EQ(stream.data(), "ab");
}

TEST(GrpcAgentClientTest, AnOnDataErrorCancelsTheRpc) {
  // The peer would keep the stream open forever: only the client's cancel ends it.
  ScriptedAgent agent({Header(4), Data("ab"), Data("cd"), Trailer(2)}, /*hang_at_end=*/true);
  TestServer server(&agent);
  ASSERT_THAT(server, IsOk());
  coordinator::GrpcAgentClientFactory factory;
  auto client = Connect(factory, server.address());
  RecordingStream stream(client.get(), /*fail_at_chunk=*/1);
  client->Capture({"s", 0, 1}, 60'000, &stream);
  EXPECT_EQ(stream.Await(), absl::ResourceExhaustedError("test: disk full"));
  EXPECT_EQ(stream.events(), "HDE");
  EXPECT_TRUE(agent.saw_cancel.WaitForNotificationWithTimeout(kTestTimeout));
}

TEST(GrpcAgentClientTest, APeerThatStallsMidTransferHitsTheDeadline) {
  ScriptedAgent staller({Header(1000), Data(std::string(100, 'x'))}, /*hang_at_end=*/true);
  TestServer server(&staller);
  ASSERT_THAT(server, IsOk());
  coordinator::GrpcAgentClientFactory factory;
  auto client = Connect(factory, server.address());
  RecordingStream stream(client.get());
  client->Capture({"s", 0, 1}, /*timeout_ms=*/300, &stream);
  const absl::Status status = stream.Await();
  EXPECT_EQ(status.code(), absl::StatusCode::kDeadlineExceeded) << status;
  EXPECT_THAT(status.message(), HasSubstr("Capture: "));
  EXPECT_EQ(stream.events(), "HDE");
}

}  // namespace
}  // namespace profctl
