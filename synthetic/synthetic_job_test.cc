#include "synthetic/synthetic_job.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/clock.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"
#include "tests/status_matchers.h"
#include "tests/test_time.h"
#include "xspace/xspace.h"

using ::profctl::testkit::IsOk;

namespace profctl::synthetic {
namespace {

using ::testing::HasSubstr;

using ::profctl::test_time::kT0;

SyntheticJobConfig Job(int64_t rank) {
  return *ParseSyntheticJobConfig(
      "world=4,seed=11,step_ms=50,gpus=2,kernels_per_step=5,straggler_rank=1,"
      "straggler_factor=2,input_stall_rank=2,input_stall_ms=20,rank=" +
      std::to_string(rank));
}

TEST(SyntheticJobConfigTest, ParsesKnobsAndDefaults) {
  absl::StatusOr<SyntheticJobConfig> c = ParseSyntheticJobConfig(" rank=1, world=2 ,jitter=0.1");
  ASSERT_THAT(c, IsOk());
  EXPECT_EQ(c->rank, 1);
  EXPECT_EQ(c->world, 2);
  EXPECT_DOUBLE_EQ(c->jitter, 0.1);
  EXPECT_EQ(c->step_ms, 100);
  EXPECT_THAT(ParseSyntheticJobConfig(""), IsOk());
}

TEST(SyntheticJobConfigTest, BadKnobsAreNamed) {
  EXPECT_THAT(ParseSyntheticJobConfig("bogus=1").status().message(),
              HasSubstr("unknown knob 'bogus' (known: rank, world"));
  EXPECT_THAT(ParseSyntheticJobConfig("world=x").status().message(),
              HasSubstr("world must be a whole number, got 'x'"));
  EXPECT_THAT(ParseSyntheticJobConfig("rank=4,world=4").status().message(),
              HasSubstr("rank=4 is out of range"));
  EXPECT_THAT(ParseSyntheticJobConfig("rank").status().message(), HasSubstr("not key=value"));
  EXPECT_THAT(ParseSyntheticJobConfig("straggler_factor=0.5").status().message(),
              HasSubstr("straggler_factor"));
  EXPECT_THAT(ParseSyntheticJobConfig("jitter=nan").status().message(), HasSubstr("jitter"));
  EXPECT_THAT(ParseSyntheticJobConfig("gpus=0").status().message(), HasSubstr("gpus=0"));
  // Once accepted silently: `rank=1=2` as rank=1, and a knob given twice as its last value.
  EXPECT_THAT(ParseSyntheticJobConfig("rank=1=2,world=4").status().message(),
              HasSubstr("'rank=1=2' is not key=value"));
  EXPECT_THAT(ParseSyntheticJobConfig("rank=1,world=4,rank=2").status().message(),
              HasSubstr("'rank' is given more than once"));
}

TEST(SyntheticJobTest, EveryRankDerivesTheSameSchedule) {
  std::vector<SyntheticJob> ranks;
  for (int r = 0; r < 4; ++r) ranks.emplace_back(Job(r));
  const int64_t k = ranks[0].StepIndexAt(kT0);
  for (int r = 1; r < 4; ++r) {
    EXPECT_EQ(ranks[r].period_ns(), ranks[0].period_ns());
    EXPECT_EQ(ranks[r].StepStartNs(k), ranks[0].StepStartNs(k));
  }
  // The all-reduce ends at one true instant on every rank and GPU.
  const int64_t end = ranks[0].Plan(k, 0, 0).allreduce_end_ns;
  for (int r = 0; r < 4; ++r) {
    for (int g = 0; g < 2; ++g) EXPECT_EQ(ranks[r].Plan(k, r, g).allreduce_end_ns, end);
  }
}

TEST(SyntheticJobTest, RanksSharingAMemoComputeEachStepOnceAndAgreeWithOwnMemos) {
  // An agent serving many ranks (--endpoints) shares one memo: the job-wide all-reduce end of a
  // step is computed once, not once per rank and GPU (O(world^2) per pod capture).
  auto memo = std::make_shared<SyntheticStepMemo>(Job(0));
  std::vector<SyntheticJob> shared, own;
  for (int r = 0; r < 4; ++r) {
    SyntheticJobConfig c = Job(r);
    c.clock_skew_ns = r * kNanosPerMilli;  // not part of the job: still shares
    shared.emplace_back(c, memo);
    own.emplace_back(c);
  }
  const int64_t k0 = shared[0].StepIndexAt(kT0);
  for (int64_t k = k0; k < k0 + 5; ++k) {
    for (int r = 0; r < 4; ++r) {
      for (int g = 0; g < 2; ++g) {
        EXPECT_EQ(shared[r].Plan(k, r, g).allreduce_end_ns, own[r].Plan(k, r, g).allreduce_end_ns)
            << "step " << k << " rank " << r << " gpu " << g;
      }
    }
  }
  EXPECT_EQ(memo->computed(), 5);  // 5 steps, not 5 x 4 ranks x 2 GPUs

  // A memo of another job (a different seed) is not used: its answers would be wrong here.
  SyntheticJobConfig other = Job(1);
  other.seed += 1;
  const SyntheticJob stranger(other, memo);
  EXPECT_EQ(stranger.Plan(k0, 1, 0).allreduce_end_ns,
            SyntheticJob(other).Plan(k0, 1, 0).allreduce_end_ns);
  EXPECT_EQ(memo->computed(), 5);
  EXPECT_FALSE(SameSyntheticJob(Job(0), other));
  EXPECT_TRUE(SameSyntheticJob(Job(0), Job(3)));
}

TEST(SyntheticJobTest, StragglerIsLastReadyAndOthersWaitInsideTheAllReduce) {
  SyntheticJob job(Job(0));
  for (int64_t k = job.StepIndexAt(kT0); k < job.StepIndexAt(kT0) + 20; ++k) {
    const StepPlan straggler = job.Plan(k, 1, 0);
    for (int r : {0, 3}) {
      const StepPlan healthy = job.Plan(k, r, 0);
      EXPECT_GT(straggler.allreduce_start_ns, healthy.allreduce_start_ns);
      // Healthy ranks wait for the straggler: their all-reduce kernel is longer.
      EXPECT_GT(healthy.allreduce_end_ns - healthy.allreduce_start_ns,
                straggler.allreduce_end_ns - straggler.allreduce_start_ns);
    }
  }
}

// The compute time of (rank, gpu) in step k: from the first kernel's start to the last one's end.
int64_t ComputeNs(const StepPlan& p) {
  // device_ops: H2D, kernels..., all-reduce, D2H.
  return p.device_ops[p.device_ops.size() - 3].end_ns - p.device_ops[1].start_ns;
}

TEST(SyntheticJobTest, AnIntermittentStragglerIsSlowOnlyInEveryNthStep) {
  SyntheticJob job(*ParseSyntheticJobConfig(
      "world=4,seed=3,step_ms=50,jitter=0.02,straggler_rank=1,straggler_factor=1.5,"
      "straggler_every=3"));
  const int64_t k0 = job.StepIndexAt(kT0);
  for (int64_t k = k0; k < k0 + 30; ++k) {
    const double ratio = static_cast<double>(ComputeNs(job.Plan(k, 1, 0))) /
                         static_cast<double>(ComputeNs(job.Plan(k, 0, 0)));
    if (k % 3 == 0) {
      EXPECT_GT(ratio, 1.35) << "step " << k;
    } else {
      EXPECT_LT(ratio, 1.1) << "step " << k;
    }
  }
}

TEST(SyntheticJobTest, OneSlowGpuOfTheStragglerIsSlowAndItsSiblingsAreNot) {
  SyntheticJob job(*ParseSyntheticJobConfig(
      "world=2,seed=5,step_ms=50,gpus=4,jitter=0.02,straggler_rank=1,straggler_factor=1.5,"
      "slow_gpu=2"));
  const int64_t k0 = job.StepIndexAt(kT0);
  for (int64_t k = k0; k < k0 + 10; ++k) {
    const auto of = [&](int64_t rank, int64_t gpu) {
      return static_cast<double>(ComputeNs(job.Plan(k, rank, gpu)));
    };
    for (int64_t g = 0; g < 4; ++g) {
      const double ratio = of(1, g) / of(0, g);
      if (g == 2) {
        EXPECT_GT(ratio, 1.35) << "step " << k;
      } else {
        EXPECT_LT(ratio, 1.1) << "step " << k << " gpu " << g;
      }
    }
  }
  EXPECT_THAT(ParseSyntheticJobConfig("gpus=2,slow_gpu=1").status().message(),
              HasSubstr("give straggler_rank too"));
  EXPECT_THAT(ParseSyntheticJobConfig("gpus=2,straggler_rank=0,slow_gpu=2").status().message(),
              HasSubstr("slow_gpu=2 is out of range"));
}

TEST(SyntheticJobTest, StudentTJitterHasHeavyTailsAndUniformJitterHasNone) {
  // Compute times of many (step, rank) pairs, relative to their median.
  const auto deviations = [](absl::string_view knobs) {
    SyntheticJob job(*ParseSyntheticJobConfig(absl::StrCat("world=16,seed=9,step_ms=50,", knobs)));
    std::vector<double> out;
    const int64_t k0 = job.StepIndexAt(kT0);
    for (int64_t k = k0; k < k0 + 200; ++k) {
      for (int64_t r = 0; r < 16; ++r)
        out.push_back(static_cast<double>(ComputeNs(job.Plan(k, r, 0))));
    }
    std::vector<double> sorted = out;
    std::sort(sorted.begin(), sorted.end());
    const double median = sorted[sorted.size() / 2];
    for (double& x : out) x = x / median - 1;
    return out;
  };
  const auto beyond = [](const std::vector<double>& d, double limit) {
    return std::count_if(d.begin(), d.end(), [&](double x) { return std::abs(x) > limit; });
  };
  const std::vector<double> uniform = deviations("jitter=0.05");
  const std::vector<double> heavy = deviations("jitter=0.05,jitter_dof=3");
  // Uniform: never beyond its bound (and the median's own draw). Student-t(3) x 0.05: P(|t| > 4)
  // ~ 2.8 %, so beyond 20 % in about 90 of 3,200 draws; never beyond the clip of 10 jitters.
  EXPECT_EQ(beyond(uniform, 0.06), 0);
  EXPECT_GT(beyond(heavy, 0.2), 40);
  EXPECT_LT(beyond(heavy, 0.2), 200);
  EXPECT_EQ(beyond(heavy, 0.55), 0);
  EXPECT_THAT(ParseSyntheticJobConfig("jitter_dof=31").status().message(),
              HasSubstr("jitter_dof=31 is out of range"));
}

TEST(SyntheticJobTest, InputStallRankWaitsLongerForInput) {
  SyntheticJob job(Job(0));
  const int64_t k = job.StepIndexAt(kT0);
  const StepPlan stalled = job.Plan(k, 2, 0);
  const StepPlan healthy = job.Plan(k, 0, 0);
  const int64_t stalled_input = stalled.input_end_ns - stalled.start_ns;
  const int64_t healthy_input = healthy.input_end_ns - healthy.start_ns;
  // 10% of 50 ms +-5% jitter, plus the 20 ms stall.
  EXPECT_GE(stalled_input, 20 * kNanosPerMilli + 4'750'000);
  EXPECT_LE(healthy_input, 5'250'000);
}

TEST(SyntheticJobTest, StepsNeverOverlapAndOpsStayInsideTheirStep) {
  SyntheticJob job(Job(0));
  for (int64_t k = job.StepIndexAt(kT0); k < job.StepIndexAt(kT0) + 50; ++k) {
    for (int r = 0; r < 4; ++r) {
      const StepPlan p = job.Plan(k, r, 1);
      EXPECT_EQ(p.end_ns, job.StepStartNs(k + 1));
      ASSERT_EQ(p.host_calls.size(), 5u + 4);
      ASSERT_EQ(p.device_ops.size(), 5u + 3);
      for (const auto& op : p.host_calls) {
        EXPECT_GE(op.start_ns, p.input_end_ns);
        EXPECT_LE(op.end_ns, p.end_ns);
      }
      for (size_t i = 0; i < p.device_ops.size(); ++i) {
        // A device op never starts before its launch ends.
        EXPECT_GE(p.device_ops[i].start_ns, p.host_calls[i].end_ns);
        EXPECT_LE(p.device_ops[i].end_ns, p.end_ns);
      }
    }
  }
}

// A slowdown from one instant on: every rank switches at the same step, the steps stay back to
// back with their ops inside them, and the period and compute grow by the factor.
TEST(SyntheticJobTest, SlowdownStretchesEveryStepFromOneInstantOnEveryRank) {
  const int64_t at = kT0 + 1234 * kNanosPerMilli;
  auto slow = [&](int64_t rank) {
    SyntheticJobConfig c = Job(rank);
    c.slowdown_at_ms = at / kNanosPerMilli;
    c.slowdown_factor = 1.6;
    return c;
  };
  SyntheticJob healthy(Job(0));
  std::vector<SyntheticJob> ranks;
  for (int r = 0; r < 4; ++r) ranks.emplace_back(slow(r));
  const SyntheticJob& job = ranks[0];
  const int64_t first_slow = job.StepIndexAt(at) + (job.StepStartNs(job.StepIndexAt(at)) < at);
  EXPECT_GE(job.StepStartNs(first_slow), at);
  EXPECT_LT(job.StepStartNs(first_slow - 1), at);
  EXPECT_EQ(job.PeriodNs(first_slow - 1), healthy.period_ns());
  // The slow steps are those of the same job at 1.6 x step_ms (fixed costs such as the input
  // stall do not grow).
  SyntheticJobConfig longer = Job(0);
  longer.step_ms = 80;
  EXPECT_EQ(job.PeriodNs(first_slow), SyntheticJob(longer).period_ns());
  EXPECT_GT(job.PeriodNs(first_slow), healthy.period_ns() * 13 / 10);
  // Before the slowdown the job is the healthy one.
  for (int64_t k = first_slow - 20; k < first_slow; ++k) {
    EXPECT_EQ(job.StepStartNs(k), healthy.StepStartNs(k));
    EXPECT_EQ(job.Plan(k, 0, 0).allreduce_end_ns, healthy.Plan(k, 0, 0).allreduce_end_ns);
  }
  for (int64_t k = first_slow - 5; k < first_slow + 30; ++k) {
    for (int r = 0; r < 4; ++r) {
      EXPECT_EQ(ranks[r].StepStartNs(k), job.StepStartNs(k));
      const StepPlan p = ranks[r].Plan(k, r, 1);
      EXPECT_EQ(p.end_ns, job.StepStartNs(k + 1));
      EXPECT_EQ(p.allreduce_end_ns, job.Plan(k, 0, 0).allreduce_end_ns);
      for (const auto& op : p.device_ops) EXPECT_LE(op.end_ns, p.end_ns);
    }
    // StepIndexAt inverts StepStartNs on both sides of the switch.
    EXPECT_EQ(job.StepIndexAt(job.StepStartNs(k)), k);
    EXPECT_EQ(job.StepIndexAt(job.StepStartNs(k + 1) - 1), k);
  }
  // Compute takes longer after the switch (the kernels of rank 0, GPU 0).
  auto compute = [](const StepPlan& p) {
    return p.device_ops[p.device_ops.size() - 3].end_ns - p.device_ops[1].start_ns;
  };
  EXPECT_GT(compute(job.Plan(first_slow + 1, 0, 0)), compute(job.Plan(first_slow - 1, 0, 0)));
  EXPECT_THAT(ParseSyntheticJobConfig("slowdown_factor=0.5").status().message(),
              HasSubstr("slowdown_factor"));
  EXPECT_THAT(ParseSyntheticJobConfig("slowdown_at_ms=-1").status().message(),
              HasSubstr("slowdown_at_ms"));
  EXPECT_THAT(ParseSyntheticJobConfig("slowdown_at_ms=1767225600000,slowdown_factor=2"), IsOk());
}

// Checks XSpace's rule that events on one line nest but never partly overlap.
void ExpectProperNesting(int64_t profile_start_ns, const xspace::XPlane& plane) {
  for (const auto& line : plane.lines()) {
    std::vector<std::pair<int64_t, int64_t>> open;  // stack of [start, end)
    for (const auto& e : line.events()) {
      const int64_t s = xspace::EventStartNs(profile_start_ns, line, e);
      const int64_t end = xspace::EventEndNs(profile_start_ns, line, e);
      while (!open.empty() && open.back().second <= s) open.pop_back();
      if (!open.empty()) {
        EXPECT_LE(end, open.back().second) << plane.name() << " " << line.name();
      }
      open.emplace_back(s, end);
    }
  }
}

TEST(SyntheticJobTest, SlowdownAtAStepStartsAtThatStepOnEveryRank) {
  SyntheticJob healthy(Job(0));
  const int64_t k0 = healthy.StepIndexAt(kT0);
  std::vector<SyntheticJob> ranks;
  for (int r = 0; r < 4; ++r) {
    SyntheticJobConfig c = Job(r);
    c.slowdown_at_step = k0 + 10;
    c.slowdown_factor = 2;
    ranks.emplace_back(c);
  }
  SyntheticJobConfig longer = Job(0);
  longer.step_ms = 100;
  for (const SyntheticJob& job : ranks) {
    EXPECT_EQ(job.PeriodNs(k0 + 9), healthy.period_ns());
    EXPECT_EQ(job.PeriodNs(k0 + 10), SyntheticJob(longer).period_ns());
    EXPECT_EQ(job.StepStartNs(k0 + 10), healthy.StepStartNs(k0 + 10));
    EXPECT_EQ(job.StepStartNs(k0 + 11), ranks[0].StepStartNs(k0 + 11));
    EXPECT_GT(job.StepStartNs(k0 + 11), healthy.StepStartNs(k0 + 11));
  }
  EXPECT_THAT(ParseSyntheticJobConfig("slowdown_at_step=5,slowdown_at_ms=5").status().message(),
              HasSubstr("give one"));
  EXPECT_THAT(ParseSyntheticJobConfig("slowdown_at_step=-1").status().message(),
              HasSubstr("slowdown_at_step=-1 is out of range"));
}

TEST(SyntheticJobTest, AHungRankNeverEntersTheAllReduceAndTheOthersWaitInIt) {
  const int64_t k0 = SyntheticJob(Job(0)).StepIndexAt(kT0);
  const int64_t hang = k0 + 5;
  std::vector<SyntheticJob> ranks;
  for (int r = 0; r < 4; ++r) {
    SyntheticJobConfig c = Job(r);
    c.hang_rank = 3;
    c.hang_at_step = hang;
    ranks.emplace_back(c);
  }
  const SyntheticJob& job = ranks[0];
  EXPECT_EQ(job.hang_step(), hang);
  // Steps before it are the healthy job's; time stops advancing the step index at the hang.
  EXPECT_EQ(job.Plan(hang - 1, 0, 0).allreduce_end_ns,
            SyntheticJob(Job(0)).Plan(hang - 1, 0, 0).allreduce_end_ns);
  EXPECT_EQ(job.StepIndexAt(job.StepStartNs(hang) + 3600 * kNanosPerSecond), hang);
  for (int r = 0; r < 4; ++r) {
    const StepPlan p = ranks[r].Plan(hang, r, 1);
    EXPECT_EQ(p.end_ns, SyntheticJob::kNever);
    EXPECT_EQ(p.allreduce_end_ns, SyntheticJob::kNever);
    const bool entered =
        std::any_of(p.host_calls.begin(), p.host_calls.end(),
                    [](const StepPlan::Op& op) { return op.name == "ncclAllReduce"; });
    EXPECT_EQ(entered, r != 3) << "rank " << r;
    EXPECT_EQ(p.host_calls.size(), p.device_ops.size());
  }
  // A window an hour after the hang: the hung step's marker, cut; on a waiting rank its
  // ncclAllReduce launch and no all-reduce kernel (CUPTI records none that never completes);
  // on the hung rank no launch; no later step.
  const int64_t start = job.StepStartNs(hang) - 2 * job.period_ns();
  const int64_t stop = job.StepStartNs(hang) + 3600 * kNanosPerSecond;
  for (int r : {0, 3}) {
    tensorflow::profiler::XSpace space;
    ranks[r].Generate(start, stop, &space);
    ASSERT_THAT(xspace::Validate(space), IsOk());
    int launches = 0, allreduces = 0, steps = 0;
    for (const auto& plane : space.planes()) {
      for (const auto& line : plane.lines()) {
        for (const auto& e : line.events()) {
          const std::string& name = plane.event_metadata().at(e.metadata_id()).name();
          launches += name == "ncclAllReduce";
          allreduces += absl::StartsWith(name, "ncclDevKernel");
          steps += name == "train";
        }
      }
    }
    EXPECT_EQ(steps, 3) << "rank " << r;  // hang - 2, hang - 1, and the cut hung step
    EXPECT_EQ(launches, r == 3 ? 4 : 6) << "rank " << r;  // 2 GPUs
    EXPECT_EQ(allreduces, 4) << "rank " << r;             // the two finished steps'
  }
  EXPECT_THAT(ParseSyntheticJobConfig("world=4,hang_rank=1").status().message(),
              HasSubstr("go together"));
  EXPECT_THAT(ParseSyntheticJobConfig("world=4,hang_rank=4,hang_at_step=9").status().message(),
              HasSubstr("hang_rank=4 is out of range"));
}

TEST(SyntheticJobTest, GenerateEmitsWholeEventsInsideTheWindowWithLinkedCorrelationIds) {
  SyntheticJob job(Job(1));
  const int64_t start = kT0 + 3 * kNanosPerMilli, stop = start + 700 * kNanosPerMilli;
  tensorflow::profiler::XSpace space;
  job.Generate(start, stop, &space);
  ASSERT_EQ(space.planes_size(), 4);  // host + 2 GPUs + Task Environment
  EXPECT_EQ(space.planes(0).name(), "/host:CPU");
  EXPECT_EQ(space.planes(1).name(), "/device:GPU:0");
  EXPECT_EQ(space.planes(2).name(), "/device:GPU:1");
  EXPECT_EQ(space.planes(3).name(), xspace::kTaskEnvPlaneName);
  ASSERT_THAT(xspace::Validate(space), IsOk()) << xspace::Validate(space);
  const int64_t profile_start = xspace::ProfileStartNs(space);
  EXPECT_EQ(profile_start, start);  // no skew: agent clock == true time
  EXPECT_EQ(xspace::ProfileStopNs(space), stop);

  int64_t full_steps = 0;
  for (int64_t k = job.StepIndexAt(start); k <= job.StepIndexAt(stop); ++k) {
    full_steps += job.StepStartNs(k) >= start && job.StepStartNs(k + 1) <= stop;
  }
  ASSERT_GE(full_steps, 3);

  std::map<uint64_t, std::string> launches;
  std::map<uint64_t, int64_t> launch_device;  // correlation id -> device_id of its launch
  std::set<int64_t> step_nums;
  std::map<int64_t, std::pair<int64_t, int64_t>> root_context;  // step -> (_pt, _p)
  std::map<int64_t, std::pair<int64_t, int64_t>> wrapper_context;
  int64_t roots = 0;
  for (const auto& plane : space.planes()) {
    ExpectProperNesting(profile_start, plane);
    const xspace::XPlaneReader r(plane);
    r.ForEachEvent([&](const xspace::XLine& line, const xspace::XEvent& e) {
      EXPECT_GE(xspace::EventStartNs(profile_start, line, e), start);
      EXPECT_LE(xspace::EventEndNs(profile_start, line, e), stop);
      const std::string name(r.EventName(e));
      if (r.IntStat(e, xspace::kStatIsRoot) == 1) {
        ++roots;
        EXPECT_EQ(name, "train");
        EXPECT_EQ(line.id(), 1000);  // GPU 0's thread
        const int64_t step = *r.IntStat(e, xspace::kStatStepNum);
        step_nums.insert(step);
        root_context[step] = {*r.IntStat(e, "_pt"), *r.IntStat(e, "_p")};
      }
      if (auto c = r.IntStat(e, "_c")) {
        EXPECT_EQ(line.id(), 1001);  // GPU 1's thread joins GPU 0's step root
        // Whole, or clipped at the window and marked cut.
        EXPECT_EQ(xspace::EventDurationNs(e) == job.period_ns(),
                  !r.IntStat(e, xspace::kStatStepCut).has_value());
        ASSERT_EQ(name.rfind("train_step ", 0), 0u) << name;
        wrapper_context[std::stoll(name.substr(11))] = {*r.IntStat(e, "_ct"), *c};
      }
      if (plane.name() == "/host:CPU") {
        if (auto c = r.IntStat(e, xspace::kStatCorrelationId)) {
          EXPECT_TRUE(launches.emplace(*c, name).second);
          launch_device[*c] = r.IntStat(e, xspace::kStatDeviceId).value_or(-1);
        }
      }
    });
  }
  // One root per step per host, the two cut by the window's edges included (clipped and marked:
  // the breakdown keeps them as partial); GPU 1's thread joins each through producer/consumer
  // context.
  EXPECT_EQ(roots, full_steps + 2);
  EXPECT_EQ(static_cast<int64_t>(step_nums.size()), full_steps + 2);
  EXPECT_EQ(wrapper_context, root_context);
  // Every device op has a host launch with the same correlation id, on its device.
  int64_t device_ops = 0;
  for (int p = 1; p < 3; ++p) {
    const xspace::XPlaneReader r(space.planes(p));
    r.ForEachEvent([&](const xspace::XLine&, const xspace::XEvent& e) {
      ++device_ops;
      auto c = r.IntStat(e, xspace::kStatCorrelationId);
      ASSERT_TRUE(c.has_value());
      ASSERT_TRUE(launches.contains(*c)) << r.EventName(e);
      EXPECT_EQ(launch_device[*c], p - 1);
      EXPECT_FALSE(r.IntStat(e, xspace::kStatDeviceId).has_value());  // on launches only
      const std::string& api = launches[*c];
      const std::string_view name(r.EventName(e).data(), r.EventName(e).size());
      if (name.rfind("ncclDevKernel", 0) == 0) {
        EXPECT_EQ(api, "ncclAllReduce");
      }
      if (name.rfind("Memcpy", 0) == 0) {
        EXPECT_EQ(api, "cudaMemcpyAsync");
        EXPECT_TRUE(name == "MemcpyHToD" || name == "MemcpyDToH") << name;  // XProf's names
      }
    });
  }
  EXPECT_GE(device_ops, full_steps * job.DeviceEventsPerStep());
}

TEST(SyntheticJobTest, ClockSkewShiftsEveryTimestampExactly) {
  SyntheticJobConfig plain = Job(3);
  SyntheticJobConfig skewed = plain;
  skewed.clock_skew_ns = 37 * kNanosPerMilli + 123;
  tensorflow::profiler::XSpace a, b;
  SyntheticJob(plain).Generate(kT0, kT0 + 300 * kNanosPerMilli, &a);
  SyntheticJob(skewed).Generate(kT0, kT0 + 300 * kNanosPerMilli, &b);
  ASSERT_EQ(a.planes_size(), b.planes_size());
  ASSERT_GT(xspace::CountEvents(a), 0);
  ASSERT_EQ(xspace::CountEvents(a), xspace::CountEvents(b));
  for (int p = 0; p < a.planes_size(); ++p) {
    for (int l = 0; l < a.planes(p).lines_size(); ++l) {
      const auto& la = a.planes(p).lines(l);
      const auto& lb = b.planes(p).lines(l);
      // Stored relative to each host's own profile start: identical bytes, ...
      EXPECT_EQ(la.timestamp_ns(), lb.timestamp_ns());
      for (int e = 0; e < la.events_size(); ++e) {
        EXPECT_EQ(la.events(e).offset_ps(), lb.events(e).offset_ps());
        // ... and shifted by the skew once read as absolute agent-clock times.
        EXPECT_EQ(xspace::EventStartNs(xspace::ProfileStartNs(b), lb, lb.events(e)) -
                      xspace::EventStartNs(xspace::ProfileStartNs(a), la, la.events(e)),
                  skewed.clock_skew_ns);
      }
    }
  }
}

TEST(SyntheticJobTest, WritesTimesAsXProfReadsThem) {
  SyntheticJobConfig c = Job(0);
  c.clock_skew_ns = -1537 * kNanosPerMilli;
  tensorflow::profiler::XSpace space;
  SyntheticJob(c).Generate(kT0, kT0 + 2 * kNanosPerSecond, &space);
  ASSERT_THAT(xspace::Validate(space), IsOk()) << xspace::Validate(space);
  // The absolute window lives in Task Environment, on the agent's clock.
  EXPECT_EQ(xspace::ProfileStartNs(space), kT0 + c.clock_skew_ns);
  EXPECT_EQ(xspace::ProfileStopNs(space), kT0 + 2 * kNanosPerSecond + c.clock_skew_ns);
  const xspace::XPlane* env = xspace::FindPlane(space, xspace::kTaskEnvPlaneName);
  ASSERT_NE(env, nullptr);
  for (const auto& stat : env->stats()) {
    EXPECT_EQ(stat.value_case(), tensorflow::profiler::XStat::kUint64Value);
  }
  // Lines are relative: timestamp_ns * 1000 + offset_ps stays far inside int64 picoseconds.
  for (const auto& plane : space.planes()) {
    for (const auto& line : plane.lines()) {
      EXPECT_EQ(line.timestamp_ns(), 0) << plane.name() << " " << line.name();
      for (const auto& e : line.events()) {
        EXPECT_GE(e.offset_ps(), 0);
        EXPECT_LE(e.offset_ps() + e.duration_ps(), 2 * kNanosPerSecond * 1000);
      }
    }
  }
}

}  // namespace
}  // namespace profctl::synthetic
