// Clock alignment past NTP: refining per-host clock offsets with collective end times.
//
// Why it works. In synchronous data parallelism every collective (NCCL all-reduce and friends)
// ENDS at one true instant on every participant: nobody leaves before the last one has
// contributed. A host whose clock is off by `offset` (agent_clock - coordinator_clock) stamps
// those ends at true + offset, so the ends tell the hosts' offsets *relative to each other* to
// within the end jitter (microseconds), far better than the RTT-based estimate (+- RTT/2,
// milliseconds). They tell nothing about the common part: that stays bounded by the RTT
// estimates alone.
//
// Algorithm (RefineOffsets), all in int64 ns:
//  1. Per host: drop ends outside +-kMaxAbsTimeNs (untrusted trace data), translate them to
//     coordinator time with the RTT offset (c = end - rtt_offset), drop those over
//     kMaxEndSpreadNs from the host's own median (so no difference of ends overflows), sort, and
//     merge ends within `dedupe_ns` (several GPUs of one host end one collective together).
//  2. Reference: chosen among hosts that agree. Hosts are tried as the reference in the order
//     most ends, smallest uncertainty, lowest index (hosts with fewer than max(min_matches, 2)
//     ends never), skipping any host already refined against a tried one (it agrees with that
//     one, so it would find the same group), at most 4 tries. Each try runs step 3 for every
//     other host; the try that refines the most hosts wins (ties: the most matched collectives
//     in all, then the earlier try). So a host whose collectives coincide with no one's (another
//     step grid, another job) cannot become the reference by having the most ends: it keeps its
//     RTT offset and the hosts that agree still align. Cost: one try when the first refines
//     every other host (the usual pod), two with one odd host ahead, at most four.
//     Match tolerance with a reference: tol = min(max_match_tolerance_ns, median gap between its
//     ends / 4), well under half the spacing between collectives, so a step never matches its
//     neighbour.
//  3. Per other host, coarse shift by voting (improves on plain nearest neighbour, which fails
//     once RTT errors approach the collective spacing): every difference y - x between a
//     reference end y and a host end x with |y - x| <= W = u_host + u_ref + tol (the most the two
//     RTT errors can differ; capped by max_search_ns) is a candidate. A cluster (a run of
//     candidates at most 2 tol wide) fits by its size over what could match at its shift. Of the
//     clusters that fit nearly as well as the best (9/10 of its fit, 3/4 the largest cluster's
//     size: a step grid fits at every multiple of its period, and windows that start a step apart
//     give the neighbour step one more pair), the tightest win (the right shift agrees to the end
//     jitter, a neighbour step only to the steps' own variation), and of those the one nearest
//     0, i.e. what the RTT estimates say: a perfectly regular grid is placed by them alone.
//     Then nearest-neighbour matching within tol around that shift, one-to-one, and the
//     median difference. Extra or missing steps on either side simply stay unmatched.
//     A host is refined when it matched at least min_matches ends and at least
//     min_match_percent of the ends the two could share (the fewer of the two hosts' ends within
//     the span both cover, after the shift): grids that do not agree (another step period) still
//     line up now and then within a search window of several ms, and a handful of such chance
//     coincidences among dozens of ends must not pass for an alignment.
//  4. Consensus: per reference step, the median over matched hosts of their shifted ends; each
//     host's relative shift s_i is re-estimated as the median of (consensus - end) over its
//     matched steps (so the reference host's own jitter does not bias everyone), and its
//     residual is the median absolute deviation of those differences around s_i.
//     Hosts not refined in step 3 keep their RTT offset (method kRtt); with fewer than two
//     hosts left, collectives give no relative information and every host keeps its RTT offset.
//  5. Anchor: the refined offsets are offset_i = rtt_i - s_i + A for one unknown A. Host i's RTT
//     bound |offset_i - rtt_i| <= u_i means A in [s_i - u_i, s_i + u_i], and its RTT estimate
//     alone would give A = s_i, with weight 1/u_i^2 (inverse variance). A is the point covered
//     by the most of these intervals (ties between segments: the larger total weight of the
//     covering hosts) that is closest to the covering hosts' weighted mean of s_i. When all
//     intervals intersect (the usual case) that is the weighted mean clamped into the
//     intersection. When the intersection is empty (an RTT bound that does not hold, e.g. a clock
//     step after clock sync, or a mismatched collective), A follows the largest consistent group
//     and each host outside it is clamped onto the nearest end of its own RTT bound (`clamped`),
//     so no host ever leaves [rtt_offset - u, rtt_offset + u].
// So relative offsets between collectives hosts come out at the end jitter, while the common
// part is as good as the tightest RTT bounds allow (one host with a sub-millisecond RTT pins it).
// Clock drift (rate differences) during a capture is not modelled: it shows up in residual_ns.
//
// Pure code: no I/O, no clocks. Inputs are untrusted: absurd offsets are rejected, absurd end
// times ignored, and no arithmetic overflows int64 on any input.
#ifndef PROFCTL_ANALYSIS_ALIGNMENT_H_
#define PROFCTL_ANALYSIS_ALIGNMENT_H_

