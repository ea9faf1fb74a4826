#include "agent/collectors/synthetic/synthetic_collector.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace profctl::agent {

absl::Status SyntheticCollector::Prepare(const CaptureOptions& /*options*/) {
  start_ns_ = stop_ns_ = 0;
  running_ = false;
  return absl::OkStatus();
}

absl::Status SyntheticCollector::Start(int64_t wall_ns) {
  start_ns_ = wall_ns;
  running_ = true;
  return absl::OkStatus();
}

absl::Status SyntheticCollector::Stop(int64_t wall_ns) {
  if (!running_) return absl::FailedPreconditionError("synthetic collector: Stop before Start");
  stop_ns_ = wall_ns;
  running_ = false;
  return absl::OkStatus();
}

absl::Status SyntheticCollector::Collect(tensorflow::profiler::XSpace* space) {
  if (running_ || stop_ns_ < start_ns_) {
    return absl::FailedPreconditionError("synthetic collector: Collect before Stop");
  }
  const int64_t skew = job_.config().clock_skew_ns;
  job_.Generate(start_ns_ - skew, stop_ns_ - skew, space);
  return absl::OkStatus();
}

void SyntheticCollector::RecentSteps(int64_t since_wall_ns, int64_t now_wall_ns, size_t max,
                                     std::vector<StepSample>* out) const {
  if (max == 0 || now_wall_ns <= since_wall_ns) return;
  const int64_t skew = job_.config().clock_skew_ns;
  // Step k ends when k + 1 starts. The step running at `since` is the first to end after it; the
  // one before the step running at `now` is the last to have ended.
  const int64_t last = job_.StepIndexAt(now_wall_ns - skew) - 1;
  int64_t first = job_.StepIndexAt(since_wall_ns - skew);
  if (last < first) return;
  first = std::max(first, last - static_cast<int64_t>(std::min<size_t>(max, 1 << 20)) + 1);
  constexpr int64_t kStepNumModulus = 1'000'000;
  for (int64_t k = first; k <= last; ++k) {
    out->push_back({.end_wall_ns = job_.StepStartNs(k + 1) + skew,
                    .duration_ns = job_.PeriodNs(k),
                    .step_num = ((k % kStepNumModulus) + kStepNumModulus) % kStepNumModulus,
                    .source = std::string(kSyntheticCollector)});
  }
}

}  // namespace profctl::agent
