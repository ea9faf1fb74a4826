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
#include "report/breakdown_format.h"
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

using breakdown_internal::CategoryAt;
using breakdown_internal::HasCause;
using breakdown_internal::PctOf;
using breakdown_internal::PerStep;
using breakdown_internal::RoundNs;

namespace {

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

// "summary": the verdicts' answer in the shape of schema 3 (docs/breakdown-schema.md).
void WriteSummary(JsonOut& j, const analysis::PodVerdict& v) {
  j.BeginObject();
  j.Key("straggler");
  const analysis::StragglerVerdict& s = v.straggler;
  if (s.finding != analysis::Finding::kFound) {
    j.Null();
  } else {
    j.BeginObject();
    j.Key("host");
    j.String(s.host);
    j.Key("steps");
    j.Int(s.steps);
    j.Key("of_steps");
    j.Int(s.named_steps);
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
    j.String(s.example_why);
    j.EndObject();
  }
  j.Key("input_bound");
  const analysis::InputBoundVerdict& in = v.input_bound;
  if (in.finding != analysis::Finding::kFound) {
    j.Null();
  } else {
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
  j.Ms(in.median_input_ns);
  j.Key("median_step_time_ms");
  j.Ms(in.median_step_ns);
  j.EndObject();
}

// A verdict's common keys: finding, confidence, sentence, text, limits.
void WriteJudgement(JsonOut& j, const analysis::Judgement& v) {
  j.Key("finding");
  j.String(analysis::FindingName(v.finding));
  j.Key("confidence");
  j.String(analysis::ConfidenceName(v.confidence));
  j.Key("sentence");
  j.String(v.sentence);
  j.Key("text");
  j.String(v.Text());
  j.Key("limits");
  Strings(j, v.limits);
}

void WriteOutliersJson(JsonOut& j, const std::vector<analysis::HostOutlier>& outliers) {
  j.BeginArray();
  for (const analysis::HostOutlier& o : outliers) {
    j.BeginObject();
    j.Key("host");
    j.String(o.host);
    j.Key("category");
    j.String(CategoryName(o.category));
    j.Key("steps");
    j.Int(o.steps);
    j.Key("steps_beyond_noise");
    j.Int(o.steps_beyond);
    j.Key("median_excess_ms");
    j.Ms(o.median_excess_ns);
    j.EndObject();
  }
  j.EndArray();
}

void Steps(JsonOut& j, const std::vector<int64_t>& steps) {
  j.BeginArray();
  for (const int64_t step : steps) j.Int(step);
  j.EndArray();
}

// "evidence": what every verdict was judged on, and how far it can be trusted.
void WriteEvidenceJson(JsonOut& j, const analysis::VerdictEvidence& e) {
  j.BeginObject();
  j.Key("hosts");
  j.Int(e.hosts);
  j.Key("world_size");
  if (e.world_size > 0) {
    j.Int(e.world_size);
  } else {
    j.Null();
  }
  j.Key("steps");
  j.Int(e.steps);
  j.Key("judged_steps");
  j.Int(e.judged_steps);
  j.Key("warmup_steps");
  Steps(j, e.warmup_steps);
  j.Key("doubtful_steps");
  j.Int(e.doubtful_steps);
  j.Key("different_runs");
  j.Bool(e.different_runs);
  j.Key("different_runs_reason");
  j.String(e.different_runs_reason);
  j.Key("noise_tail_dof");
  j.Double(e.noise_tail_dof, 1);
  j.Key("confidence");
  j.String(analysis::ConfidenceName(e.ceiling));
  j.Key("limits");
  Strings(j, e.limits);
  j.EndObject();
}

// "straggler": who holds the pod back, in how many steps, and why.
void WriteStragglerJson(JsonOut& j, const analysis::StragglerVerdict& s) {
  j.BeginObject();
  WriteJudgement(j, s);
  j.Key("host");
  j.StringOrNull(s.host);
  j.Key("steps");
  j.Int(s.steps);
  j.Key("named_steps");
  j.Int(s.named_steps);
  j.Key("judged_steps");
  j.Int(s.judged_steps);
  j.Key("cause");
  if (s.cause.has_value()) {
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
  j.String(s.example_why);
  j.Key("changes");
  Steps(j, s.changes);
  j.EndObject();
}

// "slow_device": a GPU slower than its host's and the pod's floors.
void WriteSlowDeviceJson(JsonOut& j, const analysis::SlowDeviceVerdict& d) {
  j.BeginObject();
  WriteJudgement(j, d);
  j.Key("host");
  j.StringOrNull(d.host);
  j.Key("device");
  if (d.device >= 0) {
    j.Int(d.device);
  } else {
    j.Null();
  }
  j.Key("steps");
  j.Int(d.steps);
  j.Key("of_steps");
  j.Int(d.of_steps);
  j.Key("median_excess_ms");
  j.Ms(d.median_excess_ns);
  j.EndObject();
}

// "consistently_slow": hosts slow across the capture, and what the test could detect.
void WriteConsistentlySlowJson(JsonOut& j, const analysis::ConsistentlySlowVerdict& c) {
  j.BeginObject();
  WriteJudgement(j, c);
  j.Key("hosts");
  j.BeginArray();
  for (const analysis::SlowHost& h : c.hosts) {
    j.BeginObject();
    j.Key("host");
    j.String(h.host);
    j.Key("steps");
    j.Int(h.steps);
    j.Key("last_ready_steps");
    j.Int(h.last_ready_steps);
    j.Key("named_steps");
    j.Int(h.named_steps);
    j.Key("median_excess_ms");
    j.Ms(h.median_excess_ns);
    j.Key("slowdown_pct");
    j.Double(h.slowdown_pct, 2);
    j.Key("p_value");
    j.Double(h.p_value, 8);
    j.EndObject();
  }
  j.EndArray();
  j.Key("detectable_excess_ms");
  j.Ms(c.detectable_excess_ns);
  j.Key("detectable_pct");
  j.Double(c.detectable_pct, 2);
  j.EndObject();
}

// "input_bound": a host that waits for its input more than the others.
void WriteInputBoundJson(JsonOut& j, const analysis::InputBoundVerdict& in) {
  j.BeginObject();
  WriteJudgement(j, in);
  j.Key("host");
  j.StringOrNull(in.host);
  j.Key("input_ms");
  j.Ms(in.input_ns);
  j.Key("median_input_ms");
  j.Ms(in.median_input_ns);
  j.Key("excess_ms");
  j.Ms(in.excess_ns);
  j.Key("step_time_ms");
  j.Ms(in.step_time_ns);
  j.Key("median_step_time_ms");
  j.Ms(in.median_step_ns);
  j.EndObject();
}

// "what_if": what the stragglers cost per step, and what the median pace would save.
// The what-if's numbers (inside "what_if", with or without the judgement).
void WriteWhatIfFields(JsonOut& j, const analysis::WhatIfVerdict& w) {
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
}

void WriteWhatIfVerdictJson(JsonOut& j, const analysis::WhatIfVerdict& w) {
  j.BeginObject();
  WriteJudgement(j, w);
  WriteWhatIfFields(j, w);
  j.EndObject();
}

// "bottleneck": the category that bounds the pod step, and every category's share.
void WriteBottleneckJson(JsonOut& j, const analysis::BottleneckVerdict& b) {
  j.BeginObject();
  WriteJudgement(j, b);
  j.Key("category");
  if (b.finding == analysis::Finding::kFound) {
    j.String(CategoryName(b.category));
  } else {
    j.Null();
  }
  j.Key("share_pct");
  j.BeginObject();
  for (int c = 0; c < kNumCategories; ++c) {
    j.Key(CategoryName(CategoryAt(c)));
    j.Double(b.share_pct[static_cast<size_t>(c)], 1);
  }
  j.EndObject();
  j.EndObject();
}

// "verdict": every verdict with its evidence and confidence (docs/breakdown-schema.md).
void WriteVerdictJson(JsonOut& j, const analysis::PodVerdict& v) {
  j.BeginObject();
  j.Key("evidence");
  WriteEvidenceJson(j, v.evidence);

  j.Key("straggler");
  WriteStragglerJson(j, v.straggler);

  j.Key("slow_device");
  WriteSlowDeviceJson(j, v.slow_device);

  j.Key("consistently_slow");
  WriteConsistentlySlowJson(j, v.consistently_slow);

  j.Key("stands_out");
  j.BeginObject();
  WriteJudgement(j, v.stands_out);
  j.Key("hosts");
  WriteOutliersJson(j, v.stands_out.hosts);
  j.EndObject();

  j.Key("input_bound");
  WriteInputBoundJson(j, v.input_bound);

  j.Key("what_if");
  WriteWhatIfVerdictJson(j, v.what_if);

  j.Key("bottleneck");
  WriteBottleneckJson(j, v.bottleneck);

  j.Key("hang");
  j.BeginObject();
  WriteJudgement(j, v.hang);
  j.EndObject();
  j.EndObject();
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

void WriteWhatIfJson(JsonOut& j, const analysis::WhatIfVerdict& w) {
  j.BeginObject();
  WriteWhatIfFields(j, w);
  j.EndObject();
}

// The pod across its judged steps: its step time, and per category the pod view (the
// straggler's categories each step, else the slowest host's).
void WritePodJson(JsonOut& j, const PodBreakdown& b) {
  j.BeginObject();
  j.Key("steps");
  j.Int(static_cast<int64_t>(b.steps.size()));
  j.Key("steps_on_every_host");
  j.Int(b.steps_on_every_host);
  j.Key("hosts");
  j.Int(static_cast<int64_t>(b.hosts.size()));
  j.Key("step_time");
  StatsMs(j, b.pod_step_time);
  j.Key("noise_ms");
  j.Ms(b.noise_ns);
  j.Key("noise_floor_ms");
  j.Ms(b.noise_floor_ns);
  j.Key("category_noise_floor_ms");
  j.BeginObject();
  for (const Category c : analysis::kOutlierCategories) {
    j.Key(CategoryName(c));
    j.Ms(b.category_noise_floor_ns[static_cast<size_t>(c)]);
  }
  j.EndObject();
  j.Key("device_noise_floor_ms");
  j.Ms(b.device_noise_floor_ns);
  j.Key("what_if");
  WriteWhatIfJson(j, b.verdict.what_if);
  j.Key("categories");
  j.BeginObject();
  for (int c = 0; c < kNumCategories; ++c) {
    j.Key(CategoryName(CategoryAt(c)));
    StatsMs(j, b.pod_categories[static_cast<size_t>(c)]);
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
  j.Key("partial");
  j.BeginArray();
  for (const analysis::HostStep& p : h.partial) {
    j.BeginObject();
    j.Key("step");
    j.Int(p.step);
    j.Key("recorded_ms");
    j.Ms(p.end_ns - p.start_ns);
    j.Key("categories_ms");
    WriteCategoriesMs(j, p.host, p.end_ns - p.start_ns);
    j.EndObject();
  }
  j.EndArray();
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
  j.Key("on_every_host");
  j.Bool(s.on_every_host);
  j.Key("warmup");
  j.Bool(s.warmup);
  j.Key("judged");
  j.Bool(s.judged);
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
  j.Key("straggler_device");
  if (s.straggler_device < 0) {
    j.Null();
  } else {
    j.BeginObject();
    j.Key("device");
    j.Int(s.straggler_device);
    j.Key("excess_ms");
    j.Ms(s.straggler_device_excess_ns);
    j.EndObject();
  }
  j.Key("why");
  j.String(s.why);
  j.Key("outliers");
  j.BeginArray();
  for (const analysis::StepOutlier& o : s.outliers) {
    j.BeginObject();
    j.Key("host");
    j.String(o.host);
    j.Key("category");
    j.String(CategoryName(o.category));
    j.Key("excess_ms");
    j.Ms(o.excess_ns);
    j.EndObject();
  }
  j.EndArray();
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
    if (!h.devices.empty()) {  // kept where they differ (breakdown.h, PodHostStep::devices)
      j.Key("devices");
      j.BeginArray();
      for (const auto& [id, c] : h.devices) {
        j.BeginObject();
        j.Key("device");
        j.Int(id);
        j.Key("categories_ms");
        WriteCategoriesMs(j, c, h.step_time_ns);
        j.EndObject();
      }
      j.EndArray();
    }
    j.EndObject();
  }
  j.EndArray();
  j.EndObject();
}

// The collective's identity: {"step", "kind", "index", "name"} (step -1: no step markers).
void WriteCollectiveId(JsonOut& j, const analysis::CollectiveId& id) {
  j.Key("step");
  j.Int(id.step);
  j.Key("kind");
  j.String(analysis::CollectiveKindName(id.kind));
  j.Key("index");
  j.Int(id.index);
  j.Key("name");
  j.String(analysis::FormatCollectiveId(id));
}

void WriteCollectiveAt(JsonOut& j, const std::optional<analysis::CollectiveAt>& c) {
  if (!c.has_value()) {
    j.Null();
    return;
  }
  j.BeginObject();
  WriteCollectiveId(j, c->id);
  j.Key("time_ns");
  j.Int(c->time_ns);
  j.Key("time_utc");
  j.String(analysis::FormatUtcIso(c->time_ns));
  j.EndObject();
}

void WriteRanksOfRole(JsonOut& j, const analysis::HangReport& h, analysis::HangRank::Role role) {
  j.BeginArray();
  for (const analysis::HangRank& r : h.ranks) {
    if (r.role != role) continue;
    j.BeginObject();
    j.Key("host");
    j.String(r.host);
    j.Key("rank");
    j.Int(r.rank);
    j.EndObject();
  }
  j.EndArray();
}

// "hang": the hang verdict (docs/breakdown-schema.md).
void WriteHangJson(JsonOut& j, const analysis::HangReport& h) {
  const bool verdict = h.verdict == analysis::HangVerdictKind::kHung ||
                       h.verdict == analysis::HangVerdictKind::kAllWaiting;
  constexpr int64_t kNoTime = std::numeric_limits<int64_t>::min();
  j.BeginObject();
  j.Key("verdict");
  j.String(analysis::HangVerdictKindName(h.verdict));
  j.Key("missing");
  j.StringOrNull(analysis::HangMissingName(h.missing));
  j.Key("summary");
  j.String(h.summary);
  const analysis::HangEvidence& ev = h.evidence;
  j.Key("evidence");
  j.BeginObject();
  j.Key("text");
  j.String(analysis::FormatHangEvidence(h));
  j.Key("pace");
  j.String(analysis::HangPaceName(ev.pace));
  j.Key("median_step_ms");
  if (ev.median_step_ns > 0) {
    j.Ms(ev.median_step_ns);
  } else {
    j.Null();
  }
  j.Key("waited_ms");
  if (ev.waited_ns > 0) {
    j.Ms(ev.waited_ns);
  } else {
    j.Null();
  }
  j.Key("needed_ms");
  if (ev.needed_ns > 0) {
    j.Ms(ev.needed_ns);
  } else {
    j.Null();
  }
  j.Key("step_signal_ranks");
  j.Int(ev.signal_hosts);
  j.Key("stalled");
  j.Bool(ev.stalled);
  j.Key("last_step_end_utc");
  if (ev.last_step_end_ns != kNoTime) {
    j.String(analysis::FormatUtcIso(ev.last_step_end_ns));
  } else {
    j.Null();
  }
  j.EndObject();
  j.Key("hung_ranks");
  WriteRanksOfRole(j, h, analysis::HangRank::Role::kNeverEntered);
  j.Key("unknown_ranks");
  WriteRanksOfRole(j, h, analysis::HangRank::Role::kUnknown);
  j.Key("waiting_ranks");
  j.Int(h.waiting_ranks);
  j.Key("waiting_since_ns");
  if (verdict) {
    j.Int(h.waiting_since_ns);
  } else {
    j.Null();
  }
  j.Key("waiting_since_utc");
  if (verdict) {
    j.String(analysis::FormatUtcIso(h.waiting_since_ns));
  } else {
    j.Null();
  }
  j.Key("collective");
  if (verdict) {
    j.BeginObject();
    WriteCollectiveId(j, h.collective);
    j.EndObject();
  } else {
    j.Null();
  }
  j.Key("ranks");
  j.BeginArray();
  for (const analysis::HangRank& r : h.ranks) {
    j.BeginObject();
    j.Key("host");
    j.String(r.host);
    j.Key("rank");
    j.Int(r.rank);
    j.Key("role");
    j.String(analysis::HangRoleName(r.role));
    j.Key("has_trace");
    j.Bool(r.has_trace);
    j.Key("last_entered");
    WriteCollectiveAt(j, r.last_entered);
    j.Key("last_completed");
    WriteCollectiveAt(j, r.last_completed);
    j.Key("stalled");
    j.Bool(r.stalled);
    j.Key("signal_last_step_end_utc");
    if (r.signal_last_step_end_ns.has_value()) {
      j.String(analysis::FormatUtcIso(*r.signal_last_step_end_ns));
    } else {
      j.Null();
    }
    j.EndObject();
  }
  j.EndArray();
  j.EndObject();
}

}  // namespace

std::string BreakdownJson(const PodBreakdown& b, const BreakdownContext& ctx) {
  std::vector<size_t> all(b.steps.size());
  for (size_t i = 0; i < all.size(); ++i) all[i] = i;
  return BreakdownJsonOfSteps(b, ctx, all);
}

std::string BreakdownJsonOfSteps(const PodBreakdown& b, const BreakdownContext& ctx,
                                 absl::Span<const size_t> step_indices) {
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
  j.Key("verdict");
  WriteVerdictJson(j, b.verdict);
  j.Key("summary");
  WriteSummary(j, b.verdict);
  j.Key("hosts");
  j.BeginArray();
  for (const HostReport& h : b.hosts) WriteHostJson(j, h, ctx);
  j.EndArray();
  j.Key("steps");
  j.BeginArray();
  for (const size_t i : step_indices) {
    WriteStepJson(j, b.steps[i]);
  }
  j.EndArray();
  j.Key("straggler_changes");
  Steps(j, b.verdict.straggler.changes);
  j.Key("consistently_slow");
  Strings(j, b.verdict.consistently_slow.HostNames());
  j.Key("outliers");
  WriteOutliersJson(j, b.verdict.stands_out.hosts);
  if (b.verdict.hang.report.has_value()) {
    j.Key("hang");
    WriteHangJson(j, *b.verdict.hang.report);
  }
  j.Key("warnings");
  Strings(j, b.warnings);
  j.Key("files");
  Strings(j, ctx.session_files);
  if (ctx.source == BreakdownSource::kAnalyze) WriteFailedFiles(j, ctx.failed_files);
  j.EndObject();
  return j.Take();
}

std::string BreakdownCsv(const PodBreakdown& b) {
  std::string out = "step,host,step_time_ms";
  for (int c = 0; c < kNumCategories; ++c) {
    absl::StrAppend(&out, ",", CategoryName(CategoryAt(c)), "_ms");
  }
  out.append(",straggler,pod_step_time_ms,straggler_cost_ms,stands_out,device_busy_ms\n");
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
                      FormatMs(s.straggler_cost_ns), ",");
      // This host's outliers, e.g. "input+4.000 compute+1.250" (no separator that needs quoting).
      const char* sep = "";
      for (const analysis::StepOutlier& o : s.outliers) {
        if (o.host != h.host) continue;
        absl::StrAppend(&out, sep, CategoryName(o.category), "+", FormatMs(o.excess_ns));
        sep = " ";
      }
      // A host with several devices: each one's time outside collectives, "0:48.100 1:51.300".
      out.append(",");
      sep = "";
      for (const auto& [id, c] : h.devices) {
        absl::StrAppend(&out, sep, id, ":", FormatMs(c.outside_collectives()));
        sep = " ";
      }
      out.append("\n");
    }
  }
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
