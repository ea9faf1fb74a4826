#include "analysis/alignment.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <optional>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "xspace/xspace.h"

namespace profctl::analysis {
namespace {

using tensorflow::profiler::XLine;
using tensorflow::profiler::XPlane;
using tensorflow::profiler::XSpace;

// Bounds on the work per host pair in the coarse search (candidate differences).
constexpr double kMaxCandidatesPerHost = 1 << 22;
constexpr int64_t kMaxDedupeNs = 1'000'000'000;
constexpr int64_t kMaxToleranceNs = int64_t{3600} * 1'000'000'000;
constexpr int64_t kMaxSearchNs = int64_t{86400} * 1'000'000'000;
// Reference candidates tried at most (step 2 of the header): each try matches every host once.
constexpr int kMaxReferenceCandidates = 4;

// Median of `v` (reordered); the lower middle for even sizes, so results stay integers. `v` must
// not be empty.
int64_t MedianOf(std::vector<int64_t>& v) {
  const auto mid = v.begin() + static_cast<std::ptrdiff_t>((v.size() - 1) / 2);
  std::nth_element(v.begin(), mid, v.end());
  return *mid;
}

// Sorts `ends` and merges runs within `dedupe_ns` (>= 0) of the run's first end into their
// median. Any int64 ends: the difference of two sorted ends is taken unsigned, where it is exact.
std::vector<int64_t> SortAndDedupe(std::vector<int64_t> ends, int64_t dedupe_ns) {
  std::sort(ends.begin(), ends.end());
  std::vector<int64_t> out;
  const auto apart = [](int64_t lo, int64_t hi) {
    return static_cast<uint64_t>(hi) - static_cast<uint64_t>(lo);
  };
  for (size_t i = 0; i < ends.size();) {
    size_t j = i + 1;
    while (j < ends.size() && apart(ends[i], ends[j]) <= static_cast<uint64_t>(dedupe_ns)) ++j;
    out.push_back(ends[i + (j - i - 1) / 2]);  // sorted: the run's median
    i = j;
  }
  return out;
}

int64_t ClampTo(__int128 v, int64_t lo, int64_t hi) {
  if (v < lo) return lo;
  if (v > hi) return hi;
  return static_cast<int64_t>(v);
}

bool IsDevicePlane(absl::string_view name) {
  return absl::StartsWith(name, xspace::kGpuPlanePrefix) ||
         absl::StartsWith(name, xspace::kTpuPlanePrefix) ||
         absl::StartsWith(name, xspace::kCustomPlanePrefix);
}

// One host's ends, prepared for matching: coordinator time, sorted, deduplicated.
using Ends = std::vector<int64_t>;

// One host matched onto one reference.
struct Matching {
  // (reference end index, this host's end), by reference index.
  std::vector<std::pair<size_t, int64_t>> pairs;
  int64_t shift = 0;    // median of (reference or consensus end - own end)
  int64_t matched = 0;  // pairs.size() once matched
  bool refined = false;
};

// Every host matched onto one candidate reference (step 2 of the header).
struct Trial {
  size_t ref = 0;
  std::vector<Matching> hosts;  // per host, in input order; hosts[ref] is empty until joined
  size_t refined = 0;           // hosts refined, the reference excluded
  int64_t total_matched = 0;    // their matches
};

// How many of `x` + shift and of `ref` (both sorted, not empty) lie in the span both cover
// (widened by tol on each side): the fewer of the two, the most that could match.
int64_t CouldMatch(const Ends& x, const Ends& ref, int64_t shift, int64_t tol) {
  const int64_t lo = std::max(x.front() + shift, ref.front()) - tol;
  const int64_t hi = std::min(x.back() + shift, ref.back()) + tol;
  if (lo > hi) return 0;
  auto count_in = [](const Ends& v, int64_t a, int64_t b) {
    return std::upper_bound(v.begin(), v.end(), b) - std::lower_bound(v.begin(), v.end(), a);
  };
  return std::min<int64_t>(count_in(x, lo - shift, hi - shift), count_in(ref, lo, hi));
}

// Coarse shift of `x` onto `ref` (both sorted) by voting (step 3 of the header). Each run of
// candidate differences at most 2 tol wide is a cluster; how well its shift fits is its size over
// what could match at that shift (CouldMatch). Clusters that fit about as well as the best (9/10
// of its fit, 3/4 the size of the largest cluster) differ only by where the hosts' windows start or
// stop: a step grid fits at every multiple of its period, and a host whose window starts a step
// later than the reference's has one more pair at the neighbour step than at its own. Of those, the
// tightest (the right shift agrees to the end jitter, a neighbour step only to the steps' own
// variation), and of the tightest the one nearest 0, which is what the RTT estimates say: a
// perfectly regular grid is told apart by them alone. nullopt when no candidate exists.
std::optional<int64_t> CoarseShift(const Ends& x, const Ends& ref, int64_t window, int64_t tol) {
  std::vector<int64_t> d;
  for (const int64_t xi : x) {
    for (auto it = std::lower_bound(ref.begin(), ref.end(), xi - window);
         it != ref.end() && *it <= xi + window; ++it) {
      d.push_back(*it - xi);
    }
  }
  if (d.empty()) return std::nullopt;
  std::sort(d.begin(), d.end());
  // The cluster starting at each candidate: d[a, end[a]).
  std::vector<size_t> end(d.size());
  size_t largest = 0;
  for (size_t a = 0, b = 0; a < d.size(); ++a) {
    b = std::max(b, a);
    while (b < d.size() && d[b] - d[a] <= 2 * tol) ++b;
    end[a] = b;
    largest = std::max(largest, b - a);
  }
  const auto median_of = [&](size_t a) { return d[a + (end[a] - a - 1) / 2]; };
  std::vector<double> fit(d.size(), -1.0);  // -1: not a candidate
  double best_fit = 0;
  for (size_t a = 0; a < d.size(); ++a) {
    const size_t size = end[a] - a;
    if (size * 4 < largest * 3) continue;
    const int64_t could = CouldMatch(x, ref, median_of(a), tol);
    fit[a] =
        std::min(1.0, static_cast<double>(size) / static_cast<double>(std::max<int64_t>(could, 1)));
    best_fit = std::max(best_fit, fit[a]);
  }
  // The range of a cluster's middle half (all of it for 2 or 3 candidates).
  const auto spread_of = [&](size_t a) {
    const size_t size = end[a] - a;
    return d[end[a] - 1 - size / 4] - d[a + size / 4];
  };
  int64_t tightest = std::numeric_limits<int64_t>::max();
  for (size_t a = 0; a < d.size(); ++a) {
    if (fit[a] >= 0.9 * best_fit) tightest = std::min(tightest, spread_of(a));
  }
  const int64_t tight = 2 * tightest + tol / 16;
  std::optional<size_t> best;
  for (size_t a = 0; a < d.size(); ++a) {
    if (fit[a] < 0.9 * best_fit || spread_of(a) > tight) continue;
    if (!best || std::abs(median_of(a)) < std::abs(median_of(*best)) ||
        (std::abs(median_of(a)) == std::abs(median_of(*best)) && end[a] - a > end[*best] - *best)) {
      best = a;
    }
  }
  return median_of(*best);
}

// Nearest-neighbour, one-to-one matching of x + shift onto `ref` within `tol`.
std::vector<std::pair<size_t, int64_t>> Match(const std::vector<int64_t>& x,
                                              const std::vector<int64_t>& ref, int64_t shift,
                                              int64_t tol) {
  std::vector<std::pair<size_t, int64_t>> pairs;
  int64_t last_dist = 0;
  for (const int64_t xi : x) {
    const int64_t target = xi + shift;
    auto it = std::lower_bound(ref.begin(), ref.end(), target);
    size_t j = static_cast<size_t>(it - ref.begin());
    if (j > 0 && (j == ref.size() || target - ref[j - 1] <= ref[j] - target)) --j;
    if (j >= ref.size()) continue;
    const int64_t dist = std::abs(ref[j] - target);
    if (dist > tol) continue;
    // Targets are sorted, so a reference end wanted twice is wanted by consecutive ends.
    if (!pairs.empty() && pairs.back().first == j) {
      if (dist < last_dist) {
        pairs.back().second = xi;
        last_dist = dist;
      }
      continue;
    }
    pairs.emplace_back(j, xi);
    last_dist = dist;
  }
  return pairs;
}

absl::Status ValidateInputs(absl::Span<const HostClockInput> hosts,
                            const AlignmentOptions& options) {
  auto bad_option = [](absl::string_view name, int64_t v, absl::string_view range) {
    return absl::InvalidArgumentError(
        absl::StrCat("alignment: option ", name, "=", v, " is out of range (", range, ")"));
  };
  if (options.min_matches < 1) return bad_option("min_matches", options.min_matches, ">= 1");
  if (options.min_match_percent < 0 || options.min_match_percent > 100) {
    return bad_option("min_match_percent", options.min_match_percent, "0..100");
  }
  if (options.dedupe_ns < 0 || options.dedupe_ns > kMaxDedupeNs) {
    return bad_option("dedupe_ns", options.dedupe_ns, "0..1 s");
  }
  if (options.max_match_tolerance_ns < 1 || options.max_match_tolerance_ns > kMaxToleranceNs) {
    return bad_option("max_match_tolerance_ns", options.max_match_tolerance_ns, "1 ns..1 hour");
  }
  if (options.max_search_ns < 0 || options.max_search_ns > kMaxSearchNs) {
    return bad_option("max_search_ns", options.max_search_ns, "0..1 day");
  }
  for (size_t i = 0; i < hosts.size(); ++i) {
    const HostClockInput& h = hosts[i];
    if (h.rtt_offset_ns < -kMaxAbsOffsetNs || h.rtt_offset_ns > kMaxAbsOffsetNs) {
      return absl::InvalidArgumentError(absl::StrCat("alignment: host #", i, " rtt_offset_ns ",
                                                     h.rtt_offset_ns, " is outside +-2^61 ns"));
    }
    if (h.rtt_uncertainty_ns < 0 || h.rtt_uncertainty_ns > kMaxAbsOffsetNs) {
      return absl::InvalidArgumentError(absl::StrCat("alignment: host #", i, " rtt_uncertainty_ns ",
                                                     h.rtt_uncertainty_ns,
                                                     " is outside [0, 2^61] ns"));
    }
  }
  return absl::OkStatus();
}

// Step 5 of the header. Host i allows the anchor in `intervals[i]` and estimates it at
// `estimates[i]` with weight `weights[i]`. Returns the point covered by the most intervals
// (segment ties: the larger total weight of the covering hosts) closest to the covering hosts'
// weighted mean estimate.
int64_t ChooseAnchor(const std::vector<std::pair<int64_t, int64_t>>& intervals,
                     const std::vector<int64_t>& estimates,
                     const std::vector<long double>& weights) {
  struct Event {
    int64_t x;
    int kind;  // -1 opens, +1 closes: opens sort first at equal x (intervals are closed)
    size_t host;
  };
  std::vector<Event> events;
  events.reserve(2 * intervals.size());
  for (size_t i = 0; i < intervals.size(); ++i) {
    events.push_back({intervals[i].first, -1, i});
    events.push_back({intervals[i].second, +1, i});
  }
  std::sort(events.begin(), events.end(), [](const Event& a, const Event& b) {
    return a.x != b.x ? a.x < b.x : a.kind < b.kind;
  });
  int count = 0, best_count = 0;
  long double w_open = 0, ws_open = 0;  // sums of w and w * estimate over open intervals
  long double best_weight = -1;
  int64_t anchor = 0;
  for (size_t k = 0; k < events.size(); ++k) {
    const Event& e = events[k];
    const long double w = weights[e.host];
    if (e.kind < 0) {
      ++count;
      w_open += w;
      ws_open += w * static_cast<long double>(estimates[e.host]);
      // The segment [e.x, next close) is covered by `count` intervals when the next event
      // closes one (or opens nothing more at this point).
      const bool segment_ends = k + 1 == events.size() || events[k + 1].kind > 0;
      if (!segment_ends) continue;
      if (count > best_count || (count == best_count && w_open > best_weight)) {
        best_count = count;
        best_weight = w_open;
        const int64_t hi = events[k + 1].x;
        const long double mean = ws_open / w_open;
        const long double p =
            std::clamp(mean, static_cast<long double>(e.x), static_cast<long double>(hi));
        anchor = ClampTo(static_cast<__int128>(std::llround(p)), e.x, hi);
      }
    } else {
      --count;
      w_open -= w;
      ws_open -= w * static_cast<long double>(estimates[e.host]);
    }
  }
  return anchor;
}

}  // namespace

absl::string_view OffsetMethodName(OffsetMethod method) {
  switch (method) {
    case OffsetMethod::kRtt:
      return "rtt";
    case OffsetMethod::kCollectives:
      return "collectives";
  }
  return "unknown";
}

bool IsCollectiveOpName(absl::string_view name) {
  const std::string lower = absl::AsciiStrToLower(name);
  if (absl::StartsWith(lower, "nccl")) {
    return !absl::StrContains(lower, "send") && !absl::StrContains(lower, "recv");
  }
  std::string squeezed;
  for (const char c : lower) {
    if (c != '-' && c != '_' && c != ' ') squeezed.push_back(c);
  }
  for (const absl::string_view op : {"allreduce", "allgather", "reducescatter", "alltoall"}) {
    if (absl::StrContains(squeezed, op)) return !absl::StrContains(squeezed, "start");
  }
  return false;
}

std::vector<int64_t> CollectiveEndsNs(const XSpace& space, int64_t dedupe_ns) {
  const int64_t profile_start = xspace::ProfileStartNs(space);
  std::vector<int64_t> ends;
  for (const XPlane& plane : space.planes()) {
    if (!IsDevicePlane(plane.name())) continue;
    absl::flat_hash_set<int64_t> collective_ids;
    for (const auto& [id, md] : plane.event_metadata()) {
      if (IsCollectiveOpName(md.name())) collective_ids.insert(id);
    }
    if (collective_ids.empty()) continue;
    // A collective clipped at the window's end (xspace::kStatStepCut) did not end there: its
    // recorded end is the window's, which differs between hosts by their clock error.
    std::optional<int64_t> cut_stat;
    for (const auto& [id, md] : plane.stat_metadata()) {
      if (md.name() == xspace::kStatStepCut) cut_stat = id;
    }
    const auto clipped = [&](const auto& event) {
      return cut_stat && std::any_of(event.stats().begin(), event.stats().end(),
                                     [&](const auto& st) { return st.metadata_id() == *cut_stat; });
    };
    for (const XLine& line : plane.lines()) {
      for (const auto& event : line.events()) {
        if (collective_ids.contains(event.metadata_id()) && !clipped(event)) {
          ends.push_back(xspace::EventEndNs(profile_start, line, event));
        }
      }
    }
  }
  return SortAndDedupe(std::move(ends), std::max<int64_t>(dedupe_ns, 0));
}

std::vector<int64_t> DedupeCollectiveEnds(std::vector<int64_t> ends, int64_t dedupe_ns) {
  return SortAndDedupe(std::move(ends), std::max<int64_t>(dedupe_ns, 0));
}

namespace {

// Step 1 of the header: each host's collective ends in range, moved to coordinator time by its
// RTT offset, sorted and deduplicated; out[i] starts at the RTT offset and counts the ends
// dropped as out of range. A host's ends lie within kMaxEndSpreadNs of its own median end (one
// host's honest ends span its capture window; an end 73 years from the rest of its own is out
// of range), so two ends of one host differ by at most 2^62. Across hosts nothing is dropped:
// the matching subtracts ends of two hosts only after a coarse shift put some of them within a
// day of each other, so those differences stay under 2^62 plus two days.
std::vector<Ends> PrepareEnds(absl::Span<const HostClockInput> hosts,
                              const AlignmentOptions& options, std::vector<HostOffset>* out) {
  std::vector<Ends> prep(hosts.size());
  for (size_t i = 0; i < hosts.size(); ++i) {
    (*out)[i].offset_ns = hosts[i].rtt_offset_ns;
    Ends& ends = prep[i];
    ends.reserve(hosts[i].collective_ends_ns.size());
    for (const int64_t e : hosts[i].collective_ends_ns) {
      if (e < -kMaxAbsTimeNs || e > kMaxAbsTimeNs) {
        ++(*out)[i].ignored_ends;
        continue;
      }
      ends.push_back(e - hosts[i].rtt_offset_ns);  // |e - offset| <= 2^62 + 2^61: no overflow
    }
    if (!ends.empty()) {
      const int64_t middle = MedianOf(ends);  // reorders; sorted below
      const auto far = [middle](int64_t c) {
        const __int128 d = static_cast<__int128>(c) - middle;
        return d < -kMaxEndSpreadNs || d > kMaxEndSpreadNs;
      };
      const auto kept_end = std::remove_if(ends.begin(), ends.end(), far);
      (*out)[i].ignored_ends += ends.end() - kept_end;
      ends.erase(kept_end, ends.end());
    }
    ends = SortAndDedupe(std::move(ends), options.dedupe_ns);
    (*out)[i].ends = static_cast<int64_t>(ends.size());
  }
  return prep;
}

// Step 2: the hosts in the order they are tried as the reference (the most ends; ties: the
// smallest RTT uncertainty, then the lowest index).
std::vector<size_t> ReferenceOrder(absl::Span<const HostClockInput> hosts,
                                   const std::vector<Ends>& prep) {
  std::vector<size_t> order(hosts.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (prep[a].size() != prep[b].size()) return prep[a].size() > prep[b].size();
    if (hosts[a].rtt_uncertainty_ns != hosts[b].rtt_uncertainty_ns) {
      return hosts[a].rtt_uncertainty_ns < hosts[b].rtt_uncertainty_ns;
    }
    return a < b;
  });
  return order;
}

// The reference's median spacing between steps and the match tolerance it allows.
struct MatchScale {
  int64_t spacing;
  int64_t tol;
};
MatchScale ScaleOf(const std::vector<int64_t>& ref_ends, const AlignmentOptions& options) {
  std::vector<int64_t> gaps;
  for (size_t j = 1; j < ref_ends.size(); ++j) gaps.push_back(ref_ends[j] - ref_ends[j - 1]);
  const int64_t spacing = std::max<int64_t>(MedianOf(gaps), 1);
  return {spacing, std::max<int64_t>(std::min(options.max_match_tolerance_ns, spacing / 4), 1)};
}

// Step 3 for one host (`h`, its ends `ends`) onto the reference (`ref`, `ref_ends`): its pairs,
// their number and its shift in *m. Returns whether it matched enough to be refined.
bool MatchOntoReference(const HostClockInput& h, const Ends& ends, const HostClockInput& ref,
                        const Ends& ref_ends, MatchScale scale, const AlignmentOptions& options,
                        Matching* m) {
  if (ends.empty()) return false;
  const int64_t tol = scale.tol;
  int64_t window =
      std::min<int64_t>(h.rtt_uncertainty_ns + ref.rtt_uncertainty_ns + tol, options.max_search_ns);
  // Candidates ~ ends * (2 window / spacing + 1): keep the work per host bounded.
  const double per_end = kMaxCandidatesPerHost / static_cast<double>(ends.size());
  if (2.0 * static_cast<double>(window) / static_cast<double>(scale.spacing) + 1 > per_end) {
    window = std::max<int64_t>(
        static_cast<int64_t>((per_end - 1) / 2 * static_cast<double>(scale.spacing)), tol);
  }
  const std::optional<int64_t> coarse = CoarseShift(ends, ref_ends, window, tol);
  if (!coarse) return false;
  m->pairs = Match(ends, ref_ends, *coarse, tol);
  m->matched = static_cast<int64_t>(m->pairs.size());
  if (m->matched < options.min_matches) return false;
  // Chance coincidences of grids that do not agree match a small share of what could match.
  if (m->matched * 100 < options.min_match_percent * CouldMatch(ends, ref_ends, *coarse, tol)) {
    return false;
  }
  std::vector<int64_t> d;
  for (const auto& [j, x] : m->pairs) d.push_back(ref_ends[j] - x);
  m->shift = MedianOf(d);
  m->refined = true;
  return true;
}

// Step 3 against candidate reference `ref`: every other host matched onto it.
Trial TryReference(absl::Span<const HostClockInput> hosts, const std::vector<Ends>& prep,
                   size_t ref, const AlignmentOptions& options) {
  Trial t;
  t.ref = ref;
  t.hosts.resize(hosts.size());
  const MatchScale scale = ScaleOf(prep[ref], options);
  for (size_t i = 0; i < hosts.size(); ++i) {
    if (i == ref) continue;
    if (MatchOntoReference(hosts[i], prep[i], hosts[ref], prep[ref], scale, options, &t.hosts[i])) {
      ++t.refined;
      t.total_matched += t.hosts[i].matched;
    }
  }
  return t;
}

// Step 2: tries candidates in ReferenceOrder, skipping hosts already refined against a tried
// one (they agree with it, so they would find the same group), at most kMaxReferenceCandidates,
// and keeps the trial that refines the most hosts (ties: the most matches, then the earlier).
// nullopt when no host has enough ends to be a reference.
std::optional<Trial> ChooseReference(absl::Span<const HostClockInput> hosts,
                                     const std::vector<Ends>& prep,
                                     const AlignmentOptions& options) {
  const size_t needed = static_cast<size_t>(std::max<int64_t>(options.min_matches, 2));
  std::vector<bool> grouped(hosts.size(), false);
  std::optional<Trial> best;
  int tried = 0;
  for (const size_t c : ReferenceOrder(hosts, prep)) {
    if (tried == kMaxReferenceCandidates || prep[c].size() < needed) break;  // sorted by ends
    if (grouped[c]) continue;
    Trial t = TryReference(hosts, prep, c, options);
    ++tried;
    grouped[c] = true;
    for (size_t i = 0; i < hosts.size(); ++i) grouped[i] = grouped[i] || t.hosts[i].refined;
    if (!best || t.refined > best->refined ||
        (t.refined == best->refined && t.total_matched > best->total_matched)) {
      best = std::move(t);
    }
  }
  return best;
}

// The reference joins with the steps any refined host matched. Returns whether it is refined.
bool JoinReference(const Ends& ref_ends, const AlignmentOptions& options, Trial* t) {
  Matching& r = t->hosts[t->ref];
  std::vector<bool> used(ref_ends.size(), false);
  for (const Matching& m : t->hosts) {
    if (!m.refined) continue;
    for (const auto& pair : m.pairs) used[pair.first] = true;
  }
  for (size_t j = 0; j < ref_ends.size(); ++j) {
    if (used[j]) r.pairs.emplace_back(j, ref_ends[j]);
  }
  r.shift = 0;
  r.matched = static_cast<int64_t>(r.pairs.size());
  r.refined = r.matched >= options.min_matches;
  return r.refined;
}

// What ChooseAnchor weighs: per refined host, the interval its RTT bound allows, its estimate and
// its weight.
struct AnchorInputs {
  std::vector<std::pair<int64_t, int64_t>> intervals;
  std::vector<int64_t> estimates;
  std::vector<long double> weights;
};

// Step 4: the consensus per reference step (the median of the refined hosts' shifted ends), then
// each refined host's shift against it, its residual and method.
AnchorInputs ShiftAgainstConsensus(absl::Span<const HostClockInput> hosts, size_t ref_steps,
                                   std::vector<Matching>* matchings, std::vector<HostOffset>* out) {
  std::vector<std::vector<int64_t>> per_step(ref_steps);
  for (const Matching& p : *matchings) {
    if (!p.refined) continue;
    for (const auto& [j, x] : p.pairs) per_step[j].push_back(x + p.shift);
  }
  std::vector<int64_t> consensus(ref_steps, 0);
  for (size_t j = 0; j < per_step.size(); ++j) {
    if (!per_step[j].empty()) consensus[j] = MedianOf(per_step[j]);
  }
  AnchorInputs in;
  for (size_t i = 0; i < hosts.size(); ++i) {
    Matching& p = (*matchings)[i];
    if (!p.refined) continue;
    std::vector<int64_t> d;
    d.reserve(p.pairs.size());
    for (const auto& [j, x] : p.pairs) d.push_back(consensus[j] - x);
    p.shift = MedianOf(d);
    for (int64_t& v : d) v = std::abs(v - p.shift);
    (*out)[i].residual_ns = MedianOf(d);
    (*out)[i].method = OffsetMethod::kCollectives;
    const int64_t u = hosts[i].rtt_uncertainty_ns;
    in.intervals.emplace_back(p.shift - u, p.shift + u);
    in.estimates.push_back(p.shift);
    const auto uu = static_cast<long double>(std::max<int64_t>(u, 1));
    in.weights.push_back(1.0L / (uu * uu));
  }
  return in;
}

}  // namespace

