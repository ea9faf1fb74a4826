// The 1 M-event XSpace the analysis benchmarks share (readers_benchmark, tools_benchmark), so
// their numbers are about the same trace. Benchmarks only.
#ifndef PROFCTL_ANALYSIS_BENCHMARK_XSPACE_H_
#define PROFCTL_ANALYSIS_BENCHMARK_XSPACE_H_

#include <cstdint>

#include "absl/strings/str_cat.h"
#include "tensorflow/profiler/xplane.pb.h"
#include "xspace/xspace.h"

namespace profctl::analysis::bench {

inline constexpr int64_t kT0 = 1'767'225'600LL * 1'000'000'000;  // 2026-01-01
inline constexpr int64_t kSteps = 100;

// Half the events on 4 host threads (step roots, input waits, launches, syncs, framework ops),
// half on 4 streams of 2 GPUs (kernels, memcpys, all-reduce), back to back.
inline tensorflow::profiler::XSpace MakeSpace(int64_t events) {
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

}  // namespace profctl::analysis::bench

#endif  // PROFCTL_ANALYSIS_BENCHMARK_XSPACE_H_
