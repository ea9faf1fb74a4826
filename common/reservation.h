// Who goes first when two captures want the same agents (wait-die, docs/life-of-a-capture.md):
// each session's reservations carry one priority, the same at every agent; an agent that refuses
// a reservation because another session holds one says whose priority holds it, and the
// coordinator of the older session waits for it while the younger one gives up whole. Waits only
// ever go from an older session to a younger one, so no cycle of waits (no deadlock) can form.
#ifndef PROFCTL_COMMON_RESERVATION_H_
#define PROFCTL_COMMON_RESERVATION_H_

#include <cstdint>
#include <optional>
#include <tuple>

#include "absl/status/status.h"

namespace profctl {

// A session's priority (ReservationPriority in agent.proto). Older first: the earlier start on its
// coordinator's wall clock, then the smaller ticket (random, drawn at the session's start). Unset
// (all zero): a session that cannot be ordered (an older coordinator): it never waits, and one
// that meets its reservation gives up.
struct ReservationPriority {
  int64_t session_start_ns = 0;
  uint64_t ticket = 0;

  bool set() const { return session_start_ns != 0 || ticket != 0; }
  // Strictly older than `other`; false when either is unset or both are equal.
  bool OlderThan(const ReservationPriority& other) const {
    if (!set() || !other.set()) return false;
    return std::tie(session_start_ns, ticket) < std::tie(other.session_start_ns, other.ticket);
  }
  friend bool operator==(const ReservationPriority& a, const ReservationPriority& b) {
    return a.session_start_ns == b.session_start_ns && a.ticket == b.ticket;
  }
};

// An agent refused a reservation because another session's reservation (not a running capture)
// holds its slot: that reservation's priority and how long it has left at most.
struct ReservationConflict {
  ReservationPriority holder;
  int64_t remaining_ms = 0;
};

// `status` (ALREADY_EXISTS) with `conflict` attached as a payload: it travels with the status
// through StatusOr and callbacks (AgentService.GetInfo carries it on the wire as trailing metadata
// kReservationConflictMetadataKey, a serialized profctl.v1.ReservationConflict).
absl::Status WithReservationConflict(absl::Status status, const ReservationConflict& conflict);
// The conflict attached to `status`, if any.
std::optional<ReservationConflict> ReservationConflictOf(const absl::Status& status);

inline constexpr char kReservationConflictMetadataKey[] = "profctl-reservation-conflict-bin";

}  // namespace profctl

#endif  // PROFCTL_COMMON_RESERVATION_H_
