// One host's prepare round: GetInfo, then clock samples on the connected channel until the best
// round trip stops improving. Pure state over the answers (prepare_round_test.cc); the session
// sends the RPCs, keeps the timers and decides retries.
#ifndef PROFCTL_COORDINATOR_ENGINE_PREPARE_ROUND_H_
#define PROFCTL_COORDINATOR_ENGINE_PREPARE_ROUND_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "coordinator/clients/agent_client.h"
#include "coordinator/engine/clock_sync.h"
#include "profctl/v1/session.pb.h"

namespace profctl::coordinator {

class PrepareRound {
 public:
  struct Rules {
    int max_samples = 5;  // at most this many (at least 1)
    // Enough once this many were taken and the last two did not beat the best round trip (a
    // quiet path: more samples would only cost every host round trips). A noisy path gets all.
    int min_samples = 3;
  };

  PrepareRound() = default;
  // `measures_clock` false: a peer whose clock cannot be asked (a TSL server) is ready once
  // GetInfo answers.
  PrepareRound(bool measures_clock, const Rules& rules);

  // What an answer did.
  struct Step {
    bool answered = false;     // it succeeded: the host is alive
    bool sample_next = false;  // take a clock sample now
  };
  // GetInfo's answer. The clock samples start after it, on a connected channel: a sample sent
  // beside the first RPC waits for the connection too, so it could never be the best one.
  Step OnInfo(absl::StatusOr<AgentInfo> info);
  Step OnSample(const absl::StatusOr<ClockReading>& reading);

  enum class State { kWaiting, kFailed, kReady };
  struct Verdict {
    State state = State::kWaiting;
    // With kFailed: FAILURE_STEP_GET_INFO or FAILURE_STEP_CLOCK_SYNC, and the error.
    profctl::v1::FailureStep step = profctl::v1::FAILURE_STEP_UNSPECIFIED;
    absl::Status status;
  };
  // Failed as soon as the cause is known (GetInfo refused, or every sample failed); otherwise
  // ready once both GetInfo and the clock samples are done.
  Verdict Decide() const;

  // Clock samples still to take at most (0 once done or hopeless), and those answered so far.
  int samples_left() const { return samples_left_; }
  int samples_answered() const { return sampler_.empty() ? 0 : sampler_.best().samples; }
  bool measures_clock() const { return measures_clock_; }
  bool info_done() const { return info_done_; }
  const AgentInfo& info() const { return info_; }
  // The best sample; meaningful once ready with measures_clock().
  const ClockOffset& best() const { return sampler_.best(); }

 private:
  Rules rules_;
  bool measures_clock_ = true;
  bool info_done_ = false;
  absl::Status info_status_;
  AgentInfo info_;
  int samples_left_ = 0;
  int samples_without_improvement_ = 0;
  ClockSampler sampler_;
  absl::Status last_sample_error_;
};

}  // namespace profctl::coordinator

#endif  // PROFCTL_COORDINATOR_ENGINE_PREPARE_ROUND_H_
