#include "coordinator/engine/prepare_round.h"

#include <algorithm>
#include <utility>

namespace profctl::coordinator {

PrepareRound::PrepareRound(bool measures_clock, const Rules& rules)
    : rules_(rules),
      measures_clock_(measures_clock),
      samples_left_(measures_clock ? std::max(1, rules.max_samples) : 0) {}

PrepareRound::Step PrepareRound::OnInfo(absl::StatusOr<AgentInfo> info) {
  Step step;
  info_done_ = true;
  if (info.ok()) {
    step.answered = true;
    info_ = *std::move(info);
  } else {
    info_status_ = info.status();
  }
  step.sample_next = info_status_.ok() && samples_left_ > 0;
  return step;
}

PrepareRound::Step PrepareRound::OnSample(const absl::StatusOr<ClockReading>& reading) {
  Step step;
  --samples_left_;
  absl::StatusOr<ClockOffset> sample =
      reading.ok() ? OffsetFromReading(*reading) : reading.status();
  if (sample.ok()) {
    step.answered = true;
    const bool improves = sampler_.empty() || sample->rtt_ns < sampler_.best().rtt_ns;
    samples_without_improvement_ = improves ? 0 : samples_without_improvement_ + 1;
    sampler_.Add(*sample);
  } else {
    last_sample_error_ = sample.status();
  }
  const bool settled =
      sampler_.best().samples >= rules_.min_samples && samples_without_improvement_ >= 2;
  // An agent that refuses the connection will not answer the next sample either.
  const bool hopeless =
      sampler_.empty() && !sample.ok() && sample.status().code() == absl::StatusCode::kUnavailable;
  step.sample_next = samples_left_ > 0 && !hopeless && !settled;
  if (!step.sample_next) samples_left_ = 0;
  return step;
}

PrepareRound::Verdict PrepareRound::Decide() const {
  if (info_done_ && !info_status_.ok()) {
    return {State::kFailed, profctl::v1::FAILURE_STEP_GET_INFO, info_status_};
  }
  if (samples_left_ != 0 || !info_done_) return {};
  if (measures_clock_ && sampler_.empty()) {
    return {State::kFailed, profctl::v1::FAILURE_STEP_CLOCK_SYNC, last_sample_error_};
  }
  return {State::kReady, profctl::v1::FAILURE_STEP_UNSPECIFIED, absl::OkStatus()};
}

}  // namespace profctl::coordinator
