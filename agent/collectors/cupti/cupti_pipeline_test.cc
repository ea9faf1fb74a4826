// Real CUPTI activity records (the CUDA 13 structs from cupti_activity.h, as libcupti fills its
// buffers) -> compact records (inject/cupti_records.h) -> batch bytes -> ParseRecordBatch ->
// BuildCuptiXSpace, checked against XSpace validation, the XProf conformance checker and the
// breakdown reader. No GPU, no driver.
#include <cupti_activity.h>
#include <cupti_driver_cbid.h>
#include <cupti_runtime_cbid.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "agent/collectors/cupti/cupti_xspace.h"
#include "agent/collectors/cupti/host_gpus.h"
#include "agent/collectors/cupti/record_batch.h"
#include "analysis/readers/xspace_reader.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "inject/cupti_records.h"
#include "inject/record_batch_writer.h"
#include "tests/cupti_test_records.h"
#include "tests/status_matchers.h"
#include "tests/test_time.h"
#include "tests/xprof_conformance.h"
#include "xspace/xspace.h"

using ::profctl::testkit::IsOk;

namespace profctl::inject {
namespace {

using ::testing::Contains;
using ::testing::Each;
using ::testing::ElementsAre;
using ::testing::Not;
using ::testing::Optional;
using ::testing::SizeIs;
using ::testing::StartsWith;

constexpr int64_t kW = 1'700'000'000'000'000'000;  // window start, wall ns
using ::profctl::test_time::kUs;
constexpr int64_t kOffset = -700;  // GPU clock - wall clock
constexpr uint32_t kPid = 4242;
constexpr uint32_t kTid = 4243;

uint64_t Gpu(int64_t wall_us) { return static_cast<uint64_t>(kW + wall_us * kUs + kOffset); }

// A CUPTI activity buffer: records back to back, each sizeof its struct (8-aligned), as libcupti
// lays them out.
class Buffer {
 public:
  template <typename T>
  T& Add() {
    const size_t at = size_;
    size_ += sizeof(T);
    EXPECT_LE(size_, sizeof(bytes_));
    T* record = reinterpret_cast<T*>(bytes_ + at);
    std::memset(record, 0, sizeof(T));
    return *record;
  }
  const uint8_t* data() const { return bytes_; }
  uint8_t* data() { return bytes_; }
  size_t size() const { return size_; }

