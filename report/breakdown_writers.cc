#include "report/breakdown_writers.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/json_util.h"
#include "common/version.h"
#include "report/html_report.h"
#include "report/json_out.h"

namespace profctl::report {

using analysis::Category;
using analysis::CategoryName;
using analysis::HostReport;
using analysis::kNumCategories;
using analysis::PodBreakdown;
using analysis::PodHostStep;
using analysis::PodStep;
using analysis::Stats;

namespace {

Category CategoryAt(int i) { return static_cast<Category>(i); }

int64_t RoundNs(double ns) {
  if (!std::isfinite(ns)) return 0;
  if (ns >= 9.2e18) return std::numeric_limits<int64_t>::max();
  if (ns <= -9.2e18) return std::numeric_limits<int64_t>::min();
  return std::llround(ns);
}

// Nearest-rank percentile of sorted values (p in 0..100); 0 for none.
int64_t Percentile(const std::vector<int64_t>& sorted, int p) {
  if (sorted.empty()) return 0;
  const size_t n = sorted.size();
  size_t rank = (static_cast<size_t>(p) * n + 99) / 100;  // ceil(p * n / 100)
  if (rank == 0) rank = 1;
  return sorted[std::min(rank, n) - 1];
}

Stats StatsOf(std::vector<int64_t> values) {
  Stats s;
  if (values.empty()) return s;
  std::sort(values.begin(), values.end());
  long double sum = 0;
  for (const int64_t v : values) sum += static_cast<long double>(v);
  s.mean_ns = static_cast<double>(sum / static_cast<long double>(values.size()));
  s.p50_ns = Percentile(values, 50);
  s.p90_ns = Percentile(values, 90);
  return s;
}

// The host whose view stands for the pod in a step: the straggler, else the slowest host.
const PodHostStep* PodView(const PodStep& step) {
  const PodHostStep* slowest = nullptr;
  for (const PodHostStep& h : step.hosts) {
    if (!step.straggler.empty() && h.host == step.straggler) return &h;
    if (slowest == nullptr || h.step_time_ns > slowest->step_time_ns) slowest = &h;
  }
  return slowest;
}

// The analysis reports "no cause" as kIdle (idle is never a cause).
bool HasCause(const PodStep& step) {
  return !step.straggler.empty() && step.cause != Category::kIdle;
}

// --- The headline: "who is slow and why", shared by the JSON and the table -------------------

struct StragglerHeadline {
  std::string host;
  int64_t steps = 0;  // steps in which it straggled
  std::optional<Category> cause;
  int64_t cause_steps = 0;      // of those, steps with the typical cause
  int64_t cause_excess_ns = 0;  // median excess over those steps
  int64_t example_step = 0;     // the last such step, with its why
  std::string why;
};

struct InputHeadline {
  std::string host;
  int64_t input_ns = 0;         // its mean input time per step
  int64_t median_input_ns = 0;  // the median host's
  int64_t excess_ns = 0;
  int64_t step_time_ns = 0;  // its mean step time
};

double PctOf(int64_t part, int64_t whole) {
  return whole <= 0 ? 0.0 : 100.0 * static_cast<double>(part) / static_cast<double>(whole);
}

int64_t PerStep(int64_t total, int64_t steps) { return steps <= 0 ? 0 : total / steps; }

struct Headline {
  int64_t steps_with_straggler = 0;
  std::optional<StragglerHeadline> straggler;
  std::optional<InputHeadline> input_bound;
  // The median host's mean input per step and mean step time (for "nobody stands out").
  int64_t median_input_ns = 0;
  int64_t median_step_ns = 0;
};

Headline MakeHeadline(const PodBreakdown& b) {
  Headline out;
  // Most frequent straggler; ties go to the host that comes first in host order.
  std::map<std::string, int64_t> counts;
  for (const PodStep& s : b.steps) {
    if (s.straggler.empty()) continue;
    ++out.steps_with_straggler;
    ++counts[s.straggler];
  }
  std::string top;
  int64_t top_count = 0;
  for (const HostReport& h : b.hosts) {
    auto it = counts.find(h.host);
    if (it != counts.end() && it->second > top_count) {
      top = h.host;
      top_count = it->second;
    }
  }
  for (const auto& [host, n] : counts) {  // a straggler missing from b.hosts
    if (n > top_count) {
      top = host;
      top_count = n;
    }
  }
  if (top_count > 0) {
    StragglerHeadline sh;
    sh.host = top;
    sh.steps = top_count;
    std::array<int64_t, kNumCategories> by_cause{};
    for (const PodStep& s : b.steps) {
      if (s.straggler == top && HasCause(s)) ++by_cause[static_cast<int>(s.cause)];
    }
    int best = -1;
    for (int c = 0; c < kNumCategories; ++c) {
      if (by_cause[c] > 0 && (best < 0 || by_cause[c] > by_cause[best])) best = c;
    }
    if (best >= 0) {
      sh.cause = CategoryAt(best);
      std::vector<int64_t> excess;
      for (const PodStep& s : b.steps) {
        if (s.straggler == top && HasCause(s) && s.cause == *sh.cause) {
          excess.push_back(s.cause_excess_ns);
          sh.example_step = s.step;
          sh.why = s.why;
        }
      }
      std::sort(excess.begin(), excess.end());
      sh.cause_steps = static_cast<int64_t>(excess.size());
      sh.cause_excess_ns = Percentile(excess, 50);
    } else {
      for (const PodStep& s : b.steps) {
        if (s.straggler == top) {
          sh.example_step = s.step;
          sh.why = s.why;
        }
      }
    }
    out.straggler = std::move(sh);
  }

  // Input: the host whose mean input per step exceeds the median host's the most.
  std::vector<int64_t> inputs;
  std::vector<int64_t> step_times;
  for (const HostReport& h : b.hosts) {
    if (h.steps == 0) continue;
    inputs.push_back(RoundNs(h.categories[static_cast<int>(Category::kInput)].mean_ns));
    step_times.push_back(RoundNs(h.step_time.mean_ns));
  }
  std::sort(inputs.begin(), inputs.end());
  std::sort(step_times.begin(), step_times.end());
  out.median_input_ns = Percentile(inputs, 50);
  out.median_step_ns = Percentile(step_times, 50);
  if (inputs.size() >= 2) {
    for (const HostReport& h : b.hosts) {
      if (h.steps == 0) continue;
      const int64_t input = RoundNs(h.categories[static_cast<int>(Category::kInput)].mean_ns);
      const int64_t excess = input - out.median_input_ns;
      const int64_t step = RoundNs(h.step_time.mean_ns);
      // Standing out means more than 1% of its own step (and at least a microsecond).
      if (excess < std::max<int64_t>(1000, step / 100)) continue;
      if (out.input_bound && excess <= out.input_bound->excess_ns) continue;
      out.input_bound = InputHeadline{h.host, input, out.median_input_ns, excess, step};
    }
  }
  return out;
}

// --- JSON --------------------------------------------------------------------------------------

void StatsMs(JsonOut& j, const Stats& s) {
  j.BeginObject();
  j.Key("mean_ms");
  j.Ms(RoundNs(s.mean_ns));
  j.Key("p50_ms");
  j.Ms(s.p50_ns);
  j.Key("p90_ms");
  j.Ms(s.p90_ns);
  j.EndObject();
}

void Strings(JsonOut& j, const std::vector<std::string>& v) {
  j.BeginArray();
  for (const std::string& str : v) j.String(str);
  j.EndArray();
}

void WriteCategoriesMs(JsonOut& j, const analysis::CategoryTimes& t, int64_t step_ns) {
  const std::array<int64_t, kNumCategories> rounded = RoundCategoriesToUs(t, step_ns);
  j.BeginObject();
  for (int c = 0; c < kNumCategories; ++c) {
    j.Key(CategoryName(CategoryAt(c)));
    j.Ms(rounded[static_cast<size_t>(c)]);
  }
  j.EndObject();
}

const std::vector<std::string>& FilesOf(const BreakdownContext& ctx, const std::string& host) {
  static const auto* const kNone = new std::vector<std::string>();
  auto it = ctx.host_files.find(host);
  return it == ctx.host_files.end() ? *kNone : it->second;
}

void WriteSummary(JsonOut& j, const Headline& h) {
  j.BeginObject();
  j.Key("straggler");
  if (!h.straggler) {
    j.Null();
  } else {
    const StragglerHeadline& s = *h.straggler;
    j.BeginObject();
    j.Key("host");
    j.String(s.host);
    j.Key("steps");
    j.Int(s.steps);
    j.Key("of_steps");
    j.Int(h.steps_with_straggler);
    j.Key("cause");
    if (s.cause) {
      j.String(CategoryName(*s.cause));
    } else {
      j.Null();
    }
    j.Key("cause_steps");
    j.Int(s.cause_steps);
    j.Key("cause_excess_ms");
    j.Ms(s.cause_excess_ns);
    j.Key("example_step");
    j.Int(s.example_step);
    j.Key("why");
    j.String(s.why);
    j.EndObject();
  }
  j.Key("input_bound");
  if (!h.input_bound) {
    j.Null();
  } else {
    const InputHeadline& in = *h.input_bound;
    j.BeginObject();
    j.Key("host");
    j.String(in.host);
    j.Key("input_ms");
    j.Ms(in.input_ns);
    j.Key("median_input_ms");
    j.Ms(in.median_input_ns);
    j.Key("excess_ms");
    j.Ms(in.excess_ns);
    j.Key("step_time_ms");
    j.Ms(in.step_time_ns);
    j.EndObject();
  }
  j.Key("median_input_ms");
  j.Ms(h.median_input_ns);
  j.Key("median_step_time_ms");
  j.Ms(h.median_step_ns);
  j.EndObject();
}

// --- Terminal ----------------------------------------------------------------------------------

// Control characters (terminal escapes from a hostile trace) shown as '?'.
std::string Printable(absl::string_view s) {
  std::string out(s);
  for (char& c : out) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f) c = '?';
  }
  return out;
}

