// The flight recorder's cost to the agent (docs/flight-recorder.md, "Memory and cost"): what
// recording one step of the synthetic job costs (its plan, the ring's push and, once the ring is
// full, the eviction of the oldest step), and a tick that finds no step ended. Without the
// recorder none of this runs, so this is the recorder's cost against none; divided by the step
// time it is the share of one core the recorder takes.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <string>

#include "agent/collectors/collector.h"
#include "agent/collectors/synthetic/synthetic_collector.h"
#include "common/clock.h"
#include "synthetic/synthetic_job.h"

namespace profctl {
namespace {

constexpr int64_t kT0 = 1'767'225'600LL * kNanosPerSecond;
constexpr int64_t kStepMs = 100;

agent::SyntheticCollector MakeJob(int64_t kernels_per_step) {
  return agent::SyntheticCollector(*synthetic::ParseSyntheticJobConfig(
      "world=8,gpus=8,step_ms=100,kernels_per_step=" + std::to_string(kernels_per_step)));
}

// One tick per step, each finding one step ended: plan + push (+ eviction once the 8 MiB ring is
// full, which it is after the first few hundred iterations). range(0): kernels per step per GPU.
void BM_RecordOneSyntheticStep(benchmark::State& state) {
  agent::SyntheticCollector job = MakeJob(state.range(0));
  if (!job.StartRecorder({.keep_ns = 3600 * kNanosPerSecond, .max_bytes = int64_t{8} << 20}, kT0)
           .ok()) {
    state.SkipWithError("StartRecorder failed");
    return;
  }
  int64_t t = kT0 + kNanosPerSecond;
  job.RecordUntil(t);
  for (auto _ : state) {
    t += kStepMs * kNanosPerMilli;
    job.RecordUntil(t);
  }
  const agent::RecorderStats stats = job.recorder_stats();
  state.counters["ring_steps"] = static_cast<double>(stats.records);
  state.counters["ring_bytes_per_step"] =
      stats.records > 0 ? static_cast<double>(stats.bytes) / static_cast<double>(stats.records) : 0;
  state.counters["evicted"] = static_cast<double>(stats.evicted);
}
BENCHMARK(BM_RecordOneSyntheticStep)->Arg(16)->Arg(64)->Arg(256)->Unit(benchmark::kMicrosecond);

// The 100 ms tick when no step ended since the last one (steps of 10 min): the floor of the tick.
void BM_TickWithNoStepEnded(benchmark::State& state) {
  agent::SyntheticCollector job(
      *synthetic::ParseSyntheticJobConfig("world=8,gpus=8,step_ms=600000,kernels_per_step=64"));
  if (!job.StartRecorder({.keep_ns = 3600 * kNanosPerSecond, .max_bytes = int64_t{8} << 20}, kT0)
           .ok()) {
    state.SkipWithError("StartRecorder failed");
    return;
  }
  int64_t t = kT0 + kNanosPerSecond;
  for (auto _ : state) {
    t += 1;  // stays inside one step
    job.RecordUntil(t);
  }
}
BENCHMARK(BM_TickWithNoStepEnded)->Unit(benchmark::kNanosecond);

}  // namespace
}  // namespace profctl

BENCHMARK_MAIN();
