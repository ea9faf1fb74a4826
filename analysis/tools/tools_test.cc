// Golden-number tests of the tools (tools.h) on synthetic traces whose answers follow from their
// construction, and on TensorFlow/JAX-style XSpace and PyTorch-style trace fixtures read through
// tool_readers.h. Every overview is also checked against the step breakdown of the same trace.
#include "analysis/tools/tools.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "analysis/breakdown.h"
#include "analysis/readers/kineto_reader.h"
#include "analysis/readers/xspace_reader.h"
#include "analysis/tools/tool_readers.h"
#include "common/file_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/status_matchers.h"
#include "tests/test_time.h"
#include "tests/trace_data.h"
#include "xspace/xspace.h"

using ::profctl::testkit::IsOk;

namespace profctl::analysis {
namespace {

using ::testing::ElementsAre;
using ::testing::Field;
using ::testing::HasSubstr;

using ::profctl::test_time::kMs;
using ::profctl::test_time::kUs;
constexpr int64_t kP = 1'767'225'600LL * 1'000'000'000;  // 2026-01-01, ns since the epoch

// A name longer than 4 KiB is kept as its first 4 KiB (on a UTF-8 character boundary) and its
// size, so a 200 MB event name is not copied by every tool; shorter names are kept whole.
TEST(StringTableTest, KeepsTheFirstFourKiBOfALongName) {
  StringTable t;
  const std::string big(10 << 20, 'b');
  const std::string& kept = t.Get(t.Intern(big));
  EXPECT_EQ(kept, std::string(StringTable::kMaxBytes, 'b') + "...(10485760 bytes)");
  // A 2-byte character across the cut is left out whole.
  const std::string utf8 = std::string(StringTable::kMaxBytes - 1, 'a') + "\xc3\xa9" + "zz";
  EXPECT_EQ(t.Get(t.Intern(utf8)), std::string(StringTable::kMaxBytes - 1, 'a') + "...(" +
                                       std::to_string(utf8.size()) + " bytes)");
  const std::string whole(StringTable::kMaxBytes, 'c');
  EXPECT_EQ(t.Get(t.Intern(whole)), whole);
  EXPECT_EQ(t.Intern(big), t.Intern(big));  // one id per name, as before
}

using ::profctl::test_data::DataPath;

// Builds a ToolTrace and the HostTrace the breakdown would read from the same events.
class TraceBuilder {
 public:
  explicit TraceBuilder(std::string host = "h0") {
    t_.host = host;
    h_.host = std::move(host);
  }

  HostEvent& Host(int64_t thread, absl::string_view name, int64_t start, int64_t dur,
                  HostEventRole role, OpKind kind = OpKind::kHostOther) {
    HostEvent e;
    e.thread = thread;
    e.name = t_.strings.Intern(name);
    e.type = e.name;
    e.start_ns = start;
    e.end_ns = start + dur;
    e.role = role;
    e.kind = kind;
    t_.host_events.push_back(e);
    if (role != HostEventRole::kStep) h_.host_ops.push_back(Op{start, start + dur, kind});
    return t_.host_events.back();
  }
  void Step(int64_t step, int64_t start, int64_t dur) {
    Host(1, absl::StrCat("step ", step), start, dur, HostEventRole::kStep);
    h_.steps.push_back(StepMarker{step, start, start + dur, 1});
  }
  DeviceEvent& Device(int64_t device, absl::string_view name, int64_t start, int64_t dur,
                      OpKind kind = OpKind::kDeviceCompute, bool kernel = true) {
    DeviceEvent d;
    d.device = device;
    d.name = t_.strings.Intern(name);
    d.start_ns = start;
    d.end_ns = start + dur;
    d.kind = kind;
    d.is_kernel = kernel;
    t_.device_events.push_back(d);
    DeviceTrace* dt = nullptr;
    for (DeviceTrace& x : h_.devices) {
      if (x.id == device) dt = &x;
    }
    if (dt == nullptr) {
      h_.devices.push_back(DeviceTrace{device, absl::StrCat("/device:GPU:", device), {}});
      dt = &h_.devices.back();
    }
    dt->ops.push_back(Op{start, start + dur, kind});
    return t_.device_events.back();
  }
  void Details(DeviceEvent& d, KernelDetails k) {
    d.details = static_cast<int32_t>(t_.kernel_details.size());
    t_.kernel_details.push_back(k);
  }
  void Memory(int64_t device, int64_t time, int64_t bytes, uint64_t addr, absl::string_view op = "",
              int64_t reserved = -1) {
    MemoryEvent m;
    m.device = device;
    m.time_ns = time;
    m.bytes = bytes;
    m.address = addr;
    m.op = t_.strings.Intern(op);
    m.reported_reserved = reserved;
    t_.memory.push_back(m);
  }
  void Window(int64_t start, int64_t end) {
    t_.window_start_ns = h_.window_start_ns = start;
    t_.window_end_ns = h_.window_end_ns = end;
  }
  ToolTrace& tool() { return t_; }
  HostSummary Summary() const { return SummarizeHost(h_); }

