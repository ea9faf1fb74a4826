// The hang verdict: where each rank of a pod stood in its collectives at the end of a window, and,
// when the pod hangs, which ranks never entered the collective the others wait in ("worker-1
// (rank 1) never entered all-reduce #1 of step 1234; 2 ranks wait in it since 12:01:07.123 UTC").
// Pure code (no I/O): ReadRankCollectives reduces one host's XSpace to a compact record (call it
// where the decoded trace is, and drop the trace); JudgeHang compares the records of the pod on
// the aligned timeline. docs/flight-recorder.md "Hang verdict" documents it for users.
//
// ENTERED: host-line (`/host:CPU`) events that launch a collective, each counted once:
//   - an NCCL/RCCL API call whose name names a collective kind (ncclAllReduce, ncclAllGather,
//     ncclReduceScatter, ncclBroadcast, ncclReduce, ncclAllToAll, ncclSend, ncclRecv, PyTorch's
//     `nccl:all_reduce`); its kind is the one its `kernel_name` stat names, when it has one (the
//     CUPTI light level's launches), else its own name's. ncclGroupStart/End, ncclCommInit... are
//     not collectives;
//   - a kernel-launch API call (op_classify.h's kHostLaunch, cudaLaunchKernel, cuLaunchKernel...)
//     whose `correlation_id` matches a collective kernel of a device plane, unless it runs inside
//     an NCCL API call of the same line (that call already counts; the launch's correlation id is
//     then the call's).
// COMPLETED: collective kernels (op_classify.h's IsCollectiveDeviceOpName) on the device planes'
//   stream lines (not XProf's derived lines). CUPTI records no kernel that did not complete, so
//   a kernel on the device line is a completed collective; one whose correlation id matches an
//   entry is that entry's collective, else it is identified on its own device as an entry is.
// IDENTITY across ranks: (step, kind, index). `step` is the number of the step marker containing
//   the event (the markers the breakdown uses, op_classify.h "STEP MARKERS": `_r` roots with
//   step_num, or names matching the step pattern; the union over threads of one step number),
//   `index` counts the collectives of that kind within that step on the event's own line (host
//   thread or device), from 1. A rank whose trace has no step marker counts a running ordinal
//   of each kind over its window instead (step -1): comparable across ranks only when their
//   windows start at the same collective. Collectives outside every step of a rank that has
//   markers are not counted, except those after its last step ended (not cut): they belong to
//   the next step number, the one running at the window's end (a recorder of finished steps
//   only has no marker of the step a rank hangs in).
// LAUNCHES ONLY: a trace with no device activity at all (the cupti light level) completes a
//   collective entered in a step that ended at that step's end; one of the running step stays
//   open.
#ifndef PROFCTL_ANALYSIS_HANG_VERDICT_H_
#define PROFCTL_ANALYSIS_HANG_VERDICT_H_

#include <compare>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "analysis/op_classify.h"
#include "tensorflow/profiler/xplane.pb.h"

