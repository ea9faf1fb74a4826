// Collector that emits the synthetic training job's events for the recorded window. It needs no
// real time to pass: the job is a pure function of (knobs, true time), so Collect generates the
// window's events after Stop.
#ifndef PROFCTL_AGENT_COLLECTORS_SYNTHETIC_SYNTHETIC_COLLECTOR_H_
#define PROFCTL_AGENT_COLLECTORS_SYNTHETIC_SYNTHETIC_COLLECTOR_H_

#include <memory>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "agent/collectors/collector.h"
#include "agent/collectors/collector_names.h"
#include "agent/collectors/flight_ring.h"
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
  // The flight recorder keeps whole steps (every GPU's plan of one step) that ended after the
  // recorder started; a snapshot adds the step in progress as far as it went (its events that
  // ended by then).
  absl::Status StartRecorder(const RecorderLimits& limits, int64_t now_wall_ns) override;
  bool Recording() const override;
  void RecordUntil(int64_t now_wall_ns) override;
  absl::Status Snapshot(int64_t from_wall_ns, int64_t to_wall_ns,
                        tensorflow::profiler::XSpace* space) override;
  RecorderStats recorder_stats() const override;
  void TakeShortfalls(std::vector<profctl::v1::Shortfall>* out) override;

  const synthetic::SyntheticJob& job() const { return job_; }

 private:
  absl::Mutex shortfalls_mu_;
  std::vector<profctl::v1::Shortfall> shortfalls_ ABSL_GUARDED_BY(shortfalls_mu_);
  using Step = std::vector<synthetic::StepPlan>;  // one step, every GPU
  Step PlanStep(int64_t k) const;
  synthetic::SyntheticJob job_;
  mutable absl::Mutex recorder_mu_;
  std::unique_ptr<FlightRing<Step>> ring_ ABSL_GUARDED_BY(recorder_mu_);
  int64_t recorder_start_ns_ ABSL_GUARDED_BY(recorder_mu_) = 0;  // agent clock
  int64_t next_step_ ABSL_GUARDED_BY(recorder_mu_) = 0;          // the next step to record
  int64_t start_ns_ = 0;
  int64_t stop_ns_ = 0;
  bool running_ = false;
};

}  // namespace profctl::agent

#endif  // PROFCTL_AGENT_COLLECTORS_SYNTHETIC_SYNTHETIC_COLLECTOR_H_
