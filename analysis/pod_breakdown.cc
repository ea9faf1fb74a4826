// BuildPodBreakdown (breakdown.h): the hosts' summaries matched by step number into pod steps,
// each judged (straggler, cause, bottleneck, why), then the pod's statistics and per-host reports.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "analysis/breakdown.h"
#include "analysis/breakdown_internal.h"

namespace profctl::analysis {
namespace {

using breakdown_internal::Ms;

// Is it really a straggler? (docs/pod-step-breakdown.md, "Stragglers and noise".) A step's
// candidate is named only when its excess (its time outside collectives minus the median of the
// other hosts') is above the pod's noise floor: the hosts' own step-to-step variation of that
// excess (the median over hosts of 1.4826 x the MAD of its successive differences / sqrt 2: a
// robust standard deviation that a steady or intermittent straggler does not inflate) times
// z = max(3, the normal quantile that leaves 1 % over all N hosts: 3.29 for 10 hosts, 4.26 for
// 1,024), and at least 0.1 ms and 1 % of the median pod step time.
constexpr double kMadToSigma = 1.4826;
constexpr double kMinNoiseSigmas = 3.0;
constexpr double kFalseStragglerRate = 0.01;  // per step, all hosts together, under pure noise
constexpr int64_t kMinExcessNs = 100'000;
constexpr double kMinExcessShareOfStep = 0.01;
constexpr size_t kMinStepsForNoise = 4;  // per host: fewer say little of its variation
// "Consistently slow": named in more steps than 1/N chance allows (one-sided binomial test at
// 1 %), in at least 3 steps, with a positive median excess over all its steps.
constexpr double kConsistentlySlowAlpha = 0.01;
constexpr int64_t kMinConsistentlySlowSteps = 3;
// Outliers: a host's category stands out across the capture when it is beyond the category's
// floor in at least half of its shared steps, and in at least 3.
constexpr int64_t kMinOutlierSteps = 3;
// Steps of one number are one step when their starts are within a quarter of the step's median
// time of the median start, and at least within this.
constexpr int64_t kMinStartToleranceNs = 1'000'000;

// The true median (mean of the middle two for an even count); 0 for none.
double MedianOf(std::vector<double> v) {
  if (v.empty()) return 0;
  const size_t n = v.size();
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(n / 2), v.end());
  const double upper = v[n / 2];
  if (n % 2 == 1) return upper;
  return (upper + *std::max_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(n / 2))) / 2;
}

// The z with P(Z > z) = p for a standard normal Z (bisection on erfc: exact enough here).
double NormalUpperQuantile(double p) {
  double lo = 0, hi = 40;
  for (int i = 0; i < 200; ++i) {
    const double mid = (lo + hi) / 2;
    (0.5 * std::erfc(mid / std::sqrt(2.0)) > p ? lo : hi) = mid;
  }
  return lo;
}

// P(X >= k) for X ~ Binomial(n, p), 0 < p < 1.
double BinomialTail(int64_t n, int64_t k, double p) {
  if (k <= 0) return 1;
  if (k > n) return 0;
  double tail = 0;
  for (int64_t i = k; i <= n; ++i) {
    const double log_pmf =
        std::lgamma(static_cast<double>(n + 1)) - std::lgamma(static_cast<double>(i + 1)) -
        std::lgamma(static_cast<double>(n - i + 1)) + static_cast<double>(i) * std::log(p) +
        static_cast<double>(n - i) * std::log1p(-p);
    tail += std::exp(log_pmf);
  }
  return std::min(tail, 1.0);
}

// Nearest-rank percentile p/100 of sorted `v` (non-empty): p50 of an even count is the lower
// middle, a value some host really has.
int64_t Percentile(const std::vector<int64_t>& sorted, int p) {
  const auto n = static_cast<int64_t>(sorted.size());
  int64_t rank = (p * n + 99) / 100 - 1;
  rank = std::clamp<int64_t>(rank, 0, n - 1);
  return sorted[static_cast<size_t>(rank)];
}

Stats StatsOf(std::vector<int64_t> v) {
  Stats s;
  if (v.empty()) return s;
  std::sort(v.begin(), v.end());
  double sum = 0;
  for (int64_t x : v) sum += static_cast<double>(x);
  s.mean_ns = sum / static_cast<double>(v.size());
  s.p50_ns = Percentile(v, 50);
  s.p90_ns = Percentile(v, 90);
  return s;
}

int64_t Median(std::vector<int64_t> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return Percentile(v, 50);
}

// Largest category of `t` (ties: the higher precedence).
Category Largest(const CategoryTimes& t) {
  int best = 0;
  for (int c = 1; c < kNumCategories; ++c) {
    if (t.ns[c] > t.ns[best]) best = c;
  }
  return static_cast<Category>(best);
}

// A host's time outside collectives in a step: what it spent on its own work, not waiting.
int64_t BusyNs(const PodHostStep& h) {
  return h.step_time_ns - h.categories[Category::kCollectives];
}

