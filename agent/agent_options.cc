#include "agent/agent_options.h"

#include <algorithm>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "agent/auth.h"
#include "agent/collectors/cupti/inject_server.h"
#include "agent/collectors/tsl/tsl_collector.h"
#include "common/check.h"
#include "common/file_util.h"
#include "common/flags.h"
#include "common/port_file.h"
#include "common/status_macros.h"
#include "common/yaml_config.h"

namespace profctl::agent {
namespace {

// Ports, addresses, logging and the capture window.
absl::Status ValidateServing(const AgentOptions& o) {
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
  return absl::OkStatus();
}

// --collectors and what the collectors it names need.
absl::Status ValidateCollectors(const AgentOptions& o) {
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
  const bool tsl = UsesCollector(o, kTslCollector);
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
  const bool cupti = UsesCollector(o, kCuptiCollector);
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
  return absl::OkStatus();
}

// The name, what the agent keeps and holds, and the endpoints.
absl::Status ValidateLimits(const AgentOptions& o) {
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
        Range{"--stream-idle-timeout-ms", o.stream_idle_timeout_ms, 100, 3'600'000},
        Range{"--flight-recorder", o.flight_recorder_s, 0, 3600},
        Range{"--flight-recorder-mb", o.flight_recorder_mb, 1, 1 << 16},
        Range{"--hang-factor", o.hang_factor, 2, 1000}}) {
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
  return absl::OkStatus();
}

// Who may call the agent (docs/security.md), and how a caller learns a free port.
absl::Status ValidateAccess(const AgentOptions& o) {
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

// Each check names the flag (the config's key is the flag's name with '_' for '-').
absl::Status ValidateOptions(const AgentOptions& o) {
  PROFCTL_RETURN_IF_ERROR(ValidateServing(o));
  PROFCTL_RETURN_IF_ERROR(ValidateCollectors(o));
  PROFCTL_RETURN_IF_ERROR(ValidateLimits(o));
  return ValidateAccess(o);
}

std::vector<std::string> SplitList(const std::string& s) {
  return absl::StrSplit(s, ',', absl::SkipWhitespace());
}

// One row per setting: its YAML key, the flag (the key with '-' for '_'), the help, and where it
// lands in AgentOptions. The one place a setting is named: flags, the config file, the merge of
// the two (flags win) and the list of known settings all come from this table.
struct Setting {
  enum class Kind {
    kInt,         // int64_t field
    kString,      // std::string field
    kBool,        // bool field
    kCollectors,  // a list (YAML sequence, or comma-separated); sets collectors_given
    kSynthetic,   // key=value,... or a YAML mapping of knobs
    kTslLocal,    // host:port list, checked by ParseTslAddressList
    kFlagOnly,    // --config: a flag, not a setting of the file
  };
  const char* key;
  Kind kind;
  int64_t AgentOptions::*int_field = nullptr;
  std::string AgentOptions::*string_field = nullptr;
  bool AgentOptions::*bool_field = nullptr;
  std::string help;
  // An empty value is refused, as a flag (--bind=) and in the file (bind: "").
  bool non_empty = false;

  std::string flag() const {
    std::string f = key;
    std::replace(f.begin(), f.end(), '_', '-');
    return f;
  }
};

Setting Int(const char* key, int64_t AgentOptions::*field, std::string help) {
  return {key, Setting::Kind::kInt, field, nullptr, nullptr, std::move(help)};
}
Setting Str(const char* key, std::string AgentOptions::*field, std::string help,
            bool non_empty = false) {
  return {key, Setting::Kind::kString, nullptr, field, nullptr, std::move(help), non_empty};
}
Setting Bool(const char* key, bool AgentOptions::*field, std::string help) {
  return {key, Setting::Kind::kBool, nullptr, nullptr, field, std::move(help)};
}
Setting Special(const char* key, Setting::Kind kind, std::string help) {
  return {key, kind, nullptr, nullptr, nullptr, std::move(help)};
}

// "synthetic: the simulated training job, tsl: ...": --collectors' help.
std::string CollectorsHelp() {
  std::vector<std::string> items;
  for (const CollectorName& c : kCollectorNames) {
    items.push_back(absl::StrCat(c.name, ": ", c.description));
  }
  return absl::StrJoin(items, "; ");
}

// In the order --help lists them.
const std::vector<Setting>& Settings() {
  using K = Setting::Kind;
  static const auto* const kSettings = new std::vector<Setting>{
      Int("port", &AgentOptions::port,
          "port to serve AgentService and tensorflow.ProfilerService on; 0 picks a free one "
          "(with --endpoints=N: the first of N consecutive ports, or N free ones)"),
      Str("bind", &AgentOptions::bind,
          "address to listen on (default: 0.0.0.0 with --token-file, --tls-ca or --insecure, "
          "else 127.0.0.1); a non-loopback address needs --token-file or --tls-ca, or "
          "--insecure",
          /*non_empty=*/true),
      Str("tls_cert", &AgentOptions::tls_cert,
          "PEM certificate (then its intermediates) to serve TLS with; needs --tls-key"),
      Str("tls_key", &AgentOptions::tls_key,
          "PEM private key of --tls-cert (not readable by others: chmod 600)"),
      Str("tls_ca", &AgentOptions::tls_ca,
          "PEM CA certificate(s): require every client to present a certificate they signed "
          "(mutual TLS); needs --tls-cert"),
      Str("token_file", &AgentOptions::token_file,
          "file holding a bearer token (16..4096 visible ASCII characters, e.g. 'openssl rand "
          "-hex 32'; not readable by others) that every call must send as 'authorization: "
          "Bearer <token>'; without --tls-cert it travels in clear text"),
      Bool("insecure", &AgentOptions::insecure,
           "serve without client authentication on a non-loopback --bind (logs a warning)"),
      Str("port_file", &AgentOptions::port_file,
          "write the chosen port here (for --port=0); with --endpoints=N, N lines, one port "
          "per endpoint in order"),
      Str("name", &AgentOptions::name, "name for this host's trace files (default: its address)"),
      Special("collectors", K::kCollectors,
              absl::StrCat("comma-separated collectors (", CollectorsHelp(),
                           "); default: cupti on a host with an NVIDIA driver, else synthetic (a "
                           "simulated job)")),
      Special("synthetic", K::kSynthetic,
              "synthetic job knobs KEY=VAL,... (rank, world, seed, step_ms, gpus, "
              "kernels_per_step, straggler_rank, straggler_factor, straggler_every, slow_gpu, "
              "input_stall_rank, "
              "input_stall_ms, allreduce_ms, jitter, jitter_dof, slowdown_at_ms, slowdown_at_step, "
              "slowdown_factor, hang_rank, hang_at_step)"),
      Int("clock_skew_ms", &AgentOptions::clock_skew_ms,
          "shift this agent's wall clock (tests: emulate hosts whose clocks disagree)"),
      Int("max_duration_ms", &AgentOptions::max_duration_ms, "longest capture accepted"),
      Special("config", K::kFlagOnly, "YAML file with the same settings (flags win)"),
      Str("log_level", &AgentOptions::log_level, "trace, debug, info, warn, error or off"),
      Str("log_format", &AgentOptions::log_format, "text, or json (one object per line)"),
      Int("metrics_port", &AgentOptions::metrics_port,
          "serve Prometheus /metrics and /healthz over HTTP on this port (0: a free one, "
          "-1: off)"),
      Str("metrics_bind", &AgentOptions::metrics_bind, "address for /metrics (default: --bind)"),
      Str("tsl_save_root", &AgentOptions::tsl_save_root,
          "existing folder (absolute) inside which tensorflow.ProfilerService clients may have "
          "traces saved on this machine (their repository_root); default: never, the trace "
          "goes back in the response"),
      Special("tsl_local", K::kTslLocal,
              "framework profiler servers on this host to capture in every window (JAX/TF: "
              "jax.profiler.start_server(9999)), host:port or [ipv6]:port, comma-separated; their "
              "TPU/GPU/host planes join this host's trace. Enables the tsl collector"),
      Int("tsl_grace_ms", &AgentOptions::tsl_grace_ms,
          absl::StrCat("how long past the end of the window a --tsl-local server may take to "
                       "answer before its planes are given up (0..",
                       kMaxTslGraceMs, ")")),
      Str("inject_socket", &AgentOptions::inject_socket,
          "Unix socket for CUDA processes running libprofctl_inject.so (the cupti collector; "
          "their PROFCTL_AGENT_SOCKET must name it); its folder is created 0700, the socket "
          "is 0600"),
      Str("inject_socket_mode", &AgentOptions::inject_socket_mode,
          "octal permissions of --inject-socket: 0600 (only this user), 0660 (its group), "
          "0666 (everyone: training jobs running as another user)"),
      Int("retain_ms", &AgentOptions::retain_ms,
          "keep the trace of a keyed capture (profctl sends a session key) this long after it "
          "ended, so a coordinator whose transfer failed can Fetch it again; 0 keeps none"),
      Int("retain_mb", &AgentOptions::retain_mb,
          "keep at most this many MiB of such traces (oldest evicted first); 0 keeps none"),
      Int("max_trace_events", &AgentOptions::max_trace_events,
          "per capture: drop events beyond this many (each line keeps its earliest; the trace "
          "says how many in its header and warnings)"),
      Int("max_trace_mb", &AgentOptions::max_trace_mb,
          "per capture: drop events until the serialized trace is at most this many MiB"),
      Int("max_held_mb", &AgentOptions::max_held_mb,
          "trace memory held for streams not yet read plus kept traces: kept ones are evicted "
          "first, then new captures are refused (RESOURCE_EXHAUSTED) until streams drain; a CUDA "
          "window (cupti) may bring at most 1/11 of it (collecting holds about 11x that)"),
      Int("flight_recorder", &AgentOptions::flight_recorder_s,
          "SECONDS: keep the last SECONDS of every collector that can (synthetic), always, so "
          "`profctl capture --last` can take the past (0: off; docs/flight-recorder.md)"),
      Int("flight_recorder_mb", &AgentOptions::flight_recorder_mb,
          "the flight recorder's memory for the whole process, MiB (oldest steps dropped first)"),
      Bool("flight_recorder_launches", &AgentOptions::flight_recorder_launches,
           "with --flight-recorder: CUDA processes keep their NCCL launches for the hang verdict; "
           "this holds each process's one CUPTI callback subscription, so torch.profiler, JAX/TF "
           "or Nsight inside it cannot subscribe: =false keeps step ranges only (docs/cupti.md)"),
      Int("hang_factor", &AgentOptions::hang_factor,
          "K: a step source (synthetic; each CUDA process) is stalled when no step of it ended "
          "for K times its median step time (2..1000; GetStepSignal's stalls, /metrics; "
          "docs/flight-recorder.md)"),
      Int("stream_idle_timeout_ms", &AgentOptions::stream_idle_timeout_ms,
          "cancel a Capture/Fetch stream whose client has not read for this long"),
      Int("endpoints", &AgentOptions::endpoints,
          absl::StrCat("FOR TESTS AND BENCHMARKS ONLY: serve N independent agents in this one "
                       "process (1..",
                       kMaxEndpoints,
                       "), each on its own port with its own capture slot, named <name>-<i> "
                       "(ep-<i> without --name) and running synthetic rank <rank>+i")),
      Int("endpoint_skew_spread_ms", &AgentOptions::endpoint_skew_spread_ms,
          "FOR TESTS AND BENCHMARKS ONLY: give endpoint i an extra clock skew in [-S, +S] ms, "
          "a fixed function of i"),
  };
  return *kSettings;
}

// The keys a config file may hold, in the order --help lists them.
std::vector<absl::string_view> SettingKeys() {
  std::vector<absl::string_view> keys;
  for (const Setting& s : Settings()) {
    if (s.kind != Setting::Kind::kFlagOnly) keys.emplace_back(s.key);
  }
  return keys;
}

// A list setting: a YAML sequence, or one comma-separated string.
absl::StatusOr<std::vector<std::string>> YamlList(const YAML::Node& v) {
  if (v.IsSequence()) return YamlConfig::AsStringList(v, /*allow_empty=*/true);
  PROFCTL_ASSIGN_OR_RETURN(const std::string text, YamlConfig::AsString(v, /*allow_empty=*/true));
  return SplitList(text);
}

// The synthetic job's knobs: "key=value,..." or a mapping of them.
absl::StatusOr<std::string> YamlSyntheticKnobs(const YAML::Node& v) {
  if (!v.IsMap()) return YamlConfig::AsString(v, /*allow_empty=*/true);
  std::vector<std::string> items;
  for (const auto& knob : v) {
    PROFCTL_ASSIGN_OR_RETURN(const std::string key,
                             YamlConfig::AsString(knob.first, /*allow_empty=*/true));
    PROFCTL_ASSIGN_OR_RETURN(const std::string value,
                             YamlConfig::AsString(knob.second, /*allow_empty=*/true));
    items.push_back(absl::StrCat(key, "=", value));
  }
  return absl::StrJoin(items, ",");
}

// `value` into *field, or "<where> has a value of the wrong type: <why>".
template <typename T>
absl::Status Assign(absl::StatusOr<T> value, const std::string& where, T* field) {
  if (!value.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, " has a value of the wrong type: ", value.status().message()));
  }
  *field = *std::move(value);
  return absl::OkStatus();
}

