// CUPTI activity records as libcupti fills them, for the tests and the stand-in CUDA process
// (tests/fake_cuda_app.cc) that build activity buffers without a GPU. Header-only; needs the
// CUPTI headers (PROFCTL_CUPTI).
#ifndef PROFCTL_TESTS_CUPTI_TEST_RECORDS_H_
#define PROFCTL_TESTS_CUPTI_TEST_RECORDS_H_

#include <cupti_activity.h>

#include <cstdint>

namespace profctl::testkit {

// An H100 SXM (80 GB HBM3, 132 SMs at 1.98 GHz, compute capability 9.0) as device `id`, named
// `name`, not a MIG instance; the UUID is left to the caller.
inline void FillH100Device(CUpti_ActivityDevice5& d, uint32_t id, const char* name) {
  d.kind = CUPTI_ACTIVITY_KIND_DEVICE;
  d.id = id;
  d.name = name;
  d.globalMemorySize = 85'520'809'984;
  d.globalMemoryBandwidth = 3'352'320'000;  // KB/s
  d.coreClockRate = 1'980'000;
  d.numMultiprocessors = 132;
  d.computeCapabilityMajor = 9;
  d.maxWarpsPerMultiprocessor = 64;
  d.maxBlocksPerMultiprocessor = 32;
  d.maxRegistersPerMultiprocessor = 65536;
  d.maxSharedMemoryPerMultiprocessor = 233472;
  d.isMigEnabled = 0;
  d.gpuInstanceId = d.computeInstanceId = UINT32_MAX;
}

// A CUDA API call (kind RUNTIME or DRIVER) of thread `tid` in process `pid`, on the GPU clock.
inline void FillApi(CUpti_ActivityAPI& a, CUpti_ActivityKind kind, CUpti_CallbackId cbid,
                    uint32_t correlation_id, uint64_t gpu_start, uint64_t gpu_end, uint32_t pid,
                    uint32_t tid) {
  a.kind = kind;
  a.cbid = cbid;
  a.start = gpu_start;
  a.end = gpu_end;
  a.processId = pid;
  a.threadId = tid;
  a.correlationId = correlation_id;
}

// One half of an NVTX range (flag START with its name, or END with nullptr) on thread `tid`.
inline void FillMarker(CUpti_ActivityMarker2& m, CUpti_ActivityFlag flag, uint32_t id,
                       uint64_t gpu_timestamp, uint32_t pid, uint32_t tid, const char* name) {
  m.kind = CUPTI_ACTIVITY_KIND_MARKER;
  m.flags = flag;
  m.timestamp = gpu_timestamp;
  m.id = id;
  m.objectKind = CUPTI_ACTIVITY_OBJECT_THREAD;
  m.objectId.pt.processId = pid;
  m.objectId.pt.threadId = tid;
  m.name = name;
}

}  // namespace profctl::testkit

#endif  // PROFCTL_TESTS_CUPTI_TEST_RECORDS_H_
