// What breakdown.cc (the per-host summary), pod_breakdown.cc (the pod view) and pod_verdict.cc
// (the pod's verdicts) share. Internal to analysis/: users include breakdown.h.
#ifndef PROFCTL_ANALYSIS_BREAKDOWN_INTERNAL_H_
#define PROFCTL_ANALYSIS_BREAKDOWN_INTERNAL_H_

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "analysis/breakdown.h"
#include "analysis/pod_verdict.h"

namespace profctl::analysis::breakdown_internal {

// `ns` in ms to 0.1 ms ("12.3", "-0.5"), rounded half away from zero, without floating point:
// the numbers of warnings and verdicts.
std::string Ms(int64_t ns);

// --- Statistics (verdict_math.cc) -------------------------------------------------------------

// The true median (mean of the middle two for an even count); 0 for none.
double MedianOf(std::vector<double> v);
// The nearest-rank median (the lower middle of an even count); 0 for none.
int64_t Median(std::vector<int64_t> v);
// The q-quantile (0..1, linear between order statistics) of `v`; 0 for none.
double QuantileOf(std::vector<double> v, double q);
// The z with P(Z > z) = p for a standard normal Z.
double NormalUpperQuantile(double p);
// P(Z > z) for a standard normal Z.
double NormalUpperTail(double z);
// P(X >= k) for X ~ Binomial(n, p), 0 < p < 1.
double BinomialTail(int64_t n, int64_t k, double p);
// P(T > t) for T ~ Student-t with `dof` degrees of freedom (t >= 0), and the t with P(T > t) = p.
double StudentUpperTail(double t, double dof);
double StudentUpperQuantile(double p, double dof);

// Per value: it minus the median of the other values (0 with one value), in O(n log n).
std::vector<int64_t> ExcessOverOthers(const std::vector<int64_t>& values);

// The step-to-step noise of per-host series of a host's excess over the others, and how heavy
// its tails are (docs/pod-step-breakdown.md "Stragglers and noise").
struct NoiseFit {
  // A robust standard deviation: per host with at least 4 values, 1.4826 x the MAD of its
  // successive differences / sqrt 2; the median over hosts.
  double sigma = 0;
  // Student-t degrees of freedom fitted to the tails of the hosts' deviations from their own
  // median, on the side a slow spell cannot reach (0: no heavier than normal, or too few values
  // to tell).
  double dof = 0;
};
NoiseFit FitNoise(const std::vector<std::vector<double>>& per_host);

// A floor read off the hosts' own tails, whatever their shape: per host, the quantile of its
// deviations above its own median that one of `compared` values a step passes at `false_rate`;
// the median host's (a host's slow spells make only its own tail heavy), with two hosts the
// lighter one's (each mirrors the other). It keeps the false rate when the fitted tails are
// wrong: too few values, a mixture of noises, the right skew of a host's slowest of several
// GPUs. 0 with fewer than 20 values above a host's median (about 40 steps).
double EmpiricalTailFloor(const std::vector<std::vector<double>>& per_host, size_t compared,
                          double false_rate);

// What every floor is made of: the fitted noise, the family of values compared per step, and
// the minimum floors.
struct NoiseModel {
  int64_t median_pod_step_ns = 0;
  // max(z x sigma, 0.1 ms, 1 % of the median pod step time), where z leaves `false_rate` over the
  // largest of `compared` values per step under the fitted noise (normal, or Student-t with the
  // fitted dof, scaled by its MAD), and at least 3.
  int64_t Floor(const NoiseFit& fit, size_t compared, double false_rate = 0.01) const;
};

// The z a floor uses (NoiseModel::Floor) for `compared` values per step.
double FloorSigmas(const NoiseFit& fit, size_t compared, double false_rate);

// What the judged steps showed per host, for the verdicts: indices are those of the hosts given
// to BuildPodBreakdown.
struct PodTally {
  std::vector<int64_t> named;       // judged steps it was named the straggler
  std::vector<int64_t> last_ready;  // judged steps it was the candidate (the last one ready)
  // Per judged step it shared with another host: its excess (busy time minus the other hosts'
  // median busy time), and that median.
  std::vector<std::vector<double>> excess;
  std::vector<std::vector<double>> others_busy;
  // Per category a host can stand out in: per host, its excess per judged step it shared.
  std::array<std::vector<std::vector<double>>, kNumCategories> category_excess;
  std::array<std::vector<int64_t>, kNumCategories> beyond;  // steps beyond the category's floor
  // Judged steps with at least two hosts, and the noise of the hosts' excess over them.
  NoiseFit noise;
  int64_t hosts_compared = 0;
  // Steps compared by number though their hosts' starts disagree with no majority.
  int64_t doubtful_steps = 0;
  // Why the traces are not one run (pod_breakdown.cc DifferentRuns); empty: one run.
  std::string different_runs;
};

// The pod's verdicts from its judged steps (pod_verdict.cc).
PodVerdict JudgePod(const std::vector<HostSummary>& hosts, const PodBreakdown& pod,
                    const PodTally& tally, const PodInputs& inputs);

}  // namespace profctl::analysis::breakdown_internal

#endif  // PROFCTL_ANALYSIS_BREAKDOWN_INTERNAL_H_
