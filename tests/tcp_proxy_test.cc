// TcpProxy against an echo server on loopback, and gRPC through it to an in-process agent.
//
// Every blocking socket call of the test client has a 10 s SO_RCVTIMEO/SO_SNDTIMEO, so a bug
// fails a test instead of hanging it. Delays are checked as lower bounds only (a loaded machine
// can only make round trips longer).
#include "tests/tcp_proxy.h"

#include <arpa/inet.h>
#include <grpcpp/grpcpp.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "agent/capture_manager.h"
#include "agent/collectors/synthetic/synthetic_collector.h"
#include "agent/service/agent_service.h"
#include "boost/asio/executor_work_guard.hpp"
#include "boost/asio/io_context.hpp"
#include "boost/asio/ip/tcp.hpp"
#include "boost/asio/post.hpp"
#include "boost/asio/write.hpp"
#include "common/clock.h"
#include "common/executor.h"
#include "coordinator/clients/grpc_agent_client.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/status_matchers.h"

using ::profctl::testkit::IsOk;

namespace profctl::testkit {
namespace {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using ErrorCode = boost::system::error_code;
using SteadyClock = std::chrono::steady_clock;

// Echoes every byte back, on its own io thread, for any number of connections.
class EchoServer {
 public:
  EchoServer() {
    const tcp::endpoint at(asio::ip::address_v4::loopback(), 0);
    ErrorCode ec;
    acceptor_.open(at.protocol(), ec);
    if (!ec) acceptor_.bind(at, ec);
    if (!ec) acceptor_.listen(asio::socket_base::max_listen_connections, ec);
    if (!ec) port_ = acceptor_.local_endpoint(ec).port();
    if (ec) port_ = 0;
    Accept();
    thread_ = std::thread([this] { io_.run(); });
  }
  ~EchoServer() {
    asio::post(io_, [this] {
      ErrorCode ignored;
      acceptor_.close(ignored);
      for (const std::weak_ptr<Session>& weak : sessions_) {
        if (std::shared_ptr<Session> s = weak.lock()) s->socket.close(ignored);
      }
    });
    work_.reset();
    thread_.join();
  }
  EchoServer(const EchoServer&) = delete;
  EchoServer& operator=(const EchoServer&) = delete;

  int port() const { return port_; }
  uint64_t bytes_received() const { return bytes_received_.load(); }

 private:
  struct Session : std::enable_shared_from_this<Session> {
    explicit Session(tcp::socket s, std::atomic<uint64_t>* received)
        : socket(std::move(s)), bytes_received(received), buffer(16 * 1024) {}
    void Read() {
      socket.async_read_some(asio::buffer(buffer),
                             [self = shared_from_this()](const ErrorCode& ec, size_t n) {
                               if (ec) return;  // closed: the socket goes with the session
                               self->bytes_received->fetch_add(n);
                               asio::async_write(self->socket, asio::buffer(self->buffer, n),
                                                 [self](const ErrorCode& wec, size_t) {
                                                   if (!wec) self->Read();
                                                 });
                             });
    }
    tcp::socket socket;
    std::atomic<uint64_t>* bytes_received;
    std::vector<char> buffer;
  };

  void Accept() {
    acceptor_.async_accept([this](const ErrorCode& ec, tcp::socket socket) {
      if (!acceptor_.is_open()) return;
      if (!ec) {
        auto session = std::make_shared<Session>(std::move(socket), &bytes_received_);
        sessions_.push_back(session);
        session->Read();
      }
      Accept();
    });
  }

