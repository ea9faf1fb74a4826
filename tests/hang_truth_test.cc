// Truth tests for the hang verdict (analysis/hang_verdict.h): the synthetic job knows whether it
// hangs (hang_rank, hang_at_step) or only runs slow (an input stall, a compute straggler), so the
// verdict over its traces, read back per rank with each host's clock skew, must say so in every
// window: a slow rank that progresses is never called hung, whatever the window's length and
// phase; a hang is named when the window holds complete steps or the agents report the stall; a
// window that starts after the hang says so. The step signal each agent would answer at the
// window's end is derived from the job's own schedule.
#include <algorithm>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "analysis/hang_verdict.h"
#include "analysis/readers/xspace_reader.h"
#include "common/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "synthetic/synthetic_job.h"
#include "tests/test_time.h"

namespace profctl {
namespace {

using analysis::HangMissing;
using analysis::HangRank;
using analysis::HangReport;
using analysis::HangVerdictKind;
using ::testing::HasSubstr;

using ::profctl::test_time::kT0;
// The agent's default --hang-factor.
constexpr int64_t kHangFactor = 10;

int64_t SkewOf(int64_t rank) { return ((rank * 7919) % 61 - 30) * kNanosPerMilli; }

struct Job {
  std::string knobs;  // on top of world and seed
  int64_t world = 4;
};

synthetic::SyntheticJobConfig Config(const Job& job, int64_t rank) {
  synthetic::SyntheticJobConfig base;
  base.world = job.world;
  base.seed = 29;
  base.gpus = 1;
  base.kernels_per_step = 4;
  absl::StatusOr<synthetic::SyntheticJobConfig> c =
      synthetic::ParseSyntheticJobConfig(job.knobs, base);
  EXPECT_TRUE(c.ok()) << c.status();
  c->rank = rank;
  c->clock_skew_ns = SkewOf(rank);
  return *c;
}

// What an agent answers GetStepSignal at true time `at`, from the job's schedule: the last step
// that ended (before a hang, the step before the hung one), its period as the median, stalled
// by the agent's rule. On the agent's clock.
analysis::StepSignal SignalAt(const synthetic::SyntheticJob& job, int64_t at) {
  const int64_t running = job.StepIndexAt(at);
  const int64_t last_end = job.StepStartNs(running);  // the end of the step before it
  const int64_t median = job.PeriodNs(running - 1);
  const int64_t skew = job.config().clock_skew_ns;
  return {.asked_ns = at + skew,
          .sources = {{.source = "synthetic",
                       .last_step_end_ns = last_end + skew,
                       .median_step_ns = median,
                       .stalled = at - last_end > kHangFactor * median}}};
}

// The verdict over the window [start, end) (true time) of every rank of `job`, with each agent's
// step signal at the window's end when `signal`.
HangReport Judge(const Job& job, int64_t start, int64_t end, bool signal) {
  static const analysis::StepMatcher* matcher =
      new analysis::StepMatcher(*analysis::StepMatcher::Create(analysis::kDefaultStepPattern));
  std::vector<analysis::HangRankInput> ranks;
  for (int64_t r = 0; r < job.world; ++r) {
    const synthetic::SyntheticJob model(Config(job, r));
    tensorflow::profiler::XSpace space;
    model.Generate(start, end, &space);
    analysis::HangRankInput& in = ranks.emplace_back();
    in.host = absl::StrCat("worker-", r);
    in.rank = r;
    in.offset_ns = SkewOf(r);
    in.trace = analysis::ReadRankCollectives(space, *matcher);
    if (signal) in.signal = SignalAt(model, end);
  }
  return analysis::JudgeHang(ranks);
}

// Windows of 16 lengths and phases over the job's steps: from less than one step to several.
struct Window {
  int64_t start = 0;
  int64_t end = 0;
};
std::vector<Window> Windows(const synthetic::SyntheticJob& job, int64_t first_step) {
  std::vector<Window> out;
  const int64_t period = job.period_ns();
  for (int i = 0; i < 16; ++i) {
    const int64_t start = job.StepStartNs(first_step) + (i * period) / 16;
    const int64_t length = period / 4 + (i * period) / 4;  // 0.25 .. 4 steps
    out.push_back({start, start + length});
  }
  return out;
}

// Just before the earliest launch of step k's all-reduce on any rank (true time).
int64_t BeforeAllReduceLaunch(const Job& job, int64_t k) {
  int64_t t = std::numeric_limits<int64_t>::max();
  for (int64_t r = 0; r < job.world; ++r) {
    const synthetic::SyntheticJob model(Config(job, r));
    for (const synthetic::StepPlan::Op& op : model.Plan(k, r, 0).host_calls) {
      if (absl::StartsWith(op.name, "nccl")) t = std::min(t, op.start_ns);
    }
  }
  return t - kNanosPerMilli;
}

bool Blames(const HangReport& h) {
  return h.verdict == HangVerdictKind::kHung || h.verdict == HangVerdictKind::kAllWaiting;
}

struct SlowCase {
  const char* name;
  Job job;
};

// A rank that waits 1.5 s for input in each 100 ms step, and one computing 3x longer at 400 ms
// steps, at 2 to 32 ranks: every window of every length is "none" or "cannot tell", never a
// hang; with the agents' step signal (which still sees steps end), never "cannot tell" either.
TEST(HangTruthTest, ASlowRankThatProgressesIsNeverCalledHung) {
  const SlowCase cases[] = {
      {"input stall 1.5 s, 4 ranks",
       {"step_ms=100,input_stall_rank=2,input_stall_ms=1500,jitter=0.05", 4}},
      {"compute 3x at 400 ms, 4 ranks",
       {"step_ms=400,straggler_rank=1,straggler_factor=3,jitter=0.05", 4}},
      {"input stall 1.5 s, 2 ranks",
       {"step_ms=100,input_stall_rank=1,input_stall_ms=1500,jitter=0.05", 2}},
      {"compute 3x at 400 ms, 32 ranks",
       {"step_ms=400,straggler_rank=17,straggler_factor=3,jitter=0.05", 32}},
  };
  for (const SlowCase& c : cases) {
    const synthetic::SyntheticJob model(Config(c.job, 0));
    const int64_t first = model.StepIndexAt(kT0) + 2;
    int cannot_tell = 0;
    for (const Window& w : Windows(model, first)) {
      const std::string where =
          absl::StrCat(c.name, ": window of ", (w.end - w.start) / kNanosPerMilli, " ms at +",
                       (w.start - model.StepStartNs(first)) / kNanosPerMilli, " ms");
      const HangReport blind = Judge(c.job, w.start, w.end, /*signal=*/false);
      EXPECT_FALSE(Blames(blind)) << where << ": " << blind.summary;
      cannot_tell += blind.verdict == HangVerdictKind::kCannotTell;
      const HangReport seen = Judge(c.job, w.start, w.end, /*signal=*/true);
      EXPECT_EQ(seen.verdict, HangVerdictKind::kNone) << where << ": " << seen.summary;
    }
    // The windows shorter than a step cannot be told without the signal; the long ones can.
    EXPECT_GT(cannot_tell, 0) << c.name;
    EXPECT_LT(cannot_tell, 16) << c.name;
  }
}

// A real hang: rank 1 never enters the all-reduce of step k. A window that holds complete steps
// before it and ends at least 3 steps after names rank 1 without any signal; a window with no
// complete step names it with the agents' stall (once the agents report it), and is "cannot
// tell" without it.
TEST(HangTruthTest, AHungRankIsNamedOnEvidence) {
  for (const int64_t world : {2, 4, 32}) {
    Job job{"step_ms=100,jitter=0.05", world};
    const synthetic::SyntheticJob healthy(Config(job, 0));
    const int64_t k = healthy.StepIndexAt(kT0) + 20;
    job.knobs = absl::StrCat(job.knobs, ",hang_rank=1,hang_at_step=", k);
    const synthetic::SyntheticJob model(Config(job, 0));
    const int64_t hang = model.StepStartNs(k);
    const int64_t period = model.PeriodNs(k - 1);
    const std::string collective = absl::StrCat("all-reduce #1 of step ", k % 1'000'000);

    // 2 s ending 2 s after the hung step began: 18 complete steps, 19 steps of waiting.
    const HangReport h = Judge(job, hang - 2 * kNanosPerSecond, hang + 2 * kNanosPerSecond,
                               /*signal=*/false);
    ASSERT_EQ(h.verdict, HangVerdictKind::kHung) << world << ": " << h.summary;
    EXPECT_THAT(h.summary, HasSubstr("worker-1 (rank 1) never entered " + collective));
    EXPECT_EQ(h.waiting_ranks, world - 1);
    EXPECT_EQ(h.ranks[1].role, HangRank::Role::kNeverEntered);

    // The same pod a moment after the hung step began (the others just entered): no hang yet.
    const HangReport early =
        Judge(job, hang - 2 * kNanosPerSecond, hang + period, /*signal=*/false);
    EXPECT_EQ(early.verdict, HangVerdictKind::kNone) << world << ": " << early.summary;

    // A window from the all-reduce of the step before the hung one, holding no complete step,
    // to 12 steps after it: the agents (factor 10) report the stall; named with it, "cannot
    // tell" without it.
    const int64_t start = BeforeAllReduceLaunch(job, k - 1);
    const int64_t end = hang + 12 * period;
    const HangReport stalled = Judge(job, start, end, /*signal=*/true);
    EXPECT_TRUE(stalled.evidence.stalled) << world;
    ASSERT_EQ(stalled.verdict, HangVerdictKind::kHung) << world << ": " << stalled.summary;
    EXPECT_THAT(stalled.summary, HasSubstr("worker-1 (rank 1) never entered " + collective));
    const HangReport blind = Judge(job, start, end, /*signal=*/false);
    EXPECT_EQ(blind.verdict, HangVerdictKind::kCannotTell) << world << ": " << blind.summary;
    EXPECT_EQ(blind.missing, HangMissing::kStepPace);
  }
}

// `--last=1s` taken 1.5 s after the hang began: the window holds nothing of it. With the agents'
// step signal it says when the steps stopped and to take the past that covers it; without, it
// cannot tell; it is never "none".
TEST(HangTruthTest, AWindowAfterTheHangSaysSo) {
  for (const int64_t world : {2, 8}) {
    Job job{"step_ms=50,jitter=0.05", world};
    const synthetic::SyntheticJob healthy(Config(job, 0));
    const int64_t k = healthy.StepIndexAt(kT0) + 20;
    job.knobs = absl::StrCat(job.knobs, ",hang_rank=0,hang_at_step=", k);
    const synthetic::SyntheticJob model(Config(job, 0));
    const int64_t hang = model.StepStartNs(k);
    const int64_t at = hang + 1'500 * kNanosPerMilli;
    const HangReport h = Judge(job, at - kNanosPerSecond, at, /*signal=*/true);
    EXPECT_EQ(h.verdict, HangVerdictKind::kCannotTell) << world << ": " << h.summary;
    EXPECT_EQ(h.missing, HangMissing::kWindowAfterHang);
    EXPECT_EQ(h.summary,
              absl::StrCat("no step ended on any rank since ", analysis::FormatUtcTime(hang),
                           "; the window starts after the hang: take `capture --last` covering "
                           "that instant"));
    const HangReport blind = Judge(job, at - kNanosPerSecond, at, /*signal=*/false);
    EXPECT_EQ(blind.verdict, HangVerdictKind::kCannotTell) << world << ": " << blind.summary;

    // The past that covers it names the hung rank.
    const HangReport covered = Judge(job, hang - kNanosPerSecond, at, /*signal=*/true);
    EXPECT_EQ(covered.verdict, HangVerdictKind::kHung) << world << ": " << covered.summary;
  }
}

}  // namespace
}  // namespace profctl