 private:
  ToolTrace t_;
  HostTrace h_;
};

const KernelStat* FindKernel(const std::vector<KernelStat>& rows, absl::string_view kernel) {
  for (const KernelStat& k : rows) {
    if (k.kernel == kernel) return &k;
  }
  return nullptr;
}
const OpStat* FindOp(const std::vector<OpStat>& rows, absl::string_view name) {
  for (const OpStat& s : rows) {
    if (s.name == name) return &s;
  }
  return nullptr;
}

// The overview's categories must be the breakdown's, with `host` split three ways.
void ExpectOverviewMatchesBreakdown(const HostOverview& o, const HostSummary& s) {
  ASSERT_EQ(o.steps.size(), s.steps.size());
  for (size_t i = 0; i < s.steps.size(); ++i) {
    const OverviewTimes& t = o.steps[i].times;
    const CategoryTimes& b = s.steps[i].host;
    SCOPED_TRACE(absl::StrCat("step ", s.steps[i].step));
    EXPECT_EQ(t[OverviewCategory::kDeviceCompute], b[Category::kCompute]);
    EXPECT_EQ(t[OverviewCategory::kOutput], b[Category::kOutput]);
    EXPECT_EQ(t[OverviewCategory::kDeviceToDevice], b[Category::kDeviceToDevice]);
    EXPECT_EQ(t[OverviewCategory::kCollectives], b[Category::kCollectives]);
    EXPECT_EQ(t[OverviewCategory::kInput], b[Category::kInput]);
    EXPECT_EQ(t[OverviewCategory::kCompilation] + t[OverviewCategory::kKernelLaunch] +
                  t[OverviewCategory::kHostCompute],
              b[Category::kHost]);
    EXPECT_EQ(t[OverviewCategory::kOther], b[Category::kIdle]);
    EXPECT_EQ(t.total(), o.steps[i].step_time_ns);
    EXPECT_EQ(t.compute_16bit_ns + t.compute_32bit_ns, t[OverviewCategory::kDeviceCompute]);
  }
}

// --- heuristics ---------------------------------------------------------------------------------

TEST(ToolHeuristicsTest, TensorCoresPrecisionAndEligibility) {
  EXPECT_TRUE(UsesTensorCores("sm80_xmma_gemm_f16f16_f16f32_f32_nn_n_tilesize96x64x32"));
  EXPECT_TRUE(UsesTensorCores("volta_h884gemm_64x64_ldg8_nn"));
  EXPECT_TRUE(UsesTensorCores("cutlass_80_tensorop_s1688gemm_128x128_32x3_nn_align4"));
  EXPECT_TRUE(UsesTensorCores("sm90_gemm_wgmma_bf16"));
  EXPECT_TRUE(UsesTensorCores("flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128, 64, 4>>"));
  EXPECT_FALSE(UsesTensorCores("volta_sgemm_128x64_nn"));
  EXPECT_FALSE(UsesTensorCores("void at::native::vectorized_elementwise_kernel<4>"));
  EXPECT_TRUE(Is16BitKernel("ampere_fp16_s16816gemm_fp16_128x128_ldg8"));
  EXPECT_TRUE(Is16BitKernel("cutlass_bf16_gemm"));
  EXPECT_FALSE(Is16BitKernel("volta_sgemm_128x64_nn"));
  EXPECT_TRUE(IsMatmulOrConv("aten::addmm"));
  EXPECT_TRUE(IsMatmulOrConv("model/dense/MatMul"));
  EXPECT_TRUE(IsMatmulOrConv("dot.3"));
  EXPECT_FALSE(IsMatmulOrConv("aten::add"));
  EXPECT_FALSE(IsMatmulOrConv("ncclDevKernel_AllReduce"));  // "comm" is not "mm"
  // Eligible: 16-bit matmul with dims multiple of 8; fp32 or odd dims are not.
  EXPECT_TRUE(TensorCoreEligible("volta_sgemm", "aten::mm", "aten::mm", R"(["c10::Half"])",
                                 "[[64, 128], [128, 256]]"));
  EXPECT_FALSE(TensorCoreEligible("volta_sgemm", "aten::mm", "aten::mm", R"(["float"])",
                                  "[[64, 128], [128, 256]]"));
  EXPECT_FALSE(TensorCoreEligible("volta_sgemm", "aten::mm", "aten::mm", R"(["c10::Half"])",
                                  "[[64, 127], [127, 256]]"));
  EXPECT_FALSE(TensorCoreEligible("elementwise_kernel_fp16", "aten::add", "aten::add", "", ""));
  EXPECT_TRUE(TensorCoreEligible("sm80_xmma_gemm_f16", "", "", "", ""));  // uses them
  EXPECT_EQ(ToolNamesForHelp(), "overview|kernel_stats|op_stats|input_pipeline|memory|timeline");
  EXPECT_EQ(ToolByName("memory"), Tool::kMemory);
  EXPECT_EQ(ToolByName("trace_viewer"), std::nullopt);
}

// --- synthetic: kernel mix and op tree ----------------------------------------------------------

// One step of 1 ms on thread 1: aten::linear [100, 400) us launches (External id 7) three 16-bit
// Tensor Core GEMMs of 100, 200 and 300 us; aten::add [500, 520) us calls cudaLaunchKernel
// (correlation 42) for an fp32 elementwise kernel of 10 us, twice.
struct KernelMix {
  static constexpr absl::string_view kGemm =
      "sm80_xmma_gemm_f16f16_f16f32_f32_nn_n_tilesize128x128";
  static constexpr absl::string_view kAdd = "vectorized_elementwise_kernel<float>";
  TraceBuilder b;
  KernelMix() {
    b.Window(0, 2 * kMs);
    b.Step(1, 0, kMs);
    HostEvent& linear =
        b.Host(1, "aten::linear", 100 * kUs, 300 * kUs, HostEventRole::kFrameworkOp);
    linear.link_id = 7;
    b.Host(1, "cudaLaunchKernel", 110 * kUs, 5 * kUs, HostEventRole::kRuntime, OpKind::kHostLaunch)
        .link_id = 7;
    int64_t t = 120 * kUs;
    for (const int64_t dur : {100 * kUs, 200 * kUs, 300 * kUs}) {
      DeviceEvent& d = b.Device(0, kGemm, t, dur);
      d.link_id = 7;
      KernelDetails k;
      k.registers_per_thread = 128;
      k.static_shared_bytes = 1024;
      k.dynamic_shared_bytes = 48 * 1024;
      k.grid = {64, 2, 1};
      k.block = {256, 1, 1};
      k.occupancy_pct = 25;
      b.Details(d, k);
      t += dur;
    }
    for (int i = 0; i < 2; ++i) {
      const int64_t at = (700 + 50 * i) * kUs;
      b.Host(1, "aten::add", at, 20 * kUs, HostEventRole::kFrameworkOp);
      b.Host(1, "cudaLaunchKernel", at + 5 * kUs, 5 * kUs, HostEventRole::kRuntime,
             OpKind::kHostLaunch)
          .correlation_id = 42 + i;
      b.Device(0, kAdd, at + 12 * kUs, 10 * kUs).correlation_id = 42 + i;
    }
  }
};

TEST(KernelStatsTest, OneRowPerKernelAndLaunchingOpWithDetailsAndTimes) {
  KernelMix mix;
  const std::vector<KernelStat> rows = ComputeKernelStats(mix.b.tool());
  ASSERT_EQ(rows.size(), 2u);
  const KernelStat& gemm = rows[0];  // the longest first
  EXPECT_EQ(gemm.kernel, KernelMix::kGemm);
  EXPECT_EQ(gemm.op, "aten::linear");
  EXPECT_EQ(gemm.occurrences, 3);
  EXPECT_EQ(gemm.total_ns, (100 + 200 + 300) * kUs);
  EXPECT_EQ(gemm.avg_ns(), 200 * kUs);
  EXPECT_EQ(gemm.min_ns, 100 * kUs);
  EXPECT_EQ(gemm.max_ns, 300 * kUs);
  EXPECT_EQ(gemm.registers_per_thread, 128);
  EXPECT_EQ(gemm.shared_memory_bytes, 1024 + 48 * 1024);
  EXPECT_THAT(gemm.grid, ElementsAre(64, 2, 1));
  EXPECT_THAT(gemm.block, ElementsAre(256, 1, 1));
  EXPECT_DOUBLE_EQ(gemm.occupancy_pct, 25);
  EXPECT_EQ(gemm.configs, 1);
  EXPECT_TRUE(gemm.tensor_core_used);
  EXPECT_TRUE(gemm.tensor_core_eligible);
  const KernelStat& add = rows[1];
  EXPECT_EQ(add.kernel, KernelMix::kAdd);
  EXPECT_EQ(add.op, "aten::add");  // correlation -> cudaLaunchKernel -> enclosing op
  EXPECT_EQ(add.occurrences, 2);
  EXPECT_EQ(add.total_ns, 2 * 10 * kUs);
  EXPECT_FALSE(add.tensor_core_used);
  EXPECT_FALSE(add.tensor_core_eligible);
  EXPECT_EQ(add.registers_per_thread, -1);
}

TEST(OpStatsTest, SelfAndTotalOnHostAndDevice) {
  KernelMix mix;
  // An outer op around aten::linear: its host self time excludes linear; its device total
  // includes linear's kernels, its device self none.
  mix.b.Host(1, "model.forward", 50 * kUs, 500 * kUs, HostEventRole::kAnnotation);
  const OpStats ops = ComputeOpStats(mix.b.tool());
  const OpStat* outer = FindOp(ops.by_op, "model.forward");
  const OpStat* linear = FindOp(ops.by_op, "aten::linear");
  const OpStat* add = FindOp(ops.by_op, "aten::add");
  const OpStat* launch = FindOp(ops.by_op, "cudaLaunchKernel");
  ASSERT_NE(outer, nullptr);
  ASSERT_NE(linear, nullptr);
  ASSERT_NE(add, nullptr);
  ASSERT_NE(launch, nullptr);
  EXPECT_EQ(outer->host_total_ns, 500 * kUs);
  EXPECT_EQ(outer->host_self_ns, (500 - 300) * kUs);
  EXPECT_EQ(outer->device_self_ns, 0);
  EXPECT_EQ(outer->device_total_ns, 600 * kUs);
  EXPECT_EQ(linear->host_self_ns, (300 - 5) * kUs);  // minus its cudaLaunchKernel
  EXPECT_EQ(linear->device_self_ns, 600 * kUs);
  EXPECT_EQ(linear->device_total_ns, 600 * kUs);
  EXPECT_EQ(add->occurrences, 2);
  EXPECT_EQ(add->host_total_ns, 2 * 20 * kUs);
  EXPECT_EQ(add->host_self_ns, 2 * (20 - 5) * kUs);
  EXPECT_EQ(add->device_self_ns, 2 * 10 * kUs);
  EXPECT_EQ(launch->occurrences, 3);
  EXPECT_EQ(launch->host_self_ns, 3 * 5 * kUs);
  // Ordered by device self time: linear first.
  EXPECT_EQ(ops.by_op.front().name, "aten::linear");
  ASSERT_FALSE(ops.by_type.empty());
  EXPECT_EQ(FindOp(ops.by_type, "aten::add")->occurrences, 2);
}

// Three TF ops on one thread, each launching one kernel on GPU 0, in a 1000 us window: device
// self 300 + 100 + 100 us (MatMul 400, Relu 100), host ops busy 250 us.
struct ShareMix {
  TraceBuilder b;
  ShareMix() {
    b.Window(0, 1000 * kUs);
    const auto op = [&](absl::string_view name, absl::string_view type, int64_t at, int64_t dur,
                        int64_t corr, int64_t k_at, int64_t k_dur) {
      b.Host(1, name, at, dur, HostEventRole::kFrameworkOp).type = b.tool().strings.Intern(type);
      b.Host(1, "cudaLaunchKernel", at + 10 * kUs, 5 * kUs, HostEventRole::kRuntime,
             OpKind::kHostLaunch)
          .correlation_id = corr;
      b.Device(0, absl::StrCat("kernel_", corr), k_at, k_dur).correlation_id = corr;
    };
    op("model/dense/MatMul:MatMul", "MatMul", 0, 100 * kUs, 1, 100 * kUs, 300 * kUs);
    op("model/relu/Relu:Relu", "Relu", 200 * kUs, 50 * kUs, 2, 400 * kUs, 100 * kUs);
    op("model/dense_1/MatMul:MatMul", "MatMul", 300 * kUs, 100 * kUs, 3, 500 * kUs, 100 * kUs);
  }
};

const OpShareRow* FindShare(const std::vector<OpShareRow>& rows, absl::string_view name) {
  for (const OpShareRow& r : rows) {
    if (r.stat.name == name) return &r;
  }
  return nullptr;
}

TEST(OpStatsTest, PercentCumulativePercentIdleSwitchAndPies) {
  ShareMix mix;
  const OpStats ops = ComputeOpStats(mix.b.tool());
  EXPECT_EQ(ops.device_idle_ns, (1000 - 500) * kUs);
  EXPECT_EQ(ops.host_idle_ns, (1000 - 250) * kUs);

  // Idle excluded: shares of the ops' own self time.
  const std::vector<OpShareRow> rows =
      OpShares(ops.by_op, ops.host_idle_ns, ops.device_idle_ns, /*include_idle=*/false);
  EXPECT_EQ(FindShare(rows, "IDLE"), nullptr);
  const OpShareRow* dense = FindShare(rows, "model/dense/MatMul:MatMul");
  const OpShareRow* relu = FindShare(rows, "model/relu/Relu:Relu");
  const OpShareRow* dense1 = FindShare(rows, "model/dense_1/MatMul:MatMul");
  ASSERT_NE(dense, nullptr);
  ASSERT_NE(relu, nullptr);
  ASSERT_NE(dense1, nullptr);
  EXPECT_EQ(dense->stat.type, "MatMul");
  EXPECT_DOUBLE_EQ(dense->device_self_pct, 60);
  EXPECT_DOUBLE_EQ(dense->device_self_cum_pct, 60);
  EXPECT_DOUBLE_EQ(relu->device_self_pct, 20);
  EXPECT_DOUBLE_EQ(dense1->device_self_pct, 20);
  // relu and dense_1 tie at 100 us: the row order ranks them, the last reaches 100 %.
  EXPECT_DOUBLE_EQ(std::max(relu->device_self_cum_pct, dense1->device_self_cum_pct), 100);
  EXPECT_DOUBLE_EQ(std::min(relu->device_self_cum_pct, dense1->device_self_cum_pct), 80);
  // Both cumulative columns rise down the table as sorted (device self first); a row without
  // self time on a side has 0 % and 0 cumulative % there (the host-only launches on the device).
  double device_cum = 0;
  double host_cum = 0;
  for (const OpShareRow& r : rows) {
    if (r.stat.device_self_ns > 0) {
      EXPECT_GE(r.device_self_cum_pct, device_cum) << r.stat.name;
      device_cum = r.device_self_cum_pct;
    } else {
      EXPECT_EQ(r.device_self_cum_pct, 0) << r.stat.name;
      EXPECT_EQ(r.device_self_pct, 0) << r.stat.name;
    }
    if (r.stat.host_self_ns > 0) {
      EXPECT_GE(r.host_self_cum_pct, host_cum) << r.stat.name;
      host_cum = r.host_self_cum_pct;
    } else {
      EXPECT_EQ(r.host_self_cum_pct, 0) << r.stat.name;
    }
  }
  EXPECT_DOUBLE_EQ(device_cum, 100);
  EXPECT_DOUBLE_EQ(host_cum, 100);
  EXPECT_EQ(FindShare(rows, "cudaLaunchKernel")->device_self_cum_pct, 0);
  // Host self: 95 + 45 + 95 us of ops and 3 x 5 us of launches = 250 us.
  EXPECT_DOUBLE_EQ(dense->host_self_pct, 100.0 * 95 / 250);
  EXPECT_DOUBLE_EQ(relu->host_self_pct, 100.0 * 45 / 250);
  EXPECT_DOUBLE_EQ(FindShare(rows, "cudaLaunchKernel")->host_self_pct, 100.0 * 15 / 250);
  EXPECT_DOUBLE_EQ(FindShare(rows, "cudaLaunchKernel")->host_self_cum_pct, 100);

  // Idle included: an IDLE row, first on the device (500 us of 1000), in every percentage.
  const std::vector<OpShareRow> with_idle =
      OpShares(ops.by_op, ops.host_idle_ns, ops.device_idle_ns, /*include_idle=*/true);
  ASSERT_EQ(with_idle.size(), rows.size() + 1);
  EXPECT_TRUE(with_idle.front().idle);
  EXPECT_EQ(with_idle.front().stat.name, "IDLE");
  EXPECT_DOUBLE_EQ(with_idle.front().device_self_pct, 50);
  EXPECT_DOUBLE_EQ(with_idle.front().host_self_pct, 75);
  EXPECT_DOUBLE_EQ(FindShare(with_idle, "model/dense/MatMul:MatMul")->device_self_pct, 30);
  EXPECT_DOUBLE_EQ(FindShare(with_idle, "model/dense/MatMul:MatMul")->device_self_cum_pct, 80);
  EXPECT_DOUBLE_EQ(FindShare(with_idle, "model/dense/MatMul:MatMul")->host_self_pct, 9.5);

  // By type, and the pie of device self time by type: top 1 and "other".
  const std::vector<OpShareRow> types =
      OpShares(ops.by_type, ops.host_idle_ns, ops.device_idle_ns, /*include_idle=*/false);
  EXPECT_DOUBLE_EQ(FindShare(types, "MatMul")->device_self_pct, 80);
  const std::vector<PieSlice> pie = SelfTimePie(types, /*device=*/true, /*top_n=*/1);
  ASSERT_EQ(pie.size(), 2u);
  EXPECT_EQ(pie[0].name, "MatMul");
  EXPECT_EQ(pie[0].self_ns, 400 * kUs);
  EXPECT_DOUBLE_EQ(pie[0].pct, 80);
  EXPECT_EQ(pie[1].name, "other");
  EXPECT_EQ(pie[1].self_ns, 100 * kUs);
  EXPECT_DOUBLE_EQ(pie[1].pct, 20);
  // Top 10: every type with host self time, no "other".
  const std::vector<PieSlice> host_pie = SelfTimePie(types, /*device=*/false, kMaxTop);
  ASSERT_EQ(host_pie.size(), 3u);
  EXPECT_EQ(host_pie[0].name, "MatMul");
  EXPECT_EQ(host_pie[0].self_ns, 190 * kUs);

  // The pod sums idle over hosts.
  ShareMix other;
  std::vector<HostTools> hosts;
  hosts.push_back(ComputeHostTools(Tool::kOpStats, mix.b.tool(), mix.b.Summary()));
  hosts.push_back(ComputeHostTools(Tool::kOpStats, other.b.tool(), other.b.Summary()));
  const PodTools pod = BuildPodTools(Tool::kOpStats, std::move(hosts), PodBreakdown());
  EXPECT_EQ(pod.ops.device_idle_ns, 2 * 500 * kUs);
  EXPECT_EQ(pod.ops.host_idle_ns, 2 * 750 * kUs);
}

// Kernel rows carry % and cumulative % of all kernel time; the top kernels sum a kernel's rows
// and put the rest in "other".
TEST(KernelStatsTest, PercentCumulativePercentAndTopKernels) {
  ShareMix mix;
  const std::vector<KernelStat> rows = ComputeKernelStats(mix.b.tool());
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0].kernel, "kernel_1");
  EXPECT_DOUBLE_EQ(rows[0].pct, 60);
  EXPECT_DOUBLE_EQ(rows[0].cum_pct, 60);
  EXPECT_DOUBLE_EQ(rows[1].pct, 20);
  EXPECT_DOUBLE_EQ(rows[1].cum_pct, 80);
  EXPECT_DOUBLE_EQ(rows[2].cum_pct, 100);
  const std::vector<PieSlice> top = TopKernels(rows, /*top_n=*/2);
  ASSERT_EQ(top.size(), 3u);
  EXPECT_EQ(top[0].name, "kernel_1");
  EXPECT_EQ(top[0].self_ns, 300 * kUs);
  EXPECT_DOUBLE_EQ(top[0].pct, 60);
  EXPECT_EQ(top[2].name, "other");
  EXPECT_EQ(top[2].self_ns, 100 * kUs);
  EXPECT_DOUBLE_EQ(top[2].pct, 20);
  EXPECT_EQ(TopKernels(rows, kMaxTop).size(), 3u);  // no empty "other"
  EXPECT_TRUE(TopKernels({}, kMaxTop).empty());

  // One kernel launched by two ops is two rows but one top kernel.
  KernelMix kmix;
  kmix.b.Device(0, KernelMix::kGemm, 900 * kUs, 20 * kUs);  // no launching op
  const std::vector<KernelStat> krows = ComputeKernelStats(kmix.b.tool());
  ASSERT_EQ(krows.size(), 3u);
  const std::vector<PieSlice> ktop = TopKernels(krows, kMaxTop);
  ASSERT_EQ(ktop.size(), 2u);
  EXPECT_EQ(ktop[0].name, KernelMix::kGemm);
  EXPECT_EQ(ktop[0].self_ns, 620 * kUs);
  EXPECT_DOUBLE_EQ(ktop[0].pct, 100.0 * 620 / 640);

  // The pod's shares are of the pod's kernel time.
  ShareMix other;
  std::vector<HostTools> hosts;
  hosts.push_back(ComputeHostTools(Tool::kKernelStats, mix.b.tool(), mix.b.Summary()));
  hosts.push_back(ComputeHostTools(Tool::kKernelStats, other.b.tool(), other.b.Summary()));
  const PodTools pod = BuildPodTools(Tool::kKernelStats, std::move(hosts), PodBreakdown());
  ASSERT_EQ(pod.kernels.size(), 3u);
  EXPECT_EQ(pod.kernels[0].total_ns, 600 * kUs);
  EXPECT_DOUBLE_EQ(pod.kernels[0].pct, 60);
  EXPECT_DOUBLE_EQ(pod.kernels[2].cum_pct, 100);
}

// The overview's top ops carry their type and cumulative %, top kernels their cumulative %.
TEST(OverviewTest, TopOpsHaveCategoryAndCumulativePercent) {
  ShareMix mix;
  const HostTools h = ComputeHostTools(Tool::kOverview, mix.b.tool(), mix.b.Summary());
  const HostOverview& o = h.overview;
  ASSERT_EQ(o.top_ops.size(), 3u);
  EXPECT_EQ(o.top_ops[0].name, "model/dense/MatMul:MatMul");
  EXPECT_EQ(o.top_ops[0].category, "MatMul");
  EXPECT_DOUBLE_EQ(o.top_ops[0].pct, 60);
  EXPECT_DOUBLE_EQ(o.top_ops[0].cum_pct, 60);
  EXPECT_DOUBLE_EQ(o.top_ops[1].cum_pct, 80);
  EXPECT_DOUBLE_EQ(o.top_ops[2].cum_pct, 100);
  ASSERT_EQ(o.top_kernels.size(), 3u);
  EXPECT_EQ(o.top_kernels[0].name, "kernel_1");
  EXPECT_DOUBLE_EQ(o.top_kernels[0].cum_pct, 60);
  EXPECT_DOUBLE_EQ(o.top_kernels[2].cum_pct, 100);
}

