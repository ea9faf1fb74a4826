// What an NVTX range costs a CUDA process with the library's own NVTX handlers
// (PROFCTL_INJECT_NVTX_STEPS=1, inject/nvtx_hooks.h) and nothing of CUPTI behind them (the
// library loaded lazily, or CUPTI detached), against NVTX with no tool at all. This binary is an
// NVTX module (NVTX's header-only implementation); its static injection installs the hooks, or,
// with PROFCTL_BENCH_NVTX=none, declines, so NVTX's calls are its own no-ops. Run it once each way:
//
//   build/rel/bench/nvtx_hooks_benchmark
//   PROFCTL_BENCH_NVTX=none build/rel/bench/nvtx_hooks_benchmark
//
// libcupti's handlers, which the hooks call while CUPTI is attached, are not in it: their cost
// is the GPU run's to measure (docs/gpu-verification.md).
#include <benchmark/benchmark.h>
#include <nvtx3/nvToolsExt.h>

#include <cstdlib>
#include <mutex>
#include <string>
#include <string_view>

#include "inject/nvtx_hooks.h"
#include "inject/step_samples.h"

namespace profctl::inject {
namespace {

std::mutex g_mu;
StepRangeTracker g_steps;
bool g_hooks = false;

void Mode(benchmark::State& state) { state.SetLabel(g_hooks ? "hooks" : "no tool"); }

// A range that is not a step: a name match and a thread-local stack entry.
void BM_PushPopNotAStep(benchmark::State& state) {
  for (auto _ : state) {
    nvtxRangePushA("forward");
    nvtxRangePop();
  }
  Mode(state);
}
BENCHMARK(BM_PushPopNotAStep);

// A step range: the match, a clock read at each end, the tracker's mutex twice.
void BM_PushPopStep(benchmark::State& state) {
  for (auto _ : state) {
    nvtxRangePushA("train_step 1234");
    nvtxRangePop();
  }
  Mode(state);
}
BENCHMARK(BM_PushPopStep);

// PyTorch's record_function under emit_nvtx and most frameworks use the attributes form.
void BM_PushPopExNotAStep(benchmark::State& state) {
  nvtxEventAttributes_t a{};
  a.version = NVTX_VERSION;
  a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
  a.messageType = NVTX_MESSAGE_TYPE_ASCII;
  a.message.ascii = "aten::linear";
  for (auto _ : state) {
    nvtxRangePushEx(&a);
    nvtxRangePop();
  }
  Mode(state);
}
BENCHMARK(BM_PushPopExNotAStep);

// Four threads pushing steps at once: the tracker's mutex under contention.
void BM_PushPopStepThreads(benchmark::State& state) {
  for (auto _ : state) {
    nvtxRangePushA("train_step 1234");
    nvtxRangePop();
  }
  Mode(state);
}
BENCHMARK(BM_PushPopStepThreads)->Threads(4);

}  // namespace

int NVTX_API NvtxStaticInjection(NvtxGetExportTableFunc_t get_export_table) {
  const char* mode = std::getenv("PROFCTL_BENCH_NVTX");
  if (mode != nullptr && std::string_view(mode) == "none") return 0;  // NVTX's no-ops
  NvtxHookTarget target;
  target.mu = &g_mu;
  target.steps = &g_steps;
  g_hooks = InstallNvtxHooks(reinterpret_cast<const void*>(get_export_table), nullptr, target) != 0;
  return g_hooks ? 1 : 0;
}

}  // namespace profctl::inject
BENCHMARK_MAIN();