  asio::io_context io_;
  asio::executor_work_guard<asio::io_context::executor_type> work_{io_.get_executor()};
  tcp::acceptor acceptor_{io_};
  std::vector<std::weak_ptr<Session>> sessions_;  // io thread only
  std::atomic<uint64_t> bytes_received_{0};
  int port_ = 0;
  std::thread thread_;
};

// A blocking loopback TCP client with bounded waits (plain sockets: Asio's blocking reads would
// ignore SO_RCVTIMEO).
class Client {
 public:
  explicit Client(int port) {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    if (fd_ < 0) return;
    timeval timeout{.tv_sec = 10, .tv_usec = 0};
    const int one = 1;
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons(static_cast<uint16_t>(port));
    connected_ = setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout)) == 0 &&
                 setsockopt(fd_, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof(timeout)) == 0 &&
                 setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) == 0 &&
                 connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  }
  ~Client() {
    if (fd_ >= 0) close(fd_);
  }
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  bool connected() const { return connected_; }

  bool Send(std::string_view data) {
    while (!data.empty()) {
      const ssize_t n = send(fd_, data.data(), data.size(), MSG_NOSIGNAL);
      if (n <= 0) return false;
      data.remove_prefix(static_cast<size_t>(n));
    }
    return true;
  }

  // Reads exactly `n` bytes, or fewer on EOF, error or the 10 s timeout (error() says which).
  std::string Receive(size_t n) {
    std::string out;
    std::vector<char> buffer(64 * 1024);
    while (out.size() < n) {
      const ssize_t got = recv(fd_, buffer.data(), std::min(buffer.size(), n - out.size()), 0);
      if (got <= 0) {
        error_ = got == 0 ? 0 : errno;
        break;
      }
      out.append(buffer.data(), static_cast<size_t>(got));
    }
    return out;
  }
  // errno of the last failed Receive (0: the peer closed cleanly).
  int error() const { return error_; }

  // Whether bytes arrive within `wait`. Only ever used to show that nothing arrives, so a slow
  // machine can make it pass, never fail.
  bool Readable(std::chrono::milliseconds wait) {
    pollfd p{.fd = fd_, .events = POLLIN, .revents = 0};
    return poll(&p, 1, static_cast<int>(wait.count())) > 0;
  }

 private:
  int fd_ = -1;
  bool connected_ = false;
  int error_ = 0;
};

std::unique_ptr<TcpProxy> StartProxy(int target_port) {
  absl::StatusOr<std::unique_ptr<TcpProxy>> proxy = TcpProxy::Start("127.0.0.1", target_port);
  EXPECT_THAT(proxy, IsOk());
  return proxy.ok() ? std::move(*proxy) : nullptr;
}

// The time one byte takes to go to the echo server and back through `client`.
absl::Duration RoundTrip(Client& client) {
  const SteadyClock::time_point start = SteadyClock::now();
  EXPECT_TRUE(client.Send("x"));
  EXPECT_EQ(client.Receive(1), "x");
  return absl::FromChrono(SteadyClock::now() - start);
}

