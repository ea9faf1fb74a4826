// The judgment of a condition-triggered schedule (TriggerConfig, docs/schedules.md): pure logic,
// no I/O and no clock of its own. The daemon's TriggerWatcher feeds it the agents' step signal
// (AgentService.GetStepSignal answers) once per poll and asks it whether the pod regressed.
//
// Per host, on that host's own clock (so clock offsets do not matter):
//   observed = the median step time of the steps that ended in the last `window` before the
//              host's latest answer;
//   baseline = the median over the `baseline` before that window (the window itself is left
//              out, so a regression does not pull its own baseline up while it is being judged).
// A host is judged when its latest poll answered, it has min_steps baseline steps and at least
// kMinWindowSteps in the window. The pod regressed when some judged host's observed exceeds
// threshold x its baseline; the host with the largest ratio is reported. In a synchronous
// data-parallel job every rank sees the same step time, so "the worst host" is the pod; in a job
// whose hosts step independently it is the one that slowed.
//
// Signal hang: the pod regressed when some host's latest answer reports a non-empty `stalls`
// (a step source whose steps stopped, judged by the agent); the host and source stalled longest
// are reported. Step samples are kept as for step_time (the signal's `since_ns`).
//
// Answers are untrusted: samples with a non-positive duration, one over a day, an end in the
// future of the answer's own clock, or an end before the last one kept are dropped (and
// counted); at most kMaxSamplesPerHost are kept per host (past that the samples are thinned
// uniformly, so medians hold for jobs with very short steps), so memory is bounded by
// hosts x kMaxSamplesPerHost x 16 bytes whatever the agents send.
#ifndef PROFCTL_COORDINATOR_SCHEDULE_TRIGGER_H_
#define PROFCTL_COORDINATOR_SCHEDULE_TRIGGER_H_

#include <cstdint>
#include <deque>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "coordinator/schedule/schedule_config.h"
#include "profctl/v1/agent.pb.h"

namespace profctl::coordinator::schedule {

struct TriggerJudgment {
  bool regressed = false;
  // The judged host with the largest observed/baseline ratio, and its numbers (ns).
  std::string host = {};
  double baseline_ns = 0;
  double observed_ns = 0;
  double ratio = 0;
  int64_t hosts_judged = 0;
  // Signal hang: the stalled source of `host`, its last step's number (-1: unknown), its median
  // step time and how long it has been stalled (the host's clock, ns); baseline_ns and
  // observed_ns are then that median and that time.
  std::string stall_source = {};
  int64_t stall_last_step = -1;
  int64_t stalled_for_ns = 0;
  // Empty when at least one host was judged; otherwise why none could be ("no step signal from
  // any target", "baseline: 7 of 20 steps so far").
  std::string waiting = {};
};

class StepTimeWatch {
 public:
  static constexpr size_t kMaxSamplesPerHost = 4096;
  static constexpr int64_t kMinWindowSteps = 3;

  explicit StepTimeWatch(const TriggerConfig& config) : config_(config) {}

  // A new poll begins: every host counts as not answered until Add.
  void BeginPoll();
  // `host`'s answer to this poll. Returns how many of its samples were dropped as implausible.
  int64_t Add(const std::string& host, const profctl::v1::GetStepSignalResponse& answer);
  // `host` answered this poll that it keeps no step signal (UNIMPLEMENTED: a TensorFlow/JAX
  // profiler server, an agent before 0.3): it counts as answered, without a signal.
  void NoSignal(const std::string& host);
  // Forgets hosts that are no longer targets.
  void Retain(const std::set<std::string>& hosts);
  // The `since_ns` of `host`'s next request: the end of the latest step kept (0: none).
  int64_t SinceNs(const std::string& host) const;
  TriggerJudgment Judge() const;

  const TriggerConfig& config() const { return config_; }
  size_t hosts() const { return hosts_.size(); }
  size_t samples(const std::string& host) const;

 private:
  struct Sample {
    int64_t end_ns;
    int64_t duration_ns;
  };
  struct Host {
    std::deque<Sample> samples;                  // by end, ascending
    int64_t now_ns = 0;                          // the host's clock at its latest answer
    bool answered = false;                       // in this poll
    bool has_signal = false;                     // its latest answer named a step-signal source
    std::vector<profctl::v1::StepStall> stalls;  // its latest answer's (at most kMaxStalls)
  };
  static constexpr size_t kMaxStalls = 64;
  TriggerJudgment JudgeHang() const;

  TriggerConfig config_;
  std::map<std::string, Host> hosts_;
};

}  // namespace profctl::coordinator::schedule

#endif  // PROFCTL_COORDINATOR_SCHEDULE_TRIGGER_H_