 private:
  alignas(8) uint8_t bytes_[16384] = {};
  size_t size_ = 0;
};

void Marker(Buffer& b, CUpti_ActivityFlag flag, uint32_t id, int64_t at_us, const char* name) {
  testkit::FillMarker(b.Add<CUpti_ActivityMarker2>(), flag, id, Gpu(at_us), kPid, kTid, name);
}

void Api(Buffer& b, CUpti_CallbackId cbid, uint32_t corr, int64_t start_us, int64_t end_us,
         CUpti_ActivityKind kind = CUPTI_ACTIVITY_KIND_RUNTIME) {
  testkit::FillApi(b.Add<CUpti_ActivityAPI>(), kind, cbid, corr, Gpu(start_us), Gpu(end_us), kPid,
                   kTid);
}

void Kernel(Buffer& b, const char* name, uint32_t corr, int64_t start_us, int64_t end_us) {
  auto& k = b.Add<CUpti_ActivityKernel10>();
  k.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
  k.start = Gpu(start_us);
  k.end = Gpu(end_us);
  k.deviceId = 0;
  k.streamId = 7;
  k.correlationId = corr;
  k.gridX = 4096;
  k.gridY = k.gridZ = 1;
  k.blockX = 128;
  k.blockY = k.blockZ = 1;
  k.registersPerThread = 32;
  k.staticSharedMemory = 2048;
  k.name = name;
}

// Buffer 1: the device, step 1 (H2D copy, a kernel, an NCCL kernel, a memset, an allocation)
// and the start of step 2. Buffer 2: the rest of step 2.
void FillBuffers(Buffer& one, Buffer& two) {
  auto& d = one.Add<CUpti_ActivityDevice5>();
  testkit::FillH100Device(d, 0, "NVIDIA H100 80GB HBM3");
  // GPU-5f1c1234-89ab-cdef-0123-456789abcdef; not a MIG instance.
  const unsigned char uuid[16] = {0x5f, 0x1c, 0x12, 0x34, 0x89, 0xab, 0xcd, 0xef,
                                  0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef};
  std::memcpy(d.uuid.bytes, uuid, sizeof(uuid));

  Marker(one, CUPTI_ACTIVITY_FLAG_MARKER_START, 1, 100, "train_step 1");
  Api(one, CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_v3020, 1, 200, 210);
  auto& c = one.Add<CUpti_ActivityMemcpy6>();
  c.kind = CUPTI_ACTIVITY_KIND_MEMCPY;
  c.copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_HTOD;
  c.srcKind = CUPTI_ACTIVITY_MEMORY_KIND_PINNED;
  c.dstKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
  c.flags = CUPTI_ACTIVITY_FLAG_MEMCPY_ASYNC;
  c.bytes = 8 << 20;
  c.start = Gpu(300);
  c.end = Gpu(700);
  c.streamId = 13;
  c.correlationId = 1;
  Api(one, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, 2, 220, 230);
  Kernel(one, "_Z6squarePfi", 2, 800, 2000);
  Api(one, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, 3, 240, 250);
  Kernel(one, "ncclDevKernel_AllReduce_Sum_f32_RING_LL", 3, 2100, 3000);
  Api(one, CUPTI_RUNTIME_TRACE_CBID_cudaMemsetAsync_v3020, 4, 260, 270);
  auto& s = one.Add<CUpti_ActivityMemset4>();
  s.kind = CUPTI_ACTIVITY_KIND_MEMSET;
  s.start = Gpu(3100);
  s.end = Gpu(3150);
  s.bytes = 4096;
  s.streamId = 7;
  s.correlationId = 4;
  s.memoryKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
  auto& m = one.Add<CUpti_ActivityMemory4>();
  m.kind = CUPTI_ACTIVITY_KIND_MEMORY2;
  m.memoryOperationType = CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION;
  m.memoryKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
  m.address = 0x7f0000000000;
  m.bytes = 8 << 20;
  m.timestamp = Gpu(150);
  m.processId = kPid;
  Api(one, CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_v3020, 5, 280, 3200);
  auto& y = one.Add<CUpti_ActivitySynchronization2>();
  y.kind = CUPTI_ACTIVITY_KIND_SYNCHRONIZATION;
  y.type = CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE;
  y.start = Gpu(285);
  y.end = Gpu(3190);
  y.correlationId = 5;
  y.contextId = 0;  // the kernels' context
  y.streamId = 7;
  y.cudaEventId = CUPTI_SYNCHRONIZATION_INVALID_VALUE;
  y.cudaEventSyncId = CUPTI_SYNCHRONIZATION_INVALID_VALUE;
  Marker(one, CUPTI_ACTIVITY_FLAG_MARKER_END, 1, 3300, nullptr);
  Marker(one, CUPTI_ACTIVITY_FLAG_MARKER_START, 2, 4000, "train_step 2");

  Api(two, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, 6, 4100, 4110);
  Kernel(two, "_Z6squarePfi", 6, 4200, 5000);
  Api(two, CUPTI_RUNTIME_TRACE_CBID_cudaStreamWaitEvent_v3020, 7, 4120, 4130);
  auto& w = two.Add<CUpti_ActivitySynchronization2>();
  w.kind = CUPTI_ACTIVITY_KIND_SYNCHRONIZATION;
  w.type = CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_WAIT_EVENT;
  w.start = Gpu(4121);
  w.end = Gpu(4129);
  w.correlationId = 7;
  w.contextId = 0;
  w.streamId = 13;
  w.cudaEventId = 3;
  w.cudaEventSyncId = 1;
  Api(two, CUPTI_RUNTIME_TRACE_CBID_cudaDeviceSynchronize_v3020, 8, 5010, 5090);
  auto& x = two.Add<CUpti_ActivitySynchronization2>();
  x.kind = CUPTI_ACTIVITY_KIND_SYNCHRONIZATION;
  x.type = CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_CONTEXT_SYNCHRONIZE;
  x.start = Gpu(5011);
  x.end = Gpu(5089);
  x.correlationId = 8;
  x.contextId = 0;
  x.streamId = CUPTI_SYNCHRONIZATION_INVALID_VALUE;
  x.cudaEventId = CUPTI_SYNCHRONIZATION_INVALID_VALUE;
  x.cudaEventSyncId = CUPTI_SYNCHRONIZATION_INVALID_VALUE;
  Marker(two, CUPTI_ACTIVITY_FLAG_MARKER_END, 2, 5100, nullptr);
  Marker(two, CUPTI_ACTIVITY_FLAG_MARKER_END, 99, 5200, nullptr);  // no start: counted
  // A kind this code does not convert; its size is unknown to the walker, so it ends the buffer.
  auto& o = two.Add<CUpti_ActivityOverhead3>();
  o.kind = CUPTI_ACTIVITY_KIND_OVERHEAD;
}

std::string Str(const std::vector<uint8_t>& v) { return std::string(v.begin(), v.end()); }

// One buffer through the library's conversion, then back through the agent's parser.
absl::StatusOr<agent::cupti::RecordBatch> ConvertAndParse(const Buffer& b) {
  RecordBatchWriter writer(1 << 20);
  CuptiRecordConverter converter(&writer);
  converter.AddBuffer(b.data(), b.size());
  return agent::cupti::ParseRecordBatch(Str(writer.Finish(kPid, kOffset, 0)));
}

TEST(CuptiRecordsTest, WalkerFollowsTheBufferLayout) {
  Buffer one, two;
  FillBuffers(one, two);
  size_t offset = 0;
  int n = 0;
  while (NextCuptiRecord(one.data(), one.size(), &offset) != nullptr) ++n;
  EXPECT_EQ(n, 15);
  EXPECT_EQ(offset, one.size());
  // A record cut short ends the walk.
  offset = 0;
  EXPECT_EQ(NextCuptiRecord(one.data(), sizeof(CUpti_ActivityDevice5) - 1, &offset), nullptr);
  EXPECT_EQ(offset, 0u);
#ifdef PROFCTL_HAVE_LIBCUPTI
  // libcupti's own iterator visits the same records (it needs no GPU).
  CUpti_Activity* record = nullptr;
  size_t ours = 0;
  while (cuptiActivityGetNextRecord(one.data(), one.size(), &record) == CUPTI_SUCCESS) {
    const CUpti_Activity* expected = NextCuptiRecord(one.data(), one.size(), &ours);
    ASSERT_EQ(record, expected);
  }
  EXPECT_EQ(ours, one.size());
#endif
}

TEST(CuptiRecordsTest, StepMarkersFeedTheStepSignalAcrossBuffers) {
  Buffer one, two, three;
  FillBuffers(one, two);
  Marker(three, CUPTI_ACTIVITY_FLAG_MARKER_START, 7, 6000, "forward");  // not a step
  Marker(three, CUPTI_ACTIVITY_FLAG_MARKER_END, 7, 6100, nullptr);
  Marker(three, CUPTI_ACTIVITY_FLAG_MARKER_INSTANTANEOUS, 8, 6200, "step 9");  // not a range
  StepRangeTracker steps;
  for (const Buffer* b : {&one, &two, &three}) {
    size_t offset = 0;
    while (const CUpti_Activity* r = NextCuptiRecord(b->data(), b->size(), &offset)) {
      AddStepMarker(*r, &steps);
    }
  }
  StepSampleEntry out[4];
  ASSERT_EQ(steps.Take(out, 4), 2u);
  EXPECT_EQ(out[0].step_num, 1);
  EXPECT_EQ(out[0].start_wall_ns, static_cast<int64_t>(Gpu(100)));  // still the GPU clock
  EXPECT_EQ(out[0].end_wall_ns, static_cast<int64_t>(Gpu(3300)));
  EXPECT_EQ(out[1].step_num, 2);
  EXPECT_EQ(out[1].end_wall_ns, static_cast<int64_t>(Gpu(5100)));
  EXPECT_EQ(steps.open(), 0u);
}

TEST(CuptiRecordsTest, DeviceUuidsOfAMigInstance) {
  Buffer b;
  auto& d = b.Add<CUpti_ActivityDevice5>();
  d.kind = CUPTI_ACTIVITY_KIND_DEVICE;
  d.id = 1;
  d.name = "NVIDIA A100-SXM4-80GB MIG 1g.10gb";
  for (int i = 0; i < 16; ++i) {
    d.uuid.bytes[i] = static_cast<char>(0x10 + i);
    d.migUuid.bytes[i] = static_cast<char>(0xA0 + i);
  }
  d.isMigEnabled = 1;
  absl::StatusOr<agent::cupti::RecordBatch> batch = ConvertAndParse(b);
  ASSERT_THAT(batch, IsOk());
  ASSERT_THAT(batch->devices, SizeIs(1));
  const DeviceRecord& r = batch->devices[0];
  EXPECT_EQ(r.device_id, 1u);
  EXPECT_EQ(r.flags, inject::kDeviceHasUuid | inject::kDeviceIsMig);
  EXPECT_EQ(r.uuid[0], 0x10);
  EXPECT_EQ(r.uuid[15], 0x1F);
  EXPECT_EQ(r.mig_uuid[0], 0xA0);
  EXPECT_EQ(r.mig_uuid[15], 0xAF);
}

// A light window (PROFCTL_INJECT_WINDOW=launches) records RuntimeWindowCalls one by one: every one
// is named without libcupti, the launch forms among them (the per-thread stream's, CUDA 13's
// __cudaLaunchKernel), and such a launch ties its kernel as cudaLaunchKernel does.
TEST(CuptiRecordsTest, ALightWindowsRuntimeCallsAreNamedAndTieTheirKernels) {
  size_t count = 0;
  const ApiCallName* calls = RuntimeWindowCalls(&count);
  std::vector<uint32_t> ids;
  for (size_t i = 0; i < count; ++i) {
    ids.push_back(calls[i].cbid);
    EXPECT_STREQ(BuiltinApiName(static_cast<uint8_t>(ApiDomain::kRuntime), calls[i].cbid),
                 calls[i].name);
  }
  for (uint32_t id : {CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000,
                      CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_ptsz_v7000,
                      CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_v13000,
                      CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_v11060,
                      CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000,
                      CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_v3020,
                      CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_v3020}) {
    EXPECT_THAT(ids, Contains(id));
  }
  const auto runtime_name = [](uint32_t cbid) {
    const char* name = BuiltinApiName(static_cast<uint8_t>(ApiDomain::kRuntime), cbid);
    return std::string(name != nullptr ? name : "(none)");
  };
  EXPECT_EQ(runtime_name(CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_ptsz_v13000),
            "cudaLaunchKernel");
  EXPECT_EQ(runtime_name(CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_ptsz_v11060),
            "cudaLaunchKernelExC");
  EXPECT_EQ(runtime_name(CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_ptsz_v7000), "cudaMemcpyAsync");
  EXPECT_EQ(runtime_name(CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_ptsz_v7000),
            "cudaStreamSynchronize");
  EXPECT_EQ(runtime_name(CUPTI_RUNTIME_TRACE_CBID_cudaGetDevice_v3020), "(none)");

  Buffer b;
  Api(b, CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_v13000, 7, 100, 110);
  Kernel(b, "_Z6squarePfi", 7, 200, 400);
  absl::StatusOr<agent::cupti::RecordBatch> batch = ConvertAndParse(b);
  ASSERT_THAT(batch, IsOk());
  ASSERT_THAT(batch->apis, SizeIs(1));
  EXPECT_EQ(batch->String(batch->apis[0].name), "cudaLaunchKernel");
  ASSERT_THAT(batch->kernels, SizeIs(1));
  EXPECT_EQ(batch->kernels[0].correlation_id, batch->apis[0].correlation_id);
}

// cuBLAS launches its GEMMs with cuLaunchKernelEx (CUDA 12+), Triton and XLA with cuLaunchKernel:
// DRIVER records of those calls, enabled by callback id, tie such kernels to a launch on the
// host plane as runtime launches are.
TEST(CuptiRecordsTest, DriverApiLaunchesTieTheirKernels) {
  size_t count = 0;
  const DriverLaunchCall* calls = DriverLaunchCalls(&count);
  std::vector<uint32_t> enabled;
  for (size_t i = 0; i < count; ++i) enabled.push_back(calls[i].cbid);
  EXPECT_THAT(enabled, Contains(static_cast<uint32_t>(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx)));
  EXPECT_THAT(enabled, Contains(static_cast<uint32_t>(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel)));
  EXPECT_THAT(enabled, Contains(static_cast<uint32_t>(CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch)));
  for (uint32_t id : enabled) {
    EXPECT_NE(BuiltinApiName(static_cast<uint8_t>(ApiDomain::kDriver), id), nullptr) << id;
  }

  Buffer b;
  Api(b, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, 1, 100, 110);
  Kernel(b, "_Z6squarePfi", 1, 200, 400);
  Api(b, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx, 2, 120, 130, CUPTI_ACTIVITY_KIND_DRIVER);
  Kernel(b, "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64", 2, 400, 900);
  absl::StatusOr<agent::cupti::RecordBatch> batch = ConvertAndParse(b);
  ASSERT_THAT(batch, IsOk());
  ASSERT_THAT(batch->apis, SizeIs(2));
  EXPECT_EQ(batch->apis[1].domain, static_cast<uint8_t>(ApiDomain::kDriver));
  EXPECT_EQ(batch->String(batch->apis[1].name), "cuLaunchKernelEx");

  agent::cupti::CuptiXSpaceOptions options;
  options.hostname = "gpu-host-1";
  options.profile_start_ns = kW;
  options.profile_stop_ns = kW + 1000 * kUs;
  xspace::XSpace space;
  absl::StatusOr<agent::cupti::CuptiXSpaceStats> stats =
      agent::cupti::BuildCuptiXSpace({*batch}, options, &space);
  ASSERT_THAT(stats, IsOk());
  EXPECT_EQ(stats->kernels, 2);
  EXPECT_THAT(testkit::CheckXProfConformance(space, "gpu-host-1"),
              Not(Contains(StartsWith("[correlation]"))));
  // The driver launch is on the launching thread, with the kernel's correlation id.
  const xspace::XPlane* host = xspace::FindPlane(space, xspace::kHostPlaneName);
  ASSERT_NE(host, nullptr);
  const xspace::XPlaneReader h(*host);
  std::vector<std::string> launches;
  h.ForEachEvent([&](const xspace::XLine& line, const xspace::XEvent& e) {
    if (h.EventName(e) == "cuLaunchKernelEx") {
      EXPECT_EQ(line.id(), kTid);
      launches.emplace_back(h.EventName(e));
    }
  });
  EXPECT_THAT(launches, SizeIs(1));
}

// The window records every driver call (CUPTI_ACTIVITY_KIND_DRIVER: on an H100 with CUDA 13 the
// launches enabled one by one gave no records, and cuBLAS's CUTLASS kernels, launched with
// cuLaunchKernel, had no launch). The converter keeps the launches and counts the rest.
TEST(CuptiRecordsTest, OnlyDriverLaunchesAreKeptOfEveryDriverCall) {
  Buffer b;
  Api(b, CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2, 1, 100, 105, CUPTI_ACTIVITY_KIND_DRIVER);
  Api(b, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, 2, 110, 120, CUPTI_ACTIVITY_KIND_DRIVER);
  Kernel(b, "void cutlass::Kernel2<cutlass_80_simt_sgemm_128x64_8x5_tn_align1>", 2, 200, 400);
  Api(b, CUPTI_DRIVER_TRACE_CBID_cuEventRecord, 3, 130, 131, CUPTI_ACTIVITY_KIND_DRIVER);
  Api(b, CUPTI_DRIVER_TRACE_CBID_cuStreamSynchronize, 4, 140, 150, CUPTI_ACTIVITY_KIND_DRIVER);
  RecordBatchWriter writer(1 << 20);
  CuptiRecordConverter converter(&writer);
  converter.AddBuffer(b.data(), b.size());
  EXPECT_EQ(converter.ignored_records(), 3u);
  absl::StatusOr<agent::cupti::RecordBatch> batch =
      agent::cupti::ParseRecordBatch(Str(writer.Finish(kPid, kOffset, 0)));
  ASSERT_THAT(batch, IsOk());
  ASSERT_THAT(batch->apis, SizeIs(1));
  EXPECT_EQ(batch->String(batch->apis[0].name), "cuLaunchKernel");
  EXPECT_EQ(batch->apis[0].correlation_id, 2u);
  ASSERT_THAT(batch->kernels, SizeIs(1));
  EXPECT_EQ(batch->kernels[0].correlation_id, batch->apis[0].correlation_id);
}

TEST(CuptiRecordsTest, ConvertsRecordsAndPairsMarkersAcrossBuffers) {
  Buffer one, two;
  FillBuffers(one, two);
  RecordBatchWriter writer(1 << 20);
  CuptiRecordConverter converter(&writer);
  converter.AddBuffer(one.data(), one.size());
  EXPECT_EQ(converter.open_ranges(), 1u);  // step 2 waits for its end
  absl::StatusOr<agent::cupti::RecordBatch> first =
      agent::cupti::ParseRecordBatch(Str(writer.Finish(kPid, kOffset, 0)));
  converter.AddBuffer(two.data(), two.size());
  EXPECT_EQ(converter.open_ranges(), 0u);
  EXPECT_EQ(converter.unmatched_markers(), 1u);
  absl::StatusOr<agent::cupti::RecordBatch> second =
      agent::cupti::ParseRecordBatch(Str(writer.Finish(kPid, kOffset, /*extra_dropped=*/0)));
  ASSERT_THAT(first, IsOk());
  ASSERT_THAT(second, IsOk());

  ASSERT_THAT(first->kernels, SizeIs(2));
  const KernelRecord& k = first->kernels[0];
  EXPECT_EQ(first->String(k.name), "square(float*, int)");  // demangled
  EXPECT_EQ(k.start_ns, Gpu(800));
  EXPECT_EQ(k.correlation_id, 2u);
  EXPECT_EQ(k.grid[0], 4096);
  EXPECT_EQ(k.block[0], 128);
  EXPECT_EQ(k.registers_per_thread, 32u);
  EXPECT_EQ(k.static_shared_bytes, 2048u);
  EXPECT_EQ(first->String(first->kernels[1].name), "ncclDevKernel_AllReduce_Sum_f32_RING_LL");
  ASSERT_THAT(first->memcpys, SizeIs(1));
  EXPECT_EQ(first->memcpys[0].copy_kind, CUPTI_ACTIVITY_MEMCPY_KIND_HTOD);
  EXPECT_EQ(first->memcpys[0].bytes, 8u << 20);
  ASSERT_THAT(first->memsets, SizeIs(1));
  ASSERT_THAT(first->syncs, SizeIs(1));
  const SynchronizationRecord& y = first->syncs[0];
  EXPECT_EQ(y.type, static_cast<uint8_t>(SyncType::kStreamSynchronize));
  EXPECT_EQ(y.start_ns, Gpu(285));  // still the GPU clock
  EXPECT_EQ(y.end_ns, Gpu(3190));
  EXPECT_EQ(y.correlation_id, 5u);
  EXPECT_EQ(y.context_id, 0u);
  EXPECT_EQ(y.stream_id, 7u);
  EXPECT_EQ(y.cuda_event_id, kSyncNotApplicable);
  ASSERT_THAT(second->syncs, SizeIs(2));
  EXPECT_EQ(second->syncs[0].type, static_cast<uint8_t>(SyncType::kStreamWaitEvent));
  EXPECT_EQ(second->syncs[0].stream_id, 13u);
  EXPECT_EQ(second->syncs[0].cuda_event_id, 3u);
  EXPECT_EQ(second->syncs[1].type, static_cast<uint8_t>(SyncType::kContextSynchronize));
  EXPECT_EQ(second->syncs[1].stream_id, kSyncNotApplicable);
  ASSERT_THAT(second->apis, SizeIs(3));
  EXPECT_EQ(second->String(second->apis[1].name), "cudaStreamWaitEvent");
  ASSERT_THAT(first->apis, SizeIs(5));
  EXPECT_EQ(first->String(first->apis[1].name), "cudaLaunchKernel");
  EXPECT_EQ(first->apis[1].tid, kTid);
  ASSERT_THAT(first->ranges, SizeIs(1));
  EXPECT_EQ(first->String(first->ranges[0].name), "train_step 1");
  EXPECT_EQ(first->ranges[0].start_ns, Gpu(100));
  EXPECT_EQ(first->ranges[0].end_ns, Gpu(3300));
  EXPECT_EQ(first->ranges[0].tid, kTid);
  ASSERT_THAT(first->memory, SizeIs(1));
  EXPECT_EQ(first->memory[0].operation, static_cast<uint8_t>(MemoryOperation::kAllocation));
  ASSERT_THAT(first->devices, SizeIs(1));
  EXPECT_EQ(first->devices[0].memory_bandwidth, 3'352'320'000'000u);
  EXPECT_EQ(first->String(first->devices[0].name), "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(first->devices[0].flags, inject::kDeviceHasUuid);
  agent::cupti::GpuUuid uuid;
  std::copy(std::begin(first->devices[0].uuid), std::end(first->devices[0].uuid), uuid.begin());
  EXPECT_EQ(agent::cupti::FormatGpuUuid("GPU-", uuid), "GPU-5f1c1234-89ab-cdef-0123-456789abcdef");
  ASSERT_THAT(second->ranges, SizeIs(1));
  EXPECT_EQ(second->String(second->ranges[0].name), "train_step 2");  // named in batch two
  EXPECT_EQ(second->gpu_minus_wall_ns, kOffset);

  // Both batches -> the host's XSpace.
  agent::cupti::CuptiXSpaceOptions options;
  options.hostname = "gpu-host-1";
  options.profile_start_ns = kW;
  options.profile_stop_ns = kW + 6000 * kUs;
  xspace::XSpace space;
  absl::StatusOr<agent::cupti::CuptiXSpaceStats> stats =
      agent::cupti::BuildCuptiXSpace({*first, *second}, options, &space);
  ASSERT_THAT(stats, IsOk());
  EXPECT_EQ(stats->kernels, 3);
  EXPECT_EQ(stats->steps, 2);
  EXPECT_EQ(stats->outside_window, 0);
  EXPECT_EQ(stats->synchronizations, 3);
  EXPECT_EQ(stats->unmatched_synchronizations, 0);
  ASSERT_THAT(xspace::Validate(space), IsOk()) << xspace::Validate(space);
  EXPECT_THAT(testkit::CheckXProfConformance(space, "gpu-host-1"), Each(StartsWith("[kernel-op]")));
  const xspace::XPlane* host = xspace::FindPlane(space, xspace::kHostPlaneName);
  ASSERT_NE(host, nullptr);
  const xspace::XPlaneReader h(*host);
  int roots = 0, syncs = 0;
  h.ForEachEvent([&](const xspace::XLine& line, const xspace::XEvent& e) {
    EXPECT_EQ(line.id(), h.EventName(e) == "MemoryAllocation" ? kPid : kTid);
    if (h.IntStat(e, "_r") == 1) {
      ++roots;
      EXPECT_EQ(xspace::EventStartNs(kW, line, e),
                kW + (h.IntStat(e, "step_num") == 1 ? 100 : 4000) * kUs);
    }
    if (h.EventName(e) == "cudaLaunchKernel") {
      EXPECT_THAT(h.IntStat(e, "device_id"), Optional(0));
      EXPECT_EQ(h.IntStat(e, "correlation_id").value_or(0) >> 32, kPid);
    }
    if (h.EventName(e) == "cuStreamSynchronize") {
      ++syncs;
      EXPECT_EQ(xspace::EventStartNs(kW, line, e), kW + 285 * kUs);
      EXPECT_EQ(xspace::EventEndNs(kW, line, e), kW + 3190 * kUs);
      EXPECT_THAT(h.IntStat(e, "correlation_id"), Optional((int64_t{kPid} << 32) | 5));
      EXPECT_THAT(h.IntStat(e, "device_id"), Optional(0));
      EXPECT_THAT(h.IntStat(e, "stream_id"), Optional(7));
    }
    if (h.EventName(e) == "cuStreamWaitEvent") {
      ++syncs;
      EXPECT_THAT(h.IntStat(e, "stream_id"), Optional(13));
      EXPECT_THAT(h.IntStat(e, "cuda_event_id"), Optional(3));
    }
    if (h.EventName(e) == "cuCtxSynchronize") {
      ++syncs;
      EXPECT_EQ(h.IntStat(e, "stream_id"), std::nullopt);
    }
  });
  EXPECT_EQ(roots, 2);
  EXPECT_EQ(syncs, 3);
  // Nothing of the synchronization reaches the device plane.
  const xspace::XPlane* gpu = xspace::FindPlane(space, "/device:GPU:0");
  ASSERT_NE(gpu, nullptr);
  const xspace::XPlaneReader g(*gpu);
  g.ForEachEvent([&](const xspace::XLine&, const xspace::XEvent& e) {
    EXPECT_THAT(std::string(g.EventName(e)), ::testing::Not(::testing::HasSubstr("Synchronize")));
    EXPECT_NE(g.EventName(e), "cuStreamWaitEvent");
  });

  absl::StatusOr<analysis::HostTrace> trace = analysis::ReadXSpaceHost(space, "gpu-host-1", 0);
  ASSERT_THAT(trace, IsOk());
  std::vector<int64_t> steps;
  for (const analysis::StepMarker& m : trace->steps) steps.push_back(m.step);
  EXPECT_THAT(steps, ElementsAre(1, 2));
  ASSERT_EQ(trace->devices.size(), 1u);
  int collectives = 0, h2d = 0, compute = 0;
  for (const analysis::Op& op : trace->devices[0].ops) {
    collectives += op.kind == analysis::OpKind::kCollective;
    h2d += op.kind == analysis::OpKind::kMemcpyH2D;
    compute += op.kind == analysis::OpKind::kDeviceCompute;
  }
  EXPECT_EQ(collectives, 1);
  EXPECT_EQ(h2d, 1);
  EXPECT_EQ(compute, 3);  // two kernels and the memset: no synchronization
}

}  // namespace
}  // namespace profctl::inject