std::string ShortHost(absl::string_view host, int max_width) {
  std::string p = Printable(host);
  const size_t width = static_cast<size_t>(std::max(max_width, 8));
  if (p.size() <= width) return p;
  const size_t head = (width - 3) / 2;
  const size_t tail = width - 3 - head;
  return absl::StrCat(p.substr(0, head), "...", p.substr(p.size() - tail));
}

std::string StepLabel(int64_t step) { return step < 0 ? "all" : absl::StrCat(step); }

std::string Percent(int64_t part, int64_t whole) {
  if (whole <= 0) return "-";
  return absl::StrFormat("%.1f%%", PctOf(part, whole));
}

struct Columns {
  int host_width = 22;
  std::array<int, kNumCategories> cat_width{};

  void Header(std::string* out) const {
    for (int c = 0; c < kNumCategories; ++c) {
      absl::StrAppendFormat(out, " %*s", cat_width[c],
                            absl::AsciiStrToUpper(CategoryName(CategoryAt(c))));
    }
  }
  void Values(std::string* out, const std::array<int64_t, kNumCategories>& ns) const {
    for (int c = 0; c < kNumCategories; ++c) {
      absl::StrAppendFormat(out, " %*s", cat_width[c], FormatMs(ns[c]));
    }
  }
};

