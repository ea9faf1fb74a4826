#include "agent/hang_detector.h"

#include <algorithm>
#include <cmath>

namespace profctl::agent {

std::vector<StepSourceStatus> HangDetector::Poll(const CaptureManager& manager, int64_t now_ns) {
  int64_t since = 0;
  {
    absl::MutexLock lock(&mu_);
    since = polled_until_ns_ > 0 ? polled_until_ns_ : now_ns - CaptureManager::kStepSignalWindowNs;
    // A clock stepped back: take nothing twice (Observe ignores repeats anyway).
    polled_until_ns_ = std::max(polled_until_ns_, now_ns);
  }
  if (now_ns > since)
    Observe(manager.RecentSteps(since, now_ns, CaptureManager::kMaxStepSignalSamples, nullptr));
  return Status(now_ns);
}

void HangDetector::Observe(const std::vector<StepSample>& steps) {
  absl::MutexLock lock(&mu_);
  for (const StepSample& step : steps) {
    Source& s = sources_[step.source];
    if (step.end_wall_ns <= s.last_end_ns) continue;  // seen, or older than what we have
    s.durations.push_back(step.duration_ns);
    if (s.durations.size() > static_cast<size_t>(kWindow)) s.durations.pop_front();
    s.last_end_ns = step.end_wall_ns;
    s.last_step_num = step.step_num;
  }
}

std::vector<StepSourceStatus> HangDetector::Status(int64_t now_ns) const {
  absl::MutexLock lock(&mu_);
  std::vector<StepSourceStatus> out;
  out.reserve(sources_.size());
  for (const auto& [name, s] : sources_) {
    StepSourceStatus st{.source = name,
                        .last_step_end_ns = s.last_end_ns,
                        .last_step_num = s.last_step_num,
                        .since_step_end_ns = std::max<int64_t>(0, now_ns - s.last_end_ns),
                        .steps = static_cast<int>(s.durations.size())};
    if (s.durations.size() >= static_cast<size_t>(kMinSteps)) {
      std::vector<int64_t> d(s.durations.begin(), s.durations.end());
      const auto mid = d.begin() + static_cast<std::ptrdiff_t>(d.size() / 2);
      std::nth_element(d.begin(), mid, d.end());
      st.median_step_ns = *mid;
      st.stalled = st.median_step_ns > 0 && static_cast<double>(st.since_step_end_ns) >
                                                factor_ * static_cast<double>(st.median_step_ns);
    }
    out.push_back(std::move(st));
  }
  return out;
}

std::vector<StepSourceStatus> Stalled(const std::vector<StepSourceStatus>& status) {
  std::vector<StepSourceStatus> out;
  std::copy_if(status.begin(), status.end(), std::back_inserter(out),
               [](const StepSourceStatus& s) { return s.stalled; });
  return out;
}

void AddStepSamples(const std::vector<StepSample>& steps,
                    profctl::v1::GetStepSignalResponse* response) {
  for (const StepSample& step : steps) {
    profctl::v1::StepSignalSample* out = response->add_samples();
    out->set_end_ns(step.end_wall_ns);
    out->set_duration_ns(step.duration_ns);
    out->set_step_num(step.step_num);
    out->set_source(step.source);
  }
}

void AddStepStall(const StepSourceStatus& status, profctl::v1::GetStepSignalResponse* response) {
  profctl::v1::StepStall* stall = response->add_stalls();
  stall->set_source(status.source);
  stall->set_last_step_end_ns(status.last_step_end_ns);
  stall->set_last_step_num(status.last_step_num);
  stall->set_median_step_ns(status.median_step_ns);
  stall->set_stalled_for_ns(status.since_step_end_ns);
}

void AddStepSummaries(const std::vector<StepSourceStatus>& status,
                      profctl::v1::GetStepSignalResponse* response) {
  for (const StepSourceStatus& st : status) {
    profctl::v1::StepSourceSummary* out = response->add_summaries();
    out->set_source(st.source);
    out->set_last_step_end_ns(st.last_step_end_ns);
    out->set_last_step_num(st.last_step_num);
    out->set_median_step_ns(st.median_step_ns);
    out->set_steps(static_cast<uint32_t>(st.steps));
    if (st.stalled) AddStepStall(st, response);
  }
}

}  // namespace profctl::agent