namespace profctl::analysis {

enum class CollectiveKind : uint8_t {
  kAllReduce = 0,
  kAllGather,
  kReduceScatter,
  kAllToAll,
  kBroadcast,
  kReduce,
  kSendRecv,
  kCollectivePermute,
};
// "all-reduce", "all-gather", "reduce-scatter", "all-to-all", "broadcast", "reduce",
// "send/recv", "collective-permute".
absl::string_view CollectiveKindName(CollectiveKind kind);
// The kind a name (an NCCL call, a kernel, an XLA op) states, any case and spelling
// ("ncclAllReduce", "ncclDevKernel_AllReduce_Sum_bf16_RING_LL", "all-reduce.3", "nccl:all_reduce");
// nullopt for names that state none (ncclGroupEnd, ncclCommInitRank, kernels of other work).
std::optional<CollectiveKind> CollectiveKindOfName(absl::string_view name);

// A collective as every rank of the pod names it (see IDENTITY above).
struct CollectiveId {
  int64_t step = -1;  // -1: the rank has no step markers; index is then a running ordinal
  CollectiveKind kind = CollectiveKind::kAllReduce;
  int64_t index = 1;  // 1: the first of its kind in its step
  auto operator<=>(const CollectiveId&) const = default;
};
// "all-reduce #3 of step 1234", or "all-reduce #3 (counted over the window: no step markers)".
std::string FormatCollectiveId(const CollectiveId& id);

struct CollectiveAt {
  CollectiveId id;
  int64_t time_ns = 0;  // entered: its earliest entry's start; completed: its latest kernel end
};

// One rank's collectives in its window, times on the host's own clock. A few dozen bytes per
// collective, whatever the trace size.
struct RankCollectives {
  std::vector<CollectiveAt> entered;    // one per collective, in entry time order
  std::vector<CollectiveAt> completed;  // one per collective, in completion time order
  // Of the steps wholly inside the window (markers not cut by an edge): how many, their median
  // duration, and the last one's end (INT64_MIN: none).
  int64_t complete_steps = 0;
  int64_t median_step_ns = 0;
  int64_t last_step_end_ns = INT64_MIN;
  bool has_step_markers = false;
  // No device activity in the trace (launches only: the cupti light level): `completed` holds
  // the collectives whose step ended, at that step's end (see ReadRankCollectives).
  bool completions_from_steps = false;
  // The window's end: the space's profile_stop_time, else its last event's end (0: no event).
  int64_t window_end_ns = 0;
};

// Reads one host's XSpace (see ENTERED/COMPLETED/IDENTITY above). Never fails: a space without
// collectives gives empty lists.
RankCollectives ReadRankCollectives(const tensorflow::profiler::XSpace& space,
                                    const StepMatcher& steps);

// One rank of the pod, for JudgeHang.
struct HangRankInput {
  std::string host;
  int64_t rank = 0;  // its position in the pod's host order
  // agent clock - common clock (alignment.h's offset_ns): aligned = own - offset_ns.
  int64_t offset_ns = 0;
  std::optional<RankCollectives> trace;  // absent: no trace (a failed host): unknown
};

struct HangOptions {
  // The waiters must have waited at least max(min_wait_ns, step_factor x the pod's median step)
  // before the window's end: a normal capture ends with fast ranks briefly in a collective the
  // slow one has not reached yet.
  int64_t min_wait_ns = 100'000'000;  // 100 ms
  int64_t step_factor = 3;
};

enum class HangVerdictKind : uint8_t {
  kNone = 0,    // no hang found (`reason` says why)
  kHung,        // some ranks with a trace never entered the collective the others wait in
  kAllWaiting,  // every rank with a trace waits in it: the cause is a rank without a trace, or
                // inside the collective itself
};
// "none", "hung", "all_waiting".
absl::string_view HangVerdictKindName(HangVerdictKind kind);

// What one rank did, on the aligned timeline.
struct HangRank {
  enum class Role : uint8_t {
    kOther = 0,     // no verdict, or it passed the collective (not reached in a verdict)
    kWaiting,       // entered the verdict's collective and did not complete it
    kNeverEntered,  // never entered it: blamed
    kUnknown,       // no trace, or no collective in it: cannot be judged
  };
  std::string host;
  int64_t rank = 0;
  Role role = Role::kOther;
  bool has_trace = false;
  std::optional<CollectiveAt> last_entered;
  std::optional<CollectiveAt> last_completed;
};
// "other", "waiting", "never_entered", "unknown".
absl::string_view HangRoleName(HangRank::Role role);

struct HangReport {
  HangVerdictKind verdict = HangVerdictKind::kNone;
  CollectiveId collective;       // the one waited in (a verdict only)
  int64_t waiting_ranks = 0;     // ranks waiting in it
  int64_t waiting_since_ns = 0;  // the earliest waiter's entry, aligned (ns since the epoch)
  std::vector<HangRank> ranks;   // every rank, in input order
  // One sentence for people: the verdict, or why there is none.
  std::string summary;
};

// The verdict over the pod's ranks (see HangVerdictKind). A collective X is judged hung when
// ranks wait in it (entered, not completed at the end of their window; of the collectives ranks
// wait in, the one most ranks wait in, ties to the earliest entry), no rank completed it, no
// rank completed any collective or ended a step after the earliest waiter entered it, and the
// waiters waited long enough (HangOptions). Ranks without a trace, or whose trace holds no
// collective at all (a collector that keeps steps only), are unknown, never blamed.
HangReport JudgeHang(const std::vector<HangRankInput>& ranks, const HangOptions& options = {});

// "12:01:07.123 UTC" for ns since the epoch; FormatUtcIso: "2026-11-27T12:01:07.123Z".
std::string FormatUtcTime(int64_t ns);
std::string FormatUtcIso(int64_t ns);

}  // namespace profctl::analysis

#endif  // PROFCTL_ANALYSIS_HANG_VERDICT_H_
