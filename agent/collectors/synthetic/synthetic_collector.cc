#include "agent/collectors/synthetic/synthetic_collector.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/clock.h"

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

namespace {

int64_t StepBytes(const std::vector<synthetic::StepPlan>& step) {
  int64_t bytes = static_cast<int64_t>(sizeof(std::vector<synthetic::StepPlan>) +
                                       step.capacity() * sizeof(synthetic::StepPlan));
  for (const synthetic::StepPlan& p : step) {
    bytes += static_cast<int64_t>((p.host_calls.capacity() + p.device_ops.capacity()) *
                                  sizeof(synthetic::StepPlan::Op));
  }
  return bytes;
}

}  // namespace

std::vector<synthetic::StepPlan> SyntheticCollector::PlanStep(int64_t k) const {
  std::vector<synthetic::StepPlan> step;
  step.reserve(static_cast<size_t>(job_.config().gpus));
  for (int64_t g = 0; g < job_.config().gpus; ++g) {
    step.push_back(job_.Plan(k, job_.config().rank, g));
    step.back().host_calls.shrink_to_fit();
    step.back().device_ops.shrink_to_fit();
  }
  return step;
}

absl::Status SyntheticCollector::StartRecorder(const RecorderLimits& limits, int64_t now_wall_ns) {
  if (limits.keep_ns <= 0 || limits.max_bytes <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("synthetic flight recorder: keep ",
                                                   limits.keep_ns, " ns and ", limits.max_bytes,
                                                   " bytes must both be positive"));
  }
  absl::MutexLock lock(&recorder_mu_);
  ring_ = std::make_unique<FlightRing<Step>>(limits.keep_ns, limits.max_bytes);
  recorder_start_ns_ = now_wall_ns;
  // The step running now started before the recorder: the first whole step is the next one.
  next_step_ = job_.StepIndexAt(now_wall_ns - job_.config().clock_skew_ns) + 1;
  return absl::OkStatus();
}

bool SyntheticCollector::Recording() const {
  absl::MutexLock lock(&recorder_mu_);
  return ring_ != nullptr;
}

void SyntheticCollector::RecordUntil(int64_t now_wall_ns) {
  absl::MutexLock lock(&recorder_mu_);
  if (ring_ == nullptr) return;
  const int64_t skew = job_.config().clock_skew_ns;
  const int64_t t = now_wall_ns - skew;
  // Step k has ended when k + 1 started (a hung step never ends: StepIndexAt stays at it).
  const int64_t last = job_.StepIndexAt(t) - 1;
  // Steps the ring would evict at once for their age are not planned at all.
  const int64_t first = std::max(next_step_, job_.StepIndexAt(t - ring_->keep_ns()));
  for (int64_t k = first; k <= last; ++k) {
    Step step = PlanStep(k);
    const int64_t bytes = StepBytes(step);
    ring_->Push(job_.StepStartNs(k) + skew, job_.StepStartNs(k + 1) + skew, bytes, std::move(step));
  }
  next_step_ = std::max(next_step_, last + 1);
}

absl::Status SyntheticCollector::Snapshot(int64_t from_wall_ns, int64_t to_wall_ns,
                                          tensorflow::profiler::XSpace* space) {
  if (to_wall_ns <= from_wall_ns) {
    return absl::InvalidArgumentError(
        absl::StrCat("synthetic snapshot: empty window ", from_wall_ns, "..", to_wall_ns, " ns"));
  }
  RecordUntil(to_wall_ns);
  const int64_t skew = job_.config().clock_skew_ns;
  std::vector<Step> steps;
  int64_t since = 0;
  {
    absl::MutexLock lock(&recorder_mu_);
    if (ring_ == nullptr) {
      return absl::FailedPreconditionError("synthetic: the flight recorder is not running");
    }
    steps = ring_->Between(from_wall_ns, to_wall_ns);
    since = ring_->stats().oldest_start_ns;
    // The step in progress, as far as it went: the writer keeps its events that ended by `to`.
    const int64_t open = job_.StepIndexAt(to_wall_ns - skew);
    const int64_t open_start = job_.StepStartNs(open) + skew;
    if (open_start >= recorder_start_ns_ && open_start < to_wall_ns &&
        (steps.empty() || steps.back().front().index < open)) {
      steps.push_back(PlanStep(open));
      if (since == 0) since = open_start;
    }
  }
  job_.WriteSteps(steps, from_wall_ns - skew, to_wall_ns - skew, space);
  {
    absl::MutexLock lock(&shortfalls_mu_);
    shortfalls_.clear();
    if (since == 0 || since > from_wall_ns) {
      shortfalls_.push_back(
          ShortRecorderShortfall(from_wall_ns, to_wall_ns, since == 0 ? to_wall_ns : since));
    }
  }
  if (since == 0 || since > from_wall_ns) {
    const int64_t held_ms = since == 0 ? 0 : (to_wall_ns - since) / kNanosPerMilli;
    space->add_warnings(absl::StrCat(
        "flight recorder: the synthetic collector holds the last ", held_ms, " ms only, of ",
        (to_wall_ns - from_wall_ns) / kNanosPerMilli,
        " ms asked (it started recording then, or its --flight-recorder bounds dropped the rest)"));
  }
  return absl::OkStatus();
}

void SyntheticCollector::TakeShortfalls(std::vector<profctl::v1::Shortfall>* out) {
  absl::MutexLock lock(&shortfalls_mu_);
  for (profctl::v1::Shortfall& s : shortfalls_) out->push_back(std::move(s));
  shortfalls_.clear();
}

RecorderStats SyntheticCollector::recorder_stats() const {
  absl::MutexLock lock(&recorder_mu_);
  if (ring_ == nullptr) return {};
  const FlightRingStats s = ring_->stats();
  return {
      .records = s.records, .bytes = s.bytes, .evicted = s.evicted, .since_ns = s.oldest_start_ns};
}

}  // namespace profctl::agent
