// `profctl diff A B`: what changed between two analysed captures (two sessions, folders or trace
// sets of any source profctl reads), often of two runs whose hosts are named differently. Pure
// (no I/O): each side's pod breakdown, its pod-wide kernel_stats / op_stats, its device copies and
// memsets (ComputeDeviceTransfers) and its hosts' ranks go in, a Diff comes out;
// report/diff_writers.h renders it.
//
// Hosts are paired (PairHosts): by rank (a trace's Kineto distributedInfo.rank) and by name;
// when that pairs none, one to one when each side has one host, else by role (the name with its
// numbers taken out, in the numbers' order), else by position (each side's host order, when both
// have as many hosts). A host left unpaired is listed on its side, never compared. Times per step
// are the hosts' means over their complete steps (HostReport), so captures of different lengths
// compare; the pod's categories are the average host's. Kernels (with the copies and memsets) and
// ops are compared by their time per pod step (their pod-wide total, summed over hosts / the
// side's pod steps, or the total when it has none). One sentence first says what changed most
// (Diff::headline). docs/tools.md "profctl diff" documents every field for users.
#ifndef PROFCTL_ANALYSIS_TOOLS_DIFF_H_
#define PROFCTL_ANALYSIS_TOOLS_DIFF_H_

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "analysis/breakdown.h"
#include "analysis/tools/tools.h"