// Steps of 10, 20 and 30 ms; the host waits for input [0, 4) ms while GPU 0 computes [0, 1) ms
// and GPU 1 [2, 2.5) ms: GPU 0 waits 3 ms, GPU 1 3.5 ms of 60 ms. Neither GPU is described.
TEST(OverviewTest, StepTimeStatisticsInputRangeAcrossDevicesAndUndescribedDevices) {
  TraceBuilder b("w0");
  b.Window(0, 60 * kMs);
  b.Step(1, 0, 10 * kMs);
  b.Step(2, 10 * kMs, 20 * kMs);
  b.Step(3, 30 * kMs, 30 * kMs);
  b.Host(2, "IteratorGetNext", 0, 4 * kMs, HostEventRole::kAnnotation, OpKind::kHostInputWait);
  b.Device(0, "k0", 0, kMs);
  b.Device(1, "k1", 2 * kMs, kMs / 2);
  b.Device(0, "k0", 12 * kMs, kMs);
  const HostSummary summary = b.Summary();
  const HostTools h = ComputeHostTools(Tool::kOverview, b.tool(), summary);
  const HostOverview& o = h.overview;
  EXPECT_EQ(o.step_time.steps, 3);
  EXPECT_DOUBLE_EQ(o.step_time.average_ns, 20.0 * kMs);
  EXPECT_NEAR(o.step_time.stddev_ns, std::sqrt(200.0 / 3) * kMs, 1);
  EXPECT_EQ(o.step_time.min_ns, 10 * kMs);
  EXPECT_EQ(o.step_time.max_ns, 30 * kMs);
  ASSERT_EQ(o.input_by_device.size(), 2u);
  EXPECT_EQ(o.input_by_device[0].device, 0);
  EXPECT_EQ(o.input_by_device[0].input_ns, 3 * kMs);
  EXPECT_EQ(o.input_by_device[0].step_ns, 60 * kMs);
  EXPECT_DOUBLE_EQ(o.input_by_device[0].pct, 5);
  EXPECT_EQ(o.input_by_device[1].input_ns, 3500 * kUs);
  ASSERT_TRUE(o.input_range.known);
  EXPECT_DOUBLE_EQ(o.input_range.min_pct, 5);
  EXPECT_EQ(o.input_range.min_at, "w0 device 0");
  EXPECT_DOUBLE_EQ(o.input_range.max_pct, 100.0 * 3.5 / 60);
  EXPECT_EQ(o.input_range.max_at, "w0 device 1");
  // The kernels' devices count though the trace describes neither.
  ASSERT_EQ(o.environment.devices.size(), 2u);
  EXPECT_EQ(o.environment.devices[1].id, 1);
  EXPECT_THAT(o.environment.devices[1].name, HasSubstr("not described"));

  // The pod: statistics over both hosts' steps, the range over both hosts' devices.
  TraceBuilder c("w1");
  c.Window(0, 40 * kMs);
  c.Step(1, 0, 40 * kMs);
  c.Device(0, "k0", 0, 40 * kMs);
  std::vector<HostTools> hosts = {h, ComputeHostTools(Tool::kOverview, c.tool(), c.Summary())};
  const PodTools pod = BuildPodTools(Tool::kOverview, std::move(hosts), PodBreakdown());
  EXPECT_EQ(pod.overview_step_time.steps, 4);
  EXPECT_DOUBLE_EQ(pod.overview_step_time.average_ns, 25.0 * kMs);
  EXPECT_EQ(pod.overview_step_time.max_ns, 40 * kMs);
  EXPECT_DOUBLE_EQ(pod.overview_input_range.min_pct, 0);
  EXPECT_EQ(pod.overview_input_range.min_at, "w1 device 0");
  EXPECT_EQ(pod.overview_input_range.max_at, "w0 device 1");
}

TEST(OpStatsTest, DeviceOpsNamedByTfOpAndXlaOpsLineSpans) {
  TraceBuilder b;
  b.Device(0, "k1", 0, 30 * kUs).op = b.tool().strings.Intern("model/dense/MatMul:MatMul");
  b.Device(0, "k2", 40 * kUs, 10 * kUs).op = b.tool().strings.Intern("model/dense/MatMul:MatMul");
  b.Device(0, "k3", 60 * kUs, 5 * kUs).op = b.tool().strings.Intern("model/relu/Relu:Relu");
  const OpStats ops = ComputeOpStats(b.tool());
  ASSERT_EQ(ops.by_op.size(), 2u);
  EXPECT_EQ(ops.by_op[0].name, "model/dense/MatMul:MatMul");
  EXPECT_EQ(ops.by_op[0].type, "MatMul");
  EXPECT_EQ(ops.by_op[0].device_self_ns, 40 * kUs);
  EXPECT_EQ(FindOp(ops.by_type, "Relu")->device_total_ns, 5 * kUs);

  // TPU-style: only `XLA Ops` spans; a fusion nests a dot on the same line.
  TraceBuilder tpu;
  auto span = [&](absl::string_view name, absl::string_view type, int64_t s, int64_t d) {
    DeviceOpSpan x;
    x.name = tpu.tool().strings.Intern(name);
    x.type = tpu.tool().strings.Intern(type);
    x.start_ns = s;
    x.end_ns = s + d;
    tpu.tool().device_ops.push_back(x);
  };
  span("fusion.1", "fusion", 0, 100 * kUs);
  span("dot.2", "dot", 10 * kUs, 60 * kUs);
  span("fusion.3", "fusion", 200 * kUs, 50 * kUs);
  const OpStats xla = ComputeOpStats(tpu.tool());
  EXPECT_EQ(FindOp(xla.by_op, "fusion.1")->device_self_ns, 40 * kUs);
  EXPECT_EQ(FindOp(xla.by_op, "fusion.1")->device_total_ns, 100 * kUs);
  EXPECT_EQ(FindOp(xla.by_type, "fusion")->device_self_ns, (40 + 50) * kUs);
  EXPECT_EQ(FindOp(xla.by_type, "dot")->device_self_ns, 60 * kUs);
}

// --- synthetic: memory --------------------------------------------------------------------------

TEST(MemoryTest, PeakLiveAllocationsAndFragmentation) {
  TraceBuilder b;
  constexpr int64_t kA = 100 << 20, kB = 200 << 20, kC = 50 << 20;
  b.Memory(0, 10, kA, 0xa, "conv1");
  b.Memory(0, 20, kB, 0xb, "conv2", /*reserved=*/400 << 20);
  b.Memory(0, 30, -kA, 0xa);
  b.Memory(0, 40, kC, 0xc, "fc");
  b.Memory(1, 15, kC, 0xd);  // another device, separate
  const std::vector<DeviceMemory> mem = ComputeMemory(b.tool());
  ASSERT_EQ(mem.size(), 2u);
  const DeviceMemory& d0 = mem[0];
  EXPECT_EQ(d0.device, 0);
  EXPECT_EQ(d0.allocations, 3);
  EXPECT_EQ(d0.frees, 1);
  EXPECT_THAT(d0.timeline, ElementsAre(Field(&MemoryPoint::in_use_bytes, kA),
                                       Field(&MemoryPoint::in_use_bytes, kA + kB),
                                       Field(&MemoryPoint::in_use_bytes, kB),
                                       Field(&MemoryPoint::in_use_bytes, kB + kC)));
  EXPECT_EQ(d0.baseline_bytes, 0);  // nothing reports a total
  EXPECT_EQ(d0.peak_bytes, kA + kB);
  EXPECT_EQ(d0.peak_time_ns, 20);
  EXPECT_EQ(d0.live_at_peak, 2);
  ASSERT_EQ(d0.largest_live_at_peak.size(), 2u);
  EXPECT_EQ(d0.largest_live_at_peak[0].op, "conv2");
  EXPECT_EQ(d0.largest_live_at_peak[0].bytes, kB);
  EXPECT_EQ(d0.largest_live_at_peak[1].op, "conv1");
  EXPECT_EQ(d0.reserved_at_peak, 400 << 20);
  EXPECT_DOUBLE_EQ(d0.fragmentation_at_peak,
                   static_cast<double>((400 << 20) - (kA + kB)) / (400 << 20));
  EXPECT_EQ(mem[1].device, 1);
  EXPECT_EQ(mem[1].peak_bytes, kC);
  EXPECT_DOUBLE_EQ(mem[1].fragmentation_at_peak, -1);
}

TEST(MemoryTest, LongTimelinesAreDownsampledKeepingThePeak) {
  TraceBuilder b;
  for (int i = 0; i < 5000; ++i) b.Memory(0, i, i == 2345 ? 1 << 30 : 1, 0x1000 + i);
  for (int i = 0; i < 5000; ++i) b.Memory(0, 5000 + i, i == 2345 ? -(1 << 30) : -1, 0x1000 + i);
  const std::vector<DeviceMemory> mem = ComputeMemory(b.tool());
  ASSERT_EQ(mem.size(), 1u);
  EXPECT_LE(mem[0].timeline.size(), kMaxMemoryPoints);
  int64_t max = 0;
  for (const MemoryPoint& p : mem[0].timeline) max = std::max(max, p.in_use_bytes);
  EXPECT_EQ(max, mem[0].peak_bytes);
  EXPECT_EQ(mem[0].peak_bytes, (1 << 30) + 4999);
  EXPECT_EQ(mem[0].live_at_peak, 5000);
  EXPECT_EQ(mem[0].largest_live_at_peak.size(), kMaxLiveShown);
  EXPECT_EQ(mem[0].largest_live_at_peak[0].bytes, 1 << 30);
}

// --- synthetic: input stalls --------------------------------------------------------------------

// Two 10 ms steps on thread 1. Step 1: the consumer waits 4 ms in Iterator::Prefetch (an
// asynchronous buffer) while thread 2's Iterator::Prefetch::Map works 3 ms (self) inside a 3.5 ms
// ParallelMap span... Step 2 has no stall. The device computes 5 ms per step after the wait.
TEST(InputPipelineTest, StallsPerStepAndTheProducerBottleneck) {
  TraceBuilder b;
  b.Window(0, 20 * kMs);
  b.Step(1, 0, 10 * kMs);
  b.Step(2, 10 * kMs, 10 * kMs);
  b.Host(1, "train_loop_op:Fwd", 4 * kMs, kMs, HostEventRole::kFrameworkOp);
  b.Host(1, "Iterator::Prefetch", 0, 4 * kMs, HostEventRole::kAnnotation, OpKind::kHostInputWait);
  b.Host(1, "Iterator::Prefetch", 10 * kMs, 100 * kUs, HostEventRole::kAnnotation,
         OpKind::kHostInputWait);
  b.Host(2, "Iterator::Prefetch::Map", 0, 3 * kMs + 500 * kUs, HostEventRole::kAnnotation,
         OpKind::kHostInputWait);
  b.Host(2, "Iterator::Prefetch::Map::TFRecord", 0, 500 * kUs, HostEventRole::kAnnotation,
         OpKind::kHostInputWait);
  b.Device(0, "k", 4 * kMs, 5 * kMs);
  b.Device(0, "k", 10 * kMs + 100 * kUs, 5 * kMs);
  const HostSummary summary = b.Summary();
  const HostInputPipeline p = ComputeInputPipeline(b.tool(), summary);
  ASSERT_EQ(p.steps.size(), 2u);
  EXPECT_EQ(p.steps[0].device_input_ns, 4 * kMs);
  EXPECT_EQ(p.steps[0].host_input_ns, 4 * kMs);
  EXPECT_EQ(p.steps[1].device_input_ns, 100 * kUs);
  EXPECT_EQ(p.input_ns, 4 * kMs + 100 * kUs);
  EXPECT_EQ(p.step_ns, 20 * kMs);
  ASSERT_EQ(p.stages.size(), 3u);
  EXPECT_EQ(p.stages[0].name, "Iterator::Prefetch");
  EXPECT_EQ(p.stages[0].count, 2);
  EXPECT_EQ(p.stages[0].self_ns, 4 * kMs + 100 * kUs);
  EXPECT_TRUE(p.stages[0].consumer);
  EXPECT_EQ(p.stages[1].name, "Iterator::Prefetch::Map");
  EXPECT_EQ(p.stages[1].self_ns, 3 * kMs);
  EXPECT_FALSE(p.stages[1].consumer);
  // The consumer only waits on Prefetch's buffer: the producer that did not keep up is the
  // bottleneck.
  EXPECT_EQ(p.bottleneck, "Iterator::Prefetch::Map");
  EXPECT_TRUE(p.stages[1].critical_path);
  EXPECT_FALSE(p.stages[2].critical_path);
}

TEST(InputPipelineTest, TheGuidesHostInputCategories) {
  EXPECT_EQ(InputCategoryOf("Iterator::Prefetch::ParallelMap::TFRecord"),
            InputCategory::kAdvancedRead);
  EXPECT_EQ(InputCategoryOf("Iterator::Interleave::TextLine"), InputCategory::kAdvancedRead);
  EXPECT_EQ(InputCategoryOf("Iterator::Map::TFRecord"), InputCategory::kDemandedRead);
  EXPECT_EQ(InputCategoryOf("Iterator::FixedLengthRecord"), InputCategory::kDemandedRead);
  EXPECT_EQ(InputCategoryOf("Iterator::Prefetch::Map"), InputCategory::kPreprocessing);
  EXPECT_EQ(InputCategoryOf("Iterator::Batch"), InputCategory::kPreprocessing);
  EXPECT_EQ(InputCategoryOf("InfeedEnqueueTuple"), InputCategory::kEnqueue);
  EXPECT_EQ(InputCategoryOf("IteratorGetNext"), InputCategory::kWait);
  EXPECT_EQ(InputCategoryOf("enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__"),
            InputCategory::kWait);
  EXPECT_EQ(InputCategoryOf("DataLoader next"), InputCategory::kWait);
  EXPECT_EQ(InputCategoryName(InputCategory::kDemandedRead), "demanded_read");

  // Self time per category on a tf.data producer thread: the reader nested in a map; plus a
  // host-to-device copy as enqueue; the consumer's IteratorGetNext waits.
  TraceBuilder b;
  b.Step(1, 0, 10 * kMs);
  b.Host(1, "IteratorGetNext", 0, 4 * kMs, HostEventRole::kAnnotation, OpKind::kHostInputWait);
  b.Host(2, "Iterator::Map", 0, 3 * kMs, HostEventRole::kAnnotation, OpKind::kHostInputWait);
  b.Host(2, "Iterator::Map::TFRecord", kMs, kMs, HostEventRole::kAnnotation,
         OpKind::kHostInputWait);
  b.Device(0, "Memcpy HtoD", 4 * kMs, kMs / 2, OpKind::kMemcpyH2D, /*kernel=*/false);
  const HostInputPipeline p = ComputeInputPipeline(b.tool(), b.Summary());
  const auto ms = [&](InputCategory c) { return p.category_ns[static_cast<size_t>(c)]; };
  EXPECT_EQ(ms(InputCategory::kWait), 4 * kMs);
  EXPECT_EQ(ms(InputCategory::kPreprocessing), 2 * kMs);  // Map minus its nested reader
  EXPECT_EQ(ms(InputCategory::kDemandedRead), kMs);
  EXPECT_EQ(ms(InputCategory::kAdvancedRead), 0);
  EXPECT_EQ(ms(InputCategory::kEnqueue), kMs / 2);
  EXPECT_EQ(p.h2d_copy_ns, kMs / 2);
  ASSERT_EQ(p.stages.size(), 3u);
  EXPECT_EQ(p.stages[0].name, "IteratorGetNext");
  EXPECT_EQ(p.stages[0].category, InputCategory::kWait);
  EXPECT_DOUBLE_EQ(p.stages[0].self_pct, 100.0 * 4 / 7);
  EXPECT_EQ(p.stages[2].name, "Iterator::Map::TFRecord");
  EXPECT_DOUBLE_EQ(p.stages[2].self_pct, 100.0 / 7);
}

