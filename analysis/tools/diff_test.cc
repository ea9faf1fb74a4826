#include "analysis/tools/diff.h"

#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/test_time.h"

namespace profctl::analysis {
namespace {

using ::profctl::test_time::kMs;

HostReport Host(const std::string& name, int64_t steps, double step_ms, double compute_ms,
                double input_ms, int64_t straggler_steps) {
  HostReport h;
  h.host = name;
  h.steps = steps;
  h.step_time.mean_ns = step_ms * kMs;
  h.categories[static_cast<size_t>(Category::kCompute)].mean_ns = compute_ms * kMs;
  h.categories[static_cast<size_t>(Category::kInput)].mean_ns = input_ms * kMs;
  h.straggler_steps = straggler_steps;
  return h;
}

// `n` steps, the first `named` of them with `straggler` named for `cause`.
std::vector<PodStep> Steps(int n, int named, const std::string& straggler, Category cause) {
  std::vector<PodStep> steps(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) {
    steps[static_cast<size_t>(i)].step = i;
    if (i < named) {
      steps[static_cast<size_t>(i)].straggler = straggler;
      steps[static_cast<size_t>(i)].cause = cause;
    }
  }
  return steps;
}

// The pod's straggler verdict naming `host` in `steps` steps for `cause` (what BuildPodBreakdown
// would judge of those steps).
void NameStraggler(PodBreakdown* pod, const std::string& host, int64_t steps, Category cause) {
  StragglerVerdict& v = pod->verdict.straggler;
  v.finding = Finding::kFound;
  v.host = host;
  v.steps = steps;
  v.named_steps = steps;
  v.cause = cause;
}

KernelStat Kernel(const std::string& name, const std::string& op, int64_t total_ns, int64_t n) {
  KernelStat k;
  k.kernel = name;
  k.op = op;
  k.total_ns = total_ns;
  k.occurrences = n;
  return k;
}

OpStat Op(const std::string& name, int64_t device_self_ns, int64_t host_self_ns) {
  OpStat o;
  o.name = name;
  o.device_self_ns = device_self_ns;
  o.host_self_ns = host_self_ns;
  o.occurrences = 1;
  return o;
}

class DiffTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // A: 10 steps; w1 the straggler on compute in 8; w2 only here.
    a_.steps = Steps(10, 8, "w1", Category::kCompute);
    NameStraggler(&a_, "w1", 8, Category::kCompute);
    a_.pod_step_time.mean_ns = 100.0 * kMs;
    a_.hosts = {Host("w0", 10, 100, 60, 10, 0), Host("w1", 10, 100, 80, 5, 8),
                Host("w2", 10, 100, 50, 30, 0)};
    a_.verdict.consistently_slow.hosts = {{.host = "w1", .cause = Category::kCompute}};
    a_.verdict.stands_out.hosts = {{.host = "w1",
                                    .category = Category::kCompute,
                                    .steps = 10,
                                    .steps_beyond = 8,
                                    .median_excess_ns = 20 * kMs},
                                   {.host = "w2",
                                    .category = Category::kInput,
                                    .steps = 10,
                                    .steps_beyond = 10,
                                    .median_excess_ns = 22 * kMs}};
    // B: 20 steps; w0 the straggler on input in 12; w3 only here; w1 faster.
    b_.steps = Steps(20, 12, "w0", Category::kInput);
    NameStraggler(&b_, "w0", 12, Category::kInput);
    b_.pod_step_time.mean_ns = 80.0 * kMs;
    b_.verdict.stands_out.hosts = {{.host = "w0",
                                    .category = Category::kInput,
                                    .steps = 20,
                                    .steps_beyond = 12,
                                    .median_excess_ns = 10 * kMs},
                                   {.host = "w2",
                                    .category = Category::kInput,
                                    .steps = 20,
                                    .steps_beyond = 20,
                                    .median_excess_ns = 30 * kMs}};
    b_.hosts = {Host("w3", 20, 75, 60, 5, 0), Host("w1", 20, 75, 60, 5, 0),
                Host("w0", 20, 80, 60, 15, 12)};
    kernels_a_ = {Kernel("gemm", "aten::mm", 600 * kMs, 100),
                  Kernel("gemm", "aten::addmm", 400 * kMs, 50),
                  Kernel("relu", "aten::relu", 100 * kMs, 10), Kernel("gone", "x", 10 * kMs, 1)};
    // gemm: 1000 ms / 10 steps = 100 ms per step -> 1200 ms / 20 = 60 ms (-40);
    // relu: 10 -> 10 ms per step (0: left out); gone: 1 -> 0; new: 0 -> 5.
    kernels_b_ = {Kernel("gemm", "aten::mm", 1200 * kMs, 200),
                  Kernel("relu", "aten::relu", 200 * kMs, 20), Kernel("new", "y", 100 * kMs, 7)};
    ops_a_ = {Op("aten::mm", 500 * kMs, 0), Op("DataLoader", 0, 100 * kMs)};
    ops_b_ = {Op("aten::mm", 500 * kMs, 0), Op("DataLoader", 0, 400 * kMs)};
  }
  Diff Compute(size_t top_n = 10) {
    return ComputeDiff({&a_, true, kernels_a_, ops_a_}, {&b_, true, kernels_b_, ops_b_},
                       {.top_n = top_n});
  }
  PodBreakdown a_, b_;
  std::vector<KernelStat> kernels_a_, kernels_b_;
  std::vector<OpStat> ops_a_, ops_b_;
};

