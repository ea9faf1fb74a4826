#include "coordinator/schedule/schedule_config.h"

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/algorithm/container.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "common/file_util.h"
#include "common/status_macros.h"
#include "common/yaml_config.h"
#include "coordinator/clients/worker.h"
#include "coordinator/session/session_writer.h"

namespace profctl::coordinator::schedule {
namespace {

constexpr int64_t kNanosPerMinute = 60 * kNanosPerSecond;
constexpr int64_t kNanosPerHour = 60 * kNanosPerMinute;
constexpr int64_t kNanosPerDay = 24 * kNanosPerHour;
constexpr char kDurationHint[] = "(use 30s, 5m, 1h, 1d)";
constexpr size_t kMaxScheduleNameChars = 64;
// grpc:// + a 253-character host name + :65535, with room to spare.
constexpr size_t kMaxTargetChars = 300;

// Splits "123abc" into its leading digits and the rest; false without digits.
bool SplitNumber(absl::string_view s, int64_t* value, absl::string_view* rest) {
  size_t i = 0;
  while (i < s.size() && absl::ascii_isdigit(static_cast<unsigned char>(s[i]))) ++i;
  if (i == 0 || i > 18) return false;  // 18 digits cannot overflow int64
  if (!absl::SimpleAtoi(s.substr(0, i), value)) return false;
  *rest = s.substr(i);
  return true;
}

bool MulAdd(int64_t a, int64_t b, int64_t* sum) {
  if (a != 0 && b > std::numeric_limits<int64_t>::max() / a) return false;
  if (a * b > std::numeric_limits<int64_t>::max() - *sum) return false;
  *sum += a * b;
  return true;
}

// A duration in [min_ns, max_ns], named `path` in errors.
absl::StatusOr<int64_t> Duration(const YamlConfig& r, const YAML::Node& v, absl::string_view path,
                                 int64_t min_ns, int64_t max_ns) {
  const std::string text = v.IsScalar() ? v.Scalar() : "";
  absl::StatusOr<int64_t> ns = ParseDuration(text);
  if (!ns.ok()) {
    return r.Error(v, path,
                   absl::StrCat(YamlConfig::Quote(text), " is not a duration ", kDurationHint));
  }
  if (*ns < min_ns || *ns > max_ns) {
    return r.Error(v, path,
                   absl::StrCat(YamlConfig::Quote(text), " is not in ",
                                absl::FormatDuration(absl::Nanoseconds(min_ns)), "..",
                                absl::FormatDuration(absl::Nanoseconds(max_ns))));
  }
  return *ns;
}

// One host:port (or grpc://host:port) target, checked at load as every run checks it (a port
// in 1..65535, a host name or an IP address), so a bad target fails the load, not each run.
absl::Status CheckTarget(const YamlConfig& r, const YAML::Node& v, const std::string& path) {
  const std::string& text = v.Scalar();
  if (text.size() > kMaxTargetChars) {
    return r.Error(v, path,
                   absl::StrCat(YamlConfig::Quote(text), " is not host:port (longer than ",
                                kMaxTargetChars, " characters)"));
  }
  if (absl::StatusOr<WorkerAddress> w = ParseWorker(text); !w.ok()) {
    return r.Error(v, path, w.status().message());
  }
  return absl::OkStatus();
}

absl::Status ParseTargets(const YamlConfig& r, const YAML::Node& v, const std::string& path,
                          Targets* t) {
  if (v.IsScalar()) {
    if (v.Scalar().empty())
      return r.Error(v, path, "expected a list of host:port, a DNS name or a file");
    t->source = v.Scalar();
    // A path (or "@FILE", as --workers takes a file) names a targets file; anything else is a
    // DNS name to resolve.
    if (absl::StartsWith(t->source, "@")) {
      t->source.erase(0, 1);
      t->kind = TargetsKind::kFile;
      if (t->source.empty()) return r.Error(v, path, "'@' names no file: give @FILE");
      return absl::OkStatus();
    }
    t->kind = absl::StrContains(t->source, '/') ? TargetsKind::kFile : TargetsKind::kDns;
    if (t->kind == TargetsKind::kDns) PROFCTL_RETURN_IF_ERROR(CheckTarget(r, v, path));
    return absl::OkStatus();
  }
  if (!v.IsSequence() || v.size() == 0) {
    return r.Error(v, path, "expected a non-empty list of host:port, a DNS name or a targets file");
  }
  t->kind = TargetsKind::kList;
  PROFCTL_ASSIGN_OR_RETURN(t->list, r.StringList(v, path));
  for (size_t i = 0; i < t->list.size(); ++i) {
    PROFCTL_RETURN_IF_ERROR(CheckTarget(r, v[i], YamlConfig::Index(path, i)));
  }
  // Duplicates: the same rule as every run's.
  if (absl::StatusOr<std::vector<WorkerAddress>> all = ParseWorkers(t->list); !all.ok()) {
    return r.Error(v, path, all.status().message());
  }
  return absl::OkStatus();
}

absl::Status ParseRetention(const YamlConfig& r, const YAML::Node& v, const std::string& path,
                            RetentionConfig* ret) {
  if (!v.IsMap()) return r.Error(v, path, "expected a mapping {keep_last, max_age, max_bytes}");
  PROFCTL_RETURN_IF_ERROR(r.CheckKeys(v, path, {"keep_last", "max_age", "max_bytes"}));
  for (const auto& kv : v) {
    const std::string key = kv.first.Scalar();
    const std::string p = YamlConfig::Join(path, key);
    if (key == "keep_last") {
      PROFCTL_ASSIGN_OR_RETURN(ret->keep_last, r.Int(kv.second, p, 0, 1'000'000));
    } else if (key == "max_age") {
      PROFCTL_ASSIGN_OR_RETURN(ret->max_age_ns,
                               Duration(r, kv.second, p, 0, kNanosPerDay * 365 * 100));
    } else {
      const std::string text = kv.second.IsScalar() ? kv.second.Scalar() : "";
      absl::StatusOr<int64_t> bytes = ParseByteSize(text);
      if (!bytes.ok()) {
        return r.Error(
            kv.second, p,
            absl::StrCat(YamlConfig::Quote(text), " is not a size (use 500MB, 10GiB, 1048576)"));
      }
      ret->max_bytes = *bytes;
    }
  }
  return absl::OkStatus();
}

absl::Status ParseTrigger(const YamlConfig& r, const YAML::Node& v, const std::string& path,
                          TriggerConfig* t) {
  if (!v.IsMap()) {
    return r.Error(v, path,
                   "expected a mapping {signal, threshold, poll, window, baseline, min_steps, "
                   "sustain, cooldown, past}");
  }
  PROFCTL_RETURN_IF_ERROR(r.CheckKeys(v, path,
                                      {"signal", "threshold", "poll", "window", "baseline",
                                       "min_steps", "sustain", "cooldown", "past"}));
  std::optional<YAML::Node> window_node;
  std::optional<YAML::Node> baseline_node;
  bool past_given = false;
  for (const auto& kv : v) {
    const std::string key = kv.first.Scalar();
    const std::string p = YamlConfig::Join(path, key);
    const YAML::Node& val = kv.second;
    if (key == "signal") {
      PROFCTL_ASSIGN_OR_RETURN(t->signal, r.String(val, p));
      if (absl::c_find(kTriggerSignals, t->signal) == std::end(kTriggerSignals)) {
        return r.Error(val, p,
                       absl::StrCat(YamlConfig::Quote(t->signal),
                                    " is not one of: ", absl::StrJoin(kTriggerSignals, ", ")));
      }
    } else if (key == "threshold") {
      // 1.5 (a ratio) or "50%" (the increase).
      const std::string text = val.IsScalar() ? val.Scalar() : "";
      double x = 0;
      bool ok = false;
      if (absl::EndsWith(text, "%")) {
        ok = absl::SimpleAtod(absl::string_view(text).substr(0, text.size() - 1), &x);
        x = 1.0 + x / 100.0;
      } else {
        ok = absl::SimpleAtod(text, &x);
      }
      if (!ok || !(x >= 1.01 && x <= 100.0)) {
        return r.Error(val, p,
                       absl::StrCat(YamlConfig::Quote(text),
                                    " is not a ratio in 1.01..100 (1.5) or an increase in "
                                    "1%..9900% (50%)"));
      }
      t->threshold = x;
    } else if (key == "poll") {
      PROFCTL_ASSIGN_OR_RETURN(t->poll_ns, Duration(r, val, p, kNanosPerSecond, kNanosPerHour));
    } else if (key == "window") {
      PROFCTL_ASSIGN_OR_RETURN(t->window_ns, Duration(r, val, p, kNanosPerSecond, kNanosPerHour));
      window_node.emplace(val);
    } else if (key == "baseline") {
      PROFCTL_ASSIGN_OR_RETURN(t->baseline_ns,
                               Duration(r, val, p, 10 * kNanosPerSecond, kNanosPerDay));
      baseline_node.emplace(val);
    } else if (key == "min_steps") {
      PROFCTL_ASSIGN_OR_RETURN(t->min_steps, r.Int(val, p, 3, 100'000));
    } else if (key == "sustain") {
      PROFCTL_ASSIGN_OR_RETURN(t->sustain, r.Int(val, p, 1, 1000));
    } else if (key == "past") {
      PROFCTL_ASSIGN_OR_RETURN(t->past_ns,
                               Duration(r, val, p, 0, PlanLimits::kMaxPastMs * kNanosPerMilli));
      if (t->past_ns % kNanosPerMilli != 0) {
        return r.Error(val, p, "must be whole milliseconds");
      }
      past_given = true;
    } else {  // cooldown
      PROFCTL_ASSIGN_OR_RETURN(t->cooldown_ns, Duration(r, val, p, 0, 30 * kNanosPerDay));
    }
  }
  if (!past_given) t->past_ns = std::min(t->window_ns, TriggerConfig::kDefaultMaxPastNs);
  if (t->signal == "hang") {
    // A hang is a host's own verdict (no step end for K x its median step): nothing to compare.
    for (const char* key : {"threshold", "baseline", "min_steps"}) {
      if (v[key].IsDefined()) {
        return r.Error(v[key], YamlConfig::Join(path, key),
                       "the hang signal fires on the stalls the agents report (their "
                       "--hang-factor): threshold, baseline and min_steps are for step_time");
      }
    }
    if (t->past_ns == 0) {
      return r.Error(v["past"], YamlConfig::Join(path, "past"),
                     "a hang trigger's session is its snapshot of the past: at least 1ms");
    }
    return absl::OkStatus();
  }
  if (t->baseline_ns <= t->window_ns) {
    return r.Error(baseline_node.value_or(window_node.value_or(v)),
                   YamlConfig::Join(path, baseline_node.has_value() ? "baseline" : "window"),
                   "the baseline must be longer than the window");
  }
  return absl::OkStatus();
}

// One schedule entry while it is read: the config, and what the checks across keys need.
struct ScheduleEntry {
  ScheduleConfig s;
  // Copies (handles): yaml-cpp's iteration yields temporaries.
  std::optional<YAML::Node> interval_node;
  std::optional<YAML::Node> jitter_node;
  bool has_targets = false;
};

// A duration in [min_ms, max_ms] ms, in ms.
absl::StatusOr<int64_t> DurationMs(const YamlConfig& r, const YAML::Node& v, absl::string_view path,
                                   int64_t min_ms, int64_t max_ms) {
  PROFCTL_ASSIGN_OR_RETURN(const int64_t ns,
                           Duration(r, v, path, min_ms * kNanosPerMilli, max_ms * kNanosPerMilli));
  return ns / kNanosPerMilli;
}

absl::Status ParseName(const YamlConfig& r, const YAML::Node& v, const std::string& p,
                       ScheduleEntry* e) {
  PROFCTL_ASSIGN_OR_RETURN(e->s.name, r.String(v, p));
  if (e->s.name.size() > kMaxScheduleNameChars ||
      !ValidateSessionName(e->s.name).ok()) {  // it starts each of its sessions' names
    return r.Error(v, p,
                   absl::StrCat(YamlConfig::Quote(e->s.name), " is not 1-", kMaxScheduleNameChars,
                                " characters of [A-Za-z0-9._-] starting with a letter or digit"));
  }
  return absl::OkStatus();
}

absl::Status ParseCron(const YamlConfig& r, const YAML::Node& v, const std::string& p,
                       ScheduleEntry* e) {
  PROFCTL_ASSIGN_OR_RETURN(const std::string text, r.String(v, p));
  absl::StatusOr<CronExpr> cron = CronExpr::Parse(text);
  if (!cron.ok()) return r.Error(v, p, cron.status().message());
  e->s.cron = *std::move(cron);
  return absl::OkStatus();
}

absl::Status ParseLate(const YamlConfig& r, const YAML::Node& v, const std::string& p,
                       ScheduleEntry* e) {
  PROFCTL_ASSIGN_OR_RETURN(const std::string late, r.String(v, p));
  absl::StatusOr<profctl::v1::LatePolicy> policy = ParseLatePolicy(late);
  if (!policy.ok()) {
    return r.Error(v, p, absl::StrCat(YamlConfig::Quote(late), " ", policy.status().message()));
  }
  e->s.capture.late = *policy;
  return absl::OkStatus();
}

absl::Status ParseAlign(const YamlConfig& r, const YAML::Node& v, const std::string& p,
                        ScheduleEntry* e) {
  PROFCTL_ASSIGN_OR_RETURN(const std::string align, r.String(v, p));
  absl::StatusOr<profctl::v1::AlignMode> mode = ParseAlignMode(align);
  if (!mode.ok()) {
    return r.Error(v, p, absl::StrCat(YamlConfig::Quote(align), " ", mode.status().message()));
  }
  e->s.capture.align = *mode;
  return absl::OkStatus();
}

absl::Status ParseConcurrency(const YamlConfig& r, const YAML::Node& v, const std::string& p,
                              ScheduleEntry* /*e*/) {
  PROFCTL_ASSIGN_OR_RETURN(const std::string c, r.String(v, p));
  if (c != "skip") {
    return r.Error(v, p,
                   absl::StrCat(YamlConfig::Quote(c), " is not one of: skip (the only policy)"));
  }
  return absl::OkStatus();
}

absl::Status ParseMissed(const YamlConfig& r, const YAML::Node& v, const std::string& p,
                         ScheduleEntry* e) {
  PROFCTL_ASSIGN_OR_RETURN(const std::string m, r.String(v, p));
  if (m == "skip") {
    e->s.missed = MissedPolicy::kSkip;
  } else if (m == "run_once") {
    e->s.missed = MissedPolicy::kRunOnce;
  } else {
    return r.Error(v, p, absl::StrCat(YamlConfig::Quote(m), " is not one of: skip, run_once"));
  }
  return absl::OkStatus();
}

// The keys of a schedule entry, one row each, in the order the unknown-key error lists them.
struct ScheduleKey {
  absl::string_view key;
  absl::Status (*parse)(const YamlConfig& r, const YAML::Node& v, const std::string& path,
                        ScheduleEntry* e);
};

using E = ScheduleEntry;
constexpr ScheduleKey kScheduleKeys[] = {
    {"name", ParseName},
    {"targets",
     [](const YamlConfig& r, const YAML::Node& v, const std::string& p, E* e) -> absl::Status {
       e->has_targets = true;
       return ParseTargets(r, v, p, &e->s.targets);
     }},
    {"interval",
     [](const YamlConfig& r, const YAML::Node& v, const std::string& p, E* e) -> absl::Status {
       PROFCTL_ASSIGN_OR_RETURN(e->s.interval_ns,
                                Duration(r, v, p, kNanosPerSecond, 365 * kNanosPerDay));
       e->interval_node.emplace(v);
       return absl::OkStatus();
     }},
    {"cron", ParseCron},
    {"trigger",
     [](const YamlConfig& r, const YAML::Node& v, const std::string& p, E* e) -> absl::Status {
       return ParseTrigger(r, v, p, &e->s.trigger.emplace());
     }},
    {"jitter",
     [](const YamlConfig& r, const YAML::Node& v, const std::string& p, E* e) -> absl::Status {
       PROFCTL_ASSIGN_OR_RETURN(e->s.jitter_ns, Duration(r, v, p, 0, 365 * kNanosPerDay));
       e->jitter_node.emplace(v);
       return absl::OkStatus();
     }},
    {"duration",
     [](const YamlConfig& r, const YAML::Node& v, const std::string& p, E* e) -> absl::Status {
       PROFCTL_ASSIGN_OR_RETURN(e->s.capture.duration_ms,
                                DurationMs(r, v, p, 1, PlanLimits::kMaxDurationMs));
       return absl::OkStatus();
     }},
    {"late", ParseLate},
    {"align", ParseAlign},
    {"retries",
     [](const YamlConfig& r, const YAML::Node& v, const std::string& p, E* e) -> absl::Status {
       PROFCTL_ASSIGN_OR_RETURN(const int64_t n, r.Int(v, p, 0, PlanLimits::kMaxRetries));
       e->s.capture.retries = static_cast<int>(n);
       return absl::OkStatus();
     }},
    {"tolerance",
     [](const YamlConfig& r, const YAML::Node& v, const std::string& p, E* e) -> absl::Status {
       PROFCTL_ASSIGN_OR_RETURN(e->s.capture.tolerance_ms,
                                DurationMs(r, v, p, 0, PlanLimits::kMaxToleranceMs));
       return absl::OkStatus();
     }},
    {"deadline",
     [](const YamlConfig& r, const YAML::Node& v, const std::string& p, E* e) -> absl::Status {
       PROFCTL_ASSIGN_OR_RETURN(e->s.capture.deadline_ms,
                                DurationMs(r, v, p, 1, PlanLimits::kMaxDeadlineMs));
       return absl::OkStatus();
     }},
    {"host_tracer_level",
     [](const YamlConfig& r, const YAML::Node& v, const std::string& p, E* e) -> absl::Status {
       PROFCTL_ASSIGN_OR_RETURN(e->s.capture.host_tracer_level,
                                r.Int(v, p, 0, tsl::kMaxHostTracerLevel));
       return absl::OkStatus();
     }},
    {"device_tracer_level",
     [](const YamlConfig& r, const YAML::Node& v, const std::string& p, E* e) -> absl::Status {
       PROFCTL_ASSIGN_OR_RETURN(e->s.capture.device_tracer_level,
                                r.Int(v, p, 0, tsl::kMaxDeviceTracerLevel));
       return absl::OkStatus();
     }},
    {"python_tracer_level",
     [](const YamlConfig& r, const YAML::Node& v, const std::string& p, E* e) -> absl::Status {
       PROFCTL_ASSIGN_OR_RETURN(e->s.capture.python_tracer_level,
                                r.Int(v, p, 0, tsl::kMaxPythonTracerLevel));
       return absl::OkStatus();
     }},
    {"retention",
     [](const YamlConfig& r, const YAML::Node& v, const std::string& p, E* e) -> absl::Status {
       return ParseRetention(r, v, p, &e->s.retention);
     }},
    {"concurrency", ParseConcurrency},
    {"missed", ParseMissed},
};

// What depends on several keys of the entry `v`, named `path`.
absl::Status CheckScheduleEntry(const YamlConfig& r, const YAML::Node& v, const std::string& path,
                                const ScheduleEntry& e) {
  const ScheduleConfig& s = e.s;
  if (s.name.empty()) return r.Error(v, path, "missing key 'name'");
  if (!e.has_targets) return r.Error(v, path, "missing key 'targets'");
  if ((s.interval_ns > 0 ? 1 : 0) + (s.cron.has_value() ? 1 : 0) +
          (s.trigger.has_value() ? 1 : 0) !=
      1) {
    return r.Error(v, path, "give exactly one of 'interval', 'cron' and 'trigger'");
  }
  if (s.trigger.has_value() && e.jitter_node.has_value()) {
    return r.Error(*e.jitter_node, YamlConfig::Join(path, "jitter"),
                   "a trigger fires when the signal says so: jitter is for interval and cron");
  }
  if (s.trigger.has_value() && v["missed"].IsDefined()) {
    return r.Error(v["missed"], YamlConfig::Join(path, "missed"),
                   "a trigger has no missed runs: missed is for interval and cron");
  }
  if (e.jitter_node.has_value() && e.interval_node.has_value() && s.jitter_ns >= s.interval_ns) {
    return r.Error(
        *e.jitter_node, YamlConfig::Join(path, "jitter"),
        absl::StrCat("must be shorter than the interval (", e.interval_node->Scalar(), ")"));
  }
  // What depends on several keys (the deadline must hold the window): the plan's own check.
  if (absl::Status st = ValidatePlanOptions(s.capture.ToPlan(), kScheduleNames); !st.ok()) {
    return r.Error(v, path, st.message());
  }
  return absl::OkStatus();
}

absl::StatusOr<ScheduleConfig> ParseSchedule(const YamlConfig& r, const YAML::Node& v,
                                             const std::string& path) {
  if (!v.IsMap())
    return r.Error(v, path, "expected a mapping (name, targets, interval or cron, ...)");
  std::vector<absl::string_view> known;
  for (const ScheduleKey& k : kScheduleKeys) known.push_back(k.key);
  PROFCTL_RETURN_IF_ERROR(r.CheckKeys(v, path, known));
  ScheduleEntry e;
  e.s.line = v.Mark().line + 1;
  for (const auto& kv : v) {
    const std::string key = kv.first.Scalar();
    for (const ScheduleKey& k : kScheduleKeys) {
      if (k.key != key) continue;
      PROFCTL_RETURN_IF_ERROR(k.parse(r, kv.second, YamlConfig::Join(path, key), &e));
      break;
    }
  }
  PROFCTL_RETURN_IF_ERROR(CheckScheduleEntry(r, v, path, e));
  return std::move(e.s);
}

}  // namespace

CapturePlan ScheduleCaptureOptions::ToPlan() const {
  CapturePlan plan;
  plan.duration_ms = duration_ms;
  plan.late = late;
  plan.align = align;
  plan.retries = retries;
  plan.tolerance_ms = tolerance_ms;
  plan.deadline_ms = deadline_ms;
  plan.past_ms = past_ms;
  plan.host_tracer_level = host_tracer_level;
  plan.device_tracer_level = device_tracer_level;
  plan.python_tracer_level = python_tracer_level;
  return plan;
}

absl::StatusOr<int64_t> ParseDuration(absl::string_view text) {
  if (text == "0") return 0;
  if (text.empty()) return absl::InvalidArgumentError("empty duration");
  int64_t total = 0;
  absl::string_view rest = text;
  while (!rest.empty()) {
    int64_t n = 0;
    absl::string_view after;
    if (!SplitNumber(rest, &n, &after)) {
      return absl::InvalidArgumentError(
          absl::StrCat(YamlConfig::Quote(text), " is not a duration"));
    }
    int64_t unit = 0;
    size_t unit_len = 0;
    if (absl::StartsWith(after, "ms")) {
      unit = kNanosPerMilli, unit_len = 2;
    } else if (absl::StartsWith(after, "s")) {
      unit = kNanosPerSecond, unit_len = 1;
    } else if (absl::StartsWith(after, "m")) {
      unit = kNanosPerMinute, unit_len = 1;
    } else if (absl::StartsWith(after, "h")) {
      unit = kNanosPerHour, unit_len = 1;
    } else if (absl::StartsWith(after, "d")) {
      unit = kNanosPerDay, unit_len = 1;
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat(YamlConfig::Quote(text), " is not a duration"));
    }
    if (!MulAdd(n, unit, &total)) {
      return absl::InvalidArgumentError(absl::StrCat(YamlConfig::Quote(text), " is too long"));
    }
    rest = after.substr(unit_len);
  }
  return total;
}

absl::StatusOr<int64_t> ParseByteSize(absl::string_view text) {
  int64_t n = 0;
  absl::string_view unit;
  if (!SplitNumber(text, &n, &unit)) {
    return absl::InvalidArgumentError(absl::StrCat(YamlConfig::Quote(text), " is not a size"));
  }
  if (absl::EndsWith(unit, "B")) unit.remove_suffix(1);
  int64_t mult = 1;
  const bool binary = absl::EndsWith(unit, "i");
  if (binary) unit.remove_suffix(1);
  const int64_t base = binary ? 1024 : 1000;
  if (unit.empty()) {
    if (binary)
      return absl::InvalidArgumentError(absl::StrCat(YamlConfig::Quote(text), " is not a size"));
  } else if (unit.size() == 1 && absl::StrContains("KMGT", unit)) {
    const size_t power = std::string("KMGT").find(unit[0]) + 1;
    for (size_t i = 0; i < power; ++i) mult *= base;
  } else {
    return absl::InvalidArgumentError(absl::StrCat(YamlConfig::Quote(text), " is not a size"));
  }
  int64_t total = 0;
  if (!MulAdd(n, mult, &total)) {
    return absl::InvalidArgumentError(absl::StrCat(YamlConfig::Quote(text), " is too large"));
  }
  return total;
}

bool ScheduleConfig::SameTiming(const ScheduleConfig& other) const {
  const std::string a = cron.has_value() ? cron->text() : "";
  const std::string b = other.cron.has_value() ? other.cron->text() : "";
  return interval_ns == other.interval_ns && a == b && jitter_ns == other.jitter_ns &&
         trigger == other.trigger;
}

absl::StatusOr<CoordinatorConfig> ParseCoordinatorConfig(const std::string& yaml,
                                                         const std::string& source) {
  PROFCTL_ASSIGN_OR_RETURN(const YamlConfig r, YamlConfig::Parse(yaml, source));
  const YAML::Node& root = r.root();
  CoordinatorConfig config;
  if (root.IsNull()) return config;
  PROFCTL_RETURN_IF_ERROR(r.RequireTopLevelMap());
  PROFCTL_RETURN_IF_ERROR(r.CheckKeys(root, "", {"logdir", "schedules"}));
  absl::flat_hash_set<std::string> names;
  for (const auto& kv : root) {
    const std::string key = kv.first.Scalar();
    if (key == "logdir") {
      PROFCTL_ASSIGN_OR_RETURN(config.logdir, r.String(kv.second, key));
      continue;
    }
    const YAML::Node& list = kv.second;
    if (list.IsNull()) continue;
    if (!list.IsSequence()) return r.Error(list, key, "expected a list of schedules");
    for (size_t i = 0; i < list.size(); ++i) {
      const std::string path = YamlConfig::Index("schedules", i);
      PROFCTL_ASSIGN_OR_RETURN(ScheduleConfig s, ParseSchedule(r, list[i], path));
      if (!names.insert(s.name).second) {
        return r.Error(list[i]["name"], absl::StrCat(path, ".name"),
                       absl::StrCat(YamlConfig::Quote(s.name), " names another schedule too"));
      }
      config.schedules.push_back(std::move(s));
    }
  }
  if (!config.schedules.empty() && config.logdir.empty()) {
    return r.Error(root, "logdir", "missing: schedules need a logdir to write sessions to");
  }
  return config;
}

std::vector<std::string> OverlapWarnings(const std::vector<ScheduleConfig>& schedules) {
  constexpr size_t kMaxLines = 10;
  constexpr size_t kMaxNames = 5;
  std::map<std::string, std::vector<const std::string*>> by_host;  // sorted: stable output
  for (const ScheduleConfig& s : schedules) {
    std::vector<std::string> hosts;
    if (s.targets.kind == TargetsKind::kList) {
      for (const std::string& t : s.targets.list) {
        absl::StatusOr<WorkerAddress> w = ParseWorker(t);
        hosts.push_back(w.ok() ? w->target() : t);
      }
    } else {
      hosts.push_back(
          absl::StrCat(s.targets.kind == TargetsKind::kDns ? "dns " : "file ", s.targets.source));
    }
    for (const std::string& h : hosts) {
      std::vector<const std::string*>& names = by_host[h];
      if (names.empty() || *names.back() != s.name) names.push_back(&s.name);
    }
  }
  std::vector<std::string> lines;
  size_t shared = 0;
  for (const auto& [host, names] : by_host) {
    if (names.size() < 2) continue;
    if (++shared > kMaxLines) continue;
    std::string list;
    for (size_t i = 0; i < names.size() && i < kMaxNames; ++i) {
      absl::StrAppend(&list, i == 0 ? "" : ", ", *names[i]);
    }
    if (names.size() > kMaxNames)
      absl::StrAppend(&list, " and ", names.size() - kMaxNames, " more");
    lines.push_back(absl::StrCat("schedules ", list, " capture the same host ", host,
                                 ": a run whose hosts are busy with another schedule's session "
                                 "is skipped (counted)"));
  }
  if (shared > kMaxLines) {
    lines.push_back(
        absl::StrCat("... and ", shared - kMaxLines, " more hosts that several schedules capture"));
  }
  return lines;
}

absl::StatusOr<CoordinatorConfig> LoadCoordinatorConfig(const std::string& path) {
  PROFCTL_ASSIGN_OR_RETURN(const std::string text, YamlConfig::ReadFile(path));
  return ParseCoordinatorConfig(text, path);
}

}  // namespace profctl::coordinator::schedule