std::array<int64_t, kNumCategories> MeanCategories(const HostReport& h) {
  std::array<int64_t, kNumCategories> out{};
  for (int c = 0; c < kNumCategories; ++c) out[c] = RoundNs(h.categories[c].mean_ns);
  return out;
}

void AppendHostSection(std::string* out, const PodBreakdown& b, const Columns& cols,
                       const TableOptions& opt) {
  const size_t cap = static_cast<size_t>(std::max(opt.max_hosts, 1));
  std::vector<size_t> shown(b.hosts.size());
  for (size_t i = 0; i < shown.size(); ++i) shown[i] = i;
  if (shown.size() > cap) {
    std::stable_sort(shown.begin(), shown.end(), [&](size_t x, size_t y) {
      const HostReport& a = b.hosts[x];
      const HostReport& c = b.hosts[y];
      if (a.straggler_steps != c.straggler_steps) return a.straggler_steps > c.straggler_steps;
      return a.step_time.mean_ns > c.step_time.mean_ns;
    });
    shown.resize(cap);
    std::sort(shown.begin(), shown.end());
  }
  absl::StrAppendFormat(out, "  %-*s %6s %9s %9s", cols.host_width, "HOST", "STEPS", "STEP(ms)",
                        "P90(ms)");
  cols.Header(out);
  absl::StrAppend(out, " STRAGGLER\n");
  for (const size_t i : shown) {
    const HostReport& h = b.hosts[i];
    absl::StrAppendFormat(out, "  %-*s %6d %9s %9s", cols.host_width,
                          ShortHost(h.host, opt.max_host_width), h.steps,
                          FormatMs(RoundNs(h.step_time.mean_ns)), FormatMs(h.step_time.p90_ns));
    cols.Values(out, MeanCategories(h));
    absl::StrAppendFormat(out, " %9d%s\n", h.straggler_steps,
                          h.has_markers ? "" : "  (no markers)");
  }
  if (shown.size() < b.hosts.size()) {
    std::vector<bool> is_shown(b.hosts.size());
    for (const size_t i : shown) is_shown[i] = true;
    int64_t lo = std::numeric_limits<int64_t>::max();
    int64_t hi = std::numeric_limits<int64_t>::min();
    int64_t straggled = 0;
    for (size_t i = 0; i < b.hosts.size(); ++i) {
      if (is_shown[i]) continue;
      const int64_t mean = RoundNs(b.hosts[i].step_time.mean_ns);
      lo = std::min(lo, mean);
      hi = std::max(hi, mean);
      straggled += b.hosts[i].straggler_steps;
    }
    absl::StrAppendFormat(out, "  ... %d more hosts: mean step %s..%s ms, straggler in %d steps\n",
                          b.hosts.size() - shown.size(), FormatMs(lo), FormatMs(hi), straggled);
  }
}