TEST_F(DiffTest, HostsAreMatchedByNameWithTheirChangesPerStep) {
  const Diff d = Compute();
  EXPECT_EQ(d.pod_steps.a, 10);
  EXPECT_EQ(d.pod_steps.b, 20);
  EXPECT_EQ(d.pod_step_time_ns.delta(), -20 * kMs);
  EXPECT_DOUBLE_EQ(d.pod_step_time_ns.pct(), -20.0);
  ASSERT_EQ(d.hosts.size(), 4u);
  // A's order, then B's new hosts.
  EXPECT_EQ(d.hosts[0].host, "w0");
  EXPECT_EQ(d.hosts[1].host, "w1");
  EXPECT_EQ(d.hosts[2].host, "w2");
  EXPECT_EQ(d.hosts[3].host, "w3");
  const HostDiff& w1 = d.hosts[1];
  EXPECT_TRUE(w1.in_a && w1.in_b);
  EXPECT_EQ(w1.steps.a, 10);
  EXPECT_EQ(w1.steps.b, 20);
  EXPECT_EQ(w1.step_time_ns.delta(), -25 * kMs);
  EXPECT_DOUBLE_EQ(w1.step_time_ns.pct(), -25.0);
  const Change& compute = w1.categories[static_cast<size_t>(Category::kCompute)];
  EXPECT_EQ(compute.a, 80 * kMs);
  EXPECT_EQ(compute.b, 60 * kMs);
  EXPECT_DOUBLE_EQ(compute.pct(), -25.0);
  EXPECT_EQ(w1.straggler_steps.delta(), -8);
  EXPECT_EQ(w1.cause_a, Category::kCompute);
  EXPECT_EQ(w1.cause_b, Category::kIdle);  // never named in B
  const HostDiff& w0 = d.hosts[0];
  EXPECT_EQ(w0.categories[static_cast<size_t>(Category::kInput)].delta(), 5 * kMs);
  EXPECT_DOUBLE_EQ(w0.categories[static_cast<size_t>(Category::kInput)].pct(), 50.0);
  EXPECT_EQ(w0.cause_b, Category::kInput);
  // One side only: listed, with nothing on the other.
  EXPECT_TRUE(d.hosts[2].in_a);
  EXPECT_FALSE(d.hosts[2].in_b);
  EXPECT_EQ(d.hosts[2].step_time_ns.b, 0);
  EXPECT_FALSE(d.hosts[3].in_a);
  EXPECT_TRUE(d.hosts[3].in_b);
  EXPECT_EQ(d.hosts[3].step_time_ns.b, 75 * kMs);
  EXPECT_TRUE(std::isnan(d.hosts[3].step_time_ns.pct()));  // no base
}

