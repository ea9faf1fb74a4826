// The hang verdict: where each rank of a pod stood in its collectives at the end of a window, and,
// when the pod hangs, which ranks never entered the collective the others wait in ("worker-1
// (rank 1) never entered all-reduce #1 of step 1234; 2 ranks wait in it since 12:01:07.123 UTC").
// Pure code (no I/O): the XSpace reader reduces one host's trace to a compact record in the same
// pass that reads its breakdown (analysis/readers/xspace_reader.h DecodeXSpaceHost,
// ReadRankCollectives), by the ENTERED / COMPLETED / IDENTITY rules below; JudgeHang compares the
// records of the pod on the aligned timeline, with what each agent's step signal said at the
// window's end (StepSignal). "No hang" and "cannot tell" are different answers (HangVerdictKind).
// docs/flight-recorder.md "Hang verdict" documents it for users.
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
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "analysis/op_classify.h"

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
  // the collectives whose step ended, at that step's end (LAUNCHES ONLY above).
  bool completions_from_steps = false;
  // The window: the space's profile start; its end, the profile_stop_time, else its last event's
  // end (0: no event).
  int64_t window_start_ns = 0;
  int64_t window_end_ns = 0;
};

// One step source of a host (the synthetic job; a CUDA process of the cupti collector) as its
// agent saw it when the window ended: AgentService.GetStepSignal's samples and stalls, reduced.
// Times on the host's own clock.
struct StepSourceSignal {
  std::string source;  // "synthetic", "cupti pid 4242 rank 3"
  int64_t last_step_end_ns = std::numeric_limits<int64_t>::min();  // INT64_MIN: no step seen
  int64_t median_step_ns = 0;  // of its recent steps; 0: unknown (fewer than 3 seen)
  // The agent's own rule (agent/hang_detector.h): no step of it ended for --hang-factor times its
  // median step.
  bool stalled = false;
};

// What one host's agent answered GetStepSignal at the window's end. A rank without one (absent
// in HangRankInput) was not asked (a session saved before it was asked for, `analyze` of loose
// files) or did not answer (a TSL profiler server, an old agent, an error).
struct StepSignal {
  int64_t asked_ns = 0;                   // the agent's clock when it answered
  std::vector<StepSourceSignal> sources;  // empty: the agent saw no step end
};

// One rank of the pod, for JudgeHang.
struct HangRankInput {
  std::string host;
  int64_t rank = 0;  // its position in the pod's host order
  // agent clock - common clock (alignment.h's offset_ns): aligned = own - offset_ns.
  int64_t offset_ns = 0;
  std::optional<RankCollectives> trace;  // absent: no trace (a failed host): unknown
  std::optional<StepSignal> signal;      // absent: not asked, or no answer
};

struct HangOptions {
  // The waiters must have waited at least max(min_wait_ns, step_factor x the job's median step)
  // before the window's end: a normal capture ends with fast ranks briefly in a collective the
  // slow one has not reached yet.
  int64_t min_wait_ns = 100'000'000;  // 100 ms
  int64_t step_factor = 3;
};

enum class HangVerdictKind : uint8_t {
  kNone = 0,    // no hang: the evidence says the job went on, or waits were short (`summary`)
  kHung,        // some ranks with a trace never entered the collective the others wait in
  kAllWaiting,  // every rank with a trace waits in it: the cause is a rank without a trace, or
                // inside the collective itself
  kCannotTell,  // the evidence cannot tell (HangReport::missing says what was missing)
};
// "none", "hung", "all_waiting", "cannot_tell".
absl::string_view HangVerdictKindName(HangVerdictKind kind);

// What a kCannotTell verdict lacked.
enum class HangMissing : uint8_t {
  kNothing = 0,      // not kCannotTell
  kCollectives,      // no trace holds a collective: nothing says who waits for whom
  kStepPace,         // ranks wait in a collective, but no complete step in the window and no stall
                     // from the agents tells a hang from a slow step
  kWindowAfterHang,  // the agents' step signal: no step ended on any rank since before the
                     // window started, so the window holds nothing of the hang
  kCollectiveWait,   // the agents report every step stopped, but no rank waits in a collective in
                     // the window (a stop outside the collectives, or the job ended)
};
// "", "collectives", "step_pace", "window_after_hang", "collective_wait".
absl::string_view HangMissingName(HangMissing missing);

