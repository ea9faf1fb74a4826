// Collector that emits the synthetic training job's events for the recorded window. It needs no
// real time to pass: the job is a pure function of (knobs, true time), so Collect generates the
// window's events after Stop.
#ifndef PROFCTL_AGENT_COLLECTORS_SYNTHETIC_SYNTHETIC_COLLECTOR_H_
#define PROFCTL_AGENT_COLLECTORS_SYNTHETIC_SYNTHETIC_COLLECTOR_H_

#include <memory>
#include <utility>

#include "agent/collectors/collector.h"
#include "agent/collectors/collector_names.h"
#include "synthetic/synthetic_job.h"

namespace profctl::agent {

class SyntheticCollector final : public Collector {
 public:
  // `config.clock_skew_ns` must be the agent clock's skew, so that true time = agent time - skew.
  // `memo`: shared with the other ranks of the job this process serves (synthetic::SyntheticJob).
  explicit SyntheticCollector(const synthetic::SyntheticJobConfig& config,
                              std::shared_ptr<synthetic::SyntheticStepMemo> memo = nullptr)
      : job_(config, std::move(memo)) {}

  absl::string_view name() const override { return kSyntheticCollector; }
  absl::Status Prepare(const CaptureOptions& options) override;
  absl::Status Start(int64_t wall_ns) override;
  absl::Status Stop(int64_t wall_ns) override;
  absl::Status Collect(tensorflow::profiler::XSpace* space) override;
  // The job's steps, from its model (no state: any time, any thread): each step's period, ending
  // at the next step's start.
  void RecentSteps(int64_t since_wall_ns, int64_t now_wall_ns, size_t max,
                   std::vector<StepSample>* out) const override;
  bool HasStepSignal() const override { return true; }

  const synthetic::SyntheticJob& job() const { return job_; }

 private:
  synthetic::SyntheticJob job_;
  int64_t start_ns_ = 0;
  int64_t stop_ns_ = 0;
  bool running_ = false;
};

}  // namespace profctl::agent

#endif  // PROFCTL_AGENT_COLLECTORS_SYNTHETIC_SYNTHETIC_COLLECTOR_H_