TEST(TcpProxyTest, RejectsABadTargetPort) {
  EXPECT_EQ(TcpProxy::Start("127.0.0.1", 0).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(TcpProxy::Start("127.0.0.1", 70000).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(TcpProxyTest, BytesArriveIntactAndInOrderOverManyConcurrentConnections) {
  EchoServer echo;
  ASSERT_NE(echo.port(), 0);
  std::unique_ptr<TcpProxy> proxy = StartProxy(echo.port());
  ASSERT_NE(proxy, nullptr);
  constexpr int kConnections = 32;
  constexpr size_t kBytes = 256 * 1024;
  std::vector<std::string> payloads(kConnections);
  std::vector<std::string> received(kConnections);
  std::vector<std::thread> readers;
  for (int i = 0; i < kConnections; ++i) {
    std::mt19937 random(/*seed=*/i);
    payloads[i].resize(kBytes);
    for (char& c : payloads[i]) c = static_cast<char>(random());
  }
  for (int i = 0; i < kConnections; ++i) {
    readers.emplace_back([&, i] {
      Client client(proxy->port());
      if (!client.connected()) return;
      // Full duplex: one thread writes in odd-sized pieces while this one reads.
      std::thread writer([&] {
        std::string_view rest = payloads[i];
        while (!rest.empty()) {
          const size_t n = std::min<size_t>(rest.size(), 7919);
          if (!client.Send(rest.substr(0, n))) return;
          rest.remove_prefix(n);
        }
      });
      received[i] = client.Receive(kBytes);
      writer.join();
    });
  }
  for (std::thread& t : readers) t.join();
  for (int i = 0; i < kConnections; ++i) {
    EXPECT_EQ(received[i].size(), kBytes) << "connection " << i;
    EXPECT_TRUE(received[i] == payloads[i]) << "connection " << i << " corrupted or reordered";
  }
  const TcpProxy::Counters counters = proxy->counters();
  EXPECT_EQ(counters.connections_accepted, kConnections);
  EXPECT_EQ(counters.bytes_up, kConnections * kBytes);
  EXPECT_EQ(counters.bytes_down, kConnections * kBytes);
}

TEST(TcpProxyTest, DelaysLengthenEveryRoundTripPerDirection) {
  EchoServer echo;
  std::unique_ptr<TcpProxy> proxy = StartProxy(echo.port());
  ASSERT_NE(proxy, nullptr);
  Client client(proxy->port());
  ASSERT_TRUE(client.connected());
  RoundTrip(client);  // the proxy has connected to the target

  proxy->SetUpDelay(absl::Milliseconds(10));
  for (int i = 0; i < 3; ++i) EXPECT_GE(RoundTrip(client), absl::Milliseconds(10));

  proxy->SetUpDelay(absl::ZeroDuration());
  proxy->SetDownDelay(absl::Milliseconds(6));
  for (int i = 0; i < 3; ++i) EXPECT_GE(RoundTrip(client), absl::Milliseconds(6));

  proxy->SetUpDelay(absl::Milliseconds(10));
  EXPECT_GE(RoundTrip(client), absl::Milliseconds(16));

  // A new connection gets the delays too.
  Client second(proxy->port());
  ASSERT_TRUE(second.connected());
  EXPECT_GE(RoundTrip(second), absl::Milliseconds(16));
}

TEST(TcpProxyTest, StallHoldsEveryByteUntilReleased) {
  EchoServer echo;
  std::unique_ptr<TcpProxy> proxy = StartProxy(echo.port());
  ASSERT_NE(proxy, nullptr);
  Client client(proxy->port());
  ASSERT_TRUE(client.connected());
  RoundTrip(client);
  const uint64_t echoed_before = echo.bytes_received();

  proxy->Stall(true);
  ASSERT_TRUE(client.Send("hello"));
  EXPECT_FALSE(client.Readable(std::chrono::milliseconds(200)));
  EXPECT_EQ(echo.bytes_received(), echoed_before);  // held by the proxy, not the echo server
  proxy->Stall(false);
  EXPECT_EQ(client.Receive(5), "hello");
  EXPECT_EQ(echo.bytes_received(), echoed_before + 5);
}

TEST(TcpProxyTest, CorruptDownByteFlipsOneBitOfThatByteOnly) {
  EchoServer echo;
  std::unique_ptr<TcpProxy> proxy = StartProxy(echo.port());
  ASSERT_NE(proxy, nullptr);
  Client client(proxy->port());
  ASSERT_TRUE(client.connected());
  RoundTrip(client);              // 1 byte down so far
  proxy->CorruptDownByte(1 + 3);  // the 3rd byte of what comes back next
  const std::string sent = "abcdefgh";
  ASSERT_TRUE(client.Send(sent));
  const std::string got = client.Receive(sent.size());
  ASSERT_EQ(got.size(), sent.size());
  std::string expected = sent;
  expected[2] ^= 0x10;
  EXPECT_EQ(got, expected);
  // One-shot: the next bytes are intact.
  ASSERT_TRUE(client.Send(sent));
  EXPECT_EQ(client.Receive(sent.size()), sent);
}

TEST(TcpProxyTest, ResetAllResetsOpenConnectionsAndLaterOnesWork) {
  EchoServer echo;
  std::unique_ptr<TcpProxy> proxy = StartProxy(echo.port());
  ASSERT_NE(proxy, nullptr);
  Client client(proxy->port());
  ASSERT_TRUE(client.connected());
  RoundTrip(client);

  proxy->ResetAll();
  EXPECT_EQ(client.Receive(1), "");
  EXPECT_EQ(client.error(), ECONNRESET);

  Client later(proxy->port());
  ASSERT_TRUE(later.connected());
  RoundTrip(later);
  EXPECT_EQ(proxy->counters().connections_accepted, 2u);
}

// gRPC (HTTP/2) through the proxy to a complete agent in this process, on the real clock.
class LocalAgent {
 public:
  LocalAgent() {
    grpc::ServerBuilder builder;
    builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port_);
    builder.RegisterService(&service_);
    server_ = builder.BuildAndStart();
  }
  ~LocalAgent() { server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(5)); }
  int port() const { return port_; }

 private:
  RealClock clock_;
  AsioExecutor executor_{&clock_};
  agent::SyntheticCollector synthetic_{synthetic::SyntheticJobConfig{}};
  agent::CaptureManager manager_{{&clock_, {&synthetic_}, &executor_, nullptr},
                                 {.host_name = "node-7"}};
  agent::AgentServiceImpl service_{{{&manager_, &clock_, "node-7", "machine"}}};
  int port_ = 0;
  std::unique_ptr<grpc::Server> server_;
};

TEST(TcpProxyTest, GrpcCallsGoThroughWithDelays) {
  LocalAgent agent;
  ASSERT_NE(agent.port(), 0);
  std::unique_ptr<TcpProxy> proxy = StartProxy(agent.port());
  ASSERT_NE(proxy, nullptr);
  proxy->SetUpDelay(absl::Milliseconds(10));
  proxy->SetDownDelay(absl::Milliseconds(6));
  RealClock real;
  coordinator::GrpcAgentClientFactory factory({.clock = &real});
  std::unique_ptr<coordinator::AgentClient> client =
      factory.Connect(*coordinator::ParseWorker(proxy->address()));

  absl::Notification info_done;
  absl::StatusOr<coordinator::AgentInfo> info;
  client->GetInfo(30'000, [&](absl::StatusOr<coordinator::AgentInfo> r) {
    info = std::move(r);
    info_done.Notify();
  });
  ASSERT_TRUE(info_done.WaitForNotificationWithTimeout(absl::Seconds(30)));
  ASSERT_THAT(info, IsOk());
  EXPECT_EQ(info->name, "node-7");

  absl::Notification sync_done;
  absl::StatusOr<coordinator::ClockReading> reading;
  client->SyncClock(30'000, [&](absl::StatusOr<coordinator::ClockReading> r) {
    reading = std::move(r);
    sync_done.Notify();
  });
  ASSERT_TRUE(sync_done.WaitForNotificationWithTimeout(absl::Seconds(30)));
  ASSERT_THAT(reading, IsOk());
  // One wall clock on both ends: the request took >= 10 ms to arrive, the reply >= 6 ms (less
  // 1 ms for wall-clock slew against the steady clock the proxy delays by).
  EXPECT_GE(reading->receive_ns - reading->local_send_ns, 9 * kNanosPerMilli);
  EXPECT_GE(reading->local_receive_ns - reading->send_ns, 5 * kNanosPerMilli);

  const TcpProxy::Counters counters = proxy->counters();
  EXPECT_GE(counters.connections_accepted, 1u);
  EXPECT_GT(counters.bytes_up, 0u);
  EXPECT_GT(counters.bytes_down, 0u);
  client.reset();
}

