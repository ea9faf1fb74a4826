// Every file the synthetic collector writes passes the XProf conformance checker, across the
// job's shapes (1 to 8 GPUs, skewed clocks, straggler and input-stall ranks, tiny steps, windows
// that cut steps). The agent's saved files and its tensorflow.ProfilerService answers are checked
// in tests/e2e_test.cc and agent/service/tsl_profiler_service_test.cc.
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "agent/collectors/synthetic/synthetic_collector.h"
#include "common/clock.h"
#include "common/file_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "synthetic/synthetic_job.h"
#include "tests/status_matchers.h"
#include "tests/test_time.h"
#include "tests/trace_data.h"
#include "tests/xprof_conformance.h"
#include "xspace/derived_lines.h"
#include "xspace/xspace.h"

using ::profctl::test_data::DataPath;
using ::profctl::testkit::IsOk;

namespace profctl::testkit {
namespace {

using ::testing::IsEmpty;

using ::profctl::test_time::kT0;

struct Case {
  std::string what;
  std::string knobs;
  int64_t skew_ms = 0;
  int64_t window_ms = 700;
};

std::string PrintCase(const ::testing::TestParamInfo<Case>& info) { return info.param.what; }

class SyntheticFilesTest : public ::testing::TestWithParam<Case> {};

// What one host's file holds, counted by the conventions' vocabulary.
struct FileShape {
  int64_t roots = 0, wrappers = 0, cut = 0, kernels = 0, h2d = 0, d2h = 0, allocations = 0;
};

FileShape ShapeOf(const xspace::XSpace& space) {
  FileShape s;
  for (const auto& plane : space.planes()) {
    const xspace::XPlaneReader r(plane);
    const std::optional<int64_t> kernel_details = r.StatId("kernel_details");
    r.ForEachEvent([&](const xspace::XLine&, const xspace::XEvent& e) {
      const absl::string_view name = r.EventName(e);
      if (r.IntStat(e, "_r") == 1) ++s.roots;
      if (r.IntStat(e, "_c").has_value()) ++s.wrappers;
      if (r.IntStat(e, xspace::kStatStepCut) == 1) ++s.cut;
      for (const auto& stat : e.stats()) {
        s.kernels += kernel_details.has_value() && stat.metadata_id() == *kernel_details;
      }
      s.h2d += name == "MemcpyHToD";
      s.d2h += name == "MemcpyDToH";
      s.allocations += name == "MemoryAllocation";
    });
  }
  return s;
}

// Declares a group_id stat (none is used), as a file XProf grouped at collection time does:
// the checker's derived-line rule then checks the lines themselves.
void MarkGrouped(xspace::XSpace* space) {
  xspace::XPlane* plane = space->mutable_planes(0);
  xspace::XPlaneBuilder(plane, plane->id(), plane->name()).StatMetadataId("group_id");
}

TEST_P(SyntheticFilesTest, EveryRankPassesTheXProfConformanceChecker) {
  const Case& c = GetParam();
  absl::StatusOr<synthetic::SyntheticJobConfig> base = synthetic::ParseSyntheticJobConfig(c.knobs);
  ASSERT_THAT(base, IsOk());
  for (int64_t rank = 0; rank < base->world; ++rank) {
    synthetic::SyntheticJobConfig config = *base;
    config.rank = rank;
    config.clock_skew_ns = c.skew_ms * kNanosPerMilli * (rank % 2 == 0 ? 1 : -1);
    const synthetic::SyntheticJob job(config);
    // A window that starts mid-step, so both edges cut steps.
    const int64_t start = kT0 + 3 * kNanosPerMilli + 17;
    const int64_t stop = start + c.window_ms * kNanosPerMilli;
    xspace::XSpace space;
    job.Generate(start, stop, &space);
    space.add_hostnames(absl::StrCat("worker-", rank));  // as the agent does
    const std::string where = absl::StrCat(c.what, " rank ", rank);
    EXPECT_THAT(CheckXProfConformance(space, absl::StrCat("worker-", rank)), IsEmpty()) << where;

    // The conventions are really exercised: one root per step in the window (the two cut by
    // its edges clipped and marked), a wrapper per other GPU, kernels, both copy directions,
    // the input batch's allocations.
    int64_t complete = 0;
    int64_t in_window = 0;
    for (int64_t k = job.StepIndexAt(start); k <= job.StepIndexAt(stop); ++k) {
      complete += job.StepStartNs(k) >= start && job.StepStartNs(k + 1) <= stop;
      in_window += job.StepStartNs(k) < stop && job.StepStartNs(k + 1) > start;
    }
    ASSERT_GE(complete, 2) << where;
    const FileShape shape = ShapeOf(space);
    EXPECT_EQ(shape.roots, in_window) << where;
    EXPECT_EQ(shape.cut, (in_window - complete) * config.gpus) << where;
    EXPECT_EQ(shape.wrappers, in_window * (config.gpus - 1)) << where;
    EXPECT_GE(shape.kernels, complete * config.gpus * (config.kernels_per_step + 1)) << where;
    EXPECT_GE(shape.h2d, complete * config.gpus) << where;
    EXPECT_GE(shape.d2h, complete * config.gpus) << where;
    EXPECT_GE(shape.allocations, complete * config.gpus) << where;

    // The lines a trace viewer derives (xspace/derived_lines.h), as a grouped file holds them:
    // every GPU gets Steps and TensorFlow Ops with TSL's ids, nested and in start order.
    xspace::XSpace derived = space;
    EXPECT_GT(xspace::AddDerivedLines(&derived), 0) << where;
    MarkGrouped(&derived);
    EXPECT_THAT(CheckXProfConformance(derived, absl::StrCat("worker-", rank)), IsEmpty()) << where;
    for (const xspace::XPlane& plane : derived.planes()) {
      if (!absl::StartsWith(plane.name(), xspace::kGpuPlanePrefix)) continue;
      std::map<int64_t, int> events;  // line id -> events
      for (const xspace::XLine& line : plane.lines()) events[line.id()] = line.events_size();
      EXPECT_GE(events[xspace::kStepsLineId], complete) << where << " " << plane.name();
      EXPECT_GE(events[xspace::kTfOpsLineId], complete * config.kernels_per_step)
          << where << " " << plane.name();
    }
  }
}

// profctl's capture of a real PyTorch loop on an H100 (docs/gpu-verification.md, 2026-11-26):
// the autograd thread's launches joined to their steps, every kernel named by its NVTX range.
TEST(RealFilesTest, H100PyTorchCaptureConforms) {
  absl::StatusOr<std::string> bytes = ReadFile(DataPath("h100_pytorch_steps.xplane.pb"));
  ASSERT_THAT(bytes, IsOk());
  xspace::XSpace space;
  ASSERT_TRUE(space.ParseFromString(*bytes));
  EXPECT_THAT(CheckXProfConformance(space, "gpu-host"), IsEmpty());
  // Its derived lines (Steps from the NVTX steps, TensorFlow Ops from the NVTX ranges) nest.
  EXPECT_GT(xspace::AddDerivedLines(&space), 0);
  MarkGrouped(&space);
  EXPECT_THAT(CheckXProfConformance(space, "gpu-host"), IsEmpty());
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, SyntheticFilesTest,
    ::testing::Values(Case{"one_gpu", "gpus=1"},
                      Case{"eight_gpus_thirteen_kernels", "gpus=8,kernels_per_step=13"},
                      Case{"skewed_clocks", "world=2,gpus=2", /*skew_ms=*/1537},
                      Case{"straggler_and_input_stall",
                           "world=4,seed=11,step_ms=50,gpus=2,kernels_per_step=5,"
                           "straggler_rank=1,straggler_factor=2,input_stall_rank=2,"
                           "input_stall_ms=20",
                           /*skew_ms=*/263},
                      Case{"one_ms_steps_one_kernel", "step_ms=1,kernels_per_step=1,gpus=3",
                           /*skew_ms=*/0, /*window_ms=*/40},
                      Case{"demo_job",
                           "world=4,gpus=2,straggler_rank=1,straggler_factor=1.5,"
                           "input_stall_rank=2,input_stall_ms=20",
                           /*skew_ms=*/34, /*window_ms=*/2000}),
    PrintCase);

TEST(SyntheticCollectorFilesTest, CollectedWindowPassesTheChecker) {
  absl::StatusOr<synthetic::SyntheticJobConfig> config =
      synthetic::ParseSyntheticJobConfig("gpus=4");
  ASSERT_THAT(config, IsOk());
  config->clock_skew_ns = -11 * kNanosPerMilli;
  agent::SyntheticCollector collector(*config);
  ASSERT_THAT(collector.Prepare({}), IsOk());
  ASSERT_THAT(collector.Start(kT0), IsOk());
  ASSERT_THAT(collector.Stop(kT0 + 500 * kNanosPerMilli), IsOk());
  xspace::XSpace space;
  ASSERT_THAT(collector.Collect(&space), IsOk());
  space.add_hostnames("host-a");
  EXPECT_GT(xspace::CountEvents(space), 0);
  EXPECT_THAT(CheckXProfConformance(space, "host-a"), IsEmpty());
}

}  // namespace
}  // namespace profctl::testkit
