// CUPTI activity records as a GPU would give them, for the tests and the stand-in CUDA process
// (tests/fake_cuda_app.cc) that build activity buffers without a GPU. Header-only; needs the
// CUPTI headers (PROFCTL_CUPTI).
#ifndef PROFCTL_TESTS_CUPTI_TEST_RECORDS_H_
#define PROFCTL_TESTS_CUPTI_TEST_RECORDS_H_

#include <cupti_activity.h>

#include <cstdint>

namespace profctl::testing {

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

}  // namespace profctl::testing

#endif  // PROFCTL_TESTS_CUPTI_TEST_RECORDS_H_