// Where the job's pace (its median step), which a wait is judged against, came from.
enum class HangPace : uint8_t {
  kUnknown = 0,  // no complete step in any window and no median from any agent
  kWindowSteps,  // the median of the ranks' complete steps in the window
  kStepSignal,   // the median of the agents' step sources (their steps before the window's end)
};
// "unknown", "window_steps", "step_signal".
absl::string_view HangPaceName(HangPace pace);

// What a verdict rests on.
struct HangEvidence {
  HangPace pace = HangPace::kUnknown;
  int64_t median_step_ns = 0;  // the job's median step (0: unknown)
  // The collective judged (the one most ranks wait in): how long its first waiter had waited at
  // the window's end, and the wait that makes a hang (max(min_wait, step_factor x median)); 0
  // when no rank waits or the pace is unknown.
  int64_t waited_ns = 0;
  int64_t needed_ns = 0;
  int64_t signal_hosts = 0;  // ranks whose agent answered the step signal
  // The agents' step signal says the job stopped: some source stalled, and every source whose
  // median is known stalled.
  bool stalled = false;
  // The latest step end on any rank, aligned (traces' complete steps and the step signal);
  // INT64_MIN: none seen.
  int64_t last_step_end_ns = std::numeric_limits<int64_t>::min();
  // The earliest window start of the ranks with a trace, aligned (0: no trace).
  int64_t window_start_ns = 0;
};

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
  // Its step signal at the window's end (aligned): whether a source of it stalled, and the last
  // step end any of its sources reported (absent: no signal, or no step seen).
  bool stalled = false;
  std::optional<int64_t> signal_last_step_end_ns;
};
// "other", "waiting", "never_entered", "unknown".
absl::string_view HangRoleName(HangRank::Role role);

struct HangReport {
  HangVerdictKind verdict = HangVerdictKind::kNone;
  HangMissing missing = HangMissing::kNothing;  // kCannotTell only
  HangEvidence evidence;
  CollectiveId collective;       // the one waited in (kHung and kAllWaiting only)
  int64_t waiting_ranks = 0;     // ranks waiting in it
  int64_t waiting_since_ns = 0;  // the earliest waiter's entry, aligned (ns since the epoch)
  std::vector<HangRank> ranks;   // every rank, in input order
  // One sentence for people: the verdict, why there is none, or what it could not tell.
  std::string summary;
};

// The verdict over the pod's ranks (see HangVerdictKind). Of the collectives ranks wait in
// (entered, not completed at the end of their window), X is the one most ranks wait in (ties to
// the earliest entry). It is hung when no rank completed it, no rank completed any collective or
// ended a step after its earliest waiter entered it (in its trace or by its step signal), and the
// evidence says the wait is a hang, not a slow step:
//   - the ranks' complete steps in the window give the job's median step and the waiters waited
//     at least max(min_wait, step_factor x it) (HangOptions); or
//   - the agents' step signal says the job stopped (HangEvidence::stalled).
// A wait shorter than that pace (the window's, else the step signal's) is no hang. Without
// either (no complete step in the window, no stall from the agents) it is kCannotTell
// (kStepPace): the wait of a slow step cannot be told from a hang. With no rank waiting in a
// collective, the step signal decides: steps stopped before every window started is kCannotTell
// (kWindowAfterHang: "no step ended on any rank since ..."); stopped within it, kCannotTell
// (kCollectiveWait, or kCollectives when no trace holds a collective); steps still ending, or
// every collective entered completed, kNone; no trace with collectives and no signal,
// kCannotTell (kCollectives). Ranks without a trace, or whose trace holds no collective at all
// (a collector that keeps steps only), are unknown, never blamed.
HangReport JudgeHang(const std::vector<HangRankInput>& ranks, const HangOptions& options = {});

// What the report rests on, in one sentence for people: "waited 940 ms at the window's end, at
// least 300 ms (the job's median step: 100 ms, from the window's complete steps); the agents of
// 3 ranks report their steps stalled (no step ended since 12:01:07.123 UTC)".
std::string FormatHangEvidence(const HangReport& report);

// "12:01:07.123 UTC" for ns since the epoch; FormatUtcIso: "2026-11-27T12:01:07.123Z".
std::string FormatUtcTime(int64_t ns);
std::string FormatUtcIso(int64_t ns);

}  // namespace profctl::analysis

#endif  // PROFCTL_ANALYSIS_HANG_VERDICT_H_
