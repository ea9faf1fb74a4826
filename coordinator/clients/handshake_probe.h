// Times a TCP handshake with a peer's host, on a connection of its own that sends nothing and is
// closed at once. The peer's kernel answers the handshake even when the peer's process is frozen
// (SIGSTOP, a debugger, a paused container), so a peer whose host answered in r but whose process
// has not answered HTTP/2 in many r is frozen or stuck, not behind a slow link: a slow link's
// handshake takes its round trip too (PreparePhase uses this to stop waiting for a frozen host).
//
// Only IP literals are probed (a name would need a resolver call that cannot be interrupted, and
// the probe must end at once when its client goes); for a name Start answers UNIMPLEMENTED.
#ifndef PROFCTL_COORDINATOR_CLIENTS_HANDSHAKE_PROBE_H_
#define PROFCTL_COORDINATOR_CLIENTS_HANDSHAKE_PROBE_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/functional/any_invocable.h"
#include "absl/status/statusor.h"
#include "common/clock.h"

namespace profctl::coordinator {

class HandshakeProbe {
 public:
  // The handshake's time in nanoseconds, or why there is none: UNAVAILABLE (refused, no route),
  // DEADLINE_EXCEEDED (no answer within the timeout), UNIMPLEMENTED (not an IP literal),
  // CANCELLED (the probe was destroyed first), FAILED_PRECONDITION (Start was called before).
  using Done = absl::AnyInvocable<void(absl::StatusOr<int64_t>) &&>;

  // `clock` (not owned; must outlive the probe) times the handshake on MonoNs.
  HandshakeProbe(std::string host, int port, const Clock* clock);
  // Ends a probe in flight (its `done` gets CANCELLED before this returns) and waits for its
  // thread.
  ~HandshakeProbe();
  HandshakeProbe(const HandshakeProbe&) = delete;
  HandshakeProbe& operator=(const HandshakeProbe&) = delete;

  // Starts the one probe on a thread of its own; `done` runs on that thread (or inline, for an
  // address that is not an IP literal, or a second Start).
  void Start(int64_t timeout_ms, Done done);

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace profctl::coordinator

#endif  // PROFCTL_COORDINATOR_CLIENTS_HANDSHAKE_PROBE_H_
