// Tests of the trace readers (xspace_reader.h, kineto_reader.h) and their shared naming rules
// (op_classify.h). Golden inputs live in tests/data/traces/ (tests/trace_data.h).
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "analysis/breakdown.h"
#include "analysis/op_classify.h"
#include "analysis/readers/kineto_reader.h"
#include "analysis/readers/xspace_reader.h"
#include "common/file_util.h"
#include "common/gzip.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "synthetic/synthetic_job.h"
#include "tests/status_matchers.h"
#include "tests/test_time.h"
#include "tests/trace_data.h"
#include "xspace/xspace.h"

using ::profctl::testkit::IsOk;

namespace profctl::analysis {
namespace {

using tensorflow::profiler::XSpace;
using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;
using ::testing::UnorderedElementsAreArray;

using ::profctl::test_time::kMs;
constexpr int64_t kP = 1'767'225'600LL * 1'000'000'000;  // 2026-01-01, ns since the epoch

using ::profctl::test_data::DataPath;

absl::string_view KindName(OpKind k) {
  switch (k) {
    case OpKind::kDeviceCompute:
      return "compute";
    case OpKind::kCollective:
      return "collective";
    case OpKind::kMemcpyH2D:
      return "h2d";
    case OpKind::kMemcpyD2H:
      return "d2h";
    case OpKind::kMemcpyD2D:
      return "d2d";
    case OpKind::kHostInputWait:
      return "input";
    case OpKind::kHostLaunch:
      return "launch";
    case OpKind::kHostSync:
      return "sync";
    case OpKind::kHostOther:
      return "other";
  }
  return "?";
}

// Ops and markers as readable strings, times relative to `base`, so failures show what differs.
std::string O(OpKind kind, int64_t start, int64_t end) {
  return absl::StrCat(KindName(kind), " [", start, ", ", end, ")");
}
std::vector<std::string> Ops(const std::vector<Op>& ops, int64_t base) {
  std::vector<std::string> out;
  for (const Op& op : ops) out.push_back(O(op.kind, op.start_ns - base, op.end_ns - base));
  return out;
}
std::string M(int64_t step, int64_t start, int64_t end, int64_t tid) {
  return absl::StrCat("step ", step, " [", start, ", ", end, ") tid ", tid);
}
std::vector<std::string> Markers(const std::vector<StepMarker>& steps, int64_t base) {
  std::vector<std::string> out;
  for (const StepMarker& m : steps) {
    out.push_back(M(m.step, m.start_ns - base, m.end_ns - base, m.thread_id));
  }
  return out;
}

// --- Naming rules ------------------------------------------------------------------------------

TEST(StepPatternTest, DefaultCatchesTheUsualMarkers) {
  absl::StatusOr<StepMatcher> m = StepMatcher::Create(kDefaultStepPattern);
  ASSERT_THAT(m, IsOk());
  const std::pair<absl::string_view, int64_t> yes[] = {
      {"train_step 12", 12},  {"step#12", 12}, {"step 12", 12},        {"ProfilerStep#12", 12},
      {"StepMarker 12", 12},  {"Step_12", 12}, {"global_step=12", 12}, {"epoch 1 step 12", 12},
      {"train step 007 ", 7}, {"STEP:3", 3},   {"step12", 12},
  };
  for (const auto& [name, step] : yes) EXPECT_EQ(m->Match(name), step) << name;
  for (absl::string_view name :
       {"Optimizer.step#SGD.step", "train_step", "substep 3", "step 12 of 90", "train", "",
        "aten::_foreach_add_", "PjitFunction(train_step)", "timestep 4"}) {
    EXPECT_EQ(m->Match(name), std::nullopt) << name;
  }
  bool bad = false;
  EXPECT_EQ(m->Match("step 99999999999999999999999", &bad), std::nullopt);
  EXPECT_TRUE(bad);
  EXPECT_EQ(m->Match(std::string(kMaxStepNameLength, 'x') + " step 1"), std::nullopt);
}

TEST(StepPatternTest, CustomPatternAndErrors) {
  absl::StatusOr<StepMatcher> m = StepMatcher::Create(R"(^iter-(\d+)$)");
  ASSERT_THAT(m, IsOk());
  EXPECT_EQ(m->Match("iter-4"), 4);
  EXPECT_EQ(m->Match("step 4"), std::nullopt);
  EXPECT_THAT(ValidateReaderOptions({.step_pattern = "step (\\d+"}).message(),
              AllOf(HasSubstr("step (\\d+"), HasSubstr("not a valid RE2")));
  EXPECT_THAT(ValidateReaderOptions({.step_pattern = "step \\d+"}).message(),
              HasSubstr("no capture group"));
  EXPECT_THAT(ValidateReaderOptions({}), IsOk());
}

TEST(ClassifyTest, HostNames) {
  const std::pair<absl::string_view, OpKind> cases[] = {
      {"GetNextBatch", OpKind::kHostInputWait},
      {"IteratorGetNext", OpKind::kHostInputWait},
      {"iterator_get_next/IteratorGetNext:IteratorGetNext", OpKind::kHostInputWait},
      {"Iterator::Root::Prefetch", OpKind::kHostInputWait},
      {"enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__", OpKind::kHostInputWait},
      {"torch/utils/data/dataloader.py(623): __next__", OpKind::kHostInputWait},
      {"_next_data", OpKind::kHostInputWait},
      {"$input.py:12 next_batch", OpKind::kHostInputWait},
      {"next", OpKind::kHostInputWait},
      {"cudaLaunchKernel", OpKind::kHostLaunch},
      {"cudaLaunchKernelExC_v11060", OpKind::kHostLaunch},
      {"cuLaunchKernel", OpKind::kHostLaunch},
      {"cudaGraphLaunch", OpKind::kHostLaunch},
      {"cudaMemcpyAsync", OpKind::kHostLaunch},
      {"cuMemcpyHtoDAsync_v2", OpKind::kHostLaunch},
      {"cudaMemsetAsync", OpKind::kHostLaunch},
      {"cudaEventRecord", OpKind::kHostLaunch},
      {"hipLaunchKernel", OpKind::kHostLaunch},
      {"ncclAllReduce", OpKind::kHostLaunch},
      {"ncclGroupEnd", OpKind::kHostLaunch},
      {"nccl:all_reduce", OpKind::kHostLaunch},
      {"cudaStreamSynchronize", OpKind::kHostSync},
      {"cuStreamSynchronize", OpKind::kHostSync},
      {"cudaDeviceSynchronize", OpKind::kHostSync},
      {"cudaEventSynchronize", OpKind::kHostSync},
      {"cuCtxSynchronize", OpKind::kHostSync},
      {"cudaMemcpy", OpKind::kHostSync},
      {"cuMemcpyDtoH_v2", OpKind::kHostSync},
      {"PjRtStreamExecutorBuffer::BlockHostUntilReady", OpKind::kHostSync},
      {"cudaGetDevice", OpKind::kHostOther},
      {"cudaMalloc", OpKind::kHostOther},
      {"aten::mm", OpKind::kHostOther},
      {"curand_init", OpKind::kHostOther},  // not a driver call: lower case after "cu"
      {"train", OpKind::kHostOther},
  };
  for (const auto& [name, kind] : cases) {
    EXPECT_EQ(KindName(ClassifyHostOpName(name)), KindName(kind)) << name;
  }
}

TEST(ClassifyTest, DeviceNames) {
  const std::pair<absl::string_view, OpKind> cases[] = {
      {"MemcpyHToD", OpKind::kMemcpyH2D},
      {"MemcpyH2D", OpKind::kMemcpyH2D},
      {"Memcpy HtoD (Pageable -> Device)", OpKind::kMemcpyH2D},
      {"MemcpyDToH", OpKind::kMemcpyD2H},
      {"MemcpyD2H", OpKind::kMemcpyD2H},
      {"Memcpy DtoH (Device -> Pinned)", OpKind::kMemcpyD2H},
      {"MemcpyDToD", OpKind::kMemcpyD2D},
      {"MemcpyD2D", OpKind::kMemcpyD2D},
      {"MemcpyPtoP", OpKind::kMemcpyD2D},
      {"Memcpy PtoP (Device -> Device)", OpKind::kMemcpyD2D},
      {"MemcpyP2P", OpKind::kMemcpyD2D},
      {"P2P copy", OpKind::kMemcpyD2D},
      {"ncclDevKernel_AllReduce_Sum_bf16_RING_LL", OpKind::kCollective},
      {"ncclDevKernel_SendRecv", OpKind::kCollective},
      {"rcclKernel", OpKind::kCollective},
      {"all-reduce.3", OpKind::kCollective},
      {"all-gather-done", OpKind::kCollective},
      {"reduce-scatter.1", OpKind::kCollective},
      {"all-to-all.2", OpKind::kCollective},
      {"collective-permute.4", OpKind::kCollective},
      {"collective-permute-start.4", OpKind::kDeviceCompute},
      {"all-reduce-start", OpKind::kDeviceCompute},
      {"infeed.1", OpKind::kMemcpyH2D},
      {"outfeed", OpKind::kMemcpyD2H},
      {"Memset (Device)", OpKind::kDeviceCompute},
      {"Memcpy HtoH (Pinned -> Pinned)", OpKind::kDeviceCompute},
      {"sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n", OpKind::kDeviceCompute},
      {"fusion.12", OpKind::kDeviceCompute},
  };
  for (const auto& [name, kind] : cases) {
    EXPECT_EQ(KindName(ClassifyDeviceOpName(name)), KindName(kind)) << name;
  }
}

TEST(ClassifyTest, MemcpyDetails) {
  EXPECT_EQ(MemcpyKindFromDetails("kind_src:pageable kind_dst:device size:8 dest:0 async:1"),
            OpKind::kMemcpyH2D);
  EXPECT_EQ(MemcpyKindFromDetails("kind_src:device kind_dst:pinned size:8"), OpKind::kMemcpyD2H);
  EXPECT_EQ(MemcpyKindFromDetails("kind_src:device kind_dst:device dest:1"), OpKind::kMemcpyD2D);
  EXPECT_EQ(MemcpyKindFromDetails("kind_src:pinned kind_dst:pageable"), OpKind::kDeviceCompute);
  EXPECT_EQ(MemcpyKindFromDetails("kind:HtoD size:250000"), OpKind::kMemcpyH2D);
  EXPECT_EQ(MemcpyKindFromDetails("kind:DtoH size:100000"), OpKind::kMemcpyD2H);
  EXPECT_EQ(MemcpyKindFromDetails("kind_src:managed kind_dst:device"), std::nullopt);
  EXPECT_EQ(MemcpyKindFromDetails("size:8"), std::nullopt);
  EXPECT_EQ(MemcpyKindFromDetails(""), std::nullopt);
}

// --- Kineto ------------------------------------------------------------------------------------

constexpr int64_t kBase = 1'700'000'000'000'000'000;  // baseTimeNanoseconds of the golden file

// What tests/data/traces/rank3.pt.trace.json holds (ns after its base time).
void ExpectGoldenKineto(const HostTrace& t, int64_t offset_ns) {
  const int64_t base = kBase - offset_ns;
  EXPECT_EQ(t.host, "rank-3");
  EXPECT_EQ(t.rank, 3);        // distributedInfo.rank, for pairing hosts across runs (profctl diff)
  EXPECT_EQ(t.world_size, 4);  // distributedInfo.world_size: are all of the job's ranks here?
  EXPECT_EQ(t.window_start_ns - base, 0);  // the "PyTorch Profiler (0)" span
  EXPECT_EQ(t.window_end_ns - base, 20'000'000);
  EXPECT_THAT(Markers(t.steps, base),
              ElementsAre(M(5, 100'000, 9'100'000, 4242), M(6, 9'100'000, 18'100'500, 4242),
                          M(6, 9'100'001, 18'100'000, 4300)));
  EXPECT_THAT(Ops(t.host_ops, base),
              UnorderedElementsAreArray({
                  O(OpKind::kHostInputWait, 100'250, 1'600'250),     // enumerate(DataLoader)
                  O(OpKind::kHostInputWait, 100'300, 1'599'300),     // dataloader.py __next__
                  O(OpKind::kHostOther, 1'640'000, 1'641'000),       // cudaGetDevice
                  O(OpKind::kHostLaunch, 1'650'000, 1'660'000),      // cudaMemcpyAsync
                  O(OpKind::kHostOther, 1'700'000, 2'000'000),       // aten::linear
                  O(OpKind::kHostLaunch, 1'800'123, 1'808'579),      // cudaLaunchKernel
                  O(OpKind::kHostLaunch, 3'900'000, 3'920'000),      // nccl:all_reduce
                  O(OpKind::kHostSync, 6'940'000, 7'010'000),        // cudaStreamSynchronize
                  O(OpKind::kHostInputWait, 9'100'500, 11'100'500),  // DataLoader next
                  O(OpKind::kHostOther, 17'000'000, 17'500'000),     // Optimizer.step#SGD.step
                  O(OpKind::kHostLaunch, 17'100'000, 17'105'000),    // cuLaunchKernel
              }));
  ASSERT_EQ(t.devices.size(), 2u);
  EXPECT_EQ(t.devices[0].id, 0);
  EXPECT_EQ(t.devices[0].name, "/device:GPU:0");
  EXPECT_THAT(Ops(t.devices[0].ops, base), UnorderedElementsAreArray({
                                               O(OpKind::kMemcpyH2D, 1'660'000, 1'760'000),
                                               O(OpKind::kDeviceCompute, 1'810'000, 3'810'000),
                                               O(OpKind::kCollective, 3'910'000, 6'910'000),
                                               O(OpKind::kMemcpyD2H, 6'950'000, 7'000'000),
                                               O(OpKind::kDeviceCompute, 17'110'000, 17'122'000),
                                           }));
  EXPECT_EQ(t.devices[1].id, 1);
  EXPECT_THAT(Ops(t.devices[1].ops, base),
              UnorderedElementsAreArray({
                  O(OpKind::kDeviceCompute, 2'000'000, 2'005'000),  // memset
                  O(OpKind::kMemcpyD2D, 2'010'000, 2'030'000),
                  O(OpKind::kMemcpyD2D, 2'040'000, 2'070'000),
              }));
  EXPECT_THAT(t.warnings, IsEmpty());
}

TEST(KinetoReaderTest, GoldenTrace) {
  absl::StatusOr<std::string> json = ReadFile(DataPath("rank3.pt.trace.json"));
  ASSERT_THAT(json, IsOk());
  absl::StatusOr<HostTrace> t = ReadKinetoTrace(*json, "ignored", /*offset_ns=*/250);
  ASSERT_THAT(t, IsOk());
  ExpectGoldenKineto(*t, 250);
}

TEST(KinetoReaderTest, GzipFileGivesTheSameTrace) {
  for (const char* name : {"rank3.pt.trace.json", "rank3.pt.trace.json.gz"}) {
    absl::StatusOr<std::string> bytes = ReadFile(DataPath(name));
    ASSERT_THAT(bytes, IsOk());
    absl::StatusOr<HostTrace> t = ReadKinetoTraceFile(*bytes, DataPath(name), /*offset_ns=*/-7);
    ASSERT_THAT(t, IsOk()) << name << ": " << t.status();
    ExpectGoldenKineto(*t, -7);
  }
}

// A real torch.profiler trace: torch 2.11 (CUDA 13) on an H100, examples/pytorch_steps.py with a
// 12-step schedule, 2026-11-26 (docs/gpu-verification.md). profctl's own capture of the same
// loop saw 35 kernels per step and 1.131 ms of compute per step.
TEST(KinetoReaderTest, RealH100TorchProfilerTrace) {
  absl::StatusOr<std::string> bytes = ReadFile(DataPath("h100_torch_profiler.pt.trace.json.gz"));
  ASSERT_THAT(bytes, IsOk());
  absl::StatusOr<HostTrace> t = ReadKinetoTraceFile(*bytes, "h100.pt.trace.json.gz", 0);
  ASSERT_THAT(t, IsOk());
  ASSERT_EQ(t->devices.size(), 1u);
  const auto kernels =
      std::count_if(t->devices[0].ops.begin(), t->devices[0].ops.end(),
                    [](const Op& op) { return op.kind == OpKind::kDeviceCompute; });
  EXPECT_GE(kernels, 420);          // 35 a step, and the memsets
  ASSERT_EQ(t->steps.size(), 12u);  // ProfilerStep#0..11
  const HostSummary s = SummarizeHost(*t);
  ASSERT_EQ(s.steps.size(), 12u);
  int64_t compute = 0;
  for (const HostStep& step : s.steps) {
    EXPECT_EQ(step.host.total(), step.end_ns - step.start_ns) << step.step;
    EXPECT_GT(step.host[Category::kCompute], 1'100'000) << step.step;
    EXPECT_LT(step.host[Category::kCompute], 1'200'000) << step.step;
    compute += step.host[Category::kCompute];
  }
  EXPECT_NEAR(static_cast<double>(compute) / 12, 1.141e6, 0.01e6);
}

// profctl's own capture of the same loop on the H100 (400 ms, the agent's cupti collector; the
// autograd thread's launches joined to their steps): read and broken down as the GPU run saw it.
TEST(XSpaceReaderTest, RealH100ProfctlCapture) {
  absl::StatusOr<std::string> bytes = ReadFile(DataPath("h100_pytorch_steps.xplane.pb"));
  ASSERT_THAT(bytes, IsOk());
  absl::StatusOr<HostTrace> t = ReadXSpaceHost(StringByteSource(*bytes), "gpu-host", 0);
  ASSERT_THAT(t, IsOk());
  ASSERT_EQ(t->devices.size(), 1u);
  EXPECT_GE(t->devices[0].ops.size(), 6509u);  // kernels, and the copies and memsets
  const HostSummary s = SummarizeHost(*t);
  ASSERT_EQ(s.steps.size(), 185u);
  EXPECT_EQ(s.steps.front().step, 3088);
  EXPECT_EQ(s.steps.back().step, 3272);
  int64_t compute = 0;
  for (const HostStep& step : s.steps) {
    EXPECT_EQ(step.host.total(), step.end_ns - step.start_ns) << step.step;
    compute += step.host[Category::kCompute];
  }
  EXPECT_NEAR(static_cast<double>(compute) / 185, 1.130e6, 0.01e6);
}

// JAX 0.11's own profiler server on an H200 (examples/jax_steps.py, captured by `profctl capture
// --workers=grpc://` for 1 s; the bytes exactly as JAX sent them): a TSL trace with its scope-range
// tree plane, XLA's GPU planes and StepTraceAnnotation steps. The loop makes its batches with
// NumPy on the host, which the breakdown shows as host time.
TEST(XSpaceReaderTest, RealH200JaxServerTrace) {
  absl::StatusOr<std::string> bytes = ReadFile(DataPath("h200_jax_steps.xplane.pb"));
  ASSERT_THAT(bytes, IsOk());
  XSpace space;
  ASSERT_TRUE(space.ParseFromString(*bytes));
  EXPECT_THAT(xspace::Validate(space), IsOk());  // what the capture path checks
  absl::StatusOr<HostTrace> t = ReadXSpaceHost(StringByteSource(*bytes), "jax", 0);
  ASSERT_THAT(t, IsOk());
  ASSERT_EQ(t->devices.size(), 1u);
  EXPECT_GT(t->devices[0].ops.size(), 1000u);
  const HostSummary s = SummarizeHost(*t);
  ASSERT_EQ(s.steps.size(), 67u);
  EXPECT_EQ(s.steps.front().step, 309);
  EXPECT_EQ(s.steps.back().step, 375);
  int64_t compute = 0;
  int64_t host = 0;
  for (const HostStep& step : s.steps) {
    EXPECT_EQ(step.host.total(), step.end_ns - step.start_ns) << step.step;
    compute += step.host[Category::kCompute];
    host += step.host[Category::kHost];
  }
  EXPECT_NEAR(static_cast<double>(compute) / 67, 0.269e6, 0.005e6);
  EXPECT_GT(host, 40 * compute);
}

TEST(KinetoReaderTest, HostNamedByFileStemWithoutRank) {
  const std::string json = R"({"traceEvents": [
      {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 2,
       "ts": 1700000000123456.789, "dur": 1.5}]})";
  absl::StatusOr<HostTrace> t = ReadKinetoTraceFile(json, "/logs/worker7.1700.pt.trace.json", 0);
  ASSERT_THAT(t, IsOk());
  EXPECT_EQ(t->host, "worker7.1700");
  EXPECT_EQ(t->rank, -1);
  // Old Kineto: absolute microseconds, 19 significant digits, kept exactly (a double would not).
  ASSERT_EQ(t->host_ops.size(), 1u);
  EXPECT_EQ(t->host_ops[0].start_ns, 1'700'000'000'123'456'789);
  EXPECT_EQ(t->host_ops[0].end_ns, 1'700'000'000'123'458'289);
  EXPECT_EQ(t->window_start_ns, 1'700'000'000'123'456'789);
  EXPECT_THAT(t->warnings, IsEmpty());
}

TEST(KinetoReaderTest, FileErrorsNameThePath) {
  absl::StatusOr<HostTrace> t =
      ReadKinetoTraceFile(std::string("\x1f\x8bnot really gzip"), "/logs/r1.pt.trace.json.gz", 0);
  ASSERT_FALSE(t.ok());
  EXPECT_THAT(t.status().message(),
              AllOf(HasSubstr("/logs/r1.pt.trace.json.gz"), HasSubstr("cannot decompress gzip")));
  absl::StatusOr<std::string> gz = GzipCompress("{\"traceEvents\": [");
  ASSERT_THAT(gz, IsOk());
  t = ReadKinetoTraceFile(*gz, "/logs/r2.pt.trace.json.gz", 0);
  ASSERT_FALSE(t.ok());
  EXPECT_THAT(t.status().message(),
              AllOf(HasSubstr("/logs/r2.pt.trace.json.gz: Kineto trace of r2: invalid JSON at "
                              "offset 17 (line 1, column 18)")));
}

TEST(KinetoReaderTest, FileStemsAndHostNames) {
  EXPECT_EQ(KinetoFileStem("/a/b/host1_123.1700000000.pt.trace.json.gz"), "host1_123.1700000000");
  EXPECT_EQ(KinetoFileStem("rank0.pt.trace.json"), "rank0");
  EXPECT_EQ(KinetoFileStem("x/trace.json"), "trace");
  EXPECT_EQ(KinetoFileStem("x/worker.JSON"), "worker");
  EXPECT_EQ(KinetoFileStem("noext"), "noext");
  EXPECT_EQ(KinetoHostName(5, "/a/w.pt.trace.json"), "rank-5");
  EXPECT_EQ(KinetoHostName(-1, "/a/w.pt.trace.json"), "w");
}

TEST(KinetoReaderTest, SubMicrosecondRoundingAndBaseAfterEvents) {
  // Newer Kineto writes baseTimeNanoseconds before traceEvents, older after: both work.
  const std::string json = R"({"traceEvents": [
      {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 1.2344, "dur": 0.0006,
       "args": {"device": 2}},
      {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 2.5e1, "dur": 1E-3,
       "args": {"device": 2}}],
      "displayTimeUnit": "ns", "baseTimeNanoseconds": 1767225600000000000})";
  absl::StatusOr<HostTrace> t = ReadKinetoTrace(json, "h", /*offset_ns=*/0);
  ASSERT_THAT(t, IsOk());
  ASSERT_EQ(t->devices.size(), 1u);
  EXPECT_EQ(t->devices[0].id, 2);  // args.device wins over pid
  EXPECT_THAT(Ops(t->devices[0].ops, kP), ElementsAre(O(OpKind::kDeviceCompute, 1'234, 1'235),
                                                      O(OpKind::kDeviceCompute, 25'000, 25'001)));
}

