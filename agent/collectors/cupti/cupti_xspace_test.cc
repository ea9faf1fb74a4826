#include "agent/collectors/cupti/cupti_xspace.h"

#include <algorithm>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "agent/collectors/cupti/record_batch.h"
#include "analysis/op_classify.h"
#include "analysis/readers/xspace_reader.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "inject/record_batch_writer.h"
#include "tests/build_paths.h"
#include "tests/status_matchers.h"
#include "tests/test_time.h"
#include "tests/xprof_conformance.h"
#include "xspace/xspace.h"

using ::profctl::test_paths::SourcePath;
using ::profctl::testkit::IsOk;

namespace profctl::agent::cupti {
namespace {

using ::testing::AllOf;
using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;
using ::testing::Optional;
using ::testing::StartsWith;
using ::testing::UnorderedElementsAre;

constexpr int64_t kW = 1'700'000'000'000'000'000;  // window start, wall ns
using ::profctl::test_time::kUs;
constexpr int64_t kOffset = 5000;  // GPU clock - wall clock
constexpr uint32_t kPid = 100;

uint64_t Gpu(int64_t wall_us) { return static_cast<uint64_t>(kW + wall_us * kUs + kOffset); }

struct Job {
  inject::RecordBatchWriter w{1 << 20};
  uint32_t pid = kPid;
  void Api(const char* name, uint32_t tid, uint32_t corr, int64_t start_us, int64_t end_us) {
    inject::ApiRecord a;
    a.start_ns = Gpu(start_us);
    a.end_ns = Gpu(end_us);
    a.pid = pid;
    a.tid = tid;
    a.correlation_id = corr;
    a.domain = static_cast<uint8_t>(inject::ApiDomain::kRuntime);
    a.name = w.Intern(name);
    w.Add(a);
  }
  void Kernel(const char* name, uint32_t stream, uint32_t corr, int64_t start_us, int64_t end_us) {
    inject::KernelRecord k;
    k.start_ns = Gpu(start_us);
    k.end_ns = Gpu(end_us);
    k.stream_id = stream;
    k.correlation_id = corr;
    k.grid[0] = 132;
    k.grid[1] = k.grid[2] = 1;
    k.block[0] = 384;
    k.block[1] = k.block[2] = 1;
    k.registers_per_thread = 168;
    k.dynamic_shared_bytes = 215040;
    k.name = w.Intern(name);
    w.Add(k);
  }
  void Sync(inject::SyncType type, uint32_t corr, uint32_t context, uint32_t stream, uint32_t event,
            int64_t start_us, int64_t end_us) {
    inject::SynchronizationRecord y;
    y.start_ns = Gpu(start_us);
    y.end_ns = Gpu(end_us);
    y.correlation_id = corr;
    y.context_id = context;
    y.stream_id = stream;
    y.cuda_event_id = event;
    y.type = static_cast<uint8_t>(type);
    w.Add(y);
  }
  void Range(const char* name, uint32_t tid, int64_t start_us, int64_t end_us) {
    inject::NvtxRangeRecord r;
    r.start_ns = Gpu(start_us);
    r.end_ns = Gpu(end_us);
    r.pid = pid;
    r.tid = tid;
    r.name = w.Intern(name);
    w.Add(r);
  }
  // GPU 0, an H100.
  void Device() {
    inject::DeviceRecord d;
    d.name = w.Intern("NVIDIA H100 80GB HBM3");
    d.memory_size = 85'520'809'984;
    d.memory_bandwidth = 3'352'320'000'000;
    d.compute_capability_major = 9;
    d.sm_count = 132;
    d.core_clock_khz = 1'980'000;
    d.max_warps_per_sm = 64;
    d.max_blocks_per_sm = 32;
    d.max_registers_per_sm = 65536;
    d.max_shared_bytes_per_sm = 233472;
    w.Add(d);
  }
  RecordBatch Batch() {
    const std::vector<uint8_t> bytes = w.Finish(pid, kOffset, 0);
    absl::StatusOr<RecordBatch> b = ParseRecordBatch(std::string(bytes.begin(), bytes.end()));
    EXPECT_THAT(b, IsOk());
    return b.ok() ? *std::move(b) : RecordBatch();
  }
};

// One process, two threads, GPU 0 (an H100), two steps of a training-like loop.
RecordBatch MakeBatch() {
  Job j;
  j.Device();
  j.Range("train_step 1", 101, 100, 4000);
  j.Range("train_step 1", 102, 200, 3900);  // a second thread marks the same step
  j.Range("train_step 2", 101, 5000, 9000);
  j.Range("forward", 101, 215, 3750);
  j.Api("cudaMemcpyAsync", 101, 1, 220, 230);
  inject::MemcpyRecord c;
  c.start_ns = Gpu(300);
  c.end_ns = Gpu(500);
  c.bytes = 1 << 20;
  c.stream_id = 13;
  c.correlation_id = 1;
  c.copy_kind = 1;  // HtoD
  c.src_kind = 2;   // pinned
  c.dst_kind = 3;   // device
  c.flags = 1;      // async
  j.w.Add(c);
  j.Api("cudaLaunchKernel", 101, 2, 240, 250);
  j.Kernel("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n", 7, 2, 600, 2600);
  j.Api("cudaLaunchKernel", 101, 3, 260, 270);
  j.Kernel("ncclDevKernel_AllReduce_Sum_bf16_RING_LL", 21, 3, 2700, 3500);
  j.Api("cudaMemsetAsync", 101, 4, 280, 290);
  inject::MemsetRecord s;
  s.start_ns = Gpu(3600);
  s.end_ns = Gpu(3650);
  s.bytes = 4096;
  s.stream_id = 7;
  s.correlation_id = 4;
  s.memory_kind = 3;
  j.w.Add(s);
  j.Api("cudaStreamSynchronize", 101, 5, 300, 3700);  // no device activity: not a launch
  j.Api("cudaLaunchKernel", 101, 6, 5100, 5110);
  j.Kernel("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n", 7, 6, 5200, 8000);
  j.Kernel("before_the_window", 7, 7, -50, -10);
  inject::MemoryRecord m;
  m.timestamp_ns = Gpu(150);
  m.address = 0x7f0000000000;
  m.bytes = 1 << 20;
  m.pid = kPid;
  m.operation = static_cast<uint8_t>(inject::MemoryOperation::kAllocation);
  m.memory_kind = 3;
  j.w.Add(m);
  const std::vector<uint8_t> bytes = j.w.Finish(kPid, kOffset, /*extra_dropped=*/2);
  absl::StatusOr<RecordBatch> b = ParseRecordBatch(std::string(bytes.begin(), bytes.end()));
  EXPECT_THAT(b, IsOk());
  return b.ok() ? *std::move(b) : RecordBatch();
}

CuptiXSpaceOptions Options() {
  CuptiXSpaceOptions o;
  o.hostname = "gpu-host-1";
  o.profile_start_ns = kW;
  o.profile_stop_ns = kW + 10'000 * kUs;
  return o;
}

const xspace::XLine* FindLine(const xspace::XPlane& plane, int64_t id) {
  for (const xspace::XLine& line : plane.lines()) {
    if (line.id() == id) return &line;
  }
  return nullptr;
}

// The string a ref stat names (or the string value).
std::string RefOrStr(const xspace::XPlane& plane, const xspace::XEvent& e, absl::string_view stat) {
  const xspace::XPlaneReader r(plane);
  const std::optional<int64_t> id = r.StatId(stat);
  for (const xspace::XStat& s : e.stats()) {
    if (!id || s.metadata_id() != *id) continue;
    if (s.has_ref_value()) {
      auto it = plane.stat_metadata().find(static_cast<int64_t>(s.ref_value()));
      return it == plane.stat_metadata().end() ? "" : it->second.name();
    }
    return s.str_value();
  }
  return "";
}

TEST(CuptiXSpaceTest, StepPatternIsTheReadersDefault) {
  EXPECT_EQ(kDefaultNvtxStepPattern, analysis::kDefaultStepPattern);
}

TEST(CuptiXSpaceTest, OccupancyAsTheSyntheticJobComputesIt) {
  inject::KernelRecord k;
  k.block[0] = 384;
  k.block[1] = k.block[2] = 1;
  k.registers_per_thread = 168;
  k.dynamic_shared_bytes = 215040;
  inject::DeviceRecord d;
  d.max_warps_per_sm = 64;
  d.max_blocks_per_sm = 32;
  d.max_registers_per_sm = 65536;
  d.max_shared_bytes_per_sm = 233472;
  EXPECT_THAT(TheoreticalOccupancyPct(k, d), Optional(18.75));
  k.block[0] = 128;
  k.registers_per_thread = 32;
  k.dynamic_shared_bytes = 0;
  EXPECT_THAT(TheoreticalOccupancyPct(k, d), Optional(100.0));
  EXPECT_EQ(TheoreticalOccupancyPct(k, inject::DeviceRecord()), std::nullopt);
  k.block[0] = 0;
  EXPECT_EQ(TheoreticalOccupancyPct(k, d), std::nullopt);
  k.block[0] = k.block[1] = k.block[2] = 1 << 30;  // found by the fuzzer: no overflow
  EXPECT_EQ(TheoreticalOccupancyPct(k, d), std::nullopt);
  k.block[0] = 1025;
  k.block[1] = k.block[2] = 1;
  EXPECT_EQ(TheoreticalOccupancyPct(k, d), std::nullopt);
}

TEST(CuptiXSpaceTest, BuildsTheShapeXProfReads) {
  xspace::XSpace space;
  absl::StatusOr<CuptiXSpaceStats> stats = BuildCuptiXSpace({MakeBatch()}, Options(), &space);
  ASSERT_THAT(stats, IsOk());
  EXPECT_EQ(stats->kernels, 3);
  EXPECT_EQ(stats->memcpys, 1);
  EXPECT_EQ(stats->memsets, 1);
  EXPECT_EQ(stats->api_calls, 6);
  EXPECT_EQ(stats->nvtx_ranges, 4);
  EXPECT_EQ(stats->steps, 2);
  EXPECT_EQ(stats->memory_events, 1);
  // The record past the window has no launch inside it either: left out with its launch.
  EXPECT_EQ(stats->outside_window, 0);
  EXPECT_EQ(stats->launched_outside, 1);
  EXPECT_EQ(stats->unrecorded_launches, 0);  // its launch was recorded, past the window
  EXPECT_EQ(stats->dropped_records, 2u);
  ASSERT_THAT(xspace::Validate(space), IsOk()) << xspace::Validate(space);
  EXPECT_THAT(space.hostnames(), ElementsAre("gpu-host-1"));
  EXPECT_EQ(xspace::ProfileStartNs(space), kW);

  const xspace::XPlane* gpu = xspace::FindPlane(space, "/device:GPU:0");
  ASSERT_NE(gpu, nullptr);
  EXPECT_EQ(gpu->id(), 0);
  const xspace::XLine* compute = FindLine(*gpu, 7);
  const xspace::XLine* h2d = FindLine(*gpu, 13);
  const xspace::XLine* nccl = FindLine(*gpu, 21);
  ASSERT_TRUE(compute && h2d && nccl);
  EXPECT_EQ(compute->name(), "Stream #7(Compute,Memset)");
  EXPECT_EQ(h2d->name(), "Stream #13(MemcpyH2D)");
  EXPECT_EQ(nccl->name(), "Stream #21(Compute)");
  const xspace::XPlaneReader g(*gpu);
  ASSERT_EQ(compute->events_size(), 3);
  const xspace::XEvent& gemm = compute->events(0);
  EXPECT_EQ(g.EventName(gemm), "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n");
  // The batch's calibration is applied: wall = gpu - offset.
  EXPECT_EQ(xspace::EventStartNs(kW, *compute, gemm), kW + 600 * kUs);
  EXPECT_EQ(xspace::EventEndNs(kW, *compute, gemm), kW + 2600 * kUs);
  EXPECT_THAT(g.IntStat(gemm, "correlation_id"), Optional((int64_t{kPid} << 32) | 2));
  EXPECT_EQ(RefOrStr(*gpu, gemm, "kernel_details"),
            "regs:168 static_shared:0 dynamic_shared:215040 grid:132,1,1 block:384,1,1 "
            "occ_pct:18.75");
  EXPECT_EQ(g.EventName(compute->events(1)), "Memset");
  EXPECT_EQ(RefOrStr(*gpu, compute->events(1), "memset_details"), "kind:device size:4096 async:0");
  ASSERT_EQ(h2d->events_size(), 1);
  EXPECT_EQ(g.EventName(h2d->events(0)), "MemcpyHToD");
  EXPECT_EQ(RefOrStr(*gpu, h2d->events(0), "memcpy_details"),
            "kind_src:pinned kind_dst:device size:1048576 dest:0 async:1");
  bool has_name = false;
  for (const xspace::XStat& s : gpu->stats()) {
    has_name |= s.str_value() == "NVIDIA H100 80GB HBM3";
  }
  EXPECT_TRUE(has_name);

  const xspace::XPlane* host = xspace::FindPlane(space, xspace::kHostPlaneName);
  ASSERT_NE(host, nullptr);
  const xspace::XPlaneReader h(*host);
  const xspace::XLine* main = FindLine(*host, 101);
  const xspace::XLine* other = FindLine(*host, 102);
  const xspace::XLine* memory = FindLine(*host, kPid);
  ASSERT_TRUE(main && other && memory);
  EXPECT_EQ(main->name(), "pid 100 tid 101");
  // Root first (it encloses the rest), then the calls in start order.
  const xspace::XEvent& root = main->events(0);
  EXPECT_EQ(h.EventName(root), "train_step 1");
  EXPECT_THAT(h.IntStat(root, "_r"), Optional(1));
  EXPECT_THAT(h.IntStat(root, "step_num"), Optional(1));
  EXPECT_THAT(h.IntStat(root, "_p"), Optional((int64_t{101} << 32) | 1));
  EXPECT_THAT(h.IntStat(other->events(0), "_c"), Optional((int64_t{101} << 32) | 1));
  EXPECT_EQ(h.IntStat(other->events(0), "_r"), std::nullopt);
  int launches = 0;
  for (const xspace::XEvent& e : main->events()) {
    if (h.EventName(e) == "cudaStreamSynchronize") {
      EXPECT_EQ(h.IntStat(e, "correlation_id"), std::nullopt);
    }
    if (h.EventName(e) == "cudaLaunchKernel") {
      ++launches;
      EXPECT_THAT(h.IntStat(e, "device_id"), Optional(0));
    }
  }
  EXPECT_EQ(launches, 3);
  ASSERT_EQ(memory->events_size(), 1);
  EXPECT_EQ(h.EventName(memory->events(0)), "MemoryAllocation");
  EXPECT_THAT(h.IntStat(memory->events(0), "bytes_allocated"), Optional(1 << 20));

  // XProf's conventions hold.
  EXPECT_THAT(testkit::CheckXProfConformance(space, "gpu-host-1"), IsEmpty());

  // The breakdown reader finds the NVTX steps and classifies the device work.
  absl::StatusOr<analysis::HostTrace> trace = analysis::ReadXSpaceHost(space, "gpu-host-1", 0);
  ASSERT_THAT(trace, IsOk());
  std::vector<int64_t> steps;
  for (const analysis::StepMarker& m : trace->steps) steps.push_back(m.step);
  std::sort(steps.begin(), steps.end());
  EXPECT_THAT(steps, ElementsAre(1, 1, 2));
  ASSERT_EQ(trace->devices.size(), 1u);
  std::vector<analysis::OpKind> kinds;
  for (const analysis::Op& op : trace->devices[0].ops) kinds.push_back(op.kind);
  EXPECT_THAT(kinds, Contains(analysis::OpKind::kCollective));
  EXPECT_THAT(kinds, Contains(analysis::OpKind::kMemcpyH2D));
  EXPECT_THAT(kinds, Contains(analysis::OpKind::kDeviceCompute));
  EXPECT_EQ(trace->window_start_ns, kW);
}

// Synchronization goes on the thread of the API call that synchronized (found by correlation
// id), inside it, named as TSL names it; never on a device plane, so the breakdown does not count
// it as device work.
TEST(CuptiXSpaceTest, CollectiveLaunchesGoOnTheirThreadsLine) {
  CuptiXSpaceOptions options = Options();
  const auto all_reduce =
      std::make_shared<const std::string>("ncclDevKernel_AllReduce_Sum_f32_RING_LL");
  const auto all_gather = std::make_shared<const std::string>("ncclDevKernel_AllGather_RING_LL");
  options.collective_launches = {
      {.pid = kPid, .tid = 101, .wall_ns = kW + 50 * kUs, .seq = 4, .kernel_name = all_reduce},
      {.pid = kPid, .tid = 555, .wall_ns = kW + 60 * kUs, .seq = 5, .kernel_name = all_gather},
      {.pid = kPid, .tid = 555, .wall_ns = kW - 1, .seq = 3, .kernel_name = all_gather}};
  xspace::XSpace space;
  absl::StatusOr<CuptiXSpaceStats> stats = BuildCuptiXSpace({MakeBatch()}, options, &space);
  ASSERT_THAT(stats, IsOk());
  EXPECT_EQ(stats->collective_launches, 2);
  const xspace::XPlane* host = xspace::FindPlane(space, xspace::kHostPlaneName);
  ASSERT_NE(host, nullptr);
  const xspace::XPlaneReader h(*host);
  const xspace::XLine* main = FindLine(*host, 101);
  const xspace::XLine* comm = FindLine(*host, 555);
  ASSERT_TRUE(main && comm);
  EXPECT_EQ(comm->name(), "pid 100 tid 555");
  std::vector<std::string> got;
  h.ForEachEvent([&](const xspace::XLine& line, const xspace::XEvent& e) {
    if (const std::optional<std::string> k = h.StrStat(e, "kernel_name")) {
      got.push_back(absl::StrCat(line.id(), " ", h.EventName(e), " ",
                                 xspace::EventStartNs(kW, line, e), " ", e.duration_ps(), " ", *k,
                                 " ", h.IntStat(e, "nccl_launch_seq").value_or(-1)));
    }
  });
  EXPECT_THAT(got,
              UnorderedElementsAre(
                  absl::StrCat("101 ncclAllReduce ", kW + 50 * kUs, " 0 ", *all_reduce, " 4"),
                  absl::StrCat("555 ncclAllGather ", kW + 60 * kUs, " 0 ", *all_gather, " 5")));
  EXPECT_THAT(xspace::Validate(space), IsOk());
  EXPECT_THAT(testkit::CheckXProfConformance(space, "gpu-host-1"), IsEmpty());
  EXPECT_THAT(analysis::ReadXSpaceHost(space, "gpu-host-1", 0), IsOk());
}

TEST(CuptiXSpaceTest, SynchronizationGoesOnTheCallingThread) {
  Job j;
  constexpr uint32_t kNa = inject::kSyncNotApplicable;
  j.Device();
  j.Api("cudaLaunchKernel", 101, 2, 240, 250);
  j.Kernel("gemm", /*stream=*/7, /*corr=*/2, 600, 2600);  // in context 0
  j.Api("cudaStreamSynchronize", 101, 5, 300, 3700);
  j.Sync(inject::SyncType::kStreamSynchronize, 5, 0, 7, kNa, 310, 3690);
  j.Api("cudaStreamWaitEvent", 102, 8, 4000, 4010);
  j.Sync(inject::SyncType::kStreamWaitEvent, 8, 0, 7, 3, 4001, 4012);  // ends after its call
  j.Api("cudaDeviceSynchronize", 101, 9, 5000, 6000);
  j.Sync(inject::SyncType::kContextSynchronize, 9, 0, kNa, kNa, 5000, 6000);  // the same span
  j.Sync(inject::SyncType::kEventSynchronize, 10, 0, kNa, 4, 6100, 6200);  // no API call: left out
  j.Api("cudaFutureSynchronize", 101, 11, 7000, 7100);
  j.Sync(static_cast<inject::SyncType>(77), 11, 2, kNa, kNa, 7010, 7090);  // unknown context
  j.Api("cudaStreamSynchronize", 101, 12, 20000, 20100);
  j.Sync(inject::SyncType::kStreamSynchronize, 12, 0, 7, kNa, 20010, 20090);  // after the window
  const std::vector<uint8_t> bytes = j.w.Finish(kPid, kOffset, 0);
  absl::StatusOr<RecordBatch> b = ParseRecordBatch(std::string(bytes.begin(), bytes.end()));
  ASSERT_THAT(b, IsOk());
  ASSERT_EQ(b->syncs.size(), 6u);

  xspace::XSpace space;
  absl::StatusOr<CuptiXSpaceStats> stats = BuildCuptiXSpace({*b}, Options(), &space);
  ASSERT_THAT(stats, IsOk());
  EXPECT_EQ(stats->synchronizations, 4);
  EXPECT_EQ(stats->unmatched_synchronizations, 1);
  EXPECT_EQ(stats->outside_window, 2);  // the last call and its synchronization
  ASSERT_THAT(xspace::Validate(space), IsOk()) << xspace::Validate(space);
  EXPECT_THAT(testkit::CheckXProfConformance(space, "gpu-host-1"), IsEmpty());

  // The device plane holds the kernel alone.
  const xspace::XPlane* gpu = xspace::FindPlane(space, "/device:GPU:0");
  ASSERT_NE(gpu, nullptr);
  ASSERT_EQ(gpu->lines_size(), 1);
  EXPECT_EQ(gpu->lines(0).name(), "Stream #7(Compute)");
  EXPECT_EQ(gpu->lines(0).events_size(), 1);

  const xspace::XPlane* host = xspace::FindPlane(space, xspace::kHostPlaneName);
  ASSERT_NE(host, nullptr);
  const xspace::XPlaneReader h(*host);
  const xspace::XLine* main = FindLine(*host, 101);
  const xspace::XLine* other = FindLine(*host, 102);
  ASSERT_TRUE(main && other);
  std::vector<std::string> names;
  for (const xspace::XEvent& e : main->events()) names.push_back(std::string(h.EventName(e)));
  // Each call, then its synchronization inside it.
  EXPECT_THAT(names, ElementsAre("cudaLaunchKernel", "cudaStreamSynchronize", "cuStreamSynchronize",
                                 "cudaDeviceSynchronize", "cuCtxSynchronize",
                                 "cudaFutureSynchronize", "unknown synchronization event"));
  const xspace::XEvent& stream_sync = main->events(2);
  EXPECT_EQ(xspace::EventStartNs(kW, *main, stream_sync), kW + 310 * kUs);
  EXPECT_EQ(xspace::EventEndNs(kW, *main, stream_sync), kW + 3690 * kUs);
  EXPECT_THAT(h.IntStat(stream_sync, "correlation_id"), Optional((int64_t{kPid} << 32) | 5));
  EXPECT_THAT(h.IntStat(stream_sync, "device_id"), Optional(0));
  EXPECT_THAT(h.IntStat(stream_sync, "context_id"), Optional(0));
  EXPECT_THAT(h.IntStat(stream_sync, "stream_id"), Optional(7));
  EXPECT_EQ(h.IntStat(stream_sync, "cuda_event_id"), std::nullopt);
  // The API call itself launched nothing: it has no correlation id (one launch per id).
  EXPECT_EQ(h.IntStat(main->events(1), "correlation_id"), std::nullopt);
  const xspace::XEvent& ctx_sync = main->events(4);
  EXPECT_EQ(xspace::EventStartNs(kW, *main, ctx_sync), kW + 5000 * kUs);
  EXPECT_EQ(xspace::EventEndNs(kW, *main, ctx_sync), kW + 6000 * kUs);
  EXPECT_EQ(h.IntStat(ctx_sync, "stream_id"), std::nullopt);
  EXPECT_THAT(h.IntStat(ctx_sync, "correlation_id"), Optional((int64_t{kPid} << 32) | 9));
  // A context with no device activity: no device, so no launch-like correlation id.
  const xspace::XEvent& unknown = main->events(6);
  EXPECT_EQ(h.IntStat(unknown, "correlation_id"), std::nullopt);
  EXPECT_EQ(h.IntStat(unknown, "device_id"), std::nullopt);
  EXPECT_THAT(h.IntStat(unknown, "context_id"), Optional(2));
  // The wait, on the other thread, clamped into its call.
  ASSERT_EQ(other->events_size(), 2);
  const xspace::XEvent& wait = other->events(1);
  EXPECT_EQ(h.EventName(wait), "cuStreamWaitEvent");
  EXPECT_EQ(xspace::EventStartNs(kW, *other, wait), kW + 4001 * kUs);
  EXPECT_EQ(xspace::EventEndNs(kW, *other, wait), kW + 4010 * kUs);
  EXPECT_THAT(h.IntStat(wait, "cuda_event_id"), Optional(3));
  EXPECT_THAT(h.IntStat(wait, "stream_id"), Optional(7));

  // The breakdown reader: the device has the kernel only; synchronizations are host waits
  // (cuStreamWaitEvent enqueues a wait, as its runtime call: a launch), never device compute.
  absl::StatusOr<analysis::HostTrace> trace = analysis::ReadXSpaceHost(space, "gpu-host-1", 0);
  ASSERT_THAT(trace, IsOk());
  ASSERT_EQ(trace->devices.size(), 1u);
  ASSERT_EQ(trace->devices[0].ops.size(), 1u);
  EXPECT_EQ(trace->devices[0].ops[0].kind, analysis::OpKind::kDeviceCompute);
  EXPECT_EQ(trace->devices[0].ops[0].end_ns - trace->devices[0].ops[0].start_ns, 2000 * kUs);
  EXPECT_EQ(analysis::ClassifyHostOpName("cuStreamSynchronize"), analysis::OpKind::kHostSync);
  EXPECT_EQ(analysis::ClassifyHostOpName("cuCtxSynchronize"), analysis::OpKind::kHostSync);
  EXPECT_EQ(analysis::ClassifyHostOpName("cuEventSynchronize"), analysis::OpKind::kHostSync);
  EXPECT_EQ(analysis::ClassifyHostOpName("cuStreamWaitEvent"), analysis::OpKind::kHostLaunch);
  int syncs = 0;
  for (const analysis::Op& op : trace->host_ops) syncs += op.kind == analysis::OpKind::kHostSync;
  EXPECT_EQ(syncs, 4);  // two runtime calls, and the two synchronizations inside them
}

// The process enabled CUPTI before the agent's window opened (the agent's timer fired late):
// device work launched by an API call that falls before the window is left out with its launch,
// never kept as a device event with no launch (XProf could not give it a step).
TEST(CuptiXSpaceTest, DeviceWorkLaunchedBeforeTheWindowGoesWithItsLaunch) {
  Job j;
  j.Api("cudaLaunchKernel", 101, 1, -300, -290);              // before the window
  j.Kernel("early_gemm", /*stream=*/7, /*corr=*/1, 50, 800);  // inside it
  j.Api("cudaLaunchKernel", 101, 2, 100, 110);
  j.Kernel("gemm", 7, 2, 900, 1900);
  j.Api("cudaLaunchKernel", 101, 3, -5, 5);  // straddles the start: left out, so is its kernel
  j.Kernel("straddling_launch", 7, 3, 2000, 2500);
  j.Api("cudaLaunchKernel", 101, 4, 9990, 10'010);  // outlasts the window's end (10 ms)
  j.Kernel("short_kernel", 7, 4, 9992, 9998);       // ends inside it: left out with its launch
  const std::vector<uint8_t> bytes = j.w.Finish(kPid, kOffset, 0);
  absl::StatusOr<RecordBatch> b = ParseRecordBatch(std::string(bytes.begin(), bytes.end()));
  ASSERT_THAT(b, IsOk());
  xspace::XSpace space;
  absl::StatusOr<CuptiXSpaceStats> stats = BuildCuptiXSpace({*b}, Options(), &space);
  ASSERT_THAT(stats, IsOk());
  EXPECT_EQ(stats->kernels, 1);
  EXPECT_EQ(stats->outside_window, 3);    // the three launches
  EXPECT_EQ(stats->launched_outside, 3);  // and their kernels
  const xspace::XPlane* gpu = xspace::FindPlane(space, "/device:GPU:0");
  ASSERT_NE(gpu, nullptr);
  ASSERT_EQ(gpu->lines_size(), 1);
  ASSERT_EQ(gpu->lines(0).events_size(), 1);
  EXPECT_EQ(gpu->event_metadata().at(gpu->lines(0).events(0).metadata_id()).name(), "gemm");
  EXPECT_THAT(testkit::CheckXProfConformance(space, "gpu-host-1"),
              Not(Contains(StartsWith("[correlation]"))));
}

TEST(CuptiXSpaceTest, CorrelationIdsOfTwoProcessesStayApart) {
  RecordBatch a = MakeBatch();
  RecordBatch b = MakeBatch();
  b.pid = 200;
  for (auto& api : b.apis) {
    api.pid = 200;
    api.tid += 1000;
  }
  for (auto& r : b.ranges) {
    r.pid = 200;
    r.tid += 1000;
  }
  for (auto& m : b.memory) m.pid = 200;
  xspace::XSpace space;
  absl::StatusOr<CuptiXSpaceStats> stats = BuildCuptiXSpace({a, b}, Options(), &space);
  ASSERT_THAT(stats, IsOk());
  EXPECT_EQ(stats->steps, 2);  // one root per step on the host
  // Both processes' kernels sit on GPU 0 stream 7 (the same ordinal in each process) and so
  // overlap; everything else about them conforms.
  for (const std::string& v : testkit::CheckXProfConformance(space, "gpu-host-1")) {
    EXPECT_TRUE(absl::StartsWith(v, "[nesting]")) << v;
  }
}

// The tf_op of each device event, by its CUPTI correlation id.
std::map<uint32_t, std::string> DeviceOps(const xspace::XSpace& space) {
  std::map<uint32_t, std::string> ops;
  const xspace::XPlane* gpu = xspace::FindPlane(space, "/device:GPU:0");
  if (gpu == nullptr) return ops;
  const xspace::XPlaneReader g(*gpu);
  for (const xspace::XLine& line : gpu->lines()) {
    for (const xspace::XEvent& e : line.events()) {
      const int64_t corr = g.IntStat(e, "correlation_id").value_or(-1);
      ops[static_cast<uint32_t>(corr & 0xFFFFFFFF)] = RefOrStr(*gpu, e, "tf_op");
    }
  }
  return ops;
}

// A step-join wrapper on a host line: its span in µs after the window start (ns precision), and
// its consumer context.
struct Wrapper {
  double start_us = 0;
  double end_us = 0;
  std::optional<int64_t> ct;
  std::optional<int64_t> c;
};
std::vector<Wrapper> JoinWrappers(const xspace::XSpace& space, int64_t tid) {
  std::vector<Wrapper> out;
  const xspace::XPlane* host = xspace::FindPlane(space, xspace::kHostPlaneName);
  const xspace::XLine* line = host == nullptr ? nullptr : FindLine(*host, tid);
  if (line == nullptr) return out;
  const xspace::XPlaneReader h(*host);
  for (const xspace::XEvent& e : line->events()) {
    if (h.EventName(e) != "launches in step") continue;
    out.push_back({static_cast<double>(xspace::EventStartNs(kW, *line, e) - kW) / kUs,
                   static_cast<double>(xspace::EventEndNs(kW, *line, e) - kW) / kUs,
                   h.IntStat(e, "_ct"), h.IntStat(e, "_c")});
  }
  return out;
}

// The root's `_p` of a step, if it produces a context.
std::optional<int64_t> RootContext(const xspace::XSpace& space, int64_t step) {
  const xspace::XPlane* host = xspace::FindPlane(space, xspace::kHostPlaneName);
  if (host == nullptr) return std::nullopt;
  const xspace::XPlaneReader h(*host);
  for (const xspace::XLine& line : host->lines()) {
    for (const xspace::XEvent& e : line.events()) {
      if (h.IntStat(e, "_r") == 1 && h.IntStat(e, "step_num") == step) return h.IntStat(e, "_p");
    }
  }
  return std::nullopt;
}

constexpr double kNsInUs = 0.001;

// PyTorch runs the backward pass on its autograd engine thread, which marks no step: the step
// ("train_step N") is on the Python main thread. The autograd thread's launches during the step
// join it through a consumer wrapper on its own line, so XProf counts their device work in the
// step; every kernel, copy and memset names its op (tf_op) after the NVTX range it was launched
// in, on its own thread or else on the step's thread.
TEST(CuptiXSpaceTest, AThreadLaunchingDuringAnotherThreadsStepJoinsIt) {
  constexpr uint32_t kMain = 101, kAutograd = 102, kMarker = 103;
  Job j;
  j.Device();
  j.Range("train_step 1", kMain, 100, 5000);
  j.Range("data", kMain, 110, 400);
  j.Api("cudaMemcpyAsync_v3020", kMain, 1, 120, 130);
  inject::MemcpyRecord c;
  c.start_ns = Gpu(150);
  c.end_ns = Gpu(300);
  c.bytes = 1 << 20;
  c.stream_id = 13;
  c.correlation_id = 1;
  c.copy_kind = 1;  // HtoD
  c.src_kind = 2;   // pinned
  c.dst_kind = 3;   // device
  j.w.Add(c);
  j.Range("forward_backward", kMain, 400, 3000);
  j.Api("cudaLaunchKernel_v7000", kMain, 2, 410, 420);
  j.Kernel("fwd_gemm", 7, 2, 500, 900);
  // The autograd thread, inside forward_backward: launches, calls that launch nothing, and a
  // range of its own.
  j.Api("cudaGetDevice", kAutograd, 50, 995, 998);
  j.Api("cudaLaunchKernel_v7000", kAutograd, 3, 1000, 1010);
  j.Kernel("bwd_gemm", 7, 3, 1100, 1500);
  j.Api("cudaGetDevice", kAutograd, 51, 1020, 1022);
  j.Range("allreduce hook", kAutograd, 1900, 2100);
  j.Api("cudaMemsetAsync_v3020", kAutograd, 4, 1950, 1960);
  inject::MemsetRecord s;
  s.start_ns = Gpu(2000);
  s.end_ns = Gpu(2010);
  s.bytes = 4096;
  s.stream_id = 7;
  s.correlation_id = 4;
  s.memory_kind = 3;
  j.w.Add(s);
  j.Api("cudaLaunchKernelExC_v11060", kAutograd, 5, 2500, 2510);
  j.Kernel("bwd_elementwise", 7, 5, 2600, 2700);
  j.Range("optimizer", kMain, 3000, 4500);
  j.Api("cudaLaunchKernel_v7000", kMain, 6, 3100, 3110);
  j.Kernel("adam", 7, 6, 3200, 3300);
  j.Api("cudaLaunchKernel_v7000", kMain, 7, 4600, 4610);  // in the step, in no other range
  j.Kernel("loss", 7, 7, 4700, 4800);
  // A thread that marks the step itself joins through its own range, as before.
  j.Range("train_step 1", kMarker, 150, 4900);
  j.Api("cudaLaunchKernel_v7000", kMarker, 8, 4000, 4010);
  j.Kernel("side", 7, 8, 4100, 4200);

  xspace::XSpace space;
  absl::StatusOr<CuptiXSpaceStats> stats = BuildCuptiXSpace({j.Batch()}, Options(), &space);
  ASSERT_THAT(stats, IsOk());
  EXPECT_EQ(stats->steps, 1);
  EXPECT_EQ(stats->step_joins, 1);
  EXPECT_THAT(testkit::CheckXProfConformance(space, "gpu-host-1"), IsEmpty());

  // One wrapper on the autograd thread, joined to the root, around its first to last launch
  // (the hook range whole), 1 ns wider at each end where the line leaves room.
  const std::optional<int64_t> root = RootContext(space, 1);
  EXPECT_THAT(root, Optional((int64_t{kMain} << 32) | 1));
  const std::vector<Wrapper> wrappers = JoinWrappers(space, kAutograd);
  ASSERT_EQ(wrappers.size(), 1u);
  EXPECT_DOUBLE_EQ(wrappers[0].start_us, 1000 - kNsInUs);
  EXPECT_DOUBLE_EQ(wrappers[0].end_us, 2510 + kNsInUs);
  EXPECT_THAT(wrappers[0].ct, Optional(0));
  EXPECT_EQ(wrappers[0].c, root);
  EXPECT_THAT(JoinWrappers(space, kMain), IsEmpty());
  EXPECT_THAT(JoinWrappers(space, kMarker), IsEmpty());

  EXPECT_THAT(DeviceOps(space),
              ElementsAre(std::pair(1u, "nvtx/data:Data"),
                          std::pair(2u, "nvtx/forward_backward:ForwardBackward"),
                          // the main thread's range while the autograd thread launched
                          std::pair(3u, "nvtx/forward_backward:ForwardBackward"),
                          std::pair(4u, "nvtx/allreduce_hook:AllreduceHook"),  // its own
                          std::pair(5u, "nvtx/forward_backward:ForwardBackward"),
                          std::pair(6u, "nvtx/optimizer:Optimizer"),
                          std::pair(7u, "cuda/cudaLaunchKernel:CudaLaunchKernel"),
                          // in no range of its own: the step root's thread's range then
                          std::pair(8u, "nvtx/optimizer:Optimizer")));

  // The breakdown reader sees the same steps: a wrapper is neither a step nor host work.
  absl::StatusOr<analysis::HostTrace> trace = analysis::ReadXSpaceHost(space, "gpu-host-1", 0);
  ASSERT_THAT(trace, IsOk());
  std::vector<int64_t> steps;
  for (const analysis::StepMarker& m : trace->steps) steps.push_back(m.step);
  EXPECT_THAT(steps, ElementsAre(1, 1));
}

// Launches outside every step stay as they were: no wrapper, the call for their op.
// Steps cut by the window are kept, clipped to it and marked (xspace::kStatStepCut): a capture
// shorter than a step still has its step, which the breakdown keeps as partial. Other ranges cut
// by the window are left out as before.
TEST(CuptiXSpaceTest, StepsCutByTheWindowAreClippedAndMarked) {
  constexpr uint32_t kMain = 101;
  Job j;
  j.Device();
  j.Range("train_step 1", kMain, -500, 4000);      // begins before the window
  j.Range("forward_backward", kMain, -400, 3000);  // not a step: left out
  j.Range("train_step 2", kMain, 4000, 9000);      // wholly inside
  j.Range("train_step 3", kMain, 9000, 12000);     // ends after it
  xspace::XSpace space;
  absl::StatusOr<CuptiXSpaceStats> stats = BuildCuptiXSpace({j.Batch()}, Options(), &space);
  ASSERT_THAT(stats, IsOk());
  EXPECT_EQ(stats->steps, 3);
  const xspace::XPlane* host = xspace::FindPlane(space, xspace::kHostPlaneName);
  ASSERT_NE(host, nullptr);
  const xspace::XPlaneReader h(*host);
  std::vector<std::tuple<std::string, int64_t, int64_t, bool>> got;
  const int64_t start = xspace::ProfileStartNs(space);
  h.ForEachEvent([&](const xspace::XLine& line, const xspace::XEvent& e) {
    got.emplace_back(std::string(h.EventName(e)), (xspace::EventStartNs(start, line, e) - kW) / kUs,
                     (xspace::EventEndNs(start, line, e) - kW) / kUs,
                     h.IntStat(e, xspace::kStatStepCut).has_value());
  });
  EXPECT_THAT(got, UnorderedElementsAre(std::tuple("train_step 1", 0, 4000, true),
                                        std::tuple("train_step 2", 4000, 9000, false),
                                        std::tuple("train_step 3", 9000, 10000, true)));
  EXPECT_THAT(testkit::CheckXProfConformance(space, "gpu-host-1"), IsEmpty());
}

TEST(CuptiXSpaceTest, LaunchesOutsideAnyStepGetNoWrapper) {
  constexpr uint32_t kMain = 101, kAutograd = 102;
  Job j;
  j.Device();
  j.Range("train_step 1", kMain, 1000, 2000);
  j.Range("forward_backward", kMain, 1000, 2000);
  j.Api("cudaLaunchKernel", kAutograd, 1, 100, 110);  // before the step
  j.Kernel("k1", 7, 1, 200, 300);
  j.Api("cudaLaunchKernel", kAutograd, 2, 1500, 1510);  // in it
  j.Kernel("k2", 7, 2, 1600, 1700);
  j.Api("cudaLaunchKernel", kAutograd, 3, 1995, 2005);  // across its end
  j.Kernel("k3", 7, 3, 2100, 2200);
  j.Api("cudaLaunchKernel", kAutograd, 4, 3000, 3010);  // after it
  j.Kernel("k4", 7, 4, 3100, 3200);
  Job other;  // another process, with no steps of its own, launching during this one's step
  other.pid = 200;
  other.Api("cudaLaunchKernel", 103, 5, 1200, 1210);
  other.Kernel("k5", 7, 5, 3300, 3400);

  xspace::XSpace space;
  absl::StatusOr<CuptiXSpaceStats> stats =
      BuildCuptiXSpace({j.Batch(), other.Batch()}, Options(), &space);
  ASSERT_THAT(stats, IsOk());
  EXPECT_EQ(stats->step_joins, 1);
  const std::vector<Wrapper> wrappers = JoinWrappers(space, kAutograd);
  ASSERT_EQ(wrappers.size(), 1u);
  EXPECT_DOUBLE_EQ(wrappers[0].start_us, 1500 - kNsInUs);
  EXPECT_DOUBLE_EQ(wrappers[0].end_us, 1510 + kNsInUs);
  EXPECT_THAT(JoinWrappers(space, 103), IsEmpty());
  EXPECT_THAT(DeviceOps(space),
              ElementsAre(std::pair(1u, "cuda/cudaLaunchKernel:CudaLaunchKernel"),
                          std::pair(2u, "nvtx/forward_backward:ForwardBackward"),
                          std::pair(3u, "cuda/cudaLaunchKernel:CudaLaunchKernel"),
                          std::pair(4u, "cuda/cudaLaunchKernel:CudaLaunchKernel"),
                          std::pair(5u, "cuda/cudaLaunchKernel:CudaLaunchKernel")));
  // Process 200 launches during process 100's step: the checker wants it joined, but it is no
  // part of that process's step, so it is left as it is.
  EXPECT_THAT(testkit::CheckXProfConformance(space, "gpu-host-1"),
              ElementsAre(AllOf(StartsWith("[step-join]"), HasSubstr("'pid 200 tid 103'"))));

  // With no step at all, no wrapper.
  Job none;
  none.Device();
  none.Api("cudaLaunchKernel", kAutograd, 1, 100, 110);
  none.Kernel("k1", 7, 1, 200, 300);
  xspace::XSpace plain;
  stats = BuildCuptiXSpace({none.Batch()}, Options(), &plain);
  ASSERT_THAT(stats, IsOk());
  EXPECT_EQ(stats->step_joins, 0);
  EXPECT_THAT(JoinWrappers(plain, kAutograd), IsEmpty());
  EXPECT_THAT(testkit::CheckXProfConformance(plain, "gpu-host-1"), IsEmpty());
}

// Each step gets its own wrappers, joined to its own root, never reaching into the next step.
TEST(CuptiXSpaceTest, ConsecutiveStepsGetSeparateWrappers) {
  constexpr uint32_t kMain = 101, kAutograd = 102;
  Job j;
  j.Device();
  j.Range("train_step 1", kMain, 100, 2000);
  j.Range("train_step 2", kMain, 2000, 4000);
  j.Api("cudaLaunchKernel", kAutograd, 1, 500, 510);
  j.Kernel("k1", 7, 1, 600, 700);
  j.Api("cudaLaunchKernel", kAutograd, 2, 1990, 2000);  // ends as step 1 does
  j.Kernel("k2", 7, 2, 2100, 2200);
  j.Api("cudaLaunchKernel", kAutograd, 3, 2000, 2010);  // starts as step 2 does
  j.Kernel("k3", 7, 3, 2300, 2400);
  j.Api("cudaLaunchKernel", kAutograd, 4, 3000, 3010);
  j.Kernel("k4", 7, 4, 3100, 3200);

  xspace::XSpace space;
  absl::StatusOr<CuptiXSpaceStats> stats = BuildCuptiXSpace({j.Batch()}, Options(), &space);
  ASSERT_THAT(stats, IsOk());
  EXPECT_EQ(stats->step_joins, 2);
  EXPECT_THAT(testkit::CheckXProfConformance(space, "gpu-host-1"), IsEmpty());
  const std::vector<Wrapper> wrappers = JoinWrappers(space, kAutograd);
  ASSERT_EQ(wrappers.size(), 2u);
  EXPECT_DOUBLE_EQ(wrappers[0].start_us, 500 - kNsInUs);
  EXPECT_DOUBLE_EQ(wrappers[0].end_us, 2000);  // the next launch starts there: no room
  EXPECT_DOUBLE_EQ(wrappers[1].start_us, 2000);
  EXPECT_DOUBLE_EQ(wrappers[1].end_us, 3010 + kNsInUs);
  EXPECT_THAT(RootContext(space, 1), Optional((int64_t{kMain} << 32) | 1));
  EXPECT_THAT(RootContext(space, 2), Optional((int64_t{kMain} << 32) | 2));
  EXPECT_EQ(wrappers[0].c, RootContext(space, 1));
  EXPECT_EQ(wrappers[1].c, RootContext(space, 2));
}

// One process per GPU, each marking the step (one root on the host, the others joining it):
// each process's autograd thread joins the host's step, and takes its ops from its own process's
// step thread.
TEST(CuptiXSpaceTest, EachProcessJoinsItsThreadsToItsOwnSteps) {
  Job a;
  a.Device();
  a.Range("train_step 1", 101, 100, 3000);
  a.Api("cudaLaunchKernel", 102, 1, 1000, 1010);
  a.Kernel("k1", 7, 1, 1100, 1200);
  a.Api("cudaLaunchKernel", 102, 2, 2000, 2010);
  a.Kernel("k2", 7, 2, 2100, 2200);
  Job b;
  b.pid = 200;
  b.Range("train_step 1", 201, 200, 3100);
  b.Range("forward_backward", 201, 300, 2900);
  b.Api("cudaLaunchKernel", 202, 11, 1100, 1110);
  b.Kernel("k11", 8, 11, 1300, 1400);
  b.Api("cudaLaunchKernel", 202, 12, 2100, 2110);
  b.Kernel("k12", 8, 12, 2300, 2400);

  xspace::XSpace space;
  absl::StatusOr<CuptiXSpaceStats> stats =
      BuildCuptiXSpace({a.Batch(), b.Batch()}, Options(), &space);
  ASSERT_THAT(stats, IsOk());
  EXPECT_EQ(stats->steps, 1);
  EXPECT_EQ(stats->step_joins, 2);
  EXPECT_THAT(testkit::CheckXProfConformance(space, "gpu-host-1"), IsEmpty());
  const std::optional<int64_t> root = RootContext(space, 1);
  EXPECT_THAT(root, Optional((int64_t{101} << 32) | 1));
  for (const int64_t tid : {102, 202}) {
    const std::vector<Wrapper> wrappers = JoinWrappers(space, tid);
    ASSERT_EQ(wrappers.size(), 1u) << tid;
    EXPECT_EQ(wrappers[0].c, root) << tid;
  }
  EXPECT_THAT(DeviceOps(space),
              ElementsAre(std::pair(1u, "cuda/cudaLaunchKernel:CudaLaunchKernel"),
                          std::pair(2u, "cuda/cudaLaunchKernel:CudaLaunchKernel"),
                          std::pair(11u, "nvtx/forward_backward:ForwardBackward"),
                          std::pair(12u, "nvtx/forward_backward:ForwardBackward")));
}

// A wrapper nests with what the thread's line holds: a range across the step boundary keeps the
// launches inside it apart from those outside, and a step range of the thread's own ends a
// wrapper.
TEST(CuptiXSpaceTest, WrappersNestWithTheThreadsOwnRanges) {
  constexpr uint32_t kMain = 101, kAutograd = 102;
  Job j;
  j.Device();
  j.Range("train_step 1", kMain, 100, 2000);
  j.Range("train_step 2", kMain, 2000, 4000);
  j.Range("hook", kAutograd, 1500, 2500);
  j.Api("cudaLaunchKernel", kAutograd, 1, 1000, 1010);
  j.Kernel("k1", 7, 1, 1100, 1200);
  j.Api("cudaLaunchKernel", kAutograd, 2, 1600, 1610);
  j.Kernel("k2", 7, 2, 1700, 1800);
  j.Api("cudaLaunchKernel", kAutograd, 3, 2100, 2110);
  j.Kernel("k3", 7, 3, 2200, 2300);
  j.Range("step 7", kAutograd, 3000, 3100);  // a step of its own (left alone), between launches
  j.Api("cudaLaunchKernel", kAutograd, 4, 2800, 2810);
  j.Kernel("k4", 7, 4, 2900, 2950);
  j.Api("cudaLaunchKernel", kAutograd, 5, 3050, 3060);  // inside its own step
  j.Kernel("k5", 7, 5, 3070, 3080);
  j.Api("cudaLaunchKernel", kAutograd, 6, 3500, 3510);
  j.Kernel("k6", 7, 6, 3600, 3700);

  xspace::XSpace space;
  absl::StatusOr<CuptiXSpaceStats> stats = BuildCuptiXSpace({j.Batch()}, Options(), &space);
  ASSERT_THAT(stats, IsOk());
  EXPECT_EQ(stats->step_joins, 5);
  EXPECT_THAT(testkit::CheckXProfConformance(space, "gpu-host-1"), IsEmpty());
  const std::vector<Wrapper> wrappers = JoinWrappers(space, kAutograd);
  ASSERT_EQ(wrappers.size(), 5u);
  const std::optional<int64_t> step1 = RootContext(space, 1);
  const std::optional<int64_t> step2 = RootContext(space, 2);
  // Before the hook; inside it, in step 1; inside it, in step 2; the launch after the hook; the
  // one after the thread's own step.
  EXPECT_DOUBLE_EQ(wrappers[0].start_us, 1000 - kNsInUs);
  EXPECT_DOUBLE_EQ(wrappers[0].end_us, 1010 + kNsInUs);
  EXPECT_EQ(wrappers[0].c, step1);
  EXPECT_DOUBLE_EQ(wrappers[1].start_us, 1600 - kNsInUs);
  EXPECT_DOUBLE_EQ(wrappers[1].end_us, 1610 + kNsInUs);
  EXPECT_EQ(wrappers[1].c, step1);
  EXPECT_DOUBLE_EQ(wrappers[2].start_us, 2100 - kNsInUs);
  EXPECT_DOUBLE_EQ(wrappers[2].end_us, 2110 + kNsInUs);
  EXPECT_EQ(wrappers[2].c, step2);
  EXPECT_DOUBLE_EQ(wrappers[3].start_us, 2800 - kNsInUs);
  EXPECT_DOUBLE_EQ(wrappers[3].end_us, 2810 + kNsInUs);
  EXPECT_EQ(wrappers[3].c, step2);
  EXPECT_DOUBLE_EQ(wrappers[4].start_us, 3500 - kNsInUs);
  EXPECT_DOUBLE_EQ(wrappers[4].end_us, 3510 + kNsInUs);
  EXPECT_EQ(wrappers[4].c, step2);
}

// tf_op is `scope/Name:Type` as XProf parses a TensorFlow op, whatever the range's name.
TEST(CuptiXSpaceTest, OpNamesAreTensorFlowOpNames) {
  Job j;
  j.Device();
  j.Range("aten::mm, seq = 5", 101, 100, 200);
  j.Api("cudaLaunchKernel", 101, 1, 110, 120);
  j.Kernel("k1", 7, 1, 130, 140);
  j.Range("3d conv", 101, 300, 400);
  j.Api("cudaLaunchKernel", 101, 2, 310, 320);
  j.Kernel("k2", 7, 2, 330, 340);
  j.Range("", 101, 500, 600);
  j.Api("cudaLaunchKernel", 101, 3, 510, 520);
  j.Kernel("k3", 7, 3, 530, 540);
  j.Range("outer", 101, 700, 900);
  j.Range("::", 101, 710, 800);
  j.Api("cudaLaunchKernel", 101, 4, 720, 730);  // the innermost range names it
  j.Kernel("k4", 7, 4, 740, 750);
  j.Api("cudaLaunchKernel", 101, 5, 810, 820);  // back in the outer one
  j.Kernel("k5", 7, 5, 830, 840);
  j.Api("", 101, 6, 1000, 1010);  // an API call CUPTI did not name
  j.Kernel("k6", 7, 6, 1030, 1040);
  // Its launch was not recorded (on a real H100, the first kernels of a window launched before
  // CUPTI was enabled): left out with it, as XProf could not give it a step.
  j.Kernel("k7", 7, 7, 1050, 1060);
  xspace::XSpace space;
  absl::StatusOr<CuptiXSpaceStats> stats = BuildCuptiXSpace({j.Batch()}, Options(), &space);
  ASSERT_THAT(stats, IsOk());
  EXPECT_EQ(stats->launched_outside, 1);
  EXPECT_EQ(stats->unrecorded_launches, 1);  // k7's launch is nowhere
  EXPECT_THAT(
      DeviceOps(space),
      ElementsAre(std::pair(1u, "nvtx/aten_mm_seq_5:AtenMmSeq5"),
                  std::pair(2u, "nvtx/3d_conv:_3dConv"), std::pair(3u, "nvtx/nvtx_range:NvtxRange"),
                  std::pair(4u, "nvtx/unnamed:Unnamed"), std::pair(5u, "nvtx/outer:Outer"),
                  std::pair(6u, "cuda/cuda_api_0:CudaApi0")));
  EXPECT_THAT(testkit::CheckXProfConformance(space, "gpu-host-1"), IsEmpty());
}

TEST(CuptiXSpaceTest, FuzzSeedsParseAndBuild) {
  for (const char* seed : {"empty.bin", "small.bin", "old_device.bin"}) {
    std::ifstream in(SourcePath("fuzz/corpus/cupti_record_batch/") + seed, std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    ASSERT_FALSE(bytes.empty()) << seed;
    absl::StatusOr<RecordBatch> b = ParseRecordBatch(bytes);
    ASSERT_THAT(b, IsOk()) << seed << ": " << b.status();
    CuptiXSpaceOptions o = Options();
    o.profile_start_ns = 1;
    xspace::XSpace space;
    absl::StatusOr<CuptiXSpaceStats> stats = BuildCuptiXSpace({*b}, o, &space);
    ASSERT_THAT(stats, IsOk());
    // The seed's copy and memset have no recorded launch: left out with it (counted).
    if (std::string(seed) == "small.bin") {
      EXPECT_EQ(stats->kernels, 1);
      EXPECT_EQ(stats->memcpys, 0);
      EXPECT_EQ(stats->memsets, 0);
      EXPECT_EQ(stats->launched_outside, 2);
      EXPECT_EQ(stats->api_calls, 2);
      EXPECT_EQ(stats->steps, 1);
      EXPECT_EQ(stats->memory_events, 1);
      EXPECT_EQ(stats->synchronizations, 1);
      EXPECT_EQ(stats->dropped_records, 2u);
      EXPECT_EQ(b->String(b->kernels[0].name), "square(float*, int)");
      ASSERT_EQ(b->devices.size(), 1u);
      EXPECT_EQ(b->devices[0].flags, inject::kDeviceHasUuid);
      EXPECT_EQ(b->devices[0].uuid[0], 0x5f);
    }
    if (std::string(seed) == "old_device.bin") {  // an older library's DeviceRecord
      EXPECT_EQ(stats->kernels + stats->launched_outside, 1);
      ASSERT_EQ(b->devices.size(), 1u);
      EXPECT_EQ(b->devices[0].sm_count, 132u);
      EXPECT_EQ(b->devices[0].flags, 0u);
    }
  }
}

TEST(CuptiXSpaceTest, RejectsBadOptions) {
  xspace::XSpace space;
  CuptiXSpaceOptions o = Options();
  o.profile_stop_ns = o.profile_start_ns - 1;
  EXPECT_THAT(BuildCuptiXSpace({}, o, &space).status().message(), HasSubstr("bad window"));
  o = Options();
  o.step_pattern = "step";
  EXPECT_THAT(BuildCuptiXSpace({}, o, &space).status().message(), HasSubstr("no group"));
}

TEST(CuptiXSpaceTest, ExtremeTimesAndOffsetsAreLeftOut) {
  RecordBatch b = MakeBatch();
  b.gpu_minus_wall_ns = INT64_MIN;
  xspace::XSpace space;
  absl::StatusOr<CuptiXSpaceStats> stats = BuildCuptiXSpace({b}, Options(), &space);
  ASSERT_THAT(stats, IsOk());
  EXPECT_EQ(stats->kernels, 0);
  EXPECT_GT(stats->outside_window, 0);
  EXPECT_THAT(xspace::Validate(space), IsOk());
}

TEST(CuptiXSpaceTest, DeviceWorkWithoutARecordedLaunchIsAShortfallPastAFewAtTheEdges) {
  CuptiXSpaceStats s;
  s.kernels = 1000;
  s.unrecorded_launches = 5;  // the first kernels of a window (seen on an H100)
  EXPECT_FALSE(UnrecordedLaunchesAreAShortfall(s));
  s.unrecorded_launches = 600;
  EXPECT_TRUE(UnrecordedLaunchesAreAShortfall(s));
  s.kernels = 100'000;  // 600 of 100,000 placed: under 1 %
  EXPECT_FALSE(UnrecordedLaunchesAreAShortfall(s));
  s.kernels = 0;
  s.unrecorded_launches = 100;
  EXPECT_FALSE(UnrecordedLaunchesAreAShortfall(s));
  s.unrecorded_launches = 101;
  EXPECT_TRUE(UnrecordedLaunchesAreAShortfall(s));
}

}  // namespace
}  // namespace profctl::agent::cupti
