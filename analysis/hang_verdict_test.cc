#include "analysis/hang_verdict.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "analysis/readers/xspace_reader.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "xspace/xspace.h"

namespace profctl::analysis {
namespace {

using tensorflow::profiler::XSpace;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr int64_t kNov18 = 1'795'000'000'000'000'000;  // 2026-11-18, ns since the epoch
constexpr int64_t kStep = 100'000'000;                 // 100 ms
constexpr int64_t kEnterAt = 60'000'000;               // the all-reduce's launch, into its step
constexpr int64_t kKernelStart = 61'000'000;
constexpr int64_t kKernelEnd = 90'000'000;
constexpr int64_t kSteps = 5;  // complete steps 0..4; the hang (if any) in step 5

int64_t StepStart(int64_t s) { return kNov18 + s * kStep; }

enum class Last {
  kNone,          // no step after the complete ones
  kEntered,       // the next step runs until the window's end, its all-reduce entered
  kNeverEntered,  // the next step runs until the window's end, its all-reduce never entered
};

// One rank's trace of the synthetic job's shape: steps 0..complete-1 each with an all-reduce
// launched on the host (ncclAllReduce, correlation id) and completed on the GPU, then `last`.
// Times on the rank's own clock: the common timeline + `skew`.
XSpace Rank(int64_t complete, Last last, int64_t window_end, int64_t skew = 0,
            int64_t enter_delay = 0) {
  XSpace space;
  xspace::SetProfileWindow(&space, kNov18 + skew, window_end + skew);
  xspace::XPlaneBuilder host(space.add_planes(), 1, xspace::kHostPlaneName, kNov18 + skew);
  xspace::XPlaneBuilder gpu(space.add_planes(), 2, "/device:GPU:0", kNov18 + skew);
  auto* thread = host.AddLine(1, "python3 main", kNov18 + skew);
  auto* stream = gpu.AddLine(7, "Stream #7(Compute)", kNov18 + skew);
  const int64_t root = host.EventMetadataId("train");
  const int64_t nccl = host.EventMetadataId("ncclAllReduce");
  const int64_t kernel = gpu.EventMetadataId("ncclDevKernel_AllReduce_Sum_bf16_RING_LL");
  const int64_t is_root = host.StatMetadataId(xspace::kStatIsRoot);
  const int64_t step_num = host.StatMetadataId(xspace::kStatStepNum);
  const int64_t corr = host.StatMetadataId(xspace::kStatCorrelationId);
  const int64_t gcorr = gpu.StatMetadataId(xspace::kStatCorrelationId);
  auto step = [&](int64_t s, int64_t end) {
    auto* e = host.AddEvent(thread, root, StepStart(s) + skew, end - StepStart(s));
    host.AddStat(e, is_root, int64_t{1});
    host.AddStat(e, step_num, s);
    return e;
  };
  for (int64_t s = 0; s < complete; ++s) {
    step(s, StepStart(s + 1));
    auto* e = host.AddEvent(thread, nccl, StepStart(s) + kEnterAt + enter_delay + skew, 10'000);
    host.AddStat(e, corr, uint64_t{100} + static_cast<uint64_t>(s));
    auto* k =
        gpu.AddEvent(stream, kernel, StepStart(s) + kKernelStart + skew, kKernelEnd - kKernelStart);
    gpu.AddStat(k, gcorr, uint64_t{100} + static_cast<uint64_t>(s));
  }
  if (last != Last::kNone) {
    auto* e = step(complete, window_end);
    host.AddStat(e, host.StatMetadataId(xspace::kStatStepCut), int64_t{1});
    if (last == Last::kEntered) {
      auto* n =
          host.AddEvent(thread, nccl, StepStart(complete) + kEnterAt + enter_delay + skew, 10'000);
      host.AddStat(n, corr, uint64_t{100} + static_cast<uint64_t>(complete));
    }
  }
  return space;
}

const StepMatcher& Matcher() {
  static const StepMatcher* m = new StepMatcher(*StepMatcher::Create(kDefaultStepPattern));
  return *m;
}

HangRankInput Input(int64_t rank, const XSpace& space, int64_t offset = 0) {
  return {absl::StrCat("worker-", rank), rank, offset, ReadRankCollectives(space, Matcher()),
          std::nullopt};
}

HangRankInput NoTrace(int64_t rank) {
  return {absl::StrCat("worker-", rank), rank, 0, std::nullopt, std::nullopt};
}

// The window ends 10 steps after the hung step began: 9.4 steps of waiting.
constexpr int64_t kHangEnd = kNov18 + (kSteps + 10) * kStep;

// A snapshot of the cupti light level's shape: finished steps only (the step a rank hangs in
// has no marker), NCCL launches as `ncclAllReduce` host events with a `kernel_name` stat, no
// device plane. A waiter launched the all-reduce after its last step ended; the hung rank did
// not.
XSpace LaunchesOnly(int64_t complete, bool entered_next, int64_t window_end) {
  XSpace space;
  xspace::SetProfileWindow(&space, kNov18, window_end);
  xspace::XPlaneBuilder host(space.add_planes(), 1, xspace::kHostPlaneName, kNov18);
  auto* thread = host.AddLine(4242, "pid 4242 tid 4242", kNov18);
  const int64_t root = host.EventMetadataId("step");
  const int64_t nccl = host.EventMetadataId("ncclAllReduce");
  const int64_t is_root = host.StatMetadataId(xspace::kStatIsRoot);
  const int64_t step_num = host.StatMetadataId(xspace::kStatStepNum);
  const int64_t kernel_name = host.StatMetadataId("kernel_name");
  auto launch = [&](int64_t s) {
    auto* e = host.AddEvent(thread, nccl, StepStart(s) + kEnterAt, 0);
    host.AddStat(e, kernel_name, std::string("ncclDevKernel_AllReduce_Sum_f32_RING_LL"));
  };
  for (int64_t s = 0; s < complete; ++s) {
    auto* e = host.AddEvent(thread, root, StepStart(s), kStep - 1'000'000);
    host.AddStat(e, is_root, int64_t{1});
    host.AddStat(e, step_num, s);
    launch(s);
  }
  if (entered_next) launch(complete);
  return space;
}

TEST(HangVerdictTest, LaunchesOnlySnapshotsNameTheRankThatNeverEnteredTheRunningStep) {
  const RankCollectives waiter =
      ReadRankCollectives(LaunchesOnly(kSteps, true, kHangEnd), Matcher());
  EXPECT_TRUE(waiter.completions_from_steps);
  ASSERT_EQ(waiter.entered.size(), kSteps + 1);
  // The launch after the last step ended belongs to the next step, the one still running.
  EXPECT_EQ(waiter.entered.back().id, (CollectiveId{kSteps, CollectiveKind::kAllReduce, 1}));
  // Those of the steps that ended count as completed at their step's end.
  ASSERT_EQ(waiter.completed.size(), kSteps);
  EXPECT_EQ(waiter.completed.back().time_ns, StepStart(kSteps - 1) + kStep - 1'000'000);

  const HangReport h = JudgeHang({Input(0, LaunchesOnly(kSteps, true, kHangEnd)),
                                  Input(1, LaunchesOnly(kSteps, false, kHangEnd)),
                                  Input(2, LaunchesOnly(kSteps, true, kHangEnd))});
  ASSERT_EQ(h.verdict, HangVerdictKind::kHung) << h.summary;
  EXPECT_EQ(h.collective, (CollectiveId{kSteps, CollectiveKind::kAllReduce, 1}));
  EXPECT_EQ(h.waiting_ranks, 2);
  EXPECT_THAT(h.summary, HasSubstr("worker-1 (rank 1) never entered all-reduce #1 of step 5"));

  // Every rank went on past its launches: no hang.
  const HangReport ok = JudgeHang({Input(0, LaunchesOnly(kSteps, false, kHangEnd)),
                                   Input(1, LaunchesOnly(kSteps, false, kHangEnd))});
  EXPECT_EQ(ok.verdict, HangVerdictKind::kNone) << ok.summary;
}

TEST(HangVerdictTest, ReadsEnteredAndCompletedCollectivesPerStep) {
  const RankCollectives r = ReadRankCollectives(Rank(kSteps, Last::kEntered, kHangEnd), Matcher());
  ASSERT_EQ(r.entered.size(), kSteps + 1);
  ASSERT_EQ(r.completed.size(), kSteps);
  EXPECT_EQ(r.entered.back().id, (CollectiveId{kSteps, CollectiveKind::kAllReduce, 1}));
  EXPECT_EQ(r.entered.back().time_ns, StepStart(kSteps) + kEnterAt);
  EXPECT_EQ(r.completed.back().id, (CollectiveId{kSteps - 1, CollectiveKind::kAllReduce, 1}));
  EXPECT_EQ(r.completed.back().time_ns, StepStart(kSteps - 1) + kKernelEnd);
  EXPECT_EQ(r.complete_steps, kSteps);  // the cut step is not one
  EXPECT_EQ(r.median_step_ns, kStep);
  EXPECT_EQ(r.last_step_end_ns, StepStart(kSteps));
  EXPECT_EQ(r.window_end_ns, kHangEnd);
}

TEST(HangVerdictTest, NamesTheRankThatNeverEnteredAndTheWaiters) {
  // Rank 2's clock runs 7 ms ahead and it entered 2 ms after rank 0 on the common timeline.
  const int64_t skew = 7'000'000;
  const HangReport h = JudgeHang({Input(0, Rank(kSteps, Last::kEntered, kHangEnd)),
                                  Input(1, Rank(kSteps, Last::kNeverEntered, kHangEnd)),
                                  Input(2, Rank(kSteps, Last::kEntered, kHangEnd, skew, 2'000'000),
                                        /*offset=*/skew)});
  ASSERT_EQ(h.verdict, HangVerdictKind::kHung) << h.summary;
  EXPECT_EQ(h.collective, (CollectiveId{kSteps, CollectiveKind::kAllReduce, 1}));
  EXPECT_EQ(h.waiting_ranks, 2);
  EXPECT_EQ(h.waiting_since_ns, StepStart(kSteps) + kEnterAt);
  EXPECT_EQ(h.summary, absl::StrCat("worker-1 (rank 1) never entered all-reduce #1 of step 5; 2 "
                                    "ranks wait in it since ",
                                    FormatUtcTime(StepStart(kSteps) + kEnterAt)));
  ASSERT_EQ(h.ranks.size(), 3u);
  EXPECT_EQ(h.ranks[0].role, HangRank::Role::kWaiting);
  EXPECT_EQ(h.ranks[1].role, HangRank::Role::kNeverEntered);
  EXPECT_EQ(h.ranks[2].role, HangRank::Role::kWaiting);
  // Where each stood: the hung rank last entered and completed step 4's all-reduce.
  ASSERT_TRUE(h.ranks[1].last_entered.has_value());
  EXPECT_EQ(h.ranks[1].last_entered->id, (CollectiveId{kSteps - 1, CollectiveKind::kAllReduce, 1}));
  ASSERT_TRUE(h.ranks[1].last_completed.has_value());
  EXPECT_EQ(h.ranks[1].last_completed->time_ns, StepStart(kSteps - 1) + kKernelEnd);
  // Aligned times: rank 2's entry is 2 ms after rank 0's, not 9.
  ASSERT_TRUE(h.ranks[2].last_entered.has_value());
  EXPECT_EQ(h.ranks[2].last_entered->time_ns, StepStart(kSteps) + kEnterAt + 2'000'000);
  ASSERT_TRUE(h.ranks[2].last_completed.has_value());
  EXPECT_EQ(h.ranks[2].last_completed->id,
            (CollectiveId{kSteps - 1, CollectiveKind::kAllReduce, 1}));
}

TEST(HangVerdictTest, NamesTwoHungRanks) {
  const HangReport h = JudgeHang({Input(0, Rank(kSteps, Last::kEntered, kHangEnd)),
                                  Input(1, Rank(kSteps, Last::kNeverEntered, kHangEnd)),
                                  Input(2, Rank(kSteps, Last::kNeverEntered, kHangEnd)),
                                  Input(3, Rank(kSteps, Last::kEntered, kHangEnd))});
  ASSERT_EQ(h.verdict, HangVerdictKind::kHung) << h.summary;
  EXPECT_EQ(h.waiting_ranks, 2);
  EXPECT_THAT(h.summary, HasSubstr("worker-1 (rank 1) and worker-2 (rank 2) never entered "
                                   "all-reduce #1 of step 5; 2 ranks wait in it"));
  EXPECT_EQ(h.ranks[1].role, HangRank::Role::kNeverEntered);
  EXPECT_EQ(h.ranks[2].role, HangRank::Role::kNeverEntered);
}

TEST(HangVerdictTest, NoVerdictWhenEveryCollectiveCompleted) {
  // Steps still running to the window's end: every all-reduce entered completed.
  const int64_t end = StepStart(kSteps);
  const HangReport h =
      JudgeHang({Input(0, Rank(kSteps, Last::kNone, end)), Input(1, Rank(kSteps, Last::kNone, end)),
                 Input(2, Rank(kSteps, Last::kNone, end))});
  EXPECT_EQ(h.verdict, HangVerdictKind::kNone);
  EXPECT_THAT(h.summary, HasSubstr("every collective a rank entered completed"));
  for (const HangRank& r : h.ranks) EXPECT_EQ(r.role, HangRank::Role::kOther);
}

TEST(HangVerdictTest, NoVerdictWhenTheJobEndedAndEveryRankCompletedEverything) {
  // The job ended after step 4: a long quiet window after it, nobody in a collective.
  const HangReport h = JudgeHang({Input(0, Rank(kSteps, Last::kNone, kHangEnd)),
                                  Input(1, Rank(kSteps, Last::kNone, kHangEnd))});
  EXPECT_EQ(h.verdict, HangVerdictKind::kNone) << h.summary;
  ASSERT_TRUE(h.ranks[0].last_completed.has_value());
  EXPECT_EQ(h.ranks[0].last_completed->id,
            (CollectiveId{kSteps - 1, CollectiveKind::kAllReduce, 1}));
}

TEST(HangVerdictTest, NoVerdictWhileTheSlowRankIsOnlyLate) {
  // A normal window's end: ranks 0 and 2 entered step 5's all-reduce 20 ms before the end, rank 1
  // (slower) has not yet: a wait shorter than 3 steps is no hang.
  const int64_t end = StepStart(kSteps) + kEnterAt + 20'000'000;
  const HangReport h = JudgeHang({Input(0, Rank(kSteps, Last::kEntered, end)),
                                  Input(1, Rank(kSteps, Last::kNeverEntered, end)),
                                  Input(2, Rank(kSteps, Last::kEntered, end))});
  EXPECT_EQ(h.verdict, HangVerdictKind::kNone);
  EXPECT_THAT(h.summary, HasSubstr("for 20 ms at the window's end, less than the 300 ms"));
}

TEST(HangVerdictTest, NoVerdictWhenStepsStillEndAfterTheWaitersEntered) {
  // Rank 1 is far behind on its own clock view: it completed step 4's all-reduce and ended step
  // 4 after ranks 0 and 2 entered step 5's (their entry 60 ms into step 5; rank 1 runs 100 ms
  // late on the common timeline): steps still progress.
  const int64_t late = kStep;
  const HangReport h = JudgeHang({Input(0, Rank(kSteps, Last::kEntered, kHangEnd)),
                                  Input(1, Rank(kSteps, Last::kNeverEntered, kHangEnd),
                                        /*offset=*/-late),
                                  Input(2, Rank(kSteps, Last::kEntered, kHangEnd))});
  EXPECT_EQ(h.verdict, HangVerdictKind::kNone);
  EXPECT_THAT(h.summary, HasSubstr("still ended after ranks entered all-reduce #1 of step 5"));
}

TEST(HangVerdictTest, AHostWithoutATraceIsUnknownNeverBlamed) {
  const HangReport h =
      JudgeHang({Input(0, Rank(kSteps, Last::kEntered, kHangEnd)),
                 Input(1, Rank(kSteps, Last::kNeverEntered, kHangEnd)), NoTrace(2)});
  ASSERT_EQ(h.verdict, HangVerdictKind::kHung) << h.summary;
  EXPECT_EQ(h.waiting_ranks, 1);
  EXPECT_EQ(h.ranks[2].role, HangRank::Role::kUnknown);
  EXPECT_FALSE(h.ranks[2].last_entered.has_value());
  EXPECT_THAT(h.summary, HasSubstr("worker-1 (rank 1) never entered all-reduce #1 of step 5; 1 "
                                   "rank waits in it since "));
  EXPECT_THAT(h.summary, HasSubstr("no trace from worker-2 (rank 2) (unknown, not judged)"));
  EXPECT_THAT(h.summary, Not(HasSubstr("worker-2 (rank 2) never")));

  // The only rank that could be missing from it has no trace: nobody is blamed.
  const HangReport all = JudgeHang({Input(0, Rank(kSteps, Last::kEntered, kHangEnd)), NoTrace(1),
                                    Input(2, Rank(kSteps, Last::kEntered, kHangEnd))});
  ASSERT_EQ(all.verdict, HangVerdictKind::kAllWaiting) << all.summary;
  EXPECT_EQ(all.waiting_ranks, 2);
  EXPECT_EQ(all.ranks[1].role, HangRank::Role::kUnknown);
  EXPECT_THAT(all.summary, HasSubstr("every rank with a trace waits in all-reduce #1 of step 5"));
  EXPECT_THAT(all.summary,
              HasSubstr("no trace (or no collective) from worker-1 (rank 1) (unknown: it may be"));

  // No trace at all, and no step signal: nothing to tell by.
  const HangReport none = JudgeHang({NoTrace(0), NoTrace(1)});
  EXPECT_EQ(none.verdict, HangVerdictKind::kCannotTell);
  EXPECT_EQ(none.missing, HangMissing::kCollectives);
  EXPECT_EQ(none.summary, "cannot tell: no rank has a trace");
}

TEST(HangVerdictTest, ATraceWithoutCollectivesIsUnknownNeverBlamed) {
  // Rank 2's trace holds steps only (a cupti snapshot): it cannot have "never entered".
  XSpace steps_only;
  xspace::SetProfileWindow(&steps_only, kNov18, kHangEnd);
  xspace::XPlaneBuilder host(steps_only.add_planes(), 1, xspace::kHostPlaneName, kNov18);
  auto* line = host.AddLine(1, "pid 9 tid 9", kNov18);
  for (int64_t s = 0; s < kSteps; ++s) {
    host.AddEvent(line, host.EventMetadataId(absl::StrCat("step ", s)), StepStart(s), kStep);
  }
  const HangReport h =
      JudgeHang({Input(0, Rank(kSteps, Last::kEntered, kHangEnd)),
                 Input(1, Rank(kSteps, Last::kNeverEntered, kHangEnd)), Input(2, steps_only)});
  ASSERT_EQ(h.verdict, HangVerdictKind::kHung) << h.summary;
  EXPECT_EQ(h.ranks[2].role, HangRank::Role::kUnknown);
  EXPECT_TRUE(h.ranks[2].has_trace);
  EXPECT_THAT(h.summary, HasSubstr("worker-1 (rank 1) never entered all-reduce #1 of step 5; 1 "
                                   "rank waits in it since "));
  EXPECT_THAT(h.summary, HasSubstr("; no collective in the trace of worker-2 (rank 2) (unknown, "
                                   "not judged)"));
}

TEST(HangVerdictTest, EntriesFromLaunchesAndTheLightLevelsKernelName) {
  // No NCCL API events: cudaLaunchKernel whose correlation id matches a collective kernel; a
  // launch nested in an ncclAllGather call counts once; an ncclBroadcast whose kernel_name
  // (the CUPTI light level's launches) names the kernel's kind; ncclGroupEnd is no collective.
  XSpace space;
  xspace::SetProfileWindow(&space, kNov18, kNov18 + kStep);
  xspace::XPlaneBuilder host(space.add_planes(), 1, xspace::kHostPlaneName, kNov18);
  xspace::XPlaneBuilder gpu(space.add_planes(), 2, "/device:GPU:0", kNov18);
  auto* thread = host.AddLine(1, "pid 1 tid 1", kNov18);
  auto* stream = gpu.AddLine(7, "Stream #7(Compute)", kNov18);
  auto* derived = gpu.AddLine(8, "XLA Ops", kNov18);
  const int64_t corr = host.StatMetadataId(xspace::kStatCorrelationId);
  const int64_t gcorr = gpu.StatMetadataId(xspace::kStatCorrelationId);
  host.AddEvent(thread, host.EventMetadataId("ProfilerStep#7"), kNov18, kStep);
  auto launch = [&](absl::string_view name, int64_t at, int64_t dur, uint64_t id) {
    auto* e = host.AddEvent(thread, host.EventMetadataId(name), kNov18 + at, dur);
    host.AddStat(e, corr, id);
    return e;
  };
  auto kernel = [&](absl::string_view name, int64_t at, uint64_t id) {
    auto* k = gpu.AddEvent(stream, gpu.EventMetadataId(name), kNov18 + at, 1'000'000);
    gpu.AddStat(k, gcorr, id);
    gpu.AddEvent(derived, gpu.EventMetadataId(name), kNov18 + at, 1'000'000);  // never counted
  };
  launch("cudaLaunchKernel", 1'000'000, 5'000, 1);  // a collective's launch
  kernel("ncclDevKernel_AllReduce_Sum_f32_RING_LL", 2'000'000, 1);
  launch("cudaLaunchKernel", 3'000'000, 5'000, 2);  // a compute kernel's launch
  kernel("volta_sgemm_128x64_nn", 3'500'000, 2);
  launch("ncclAllGather", 10'000'000, 50'000, 3);
  launch("cudaLaunchKernel", 10'010'000, 5'000, 4);  // inside ncclAllGather
  kernel("ncclDevKernel_AllGather_RING_LL", 11'000'000, 4);
  auto* b = launch("ncclBroadcast", 20'000'000, 5'000, 5);  // launched, never completed
  host.AddStat(b, host.StatMetadataId("kernel_name"), "ncclDevKernel_Broadcast_RING_LL");
  launch("ncclGroupEnd", 21'000'000, 5'000, 6);
  launch("cudaLaunchKernel", 30'000'000, 5'000, 7);  // a second all-reduce of the step
  kernel("ncclKernel_AllReduce_RING_LL_Sum_float", 31'000'000, 7);

  const RankCollectives r = ReadRankCollectives(space, Matcher());
  ASSERT_EQ(r.entered.size(), 4u);
  EXPECT_EQ(r.entered[0].id, (CollectiveId{7, CollectiveKind::kAllReduce, 1}));
  EXPECT_EQ(r.entered[1].id, (CollectiveId{7, CollectiveKind::kAllGather, 1}));
  EXPECT_EQ(r.entered[1].time_ns, kNov18 + 10'000'000);  // the NCCL call, not the launch in it
  EXPECT_EQ(r.entered[2].id, (CollectiveId{7, CollectiveKind::kBroadcast, 1}));
  EXPECT_EQ(r.entered[3].id, (CollectiveId{7, CollectiveKind::kAllReduce, 2}));
  ASSERT_EQ(r.completed.size(), 3u);
  EXPECT_EQ(r.completed[0].id, (CollectiveId{7, CollectiveKind::kAllReduce, 1}));
  EXPECT_EQ(r.completed[1].id, (CollectiveId{7, CollectiveKind::kAllGather, 1}));
  EXPECT_EQ(r.completed[1].time_ns, kNov18 + 12'000'000);
  EXPECT_EQ(r.completed[2].id, (CollectiveId{7, CollectiveKind::kAllReduce, 2}));
  EXPECT_TRUE(r.has_step_markers);
}

TEST(HangVerdictTest, WithoutStepMarkersCollectivesAreCountedOverTheWindow) {
  XSpace space;
  xspace::SetProfileWindow(&space, kNov18, kNov18 + kStep);
  xspace::XPlaneBuilder host(space.add_planes(), 1, xspace::kHostPlaneName, kNov18);
  auto* thread = host.AddLine(1, "main", kNov18);
  for (int i = 0; i < 3; ++i) {
    host.AddEvent(thread, host.EventMetadataId("ncclAllReduce"), kNov18 + i * 1'000'000, 1'000);
  }
  const RankCollectives r = ReadRankCollectives(space, Matcher());
  EXPECT_FALSE(r.has_step_markers);
  ASSERT_EQ(r.entered.size(), 3u);
  EXPECT_EQ(r.entered[2].id, (CollectiveId{-1, CollectiveKind::kAllReduce, 3}));
  EXPECT_EQ(FormatCollectiveId(r.entered[2].id),
            "all-reduce #3 (counted over the window: no step markers)");
}

StepSignal Signal(int64_t last_step_end, int64_t median, bool stalled) {
  return StepSignal{.asked_ns = last_step_end + 20 * kStep,
                    .sources = {{.source = "synthetic",
                                 .last_step_end_ns = last_step_end,
                                 .median_step_ns = median,
                                 .stalled = stalled}}};
}

HangRankInput WithSignal(HangRankInput in, StepSignal signal) {
  in.signal = std::move(signal);
  return in;
}

// A slow rank, not a hung one: each step lasts 1.6 s (rank 1 waits 1.5 s for its input in each
// 100 ms step), and a window of 1.4 s holds no complete step: ranks 0 and 2 wait in the
// all-reduce rank 1 has not reached yet. Without a pace to judge the wait against, the verdict
// is "cannot tell", never "hung".
constexpr int64_t kSlowStep = 1'600'000'000;
constexpr int64_t kNoStepEnd = kNov18 + 1'400'000'000;
constexpr int64_t kSlowEnter = kNov18 + 100'000'000;

// Such a window: the tail of step 0 (its all-reduce completes 20 ms in), then step 1 to the
// window's end, whose all-reduce the rank enters 100 ms in unless `enters` is false.
XSpace NoCompleteStep(bool enters) {
  XSpace space;
  xspace::SetProfileWindow(&space, kNov18, kNoStepEnd);
  xspace::XPlaneBuilder host(space.add_planes(), 1, xspace::kHostPlaneName, kNov18);
  xspace::XPlaneBuilder gpu(space.add_planes(), 2, "/device:GPU:0", kNov18);
  auto* thread = host.AddLine(1, "python3 main", kNov18);
  auto* stream = gpu.AddLine(7, "Stream #7(Compute)", kNov18);
  const int64_t root = host.EventMetadataId("train");
  const int64_t is_root = host.StatMetadataId(xspace::kStatIsRoot);
  const int64_t step_num = host.StatMetadataId(xspace::kStatStepNum);
  const int64_t cut = host.StatMetadataId(xspace::kStatStepCut);
  const int64_t corr = host.StatMetadataId(xspace::kStatCorrelationId);
  auto step = [&](int64_t s, int64_t start, int64_t end) {
    auto* e = host.AddEvent(thread, root, start, end - start);
    host.AddStat(e, is_root, int64_t{1});
    host.AddStat(e, step_num, s);
    host.AddStat(e, cut, int64_t{1});
  };
  step(0, kNov18, kNov18 + 30'000'000);
  auto* k = gpu.AddEvent(stream, gpu.EventMetadataId("ncclDevKernel_AllReduce_Sum_bf16_RING_LL"),
                         kNov18 + 5'000'000, 15'000'000);
  gpu.AddStat(k, gpu.StatMetadataId(xspace::kStatCorrelationId), uint64_t{99});
  step(1, kNov18 + 30'000'000, kNoStepEnd);
  if (enters) {
    auto* e = host.AddEvent(thread, host.EventMetadataId("ncclAllReduce"), kSlowEnter, 10'000);
    host.AddStat(e, corr, uint64_t{101});
  }
  return space;
}

std::vector<HangRankInput> SlowPod(const std::optional<StepSignal>& signal,
                                   const std::optional<StepSignal>& slow_signal) {
  std::vector<HangRankInput> pod = {Input(0, NoCompleteStep(true)), Input(1, NoCompleteStep(false)),
                                    Input(2, NoCompleteStep(true))};
  for (size_t r = 0; r < pod.size(); ++r) pod[r].signal = r == 1 ? slow_signal : signal;
  return pod;
}

TEST(HangVerdictTest, AWaitInAWindowWithoutACompleteStepIsCannotTellNotHung) {
  const HangReport h = JudgeHang(SlowPod(std::nullopt, std::nullopt));
  EXPECT_EQ(h.verdict, HangVerdictKind::kCannotTell) << h.summary;
  EXPECT_EQ(h.missing, HangMissing::kStepPace);
  EXPECT_EQ(h.evidence.pace, HangPace::kUnknown);
  EXPECT_EQ(h.evidence.waited_ns, kNoStepEnd - kSlowEnter);
  EXPECT_EQ(h.evidence.signal_hosts, 0);
  EXPECT_THAT(h.summary, HasSubstr("cannot tell: ranks wait in all-reduce #1 of step 1 since "));
  EXPECT_THAT(h.summary, HasSubstr("no complete step in the window and no step signal"));
  for (const HangRank& r : h.ranks) EXPECT_NE(r.role, HangRank::Role::kNeverEntered);
  EXPECT_THAT(FormatHangEvidence(h), HasSubstr("no step signal from the agents"));
}

TEST(HangVerdictTest, TheStepSignalsPaceClearsASlowRank) {
  // The same window; the agents' step signal says the steps last 1.6 s and still end (the last
  // one ended just before the window): 1.3 s of waiting is less than 3 steps.
  const StepSignal signal = Signal(kNov18 - 10'000'000, kSlowStep, /*stalled=*/false);
  const HangReport h = JudgeHang(SlowPod(signal, signal));
  EXPECT_EQ(h.verdict, HangVerdictKind::kNone) << h.summary;
  EXPECT_EQ(h.evidence.pace, HangPace::kStepSignal);
  EXPECT_EQ(h.evidence.median_step_ns, kSlowStep);
  EXPECT_EQ(h.evidence.needed_ns, 3 * kSlowStep);
  EXPECT_EQ(h.evidence.signal_hosts, 3);
  EXPECT_FALSE(h.evidence.stalled);
  EXPECT_THAT(h.summary, HasSubstr("less than the 4800 ms that make a hang (3 x the median step "
                                   "of 1600 ms, the agents' step signal)"));
}

TEST(HangVerdictTest, AStepThatEndedAfterTheWaitersEnteredByTheSignalIsNoHang) {
  // Rank 1's agent saw a step of it end after ranks 0 and 2 entered the all-reduce (its trace
  // has no complete step; the signal is asked at the window's end).
  const HangReport h =
      JudgeHang(SlowPod(std::nullopt, Signal(kSlowEnter + 5'000'000, kSlowStep, false)));
  EXPECT_EQ(h.verdict, HangVerdictKind::kNone) << h.summary;
  EXPECT_THAT(h.summary, HasSubstr("still ended after ranks entered all-reduce #1 of step 1"));
}

TEST(HangVerdictTest, TheAgentsStallSignalCallsAHangWithoutACompleteStep) {
  // The same window, but the agents report every step source stalled: rank 1 is named.
  const StepSignal stalled = Signal(kNov18 - 10'000'000, kStep, /*stalled=*/true);
  const HangReport h = JudgeHang(SlowPod(stalled, stalled));
  ASSERT_EQ(h.verdict, HangVerdictKind::kHung) << h.summary;
  EXPECT_EQ(h.missing, HangMissing::kNothing);
  EXPECT_TRUE(h.evidence.stalled);
  EXPECT_THAT(h.summary, HasSubstr("worker-1 (rank 1) never entered all-reduce #1 of step 1"));
  EXPECT_TRUE(h.ranks[1].stalled);
  ASSERT_TRUE(h.ranks[1].signal_last_step_end_ns.has_value());
  EXPECT_EQ(*h.ranks[1].signal_last_step_end_ns, kNov18 - 10'000'000);
  EXPECT_THAT(FormatHangEvidence(h), HasSubstr("the agents of 3 ranks report their steps stalled "
                                               "(no step ended since "));

  // One agent whose source still ends its steps on time (not stalled): the job did not stop.
  const HangReport partly =
      JudgeHang(SlowPod(stalled, Signal(kNov18 - 10'000'000, kStep, /*stalled=*/false)));
  EXPECT_FALSE(partly.evidence.stalled);
  EXPECT_NE(partly.verdict, HangVerdictKind::kHung) << partly.summary;
}

// A window taken after the hang began: every step (and every collective entry) is before it;
// the traces hold only the hung step, cut at both edges.
XSpace AfterTheHang(int64_t window_start, int64_t window_end) {
  XSpace space;
  xspace::SetProfileWindow(&space, window_start, window_end);
  xspace::XPlaneBuilder host(space.add_planes(), 1, xspace::kHostPlaneName, window_start);
  auto* thread = host.AddLine(1, "python3 main", window_start);
  auto* e =
      host.AddEvent(thread, host.EventMetadataId("train"), window_start, window_end - window_start);
  host.AddStat(e, host.StatMetadataId(xspace::kStatIsRoot), int64_t{1});
  host.AddStat(e, host.StatMetadataId(xspace::kStatStepNum), kSteps);
  host.AddStat(e, host.StatMetadataId(xspace::kStatStepCut), int64_t{1});
  return space;
}

TEST(HangVerdictTest, AHangThatBeganBeforeTheWindowIsReportedFromTheStepSignal) {
  // The last step ended at StepStart(5); `--last=1s` taken 1.5 s later covers [+0.5 s, +1.5 s].
  const int64_t last_end = StepStart(kSteps);
  const int64_t start = last_end + 500'000'000;
  const int64_t end = last_end + 1'500'000'000;
  const StepSignal stalled = Signal(last_end, kStep, /*stalled=*/true);
  const HangReport h = JudgeHang({WithSignal(Input(0, AfterTheHang(start, end)), stalled),
                                  WithSignal(Input(1, AfterTheHang(start, end)), stalled)});
  EXPECT_EQ(h.verdict, HangVerdictKind::kCannotTell) << h.summary;
  EXPECT_EQ(h.missing, HangMissing::kWindowAfterHang);
  EXPECT_EQ(h.summary, absl::StrCat("no step ended on any rank since ", FormatUtcTime(last_end),
                                    "; the window starts after the hang: take `capture --last` "
                                    "covering that instant"));
  EXPECT_EQ(h.evidence.last_step_end_ns, last_end);
  EXPECT_EQ(h.evidence.window_start_ns, start);

  // The same window without the step signal: it cannot be told, and it says so (never "none").
  const HangReport blind =
      JudgeHang({Input(0, AfterTheHang(start, end)), Input(1, AfterTheHang(start, end))});
  EXPECT_EQ(blind.verdict, HangVerdictKind::kCannotTell) << blind.summary;
  EXPECT_EQ(blind.missing, HangMissing::kCollectives);

  // Steps that still end (the agents report no stall): no hang, though no trace holds a
  // collective.
  const StepSignal running = Signal(end - 10'000'000, kStep, /*stalled=*/false);
  const HangReport fine = JudgeHang({WithSignal(Input(0, AfterTheHang(start, end)), running),
                                     WithSignal(Input(1, AfterTheHang(start, end)), running)});
  EXPECT_EQ(fine.verdict, HangVerdictKind::kNone) << fine.summary;
  EXPECT_THAT(fine.summary, HasSubstr("no hang: steps still ended near the window's end"));
  // An agent whose last step ended long before (no hang detector: no stall reported either)
  // is no evidence of progress.
  const StepSignal quiet = Signal(last_end, kStep, /*stalled=*/false);
  const HangReport unknown = JudgeHang({WithSignal(Input(0, AfterTheHang(start, end)), quiet),
                                        WithSignal(Input(1, AfterTheHang(start, end)), quiet)});
  EXPECT_EQ(unknown.verdict, HangVerdictKind::kCannotTell) << unknown.summary;
}

TEST(HangVerdictTest, StepsThatStoppedInsideTheWindowWithoutAWaiterCannotSayWho) {
  // Every step stopped at StepStart(5) (the agents say so), inside the window, but every
  // all-reduce entered completed: the job stopped outside its collectives, or ended.
  const StepSignal stalled = Signal(StepStart(kSteps), kStep, /*stalled=*/true);
  const HangReport h =
      JudgeHang({WithSignal(Input(0, Rank(kSteps, Last::kNone, kHangEnd)), stalled),
                 WithSignal(Input(1, Rank(kSteps, Last::kNone, kHangEnd)), stalled)});
  EXPECT_EQ(h.verdict, HangVerdictKind::kCannotTell) << h.summary;
  EXPECT_EQ(h.missing, HangMissing::kCollectiveWait);
  EXPECT_THAT(h.summary, HasSubstr("no step ended on any rank since "));
  EXPECT_THAT(h.summary, HasSubstr("no rank waits in a collective at the window's end"));

  // Without the signal, the same traces are "no hang": every collective entered completed.
  const HangReport plain = JudgeHang({Input(0, Rank(kSteps, Last::kNone, kHangEnd)),
                                      Input(1, Rank(kSteps, Last::kNone, kHangEnd))});
  EXPECT_EQ(plain.verdict, HangVerdictKind::kNone) << plain.summary;
}

TEST(HangVerdictTest, AWindowOfCompleteStepsNeedsNoSignal) {
  // The window's own complete steps give the pace (100 ms): 9.4 steps of waiting is a hang, with
  // or without the agents' stall.
  const HangReport h = JudgeHang({Input(0, Rank(kSteps, Last::kEntered, kHangEnd)),
                                  Input(1, Rank(kSteps, Last::kNeverEntered, kHangEnd))});
  ASSERT_EQ(h.verdict, HangVerdictKind::kHung) << h.summary;
  EXPECT_EQ(h.evidence.pace, HangPace::kWindowSteps);
  EXPECT_EQ(h.evidence.median_step_ns, kStep);
  EXPECT_EQ(h.evidence.needed_ns, 3 * kStep);
  EXPECT_EQ(h.evidence.waited_ns, kHangEnd - StepStart(kSteps) - kEnterAt);
  EXPECT_THAT(FormatHangEvidence(h),
              HasSubstr("waited 940 ms at the window's end, at least 300 ms (the job's median "
                        "step: 100 ms, from the window's complete steps)"));
}

TEST(HangVerdictTest, KindAndMissingNames) {
  EXPECT_EQ(HangVerdictKindName(HangVerdictKind::kNone), "none");
  EXPECT_EQ(HangVerdictKindName(HangVerdictKind::kHung), "hung");
  EXPECT_EQ(HangVerdictKindName(HangVerdictKind::kAllWaiting), "all_waiting");
  EXPECT_EQ(HangVerdictKindName(HangVerdictKind::kCannotTell), "cannot_tell");
  EXPECT_EQ(HangMissingName(HangMissing::kNothing), "");
  EXPECT_EQ(HangMissingName(HangMissing::kCollectives), "collectives");
  EXPECT_EQ(HangMissingName(HangMissing::kStepPace), "step_pace");
  EXPECT_EQ(HangMissingName(HangMissing::kWindowAfterHang), "window_after_hang");
  EXPECT_EQ(HangMissingName(HangMissing::kCollectiveWait), "collective_wait");
  EXPECT_EQ(HangPaceName(HangPace::kUnknown), "unknown");
  EXPECT_EQ(HangPaceName(HangPace::kWindowSteps), "window_steps");
  EXPECT_EQ(HangPaceName(HangPace::kStepSignal), "step_signal");
}

TEST(HangVerdictTest, CollectiveKindsByName) {
  struct Case {
    const char* name;
    std::optional<CollectiveKind> kind;
  };
  const Case cases[] = {
      {"ncclAllReduce", CollectiveKind::kAllReduce},
      {"nccl:all_reduce", CollectiveKind::kAllReduce},
      {"ncclDevKernel_AllReduce_Sum_bf16_RING_LL", CollectiveKind::kAllReduce},
      {"all-reduce.3", CollectiveKind::kAllReduce},
      {"all-reduce-start.3", std::nullopt},
      {"ncclAllGather", CollectiveKind::kAllGather},
      {"ncclReduceScatter", CollectiveKind::kReduceScatter},
      {"ncclBroadcast", CollectiveKind::kBroadcast},
      {"ncclReduce", CollectiveKind::kReduce},
      {"ncclDevKernel_Reduce_Sum_f32_RING_LL", CollectiveKind::kReduce},
      {"ncclSend", CollectiveKind::kSendRecv},
      {"ncclRecv", CollectiveKind::kSendRecv},
      {"ncclDevKernel_SendRecv", CollectiveKind::kSendRecv},
      {"alltoall", CollectiveKind::kAllToAll},
      {"collective-permute.1", CollectiveKind::kCollectivePermute},
      {"ncclGroupEnd", std::nullopt},
      {"ncclCommInitRank", std::nullopt},
      {"volta_sgemm_128x64_nn", std::nullopt},
  };
  for (const Case& c : cases) EXPECT_EQ(CollectiveKindOfName(c.name), c.kind) << c.name;
}

TEST(HangVerdictTest, FormatsUtc) {
  // 2026-12-02 12:01:07.123456789 UTC
  const int64_t ns = int64_t{1'796'212'867} * 1'000'000'000 + 123'456'789;
  EXPECT_EQ(FormatUtcTime(ns), "12:01:07.123 UTC");
  EXPECT_EQ(FormatUtcIso(ns), "2026-12-02T12:01:07.123Z");
}

}  // namespace
}  // namespace profctl::analysis
