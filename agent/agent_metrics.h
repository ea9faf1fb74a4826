// profctl-agent's own counters for Prometheus (/metrics with --metrics-port): trace streams
// (Capture and Fetch) by outcome, trace bytes sent, captures admitted. Thread-safe; cheap
// (a mutex per finished stream).
#ifndef PROFCTL_AGENT_AGENT_METRICS_H_
#define PROFCTL_AGENT_AGENT_METRICS_H_

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "agent/hang_detector.h"

namespace profctl::agent {

// One step source of one endpoint (`agent`: the endpoint's name with --endpoints>1, else empty).
struct StepSourceMetric {
  std::string agent;
  StepSourceStatus status;
};

class AgentMetrics {
 public:
  // A Capture request the agent accepted (its session began).
  void CaptureAdmitted();
  // A Capture or Fetch stream ended (`rpc`: "capture" or "fetch") with the gRPC code `code`
  // (e.g. "OK", "ALREADY_EXISTS", "CANCELLED") after sending `bytes` of trace.
  void StreamFinished(absl::string_view rpc, absl::string_view code, uint64_t bytes);

  // What Render asks for the step sources' hang state (agent/hang_detector.h); null: none.
  // Replacing it waits for a Render that is calling the previous one.
  void SetStepStatus(std::function<std::vector<StepSourceMetric>()> status);

  // The Prometheus text: profctl_agent_captures_admitted_total,
  // profctl_agent_streams_total{rpc,code}, profctl_agent_trace_bytes_sent_total{rpc},
  // profctl_agent_up, and per step source profctl_agent_step_stalled{source[,agent]} (0|1) and
  // profctl_agent_seconds_since_step_end{source[,agent]}.
  std::string Render() const;

 private:
  mutable absl::Mutex status_mu_;
  std::function<std::vector<StepSourceMetric>()> status_ ABSL_GUARDED_BY(status_mu_);
  mutable absl::Mutex mu_;
  int64_t admitted_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<std::pair<std::string, std::string>, int64_t> streams_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, uint64_t> bytes_ ABSL_GUARDED_BY(mu_);
};

}  // namespace profctl::agent

#endif  // PROFCTL_AGENT_AGENT_METRICS_H_
