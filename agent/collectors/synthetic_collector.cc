#include "agent/collectors/synthetic_collector.h"

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

}  // namespace profctl::agent