absl::StatusOr<std::vector<HostOffset>> RefineOffsets(absl::Span<const HostClockInput> hosts,
                                                      const AlignmentOptions& options) {
  if (absl::Status s = ValidateInputs(hosts, options); !s.ok()) return s;
  const size_t n = hosts.size();
  std::vector<HostOffset> out(n);
  const std::vector<Ends> prep = PrepareEnds(hosts, options, &out);
  if (n < 2) return out;

  // 2-3. The reference among the candidates, with every other host matched onto it.
  std::optional<Trial> trial = ChooseReference(hosts, prep, options);
  if (!trial) return out;
  const Ends& ref_ends = prep[trial->ref];
  for (size_t i = 0; i < n; ++i) out[i].matched = trial->hosts[i].matched;
  if (trial->refined == 0) return out;
  // Cannot fail: a refined host matched >= min_matches steps.
  if (!JoinReference(ref_ends, options, &*trial)) return out;
  out[trial->ref].matched = trial->hosts[trial->ref].matched;

  // 4. Consensus per reference step, then each host's shift against it.
  std::vector<Matching>& matchings = trial->hosts;
  const AnchorInputs in = ShiftAgainstConsensus(hosts, ref_ends.size(), &matchings, &out);

  // 5. Common anchor, then every refined host's offset within its RTT bound.
  const int64_t anchor = ChooseAnchor(in.intervals, in.estimates, in.weights);
  for (size_t i = 0; i < n; ++i) {
    if (!matchings[i].refined) continue;
    const HostClockInput& h = hosts[i];
    const __int128 want = static_cast<__int128>(h.rtt_offset_ns) - matchings[i].shift + anchor;
    out[i].offset_ns = ClampTo(want, h.rtt_offset_ns - h.rtt_uncertainty_ns,
                               h.rtt_offset_ns + h.rtt_uncertainty_ns);
    out[i].clamped = out[i].offset_ns != want;
  }
  return out;
}

