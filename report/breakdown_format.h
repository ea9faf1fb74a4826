// Internal to report/: the small arithmetic the breakdown's JSON, its terminal table and
// report.html print with. Every verdict they print is the analysis's (analysis/pod_verdict.h).
#ifndef PROFCTL_REPORT_BREAKDOWN_FORMAT_H_
#define PROFCTL_REPORT_BREAKDOWN_FORMAT_H_

#include <cmath>
#include <cstdint>
#include <limits>

#include "analysis/breakdown.h"

namespace profctl::report::breakdown_internal {

inline analysis::Category CategoryAt(int i) { return static_cast<analysis::Category>(i); }

// A double of ns to int64 ns, saturating; 0 for NaN.
inline int64_t RoundNs(double ns) {
  if (!std::isfinite(ns)) return 0;
  if (ns >= 9.2e18) return std::numeric_limits<int64_t>::max();
  if (ns <= -9.2e18) return std::numeric_limits<int64_t>::min();
  return std::llround(ns);
}

// The analysis reports "no cause" as kIdle (idle is never a cause).
inline bool HasCause(const analysis::PodStep& step) {
  return !step.straggler.empty() && step.cause != analysis::Category::kIdle;
}

// 100 x part / whole; 0 for whole <= 0.
inline double PctOf(int64_t part, int64_t whole) {
  return whole <= 0 ? 0.0 : 100.0 * static_cast<double>(part) / static_cast<double>(whole);
}

// total / steps; 0 for no steps.
inline int64_t PerStep(int64_t total, int64_t steps) { return steps <= 0 ? 0 : total / steps; }

}  // namespace profctl::report::breakdown_internal

#endif  // PROFCTL_REPORT_BREAKDOWN_FORMAT_H_
