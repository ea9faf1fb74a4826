// Trace reader speed: 1 M events through ReadXSpaceHost (an in-memory XSpace, as after decoding
// an .xplane.pb) and ReadKinetoTrace (JSON text, as after reading a .pt.trace.json).
//   cmake --build build/release --target readers_benchmark && build/release/.../readers_benchmark
#include <cstdint>
#include <string>

#include "absl/strings/str_cat.h"
#include "benchmark/benchmark.h"
#include "common/xspace.h"
#include "coordinator/analysis/kineto_reader.h"
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
