#include "coordinator/clients/handshake_probe.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <memory>
#include <optional>
#include <vector>

#include "absl/status/status.h"
#include "absl/synchronization/blocking_counter.h"
#include "absl/synchronization/notification.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace profctl::coordinator {
namespace {

using ::testing::HasSubstr;

// A listening loopback socket (the kernel answers handshakes; nothing accepts). Port 0: free.
class Listener {
 public:
  explicit Listener(int backlog) : fd_(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(a);
    EXPECT_EQ(bind(fd_, reinterpret_cast<sockaddr*>(&a), len), 0);
    EXPECT_EQ(listen(fd_, backlog), 0);
    EXPECT_EQ(getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len), 0);
    port_ = ntohs(a.sin_port);
  }
  ~Listener() { close(fd_); }
  Listener(const Listener&) = delete;
  Listener& operator=(const Listener&) = delete;
  int port() const { return port_; }

 private:
  int fd_;
  int port_ = 0;
};

// Runs one probe to the end and returns what it answered.
absl::StatusOr<int64_t> ProbeOnce(HandshakeProbe& probe, int64_t timeout_ms) {
  absl::Notification done;
  std::optional<absl::StatusOr<int64_t>> out;
  probe.Start(timeout_ms, [&](absl::StatusOr<int64_t> r) {
    out = std::move(r);
    done.Notify();
  });
  done.WaitForNotification();
  return *out;
}

TEST(HandshakeProbeTest, AHostWhoseKernelListensAnswersThoughNoProcessAcceptsOrSpeaks) {
  RealClock clock;
  HandshakeProber prober(&clock);
  Listener listener(/*backlog=*/16);  // nobody accepts: a frozen process's socket
  HandshakeProbe probe(&prober, "127.0.0.1", listener.port());
  const absl::StatusOr<int64_t> took = ProbeOnce(probe, 2000);
  ASSERT_TRUE(took.ok()) << took.status();
  EXPECT_GE(*took, 0);
  EXPECT_LT(*took, 2000 * kNanosPerMilli);
  // Once per probe object.
  const absl::StatusOr<int64_t> again = ProbeOnce(probe, 2000);
  EXPECT_EQ(again.status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST(HandshakeProbeTest, AClosedPortIsUnavailableAndANameIsNotProbed) {
  RealClock clock;
  HandshakeProber prober(&clock);
  int closed_port = 0;
  {
    Listener gone(1);
    closed_port = gone.port();
  }
  HandshakeProbe refused(&prober, "127.0.0.1", closed_port);
  const absl::StatusOr<int64_t> r = ProbeOnce(refused, 2000);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kUnavailable) << r.status();
  EXPECT_THAT(r.status().message(), HasSubstr("refused"));

  HandshakeProbe named(&prober, "agent-3.pod.local", 6000);
  const absl::StatusOr<int64_t> n = ProbeOnce(named, 2000);
  EXPECT_EQ(n.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(n.status().message(), HasSubstr("is a name, not an IP address"));
}

// A listener whose queue is full drops further SYNs: the handshake never completes (as behind a
// link that lost the host). The probe ends at its timeout, or at once when destroyed.
TEST(HandshakeProbeTest, AnUnansweredHandshakeEndsAtItsTimeoutOrWhenTheProbeIsDestroyed) {
  RealClock clock;
  HandshakeProber prober(&clock);
  Listener full(/*backlog=*/0);
  std::vector<int> fillers;
  for (int i = 0; i < 4; ++i) {  // fill the accept queue (backlog 0 holds one)
    const int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(static_cast<uint16_t>(full.port()));
    (void)connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a));
    fillers.push_back(fd);
  }
  {
    HandshakeProbe probe(&prober, "127.0.0.1", full.port());
    const absl::StatusOr<int64_t> r = ProbeOnce(probe, 200);
    EXPECT_EQ(r.status().code(), absl::StatusCode::kDeadlineExceeded) << r.status();
    EXPECT_THAT(r.status().message(), HasSubstr("no answer within 200 ms"));
  }
  std::optional<absl::StatusOr<int64_t>> out;
  {
    HandshakeProbe probe(&prober, "127.0.0.1", full.port());
    probe.Start(60'000, [&](absl::StatusOr<int64_t> r) { out = std::move(r); });
  }  // destroyed while its handshake hangs: done has run, CANCELLED, before this returns
  ASSERT_TRUE(out.has_value());
  EXPECT_EQ(out->status().code(), absl::StatusCode::kCancelled);
  for (const int fd : fillers) close(fd);
}

// A pod's worth of probes at once on one prober (one thread): each answers, none waits for another.
TEST(HandshakeProbeTest, ManyProbesShareTheProbersOneThread) {
  RealClock clock;
  HandshakeProber prober(&clock);
  Listener listener(/*backlog=*/512);
  constexpr int kProbes = 256;
  std::vector<std::unique_ptr<HandshakeProbe>> probes;
  std::vector<absl::StatusOr<int64_t>> results(kProbes, absl::UnknownError("no answer"));
  absl::BlockingCounter answered(kProbes);
  for (int i = 0; i < kProbes; ++i) {
    probes.push_back(std::make_unique<HandshakeProbe>(&prober, "127.0.0.1", listener.port()));
    probes.back()->Start(10'000, [&, i](absl::StatusOr<int64_t> r) {
      results[i] = std::move(r);
      answered.DecrementCount();
    });
  }
  answered.Wait();
  for (const absl::StatusOr<int64_t>& r : results) EXPECT_TRUE(r.ok()) << r.status();
}

}  // namespace
}  // namespace profctl::coordinator
