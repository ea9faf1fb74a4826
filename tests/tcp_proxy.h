// A TCP proxy for tests: a network path whose delay, stalls and resets the test controls.
//
// This kernel has no tc/netem, so tests that need an asymmetric or misbehaving network between
// the coordinator and real agent processes put a TcpProxy in between: it listens on
// 127.0.0.1:<ephemeral port> and forwards every accepted connection to one target host:port,
// byte for byte, full duplex, for any number of concurrent connections (gRPC's HTTP/2 included).
//
// Knobs (thread-safe, settable at any time, affecting every connection, open or future):
//   - Per-direction delay: every chunk of bytes read from one side is written to the other no
//     earlier than `delay` after it was read, measured on the real steady clock (that is the
//     point: it shapes real round trips). "up" is client -> target, "down" is target -> client.
//     Byte order is preserved: a chunk never overtakes an earlier one, so lowering a delay takes
//     effect once the chunks already held have gone.
//   - Stall(true) holds every byte in both directions (connections stay open, new ones are still
//     accepted and connected); Stall(false) releases what was held, subject to the delays.
//   - ResetAll() closes every open connection on both sides with a TCP RST (SO_LINGER 0),
//     dropping what was held; later connections work normally.
//   - CorruptDownByte(n) flips a bit of the n-th byte the target sends (a corrupting link).
// Once a direction of a connection holds kMaxHeldBytes, the proxy stops reading that side (TCP
// flow control then pushes back on the sender) until bytes drain: memory stays bounded.
//
// A side that closes its write half (EOF) has that half-close passed on once the bytes before it
// were delivered; a connection error on either side (or a failed connect to the target) resets
// both sides.
//
// Threading: one Boost.Asio io_context on one thread owned by the proxy runs every connection;
// the knobs and counters are atomics, safe from any thread. The destructor stops that thread and
// closes every connection.
#ifndef PROFCTL_TESTS_TCP_PROXY_H_
#define PROFCTL_TESTS_TCP_PROXY_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace profctl::testkit {

class TcpProxy {
 public:
  struct Counters {
    uint64_t connections_accepted = 0;
    uint64_t connections_open = 0;  // accepted and not yet fully closed
    // Bytes the proxy took in from clients (bound for the target) and from the target (bound
    // for clients). Counted when read, so once a peer has received N bytes through the proxy
    // the counter is at least N; bytes dropped by ResetAll still count.
    uint64_t bytes_up = 0;
    uint64_t bytes_down = 0;
  };

  static constexpr size_t kMaxHeldBytes = size_t{4} << 20;

  // Starts listening on 127.0.0.1, port 0. `target_host` is resolved once, now (a name or a
  // numeric address); INVALID_ARGUMENT for a bad port, UNAVAILABLE when the name does not
  // resolve or the listening socket cannot be set up.
  static absl::StatusOr<std::unique_ptr<TcpProxy>> Start(const std::string& target_host,
                                                         int target_port);
  ~TcpProxy();
  TcpProxy(const TcpProxy&) = delete;
  TcpProxy& operator=(const TcpProxy&) = delete;

  // The listening port, and "127.0.0.1:<port>" to give to clients.
  int port() const { return port_; }
  std::string address() const;

  void SetUpDelay(absl::Duration delay);
  void SetDownDelay(absl::Duration delay);
  void Stall(bool stalled);
  void ResetAll();
  // Flips one bit of the nth byte (1-based, counted like Counters::bytes_down) sent from the
  // target to a client: a link that corrupts. One-shot; 0 cancels.
  void CorruptDownByte(uint64_t nth);

  Counters counters() const;

 private:
  struct Impl;
  explicit TcpProxy(std::unique_ptr<Impl> impl, int port);

  std::unique_ptr<Impl> impl_;
  int port_;
};

}  // namespace profctl::testkit

#endif  // PROFCTL_TESTS_TCP_PROXY_H_
