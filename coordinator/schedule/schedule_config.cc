#include "coordinator/schedule/schedule_config.h"

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "common/file_util.h"
#include "common/status_macros.h"
#include "yaml-cpp/yaml.h"

namespace profctl::coordinator::schedule {
namespace {

constexpr int64_t kNanosPerMinute = 60 * kNanosPerSecond;
constexpr int64_t kNanosPerHour = 60 * kNanosPerMinute;
constexpr int64_t kNanosPerDay = 24 * kNanosPerHour;
constexpr char kDurationHint[] = "(use 30s, 5m, 1h, 1d)";
constexpr size_t kMaxScheduleNameChars = 64;

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

// Builds "<source>:<line>: <path>: <message>" errors for one file.
class Reader {
 public:
  explicit Reader(std::string source) : source_(std::move(source)) {}

  absl::Status Error(const YAML::Node& at, absl::string_view path, absl::string_view msg) const {
    return absl::InvalidArgumentError(
        absl::StrCat(source_, ":", at.Mark().line + 1, ": ", path, ": ", msg));
  }

  // The mapping's keys must all be in `known`.
  absl::Status CheckKeys(const YAML::Node& map, absl::string_view path,
                         std::initializer_list<absl::string_view> known) const {
    for (const auto& kv : map) {
      const std::string key = kv.first.Scalar();
      bool ok = false;
      for (absl::string_view k : known) ok = ok || k == key;
      if (!ok) {
        std::string list;
        for (absl::string_view k : known) absl::StrAppend(&list, list.empty() ? "" : ", ", k);
        return Error(kv.first, Join(path, key), absl::StrCat("unknown key (known: ", list, ")"));
      }
    }
    return absl::OkStatus();
  }

  absl::StatusOr<std::string> String(const YAML::Node& v, absl::string_view path) const {
    if (!v.IsScalar() || v.Scalar().empty()) return Error(v, path, "expected a non-empty string");
    return v.Scalar();
  }

  absl::StatusOr<int64_t> Int(const YAML::Node& v, absl::string_view path, int64_t min,
                              int64_t max) const {
    int64_t n = 0;
    if (!v.IsScalar() || !absl::SimpleAtoi(v.Scalar(), &n)) {
      return Error(v, path,
                   absl::StrCat("\"", v.IsScalar() ? v.Scalar() : "", "\" is not an integer"));
    }
    if (n < min || n > max) {
      return Error(v, path, absl::StrCat(n, " is not in ", min, "..", max));
    }
    return n;
  }

  // A duration in [min_ns, max_ns].
  absl::StatusOr<int64_t> Duration(const YAML::Node& v, absl::string_view path, int64_t min_ns,
                                   int64_t max_ns) const {
    const std::string text = v.IsScalar() ? v.Scalar() : "";
    absl::StatusOr<int64_t> ns = ParseDuration(text);
    if (!ns.ok()) {
      return Error(v, path, absl::StrCat("\"", text, "\" is not a duration ", kDurationHint));
    }
    if (*ns < min_ns || *ns > max_ns) {
      return Error(
          v, path,
          absl::StrCat("\"", text, "\" is not in ", absl::FormatDuration(absl::Nanoseconds(min_ns)),
                       "..", absl::FormatDuration(absl::Nanoseconds(max_ns))));
    }
    return *ns;
  }

  static std::string Join(absl::string_view path, absl::string_view key) {
    return path.empty() ? std::string(key) : absl::StrCat(path, ".", key);
  }

