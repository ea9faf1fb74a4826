// The agent's flight recorder (docs/flight-recorder.md): starts the ring of every collector that
// can keep a past, and brings the rings up to date every tick_ms on the session timeline, so that
// what they hold is bounded (by age and bytes) at all times, not only when a snapshot asks.
//
// Threading: Start and Stop on any thread; ticks run as tasks on the executor. Stop waits for a
// tick in progress and makes later ones no-ops, so the collectors may be destroyed after it.
#ifndef PROFCTL_AGENT_FLIGHT_RECORDER_H_
#define PROFCTL_AGENT_FLIGHT_RECORDER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "agent/collectors/collector.h"
#include "common/clock.h"
#include "common/executor.h"

namespace profctl::agent {

struct FlightRecorderOptions {
  int64_t keep_ms = 0;  // the past each ring keeps
  // The memory of every ring together; each recording collector gets an equal share.
  int64_t max_bytes = 0;
  int64_t tick_ms = 100;
};

class FlightRecorder : public std::enable_shared_from_this<FlightRecorder> {
 public:
  // One collector and the clock its times are on (its endpoint's).
  struct Target {
    const Clock* clock;
    Collector* collector;
  };

  // Starts the recorder of every target's collector that has one and the ticks. Collectors that
  // keep no past are left out (their names in not_recording()). INVALID_ARGUMENT for bounds that
  // are not positive. `executor` and the targets outlive the recorder, or Stop is called first.
  static absl::StatusOr<std::shared_ptr<FlightRecorder>> Start(const std::vector<Target>& targets,
                                                               Executor* executor,
                                                               FlightRecorderOptions options);
  ~FlightRecorder();

  void Stop();
  // Names of the collectors that record, and of those that can keep no past (each name once,
  // whatever the number of endpoints).
  const std::vector<std::string>& recording() const { return recording_; }
  const std::vector<std::string>& not_recording() const { return not_recording_; }
  // What every ring holds together.
  RecorderStats stats() const;

 private:
  FlightRecorder(Executor* executor, FlightRecorderOptions options)
      : executor_(executor), options_(options) {}
  void ScheduleTick();
  void Tick();

  Executor* const executor_;
  const FlightRecorderOptions options_;
  std::vector<Target> targets_;  // recording ones; fixed after Start
  std::vector<std::string> recording_;
  std::vector<std::string> not_recording_;
  mutable absl::Mutex mu_;
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace profctl::agent

#endif  // PROFCTL_AGENT_FLIGHT_RECORDER_H_
