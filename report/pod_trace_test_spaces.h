// XSpaces of one host each, for the pod trace writers' tests (pod_trace_writer_test.cc,
// pod_perfetto_trace_test.cc): times on the host's clock, `offset_ns` ahead of the coordinator's.
#ifndef PROFCTL_REPORT_POD_TRACE_TEST_SPACES_H_
#define PROFCTL_REPORT_POD_TRACE_TEST_SPACES_H_

#include <cstdint>

#include "absl/strings/string_view.h"
#include "gtest/gtest.h"
#include "tests/test_time.h"
#include "xspace/derived_lines.h"
#include "xspace/xspace.h"

namespace profctl::report::test_spaces {

// 2026-01-01 is kT0, on the coordinator's clock.
using ::profctl::test_time::kMs;
using ::profctl::test_time::kT0;
using ::profctl::test_time::kUs;

// One host's trace on its own clock, skewed by `offset_ns` from the coordinator's: a GPU plane
// whose all-reduce ends 10 ms after kT0 in coordinator time, and a host thread.
inline xspace::XSpace HostSpace(int64_t offset_ns, bool relative_lines, int64_t sub_us_ns) {
  xspace::XSpace space;
  const int64_t agent = kT0 + offset_ns;  // kT0 on this host's clock
  const int64_t start = relative_lines ? agent - 1 * kMs : 0;
  xspace::XPlaneBuilder gpu(space.add_planes(), 0, "/device:GPU:0", start);
  xspace::XLine* stream = gpu.AddLine(21, "Stream #21(NCCL)", agent);
  xspace::XEvent* e = gpu.AddEvent(stream, gpu.EventMetadataId("ncclDevKernel_AllReduce"),
                                   agent + 9 * kMs + sub_us_ns, 1 * kMs);
  gpu.AddStat(e, gpu.StatMetadataId("correlation_id"), uint64_t{42});
  gpu.AddStat(e, gpu.StatMetadataId("kernel_details"), absl::string_view("regs:64"));
  xspace::XPlaneBuilder host(space.add_planes(), 49, xspace::kHostPlaneName, start);
  xspace::XLine* thread = host.AddLine(1000, "python3 main", agent);
  xspace::XEvent* root = host.AddEvent(thread, host.EventMetadataId("train"), agent, 20 * kMs);
  host.AddStat(root, host.StatMetadataId("step_num"), int64_t{7});
  if (relative_lines) xspace::SetProfileWindow(&space, start, agent + 100 * kMs);
  EXPECT_EQ(stream->timestamp_ns(), relative_lines ? 1 * kMs : agent);
  return space;
}

// A host whose clock is `offset_ns` ahead of the coordinator's: on its host plane (pid +2) a
// launch of correlation id 42 (4-6 ms after kT0), a launch of 43 whose kernel is not in the
// trace, and device memory events; on GPU 0 (pid +1) the kernel of 42 (7-9 ms), a memcpy of 42
// too (its first device event wins) and a kernel of 44 that nothing launched here.
inline xspace::XSpace LaunchSpace(int64_t offset_ns) {
  xspace::XSpace space;
  const int64_t agent = kT0 + offset_ns;
  xspace::XPlaneBuilder gpu(space.add_planes(), 0, "/device:GPU:0", agent);
  xspace::XLine* stream = gpu.AddLine(7, "Stream #7", agent);
  const int64_t corr = gpu.StatMetadataId("correlation_id");
  gpu.AddStat(gpu.AddEvent(stream, gpu.EventMetadataId("gemm"), agent + 7 * kMs, 2 * kMs), corr,
              uint64_t{42});
  gpu.AddStat(gpu.AddEvent(stream, gpu.EventMetadataId("MemcpyDtoH"), agent + 10 * kMs, kMs), corr,
              uint64_t{42});
  gpu.AddStat(gpu.AddEvent(stream, gpu.EventMetadataId("orphan"), agent + 12 * kMs, kMs), corr,
              int64_t{44});
  xspace::XPlaneBuilder host(space.add_planes(), 49, xspace::kHostPlaneName, agent);
  xspace::XLine* thread = host.AddLine(1000, "python3 main", agent);
  const int64_t hcorr = host.StatMetadataId("correlation_id");
  host.AddStat(
      host.AddEvent(thread, host.EventMetadataId("cudaLaunchKernel"), agent + 4 * kMs, 2 * kMs),
      hcorr, int64_t{42});
  host.AddStat(
      host.AddEvent(thread, host.EventMetadataId("cudaLaunchKernel"), agent + 6 * kMs, kMs), hcorr,
      int64_t{43});
  // Memory: GPU 0 (shown on its plane's process), GPU 3 (no plane: on the host plane's), and a
  // host allocator (left out).
  xspace::XLine* mem = host.AddLine(2000, "memory", agent);
  const auto memory_event = [&](absl::string_view name, int64_t at_ns, int64_t ordinal,
                                absl::string_view allocator, int64_t in_use) {
    xspace::XEvent* e = host.AddEvent(mem, host.EventMetadataId(name), agent + at_ns, 0);
    host.AddStat(e, host.StatMetadataId("device_ordinal"), ordinal);
    host.AddStat(e, host.StatMetadataId("allocator_name"), allocator);
    host.AddStat(e, host.StatMetadataId("bytes_allocated"), in_use);
  };
  memory_event("MemoryAllocation", 1 * kMs, 0, "GPU_0_bfc", 4096);
  memory_event("MemoryAllocation", 2 * kMs, 3, "cuda_3", 100);
  memory_event("MemoryDeallocation", 3 * kMs, 0, "GPU_0_bfc", 1024);
  memory_event("MemoryAllocation", 5 * kMs, 0, "cuda_host_bfc", 777);
  xspace::SetProfileWindow(&space, agent, agent + 20 * kMs);
  return space;
}

// A host `offset_ns` ahead of the coordinator: step 3's root on the host (0-10 ms after kT0), its
// launches, and on GPU 0 two kernels of one op and an XLA kernel; GPU 1 has a "TensorFlow Ops"
// line of its own (as a TF file's derived lines) besides a kernel with a tf_op.
inline xspace::XSpace DerivedSpace(int64_t offset_ns) {
  xspace::XSpace space;
  const int64_t agent = kT0 + offset_ns;
  xspace::XPlaneBuilder host(space.add_planes(), 49, xspace::kHostPlaneName, agent);
  xspace::XLine* thread = host.AddLine(1000, "python3 main", agent);
  xspace::XEvent* root = host.AddEvent(thread, host.EventMetadataId("train"), agent, 10 * kMs);
  host.AddStat(root, host.StatMetadataId("_r"), int64_t{1});
  host.AddStat(root, host.StatMetadataId("step_num"), int64_t{3});
  xspace::XPlaneBuilder gpu(space.add_planes(), 0, "/device:GPU:0", agent);
  xspace::XLine* stream = gpu.AddLine(7, "Stream #7(Compute)", agent);
  const auto kernel = [&](absl::string_view name, int64_t at, absl::string_view stat,
                          absl::string_view op, uint64_t corr) {
    xspace::XEvent* e = gpu.AddEvent(stream, gpu.EventMetadataId(name), agent + at, kMs);
    gpu.AddStat(e, gpu.StatMetadataId(stat), op);
    gpu.AddStat(e, gpu.StatMetadataId("correlation_id"), corr);
    host.AddStat(
        host.AddEvent(thread, host.EventMetadataId("cudaLaunchKernel"), agent + at - kMs / 2, kUs),
        host.StatMetadataId("correlation_id"), corr);
  };
  kernel("gemm", 2 * kMs, "tf_op", "model/dense/MatMul:MatMul", 1);
  kernel("gemm", 3 * kMs, "tf_op", "model/dense/MatMul:MatMul", 2);
  kernel("fusion", 5 * kMs, "hlo_op", "fusion.7", 3);
  xspace::XPlaneBuilder gpu1(space.add_planes(), 1, "/device:GPU:1", agent);
  xspace::XLine* own = gpu1.AddLine(xspace::kTfOpsLineId, "TensorFlow Ops", agent);
  gpu1.AddEvent(own, gpu1.EventMetadataId("model/x/Add:Add"), agent + 2 * kMs, kMs);
  xspace::XLine* stream1 = gpu1.AddLine(8, "Stream #8(Compute)", agent);
  xspace::XEvent* k = gpu1.AddEvent(stream1, gpu1.EventMetadataId("add"), agent + 2 * kMs, kMs);
  gpu1.AddStat(k, gpu1.StatMetadataId("tf_op"), absl::string_view("model/x/Add:Add"));
  xspace::SetProfileWindow(&space, agent, agent + 20 * kMs);
  return space;
}

}  // namespace profctl::report::test_spaces

#endif  // PROFCTL_REPORT_POD_TRACE_TEST_SPACES_H_