// tf.data: the loop calls Iterator::Root three times (30, 200 and 40 us); in the slow call the
// Map [100, 280) us waits on the TFRecord reader [110, 260) us (150 us, more than Map's own 30)
// and Batch [285, 295) us; the reader is the bottleneck of the critical path Root > Map > TFRecord.
TEST(InputPipelineTest, TfDataGraphSlowestExecutionCriticalPathAndSlowCalls) {
  TraceBuilder b;
  const auto it = [&](int64_t thread, absl::string_view name, int64_t at_us, int64_t dur_us) {
    b.Host(thread, name, at_us * kUs, dur_us * kUs, HostEventRole::kAnnotation,
           OpKind::kHostInputWait);
  };
  it(1, "Iterator::Root", 0, 30);
  it(1, "Iterator::Root", 100, 200);
  it(1, "Iterator::Root::Map", 100, 180);
  it(1, "Iterator::Root::Map::TFRecord", 110, 150);
  it(1, "Iterator::Root::Batch", 285, 10);
  it(1, "Iterator::Root", 400, 40);
  const TfDataAnalysis a = ComputeTfDataAnalysis(b.tool());
  EXPECT_EQ(a.calls, 3);
  EXPECT_EQ(a.slow_calls, 1);  // only the 200 us call is over 50 us
  EXPECT_EQ(a.slowest_root, "Iterator::Root");
  EXPECT_EQ(a.slowest_start_ns, 100 * kUs);
  EXPECT_EQ(a.slowest_ns, 200 * kUs);
  EXPECT_THAT(a.critical_path, ElementsAre("Iterator::Root", "Iterator::Root::Map",
                                           "Iterator::Root::Map::TFRecord"));
  EXPECT_EQ(a.bottleneck, "Iterator::Root::Map::TFRecord");
  ASSERT_EQ(a.graph.size(), 4u);
  EXPECT_EQ(a.graph[0].name, "Iterator::Root");
  EXPECT_EQ(a.graph[0].depth, 1);
  EXPECT_EQ(a.graph[0].self_ns, (30 + 10 + 40) * kUs);  // 200 - 180 - 10 in the slow call
  EXPECT_EQ(a.graph[0].slowest_self_ns, 10 * kUs);
  EXPECT_EQ(a.graph[1].name, "Iterator::Root::Batch");
  EXPECT_EQ(a.graph[1].parent, "Iterator::Root");
  EXPECT_FALSE(a.graph[1].critical_path);
  EXPECT_EQ(a.graph[2].name, "Iterator::Root::Map");
  EXPECT_EQ(a.graph[2].self_ns, 30 * kUs);
  EXPECT_TRUE(a.graph[2].critical_path);
  EXPECT_EQ(a.graph[3].depth, 3);
  EXPECT_EQ(a.graph[3].slowest_self_ns, 150 * kUs);

  // A long name whose prefix recorded nothing still hangs under it; no iterators: no graph.
  TraceBuilder c;
  c.Host(2, "Iterator::Prefetch::Map", 0, kUs, HostEventRole::kAnnotation, OpKind::kHostInputWait);
  const TfDataAnalysis only = ComputeTfDataAnalysis(c.tool());
  ASSERT_EQ(only.graph.size(), 2u);
  EXPECT_EQ(only.graph[0].name, "Iterator::Prefetch");
  EXPECT_EQ(only.graph[0].count, 0);
  EXPECT_EQ(only.calls, 0);
  EXPECT_TRUE(ComputeTfDataAnalysis(TraceBuilder().tool()).graph.empty());
}

TEST(InputPipelineTest, SynchronousConsumerStageIsTheBottleneck) {
  TraceBuilder b;
  b.Window(0, 10 * kMs);
  b.Step(1, 0, 10 * kMs);
  b.Host(1, "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", 0, 6 * kMs,
         HostEventRole::kAnnotation, OpKind::kHostInputWait);
  b.Host(2, "DataLoader worker", 0, 8 * kMs, HostEventRole::kAnnotation, OpKind::kHostInputWait);
  const HostInputPipeline p = ComputeInputPipeline(b.tool(), b.Summary());
  EXPECT_EQ(p.bottleneck, "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__");
}

// --- synthetic: overview ------------------------------------------------------------------------

// Step 1 (10 ms): compile 1 ms [0,1), launch 0.5 ms [1,1.5), host compute 0.5 ms [1.5,2), an
// input wait 1 ms [2,3), 16-bit compute 3 ms [3,6), 32-bit compute 2 ms [6,8) overlapping a
// collective [7,9) (1 ms of it alone), output [9,9.5), idle 0.5 ms. A sync [9.5,10) masks host
// work under it.
TEST(OverviewTest, CategoriesPrecisionAndTheBreakdownAgree) {
  TraceBuilder b;
  b.Window(0, 10 * kMs);
  b.Step(1, 0, 10 * kMs);
  HostEvent& compile = b.Host(1, "XlaCompile", 0, kMs, HostEventRole::kAnnotation);
  compile.compile = true;
  b.Host(1, "cudaLaunchKernel", kMs, 500 * kUs, HostEventRole::kRuntime, OpKind::kHostLaunch);
  b.Host(1, "python_work", 1500 * kUs, 500 * kUs, HostEventRole::kAnnotation);
  b.Host(1, "GetNextBatch", 2 * kMs, kMs, HostEventRole::kAnnotation, OpKind::kHostInputWait);
  b.Device(0, "ampere_fp16_s16816gemm_fp16", 3 * kMs, 3 * kMs);
  b.Device(1, "volta_sgemm_128x64", 6 * kMs, 2 * kMs);
  b.Device(0, "ncclDevKernel_AllReduce", 7 * kMs, 2 * kMs, OpKind::kCollective);
  b.Device(0, "MemcpyDtoH", 9 * kMs, 500 * kUs, OpKind::kMemcpyD2H, false);
  b.Host(1, "aten::item", 9500 * kUs, 500 * kUs, HostEventRole::kFrameworkOp);
  b.Host(1, "cudaStreamSynchronize", 9500 * kUs, 500 * kUs, HostEventRole::kRuntime,
         OpKind::kHostSync);
  const HostSummary summary = b.Summary();
  const HostOverview o = ComputeOverview(b.tool(), summary);
  ASSERT_EQ(o.steps.size(), 1u);
  const OverviewTimes& t = o.steps[0].times;
  EXPECT_EQ(t[OverviewCategory::kCompilation], kMs);
  EXPECT_EQ(t[OverviewCategory::kKernelLaunch], 500 * kUs);
  EXPECT_EQ(t[OverviewCategory::kHostCompute], 500 * kUs);
  EXPECT_EQ(t[OverviewCategory::kInput], kMs);
  EXPECT_EQ(t[OverviewCategory::kDeviceCompute], 5 * kMs);
  EXPECT_EQ(t.compute_16bit_ns, 3 * kMs);
  EXPECT_EQ(t.compute_32bit_ns, 2 * kMs);
  EXPECT_EQ(t[OverviewCategory::kCollectives], kMs);
  EXPECT_EQ(t[OverviewCategory::kOutput], 500 * kUs);
  EXPECT_EQ(t[OverviewCategory::kOther], 500 * kUs);
  ExpectOverviewMatchesBreakdown(o, summary);

  // The pod: recommendations name the numbers.
  std::vector<HostTools> hosts(1);
  hosts[0].host = "h0";
  hosts[0].overview = o;
  hosts[0].overview.kernels = 3;
  hosts[0].overview.kernel_ns = 7 * kMs;
  hosts[0].overview.tensor_core_eligible_ns = 5 * kMs;
  hosts[0].overview.tensor_core_used_ns = 3 * kMs;
  PodBreakdown breakdown = BuildPodBreakdown({summary});
  const PodTools pod = BuildPodTools(Tool::kOverview, std::move(hosts), breakdown);
  EXPECT_EQ(pod.overview_step_ns, 10 * kMs);
  std::map<std::string, std::string> why;
  for (const Recommendation& r : pod.recommendations) why[r.kind] = r.reason;
  EXPECT_THAT(why["input"], HasSubstr("input 10.0 % of the pod's step time"));
  EXPECT_THAT(why["compilation"], HasSubstr("compilation 10.0 %"));
  EXPECT_EQ(why.count("tensor_cores"), 0u);  // 3 of 5 ms eligible use them: not low
  EXPECT_EQ(why.count("collectives"), 0u);   // 10 % < 20 %
}

TEST(OverviewTest, ThePodAverageLeavesOutTheBreakdownsWarmupSteps) {
  std::vector<HostTools> hosts(1);
  HostOverview& o = hosts[0].overview;
  for (int k = 0; k < 8; ++k) {
    OverviewStep s;
    s.step = k;
    s.step_time_ns = (k == 0 ? 40 : 10) * kMs;
    s.times[OverviewCategory::kDeviceCompute] = (k == 0 ? 35 : 6) * kMs;
    s.times[OverviewCategory::kOther] = s.step_time_ns - s.times[OverviewCategory::kDeviceCompute];
    for (size_t c = 0; c < s.times.ns.size(); ++c) o.total.ns[c] += s.times.ns[c];
    o.step_ns += s.step_time_ns;
    o.steps.push_back(s);
  }
  PodBreakdown breakdown;
  breakdown.verdict.evidence.steps = 8;
  breakdown.verdict.evidence.warmup_steps = {0};
  const PodTools pod = BuildPodTools(Tool::kOverview, hosts, breakdown);
  EXPECT_EQ(pod.overview_steps, 7);
  EXPECT_EQ(pod.overview_step_ns, 70 * kMs);
  EXPECT_EQ(pod.overview_total[OverviewCategory::kDeviceCompute], 42 * kMs);
  EXPECT_EQ(pod.overview_step_time.max_ns, 10 * kMs);
  EXPECT_THAT(pod.overview_warmup_steps, ElementsAre(0));
  // Without warm-up steps, every step counts.
  const PodTools all = BuildPodTools(Tool::kOverview, std::move(hosts), PodBreakdown());
  EXPECT_EQ(all.overview_steps, 8);
  EXPECT_EQ(all.overview_step_ns, 110 * kMs);
}

TEST(OverviewTest, LaunchBoundAndLowTensorCoreRecommendations) {
  std::vector<HostTools> hosts(1);
  HostOverview& o = hosts[0].overview;
  o.steps.resize(1);
  o.step_ns = 10 * kMs;
  o.total[OverviewCategory::kKernelLaunch] = 3 * kMs;
  o.total[OverviewCategory::kDeviceCompute] = 2 * kMs;
  o.total.compute_32bit_ns = 2 * kMs;
  o.kernels = 1000;
  o.kernel_ns = 2 * kMs;  // 2 us per kernel
  o.compute_kernels = 1000;
  o.compute_kernel_ns = 2 * kMs;
  o.tensor_core_eligible_ns = kMs;
  o.tensor_core_used_ns = 0;
  const PodTools pod = BuildPodTools(Tool::kOverview, std::move(hosts), PodBreakdown());
  std::map<std::string, std::string> why;
  for (const Recommendation& r : pod.recommendations) why[r.kind] = r.reason;
  EXPECT_THAT(why["launch"], HasSubstr("kernel launch 30.0 % of the hosts' step time; 1000 "
                                       "compute kernels averaging 2.0 us (collectives left out)"));
  EXPECT_THAT(why["tensor_cores"], HasSubstr("Tensor Cores run 0.0 %"));
  EXPECT_EQ(why.count("input"), 0u);
}

// A pod of `n` hosts for the overview's advice: each step 100 ms, with `collectives` ms of it in
// collectives on the overview; the breakdown's steps give host 0 `least_ms` of collectives and
// the others `collectives` (they wait for host 0 when least_ms is smaller).
struct AdvicePod {
  std::vector<HostTools> hosts;
  PodBreakdown breakdown;
};
AdvicePod MakeAdvicePod(int n, int64_t collectives_ms, int64_t least_ms) {
  AdvicePod p;
  p.hosts.resize(static_cast<size_t>(n));
  for (int h = 0; h < n; ++h) {
    HostOverview& o = p.hosts[static_cast<size_t>(h)].overview;
    o.steps.resize(1);
    o.step_ns = 100 * kMs;
    const int64_t coll = (h == 0 ? least_ms : collectives_ms) * kMs;
    o.total[OverviewCategory::kCollectives] = coll;
    o.total[OverviewCategory::kDeviceCompute] = 100 * kMs - coll;
  }
  PodStep step;
  for (int h = 0; h < n; ++h) {
    PodHostStep hs;
    hs.host = absl::StrCat("w", h);
    hs.step_time_ns = 100 * kMs;
    hs.categories[Category::kCollectives] = (h == 0 ? least_ms : collectives_ms) * kMs;
    hs.categories[Category::kCompute] = 100 * kMs - hs.categories[Category::kCollectives];
    step.hosts.push_back(hs);
  }
  p.breakdown.steps.push_back(step);
  return p;
}

std::map<std::string, std::string> Advice(AdvicePod p) {
  const PodTools pod = BuildPodTools(Tool::kOverview, std::move(p.hosts), p.breakdown);
  std::map<std::string, std::string> why;
  for (const Recommendation& r : pod.recommendations) why[r.kind] = r.advice + " | " + r.reason;
  return why;
}

TEST(OverviewAdviceTest, CollectiveBoundOnlyFromCommunicationNotFromWaiting) {
  // Every host communicates 25 ms: collective-bound.
  std::map<std::string, std::string> why = Advice(MakeAdvicePod(4, 25, 25));
  EXPECT_THAT(why["collectives"], HasSubstr("communicating in collectives 25.0 % of step time"));
  // 30 ms in collectives on three hosts, but host 0 needed only 10: the rest is waiting for it.
  why = Advice(MakeAdvicePod(4, 30, 10));
  EXPECT_EQ(why.count("collectives"), 0u) << why["collectives"];
  // Without a breakdown, the overview's share is all there is.
  AdvicePod no_steps = MakeAdvicePod(2, 30, 30);
  no_steps.breakdown.steps.clear();
  EXPECT_THAT(Advice(std::move(no_steps))["collectives"], HasSubstr("collectives 30.0 %"));
}