void AppendStepSection(std::string* out, const PodBreakdown& b, const Columns& cols,
                       const TableOptions& opt) {
  const size_t max_steps = static_cast<size_t>(std::max(opt.max_steps, 0));
  const size_t first = b.steps.size() > max_steps ? b.steps.size() - max_steps : 0;
  if (first == b.steps.size()) return;
  if (first == 0) {
    absl::StrAppendFormat(out, "per step (ms, * = straggler):\n");
  } else {
    absl::StrAppendFormat(out, "last %d of %d steps (ms, * = straggler; all steps in the CSV):\n",
                          b.steps.size() - first, b.steps.size());
  }
  absl::StrAppendFormat(out, "  %6s  %-*s %9s", "STEP", cols.host_width + 2, "HOST", "STEP(ms)");
  cols.Header(out);
  absl::StrAppend(out, "\n");
  const size_t cap = static_cast<size_t>(std::max(opt.max_hosts_per_step, 1));
  for (size_t si = first; si < b.steps.size(); ++si) {
    const PodStep& s = b.steps[si];
    std::vector<size_t> shown(s.hosts.size());
    for (size_t i = 0; i < shown.size(); ++i) shown[i] = i;
    if (shown.size() > cap) {
      // The straggler first, then the slowest.
      std::stable_sort(shown.begin(), shown.end(), [&](size_t x, size_t y) {
        const bool sx = s.hosts[x].host == s.straggler;
        const bool sy = s.hosts[y].host == s.straggler;
        if (sx != sy) return sx;
        return s.hosts[x].step_time_ns > s.hosts[y].step_time_ns;
      });
      shown.resize(cap);
      std::sort(shown.begin(), shown.end());
    }
    for (const size_t i : shown) {
      const PodHostStep& h = s.hosts[i];
      const bool straggler = !s.straggler.empty() && h.host == s.straggler;
      absl::StrAppendFormat(out, "  %6s  %-*s %1s %9s", StepLabel(s.step), cols.host_width,
                            ShortHost(h.host, opt.max_host_width), straggler ? "*" : "",
                            FormatMs(h.step_time_ns));
      cols.Values(out, h.categories.ns);
      if (straggler) {
        if (HasCause(s)) {
          absl::StrAppend(out, "  <- straggler: ", CategoryName(s.cause), " +",
                          FormatMs(s.cause_excess_ns), " ms over the median host");
        } else {
          absl::StrAppend(out, "  <- straggler");
        }
      }
      absl::StrAppend(out, "\n");
    }
    if (shown.size() < s.hosts.size()) {
      std::vector<bool> is_shown(s.hosts.size());
      for (const size_t i : shown) is_shown[i] = true;
      int64_t lo = std::numeric_limits<int64_t>::max();
      int64_t hi = std::numeric_limits<int64_t>::min();
      for (size_t i = 0; i < s.hosts.size(); ++i) {
        if (is_shown[i]) continue;
        lo = std::min(lo, s.hosts[i].step_time_ns);
        hi = std::max(hi, s.hosts[i].step_time_ns);
      }
      absl::StrAppendFormat(out, "  %6s  ... %d more hosts: %s..%s ms\n", StepLabel(s.step),
                            s.hosts.size() - shown.size(), FormatMs(lo), FormatMs(hi));
    }
  }
}