// Reads one config value into `o`; `where` ("agent.yaml:3: 'port'") starts its errors.
absl::Status ApplyYamlSetting(const Setting& s, const YAML::Node& v, const std::string& where,
                              AgentOptions* o) {
  using K = Setting::Kind;
  switch (s.kind) {
    case K::kInt:
      return Assign(YamlConfig::AsInt(v, std::numeric_limits<int64_t>::min(),
                                      std::numeric_limits<int64_t>::max()),
                    where, &(o->*s.int_field));
    case K::kString:
      PROFCTL_RETURN_IF_ERROR(
          Assign(YamlConfig::AsString(v, /*allow_empty=*/true), where, &(o->*s.string_field)));
      if (s.non_empty && (o->*s.string_field).empty()) {
        return absl::InvalidArgumentError(absl::StrCat(where, " must not be empty"));
      }
      return absl::OkStatus();
    case K::kBool:
      return Assign(YamlConfig::AsBool(v), where, &(o->*s.bool_field));
    case K::kCollectors:
      o->collectors_given = true;
      return Assign(YamlList(v), where, &o->collectors);
    case K::kSynthetic:
      return Assign(YamlSyntheticKnobs(v), where, &o->synthetic);
    case K::kTslLocal: {
      std::vector<std::string> list;
      PROFCTL_RETURN_IF_ERROR(Assign(YamlList(v), where, &list));
      absl::StatusOr<std::vector<std::string>> servers =
          ParseTslAddressList(absl::StrJoin(list, ","));
      if (!servers.ok()) {
        return absl::InvalidArgumentError(absl::StrCat(where, ": ", servers.status().message()));
      }
      o->tsl_local = *std::move(servers);
      return absl::OkStatus();
    }
    case K::kFlagOnly:
      break;
  }
  return absl::InvalidArgumentError(absl::StrCat(where, " is not a setting of the file"));
}

}  // namespace