#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "tensorflow/profiler/xplane.pb.h"

namespace profctl::analysis {

// Largest |rtt_offset_ns| and rtt_uncertainty_ns accepted: 2^61 ns (~73 years).
inline constexpr int64_t kMaxAbsOffsetNs = int64_t{1} << 61;
// Collective end times outside [-2^62, 2^62] ns (~146 years around the epoch) are ignored, and
// so are a host's ends more than kMaxEndSpreadNs (2^61 ns, ~73 years) from its own median end:
// no two ends of one host then differ by more than 2^62.
inline constexpr int64_t kMaxAbsTimeNs = int64_t{1} << 62;
inline constexpr int64_t kMaxEndSpreadNs = int64_t{1} << 61;
inline constexpr int64_t kDefaultCollectiveDedupeNs = 10'000;  // 10 us

// Ends of this host's collectives, in absolute ns on the host's (agent's) own clock: the instants
// every GPU/TPU of this host finished each collective, sorted, ends within `dedupe_ns` of the
// first of a run merged into one (their median;
// the lower middle of an even run). Reads device planes (`/device:GPU:*`,
// `/device:TPU:*`, `/device:CUSTOM:*`) through xspace::ProfileStartNs/EventEndNs, so relative
// and absolute files both work. Which events count: IsCollectiveOpName, except those clipped at
// the window's end (xspace::kStatStepCut), whose recorded end is not the collective's.
std::vector<int64_t> CollectiveEndsNs(const tensorflow::profiler::XSpace& space,
                                      int64_t dedupe_ns = kDefaultCollectiveDedupeNs);
// CollectiveEndsNs' last step, for readers that gather the ends themselves (the XSpace wire
// reader): sorted, runs within `dedupe_ns` merged into their median.
std::vector<int64_t> DedupeCollectiveEnds(std::vector<int64_t> ends,
                                          int64_t dedupe_ns = kDefaultCollectiveDedupeNs);

// Whether an event name is a collective whose end is one instant on all participants: names
// starting with "nccl" (any case; CUPTI kernel names like ncclDevKernel_AllReduce_Sum_bf16_RING_LL)
// except point-to-point ones (containing "send" or "recv": they end per pair, not pod-wide), and
// names of an all-reduce, all-gather, reduce-scatter or all-to-all in any spelling ("all-reduce.3",
// "AllReduce", "reduce_scatter") except async "-start" halves (they end at launch, not at
// completion).
bool IsCollectiveOpName(absl::string_view name);

// One host's inputs.
struct HostClockInput {
  // agent_clock - coordinator_clock from clock sync (the minimum-RTT sample), ns.
  int64_t rtt_offset_ns = 0;
  // The true offset lies within rtt_offset_ns +- this (RTT/2), ns, >= 0.
  int64_t rtt_uncertainty_ns = 0;
  // Collective end times in absolute agent-clock ns (CollectiveEndsNs), any order; may be empty.
  std::vector<int64_t> collective_ends_ns;
};

struct AlignmentOptions {
  // A host needs this many matched collectives to be refined, >= 1.
  int64_t min_matches = 3;
  // ... and to match this share (percent) of the collectives it could share with the reference
  // (step 3 at the top of this file), 0..100.
  int64_t min_match_percent = 50;
  // Ends of one host closer than this are one collective (several GPUs), 0..1 s.
  int64_t dedupe_ns = kDefaultCollectiveDedupeNs;
  // Upper bound of the match tolerance (the tolerance is also at most a quarter of the typical
  // spacing between collectives), 1 ns..1 hour.
  int64_t max_match_tolerance_ns = 1'000'000;
  // Largest shift searched between two hosts' translated ends, however large their RTTs, 0..1 day.
  int64_t max_search_ns = 1'000'000'000;
};

enum class OffsetMethod {
  kRtt,          // the clock-sync estimate, unchanged
  kCollectives,  // refined with collective ends
};
// "rtt" or "collectives".
absl::string_view OffsetMethodName(OffsetMethod method);

// One host's result, in input order.
struct HostOffset {
  // agent_clock - coordinator_clock to align with: coordinator time = agent time - offset_ns.
  // Always within [rtt_offset_ns - rtt_uncertainty_ns, rtt_offset_ns + rtt_uncertainty_ns].
  int64_t offset_ns = 0;
  OffsetMethod method = OffsetMethod::kRtt;
  // kCollectives: median absolute deviation of the host's per-step differences from the pod's
  // consensus ends around their median, ns (the end jitter, plus drift). 0 for kRtt.
  int64_t residual_ns = 0;
  // Collectives matched to the reference host's (for the reference: its steps matched by any
  // refined host). Hosts with matched < min_matches, or under min_match_percent of what they
  // could match, fall back to kRtt.
  int64_t matched = 0;
  // kCollectives: the collectives disagreed with this host's RTT bound, and offset_ns was
  // clamped onto the nearest end of it.
  bool clamped = false;
  // Collective ends used: in range, one per collective (deduplicated).
  int64_t ends = 0;
  // End times ignored as out of range (outside +-kMaxAbsTimeNs, or over kMaxEndSpreadNs from the
  // host's own median end).
  int64_t ignored_ends = 0;
};

// Refines every host's offset (see the top of this file). Returns one HostOffset per input, in
// order; an empty input gives an empty result. INVALID_ARGUMENT, naming the host index and value,
// when an rtt_offset_ns is outside +-kMaxAbsOffsetNs or an rtt_uncertainty_ns outside
// [0, kMaxAbsOffsetNs]; or naming the option when an option is out of range.
absl::StatusOr<std::vector<HostOffset>> RefineOffsets(absl::Span<const HostClockInput> hosts,
                                                      const AlignmentOptions& options = {});

// A coarse offset for a host whose clock could not be measured by RPC (a TSL profiler server),
// from step numbers: in synchronous data parallelism every rank starts step N at about the same
// instant, so the median over the step numbers both hosts have of (its step start - the
// reference's) is its offset from the reference's timeline, to within the step-start jitter.
// Collectives alone cannot do this when the offset may exceed half a step: they repeat every
// step, and a match one step off looks as good as the right one.
struct StepOffset {
  int64_t offset_ns = 0;
  // max(1 ms, 4 x the median absolute deviation of the differences): the search bound to give
  // RefineOffsets as rtt_uncertainty_ns.
  int64_t uncertainty_ns = 0;
  int64_t common_steps = 0;
};
// `host` and `reference`: (step number, step start ns) pairs in any order, the host's on its own
// clock, the reference's on the common timeline; a repeated step number uses its first start.
// std::nullopt when fewer than `min_common` step numbers are shared, or a difference does not fit
// int64.
std::optional<StepOffset> OffsetFromSteps(absl::Span<const std::pair<int64_t, int64_t>> host,
                                          absl::Span<const std::pair<int64_t, int64_t>> reference,
                                          int64_t min_common = 3);

}  // namespace profctl::analysis

#endif  // PROFCTL_ANALYSIS_ALIGNMENT_H_