void AppendAnswer(std::string* out, const PodBreakdown& b, const Headline& h,
                  const TableOptions& opt) {
  // Who straggles and why.
  if (h.straggler) {
    const StragglerHeadline& s = *h.straggler;
    absl::StrAppendFormat(out, "straggler: %s in %d of %d steps",
                          ShortHost(s.host, opt.max_host_width), s.steps, h.steps_with_straggler);
    if (s.cause) {
      absl::StrAppendFormat(out,
                            "; typical cause %s, +%s ms over the median host (median of %d steps)",
                            CategoryName(*s.cause), FormatMs(s.cause_excess_ns), s.cause_steps);
    } else {
      absl::StrAppend(out, "; no category above the median host's");
    }
    absl::StrAppend(out, "\n");
    if (!s.why.empty()) {
      absl::StrAppend(out, "  step ", StepLabel(s.example_step), ": ", Printable(s.why), "\n");
    }
  } else if (b.hosts.size() == 1) {
    absl::StrAppend(out, "straggler: none (one host)\n");
  } else if (b.hosts.empty()) {
    // Nothing to say; the warnings say why.
  } else {
    absl::StrAppendFormat(out,
                          "straggler: none: no host's lead over the others passes the noise floor "
                          "(%s ms)\n",
                          FormatMs(b.noise_floor_ns));
  }
  const PodBreakdown::WhatIf& what_if = b.what_if;
  if (what_if.steps > 0 && what_if.median_pace_cost_ns > 0) {
    absl::StrAppendFormat(out,
                          "what if: stragglers cost %s ms per step (%s of the pod's time); "
                          "every host at the median host's pace would save %s ms per step "
                          "(%s)\n",
                          FormatMs(PerStep(what_if.straggler_cost_ns, what_if.steps)),
                          Percent(what_if.straggler_cost_ns, what_if.pod_time_ns),
                          FormatMs(PerStep(what_if.median_pace_cost_ns, what_if.steps)),
                          Percent(what_if.median_pace_cost_ns, what_if.pod_time_ns));
  }

  // Who waits for input.
  if (h.input_bound) {
    const InputHeadline& in = *h.input_bound;
    absl::StrAppendFormat(out,
                          "input-bound: %s, input %s ms per step vs %s ms on the median host (+%s "
                          "ms, %s of its step)\n",
                          ShortHost(in.host, opt.max_host_width), FormatMs(in.input_ns),
                          FormatMs(in.median_input_ns), FormatMs(in.excess_ns),
                          Percent(in.excess_ns, in.step_time_ns));
  } else if (!b.hosts.empty()) {
    absl::StrAppendFormat(out,
                          "input-bound: no host stands out (median host: input %s ms per step, %s "
                          "of its step)\n",
                          FormatMs(h.median_input_ns),
                          Percent(h.median_input_ns, h.median_step_ns));
  }

  // Where the straggler changes.
  if (h.steps_with_straggler > 0) {
    if (b.straggler_changes.empty()) {
      absl::StrAppend(out, "straggler changes: none\n");
    } else {
      std::map<int64_t, size_t> index;
      for (size_t i = 0; i < b.steps.size(); ++i) index[b.steps[i].step] = i;
      constexpr size_t kMaxChanges = 8;
      absl::StrAppendFormat(out, "straggler changes at %d steps:", b.straggler_changes.size());
      for (size_t i = 0; i < b.straggler_changes.size() && i < kMaxChanges; ++i) {
        const int64_t step = b.straggler_changes[i];
        absl::StrAppend(out, i == 0 ? " " : ", ", StepLabel(step));
        auto it = index.find(step);
        if (it != index.end() && it->second > 0) {
          absl::StrAppend(out, " (", ShortHost(b.steps[it->second - 1].straggler, 24), " -> ",
                          ShortHost(b.steps[it->second].straggler, 24), ")");
        }
      }
      if (b.straggler_changes.size() > kMaxChanges) {
        absl::StrAppend(out, ", ... ", b.straggler_changes.size() - kMaxChanges, " more");
      }
      absl::StrAppend(out, "\n");
    }
  }
  if (!b.consistently_slow.empty()) {
    absl::StrAppend(out, "consistently slow (the straggler in more steps than chance allows):");
    for (size_t i = 0; i < b.consistently_slow.size() && i < 8; ++i) {
      absl::StrAppend(out, i == 0 ? " " : ", ", ShortHost(b.consistently_slow[i], 24));
    }
    if (b.consistently_slow.size() > 8) {
      absl::StrAppend(out, ", ... ", b.consistently_slow.size() - 8, " more");
    }
    absl::StrAppend(out, "\n");
  }

  // Warnings, the pod's then each host's.
  std::vector<std::string> warnings;
  for (const std::string& w : b.warnings) warnings.push_back(Printable(w));
  for (const HostReport& hr : b.hosts) {
    for (const std::string& w : hr.warnings) {
      warnings.push_back(absl::StrCat(ShortHost(hr.host, opt.max_host_width), ": ", Printable(w)));
    }
  }
  constexpr size_t kMaxWarnings = 5;
  if (!warnings.empty()) {
    if (warnings.size() > kMaxWarnings) {
      absl::StrAppendFormat(out, "warnings: %d (first %d; all in %s)\n", warnings.size(),
                            kMaxWarnings, kBreakdownJsonFile);
    } else {
      absl::StrAppendFormat(out, "warnings: %d\n", warnings.size());
    }
    for (size_t i = 0; i < warnings.size() && i < kMaxWarnings; ++i) {
      absl::StrAppend(out, "  ", warnings[i], "\n");
    }
  }
}

}  // namespace