const std::vector<std::string>& KnownCollectors() {
  static const auto* const kKnown = [] {
    auto* known = new std::vector<std::string>;
    for (const CollectorName& c : kCollectorNames) known->emplace_back(c.name);
    return known;
  }();
  return *kKnown;
}

bool UsesCollector(const AgentOptions& options, absl::string_view name) {
  return std::find(options.collectors.begin(), options.collectors.end(), name) !=
         options.collectors.end();
}

std::string AgentPortFileText(const std::vector<int>& ports, int metrics_port) {
  return PortFileText({.ports = ports, .metrics_port = metrics_port});
}

absl::Status ApplyAgentConfigYaml(const std::string& yaml, const std::string& source,
                                  AgentOptions* options) {
  PROFCTL_ASSIGN_OR_RETURN(const YamlConfig config, YamlConfig::Parse(yaml, source));
  if (config.root().IsNull()) return absl::OkStatus();
  PROFCTL_RETURN_IF_ERROR(config.RequireTopLevelMap());
  PROFCTL_RETURN_IF_ERROR(config.CheckKeys(config.root(), "", SettingKeys(),
                                           YamlConfig::UnknownKeyWording::kNotASetting));
  for (const auto& kv : config.root()) {
    const std::string key = kv.first.Scalar();
    const std::string where = absl::StrCat(source, ":", kv.first.Mark().line + 1, ": '", key, "'");
    const auto& settings = Settings();
    const auto s = std::find_if(settings.begin(), settings.end(), [&](const Setting& row) {
      return row.key == key && row.kind != Setting::Kind::kFlagOnly;
    });
    PROFCTL_DCHECK(s != settings.end());  // CheckKeys let only settings through
    PROFCTL_RETURN_IF_ERROR(ApplyYamlSetting(*s, kv.second, where, options));
  }
  return absl::OkStatus();
}

