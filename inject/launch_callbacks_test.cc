#include "inject/launch_callbacks.h"

#include <cupti_driver_cbid.h>
#include <cupti_runtime_cbid.h>
#include <gtest/gtest.h>

#include <set>
#include <string>

namespace profctl::inject {
namespace {

uint64_t g_now = 0;
uint64_t FakeNow() { return g_now; }
uint32_t FakeTid() { return 4242; }

CUpti_CallbackData Launch(CUpti_ApiCallbackSite site, const char* symbol) {
  CUpti_CallbackData data{};
  data.callbackSite = site;
  data.functionName = "cuLaunchKernelEx";
  data.symbolName = symbol;
  return data;
}

TEST(LaunchCallbacksTest, EnablesTheRuntimeAndDriverKernelLaunches) {
  size_t count = 0;
  const LaunchCallbackId* ids = LaunchCallbackIds(&count);
  std::set<std::pair<int, int>> got;
  for (size_t i = 0; i < count; ++i) got.insert({ids[i].domain, static_cast<int>(ids[i].cbid)});
  EXPECT_EQ(got.size(), count);
  for (const auto& want :
       {std::pair<int, int>{CUPTI_CB_DOMAIN_RUNTIME_API,
                            CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000},
        {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_v11060},
        {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_v13000},
        {CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel},
        {CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx},
        {CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz}}) {
    EXPECT_TRUE(got.count(want)) << want.first << " " << want.second;
  }
}

TEST(LaunchCallbacksTest, HandBuiltCallbackDataReachesTheRecorder) {
  CollectiveLaunchRecorder recorder(&FakeNow, &FakeTid);
  g_now = 123'456;
  const std::string nccl = "_Z38ncclDevKernel_AllReduce_Sum_f32_RING_LL24ncclDevKernelArgs4K";
  CUpti_CallbackData enter = Launch(CUPTI_API_ENTER, nccl.c_str());
  CUpti_CallbackData exit = Launch(CUPTI_API_EXIT, nccl.c_str());
  CUpti_CallbackData gemm = Launch(CUPTI_API_ENTER, "sm90_xmma_gemm_f16f16_f32");
  CUpti_CallbackData unnamed = Launch(CUPTI_API_ENTER, nullptr);
  OnLaunchCallback(&recorder, CUPTI_CB_DOMAIN_DRIVER_API, &enter);
  OnLaunchCallback(&recorder, CUPTI_CB_DOMAIN_DRIVER_API, &exit);
  OnLaunchCallback(&recorder, CUPTI_CB_DOMAIN_RUNTIME_API, &gemm);
  OnLaunchCallback(&recorder, CUPTI_CB_DOMAIN_DRIVER_API, &unnamed);
  OnLaunchCallback(&recorder, CUPTI_CB_DOMAIN_DRIVER_API, nullptr);
  // Another domain's data is not a CUpti_CallbackData: never read.
  OnLaunchCallback(&recorder, CUPTI_CB_DOMAIN_RESOURCE, &enter);
  CollectiveLaunchEntry got[4];
  ASSERT_EQ(recorder.Take(got, 4), 1u);
  EXPECT_EQ(got[0].wall_ns, 123'456);
  EXPECT_EQ(got[0].tid, 4242u);
  EXPECT_EQ(got[0].seq, 0u);
  EXPECT_EQ(recorder.Name(got[0].name_index), nccl);
  // A runtime launch and the driver launch it makes inside: one launch.
  CUpti_CallbackData rt_enter = Launch(CUPTI_API_ENTER, "ncclKernel_AllGather_RING_LL_Sum_int8_t");
  CUpti_CallbackData rt_exit = Launch(CUPTI_API_EXIT, "ncclKernel_AllGather_RING_LL_Sum_int8_t");
  OnLaunchCallback(&recorder, CUPTI_CB_DOMAIN_RUNTIME_API, &rt_enter);
  OnLaunchCallback(&recorder, CUPTI_CB_DOMAIN_DRIVER_API, &rt_enter);
  OnLaunchCallback(&recorder, CUPTI_CB_DOMAIN_RUNTIME_API, &rt_exit);
  ASSERT_EQ(recorder.Take(got, 4), 1u);
  EXPECT_EQ(got[0].seq, 1u);
}

}  // namespace
}  // namespace profctl::inject