 private:
  std::string source_;
};

absl::Status ParseTargets(const Reader& r, const YAML::Node& v, const std::string& path,
                          Targets* t) {
  if (v.IsScalar()) {
    if (v.Scalar().empty())
      return r.Error(v, path, "expected a list of host:port, a DNS name or a file");
    t->source = v.Scalar();
    // A path names a targets file; anything else is a DNS name to resolve.
    t->kind = absl::StrContains(t->source, '/') ? TargetsKind::kFile : TargetsKind::kDns;
    return absl::OkStatus();
  }
  if (!v.IsSequence() || v.size() == 0) {
    return r.Error(v, path, "expected a non-empty list of host:port, a DNS name or a targets file");
  }
  t->kind = TargetsKind::kList;
  for (size_t i = 0; i < v.size(); ++i) {
    PROFCTL_ASSIGN_OR_RETURN(std::string target, r.String(v[i], absl::StrCat(path, "[", i, "]")));
    t->list.push_back(std::move(target));
  }
  return absl::OkStatus();
}

absl::Status ParseRetention(const Reader& r, const YAML::Node& v, const std::string& path,
                            RetentionConfig* ret) {
  if (!v.IsMap()) return r.Error(v, path, "expected a mapping {keep_last, max_age, max_bytes}");
  PROFCTL_RETURN_IF_ERROR(r.CheckKeys(v, path, {"keep_last", "max_age", "max_bytes"}));
  for (const auto& kv : v) {
    const std::string key = kv.first.Scalar();
    const std::string p = Reader::Join(path, key);
    if (key == "keep_last") {
      PROFCTL_ASSIGN_OR_RETURN(ret->keep_last, r.Int(kv.second, p, 0, 1'000'000));
    } else if (key == "max_age") {
      PROFCTL_ASSIGN_OR_RETURN(ret->max_age_ns,
                               r.Duration(kv.second, p, 0, kNanosPerDay * 365 * 100));
    } else {
      const std::string text = kv.second.IsScalar() ? kv.second.Scalar() : "";
      absl::StatusOr<int64_t> bytes = ParseByteSize(text);
      if (!bytes.ok()) {
        return r.Error(kv.second, p,
                       absl::StrCat("\"", text, "\" is not a size (use 500MB, 10GiB, 1048576)"));
      }
      ret->max_bytes = *bytes;
    }
  }
  return absl::OkStatus();
}

absl::Status ParseTrigger(const Reader& r, const YAML::Node& v, const std::string& path,
                          TriggerConfig* t) {
  if (!v.IsMap()) {
    return r.Error(v, path,
                   "expected a mapping {signal, threshold, poll, window, baseline, min_steps, "
                   "sustain, cooldown}");
  }
  PROFCTL_RETURN_IF_ERROR(r.CheckKeys(
      v, path,
      {"signal", "threshold", "poll", "window", "baseline", "min_steps", "sustain", "cooldown"}));
  std::optional<YAML::Node> window_node;
  std::optional<YAML::Node> baseline_node;
  for (const auto& kv : v) {
    const std::string key = kv.first.Scalar();
    const std::string p = Reader::Join(path, key);
    const YAML::Node& val = kv.second;
    if (key == "signal") {
      PROFCTL_ASSIGN_OR_RETURN(t->signal, r.String(val, p));
      if (t->signal != "step_time") {
        return r.Error(val, p, absl::StrCat("\"", t->signal, "\" is not one of: step_time"));
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
                       absl::StrCat("\"", text,
                                    "\" is not a ratio in 1.01..100 (1.5) or an increase in "
                                    "1%..9900% (50%)"));
      }
      t->threshold = x;
    } else if (key == "poll") {
      PROFCTL_ASSIGN_OR_RETURN(t->poll_ns, r.Duration(val, p, kNanosPerSecond, kNanosPerHour));
    } else if (key == "window") {
      PROFCTL_ASSIGN_OR_RETURN(t->window_ns, r.Duration(val, p, kNanosPerSecond, kNanosPerHour));
      window_node.emplace(val);
    } else if (key == "baseline") {
      PROFCTL_ASSIGN_OR_RETURN(t->baseline_ns,
                               r.Duration(val, p, 10 * kNanosPerSecond, kNanosPerDay));
      baseline_node.emplace(val);
    } else if (key == "min_steps") {
      PROFCTL_ASSIGN_OR_RETURN(t->min_steps, r.Int(val, p, 3, 100'000));
    } else if (key == "sustain") {
      PROFCTL_ASSIGN_OR_RETURN(t->sustain, r.Int(val, p, 1, 1000));
    } else {  // cooldown
      PROFCTL_ASSIGN_OR_RETURN(t->cooldown_ns, r.Duration(val, p, 0, 30 * kNanosPerDay));
    }
  }
  if (t->baseline_ns <= t->window_ns) {
    return r.Error(baseline_node.value_or(window_node.value_or(v)),
                   Reader::Join(path, baseline_node.has_value() ? "baseline" : "window"),
                   "the baseline must be longer than the window");
  }
  return absl::OkStatus();
}

absl::StatusOr<ScheduleConfig> ParseSchedule(const Reader& r, const YAML::Node& v,
                                             const std::string& path) {
  if (!v.IsMap())
    return r.Error(v, path, "expected a mapping (name, targets, interval or cron, ...)");
  PROFCTL_RETURN_IF_ERROR(r.CheckKeys(
      v, path,
      {"name", "targets", "interval", "cron", "trigger", "jitter", "duration", "late", "align",
       "retries", "tolerance", "deadline", "retention", "concurrency", "missed"}));
  ScheduleConfig s;
  s.line = v.Mark().line + 1;
  // Copies (handles): yaml-cpp's iteration yields temporaries.
  std::optional<YAML::Node> interval_node;
  std::optional<YAML::Node> jitter_node;
  bool has_targets = false;
  for (const auto& kv : v) {
    const std::string key = kv.first.Scalar();
    const std::string p = Reader::Join(path, key);
    const YAML::Node& val = kv.second;
    if (key == "name") {
      PROFCTL_ASSIGN_OR_RETURN(s.name, r.String(val, p));
      if (s.name.size() > kMaxScheduleNameChars ||
          !ValidateFileStem("schedule name", s.name).ok()) {
        return r.Error(val, p,
                       absl::StrCat("\"", s.name, "\" is not 1-", kMaxScheduleNameChars,
                                    " characters of [A-Za-z0-9._-]"));
      }
    } else if (key == "targets") {
      PROFCTL_RETURN_IF_ERROR(ParseTargets(r, val, p, &s.targets));
      has_targets = true;
    } else if (key == "interval") {
      PROFCTL_ASSIGN_OR_RETURN(s.interval_ns,
                               r.Duration(val, p, kNanosPerSecond, 365 * kNanosPerDay));
      interval_node.emplace(val);
    } else if (key == "cron") {
      PROFCTL_ASSIGN_OR_RETURN(const std::string text, r.String(val, p));
      absl::StatusOr<CronExpr> cron = CronExpr::Parse(text);
      if (!cron.ok()) return r.Error(val, p, cron.status().message());
      s.cron = *std::move(cron);
    } else if (key == "trigger") {
      s.trigger.emplace();
      PROFCTL_RETURN_IF_ERROR(ParseTrigger(r, val, p, &*s.trigger));
    } else if (key == "jitter") {
      PROFCTL_ASSIGN_OR_RETURN(s.jitter_ns, r.Duration(val, p, 0, 365 * kNanosPerDay));
      jitter_node.emplace(val);
    } else if (key == "duration") {
      PROFCTL_ASSIGN_OR_RETURN(
          const int64_t ns,
          r.Duration(val, p, kNanosPerMilli, PlanLimits::kMaxDurationMs * kNanosPerMilli));
      s.capture.duration_ms = ns / kNanosPerMilli;
    } else if (key == "late") {
      PROFCTL_ASSIGN_OR_RETURN(const std::string late, r.String(val, p));
      absl::StatusOr<profctl::v1::LatePolicy> policy = ParseLatePolicy(late);
      if (!policy.ok()) {
        return r.Error(val, p, absl::StrCat("\"", late, "\" ", policy.status().message()));
      }
      s.capture.late = *policy;
    } else if (key == "align") {
      PROFCTL_ASSIGN_OR_RETURN(const std::string align, r.String(val, p));
      absl::StatusOr<profctl::v1::AlignMode> mode = ParseAlignMode(align);
      if (!mode.ok()) {
        return r.Error(val, p, absl::StrCat("\"", align, "\" ", mode.status().message()));
      }
      s.capture.align = *mode;
    } else if (key == "retries") {
      PROFCTL_ASSIGN_OR_RETURN(const int64_t n, r.Int(val, p, 0, PlanLimits::kMaxRetries));
      s.capture.retries = static_cast<int>(n);
    } else if (key == "tolerance") {
      PROFCTL_ASSIGN_OR_RETURN(const int64_t ns,
                               r.Duration(val, p, 0, PlanLimits::kMaxToleranceMs * kNanosPerMilli));
      s.capture.tolerance_ms = ns / kNanosPerMilli;
    } else if (key == "deadline") {
      PROFCTL_ASSIGN_OR_RETURN(
          const int64_t ns,
          r.Duration(val, p, kNanosPerMilli, PlanLimits::kMaxDeadlineMs * kNanosPerMilli));
      s.capture.deadline_ms = ns / kNanosPerMilli;
    } else if (key == "retention") {
      PROFCTL_RETURN_IF_ERROR(ParseRetention(r, val, p, &s.retention));
    } else if (key == "concurrency") {
      PROFCTL_ASSIGN_OR_RETURN(const std::string c, r.String(val, p));
      if (c != "skip") {
        return r.Error(val, p, absl::StrCat("\"", c, "\" is not one of: skip (the only policy)"));
      }
    } else {  // missed
      PROFCTL_ASSIGN_OR_RETURN(const std::string m, r.String(val, p));
      if (m == "skip") {
        s.missed = MissedPolicy::kSkip;
      } else if (m == "run_once") {
        s.missed = MissedPolicy::kRunOnce;
      } else {
        return r.Error(val, p, absl::StrCat("\"", m, "\" is not one of: skip, run_once"));
      }
    }
  }
  if (s.name.empty()) return r.Error(v, path, "missing key 'name'");
  if (!has_targets) return r.Error(v, path, "missing key 'targets'");
  if ((s.interval_ns > 0 ? 1 : 0) + (s.cron.has_value() ? 1 : 0) +
          (s.trigger.has_value() ? 1 : 0) !=
      1) {
    return r.Error(v, path, "give exactly one of 'interval', 'cron' and 'trigger'");
  }
  if (s.trigger.has_value() && jitter_node.has_value()) {
    return r.Error(*jitter_node, Reader::Join(path, "jitter"),
                   "a trigger fires when the signal says so: jitter is for interval and cron");
  }
  if (s.trigger.has_value() && v["missed"].IsDefined()) {
    return r.Error(v["missed"], Reader::Join(path, "missed"),
                   "a trigger has no missed runs: missed is for interval and cron");
  }
  if (jitter_node.has_value() && interval_node.has_value() && s.jitter_ns >= s.interval_ns) {
    return r.Error(
        *jitter_node, Reader::Join(path, "jitter"),
        absl::StrCat("must be shorter than the interval (", interval_node->Scalar(), ")"));
  }
  // What depends on several keys (the deadline must hold the window): the plan's own check.
  if (absl::Status st = ValidatePlanOptions(s.capture.ToPlan(), kScheduleNames); !st.ok()) {
    return r.Error(v, path, st.message());
  }
  return s;
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
      return absl::InvalidArgumentError(absl::StrCat("\"", text, "\" is not a duration"));
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
      return absl::InvalidArgumentError(absl::StrCat("\"", text, "\" is not a duration"));
    }
    if (!MulAdd(n, unit, &total)) {
      return absl::InvalidArgumentError(absl::StrCat("\"", text, "\" is too long"));
    }
    rest = after.substr(unit_len);
  }
  return total;
}

absl::StatusOr<int64_t> ParseByteSize(absl::string_view text) {
  int64_t n = 0;
  absl::string_view unit;
  if (!SplitNumber(text, &n, &unit)) {
    return absl::InvalidArgumentError(absl::StrCat("\"", text, "\" is not a size"));
  }
  if (absl::EndsWith(unit, "B")) unit.remove_suffix(1);
  int64_t mult = 1;
  const bool binary = absl::EndsWith(unit, "i");
  if (binary) unit.remove_suffix(1);
  const int64_t base = binary ? 1024 : 1000;
  if (unit.empty()) {
    if (binary) return absl::InvalidArgumentError(absl::StrCat("\"", text, "\" is not a size"));
  } else if (unit.size() == 1 && absl::StrContains("KMGT", unit)) {
    const size_t power = std::string("KMGT").find(unit[0]) + 1;
    for (size_t i = 0; i < power; ++i) mult *= base;
  } else {
    return absl::InvalidArgumentError(absl::StrCat("\"", text, "\" is not a size"));
  }
  int64_t total = 0;
  if (!MulAdd(n, mult, &total)) {
    return absl::InvalidArgumentError(absl::StrCat("\"", text, "\" is too large"));
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
  YAML::Node root;
  try {
    root = YAML::Load(yaml);
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ":", e.mark.line + 1, ": not valid YAML: ", e.msg));
  }
  CoordinatorConfig config;
  if (root.IsNull()) return config;
  const Reader r(source);
  if (!root.IsMap()) return r.Error(root, "(top level)", "expected a mapping of settings");
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
      const std::string path = absl::StrCat("schedules[", i, "]");
      PROFCTL_ASSIGN_OR_RETURN(ScheduleConfig s, ParseSchedule(r, list[i], path));
      if (!names.insert(s.name).second) {
        return r.Error(list[i]["name"], absl::StrCat(path, ".name"),
                       absl::StrCat("\"", s.name, "\" names another schedule too"));
      }
      config.schedules.push_back(std::move(s));
    }
  }
  if (!config.schedules.empty() && config.logdir.empty()) {
    return r.Error(root, "logdir", "missing: schedules need a logdir to write sessions to");
  }
  return config;
}

absl::StatusOr<CoordinatorConfig> LoadCoordinatorConfig(const std::string& path) {
  PROFCTL_ASSIGN_OR_RETURN(const std::string text, ReadFile(path));
  return ParseCoordinatorConfig(text, path);
}

}  // namespace profctl::coordinator::schedule