TEST(KinetoReaderTest, ArrayFormatAndRelativeTimesWarn) {
  const std::string json = R"([
      {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#0", "pid": 1, "tid": 1,
       "ts": 10, "dur": 100},
      {"ph": "X", "cat": "Runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1,
       "ts": 20, "dur": 5}])";
  absl::StatusOr<HostTrace> t = ReadKinetoTrace(json, "h", 0);
  ASSERT_THAT(t, IsOk());
  EXPECT_THAT(Markers(t->steps, 0), ElementsAre(M(0, 10'000, 110'000, 1)));
  EXPECT_THAT(Ops(t->host_ops, 0), ElementsAre(O(OpKind::kHostLaunch, 20'000, 25'000)));
  EXPECT_THAT(t->warnings,
              ElementsAre(AllOf(HasSubstr("look relative"), HasSubstr("no baseTimeNanoseconds"))));
}

TEST(KinetoReaderTest, CustomStepPattern) {
  const std::string json = R"({"baseTimeNanoseconds": 1767225600000000000, "traceEvents": [
      {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#3", "pid": 1, "tid": 1,
       "ts": 0, "dur": 100},
      {"ph": "X", "cat": "user_annotation", "name": "iteration/9", "pid": 1, "tid": 1,
       "ts": 0, "dur": 100}]})";
  absl::StatusOr<HostTrace> t =
      ReadKinetoTrace(json, "h", 0, {.step_pattern = R"(^iteration/(\d+)$)"});
  ASSERT_THAT(t, IsOk());
  EXPECT_THAT(Markers(t->steps, kP), ElementsAre(M(9, 0, 100'000, 1)));
  // Not a marker under this pattern: an ordinary user annotation.
  EXPECT_THAT(Ops(t->host_ops, kP), ElementsAre(O(OpKind::kHostOther, 0, 100'000)));
  EXPECT_FALSE(ReadKinetoTrace(json, "h", 0, {.step_pattern = "("}).ok());
}

TEST(KinetoReaderTest, BadJsonIsAnErrorNamingThePosition) {
  absl::StatusOr<std::string> json = ReadFile(DataPath("rank3.pt.trace.json"));
  ASSERT_THAT(json, IsOk());
  const std::string truncated = json->substr(0, json->size() / 2);
  absl::StatusOr<HostTrace> t = ReadKinetoTrace(truncated, "rank3", 0);
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(t.status().message(), AllOf(HasSubstr("rank3"), HasSubstr("invalid JSON at offset"),
                                          HasSubstr("line "), HasSubstr("column ")));

  t = ReadKinetoTrace("{\"traceEvents\": [\n  {\"ph\": \"X\",, }]}", "h", 0);
  ASSERT_FALSE(t.ok());
  EXPECT_THAT(t.status().message(),
              AllOf(HasSubstr("line 2, column 14"), HasSubstr("Missing a name for object member")));

  t = ReadKinetoTrace("", "h", 0);
  ASSERT_FALSE(t.ok());
  EXPECT_THAT(t.status().message(), HasSubstr("The document is empty"));
}

// A document nested 100,000 levels deep (200 KB; it overflowed the parser's stack) is refused
// before parsing, naming the cap and where; 1000 levels are allowed.
TEST(KinetoReaderTest, DeepNestingIsRefusedNamingTheCap) {
  const std::string deep = absl::StrCat("{\"traceEvents\": [{\"args\": ", std::string(100000, '['),
                                        std::string(100000, ']'), "}]}");
  absl::StatusOr<HostTrace> t = ReadKinetoTraceFile(deep, "/logs/deep.pt.trace.json", 0);
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(t.status().message()),
              AllOf(HasSubstr("/logs/deep.pt.trace.json"), HasSubstr("nested deeper than 1000"),
                    HasSubstr("offset 1023 (line 1, column 1024)")));
  // Exactly at the cap: parsed (the event is kept, its args ignored).
  const std::string at_cap = absl::StrCat(
      R"({"traceEvents": [{"ph": "X", "ts": 1, "dur": 2, "pid": 0, )",
      R"("cat": "kernel", "name": "k", "args": {"a": )", std::string(kMaxJsonDepth - 4, '['),
      std::string(kMaxJsonDepth - 4, ']'), "}}]}");
  absl::StatusOr<HostTrace> ok = ReadKinetoTrace(at_cap, "h", 0);
  ASSERT_THAT(ok, IsOk());
  ASSERT_EQ(ok->devices.size(), 1u);
  // Brackets inside strings are text, not nesting.
  EXPECT_THAT(
      ReadKinetoTrace(absl::StrCat(R"({"traceEvents": [], "x": ")", std::string(5000, '['), "\"}"),
                      "h", 0),
      IsOk());
}

// A string over ReaderOptions::max_string_bytes refuses the file before it is copied, naming
// the cap; escaped quotes do not end a string early.
TEST(KinetoReaderTest, OverlongStringIsRefusedNamingTheCap) {
  ReaderOptions options;
  options.max_string_bytes = 64;
  const std::string name(65, 'n');
  const std::string doc =
      absl::StrCat(R"({"traceEvents": [{"ph": "X", "ts": 1, "dur": 2, "name": ")", name, "\"}]}");
  absl::StatusOr<HostTrace> t = ReadKinetoTrace(doc, "h", 0, options);
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(t.status().message(), AllOf(HasSubstr("a string longer than 64 bytes at offset 56"),
                                          HasSubstr("the string cap")));
  // 64 bytes, three of them escaped quotes and a trailing escaped backslash: within the cap.
  const std::string escaped = absl::StrCat(std::string(56, 'n'), R"(\"\"\"\\)");
  ASSERT_EQ(escaped.size(), 64u);
  EXPECT_THAT(ReadKinetoTrace(absl::StrCat(R"({"traceEvents": [{"ph": "X", "ts": 1, "dur": 2, )",
                                           R"("name": ")", escaped, "\"}]}"),
                              "h", 0, options),
              IsOk());
  // The default cap (1 MiB) takes the same name.
  EXPECT_THAT(ReadKinetoTrace(doc, "h", 0), IsOk());
}

// A gzip bomb: 1 MiB of zeros (~1 KB compressed) is refused at a ratio cap of 10, naming the
// file and the cap, before it is all inflated.
TEST(KinetoReaderTest, GzipBombIsRefusedNamingTheFileAndTheCap) {
  absl::StatusOr<std::string> gz = GzipCompress(std::string(1 << 20, '\0'));
  ASSERT_THAT(gz, IsOk());
  ReaderOptions options;
  options.max_inflate_ratio = 10;
  absl::StatusOr<HostTrace> t = ReadKinetoTraceFile(*gz, "/logs/bomb.pt.trace.json.gz", 0, options);
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(t.status().message(),
              AllOf(HasSubstr("/logs/bomb.pt.trace.json.gz"), HasSubstr("more than 10 times"),
                    HasSubstr("--max-inflate-ratio")));
  options.max_inflate_ratio = 0;
  options.max_inflated_bytes = 100'000;
  t = ReadKinetoTraceFile(*gz, "/logs/bomb.pt.trace.json.gz", 0, options);
  EXPECT_THAT(t.status().message(),
              AllOf(HasSubstr("more than 100000 bytes"), HasSubstr("--max-inflated-mb")));
}

TEST(KinetoReaderTest, NotATraceIsAnError) {
  const std::pair<absl::string_view, absl::string_view> cases[] = {
      {R"({})", "no \"traceEvents\" array"},
      {R"({"schemaVersion": 1, "deviceProperties": []})", "no \"traceEvents\" array"},
      {R"({"traceEvents": {"ph": "X"}})", "\"traceEvents\" is an object, expected an array"},
      {R"({"traceEvents": 3})", "\"traceEvents\" is a number, expected an array"},
      {R"(42)", "the document is a number"},
  };
  for (const auto& [json, why] : cases) {
    absl::StatusOr<HostTrace> t = ReadKinetoTrace(json, "h", 0);
    ASSERT_FALSE(t.ok()) << json;
    EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(t.status().message(), HasSubstr(why)) << json;
  }
}

TEST(KinetoReaderTest, EmptyTraceIsAWarning) {
  absl::StatusOr<HostTrace> t = ReadKinetoTrace(R"({"traceEvents": []})", "h", 0);
  ASSERT_THAT(t, IsOk());
  EXPECT_THAT(t->steps, IsEmpty());
  EXPECT_THAT(t->host_ops, IsEmpty());
  EXPECT_THAT(t->devices, IsEmpty());
  EXPECT_EQ(t->window_start_ns, 0);
  EXPECT_EQ(t->window_end_ns, 0);
  EXPECT_THAT(t->warnings, ElementsAre(HasSubstr("no complete (\"ph\":\"X\") events")));
}

TEST(KinetoReaderTest, BadEventsAreDroppedWithOneWarningPerProblem) {
  const std::string json = R"({"baseTimeNanoseconds": 1767225600000000000,
    "distributedInfo": {"rank": "three", "world_size": 0},
    "traceEvents": [
      {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": "12", "dur": 1},
      {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 12, "dur": [1]},
      {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 12, "dur": -5},
      {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 13, "dur": -1},
      {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 12},
      {"ph": "X", "cat": "kernel", "name": "k", "pid": "gpu", "tid": 7, "ts": 12, "dur": 1},
      {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 1e300, "dur": 1},
      {"ph": "X", "cat": "mystery", "name": "m", "pid": 0, "tid": 7, "ts": 1, "dur": 1},
      {"cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 1, "dur": 1},
      7,
      {"ph": "X", "cat": "kernel", "name": "ok", "pid": 0, "tid": 7, "ts": 20, "dur": 2}
    ]})";
  absl::StatusOr<HostTrace> t = ReadKinetoTrace(json, "h", 0);
  ASSERT_THAT(t, IsOk());
  EXPECT_EQ(t->host, "h");      // the bad rank is ignored
  EXPECT_EQ(t->world_size, 0);  // and so is the bad world size
  ASSERT_EQ(t->devices.size(), 1u);
  // The unknown category only widens the window; the kernel event at ts 1 lacks "ph".
  EXPECT_THAT(Ops(t->devices[0].ops, kP), ElementsAre(O(OpKind::kDeviceCompute, 20'000, 22'000)));
  EXPECT_EQ(t->window_start_ns - kP, 1'000);
  EXPECT_THAT(
      t->warnings,
      ElementsAre(
          HasSubstr("distributedInfo.rank a string 'three' is not a rank"),
          HasSubstr("distributedInfo.world_size a number '0' is not a world size"),
          HasSubstr("unknown categories ignored: 'mystery' (1)"),
          HasSubstr(
              "field of the wrong type dropped: 2 (first: traceEvents[0] \"ts\" is a string)"),
          HasSubstr("negative duration dropped: 2 (first: traceEvents[2] 'k' dur -5000 ns)"),
          HasSubstr("without \"ts\" or \"dur\" dropped: 1 (first: traceEvents[4] 'k')"),
          HasSubstr("without args.device or an integer pid dropped: 1 (first: traceEvents[5]"),
          HasSubstr("not a valid or in-range value dropped: 1 (first: traceEvents[6]"),
          HasSubstr("without \"ph\" ignored: 1 (first: traceEvents[8])"),
          HasSubstr("not objects ignored: 1 (first: traceEvents[9])")));
}

// --- XSpace ------------------------------------------------------------------------------------

// A JAX-like host: `train` step roots (_r=1, step_num) on the main thread, an NVTX range on another
// line, a GPU with CUPTI stream lines and a derived XLA Ops line, a TPU with XLA Ops/Modules/Steps
// lines. Lines start after the profile start (relative timestamps), events after their line.
XSpace JaxLikeSpace() {
  XSpace space;
  xspace::SetProfileWindow(&space, kP, kP + 10 * kMs);
  xspace::XPlaneBuilder(space.add_planes(), 99, "/host:metadata");  // ignored

  xspace::XPlaneBuilder host(space.add_planes(), 49, xspace::kHostPlaneName, kP);
  const int64_t r = host.StatMetadataId(xspace::kStatIsRoot);
  const int64_t step_num = host.StatMetadataId(xspace::kStatStepNum);
  auto* main = host.AddLine(1234, "python3", kP + 1'000);
  for (int64_t s = 0; s < 2; ++s) {
    auto* root =
        host.AddEvent(main, host.EventMetadataId("train"), kP + 1'000 + s * 4 * kMs, 4 * kMs);
    host.AddStat(root, r, int64_t{1});
    host.AddStat(root, step_num, 7 + s);
  }
  host.AddEvent(main, host.EventMetadataId("$train.py:10 main"), kP + 1'000, 8 * kMs);
  host.AddEvent(main, host.EventMetadataId("$input_pipeline.py:50 next_batch"), kP + 2'000,
                500'000);
  host.AddEvent(main, host.EventMetadataId("PjitFunction(train_step)"), kP + 600'000, 100'000);
  host.AddEvent(main, host.EventMetadataId("cuLaunchKernel"), kP + 610'000, 5'000);
  host.AddEvent(main, host.EventMetadataId("cuStreamSynchronize"), kP + 700'000, 2 * kMs);
  host.AddEvent(main, host.EventMetadataId("PjRtStreamExecutorBuffer::BlockHostUntilReady"),
                kP + 4'100'000, 1'000);
  auto* nvtx = host.AddLine(77, "NVTX", kP + 500);
  host.AddEvent(nvtx, host.EventMetadataId("train_step 7"), kP + 1'000, 3'900'000);
  // Sub-ns offsets: 2.5 ns after the line, 1 ns long -> [2, 3) (times round down to whole ns).
  tensorflow::profiler::XEvent* tiny = nvtx->add_events();
  tiny->set_metadata_id(host.EventMetadataId("cudaLaunchKernel"));
  tiny->set_offset_ps(2'500);
  tiny->set_duration_ps(1'000);

  xspace::XPlaneBuilder gpu(space.add_planes(), 0, "/device:GPU:0", kP);
  const int64_t details = gpu.StatMetadataId(xspace::kStatMemcpyDetails);
  const int64_t corr = gpu.StatMetadataId(xspace::kStatCorrelationId);
  auto* compute = gpu.AddLine(7, "Stream #7(Compute)", kP + 2'000);
  auto* copies = gpu.AddLine(13, "Stream #13(MemcpyH2D,MemcpyD2H)", kP + 2'000);
  auto* nccl = gpu.AddLine(21, "Stream #21(Compute)", kP + 2'000);
  auto* derived = gpu.AddLine(100, "XLA Ops", kP + 2'000);
  auto* e = gpu.AddEvent(copies, gpu.EventMetadataId("MemcpyH2D"), kP + 510'000, 50'000);
  gpu.AddStat(e, details, "kind_src:pageable kind_dst:device size:4096 dest:0 async:1");
  gpu.AddStat(e, corr, uint64_t{5});
  gpu.AddEvent(compute, gpu.EventMetadataId("fusion_12"), kP + 620'000, 1 * kMs);
  gpu.AddEvent(derived, gpu.EventMetadataId("fusion.12"), kP + 620'000, 1 * kMs);
  gpu.AddEvent(nccl, gpu.EventMetadataId("ncclAllReduceRingLLKernel_sum_f32"), kP + 1'700'000,
               900'000);
  // The generic name says nothing; memcpy_details (a ref value here) says device -> host.
  e = gpu.AddEvent(copies, gpu.EventMetadataId("Memcpy"), kP + 2'650'000, 20'000);
  const int64_t ref_id = gpu.StatMetadataId("kind_src:device kind_dst:pinned size:64");
  tensorflow::profiler::XStat* ref = e->add_stats();
  ref->set_metadata_id(details);
  ref->set_ref_value(static_cast<uint64_t>(ref_id));
  // The name says H2D but memcpy_details says device -> device: details win.
  e = gpu.AddEvent(copies, gpu.EventMetadataId("MemcpyH2D"), kP + 2'700'000, 10'000);
  gpu.AddStat(e, details, "kind_src:device kind_dst:device size:64 dest:1");
  gpu.AddEvent(copies, gpu.EventMetadataId("MemcpyDToD"), kP + 2'800'000, 10'000);

  xspace::XPlaneBuilder tpu(space.add_planes(), 1000, "/device:TPU:3", kP);
  auto* steps = tpu.AddLine(1, "Steps", kP);
  auto* modules = tpu.AddLine(2, "XLA Modules", kP);
  auto* ops = tpu.AddLine(3, "XLA Ops", kP);
  tpu.AddEvent(steps, tpu.EventMetadataId("7"), kP + 1'000, 4 * kMs);
  tpu.AddEvent(modules, tpu.EventMetadataId("jit_train_step"), kP + 10'000, 3 * kMs);
  tpu.AddEvent(ops, tpu.EventMetadataId("infeed"), kP + 10'000, 100'000);
  tpu.AddEvent(ops, tpu.EventMetadataId("fusion.1"), kP + 110'000, 1 * kMs);
  tpu.AddEvent(ops, tpu.EventMetadataId("all-reduce.3"), kP + 1'110'000, 500'000);
  tpu.AddEvent(ops, tpu.EventMetadataId("outfeed"), kP + 1'610'000, 10'000);
  return space;
}

// One step root per step per host (XProf's rule): another GPU's thread joins it through consumer
// context stats (`_ct`/`_c`) on a wrapper event, which spans the step but is not host work, even
// when its name is not a step marker.
TEST(XSpaceReaderTest, ConsumerContextWrappersAreNotHostWork) {
  XSpace space;
  xspace::SetProfileWindow(&space, kP, kP + 10 * kMs);
  xspace::XPlaneBuilder host(space.add_planes(), 1, xspace::kHostPlaneName, kP);
  const int64_t r = host.StatMetadataId("_r");
  const int64_t step_num = host.StatMetadataId("step_num");
  const int64_t pt = host.StatMetadataId("_pt");
  const int64_t p = host.StatMetadataId("_p");
  const int64_t ct = host.StatMetadataId("_ct");
  const int64_t c = host.StatMetadataId("_c");
  auto* gpu0 = host.AddLine(1, "gpu0", kP);
  auto* root = host.AddEvent(gpu0, host.EventMetadataId("train"), kP + kMs, 5 * kMs);
  host.AddStat(root, r, int64_t{1});
  host.AddStat(root, step_num, int64_t{3});
  host.AddStat(root, pt, int64_t{0});
  host.AddStat(root, p, int64_t{42});
  auto* gpu1 = host.AddLine(2, "gpu1", kP);
  auto* wrapper = host.AddEvent(gpu1, host.EventMetadataId("gpu1 loop"), kP + kMs, 5 * kMs);
  host.AddStat(wrapper, ct, int64_t{0});
  host.AddStat(wrapper, c, int64_t{42});
  host.AddEvent(gpu1, host.EventMetadataId("cudaLaunchKernel"), kP + 2 * kMs, 10);
  absl::StatusOr<HostTrace> t = ReadXSpaceHost(space, "h", 0);
  ASSERT_THAT(t, IsOk());
  EXPECT_THAT(Markers(t->steps, kP), ElementsAre(M(3, kMs, 6 * kMs, 1)));
  EXPECT_THAT(Ops(t->host_ops, kP), ElementsAre(O(OpKind::kHostLaunch, 2 * kMs, 2 * kMs + 10)));
}

TEST(XSpaceReaderTest, JaxLikeHost) {
  const XSpace space = JaxLikeSpace();
  ASSERT_THAT(xspace::Validate(space), IsOk()) << xspace::Validate(space);
  // The host's clock is 5 us behind the common timeline: common = agent + 5000.
  absl::StatusOr<HostTrace> t = ReadXSpaceHost(space, "worker-1", /*offset_ns=*/-5'000);
  ASSERT_THAT(t, IsOk());
  const int64_t base = kP + 5'000;
  EXPECT_EQ(t->host, "worker-1");
  EXPECT_EQ(t->window_start_ns - base, 0);
  EXPECT_EQ(t->window_end_ns - base, 10 * kMs);
  EXPECT_THAT(Markers(t->steps, base),
              ElementsAre(M(7, 1'000, 3'901'000, 77), M(7, 1'000, 4'001'000, 1234),
                          M(8, 4'001'000, 8'001'000, 1234)));
  EXPECT_THAT(
      Ops(t->host_ops, base),
      UnorderedElementsAreArray({
          O(OpKind::kHostInputWait, 2'000, 502'000),  // $...next_batch: an input wait
          O(OpKind::kHostOther, 600'000, 700'000),    // PjitFunction
          O(OpKind::kHostLaunch, 610'000, 615'000), O(OpKind::kHostSync, 700'000, 2'700'000),
          O(OpKind::kHostSync, 4'100'000, 4'101'000),  // BlockHostUntilReady
          O(OpKind::kHostLaunch, 502, 503),            // 500 + 2.5 ns, 1 ns long
      }));
  ASSERT_EQ(t->devices.size(), 2u);
  EXPECT_EQ(t->devices[0].id, 0);
  EXPECT_EQ(t->devices[0].name, "/device:GPU:0");
  EXPECT_THAT(Ops(t->devices[0].ops, base),
              UnorderedElementsAreArray({
                  O(OpKind::kMemcpyH2D, 510'000, 560'000),
                  O(OpKind::kDeviceCompute, 620'000, 1'620'000),  // once: XLA Ops is derived
                  O(OpKind::kCollective, 1'700'000, 2'600'000),
                  O(OpKind::kMemcpyD2H, 2'650'000, 2'670'000),
                  O(OpKind::kMemcpyD2D, 2'700'000, 2'710'000),
                  O(OpKind::kMemcpyD2D, 2'800'000, 2'810'000),
              }));
  EXPECT_EQ(t->devices[1].id, 3);
  EXPECT_EQ(t->devices[1].name, "/device:TPU:3");
  EXPECT_THAT(Ops(t->devices[1].ops, base), UnorderedElementsAreArray({
                                                O(OpKind::kMemcpyH2D, 10'000, 110'000),
                                                O(OpKind::kDeviceCompute, 110'000, 1'110'000),
                                                O(OpKind::kCollective, 1'110'000, 1'610'000),
                                                O(OpKind::kMemcpyD2H, 1'610'000, 1'620'000),
                                            }));
  EXPECT_THAT(t->warnings, IsEmpty());
}

// docs/xprof-compatibility.md "Memcpy naming": our collectors name copies as XProf classifies
// them (MemcpyHToD, MemcpyDToH) and keep CUPTI's kinds in memcpy_details; TensorFlow's own files
// carry CUPTI's names (MemcpyH2D, MemcpyD2H). Both read as the same copies.
TEST(XSpaceReaderTest, XProfAndCuptiMemcpyNamesReadAlike) {
  XSpace space;
  xspace::XPlaneBuilder gpu(space.add_planes(), 0, "/device:GPU:0", kP);
  auto* line = gpu.AddLine(13, "Stream #13(MemcpyH2D,MemcpyD2H)", kP);
  const int64_t details = gpu.StatMetadataId(xspace::kStatMemcpyDetails);
  gpu.AddEvent(line, gpu.EventMetadataId("MemcpyHToD"), kP + 1'000, 1'000);  // no details
  gpu.AddEvent(line, gpu.EventMetadataId("MemcpyH2D"), kP + 3'000, 1'000);
  auto* e = gpu.AddEvent(line, gpu.EventMetadataId("MemcpyDToH"), kP + 5'000, 1'000);
  tensorflow::profiler::XStat* ref = e->add_stats();  // a ref value, as TSL and profctl write it
  ref->set_metadata_id(details);
  ref->set_ref_value(static_cast<uint64_t>(
      gpu.StatMetadataId("kind_src:device kind_dst:pinned size:40000000 dest:0 async:1")));
  e = gpu.AddEvent(line, gpu.EventMetadataId("MemcpyD2H"), kP + 7'000, 1'000);
  gpu.AddStat(e, details, "kind_src:device kind_dst:pageable size:8 dest:0 async:0");
  xspace::SetProfileWindow(&space, kP, kP + kMs);
  absl::StatusOr<HostTrace> t = ReadXSpaceHost(space, "h", 0);
  ASSERT_THAT(t, IsOk());
  ASSERT_EQ(t->devices.size(), 1u);
  EXPECT_THAT(Ops(t->devices[0].ops, kP),
              UnorderedElementsAreArray(
                  {O(OpKind::kMemcpyH2D, 1'000, 2'000), O(OpKind::kMemcpyH2D, 3'000, 4'000),
                   O(OpKind::kMemcpyD2H, 5'000, 6'000), O(OpKind::kMemcpyD2H, 7'000, 8'000)}));
}

TEST(XSpaceReaderTest, TpuWithoutXlaOpsReadsTheOtherLines) {
  XSpace space;
  xspace::SetProfileWindow(&space, kP, kP + kMs);
  xspace::XPlaneBuilder tpu(space.add_planes(), 1, "/device:TPU:0", kP);
  tpu.AddEvent(tpu.AddLine(1, "Steps", kP), tpu.EventMetadataId("1"), kP, kMs);
  tpu.AddEvent(tpu.AddLine(2, "XLA Modules", kP), tpu.EventMetadataId("m"), kP, kMs);
  tpu.AddEvent(tpu.AddLine(3, "TensorCore ops", kP), tpu.EventMetadataId("convolution.2"), kP + 10,
               20);
  absl::StatusOr<HostTrace> t = ReadXSpaceHost(space, "tpu-host", 0);
  ASSERT_THAT(t, IsOk());
  ASSERT_EQ(t->devices.size(), 1u);
  EXPECT_THAT(Ops(t->devices[0].ops, kP), ElementsAre(O(OpKind::kDeviceCompute, 10, 30)));
}

TEST(XSpaceReaderTest, AbsoluteLinesWithoutTaskEnvironmentUseTheEventSpan) {
  XSpace space;  // a foreign file: no profile start, absolute line timestamps
  xspace::XPlaneBuilder host(space.add_planes(), 1, xspace::kHostPlaneName);
  auto* line = host.AddLine(1, "main", kP);
  host.AddEvent(line, host.EventMetadataId("step 3"), kP + 100, 1'000);
  host.AddEvent(line, host.EventMetadataId("cudaDeviceSynchronize"), kP + 500, 2'000);
  absl::StatusOr<HostTrace> t = ReadXSpaceHost(space, "h", /*offset_ns=*/100);
  ASSERT_THAT(t, IsOk());
  EXPECT_EQ(t->window_start_ns, kP);
  EXPECT_EQ(t->window_end_ns, kP + 2'400);
  EXPECT_THAT(Markers(t->steps, kP), ElementsAre(M(3, 0, 1'000, 1)));
  EXPECT_THAT(Ops(t->host_ops, kP), ElementsAre(O(OpKind::kHostSync, 400, 2'400)));
}

TEST(XSpaceReaderTest, BadInputGivesWarningsNotCrashes) {
  XSpace space;
  xspace::SetProfileWindow(&space, kP, kP + kMs);
  space.add_errors("CUPTI buffer overflow");
  xspace::XPlaneBuilder host(space.add_planes(), 49, xspace::kHostPlaneName, kP);
  const int64_t r = host.StatMetadataId(xspace::kStatIsRoot);
  const int64_t step_num = host.StatMetadataId(xspace::kStatStepNum);
  auto* line = host.AddLine(1, "main", kP);
  auto* e = host.AddEvent(line, host.EventMetadataId("train"), kP, 100);
  host.AddStat(e, r, int64_t{1});  // a root without step_num: neither a marker nor host work
  e = host.AddEvent(line, host.EventMetadataId("train"), kP + 200, 100);
  host.AddStat(e, r, int64_t{1});
  host.AddStat(e, step_num, "12");  // a string step_num
  e = host.AddEvent(line, host.EventMetadataId("cudaLaunchKernel"), kP + 300, 10);
  e->set_duration_ps(-5);
  e = host.AddEvent(line, host.EventMetadataId("cudaLaunchKernel"), kP + 400, 10);
  e->set_metadata_id(12345);
  host.AddEvent(line, host.EventMetadataId("step 99999999999999999999"), kP + 600, 10);
  host.AddEvent(line, host.EventMetadataId("aten::mul"), kP + 700, 10);
  auto* far = host.AddLine(2, "far", kP);
  host.AddEvent(far, host.EventMetadataId("aten::add"), kP, 10);
  far->set_timestamp_ns(int64_t{4'000'000'000'000'000'000});  // beyond 2^62 ns once absolute
  xspace::XPlaneBuilder bad_gpu(space.add_planes(), 1, "/device:GPU:zero", kP);
  bad_gpu.AddEvent(bad_gpu.AddLine(1, "Stream #1", kP), bad_gpu.EventMetadataId("k"), kP, 1);

  absl::StatusOr<HostTrace> t = ReadXSpaceHost(space, "h", 0);
  ASSERT_THAT(t, IsOk());
  EXPECT_THAT(t->steps, IsEmpty());
  EXPECT_THAT(Ops(t->host_ops, kP),
              ElementsAre(O(OpKind::kHostOther, 600, 610), O(OpKind::kHostOther, 700, 710)));
  EXPECT_THAT(t->devices, IsEmpty());
  EXPECT_THAT(
      t->warnings,
      ElementsAre(
          "trace error: CUPTI buffer overflow",
          // The device planes are read before the host plane.
          HasSubstr("bad ordinal skipped: 1 (first: plane '/device:GPU:zero')"),
          HasSubstr("step roots (_r) without a non-negative integer step_num ignored: 2 (first: "
                    "plane /host:CPU line 1 'main' event #0)"),
          HasSubstr("negative duration dropped: 1 (first: plane /host:CPU line 1 'main' event #2 "
                    "duration_ps -5)"),
          HasSubstr("undefined metadata id dropped: 1 (first: plane /host:CPU line 1 'main' "
                    "event #3 metadata_id 12345)"),
          HasSubstr("step number out of range: 1 (first: plane /host:CPU line 1 'main' event #4 "
                    "'step 99999999999999999999')"),
          HasSubstr("times out of range dropped: 1 (first: plane /host:CPU line 2 'far' "
                    "event #0")));
}

TEST(XSpaceReaderTest, Errors) {
  XSpace empty;
  absl::StatusOr<HostTrace> t = ReadXSpaceHost(empty, "h", 0);
  ASSERT_FALSE(t.ok());
  EXPECT_THAT(t.status().message(), AllOf(HasSubstr("host h"), HasSubstr("not a host trace")));
  EXPECT_THAT(t.status().message(), Not(HasSubstr("the trace says")));
  // An agent whose only source failed: the trace's own first error says why.
  XSpace failed;
  xspace::SetProfileWindow(&failed, 1'000, 2'000);
  failed.add_errors("tsl 127.0.0.1:9999: unreachable: is the framework's profiler server running?");
  failed.add_errors("second");
  t = ReadXSpaceHost(failed, "h", 0);
  ASSERT_FALSE(t.ok());
  EXPECT_THAT(t.status().message(),
              HasSubstr("(1 planes): not a host trace; the trace says: tsl 127.0.0.1:9999: "
                        "unreachable"));

  const XSpace space = JaxLikeSpace();
  EXPECT_THAT(ReadXSpaceHost(space, "h", int64_t{1} << 62).status().message(),
              HasSubstr("clock offset 4611686018427387904 ns is out of range"));
  EXPECT_THAT(ReadXSpaceHost(space, "h", 0, {.step_pattern = "(("}).status().message(),
              HasSubstr("not a valid RE2 regex"));

  XSpace no_events;
  xspace::XPlaneBuilder host(no_events.add_planes(), 49, xspace::kHostPlaneName);
  t = ReadXSpaceHost(no_events, "h", 0);
  ASSERT_THAT(t, IsOk());
  EXPECT_THAT(t->warnings, ElementsAre("the trace has no events"));
}

// The synthetic job (docs/synthetic-job.md) is ground truth: every event is classified as its
// model says, on the common timeline once the agent's skew is taken off.
TEST(XSpaceReaderTest, SyntheticJobClassifiesAsItsModelSays) {
  synthetic::SyntheticJobConfig config;
  config.rank = 1;
  config.world = 2;
  config.gpus = 2;
  config.kernels_per_step = 3;
  config.step_ms = 10;
  config.clock_skew_ns = 3 * kMs + 17;
  const synthetic::SyntheticJob job(config);
  const int64_t start = kP + 123'456;
  const int64_t stop = start + 95 * kMs;
  XSpace space;
  job.Generate(start, stop, &space);
  absl::StatusOr<HostTrace> t = ReadXSpaceHost(space, "rank-1", config.clock_skew_ns);
  ASSERT_THAT(t, IsOk());
  EXPECT_THAT(t->warnings, IsEmpty());
  EXPECT_EQ(t->window_start_ns, start);
  EXPECT_EQ(t->window_end_ns, stop);

  // The model's events, in true time, wholly inside the window.
  auto inside = [&](int64_t s, int64_t e) { return s >= start && e <= stop; };
  std::vector<std::string> markers, host_ops;
  std::vector<std::vector<std::string>> device_ops(2);
  int64_t complete_steps = 0;
  int64_t cut_steps = 0;
  for (int64_t k = job.StepIndexAt(start); k <= job.StepIndexAt(stop - 1); ++k) {
    for (int64_t g = 0; g < config.gpus; ++g) {
      const synthetic::StepPlan plan = job.Plan(k, config.rank, g);
      if (inside(plan.start_ns, plan.end_ns)) {
        markers.push_back(M(plan.step_num, plan.start_ns - kP, plan.end_ns - kP, 1000 + g));
        if (g == 0) ++complete_steps;
      } else if (plan.start_ns < stop && plan.end_ns > start) {  // cut: clipped, marked
        markers.push_back(M(plan.step_num, std::max(plan.start_ns, start) - kP,
                            std::min(plan.end_ns, stop) - kP, 1000 + g));
        if (g == 0) ++cut_steps;
      }
      if (inside(plan.start_ns, plan.input_end_ns)) {
        host_ops.push_back(O(OpKind::kHostInputWait, plan.start_ns - kP, plan.input_end_ns - kP));
      }
      for (size_t i = 0; i < plan.host_calls.size(); ++i) {
        const synthetic::StepPlan::Op& op = plan.host_calls[i];
        if (!inside(op.start_ns, op.end_ns)) continue;
        const OpKind kind =
            op.name == "cudaStreamSynchronize" ? OpKind::kHostSync : OpKind::kHostLaunch;
        host_ops.push_back(O(kind, op.start_ns - kP, op.end_ns - kP));
        // The input batch's MemoryAllocation (in the H2D launch) and MemoryDeallocation (in the
        // final sync): instants, host work that takes no time.
        if (i == 0) {
          host_ops.push_back(
              O(OpKind::kHostOther, op.start_ns + 1'000 - kP, op.start_ns + 1'000 - kP));
        }
        if (i + 1 == plan.host_calls.size()) {
          host_ops.push_back(O(OpKind::kHostOther, op.end_ns - 1'000 - kP, op.end_ns - 1'000 - kP));
        }
      }
      for (size_t i = 0; i < plan.device_ops.size(); ++i) {
        const synthetic::StepPlan::Op& op = plan.device_ops[i];
        const synthetic::StepPlan::Op& launch = plan.host_calls[i];
        // Like CUPTI, the job keeps device work only with its launch.
        if (!inside(op.start_ns, op.end_ns) || !inside(launch.start_ns, launch.end_ns)) continue;
        const size_t n = plan.device_ops.size();
        const OpKind kind = i == 0       ? OpKind::kMemcpyH2D
                            : i + 1 == n ? OpKind::kMemcpyD2H
                            : i + 2 == n ? OpKind::kCollective
                                         : OpKind::kDeviceCompute;
        device_ops[static_cast<size_t>(g)].push_back(O(kind, op.start_ns - kP, op.end_ns - kP));
      }
    }
  }
  ASSERT_GE(complete_steps, 7);
  std::sort(markers.begin(), markers.end());
  std::vector<std::string> got_markers = Markers(t->steps, kP);
  std::sort(got_markers.begin(), got_markers.end());
  // Several GPUs: several markers per step, GPU 0's step root (`_r`) and the other GPUs' consumer
  // wrappers, named as steps ("train_step N").
  EXPECT_THAT(got_markers, ElementsAreArray(markers));
  EXPECT_EQ(t->steps.size(), static_cast<size_t>(2 * (complete_steps + cut_steps)));
  EXPECT_EQ(cut_steps, 2);
  EXPECT_EQ(
      std::count_if(t->steps.begin(), t->steps.end(), [](const StepMarker& m) { return m.cut; }),
      2 * cut_steps);
  EXPECT_THAT(Ops(t->host_ops, kP), UnorderedElementsAreArray(host_ops));
  ASSERT_EQ(t->devices.size(), 2u);
  for (size_t g = 0; g < 2; ++g) {
    EXPECT_EQ(t->devices[g].id, static_cast<int64_t>(g));
    EXPECT_THAT(Ops(t->devices[g].ops, kP), UnorderedElementsAreArray(device_ops[g]));
  }
}

}  // namespace
}  // namespace profctl::analysis
