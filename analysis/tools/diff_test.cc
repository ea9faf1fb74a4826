#include "analysis/tools/diff.h"

#include <cmath>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace profctl::analysis {
namespace {

constexpr int64_t kMs = 1'000'000;

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
    a_.pod_step_time.mean_ns = 100.0 * kMs;
    a_.hosts = {Host("w0", 10, 100, 60, 10, 0), Host("w1", 10, 100, 80, 5, 8),
                Host("w2", 10, 100, 50, 30, 0)};
    a_.consistently_slow = {"w1"};
    a_.outliers = {{.host = "w1",
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
    b_.pod_step_time.mean_ns = 80.0 * kMs;
    b_.outliers = {{.host = "w0",
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

}  // namespace
}  // namespace profctl::analysis
