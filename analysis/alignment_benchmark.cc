// RefineOffsets at pod scale: `range(0)` hosts x `range(1)` collectives each, RTT errors of a few
// ms, skews of seconds, 2 GPUs per host (so deduplication runs too). BM_RefineOffsetsOddHosts:
// the first `range(2)` hosts each on a step grid of its own with more ends than the others (a
// shorter period, steps of random length), so each is tried as the reference before the pod's.
#include <benchmark/benchmark.h>

#include <random>
#include <vector>

#include "analysis/alignment.h"

namespace profctl::analysis {
namespace {

constexpr int64_t kMs = 1'000'000;
constexpr int64_t kT0 = 1'767'225'600LL * 1'000'000'000;

std::vector<HostClockInput> Pod(int64_t hosts, int64_t steps) {
  std::mt19937_64 rng(1);
  std::uniform_int_distribution<int64_t> skew(-5'000 * kMs, 5'000 * kMs);
  std::uniform_int_distribution<int64_t> rtt_error(-4 * kMs, 4 * kMs);
  std::uniform_int_distribution<int64_t> jitter(-30'000, 30'000);
  std::vector<HostClockInput> pod;
  for (int64_t h = 0; h < hosts; ++h) {
    const int64_t offset = skew(rng);
    HostClockInput in{offset + rtt_error(rng), 5 * kMs, {}};
    for (int64_t k = 0; k < steps; ++k) {
      const int64_t end = kT0 + k * 100 * kMs + offset + jitter(rng);
      in.collective_ends_ns.push_back(end);
      in.collective_ends_ns.push_back(end + 2'000);
    }
    pod.push_back(std::move(in));
  }
  return pod;
}

// Replaces the first `odd` hosts' ends with ones on a grid of their own: periods 60, 70, 80 ms
// (more ends than the pod's 100 ms), each step +-5 % long at random, so they match no one.
void AddOddHosts(int64_t odd, int64_t steps, std::vector<HostClockInput>* pod) {
  std::mt19937_64 rng(2);
  for (int64_t h = 0; h < odd && h < static_cast<int64_t>(pod->size()); ++h) {
    HostClockInput& in = (*pod)[static_cast<size_t>(h)];
    const int64_t period = (60 + 10 * (h % 3)) * kMs;
    std::uniform_int_distribution<int64_t> wobble(-period / 20, period / 20);
    in.collective_ends_ns.clear();
    int64_t end = kT0 + in.rtt_offset_ns;
    for (int64_t k = 0; k < steps * 100 * kMs / period; ++k) {
      end += period + wobble(rng);
      in.collective_ends_ns.push_back(end);
      in.collective_ends_ns.push_back(end + 2'000);
    }
  }
}

void BM_RefineOffsets(benchmark::State& state) {
  const std::vector<HostClockInput> pod = Pod(state.range(0), state.range(1));
  for (auto _ : state) {
    absl::StatusOr<std::vector<HostOffset>> out = RefineOffsets(pod);
    benchmark::DoNotOptimize(out);
  }
  state.counters["hosts/s"] = benchmark::Counter(static_cast<double>(state.range(0)),
                                                 benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_RefineOffsets)
    ->Args({64, 50})
    ->Args({1000, 50})
    ->Args({1000, 500})
    ->Unit(benchmark::kMillisecond);

void BM_RefineOffsetsOddHosts(benchmark::State& state) {
  std::vector<HostClockInput> pod = Pod(state.range(0), state.range(1));
  AddOddHosts(state.range(2), state.range(1), &pod);
  int64_t refined = 0;
  for (auto _ : state) {
    absl::StatusOr<std::vector<HostOffset>> out = RefineOffsets(pod);
    benchmark::DoNotOptimize(out);
    refined = 0;
    for (const HostOffset& h : out.value_or(std::vector<HostOffset>())) {
      refined += h.method == OffsetMethod::kCollectives;
    }
  }
  // Should be range(0) - range(2): every host but the odd ones.
  state.counters["refined"] = static_cast<double>(refined);
  state.counters["hosts/s"] = benchmark::Counter(static_cast<double>(state.range(0)),
                                                 benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_RefineOffsetsOddHosts)
    ->Args({1000, 50, 1})
    ->Args({1000, 50, 3})
    ->Args({1000, 500, 3})
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace profctl::analysis

BENCHMARK_MAIN();
