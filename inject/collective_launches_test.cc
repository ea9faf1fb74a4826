#include "inject/collective_launches.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace profctl::inject {
namespace {

uint64_t g_now = 0;
uint32_t g_tid = 0;
int g_clock_reads = 0;
uint64_t FakeLaunchNow() {
  ++g_clock_reads;
  return g_now;
}
uint32_t FakeTid() { return g_tid; }

class CollectiveLaunchRecorderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    g_now = 1'000;
    g_tid = 77;
    g_clock_reads = 0;
  }
  std::vector<CollectiveLaunchEntry> TakeAll() {
    std::vector<CollectiveLaunchEntry> out(CollectiveLaunchRecorder::kCapacity);
    out.resize(recorder_.Take(out.data(), out.size()));
    return out;
  }
  CollectiveLaunchRecorder recorder_{&FakeLaunchNow, &FakeTid};
};

TEST(NcclKernelOpTest, NamesTheOpOfEveryNcclKernelForm) {
  EXPECT_EQ(NcclKernelOp("ncclDevKernel_AllReduce_Sum_f32_RING_LL"), "AllReduce");
  EXPECT_EQ(NcclKernelOp("ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgs4K)"), "AllGather");
  EXPECT_EQ(NcclKernelOp("_Z38ncclDevKernel_AllReduce_Sum_f32_RING_LL24ncclDevKernelArgs4K"),
            "AllReduce");
  EXPECT_EQ(NcclKernelOp("_Z36ncclKernel_ReduceScatter_RING_LL_Sum_fP11ncclDevComm"),
            "ReduceScatter");
  EXPECT_EQ(NcclKernelOp("ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t"), "SendRecv");
  EXPECT_EQ(NcclKernelOp("ncclDevKernel_Broadcast_RING_LL"), "Broadcast");
  EXPECT_EQ(NcclKernelOp("ncclDevKernel_Generic_4"), "Generic");
  // A mangled length shorter than the prefix reads no further than the identifier.
  EXPECT_EQ(NcclKernelOp("_Z14ncclDevKernel_AllReduce"), "");
  EXPECT_EQ(NcclKernelOp("_Z20ncclDevKernel_Reduce_"), "Reduce");
  // Not NCCL kernels.
  EXPECT_EQ(NcclKernelOp("ampere_sgemm_128x64_tn"), "");
  EXPECT_EQ(NcclKernelOp("_ZN2at6native29vectorized_elementwise_kernelILi4EEEviT_"), "");
  EXPECT_EQ(NcclKernelOp("ncclDevFunc_AllReduce"), "");
  EXPECT_EQ(NcclKernelOp("ncclDevKernel_"), "");
  EXPECT_EQ(NcclKernelOp("_Z"), "");
  // A mangled length past any real name's is no NCCL kernel (nothing overflows).
  EXPECT_EQ(NcclKernelOp("_Z99999999999999999999ncclDevKernel_AllReduce"), "");
  EXPECT_EQ(NcclKernelOp(""), "");
}

TEST(NcclKernelOpTest, TheFirstLookRejectsOtherKernelsEarly) {
  EXPECT_FALSE(MaybeNcclKernel(nullptr));
  EXPECT_FALSE(MaybeNcclKernel(""));
  EXPECT_FALSE(MaybeNcclKernel("ampere_sgemm_128x64_tn"));
  EXPECT_FALSE(MaybeNcclKernel("_ZN2at6native29vectorized_elementwise_kernel"));
  EXPECT_FALSE(MaybeNcclKernel("ncc"));
  EXPECT_TRUE(MaybeNcclKernel("ncclDevKernel_AllReduce_Sum_f32_RING_LL"));
  EXPECT_TRUE(MaybeNcclKernel("_Z38ncclDevKernel_AllReduce_Sum_f32_RING_LL24ncclDevKernelArgs4K"));
}

TEST_F(CollectiveLaunchRecorderTest, KeepsNcclLaunchesAtEntryOnly) {
  EXPECT_FALSE(recorder_.OnLaunch(/*runtime=*/true, /*enter=*/true, "ampere_sgemm_128x64_tn"));
  EXPECT_FALSE(recorder_.OnLaunch(/*runtime=*/false, /*enter=*/true, nullptr));
  EXPECT_EQ(g_clock_reads, 0);  // other kernels never read the clock
  g_now = 5'000;
  EXPECT_TRUE(recorder_.OnLaunch(/*runtime=*/false, /*enter=*/true,
                                 "ncclDevKernel_AllReduce_Sum_f32_RING_LL"));
  EXPECT_FALSE(recorder_.OnLaunch(/*runtime=*/false, /*enter=*/false,
                                  "ncclDevKernel_AllReduce_Sum_f32_RING_LL"));
  g_now = 6'000;
  g_tid = 78;
  EXPECT_TRUE(
      recorder_.OnLaunch(/*runtime=*/false, /*enter=*/true, "ncclDevKernel_AllGather_RING_LL"));
  EXPECT_EQ(recorder_.recorded(), 2u);
  const std::vector<CollectiveLaunchEntry> got = TakeAll();
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].wall_ns, 5'000);
  EXPECT_EQ(got[0].seq, 0u);
  EXPECT_EQ(got[0].tid, 77u);
  EXPECT_EQ(recorder_.Name(got[0].name_index), "ncclDevKernel_AllReduce_Sum_f32_RING_LL");
  EXPECT_EQ(got[1].wall_ns, 6'000);
  EXPECT_EQ(got[1].seq, 1u);
  EXPECT_EQ(got[1].tid, 78u);
  EXPECT_EQ(recorder_.Name(got[1].name_index), "ncclDevKernel_AllGather_RING_LL");
  EXPECT_TRUE(TakeAll().empty());
  EXPECT_EQ(recorder_.TakeDropped(), 0u);
}

