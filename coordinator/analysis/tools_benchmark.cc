// The tools' cost against the breakdown's on the same 1 M-event XSpace (readers_benchmark.cc's
// trace): what `profctl analyze --tool=overview` adds per host over plain `analyze`.
//   cmake --build build/release --target tools_benchmark && build/release/.../tools_benchmark
#include <cstdint>
#include <string>

#include "absl/strings/str_cat.h"
#include "benchmark/benchmark.h"
#include "common/byte_source.h"
#include "common/xspace.h"
#include "coordinator/analysis/breakdown.h"
#include "coordinator/analysis/tool_readers.h"
#include "coordinator/analysis/tools.h"
#include "coordinator/analysis/xspace_reader.h"

namespace profctl::analysis {
namespace {

constexpr int64_t kT0 = 1'767'225'600LL * 1'000'000'000;  // 2026-01-01
constexpr int64_t kSteps = 100;

// Half the events on 4 host threads (step roots, input waits, launches, syncs, framework ops),
// half on 4 streams of 2 GPUs (kernels, memcpys, all-reduce), back to back.
tensorflow::profiler::XSpace MakeSpace(int64_t events) {
  tensorflow::profiler::XSpace space;
  const int64_t per_line = events / 8;
  xspace::XPlaneBuilder host(space.add_planes(), 49, xspace::kHostPlaneName, kT0);
  const int64_t r = host.StatMetadataId(xspace::kStatIsRoot);
  const int64_t step_num = host.StatMetadataId(xspace::kStatStepNum);
  const int64_t corr = host.StatMetadataId(xspace::kStatCorrelationId);
  const int64_t host_names[] = {
      host.EventMetadataId("cudaLaunchKernel"), host.EventMetadataId("aten::mm"),
      host.EventMetadataId("GetNextBatch"), host.EventMetadataId("cudaStreamSynchronize")};
  const int64_t train = host.EventMetadataId("train");
  for (int64_t l = 0; l < 4; ++l) {
    auto* line = host.AddLine(1000 + l, absl::StrCat("thread ", l), kT0);
    const int64_t per_step = per_line / kSteps;
    for (int64_t i = 0; i < per_line; ++i) {
      if (i % per_step == 0) {
        auto* e = host.AddEvent(line, train, kT0 + i * 1000, per_step * 1000);
        host.AddStat(e, r, int64_t{1});
        host.AddStat(e, step_num, i / per_step);
        continue;
      }
      auto* e = host.AddEvent(line, host_names[i % 4], kT0 + i * 1000, 900);
      host.AddStat(e, corr, static_cast<uint64_t>(i));
    }
  }
  for (int64_t g = 0; g < 2; ++g) {
    xspace::XPlaneBuilder gpu(space.add_planes(), g, absl::StrCat(xspace::kGpuPlanePrefix, g), kT0);
    const int64_t gcorr = gpu.StatMetadataId(xspace::kStatCorrelationId);
    const int64_t details = gpu.StatMetadataId(xspace::kStatMemcpyDetails);
    const int64_t names[] = {gpu.EventMetadataId("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n"),
                             gpu.EventMetadataId("MemcpyH2D"),
                             gpu.EventMetadataId("ncclDevKernel_AllReduce_Sum_bf16_RING_LL"),
                             gpu.EventMetadataId("MemcpyD2H")};
    for (int64_t l = 0; l < 2; ++l) {
      auto* line = gpu.AddLine(7 + l, absl::StrCat("Stream #", 7 + l, "(Compute)"), kT0);
      for (int64_t i = 0; i < per_line; ++i) {
        auto* e = gpu.AddEvent(line, names[i % 4], kT0 + i * 1000, 900);
        gpu.AddStat(e, gcorr, static_cast<uint64_t>(i));
        if (i % 4 == 1) gpu.AddStat(e, details, "kind_src:pageable kind_dst:device size:4096");
      }
    }
  }
  xspace::SetProfileWindow(&space, kT0, kT0 + per_line * 1000);
  return space;
}

// The breakdown path: read, summarize.
void BM_Breakdown(benchmark::State& state) {
  const std::string bytes = MakeSpace(state.range(0)).SerializeAsString();
  for (auto _ : state) {
    absl::StatusOr<HostTrace> trace = ReadXSpaceHost(StringByteSource(bytes), "host", 0);
    HostSummary summary = SummarizeHost(*std::move(trace));
    benchmark::DoNotOptimize(summary);
  }
  state.SetItemsProcessed(state.iterations() * state.range(0));
}
BENCHMARK(BM_Breakdown)->Arg(1'000'000)->Unit(benchmark::kMillisecond);

// The detail reader alone (decode + ToolTrace).
void BM_ReadXSpaceTools(benchmark::State& state) {
  const std::string bytes = MakeSpace(state.range(0)).SerializeAsString();
  for (auto _ : state) {
    absl::StatusOr<ToolTrace> trace = ReadXSpaceToolsBytes(bytes, "host", 0);
    benchmark::DoNotOptimize(trace);
  }
  state.SetItemsProcessed(state.iterations() * state.range(0));
}
BENCHMARK(BM_ReadXSpaceTools)->Arg(1'000'000)->Unit(benchmark::kMillisecond);

// `--tool=NAME` per host: the breakdown, the detail reader and the tool.
void BM_Tool(benchmark::State& state) {
  const std::string bytes = MakeSpace(state.range(0)).SerializeAsString();
  const auto tool = static_cast<Tool>(state.range(1));
  for (auto _ : state) {
    absl::StatusOr<HostTrace> trace = ReadXSpaceHost(StringByteSource(bytes), "host", 0);
    const HostSummary summary = SummarizeHost(*std::move(trace));
    absl::StatusOr<ToolTrace> detail = ReadXSpaceToolsBytes(bytes, "host", 0);
    HostTools tools = ComputeHostTools(tool, *detail, summary);
    benchmark::DoNotOptimize(tools);
  }
  state.SetItemsProcessed(state.iterations() * state.range(0));
  state.SetLabel(std::string(ToolName(tool)));
}
BENCHMARK(BM_Tool)
    ->ArgsProduct({{1'000'000},
                   {static_cast<int64_t>(Tool::kOverview), static_cast<int64_t>(Tool::kKernelStats),
                    static_cast<int64_t>(Tool::kOpStats),
                    static_cast<int64_t>(Tool::kInputPipeline),
                    static_cast<int64_t>(Tool::kMemory)}})
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace profctl::analysis

BENCHMARK_MAIN();