// Per value: it minus the median of the other values (0 with one value). One sort, then each
// one's "others" median read off the sorted values around it: O(n log n), not O(n^2).
std::vector<int64_t> ExcessOverOthers(const std::vector<int64_t>& values) {
  const size_t n = values.size();
  std::vector<int64_t> out(n, 0);
  if (n < 2) return out;
  std::vector<std::pair<int64_t, size_t>> sorted;  // (value, index), ascending
  sorted.reserve(n);
  for (size_t i = 0; i < n; ++i) sorted.emplace_back(values[i], i);
  std::sort(sorted.begin(), sorted.end());
  const size_t m = n - 1;  // the others
  for (size_t p = 0; p < n; ++p) {
    // The others' k-th smallest, skipping position p.
    const auto other = [&](size_t k) {
      return static_cast<double>(sorted[k < p ? k : k + 1].first);
    };
    const double median = m % 2 == 1 ? other(m / 2) : (other(m / 2 - 1) + other(m / 2)) / 2;
    out[sorted[p].second] = sorted[p].first - static_cast<int64_t>(std::llround(median));
  }
  return out;
}

// Per host of a step: its busy time minus the median of the other hosts'.
std::vector<int64_t> BusyExcess(const PodStep& ps) {
  std::vector<int64_t> busy;
  busy.reserve(ps.hosts.size());
  for (const PodHostStep& h : ps.hosts) busy.push_back(BusyNs(h));
  return ExcessOverOthers(busy);
}

// The step-to-step noise of per-host series (each host's excess over the steps it shared with
// another): per host with at least kMinStepsForNoise values, 1.4826 x the MAD of its successive
// differences / sqrt 2 (a host's level, a steady straggler, and its slow spells cancel out in the
// differences; what is left is the step-to-step noise, sqrt(2) x as wide); the median over hosts.
double StepNoise(const std::vector<std::vector<double>>& per_host) {
  std::vector<double> sigmas;
  for (const std::vector<double>& e : per_host) {
    if (e.size() < kMinStepsForNoise) continue;
    std::vector<double> diffs;
    diffs.reserve(e.size() - 1);
    for (size_t i = 1; i < e.size(); ++i) diffs.push_back(e[i] - e[i - 1]);
    const double center = MedianOf(diffs);
    std::vector<double> deviation;
    deviation.reserve(diffs.size());
    for (const double x : diffs) deviation.push_back(std::abs(x - center));
    sigmas.push_back(kMadToSigma * MedianOf(std::move(deviation)) / std::sqrt(2.0));
  }
  return MedianOf(std::move(sigmas));
}

// What every floor is made of: z (for the number of hosts compared) and the median pod step.
struct NoiseModel {
  double z = kMinNoiseSigmas;
  int64_t median_pod_step_ns = 0;

  // max(z x sigma, 0.1 ms, 1 % of the median pod step time).
  int64_t Floor(double sigma) const {
    return std::max<int64_t>(
        {kMinExcessNs, static_cast<int64_t>(std::llround(z * sigma)),
         static_cast<int64_t>(
             std::llround(kMinExcessShareOfStep * static_cast<double>(median_pod_step_ns)))});
  }
};

// The host the others wait for, if any: the least collective time (ties: the longer step, then
// host order).
size_t Candidate(const PodStep& ps) {
  size_t s = 0;
  for (size_t i = 1; i < ps.hosts.size(); ++i) {
    const int64_t ci = ps.hosts[i].categories[Category::kCollectives];
    const int64_t cs = ps.hosts[s].categories[Category::kCollectives];
    if (ci < cs || (ci == cs && ps.hosts[i].step_time_ns > ps.hosts[s].step_time_ns)) s = i;
  }
  return s;
}

// Which device of the named straggler was slow (PodStep::straggler_device): its devices' time
// outside collectives, each against the median of the others'; the largest named above the
// noise floor, and said in `why`.
void JudgeStragglerDevices(PodStep& ps, const PodHostStep& straggler, int64_t noise_floor_ns) {
  const size_t n = straggler.devices.size();
  if (n < 2) return;
  std::vector<int64_t> busy;
  busy.reserve(n);
  for (const auto& [id, c] : straggler.devices) busy.push_back(c.outside_collectives());
  const std::vector<int64_t> excess = ExcessOverOthers(busy);
  const size_t slowest =
      static_cast<size_t>(std::max_element(excess.begin(), excess.end()) - excess.begin());
  if (excess[slowest] <= noise_floor_ns) return;
  ps.straggler_device = straggler.devices[slowest].first;
  ps.straggler_device_excess_ns = excess[slowest];
  absl::StrAppend(&ps.why, "; of its ", n, " devices, device ", ps.straggler_device,
                  " is the slowest (+", Ms(excess[slowest]),
                  " ms outside collectives over the median of its others)");
}