std::optional<StepOffset> OffsetFromSteps(absl::Span<const std::pair<int64_t, int64_t>> host,
                                          absl::Span<const std::pair<int64_t, int64_t>> reference,
                                          int64_t min_common) {
  absl::flat_hash_map<int64_t, int64_t> ref_start;
  ref_start.reserve(reference.size());
  for (const auto& [step, start] : reference) ref_start.try_emplace(step, start);
  absl::flat_hash_map<int64_t, int64_t> host_start;
  host_start.reserve(host.size());
  for (const auto& [step, start] : host) host_start.try_emplace(step, start);
  std::vector<int64_t> diffs;
  for (const auto& [step, start] : host_start) {
    auto it = ref_start.find(step);
    if (it == ref_start.end()) continue;
    const __int128 d = static_cast<__int128>(start) - it->second;
    if (d > std::numeric_limits<int64_t>::max() || d < std::numeric_limits<int64_t>::min()) {
      return std::nullopt;
    }
    diffs.push_back(static_cast<int64_t>(d));
  }
  if (static_cast<int64_t>(diffs.size()) < std::max<int64_t>(min_common, 1)) return std::nullopt;
  auto median = [](std::vector<int64_t> v) {
    std::nth_element(v.begin(), v.begin() + static_cast<ptrdiff_t>(v.size() / 2), v.end());
    return v[v.size() / 2];
  };
  StepOffset out;
  out.offset_ns = median(diffs);
  std::vector<int64_t> dev;
  dev.reserve(diffs.size());
  for (int64_t d : diffs) {
    const __int128 x = static_cast<__int128>(d) - out.offset_ns;
    dev.push_back(static_cast<int64_t>(std::min<__int128>(x < 0 ? -x : x, kMaxAbsOffsetNs / 4)));
  }
  constexpr int64_t kMinUncertaintyNs = 1'000'000;
  out.uncertainty_ns =
      std::clamp<int64_t>(4 * median(std::move(dev)), kMinUncertaintyNs, kMaxAbsOffsetNs);
  out.common_steps = static_cast<int64_t>(diffs.size());
  return out;
}

}  // namespace profctl::analysis