absl::string_view BreakdownSourceName(BreakdownSource source) {
  switch (source) {
    case BreakdownSource::kCapture:
      return "capture";
    case BreakdownSource::kAnalyze:
      return "analyze";
  }
  return "unknown";
}

std::string FormatMs(int64_t ns) { return JsonOut::FormatFixed(ns, 1'000'000); }

std::array<int64_t, kNumCategories> RoundCategoriesToUs(const analysis::CategoryTimes& t,
                                                        int64_t total_ns) {
  constexpr int64_t kUs = 1000;
  // Rounded as FormatMs rounds: to the nearest us, halves away from zero.
  const auto nearest = [](int64_t ns) { return (ns + kUs / 2) / kUs * kUs; };
  std::array<int64_t, kNumCategories> out{};
  int64_t sum = 0;
  bool exact = total_ns >= 0;
  for (int c = 0; c < kNumCategories; ++c) {
    exact = exact && t.ns[c] >= 0;
    sum += t.ns[c];
  }
  if (!exact || sum != total_ns) {  // not a partition of the step: each on its own
    for (int c = 0; c < kNumCategories; ++c) out[static_cast<size_t>(c)] = nearest(t.ns[c]);
    return out;
  }
  // Largest remainder: every category rounded down, then the us still missing to the rounded
  // total go to the largest remainders (ties: category order).
  int64_t floored = 0;
  std::array<int, kNumCategories> order{};
  for (int c = 0; c < kNumCategories; ++c) {
    out[static_cast<size_t>(c)] = t.ns[c] / kUs * kUs;
    floored += out[static_cast<size_t>(c)];
    order[static_cast<size_t>(c)] = c;
  }
  std::stable_sort(order.begin(), order.end(),
                   [&](int a, int b) { return t.ns[a] % kUs > t.ns[b] % kUs; });
  int64_t missing = (nearest(total_ns) - floored) / kUs;  // 0..kNumCategories
  for (size_t i = 0; i < order.size() && missing > 0; ++i, --missing) {
    out[static_cast<size_t>(order[i])] += kUs;
  }
  return out;
}