// Fills straggler, cause, bottleneck and why of a step with its hosts and straggler_excess_ns
// set; the candidate `s` is named only when its excess is above `noise_floor_ns`.
void Judge(PodStep& ps, size_t s, int64_t noise_floor_ns) {
  const size_t n = ps.hosts.size();
  if (n == 1) {
    const PodHostStep& only = ps.hosts.front();
    ps.bottleneck = Largest(only.categories);
    ps.why = absl::StrCat("single host ", only.host, ": no straggler; largest category ",
                          CategoryName(ps.bottleneck), " (", Ms(only.categories[ps.bottleneck]),
                          " ms of ", Ms(only.step_time_ns), " ms)");
    return;
  }
  const PodHostStep& straggler = ps.hosts[s];
  ps.bottleneck = Largest(straggler.categories);
  if (ps.straggler_excess_ns <= noise_floor_ns) {
    int64_t lo = BusyNs(ps.hosts[0]), hi = lo;
    for (const PodHostStep& h : ps.hosts) {
      lo = std::min(lo, BusyNs(h));
      hi = std::max(hi, BusyNs(h));
    }
    ps.why =
        absl::StrCat("no straggler: the hosts' time outside collectives is within ", Ms(hi - lo),
                     " ms of each other (noise floor ", Ms(noise_floor_ns), " ms)");
    return;
  }
  ps.straggler = straggler.host;

  std::array<int64_t, kNumCategories> median{};
  for (int c = 0; c < kNumCategories; ++c) {
    std::vector<int64_t> v;
    v.reserve(n);
    for (const PodHostStep& h : ps.hosts) v.push_back(h.categories.ns[c]);
    median[c] = Median(std::move(v));
  }
  int64_t best_excess = 0;
  for (int c = 0; c < kNumCategories; ++c) {
    const auto cat = static_cast<Category>(c);
    if (cat == Category::kCollectives || cat == Category::kIdle) continue;
    const int64_t excess = straggler.categories.ns[c] - median[c];
    if (excess > best_excess) {
      best_excess = excess;
      ps.cause = cat;
    }
  }
  ps.cause_excess_ns = best_excess;

  std::vector<int64_t> others_collectives;
  std::vector<int64_t> step_times;
  bool any_collectives = false;
  for (size_t i = 0; i < n; ++i) {
    const int64_t ci = ps.hosts[i].categories[Category::kCollectives];
    any_collectives = any_collectives || ci > 0;
    step_times.push_back(ps.hosts[i].step_time_ns);
    if (i != s) others_collectives.push_back(ci);
  }
  const std::string cause_text =
      ps.cause == Category::kIdle
          ? std::string()
          : absl::StrCat(CategoryName(ps.cause), " ", Ms(straggler.categories[ps.cause]), " ms vs ",
                         Ms(median[static_cast<int>(ps.cause)]), " ms median (+",
                         Ms(ps.cause_excess_ns), " ms)");
  if (!any_collectives) {
    ps.why = absl::StrCat("no collectives in this step, so no host waits inside one; ",
                          ps.straggler, " has the longest step (", Ms(straggler.step_time_ns),
                          " ms vs ", Ms(Median(std::move(step_times))), " ms median)",
                          cause_text.empty() ? "" : absl::StrCat(": ", cause_text));
    return;
  }
  const std::string waiting = absl::StrCat("the other hosts wait for it inside their collectives (",
                                           Ms(Median(others_collectives)), " ms median vs its ",
                                           Ms(straggler.categories[Category::kCollectives]),
                                           " ms): waiting, not communicating");
  if (cause_text.empty()) {
    ps.why = absl::StrCat(ps.straggler,
                          " is the straggler, but none of its categories exceeds the median "
                          "host's: the delay is outside its trace (network, another process); ",
                          waiting);
  } else {
    ps.why = absl::StrCat(ps.straggler, " is the straggler: ", cause_text, "; ", waiting);
  }
}

// A host's step in the pod's order: (step, host index, step index in the host's summary).
struct StepRef {
  int64_t step;
  size_t host;
  size_t index;
};

// Every step of the hosts in the pod view, sorted by step then host: one group per pod step.
// Warns about hosts left out or without a complete step.
std::vector<StepRef> PodStepRefs(const std::vector<HostSummary>& hosts, bool any_markers,
                                 std::vector<std::string>* warnings) {
  std::vector<StepRef> refs;
  for (size_t h = 0; h < hosts.size(); ++h) {
    const HostSummary& hs = hosts[h];
    if (any_markers && !hs.has_markers) {
      warnings->push_back(absl::StrCat(
          hs.host,
          " has no step markers: its whole window is summarized as one pseudo-step (-1) and "
          "not matched with the other hosts' steps"));
      continue;
    }
    if (hs.steps.empty()) {
      warnings->push_back(absl::StrCat(hs.host, " has no complete step (", hs.partial_steps,
                                       " partial): it is absent from the pod view"));
    }
    for (size_t i = 0; i < hs.steps.size(); ++i) refs.push_back(StepRef{hs.steps[i].step, h, i});
  }
  std::stable_sort(refs.begin(), refs.end(), [](const StepRef& a, const StepRef& b) {
    return a.step != b.step ? a.step < b.step : a.host < b.host;
  });
  return refs;
}

