#include "report/breakdown_headline.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace profctl::report::breakdown_internal {

using analysis::CategoryName;
using analysis::HostReport;
using analysis::kNumCategories;
using analysis::PodBreakdown;
using analysis::PodHostStep;
using analysis::PodStep;
using analysis::Stats;

int64_t RoundNs(double ns) {
  if (!std::isfinite(ns)) return 0;
  if (ns >= 9.2e18) return std::numeric_limits<int64_t>::max();
  if (ns <= -9.2e18) return std::numeric_limits<int64_t>::min();
  return std::llround(ns);
}

// Nearest-rank percentile of sorted values (p in 0..100); 0 for none.
int64_t Percentile(const std::vector<int64_t>& sorted, int p) {
  if (sorted.empty()) return 0;
  const size_t n = sorted.size();
  size_t rank = (static_cast<size_t>(p) * n + 99) / 100;  // ceil(p * n / 100)
  if (rank == 0) rank = 1;
  return sorted[std::min(rank, n) - 1];
}

Stats StatsOf(std::vector<int64_t> values) {
  Stats s;
  if (values.empty()) return s;
  std::sort(values.begin(), values.end());
  long double sum = 0;
  for (const int64_t v : values) sum += static_cast<long double>(v);
  s.mean_ns = static_cast<double>(sum / static_cast<long double>(values.size()));
  s.p50_ns = Percentile(values, 50);
  s.p90_ns = Percentile(values, 90);
  return s;
}

// The host whose view stands for the pod in a step: the straggler, else the slowest host.
const PodHostStep* PodView(const PodStep& step) {
  const PodHostStep* slowest = nullptr;
  for (const PodHostStep& h : step.hosts) {
    if (!step.straggler.empty() && h.host == step.straggler) return &h;
    if (slowest == nullptr || h.step_time_ns > slowest->step_time_ns) slowest = &h;
  }
  return slowest;
}

// The analysis reports "no cause" as kIdle (idle is never a cause).
bool HasCause(const PodStep& step) {
  return !step.straggler.empty() && step.cause != Category::kIdle;
}

// --- The headline: "who is slow and why", shared by the JSON and the table -------------------

double PctOf(int64_t part, int64_t whole) {
  return whole <= 0 ? 0.0 : 100.0 * static_cast<double>(part) / static_cast<double>(whole);
}

int64_t PerStep(int64_t total, int64_t steps) { return steps <= 0 ? 0 : total / steps; }

Headline MakeHeadline(const PodBreakdown& b) {
  Headline out;
  // Most frequent straggler; ties go to the host that comes first in host order.
  std::map<std::string, int64_t> counts;
  for (const PodStep& s : b.steps) {
    if (s.straggler.empty()) continue;
    ++out.steps_with_straggler;
    ++counts[s.straggler];
  }
  std::string top;
  int64_t top_count = 0;
  for (const HostReport& h : b.hosts) {
    auto it = counts.find(h.host);
    if (it != counts.end() && it->second > top_count) {
      top = h.host;
      top_count = it->second;
    }
  }
  for (const auto& [host, n] : counts) {  // a straggler missing from b.hosts
    if (n > top_count) {
      top = host;
      top_count = n;
    }
  }
  if (top_count > 0) {
    StragglerHeadline sh;
    sh.host = top;
    sh.steps = top_count;
    std::array<int64_t, kNumCategories> by_cause{};
    for (const PodStep& s : b.steps) {
      if (s.straggler == top && HasCause(s)) ++by_cause[static_cast<int>(s.cause)];
    }
    int best = -1;
    for (int c = 0; c < kNumCategories; ++c) {
      if (by_cause[c] > 0 && (best < 0 || by_cause[c] > by_cause[best])) best = c;
    }
    if (best >= 0) {
      sh.cause = CategoryAt(best);
      std::vector<int64_t> excess;
      for (const PodStep& s : b.steps) {
        if (s.straggler == top && HasCause(s) && s.cause == *sh.cause) {
          excess.push_back(s.cause_excess_ns);
          sh.example_step = s.step;
          sh.why = s.why;
        }
      }
      std::sort(excess.begin(), excess.end());
      sh.cause_steps = static_cast<int64_t>(excess.size());
      sh.cause_excess_ns = Percentile(excess, 50);
    } else {
      for (const PodStep& s : b.steps) {
        if (s.straggler == top) {
          sh.example_step = s.step;
          sh.why = s.why;
        }
      }
    }
    out.straggler = std::move(sh);
  }

  // Input: the host whose mean input per step exceeds the median host's the most.
  std::vector<int64_t> inputs;
  std::vector<int64_t> step_times;
  for (const HostReport& h : b.hosts) {
    if (h.steps == 0) continue;
    inputs.push_back(RoundNs(h.categories[static_cast<int>(Category::kInput)].mean_ns));
    step_times.push_back(RoundNs(h.step_time.mean_ns));
  }
  std::sort(inputs.begin(), inputs.end());
  std::sort(step_times.begin(), step_times.end());
  out.median_input_ns = Percentile(inputs, 50);
  out.median_step_ns = Percentile(step_times, 50);
  if (inputs.size() >= 2) {
    for (const HostReport& h : b.hosts) {
      if (h.steps == 0) continue;
      const int64_t input = RoundNs(h.categories[static_cast<int>(Category::kInput)].mean_ns);
      const int64_t excess = input - out.median_input_ns;
      const int64_t step = RoundNs(h.step_time.mean_ns);
      // Standing out means more than 1% of its own step (and at least a microsecond).
      if (excess < std::max<int64_t>(1000, step / 100)) continue;
      if (out.input_bound && excess <= out.input_bound->excess_ns) continue;
      out.input_bound = InputHeadline{h.host, input, out.median_input_ns, excess, step};
    }
  }
  return out;
}

}  // namespace profctl::report::breakdown_internal