TEST(OverviewAdviceTest, LaunchBoundFromComputeKernelsOnly) {
  AdvicePod p = MakeAdvicePod(1, 0, 0);
  HostOverview& o = p.hosts[0].overview;
  o.total[OverviewCategory::kDeviceCompute] = 30 * kMs;
  o.total[OverviewCategory::kKernelLaunch] = 5 * kMs;  // 5 %: not launch-bound by share alone
  // 1,000 compute kernels of 7.8 us, and 20 all-reduce kernels of 1 ms: 10.1 us on average
  // with them, which would hide the many tiny kernels.
  o.compute_kernels = 1000;
  o.compute_kernel_ns = 7800 * kUs;
  o.kernels = 1020;
  o.kernel_ns = 27800 * kUs;
  EXPECT_THAT(Advice(p)["launch"], HasSubstr("1000 compute kernels averaging 7.8 us"));
  o.compute_kernel_ns = 50 * kMs;  // 50 us each: not tiny
  EXPECT_EQ(Advice(p).count("launch"), 0u);
}

TEST(OverviewAdviceTest, StragglerAdviceNamesTheCauseAndAStepThatShowsIt) {
  AdvicePod p = MakeAdvicePod(2, 10, 10);
  analysis::ConsistentlySlowVerdict& slow = p.breakdown.verdict.consistently_slow;
  slow.finding = analysis::Finding::kFound;
  slow.hosts.push_back({.host = "w1", .cause = Category::kHost});
  for (int k = 0; k < 3; ++k) {
    PodStep s = p.breakdown.steps[0];
    s.step = k;
    s.straggler = "w1";
    s.cause = k == 0 ? Category::kCompute : Category::kHost;
    s.why = absl::StrCat("why of step ", k);
    p.breakdown.steps.push_back(s);
  }
  const std::string why = Advice(p)["stragglers"];
  EXPECT_THAT(why, HasSubstr("stragglers: w1 holds the pod back, mostly in host; look at its "
                             "host code"));
  EXPECT_THAT(why, HasSubstr("step 1: why of step 1"));  // the first step with that cause
  slow.finding = analysis::Finding::kNone;
  slow.hosts.clear();
  EXPECT_EQ(Advice(p).count("stragglers"), 0u);
}

TEST(PodToolsTest, KernelAndOpStatsMergeAcrossHosts) {
  KernelMix a;
  KernelMix b;
  std::vector<HostTools> hosts;
  hosts.push_back(ComputeHostTools(Tool::kKernelStats, a.b.tool(), a.b.Summary()));
  hosts.push_back(ComputeHostTools(Tool::kKernelStats, b.b.tool(), b.b.Summary()));
  const PodTools pod = BuildPodTools(Tool::kKernelStats, std::move(hosts), PodBreakdown());
  ASSERT_EQ(pod.kernels.size(), 2u);
  EXPECT_EQ(pod.kernels[0].occurrences, 6);
  EXPECT_EQ(pod.kernels[0].total_ns, 2 * 600 * kUs);
  EXPECT_EQ(pod.kernels[0].min_ns, 100 * kUs);

  std::vector<HostTools> op_hosts;
  op_hosts.push_back(ComputeHostTools(Tool::kOpStats, a.b.tool(), a.b.Summary()));
  op_hosts.push_back(ComputeHostTools(Tool::kOpStats, b.b.tool(), b.b.Summary()));
  const PodTools ops = BuildPodTools(Tool::kOpStats, std::move(op_hosts), PodBreakdown());
  EXPECT_EQ(FindOp(ops.ops.by_op, "aten::add")->occurrences, 4);
}

// --- XSpace fixture (TensorFlow-style, built here) -----------------------------------------------

// A TF GPU host: step root `train` (_r=1, step_num 3) over [0, 10) ms; a TF op
// `model/dense/MatMul:MatMul` [1, 2) ms whose cudaLaunchKernel (correlation 9) launches a 16-bit
// GEMM of 4 ms with kernel_details (ref) on stream 7, which also names tf_op; `Iterator::Prefetch`
// [0, 1) ms; MemoryAllocation/Deallocation with XProf's stats; an XLA Ops line that must not be
// counted as activity; device capability stats.
tensorflow::profiler::XSpace TfStyleSpace() {
  using xspace::XPlaneBuilder;
  tensorflow::profiler::XSpace space;
  space.add_hostnames("tf-worker-0");
  XPlaneBuilder host(space.add_planes(), 1, xspace::kHostPlaneName, kP);
  xspace::XLine* thread = host.AddLine(100, "python", kP);
  auto* root = host.AddEvent(thread, host.EventMetadataId("train"), kP, 10 * kMs);
  host.AddStat(root, host.StatMetadataId("_r"), int64_t{1});
  host.AddStat(root, host.StatMetadataId("step_num"), int64_t{3});
  host.AddEvent(thread, host.EventMetadataId("Iterator::Prefetch"), kP, kMs);
  host.AddEvent(thread, host.EventMetadataId("model/dense/MatMul:MatMul"), kP + kMs, kMs);
  auto* launch = host.AddEvent(thread, host.EventMetadataId("cudaLaunchKernel"),
                               kP + kMs + 100 * kUs, 10 * kUs);
  host.AddStat(launch, host.StatMetadataId("correlation_id"), uint64_t{9});
  for (int i = 0; i < 2; ++i) {
    auto* m = host.AddEvent(
        thread, host.EventMetadataId(i == 0 ? "MemoryAllocation" : "MemoryDeallocation"),
        kP + (i == 0 ? 2 : 8) * kMs, 0);
    host.AddStat(m, host.StatMetadataId("allocator_name"), "GPU_0_bfc");
    host.AddStat(m, host.StatMetadataId("device_ordinal"), int64_t{0});
    host.AddStat(m, host.StatMetadataId("allocation_bytes"), int64_t{64 << 20});
    host.AddStat(m, host.StatMetadataId("addr"), int64_t{0x7f00});
    host.AddStat(m, host.StatMetadataId("bytes_allocated"), int64_t{i == 0 ? 96 << 20 : 32 << 20});
    host.AddStat(m, host.StatMetadataId("bytes_reserved"), int64_t{128 << 20});
    host.AddStat(m, host.StatMetadataId("tf_op"), "model/dense/MatMul:MatMul");
  }
  XPlaneBuilder gpu(space.add_planes(), 0, "/device:GPU:0", kP);
  gpu.plane()->add_stats()->set_metadata_id(gpu.StatMetadataId("gpu_device_name"));
  gpu.plane()->mutable_stats()->rbegin()->set_str_value("NVIDIA A100-SXM4-80GB");
  gpu.AddPlaneStat(gpu.StatMetadataId("compute_cap_major"), int64_t{8});
  xspace::XLine* stream = gpu.AddLine(7, "Stream #7(Compute)", kP);
  auto* k = gpu.AddEvent(stream, gpu.EventMetadataId("ampere_fp16_s16816gemm_fp16_128x128"),
                         kP + 2 * kMs, 4 * kMs);
  gpu.AddStat(k, gpu.StatMetadataId("correlation_id"), uint64_t{9});
  auto* details = k->add_stats();
  details->set_metadata_id(gpu.StatMetadataId("kernel_details"));
  details->set_ref_value(static_cast<uint64_t>(gpu.StatMetadataId(
      "regs:96 static_shared:0 dynamic_shared:73728 grid:108,1,1 block:256,1,1 occ_pct:12.5")));
  gpu.AddStat(k, gpu.StatMetadataId("tf_op"), "model/dense/MatMul:MatMul");
  xspace::XLine* ops = gpu.AddLine(1, "XLA Ops", kP);
  gpu.AddEvent(ops, gpu.EventMetadataId("fusion.1"), kP + 2 * kMs, 4 * kMs);
  xspace::SetProfileWindow(&space, kP, kP + 10 * kMs);
  return space;
}

// profctl's CUPTI path names device work with no framework op after its NVTX range
// ("nvtx/forward_backward:ForwardBackward"), for XProf. profctl's tools know it is not a
// TensorFlow op: the framework is not called TensorFlow and the kernel's op is its launch's.
TEST(XSpaceToolsTest, CuptiDerivedOpsAreNotFrameworkOps) {
  tensorflow::profiler::XSpace space = TfStyleSpace();
  for (auto& plane : *space.mutable_planes()) {
    for (auto& [id, meta] : *plane.mutable_event_metadata()) {
      if (meta.name() == "model/dense/MatMul:MatMul") meta.set_name("forward_backward");
    }
    for (auto& [id, meta] : *plane.mutable_stat_metadata()) {
      if (meta.name() == "model/dense/MatMul:MatMul") {
        meta.set_name("nvtx/forward_backward:ForwardBackward");
      }
    }
    for (auto& line : *plane.mutable_lines()) {
      for (auto& e : *line.mutable_events()) {
        for (auto& st : *e.mutable_stats()) {
          if (st.str_value() == "model/dense/MatMul:MatMul") {
            st.set_str_value("nvtx/forward_backward:ForwardBackward");
          }
        }
      }
    }
  }
  absl::StatusOr<ToolTrace> t = ReadXSpaceTools(space, "w0", /*offset_ns=*/0);
  ASSERT_THAT(t, IsOk());
  EXPECT_NE(t->environment.framework, "TensorFlow");
  const std::vector<KernelStat> kernels = ComputeKernelStats(*t);
  ASSERT_EQ(kernels.size(), 1u);
  EXPECT_EQ(kernels[0].op, "forward_backward");  // the launch's enclosing host op
}

// profctl's capture of a real PyTorch loop on an H100 (docs/gpu-verification.md): its kernel
// stats as the GPU run saw them. Top kernel: cuBLAS's CUTLASS GEMM, launched with the driver's
// cuLaunchKernel (tied to its launch since 7d11166), 4 a step, under the NVTX range that
// launched it; not a TensorFlow trace.
TEST(XSpaceToolsTest, RealH100ProfctlCaptureKernelStats) {
  absl::StatusOr<std::string> bytes = ReadFile(DataPath("h100_pytorch_steps.xplane.pb"));
  ASSERT_THAT(bytes, IsOk());
  tensorflow::profiler::XSpace space;
  ASSERT_TRUE(space.ParseFromString(*bytes));
  absl::StatusOr<ToolTrace> t = ReadXSpaceTools(space, "gpu-host", /*offset_ns=*/0);
  ASSERT_THAT(t, IsOk());
  EXPECT_NE(t->environment.framework, "TensorFlow");
  const std::vector<KernelStat> kernels = ComputeKernelStats(*t);
  ASSERT_GE(kernels.size(), 3u);
  EXPECT_THAT(kernels[0].kernel, HasSubstr("cutlass::Kernel2<cutlass_80_simt_sgemm_128x64_8x5_tn"));
  EXPECT_EQ(kernels[0].occurrences, 740);  // 4 a step, 185 steps
  EXPECT_EQ(kernels[0].op, "forward_backward");
  EXPECT_EQ(kernels[0].registers_per_thread, 120);
  // The backward pass's kernels, launched from PyTorch's autograd thread outside any range of
  // its own, are named by the op running on another thread when they were launched (the main
  // thread's NVTX range): only the launches before the first range (the capture began in the
  // middle of a step) name no op.
  int64_t named = 0;
  int64_t unnamed = 0;
  for (const KernelStat& k : kernels) (k.op.empty() ? unnamed : named) += k.occurrences;
  EXPECT_GT(named, 0);
  EXPECT_LT(unnamed * 100, named) << unnamed << " of " << named + unnamed << " launches";
  const auto backward = std::find_if(kernels.begin(), kernels.end(), [](const KernelStat& k) {
    return absl::StrContains(k.kernel, "GeluBackward") && !k.op.empty();
  });
  ASSERT_NE(backward, kernels.end());
  EXPECT_EQ(backward->op, "forward_backward");
}

// XProf's memory profile stats on TensorFlow's MemoryAllocation/MemoryDeallocation events: a
// float (8,8) output of 256 bytes (200 requested) by foo/bar, a half (16,32) temp of 1024 (1000)
// by foo/baz freed after the peak, then 512 more by foo/bar. Allocator view at the peak: stack
// 2000, heap 4024, free 3976; peak_bytes_in_use up to 9000; fragmentation 0.25, 0.5, 0.1, 0.2.
tensorflow::profiler::XSpace TfMemoryProfileSpace() {
  using xspace::XPlaneBuilder;
  tensorflow::profiler::XSpace space;
  XPlaneBuilder host(space.add_planes(), 1, xspace::kHostPlaneName, kP);
  xspace::XLine* thread = host.AddLine(100, "tf_executor", kP);
  struct Ev {
    bool alloc;
    int64_t at_ms, addr, bytes, requested, heap, available, peak;
    double frag;
    const char* op;
    const char* region;
    int64_t data_type;
    const char* shape;
  };
  const Ev events[] = {
      {true, 1, 0x100, 256, 200, 3000, 5000, 8500, 0.25, "foo/bar", "output", 1, "(8,8)"},
      {true, 2, 0x200, 1024, 1000, 4024, 3976, 9000, 0.5, "foo/baz", "temp", 19, "(16,32)"},
      {false, 3, 0x200, 1024, 1000, 3000, 5000, 9000, 0.1, "foo/baz", "temp", 19, "(16,32)"},
      {true, 4, 0x300, 512, 512, 3512, 4488, 9000, 0.2, "foo/bar", "output", 1, "(128)"},
  };
  for (const Ev& v : events) {
    auto* e = host.AddEvent(
        thread, host.EventMetadataId(v.alloc ? "MemoryAllocation" : "MemoryDeallocation"),
        kP + v.at_ms * kMs, 0);
    host.AddStat(e, host.StatMetadataId("allocator_name"), "GPU_0_bfc");
    host.AddStat(e, host.StatMetadataId("device_ordinal"), int64_t{0});
    host.AddStat(e, host.StatMetadataId("addr"), v.addr);
    host.AddStat(e, host.StatMetadataId("allocation_bytes"), v.bytes);
    host.AddStat(e, host.StatMetadataId("requested_bytes"), v.requested);
    host.AddStat(e, host.StatMetadataId("bytes_allocated"), v.heap);
    host.AddStat(e, host.StatMetadataId("bytes_reserved"), int64_t{2000});
    host.AddStat(e, host.StatMetadataId("bytes_available"), v.available);
    host.AddStat(e, host.StatMetadataId("peak_bytes_in_use"), v.peak);
    host.AddStat(e, host.StatMetadataId("step_id"), int64_t{7});
    host.AddStat(e, host.StatMetadataId("tf_op"), v.op);
    host.AddStat(e, host.StatMetadataId("region_type"), v.region);
    host.AddStat(e, host.StatMetadataId("data_type"), v.data_type);
    host.AddStat(e, host.StatMetadataId("shape"), v.shape);
    auto* frag = e->add_stats();
    frag->set_metadata_id(host.StatMetadataId("fragmentation"));
    frag->set_double_value(v.frag);
  }
  xspace::SetProfileWindow(&space, kP, kP + 10 * kMs);
  return space;
}