// Matches the hosts' steps by number into pod.steps, noting which hosts each has, and warns about
// steps some hosts lack and duplicate entries.
class PodStepMatcher {
 public:
  PodStepMatcher(const std::vector<HostSummary>& hosts, bool any_markers)
      : hosts_(hosts), any_markers_(any_markers) {
    comparable_hosts_ = static_cast<size_t>(std::count_if(
        hosts.begin(), hosts.end(), [this](const HostSummary& h) { return Expected(h); }));
  }

  void Match(const std::vector<StepRef>& refs, PodBreakdown* pod) {
    std::vector<std::pair<PodStep, std::vector<size_t>>> steps;
    for (size_t i = 0; i < refs.size();) {
      std::vector<size_t> host_indices;
      PodStep ps = Group(refs, &i, &host_indices);
      steps.emplace_back(std::move(ps), std::move(host_indices));
    }
    FindSteadyShifts(steps);
    for (auto& [ps, host_indices] : steps) LeaveOutHostsOffInTime(&ps, &host_indices);
    FindHostsSharingNoStep(steps, pod);
    for (auto& [ps, host_indices] : steps) {
      size_t expected = 0;
      for (const size_t h : host_indices) expected += !alone_.contains(h);
      ps.on_every_host = expected >= comparable_hosts_ - alone_.size();
      if (!ps.on_every_host && expected > 0) NoteMissing(ps.step, host_indices);
    }
    // In time order, not number order: step numbers can wrap (a counter modulo 1e6) inside a
    // window. A step's time is its earliest host's start; ties keep number order.
    const auto earliest = [](const PodStep& ps) {
      int64_t t = ps.hosts.front().start_ns;
      for (const PodHostStep& h : ps.hosts) t = std::min(t, h.start_ns);
      return t;
    };
    std::stable_sort(steps.begin(), steps.end(), [&](const auto& a, const auto& b) {
      return earliest(a.first) < earliest(b.first);
    });
    for (auto& [ps, host_indices] : steps) {
      pod->steps.push_back(std::move(ps));
      step_hosts_.push_back(std::move(host_indices));
    }
    WarnAboutHostsOffInTime(pod);
    if (steps_missing_ > 0) {
      pod->warnings.push_back(absl::StrCat(
          steps_missing_,
          " steps are not complete on every host (cut by a window edge or not traced) and are "
          "compared over the hosts that have them: ",
          absl::StrJoin(missing_, "; "), steps_missing_ > missing_.size() ? "; ..." : ""));
    }
    if (duplicates_ > 0) {
      pod->warnings.push_back(
          absl::StrCat(duplicates_, " duplicate (host, step) entries ignored (first one kept)"));
    }
  }

  // Per pod step, in pod->steps order: the index in `hosts` of each of its hosts.
  const std::vector<std::vector<size_t>>& step_hosts() const { return step_hosts_; }

 private:
  // Hosts with complete steps of which none is shared with another host, while other hosts share
  // steps (another job, another step counter, or every step off in time): nothing of theirs is
  // compared, so they are not expected in every step either, and a warning names them.
  void FindHostsSharingNoStep(const std::vector<std::pair<PodStep, std::vector<size_t>>>& steps,
                              PodBreakdown* pod) {
    std::map<size_t, int64_t> shared;
    for (const auto& [ps, host_indices] : steps) {
      if (ps.hosts.size() < 2) continue;
      for (const size_t h : host_indices) ++shared[h];
    }
    if (shared.size() < 2) return;  // nobody shares: a one-host pod, or nothing comparable
    for (size_t h = 0; h < hosts_.size(); ++h) {
      if (!Expected(hosts_[h]) || shared.contains(h)) continue;
      alone_.insert(h);
      pod->warnings.push_back(absl::StrCat(
          hosts_[h].host, " shares none of its ", hosts_[h].steps.size(),
          " steps with the other hosts (no step of the same number starting with theirs): another "
          "job or step grid; it is left out of the pod's comparisons and statistics"));
    }
  }

  // A host's start in a step, less its steady shift (FindSteadyShifts).
  int64_t ShiftedStart(const PodHostStep& h, size_t host_index) const {
    const auto it = steady_.find(host_index);
    return h.start_ns - (it == steady_.end() ? 0 : it->second.shift_ns);
  }

  // The step's reference start (the median of its hosts' shifted starts) and tolerance.
  std::pair<int64_t, int64_t> ReferenceAndTolerance(const PodStep& ps,
                                                    const std::vector<size_t>& host_indices) const {
    std::vector<int64_t> starts, times;
    for (size_t i = 0; i < ps.hosts.size(); ++i) {
      starts.push_back(ShiftedStart(ps.hosts[i], host_indices[i]));
      times.push_back(ps.hosts[i].step_time_ns);
    }
    return {Median(std::move(starts)),
            std::max(kMinStartToleranceNs, Median(std::move(times)) / 4)};
  }

