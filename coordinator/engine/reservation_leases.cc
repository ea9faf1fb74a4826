#include "coordinator/engine/reservation_leases.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_format.h"
#include "common/check.h"
#include "coordinator/engine/capture_session.h"

namespace profctl::coordinator {

using Session = CaptureEngine::Session;

ReservationLeases::ReservationLeases(Session& s) : s_(s) {}

void ReservationLeases::Begin(ReservationPriority priority) {
  priority_ = priority;
  hosts_.resize(s_.hosts().size());
}

Reservation ReservationLeases::Request() const {
  if (s_.plan().prepare_only) return {};
  return {s_.plan().session, s_.session_key(), s_.options().reservation_lease_ms, priority_};
}

bool ReservationLeases::Held(size_t i) const {
  const SessionHost& h = s_.host(i);
  return h.reserved && h.stage != HostStage::kDone && h.client != nullptr && !s_.finished() &&
         !s_.releases_sent();
}

void ReservationLeases::Granted(size_t i, int64_t sent_mono) {
  PROFCTL_DCHECK_ON_SEQUENCE(s_.ex());
  Host& l = hosts_[i];
  s_.host(i).reserved = true;
  l.granted_sent_mono = sent_mono;
  const uint64_t generation = ++l.generation;
  if (s_.options().reservation_renew_ms <= 0) return;
  s_.PostAt(sent_mono + s_.options().reservation_renew_ms * kNanosPerMilli,
            [i, generation](Session& s) { s.leases().Renew(i, generation); });
}

void ReservationLeases::Taken(size_t i) {
  ++hosts_[i].generation;  // its renewals are moot
  s_.host(i).reserved = false;
}

void ReservationLeases::Renew(size_t i, uint64_t generation) {
  PROFCTL_DCHECK_ON_SEQUENCE(s_.ex());
  if (hosts_[i].generation != generation || !Held(i)) return;
  ++renewals_;
  const int64_t sent = s_.NowMono();
  // Answered within what is left of the lease, or it no longer matters.
  const int64_t timeout_ms = std::max<int64_t>(
      1, (hosts_[i].granted_sent_mono + s_.options().reservation_lease_ms * kNanosPerMilli - sent) /
             kNanosPerMilli);
  s_.host(i).client->GetInfo(
      Request(), timeout_ms,
      s_.Bind([i, generation, sent](Session& s, const absl::StatusOr<AgentInfo>& answer) {
        s.leases().OnRenewed(i, generation, sent, answer);
      }));
}

void ReservationLeases::OnRenewed(size_t i, uint64_t generation, int64_t sent_mono,
                                  const absl::StatusOr<AgentInfo>& answer) {
  PROFCTL_DCHECK_ON_SEQUENCE(s_.ex());
  Host& l = hosts_[i];
  if (l.generation != generation || !Held(i)) return;
  if (answer.ok()) {
    Granted(i, sent_mono);
    return;
  }
  SessionHost& h = s_.host(i);
  const int64_t lease_end =
      l.granted_sent_mono + s_.options().reservation_lease_ms * kNanosPerMilli;
  if (answer.status().code() == absl::StatusCode::kAlreadyExists || s_.NowMono() >= lease_end) {
    // Another session holds the agent now, or the lease ran out unrenewed: nothing to renew or
    // release; the host's Capture finds out whether the slot is still free.
    ++l.generation;
    h.reserved = false;
    s_.Progress(absl::StrFormat("%s: its reservation lapsed (renewal: %s)", h.r.address(),
                                answer.status().message()));
    return;
  }
  // Not reached (down, slow): again soon, while the lease may still hold.
  const int64_t at = std::min(s_.NowMono() + s_.options().retry_initial_backoff_ms * kNanosPerMilli,
                              lease_end - kNanosPerMilli);
  s_.PostAt(at, [i, generation](Session& s) { s.leases().Renew(i, generation); });
}

}  // namespace profctl::coordinator
