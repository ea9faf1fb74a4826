#include "agent/agent_options.h"

#include <unistd.h>

#include <algorithm>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "agent/auth.h"
#include "common/file_util.h"
#include "common/yaml_config.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/status_matchers.h"
#include "tests/temp_dir.h"

using ::profctl::testkit::IsOk;

namespace profctl::agent {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

// Every test below runs as on a host without an NVIDIA driver, whatever this machine has
// (DefaultCollectorsAreCuptiOnAGpuHostElseSynthetic says what changes with one).
constexpr char kNoDriver[] = "/nonexistent/proc/driver/nvidia/version";
absl::StatusOr<AgentOptions> Parse(const std::vector<std::string>& args,
                                   const std::string& probe = kNoDriver) {
  return ParseAgentOptions(args, probe);
}

TEST(AgentOptionsTest, DefaultCollectorsAreCuptiOnAGpuHostElseSynthetic) {
  const testkit::TempDir tmp;
  const std::string driver = JoinPath(tmp.path(), "version");
  ASSERT_THAT(WriteFileAtomically(driver, "NVRM version: NVIDIA UNIX x86_64 Kernel Module\n"),
              IsOk());
  auto collectors = [&](const std::vector<std::string>& args) {
    absl::StatusOr<AgentOptions> o = Parse(args, driver);
    EXPECT_THAT(o, IsOk());
    return o.ok() ? o->collectors : std::vector<std::string>{};
  };
  EXPECT_THAT(Parse({})->collectors, ElementsAre("synthetic"));  // no driver
  EXPECT_THAT(collectors({}), ElementsAre("cupti"));
  EXPECT_THAT(collectors({"--tsl-local=localhost:9999"}), ElementsAre("cupti", "tsl"));
  // Asking for the synthetic job, several endpoints, or naming the collectors: no default.
  EXPECT_THAT(collectors({"--synthetic=step_ms=50"}), ElementsAre("synthetic"));
  EXPECT_THAT(collectors({"--endpoints=4"}), ElementsAre("synthetic"));
  EXPECT_THAT(collectors({"--collectors=synthetic"}), ElementsAre("synthetic"));
  const std::string config = JoinPath(tmp.path(), "agent.yaml");
  ASSERT_THAT(WriteFileAtomically(config, "collectors: [synthetic]\n"), IsOk());
  EXPECT_THAT(collectors({"--config=" + config}), ElementsAre("synthetic"));
  ASSERT_THAT(WriteFileAtomically(config, "port: 6001\n"), IsOk());
  EXPECT_THAT(collectors({"--config=" + config}), ElementsAre("cupti"));
}

TEST(AgentOptionsTest, DefaultsAndFlags) {
  absl::StatusOr<AgentOptions> o = Parse({});
  ASSERT_THAT(o, IsOk());
  EXPECT_EQ(o->port, 6000);
  EXPECT_THAT(o->collectors, ::testing::ElementsAre("synthetic"));
  o = Parse({"--port=0", "--port-file=/tmp/p", "--name=w-1", "--clock-skew-ms=-30",
             "--synthetic=rank=1,world=2", "--max-duration-ms=500"});
  ASSERT_THAT(o, IsOk());
  EXPECT_EQ(o->port, 0);
  EXPECT_EQ(o->clock_skew_ms, -30);
  EXPECT_EQ(o->synthetic, "rank=1,world=2");
  EXPECT_EQ(o->max_duration_ms, 500);
}

TEST(AgentOptionsTest, BadFlagsAreNamed) {
  EXPECT_THAT(Parse({"--port=70000"}).status().message(), HasSubstr("--port=70000"));
  EXPECT_THAT(Parse({"--port=0"}).status().message(), HasSubstr("--port-file"));
  EXPECT_THAT(Parse({"--collectors=nvml"}).status().message(),
              HasSubstr("unknown collector 'nvml' (known: synthetic, tsl, cupti)"));
  EXPECT_THAT(Parse({"--collectors=synthetic,synthetic"}).status().message(),
              HasSubstr("'synthetic' is listed more than once"));  // once: every event doubled
  EXPECT_THAT(Parse({"--name=a/b"}).status().message(), HasSubstr("--name 'a/b'"));
  EXPECT_THAT(Parse({"--max-duration-ms=0"}).status().message(), HasSubstr("--max-duration-ms=0"));
  EXPECT_THAT(Parse({"extra"}).status().message(), HasSubstr("'extra'"));
  EXPECT_THAT(Parse({"--config=/nonexistent.yaml"}).status().message(),
              HasSubstr("/nonexistent.yaml"));
}

// An --config file over YamlConfig::kMaxFileBytes is refused by its size before it is parsed.
TEST(AgentOptionsTest, AConfigFileOverTheSizeCapIsRefusedBeforeItIsParsed) {
  const testkit::TempDir tmp;
  const std::string config = JoinPath(tmp.path(), "agent.yaml");
  ASSERT_THAT(WriteFileAtomically(config, "port: 6001\nname: " +
                                              std::string(YamlConfig::kMaxFileBytes, 'x') + "\n"),
              IsOk());
  absl::StatusOr<AgentOptions> o = Parse({"--config=" + config});
  ASSERT_FALSE(o.ok());
  EXPECT_THAT(std::string(o.status().message()),
              AllOf(HasSubstr(config + ": "),
                    HasSubstr("more than a config file may hold (4194304 bytes)")));
}

TEST(AgentOptionsTest, Endpoints) {
  absl::StatusOr<AgentOptions> o = Parse({});
  ASSERT_THAT(o, IsOk());
  EXPECT_EQ(o->endpoints, 1);
  EXPECT_EQ(o->endpoint_skew_spread_ms, 0);
  o = Parse({"--port=0", "--port-file=/tmp/p", "--endpoints=300", "--endpoint-skew-spread-ms=50"});
  ASSERT_THAT(o, IsOk());
  EXPECT_EQ(o->endpoints, 300);
  EXPECT_EQ(o->endpoint_skew_spread_ms, 50);
  o = Parse({"--port=63536", "--endpoints=2000"});  // ports 63536..65535
  EXPECT_THAT(o, IsOk());
}

TEST(AgentOptionsTest, BadEndpointFlagsAreInvalidArgumentsNamingTheFlag) {
  auto error = [](std::vector<std::string> args) { return Parse(args).status(); };
  for (const char* bad : {"--endpoints=0", "--endpoints=-3", "--endpoints=2049"}) {
    const absl::Status s = error({bad});
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(s.message(), HasSubstr(bad));
    EXPECT_THAT(s.message(), HasSubstr("1..2048"));
  }
  EXPECT_THAT(error({"--endpoints=lots"}).message(), HasSubstr("--endpoints"));
  absl::Status s = error({"--port=65000", "--endpoints=600"});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("--port=65000 with --endpoints=600 needs ports up to 65599"));
  s = error({"--endpoint-skew-spread-ms=-1"});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("--endpoint-skew-spread-ms=-1"));
  EXPECT_THAT(error({"--endpoint-skew-spread-ms=86400001"}).message(),
              HasSubstr("--endpoint-skew-spread-ms=86400001 is not in 0..86400000"));
  EXPECT_THAT(error({"--port=0", "--endpoints=3"}).message(),
              HasSubstr("give --port-file to learn them"));
}

