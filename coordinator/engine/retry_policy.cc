#include "coordinator/engine/retry_policy.h"

#include <algorithm>

#include "common/clock.h"

namespace profctl::coordinator {

bool Retryable(absl::StatusCode code) {
  switch (code) {
    case absl::StatusCode::kUnavailable:
    case absl::StatusCode::kDeadlineExceeded:
    case absl::StatusCode::kAlreadyExists:
    case absl::StatusCode::kDataLoss:
    case absl::StatusCode::kInternal:  // gRPC reports some broken HTTP/2 streams so
    case absl::StatusCode::kUnknown:
      return true;
    default:
      return false;
  }
}

RetryBackoff::RetryBackoff(int64_t initial_ms, int64_t max_ms, uint64_t seed)
    : initial_ns_(std::max<int64_t>(1, initial_ms) * kNanosPerMilli),
      max_ns_(std::max<int64_t>(1, max_ms) * kNanosPerMilli),
      jitter_(seed != 0 ? seed : std::random_device{}()) {}

int64_t RetryBackoff::NextNs(int attempt) {
  int64_t d = initial_ns_;
  for (int i = 1; i < attempt && d < max_ns_; ++i) d *= 2;
  d = std::min(d, max_ns_);
  return std::uniform_int_distribution<int64_t>(d / 2, d)(jitter_);
}

int64_t RetryBackoff::NextNs(int attempt, int64_t spread_ns) {
  const int64_t plain = NextNs(attempt);
  if (spread_ns <= 0) return plain;
  return std::max(
      plain, std::uniform_int_distribution<int64_t>(spread_ns - spread_ns / 4, spread_ns)(jitter_));
}

int64_t SpreadRetryNs(int64_t time_left_ns, int retries_left) {
  if (time_left_ns <= 0 || retries_left <= 0) return 0;
  const int shares = std::min(retries_left + 1, 62);
  return time_left_ns / ((int64_t{1} << shares) - 1);
}

bool SpreadRetryWanted(absl::StatusCode code) { return code == absl::StatusCode::kUnavailable; }

bool PrepareRetryWanted(absl::StatusCode code, bool cancelled, int round, int retries) {
  return code == absl::StatusCode::kUnavailable && !cancelled && round <= retries;
}

bool PrepareRetryFits(int64_t at, const PrepareRetryWindow& w) {
  if (at >= w.deadline) return false;
  return w.preparing ? (w.late_capture || at < w.prepare_deadline) : at < w.window_end;
}

CaptureFailureVerdict JudgeCaptureFailure(const CaptureFailure& f) {
  CaptureFailureVerdict v;
  v.retryable = Retryable(f.code);
  v.agent_may_hold = f.agent_may_hold;
  if (f.fetching &&
      (f.code == absl::StatusCode::kNotFound || f.code == absl::StatusCode::kUnimplemented)) {
    v.agent_may_hold = false;
    v.retryable = true;  // record it again, if there is still time
  } else if (!f.fetching) {
    // Refusals (busy, over its memory cap, a bad request) mean it did not take the session.
    v.agent_may_hold = Retryable(f.code) && f.code != absl::StatusCode::kAlreadyExists;
    v.capture_error = true;
  }
  // The agent's own "not now" (memory held over its cap), not our limit on a trace's size.
  if (f.code == absl::StatusCode::kResourceExhausted && !f.header_seen) v.retryable = true;
  v.fetch = v.agent_may_hold && f.can_fetch;
  return v;
}

int64_t RecordCutoff(profctl::v1::LatePolicy late, int64_t window_start, int64_t window_end,
                     int64_t tolerance_ns) {
  return late == profctl::v1::LATE_POLICY_FAIL ? window_start + tolerance_ns : window_end;
}

bool CaptureRetryFits(int64_t at, bool fetch, bool cancelled, int64_t deadline,
                      int64_t record_cutoff) {
  return at < deadline && (fetch || (!cancelled && at < record_cutoff));
}

}  // namespace profctl::coordinator
