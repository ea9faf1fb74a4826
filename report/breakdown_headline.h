// Internal to report/: what the breakdown's JSON and its terminal table share: the headline
// ("who is slow and why", computed once from a PodBreakdown) and the small arithmetic both print
// with. Not an API: breakdown_writers.h is.
#ifndef PROFCTL_REPORT_BREAKDOWN_HEADLINE_H_
#define PROFCTL_REPORT_BREAKDOWN_HEADLINE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "analysis/breakdown.h"

namespace profctl::report::breakdown_internal {

inline analysis::Category CategoryAt(int i) { return static_cast<analysis::Category>(i); }
// A double of ns to int64 ns, saturating; 0 for NaN.
int64_t RoundNs(double ns);
// Nearest-rank percentile of sorted values (p in 0..100); 0 for none.
int64_t Percentile(const std::vector<int64_t>& sorted, int p);
analysis::Stats StatsOf(std::vector<int64_t> values);
// The host whose view stands for the pod in a step: the straggler, else the slowest host.
const analysis::PodHostStep* PodView(const analysis::PodStep& step);
// The analysis reports "no cause" as kIdle (idle is never a cause).
bool HasCause(const analysis::PodStep& step);
// 100 x part / whole; 0 for whole <= 0.
double PctOf(int64_t part, int64_t whole);
// total / steps; 0 for no steps.
int64_t PerStep(int64_t total, int64_t steps);

using analysis::Category;

struct StragglerHeadline {
  std::string host;
  int64_t steps = 0;  // steps in which it straggled
  std::optional<Category> cause;
  int64_t cause_steps = 0;      // of those, steps with the typical cause
  int64_t cause_excess_ns = 0;  // median excess over those steps
  int64_t example_step = 0;     // the last such step, with its why
  std::string why;
};

struct InputHeadline {
  std::string host;
  int64_t input_ns = 0;         // its mean input time per step
  int64_t median_input_ns = 0;  // the median host's
  int64_t excess_ns = 0;
  int64_t step_time_ns = 0;  // its mean step time
};

struct Headline {
  int64_t steps_with_straggler = 0;
  std::optional<StragglerHeadline> straggler;
  std::optional<InputHeadline> input_bound;
  // The median host's mean input per step and mean step time (for "nobody stands out").
  int64_t median_input_ns = 0;
  int64_t median_step_ns = 0;
};

Headline MakeHeadline(const analysis::PodBreakdown& b);

}  // namespace profctl::report::breakdown_internal

#endif  // PROFCTL_REPORT_BREAKDOWN_HEADLINE_H_
