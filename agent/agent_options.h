// profctl-agent's settings: defaults, then --config=agent.yaml, then command-line flags.
#ifndef PROFCTL_AGENT_AGENT_OPTIONS_H_
#define PROFCTL_AGENT_AGENT_OPTIONS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace profctl::agent {

struct AgentOptions {
  int64_t port = 6000;
  std::string bind = "0.0.0.0";
  std::string port_file;
  std::string name;
  std::vector<std::string> collectors = {"synthetic"};
  std::string synthetic;  // key=value,... for the synthetic job
  int64_t clock_skew_ms = 0;
  int64_t max_duration_ms = 60'000;
  std::string log_level = "info";
  // tensorflow.ProfilerService clients may have the agent write their trace on this machine only
  // inside this folder (absolute; it must exist). Empty: never (the trace goes back in the
  // response). See docs/tensorflow-interop.md.
  std::string tsl_save_root;
  // Framework profiler servers on this host (JAX/TensorFlow: `jax.profiler.start_server(9999)`)
  // that the tsl collector captures in every window, as gRPC targets ("localhost:9999"). Giving
  // any enables the tsl collector. See docs/tensorflow-interop.md.
  std::vector<std::string> tsl_local;
  // How long past the end of the window a framework server may take to answer.
  int64_t tsl_grace_ms = 10'000;
  // Tests and benchmarks only: serve this many independent agents in one process, on ports
  // port..port+N-1 (or N free ports with --port=0). See agent_server.h for what each gets.
  int64_t endpoints = 1;
  // Tests and benchmarks only: endpoint i's wall clock is shifted by clock_skew_ms plus a
  // deterministic amount in [-S, +S] ms derived from i alone (EndpointSkewMs).
  int64_t endpoint_skew_spread_ms = 0;
  bool help = false;
  std::string help_text;
};

inline constexpr int64_t kMaxEndpoints = 2048;

// Every collector this build knows.
const std::vector<std::string>& KnownCollectors();

// Parses profctl-agent's arguments (without argv[0]). Errors name the flag or the config file key.
absl::StatusOr<AgentOptions> ParseAgentOptions(const std::vector<std::string>& args);

// Applies a YAML config document on top of `options`; `source` names it in errors.
absl::Status ApplyAgentConfigYaml(const std::string& yaml, const std::string& source,
                                  AgentOptions* options);

}  // namespace profctl::agent

#endif  // PROFCTL_AGENT_AGENT_OPTIONS_H_