namespace {

// The pod across steps: its step time, and per category the pod view (the straggler's
// categories each step, else the slowest host's).
void WriteWhatIfJson(JsonOut& j, const PodBreakdown::WhatIf& w) {
  j.BeginObject();
  j.Key("steps");
  j.Int(w.steps);
  j.Key("straggler_cost_ms_per_step");
  j.Ms(PerStep(w.straggler_cost_ns, w.steps));
  j.Key("straggler_cost_pct");
  j.Double(PctOf(w.straggler_cost_ns, w.pod_time_ns), 1);
  j.Key("median_pace_cost_ms_per_step");
  j.Ms(PerStep(w.median_pace_cost_ns, w.steps));
  j.Key("median_pace_cost_pct");
  j.Double(PctOf(w.median_pace_cost_ns, w.pod_time_ns), 1);
  j.EndObject();
}

void WritePodJson(JsonOut& j, const PodBreakdown& b) {
  j.BeginObject();
  j.Key("steps");
  j.Int(static_cast<int64_t>(b.steps.size()));
  j.Key("hosts");
  j.Int(static_cast<int64_t>(b.hosts.size()));
  j.Key("step_time");
  StatsMs(j, b.pod_step_time);
  j.Key("noise_ms");
  j.Ms(b.noise_ns);
  j.Key("noise_floor_ms");
  j.Ms(b.noise_floor_ns);
  j.Key("what_if");
  WriteWhatIfJson(j, b.what_if);
  j.Key("categories");
  std::array<std::vector<int64_t>, kNumCategories> per_cat;
  for (const PodStep& s : b.steps) {
    const PodHostStep* view = PodView(s);
    if (view == nullptr) continue;
    for (int c = 0; c < kNumCategories; ++c) per_cat[c].push_back(view->categories.ns[c]);
  }
  j.BeginObject();
  for (int c = 0; c < kNumCategories; ++c) {
    j.Key(CategoryName(CategoryAt(c)));
    StatsMs(j, StatsOf(std::move(per_cat[c])));
  }
  j.EndObject();
  j.EndObject();
}

void WriteHostJson(JsonOut& j, const HostReport& h, const BreakdownContext& ctx) {
  j.BeginObject();
  j.Key("host");
  j.String(h.host);
  j.Key("steps");
  j.Int(h.steps);
  j.Key("partial_steps");
  j.Int(h.partial_steps);
  j.Key("has_markers");
  j.Bool(h.has_markers);
  j.Key("step_time");
  StatsMs(j, h.step_time);
  j.Key("categories");
  j.BeginObject();
  for (int c = 0; c < kNumCategories; ++c) {
    j.Key(CategoryName(CategoryAt(c)));
    StatsMs(j, h.categories[c]);
  }
  j.EndObject();
  j.Key("straggler_steps");
  j.Int(h.straggler_steps);
  j.Key("warnings");
  Strings(j, h.warnings);
  j.Key("files");
  Strings(j, FilesOf(ctx, h.host));
  j.EndObject();
}

void WriteStepJson(JsonOut& j, const PodStep& s) {
  j.BeginObject();
  j.Key("step");
  j.Int(s.step);
  j.Key("pod_step_time_ms");
  j.Ms(s.pod_step_time_ns);
  j.Key("spread_ms");
  j.Ms(s.spread_ns);
  j.Key("straggler");
  j.StringOrNull(s.straggler);
  j.Key("straggler_excess_ms");
  j.Ms(s.straggler_excess_ns);
  j.Key("straggler_cost_ms");
  j.Ms(s.straggler_cost_ns);
  j.Key("median_pace_cost_ms");
  j.Ms(s.median_pace_cost_ns);
  j.Key("bottleneck");
  j.String(CategoryName(s.bottleneck));
  j.Key("cause");
  if (HasCause(s)) {
    j.String(CategoryName(s.cause));
  } else {
    j.Null();
  }
  j.Key("cause_excess_ms");
  j.Ms(HasCause(s) ? s.cause_excess_ns : 0);
  j.Key("why");
  j.String(s.why);
  j.Key("hosts");
  j.BeginArray();
  for (const PodHostStep& h : s.hosts) {
    j.BeginObject();
    j.Key("host");
    j.String(h.host);
    j.Key("step_time_ms");
    j.Ms(h.step_time_ns);
    j.Key("categories_ms");
    WriteCategoriesMs(j, h.categories, h.step_time_ns);
    j.EndObject();
  }
  j.EndArray();
  j.EndObject();
}

}  // namespace