TEST(XSpaceToolsTest, MemoryProfileStatsGiveCapacityStackHeapFreeFragmentationAndDetails) {
  absl::StatusOr<ToolTrace> t = ReadXSpaceTools(TfMemoryProfileSpace(), "w0", /*offset_ns=*/0);
  ASSERT_THAT(t, IsOk());
  const std::vector<DeviceMemory> mem = ComputeMemory(*t);
  ASSERT_EQ(mem.size(), 1u);
  const DeviceMemory& m = mem[0];
  EXPECT_EQ(m.device, 0);
  EXPECT_EQ(m.peak_bytes, 4024);
  EXPECT_EQ(m.peak_time_ns, kP + 2 * kMs);
  EXPECT_EQ(m.stack_at_peak, 2000);
  EXPECT_EQ(m.heap_at_peak, 4024);
  EXPECT_EQ(m.free_at_peak, 3976);
  EXPECT_EQ(m.capacity_bytes, 10000);
  EXPECT_TRUE(m.capacity_from_allocator);
  EXPECT_EQ(m.peak_heap_since_start_bytes, 9000);
  EXPECT_DOUBLE_EQ(m.fragmentation_at_peak, 0.5);
  ASSERT_EQ(m.fragmentation.size(), 4u);
  EXPECT_EQ(m.fragmentation[2].time_ns, kP + 3 * kMs);
  EXPECT_DOUBLE_EQ(m.fragmentation[2].fragmentation, 0.1);
  // Live at the peak, with XProf's per-event details.
  ASSERT_EQ(m.largest_live_at_peak.size(), 2u);
  const LiveAllocation& big = m.largest_live_at_peak[0];
  EXPECT_EQ(big.bytes, 1024);
  EXPECT_EQ(big.requested_bytes, 1000);
  EXPECT_EQ(big.op, "foo/baz");
  EXPECT_EQ(big.step, 7);
  EXPECT_EQ(big.region_type, "temp");
  EXPECT_EQ(big.data_type, "half");
  EXPECT_EQ(big.shape, "(16,32)");
  EXPECT_EQ(m.largest_live_at_peak[1].data_type, "float");
  // The breakdown at the peak by op.
  ASSERT_EQ(m.by_op_at_peak.size(), 2u);
  EXPECT_EQ(m.by_op_at_peak[0].op, "foo/baz");
  EXPECT_EQ(m.by_op_at_peak[0].bytes, 1024);
  EXPECT_EQ(m.by_op_at_peak[0].requested_bytes, 1000);
  EXPECT_EQ(m.by_op_at_peak[1].op, "foo/bar");
  EXPECT_EQ(m.by_op_at_peak[1].allocations, 1);  // the second foo/bar came after the peak
  EXPECT_EQ(m.by_op_at_peak[1].region_type, "output");
  EXPECT_TRUE(m.missing.empty()) << m.missing.front();
}

// A PyTorch trace has no allocator view: capacity from deviceProperties, and the rest named as
// missing rather than shown empty.
TEST(KinetoToolsTest, MemoryNamesWhatThePyTorchTraceDoesNotRecord) {
  TraceBuilder b;
  b.tool().environment.devices.push_back(DeviceInfo{0, "NVIDIA H100", 9, 0, 80LL << 30, "", 0});
  b.Memory(0, 10, 1 << 20, 0xa, "aten::empty");
  b.Memory(0, 20, 2 << 20, 0xb, "aten::mm");
  b.Memory(0, 30, -(1 << 20), 0xa);
  const std::vector<DeviceMemory> mem = ComputeMemory(b.tool());
  ASSERT_EQ(mem.size(), 1u);
  EXPECT_EQ(mem[0].capacity_bytes, 80LL << 30);
  EXPECT_FALSE(mem[0].capacity_from_allocator);
  EXPECT_EQ(mem[0].heap_at_peak, -1);
  EXPECT_EQ(mem[0].peak_heap_since_start_bytes, -1);
  EXPECT_TRUE(mem[0].fragmentation.empty());
  ASSERT_EQ(mem[0].by_op_at_peak.size(), 2u);
  EXPECT_EQ(mem[0].by_op_at_peak[0].op, "aten::mm");
  EXPECT_EQ(mem[0].by_op_at_peak[0].requested_bytes, -1);
  ASSERT_EQ(mem[0].missing.size(), 4u);
  EXPECT_THAT(mem[0].missing[0], HasSubstr("stack/heap/free at the peak"));
  EXPECT_THAT(mem[0].missing[1], HasSubstr("peak heap since the program started"));
  EXPECT_THAT(mem[0].missing[2], HasSubstr("fragmentation over time"));
  EXPECT_THAT(mem[0].missing[3], HasSubstr("per-event details"));
}

