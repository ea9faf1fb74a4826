// FormatBreakdownTable (breakdown_writers.h): the terminal table of a pod step breakdown.
#include <algorithm>
#include <array>
#include <cstdint>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "analysis/host_trace.h"
#include "report/breakdown_format.h"
#include "report/breakdown_writers.h"

namespace profctl::report {

using analysis::Category;
using analysis::CategoryName;
using analysis::HostReport;
using analysis::kNumCategories;
using analysis::PodBreakdown;
using analysis::PodHostStep;
using analysis::PodStep;
using breakdown_internal::CategoryAt;
using breakdown_internal::HasCause;
using breakdown_internal::RoundNs;

namespace {

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
        if (s.straggler_device >= 0) {
          absl::StrAppend(out, "; its device ", s.straggler_device, " +",
                          FormatMs(s.straggler_device_excess_ns), " ms over its others");
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

// The hang verdict unless there is no hang: the sentence; for a hang, where each rank stood (the
// ranks never entered first, then the unknown ones, then the waiters; at most kMaxHangRanks)
// and the evidence; "cannot tell" is its sentence alone.
void AppendHang(std::string* out, const PodBreakdown& b, const TableOptions& opt) {
  const analysis::HangJudgement& v = b.verdict.hang;
  // Not judged (loose files) or no hang: nothing to say.
  if (!v.report.has_value() || v.finding == analysis::Finding::kNone) return;
  const analysis::HangReport& h = *v.report;
  absl::StrAppend(out, "hang: ", Printable(v.sentence), "\n");
  // "Cannot tell" is its sentence alone: no rank is judged.
  if (v.finding == analysis::Finding::kCannotTell) return;
  constexpr size_t kMaxHangRanks = 8;
  const auto at = [](const std::optional<analysis::CollectiveAt>& c) {
    return c.has_value() ? absl::StrCat(analysis::FormatCollectiveId(c->id), " at ",
                                        analysis::FormatUtcTime(c->time_ns))
                         : std::string("none");
  };
  size_t shown = 0;
  for (const analysis::HangRank::Role role :
       {analysis::HangRank::Role::kNeverEntered, analysis::HangRank::Role::kUnknown,
        analysis::HangRank::Role::kWaiting}) {
    for (const analysis::HangRank& r : h.ranks) {
      if (r.role != role || shown++ >= kMaxHangRanks) continue;
      if (role == analysis::HangRank::Role::kUnknown) {
        absl::StrAppendFormat(out, "  %s (rank %d): %s\n", ShortHost(r.host, opt.max_host_width),
                              r.rank, r.has_trace ? "no collective in its trace" : "no trace");
        continue;
      }
      absl::StrAppendFormat(out, "  %s (rank %d) %s: last entered %s; last completed %s\n",
                            ShortHost(r.host, opt.max_host_width), r.rank,
                            role == analysis::HangRank::Role::kWaiting ? "waits" : "never entered",
                            at(r.last_entered), at(r.last_completed));
    }
  }
  if (shown > kMaxHangRanks) {
    absl::StrAppend(out, "  ... ", shown - kMaxHangRanks, " more ranks in ", kBreakdownJsonFile,
                    "\n");
  }
  absl::StrAppend(out, "  evidence: ", analysis::FormatHangEvidence(h), "\n");
}

// The verdicts (analysis/pod_verdict.h), each its own sentence with its confidence.
void AppendAnswer(std::string* out, const PodBreakdown& b, const TableOptions& opt) {
  const analysis::PodVerdict& v = b.verdict;
  if (!b.hosts.empty()) {
    absl::StrAppend(out, "straggler: ", Printable(v.straggler.Text()), "\n");
    if (v.straggler.finding == analysis::Finding::kFound && !v.straggler.example_why.empty()) {
      absl::StrAppend(out, "  step ", StepLabel(v.straggler.example_step), ": ",
                      Printable(v.straggler.example_why), "\n");
    }
  }
  if (v.slow_device.finding == analysis::Finding::kFound ||
      (v.slow_device.finding == analysis::Finding::kNone && v.slow_device.of_steps > 0)) {
    absl::StrAppend(out, "slow device: ", Printable(v.slow_device.Text()), "\n");
  }
  if (v.what_if.finding != analysis::Finding::kCannotTell && v.what_if.steps > 0 &&
      v.what_if.median_pace_cost_ns > 0) {
    absl::StrAppend(out, Printable(v.what_if.Text()), "\n");
  }

  AppendHang(out, b, opt);

  // Every host that stands out, the straggler or not.
  if (v.stands_out.finding == analysis::Finding::kFound) {
    absl::StrAppend(
        out, "stands out (confidence: ", analysis::ConfidenceName(v.stands_out.confidence), "):\n");
    constexpr size_t kMaxOutliers = 8;
    for (size_t i = 0; i < v.stands_out.hosts.size() && i < kMaxOutliers; ++i) {
      const analysis::HostOutlier& o = v.stands_out.hosts[i];
      absl::StrAppendFormat(out,
                            "  %s %s +%s ms per step over the other hosts' median (beyond the "
                            "noise in %d of %d steps)\n",
                            ShortHost(o.host, opt.max_host_width), CategoryName(o.category),
                            FormatMs(o.median_excess_ns), o.steps_beyond, o.steps);
    }
    if (v.stands_out.hosts.size() > kMaxOutliers) {
      absl::StrAppend(out, "  ... ", v.stands_out.hosts.size() - kMaxOutliers, " more in ",
                      kBreakdownJsonFile, "\n");
    }
  }

  // Who waits for input.
  if (!b.hosts.empty()) {
    absl::StrAppend(out, "input-bound: ", Printable(v.input_bound.Text()), "\n");
  }

  // Where the straggler changes.
  const std::vector<int64_t>& changes = v.straggler.changes;
  if (v.straggler.named_steps > 0) {
    if (changes.empty()) {
      absl::StrAppend(out, "straggler changes: none\n");
    } else {
      std::map<int64_t, size_t> index;
      for (size_t i = 0; i < b.steps.size(); ++i) index[b.steps[i].step] = i;
      constexpr size_t kMaxChanges = 8;
      absl::StrAppendFormat(out, "straggler changes at %d steps:", changes.size());
      for (size_t i = 0; i < changes.size() && i < kMaxChanges; ++i) {
        const int64_t step = changes[i];
        absl::StrAppend(out, i == 0 ? " " : ", ", StepLabel(step));
        auto it = index.find(step);
        if (it != index.end() && it->second > 0) {
          absl::StrAppend(out, " (", ShortHost(b.steps[it->second - 1].straggler, 24), " -> ",
                          ShortHost(b.steps[it->second].straggler, 24), ")");
        }
      }
      if (changes.size() > kMaxChanges) {
        absl::StrAppend(out, ", ... ", changes.size() - kMaxChanges, " more");
      }
      absl::StrAppend(out, "\n");
    }
  }
  if (v.consistently_slow.finding != analysis::Finding::kCannotTell) {
    absl::StrAppend(out, Printable(v.consistently_slow.Text()), "\n");
  }
  if (v.bottleneck.finding == analysis::Finding::kFound) {
    absl::StrAppend(out, Printable(v.bottleneck.Text()), "\n");
  }
  if (!v.evidence.warmup_steps.empty()) {
    std::vector<std::string> steps;
    for (const int64_t s : v.evidence.warmup_steps) steps.push_back(StepLabel(s));
    absl::StrAppend(out, "warm-up steps (not judged, left out of the means): ",
                    absl::StrJoin(steps, ", "), "\n");
  }

  // Warnings: first what a trace says it lost (a host's "trace error: ...", e.g. a rank whose
  // GPU tracing was held by another tool), then the pod's, then the rest of each host's, so that
  // the lines shown before the cut never hide missing data behind a late start.
  std::vector<std::string> warnings;
  const auto add_hosts = [&](bool errors) {
    for (const HostReport& hr : b.hosts) {
      for (const std::string& w : hr.warnings) {
        if (absl::StartsWith(w, analysis::kTraceErrorWarningPrefix) != errors) continue;
        warnings.push_back(
            absl::StrCat(ShortHost(hr.host, opt.max_host_width), ": ", Printable(w)));
      }
    }
  };
  add_hosts(/*errors=*/true);
  for (const std::string& w : b.warnings) warnings.push_back(Printable(w));
  add_hosts(/*errors=*/false);
  constexpr size_t kMaxWarnings = 5;
  if (!warnings.empty()) {
    if (warnings.size() > kMaxWarnings) {
      absl::StrAppendFormat(out, "warnings: %d (%d shown, what traces lost first; all in %s)\n",
                            warnings.size(), kMaxWarnings, kBreakdownJsonFile);
    } else {
      absl::StrAppendFormat(out, "warnings: %d\n", warnings.size());
    }
    for (size_t i = 0; i < warnings.size() && i < kMaxWarnings; ++i) {
      absl::StrAppend(out, "  ", warnings[i], "\n");
    }
  }
}

}  // namespace

std::string FormatBreakdownTable(const PodBreakdown& b, const BreakdownContext& ctx,
                                 const TableOptions& opt) {
  std::string out = "pod step breakdown";
  if (!ctx.session.empty()) absl::StrAppend(&out, " of ", Printable(ctx.session));
  int64_t partial = 0;
  for (const HostReport& h : b.hosts) partial += h.partial_steps;
  absl::StrAppendFormat(&out, ": %d hosts, %d steps", b.hosts.size(), b.steps.size());
  if (partial > 0) {
    absl::StrAppendFormat(&out, " (and %d partial steps cut by the window, not compared)", partial);
  }
  if (b.steps_on_every_host > 0 && b.steps_on_every_host < static_cast<int64_t>(b.steps.size())) {
    absl::StrAppendFormat(&out, "; %d steps on every host", b.steps_on_every_host);
  }
  if (b.verdict.evidence.different_runs) {
    absl::StrAppend(&out, "; not one run: no pod step time (each host's line is its own)");
  } else if (!b.steps.empty()) {
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
  AppendAnswer(&out, b, opt);
  if (!ctx.report_path.empty()) absl::StrAppend(&out, "report: ", Printable(ctx.report_path), "\n");
  return out;
}

}  // namespace profctl::report
