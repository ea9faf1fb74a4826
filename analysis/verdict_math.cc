// The statistics of the pod view and its verdicts (breakdown_internal.h), and the public
// Percentile, StatsOf and PodView (breakdown.h).
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <utility>
#include <vector>

#include "analysis/breakdown.h"
#include "analysis/breakdown_internal.h"

namespace profctl::analysis {

int64_t Percentile(const std::vector<int64_t>& sorted, int p) {
  if (sorted.empty()) return 0;
  const auto n = static_cast<int64_t>(sorted.size());
  const int64_t rank = std::clamp<int64_t>((p * n + 99) / 100 - 1, 0, n - 1);
  return sorted[static_cast<size_t>(rank)];
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

const PodHostStep* PodView(const PodStep& step) {
  const PodHostStep* slowest = nullptr;
  for (const PodHostStep& h : step.hosts) {
    if (!step.straggler.empty() && h.host == step.straggler) return &h;
    if (slowest == nullptr || h.step_time_ns > slowest->step_time_ns) slowest = &h;
  }
  return slowest;
}

namespace breakdown_internal {
namespace {

constexpr double kMadToSigma = 1.4826;
constexpr double kMinNoiseSigmas = 3.0;
constexpr int64_t kMinExcessNs = 100'000;
constexpr double kMinExcessShareOfStep = 0.01;
constexpr size_t kMinStepsForNoise = 4;  // per host: fewer say little of its variation
// Tails are fitted from the quantiles 0.5 and 0.9 of |deviation| on one side: at least this many
// values in all, else the noise is taken as normal.
constexpr size_t kMinValuesForTails = 40;
// A host's tail is read off its own values with at least this many above its median (about 40
// judged steps); with fewer, the fitted floor alone.
constexpr size_t kMinValuesForEmpiricalTail = 20;
// The degrees of freedom a fit may reach: a Cauchy-like fit would push every floor to infinity.
constexpr double kMinDof = 3.0;
constexpr double kMaxDof = 200.0;

// ln B(a, b).
double LogBeta(double a, double b) { return std::lgamma(a) + std::lgamma(b) - std::lgamma(a + b); }

// The continued fraction of the incomplete beta function (modified Lentz).
double BetaFraction(double a, double b, double x) {
  constexpr double kTiny = 1e-300;
  constexpr double kEps = 1e-15;
  double c = 1;
  double d = 1 - (a + b) * x / (a + 1);
  if (std::abs(d) < kTiny) d = kTiny;
  d = 1 / d;
  double h = d;
  for (int m = 1; m <= 500; ++m) {
    const double m2 = 2.0 * m;
    double aa = m * (b - m) * x / ((a + m2 - 1) * (a + m2));
    d = 1 + aa * d;
    if (std::abs(d) < kTiny) d = kTiny;
    c = 1 + aa / c;
    if (std::abs(c) < kTiny) c = kTiny;
    d = 1 / d;
    h *= d * c;
    aa = -(a + m) * (a + b + m) * x / ((a + m2) * (a + m2 + 1));
    d = 1 + aa * d;
    if (std::abs(d) < kTiny) d = kTiny;
    c = 1 + aa / c;
    if (std::abs(c) < kTiny) c = kTiny;
    d = 1 / d;
    const double del = d * c;
    h *= del;
    if (std::abs(del - 1) < kEps) break;
  }
  return h;
}

// The regularized incomplete beta function I_x(a, b).
double IncompleteBeta(double a, double b, double x) {
  if (x <= 0) return 0;
  if (x >= 1) return 1;
  const double front = std::exp(a * std::log(x) + b * std::log1p(-x) - LogBeta(a, b));
  if (x < (a + 1) / (a + b + 2)) return front * BetaFraction(a, b, x) / a;
  return 1 - front * BetaFraction(b, a, 1 - x) / b;
}

// q(0.9) / q(0.5) of |T| for T ~ Student-t(dof): 2.44 for a normal, 3.08 for dof 3.
double TailRatio(double dof) {
  return StudentUpperQuantile(0.05, dof) / StudentUpperQuantile(0.25, dof);
}

// The dof whose TailRatio is `ratio` (0: no heavier than normal).
double DofOfTailRatio(double ratio) {
  if (!(ratio > TailRatio(kMaxDof))) return 0;
  if (ratio >= TailRatio(kMinDof)) return kMinDof;
  double lo = std::log(kMinDof), hi = std::log(kMaxDof);  // TailRatio falls as dof grows
  for (int i = 0; i < 60; ++i) {
    const double mid = (lo + hi) / 2;
    (TailRatio(std::exp(mid)) > ratio ? lo : hi) = mid;
  }
  return std::exp((lo + hi) / 2);
}

// 1.4826 x the MAD of the successive differences / sqrt 2: the step-to-step noise of a series
// whose level (a steady straggler) and slow spells cancel out in the differences.
double SuccessiveDifferenceSigma(const std::vector<double>& e) {
  std::vector<double> diffs;
  diffs.reserve(e.size() - 1);
  for (size_t i = 1; i < e.size(); ++i) diffs.push_back(e[i] - e[i - 1]);
  const double center = MedianOf(diffs);
  std::vector<double> deviation;
  deviation.reserve(diffs.size());
  for (const double x : diffs) deviation.push_back(std::abs(x - center));
  return kMadToSigma * MedianOf(std::move(deviation)) / std::sqrt(2.0);
}

// A host's deviations below its own median, as magnitudes: the side of its excess that a slow
// spell of its own cannot reach (with three hosts or more, the others' spells move the median of
// the others little).
std::vector<double> LowerDeviations(const std::vector<double>& e) {
  const double center = MedianOf(e);
  std::vector<double> out;
  for (const double x : e) {
    if (x < center) out.push_back(center - x);
  }
  return out;
}

// A host's deviations above its own median: the side that holds its own slow spells.
std::vector<double> UpperDeviations(const std::vector<double>& e) {
  std::vector<double> negated;
  negated.reserve(e.size());
  for (const double x : e) negated.push_back(-x);
  return LowerDeviations(negated);
}

// The ratio q(0.9) / q(0.5) of `v`, 0 when it cannot be computed.
double RatioOf(const std::vector<double>& v) {
  const double q50 = QuantileOf(v, 0.5);
  return q50 > 0 ? QuantileOf(v, 0.9) / q50 : 0;
}

}  // namespace

double MedianOf(std::vector<double> v) {
  if (v.empty()) return 0;
  const size_t n = v.size();
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(n / 2), v.end());
  const double upper = v[n / 2];
  if (n % 2 == 1) return upper;
  return (upper + *std::max_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(n / 2))) / 2;
}

int64_t Median(std::vector<int64_t> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return Percentile(v, 50);
}

double QuantileOf(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const double at = std::clamp(q, 0.0, 1.0) * static_cast<double>(v.size() - 1);
  const auto lo = static_cast<size_t>(std::floor(at));
  const size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (at - static_cast<double>(lo));
}

double NormalUpperTail(double z) { return 0.5 * std::erfc(z / std::sqrt(2.0)); }

double NormalUpperQuantile(double p) {
  double lo = -40, hi = 40;
  for (int i = 0; i < 200; ++i) {
    const double mid = (lo + hi) / 2;
    (NormalUpperTail(mid) > p ? lo : hi) = mid;
  }
  return lo;
}

double BinomialTail(int64_t n, int64_t k, double p) {
  if (k <= 0) return 1;
  if (k > n) return 0;
  const double mode = static_cast<double>(n) * p;
  double tail = 0;
  for (int64_t i = k; i <= n; ++i) {
    const double log_pmf =
        std::lgamma(static_cast<double>(n + 1)) - std::lgamma(static_cast<double>(i + 1)) -
        std::lgamma(static_cast<double>(n - i + 1)) + static_cast<double>(i) * std::log(p) +
        static_cast<double>(n - i) * std::log1p(-p);
    const double term = std::exp(log_pmf);
    tail += term;
    // Past the mode the terms fall geometrically: the rest cannot matter.
    if (static_cast<double>(i) > mode && term <= tail * 1e-17) break;
  }
  return std::min(tail, 1.0);
}

double StudentUpperTail(double t, double dof) {
  if (t <= 0) return 0.5;
  return 0.5 * IncompleteBeta(dof / 2, 0.5, dof / (dof + t * t));
}

double StudentUpperQuantile(double p, double dof) {
  if (p >= 0.5) return 0;
  double lo = 0, hi = 1;
  while (StudentUpperTail(hi, dof) > p && hi < 1e12) hi *= 2;
  for (int i = 0; i < 200; ++i) {
    const double mid = (lo + hi) / 2;
    (StudentUpperTail(mid, dof) > p ? lo : hi) = mid;
  }
  return lo;
}

std::vector<int64_t> ExcessOverOthers(const std::vector<int64_t>& values) {
  const size_t n = values.size();
  std::vector<int64_t> out(n, 0);
  if (n < 2) return out;
  std::vector<std::pair<int64_t, size_t>> sorted;  // (value, index), ascending
  sorted.reserve(n);
  for (size_t i = 0; i < n; ++i) sorted.emplace_back(values[i], i);
  std::sort(sorted.begin(), sorted.end());
  const size_t m = n - 1;  // the others
  for (size_t p = 0; p < n; ++p) {
    // The others' k-th smallest, skipping position p.
    const auto other = [&](size_t k) {
      return static_cast<double>(sorted[k < p ? k : k + 1].first);
    };
    const double median = m % 2 == 1 ? other(m / 2) : (other(m / 2 - 1) + other(m / 2)) / 2;
    out[sorted[p].second] = sorted[p].first - static_cast<int64_t>(std::llround(median));
  }
  return out;
}

NoiseFit FitNoise(const std::vector<std::vector<double>>& per_host) {
  NoiseFit fit;
  std::vector<double> sigmas;
  size_t hosts = 0;
  for (const std::vector<double>& e : per_host) {
    if (e.size() < kMinStepsForNoise) continue;
    ++hosts;
    sigmas.push_back(SuccessiveDifferenceSigma(e));
  }
  fit.sigma = MedianOf(std::move(sigmas));
  if (fit.sigma <= 0) return fit;
  // The tails: with three hosts or more, every host's lower deviations pooled, each scaled by its
  // own median deviation; with two, each host's excess mirrors the other's, so one side of the
  // pair may hold the other host's slow spells: the lighter of the two sides.
  double ratio = 0;
  if (hosts >= 3) {
    std::vector<double> pooled;
    for (const std::vector<double>& e : per_host) {
      if (e.size() < kMinStepsForNoise) continue;
      std::vector<double> lower = LowerDeviations(e);
      const double scale = QuantileOf(lower, 0.5);
      if (scale <= 0) continue;
      for (const double v : lower) pooled.push_back(v / scale);
    }
    if (pooled.size() >= kMinValuesForTails) ratio = RatioOf(pooled);
  } else {
    for (const std::vector<double>& e : per_host) {
      if (e.size() < kMinStepsForNoise) continue;
      const std::vector<double> lower = LowerDeviations(e);
      if (lower.size() < kMinValuesForTails) continue;
      const double r = RatioOf(lower);
      if (r > 0) ratio = ratio == 0 ? r : std::min(ratio, r);
    }
  }
  fit.dof = DofOfTailRatio(ratio);
  return fit;
}

double EmpiricalTailFloor(const std::vector<std::vector<double>>& per_host, size_t compared,
                          double false_rate) {
  // P(a host's deviation > x) = p / compared a step; among the deviations above the median (half
  // of them), twice that.
  const double q = 1 - 2 * false_rate / static_cast<double>(std::max<size_t>(compared, 1));
  std::vector<double> floors;
  for (const std::vector<double>& e : per_host) {
    if (e.size() < kMinStepsForNoise) continue;
    std::vector<double> upper = UpperDeviations(e);
    if (upper.size() < kMinValuesForEmpiricalTail) continue;
    floors.push_back(QuantileOf(std::move(upper), q));
  }
  if (floors.empty()) return 0;
  // A host's slow spells are in its own upper tail: the median host's tail with three hosts or
  // more; with two, each mirrors the other's spells, so the lighter of the two.
  if (floors.size() >= 3) return MedianOf(std::move(floors));
  return *std::min_element(floors.begin(), floors.end());
}

double FloorSigmas(const NoiseFit& fit, size_t compared, double false_rate) {
  const double p = false_rate / static_cast<double>(std::max<size_t>(compared, 1));
  if (fit.dof <= 0) return std::max(kMinNoiseSigmas, NormalUpperQuantile(p));
  // A Student-t scaled by its MAD: sigma (1.4826 x MAD) is 1.4826 x q(0.75) of its scale.
  const double scale = kMadToSigma * StudentUpperQuantile(0.25, fit.dof);
  return std::max(kMinNoiseSigmas, StudentUpperQuantile(p, fit.dof) / scale);
}

int64_t NoiseModel::Floor(const NoiseFit& fit, size_t compared, double false_rate) const {
  const double z = FloorSigmas(fit, compared, false_rate);
  const double floor = std::min(z * fit.sigma, 9e18);
  return std::max<int64_t>({kMinExcessNs, static_cast<int64_t>(std::llround(floor)),
                            static_cast<int64_t>(std::llround(
                                kMinExcessShareOfStep * static_cast<double>(median_pod_step_ns)))});
}

}  // namespace breakdown_internal
}  // namespace profctl::analysis