std::string BreakdownJson(const PodBreakdown& b, const BreakdownContext& ctx) {
  const Headline headline = MakeHeadline(b);
  // Top-level keys, steps and hosts on their own lines; a step's hosts one per line.
  JsonOut j(/*pretty_depth=*/4);
  j.BeginObject();
  j.Key("schema_version");
  j.Int(PodBreakdown::kSchemaVersion);
  j.Key("producer");
  j.String(absl::StrCat("profctl ", kVersion));
  j.Key("session");
  j.String(ctx.session);
  j.Key("source");
  j.String(BreakdownSourceName(ctx.source));
  j.Key("categories");
  j.BeginArray();
  for (int c = 0; c < kNumCategories; ++c) j.String(CategoryName(CategoryAt(c)));
  j.EndArray();
  j.Key("pod");
  WritePodJson(j, b);
  j.Key("summary");
  WriteSummary(j, headline);
  j.Key("hosts");
  j.BeginArray();
  for (const HostReport& h : b.hosts) WriteHostJson(j, h, ctx);
  j.EndArray();
  j.Key("steps");
  j.BeginArray();
  for (const PodStep& s : b.steps) WriteStepJson(j, s);
  j.EndArray();
  j.Key("straggler_changes");
  j.BeginArray();
  for (const int64_t step : b.straggler_changes) j.Int(step);
  j.EndArray();
  j.Key("consistently_slow");
  Strings(j, b.consistently_slow);
  j.Key("warnings");
  Strings(j, b.warnings);
  j.Key("files");
  Strings(j, ctx.session_files);
  j.EndObject();
  return j.Take();
}

namespace {}  // namespace

std::string BreakdownCsv(const PodBreakdown& b) {
  std::string out = "step,host,step_time_ms";
  for (int c = 0; c < kNumCategories; ++c) {
    absl::StrAppend(&out, ",", CategoryName(CategoryAt(c)), "_ms");
  }
  out.append(",straggler,pod_step_time_ms,straggler_cost_ms\n");
  for (const PodStep& s : b.steps) {
    for (const PodHostStep& h : s.hosts) {
      absl::StrAppend(&out, s.step, ",");
      AppendCsvField(&out, h.host);
      absl::StrAppend(&out, ",", FormatMs(h.step_time_ns));
      for (const int64_t ns : RoundCategoriesToUs(h.categories, h.step_time_ns)) {
        absl::StrAppend(&out, ",", FormatMs(ns));
      }
      const bool straggler = !s.straggler.empty() && h.host == s.straggler;
      absl::StrAppend(&out, straggler ? ",true," : ",false,", FormatMs(s.pod_step_time_ns), ",",
                      FormatMs(s.straggler_cost_ns), "\n");
    }
  }
  return out;
}

std::string FormatBreakdownTable(const PodBreakdown& b, const BreakdownContext& ctx,
                                 const TableOptions& opt) {
  std::string out = "pod step breakdown";
  if (!ctx.session.empty()) absl::StrAppend(&out, " of ", Printable(ctx.session));
  int64_t partial = 0;
  for (const HostReport& h : b.hosts) partial += h.partial_steps;
  absl::StrAppendFormat(&out, ": %d hosts, %d steps", b.hosts.size(), b.steps.size());
  if (partial > 0) absl::StrAppendFormat(&out, " (%d partial steps dropped)", partial);
  if (!b.steps.empty()) {
    absl::StrAppendFormat(&out, "; pod step %s ms mean, %s ms p90",
                          FormatMs(RoundNs(b.pod_step_time.mean_ns)),
                          FormatMs(b.pod_step_time.p90_ns));
  }
  absl::StrAppend(&out, "\n");

  Columns cols;
  for (const HostReport& h : b.hosts) {
    cols.host_width =
        std::max(cols.host_width, static_cast<int>(ShortHost(h.host, opt.max_host_width).size()));
  }
  for (int c = 0; c < kNumCategories; ++c) {
    cols.cat_width[c] = std::max(8, static_cast<int>(CategoryName(CategoryAt(c)).size()));
  }
  if (!b.hosts.empty()) {
    absl::StrAppend(&out, "per host (ms, mean over steps):\n");
    AppendHostSection(&out, b, cols, opt);
  }
  AppendStepSection(&out, b, cols, opt);
  AppendAnswer(&out, b, MakeHeadline(b), opt);
  if (!ctx.report_path.empty()) absl::StrAppend(&out, "report: ", Printable(ctx.report_path), "\n");
  return out;
}

absl::Span<const BreakdownOutput> BreakdownOutputs() {
  static constexpr BreakdownOutput kOutputs[] = {
      {kBreakdownJsonFile, &BreakdownJson},
      {kBreakdownCsvFile,
       [](const PodBreakdown& b, const BreakdownContext&) { return BreakdownCsv(b); }},
      {kReportHtmlFile, &HtmlReport},
  };
  return kOutputs;
}

}  // namespace profctl::report
