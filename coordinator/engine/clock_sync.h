// Clock-offset estimation against one agent (Cristian / NTP style), as pure functions over the
// round trips the engine collects asynchronously.
//
// One sample: the caller stamps t0 when the request leaves and t3 when the reply arrives (its
// wall clock); the agent answers its receive (t1) and send (t2) wall times. With
// rtt = (t3 - t0) - (t2 - t1), offset = ((t1 - t0) + (t2 - t3)) / 2 is agent_clock -
// coordinator_clock, good to +- rtt/2 whatever the path's asymmetry. The sample with the smallest
// rtt wins.
//
// Agent stamps are untrusted input: a reading is rejected unless every stamp lies in
// [0, kMaxStampNs] and the offset within +-kMaxClockOffsetNs, so translating instants between
// clocks can never overflow int64.
#ifndef PROFCTL_COORDINATOR_ENGINE_CLOCK_SYNC_H_
#define PROFCTL_COORDINATOR_ENGINE_CLOCK_SYNC_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/clock.h"
#include "coordinator/clients/agent_client.h"

namespace profctl::coordinator {

// session.json's clock.method before alignment: measured by SyncClock round trips, or not
// measurable (a TSL profiler server: AgentClient::MeasuresClock() is false). Align may turn an
// unmeasured one into "steps", and either into "collectives".
inline constexpr absl::string_view kClockMethodRtt = "rtt";
inline constexpr absl::string_view kClockMethodUnmeasured = "unmeasured";
// An unmeasured clock placed by matching step numbers with a measured host (alignment.h
// OffsetFromSteps), not (yet) refined by collectives.
inline constexpr absl::string_view kClockMethodSteps = "steps";
// An unmeasured clock is assumed to agree with the coordinator's within this (NTP-synced
// hosts): its clock.uncertainty_ns until step numbers place it.
inline constexpr int64_t kUnmeasuredClockBoundNs = 1'000'000'000;

// 2^62 ns since the epoch is the year 2116.
inline constexpr int64_t kMaxStampNs = int64_t{1} << 62;
// An agent whose clock is off by more than a year is broken, or lying.
inline constexpr int64_t kMaxClockOffsetNs = int64_t{366} * 24 * 3600 * kNanosPerSecond;

struct ClockOffset {
  int64_t offset_ns = 0;  // agent - coordinator
  int64_t rtt_ns = 0;
  int samples = 0;  // successful samples
  // The offset is exact to within this (half the round trip, rounded up).
  int64_t uncertainty_ns() const { return (rtt_ns + 1) / 2; }
};

// One reading -> one sample (samples = 1). DATA_LOSS naming the problem for an impossible or
// absurd answer (send before receive, processing longer than the round trip, stamps out of
// range, offset beyond a year).
absl::StatusOr<ClockOffset> OffsetFromReading(const ClockReading& r);

// Keeps the best (smallest-rtt) of the samples added and counts them.
class ClockSampler {
 public:
  void Add(const ClockOffset& sample);
  bool empty() const { return best_.samples == 0; }
  const ClockOffset& best() const { return best_; }

 private:
  ClockOffset best_;
};

}  // namespace profctl::coordinator

#endif  // PROFCTL_COORDINATOR_ENGINE_CLOCK_SYNC_H_
