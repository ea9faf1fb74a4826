#include "coordinator/clock_sync.h"

#include "absl/strings/str_cat.h"

namespace profctl::coordinator {

absl::StatusOr<ClockOffset> EstimateClockOffset(AgentClient& client, const Clock& clock,
                                                int samples, int64_t timeout_ms) {
  ClockOffset best;
  absl::Status last_error = absl::InvalidArgumentError("no clock samples requested");
  for (int i = 0; i < samples; ++i) {
    const int64_t t0_wall = clock.WallNs();
    const int64_t t0_mono = clock.MonoNs();
    absl::StatusOr<ClockReading> r = client.SyncClock(timeout_ms);
    const int64_t round_trip = clock.MonoNs() - t0_mono;
    if (!r.ok()) {
      last_error = r.status();
      continue;
    }
    const int64_t processing = r->send_ns - r->receive_ns;
    if (processing < 0 || processing > round_trip) {
      return absl::DataLossError(
          absl::StrCat("SyncClock: agent's answer is impossible (processing time ", processing,
                       " ns for a ", round_trip, " ns round trip)"));
    }
    const int64_t rtt = round_trip - processing;
    const int64_t t3_wall = t0_wall + round_trip;
    const int64_t offset = ((r->receive_ns - t0_wall) + (r->send_ns - t3_wall)) / 2;
    if (best.samples == 0 || rtt < best.rtt_ns) {
      best.offset_ns = offset;
      best.rtt_ns = rtt;
    }
    ++best.samples;
  }
  if (best.samples == 0) return last_error;
  return best;
}

}  // namespace profctl::coordinator