TEST_F(DiffTest, TheStragglerAndItsCauseChange) {
  Diff d = Compute();
  EXPECT_EQ(d.straggler_a.host, "w1");
  EXPECT_EQ(d.straggler_a.steps, 8);
  EXPECT_EQ(d.straggler_a.cause, Category::kCompute);
  EXPECT_EQ(d.straggler_b.host, "w0");
  EXPECT_EQ(d.straggler_b.steps, 12);
  EXPECT_EQ(d.straggler_b.cause, Category::kInput);
  EXPECT_TRUE(d.straggler_changed);
  EXPECT_FALSE(d.cause_changed);
  EXPECT_THAT(d.consistently_slow_a, ::testing::ElementsAre("w1"));
  EXPECT_TRUE(d.consistently_slow_b.empty());
  // Who stands out: w1's compute is gone, w2's input grew, w0's input is new.
  ASSERT_EQ(d.outliers.size(), 3u);
  EXPECT_EQ(d.outliers[0].host, "w1");
  EXPECT_TRUE(d.outliers[0].in_a);
  EXPECT_FALSE(d.outliers[0].in_b);
  EXPECT_EQ(d.outliers[1].host, "w2");
  EXPECT_EQ(d.outliers[1].category, Category::kInput);
  EXPECT_TRUE(d.outliers[1].in_a && d.outliers[1].in_b);
  EXPECT_EQ(d.outliers[1].median_excess_ns.delta(), 8 * kMs);
  EXPECT_EQ(d.outliers[2].host, "w0");
  EXPECT_FALSE(d.outliers[2].in_a);
  EXPECT_EQ(d.outliers[2].median_excess_ns.b, 10 * kMs);
  // The same straggler for another reason: a cause change.
  b_.steps = Steps(20, 12, "w1", Category::kInput);
  NameStraggler(&b_, "w1", 12, Category::kInput);
  b_.hosts[1].straggler_steps = 12;
  b_.hosts[2].straggler_steps = 0;
  d = Compute();
  EXPECT_FALSE(d.straggler_changed);
  EXPECT_TRUE(d.cause_changed);
  // No change at all when A is compared with itself.
  d = ComputeDiff({&a_, true, kernels_a_, ops_a_}, {&a_, true, kernels_a_, ops_a_});
  EXPECT_FALSE(d.straggler_changed);
  EXPECT_FALSE(d.cause_changed);
  EXPECT_TRUE(d.kernels.empty());
  EXPECT_TRUE(d.ops.empty());
  for (const HostDiff& h : d.hosts) EXPECT_EQ(h.step_time_ns.delta(), 0) << h.host;
}

TEST_F(DiffTest, TopKernelsAndOpsByChangeOfTimePerStep) {
  Diff d = Compute();
  ASSERT_TRUE(d.has_tools);
  ASSERT_EQ(d.kernels.size(), 3u);       // relu unchanged per step: left out
  EXPECT_EQ(d.kernels[0].name, "gemm");  // summed over its two ops
  EXPECT_EQ(d.kernels[0].ns_per_step.a, 100 * kMs);
  EXPECT_EQ(d.kernels[0].ns_per_step.b, 60 * kMs);
  EXPECT_EQ(d.kernels[0].total_ns.a, 1000 * kMs);
  EXPECT_EQ(d.kernels[0].occurrences.a, 150);
  EXPECT_EQ(d.kernels[1].name, "new");
  EXPECT_EQ(d.kernels[1].ns_per_step.a, 0);
  EXPECT_EQ(d.kernels[1].ns_per_step.b, 5 * kMs);
  EXPECT_EQ(d.kernels[2].name, "gone");
  EXPECT_EQ(d.kernels[2].ns_per_step.delta(), -1 * kMs);
  // Ops: the device self time, else the host's: DataLoader 10 -> 20 ms per step, aten::mm 50 -> 25.
  ASSERT_EQ(d.ops.size(), 2u);
  EXPECT_EQ(d.ops[0].name, "aten::mm");
  EXPECT_EQ(d.ops[0].ns_per_step.delta(), -25 * kMs);
  EXPECT_EQ(d.ops[1].name, "DataLoader");
  EXPECT_EQ(d.ops[1].ns_per_step.delta(), 10 * kMs);
  // Top N.
  d = Compute(/*top_n=*/1);
  ASSERT_EQ(d.kernels.size(), 1u);
  EXPECT_EQ(d.kernels[0].name, "gemm");
  // Without the tools on one side: no kernel or op changes.
  d = ComputeDiff({&a_, true, kernels_a_, ops_a_}, {&b_, false, {}, {}});
  EXPECT_FALSE(d.has_tools);
  EXPECT_TRUE(d.kernels.empty());
  EXPECT_TRUE(d.ops.empty());
}