  // Hosts whose steps all start about the same time away from the others' (the median of their
  // offsets beyond the tolerance, their spread within half of it): a clock that is off (files
  // analysed without clock offsets) or a step marker placed elsewhere in the loop, not another
  // step grid (whose offsets drift from step to step). Their steps are matched by number, less
  // that shift, and a warning says so.
  void FindSteadyShifts(const std::vector<std::pair<PodStep, std::vector<size_t>>>& steps) {
    std::map<size_t, std::pair<std::vector<int64_t>, std::vector<int64_t>>> offsets;  // & tol
    for (const auto& [ps, host_indices] : steps) {
      if (ps.hosts.size() < 2) continue;
      const auto [reference, tolerance] = ReferenceAndTolerance(ps, host_indices);
      for (size_t i = 0; i < ps.hosts.size(); ++i) {
        auto& [o, t] = offsets[host_indices[i]];
        o.push_back(ps.hosts[i].start_ns - reference);
        t.push_back(tolerance);
      }
    }
    for (auto& [h, ot] : offsets) {
      const int64_t median = Median(ot.first);
      const int64_t tolerance = Median(std::move(ot.second));
      std::vector<int64_t> deviation;
      for (const int64_t o : ot.first) deviation.push_back(o > median ? o - median : median - o);
      if ((median > tolerance || median < -tolerance) &&
          Median(std::move(deviation)) <= tolerance / 2) {
        steady_[h] = Steady{median, tolerance};
      }
    }
  }

  // Hosts whose step of this number does not start with the others' (more than a quarter of the
  // step's median time, and 1 ms, from the median start): another step grid, or clocks not
  // aligned. When the hosts that agree are a strict majority the others are left out of the step
  // (and noted per host); otherwise the step is kept as it is and noted as doubtful.
  void LeaveOutHostsOffInTime(PodStep* ps, std::vector<size_t>* host_indices) {
    const size_t n = ps->hosts.size();
    if (n < 2) return;
    const auto [reference, tolerance] = ReferenceAndTolerance(*ps, *host_indices);
    std::vector<bool> off(n);
    size_t agree = 0;
    for (size_t i = 0; i < n; ++i) {
      const int64_t d = ShiftedStart(ps->hosts[i], (*host_indices)[i]) - reference;
      off[i] = d > tolerance || d < -tolerance;
      agree += !off[i];
    }
    if (agree == n) return;
    if (2 * agree <= n) {
      ++doubtful_steps_;
      if (doubtful_example_.empty()) {
        std::vector<std::string> at;
        for (const PodHostStep& h : ps->hosts) {
          at.push_back(absl::StrCat(h.host, " at ", Ms(h.start_ns - reference), " ms"));
        }
        doubtful_example_ = absl::StrCat("step ", ps->step, ": ", absl::StrJoin(at, ", "));
        doubtful_tolerance_ = tolerance;
      }
      return;
    }
    PodStep kept = *ps;
    kept.hosts.clear();
    std::vector<size_t> kept_indices;
    for (size_t i = 0; i < n; ++i) {
      if (!off[i]) {
        kept.hosts.push_back(std::move(ps->hosts[i]));
        kept_indices.push_back((*host_indices)[i]);
        continue;
      }
      OffInTime& o = off_in_time_[(*host_indices)[i]];
      ++o.steps;
      o.offsets.push_back(ps->hosts[i].start_ns - reference);
      o.tolerance = std::max(o.tolerance, tolerance);
    }
    Recompute(&kept);
    *ps = std::move(kept);
    *host_indices = std::move(kept_indices);
  }

  void WarnAboutHostsOffInTime(PodBreakdown* pod) const {
    for (const auto& [h, st] : steady_) {
      pod->warnings.push_back(absl::StrCat(
          hosts_[h].host, ": its steps start ", Ms(st.shift_ns),
          " ms (median, steadily) from the other hosts' steps of the same number (tolerance ",
          Ms(st.tolerance_ns),
          " ms): its clock is off (files analysed without clock offsets?) or its step markers are "
          "placed elsewhere in the loop; matched by step number"));
    }
    for (const auto& [h, o] : off_in_time_) {
      pod->warnings.push_back(
          absl::StrCat(hosts_[h].host, ": ", o.steps, " of its ", hosts_[h].steps.size(),
                       " steps start ", Ms(Median(o.offsets)),
                       " ms (median) from the other hosts' steps of the same number (tolerance ",
                       Ms(o.tolerance),
                       " ms): another step grid, or clocks not aligned; left out of those steps"));
    }
    if (doubtful_steps_ > 0) {
      pod->warnings.push_back(absl::StrCat(
          doubtful_steps_, " steps have hosts whose starts disagree by more than the tolerance (",
          Ms(doubtful_tolerance_),
          " ms) with no majority that agrees, compared by number anyway: "
          "their verdicts are doubtful (",
          doubtful_example_, ")"));
    }
  }

  // pod_step_time_ns and spread_ns from ps->hosts.
  static void Recompute(PodStep* ps) {
    ps->pod_step_time_ns = 0;
    int64_t min_time = ps->hosts.front().step_time_ns;
    for (const PodHostStep& h : ps->hosts) {
      ps->pod_step_time_ns = std::max(ps->pod_step_time_ns, h.step_time_ns);
      min_time = std::min(min_time, h.step_time_ns);
    }
    ps->spread_ns = ps->pod_step_time_ns - min_time;
  }