absl::StatusOr<AgentOptions> ParseAgentOptions(const std::vector<std::string>& args,
                                               const std::string& nvidia_probe) {
  using K = Setting::Kind;
  const AgentOptions defaults;
  AgentOptions flags_in = defaults;
  flags_in.bind.clear();  // its default depends on other flags, as the help says
  // Settings whose flag is text parsed after the flags: --collectors, --tsl-local, --config.
  std::string collectors = absl::StrJoin(defaults.collectors, ",");
  std::string tsl_local;
  std::string config;
  FlagSet fs("profctl-agent", "[--port=6000] [--config=agent.yaml] [flags]");
  for (const Setting& s : Settings()) {
    switch (s.kind) {
      case K::kInt:
        fs.Int64(s.flag(), &(flags_in.*s.int_field), s.help);
        break;
      case K::kString:
        fs.String(s.flag(), &(flags_in.*s.string_field), s.help);
        if (s.non_empty) fs.RejectEmpty(s.flag());
        break;
      case K::kBool:
        fs.Bool(s.flag(), &(flags_in.*s.bool_field), s.help);
        break;
      case K::kCollectors:
        fs.String(s.flag(), &collectors, s.help);
        break;
      case K::kSynthetic:
        fs.String(s.flag(), &flags_in.synthetic, s.help);
        break;
      case K::kTslLocal:
        fs.String(s.flag(), &tsl_local, s.help);
        break;
      case K::kFlagOnly:
        fs.String(s.flag(), &config, s.help);
        break;
    }
  }
  bool version = false;
  fs.Bool("version", &version, "print the version and exit (also -V)");
  if (args.size() == 1 && args[0] == "-V") {
    AgentOptions o;
    o.version = true;
    return o;
  }
  PROFCTL_RETURN_IF_ERROR(fs.Parse(args));
  if (version) {
    AgentOptions o;
    o.version = true;
    return o;
  }
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
    PROFCTL_ASSIGN_OR_RETURN(const std::string text, YamlConfig::ReadFile(config));
    PROFCTL_RETURN_IF_ERROR(ApplyAgentConfigYaml(text, config, &o));
  }
  // Flags win over the file.
  for (const Setting& s : Settings()) {
    if (!fs.WasSet(s.flag())) continue;
    switch (s.kind) {
      case K::kInt:
        o.*s.int_field = flags_in.*s.int_field;
        break;
      case K::kString:
        o.*s.string_field = flags_in.*s.string_field;
        break;
      case K::kBool:
        o.*s.bool_field = flags_in.*s.bool_field;
        break;
      case K::kCollectors:
        o.collectors = SplitList(collectors);
        o.collectors_given = true;
        break;
      case K::kSynthetic:
        o.synthetic = flags_in.synthetic;
        break;
      case K::kTslLocal: {
        absl::StatusOr<std::vector<std::string>> servers = ParseTslAddressList(tsl_local);
        if (!servers.ok()) {
          return absl::InvalidArgumentError(
              absl::StrCat("--tsl-local: ", servers.status().message()));
        }
        o.tsl_local = *std::move(servers);
        break;
      }
      case K::kFlagOnly:
        break;
    }
  }
  // Naming a framework server enables the collector that captures it.
  if (!o.tsl_local.empty() && !UsesCollector(o, kTslCollector)) {
    o.collectors.emplace_back(kTslCollector);
  }
  // The default collectors: the real GPU collector on a host with an NVIDIA driver. Asking for
  // the synthetic job (its knobs), or several endpoints (tests, benchmarks), keeps the synthetic
  // one.
  if (!o.collectors_given && o.synthetic.empty() && o.endpoints <= 1 && PathExists(nvidia_probe)) {
    std::replace(o.collectors.begin(), o.collectors.end(), std::string(kSyntheticCollector),
                 std::string(kCuptiCollector));
  }
  if (o.bind.empty()) o.bind = AuthenticatesClients(o) || o.insecure ? "0.0.0.0" : "127.0.0.1";
  PROFCTL_RETURN_IF_ERROR(ValidateOptions(o));
  return o;
}

}  // namespace profctl::agent
