// Truth tests for the pod step breakdown: the synthetic job knows what it injected (straggler
// rank and factor, input stall, all-reduce time, jitter), so the breakdown of its traces, read
// back through the XSpace reader with each host's clock offset, must recover it: per step and
// device within 1 % of the job's own plan, and the right straggler and cause in every step.
#include <cstdlib>
#include <map>

#include "absl/strings/str_cat.h"
#include "analysis/breakdown.h"
#include "analysis/readers/xspace_reader.h"
#include "common/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "synthetic/synthetic_job.h"
#include "tests/status_matchers.h"
#include "tests/test_time.h"

using ::profctl::testkit::IsOk;

namespace profctl {
namespace {

using analysis::Category;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

using ::profctl::test_time::kT0;
constexpr int kWorld = 4;
constexpr int64_t kSkewNs[kWorld] = {0, -1537 * kNanosPerMilli, 263 * kNanosPerMilli,
                                     4011 * kNanosPerMilli};

synthetic::SyntheticJobConfig TruthJob(int rank, double jitter, int64_t input_stall_ms) {
  synthetic::SyntheticJobConfig c;
  c.rank = rank;
  c.world = kWorld;
  c.seed = 11;
  c.step_ms = 100;
  c.gpus = 2;
  c.kernels_per_step = 6;
  c.straggler_rank = 1;
  c.straggler_factor = 1.5;
  c.input_stall_rank = 2;
  c.input_stall_ms = input_stall_ms;
  c.allreduce_ms = 15;
  c.jitter = jitter;
  c.clock_skew_ns = kSkewNs[rank];
  return c;
}

struct Pod {
  std::vector<synthetic::SyntheticJob> jobs;
  std::vector<analysis::HostSummary> summaries;
  analysis::PodBreakdown breakdown;
};

Pod Capture(double jitter, int64_t input_stall_ms, int64_t seconds) {
  Pod pod;
  for (int r = 0; r < kWorld; ++r) {
    pod.jobs.emplace_back(TruthJob(r, jitter, input_stall_ms));
    tensorflow::profiler::XSpace space;
    pod.jobs.back().Generate(kT0, kT0 + seconds * kNanosPerSecond, &space);
    absl::StatusOr<analysis::HostTrace> trace =
        analysis::ReadXSpaceHost(space, absl::StrCat("rank-", r), kSkewNs[r]);
    EXPECT_THAT(trace, IsOk());
    pod.summaries.push_back(analysis::SummarizeHost(*trace));
  }
  pod.breakdown = analysis::BuildPodBreakdown(pod.summaries);
  return pod;
}

// What the job planned for one (step, rank, GPU): the categories it must come out as.
struct Truth {
  int64_t compute = 0, collectives = 0, input = 0, output = 0;
  int64_t ready = 0;  // when this GPU was ready for the all-reduce
};

Truth PlanTruth(const synthetic::SyntheticJob& job, int64_t k, int rank, int gpu) {
  const synthetic::StepPlan p = job.Plan(k, rank, gpu);
  Truth t;
  const size_t n = p.device_ops.size();
  for (size_t i = 1; i + 2 < n; ++i) t.compute += p.device_ops[i].end_ns - p.device_ops[i].start_ns;
  t.collectives = p.allreduce_end_ns - p.allreduce_start_ns;
  t.output = p.device_ops[n - 1].end_ns - p.device_ops[n - 1].start_ns;
  // The host waits for input with the device idle, then the H2D copy runs.
  t.input = (p.input_end_ns - p.start_ns) + (p.device_ops[0].end_ns - p.device_ops[0].start_ns);
  t.ready = p.allreduce_start_ns;
  return t;
}

// Within 1 % (and 2 us for tiny values).
void ExpectNear1Pct(int64_t got, int64_t want, const std::string& what) {
  const double tol = std::max(0.01 * static_cast<double>(want), 2000.0);
  EXPECT_NEAR(static_cast<double>(got), static_cast<double>(want), tol) << what;
}

TEST(BreakdownTruthTest, EveryStepAndDeviceMatchesThePlanAndCategoriesAddUp) {
  const Pod pod = Capture(/*jitter=*/0.05, /*input_stall_ms=*/20, /*seconds=*/3);
  int steps_checked = 0;
  for (int r = 0; r < kWorld; ++r) {
    const analysis::HostSummary& s = pod.summaries[r];
    EXPECT_TRUE(s.has_markers);
    // The job writes the two steps the window cuts clipped and marked (profctl_step_cut): they
    // are kept apart as partial, over their recorded part, never compared.
    EXPECT_EQ(s.partial_steps, 2);
    ASSERT_EQ(s.partial.size(), 2u);
    for (const analysis::HostStep& step : s.partial) {
      EXPECT_LT(step.end_ns - step.start_ns, pod.jobs[r].period_ns());
      EXPECT_EQ(step.host.total(), step.end_ns - step.start_ns);
    }
    ASSERT_GE(s.steps.size(), 15u) << r;
    for (const analysis::HostStep& step : s.steps) {
      const int64_t k = pod.jobs[r].StepIndexAt(step.start_ns + pod.jobs[r].period_ns() / 2);
      EXPECT_EQ(step.end_ns - step.start_ns, pod.jobs[r].period_ns());
      EXPECT_EQ(step.host.total(), step.end_ns - step.start_ns);
      ASSERT_EQ(step.devices.size(), 2u);
      for (int g = 0; g < 2; ++g) {
        const analysis::CategoryTimes& c = step.devices[g].second;
        EXPECT_EQ(c.total(), step.end_ns - step.start_ns);
        const Truth t = PlanTruth(pod.jobs[r], k, r, g);
        const std::string where = absl::StrCat("rank ", r, " gpu ", g, " step ", step.step);
        ExpectNear1Pct(c[Category::kCompute], t.compute, "compute " + where);
        ExpectNear1Pct(c[Category::kCollectives], t.collectives, "collectives " + where);
        ExpectNear1Pct(c[Category::kInput], t.input, "input " + where);
        ExpectNear1Pct(c[Category::kOutput], t.output, "output " + where);
        ++steps_checked;
      }
    }
  }
  EXPECT_GE(steps_checked, 4 * 2 * 15);
}

TEST(BreakdownTruthTest, NamesTheRightStragglerAndCauseInEveryStep) {
  const Pod pod = Capture(/*jitter=*/0.05, /*input_stall_ms=*/20, /*seconds=*/3);
  ASSERT_GE(pod.breakdown.steps.size(), 15u);
  std::map<std::string, int> stragglers;
  for (const analysis::PodStep& step : pod.breakdown.steps) {
    ASSERT_EQ(step.hosts.size(), static_cast<size_t>(kWorld));
    // The truth: the rank whose slowest GPU was ready last, which everyone waits for.
    const int64_t k = pod.jobs[0].StepIndexAt(step.hosts[0].start_ns + pod.jobs[0].period_ns() / 2);
    int last = 0;
    int64_t last_ready = 0;
    for (int r = 0; r < kWorld; ++r) {
      for (int g = 0; g < 2; ++g) {
        const int64_t ready = PlanTruth(pod.jobs[r], k, r, g).ready;
        if (ready > last_ready) {
          last_ready = ready;
          last = r;
        }
      }
    }
    EXPECT_EQ(step.straggler, absl::StrCat("rank-", last)) << "step " << step.step;
    const Category want = last == 1 ? Category::kCompute : Category::kInput;
    EXPECT_EQ(step.cause, want) << "step " << step.step << ": " << step.why;
    EXPECT_THAT(step.why, HasSubstr("waiting, not communicating"));
    ++stragglers[step.straggler];
  }
  // Rank 1's +25 ms of compute outweighs rank 2's +20 ms of input in (nearly) every step.
  EXPECT_GT(stragglers["rank-1"], static_cast<int>(pod.breakdown.steps.size()) * 3 / 4);
}

TEST(BreakdownTruthTest, RecoversTheInjectedKnobsWithoutJitter) {
  const Pod pod = Capture(/*jitter=*/0.0, /*input_stall_ms=*/20, /*seconds=*/2);
  ASSERT_GE(pod.breakdown.steps.size(), 8u);
  for (const analysis::PodStep& step : pod.breakdown.steps) {
    std::map<std::string, const analysis::PodHostStep*> h;
    for (const analysis::PodHostStep& hs : step.hosts) h[hs.host] = &hs;
    const int64_t compute0 = h["rank-0"]->categories[Category::kCompute];
    // Straggler factor 1.5 on compute.
    ExpectNear1Pct(h["rank-1"]->categories[Category::kCompute], compute0 * 3 / 2, "factor");
    // Input stall of 20 ms on rank 2.
    ExpectNear1Pct(
        h["rank-2"]->categories[Category::kInput] - h["rank-0"]->categories[Category::kInput],
        20 * kNanosPerMilli, "input stall");
    // The straggler waits for nobody: its collective is the all-reduce itself, 15 ms.
    EXPECT_EQ(step.straggler, "rank-1");
    ExpectNear1Pct(h["rank-1"]->categories[Category::kCollectives], 15 * kNanosPerMilli,
                   "all-reduce");
    EXPECT_EQ(step.cause, Category::kCompute);
    ExpectNear1Pct(step.cause_excess_ns, compute0 / 2, "cause excess");
  }
  ASSERT_EQ(pod.breakdown.verdict.consistently_slow.HostNames().size(), 1u);
  EXPECT_EQ(pod.breakdown.verdict.consistently_slow.HostNames()[0], "rank-1");
}

// Ranks of one job with every knob but the straggler at its default: 100 ms steps, 5 % jitter.
analysis::PodBreakdown JitterPod(int world, int64_t straggler_rank, double factor,
                                 int64_t seconds) {
  std::vector<analysis::HostSummary> summaries;
  for (int r = 0; r < world; ++r) {
    synthetic::SyntheticJobConfig c;
    c.rank = r;
    c.world = world;
    c.seed = 23;
    c.gpus = 2;
    c.straggler_rank = straggler_rank;
    c.straggler_factor = factor;
    synthetic::SyntheticJob job(c);
    tensorflow::profiler::XSpace space;
    job.Generate(kT0, kT0 + seconds * kNanosPerSecond, &space);
    absl::StatusOr<analysis::HostTrace> trace =
        analysis::ReadXSpaceHost(space, absl::StrCat("rank-", r), 0);
    EXPECT_THAT(trace, IsOk());
    summaries.push_back(analysis::SummarizeHost(*trace));
  }
  return analysis::BuildPodBreakdown(summaries);
}

TEST(BreakdownTruthTest, JitterAloneNamesNoStragglerAndNobodyIsConsistentlySlow) {
  for (const int world : {2, 4, 8}) {
    SCOPED_TRACE(testing::Message() << world << " ranks");
    const analysis::PodBreakdown pod = JitterPod(world, -1, 1.0, 10);
    ASSERT_GE(pod.steps.size(), 90u);
    const auto named =
        std::count_if(pod.steps.begin(), pod.steps.end(),
                      [](const analysis::PodStep& s) { return !s.straggler.empty(); });
    EXPECT_LE(named * 20, static_cast<int64_t>(pod.steps.size()));  // at most 5 %
    EXPECT_THAT(pod.verdict.consistently_slow.HostNames(), IsEmpty());
  }
}

TEST(BreakdownTruthTest, A30PercentComputeStragglerIsNamedInEveryStep) {
  for (const int world : {2, 4, 8}) {
    SCOPED_TRACE(testing::Message() << world << " ranks");
    const analysis::PodBreakdown pod = JitterPod(world, 1, 1.3, 5);
    ASSERT_GE(pod.steps.size(), 45u);
    for (const analysis::PodStep& step : pod.steps) {
      EXPECT_EQ(step.straggler, "rank-1") << "step " << step.step << ": " << step.why;
      EXPECT_EQ(step.cause, Category::kCompute) << "step " << step.step;
    }
    EXPECT_THAT(pod.verdict.consistently_slow.HostNames(), ElementsAre("rank-1"));
  }
}

}  // namespace
}  // namespace profctl