// A TPU v4 (275 TFLOP/s) running a convolution of 1.375 GFLOP in 10 us (137.5 TFLOP/s: 50 %)
// and an add of 0 FLOP in 10 us; XLA Ops spans carry hlo_category and flops and, as TensorFlow's
// and JAX's traces do, with `with_tf_op` the framework op each belongs to (`tf_op`).
tensorflow::profiler::XSpace TpuSpace(bool with_tf_op) {
  using xspace::XPlaneBuilder;
  tensorflow::profiler::XSpace space;
  XPlaneBuilder tpu(space.add_planes(), 0, "/device:TPU:0", kP);
  auto* type = tpu.plane()->add_stats();
  type->set_metadata_id(tpu.StatMetadataId("device_type_string"));
  type->set_str_value("TPU v4");
  auto* peak = tpu.plane()->add_stats();
  peak->set_metadata_id(tpu.StatMetadataId("peak_teraflops_per_second"));
  peak->set_double_value(275.0);
  xspace::XLine* ops = tpu.AddLine(1, "XLA Ops", kP);
  auto* conv = tpu.AddEvent(ops, tpu.EventMetadataId("convolution.1"), kP, 10 * kUs);
  tpu.AddStat(conv, tpu.StatMetadataId("hlo_category"), "convolution");
  tpu.AddStat(conv, tpu.StatMetadataId("flops"), int64_t{1'375'000'000});
  auto* add = tpu.AddEvent(ops, tpu.EventMetadataId("add.2"), kP + 10 * kUs, 10 * kUs);
  tpu.AddStat(add, tpu.StatMetadataId("hlo_category"), "elementwise");
  tpu.AddStat(add, tpu.StatMetadataId("flops"), int64_t{0});
  if (with_tf_op) {
    tpu.AddStat(conv, tpu.StatMetadataId("tf_op"), "model/conv2d/Conv2D:Conv2D");
    tpu.AddStat(add, tpu.StatMetadataId("tf_op"), "jit(train_step)/add");
  }
  xspace::SetProfileWindow(&space, kP, kP + 100 * kUs);
  return space;
}

class TpuToolsTest : public testing::TestWithParam<bool> {};

TEST_P(TpuToolsTest, TpuTypeFlopsUtilizationAndOpProfileByHloCategory) {
  absl::StatusOr<ToolTrace> t = ReadXSpaceTools(TpuSpace(/*with_tf_op=*/GetParam()), "tpu-0", 0);
  ASSERT_THAT(t, IsOk());
  ASSERT_EQ(t->environment.devices.size(), 1u);
  EXPECT_EQ(t->environment.devices[0].device_type, "TPU v4");
  EXPECT_DOUBLE_EQ(t->environment.devices[0].peak_tflops, 275.0);
  const OpStats stats = ComputeOpStats(*t);
  EXPECT_DOUBLE_EQ(stats.peak_flops_per_s, 275e12);
  // By the XLA op's category, whether or not the framework op is named: never the TF types.
  EXPECT_EQ(FindOp(stats.by_type, "Conv2D"), nullptr);
  ASSERT_EQ(stats.by_type.size(), 2u);
  const OpStat* c = FindOp(stats.by_type, "convolution");
  const OpStat* e = FindOp(stats.by_type, "elementwise");
  ASSERT_NE(c, nullptr);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(c->flops, 1'375'000'000);
  EXPECT_EQ(c->device_self_ns, 10 * kUs);
  EXPECT_NEAR(FlopsUtilizationPct(*c, stats.peak_flops_per_s), 50.0, 1e-9);
  EXPECT_DOUBLE_EQ(FlopsUtilizationPct(*e, stats.peak_flops_per_s), 0.0);
  ASSERT_NE(FindOp(stats.by_op, "convolution.1"), nullptr);
  EXPECT_NEAR(FlopsUtilizationPct(*FindOp(stats.by_op, "convolution.1"), stats.peak_flops_per_s),
              50.0, 1e-9);
  // Unknown without the stats or the peak.
  OpStat none = *c;
  none.flops = -1;
  EXPECT_EQ(FlopsUtilizationPct(none, stats.peak_flops_per_s), -1);
  EXPECT_EQ(FlopsUtilizationPct(*c, 0), -1);
}

INSTANTIATE_TEST_SUITE_P(WithAndWithoutTfOp, TpuToolsTest, testing::Bool(),
                         [](const testing::TestParamInfo<bool>& p) {
                           return p.param ? "XlaOpsNameTheirFrameworkOp" : "XlaOpsOnly";
                         });

TEST(XSpaceToolsTest, TfStyleTraceFeedsEveryTool) {
  const tensorflow::profiler::XSpace space = TfStyleSpace();
  absl::StatusOr<ToolTrace> t = ReadXSpaceTools(space, "w0", /*offset_ns=*/0);
  ASSERT_THAT(t, IsOk());
  absl::StatusOr<HostTrace> h = ReadXSpaceHost(space, "w0", 0);
  ASSERT_THAT(h, IsOk());
  const HostSummary summary = SummarizeHost(*h);
  EXPECT_EQ(t->window_start_ns, h->window_start_ns);
  EXPECT_EQ(t->window_end_ns, h->window_end_ns);
  EXPECT_EQ(t->environment.framework, "TensorFlow");
  ASSERT_EQ(t->environment.devices.size(), 1u);
  EXPECT_EQ(t->environment.devices[0].name, "NVIDIA A100-SXM4-80GB");
  EXPECT_EQ(t->environment.devices[0].compute_major, 8);
  EXPECT_THAT(t->environment.hostnames, ElementsAre("tf-worker-0"));

  const std::vector<KernelStat> kernels = ComputeKernelStats(*t);
  ASSERT_EQ(kernels.size(), 1u);
  EXPECT_EQ(kernels[0].op, "model/dense/MatMul:MatMul");
  EXPECT_EQ(kernels[0].registers_per_thread, 96);
  EXPECT_EQ(kernels[0].shared_memory_bytes, 73728);
  EXPECT_THAT(kernels[0].grid, ElementsAre(108, 1, 1));
  EXPECT_DOUBLE_EQ(kernels[0].occupancy_pct, 12.5);
  EXPECT_EQ(kernels[0].total_ns, 4 * kMs);
  EXPECT_TRUE(kernels[0].tensor_core_used);

  const OpStats ops = ComputeOpStats(*t);
  const OpStat* matmul = FindOp(ops.by_op, "model/dense/MatMul:MatMul");
  ASSERT_NE(matmul, nullptr);
  EXPECT_TRUE(matmul->host);
  EXPECT_EQ(matmul->type, "MatMul");
  EXPECT_EQ(matmul->host_total_ns, kMs);
  EXPECT_EQ(matmul->host_self_ns, kMs - 10 * kUs);
  EXPECT_EQ(matmul->device_self_ns, 4 * kMs);         // named by tf_op on the kernel
  EXPECT_EQ(FindOp(ops.by_op, "fusion.1"), nullptr);  // kernels name ops: spans not used

  const std::vector<DeviceMemory> mem = ComputeMemory(*t);
  ASSERT_EQ(mem.size(), 1u);
  EXPECT_EQ(mem[0].device, 0);
  // 32 MiB were in use before (reported 96 after allocating 64).
  EXPECT_EQ(mem[0].baseline_bytes, 32 << 20);
  EXPECT_EQ(mem[0].peak_bytes, 96 << 20);
  EXPECT_EQ(mem[0].peak_time_ns, kP + 2 * kMs);
  EXPECT_EQ(mem[0].live_at_peak, 1);
  EXPECT_EQ(mem[0].largest_live_at_peak[0].op, "model/dense/MatMul:MatMul");
  EXPECT_DOUBLE_EQ(mem[0].fragmentation_at_peak, 32.0 / 128.0);

  const HostOverview o = ComputeOverview(*t, summary);
  ExpectOverviewMatchesBreakdown(o, summary);
  ASSERT_EQ(o.steps.size(), 1u);
  EXPECT_EQ(o.steps[0].step, 3);
  EXPECT_EQ(o.steps[0].times.compute_16bit_ns, 4 * kMs);
  EXPECT_EQ(o.steps[0].times[OverviewCategory::kInput], kMs);

  const HostInputPipeline p = ComputeInputPipeline(*t, summary);
  EXPECT_EQ(p.bottleneck, "Iterator::Prefetch");
  ASSERT_EQ(p.steps.size(), 1u);
  EXPECT_EQ(p.steps[0].device_input_ns, kMs);
}

// A JAX GPU host: step root `train` (_r=1, step_num 7) over [0, 4) ms with a relative-time
// profile window; kernels name their HLO op in a metadata `hlo_op` stat (as XLA's CUPTI tracer
// writes it): a 16-bit GEMM for `dot.1` (1 ms) and two loop fusions for `fusion.3` (0.5 ms each);
// derived `XLA Modules`/`XLA Ops` lines that must not count as activity.
tensorflow::profiler::XSpace JaxStyleSpace() {
  using xspace::XPlaneBuilder;
  tensorflow::profiler::XSpace space;
  space.add_hostnames("jax-0");
  XPlaneBuilder host(space.add_planes(), 1, xspace::kHostPlaneName, kP);
  xspace::XLine* thread = host.AddLine(5, "main", kP);
  auto* root = host.AddEvent(thread, host.EventMetadataId("train"), kP, 4 * kMs);
  host.AddStat(root, host.StatMetadataId("_r"), int64_t{1});
  host.AddStat(root, host.StatMetadataId("step_num"), int64_t{7});
  host.AddEvent(thread, host.EventMetadataId("PjitFunction(train_step)"), kP, 100 * kUs);
  XPlaneBuilder gpu(space.add_planes(), 0, "/device:GPU:0", kP);
  const auto kernel_meta = [&](absl::string_view name, absl::string_view hlo) {
    const int64_t id = gpu.EventMetadataId(name);
    auto* stat = (*gpu.plane()->mutable_event_metadata())[id].add_stats();
    stat->set_metadata_id(gpu.StatMetadataId("hlo_op"));
    stat->set_str_value(std::string(hlo));
    return id;
  };
  const int64_t gemm = kernel_meta("sm80_xmma_gemm_bf16bf16_bf16f32", "dot.1");
  const int64_t loop = kernel_meta("loop_add_fusion", "fusion.3");
  xspace::XLine* stream = gpu.AddLine(12, "Stream #12(Compute)", kP);
  gpu.AddEvent(stream, gemm, kP + kMs, kMs);
  gpu.AddEvent(stream, loop, kP + 2 * kMs, 500 * kUs);
  gpu.AddEvent(stream, loop, kP + 3 * kMs, 500 * kUs);
  xspace::XLine* modules = gpu.AddLine(1, "XLA Modules", kP);
  gpu.AddEvent(modules, gpu.EventMetadataId("jit_train_step"), kP + kMs, 2500 * kUs);
  xspace::XLine* ops = gpu.AddLine(2, "XLA Ops", kP);
  gpu.AddEvent(ops, gpu.EventMetadataId("dot.1"), kP + kMs, kMs);
  xspace::SetProfileWindow(&space, kP, kP + 4 * kMs);
  return space;
}

TEST(XSpaceToolsTest, JaxStyleTraceNamesHloOps) {
  const tensorflow::profiler::XSpace space = JaxStyleSpace();
  absl::StatusOr<ToolTrace> t = ReadXSpaceTools(space, "jax-0", 0);
  ASSERT_THAT(t, IsOk());
  absl::StatusOr<HostTrace> h = ReadXSpaceHost(space, "jax-0", 0);
  ASSERT_THAT(h, IsOk());
  const HostSummary summary = SummarizeHost(*h);
  EXPECT_EQ(t->environment.framework, "JAX");
  const HostOverview o = ComputeOverview(*t, summary);
  ExpectOverviewMatchesBreakdown(o, summary);
  ASSERT_EQ(o.steps.size(), 1u);
  EXPECT_EQ(o.steps[0].step, 7);
  // The derived lines did not double the device time: 1 + 0.5 + 0.5 ms of compute.
  EXPECT_EQ(o.steps[0].times[OverviewCategory::kDeviceCompute], 2 * kMs);
  EXPECT_EQ(o.steps[0].times.compute_16bit_ns, kMs);

  // Equal totals (1 ms each): ordered by kernel name.
  const std::vector<KernelStat> kernels = ComputeKernelStats(*t);
  ASSERT_EQ(kernels.size(), 2u);
  EXPECT_EQ(kernels[0].kernel, "loop_add_fusion");
  EXPECT_EQ(kernels[0].op, "fusion.3");
  EXPECT_EQ(kernels[0].occurrences, 2);
  EXPECT_EQ(kernels[0].total_ns, kMs);
  EXPECT_FALSE(kernels[0].tensor_core_eligible);
  EXPECT_EQ(kernels[1].op, "dot.1");
  EXPECT_TRUE(kernels[1].tensor_core_used);

  const OpStats ops = ComputeOpStats(*t);
  EXPECT_EQ(FindOp(ops.by_type, "dot")->device_self_ns, kMs);
  EXPECT_EQ(FindOp(ops.by_type, "fusion")->device_self_ns, kMs);
  EXPECT_EQ(FindOp(ops.by_type, "fusion")->occurrences, 2);  // device-only ops: one per kernel
}

TEST(XSpaceToolsTest, BadBytesAndNonTraceSpacesAreErrors) {
  EXPECT_FALSE(ReadXSpaceToolsBytes("\xff\xff\xff", "w0", 0).ok());
  tensorflow::profiler::XSpace empty;
  empty.add_planes()->set_name("Task Environment");
  absl::StatusOr<ToolTrace> t = ReadXSpaceTools(empty, "w0", 0);
  ASSERT_FALSE(t.ok());
  EXPECT_THAT(t.status().message(), HasSubstr("not a host trace"));
  empty.add_errors("tsl localhost:9999: busy");  // its only source failed: the reason is shown
  t = ReadXSpaceTools(empty, "w0", 0);
  ASSERT_FALSE(t.ok());
  EXPECT_THAT(t.status().message(),
              HasSubstr("not a host trace; the trace says: tsl localhost:9999: busy"));
}

// --- PyTorch fixture ---------------------------------------------------------------------------

TEST(KinetoToolsTest, FixtureFeedsEveryToolAndAgreesWithTheBreakdown) {
  absl::StatusOr<std::string> json = ReadFile(DataPath("rank3.pt.trace.json"));
  ASSERT_THAT(json, IsOk());
  absl::StatusOr<ToolTrace> t = ReadKinetoToolsFile(*json, "rank3.pt.trace.json", 0);
  ASSERT_THAT(t, IsOk());
  absl::StatusOr<HostTrace> h = ReadKinetoTraceFile(*json, "rank3.pt.trace.json", 0);
  ASSERT_THAT(h, IsOk());
  EXPECT_EQ(t->host, h->host);
  EXPECT_EQ(t->window_start_ns, h->window_start_ns);
  EXPECT_EQ(t->window_end_ns, h->window_end_ns);
  const HostSummary summary = SummarizeHost(*h);
  ASSERT_FALSE(summary.steps.empty());
  ExpectOverviewMatchesBreakdown(ComputeOverview(*t, summary), summary);

  EXPECT_EQ(t->environment.framework, "PyTorch");
  EXPECT_EQ(t->environment.cuda_version, "12040");
  ASSERT_EQ(t->environment.devices.size(), 2u);
  EXPECT_EQ(t->environment.devices[1].name, "NVIDIA H100 80GB HBM3");

  const std::vector<KernelStat> kernels = ComputeKernelStats(*t);
  const KernelStat* gemm = nullptr;
  const KernelStat* nccl = nullptr;
  for (const KernelStat& k : kernels) {
    if (absl::StartsWith(k.kernel, "sm90_xmma_gemm")) gemm = &k;
    if (absl::StartsWith(k.kernel, "ncclDevKernel")) nccl = &k;
  }
  ASSERT_NE(gemm, nullptr);
  ASSERT_NE(nccl, nullptr);
  EXPECT_EQ(gemm->op, "aten::linear");  // External id
  EXPECT_EQ(gemm->registers_per_thread, 168);
  EXPECT_EQ(gemm->shared_memory_bytes, 213072);
  EXPECT_THAT(gemm->grid, ElementsAre(128, 1, 1));
  EXPECT_THAT(gemm->block, ElementsAre(384, 1, 1));
  EXPECT_EQ(gemm->total_ns, 2000 * kUs);
  EXPECT_TRUE(gemm->tensor_core_used);
  EXPECT_TRUE(gemm->tensor_core_eligible);
  EXPECT_EQ(nccl->op, "nccl:all_reduce");
  EXPECT_FALSE(nccl->tensor_core_eligible);
  // The fill kernel (correlation 109) was launched by cuLaunchKernel inside the optimizer step.
  const KernelStat* fill = FindKernel(
      kernels,
      "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float> >");
  ASSERT_NE(fill, nullptr);
  EXPECT_EQ(fill->op, "Optimizer.step#SGD.step");

  const OpStats ops = ComputeOpStats(*t);
  const OpStat* linear = FindOp(ops.by_op, "aten::linear");
  ASSERT_NE(linear, nullptr);
  EXPECT_EQ(linear->host_total_ns, 300 * kUs);
  EXPECT_EQ(linear->host_self_ns, 300 * kUs - 8456);  // minus cudaLaunchKernel's 8.456 us
  EXPECT_EQ(linear->device_self_ns, 2000 * kUs);

  const HostInputPipeline p = ComputeInputPipeline(*t, summary);
  // enumerate(DataLoader) [100.25, 1600.25) us wraps the Python frame __next__ [100.3, 1599.3)
  // us (an input wait by name), so its self time is 1 us; "DataLoader next" is 2000 us alone.
  ASSERT_EQ(p.stages.size(), 3u);
  EXPECT_EQ(p.stages[0].name, "DataLoader next");
  EXPECT_EQ(p.stages[0].self_ns, 2000 * kUs);
  EXPECT_EQ(p.stages[1].name, "torch/utils/data/dataloader.py(623): __next__");
  EXPECT_EQ(p.stages[1].self_ns, 1499 * kUs);
  EXPECT_EQ(p.stages[2].self_ns, 1500 * kUs - 1499 * kUs);
  EXPECT_EQ(p.bottleneck, "DataLoader next");
  EXPECT_TRUE(p.tf_data.graph.empty());  // no tf.data in a PyTorch trace
  // PyTorch's DataLoader events are the loop waiting for input.
  EXPECT_EQ(p.stages[0].category, InputCategory::kWait);
  EXPECT_EQ(p.category_ns[static_cast<size_t>(InputCategory::kWait)], 3500 * kUs);

  const std::vector<DeviceMemory> mem = ComputeMemory(*t);
  ASSERT_EQ(mem.size(), 1u);
  EXPECT_EQ(mem[0].device, -1);  // no "Device Type": host
  EXPECT_EQ(mem[0].peak_bytes, 512);
  EXPECT_EQ(mem[0].reserved_at_peak, 2097152);
  // The [memory] event at 17200 us on tid 4242 lies inside Optimizer.step#SGD.step [17000, 17500).
  ASSERT_EQ(t->memory.size(), 1u);
  EXPECT_EQ(t->Str(t->memory[0].op), "Optimizer.step#SGD.step");
}

// A PyTorch trace without deviceProperties still counts the GPUs its kernels ran on.
TEST(KinetoToolsTest, KernelsCountTheirDevicesWithoutDeviceProperties) {
  absl::StatusOr<std::string> json = ReadFile(DataPath("rank3.pt.trace.json"));
  ASSERT_THAT(json, IsOk());
  std::string stripped = *json;
  const size_t at = stripped.find("\"deviceProperties\"");
  ASSERT_NE(at, std::string::npos);
  stripped.replace(at, 18, "\"otherProperties\"");
  absl::StatusOr<ToolTrace> t = ReadKinetoToolsFile(stripped, "rank3.pt.trace.json", 0);
  ASSERT_THAT(t, IsOk());
  // The reader lists only what the trace describes; the overview adds the devices the kernels
  // ran on (the same rule for every source).
  EXPECT_TRUE(t->environment.devices.empty());
  absl::StatusOr<HostTrace> h = ReadKinetoTraceFile(stripped, "rank3.pt.trace.json", 0);
  ASSERT_THAT(h, IsOk());
  const HostTools tools = ComputeHostTools(Tool::kOverview, *t, SummarizeHost(*h));
  ASSERT_EQ(tools.overview.environment.devices.size(), 2u);  // kernels on GPU 0 and 1
  EXPECT_EQ(tools.overview.environment.devices[0].id, 0);
  EXPECT_EQ(tools.overview.environment.devices[1].id, 1);
  EXPECT_EQ(tools.overview.environment.devices[0].name, "device 0 (not described by the trace)");
}

TEST(KinetoToolsTest, MemoryEventsTakeTheInnermostEnclosingOpOnTheirThread) {
  // aten::linear [0, 100) us wraps aten::empty [10, 20) us on tid 1; allocations at 15 us (inside
  // both: aten::empty), 50 us (after aten::empty ended: aten::linear), and 15 us on tid 2 (none).
  const std::string json = R"({"traceEvents": [
    {"ph": "X", "cat": "cpu_op", "name": "aten::linear", "pid": 1, "tid": 1, "ts": 0, "dur": 100},
    {"ph": "X", "cat": "cpu_op", "name": "aten::empty", "pid": 1, "tid": 1, "ts": 10, "dur": 10},
    {"ph": "i", "cat": "cpu_instant_event", "name": "[memory]", "pid": 1, "tid": 1, "ts": 15,
     "args": {"Device Type": 1, "Device Id": 2, "Addr": 4096, "Bytes": 1024,
              "Total Allocated": 1024, "Total Reserved": 2048}},
    {"ph": "i", "cat": "cpu_instant_event", "name": "[memory]", "pid": 1, "tid": 1, "ts": 50,
     "args": {"Device Type": 1, "Device Id": 2, "Addr": 4096, "Bytes": -1024}},
    {"ph": "i", "cat": "cpu_instant_event", "name": "[memory]", "pid": 1, "tid": 2, "ts": 15,
     "args": {"Device Type": 0, "Bytes": 8}}
  ]})";
  absl::StatusOr<ToolTrace> t = ReadKinetoTools(json, "h", 0);
  ASSERT_THAT(t, IsOk());
  ASSERT_EQ(t->memory.size(), 3u);
  EXPECT_EQ(t->Str(t->memory[0].op), "aten::empty");
  EXPECT_EQ(t->memory[0].device, 2);
  EXPECT_EQ(t->memory[0].address, 4096u);
  EXPECT_EQ(t->memory[0].time_ns, 15 * kUs);
  EXPECT_EQ(t->Str(t->memory[1].op), "aten::linear");
  EXPECT_EQ(t->memory[1].bytes, -1024);
  EXPECT_EQ(t->Str(t->memory[2].op), "");
  EXPECT_EQ(t->memory[2].device, -1);
  const std::vector<DeviceMemory> mem = ComputeMemory(*t);
  ASSERT_EQ(mem.size(), 2u);  // host memory, device 2
  EXPECT_EQ(mem[1].device, 2);
  EXPECT_EQ(mem[1].peak_bytes, 1024);
  EXPECT_EQ(mem[1].largest_live_at_peak[0].op, "aten::empty");
  EXPECT_DOUBLE_EQ(mem[1].fragmentation_at_peak, 0.5);
}

TEST(KinetoToolsTest, DevicesThatRanKernelsCountWithoutDeviceProperties) {
  // No deviceProperties: the kernels on GPU 0 (args.device) and GPU 3 (the pid) make two
  // devices, each once; a trace that lists its devices keeps their names.
  const std::string bare = R"({"traceEvents": [
    {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 0, "dur": 5,
     "args": {"device": 0, "stream": 7, "correlation": 1}},
    {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 10, "dur": 5,
     "args": {"device": 0, "stream": 7, "correlation": 2}},
    {"ph": "X", "cat": "kernel", "name": "k", "pid": 3, "tid": 7, "ts": 20, "dur": 5,
     "args": {"stream": 7, "correlation": 3}}
  ]})";
  auto devices = [](const std::string& json) {
    absl::StatusOr<ToolTrace> t = ReadKinetoTools(json, "h", 0);
    EXPECT_THAT(t, IsOk());
    if (!t.ok()) return std::vector<DeviceInfo>{};
    return ComputeHostTools(Tool::kOverview, *t, HostSummary{}).overview.environment.devices;
  };
  std::vector<DeviceInfo> d = devices(bare);
  ASSERT_EQ(d.size(), 2u);
  EXPECT_EQ(d[0].id, 0);
  EXPECT_EQ(d[0].name, "device 0 (not described by the trace)");
  EXPECT_EQ(d[1].id, 3);
  const std::string listed = absl::StrCat(
      R"({"deviceProperties": [{"id": 0, "name": "NVIDIA H100 80GB HBM3"}],)", bare.substr(1));
  d = devices(listed);
  ASSERT_EQ(d.size(), 2u);
  EXPECT_EQ(d[0].name, "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(d[1].id, 3);
}

