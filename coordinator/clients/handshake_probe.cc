#include "coordinator/clients/handshake_probe.h"

#include <chrono>
#include <thread>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "boost/asio/executor_work_guard.hpp"
#include "boost/asio/io_context.hpp"
#include "boost/asio/ip/address.hpp"
#include "boost/asio/ip/tcp.hpp"
#include "boost/asio/post.hpp"
#include "boost/asio/steady_timer.hpp"

namespace profctl::coordinator {

struct HandshakeProber::Impl {
  explicit Impl(const Clock* c) : clock(c) {}
  const Clock* clock;
  boost::asio::io_context io;
  boost::asio::executor_work_guard<boost::asio::io_context::executor_type> work{io.get_executor()};
  std::thread thread;
};

HandshakeProber::HandshakeProber(const Clock* clock) : impl_(std::make_unique<Impl>(clock)) {
  impl_->thread = std::thread([impl = impl_.get()] { impl->io.run(); });
}

HandshakeProber::~HandshakeProber() {
  impl_->work.reset();
  impl_->io.stop();
  impl_->thread.join();
}

// Lives on the prober's thread once started: the connect's and the timer's handlers hold it.
struct HandshakeProbe::State {
  State(boost::asio::io_context& io, const Clock* c, Done d)
      : clock(c), socket(io), timer(io), done(std::move(d)) {}
  const Clock* clock;
  boost::asio::ip::tcp::socket socket;
  boost::asio::steady_timer timer;
  Done done;
  int64_t started_mono = 0;
  bool finished = false;
  absl::Notification ended;  // `done` has run

  // Prober's thread. The first outcome wins; the others find it finished.
  void Finish(absl::StatusOr<int64_t> result) {
    if (finished) return;
    finished = true;
    boost::system::error_code ignored;
    timer.cancel();
    socket.close(ignored);
    Done d = std::move(done);
    std::move(d)(std::move(result));
    ended.Notify();
  }
};

HandshakeProbe::HandshakeProbe(HandshakeProber* prober, std::string host, int port)
    : prober_(prober), host_(std::move(host)), port_(port) {}

HandshakeProbe::~HandshakeProbe() {
  if (state_ == nullptr) return;
  boost::asio::post(prober_->impl().io, [state = state_] {
    state->Finish(absl::CancelledError("handshake probe: its client is gone"));
  });
  state_->ended.WaitForNotification();
}

void HandshakeProbe::Start(int64_t timeout_ms, Done done) {
  if (state_ != nullptr) {
    std::move(done)(absl::FailedPreconditionError("handshake probe: one was already started"));
    return;
  }
  boost::system::error_code ec;
  const boost::asio::ip::address address = boost::asio::ip::make_address(host_, ec);
  if (ec) {
    std::move(done)(absl::UnimplementedError(
        absl::StrCat("handshake probe: '", host_, "' is a name, not an IP address: not probed")));
    return;
  }
  HandshakeProber::Impl& impl = prober_->impl();
  state_ = std::make_shared<State>(impl.io, impl.clock, std::move(done));
  const boost::asio::ip::tcp::endpoint endpoint(address, static_cast<uint16_t>(port_));
  boost::asio::post(impl.io, [state = state_, endpoint, timeout_ms] {
    if (state->finished) return;  // destroyed before it began
    state->started_mono = state->clock->MonoNs();
    state->timer.expires_after(std::chrono::milliseconds(timeout_ms));
    state->timer.async_wait([state, timeout_ms](const boost::system::error_code& e) {
      if (e) return;  // cancelled: the connect ended first
      state->Finish(absl::DeadlineExceededError(
          absl::StrCat("handshake probe: no answer within ", timeout_ms, " ms")));
    });
    state->socket.async_connect(endpoint, [state](const boost::system::error_code& e) {
      if (e == boost::asio::error::operation_aborted) return;  // Finish closed it
      if (e) {
        state->Finish(
            absl::UnavailableError(absl::StrCat("handshake probe: connect: ", e.message())));
        return;
      }
      state->Finish(state->clock->MonoNs() - state->started_mono);
    });
  });
}

}  // namespace profctl::coordinator
