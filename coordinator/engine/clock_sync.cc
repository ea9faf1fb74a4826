#include "coordinator/engine/clock_sync.h"

#include <cstdlib>

#include "absl/strings/str_cat.h"

namespace profctl::coordinator {

absl::StatusOr<ClockOffset> OffsetFromReading(const ClockReading& r) {
  for (const int64_t t : {r.receive_ns, r.send_ns, r.local_send_ns, r.local_receive_ns}) {
    if (t < 0 || t > kMaxStampNs) {
      return absl::DataLossError(
          absl::StrCat("SyncClock: time stamp ", t, " ns is outside 0..", kMaxStampNs));
    }
  }
  const int64_t round_trip = r.local_receive_ns - r.local_send_ns;
  const int64_t processing = r.send_ns - r.receive_ns;
  if (round_trip < 0) {
    return absl::DataLossError("SyncClock: reply arrived before the request left");
  }
  if (processing < 0 || processing > round_trip) {
    return absl::DataLossError(
        absl::StrCat("SyncClock: agent's answer is impossible (processing time ", processing,
                     " ns for a ", round_trip, " ns round trip)"));
  }
  // All stamps are in [0, 2^62]: these differences and their sum cannot overflow.
  const int64_t offset = ((r.receive_ns - r.local_send_ns) + (r.send_ns - r.local_receive_ns)) / 2;
  if (std::llabs(offset) > kMaxClockOffsetNs) {
    return absl::DataLossError(absl::StrCat("SyncClock: agent's clock is off by ",
                                            offset / kNanosPerSecond,
                                            " s, more than a year: refusing to align with it"));
  }
  return ClockOffset{offset, round_trip - processing, 1};
}

void ClockSampler::Add(const ClockOffset& sample) {
  if (best_.samples == 0 || sample.rtt_ns < best_.rtt_ns) {
    best_.offset_ns = sample.offset_ns;
    best_.rtt_ns = sample.rtt_ns;
  }
  best_.samples += sample.samples;
}

}  // namespace profctl::coordinator
