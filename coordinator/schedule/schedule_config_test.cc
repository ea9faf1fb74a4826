#include "coordinator/schedule/schedule_config.h"

#include <string>
#include <vector>

#include "common/clock.h"
#include "common/file_util.h"
#include "common/yaml_config.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/status_matchers.h"
#include "tests/temp_dir.h"

using ::profctl::testkit::IsOk;

namespace profctl::coordinator::schedule {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

constexpr int64_t kSecond = 1'000'000'000;

TEST(ParseDurationTest, UnitsAndSums) {
  EXPECT_EQ(*ParseDuration("250ms"), 250'000'000);
  EXPECT_EQ(*ParseDuration("2s"), 2 * kSecond);
  EXPECT_EQ(*ParseDuration("5m"), 300 * kSecond);
  EXPECT_EQ(*ParseDuration("1h"), 3600 * kSecond);
  EXPECT_EQ(*ParseDuration("1d"), 86'400 * kSecond);
  EXPECT_EQ(*ParseDuration("1h30m"), 5400 * kSecond);
  EXPECT_EQ(*ParseDuration("0"), 0);
  for (const char* bad : {"", "1", "1x", "-1s", "h", "1.5h", "1 h", "999999999999999999d"}) {
    EXPECT_FALSE(ParseDuration(bad).ok()) << bad;
  }
}

TEST(ParseByteSizeTest, Units) {
  EXPECT_EQ(*ParseByteSize("1048576"), 1048576);
  EXPECT_EQ(*ParseByteSize("500MB"), 500'000'000);
  EXPECT_EQ(*ParseByteSize("10GiB"), 10LL << 30);
  EXPECT_EQ(*ParseByteSize("2Ki"), 2048);
  for (const char* bad : {"", "MB", "1XB", "1iB", "1.5GB"}) {
    EXPECT_FALSE(ParseByteSize(bad).ok()) << bad;
  }
}

TEST(CoordinatorConfigTest, ParsesTheIssueExampleAndEveryOption) {
  const std::string yaml = R"(logdir: /var/lib/profctl/sessions
schedules:
  - name: hourly
    targets: [trainer-0:6000, trainer-1:6000]   # or a DNS name / a targets file
    interval: 1h
    duration: 2s
    retention: {keep_last: 168}
  - name: nightly
    targets: trainers.default.svc.cluster.local:6000
    cron: "0 3 * * *"
    jitter: 10m
    duration: 500ms
    late: fail
    align: ntp
    retries: 5
    tolerance: 20ms
    deadline: 2m
    host_tracer_level: 3
    python_tracer_level: 1
    concurrency: skip
    missed: run_once
    retention: {keep_last: 7, max_age: 30d, max_bytes: 10GiB}
  - name: from-file
    targets: /etc/profctl/targets.txt
    interval: 30m
)";
  absl::StatusOr<CoordinatorConfig> c = ParseCoordinatorConfig(yaml, "coordinator.yaml");
  ASSERT_THAT(c, IsOk());
  EXPECT_EQ(c->logdir, "/var/lib/profctl/sessions");
  ASSERT_EQ(c->schedules.size(), 3u);
  const ScheduleConfig& h = c->schedules[0];
  EXPECT_EQ(h.name, "hourly");
  EXPECT_EQ(h.line, 3);
  EXPECT_EQ(h.targets.kind, TargetsKind::kList);
  EXPECT_EQ(h.targets.list, (std::vector<std::string>{"trainer-0:6000", "trainer-1:6000"}));
  EXPECT_EQ(h.interval_ns, 3600 * kSecond);
  EXPECT_FALSE(h.cron.has_value());
  EXPECT_EQ(h.capture.duration_ms, 2000);
  EXPECT_EQ(h.retention.keep_last, 168);
  EXPECT_EQ(h.missed, MissedPolicy::kSkip);
  const ScheduleConfig& n = c->schedules[1];
  EXPECT_EQ(n.targets.kind, TargetsKind::kDns);
  EXPECT_EQ(n.targets.source, "trainers.default.svc.cluster.local:6000");
  ASSERT_TRUE(n.cron.has_value());
  EXPECT_EQ(n.cron->text(), "0 3 * * *");
  EXPECT_EQ(n.jitter_ns, 600 * kSecond);
  EXPECT_EQ(n.capture.duration_ms, 500);
  EXPECT_EQ(n.capture.late, profctl::v1::LATE_POLICY_FAIL);
  EXPECT_EQ(n.capture.align, profctl::v1::ALIGN_MODE_NTP);
  EXPECT_EQ(n.capture.retries, 5);
  EXPECT_EQ(n.capture.tolerance_ms, 20);
  EXPECT_EQ(n.capture.deadline_ms, 120'000);
  EXPECT_EQ(n.capture.ToPlan().host_tracer_level, 3);
  EXPECT_EQ(n.capture.ToPlan().device_tracer_level, 1);  // absent: the default
  EXPECT_EQ(n.capture.ToPlan().python_tracer_level, 1);
  EXPECT_EQ(n.missed, MissedPolicy::kRunOnce);
  EXPECT_EQ(n.retention.keep_last, 7);
  EXPECT_EQ(n.retention.max_age_ns, 30 * 86'400 * kSecond);
  EXPECT_EQ(n.retention.max_bytes, 10LL << 30);
  EXPECT_EQ(c->schedules[2].targets.kind, TargetsKind::kFile);
  EXPECT_EQ(c->schedules[2].targets.source, "/etc/profctl/targets.txt");
}

TEST(CoordinatorConfigTest, ParsesATriggerWithDefaultsAndEveryOption) {
  absl::StatusOr<CoordinatorConfig> c = ParseCoordinatorConfig(
      "logdir: /x\n"
      "schedules:\n"
      "  - name: defaults\n"
      "    targets: [h:1]\n"
      "    trigger: {}\n"
      "  - name: slowdown\n"
      "    targets: trainers.default.svc:6000\n"
      "    trigger:\n"
      "      signal: step_time\n"
      "      threshold: 25%\n"
      "      poll: 5s\n"
      "      window: 1m\n"
      "      baseline: 30m\n"
      "      min_steps: 50\n"
      "      sustain: 3\n"
      "      cooldown: 2h\n"
      "    duration: 3s\n"
      "  - name: ratio\n"
      "    targets: [h:1]\n"
      "    trigger: {threshold: 2, past: 0}\n"
      "  - name: hang\n"
      "    targets: [h:1]\n"
      "    trigger: {signal: hang, poll: 5s, sustain: 1, past: 45s}\n"
      "  - name: hang-default-past\n"
      "    targets: [h:1]\n"
      "    trigger: {signal: hang, window: 10m}\n",
      "coordinator.yaml");
  ASSERT_THAT(c, IsOk());
  ASSERT_EQ(c->schedules.size(), 5u);
  ASSERT_TRUE(c->schedules[0].trigger.has_value());
  EXPECT_EQ(*c->schedules[0].trigger, TriggerConfig{});
  EXPECT_EQ(c->schedules[0].interval_ns, 0);
  EXPECT_FALSE(c->schedules[0].cron.has_value());
  const TriggerConfig& t = *c->schedules[1].trigger;
  EXPECT_EQ(t.signal, "step_time");
  EXPECT_DOUBLE_EQ(t.threshold, 1.25);
  EXPECT_EQ(t.poll_ns, 5 * kNanosPerSecond);
  EXPECT_EQ(t.window_ns, 60 * kNanosPerSecond);
  EXPECT_EQ(t.baseline_ns, 1800 * kNanosPerSecond);
  EXPECT_EQ(t.min_steps, 50);
  EXPECT_EQ(t.sustain, 3);
  EXPECT_EQ(t.cooldown_ns, 7200 * kNanosPerSecond);
  EXPECT_EQ(c->schedules[1].capture.duration_ms, 3000);
  EXPECT_EQ(c->schedules[1].targets.kind, TargetsKind::kDns);
  EXPECT_DOUBLE_EQ(c->schedules[2].trigger->threshold, 2.0);
  // A step_time trigger's snapshot of the past before its next window; 0 turns it off.
  EXPECT_EQ(c->schedules[2].trigger->past_ns, 0);
  const TriggerConfig& hang = *c->schedules[3].trigger;
  EXPECT_EQ(hang.signal, "hang");
  EXPECT_EQ(hang.poll_ns, 5 * kNanosPerSecond);
  EXPECT_EQ(hang.sustain, 1);
  EXPECT_EQ(hang.past_ns, 45 * kNanosPerSecond);
  // The default past is the window, at most what agents keep by default (60 s).
  EXPECT_EQ(c->schedules[0].trigger->past_ns, 30 * kNanosPerSecond);
  EXPECT_EQ(c->schedules[1].trigger->past_ns, 60 * kNanosPerSecond);
  EXPECT_EQ(c->schedules[4].trigger->past_ns, 60 * kNanosPerSecond);
  // Trigger settings are part of the timing: a reload that changes them re-arms the watch.
  EXPECT_TRUE(c->schedules[0].SameTiming(c->schedules[0]));
  EXPECT_FALSE(c->schedules[0].SameTiming(c->schedules[2]));
}

TEST(CoordinatorConfigTest, EmptyFileHasNoSchedules) {
  absl::StatusOr<CoordinatorConfig> c = ParseCoordinatorConfig("", "coordinator.yaml");
  ASSERT_THAT(c, IsOk());
  EXPECT_TRUE(c->schedules.empty());
}

// Each bad input's error names the file, the line and the key.
TEST(CoordinatorConfigTest, ErrorsNameFileLineAndKey) {
  const std::string head =
      "logdir: /tmp/x\n"       // 1
      "schedules:\n"           // 2
      "  - name: a\n"          // 3
      "    targets: [h:1]\n"   // 4
      "    interval: 1h\n"     // 5
      "  - name: b\n"          // 6
      "    targets: [h:1]\n";  // 7
  struct Case {
    std::string tail;  // lines 8.. of schedules[1]
    std::string error;
  };
  const std::vector<Case> cases = {
      {"    interval: 1x\n",
       R"(coordinator.yaml:8: schedules[1].interval: "1x" is not a duration (use 30s, 5m, 1h, 1d))"},
      {"    interval: 1h\n    cron: \"0 * * * *\"\n",
       "coordinator.yaml:6: schedules[1]: give exactly one of 'interval', 'cron' and 'trigger'"},
      {"    interval: 1h\n    trigger: {threshold: 2}\n",
       "coordinator.yaml:6: schedules[1]: give exactly one of 'interval', 'cron' and 'trigger'"},
      {"    trigger: {threshold: 1.001}\n",
       R"(coordinator.yaml:8: schedules[1].trigger.threshold: "1.001" is not a ratio in 1.01..100)"},
      {"    trigger: {threshold: fast}\n",
       R"(coordinator.yaml:8: schedules[1].trigger.threshold: "fast" is not a ratio)"},
      {"    trigger: {signal: gpu_temp}\n",
       R"(coordinator.yaml:8: schedules[1].trigger.signal: "gpu_temp" is not one of: step_time, hang)"},
      {"    trigger: {signal: hang, threshold: 2}\n",
       "coordinator.yaml:8: schedules[1].trigger.threshold: the hang signal fires on the stalls "
       "the agents report (their --hang-factor): threshold, baseline and min_steps are for "
       "step_time"},
      {"    trigger: {signal: hang, past: 2h}\n",
       R"(coordinator.yaml:8: schedules[1].trigger.past: "2h" is not in 0..1h)"},
      {"    trigger: {signal: hang, past: 0}\n",
       "coordinator.yaml:8: schedules[1].trigger.past: a hang trigger's session is its snapshot "
       "of the past: at least 1ms"},
      {"    trigger: {polls: 5s}\n",
       "coordinator.yaml:8: schedules[1].trigger.polls: unknown key (known: signal, threshold"},
      {"    trigger: {window: 20m}\n",
       "coordinator.yaml:8: schedules[1].trigger.window: the baseline must be longer than the "
       "window"},
      {"    trigger: {poll: 10ms}\n",
       R"(coordinator.yaml:8: schedules[1].trigger.poll: "10ms" is not in 1s..1h)"},
      {"    trigger: {sustain: 0}\n",
       "coordinator.yaml:8: schedules[1].trigger.sustain: 0 is not in 1..1000"},
      {"    trigger: 1.5\n", "coordinator.yaml:8: schedules[1].trigger: expected a mapping"},
      {"    trigger: {}\n    jitter: 5m\n",
       "coordinator.yaml:9: schedules[1].jitter: a trigger fires when the signal says so"},
      {"    trigger: {}\n    missed: run_once\n",
       "coordinator.yaml:9: schedules[1].missed: a trigger has no missed runs"},
      {"    retries: 1\n", "coordinator.yaml:6: schedules[1]: give exactly one of"},
      {"    cron: \"0 0 30 2 *\"\n",
       R"(coordinator.yaml:8: schedules[1].cron: cron "0 0 30 2 *" never fires)"},
      {"    cron: \"61 * * * *\"\n", "coordinator.yaml:8: schedules[1].cron: cron minute field"},
      {"    interval: 1h\n    jiter: 5m\n",
       "coordinator.yaml:9: schedules[1].jiter: unknown key (known: name, targets"},
      {"    interval: 1h\n    jitter: 1h\n",
       "coordinator.yaml:9: schedules[1].jitter: must be shorter than the interval (1h)"},
      {"    interval: 1h\n    duration: 2h\n",
       R"(coordinator.yaml:9: schedules[1].duration: "2h" is not in 1ms..1h)"},
      {"    interval: 1h\n    retries: many\n",
       R"(coordinator.yaml:9: schedules[1].retries: "many" is not an integer)"},
      {"    interval: 1h\n    retries: 21\n",
       "coordinator.yaml:9: schedules[1].retries: 21 is not in 0..20"},
      {"    interval: 1h\n    device_tracer_level: 2\n",
       "coordinator.yaml:9: schedules[1].device_tracer_level: 2 is not in 0..1"},
      {"    interval: 1h\n    late: maybe\n",
       R"(coordinator.yaml:9: schedules[1].late: "maybe" is not one of: capture, fail)"},
      {"    interval: 1h\n    concurrency: queue\n",
       R"(coordinator.yaml:9: schedules[1].concurrency: "queue" is not one of: skip)"},
      {"    interval: 1h\n    missed: all\n",
       R"(coordinator.yaml:9: schedules[1].missed: "all" is not one of: skip, run_once)"},
      {"    interval: 1h\n    retention: {keep_last: 3, max_age: forever}\n",
       R"(coordinator.yaml:9: schedules[1].retention.max_age: "forever" is not a duration)"},
      {"    interval: 1h\n    retention: {keep: 3}\n",
       "coordinator.yaml:9: schedules[1].retention.keep: unknown key"},
      {"    interval: 1h\n    retention: {max_bytes: lots}\n",
       R"(coordinator.yaml:9: schedules[1].retention.max_bytes: "lots" is not a size)"},
      {"    interval: 1h\n    targets: []\n", "schedules[1].targets: expected a non-empty list"},
      {"    interval: 500ms\n",
       R"(coordinator.yaml:8: schedules[1].interval: "500ms" is not in 1s..)"},
      // The capture options have profctl capture's bounds (capture_plan.h), cross-checks too.
      {"    interval: 1h\n    align: gps\n",
       R"(coordinator.yaml:9: schedules[1].align: "gps" is not one of: collectives, ntp)"},
      {"    interval: 1h\n    tolerance: 61s\n",
       R"(coordinator.yaml:9: schedules[1].tolerance: "61s" is not in 0..1m)"},
      {"    interval: 1h\n    duration: 10s\n    deadline: 5s\n",
       "coordinator.yaml:6: schedules[1]: deadline=5000 ms cannot hold the 10000 ms window: give "
       "more than duration"},
  };
  for (const Case& c : cases) {
    absl::StatusOr<CoordinatorConfig> got =
        ParseCoordinatorConfig(head + c.tail, "coordinator.yaml");
    ASSERT_FALSE(got.ok()) << c.tail;
    EXPECT_THAT(std::string(got.status().message()), HasSubstr(c.error)) << c.tail;
  }
}

TEST(CoordinatorConfigTest, BadTargetsAreRefusedAtLoad) {
  const std::string head = "logdir: /x\nschedules:\n  - name: a\n    interval: 1h\n";
  struct Case {
    std::string targets;
    std::string error;
  };
  for (const Case& c : std::vector<Case>{
           {"[h:0]",
            "coordinator.yaml:5: schedules[0].targets[0]: worker 'h:0': port '0' is not "
            "a number in 1..65535"},
           {"[h:1, h:70000]", "schedules[0].targets[1]: worker 'h:70000': port '70000'"},
           {"[h]", "schedules[0].targets[0]: worker 'h': missing :port"},
           {"[h:1, h:1]", "schedules[0].targets: worker 'h:1' is listed twice"},
           {"trainers.svc:0", "schedules[0].targets: worker 'trainers.svc:0': port '0'"},
       }) {
    absl::StatusOr<CoordinatorConfig> got =
        ParseCoordinatorConfig(head + "    targets: " + c.targets + "\n", "coordinator.yaml");
    ASSERT_FALSE(got.ok()) << c.targets;
    EXPECT_THAT(std::string(got.status().message()), HasSubstr(c.error)) << c.targets;
  }
  // A targets file is read at each run, not at load.
  EXPECT_THAT(ParseCoordinatorConfig(head + "    targets: /no/such/file\n", "c.yaml"), IsOk());
  // "@FILE", as --workers takes a file, names one too, even without a '/'.
  absl::StatusOr<CoordinatorConfig> at =
      ParseCoordinatorConfig(head + "    targets: \"@pod.txt\"\n", "c.yaml");
  ASSERT_THAT(at, IsOk());
  EXPECT_EQ(at->schedules[0].targets.kind, TargetsKind::kFile);
  EXPECT_EQ(at->schedules[0].targets.source, "pod.txt");
  EXPECT_THAT(ParseCoordinatorConfig(head + "    targets: \"@\"\n", "c.yaml").status().message(),
              HasSubstr("'@' names no file"));
}

TEST(CoordinatorConfigTest, HugeValuesAreClippedInErrors) {
  const std::string huge(1 << 20, 'x');  // the 50 MB of the report take ASan a minute
  const std::string head = "logdir: /x\nschedules:\n  - name: a\n    targets: [h:1]\n";
  for (const std::string& tail : {
           "    interval: " + huge + "\n",
           "    cron: " + huge + "\n",
           "    interval: 1h\n    retries: " + huge + "\n",
           "    interval: 1h\n    late: " + huge + "\n",
           "    interval: 1h\n    retention: {max_bytes: " + huge + "}\n",
       }) {
    absl::StatusOr<CoordinatorConfig> got = ParseCoordinatorConfig(head + tail, "c.yaml");
    ASSERT_FALSE(got.ok());
    const std::string message(got.status().message());
    EXPECT_LT(message.size(), 1500u) << message.substr(0, 200);
    EXPECT_THAT(message, HasSubstr("1048576 bytes")) << message.substr(0, 200);
  }
  absl::StatusOr<CoordinatorConfig> got = ParseCoordinatorConfig(
      "logdir: /x\nschedules:\n  - {name: a, targets: [" + huge + ":1], interval: 1h}\n", "c.yaml");
  ASSERT_FALSE(got.ok());
  EXPECT_THAT(std::string(got.status().message()),
              HasSubstr("\"" + std::string(80, 'x') + "\"... (1048578 bytes) is not host:port"));
  got = ParseCoordinatorConfig(head + "    interval: " + huge + "\n", "c.yaml");
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().message(), "c.yaml:5: schedules[0].interval: \"" + std::string(80, 'x') +
                                        "\"... (1048576 bytes) is not a duration (use 30s, 5m, "
                                        "1h, 1d)");
}

// `serve --config` with a file over YamlConfig::kMaxFileBytes (4 MiB) is refused by its size
// before it is parsed; a value too long in a file within the cap still gets the clipped error.
TEST(CoordinatorConfigTest, AFileOverTheSizeCapIsRefusedBeforeItIsParsed) {
  const testkit::TempDir tmp;
  const std::string path = JoinPath(tmp.path(), "coordinator.yaml");
  const std::string head = "logdir: /x\nschedules:\n  - name: a\n    targets: [h:1]\n";
  ASSERT_THAT(WriteFileAtomically(path, head + "    interval: " +
                                            std::string(YamlConfig::kMaxFileBytes, 'x') + "\n"),
              IsOk());
  absl::StatusOr<CoordinatorConfig> got = LoadCoordinatorConfig(path);
  ASSERT_FALSE(got.ok());
  EXPECT_THAT(std::string(got.status().message()),
              AllOf(HasSubstr(path + ": "), HasSubstr("more than a config file may hold (4194304 "
                                                      "bytes)")));
  ASSERT_THAT(WriteFileAtomically(path, head + "    interval: " + std::string(1 << 20, 'x') + "\n"),
              IsOk());
  got = LoadCoordinatorConfig(path);
  ASSERT_FALSE(got.ok());
  EXPECT_THAT(std::string(got.status().message()),
              HasSubstr("\"... (1048576 bytes) is not a duration"));
}

TEST(CoordinatorConfigTest, WholeFileErrors) {
  struct Case {
    std::string yaml;
    std::string error;
  };
  for (const Case& c : std::vector<Case>{
           {"logdir: /x\nport: 7000\n", "coordinator.yaml:2: port: unknown key"},
           {"logdir: /x\nschedules:\n  - name: a\n    interval: 1h\n",
            "coordinator.yaml:3: schedules[0]: missing key 'targets'"},
           {"schedules:\n  - name: a\n    targets: [h:1]\n    interval: 1h\n",
            "coordinator.yaml:1: logdir: missing"},
           {"logdir: /x\nschedules:\n  - name: a b\n    targets: [h:1]\n    interval: 1h\n",
            R"(coordinator.yaml:3: schedules[0].name: "a b" is not 1-64 characters)"},
           {"logdir: /x\nschedules:\n  - {name: a, targets: [h:1], interval: 1h}\n"
            "  - {name: a, targets: [h:1], interval: 2h}\n",
            R"(coordinator.yaml:4: schedules[1].name: "a" names another schedule too)"},
           {"logdir: /x\nschedules: {a: 1}\n",
            "coordinator.yaml:2: schedules: expected a list of schedules"},
           {"logdir: [\n", "coordinator.yaml:2: not valid YAML"},
           {"- 1\n", "coordinator.yaml:1: (top level): expected a mapping"},
       }) {
    absl::StatusOr<CoordinatorConfig> got = ParseCoordinatorConfig(c.yaml, "coordinator.yaml");
    ASSERT_FALSE(got.ok()) << c.yaml;
    EXPECT_THAT(std::string(got.status().message()), HasSubstr(c.error)) << c.yaml;
  }
}

}  // namespace
}  // namespace profctl::coordinator::schedule
