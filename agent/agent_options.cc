#include "agent/agent_options.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "agent/auth.h"
#include "agent/collectors/cupti/inject_server.h"
#include "agent/collectors/tsl/tsl_collector.h"
#include "common/file_util.h"
#include "common/flags.h"
#include "common/status_macros.h"
#include "yaml-cpp/yaml.h"

namespace profctl::agent {
namespace {

absl::Status ValidateOptions(const AgentOptions& o) {
  if (o.port < 0 || o.port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat("--port=", o.port, " is not in 0..65535"));
  }
  if (o.bind.empty()) return absl::InvalidArgumentError("--bind must not be empty");
  if (o.metrics_port < -1 || o.metrics_port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("--metrics-port=", o.metrics_port, " is not in -1..65535"));
  }
  if (o.log_format != "text" && o.log_format != "json") {
    return absl::InvalidArgumentError(
        absl::StrCat("--log-format=", o.log_format, " is not one of: text, json"));
  }
  if (o.max_duration_ms < 1 || o.max_duration_ms > 3'600'000) {
    return absl::InvalidArgumentError(
        absl::StrCat("--max-duration-ms=", o.max_duration_ms, " is not in 1..3600000"));
  }
  if (o.clock_skew_ms < -86'400'000 || o.clock_skew_ms > 86'400'000) {
    return absl::InvalidArgumentError(
        absl::StrCat("--clock-skew-ms=", o.clock_skew_ms, " is more than a day"));
  }
  if (o.collectors.empty()) return absl::InvalidArgumentError("--collectors is empty");
  for (size_t i = 0; i < o.collectors.size(); ++i) {
    const std::string& c = o.collectors[i];
    // `synthetic,synthetic` once doubled every event.
    if (std::find(o.collectors.begin(), o.collectors.begin() + static_cast<ptrdiff_t>(i), c) !=
        o.collectors.begin() + static_cast<ptrdiff_t>(i)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--collectors: '", c, "' is listed more than once"));
    }
    const auto& known = KnownCollectors();
    if (std::find(known.begin(), known.end(), c) == known.end()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--collectors: unknown collector '", c, "' (known: ", absl::StrJoin(known, ", "), ")"));
    }
  }
  const bool tsl = std::find(o.collectors.begin(), o.collectors.end(), "tsl") != o.collectors.end();
  if (tsl && o.tsl_local.empty()) {
    return absl::InvalidArgumentError(
        "--collectors lists tsl, but no framework profiler server is given: add "
        "--tsl-local=host:port,... (tsl_local in the config), e.g. --tsl-local=localhost:9999");
  }
  if (tsl && o.endpoints > 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--tsl-local cannot be combined with --endpoints=", o.endpoints,
        ": a framework profiler server runs one profiling session at a time, so the endpoints "
        "would find it busy"));
  }
  const bool cupti =
      std::find(o.collectors.begin(), o.collectors.end(), "cupti") != o.collectors.end();
  if (cupti && o.endpoints > 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("--collectors=cupti cannot be combined with --endpoints=", o.endpoints,
                     ": the host's CUDA processes serve one capture window at a time"));
  }
  if (cupti && (o.inject_socket.empty() || o.inject_socket.size() > 107)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--inject-socket='", o.inject_socket, "' must be a path of 1..107 bytes"));
  }
  if (absl::StatusOr<uint32_t> mode = cupti::ParseSocketMode(o.inject_socket_mode); !mode.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--inject-socket-mode: ", mode.status().message()));
  }
  if (o.tsl_grace_ms < 0 || o.tsl_grace_ms > kMaxTslGraceMs) {
    return absl::InvalidArgumentError(
        absl::StrCat("--tsl-grace-ms=", o.tsl_grace_ms, " is not in 0..", kMaxTslGraceMs));
  }
  if (!o.name.empty()) PROFCTL_RETURN_IF_ERROR(ValidateFileStem("--name", o.name));
  struct Range {
    const char* flag;
    int64_t value, min, max;
  };
  for (const Range& r :
       {Range{"--retain-ms", o.retain_ms, 0, 86'400'000},
        Range{"--retain-mb", o.retain_mb, 0, 1 << 20},
        Range{"--max-trace-events", o.max_trace_events, 1, 10'000'000'000},
        Range{"--max-trace-mb", o.max_trace_mb, 1, 1 << 16},
        Range{"--max-held-mb", o.max_held_mb, 1, 1 << 20},
        Range{"--stream-idle-timeout-ms", o.stream_idle_timeout_ms, 100, 3'600'000}}) {
    if (r.value < r.min || r.value > r.max) {
      return absl::InvalidArgumentError(
          absl::StrCat(r.flag, "=", r.value, " is not in ", r.min, "..", r.max));
    }
  }
  if (o.endpoints < 1 || o.endpoints > kMaxEndpoints) {
    return absl::InvalidArgumentError(
        absl::StrCat("--endpoints=", o.endpoints, " is not in 1..", kMaxEndpoints));
  }
  if (o.port > 0 && o.port + o.endpoints - 1 > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("--port=", o.port, " with --endpoints=", o.endpoints, " needs ports up to ",
                     o.port + o.endpoints - 1, ", above 65535"));
  }
  if (o.endpoint_skew_spread_ms < 0 || o.endpoint_skew_spread_ms > 86'400'000) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--endpoint-skew-spread-ms=", o.endpoint_skew_spread_ms, " is not in 0..86400000"));
  }
  if (!o.tsl_save_root.empty() && o.tsl_save_root.front() != '/') {
    return absl::InvalidArgumentError(
        absl::StrCat("--tsl-save-root=", o.tsl_save_root, " must be an absolute path"));
  }
  if (!o.tls_ca.empty() && o.tls_cert.empty()) {
    return absl::InvalidArgumentError(
        "--tls-ca (require client certificates) needs --tls-cert and --tls-key (serve TLS)");
  }
  if (o.insecure && AuthenticatesClients(o)) {
    return absl::InvalidArgumentError(
        "--insecure (serve without client authentication) contradicts --token-file and "
        "--tls-ca; give one or the other");
  }
  if (!IsLoopbackBind(o.bind) && !AuthenticatesClients(o) && !o.insecure) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--bind=", o.bind,
        " without client authentication would let anyone who reaches this host run captures "
        "and read its traces: give --token-file and/or --tls-ca (mutual TLS; with --tls-cert "
        "and --tls-key), see docs/security.md, or --insecure to serve unauthenticated anyway"));
  }
  if (o.port == 0 && o.port_file.empty()) {
    return absl::InvalidArgumentError(
        o.endpoints == 1 ? "--port=0 picks a free port: give --port-file to learn it"
                         : "--port=0 picks free ports: give --port-file to learn them");
  }
  return absl::OkStatus();
}

