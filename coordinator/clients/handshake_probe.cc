#include "coordinator/clients/handshake_probe.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"

namespace profctl::coordinator {
namespace {

// The peer as a socket address, if `host` is an IP literal.
bool ToSockaddr(const std::string& host, int port, sockaddr_storage* out, socklen_t* len) {
  *out = {};
  auto* v4 = reinterpret_cast<sockaddr_in*>(out);
  if (inet_pton(AF_INET, host.c_str(), &v4->sin_addr) == 1) {
    v4->sin_family = AF_INET;
    v4->sin_port = htons(static_cast<uint16_t>(port));
    *len = sizeof(sockaddr_in);
    return true;
  }
  auto* v6 = reinterpret_cast<sockaddr_in6*>(out);
  if (inet_pton(AF_INET6, host.c_str(), &v6->sin6_addr) == 1) {
    v6->sin6_family = AF_INET6;
    v6->sin6_port = htons(static_cast<uint16_t>(port));
    *len = sizeof(sockaddr_in6);
    return true;
  }
  return false;
}

class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

}  // namespace

struct HandshakeProbe::State {
  std::string host;
  int port = 0;
  const Clock* clock = nullptr;
  // Wakes the probe's poll when the probe is destroyed.
  int wake_fd = -1;
  std::thread thread;
  absl::Mutex mu;
  bool started ABSL_GUARDED_BY(mu) = false;  // one probe per HandshakeProbe

  // On the probe's thread: connect without blocking, wait for the handshake, the timeout or the
  // wake.
  absl::StatusOr<int64_t> Run(const sockaddr_storage& addr, socklen_t len, int64_t timeout_ms) {
    const Fd sock(socket(addr.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    if (sock.get() < 0) {
      return absl::UnavailableError(absl::StrCat("handshake probe: socket: ", strerror(errno)));
    }
    const int64_t started = clock->MonoNs();
    if (connect(sock.get(), reinterpret_cast<const sockaddr*>(&addr), len) == 0) {
      return clock->MonoNs() - started;
    }
    if (errno != EINPROGRESS) {
      return absl::UnavailableError(absl::StrCat("handshake probe: connect: ", strerror(errno)));
    }
    const int64_t deadline = started + timeout_ms * kNanosPerMilli;
    for (;;) {
      const int64_t left_ms = (deadline - clock->MonoNs() + kNanosPerMilli - 1) / kNanosPerMilli;
      if (left_ms <= 0) {
        return absl::DeadlineExceededError(
            absl::StrCat("handshake probe: no answer within ", timeout_ms, " ms"));
      }
      pollfd fds[2] = {{sock.get(), POLLOUT, 0}, {wake_fd, POLLIN, 0}};
      const int n = poll(fds, 2, static_cast<int>(left_ms));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) {
        return absl::UnavailableError(absl::StrCat("handshake probe: poll: ", strerror(errno)));
      }
      if ((fds[1].revents & POLLIN) != 0) {
        return absl::CancelledError("handshake probe: its client is gone");
      }
      if (n == 0) continue;  // the deadline check above ends it
      const int64_t took = clock->MonoNs() - started;
      int err = 0;
      socklen_t err_len = sizeof(err);
      if (getsockopt(sock.get(), SOL_SOCKET, SO_ERROR, &err, &err_len) != 0) err = errno;
      if (err != 0) {
        return absl::UnavailableError(absl::StrCat("handshake probe: connect: ", strerror(err)));
      }
      return took;
    }
  }
};

HandshakeProbe::HandshakeProbe(std::string host, int port, const Clock* clock)
    : state_(std::make_unique<State>()) {
  state_->host = std::move(host);
  state_->port = port;
  state_->clock = clock;
  state_->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
}

HandshakeProbe::~HandshakeProbe() {
  if (state_->wake_fd >= 0) {
    const uint64_t one = 1;
    (void)!write(state_->wake_fd, &one, sizeof(one));
  }
  if (state_->thread.joinable()) state_->thread.join();
  if (state_->wake_fd >= 0) close(state_->wake_fd);
}

void HandshakeProbe::Start(int64_t timeout_ms, Done done) {
  sockaddr_storage addr{};
  socklen_t len = 0;
  if (!ToSockaddr(state_->host, state_->port, &addr, &len)) {
    std::move(done)(absl::UnimplementedError(absl::StrCat(
        "handshake probe: '", state_->host, "' is a name, not an IP address: not probed")));
    return;
  }
  if (state_->wake_fd < 0) {
    std::move(done)(absl::UnavailableError("handshake probe: no eventfd"));
    return;
  }
  bool started_before = false;
  {
    absl::MutexLock lock(&state_->mu);
    started_before = state_->started;
    state_->started = true;
  }
  if (started_before) {
    std::move(done)(absl::FailedPreconditionError("handshake probe: one was already started"));
    return;
  }
  State* s = state_.get();
  s->thread = std::thread([s, addr, len, timeout_ms, done = std::move(done)]() mutable {
    absl::StatusOr<int64_t> result = s->Run(addr, len, timeout_ms);
    std::move(done)(std::move(result));
  });
}

}  // namespace profctl::coordinator