  // Hosts expected in every step: those in the pod view with at least one complete step.
  bool Expected(const HostSummary& h) const {
    return (h.has_markers || !any_markers_) && !h.steps.empty();
  }

  // The pod step of the refs from *i on that share its step number; advances *i past them.
  PodStep Group(const std::vector<StepRef>& refs, size_t* i, std::vector<size_t>* host_indices) {
    PodStep ps;
    ps.step = refs[*i].step;
    size_t j = *i;
    for (; j < refs.size() && refs[j].step == ps.step; ++j) {
      if (!host_indices->empty() && host_indices->back() == refs[j].host) {
        ++duplicates_;  // a hand-made summary with a step twice: the first counts
        continue;
      }
      const HostStep& st = hosts_[refs[j].host].steps[refs[j].index];
      host_indices->push_back(refs[j].host);
      ps.hosts.push_back(PodHostStep{
          hosts_[refs[j].host].host, st.start_ns, st.end_ns - st.start_ns, st.host, {}});
    }
    *i = j;
    Recompute(&ps);
    return ps;
  }

  // "step 5 lacks worker-2": the expected hosts not among `host_indices` (ascending).
  void NoteMissing(int64_t step, const std::vector<size_t>& host_indices) {
    ++steps_missing_;
    constexpr size_t kMaxListed = 10;
    if (missing_.size() >= kMaxListed) return;
    std::vector<absl::string_view> lacking;
    size_t k = 0;
    for (size_t h = 0; h < hosts_.size(); ++h) {
      if (alone_.contains(h) && k < host_indices.size() && host_indices[k] == h) ++k;
      if (!Expected(hosts_[h]) || alone_.contains(h)) continue;
      if (k < host_indices.size() && host_indices[k] == h) {
        ++k;
      } else {
        lacking.push_back(hosts_[h].host);
      }
    }
    missing_.push_back(absl::StrCat("step ", step, " lacks ", absl::StrJoin(lacking, ", ")));
  }

  const std::vector<HostSummary>& hosts_;
  const bool any_markers_;
  size_t comparable_hosts_ = 0;
  std::vector<std::vector<size_t>> step_hosts_;
  std::vector<std::string> missing_;
  size_t steps_missing_ = 0;
  int64_t duplicates_ = 0;
  struct OffInTime {
    int64_t steps = 0;
    std::vector<int64_t> offsets;
    int64_t tolerance = 0;
  };
  std::map<size_t, OffInTime> off_in_time_;  // by host index
  struct Steady {
    int64_t shift_ns = 0;
    int64_t tolerance_ns = 0;
  };
  std::map<size_t, Steady> steady_;  // by host index
  std::set<size_t> alone_;           // hosts sharing no step (FindHostsSharingNoStep)
  int64_t doubtful_steps_ = 0;
  std::string doubtful_example_;
  int64_t doubtful_tolerance_ = 0;
};

// Per host (by index in `hosts`): the steps it was named the straggler of, and its excess over
// the other hosts in every step it shared with another.
struct StragglerTally {
  std::vector<int64_t> named;
  std::vector<std::vector<double>> excess;
};

// The pod's noise floor from every host's step-to-step variation of its excess (see the
// constants), then each step judged against it.
StragglerTally JudgeSteps(const std::vector<std::vector<size_t>>& step_hosts, size_t num_hosts,
                          NoiseModel* model, PodBreakdown* pod) {
  StragglerTally tally{std::vector<int64_t>(num_hosts, 0),
                       std::vector<std::vector<double>>(num_hosts)};
  std::vector<std::vector<int64_t>> excess(pod->steps.size());
  std::vector<int64_t> pod_times;
  for (size_t k = 0; k < pod->steps.size(); ++k) {
    const PodStep& ps = pod->steps[k];
    pod_times.push_back(ps.pod_step_time_ns);
    excess[k] = BusyExcess(ps);
    if (ps.hosts.size() < 2) continue;
    for (size_t i = 0; i < ps.hosts.size(); ++i) {
      tally.excess[step_hosts[k][i]].push_back(static_cast<double>(excess[k][i]));
    }
  }
  const auto comparable = static_cast<size_t>(std::count_if(
      tally.excess.begin(), tally.excess.end(), [](const auto& e) { return !e.empty(); }));
  model->z = std::max(kMinNoiseSigmas,
                      NormalUpperQuantile(kFalseStragglerRate /
                                          static_cast<double>(std::max<size_t>(comparable, 1))));
  model->median_pod_step_ns = Median(std::move(pod_times));
  const double sigma = StepNoise(tally.excess);
  pod->noise_ns = static_cast<int64_t>(std::llround(sigma));
  pod->noise_floor_ns = model->Floor(sigma);
  for (size_t k = 0; k < pod->steps.size(); ++k) {
    PodStep& ps = pod->steps[k];
    const size_t s = Candidate(ps);
    ps.straggler_excess_ns = excess[k][s];
    if (pod->steps_on_every_host > 0 && !ps.on_every_host && ps.hosts.size() >= 2) {
      // A step some hosts lack (cut by a window edge, not traced): the host the pod waited for
      // may be among those missing, so nobody present is named for it.
      ps.bottleneck = Largest(ps.hosts[s].categories);
      ps.why = absl::StrCat("no straggler named: only ", ps.hosts.size(),
                            " of the hosts have this step (cut by a window edge or not traced)");
      continue;
    }
    Judge(ps, s, pod->noise_floor_ns);
    if (!ps.straggler.empty()) ++tally.named[step_hosts[k][s]];
    if (ps.hosts.size() < 2) continue;
    ps.median_pace_cost_ns = std::max<int64_t>(0, ps.straggler_excess_ns);
    if (!ps.straggler.empty()) {
      ps.straggler_cost_ns = std::min(ps.cause_excess_ns, ps.median_pace_cost_ns);
    }
    if (pod->steps_on_every_host > 0 && !ps.on_every_host) continue;
    PodBreakdown::WhatIf& w = pod->what_if;
    ++w.steps;
    w.pod_time_ns += ps.pod_step_time_ns;
    w.straggler_cost_ns += ps.straggler_cost_ns;
    w.median_pace_cost_ns += ps.median_pace_cost_ns;
  }
  return tally;
}

