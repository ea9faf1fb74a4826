// FormatBreakdownTable (breakdown_writers.h): the terminal table of a pod step breakdown.
#include <algorithm>
#include <array>
#include <cstdint>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "report/breakdown_headline.h"
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
using breakdown_internal::Headline;
using breakdown_internal::InputHeadline;
using breakdown_internal::MakeHeadline;
using breakdown_internal::PctOf;
using breakdown_internal::PerStep;
using breakdown_internal::RoundNs;
using breakdown_internal::StragglerHeadline;

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
  if (!b.hang.has_value() || b.hang->verdict == analysis::HangVerdictKind::kNone) return;
  const analysis::HangReport& h = *b.hang;
  absl::StrAppend(out, "hang: ", Printable(h.summary), "\n");
  // "Cannot tell" is its sentence alone: no rank is judged.
  if (h.verdict == analysis::HangVerdictKind::kCannotTell) return;
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

  AppendHang(out, b, opt);

  // Every host that stands out, the straggler or not.
  if (!b.outliers.empty()) {
    absl::StrAppend(out, "stands out (beyond the noise in at least half of its steps):\n");
    constexpr size_t kMaxOutliers = 8;
    for (size_t i = 0; i < b.outliers.size() && i < kMaxOutliers; ++i) {
      const PodBreakdown::HostOutlier& o = b.outliers[i];
      absl::StrAppendFormat(out,
                            "  %s %s +%s ms per step over the other hosts' median (%d of %d "
                            "steps)\n",
                            ShortHost(o.host, opt.max_host_width), CategoryName(o.category),
                            FormatMs(o.median_excess_ns), o.steps_beyond, o.steps);
    }
    if (b.outliers.size() > kMaxOutliers) {
      absl::StrAppend(out, "  ... ", b.outliers.size() - kMaxOutliers, " more in ",
                      kBreakdownJsonFile, "\n");
    }
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

}  // namespace profctl::report