TEST(KinetoToolsTest, BadJsonIsAnErrorNamingThePath) {
  absl::StatusOr<ToolTrace> t = ReadKinetoToolsFile("{not json", "x.pt.trace.json", 0);
  ASSERT_FALSE(t.ok());
  EXPECT_THAT(t.status().message(), HasSubstr("x.pt.trace.json"));
  EXPECT_FALSE(ReadKinetoTools(R"({"a": 1})", "h", 0).ok());
}

// A dense PyTorch trace of small events, as `analyze --tool=all` was measured on (docs/tools.md
// "Cost"): one ProfilerStep per 100 events, the rest half cpu_ops, half kernels.
std::string DenseKinetoTrace(int events) {
  std::string out =
      R"({"schemaVersion":1,"baseTimeNanoseconds":1700000000000000000,"traceEvents":[)";
  for (int i = 0; i < events; ++i) {
    if (i % 100 == 0) {
      absl::StrAppend(&out, R"({"ph":"X","cat":"user_annotation","name":"ProfilerStep#)", i / 100,
                      R"(","pid":1,"tid":1,"ts":)", i, R"(,"dur":100},)");
    } else if (i % 2 != 0) {
      absl::StrAppend(&out, R"({"ph":"X","cat":"cpu_op","name":"aten::add","pid":1,"tid":1,"ts":)",
                      i, R"(,"dur":0.5,"args":{"External id":)", i, "}},");
    } else {
      absl::StrAppend(&out, R"({"ph":"X","cat":"kernel","name":"k","pid":0,"tid":7,"ts":)", i,
                      R"(,"dur":0.5,"args":{"correlation":)", i, "}},");
    }
  }
  out.pop_back();  // the last comma
  out += "]}";
  return out;
}

template <typename T>
size_t HeldBytes(const std::vector<T>& v) {
  return v.capacity() * sizeof(T);
}

TEST(KinetoToolsTest, TheInPlaceReaderReadsTheSameTraceAndHoldsABoundedSizePerEvent) {
  constexpr int kEvents = 20000;
  const std::string json = DenseKinetoTrace(kEvents);
  absl::StatusOr<ToolTrace> copied = ReadKinetoToolsFile(json, "dense.pt.trace.json", 0);
  ASSERT_THAT(copied, IsOk());
  // The bytes handed over (parsed in place, overwritten): the same trace as the copying reader.
  absl::StatusOr<ToolTrace> owned =
      ReadKinetoToolsFileOwned(std::string(json), "dense.pt.trace.json", 0);
  ASSERT_THAT(owned, IsOk());
  ASSERT_EQ(owned->host_events.size(), copied->host_events.size());
  ASSERT_EQ(owned->device_events.size(), copied->device_events.size());
  EXPECT_GE(owned->host_events.size() + owned->device_events.size(), size_t{kEvents} * 9 / 10);
  for (size_t i = 0; i < owned->host_events.size(); ++i) {
    EXPECT_EQ(owned->host_events[i].start_ns, copied->host_events[i].start_ns);
    EXPECT_EQ(owned->Str(owned->host_events[i].name), copied->Str(copied->host_events[i].name));
  }
  for (size_t i = 0; i < owned->device_events.size(); ++i) {
    EXPECT_EQ(owned->device_events[i].end_ns, copied->device_events[i].end_ns);
  }
  // What the reader keeps per event once the document is gone: the stated bound (tool_trace.h,
  // docs/tools.md "Cost": about 64 bytes an event plus its details), with vector slack.
  const size_t held = HeldBytes(owned->host_events) + HeldBytes(owned->device_events) +
                      HeldBytes(owned->kernel_details) + HeldBytes(owned->device_ops) +
                      HeldBytes(owned->memory);
  EXPECT_LE(held / kEvents, 160u) << held << " bytes for " << kEvents << " events";
  // Names are interned once, not per event: each step's name, and a few more.
  EXPECT_LE(owned->strings.size(), size_t{kEvents / 100 + 8});

  // Gzipped: inflated, the compressed bytes dropped, the same events.
  absl::StatusOr<std::string> gz = ReadFile(DataPath("rank3.pt.trace.json.gz"));
  absl::StatusOr<std::string> plain = ReadFile(DataPath("rank3.pt.trace.json"));
  ASSERT_THAT(gz, IsOk());
  ASSERT_THAT(plain, IsOk());
  absl::StatusOr<ToolTrace> from_gz =
      ReadKinetoToolsFileOwned(*std::move(gz), "rank3.pt.trace.json.gz", 0);
  absl::StatusOr<ToolTrace> from_plain = ReadKinetoToolsFile(*plain, "rank3.pt.trace.json", 0);
  ASSERT_THAT(from_gz, IsOk());
  ASSERT_THAT(from_plain, IsOk());
  EXPECT_EQ(from_gz->host_events.size(), from_plain->host_events.size());
  EXPECT_EQ(from_gz->device_events.size(), from_plain->device_events.size());
  EXPECT_EQ(from_gz->memory.size(), from_plain->memory.size());
  // Errors still name the file.
  absl::StatusOr<ToolTrace> bad = ReadKinetoToolsFileOwned("{not json", "y.pt.trace.json", 0);
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("y.pt.trace.json"));
}

}  // namespace
}  // namespace profctl::analysis

namespace profctl::analysis {
namespace {

// One device: four kernels on stream 7 launched from thread 2 (the gaps before them: a kernel
// wait, a host wait, an "other"), a 200 us collective on stream 9 that computation overlaps for
// 120 us, and a kernel on stream 13 that starts before its launch call returns. Every expected
// number follows from the definitions in tools.h (HTA's).
TraceBuilder TimelineMix() {
  TraceBuilder b;
  int64_t corr = 0;
  const auto launch = [&](int32_t stream, absl::string_view kernel, int64_t call_at,
                          int64_t call_dur, int64_t k_at, int64_t k_dur,
                          OpKind kind = OpKind::kDeviceCompute) {
    ++corr;
    b.Host(2, "cudaLaunchKernel", call_at, call_dur, HostEventRole::kRuntime, OpKind::kHostLaunch)
        .correlation_id = corr;
    DeviceEvent& d = b.Device(0, kernel, k_at, k_dur, kind);
    d.correlation_id = corr;
    d.stream = stream;
  };
  launch(7, "k1", 0, 10 * kUs, 20 * kUs, 100 * kUs);          // delay 10 us
  launch(7, "k2", 15 * kUs, 10 * kUs, 130 * kUs, 100 * kUs);  // gap 10 us: kernel wait; 105
  launch(9, "ncclKernel_AllReduce", 50 * kUs, 5 * kUs, 100 * kUs, 200 * kUs,
         OpKind::kCollective);                                 // delay 45 us
  launch(7, "k3", 300 * kUs, 60 * kUs, 370 * kUs, 10 * kUs);   // gap 140: host wait; delay 10
  launch(7, "k4", 362 * kUs, 4 * kUs, 500 * kUs, 100 * kUs);   // gap 120: other; delay 134
  launch(13, "k5", 800 * kUs, 10 * kUs, 805 * kUs, 20 * kUs);  // starts in its call: delay 0
  // A synchronous copy's call is no launch: not in the launch statistics.
  b.Host(2, "cudaMemcpy", 700 * kUs, 5 * kUs, HostEventRole::kRuntime, OpKind::kHostSync)
      .correlation_id = 99;
  DeviceEvent& copy = b.Device(0, "Memcpy DtoH", 702 * kUs, 2 * kUs, OpKind::kMemcpyD2H, false);
  copy.correlation_id = 99;
  copy.stream = 11;
  b.Window(0, 1000 * kUs);
  return b;
}

TEST(TimelineTest, OverlapIdleByCauseLaunchDelaysAndQueueLengthFollowTheirDefinitions) {
  TraceBuilder b = TimelineMix();
  const HostTimeline t = ComputeTimeline(b.tool());
  // Communication [100, 300) us; computation overlaps it in [100, 120) and [130, 230).
  EXPECT_EQ(t.communication_ns, 200 * kUs);
  EXPECT_EQ(t.computation_ns, 330 * kUs);
  EXPECT_EQ(t.overlap_ns, 120 * kUs);
  EXPECT_DOUBLE_EQ(t.OverlapPct(), 60.0);
  EXPECT_EQ(t.idle.host_wait_ns, 140 * kUs);
  EXPECT_EQ(t.idle.kernel_wait_ns, 10 * kUs);
  EXPECT_EQ(t.idle.other_ns, 120 * kUs);
  // Delays 10, 105, 45, 10, 134 and 0 us (k5 started before its call returned: 0, as HTA
  // clips it); the synchronous copy is not a launch.
  const LaunchDelayStats& l = t.launch;
  EXPECT_EQ(l.launches, 6);
  EXPECT_DOUBLE_EQ(l.mean_ns(), 304.0 / 6 * kUs);
  EXPECT_EQ(l.min_ns, 0);
  EXPECT_EQ(l.max_ns, 134 * kUs);
  EXPECT_EQ(l.p50_ns, 10 * kUs);  // nearest rank: the 3rd of 0, 10, 10, 45, 105, 134
  EXPECT_EQ(l.p90_ns, 134 * kUs);
  EXPECT_EQ(l.p99_ns, 134 * kUs);
  EXPECT_EQ(l.outliers, 2);             // 105 and 134 us > 100 us
  EXPECT_EQ(l.slow_calls, 1);           // the 60 us call
  EXPECT_EQ(l.shorter_than_launch, 1);  // k3: 10 us after a 60 us call
  std::array<int64_t, kNumLaunchDelayBuckets> histogram{};
  histogram[0] = 1;  // [0, 1) us
  histogram[4] = 2;  // [10, 20) us
  histogram[5] = 1;  // [20, 50) us
  histogram[7] = 2;  // [100 us, 1 ms)
  EXPECT_EQ(l.histogram, histogram);
  // Streams by (device, stream): 7, 9, 11, 13.
  ASSERT_EQ(t.streams.size(), 4u);
  const StreamTimeline& s7 = t.streams[0];
  EXPECT_EQ(s7.stream, 7);
  EXPECT_EQ(s7.events, 4);
  EXPECT_EQ(s7.busy_ns, 310 * kUs);
  EXPECT_EQ(s7.idle.total(), 270 * kUs);
  // Queue after each change: launches at 0, 15, 300, 362 us, starts at 20, 130, 370, 500 us:
  // 1 2 1 0 1 2 1 0.
  EXPECT_EQ(s7.queue_samples, 8);
  EXPECT_DOUBLE_EQ(s7.queue_mean, 1.0);
  EXPECT_EQ(s7.queue_p50, 1);
  EXPECT_EQ(s7.queue_max, 2);
  EXPECT_EQ(t.streams[1].stream, 9);
  EXPECT_EQ(t.streams[1].queue_max, 1);
  EXPECT_DOUBLE_EQ(t.streams[1].queue_mean, 0.5);
  EXPECT_EQ(t.streams[2].stream, 11);
  EXPECT_EQ(t.streams[2].queue_samples, 0);
}

TEST(TimelineTest, NoCommunicationIsNoOverlapAndThePodSumsItsHosts) {
  TraceBuilder quiet;
  quiet.Device(0, "k", 0, 10 * kUs);
  EXPECT_EQ(ComputeTimeline(quiet.tool()).OverlapPct(), -1);
  EXPECT_EQ(ComputeTimeline(quiet.tool()).launch.launches, 0);

  TraceBuilder b = TimelineMix();
  HostTools h0 = ComputeHostTools(Tool::kTimeline, b.tool(), b.Summary());
  HostTools h1 = h0;
  h1.host = "h1";
  h1.timeline.launch.max_ns = 500 * kUs;
  const PodTools pod = BuildPodTools(Tool::kTimeline, {h0, h1}, PodBreakdown{});
  EXPECT_EQ(pod.timeline.communication_ns, 400 * kUs);
  EXPECT_EQ(pod.timeline.overlap_ns, 240 * kUs);
  EXPECT_DOUBLE_EQ(pod.timeline.OverlapPct(), 60.0);
  EXPECT_EQ(pod.timeline.idle.host_wait_ns, 280 * kUs);
  EXPECT_EQ(pod.timeline.launch.launches, 12);
  EXPECT_EQ(pod.timeline.launch.max_ns, 500 * kUs);
  EXPECT_EQ(pod.timeline.launch.min_ns, 0);
  EXPECT_EQ(pod.timeline.launch.histogram[7], 4);
  EXPECT_EQ(pod.timeline.launch.p50_ns, -1);  // the pod keeps no samples
  EXPECT_TRUE(pod.timeline.streams.empty());
}

}  // namespace
}  // namespace profctl::analysis

namespace profctl::analysis {
namespace {

// A launch from a thread with no op of its own (PyTorch's autograd engine thread) is named by
// the innermost op running on another thread when its call started; a launch outside every op
// names none.
TEST(KernelStatsTest, ALaunchOutsideAnyOpOfItsThreadTakesTheOpRunningElsewhere) {
  TraceBuilder b;
  b.Host(1, "forward_backward", 0, 100 * kUs, HostEventRole::kAnnotation);
  b.Host(1, "loss", 5 * kUs, 20 * kUs, HostEventRole::kAnnotation);
  const auto launch = [&](int64_t corr, int64_t at, absl::string_view kernel) {
    b.Host(2, "cudaLaunchKernel", at, 2 * kUs, HostEventRole::kRuntime, OpKind::kHostLaunch)
        .correlation_id = corr;
    b.Device(0, kernel, at + 5 * kUs, 10 * kUs).correlation_id = corr;
  };
  launch(1, 10 * kUs, "in_loss");     // inside loss, inside forward_backward: the innermost
  launch(2, 50 * kUs, "in_fwd_bwd");  // inside forward_backward only
  launch(3, 200 * kUs, "outside");    // no op anywhere
  const std::vector<KernelStat> rows = ComputeKernelStats(b.tool());
  ASSERT_NE(FindKernel(rows, "in_loss"), nullptr);
  EXPECT_EQ(FindKernel(rows, "in_loss")->op, "loss");
  EXPECT_EQ(FindKernel(rows, "in_fwd_bwd")->op, "forward_backward");
  EXPECT_EQ(FindKernel(rows, "outside")->op, "");
}

}  // namespace
}  // namespace profctl::analysis
