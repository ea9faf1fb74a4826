// The flight recorder's cost to the agent (docs/flight-recorder.md, "Memory and cost"): what
// recording one step of the synthetic job costs (its plan, the ring's push and, once the ring is
// full, the eviction of the oldest step), and a tick that finds no step ended. Without the
// recorder none of this runs, so this is the recorder's cost against none; divided by the step
// time it is the share of one core the recorder takes.
//
// The light level's cost to a CUDA process (docs/cupti.md, "The always-on level"): what each
// kernel launch of the application pays in CUPTI's launch callback while the recorder is on
// (inject/collective_launches.h): a non-NCCL launch (a look at its name), an NCCL launch (the
// clock, gettid, the mutex, the name interned, one ring entry). CUPTI's own callback dispatch
// is not in it: only a real GPU run measures that (scripts/gpu_verify.py --phases=recorder).
#include <benchmark/benchmark.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cstdint>
#include <string>
#include <vector>

#include "agent/collectors/collector.h"
#include "agent/collectors/synthetic/synthetic_collector.h"
#include "common/clock.h"
#include "inject/collective_launches.h"
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

// The stand-ins for cuptiGetTimestamp (a clock read) and the tracer's gettid.
uint64_t RealtimeNs() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000 + static_cast<uint64_t>(ts.tv_nsec);
}
uint32_t ThreadId() { return static_cast<uint32_t>(syscall(SYS_gettid)); }

// One launch callback at API entry. range(0): 0 a non-NCCL kernel (names as PyTorch's and
// cuBLAS's kernels look to CUPTI, mangled or not), 1 an NCCL kernel (its name's pointer seen
// before, as CUPTI gives it), 2 an NCCL kernel named through a new pointer each time (the string
// compare of the interning). The ring wraps (drops counted) without changing the cost.
void BM_LaunchCallbackFilter(benchmark::State& state) {
  inject::CollectiveLaunchRecorder recorder(&RealtimeNs, &ThreadId);
  const std::vector<std::string> other = {
      "_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_11FillFunctorIfEENS_"
      "6detail5ArrayIPcLi1EEEEEviT0_T1_",
      "sm90_xmma_gemm_f16f16_f16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_"
      "k_off_kernel__5x_cublas",
      "_Z13gelu_kernelPKfPfi", "ampere_sgemm_128x64_tn"};
  const std::string nccl = "ncclDevKernel_AllReduce_Sum_f32_RING_LL";
  std::vector<std::string> copies(64, nccl);
  size_t i = 0;
  int64_t recorded = 0;
  for (auto _ : state) {
    const char* name = state.range(0) == 0   ? other[i % other.size()].c_str()
                       : state.range(0) == 1 ? nccl.c_str()
                                             : copies[i % copies.size()].c_str();
    recorded += recorder.OnLaunch(/*runtime=*/false, /*enter=*/true, name) ? 1 : 0;
    recorder.OnLaunch(/*runtime=*/false, /*enter=*/false, name);
    ++i;
  }
  state.counters["recorded"] = static_cast<double>(recorded);
  state.counters["dropped"] = static_cast<double>(recorder.TakeDropped());
}
BENCHMARK(BM_LaunchCallbackFilter)->Arg(0)->Arg(1)->Arg(2)->Unit(benchmark::kNanosecond);

}  // namespace
}  // namespace profctl

BENCHMARK_MAIN();
