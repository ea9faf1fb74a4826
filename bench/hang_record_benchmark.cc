// What the hang verdict's record costs `profctl analyze` of a session folder: one heavy synthetic
// host (8 GPUs, 256 kernels a step, an all-reduce a step, 3 s) read by the XSpace wire reader
// for the breakdown alone (a loose file), with the hang record in the same pass (a session
// folder), and with everything the capture keeps as it saves a host (the record, alignment's
// collective ends, the counts). The record's share is the difference over the second: the goal
// is <= 5 % (docs/perf.md, with callgrind's counts of `profctl analyze` before and after).
#include <benchmark/benchmark.h>

#include <string>

#include "analysis/readers/xspace_reader.h"
#include "common/byte_source.h"
#include "common/clock.h"
#include "synthetic/synthetic_job.h"
#include "xspace/xspace.h"

namespace profctl {
namespace {

constexpr int64_t kT0 = 1'767'225'600LL * kNanosPerSecond;

struct Host {
  std::string bytes;
  int64_t events = 0;
};

const Host& HeavyHost() {
  static const Host* const host = [] {
    synthetic::SyntheticJobConfig c =
        *synthetic::ParseSyntheticJobConfig("world=4,gpus=8,step_ms=100,kernels_per_step=256");
    tensorflow::profiler::XSpace space;
    synthetic::SyntheticJob(c).Generate(kT0, kT0 + 3 * kNanosPerSecond, &space);
    auto* h = new Host;
    h->bytes = space.SerializeAsString();
    h->events = xspace::CountEvents(space);
    return h;
  }();
  return *host;
}

const analysis::StepMatcher& Matcher() {
  static const auto* const m =
      new analysis::StepMatcher(*analysis::StepMatcher::Create(analysis::kDefaultStepPattern));
  return *m;
}

void Run(benchmark::State& state, const analysis::HostDecodeOptions& options) {
  const Host& host = HeavyHost();
  for (auto _ : state) {
    absl::StatusOr<analysis::HostDecode> d =
        analysis::DecodeXSpaceHost(StringByteSource(host.bytes), "h", 0, Matcher(), options);
    benchmark::DoNotOptimize(d);
  }
  state.counters["events"] = static_cast<double>(host.events);
  state.counters["ns/event"] = benchmark::Counter(
      static_cast<double>(host.events),
      benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}

// `profctl analyze` of loose files: the breakdown's input only.
void BM_BreakdownOnly(benchmark::State& state) {
  Run(state, {.breakdown = true, .collectives = false});
}
BENCHMARK(BM_BreakdownOnly)->Unit(benchmark::kMillisecond);

// `profctl analyze` of a session folder: the breakdown's input and the hang record, one pass.
void BM_BreakdownAndHangRecord(benchmark::State& state) {
  Run(state, {.breakdown = true, .collectives = true});
}
BENCHMARK(BM_BreakdownAndHangRecord)->Unit(benchmark::kMillisecond);

// The capture's save: the above, alignment's collective ends and session.json's counts.
void BM_EverythingASavedHostKeeps(benchmark::State& state) {
  Run(state, {.breakdown = true, .collectives = true, .collective_ends = true, .counts = true});
}
BENCHMARK(BM_EverythingASavedHostKeeps)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace profctl

BENCHMARK_MAIN();
