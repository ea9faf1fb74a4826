// profctl-agent's own counters for Prometheus (/metrics with --metrics-port): trace streams
// (Capture and Fetch) by outcome, trace bytes sent, captures admitted. Thread-safe; cheap
// (a mutex per finished stream).
#ifndef PROFCTL_AGENT_AGENT_METRICS_H_
#define PROFCTL_AGENT_AGENT_METRICS_H_

#include <cstdint>
#include <map>
#include <string>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"

namespace profctl::agent {

class AgentMetrics {
 public:
  // A Capture request the agent accepted (its session began).
  void CaptureAdmitted();
  // A Capture or Fetch stream ended (`rpc`: "capture" or "fetch") with the gRPC code `code`
  // (e.g. "OK", "ALREADY_EXISTS", "CANCELLED") after sending `bytes` of trace.
  void StreamFinished(absl::string_view rpc, absl::string_view code, uint64_t bytes);

  // The Prometheus text: profctl_agent_captures_admitted_total,
  // profctl_agent_streams_total{rpc,code}, profctl_agent_trace_bytes_sent_total{rpc},
  // profctl_agent_up.
  std::string Render() const;

 private:
  mutable absl::Mutex mu_;
  int64_t admitted_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<std::pair<std::string, std::string>, int64_t> streams_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, uint64_t> bytes_ ABSL_GUARDED_BY(mu_);
};

}  // namespace profctl::agent

#endif  // PROFCTL_AGENT_AGENT_METRICS_H_
