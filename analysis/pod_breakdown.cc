// BuildPodBreakdown (breakdown.h): the hosts' summaries matched by step number into pod steps,
// each judged (straggler, cause, bottleneck, why, device, outliers), then the pod's statistics,
// per-host reports and verdicts (pod_verdict.cc).
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
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "analysis/breakdown.h"
#include "analysis/breakdown_internal.h"

namespace profctl::analysis {
namespace {

using breakdown_internal::ExcessOverOthers;
using breakdown_internal::FitNoise;
using breakdown_internal::Median;
using breakdown_internal::Ms;
using breakdown_internal::NoiseFit;
using breakdown_internal::NoiseModel;
using breakdown_internal::PodTally;

// Is it really a straggler? (docs/pod-step-breakdown.md, "Stragglers and noise".) A step's
// candidate is named only when its excess (its time outside collectives minus the median of the
// other hosts') passes the pod's noise floor (NoiseModel::Floor): the hosts' own step-to-step
// variation of that excess (FitNoise) times the z that leaves kFalseStragglerRate over the
// largest of the N hosts' excesses under that noise (normal, or Student-t when its tails are
// heavier), at least 3, and at least 0.1 ms and 1 % of the median pod step time.
constexpr double kFalseStragglerRate = 0.01;  // per step, all hosts together, under pure noise
// Steps of one number are one step when their starts are within a quarter of the step's median
// time of the median start, and at least within this.
constexpr int64_t kMinStartToleranceNs = 1'000'000;
// A named straggler's device is its slow device only when the device's excess over its siblings
// makes at least this share of the host's excess over the other hosts: a host slow as a whole
// (every GPU alike) names none.
constexpr double kMinDeviceShareOfHostExcess = 0.5;
// Warm-up (docs "Thin evidence, said out loud"): the capture's first steps, at most a quarter of
// them, each longer than kWarmupFactor x the median pod step and than the median plus
// kWarmupSigmas robust standard deviations, in a capture of kMinStepsForWarmup steps or more.
constexpr double kWarmupFactor = 1.5;
constexpr double kWarmupSigmas = 6.0;
constexpr size_t kMinStepsForWarmup = 5;
// Different runs (docs "Traces of different runs"): hosts whose steps lie this far apart in time
// are not one run (clock offsets between hosts of one job are seconds at worst, not minutes).
constexpr int64_t kDifferentRunsGapNs = int64_t{600} * 1'000'000'000;

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

// Per host of a step: its busy time minus the median of the other hosts'.
std::vector<int64_t> BusyExcess(const PodStep& ps) {
  std::vector<int64_t> busy;
  busy.reserve(ps.hosts.size());
  for (const PodHostStep& h : ps.hosts) busy.push_back(BusyNs(h));
  return ExcessOverOthers(busy);
}

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
  // Steps compared by number though their hosts' starts disagree with no majority.
  int64_t doubtful_steps() const { return doubtful_steps_; }
  // The first such step, with its hosts' starts ("step 5: worker-0 at -37.0 ms, ...").
  const std::string& doubtful_example() const { return doubtful_example_; }

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

// "8.5 days", "3.2 hours", "42.0 minutes".
std::string LongDuration(int64_t ns) {
  const double s = static_cast<double>(ns) / 1e9;
  if (s >= 86'400) return absl::StrFormat("%.1f days", s / 86'400);
  if (s >= 3'600) return absl::StrFormat("%.1f hours", s / 3'600);
  return absl::StrFormat("%.1f minutes", s / 60);
}

// Why these hosts' traces are not one run (empty: nothing says so): their steps lie more than
// kDifferentRunsGapNs apart in time, or most steps shared by number start at different times with
// no majority of hosts agreeing (different step grids; a minority off the grid is only left out of
// the steps, PodStepMatcher::LeaveOutHostsOffInTime).
std::string DifferentRuns(const std::vector<HostSummary>& hosts, const PodBreakdown& pod,
                          int64_t doubtful_steps, const std::string& doubtful_example) {
  struct Span {
    int64_t start = 0, end = 0;
    const std::string* host = nullptr;
  };
  std::vector<Span> spans;
  for (const HostSummary& h : hosts) {
    if (h.steps.empty()) continue;
    Span sp{h.steps.front().start_ns, h.steps.front().end_ns, &h.host};
    for (const HostStep& st : h.steps) {
      sp.start = std::min(sp.start, st.start_ns);
      sp.end = std::max(sp.end, st.end_ns);
    }
    spans.push_back(sp);
  }
  std::stable_sort(spans.begin(), spans.end(),
                   [](const Span& a, const Span& b) { return a.start < b.start; });
  const Span* before = spans.empty() ? nullptr : &spans[0];  // the latest end so far
  for (size_t i = 1; i < spans.size(); ++i) {
    // A gap after the earlier hosts' latest end separates two groups of hosts.
    const int64_t gap = spans[i].start - before->end;
    if (gap > kDifferentRunsGapNs) {
      return absl::StrCat(*spans[i].host, "'s steps begin ", LongDuration(gap), " after ",
                          *before->host, "'s last step ends");
    }
    if (spans[i].end > before->end) before = &spans[i];
  }
  const auto shared = std::count_if(pod.steps.begin(), pod.steps.end(),
                                    [](const PodStep& ps) { return ps.hosts.size() >= 2; });
  if (shared > 0 && 2 * doubtful_steps > shared) {
    return absl::StrCat("different step grids: in ", doubtful_steps, " of the ", shared,
                        " steps shared by number the hosts' starts disagree with no majority "
                        "agreeing, e.g. ",
                        doubtful_example);
  }
  return "";
}

// Marks the capture's warm-up steps (PodStep::warmup): its first steps, at most a quarter of
// them, each longer than kWarmupFactor x the median pod step and than the median plus
// kWarmupSigmas robust standard deviations. A warning names them.
void MarkWarmup(PodBreakdown* pod) {
  const size_t n = pod->steps.size();
  if (n < kMinStepsForWarmup) return;
  std::vector<int64_t> times;
  times.reserve(n);
  for (const PodStep& ps : pod->steps) times.push_back(ps.pod_step_time_ns);
  const int64_t median = Median(times);
  std::vector<int64_t> deviation;
  deviation.reserve(n);
  for (const int64_t t : times) deviation.push_back(t > median ? t - median : median - t);
  const double sigma = 1.4826 * static_cast<double>(Median(std::move(deviation)));
  const double bar = std::max(kWarmupFactor * static_cast<double>(median),
                              static_cast<double>(median) + kWarmupSigmas * sigma);
  std::vector<std::string> listed;
  for (size_t k = 0; k < n / 4; ++k) {
    PodStep& ps = pod->steps[k];
    if (static_cast<double>(ps.pod_step_time_ns) <= bar) break;
    ps.warmup = true;
    listed.push_back(absl::StrCat(ps.step));
  }
  if (listed.empty()) return;
  pod->warnings.push_back(absl::StrCat(
      "warm-up steps ", absl::StrJoin(listed, ", "), " (the first ",
      Ms(pod->steps[0].pod_step_time_ns), " ms, ",
      absl::StrFormat("%.1f", static_cast<double>(pod->steps[0].pod_step_time_ns) /
                                  static_cast<double>(std::max<int64_t>(median, 1))),
      "x the median step of ", Ms(median),
      " ms): the capture's first steps ran far longer than the others (warm-up, compilation); "
      "shown apart, left out of the means and every verdict"));
}

// Marks the judged steps (PodStep::judged): two hosts or more, on every host when any step is,
// not warm-up, and none when the traces are not one run.
void MarkJudged(bool different_runs, PodBreakdown* pod) {
  for (PodStep& ps : pod->steps) {
    ps.judged = !different_runs && ps.hosts.size() >= 2 && !ps.warmup &&
                (pod->steps_on_every_host == 0 || ps.on_every_host);
  }
}

// The pod's noise floor from every host's step-to-step variation of its excess over the judged
// steps, then each step judged against it (the straggler, its cause and what it cost); the tally
// gets who was last ready and who was named.
void JudgeSteps(const std::vector<std::vector<size_t>>& step_hosts, NoiseModel* model,
                PodTally* tally, PodBreakdown* pod) {
  std::vector<std::vector<int64_t>> excess(pod->steps.size());
  std::vector<int64_t> judged_times;
  std::vector<int64_t> all_times;
  for (size_t k = 0; k < pod->steps.size(); ++k) {
    const PodStep& ps = pod->steps[k];
    excess[k] = BusyExcess(ps);
    all_times.push_back(ps.pod_step_time_ns);
    if (!ps.judged) continue;
    judged_times.push_back(ps.pod_step_time_ns);
    for (size_t i = 0; i < ps.hosts.size(); ++i) {
      const size_t h = step_hosts[k][i];
      tally->excess[h].push_back(static_cast<double>(excess[k][i]));
      tally->others_busy[h].push_back(static_cast<double>(BusyNs(ps.hosts[i]) - excess[k][i]));
    }
  }
  tally->hosts_compared = std::count_if(tally->excess.begin(), tally->excess.end(),
                                        [](const auto& e) { return !e.empty(); });
  model->median_pod_step_ns = Median(judged_times.empty() ? all_times : judged_times);
  tally->noise = FitNoise(tally->excess);
  pod->noise_ns = static_cast<int64_t>(std::llround(tally->noise.sigma));
  const auto compared = static_cast<size_t>(std::max<int64_t>(tally->hosts_compared, 1));
  pod->noise_floor_ns =
      std::max(model->Floor(tally->noise, compared, kFalseStragglerRate),
               static_cast<int64_t>(std::llround(breakdown_internal::EmpiricalTailFloor(
                   tally->excess, compared, kFalseStragglerRate))));
  for (size_t k = 0; k < pod->steps.size(); ++k) {
    PodStep& ps = pod->steps[k];
    const size_t s = Candidate(ps);
    ps.straggler_excess_ns = excess[k][s];
    if (ps.hosts.size() >= 2 && !ps.judged) {
      ps.bottleneck = Largest(ps.hosts[s].categories);
      ps.why = ps.warmup ? absl::StrCat("warm-up step (", Ms(ps.pod_step_time_ns),
                                        " ms): not judged, and left out of the pod's means")
               : !tally->different_runs.empty()
                   ? "not judged: these traces are not one run (compare runs with `profctl diff`)"
                   : absl::StrCat("no straggler named: only ", ps.hosts.size(),
                                  " of the hosts have this step (cut by a window edge or not "
                                  "traced)");
      continue;
    }
    Judge(ps, s, pod->noise_floor_ns);
    if (!ps.judged) continue;
    const size_t h = step_hosts[k][s];
    ++tally->last_ready[h];
    if (!ps.straggler.empty()) ++tally->named[h];
    ps.median_pace_cost_ns = std::max<int64_t>(0, ps.straggler_excess_ns);
    if (ps.straggler.empty()) continue;
    // Fixing the straggler's cause saves its cause's excess, but the step gets no shorter than
    // the next-slowest host's pace.
    int64_t next = std::numeric_limits<int64_t>::min();
    for (size_t i = 0; i < ps.hosts.size(); ++i) {
      if (i != s) next = std::max(next, BusyNs(ps.hosts[i]));
    }
    ps.straggler_cost_ns =
        std::max<int64_t>(0, std::min(ps.cause_excess_ns, BusyNs(ps.hosts[s]) - next));
  }
}

// Per-device views and the straggler's slow device. Devices are judged against device-level
// noise: per (host, device), its time outside collectives minus the median of its siblings' in
// every judged step, whose step-to-step noise (FitNoise over every host's devices) makes the
// devices' floor; the straggler's slowest device is named when its excess passes that floor and
// makes at least half of its host's excess (a host slow as a whole names none). Views are kept
// only where they say something: a host whose devices spread beyond that floor in a step, and
// the step's named straggler. Copying every device of every host-step cost 250 of
// BuildPodBreakdown's 640 ms at 1,000 hosts x 500 steps x 8 GPUs, for views alike.
void AttachDevices(const std::vector<std::vector<size_t>>& step_hosts,
                   const std::vector<HostSummary>& hosts, const NoiseModel& model,
                   PodBreakdown* pod) {
  // The host's step of each pod step's host, and the devices' excess over their siblings.
  std::map<std::pair<size_t, int64_t>, std::vector<double>> series;  // (host, device id)
  size_t most_devices = 0;
  std::vector<std::vector<const HostStep*>> at(pod->steps.size());
  for (size_t k = 0; k < pod->steps.size(); ++k) {
    const PodStep& ps = pod->steps[k];
    at[k].resize(ps.hosts.size(), nullptr);
    for (size_t i = 0; i < ps.hosts.size(); ++i) {
      const std::vector<HostStep>& steps = hosts[step_hosts[k][i]].steps;
      const auto it =
          std::lower_bound(steps.begin(), steps.end(), ps.step,
                           [](const HostStep& st, int64_t step) { return st.step < step; });
      if (it == steps.end() || it->step != ps.step || it->devices.size() < 2) continue;
      at[k][i] = &*it;
      most_devices = std::max(most_devices, it->devices.size());
      if (!ps.judged) continue;
      std::vector<int64_t> busy;
      busy.reserve(it->devices.size());
      for (const auto& [id, c] : it->devices) busy.push_back(c.outside_collectives());
      const std::vector<int64_t> excess = ExcessOverOthers(busy);
      for (size_t d = 0; d < excess.size(); ++d) {
        series[{step_hosts[k][i], it->devices[d].first}].push_back(static_cast<double>(excess[d]));
      }
    }
  }
  if (most_devices < 2) return;
  // The pod's device floor from every device's series, and each host's own from its devices'
  // alone: a host slow as a whole has noisier devices than the pod's median device, and its
  // devices are judged against the higher of the two.
  std::vector<std::vector<double>> per_device;
  std::map<size_t, std::vector<std::vector<double>>> per_host_devices;
  std::map<size_t, size_t> devices_of;
  per_device.reserve(series.size());
  for (auto& [key, e] : series) {
    per_host_devices[key.first].push_back(e);
    ++devices_of[key.first];
    per_device.push_back(std::move(e));
  }
  pod->device_noise_floor_ns = model.Floor(FitNoise(per_device), most_devices, kFalseStragglerRate);
  std::map<size_t, int64_t> host_floor;
  for (const auto& [h, devices] : per_host_devices) {
    host_floor[h] = std::max(pod->device_noise_floor_ns,
                             model.Floor(FitNoise(devices), devices_of[h], kFalseStragglerRate));
    pod->host_device_floor_ns[hosts[h].host] = host_floor[h];
  }
  for (size_t k = 0; k < pod->steps.size(); ++k) {
    PodStep& ps = pod->steps[k];
    for (size_t i = 0; i < ps.hosts.size(); ++i) {
      const HostStep* st = at[k][i];
      if (st == nullptr) continue;
      const auto own = host_floor.find(step_hosts[k][i]);
      const int64_t floor = own == host_floor.end() ? pod->device_noise_floor_ns : own->second;
      const bool straggler = !ps.straggler.empty() && ps.hosts[i].host == ps.straggler;
      std::vector<int64_t> busy;
      busy.reserve(st->devices.size());
      for (const auto& [id, c] : st->devices) busy.push_back(c.outside_collectives());
      const auto [lo, hi] = std::minmax_element(busy.begin(), busy.end());
      if (!straggler && *hi - *lo <= floor) continue;
      ps.hosts[i].devices = st->devices;
      if (!straggler) continue;
      const std::vector<int64_t> excess = ExcessOverOthers(busy);
      const size_t slowest =
          static_cast<size_t>(std::max_element(excess.begin(), excess.end()) - excess.begin());
      if (excess[slowest] <= floor ||
          static_cast<double>(excess[slowest]) <
              kMinDeviceShareOfHostExcess * static_cast<double>(ps.straggler_excess_ns)) {
        continue;
      }
      ps.straggler_device = st->devices[slowest].first;
      ps.straggler_device_excess_ns = excess[slowest];
      absl::StrAppend(&ps.why, "; of its ", busy.size(), " devices, device ", ps.straggler_device,
                      " is the slowest (+", Ms(excess[slowest]),
                      " ms outside collectives over the median of its others)");
    }
  }
}

// Every (host, category) of a judged step beyond the category's floor (breakdown.h,
// StepOutlier): each category's excess over the other hosts' median, its own noise floor made
// as the pod's; the tally keeps each host's excess and steps beyond, for the verdicts.
void FindOutliers(const std::vector<std::vector<size_t>>& step_hosts, size_t num_hosts,
                  const NoiseModel& model, PodTally* tally, PodBreakdown* pod) {
  for (const Category c : kOutlierCategories) {
    const auto ci = static_cast<size_t>(c);
    std::vector<std::vector<int64_t>> excess(pod->steps.size());
    std::vector<std::vector<double>>& per_host = tally->category_excess[ci];
    per_host.assign(num_hosts, {});
    for (size_t k = 0; k < pod->steps.size(); ++k) {
      const PodStep& ps = pod->steps[k];
      if (!ps.judged) continue;
      std::vector<int64_t> values;
      values.reserve(ps.hosts.size());
      for (const PodHostStep& h : ps.hosts) values.push_back(h.categories.ns[ci]);
      excess[k] = ExcessOverOthers(values);
      for (size_t i = 0; i < ps.hosts.size(); ++i) {
        per_host[step_hosts[k][i]].push_back(static_cast<double>(excess[k][i]));
      }
    }
    const int64_t floor = model.Floor(
        FitNoise(per_host), static_cast<size_t>(std::max<int64_t>(tally->hosts_compared, 1)),
        kFalseStragglerRate);
    pod->category_noise_floor_ns[ci] = floor;
    std::vector<int64_t>& beyond = tally->beyond[ci];
    beyond.assign(num_hosts, 0);
    for (size_t k = 0; k < pod->steps.size(); ++k) {
      PodStep& ps = pod->steps[k];
      for (size_t i = 0; i < excess[k].size(); ++i) {
        if (excess[k][i] <= floor) continue;
        ++beyond[step_hosts[k][i]];
        ps.outliers.push_back(StepOutlier{ps.hosts[i].host, c, excess[k][i]});
      }
    }
  }
  for (PodStep& ps : pod->steps) {
    std::stable_sort(
        ps.outliers.begin(), ps.outliers.end(),
        [](const StepOutlier& a, const StepOutlier& b) { return a.excess_ns > b.excess_ns; });
  }
}

// Across the judged steps (all steps when none is): the pod step time and the pod view's
// categories.
void PodStatistics(PodBreakdown* pod) {
  const bool any_judged = std::any_of(pod->steps.begin(), pod->steps.end(),
                                      [](const PodStep& ps) { return ps.judged; });
  std::vector<int64_t> pod_times;
  std::array<std::vector<int64_t>, kNumCategories> per_category;
  for (const PodStep& ps : pod->steps) {
    if (any_judged ? !ps.judged : ps.warmup) continue;
    pod_times.push_back(ps.pod_step_time_ns);
    const PodHostStep* view = PodView(ps);
    if (view == nullptr) continue;
    for (int c = 0; c < kNumCategories; ++c) per_category[c].push_back(view->categories.ns[c]);
  }
  pod->pod_step_time = StatsOf(std::move(pod_times));
  for (int c = 0; c < kNumCategories; ++c) {
    pod->pod_categories[c] = StatsOf(std::move(per_category[c]));
  }
}

// A host's report: its steps' statistics leave out the pod's warm-up steps (still counted).
HostReport ReportHost(const HostSummary& hs, int64_t straggler_steps,
                      const std::set<int64_t>& warmup) {
  HostReport r;
  r.host = hs.host;
  r.steps = static_cast<int64_t>(hs.steps.size());
  r.partial_steps = hs.partial_steps;
  r.partial = hs.partial;
  r.has_markers = hs.has_markers;
  r.straggler_steps = straggler_steps;
  r.warnings = hs.warnings;
  std::vector<const HostStep*> kept;
  kept.reserve(hs.steps.size());
  for (const HostStep& s : hs.steps) {
    if (!warmup.contains(s.step)) kept.push_back(&s);
  }
  if (kept.empty()) {  // a host with warm-up steps only: its statistics are theirs
    for (const HostStep& s : hs.steps) kept.push_back(&s);
  }
  std::vector<int64_t> v;
  v.reserve(kept.size());
  for (const HostStep* s : kept) v.push_back(s->end_ns - s->start_ns);
  r.step_time = StatsOf(v);
  for (int c = 0; c < kNumCategories; ++c) {
    v.clear();
    for (const HostStep* s : kept) v.push_back(s->host.ns[c]);
    r.categories[c] = StatsOf(v);
  }
  return r;
}

}  // namespace

PodBreakdown BuildPodBreakdown(const std::vector<HostSummary>& hosts, const PodInputs& inputs) {
  PodBreakdown pod;
  PodTally tally;
  if (hosts.empty()) {
    pod.warnings.emplace_back("no hosts to compare");
    pod.verdict = breakdown_internal::JudgePod(hosts, pod, tally, inputs);
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
  tally.doubtful_steps = matcher.doubtful_steps();
  tally.different_runs =
      DifferentRuns(hosts, pod, matcher.doubtful_steps(), matcher.doubtful_example());
  if (!tally.different_runs.empty()) {
    // First: it says why every other line about the pod is moot.
    pod.warnings.insert(
        pod.warnings.begin(),
        absl::StrCat("these traces are not one run (", tally.different_runs,
                     "): nothing is pooled across them (no step judged, no straggler named); "
                     "compare runs with `profctl diff A B`"));
  } else {
    MarkWarmup(&pod);
  }
  MarkJudged(!tally.different_runs.empty(), &pod);
  tally.named.assign(hosts.size(), 0);
  tally.last_ready.assign(hosts.size(), 0);
  tally.excess.assign(hosts.size(), {});
  tally.others_busy.assign(hosts.size(), {});
  NoiseModel model;
  JudgeSteps(matcher.step_hosts(), &model, &tally, &pod);
  FindOutliers(matcher.step_hosts(), hosts.size(), model, &tally, &pod);
  AttachDevices(matcher.step_hosts(), hosts, model, &pod);
  PodStatistics(&pod);
  std::set<int64_t> warmup;
  for (const PodStep& ps : pod.steps) {
    if (ps.warmup) warmup.insert(ps.step);
  }
  for (size_t h = 0; h < hosts.size(); ++h)
    pod.hosts.push_back(ReportHost(hosts[h], tally.named[h], warmup));
  pod.verdict = breakdown_internal::JudgePod(hosts, pod, tally, inputs);
  return pod;
}

}  // namespace profctl::analysis