TEST(AgentOptionsTest, EndpointSettingsInYaml) {
  AgentOptions o;
  ASSERT_THAT(
      ApplyAgentConfigYaml("endpoints: 12\nendpoint_skew_spread_ms: 40\n", "agent.yaml", &o),
      IsOk());
  EXPECT_EQ(o.endpoints, 12);
  EXPECT_EQ(o.endpoint_skew_spread_ms, 40);
}

TEST(AgentOptionsTest, ProtectionLimitsHaveDefaultsFlagsYamlAndRanges) {
  absl::StatusOr<AgentOptions> o = Parse({});
  ASSERT_THAT(o, IsOk());
  EXPECT_EQ(o->retain_ms, 600'000);
  EXPECT_EQ(o->retain_mb, 256);
  EXPECT_EQ(o->max_trace_events, 50'000'000);
  EXPECT_EQ(o->max_trace_mb, 256);
  EXPECT_EQ(o->max_held_mb, 512);
  EXPECT_EQ(o->stream_idle_timeout_ms, 30'000);
  o = Parse({"--retain-ms=0", "--retain-mb=8", "--max-trace-events=1000", "--max-trace-mb=2",
             "--max-held-mb=64", "--stream-idle-timeout-ms=500"});
  ASSERT_THAT(o, IsOk());
  EXPECT_EQ(o->retain_ms, 0);
  EXPECT_EQ(o->retain_mb, 8);
  EXPECT_EQ(o->max_trace_events, 1000);
  EXPECT_EQ(o->max_trace_mb, 2);
  EXPECT_EQ(o->max_held_mb, 64);
  EXPECT_EQ(o->stream_idle_timeout_ms, 500);
  AgentOptions y;
  ASSERT_THAT(
      ApplyAgentConfigYaml("retain_ms: 5\nretain_mb: 6\nmax_trace_events: 7\n"
                           "max_trace_mb: 8\nmax_held_mb: 9\nstream_idle_timeout_ms: 1000\n",
                           "agent.yaml", &y),
      IsOk());
  EXPECT_EQ(y.retain_ms, 5);
  EXPECT_EQ(y.retain_mb, 6);
  EXPECT_EQ(y.max_trace_events, 7);
  EXPECT_EQ(y.max_trace_mb, 8);
  EXPECT_EQ(y.max_held_mb, 9);
  EXPECT_EQ(y.stream_idle_timeout_ms, 1000);
  EXPECT_THAT(Parse({"--max-held-mb=0"}).status().message(),
              HasSubstr("--max-held-mb=0 is not in 1.."));
  EXPECT_THAT(Parse({"--stream-idle-timeout-ms=5"}).status().message(),
              HasSubstr("--stream-idle-timeout-ms=5"));
  EXPECT_THAT(Parse({"--retain-ms=-1"}).status().message(), HasSubstr("--retain-ms=-1"));
  EXPECT_THAT(Parse({"--help"})->help_text, HasSubstr("--max-held-mb"));
}

TEST(AgentOptionsTest, VersionFlagAsksForTheVersionOnly) {
  absl::StatusOr<AgentOptions> o = Parse({"--version"});
  ASSERT_THAT(o, IsOk());
  EXPECT_TRUE(o->version);
  EXPECT_FALSE(Parse({})->version);
  EXPECT_TRUE(Parse({"-V"})->version);
  EXPECT_THAT(Parse({"--versoin"}).status().message(), HasSubstr("did you mean --version?"));
  EXPECT_THAT(Parse({"--metric-port=1"}).status().message(),
              HasSubstr("did you mean --metrics-port?"));
}

TEST(AgentOptionsTest, PortFileListsGrpcPortsThenTheMetricsPort) {
  EXPECT_EQ(AgentPortFileText({6000}, /*metrics_port=*/-1), "6000\n");
  EXPECT_EQ(AgentPortFileText({6000, 6001}, /*metrics_port=*/-1), "6000\n6001\n");
  EXPECT_EQ(AgentPortFileText({41234}, /*metrics_port=*/9100), "41234\nmetrics=9100\n");
}

TEST(AgentOptionsTest, HangFactorDefaultsToTenAndIsChecked) {
  absl::StatusOr<AgentOptions> o = Parse({});
  ASSERT_THAT(o, IsOk());
  EXPECT_EQ(o->hang_factor, 10);
  o = Parse({"--hang-factor=4"});
  ASSERT_THAT(o, IsOk());
  EXPECT_EQ(o->hang_factor, 4);
  AgentOptions y;
  ASSERT_THAT(ApplyAgentConfigYaml("hang_factor: 25\n", "agent.yaml", &y), IsOk());
  EXPECT_EQ(y.hang_factor, 25);
  EXPECT_THAT(Parse({"--hang-factor=1"}).status().message(),
              HasSubstr("--hang-factor=1 is not in 2..1000"));
  EXPECT_THAT(Parse({"--hang-factor=1001"}).status().message(),
              HasSubstr("--hang-factor=1001 is not in 2..1000"));
  EXPECT_THAT(Parse({"--help"})->help_text, HasSubstr("--hang-factor"));
}

TEST(AgentOptionsTest, FlightRecorderIsOffByDefaultWithBoundedPastAndMemory) {
  absl::StatusOr<AgentOptions> o = Parse({});
  ASSERT_THAT(o, IsOk());
  EXPECT_EQ(o->flight_recorder_s, 0);
  EXPECT_EQ(o->flight_recorder_mb, 64);
  o = Parse({"--flight-recorder=30", "--flight-recorder-mb=16"});
  ASSERT_THAT(o, IsOk());
  EXPECT_EQ(o->flight_recorder_s, 30);
  EXPECT_EQ(o->flight_recorder_mb, 16);
  AgentOptions y;
  ASSERT_THAT(
      ApplyAgentConfigYaml("flight_recorder: 60\nflight_recorder_mb: 8\n", "agent.yaml", &y),
      IsOk());
  EXPECT_EQ(y.flight_recorder_s, 60);
  EXPECT_EQ(y.flight_recorder_mb, 8);
  EXPECT_THAT(Parse({"--flight-recorder=3601"}).status().message(),
              HasSubstr("--flight-recorder=3601 is not in 0..3600"));
  EXPECT_THAT(Parse({"--flight-recorder-mb=0"}).status().message(),
              HasSubstr("--flight-recorder-mb=0 is not in 1.."));
  EXPECT_THAT(Parse({"--help"})->help_text, HasSubstr("--flight-recorder-mb"));
  // The CUDA processes' NCCL launches: kept by default, off by flag or YAML.
  EXPECT_TRUE(Parse({})->flight_recorder_launches);
  EXPECT_FALSE(Parse({"--flight-recorder-launches=false"})->flight_recorder_launches);
  AgentOptions n;
  ASSERT_THAT(ApplyAgentConfigYaml("flight_recorder_launches: false\n", "agent.yaml", &n), IsOk());
  EXPECT_FALSE(n.flight_recorder_launches);
  EXPECT_THAT(Parse({"--help"})->help_text, HasSubstr("--flight-recorder-launches"));
}

TEST(AgentOptionsTest, TslSaveRootIsOffByDefaultAndMustBeAbsolute) {
  absl::StatusOr<AgentOptions> o = Parse({});
  ASSERT_THAT(o, IsOk());
  EXPECT_EQ(o->tsl_save_root, "");
  o = Parse({"--tsl-save-root=/srv/profiles"});
  ASSERT_THAT(o, IsOk());
  EXPECT_EQ(o->tsl_save_root, "/srv/profiles");
  EXPECT_THAT(Parse({"--tsl-save-root=profiles"}).status().message(),
              HasSubstr("--tsl-save-root=profiles must be an absolute path"));
  AgentOptions yaml;
  ASSERT_THAT(ApplyAgentConfigYaml("tsl_save_root: /data/tb\n", "agent.yaml", &yaml), IsOk());
  EXPECT_EQ(yaml.tsl_save_root, "/data/tb");
}

TEST(AgentOptionsTest, TslLocalEnablesTheTslCollector) {
  absl::StatusOr<AgentOptions> o = Parse({});
  ASSERT_THAT(o, IsOk());
  EXPECT_TRUE(o->tsl_local.empty());
  EXPECT_EQ(o->tsl_grace_ms, 10'000);
  o = Parse({"--tsl-local=localhost:9999, grpc://[::1]:9998", "--tsl-grace-ms=500"});
  ASSERT_THAT(o, IsOk());
  EXPECT_THAT(o->tsl_local, ::testing::ElementsAre("localhost:9999", "[::1]:9998"));
  EXPECT_THAT(o->collectors, ::testing::ElementsAre("synthetic", "tsl"));  // added
  EXPECT_EQ(o->tsl_grace_ms, 500);
  // Named explicitly: not added twice, and the order given is kept.
  o = Parse({"--collectors=tsl,synthetic", "--tsl-local=localhost:9999"});
  ASSERT_THAT(o, IsOk());
  EXPECT_THAT(o->collectors, ::testing::ElementsAre("tsl", "synthetic"));
  o = Parse({"--collectors=tsl", "--tsl-local=localhost:9999"});
  ASSERT_THAT(o, IsOk());
  EXPECT_THAT(o->collectors, ::testing::ElementsAre("tsl"));
}

TEST(AgentOptionsTest, CuptiCollectorAndItsInjectSocket) {
  absl::StatusOr<AgentOptions> o = Parse({});
  ASSERT_THAT(o, IsOk());
  EXPECT_EQ(o->inject_socket, "/tmp/profctl/agent.sock");
  EXPECT_THAT(o->collectors, ::testing::ElementsAre("synthetic"));  // still the default
  o = Parse({"--collectors=cupti", "--inject-socket=/run/profctl/a.sock"});
  ASSERT_THAT(o, IsOk());
  EXPECT_THAT(o->collectors, ::testing::ElementsAre("cupti"));
  EXPECT_EQ(o->inject_socket, "/run/profctl/a.sock");
  AgentOptions yaml;
  ASSERT_THAT(ApplyAgentConfigYaml("collectors: [cupti, synthetic]\ninject_socket: /x/y.sock\n",
                                   "agent.yaml", &yaml),
              IsOk());
  EXPECT_EQ(yaml.inject_socket, "/x/y.sock");
  ASSERT_THAT(ApplyAgentConfigYaml("inject_socket_mode: '0660'\n", "agent.yaml", &yaml), IsOk());
  EXPECT_EQ(yaml.inject_socket_mode, "0660");
  o = Parse({"--collectors=cupti", "--inject-socket-mode=666"});
  ASSERT_THAT(o, IsOk());
  EXPECT_EQ(o->inject_socket_mode, "666");
  o = Parse({"--inject-socket-mode=0400"});
  EXPECT_EQ(o.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(o.status().message()), ::testing::HasSubstr("--inject-socket-mode"));
  EXPECT_THAT(yaml.collectors, ::testing::ElementsAre("cupti", "synthetic"));
  o = Parse({"--collectors=cupti", "--endpoints=2"});
  EXPECT_EQ(o.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(o.status().message()), ::testing::HasSubstr("--endpoints=2"));
  o = Parse({"--collectors=cupti", "--inject-socket=/" + std::string(200, 'x')});
  EXPECT_EQ(o.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(o.status().message()), ::testing::HasSubstr("--inject-socket"));
}

TEST(AgentOptionsTest, BadTslSettingsAreNamed) {
  auto error = [](std::vector<std::string> args) {
    absl::Status s = Parse(args).status();
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    return std::string(s.message());
  };
  EXPECT_THAT(error({"--tsl-local=localhost"}),
              HasSubstr("--tsl-local: 'localhost' has no port; want host:port"));
  EXPECT_THAT(error({"--tsl-local=localhost:0"}),
              HasSubstr("--tsl-local: 'localhost:0' has port '0'; want a number in 1..65535"));
  EXPECT_THAT(error({"--tsl-local=::1:9999"}), HasSubstr("without brackets"));
  EXPECT_THAT(error({"--tsl-local=a:1,,b:2"}), HasSubstr("empty entry"));
  EXPECT_THAT(error({"--tsl-local=a:1,a:1"}), HasSubstr("'a:1' is listed twice"));
  EXPECT_THAT(error({"--collectors=synthetic,tsl"}),
              HasSubstr("--collectors lists tsl, but no framework profiler server is given: add "
                        "--tsl-local"));
  EXPECT_THAT(
      error({"--tsl-local=localhost:9999", "--port=0", "--port-file=/tmp/p", "--endpoints=4"}),
      HasSubstr("--tsl-local cannot be combined with --endpoints=4"));
  EXPECT_THAT(error({"--tsl-local=localhost:9999", "--tsl-grace-ms=30001"}),
              HasSubstr("--tsl-grace-ms=30001 is not in 0..30000"));
}

TEST(AgentOptionsTest, TslLocalInYaml) {
  AgentOptions o;
  ASSERT_THAT(ApplyAgentConfigYaml("tsl_local: [localhost:9999, 'grpc://127.0.0.1:6000']\n"
                                   "tsl_grace_ms: 2000\n",
                                   "agent.yaml", &o),
              IsOk());
  EXPECT_THAT(o.tsl_local, ::testing::ElementsAre("localhost:9999", "127.0.0.1:6000"));
  EXPECT_EQ(o.tsl_grace_ms, 2000);
  ASSERT_THAT(ApplyAgentConfigYaml("tsl_local: localhost:1,localhost:2\n", "agent.yaml", &o),
              IsOk());
  EXPECT_THAT(o.tsl_local, ::testing::ElementsAre("localhost:1", "localhost:2"));
  EXPECT_THAT(ApplyAgentConfigYaml("port: 1\ntsl_local: [localhost]\n", "agent.yaml", &o).message(),
              HasSubstr("agent.yaml:2: 'tsl_local': 'localhost' has no port"));

  const testkit::TempDir tmp;
  const std::string path = tmp.path() + "/agent.yaml";
  ASSERT_THAT(WriteFileAtomically(path, "collectors: [synthetic]\ntsl_local: [localhost:9999]\n"),
              IsOk());
  absl::StatusOr<AgentOptions> parsed = Parse({"--config=" + path});
  ASSERT_THAT(parsed, IsOk());
  EXPECT_THAT(parsed->collectors, ::testing::ElementsAre("synthetic", "tsl"));
  // The flag replaces the config's list.
  parsed = Parse({"--config=" + path, "--tsl-local=localhost:9000"});
  ASSERT_THAT(parsed, IsOk());
  EXPECT_THAT(parsed->tsl_local, ::testing::ElementsAre("localhost:9000"));
}

TEST(AgentOptionsTest, YamlConfigWithFlagsWinning) {
  const testkit::TempDir tmp;
  const std::string path = tmp.path() + "/agent.yaml";
  ASSERT_THAT(WriteFileAtomically(path,
                                  "port: 7001\nname: gpu-host-3\n"
                                  "synthetic: {rank: 3, world: 8}\n"
                                  "max_duration_ms: 20000\n"),
              IsOk());
  absl::StatusOr<AgentOptions> o = Parse({"--config=" + path, "--port=7002"});
  ASSERT_THAT(o, IsOk());
  EXPECT_EQ(o->port, 7002);  // flag wins
  EXPECT_EQ(o->name, "gpu-host-3");
  EXPECT_EQ(o->synthetic, "rank=3,world=8");
  EXPECT_EQ(o->max_duration_ms, 20000);
}

// One table (agent_options.cc) makes the flags, the config keys, their merge and the list of
// known keys: every flag but --config and --help is a key of the file, and the file's error
// lists exactly those.
TEST(AgentOptionsTest, EveryFlagIsAConfigSettingAndFlagsWinOverIt) {
  absl::StatusOr<AgentOptions> help = ParseAgentOptions({"--help"});
  ASSERT_THAT(help, IsOk());
  std::vector<std::string> keys;
  for (absl::string_view line : absl::StrSplit(help->help_text, '\n')) {
    if (!absl::StartsWith(line, "  --")) continue;
    std::string flag(line.substr(4, line.find(' ', 4) - 4));
    if (flag == "config" || flag == "help" || flag == "version") continue;
    std::replace(flag.begin(), flag.end(), '-', '_');
    keys.push_back(flag);
  }
  ASSERT_GE(keys.size(), 30u);
  AgentOptions o;
  const absl::Status unknown = ApplyAgentConfigYaml("prot: 1\n", "agent.yaml", &o);
  EXPECT_THAT(unknown.message(), HasSubstr(absl::StrCat("(", absl::StrJoin(keys, ", "), ")")));
  for (const std::string& key : keys) {
    // A value of the wrong shape for every kind of setting: the key is known, the value is not.
    const absl::Status s = ApplyAgentConfigYaml(absl::StrCat(key, ": {a: [1]}\n"), "a.yaml", &o);
    EXPECT_THAT(s.message(), Not(HasSubstr("is not a setting"))) << key;
  }
  // The file sets, a flag wins, for each kind of setting.
  const testkit::TempDir tmp;
  const std::string config = tmp.path() + "/agent.yaml";
  ASSERT_THAT(WriteFileAtomically(config,
                                  "retain_ms: 5000\nlog_level: debug\ninsecure: true\n"
                                  "collectors: [synthetic]\nsynthetic: {rank: 2}\n"),
              IsOk());
  absl::StatusOr<AgentOptions> merged = ParseAgentOptions(
      {"--config=" + config, "--retain-ms=7000", "--synthetic=rank=5", "--bind=127.0.0.1"},
      "/nonexistent");
  ASSERT_THAT(merged, IsOk());
  EXPECT_EQ(merged->retain_ms, 7000);      // flag
  EXPECT_EQ(merged->log_level, "debug");   // file
  EXPECT_TRUE(merged->insecure);           // file
  EXPECT_EQ(merged->synthetic, "rank=5");  // flag
  EXPECT_TRUE(merged->collectors_given);   // file
}

TEST(AgentOptionsTest, YamlErrorsNameFileLineAndKey) {
  AgentOptions o;
  absl::Status s = ApplyAgentConfigYaml("port: 1\nprot: 2\n", "agent.yaml", &o);
  EXPECT_THAT(s.message(), HasSubstr("agent.yaml:2: 'prot' is not a setting"));
  s = ApplyAgentConfigYaml("port: [1, 2]\n", "agent.yaml", &o);
  EXPECT_THAT(s.message(), HasSubstr("agent.yaml:1: 'port' has a value of the wrong type"));
  s = ApplyAgentConfigYaml("port: 1\n  bad: [", "agent.yaml", &o);
  EXPECT_THAT(s.message(), HasSubstr("agent.yaml:2: not valid YAML at column"));
  s = ApplyAgentConfigYaml("- a\n- b\n", "agent.yaml", &o);
  EXPECT_THAT(s.message(), HasSubstr("expected a mapping"));
  EXPECT_THAT(ApplyAgentConfigYaml("", "empty.yaml", &o), IsOk());
}

TEST(AgentOptionsTest, WithoutClientAuthenticationTheAgentListensOnLoopbackOnly) {
  absl::StatusOr<AgentOptions> o = Parse({});
  ASSERT_THAT(o, IsOk());
  EXPECT_EQ(o->bind, "127.0.0.1");
  EXPECT_TRUE(SecurityWarnings(*o).empty());
  for (const char* bind : {"--bind=127.0.0.2", "--bind=::1", "--bind=[::1]", "--bind=localhost"}) {
    EXPECT_THAT(Parse({bind}), IsOk()) << bind;
  }
  for (const char* bind : {"--bind=0.0.0.0", "--bind=::", "--bind=10.0.0.7", "--bind=gpu-node-3"}) {
    const absl::Status s = Parse({bind}).status();
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << bind;
    EXPECT_THAT(s.message(), HasSubstr("without client authentication would let anyone"));
    EXPECT_THAT(s.message(), HasSubstr("--insecure"));
  }
  // --insecure: the old default (every address), with a warning.
  o = Parse({"--insecure"});
  ASSERT_THAT(o, IsOk());
  EXPECT_EQ(o->bind, "0.0.0.0");
  ASSERT_EQ(SecurityWarnings(*o).size(), 1u);
  EXPECT_THAT(SecurityWarnings(*o)[0], HasSubstr("--insecure: serving on 0.0.0.0 with no client "
                                                 "authentication and no TLS"));
  EXPECT_THAT(Parse({"--insecure", "--bind=10.0.0.7"}), IsOk());
  // Loopback with --insecure: nothing to warn about.
  o = Parse({"--insecure", "--bind=127.0.0.1"});
  ASSERT_THAT(o, IsOk());
  EXPECT_TRUE(SecurityWarnings(*o).empty());
  EXPECT_THAT(Parse({"--bind="}).status().message(), HasSubstr("--bind is empty"));
}

TEST(AgentOptionsTest, ClientAuthenticationOpensEveryAddress) {
  absl::StatusOr<AgentOptions> o = Parse({"--token-file=/etc/profctl/token"});
  ASSERT_THAT(o, IsOk());
  EXPECT_EQ(o->token_file, "/etc/profctl/token");
  EXPECT_EQ(o->bind, "0.0.0.0");
  // A token without TLS travels in clear text: allowed, with a warning.
  ASSERT_EQ(SecurityWarnings(*o).size(), 1u);
  EXPECT_THAT(SecurityWarnings(*o)[0], HasSubstr("--token-file without --tls-cert"));
  o = Parse({"--tls-cert=/c.pem", "--tls-key=/k.pem", "--tls-ca=/ca.pem"});
  ASSERT_THAT(o, IsOk());
  EXPECT_EQ(o->tls_cert, "/c.pem");
  EXPECT_EQ(o->tls_key, "/k.pem");
  EXPECT_EQ(o->tls_ca, "/ca.pem");
  EXPECT_EQ(o->bind, "0.0.0.0");
  EXPECT_TRUE(SecurityWarnings(*o).empty());
  EXPECT_EQ(SecuritySummary(*o), "TLS, client certificates of --tls-ca");
  // TLS alone encrypts but admits anyone: still loopback unless told otherwise.
  o = Parse({"--tls-cert=/c.pem", "--tls-key=/k.pem"});
  ASSERT_THAT(o, IsOk());
  EXPECT_EQ(o->bind, "127.0.0.1");
  EXPECT_THAT(Parse({"--tls-cert=/c.pem", "--tls-key=/k.pem", "--bind=0.0.0.0"}).status().message(),
              HasSubstr("without client authentication"));
  EXPECT_THAT(Parse({"--tls-ca=/ca.pem"}).status().message(),
              HasSubstr("--tls-ca (require client certificates) needs --tls-cert"));
  EXPECT_THAT(Parse({"--insecure", "--token-file=/t"}).status().message(),
              HasSubstr("--insecure (serve without client authentication) contradicts"));
}

TEST(AgentOptionsTest, SecuritySettingsInYaml) {
  const testkit::TempDir tmp;
  const std::string path = tmp.path() + "/agent.yaml";
  ASSERT_THAT(WriteFileAtomically(path,
                                  "tls_cert: /c.pem\ntls_key: /k.pem\ntls_ca: /ca.pem\n"
                                  "token_file: /t\n"),
              IsOk());
  absl::StatusOr<AgentOptions> o = Parse({"--config=" + path});
  ASSERT_THAT(o, IsOk());
  EXPECT_EQ(o->tls_cert, "/c.pem");
  EXPECT_EQ(o->tls_key, "/k.pem");
  EXPECT_EQ(o->tls_ca, "/ca.pem");
  EXPECT_EQ(o->token_file, "/t");
  EXPECT_EQ(o->bind, "0.0.0.0");
  // Flags win; a bind from the config is kept.
  ASSERT_THAT(WriteFileAtomically(path, "insecure: true\nbind: 10.1.2.3\n"), IsOk());
  o = Parse({"--config=" + path});
  ASSERT_THAT(o, IsOk());
  EXPECT_TRUE(o->insecure);
  EXPECT_EQ(o->bind, "10.1.2.3");
  o = Parse({"--config=" + path, "--insecure=false"});
  EXPECT_THAT(o.status().message(), HasSubstr("--bind=10.1.2.3 without client authentication"));
  AgentOptions a;
  EXPECT_THAT(ApplyAgentConfigYaml("bind: ''\n", "agent.yaml", &a).message(),
              HasSubstr("agent.yaml:1: 'bind' must not be empty"));
  EXPECT_THAT(ApplyAgentConfigYaml("insecure: maybe\n", "agent.yaml", &a).message(),
              HasSubstr("'insecure' has a value of the wrong type"));
}

TEST(AgentOptionsTest, IsLoopbackBind) {
  for (const char* b : {"127.0.0.1", "127.255.0.9", "::1", "[::1]", "localhost"}) {
    EXPECT_TRUE(IsLoopbackBind(b)) << b;
  }
  for (const char* b : {"0.0.0.0", "::", "[::]", "10.0.0.1", "128.0.0.1", "::2", "host", ""}) {
    EXPECT_FALSE(IsLoopbackBind(b)) << b;
  }
}

TEST(AgentOptionsTest, MetricsPortAndLogFormat) {
  absl::StatusOr<AgentOptions> o =
      Parse({"--port=7", "--metrics-port=9091", "--metrics-bind=0.0.0.0", "--log-format=json"});
  ASSERT_THAT(o, IsOk());
  EXPECT_EQ(o->metrics_port, 9091);
  EXPECT_EQ(o->metrics_bind, "0.0.0.0");
  EXPECT_EQ(o->log_format, "json");
  EXPECT_EQ(Parse({"--port=7"})->metrics_port, -1);  // off unless asked for
  EXPECT_THAT(Parse({"--port=7", "--metrics-port=70000"}).status().message(),
              HasSubstr("--metrics-port=70000"));
  EXPECT_THAT(Parse({"--port=7", "--log-format=xml"}).status().message(),
              HasSubstr("--log-format=xml"));
}

TEST(CallAuthenticatorTest, OnlyOneBearerEntryWithTheTokenPasses) {
  const CallAuthenticator auth("0123456789abcdef0123456789abcdef");
  EXPECT_THAT(auth.CheckAuthorization({"Bearer 0123456789abcdef0123456789abcdef"}), IsOk());
  EXPECT_THAT(auth.CheckAuthorization({"BEARER 0123456789abcdef0123456789abcdef"}), IsOk());
  EXPECT_EQ(auth.CheckAuthorization({}).code(), absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(auth.CheckAuthorization({"Basic 0123456789abcdef0123456789abcdef"}).code(),
            absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(auth.CheckAuthorization({"Bearer"}).code(), absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(auth.CheckAuthorization({"Bearer 0123456789abcdef0123456789abcdef",
                                     "Bearer 0123456789abcdef0123456789abcdef"})
                .code(),
            absl::StatusCode::kUnauthenticated);
  for (const char* wrong :
       {"Bearer ", "Bearer 0123456789abcdef0123456789abcde",
        "Bearer 0123456789abcdef0123456789abcdef0", "Bearer  0123456789abcdef0123456789abcdef",
        "Bearer 0123456789ABCDEF0123456789abcdef"}) {
    const absl::Status s = auth.CheckAuthorization({wrong});
    EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied) << wrong;
    EXPECT_EQ(s.message(), "wrong bearer token");
  }
}

}  // namespace
}  // namespace profctl::agent