TEST_F(DiffTest, HostsWithTheSameNameArePairedAndTheOthersStayApart) {
  const Diff d = Compute();
  EXPECT_EQ(d.pairing, HostPairing::kName);
  // w2 (A only) and w3 (B only) are not paired by role or position: names paired the others.
  EXPECT_EQ(d.hosts[2].pairing, HostPairing::kUnpaired);
  EXPECT_EQ(d.hosts[3].pairing, HostPairing::kUnpaired);
  EXPECT_EQ(d.pairing_note, "only in A: w2; only in B: w3");
  EXPECT_EQ(d.hosts[0].pairing, HostPairing::kName);
  EXPECT_EQ(d.hosts[0].host_a, "w0");
  EXPECT_EQ(d.hosts[0].host_b, "w0");
}

std::vector<std::string> Names(const std::vector<std::optional<size_t>>& b_of_a,
                               const std::vector<std::string>& b) {
  std::vector<std::string> out;
  for (const std::optional<size_t>& j : b_of_a) out.push_back(j.has_value() ? b[*j] : "-");
  return out;
}

TEST(PairHostsTest, ByRankThenNameThenOneToOneThenRoleThenPosition) {
  using ::testing::ElementsAre;
  // Ranks stated by the traces pair hosts named differently.
  std::vector<std::string> a = {"rank-0", "rank-1"}, b = {"node-b", "node-a"};
  HostPairs p = PairHosts(a, std::vector<int64_t>{0, 1}, b, std::vector<int64_t>{1, 0});
  EXPECT_EQ(p.method, HostPairing::kRank);
  EXPECT_THAT(Names(p.b_of_a, b), ElementsAre("node-a", "node-b"));
  EXPECT_EQ(p.note, "");
  // Different ranks and names, one host a side: one to one (HTA's rank-3 vs rank-1).
  a = {"rank-3"};
  b = {"rank-1"};
  p = PairHosts(a, std::vector<int64_t>{3}, b, std::vector<int64_t>{1});
  EXPECT_EQ(p.method, HostPairing::kSingle);
  EXPECT_THAT(Names(p.b_of_a, b), ElementsAre("rank-1"));
  // Two runs of one job, named by run: by role, in the numbers' order.
  a = {"job7-worker-1", "job7-worker-0", "job7-ps-0"};
  b = {"job9-worker-0", "job9-ps-0", "job9-worker-1"};
  p = PairHosts(a, {}, b, {});
  EXPECT_EQ(p.method, HostPairing::kRole);
  EXPECT_THAT(Names(p.b_of_a, b), ElementsAre("job9-worker-1", "job9-worker-0", "job9-ps-0"));
  // Nothing in common but the count: by position.
  a = {"alpha", "beta"};
  b = {"gamma", "delta"};
  p = PairHosts(a, {}, b, {});
  EXPECT_EQ(p.method, HostPairing::kPosition);
  EXPECT_THAT(Names(p.b_of_a, b), ElementsAre("gamma", "delta"));
  // Nothing in common, not even the count: none, said.
  b = {"gamma"};
  p = PairHosts(a, {}, b, {});
  EXPECT_EQ(p.method, HostPairing::kUnpaired);
  EXPECT_THAT(Names(p.b_of_a, b), ElementsAre("-", "-"));
  EXPECT_EQ(p.note, "no host paired: the runs share no rank, name or role, and A has 2 hosts, B 1");
  // A rank one side states and the other does not: by name.
  a = {"w0", "w1"};
  b = {"w1", "w0"};
  p = PairHosts(a, std::vector<int64_t>{0, 1}, b, {});
  EXPECT_EQ(p.method, HostPairing::kName);
  EXPECT_THAT(Names(p.b_of_a, b), ElementsAre("w0", "w1"));
}