// Per-device views, kept only where they say something: for a host with several devices whose
// times outside collectives spread beyond the noise floor in a step, and for the step's named
// straggler (whose slow device is then judged). Copying every device of every host-step cost
// 250 of BuildPodBreakdown's 640 ms at 1,000 hosts x 500 steps x 8 GPUs, for views alike.
void AttachDevices(const std::vector<std::vector<size_t>>& step_hosts,
                   const std::vector<HostSummary>& hosts, PodBreakdown* pod) {
  for (size_t k = 0; k < pod->steps.size(); ++k) {
    PodStep& ps = pod->steps[k];
    for (size_t i = 0; i < ps.hosts.size(); ++i) {
      const std::vector<HostStep>& steps = hosts[step_hosts[k][i]].steps;
      const auto it =
          std::lower_bound(steps.begin(), steps.end(), ps.step,
                           [](const HostStep& st, int64_t step) { return st.step < step; });
      if (it == steps.end() || it->step != ps.step || it->devices.size() < 2) continue;
      const bool straggler = !ps.straggler.empty() && ps.hosts[i].host == ps.straggler;
      int64_t lo = std::numeric_limits<int64_t>::max();
      int64_t hi = std::numeric_limits<int64_t>::min();
      for (const auto& [id, c] : it->devices) {
        lo = std::min(lo, c.outside_collectives());
        hi = std::max(hi, c.outside_collectives());
      }
      if (!straggler && hi - lo <= pod->noise_floor_ns) continue;
      ps.hosts[i].devices = it->devices;
      if (straggler) JudgeStragglerDevices(ps, ps.hosts[i], pod->noise_floor_ns);
    }
  }
}

// Every host that stands out, per category (breakdown.h, StepOutlier and HostOutlier): each
// category's excess over the other hosts' median, its own noise floor as the pod's, then the
// steps and hosts beyond it.
void FindOutliers(const std::vector<std::vector<size_t>>& step_hosts,
                  const std::vector<HostSummary>& hosts, const NoiseModel& model,
                  PodBreakdown* pod) {
  for (const Category c : kOutlierCategories) {
    const auto ci = static_cast<size_t>(c);
    std::vector<std::vector<int64_t>> excess(pod->steps.size());
    std::vector<std::vector<double>> per_host(hosts.size());
    for (size_t k = 0; k < pod->steps.size(); ++k) {
      const PodStep& ps = pod->steps[k];
      if (ps.hosts.size() < 2) continue;
      std::vector<int64_t> values;
      values.reserve(ps.hosts.size());
      for (const PodHostStep& h : ps.hosts) values.push_back(h.categories.ns[ci]);
      excess[k] = ExcessOverOthers(values);
      for (size_t i = 0; i < ps.hosts.size(); ++i) {
        per_host[step_hosts[k][i]].push_back(static_cast<double>(excess[k][i]));
      }
    }
    const int64_t floor = model.Floor(StepNoise(per_host));
    pod->category_noise_floor_ns[ci] = floor;
    std::vector<int64_t> beyond(hosts.size(), 0);
    for (size_t k = 0; k < pod->steps.size(); ++k) {
      PodStep& ps = pod->steps[k];
      for (size_t i = 0; i < excess[k].size(); ++i) {
        if (excess[k][i] <= floor) continue;
        ++beyond[step_hosts[k][i]];
        ps.outliers.push_back(StepOutlier{ps.hosts[i].host, c, excess[k][i]});
      }
    }
    for (size_t h = 0; h < hosts.size(); ++h) {
      const auto steps = static_cast<int64_t>(per_host[h].size());
      if (beyond[h] < kMinOutlierSteps || 2 * beyond[h] < steps) continue;
      pod->outliers.push_back(
          PodBreakdown::HostOutlier{hosts[h].host, c, steps, beyond[h],
                                    static_cast<int64_t>(std::llround(MedianOf(per_host[h])))});
    }
  }
  for (PodStep& ps : pod->steps) {
    std::stable_sort(
        ps.outliers.begin(), ps.outliers.end(),
        [](const StepOutlier& a, const StepOutlier& b) { return a.excess_ns > b.excess_ns; });
  }
  std::stable_sort(pod->outliers.begin(), pod->outliers.end(),
                   [](const PodBreakdown::HostOutlier& a, const PodBreakdown::HostOutlier& b) {
                     return a.median_excess_ns > b.median_excess_ns;
                   });
}

