// Hang detection on the step signal (docs/flight-recorder.md, "Hangs"): a step source (the
// synthetic job; each CUDA process of the cupti collector) is stalled when no step of it ended for
// --hang-factor times its median step time (the median of its last kWindow steps; a source is
// judged once it has ended kMinSteps steps). GetStepSignal reports the stalled ones
// (GetStepSignalResponse.stalls) and /metrics shows every source's state.
//
// Threading: every method is thread-safe (one mutex; Poll reads the collectors' step rings, which
// never block). Time comes from the caller (the agent clock), so tests drive it by hand.
#ifndef PROFCTL_AGENT_HANG_DETECTOR_H_
#define PROFCTL_AGENT_HANG_DETECTOR_H_

#include <cstdint>
#include <deque>
#include <map>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "agent/capture_manager.h"
#include "agent/collectors/collector.h"
#include "profctl/v1/agent.pb.h"

namespace profctl::agent {

// One step source's state at an instant.
struct StepSourceStatus {
  std::string source;             // StepSample::source
  int64_t last_step_end_ns = 0;   // agent clock
  int64_t last_step_num = -1;     // -1: unknown
  int64_t median_step_ns = 0;     // 0 until kMinSteps steps ended
  int64_t since_step_end_ns = 0;  // now - last_step_end_ns
  bool stalled = false;
  int steps = 0;  // the recent steps the median is of (at most kWindow)
};

class HangDetector {
 public:
  static constexpr int kMinSteps = 3;
  static constexpr int kWindow = 16;

  // `factor`: --hang-factor (AgentOptions::hang_factor, validated there).
  explicit HangDetector(double factor) : factor_(factor) {}

  // Takes the steps the manager's collectors ended since the previous Poll (the last 10 minutes
  // on the first), then answers Status(now_ns).
  std::vector<StepSourceStatus> Poll(const CaptureManager& manager, int64_t now_ns);
  // Adds steps (any order; a step already seen, same source and end, is ignored).
  void Observe(const std::vector<StepSample>& steps);
  // Every source seen so far, by name.
  std::vector<StepSourceStatus> Status(int64_t now_ns) const;

 private:
  struct Source {
    std::deque<int64_t> durations;  // the last kWindow, oldest first
    int64_t last_end_ns = 0;
    int64_t last_step_num = -1;
  };
  const double factor_;
  mutable absl::Mutex mu_;
  std::map<std::string, Source> sources_ ABSL_GUARDED_BY(mu_);
  int64_t polled_until_ns_ ABSL_GUARDED_BY(mu_) = 0;
};

// The stalled ones of `status`.
std::vector<StepSourceStatus> Stalled(const std::vector<StepSourceStatus>& status);

// Steps as GetStepSignalResponse.samples, in their order.
void AddStepSamples(const std::vector<StepSample>& steps,
                    profctl::v1::GetStepSignalResponse* response);
// A stalled source as an entry of GetStepSignalResponse.stalls.
void AddStepStall(const StepSourceStatus& status, profctl::v1::GetStepSignalResponse* response);
// Every source of `status` as GetStepSignalResponse.summaries (the answer to summary_only), and
// the stalled ones also as stalls.
void AddStepSummaries(const std::vector<StepSourceStatus>& status,
                      profctl::v1::GetStepSignalResponse* response);

}  // namespace profctl::agent

#endif  // PROFCTL_AGENT_HANG_DETECTOR_H_