// One host a side with the H100 pair's shape: the largest change is the device-to-device
// copies, 18 -> 4,608 a step, +15 ms a step; the d2d category grew a little less (copies
// overlap).
TEST(DiffHeadlineTest, SaysWhatChangedMostFirst) {
  PodBreakdown a, b;
  a.steps = Steps(12, 0, "", Category::kIdle);
  b.steps = Steps(12, 0, "", Category::kIdle);
  a.hosts = {Host("rank-3", 12, 30, 10, 1, 0)};
  b.hosts = {Host("rank-1", 12, 45, 10, 1, 0)};
  a.hosts[0].categories[static_cast<size_t>(Category::kDeviceToDevice)].mean_ns = 0.1 * kMs;
  b.hosts[0].categories[static_cast<size_t>(Category::kDeviceToDevice)].mean_ns = 14.8 * kMs;
  const std::vector<DeviceTransferStat> ta = {
      {"Memcpy DtoD (Device -> Device)", TransferKind::kDeviceToDevice, 18 * 12, 12 * kMs / 10},
      {"Memset (Device)", TransferKind::kMemset, 5 * 12, 12 * kMs / 100}};
  const std::vector<DeviceTransferStat> tb = {
      {"Memcpy DtoD (Device -> Device)", TransferKind::kDeviceToDevice, 4608 * 12,
       12 * 151 * kMs / 10},
      {"Memset (Device)", TransferKind::kMemset, 5 * 12, 12 * kMs / 100}};
  const std::vector<KernelStat> kernels = {Kernel("gemm", "aten::mm", 120 * kMs, 12)};
  const Diff d = ComputeDiff({&a, true, kernels, {}, ta, std::vector<int64_t>{3}},
                             {&b, true, kernels, {}, tb, std::vector<int64_t>{1}});
  EXPECT_EQ(d.pairing, HostPairing::kSingle);
  ASSERT_EQ(d.hosts.size(), 1u);
  EXPECT_EQ(d.hosts[0].host, "rank-3 / rank-1");
  EXPECT_EQ(d.hosts[0].rank_a, 3);
  EXPECT_EQ(d.hosts[0].rank_b, 1);
  EXPECT_EQ(d.headline.what, DiffHeadline::What::kTransfer);
  EXPECT_EQ(d.headline.sentence, "device-to-device copies +15.0 ms per step (18 -> 4,608 a step)");
  // The copies are in the kernel list, marked; the unchanged memsets and gemm are not.
  ASSERT_EQ(d.kernels.size(), 1u);
  EXPECT_EQ(d.kernels[0].name, "Memcpy DtoD (Device -> Device)");
  EXPECT_EQ(d.kernels[0].transfer, TransferKind::kDeviceToDevice);
  EXPECT_EQ(d.kernels[0].occurrences.b, 4608 * 12);
  // Per kind.
  ASSERT_EQ(d.transfers.size(), 2u);
  EXPECT_EQ(d.transfers[0].kind, TransferKind::kDeviceToDevice);
  EXPECT_EQ(d.transfers[0].ns_per_step.delta(), 15 * kMs);
  EXPECT_EQ(d.transfers[1].kind, TransferKind::kMemset);
  EXPECT_EQ(d.transfers[1].ns_per_step.delta(), 0);
  // The pod's categories: the average host's.
  EXPECT_EQ(d.pod_categories[static_cast<size_t>(Category::kDeviceToDevice)].delta(), 14'700'000);
  EXPECT_EQ(d.pod_hosts.a, 1);
}

TEST(DiffHeadlineTest, ACategoryIsNamedWithTheKernelThatMakesMostOfIt) {
  PodBreakdown a, b;
  a.steps = Steps(10, 0, "", Category::kIdle);
  b.steps = Steps(10, 0, "", Category::kIdle);
  a.hosts = {Host("w0", 10, 100, 60, 10, 0), Host("w1", 10, 100, 60, 10, 0)};
  b.hosts = {Host("w0", 10, 120, 80, 10, 0), Host("w1", 10, 120, 80, 10, 0)};
  // gemm: 2 hosts x 10 steps: 10 -> 28 ms per step and host (+18 of the +20 ms compute).
  const std::vector<KernelStat> ka = {Kernel("gemm", "aten::mm", 200 * kMs, 200)};
  const std::vector<KernelStat> kb = {Kernel("gemm", "aten::mm", 560 * kMs, 240)};
  const Diff d = ComputeDiff({&a, true, ka, {}}, {&b, true, kb, {}});
  EXPECT_EQ(d.headline.what, DiffHeadline::What::kCategory);
  EXPECT_EQ(d.headline.name, "compute");
  EXPECT_EQ(d.headline.sentence,
            "compute time +20.0 ms per step (60.0 -> 80.0 ms) on the average host, mostly gemm "
            "+18.0 ms per step (10 -> 12 a step)");

  // Nothing changed.
  const Diff same = ComputeDiff({&a, true, ka, {}}, {&a, true, ka, {}});
  EXPECT_EQ(same.headline.what, DiffHeadline::What::kNothing);
  EXPECT_EQ(same.headline.sentence, "nothing changed by 0.05 ms per step or more");
}