// Named in more of its steps than chance among its peers allows, and slower than them on the
// median (the constants).
bool ConsistentlySlow(int64_t named, const std::vector<double>& excess, size_t peers) {
  if (peers < 2 || named < kMinConsistentlySlowSteps) return false;
  const double chance = 1.0 / static_cast<double>(peers);
  return BinomialTail(static_cast<int64_t>(excess.size()), named, chance) <
             kConsistentlySlowAlpha &&
         MedianOf(excess) > 0;
}

// Across steps: the pod step time's statistics and the steps where the straggler changed.
void JudgeAcrossSteps(PodBreakdown* pod) {
  std::string previous;
  std::vector<int64_t> pod_times;
  pod_times.reserve(pod->steps.size());
  for (const PodStep& ps : pod->steps) {
    if (pod->steps_on_every_host == 0 || ps.on_every_host) pod_times.push_back(ps.pod_step_time_ns);
    if (ps.straggler.empty()) continue;
    if (!previous.empty() && ps.straggler != previous) pod->straggler_changes.push_back(ps.step);
    previous = ps.straggler;
  }
  pod->pod_step_time = StatsOf(std::move(pod_times));
}

HostReport ReportHost(const HostSummary& hs, int64_t straggler_steps) {
  HostReport r;
  r.host = hs.host;
  r.steps = static_cast<int64_t>(hs.steps.size());
  r.partial_steps = hs.partial_steps;
  r.partial = hs.partial;
  r.has_markers = hs.has_markers;
  r.straggler_steps = straggler_steps;
  r.warnings = hs.warnings;
  std::vector<int64_t> v;
  v.reserve(hs.steps.size());
  for (const HostStep& s : hs.steps) v.push_back(s.end_ns - s.start_ns);
  r.step_time = StatsOf(v);
  for (int c = 0; c < kNumCategories; ++c) {
    v.clear();
    for (const HostStep& s : hs.steps) v.push_back(s.host.ns[c]);
    r.categories[c] = StatsOf(v);
  }
  return r;
}

}  // namespace

PodBreakdown BuildPodBreakdown(const std::vector<HostSummary>& hosts) {
  PodBreakdown pod;
  if (hosts.empty()) {
    pod.warnings.emplace_back("no hosts to compare");
    return pod;
  }
  // A host without markers has only its whole window (step -1): comparable with other such
  // hosts, not with real steps.
  const bool any_markers =
      std::any_of(hosts.begin(), hosts.end(), [](const HostSummary& h) { return h.has_markers; });
  if (!any_markers) {
    pod.warnings.emplace_back(
        "no host has step markers: each host's whole window is compared as one pseudo-step (-1)");
  }
  const std::vector<StepRef> refs = PodStepRefs(hosts, any_markers, &pod.warnings);
  PodStepMatcher matcher(hosts, any_markers);
  matcher.Match(refs, &pod);
  pod.steps_on_every_host = std::count_if(pod.steps.begin(), pod.steps.end(),
                                          [](const PodStep& ps) { return ps.on_every_host; });
  const auto left_out = static_cast<int64_t>(pod.steps.size()) - pod.steps_on_every_host;
  if (pod.steps_on_every_host > 0 && left_out > 0) {
    pod.warnings.push_back(absl::StrCat("the pod's step time and what-if are over the ",
                                        pod.steps_on_every_host, " steps every host has; ",
                                        left_out, " steps some hosts lack are left out of them"));
  }
  if (pod.steps.empty() && std::any_of(hosts.begin(), hosts.end(),
                                       [](const HostSummary& h) { return !h.partial.empty(); })) {
    pod.warnings.push_back(
        "no host has a complete step: the capture is shorter than a step (every step was cut by "
        "the window's edges, kept as partial), so nothing can be compared and no straggler "
        "named; capture a window of three steps or more");
  }
  NoiseModel model;
  const StragglerTally tally = JudgeSteps(matcher.step_hosts(), hosts.size(), &model, &pod);
  FindOutliers(matcher.step_hosts(), hosts, model, &pod);
  AttachDevices(matcher.step_hosts(), hosts, &pod);
  JudgeAcrossSteps(&pod);
  const auto peers = static_cast<size_t>(std::count_if(tally.excess.begin(), tally.excess.end(),
                                                       [](const auto& e) { return !e.empty(); }));
  for (size_t h = 0; h < hosts.size(); ++h) {
    HostReport r = ReportHost(hosts[h], tally.named[h]);
    if (ConsistentlySlow(r.straggler_steps, tally.excess[h], peers)) {
      pod.consistently_slow.push_back(r.host);
    }
    pod.hosts.push_back(std::move(r));
  }
  return pod;
}

}  // namespace profctl::analysis
