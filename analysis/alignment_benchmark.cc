// RefineOffsets at pod scale: `range(0)` hosts x `range(1)` collectives each, RTT errors of a few
// ms, skews of seconds, 2 GPUs per host (so deduplication runs too).
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

}  // namespace
}  // namespace profctl::analysis

BENCHMARK_MAIN();
