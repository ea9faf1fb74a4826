#include "tests/tcp_proxy.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <deque>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "boost/asio/connect.hpp"
#include "boost/asio/executor_work_guard.hpp"
#include "boost/asio/io_context.hpp"
#include "boost/asio/ip/tcp.hpp"
#include "boost/asio/post.hpp"
#include "boost/asio/steady_timer.hpp"
#include "boost/asio/write.hpp"

namespace profctl::testkit {
namespace {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using SteadyClock = std::chrono::steady_clock;
using ErrorCode = boost::system::error_code;

// Knobs and counters: written by any thread, read by the io thread.
struct Shared {
  std::atomic<int64_t> up_delay_ns{0};
  std::atomic<int64_t> down_delay_ns{0};
  std::atomic<bool> stalled{false};
  std::atomic<uint64_t> accepted{0};
  std::atomic<uint64_t> open{0};
  std::atomic<uint64_t> bytes_up{0};
  std::atomic<uint64_t> bytes_down{0};
  // The down byte to flip a bit of (1-based, counted as bytes_down), 0: none. One-shot.
  std::atomic<uint64_t> corrupt_down_at{0};
};

// One proxied connection: the accepted client socket, the socket to the target, and a pipe per
// direction. Lives as long as an operation of its own is outstanding (each handler holds a
// shared_ptr); every operation is pending until Close(), so a connection goes away only after
// it was closed. All members are touched on the io thread only.
class Connection : public std::enable_shared_from_this<Connection> {
 public:
  Connection(Shared* shared, tcp::socket client)
      : shared_(shared),
        client_(std::move(client)),
        target_(client_.get_executor()),
        up_(client_, target_, shared->up_delay_ns, shared->bytes_up, nullptr),
        down_(target_, client_, shared->down_delay_ns, shared->bytes_down,
              &shared->corrupt_down_at) {
    shared_->open.fetch_add(1);
  }
  ~Connection() { shared_->open.fetch_sub(1); }
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  void Start(const tcp::resolver::results_type& target) {
    asio::async_connect(target_, target,
                        [self = shared_from_this()](const ErrorCode& ec, const tcp::endpoint&) {
                          if (self->closed_) return;
                          if (ec) {
                            self->Close(/*reset=*/true);  // the client sees the target refuse
                            return;
                          }
                          ErrorCode ignored;
                          self->target_.set_option(tcp::no_delay(true), ignored);
                          self->Read(self->up_);
                          self->Read(self->down_);
                        });
  }

  // Closes both sockets, with RST when `reset` (SO_LINGER 0), else with FIN. Idempotent.
  void Close(bool reset) {
    if (closed_) return;
    closed_ = true;
    ErrorCode ignored;
    for (tcp::socket* s : {&client_, &target_}) {
      if (reset) s->set_option(asio::socket_base::linger(true, 0), ignored);
      s->close(ignored);
    }
    up_.timer.cancel();
    down_.timer.cancel();
  }

  // Makes pipes that wait (for a stall to end, or for a chunk to fall due) look again.
  void WakeWriters() {
    up_.timer.cancel();
    down_.timer.cancel();
  }

 private:
  // One direction: bytes read from `from` are held until due, then written to `to` in order.
  struct Pipe {
    Pipe(tcp::socket& from_socket, tcp::socket& to_socket, const std::atomic<int64_t>& delay,
         std::atomic<uint64_t>& received_bytes, std::atomic<uint64_t>* corrupt)
        : from(from_socket),
          to(to_socket),
          delay_ns(delay),
          received(received_bytes),
          corrupt_at(corrupt),
          buffer(size_t{64} << 10),
          timer(from_socket.get_executor()) {}

    struct Chunk {
      std::string bytes;
      SteadyClock::time_point due;
    };

    tcp::socket& from;
    tcp::socket& to;
    const std::atomic<int64_t>& delay_ns;
    std::atomic<uint64_t>& received;    // counts what was read from `from`
    std::atomic<uint64_t>* corrupt_at;  // Shared::corrupt_down_at for the down pipe, else null
    std::vector<char> buffer;           // the read in flight
    std::deque<Chunk> held;             // read, not yet written; due times never decrease
    size_t held_bytes = 0;
    size_t writing_chunks = 0;  // the first chunks of `held`, being written
    bool reading = false;
    bool waiting = false;      // on `timer`
    bool eof = false;          // `from` closed its write half
    bool eof_passed = false;   // ... and `to` was told so
    asio::steady_timer timer;  // when the front chunk falls due, or a stall ends
  };