TEST_F(CollectiveLaunchRecorderTest, InternsEachNameOnceEvenFromAnotherPointer) {
  const std::string a = "ncclDevKernel_AllReduce_Sum_f32_RING_LL";
  const std::string b = a;  // same text, another pointer
  ASSERT_TRUE(recorder_.OnLaunch(true, true, a.c_str()));
  EXPECT_FALSE(recorder_.OnLaunch(true, false, a.c_str()));  // an exit records nothing
  ASSERT_TRUE(recorder_.OnLaunch(true, true, b.c_str()));
  const std::vector<CollectiveLaunchEntry> got = TakeAll();
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].name_index, got[1].name_index);
  EXPECT_NE(got[0].name_index, 0u);
}

TEST_F(CollectiveLaunchRecorderTest, TheRuntimesOwnDriverLaunchIsNotCountedTwice) {
  const char* k = "ncclDevKernel_AllReduce_Sum_f32_RING_LL";
  ASSERT_TRUE(recorder_.OnLaunch(/*runtime=*/true, /*enter=*/true, k));
  // Inside the runtime call, on its thread: the driver call it makes.
  EXPECT_FALSE(recorder_.OnLaunch(/*runtime=*/false, /*enter=*/true, k));
  // Another thread's driver launch at the same time is its own.
  g_tid = 99;
  EXPECT_TRUE(recorder_.OnLaunch(/*runtime=*/false, /*enter=*/true, k));
  g_tid = 77;
  recorder_.OnLaunch(/*runtime=*/true, /*enter=*/false, k);
  // After the runtime call returned, a driver launch counts.
  EXPECT_TRUE(recorder_.OnLaunch(/*runtime=*/false, /*enter=*/true, k));
  EXPECT_EQ(TakeAll().size(), 3u);
}

TEST_F(CollectiveLaunchRecorderTest, TheRingKeepsTheLatestAndCountsDrops) {
  const size_t n = CollectiveLaunchRecorder::kCapacity + 10;
  for (size_t i = 0; i < n; ++i) {
    g_now = 1'000 + i;
    ASSERT_TRUE(recorder_.OnLaunch(false, true, "ncclDevKernel_AllReduce_Sum_f32_RING_LL"));
  }
  EXPECT_EQ(recorder_.ready(), CollectiveLaunchRecorder::kCapacity);
  EXPECT_EQ(recorder_.TakeDropped(), 10u);
  EXPECT_EQ(recorder_.TakeDropped(), 0u);  // reset on read
  const std::vector<CollectiveLaunchEntry> got = TakeAll();
  ASSERT_EQ(got.size(), CollectiveLaunchRecorder::kCapacity);
  EXPECT_EQ(got.front().seq, 10u);  // the oldest ten were overwritten
  EXPECT_EQ(got.front().wall_ns, 1'010);
  EXPECT_EQ(got.back().seq, n - 1);
  for (size_t i = 1; i < got.size(); ++i) ASSERT_EQ(got[i].seq, got[i - 1].seq + 1);
  // What waits when the agent comes is cleared and counted.
  recorder_.OnLaunch(false, true, "ncclDevKernel_AllReduce_Sum_f32_RING_LL");
  EXPECT_EQ(recorder_.Clear(), 1u);
  EXPECT_EQ(recorder_.TakeDropped(), 1u);
  EXPECT_TRUE(TakeAll().empty());
}

TEST_F(CollectiveLaunchRecorderTest, NamesBeyondTheTableShareTheOverflowName) {
  std::vector<std::string> names;
  for (size_t i = 0; i < CollectiveLaunchRecorder::kMaxNames + 3; ++i) {
    names.push_back("ncclDevKernel_AllReduce_Sum_f32_RING_LL_" + std::to_string(i));
  }
  for (const std::string& name : names) ASSERT_TRUE(recorder_.OnLaunch(false, true, name.c_str()));
  const std::vector<CollectiveLaunchEntry> got = TakeAll();
  ASSERT_EQ(got.size(), names.size());
  EXPECT_EQ(recorder_.Name(got[0].name_index), names[0]);
  EXPECT_EQ(got.back().name_index, 0u);
  EXPECT_EQ(recorder_.Name(0), CollectiveLaunchRecorder::kOverflowName);
  EXPECT_EQ(NcclKernelOp(recorder_.Name(0)), "Unknown");
  EXPECT_EQ(recorder_.Name(100'000), "");
  // A long name is cut to the table's slot.
  const std::string very_long = "ncclDevKernel_AllReduce_" + std::string(1'000, 'x');
  CollectiveLaunchRecorder fresh(&FakeLaunchNow, &FakeTid);
  ASSERT_TRUE(fresh.OnLaunch(false, true, very_long.c_str()));
  CollectiveLaunchEntry e;
  ASSERT_EQ(fresh.Take(&e, 1), 1u);
  EXPECT_EQ(fresh.Name(e.name_index).size(), CollectiveLaunchRecorder::kMaxNameBytes - 1);
}

}  // namespace
}  // namespace profctl::inject