// Two endpoints behind one gRPC server, routed by the port in each call's :authority, as
// profctl-agent --endpoints=2 serves them.
class TwoEndpointAgent {
 public:
  TwoEndpointAgent() {
    grpc::ServerBuilder builder;
    builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
    for (int& port : ports_) {
      builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    }
    builder.RegisterService(&service_);
    server_ = builder.BuildAndStart();
    service_.SetPorts({ports_[0], ports_[1]});
  }
  ~TwoEndpointAgent() {
    server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(5));
  }
  int port(int i) const { return ports_[i]; }

 private:
  RealClock clock_;
  AsioExecutor executor_{&clock_};
  agent::SyntheticCollector synthetic_{synthetic::SyntheticJobConfig{}};
  agent::CaptureManager manager0_{{&clock_, {&synthetic_}, &executor_, nullptr}, {}};
  agent::CaptureManager manager1_{{&clock_, {&synthetic_}, &executor_, nullptr}, {}};
  agent::AgentServiceImpl service_{
      {{&manager0_, &clock_, "ep-0", "machine"}, {&manager1_, &clock_, "ep-1", "machine"}}};
  int ports_[2] = {0, 0};
  std::unique_ptr<grpc::Server> server_;
};

absl::StatusOr<coordinator::AgentInfo> GetInfoThrough(coordinator::AgentClientFactory& factory,
                                                      const std::string& address) {
  std::unique_ptr<coordinator::AgentClient> client =
      factory.Connect(*coordinator::ParseWorker(address));
  absl::Notification done;
  absl::StatusOr<coordinator::AgentInfo> info;
  client->GetInfo(30'000, [&](absl::StatusOr<coordinator::AgentInfo> r) {
    info = std::move(r);
    done.Notify();
  });
  if (!done.WaitForNotificationWithTimeout(absl::Seconds(30))) {
    return absl::DeadlineExceededError("test: GetInfo never answered");
  }
  return info;
}

TEST(TcpProxyTest, AMultiEndpointAgentNeedsItsEndpointsAuthorityThroughTheProxy) {
  TwoEndpointAgent agent;
  ASSERT_NE(agent.port(1), 0);
  std::unique_ptr<TcpProxy> proxy = StartProxy(agent.port(1));
  ASSERT_NE(proxy, nullptr);

  // The proxy's port in :authority names no endpoint.
  coordinator::GrpcAgentClientFactory plain;
  absl::StatusOr<coordinator::AgentInfo> info = GetInfoThrough(plain, proxy->address());
  EXPECT_EQ(info.status().code(), absl::StatusCode::kNotFound) << info.status();

  const std::string endpoint = "127.0.0.1:" + std::to_string(agent.port(1));
  coordinator::GrpcAgentClientFactory routed(
      {.authority_for_testing = [&](const coordinator::WorkerAddress&) { return endpoint; }});
  info = GetInfoThrough(routed, proxy->address());
  ASSERT_THAT(info, IsOk());
  EXPECT_EQ(info->name, "ep-1");
}

}  // namespace
}  // namespace profctl::testkit
