#include "inject/launch_callbacks.h"

#include <cupti_driver_cbid.h>
#include <cupti_runtime_cbid.h>

namespace profctl::inject {

const LaunchCallbackId* LaunchCallbackIds(size_t* count) {
  static constexpr LaunchCallbackId kIds[] = {
      {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000,
       "cudaLaunchKernel"},
      {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_ptsz_v7000,
       "cudaLaunchKernel_ptsz"},
      {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_v11060,
       "cudaLaunchKernelExC"},
      {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_ptsz_v11060,
       "cudaLaunchKernelExC_ptsz"},
      {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_v13000,
       "__cudaLaunchKernel"},
      {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_ptsz_v13000,
       "__cudaLaunchKernel_ptsz"},
      {CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, "cuLaunchKernel"},
      {CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz,
       "cuLaunchKernel_ptsz"},
      {CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx, "cuLaunchKernelEx"},
      {CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz,
       "cuLaunchKernelEx_ptsz"},
  };
  *count = sizeof(kIds) / sizeof(kIds[0]);
  return kIds;
}

void OnLaunchCallback(CollectiveLaunchRecorder* recorder, CUpti_CallbackDomain domain,
                      const void* cbdata) {
  if (cbdata == nullptr) return;
  if (domain != CUPTI_CB_DOMAIN_RUNTIME_API && domain != CUPTI_CB_DOMAIN_DRIVER_API) return;
  const auto* data = static_cast<const CUpti_CallbackData*>(cbdata);
  recorder->OnLaunch(domain == CUPTI_CB_DOMAIN_RUNTIME_API, data->callbackSite == CUPTI_API_ENTER,
                     data->symbolName);
}

}  // namespace profctl::inject
