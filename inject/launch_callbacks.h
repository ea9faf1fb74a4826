// CUPTI's launch callbacks for the flight recorder's light level (collective_launches.h): which
// callbacks are enabled, and the callback body that hands a launch to the recorder. CUPTI header
// types only (no libcupti call), so tests feed it hand-built CUpti_CallbackData.
#ifndef PROFCTL_INJECT_LAUNCH_CALLBACKS_H_
#define PROFCTL_INJECT_LAUNCH_CALLBACKS_H_

#include <cupti_callbacks.h>

#include <cstddef>

#include "inject/collective_launches.h"

namespace profctl::inject {

struct LaunchCallbackId {
  CUpti_CallbackDomain domain;
  CUpti_CallbackId cbid;
  const char* name;
};

// The kernel launch calls whose callbacks carry the kernel's name (CUpti_CallbackData::
// symbolName: "valid only for driver and runtime launch callbacks"): the runtime's
// cudaLaunchKernel, cudaLaunchKernelExC and CUDA 13's __cudaLaunchKernel, the driver's
// cuLaunchKernel and cuLaunchKernelEx (NCCL 2.19+ launches with it), each with its _ptsz form.
const LaunchCallbackId* LaunchCallbackIds(size_t* count);

// The body of the light level's CUpti_CallbackFunc: a runtime or driver API callback goes to
// `recorder` with its site (enter/exit) and kernel name; any other domain, or no data, is
// ignored. Safe on any application thread.
void OnLaunchCallback(CollectiveLaunchRecorder* recorder, CUpti_CallbackDomain domain,
                      const void* cbdata);

}  // namespace profctl::inject

#endif  // PROFCTL_INJECT_LAUNCH_CALLBACKS_H_
