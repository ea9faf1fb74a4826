// Clock-offset estimation against one agent (Cristian / NTP style).
//
// Each sample: coordinator stamps t0 (wall) before the SyncClock call and measures the round trip
// on its monotonic clock; the agent answers its receive (t1) and send (t2) wall times. With
// rtt = round trip - (t2 - t1) and t3 = t0 + round trip, offset = ((t1 - t0) + (t2 - t3)) / 2 is
// agent_clock - coordinator_clock, good to +- rtt/2. The sample with the smallest rtt wins.
#ifndef PROFCTL_COORDINATOR_CLOCK_SYNC_H_
#define PROFCTL_COORDINATOR_CLOCK_SYNC_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "common/clock.h"
#include "coordinator/agent_client.h"

namespace profctl::coordinator {

struct ClockOffset {
  int64_t offset_ns = 0;  // agent - coordinator
  int64_t rtt_ns = 0;
  int samples = 0;  // successful samples
};

// Takes `samples` round trips; failed ones are skipped. Fails only when none succeeds (with the
// last error) or an answer is impossible (send before receive).
absl::StatusOr<ClockOffset> EstimateClockOffset(AgentClient& client, const Clock& clock,
                                                int samples, int64_t timeout_ms);

}  // namespace profctl::coordinator

#endif  // PROFCTL_COORDINATOR_CLOCK_SYNC_H_
