// Times a TCP handshake with a peer's host, on a connection of its own that sends nothing and is
// closed at once. The peer's kernel answers the handshake even when the peer's process is frozen
// (SIGSTOP, a debugger, a paused container), so a peer whose host answered in r but whose process
// has not answered HTTP/2 in many r is frozen or stuck, not behind a slow link: a slow link's
// handshake takes its round trip too (PreparePhase uses this to stop waiting for a frozen host).
//
// Every probe of one HandshakeProber runs on the prober's one thread (Boost.Asio: a connect and a
// timer, no thread blocked per probe), so a pod of thousands of silent hosts costs no thread each.
// Only IP literals are probed (a name would need a resolver call that cannot be interrupted, and
// a probe must end at once when its client goes); for a name Start answers UNIMPLEMENTED.
#ifndef PROFCTL_COORDINATOR_CLIENTS_HANDSHAKE_PROBE_H_
#define PROFCTL_COORDINATOR_CLIENTS_HANDSHAKE_PROBE_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/functional/any_invocable.h"
#include "absl/status/statusor.h"
#include "common/clock.h"

namespace profctl::coordinator {

// The thread every HandshakeProbe made with it runs on. Must outlive its probes; its destructor
// drops what is still queued (its probes are gone by then).
class HandshakeProber {
 public:
  // `clock` (not owned; must outlive the prober) times each handshake on MonoNs.
  explicit HandshakeProber(const Clock* clock);
  ~HandshakeProber();
  HandshakeProber(const HandshakeProber&) = delete;
  HandshakeProber& operator=(const HandshakeProber&) = delete;

  struct Impl;
  Impl& impl() { return *impl_; }

 private:
  std::unique_ptr<Impl> impl_;
};

class HandshakeProbe {
 public:
  // The handshake's time in nanoseconds, or why there is none: UNAVAILABLE (refused, no route),
  // DEADLINE_EXCEEDED (no answer within the timeout), UNIMPLEMENTED (not an IP literal),
  // CANCELLED (the probe was destroyed first), FAILED_PRECONDITION (Start was called before).
  using Done = absl::AnyInvocable<void(absl::StatusOr<int64_t>) &&>;

  HandshakeProbe(HandshakeProber* prober, std::string host, int port);
  // Ends a probe in flight: its `done` gets CANCELLED, on the prober's thread, before this
  // returns. Must not run on the prober's thread (inside a `done`).
  ~HandshakeProbe();
  HandshakeProbe(const HandshakeProbe&) = delete;
  HandshakeProbe& operator=(const HandshakeProbe&) = delete;

  // Starts the one probe; `done` runs once, on the prober's thread (or inline, for an address
  // that is not an IP literal, or a second Start).
  void Start(int64_t timeout_ms, Done done);

 private:
  struct State;
  HandshakeProber* prober_;
  std::string host_;
  int port_;
  std::shared_ptr<State> state_;  // set by Start
};

}  // namespace profctl::coordinator

#endif  // PROFCTL_COORDINATOR_CLIENTS_HANDSHAKE_PROBE_H_
