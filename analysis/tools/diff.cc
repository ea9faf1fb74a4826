#include "analysis/tools/diff.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"

namespace profctl::analysis {

namespace {

int64_t RoundNs(double ns) { return std::llround(ns); }

// Per host: how many steps it was named straggler in, per cause.
using CauseCounts = absl::flat_hash_map<std::string, std::array<int64_t, kNumCategories>>;

CauseCounts CountCauses(const PodBreakdown& b) {
  CauseCounts counts;
  for (const PodStep& s : b.steps) {
    if (s.straggler.empty()) continue;
    counts[s.straggler][static_cast<size_t>(s.cause)]++;
  }
  return counts;
}

// The most frequent cause (the first category on ties); kIdle when never named.
Category TopCause(const CauseCounts& counts, const std::string& host) {
  const auto it = counts.find(host);
  if (it == counts.end()) return Category::kIdle;
  size_t best = static_cast<size_t>(Category::kIdle);
  int64_t best_n = 0;
  for (size_t c = 0; c < it->second.size(); ++c) {
    if (it->second[c] > best_n) {
      best = c;
      best_n = it->second[c];
    }
  }
  return static_cast<Category>(best);
}

StragglerSummary Straggler(const PodBreakdown& b, const CauseCounts& counts) {
  StragglerSummary s;
  for (const HostReport& h : b.hosts) {  // host order breaks ties
    if (h.straggler_steps > s.steps) {
      s.host = h.host;
      s.steps = h.straggler_steps;
    }
  }
  if (!s.host.empty()) s.cause = TopCause(counts, s.host);
  return s;
}

void FillSide(const HostReport& h, const CauseCounts& counts, bool side_b, HostDiff* d) {
  auto set = [side_b](Change& c, int64_t v) { (side_b ? c.b : c.a) = v; };
  set(d->steps, h.steps);
  set(d->step_time_ns, RoundNs(h.step_time.mean_ns));
  for (size_t c = 0; c < kNumCategories; ++c) {
    set(d->categories[c], RoundNs(h.categories[c].mean_ns));
  }
  set(d->straggler_steps, h.straggler_steps);
  (side_b ? d->cause_b : d->cause_a) = TopCause(counts, h.host);
  (side_b ? d->in_b : d->in_a) = true;
}

struct NameTotals {
  int64_t total_ns = 0;
  int64_t occurrences = 0;
};

// Time per step: the total over the side's pod steps (the total itself with no steps).
int64_t PerStep(int64_t total_ns, int64_t steps) {
  return steps > 0 ? RoundNs(static_cast<double>(total_ns) / static_cast<double>(steps)) : total_ns;
}

std::vector<NameDiff> TopChanges(const std::map<std::string, NameTotals>& a,
                                 const std::map<std::string, NameTotals>& b, int64_t steps_a,
                                 int64_t steps_b, size_t top_n) {
  std::map<std::string, NameDiff> all;
  for (const auto& [name, t] : a) {
    NameDiff& d = all[name];
    d.total_ns.a = t.total_ns;
    d.occurrences.a = t.occurrences;
  }
  for (const auto& [name, t] : b) {
    NameDiff& d = all[name];
    d.total_ns.b = t.total_ns;
    d.occurrences.b = t.occurrences;
  }
  std::vector<NameDiff> out;
  for (auto& [name, d] : all) {
    d.name = name;
    d.ns_per_step = {PerStep(d.total_ns.a, steps_a), PerStep(d.total_ns.b, steps_b)};
    if (d.ns_per_step.delta() != 0) out.push_back(std::move(d));
  }
  std::sort(out.begin(), out.end(), [](const NameDiff& x, const NameDiff& y) {
    const int64_t dx = std::llabs(x.ns_per_step.delta());
    const int64_t dy = std::llabs(y.ns_per_step.delta());
    if (dx != dy) return dx > dy;
    return x.name < y.name;
  });
  if (out.size() > top_n) out.resize(top_n);
  return out;
}

std::map<std::string, NameTotals> KernelTotals(absl::Span<const KernelStat> kernels) {
  std::map<std::string, NameTotals> m;
  for (const KernelStat& k : kernels) {
    NameTotals& t = m[k.kernel];
    t.total_ns += k.total_ns;
    t.occurrences += k.occurrences;
  }
  return m;
}

// Ops by their device self time when they launched kernels, else their host self time.
std::map<std::string, NameTotals> OpTotals(absl::Span<const OpStat> ops) {
  std::map<std::string, NameTotals> m;
  for (const OpStat& o : ops) {
    NameTotals& t = m[o.name];
    t.total_ns += o.device_self_ns > 0 ? o.device_self_ns : o.host_self_ns;
    t.occurrences += o.occurrences;
  }
  return m;
}

}  // namespace

double Change::pct() const {
  if (a == 0) return std::numeric_limits<double>::quiet_NaN();
  return 100.0 * static_cast<double>(b - a) / static_cast<double>(a);
}

Diff ComputeDiff(const DiffInput& a, const DiffInput& b, const DiffOptions& options) {
  const PodBreakdown& pa = *a.breakdown;
  const PodBreakdown& pb = *b.breakdown;
  Diff d;
  d.pod_steps = {static_cast<int64_t>(pa.steps.size()), static_cast<int64_t>(pb.steps.size())};
  d.pod_step_time_ns = {RoundNs(pa.pod_step_time.mean_ns), RoundNs(pb.pod_step_time.mean_ns)};
  const CauseCounts causes_a = CountCauses(pa);
  const CauseCounts causes_b = CountCauses(pb);
  d.straggler_a = Straggler(pa, causes_a);
  d.straggler_b = Straggler(pb, causes_b);
  d.straggler_changed = d.straggler_a.host != d.straggler_b.host;
  d.cause_changed = !d.straggler_changed && !d.straggler_a.host.empty() &&
                    d.straggler_a.cause != d.straggler_b.cause;
  d.consistently_slow_a = pa.consistently_slow;
  d.consistently_slow_b = pb.consistently_slow;

  for (const PodBreakdown::HostOutlier& o : pa.outliers) {
    OutlierDiff& od = d.outliers.emplace_back();
    od.host = o.host;
    od.category = o.category;
    od.in_a = true;
    od.median_excess_ns.a = o.median_excess_ns;
  }
  for (const PodBreakdown::HostOutlier& o : pb.outliers) {
    auto it = std::find_if(d.outliers.begin(), d.outliers.end(), [&](const OutlierDiff& od) {
      return od.host == o.host && od.category == o.category;
    });
    if (it == d.outliers.end()) {
      it = d.outliers.emplace(d.outliers.end());
      it->host = o.host;
      it->category = o.category;
    }
    it->in_b = true;
    it->median_excess_ns.b = o.median_excess_ns;
  }

  absl::flat_hash_map<std::string, size_t> index;
  for (const HostReport& h : pa.hosts) {
    const auto [it, inserted] = index.emplace(h.host, d.hosts.size());
    if (inserted) d.hosts.emplace_back().host = h.host;
    FillSide(h, causes_a, /*side_b=*/false, &d.hosts[it->second]);
  }
  for (const HostReport& h : pb.hosts) {
    const auto [it, inserted] = index.emplace(h.host, d.hosts.size());
    if (inserted) d.hosts.emplace_back().host = h.host;
    FillSide(h, causes_b, /*side_b=*/true, &d.hosts[it->second]);
  }

  d.has_tools = a.has_tools && b.has_tools;
  if (d.has_tools) {
    d.kernels = TopChanges(KernelTotals(a.kernels), KernelTotals(b.kernels), d.pod_steps.a,
                           d.pod_steps.b, options.top_n);
    d.ops =
        TopChanges(OpTotals(a.ops), OpTotals(b.ops), d.pod_steps.a, d.pod_steps.b, options.top_n);
  }
  return d;
}

}  // namespace profctl::analysis
