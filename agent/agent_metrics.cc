#include "agent/agent_metrics.h"

#include "common/net/metrics_http.h"

namespace profctl::agent {

void AgentMetrics::CaptureAdmitted() {
  absl::MutexLock lock(&mu_);
  ++admitted_;
}

void AgentMetrics::StreamFinished(absl::string_view rpc, absl::string_view code, uint64_t bytes) {
  absl::MutexLock lock(&mu_);
  ++streams_[{std::string(rpc), std::string(code)}];
  bytes_[std::string(rpc)] += bytes;
}

void AgentMetrics::SetStepStatus(std::function<std::vector<StepSourceMetric>()> status) {
  absl::MutexLock lock(&status_mu_);
  status_ = std::move(status);
}

std::string AgentMetrics::Render() const {
  PromText m;
  m.Gauge("profctl_agent_up", "1 while the agent serves.", 1);
  {
    absl::MutexLock lock(&status_mu_);
    const std::vector<StepSourceMetric> sources =
        status_ ? status_() : std::vector<StepSourceMetric>();
    for (const StepSourceMetric& s : sources) {
      PromText::Labels labels = {{"source", s.status.source}};
      if (!s.agent.empty()) labels["agent"] = s.agent;
      m.Gauge("profctl_agent_step_stalled",
              "1 when no step of this source ended for --hang-factor times its median step time.",
              s.status.stalled ? 1 : 0, labels);
      m.Gauge("profctl_agent_seconds_since_step_end",
              "Seconds since this step source's last step ended (agent clock).",
              static_cast<double>(s.status.since_step_end_ns) / 1e9, labels);
    }
  }
  absl::MutexLock lock(&mu_);
  m.Counter("profctl_agent_captures_admitted_total",
            "Capture requests accepted (their session began).", static_cast<double>(admitted_));
  for (const auto& [key, n] : streams_) {
    m.Counter("profctl_agent_streams_total",
              "Capture and Fetch streams ended, by RPC and gRPC status code.",
              static_cast<double>(n), {{"rpc", key.first}, {"code", key.second}});
  }
  for (const auto& [rpc, b] : bytes_) {
    m.Counter("profctl_agent_trace_bytes_sent_total", "Trace bytes streamed to clients, by RPC.",
              static_cast<double>(b), {{"rpc", rpc}});
  }
  return m.text();
}

}  // namespace profctl::agent
