// What breakdown.cc (the per-host summary) and pod_breakdown.cc (the pod view) share.
// Internal to analysis/: users include breakdown.h.
#ifndef PROFCTL_ANALYSIS_BREAKDOWN_INTERNAL_H_
#define PROFCTL_ANALYSIS_BREAKDOWN_INTERNAL_H_

#include <cstdint>
#include <string>

namespace profctl::analysis::breakdown_internal {

// `ns` in ms to 0.1 ms ("12.3", "-0.5"), rounded half away from zero, without floating point:
// the numbers of warnings and verdicts.
std::string Ms(int64_t ns);

}  // namespace profctl::analysis::breakdown_internal

#endif  // PROFCTL_ANALYSIS_BREAKDOWN_INTERNAL_H_