TEST(DiffPairsTest, TheStragglerIsComparedThroughThePairs) {
  PodBreakdown a, b;
  a.steps = Steps(10, 8, "job1-w-1", Category::kCompute);
  b.steps = Steps(10, 8, "job2-w-1", Category::kCompute);
  NameStraggler(&a, "job1-w-1", 8, Category::kCompute);
  NameStraggler(&b, "job2-w-1", 8, Category::kCompute);
  a.hosts = {Host("job1-w-0", 10, 100, 60, 10, 0), Host("job1-w-1", 10, 100, 80, 5, 8)};
  b.hosts = {Host("job2-w-0", 10, 100, 60, 10, 0), Host("job2-w-1", 10, 100, 80, 5, 8)};
  Diff d = ComputeDiff({&a, false, {}, {}}, {&b, false, {}, {}});
  EXPECT_EQ(d.pairing, HostPairing::kRole);
  EXPECT_EQ(d.hosts[1].host, "job1-w-1 / job2-w-1");
  EXPECT_FALSE(d.straggler_changed);  // the same pair
  EXPECT_FALSE(d.cause_changed);
  // The straggler moves to the other pair.
  b.steps = Steps(10, 8, "job2-w-0", Category::kCompute);
  NameStraggler(&b, "job2-w-0", 8, Category::kCompute);
  b.hosts[0].straggler_steps = 8;
  b.hosts[1].straggler_steps = 0;
  d = ComputeDiff({&a, false, {}, {}}, {&b, false, {}, {}});
  EXPECT_TRUE(d.straggler_changed);
}

TEST(DeviceTransfersTest, CopiesByDirectionAndMemsetsNotKernels) {
  ToolTrace t;
  const auto add = [&](const char* name, OpKind kind, bool kernel, int64_t ns) {
    DeviceEvent e;
    e.name = t.strings.Intern(name);
    e.kind = kind;
    e.is_kernel = kernel;
    e.start_ns = 1000;
    e.end_ns = 1000 + ns;
    t.device_events.push_back(e);
  };
  add("Memcpy DtoD (Device -> Device)", OpKind::kMemcpyD2D, false, 300);
  add("Memcpy DtoD (Device -> Device)", OpKind::kMemcpyD2D, false, 200);
  add("Memcpy HtoD (Pinned -> Device)", OpKind::kMemcpyH2D, false, 100);
  add("Memset (Device)", OpKind::kDeviceCompute, false, 50);
  add("gemm", OpKind::kDeviceCompute, true, 900);
  add("ncclDevKernel_AllReduce", OpKind::kCollective, true, 900);
  const std::vector<DeviceTransferStat> x = ComputeDeviceTransfers(t);
  ASSERT_EQ(x.size(), 3u);
  EXPECT_EQ(x[0].name, "Memcpy DtoD (Device -> Device)");
  EXPECT_EQ(x[0].kind, TransferKind::kDeviceToDevice);
  EXPECT_EQ(x[0].occurrences, 2);
  EXPECT_EQ(x[0].total_ns, 500);
  EXPECT_EQ(x[1].kind, TransferKind::kHostToDevice);
  EXPECT_EQ(x[2].kind, TransferKind::kMemset);
  const std::vector<DeviceTransferStat> pod = MergeDeviceTransfers({x, x});
  ASSERT_EQ(pod.size(), 3u);
  EXPECT_EQ(pod[0].occurrences, 4);
  EXPECT_EQ(pod[0].total_ns, 1000);
}

}  // namespace
}  // namespace profctl::analysis
