// The step breakdown at pod scale. BM_SummarizeHost: one host of `range(0)` ops over 500 steps on
// `range(1)` GPUs, shaped like docs/synthetic-job.md's job (input wait, H2D, kernels with their
// launches, an all-reduce, D2H, sync), host ops shuffled (their order is unspecified).
// BM_BuildPodBreakdown: `range(0)` host summaries of 500 steps and 8 GPUs each, one straggler.
// 64 hosts x 1 M ops at once would not fit CI memory: SummarizeHost runs per host as traces
// arrive, so the pod's cost is 64 x BM_SummarizeHost + BM_BuildPodBreakdown.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "analysis/breakdown.h"
#include "analysis/host_trace.h"

namespace profctl::analysis {
namespace {

constexpr int64_t kUs = 1'000;
constexpr int64_t kMs = 1'000'000;
constexpr int64_t kSteps = 500;
constexpr int64_t kT0 = 1'767'225'600LL * 1'000'000'000;

// About `ops` ops: per step and GPU, 2 * kernels + 8 ops.
HostTrace Host(const std::string& name, int64_t ops, int64_t gpus, double factor, uint64_t seed) {
  const int64_t kernels = std::max<int64_t>(1, (ops / (kSteps * gpus) - 8) / 2);
  const int64_t period = 120 * kMs;
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int64_t> jitter(0, 2 * kMs);
  HostTrace t;
  t.host = name;
  t.window_start_ns = kT0 - 5 * kMs;
  t.window_end_ns = kT0 + kSteps * period + 5 * kMs;
  t.host_ops.reserve(static_cast<size_t>(kSteps * gpus * (kernels + 5)));
  for (int64_t g = 0; g < gpus; ++g) {
    DeviceTrace d{g, "/device:GPU:" + std::to_string(g), {}};
    d.ops.reserve(static_cast<size_t>(kSteps * (kernels + 3)));
    t.devices.push_back(std::move(d));
  }
  for (int64_t k = 0; k < kSteps; ++k) {
    const int64_t s = kT0 + k * period;
    for (int64_t g = 0; g < gpus; ++g) {
      std::vector<Op>& dev = t.devices[static_cast<size_t>(g)].ops;
      t.steps.push_back(StepMarker{k, s, s + period, 1000 + g});
      const int64_t input_end = s + 10 * kMs + jitter(rng);
      t.host_ops.push_back(Op{s, input_end, OpKind::kHostInputWait});
      t.host_ops.push_back(Op{input_end, input_end + 10 * kUs, OpKind::kHostLaunch});
      const int64_t h2d_end = input_end + 10 * kUs + 5 * kMs;
      dev.push_back(Op{input_end + 10 * kUs, h2d_end, OpKind::kMemcpyH2D});
      const auto compute = static_cast<int64_t>(50.0 * factor * kMs);
      int64_t at = h2d_end + 8 * kUs;
      for (int64_t j = 0; j < kernels; ++j) {
        const int64_t launch = h2d_end + j * 10 * kUs;
        t.host_ops.push_back(Op{launch, launch + 8 * kUs, OpKind::kHostLaunch});
        const int64_t end = at + compute / kernels;
        dev.push_back(Op{std::max(at, launch + 8 * kUs), end, OpKind::kDeviceCompute});
        at = end;
      }
      t.host_ops.push_back(Op{at - 10 * kUs, at - 2 * kUs, OpKind::kHostLaunch});
      const int64_t allreduce_end = s + 100 * kMs;
      dev.push_back(Op{at, allreduce_end, OpKind::kCollective});
      t.host_ops.push_back(Op{allreduce_end, allreduce_end + 8 * kUs, OpKind::kHostLaunch});
      dev.push_back(
          Op{allreduce_end + 8 * kUs, allreduce_end + 8 * kUs + 2 * kMs, OpKind::kMemcpyD2H});
      t.host_ops.push_back(
          Op{allreduce_end + 8 * kUs, allreduce_end + 13 * kUs + 2 * kMs, OpKind::kHostSync});
    }
  }
  std::shuffle(t.host_ops.begin(), t.host_ops.end(), rng);
  return t;
}

int64_t OpCount(const HostTrace& t) {
  auto n = static_cast<int64_t>(t.host_ops.size());
  for (const DeviceTrace& d : t.devices) n += static_cast<int64_t>(d.ops.size());
  return n;
}

void BM_SummarizeHost(benchmark::State& state) {
  const HostTrace trace = Host("worker-0", state.range(0), state.range(1), 1.0, 1);
  for (auto _ : state) {
    HostSummary summary = SummarizeHost(trace);
    benchmark::DoNotOptimize(summary);
  }
  state.counters["ops"] = static_cast<double>(OpCount(trace));
  state.counters["ops/s"] = benchmark::Counter(static_cast<double>(OpCount(trace)),
                                               benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_SummarizeHost)
    ->Args({1'000'000, 1})
    ->Args({1'000'000, 8})
    ->Unit(benchmark::kMillisecond);

void BM_BuildPodBreakdown(benchmark::State& state) {
  std::vector<HostSummary> hosts;
  for (int64_t h = 0; h < state.range(0); ++h) {
    // Small traces: the summaries' size does not depend on the trace's.
    const HostTrace t = Host("worker-" + std::to_string(h), 40'000, 8, h == 3 ? 1.2 : 1.0,
                             static_cast<uint64_t>(h) + 1);
    hosts.push_back(SummarizeHost(t));
  }
  for (auto _ : state) {
    PodBreakdown pod = BuildPodBreakdown(hosts);
    benchmark::DoNotOptimize(pod);
  }
  state.counters["host_steps/s"] = benchmark::Counter(
      static_cast<double>(state.range(0) * kSteps), benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_BuildPodBreakdown)->Arg(64)->Arg(1000)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace profctl::analysis

BENCHMARK_MAIN();
