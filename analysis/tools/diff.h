// `profctl diff A B`: what changed between two analysed captures (two sessions, folders or trace
// sets of any source profctl reads). Pure (no I/O): each side's pod breakdown and its pod-wide
// kernel_stats / op_stats go in, a Diff comes out; report/diff_writers.h renders it.
//
// Hosts are matched by name; a host on one side only is listed as such, never compared. Times
// per step are the hosts' means over their complete steps (HostReport), so captures of
// different lengths compare; kernels and ops are compared by their time per pod step (their
// pod-wide total, summed over hosts / the side's pod steps, or the total when it has none).
// docs/tools.md "profctl diff" documents every field for users.
#ifndef PROFCTL_ANALYSIS_TOOLS_DIFF_H_
#define PROFCTL_ANALYSIS_TOOLS_DIFF_H_

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/types/span.h"
#include "analysis/breakdown.h"
#include "analysis/tools/tools.h"

namespace profctl::analysis {

// One side of the diff.
struct DiffInput {
  const PodBreakdown* breakdown = nullptr;  // required
  bool has_tools = false;                   // kernel_stats and op_stats were computed
  absl::Span<const KernelStat> kernels;     // PodTools::kernels (kernel_stats, pod-wide)
  absl::Span<const OpStat> ops;             // PodTools::ops.by_op (op_stats, pod-wide)
};

// A value on both sides. delta() = b - a.
struct Change {
  int64_t a = 0;
  int64_t b = 0;
  int64_t delta() const { return b - a; }
  // 100 x (b - a) / a; NaN when a == 0 (no base to compare with).
  double pct() const;
};

struct HostDiff {
  std::string host;
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

// A kernel (by name, summed over its launching ops: its total time) or an op (by name: its device
// self time when it launched kernels, else its host self time) whose time changed.
struct NameDiff {
  std::string name;
  Change ns_per_step;  // total time / the side's pod steps
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
struct OutlierDiff {
  std::string host;
  Category category = Category::kCompute;
  bool in_a = false;
  bool in_b = false;
  Change median_excess_ns;
};

struct Diff {
  static constexpr int kSchemaVersion = 1;
  Change pod_steps;         // PodBreakdown::steps
  Change pod_step_time_ns;  // mean pod step time (the slowest host's)
  StragglerSummary straggler_a;
  StragglerSummary straggler_b;
  bool straggler_changed = false;  // another host, or named on one side only
  bool cause_changed = false;      // the same straggler with another cause
  std::vector<std::string> consistently_slow_a;
  std::vector<std::string> consistently_slow_b;
  // A's outliers in A's order (largest first), then those only in B in B's order.
  std::vector<OutlierDiff> outliers;
  // Hosts of A in A's order, then those only in B in B's order.
  std::vector<HostDiff> hosts;
  // The top_n by |change of time per step|, largest first (then by name); unchanged ones left
  // out. Empty unless both sides have the tools (has_tools).
  std::vector<NameDiff> kernels;
  std::vector<NameDiff> ops;
  bool has_tools = false;
};

struct DiffOptions {
  size_t top_n = 10;
};

Diff ComputeDiff(const DiffInput& a, const DiffInput& b, const DiffOptions& options = {});

}  // namespace profctl::analysis

#endif  // PROFCTL_ANALYSIS_TOOLS_DIFF_H_
