// Trace reader speed: 1 M events through ReadXSpaceHost (an in-memory XSpace, as after decoding
// an .xplane.pb) and ReadKinetoTrace (JSON text, as after reading a .pt.trace.json).
//   cmake --build build/release --target readers_benchmark && build/release/.../readers_benchmark
#include <cstdint>
#include <string>

#include "absl/strings/str_cat.h"
#include "analysis/benchmark_xspace.h"
#include "analysis/readers/kineto_reader.h"
#include "analysis/readers/xspace_reader.h"
#include "benchmark/benchmark.h"
#include "xspace/xspace.h"

namespace profctl::analysis {
namespace {

using bench::MakeSpace;

void BM_ReadXSpaceHost(benchmark::State& state) {
  const tensorflow::profiler::XSpace space = MakeSpace(state.range(0));
  for (auto _ : state) {
    absl::StatusOr<HostTrace> trace = ReadXSpaceHost(space, "host", /*offset_ns=*/1234);
    benchmark::DoNotOptimize(trace);
  }
  state.SetItemsProcessed(state.iterations() * xspace::CountEvents(space));
}
BENCHMARK(BM_ReadXSpaceHost)->Arg(1'000'000)->Unit(benchmark::kMillisecond);

// A Kineto trace of `events` complete events as PyTorch writes them (relative ts, base time).
std::string MakeKineto(int64_t events) {
  std::string json =
      "{\"schemaVersion\": 1, \"distributedInfo\": {\"backend\": \"nccl\", \"rank\": 3, "
      "\"world_size\": 8}, \"baseTimeNanoseconds\": 1767225600000000000, \"traceEvents\": [\n";
  const char* kinds[] = {
      R"j("ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 4242, "tid": 4242)j",
      R"j("ph": "X", "cat": "kernel", "name": "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n", "pid": 0, "tid": 7)j",
      R"j("ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 4242, "tid": 4242)j",
      R"j("ph": "X", "cat": "gpu_memcpy", "name": "Memcpy HtoD (Pageable -> Device)", "pid": 0, "tid": 13)j",
  };
  for (int64_t i = 0; i < events; ++i) {
    absl::StrAppend(&json, i == 0 ? "" : ",\n", "{", kinds[i % 4], ", \"ts\": ", i, ".", i % 1000,
                    ", \"dur\": 0.900, \"args\": {\"External id\": ", i,
                    ", \"device\": 0, \"stream\": 7, \"correlation\": ", i, "}}");
  }
  json += "\n]}\n";
  return json;
}

void BM_ReadKinetoTrace(benchmark::State& state) {
  const std::string json = MakeKineto(state.range(0));
  for (auto _ : state) {
    absl::StatusOr<HostTrace> trace = ReadKinetoTrace(json, "host", /*offset_ns=*/1234);
    benchmark::DoNotOptimize(trace);
  }
  state.SetItemsProcessed(state.iterations() * state.range(0));
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(json.size()));
}
BENCHMARK(BM_ReadKinetoTrace)->Arg(1'000'000)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace profctl::analysis

BENCHMARK_MAIN();