  void Read(Pipe& p) {
    if (closed_ || p.reading || p.eof || p.held_bytes >= TcpProxy::kMaxHeldBytes) return;
    p.reading = true;
    p.from.async_read_some(
        asio::buffer(p.buffer), [self = shared_from_this(), &p](const ErrorCode& ec, size_t n) {
          p.reading = false;
          if (self->closed_) return;
          if (n > 0) {
            SteadyClock::time_point due =
                SteadyClock::now() + std::chrono::nanoseconds(p.delay_ns.load());
            if (!p.held.empty()) due = std::max(due, p.held.back().due);  // keep byte order
            p.held.push_back({std::string(p.buffer.data(), n), due});
            p.held_bytes += n;
            const uint64_t before = p.received.fetch_add(n);
            if (p.corrupt_at != nullptr) {
              uint64_t at = p.corrupt_at->load();
              if (at > before && at <= before + n && p.corrupt_at->compare_exchange_strong(at, 0)) {
                p.held.back().bytes[at - before - 1] ^= 0x10;
              }
            }
          }
          if (ec == asio::error::eof) {
            p.eof = true;
          } else if (ec) {
            self->Close(/*reset=*/true);  // pass a reset on as a reset
            return;
          }
          self->Read(p);
          self->Write(p);
        });
  }

  // Writes every chunk that is due, or waits for the first to fall due (or a stall to end).
  void Write(Pipe& p) {
    if (closed_ || p.writing_chunks > 0 || p.waiting) return;
    if (p.held.empty()) {
      if (p.eof && !p.eof_passed) {
        p.eof_passed = true;
        ErrorCode ignored;
        p.to.shutdown(tcp::socket::shutdown_send, ignored);
        if (up_.eof_passed && down_.eof_passed) Close(/*reset=*/false);
      }
      return;
    }
    const SteadyClock::time_point now = SteadyClock::now();
    if (shared_->stalled.load() || now < p.held.front().due) {
      p.waiting = true;
      p.timer.expires_at(shared_->stalled.load() ? SteadyClock::time_point::max()
                                                 : p.held.front().due);
      p.timer.async_wait([self = shared_from_this(), &p](const ErrorCode&) {
        p.waiting = false;
        self->Write(p);  // woken early (Stall(false), Close) or due: look again
      });
      return;
    }
    std::vector<asio::const_buffer> buffers;
    for (const Pipe::Chunk& c : p.held) {
      if (c.due > now || buffers.size() == 64) break;
      buffers.push_back(asio::buffer(c.bytes));
    }
    p.writing_chunks = buffers.size();
    asio::async_write(p.to, buffers,
                      [self = shared_from_this(), &p](const ErrorCode& ec, size_t n) {
                        const size_t chunks = std::exchange(p.writing_chunks, 0);
                        if (self->closed_) return;
                        if (ec) {
                          self->Close(/*reset=*/true);
                          return;
                        }
                        p.held_bytes -= n;
                        p.held.erase(p.held.begin(), p.held.begin() + chunks);
                        self->Read(p);  // it may have paused at the cap
                        self->Write(p);
                      });
  }

  Shared* const shared_;
  tcp::socket client_;
  tcp::socket target_;
  Pipe up_;    // client -> target
  Pipe down_;  // target -> client
  bool closed_ = false;
};

}  // namespace

struct TcpProxy::Impl {
  // Destroyed last: connections that the io_context's destruction frees still count in it.
  Shared shared;
  asio::io_context io;
  asio::executor_work_guard<asio::io_context::executor_type> work{io.get_executor()};
  tcp::acceptor acceptor{io};
  tcp::resolver::results_type target;
  std::vector<std::weak_ptr<Connection>> connections;  // io thread only
  std::thread thread;

