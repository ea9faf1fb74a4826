// profctl-agent's settings: defaults, then --config=agent.yaml, then command-line flags.
#ifndef PROFCTL_AGENT_AGENT_OPTIONS_H_
#define PROFCTL_AGENT_AGENT_OPTIONS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "agent/collectors/collector_names.h"

namespace profctl::agent {

struct AgentOptions {
  int64_t port = 6000;
  // ParseAgentOptions' default: 0.0.0.0 when clients must authenticate (token_file, tls_ca) or
  // with --insecure, else 127.0.0.1 (see docs/security.md).
  std::string bind = "127.0.0.1";
  std::string port_file;
  std::string name;
  // ParseAgentOptions' default: cupti when the host has an NVIDIA driver (and --endpoints=1 and
  // no --synthetic knobs), else synthetic; see DefaultCollectors.
  std::vector<std::string> collectors = {std::string(kSyntheticCollector)};
  // Set when --collectors or the config's `collectors` named them (no default is applied then).
  bool collectors_given = false;
  std::string synthetic;  // key=value,... for the synthetic job
  int64_t clock_skew_ms = 0;
  int64_t max_duration_ms = 60'000;
  std::string log_level = "info";
  // "text" or "json" (one object per line; common/logging.h).
  std::string log_format = "text";
  // Prometheus /metrics and /healthz over HTTP on this port (0: a free one, -1: off), on
  // metrics_bind (empty: --bind).
  int64_t metrics_port = -1;
  std::string metrics_bind;
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
  // The Unix socket CUDA processes running libprofctl_inject.so connect to (the cupti collector;
  // docs/cupti.md). Their PROFCTL_AGENT_SOCKET must name the same path.
  std::string inject_socket = "/tmp/profctl/agent.sock";
  // Its permission bits, octal: 0600 lets only the agent's user connect; 0660/0666 open it to the
  // group/everyone (a training job running as another user).
  std::string inject_socket_mode = "0600";
  // What the agent keeps and holds (docs/agent-protection.md). Keyed sessions' traces are kept
  // for Fetch this long after they end, and at most retain_mb of them (oldest evicted first).
  int64_t retain_ms = 600'000;
  int64_t retain_mb = 256;
  // Per-capture caps: events beyond them are dropped (CaptureHeader.dropped_events).
  int64_t max_trace_events = 50'000'000;
  int64_t max_trace_mb = 256;
  // Trace memory held for streams not yet read plus retained traces: retained ones are evicted
  // first, then new captures are refused with RESOURCE_EXHAUSTED.
  int64_t max_held_mb = 512;
  // The flight recorder (docs/flight-recorder.md): keep the last flight_recorder_s seconds of
  // every collector that can (0: off), in at most flight_recorder_mb MiB for the whole process.
  int64_t flight_recorder_s = 0;
  int64_t flight_recorder_mb = 64;
  // With a flight recorder: CUDA processes keep their NCCL launches (CUPTI's launch callbacks,
  // the process's one callback subscription; docs/cupti.md). False: their step ranges only, so a
  // framework profiler in the process can still subscribe.
  bool flight_recorder_launches = true;
  // Hang detection (agent/hang_detector.h): a step source is stalled when no step of it ended for
  // hang_factor times its median step time (a whole number, 2..1000).
  int64_t hang_factor = 10;
  // A stream whose client has not read for this long is cancelled.
  int64_t stream_idle_timeout_ms = 30'000;
  // Tests and benchmarks only: serve this many independent agents in one process, on ports
  // port..port+N-1 (or N free ports with --port=0). See agent_server.h for what each gets.
  int64_t endpoints = 1;
  // Tests and benchmarks only: endpoint i's wall clock is shifted by clock_skew_ms plus a
  // deterministic amount in [-S, +S] ms derived from i alone (EndpointSkewMs).
  int64_t endpoint_skew_spread_ms = 0;
  // Security (docs/security.md; files are read by LoadServerSecurity, agent/auth.h). With
  // tls_cert and tls_key the port speaks TLS only; tls_ca then requires client certificates it
  // verifies (mutual TLS). token_file: every call needs "authorization: Bearer <its token>".
  std::string tls_cert;
  std::string tls_key;
  std::string tls_ca;
  std::string token_file;
  // Allows a non-loopback bind without client authentication (neither token_file nor tls_ca).
  bool insecure = false;
  bool help = false;
  std::string help_text;
  // --version: print VersionDescription() and exit.
  bool version = false;
};

inline constexpr int64_t kMaxEndpoints = 2048;

// Every collector this build knows (kCollectorNames, agent/collectors/collector_names.h).
const std::vector<std::string>& KnownCollectors();

// Whether `options` runs the collector named `name` (one of the k*Collector constants).
bool UsesCollector(const AgentOptions& options, absl::string_view name);

// What proves an NVIDIA driver is loaded on this host (ParseAgentOptions' default collectors).
inline constexpr const char* kNvidiaDriverProbe = "/proc/driver/nvidia/version";

// Parses profctl-agent's arguments (without argv[0]). Errors name the flag or the config file key.
// Without --collectors (or `collectors` in the config) the agent records what it can really see:
// `cupti` when `nvidia_probe` exists (a GPU host), unless --synthetic knobs ask for the synthetic
// job or --endpoints > 1 (cupti serves one endpoint); otherwise `synthetic`, the simulated job
// (demos, tests). --tsl-local adds `tsl` either way.
absl::StatusOr<AgentOptions> ParseAgentOptions(
    const std::vector<std::string>& args, const std::string& nvidia_probe = kNvidiaDriverProbe);

// The --port-file's text (common/port_file.h, the format `profctl serve` writes too): the gRPC
// port of each endpoint, one per line, then "metrics=PORT" when the metrics server listens
// (metrics_port >= 0; with --metrics-port=0 the port it picked).
std::string AgentPortFileText(const std::vector<int>& ports, int metrics_port);

// Applies a YAML config document on top of `options`; `source` names it in errors.
absl::Status ApplyAgentConfigYaml(const std::string& yaml, const std::string& source,
                                  AgentOptions* options);

}  // namespace profctl::agent

#endif  // PROFCTL_AGENT_AGENT_OPTIONS_H_