std::vector<std::string> SplitList(const std::string& s) {
  return absl::StrSplit(s, ',', absl::SkipWhitespace());
}

}  // namespace

const std::vector<std::string>& KnownCollectors() {
  static const auto* const kKnown = new std::vector<std::string>{"synthetic", "tsl", "cupti"};
  return *kKnown;
}

absl::Status ApplyAgentConfigYaml(const std::string& yaml, const std::string& source,
                                  AgentOptions* options) {
  YAML::Node root;
  try {
    root = YAML::Load(yaml);
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": not valid YAML: ", e.what()));
  }
  if (root.IsNull()) return absl::OkStatus();
  if (!root.IsMap()) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": expected a mapping of settings"));
  }
  for (const auto& kv : root) {
    const std::string key = kv.first.as<std::string>("");
    const YAML::Node& v = kv.second;
    const std::string where = absl::StrCat(source, ":", kv.first.Mark().line + 1, ": '", key, "'");
    try {
      if (key == "port") {
        options->port = v.as<int64_t>();
      } else if (key == "bind") {
        options->bind = v.as<std::string>();
        if (options->bind.empty()) {
          return absl::InvalidArgumentError(absl::StrCat(where, " must not be empty"));
        }
      } else if (key == "port_file") {
        options->port_file = v.as<std::string>();
      } else if (key == "name") {
        options->name = v.as<std::string>();
      } else if (key == "collectors") {
        options->collectors_given = true;
        options->collectors =
            v.IsSequence() ? v.as<std::vector<std::string>>() : SplitList(v.as<std::string>());
      } else if (key == "synthetic") {
        if (v.IsMap()) {
          std::vector<std::string> items;
          for (const auto& knob : v) {
            items.push_back(
                absl::StrCat(knob.first.as<std::string>(), "=", knob.second.as<std::string>()));
          }
          options->synthetic = absl::StrJoin(items, ",");
        } else {
          options->synthetic = v.as<std::string>();
        }
      } else if (key == "clock_skew_ms") {
        options->clock_skew_ms = v.as<int64_t>();
      } else if (key == "max_duration_ms") {
        options->max_duration_ms = v.as<int64_t>();
      } else if (key == "log_level") {
        options->log_level = v.as<std::string>();
      } else if (key == "log_format") {
        options->log_format = v.as<std::string>();
      } else if (key == "metrics_port") {
        options->metrics_port = v.as<int64_t>();
      } else if (key == "metrics_bind") {
        options->metrics_bind = v.as<std::string>();
      } else if (key == "tsl_save_root") {
        options->tsl_save_root = v.as<std::string>();
      } else if (key == "tsl_local") {
        std::string text;
        if (v.IsSequence()) {
          text = absl::StrJoin(v.as<std::vector<std::string>>(), ",");
        } else {
          text = v.as<std::string>();
        }
        absl::StatusOr<std::vector<std::string>> servers = ParseTslAddressList(text);
        if (!servers.ok()) {
          return absl::InvalidArgumentError(absl::StrCat(where, ": ", servers.status().message()));
        }
        options->tsl_local = *std::move(servers);
      } else if (key == "tsl_grace_ms") {
        options->tsl_grace_ms = v.as<int64_t>();
      } else if (key == "inject_socket") {
        options->inject_socket = v.as<std::string>();
      } else if (key == "inject_socket_mode") {
        options->inject_socket_mode = v.as<std::string>();
      } else if (key == "retain_ms") {
        options->retain_ms = v.as<int64_t>();
      } else if (key == "retain_mb") {
        options->retain_mb = v.as<int64_t>();
      } else if (key == "max_trace_events") {
        options->max_trace_events = v.as<int64_t>();
      } else if (key == "max_trace_mb") {
        options->max_trace_mb = v.as<int64_t>();
      } else if (key == "max_held_mb") {
        options->max_held_mb = v.as<int64_t>();
      } else if (key == "stream_idle_timeout_ms") {
        options->stream_idle_timeout_ms = v.as<int64_t>();
      } else if (key == "endpoints") {
        options->endpoints = v.as<int64_t>();
      } else if (key == "tls_cert") {
        options->tls_cert = v.as<std::string>();
      } else if (key == "tls_key") {
        options->tls_key = v.as<std::string>();
      } else if (key == "tls_ca") {
        options->tls_ca = v.as<std::string>();
      } else if (key == "token_file") {
        options->token_file = v.as<std::string>();
      } else if (key == "insecure") {
        options->insecure = v.as<bool>();
      } else if (key == "endpoint_skew_spread_ms") {
        options->endpoint_skew_spread_ms = v.as<int64_t>();
      } else {
        return absl::InvalidArgumentError(absl::StrCat(
            where,
            " is not a setting (port, bind, port_file, name, collectors, synthetic, "
            "clock_skew_ms, max_duration_ms, retain_ms, retain_mb, max_trace_events, "
            "max_trace_mb, max_held_mb, stream_idle_timeout_ms, log_level, log_format, "
            "metrics_port, metrics_bind, "
            "tsl_save_root, tsl_local, inject_socket, inject_socket_mode, "
            "tsl_grace_ms, endpoints, endpoint_skew_spread_ms, tls_cert, tls_key, "
            "tls_ca, token_file, insecure)"));
      }
    } catch (const YAML::Exception& e) {
      return absl::InvalidArgumentError(absl::StrCat(where, " has a value of the wrong type"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<AgentOptions> ParseAgentOptions(const std::vector<std::string>& args,
                                               const std::string& nvidia_probe) {
  AgentOptions defaults;
  AgentOptions flags_in = defaults;
  std::string collectors = absl::StrJoin(defaults.collectors, ",");
  std::string config;
  std::string tsl_local;
  FlagSet fs("profctl-agent", "[--port=6000] [--config=agent.yaml] [flags]");
  fs.Int64("port", &flags_in.port,
           "port to serve AgentService and tensorflow.ProfilerService on; 0 picks a free one "
           "(with --endpoints=N: the first of N consecutive ports, or N free ones)");
  flags_in.bind.clear();  // its default depends on other flags, as the help says
  fs.String("bind", &flags_in.bind,
            "address to listen on (default: 0.0.0.0 with --token-file, --tls-ca or --insecure, "
            "else 127.0.0.1); a non-loopback address needs --token-file or --tls-ca, or "
            "--insecure");
  fs.RejectEmpty("bind");
  fs.String("tls-cert", &flags_in.tls_cert,
            "PEM certificate (then its intermediates) to serve TLS with; needs --tls-key");
  fs.String("tls-key", &flags_in.tls_key,
            "PEM private key of --tls-cert (not readable by others: chmod 600)");
  fs.String("tls-ca", &flags_in.tls_ca,
            "PEM CA certificate(s): require every client to present a certificate they signed "
            "(mutual TLS); needs --tls-cert");
  fs.String("token-file", &flags_in.token_file,
            "file holding a bearer token (16..4096 visible ASCII characters, e.g. 'openssl rand "
            "-hex 32'; not readable by others) that every call must send as 'authorization: "
            "Bearer <token>'; without --tls-cert it travels in clear text");
  fs.Bool("insecure", &flags_in.insecure,
          "serve without client authentication on a non-loopback --bind (logs a warning)");
  fs.String("port-file", &flags_in.port_file,
            "write the chosen port here (for --port=0); with --endpoints=N, N lines, one port "
            "per endpoint in order");
  fs.String("name", &flags_in.name, "name for this host's trace files (default: its address)");
  fs.String(
      "collectors", &collectors,
      absl::StrCat("comma-separated collectors (", absl::StrJoin(KnownCollectors(), ", "),
                   "); default: cupti on a host with an NVIDIA driver, else synthetic (a simulated "
                   "job)"));
  fs.String("synthetic", &flags_in.synthetic,
            "synthetic job knobs KEY=VAL,... (rank, world, seed, step_ms, gpus, "
            "kernels_per_step, straggler_rank, straggler_factor, input_stall_rank, "
            "input_stall_ms, allreduce_ms, jitter, slowdown_at_ms, slowdown_factor)");
  fs.Int64("clock-skew-ms", &flags_in.clock_skew_ms,
           "shift this agent's wall clock (tests: emulate hosts whose clocks disagree)");
  fs.Int64("max-duration-ms", &flags_in.max_duration_ms, "longest capture accepted");
  fs.String("config", &config, "YAML file with the same settings (flags win)");
  fs.String("log-level", &flags_in.log_level, "trace, debug, info, warn, error or off");
  fs.String("log-format", &flags_in.log_format, "text, or json (one object per line)");
  fs.Int64("metrics-port", &flags_in.metrics_port,
           "serve Prometheus /metrics and /healthz over HTTP on this port (0: a free one, "
           "-1: off)");
  fs.String("metrics-bind", &flags_in.metrics_bind, "address for /metrics (default: --bind)");
  fs.String("tsl-save-root", &flags_in.tsl_save_root,
            "existing folder (absolute) inside which tensorflow.ProfilerService clients may have "
            "traces saved on this machine (their repository_root); default: never, the trace "
            "goes back in the response");
  fs.String("tsl-local", &tsl_local,
            "framework profiler servers on this host to capture in every window (JAX/TF: "
            "jax.profiler.start_server(9999)), host:port or [ipv6]:port, comma-separated; their "
            "TPU/GPU/host planes join this host's trace. Enables the tsl collector");
  fs.Int64("tsl-grace-ms", &flags_in.tsl_grace_ms,
           absl::StrCat("how long past the end of the window a --tsl-local server may take to "
                        "answer before its planes are given up (0..",
                        kMaxTslGraceMs, ")"));
  fs.String("inject-socket", &flags_in.inject_socket,
            "Unix socket for CUDA processes running libprofctl_inject.so (the cupti collector; "
            "their PROFCTL_AGENT_SOCKET must name it); its folder is created 0700, the socket "
            "is 0600");
  fs.String("inject-socket-mode", &flags_in.inject_socket_mode,
            "octal permissions of --inject-socket: 0600 (only this user), 0660 (its group), "
            "0666 (everyone: training jobs running as another user)");
  fs.Int64("retain-ms", &flags_in.retain_ms,
           "keep the trace of a keyed capture (profctl sends a session key) this long after it "
           "ended, so a coordinator whose transfer failed can Fetch it again; 0 keeps none");
  fs.Int64("retain-mb", &flags_in.retain_mb,
           "keep at most this many MiB of such traces (oldest evicted first); 0 keeps none");
  fs.Int64("max-trace-events", &flags_in.max_trace_events,
           "per capture: drop events beyond this many (each line keeps its earliest; the trace "
           "says how many in its header and warnings)");
  fs.Int64("max-trace-mb", &flags_in.max_trace_mb,
           "per capture: drop events until the serialized trace is at most this many MiB");
  fs.Int64("max-held-mb", &flags_in.max_held_mb,
           "trace memory held for streams not yet read plus kept traces: kept ones are evicted "
           "first, then new captures are refused (RESOURCE_EXHAUSTED) until streams drain");
  fs.Int64("stream-idle-timeout-ms", &flags_in.stream_idle_timeout_ms,
           "cancel a Capture/Fetch stream whose client has not read for this long");
  fs.Int64("endpoints", &flags_in.endpoints,
           absl::StrCat("FOR TESTS AND BENCHMARKS ONLY: serve N independent agents in this one "
                        "process (1..",
                        kMaxEndpoints,
                        "), each on its own port with its own capture slot, named <name>-<i> "
                        "(ep-<i> without --name) and running synthetic rank <rank>+i"));
  fs.Int64("endpoint-skew-spread-ms", &flags_in.endpoint_skew_spread_ms,
           "FOR TESTS AND BENCHMARKS ONLY: give endpoint i an extra clock skew in [-S, +S] ms, "
           "a fixed function of i");
  PROFCTL_RETURN_IF_ERROR(fs.Parse(args));
  if (fs.help_requested()) {
    AgentOptions o;
    o.help = true;
    o.help_text = fs.Help();
    return o;
  }
  if (!fs.positional().empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("unexpected argument '", fs.positional().front(), "'"));
  }
  AgentOptions o = defaults;
  o.bind.clear();  // chosen below unless the config or --bind names it
  if (!config.empty()) {
    PROFCTL_ASSIGN_OR_RETURN(const std::string text, ReadFile(config));
    PROFCTL_RETURN_IF_ERROR(ApplyAgentConfigYaml(text, config, &o));
  }
  if (fs.WasSet("port")) o.port = flags_in.port;
  if (fs.WasSet("bind")) o.bind = flags_in.bind;
  if (fs.WasSet("port-file")) o.port_file = flags_in.port_file;
  if (fs.WasSet("name")) o.name = flags_in.name;
  if (fs.WasSet("collectors")) {
    o.collectors = SplitList(collectors);
    o.collectors_given = true;
  }
  if (fs.WasSet("synthetic")) o.synthetic = flags_in.synthetic;
  if (fs.WasSet("clock-skew-ms")) o.clock_skew_ms = flags_in.clock_skew_ms;
  if (fs.WasSet("max-duration-ms")) o.max_duration_ms = flags_in.max_duration_ms;
  if (fs.WasSet("log-level")) o.log_level = flags_in.log_level;
  if (fs.WasSet("log-format")) o.log_format = flags_in.log_format;
  if (fs.WasSet("metrics-port")) o.metrics_port = flags_in.metrics_port;
  if (fs.WasSet("metrics-bind")) o.metrics_bind = flags_in.metrics_bind;
  if (fs.WasSet("tsl-save-root")) o.tsl_save_root = flags_in.tsl_save_root;
  if (fs.WasSet("tsl-local")) {
    absl::StatusOr<std::vector<std::string>> servers = ParseTslAddressList(tsl_local);
    if (!servers.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("--tsl-local: ", servers.status().message()));
    }
    o.tsl_local = *std::move(servers);
  }
  if (fs.WasSet("tsl-grace-ms")) o.tsl_grace_ms = flags_in.tsl_grace_ms;
  if (fs.WasSet("inject-socket")) o.inject_socket = flags_in.inject_socket;
  if (fs.WasSet("inject-socket-mode")) o.inject_socket_mode = flags_in.inject_socket_mode;
  if (fs.WasSet("retain-ms")) o.retain_ms = flags_in.retain_ms;
  if (fs.WasSet("retain-mb")) o.retain_mb = flags_in.retain_mb;
  if (fs.WasSet("max-trace-events")) o.max_trace_events = flags_in.max_trace_events;
  if (fs.WasSet("max-trace-mb")) o.max_trace_mb = flags_in.max_trace_mb;
  if (fs.WasSet("max-held-mb")) o.max_held_mb = flags_in.max_held_mb;
  if (fs.WasSet("stream-idle-timeout-ms")) {
    o.stream_idle_timeout_ms = flags_in.stream_idle_timeout_ms;
  }
  // Naming a framework server enables the collector that captures it.
  if (!o.tsl_local.empty() &&
      std::find(o.collectors.begin(), o.collectors.end(), "tsl") == o.collectors.end()) {
    o.collectors.emplace_back("tsl");
  }
  if (fs.WasSet("endpoints")) o.endpoints = flags_in.endpoints;
  // The default collectors: the real GPU collector on a host with an NVIDIA driver. Asking for
  // the synthetic job (its knobs), or several endpoints (tests, benchmarks), keeps the synthetic
  // one.
  if (!o.collectors_given && o.synthetic.empty() && o.endpoints <= 1 && PathExists(nvidia_probe)) {
    std::replace(o.collectors.begin(), o.collectors.end(), std::string("synthetic"),
                 std::string("cupti"));
  }
  if (fs.WasSet("endpoint-skew-spread-ms")) {
    o.endpoint_skew_spread_ms = flags_in.endpoint_skew_spread_ms;
  }
  if (fs.WasSet("tls-cert")) o.tls_cert = flags_in.tls_cert;
  if (fs.WasSet("tls-key")) o.tls_key = flags_in.tls_key;
  if (fs.WasSet("tls-ca")) o.tls_ca = flags_in.tls_ca;
  if (fs.WasSet("token-file")) o.token_file = flags_in.token_file;
  if (fs.WasSet("insecure")) o.insecure = flags_in.insecure;
  if (o.bind.empty()) o.bind = AuthenticatesClients(o) || o.insecure ? "0.0.0.0" : "127.0.0.1";
  PROFCTL_RETURN_IF_ERROR(ValidateOptions(o));
  return o;
}

}  // namespace profctl::agent