  void Accept() {
    acceptor.async_accept([this](const ErrorCode& ec, tcp::socket socket) {
      if (!acceptor.is_open()) return;  // shutting down
      if (!ec) {
        shared.accepted.fetch_add(1);
        ErrorCode ignored;
        socket.set_option(tcp::no_delay(true), ignored);
        auto connection = std::make_shared<Connection>(&shared, std::move(socket));
        std::erase_if(connections, [](const std::weak_ptr<Connection>& c) { return c.expired(); });
        connections.push_back(connection);
        connection->Start(target);
      }
      Accept();
    });
  }

  // Runs `f` on every live connection, on the io thread.
  template <typename F>
  void PostToAll(F f) {
    asio::post(io, [this, f] {
      for (const std::weak_ptr<Connection>& weak : connections) {
        if (std::shared_ptr<Connection> c = weak.lock()) f(*c);
      }
    });
  }
};

absl::StatusOr<std::unique_ptr<TcpProxy>> TcpProxy::Start(const std::string& target_host,
                                                          int target_port) {
  if (target_port < 1 || target_port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("TcpProxy: target port ", target_port, " is outside [1, 65535]"));
  }
  auto impl = std::make_unique<Impl>();
  ErrorCode ec;
  tcp::resolver resolver(impl->io);
  impl->target = resolver.resolve(target_host, std::to_string(target_port), ec);
  if (ec) {
    return absl::UnavailableError(
        absl::StrCat("TcpProxy: cannot resolve target '", target_host, "': ", ec.message()));
  }
  const tcp::endpoint listen_on(asio::ip::address_v4::loopback(), 0);
  impl->acceptor.open(listen_on.protocol(), ec);
  if (!ec) impl->acceptor.bind(listen_on, ec);
  if (!ec) impl->acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) {
    return absl::UnavailableError(
        absl::StrCat("TcpProxy: cannot listen on 127.0.0.1:0: ", ec.message()));
  }
  const int port = impl->acceptor.local_endpoint(ec).port();
  if (ec) return absl::UnavailableError(absl::StrCat("TcpProxy: ", ec.message()));
  impl->Accept();
  Impl* raw = impl.get();
  raw->thread = std::thread([raw] { raw->io.run(); });
  return std::unique_ptr<TcpProxy>(new TcpProxy(std::move(impl), port));
}

TcpProxy::TcpProxy(std::unique_ptr<Impl> impl, int port) : impl_(std::move(impl)), port_(port) {}

TcpProxy::~TcpProxy() {
  Impl* impl = impl_.get();
  asio::post(impl->io, [impl] {
    ErrorCode ignored;
    impl->acceptor.close(ignored);
    for (const std::weak_ptr<Connection>& weak : impl->connections) {
      if (std::shared_ptr<Connection> c = weak.lock()) c->Close(/*reset=*/true);
    }
  });
  // Every operation ends once its socket, timer or acceptor is closed: run() then returns.
  impl->work.reset();
  impl->thread.join();
}

std::string TcpProxy::address() const { return absl::StrCat("127.0.0.1:", port_); }

void TcpProxy::SetUpDelay(absl::Duration delay) {
  impl_->shared.up_delay_ns.store(std::max<int64_t>(0, absl::ToInt64Nanoseconds(delay)));
}

void TcpProxy::CorruptDownByte(uint64_t nth) { impl_->shared.corrupt_down_at.store(nth); }

void TcpProxy::SetDownDelay(absl::Duration delay) {
  impl_->shared.down_delay_ns.store(std::max<int64_t>(0, absl::ToInt64Nanoseconds(delay)));
}

void TcpProxy::Stall(bool stalled) {
  impl_->shared.stalled.store(stalled);
  if (!stalled) impl_->PostToAll([](Connection& c) { c.WakeWriters(); });
}

void TcpProxy::ResetAll() {
  impl_->PostToAll([](Connection& c) { c.Close(/*reset=*/true); });
}

TcpProxy::Counters TcpProxy::counters() const {
  const Shared& s = impl_->shared;
  return {s.accepted.load(), s.open.load(), s.bytes_up.load(), s.bytes_down.load()};
}

}  // namespace profctl::testkit
