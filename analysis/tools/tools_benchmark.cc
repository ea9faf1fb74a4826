// The tools' cost against the breakdown's on the same 1 M-event XSpace (readers_benchmark.cc's
// trace): what `profctl analyze --tool=overview` adds per host over plain `analyze`.
//   cmake --build build/release --target tools_benchmark && build/release/.../tools_benchmark
#include <cstdint>
#include <string>

#include "absl/strings/str_cat.h"
#include "analysis/benchmark_xspace.h"
#include "analysis/breakdown.h"
#include "analysis/readers/xspace_reader.h"
#include "analysis/tools/tool_readers.h"
#include "analysis/tools/tools.h"
#include "benchmark/benchmark.h"
#include "common/byte_source.h"
#include "xspace/xspace.h"

namespace profctl::analysis {
namespace {

using bench::MakeSpace;

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