namespace profctl::analysis {

// Device activity that is not a kernel: copies by direction, and memsets. kernel_stats lists
// kernels only (as XProf's does); the diff lists these beside them.
enum class TransferKind : uint8_t {
  kHostToDevice = 0,
  kDeviceToHost,
  kDeviceToDevice,  // and peer-to-peer
  kMemset,
};
inline constexpr int kNumTransferKinds = 4;
// "host-to-device copies", "device-to-host copies", "device-to-device copies", "memsets".
absl::string_view TransferKindName(TransferKind kind);
// "copy h2d", "copy d2h", "copy d2d", "memset": the kernel list's mark for the row.
absl::string_view TransferKindShortName(TransferKind kind);

// One name of device copies or memsets, over a trace (or a pod: summed over hosts).
struct DeviceTransferStat {
  std::string name;  // the event's name: "Memcpy DtoD (Device -> Device)", "MemcpyHToD"
  TransferKind kind = TransferKind::kDeviceToDevice;
  int64_t occurrences = 0;
  int64_t total_ns = 0;
};
// The copies and memsets of one host's detail trace, per (name, kind), by total time descending
// (then name).
std::vector<DeviceTransferStat> ComputeDeviceTransfers(const ToolTrace& trace);
// Several hosts' lists summed per (name, kind), in the same order.
std::vector<DeviceTransferStat> MergeDeviceTransfers(
    const std::vector<std::vector<DeviceTransferStat>>& hosts);

// One side of the diff.
struct DiffInput {
  const PodBreakdown* breakdown = nullptr;  // required
  bool has_tools = false;                   // kernel_stats and op_stats were computed
  absl::Span<const KernelStat> kernels;     // PodTools::kernels (kernel_stats, pod-wide)
  absl::Span<const OpStat> ops;             // PodTools::ops.by_op (op_stats, pod-wide)
  // Pod-wide copies and memsets (MergeDeviceTransfers); compared only when has_tools.
  absl::Span<const DeviceTransferStat> transfers = {};
  // Per host of breakdown->hosts, in order: the rank its trace states (Kineto
  // distributedInfo.rank), -1 when unknown. Empty: none known.
  absl::Span<const int64_t> ranks = {};
};

// A value on both sides. delta() = b - a.
struct Change {
  int64_t a = 0;
  int64_t b = 0;
  int64_t delta() const { return b - a; }
  // 100 x (b - a) / a; NaN when a == 0 (no base to compare with).
  double pct() const;
};

// How the hosts of a pair were matched.
enum class HostPairing : uint8_t {
  kUnpaired = 0,  // on one side only
  kRank,          // the same rank (Kineto distributedInfo.rank)
  kName,          // the same host name
  kSingle,        // each side has one host
  kRole,          // the same role (the name with its numbers taken out), the same place in it
  kPosition,      // the same place in each side's host order
};
// "", "rank", "name", "single", "role", "position".
absl::string_view HostPairingName(HostPairing pairing);

struct HostDiff {
  // For people: the name, or "A-name / B-name" when the pair's names differ.
  std::string host;
  std::string host_a;  // "" when not in A
  std::string host_b;  // "" when not in B
  HostPairing pairing = HostPairing::kUnpaired;
  int64_t rank_a = -1;  // the trace's rank, -1: unknown
  int64_t rank_b = -1;
  bool in_a = false;
  bool in_b = false;
  // Only meaningful on the sides the host is in (0 elsewhere).
  Change steps;                                   // complete steps
  Change step_time_ns;                            // mean step time
  std::array<Change, kNumCategories> categories;  // mean time per step, per Category
  Change straggler_steps;                         // steps in which it was the straggler
  // Its most frequent cause in the steps it was the named straggler (kIdle: never named).
  Category cause_a = Category::kIdle;
  Category cause_b = Category::kIdle;
};

// A kernel (by name, summed over its launching ops: its total time), a copy or memset (by name:
// `transfer` says which), or an op (by name: its device self time when it launched kernels, else
// its host self time) whose time changed.
struct NameDiff {
  std::string name;
  std::optional<TransferKind> transfer;  // kernel list only: a copy or memset
  Change ns_per_step;                    // total time / the side's pod steps
  Change total_ns;
  Change occurrences;
};

// The copies or memsets of one kind, pod-wide and per pod step (the kind's rows summed).
struct TransferDiff {
  TransferKind kind = TransferKind::kDeviceToDevice;
  Change ns_per_step;
  Change total_ns;
  Change occurrences;
};

// The pod's straggler on one side: the host named straggler in most steps ("" when none) with
// its most frequent cause in those steps.
struct StragglerSummary {
  std::string host;
  int64_t steps = 0;  // steps it was named in
  Category cause = Category::kIdle;
};

// A host that stands out in a category across the capture (PodBreakdown::outliers) on either
// side: its median excess over the other hosts' median where it does (0 where it does not).
// Hosts of a pair whose names differ are one outlier (named as the pair).
struct OutlierDiff {
  std::string host;
  Category category = Category::kCompute;
  bool in_a = false;
  bool in_b = false;
  Change median_excess_ns;
};

// What changed most, in one sentence ("device-to-device copies +15.0 ms per step (18 -> 4,608 a
// step)"): the largest change of time per step on the average host among the pod's categories,
// the copies and memsets of each kind, and each kernel and op (pod-wide totals over the side's
// pod steps and hosts). A category is named with the kernel or copies that make most of it when
// one does.
struct DiffHeadline {
  enum class What : uint8_t { kNothing = 0, kCategory, kTransfer, kKernel, kOp };
  What what = What::kNothing;
  std::string name;    // the category, transfer kind or kernel/op name
  Change ns_per_step;  // on the average host of each side
  // Occurrences per step on the average host (transfers, kernels, ops), in thousandths; -1 for a
  // category.
  Change milli_count_per_step = {-1, -1};
  std::string sentence;
};

struct Diff {
  static constexpr int kSchemaVersion = 2;
  DiffHeadline headline;
  Change pod_steps;         // PodBreakdown::steps
  Change pod_step_time_ns;  // mean pod step time (the slowest host's)
  Change pod_hosts;         // hosts with complete steps
  // The average host's mean time per step, per Category (each host's mean, averaged over hosts).
  std::array<Change, kNumCategories> pod_categories;
  StragglerSummary straggler_a;
  StragglerSummary straggler_b;
  bool straggler_changed = false;  // another host (pair), or named on one side only
  bool cause_changed = false;      // the same straggler with another cause
  std::vector<std::string> consistently_slow_a;
  std::vector<std::string> consistently_slow_b;
  // A's outliers in A's order (largest first), then those only in B in B's order.
  std::vector<OutlierDiff> outliers;
  // How the hosts were paired: the method that paired them (kUnpaired: none could be) and, for
  // people, why the others are unpaired.
  HostPairing pairing = HostPairing::kUnpaired;
  std::string pairing_note;
  // Pairs in A's order, then hosts only in B in B's order.
  std::vector<HostDiff> hosts;
  // The top_n by |change of time per step|, largest first (then by name); unchanged ones left
  // out. Empty unless both sides have the tools (has_tools). `kernels` holds the copies and
  // memsets too.
  std::vector<NameDiff> kernels;
  std::vector<NameDiff> ops;
  // Every transfer kind seen on either side, in TransferKind order.
  std::vector<TransferDiff> transfers;
  bool has_tools = false;
};

struct DiffOptions {
  size_t top_n = 10;
};

// The pairs of hosts of two sides (each host's name and rank, -1: unknown), as ComputeDiff pairs
// them (see the header comment): for each host of A, the index in B of its pair (nullopt:
// unpaired), and the method.
struct HostPairs {
  HostPairing method = HostPairing::kUnpaired;
  std::vector<std::optional<size_t>> b_of_a;
  std::string note;  // why hosts are unpaired, when some are
};
HostPairs PairHosts(absl::Span<const std::string> a_names, absl::Span<const int64_t> a_ranks,
                    absl::Span<const std::string> b_names, absl::Span<const int64_t> b_ranks);

Diff ComputeDiff(const DiffInput& a, const DiffInput& b, const DiffOptions& options = {});

}  // namespace profctl::analysis

#endif  // PROFCTL_ANALYSIS_TOOLS_DIFF_H_
