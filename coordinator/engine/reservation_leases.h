// The session's reservations as leases (docs/agent-protection.md, "Reservations are leases"): an
// agent holds a reservation (GetInfo with `reserve`) for a short lease from each grant or renewal
// and bounds it however long the client asks. The session renews each host's reservation
// (GetInfo with the same reservation) a fixed time after it was last granted, from the grant until
// the agent says that host's capture started (the capture then holds the slot) or the host is
// done, whatever phase the session is in: a long prepare, a host that joins late, a Capture retried
// before it reached the agent. A coordinator that dies stops renewing, and its reservations lapse
// within one lease. Internal to the engine, runs on the session's executor.
#ifndef PROFCTL_COORDINATOR_ENGINE_RESERVATION_LEASES_H_
#define PROFCTL_COORDINATOR_ENGINE_RESERVATION_LEASES_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "common/reservation.h"
#include "coordinator/clients/agent_client.h"
#include "coordinator/engine/capture_engine.h"

namespace profctl::coordinator {

class ReservationLeases {
 public:
  explicit ReservationLeases(CaptureEngine::Session& s);

  // This session's priority against other sessions' reservations (wait-die), drawn once.
  void Begin(ReservationPriority priority);
  // The reservation GetInfo asks for (empty for a dry run, which reserves nothing).
  Reservation Request() const;
  // Host `i`'s agent granted the reservation a GetInfo sent at `sent_mono` asked for (its lease
  // runs from the agent's grant, after that): the host holds it, and it is renewed
  // reservation_renew_ms after `sent_mono`.
  void Granted(size_t i, int64_t sent_mono);
  // The agent says host `i`'s capture started: the capture holds the slot, nothing is renewed or
  // released any more.
  void Taken(size_t i);
  // GetInfo renewals sent so far.
  int renewals() const { return renewals_; }

 private:
  struct Host {
    // Bumped by every grant: a renewal timer or answer of an older grant is moot.
    uint64_t generation = 0;
    // When the last granted request was sent: its lease ends reservation_lease_ms after it, at
    // the earliest.
    int64_t granted_sent_mono = 0;
  };

  void Renew(size_t i, uint64_t generation);
  void OnRenewed(size_t i, uint64_t generation, int64_t sent_mono,
                 const absl::StatusOr<AgentInfo>& answer);
  // Host `i` still holds a reservation this session renews.
  bool Held(size_t i) const;

  CaptureEngine::Session& s_;
  std::vector<Host> hosts_;
  ReservationPriority priority_;
  int renewals_ = 0;
};

}  // namespace profctl::coordinator

#endif  // PROFCTL_COORDINATOR_ENGINE_RESERVATION_LEASES_H_
