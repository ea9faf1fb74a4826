// The pod's verdicts (pod_verdict.h), judged once from the judged steps of a pod breakdown and
// the per-host tally its steps left (breakdown_internal.h).
#include "analysis/pod_verdict.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "analysis/breakdown.h"
#include "analysis/breakdown_internal.h"

namespace profctl::analysis {

absl::string_view FindingName(Finding f) {
  switch (f) {
    case Finding::kFound:
      return "found";
    case Finding::kNone:
      return "none";
    case Finding::kCannotTell:
      return "cannot_tell";
  }
  return "?";
}

absl::string_view ConfidenceName(Confidence c) {
  switch (c) {
    case Confidence::kHigh:
      return "high";
    case Confidence::kMedium:
      return "medium";
    case Confidence::kLow:
      return "low";
  }
  return "?";
}

std::string Judgement::Text() const {
  if (finding == Finding::kCannotTell) return sentence;
  std::string out = absl::StrCat(sentence, " (confidence: ", ConfidenceName(confidence));
  if (!limits.empty()) absl::StrAppend(&out, ": ", absl::StrJoin(limits, "; "));
  out.append(")");
  return out;
}

std::vector<std::string> ConsistentlySlowVerdict::HostNames() const {
  std::vector<std::string> out;
  out.reserve(hosts.size());
  for (const SlowHost& h : hosts) out.push_back(h.host);
  return out;
}

namespace breakdown_internal {
namespace {

// "Consistently slow" (docs/pod-step-breakdown.md "Consistently slow"): named in more steps
// than 1/N chance allows (one-sided binomial test at 1 %, at least 3 steps), or the last one
// ready in more steps than chance allows (binomial test at 1 % over all hosts, Bonferroni) and in
// at least 1/N + 10 % of its steps; either way slower than the others on the median by at least
// 1 % of their busy time.
constexpr double kConsistentlySlowAlpha = 0.01;
constexpr int64_t kMinConsistentlySlowSteps = 3;
constexpr double kMinLastReadyLead = 0.10;
constexpr double kMinSlowdownShare = 0.01;
// The power the detectable slowdown is stated at.
constexpr double kDetectionPower = 0.8;
// "Stands out": beyond the category's floor in at least half of its shared steps and in 3, or
// above the other hosts' median in more steps than chance allows (sign test at 1 % over all hosts
// and categories) by a median of at least 1 % of the median pod step time (and 0.1 ms).
constexpr int64_t kMinOutlierSteps = 3;
constexpr double kStandsOutAlpha = 0.01;
constexpr double kMinStandsOutShareOfStep = 0.01;
constexpr int64_t kMinStandsOutNs = 100'000;
// A slow device across steps: named in at least 3 of its host's straggler steps and in a quarter.
constexpr int64_t kMinSlowDeviceSteps = 3;
// Judged steps below which the noise is unknown (low), and below which it is rough (medium).
constexpr int64_t kFewSteps = 4;
constexpr int64_t kSomeSteps = 10;

// The lower of two confidences.
Confidence Lower(Confidence a, Confidence b) { return std::max(a, b); }

std::string Pct(double v) { return absl::StrFormat("%.1f %%", v); }

double Share(int64_t part, int64_t whole) {
  return whole <= 0 ? 0.0 : 100.0 * static_cast<double>(part) / static_cast<double>(whole);
}

// The floor `host`'s devices were judged against (the pod's when it has none of its own).
int64_t HostDeviceFloor(const PodBreakdown& pod, const std::string& host) {
  const auto it = pod.host_device_floor_ns.find(host);
  return it == pod.host_device_floor_ns.end() ? pod.device_noise_floor_ns : it->second;
}

// Applies the evidence's ceiling and its limits to `j`.
void Cap(const VerdictEvidence& e, Judgement* j) {
  if (j->finding == Finding::kCannotTell) return;
  j->confidence = Lower(j->confidence, e.ceiling);
  j->limits.insert(j->limits.begin(), e.limits.begin(), e.limits.end());
}

// Why nothing can be compared (empty: something can).
std::string CannotCompare(const std::vector<HostSummary>& hosts, const PodBreakdown& pod,
                          const VerdictEvidence& e) {
  if (e.different_runs) {
    return absl::StrCat("these traces are not one run (", e.different_runs_reason,
                        "): nothing is pooled across them; compare runs with `profctl diff A B`");
  }
  if (e.judged_steps > 0) return "";
  const auto with_steps = std::count_if(hosts.begin(), hosts.end(),
                                        [](const HostSummary& h) { return !h.steps.empty(); });
  if (hosts.empty()) return "no host";
  if (pod.steps.empty()) return "no complete step on any host";
  if (with_steps < 2) return "one host: nothing to compare it with";
  if (!e.warmup_steps.empty() && static_cast<int64_t>(e.warmup_steps.size()) == e.steps) {
    return "every step is a warm-up step";
  }
  return "no step that two hosts share";
}

VerdictEvidence Evidence(const std::vector<HostSummary>& hosts, const PodBreakdown& pod,
                         const PodTally& tally) {
  VerdictEvidence e;
  e.hosts = tally.hosts_compared;
  for (const HostSummary& h : hosts) e.world_size = std::max(e.world_size, h.world_size);
  e.different_runs = !tally.different_runs.empty();
  e.different_runs_reason = tally.different_runs;
  e.steps = static_cast<int64_t>(pod.steps.size());
  for (const PodStep& ps : pod.steps) {
    e.judged_steps += ps.judged;
    if (ps.warmup) e.warmup_steps.push_back(ps.step);
  }
  e.doubtful_steps = tally.doubtful_steps;
  e.noise_tail_dof = tally.noise.dof;
  const auto limit = [&e](Confidence c, std::string why) {
    e.ceiling = Lower(e.ceiling, c);
    e.limits.push_back(std::move(why));
  };
  if (e.judged_steps > 0 && e.judged_steps < kFewSteps) {
    limit(Confidence::kLow, absl::StrCat(e.judged_steps, " judged steps: the noise is unknown"));
  } else if (e.judged_steps > 0 && e.judged_steps < kSomeSteps) {
    limit(Confidence::kMedium, absl::StrCat(e.judged_steps, " judged steps"));
  }
  if (e.hosts == 2) {
    limit(Confidence::kMedium, "2 hosts: a slow host cannot be told from a fast one");
  }
  if (e.world_size > e.hosts && e.hosts > 0) {
    limit(Confidence::kLow, absl::StrCat(e.hosts, " of ", e.world_size,
                                         " ranks traced: the pod may wait for one not traced"));
  }
  if (e.doubtful_steps > 0) {
    limit(Confidence::kLow, absl::StrCat(e.doubtful_steps,
                                         " steps whose hosts' starts disagree (another step "
                                         "grid or clocks not aligned)"));
  }
  return e;
}

// The straggler across steps: the host named most often (ties: host order).
StragglerVerdict JudgeStraggler(const PodBreakdown& pod, const VerdictEvidence& e,
                                const std::string& cannot) {
  StragglerVerdict v;
  v.judged_steps = e.judged_steps;
  std::string previous;
  std::map<std::string, int64_t> counts;
  for (const PodStep& s : pod.steps) {
    if (s.straggler.empty()) continue;
    ++v.named_steps;
    ++counts[s.straggler];
    if (!previous.empty() && s.straggler != previous) v.changes.push_back(s.step);
    previous = s.straggler;
  }
  if (!cannot.empty()) {
    v.finding = Finding::kCannotTell;
    v.sentence = absl::StrCat("cannot tell who the pod waits for: ", cannot);
    return v;
  }
  for (const HostReport& h : pod.hosts) {
    const auto it = counts.find(h.host);
    if (it != counts.end() && it->second > v.steps) {
      v.host = h.host;
      v.steps = it->second;
    }
  }
  if (v.steps == 0) {
    v.finding = Finding::kNone;
    v.confidence = Confidence::kHigh;
    v.sentence = absl::StrCat("no straggler: in none of the ", e.judged_steps,
                              " judged steps does a host's lead over the others pass the noise "
                              "floor (",
                              Ms(pod.noise_floor_ns), " ms)");
    Cap(e, &v);
    return v;
  }
  std::array<int64_t, kNumCategories> by_cause{};
  for (const PodStep& s : pod.steps) {
    if (s.straggler == v.host && s.cause != Category::kIdle) ++by_cause[static_cast<int>(s.cause)];
  }
  int best = -1;
  for (int c = 0; c < kNumCategories; ++c) {
    if (by_cause[c] > 0 && (best < 0 || by_cause[c] > by_cause[best])) best = c;
  }
  std::vector<int64_t> excess;
  for (const PodStep& s : pod.steps) {
    if (s.straggler != v.host) continue;
    if (best >= 0 && s.cause != static_cast<Category>(best)) continue;
    if (best >= 0) excess.push_back(s.cause_excess_ns);
    v.example_step = s.step;
    v.example_why = s.why;
  }
  if (best >= 0) {
    v.cause = static_cast<Category>(best);
    std::sort(excess.begin(), excess.end());
    v.cause_steps = static_cast<int64_t>(excess.size());
    v.cause_excess_ns = Percentile(excess, 50);
  }
  v.finding = Finding::kFound;
  v.sentence = absl::StrCat(v.host, " is the straggler in ", v.steps, " of ", e.judged_steps,
                            " judged steps");
  if (v.cause.has_value()) {
    absl::StrAppend(&v.sentence, "; typical cause ", CategoryName(*v.cause), ", +",
                    Ms(v.cause_excess_ns), " ms over the median host (median of ", v.cause_steps,
                    " steps)");
  } else {
    absl::StrAppend(&v.sentence,
                    "; none of its categories exceeds the median host's: the delay is outside "
                    "its trace");
  }
  const double share = static_cast<double>(v.steps) / static_cast<double>(e.judged_steps);
  v.confidence = share >= 0.5   ? Confidence::kHigh
                 : share >= 0.2 ? Confidence::kMedium
                                : Confidence::kLow;
  if (v.confidence != Confidence::kHigh) {
    v.limits.push_back(absl::StrCat("named in ", v.steps, " of ", e.judged_steps, " steps"));
  }
  Cap(e, &v);
  return v;
}

// The straggler's slow device across its steps.
SlowDeviceVerdict JudgeSlowDevice(const PodBreakdown& pod, const VerdictEvidence& e,
                                  const StragglerVerdict& straggler) {
  SlowDeviceVerdict v;
  if (straggler.finding == Finding::kCannotTell) {
    v.finding = Finding::kCannotTell;
    v.sentence = "cannot tell which device is slow: no straggler can be judged";
    return v;
  }
  v.finding = Finding::kNone;
  v.confidence = Confidence::kHigh;
  if (straggler.finding == Finding::kNone) {
    v.sentence = "no slow device: no straggler";
    Cap(e, &v);
    return v;
  }
  v.host = straggler.host;
  std::map<int64_t, std::vector<int64_t>> named;  // device -> its excess in the steps named
  for (const PodStep& s : pod.steps) {
    if (s.straggler != v.host) continue;
    const PodHostStep* h = PodView(s);
    if (h == nullptr || h->devices.size() < 2) continue;
    ++v.of_steps;
    if (s.straggler_device >= 0) named[s.straggler_device].push_back(s.straggler_device_excess_ns);
  }
  if (v.of_steps == 0) {
    v.sentence = absl::StrCat("no slow device: ", v.host, " has one device");
    Cap(e, &v);
    return v;
  }
  for (auto& [device, excess] : named) {
    if (static_cast<int64_t>(excess.size()) > v.steps) {
      v.device = device;
      v.steps = static_cast<int64_t>(excess.size());
      std::sort(excess.begin(), excess.end());
      v.median_excess_ns = Percentile(excess, 50);
    }
  }
  if (v.steps < kMinSlowDeviceSteps || 4 * v.steps < v.of_steps) {
    v.sentence = absl::StrCat(
        "no slow device: no device of ", v.host, " stands out of its siblings beyond the devices' ",
        "noise floor (", Ms(HostDeviceFloor(pod, v.host)), " ms) in its straggler steps",
        v.steps > 0 ? absl::StrCat(" (device ", v.device, " in ", v.steps, " of ", v.of_steps, ")")
                    : std::string(),
        ": the host is slow as a whole");
    v.device = -1;
    v.steps = 0;
    v.median_excess_ns = 0;
    Cap(e, &v);
    return v;
  }
  v.finding = Finding::kFound;
  v.sentence = absl::StrCat("device ", v.device, " of ", v.host, " is its slow device in ", v.steps,
                            " of its ", v.of_steps, " straggler steps (+", Ms(v.median_excess_ns),
                            " ms outside collectives over its siblings' median)");
  v.confidence = 2 * v.steps >= v.of_steps ? Confidence::kHigh : Confidence::kMedium;
  if (v.confidence != Confidence::kHigh) {
    v.limits.push_back(absl::StrCat("named in ", v.steps, " of ", v.of_steps, " steps"));
  }
  Cap(e, &v);
  return v;
}

// P(a host slower by delta x sigma than N - 1 others is the slowest of them), normal noise.
double LastReadyProbability(double delta, int64_t n_hosts) {
  constexpr int kPoints = 800;  // Simpson over z in [-8, 8]
  constexpr double kLo = -8, kHi = 8;
  const double h = (kHi - kLo) / kPoints;
  double sum = 0;
  for (int i = 0; i <= kPoints; ++i) {
    const double z = kLo + h * i;
    const double w = i == 0 || i == kPoints ? 1 : (i % 2 == 1 ? 4 : 2);
    const double phi = std::exp(-z * z / 2) / std::sqrt(2 * M_PI);
    sum += w * phi * std::pow(1 - NormalUpperTail(z + delta), static_cast<double>(n_hosts - 1));
  }
  return std::clamp(sum * h / 3, 0.0, 1.0);
}

// The last-ready count a host needs in `n` steps among `peers` to be named (0: never): the
// least k past the minimum lead whose binomial tail is below the level (the tail falls as k
// grows: a binary search).
int64_t LastReadyNeeded(int64_t n, int64_t peers) {
  const double chance = 1.0 / static_cast<double>(peers);
  const double alpha = kConsistentlySlowAlpha / static_cast<double>(peers);
  int64_t lo = std::max<int64_t>(
      1, static_cast<int64_t>(std::ceil((chance + kMinLastReadyLead) * static_cast<double>(n))));
  if (lo > n || BinomialTail(n, n, chance) >= alpha) return 0;
  int64_t hi = n;  // the tail at hi is below alpha
  while (lo < hi) {
    const int64_t mid = lo + (hi - lo) / 2;
    if (BinomialTail(n, mid, chance) < alpha) {
      hi = mid;
    } else {
      lo = mid + 1;
    }
  }
  return hi;
}

// The smallest steady slowdown (ns per step) the last-ready test would name with
// kDetectionPower in `n` steps among `peers` hosts, whose excess has noise `sigma` (normal).
double DetectableByLastReady(int64_t n, int64_t peers, double sigma) {
  const int64_t needed = LastReadyNeeded(n, peers);
  if (needed == 0 || sigma <= 0) return 0;
  // The excess over the others' median has more noise than the host alone: the median of the
  // others moves too (a median of 1 or 2 values has the variance of their mean).
  const double others = static_cast<double>(peers - 1);
  const double inflation = 1 + (peers - 1 <= 2 ? 1.0 / others : M_PI / 2 / others);
  const double sigma_host = sigma / std::sqrt(inflation);
  double lo = 0, hi = 40;
  if (BinomialTail(n, needed, LastReadyProbability(hi, peers)) < kDetectionPower) return 0;
  for (int i = 0; i < 50; ++i) {
    const double mid = (lo + hi) / 2;
    (BinomialTail(n, needed, LastReadyProbability(mid, peers)) >= kDetectionPower ? hi : lo) = mid;
  }
  return hi * sigma_host;
}

ConsistentlySlowVerdict JudgeConsistentlySlow(const std::vector<HostSummary>& hosts,
                                              const PodBreakdown& pod, const PodTally& tally,
                                              const VerdictEvidence& e, const std::string& cannot) {
  ConsistentlySlowVerdict v;
  if (!cannot.empty()) {
    v.finding = Finding::kCannotTell;
    v.sentence = absl::StrCat("cannot tell whether a host is consistently slow: ", cannot);
    return v;
  }
  const int64_t peers = tally.hosts_compared;
  const double chance = 1.0 / static_cast<double>(std::max<int64_t>(peers, 1));
  std::vector<double> busy_medians;
  std::map<int64_t, int64_t> needed_by_steps;  // LastReadyNeeded by a host's steps
  for (size_t h = 0; h < hosts.size() && h < tally.excess.size(); ++h) {
    const std::vector<double>& excess = tally.excess[h];
    if (excess.empty()) continue;
    const double others_busy = MedianOf(tally.others_busy[h]);
    busy_medians.push_back(others_busy);
    if (peers < 2) continue;
    SlowHost s;
    s.host = hosts[h].host;
    s.steps = static_cast<int64_t>(excess.size());
    s.named_steps = tally.named[h];
    s.last_ready_steps = tally.last_ready[h];
    s.median_excess_ns = static_cast<int64_t>(std::llround(MedianOf(excess)));
    s.slowdown_pct =
        others_busy > 0 ? 100.0 * static_cast<double>(s.median_excess_ns) / others_busy : 0.0;
    if (s.median_excess_ns <= 0 || s.slowdown_pct < 100 * kMinSlowdownShare) continue;
    double p = 1;
    if (s.named_steps >= kMinConsistentlySlowSteps) {
      const double named = BinomialTail(s.steps, s.named_steps, chance);
      if (named < kConsistentlySlowAlpha) p = std::min(p, named);
    }
    auto [known, inserted] = needed_by_steps.try_emplace(s.steps, 0);
    if (inserted) known->second = LastReadyNeeded(s.steps, peers);
    const int64_t needed = known->second;
    if (needed > 0 && s.last_ready_steps >= needed) {
      p = std::min(p, BinomialTail(s.steps, s.last_ready_steps, chance));
    }
    if (p >= kConsistentlySlowAlpha) continue;
    s.p_value = p;
    std::array<int64_t, kNumCategories> causes{};
    for (const PodStep& ps : pod.steps) {
      if (ps.straggler == s.host && ps.cause != Category::kIdle)
        ++causes[static_cast<int>(ps.cause)];
    }
    const auto top = std::max_element(causes.begin(), causes.end());
    if (*top > 0) s.cause = static_cast<Category>(top - causes.begin());
    v.hosts.push_back(std::move(s));
  }
  std::stable_sort(v.hosts.begin(), v.hosts.end(), [](const SlowHost& a, const SlowHost& b) {
    return a.median_excess_ns > b.median_excess_ns;
  });
  if (!v.hosts.empty()) {
    v.finding = Finding::kFound;
    std::vector<std::string> each;
    for (const SlowHost& s : v.hosts) {
      each.push_back(absl::StrCat(s.host, " (last ready in ", s.last_ready_steps, " of ", s.steps,
                                  " steps vs ", Pct(100 * chance), " by chance, named in ",
                                  s.named_steps, "; +", Ms(s.median_excess_ns), " ms, ",
                                  Pct(s.slowdown_pct), " slower on the median)"));
    }
    v.sentence = absl::StrCat("consistently slow: ", absl::StrJoin(each, "; "));
    const bool strong = std::all_of(v.hosts.begin(), v.hosts.end(),
                                    [](const SlowHost& s) { return s.p_value < 1e-4; });
    v.confidence = strong ? Confidence::kHigh : Confidence::kMedium;
    if (!strong) v.limits.push_back("p between 1e-4 and 1 %");
    Cap(e, &v);
    return v;
  }
  // Nothing named: what could this capture have seen?
  const double median_busy = MedianOf(busy_medians);
  const double by_last_ready = DetectableByLastReady(e.judged_steps, peers, tally.noise.sigma);
  const double by_floor = static_cast<double>(pod.noise_floor_ns) + tally.noise.sigma;
  double detectable = by_last_ready > 0 ? std::min(by_last_ready, by_floor) : by_floor;
  detectable = std::max(detectable, kMinSlowdownShare * median_busy);
  v.detectable_excess_ns = static_cast<int64_t>(std::llround(detectable));
  v.detectable_pct = median_busy > 0 ? 100.0 * detectable / median_busy : 0.0;
  v.finding = Finding::kNone;
  v.confidence = v.detectable_pct <= 5    ? Confidence::kHigh
                 : v.detectable_pct <= 20 ? Confidence::kMedium
                                          : Confidence::kLow;
  v.sentence = absl::StrCat(
      "no host is consistently slow; this capture (", e.judged_steps, " judged steps, ", peers,
      " hosts) could have detected a host slower by ", Ms(v.detectable_excess_ns), " ms per step (",
      Pct(v.detectable_pct), " of its busy time) or more");
  if (v.confidence != Confidence::kHigh) {
    v.limits.push_back(absl::StrCat("blind to slowdowns under ", Pct(v.detectable_pct)));
  }
  Cap(e, &v);
  return v;
}

StandsOutVerdict JudgeStandsOut(const std::vector<HostSummary>& hosts, const PodBreakdown& pod,
                                const PodTally& tally, const VerdictEvidence& e,
                                const std::string& cannot) {
  StandsOutVerdict v;
  if (!cannot.empty()) {
    v.finding = Finding::kCannotTell;
    v.sentence = absl::StrCat("cannot tell whether a host stands out: ", cannot);
    return v;
  }
  const int64_t peers = std::max<int64_t>(tally.hosts_compared, 1);
  const double alpha =
      kStandsOutAlpha /
      static_cast<double>(peers * static_cast<int64_t>(std::size(kOutlierCategories)));
  const int64_t min_effect = std::max<int64_t>(
      kMinStandsOutNs,
      std::llround(kMinStandsOutShareOfStep * static_cast<double>(pod.pod_step_time.p50_ns)));
  for (const Category c : kOutlierCategories) {
    const auto ci = static_cast<size_t>(c);
    const auto& per_host = tally.category_excess[ci];
    for (size_t h = 0; h < hosts.size() && h < per_host.size(); ++h) {
      const std::vector<double>& excess = per_host[h];
      const auto steps = static_cast<int64_t>(excess.size());
      if (steps == 0) continue;
      const int64_t beyond = tally.beyond[ci][h];
      const auto median = static_cast<int64_t>(std::llround(MedianOf(excess)));
      bool stands_out = beyond >= kMinOutlierSteps && 2 * beyond >= steps;
      if (!stands_out && median >= min_effect) {
        const auto above =
            std::count_if(excess.begin(), excess.end(), [](double x) { return x > 0; });
        const auto moved =
            std::count_if(excess.begin(), excess.end(), [](double x) { return x != 0; });
        stands_out = BinomialTail(moved, above, 0.5) < alpha;
      }
      if (stands_out) v.hosts.push_back(HostOutlier{hosts[h].host, c, steps, beyond, median});
    }
  }
  std::stable_sort(v.hosts.begin(), v.hosts.end(), [](const HostOutlier& a, const HostOutlier& b) {
    return a.median_excess_ns > b.median_excess_ns;
  });
  v.confidence = Confidence::kHigh;
  if (v.hosts.empty()) {
    v.finding = Finding::kNone;
    v.sentence = "no host stands out in any category beyond the noise";
  } else {
    v.finding = Finding::kFound;
    std::vector<std::string> each;
    for (const HostOutlier& o : v.hosts) {
      each.push_back(absl::StrCat(o.host, " ", CategoryName(o.category), " +",
                                  Ms(o.median_excess_ns),
                                  " ms per step over the other hosts' median (beyond the noise in ",
                                  o.steps_beyond, " of ", o.steps, " steps)"));
    }
    v.sentence = absl::StrCat("stands out: ", absl::StrJoin(each, "; "));
  }
  Cap(e, &v);
  return v;
}

// Per host, its mean input and step time over the judged steps.
struct HostMeans {
  int64_t input_ns = 0;
  int64_t step_ns = 0;
};

InputBoundVerdict JudgeInputBound(const PodBreakdown& pod, const StandsOutVerdict& stands_out,
                                  const VerdictEvidence& e, const std::string& cannot) {
  InputBoundVerdict v;
  // Over the judged steps; over every step when none is (one host: its means still say something).
  const bool any_judged = e.judged_steps > 0;
  std::map<std::string, std::pair<std::array<int64_t, 2>, int64_t>> sums;  // host -> sums, count
  for (const PodStep& s : pod.steps) {
    if (any_judged && !s.judged) continue;
    for (const PodHostStep& h : s.hosts) {
      auto& [sum, count] = sums[h.host];
      sum[0] += h.categories[Category::kInput];
      sum[1] += h.step_time_ns;
      ++count;
    }
  }
  std::map<std::string, HostMeans> means;
  std::vector<int64_t> inputs, steps;
  for (const auto& [host, sc] : sums) {
    const HostMeans m{sc.first[0] / sc.second, sc.first[1] / sc.second};
    means[host] = m;
    inputs.push_back(m.input_ns);
    steps.push_back(m.step_ns);
  }
  v.median_input_ns = Median(inputs);
  v.median_step_ns = Median(steps);
  if (!cannot.empty()) {
    v.finding = Finding::kCannotTell;
    v.sentence =
        absl::StrCat("cannot tell whether a host waits for input more than the others: ", cannot);
    return v;
  }
  v.confidence = Confidence::kHigh;
  for (const HostOutlier& o : stands_out.hosts) {
    if (o.category != Category::kInput) continue;
    v.finding = Finding::kFound;
    v.host = o.host;
    v.excess_ns = o.median_excess_ns;
    v.input_ns = means[o.host].input_ns;
    v.step_time_ns = means[o.host].step_ns;
    v.sentence = absl::StrCat(v.host, " waits for input: ", Ms(v.input_ns), " ms per step vs ",
                              Ms(v.median_input_ns), " ms on the median host (+", Ms(v.excess_ns),
                              " ms, ", Pct(Share(v.excess_ns, v.step_time_ns)), " of its step)");
    Cap(e, &v);
    return v;
  }
  v.finding = Finding::kNone;
  v.sentence = absl::StrCat("no host stands out for input (median host: input ",
                            Ms(v.median_input_ns), " ms per step, ",
                            Pct(Share(v.median_input_ns, v.median_step_ns)), " of its step)");
  Cap(e, &v);
  return v;
}

WhatIfVerdict JudgeWhatIf(const PodBreakdown& pod, const VerdictEvidence& e,
                          const std::string& cannot) {
  WhatIfVerdict v;
  for (const PodStep& s : pod.steps) {
    if (!s.judged) continue;
    ++v.steps;
    v.pod_time_ns += s.pod_step_time_ns;
    v.straggler_cost_ns += s.straggler_cost_ns;
    v.median_pace_cost_ns += s.median_pace_cost_ns;
  }
  if (!cannot.empty()) {
    v.finding = Finding::kCannotTell;
    v.sentence = absl::StrCat("cannot tell what stragglers cost: ", cannot);
    return v;
  }
  const auto per_step = [&v](int64_t ns) { return v.steps > 0 ? ns / v.steps : 0; };
  const std::string median_pace = absl::StrCat(
      "every host at the median host's pace would save ", Ms(per_step(v.median_pace_cost_ns)),
      " ms per step (", Pct(Share(v.median_pace_cost_ns, v.pod_time_ns)), ")");
  v.confidence = Confidence::kHigh;
  if (v.straggler_cost_ns > 0) {
    v.finding = Finding::kFound;
    v.sentence = absl::StrCat("what if: stragglers cost ", Ms(per_step(v.straggler_cost_ns)),
                              " ms per step (", Pct(Share(v.straggler_cost_ns, v.pod_time_ns)),
                              " of the pod's time); ", median_pace);
  } else {
    v.finding = Finding::kNone;
    v.sentence = absl::StrCat("what if: no named straggler costs time; ", median_pace);
  }
  Cap(e, &v);
  return v;
}

BottleneckVerdict JudgeBottleneck(const PodBreakdown& pod, const VerdictEvidence& e) {
  BottleneckVerdict v;
  const double step = pod.pod_step_time.mean_ns;
  if (pod.steps.empty() || step <= 0) {
    v.finding = Finding::kCannotTell;
    v.sentence = "cannot tell where the pod's time goes: no complete step";
    return v;
  }
  if (e.different_runs) {
    v.finding = Finding::kCannotTell;
    v.sentence =
        absl::StrCat("cannot tell where the pod's time goes: these traces are not one run (",
                     e.different_runs_reason,
                     "): each host's categories are its own; compare runs with `profctl "
                     "diff A B`");
    return v;
  }
  int best = 0;
  for (int c = 0; c < kNumCategories; ++c) {
    v.share_pct[c] = 100.0 * pod.pod_categories[c].mean_ns / step;
    if (pod.pod_categories[c].mean_ns > pod.pod_categories[best].mean_ns) best = c;
  }
  v.category = static_cast<Category>(best);
  v.finding = Finding::kFound;
  v.confidence = Confidence::kHigh;
  const auto mean = static_cast<int64_t>(std::llround(pod.pod_categories[best].mean_ns));
  v.sentence = absl::StrCat("bottleneck: ", CategoryName(v.category), ", ", Ms(mean), " of ",
                            Ms(static_cast<int64_t>(std::llround(step))), " ms per pod step (",
                            Pct(v.share_pct[best]),
                            "; the straggler's categories, else the "
                            "slowest host's)");
  if (e.judged_steps > 0 && e.judged_steps < kFewSteps) {
    v.confidence = Confidence::kLow;
    v.limits.push_back(absl::StrCat(e.judged_steps, " judged steps"));
  }
  return v;
}

HangJudgement JudgePodHang(const std::optional<HangReport>& report) {
  HangJudgement v;
  v.report = report;
  if (!report.has_value()) {
    v.finding = Finding::kCannotTell;
    v.sentence =
        "cannot tell whether the pod hangs: not judged (no session's workers: analyze a session "
        "folder)";
    return v;
  }
  v.sentence = report->summary;
  v.confidence = Confidence::kHigh;
  switch (report->verdict) {
    case HangVerdictKind::kHung:
    case HangVerdictKind::kAllWaiting:
      v.finding = Finding::kFound;
      // A hang called on the agents' stall alone (no complete step in the window) rests on their
      // own pace, not on the window's.
      if (report->evidence.pace != HangPace::kWindowSteps) {
        v.confidence = Confidence::kMedium;
        v.limits.push_back("no complete step in the window: the agents' step signal");
      }
      break;
    case HangVerdictKind::kNone:
      v.finding = Finding::kNone;
      break;
    case HangVerdictKind::kCannotTell:
      v.finding = Finding::kCannotTell;
      break;
  }
  return v;
}

}  // namespace

PodVerdict JudgePod(const std::vector<HostSummary>& hosts, const PodBreakdown& pod,
                    const PodTally& tally, const PodInputs& inputs) {
  PodVerdict v;
  v.evidence = Evidence(hosts, pod, tally);
  const std::string cannot = CannotCompare(hosts, pod, v.evidence);
  v.straggler = JudgeStraggler(pod, v.evidence, cannot);
  v.slow_device = JudgeSlowDevice(pod, v.evidence, v.straggler);
  v.consistently_slow = JudgeConsistentlySlow(hosts, pod, tally, v.evidence, cannot);
  v.stands_out = JudgeStandsOut(hosts, pod, tally, v.evidence, cannot);
  v.input_bound = JudgeInputBound(pod, v.stands_out, v.evidence, cannot);
  v.what_if = JudgeWhatIf(pod, v.evidence, cannot);
  v.bottleneck = JudgeBottleneck(pod, v.evidence);
  v.hang = JudgePodHang(inputs.hang);
  return v;
}

}  // namespace breakdown_internal
}  // namespace profctl::analysis
