#include "analysis/breakdown.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <limits>
#include <map>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/test_time.h"

namespace profctl::analysis {
namespace {

using ::testing::AllOf;
using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;
using ::testing::SizeIs;

using ::profctl::test_time::kMs;
using ::profctl::test_time::kUs;

Op MakeOp(int64_t start, int64_t end, OpKind kind) { return Op{start, end, kind}; }

CategoryTimes Cats(std::initializer_list<std::pair<Category, int64_t>> values) {
  CategoryTimes t;
  for (const auto& [c, ns] : values) t[c] = ns;
  return t;
}

// One step (0) over [0, 100) in a window [0, 100), one device with `device_ops`.
HostTrace OneStep(std::vector<Op> device_ops, std::vector<Op> host_ops) {
  HostTrace t;
  t.host = "worker-0";
  t.window_start_ns = 0;
  t.window_end_ns = 100;
  t.steps = {StepMarker{0, 0, 100, 1}};
  t.devices = {DeviceTrace{0, "/device:GPU:0", std::move(device_ops)}};
  t.host_ops = std::move(host_ops);
  return t;
}

TEST(CategoryNameTest, NamesAreStable) {
  EXPECT_EQ(CategoryName(Category::kCompute), "compute");
  EXPECT_EQ(CategoryName(Category::kOutput), "output");
  EXPECT_EQ(CategoryName(Category::kDeviceToDevice), "d2d");
  EXPECT_EQ(CategoryName(Category::kCollectives), "collectives");
  EXPECT_EQ(CategoryName(Category::kInput), "input");
  EXPECT_EQ(CategoryName(Category::kHost), "host");
  EXPECT_EQ(CategoryName(Category::kIdle), "idle");
}

TEST(SummarizeHostTest, OverlapsResolvedByPrecedence) {
  const HostSummary s = SummarizeHost(OneStep(
      {
          MakeOp(10, 30, OpKind::kDeviceCompute),
          MakeOp(20, 50, OpKind::kCollective),  // under compute until 30
          MakeOp(40, 60, OpKind::kMemcpyD2H),   // beats the collective and the D2D
          MakeOp(55, 70, OpKind::kMemcpyD2D),   // beats the H2D
          MakeOp(65, 80, OpKind::kMemcpyH2D),
      },
      {
          MakeOp(75, 90, OpKind::kHostInputWait),  // input once the device is idle (80..90)
          MakeOp(85, 95, OpKind::kHostLaunch),     // loses to input until 90
          MakeOp(95, 100, OpKind::kHostSync),      // not overhead: idle
      }));
  ASSERT_THAT(s.steps, SizeIs(1));
  const CategoryTimes want = Cats({{Category::kCompute, 20},
                                   {Category::kOutput, 20},
                                   {Category::kDeviceToDevice, 10},
                                   {Category::kCollectives, 10},
                                   {Category::kInput, 20},
                                   {Category::kHost, 5},
                                   {Category::kIdle, 15}});
  EXPECT_EQ(s.steps[0].host.ns, want.ns);
  ASSERT_THAT(s.steps[0].devices, SizeIs(1));
  EXPECT_EQ(s.steps[0].devices[0].first, 0);
  EXPECT_EQ(s.steps[0].devices[0].second.ns, want.ns);
  EXPECT_EQ(s.steps[0].host.total(), 100);
  EXPECT_TRUE(s.has_markers);
  EXPECT_EQ(s.partial_steps, 0);
  EXPECT_THAT(s.warnings, IsEmpty());
}

TEST(SummarizeHostTest, KernelOverlappingCollectiveCountsAsCompute) {
  const HostSummary s = SummarizeHost(
      OneStep({MakeOp(0, 40, OpKind::kDeviceCompute), MakeOp(20, 100, OpKind::kCollective)}, {}));
  EXPECT_EQ(s.steps[0].host.ns, Cats({{Category::kCompute, 40}, {Category::kCollectives, 60}}).ns);
}

TEST(SummarizeHostTest, H2DDuringHostInputWaitIsInput) {
  const HostSummary s = SummarizeHost(
      OneStep({MakeOp(30, 60, OpKind::kMemcpyH2D)}, {MakeOp(0, 50, OpKind::kHostInputWait)}));
  EXPECT_EQ(s.steps[0].host.ns, Cats({{Category::kInput, 60}, {Category::kIdle, 40}}).ns);
}

TEST(SummarizeHostTest, LaunchOverheadCountsAsHostButSyncDoesNot) {
  const HostSummary s = SummarizeHost(OneStep({MakeOp(10, 50, OpKind::kDeviceCompute)},
                                              {
                                                  MakeOp(0, 10, OpKind::kHostLaunch),
                                                  MakeOp(12, 14, OpKind::kHostLaunch),  // hidden
                                                  MakeOp(50, 60, OpKind::kHostOther),
                                                  MakeOp(60, 100, OpKind::kHostSync),
                                              }));
  EXPECT_EQ(s.steps[0].host.ns,
            Cats({{Category::kCompute, 40}, {Category::kHost, 20}, {Category::kIdle, 40}}).ns);
}

TEST(SummarizeHostTest, SyncNestedInAFrameworkOpIsNotOverhead) {
  // aten::item [0, 100) holds cudaMemcpyAsync [10, 20) and cudaStreamSynchronize [20, 90); the
  // copy runs [20, 60): the host waits on the device, then the device is idle until the sync
  // returns; an input wait still counts as input.
  const HostSummary s = SummarizeHost(
      OneStep({MakeOp(20, 60, OpKind::kMemcpyD2H)}, {
                                                        MakeOp(0, 100, OpKind::kHostOther),
                                                        MakeOp(10, 20, OpKind::kHostLaunch),
                                                        MakeOp(20, 90, OpKind::kHostSync),
                                                        MakeOp(85, 88, OpKind::kHostInputWait),
                                                    }));
  EXPECT_EQ(s.steps[0].host.ns, Cats({{Category::kOutput, 40},
                                      {Category::kInput, 3},
                                      {Category::kHost, 30},
                                      {Category::kIdle, 27}})
                                    .ns);
}

TEST(SummarizeHostTest, OpsCrossingStepBoundariesAreSplit) {
  HostTrace t =
      OneStep({MakeOp(80, 130, OpKind::kDeviceCompute), MakeOp(150, 250, OpKind::kCollective)},
              {MakeOp(-50, 5, OpKind::kHostOther)});
  t.window_end_ns = 300;
  t.steps = {StepMarker{0, 0, 100, 1}, StepMarker{1, 100, 200, 1}};
  const HostSummary s = SummarizeHost(t);
  ASSERT_THAT(s.steps, SizeIs(2));
  EXPECT_EQ(s.steps[0].step, 0);
  EXPECT_EQ(s.steps[0].host.ns,
            Cats({{Category::kCompute, 20}, {Category::kHost, 5}, {Category::kIdle, 75}}).ns);
  EXPECT_EQ(s.steps[1].step, 1);
  EXPECT_EQ(
      s.steps[1].host.ns,
      Cats({{Category::kCompute, 30}, {Category::kCollectives, 50}, {Category::kIdle, 20}}).ns);
}

TEST(SummarizeHostTest, SeveralGpusFormTheHostView) {
  HostTrace t =
      OneStep({MakeOp(0, 50, OpKind::kDeviceCompute)}, {MakeOp(80, 90, OpKind::kHostLaunch)});
  t.devices.push_back(
      DeviceTrace{3,
                  "/device:GPU:3",
                  {MakeOp(0, 80, OpKind::kCollective), MakeOp(60, 70, OpKind::kDeviceCompute)}});
  const HostSummary s = SummarizeHost(t);
  ASSERT_THAT(s.steps, SizeIs(1));
  const HostStep& step = s.steps[0];
  ASSERT_THAT(step.devices, SizeIs(2));
  EXPECT_EQ(step.devices[0].first, 0);
  EXPECT_EQ(step.devices[0].second.ns,
            Cats({{Category::kCompute, 50}, {Category::kHost, 10}, {Category::kIdle, 40}}).ns);
  EXPECT_EQ(step.devices[1].first, 3);
  EXPECT_EQ(step.devices[1].second.ns, Cats({{Category::kCompute, 10},
                                             {Category::kCollectives, 70},
                                             {Category::kHost, 10},
                                             {Category::kIdle, 10}})
                                           .ns);
  // Per instant the highest precedence of any GPU: compute while either computes.
  EXPECT_EQ(step.host.ns, Cats({{Category::kCompute, 60},
                                {Category::kCollectives, 20},
                                {Category::kHost, 10},
                                {Category::kIdle, 10}})
                              .ns);
}

TEST(SummarizeHostTest, HostWithoutDevicesHasHostActivityOnly) {
  HostTrace t =
      OneStep({}, {MakeOp(0, 30, OpKind::kHostInputWait), MakeOp(20, 60, OpKind::kHostOther),
                   MakeOp(60, 80, OpKind::kHostSync)});
  t.devices.clear();
  const HostSummary s = SummarizeHost(t);
  ASSERT_THAT(s.steps, SizeIs(1));
  EXPECT_THAT(s.steps[0].devices, IsEmpty());
  EXPECT_EQ(s.steps[0].host.ns,
            Cats({{Category::kInput, 30}, {Category::kHost, 30}, {Category::kIdle, 40}}).ns);
}

TEST(SummarizeHostTest, SeveralMarkersOfOneStepAreOneStep) {
  HostTrace t = OneStep({MakeOp(0, 100, OpKind::kDeviceCompute)}, {});
  t.steps = {StepMarker{6, 100, 100, 1}, StepMarker{5, 20, 100, 2}, StepMarker{5, 10, 90, 1}};
  t.window_end_ns = 200;
  const HostSummary s = SummarizeHost(t);
  ASSERT_THAT(s.steps, SizeIs(2));
  EXPECT_EQ(s.steps[0].step, 5);
  EXPECT_EQ(s.steps[0].start_ns, 10);
  EXPECT_EQ(s.steps[0].end_ns, 100);
  EXPECT_EQ(s.steps[0].host[Category::kCompute], 90);
  EXPECT_EQ(s.steps[1].step, 6);  // empty steps are kept: nothing to split
  EXPECT_EQ(s.steps[1].host.total(), 0);
}

TEST(SummarizeHostTest, StepsCutByTheWindowAreKeptApartAsPartial) {
  HostTrace t = OneStep({MakeOp(0, 400, OpKind::kDeviceCompute)}, {});
  t.window_start_ns = 50;
  t.window_end_ns = 350;
  t.steps = {
      StepMarker{0, 0, 100, 1},  // starts before the window
      StepMarker{1, 100, 200, 1},
      StepMarker{2, 200, 300, 1},
      StepMarker{2, 200, 360, 2},              // one thread's marker is cut
      StepMarker{3, 300, 350, 1},              // ends exactly at the window's end: complete
      StepMarker{4, 350, 450, 1},              // nothing of it recorded
      StepMarker{5, 50, 80, 1, /*cut=*/true},  // its writer clipped it at the window's start
  };
  const HostSummary s = SummarizeHost(t);
  ASSERT_THAT(s.steps, SizeIs(2));
  EXPECT_EQ(s.steps[0].step, 1);
  EXPECT_EQ(s.steps[1].step, 3);
  EXPECT_EQ(s.partial_steps, 4);
  // The cut steps, clipped to the window and summarized over what was recorded.
  ASSERT_THAT(s.partial, SizeIs(3));
  EXPECT_EQ(s.partial[0].step, 0);
  EXPECT_EQ(s.partial[0].start_ns, 50);
  EXPECT_EQ(s.partial[0].end_ns, 100);
  EXPECT_EQ(s.partial[0].host[Category::kCompute], 50);
  EXPECT_EQ(s.partial[1].step, 2);
  EXPECT_EQ(s.partial[1].end_ns, 350);
  EXPECT_EQ(s.partial[1].host.total(), 150);
  EXPECT_EQ(s.partial[2].step, 5);
  EXPECT_EQ(s.partial[2].start_ns, 50);
  EXPECT_TRUE(s.has_markers);
}

TEST(SummarizeHostTest, NoMarkersGiveOnePseudoStepAndAWarning) {
  HostTrace t = OneStep({MakeOp(10, 30, OpKind::kDeviceCompute)}, {});
  t.steps.clear();
  t.window_start_ns = 5;
  t.window_end_ns = 25;
  const HostSummary s = SummarizeHost(t);
  EXPECT_FALSE(s.has_markers);
  ASSERT_THAT(s.steps, SizeIs(1));
  EXPECT_EQ(s.steps[0].step, -1);
  EXPECT_EQ(s.steps[0].start_ns, 5);
  EXPECT_EQ(s.steps[0].end_ns, 25);
  EXPECT_EQ(s.steps[0].host.ns, Cats({{Category::kCompute, 15}, {Category::kIdle, 5}}).ns);
  EXPECT_THAT(s.warnings, ElementsAre(HasSubstr("no step markers")));
}

TEST(SummarizeHostTest, OnlyPartialStepsWarn) {
  HostTrace t = OneStep({}, {});
  t.steps = {StepMarker{0, -10, 50, 1}, StepMarker{1, 50, 110, 1}};
  const HostSummary s = SummarizeHost(t);
  EXPECT_TRUE(s.has_markers);
  EXPECT_THAT(s.steps, IsEmpty());
  EXPECT_EQ(s.partial_steps, 2);
  EXPECT_THAT(s.partial, SizeIs(2));
  EXPECT_THAT(s.warnings, ElementsAre(HasSubstr("no complete step")));
}

TEST(SummarizeHostTest, OverlongStepsAreDroppedWithAWarning) {
  HostTrace t = OneStep({}, {});
  t.steps = {StepMarker{0, 0, 100, 1}, StepMarker{1, 0, 40, 1}};
  const HostSummary s = SummarizeHost(t, BreakdownOptions{/*max_step_ns=*/50});
  ASSERT_THAT(s.steps, SizeIs(1));
  EXPECT_EQ(s.steps[0].step, 1);
  EXPECT_EQ(s.partial_steps, 0);
  EXPECT_THAT(s.warnings, ElementsAre(HasSubstr("longer than")));
}

TEST(SummarizeHostTest, MissingWindowFallsBackToTheTraceExtent) {
  HostTrace t = OneStep({MakeOp(0, 100, OpKind::kDeviceCompute)}, {});
  t.window_start_ns = 0;
  t.window_end_ns = 0;
  t.warnings = {"reader: 3 events dropped"};
  const HostSummary s = SummarizeHost(t);
  ASSERT_THAT(s.steps, SizeIs(1));
  EXPECT_EQ(s.steps[0].host[Category::kCompute], 100);
  // The reader's warnings outlive the trace.
  EXPECT_THAT(s.warnings, ElementsAre("reader: 3 events dropped", HasSubstr("no recorded window")));
}

TEST(SummarizeHostTest, BadOpsAreIgnoredWithAWarning) {
  const HostSummary s = SummarizeHost(
      OneStep({MakeOp(50, 10, OpKind::kDeviceCompute)}, {MakeOp(0, 10, OpKind::kDeviceCompute)}));
  EXPECT_EQ(s.steps[0].host.ns, Cats({{Category::kIdle, 100}}).ns);
  EXPECT_THAT(s.warnings, ElementsAre(HasSubstr("end before they start"),
                                      HasSubstr("device ops among the host ops")));
}

TEST(SummarizeHostTest, AbsurdWindowIsClampedNotOverflowed) {
  HostTrace t = OneStep({MakeOp(-10, 10, OpKind::kDeviceCompute)}, {});
  t.steps.clear();
  t.window_start_ns = std::numeric_limits<int64_t>::min();
  t.window_end_ns = std::numeric_limits<int64_t>::max();
  const HostSummary s = SummarizeHost(t);
  ASSERT_THAT(s.steps, SizeIs(1));
  EXPECT_EQ(s.steps[0].start_ns, 0);  // end - int64 max
  EXPECT_EQ(s.steps[0].end_ns, std::numeric_limits<int64_t>::max());
  EXPECT_EQ(s.steps[0].host.total(), s.steps[0].end_ns - s.steps[0].start_ns);
  EXPECT_EQ(s.steps[0].host[Category::kCompute], 10);
  EXPECT_THAT(s.warnings, ElementsAre(HasSubstr("clamped"), HasSubstr("no step markers")));
}

// --- Property test: random traces against a brute-force, nanosecond-by-nanosecond oracle -------

Category OracleCategory(const std::vector<const Op*>& device_ops,
                        const std::vector<const Op*>& host_ops, int64_t t) {
  bool has[9] = {};
  for (const Op* op : device_ops) {
    if (op->start_ns <= t && t < op->end_ns) has[static_cast<int>(op->kind)] = true;
  }
  for (const Op* op : host_ops) {
    if (op->start_ns <= t && t < op->end_ns) has[static_cast<int>(op->kind)] = true;
  }
  auto any = [&](OpKind k) { return has[static_cast<int>(k)]; };
  if (any(OpKind::kDeviceCompute)) return Category::kCompute;
  if (any(OpKind::kMemcpyD2H)) return Category::kOutput;
  if (any(OpKind::kMemcpyD2D)) return Category::kDeviceToDevice;
  if (any(OpKind::kCollective)) return Category::kCollectives;
  if (any(OpKind::kMemcpyH2D) || any(OpKind::kHostInputWait)) return Category::kInput;
  if (!any(OpKind::kHostSync) && (any(OpKind::kHostLaunch) || any(OpKind::kHostOther))) {
    return Category::kHost;
  }
  return Category::kIdle;
}

bool IsHostKind(OpKind k) {
  return k == OpKind::kHostInputWait || k == OpKind::kHostLaunch || k == OpKind::kHostSync ||
         k == OpKind::kHostOther;
}

// Sizes of a random trace: times within about [-20, max_window + 20] ns.
struct RandomSize {
  int64_t max_window = 250;
  int64_t max_ops = 14;  // per device, and on the host
  int64_t max_len = 90;  // of an op
  int64_t max_step_len = 120;
};

HostTrace RandomTrace(std::mt19937_64& rng, const RandomSize& size = {}) {
  auto uniform = [&](int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
  };
  auto random_op = [&](int64_t ws, int64_t we, bool device) {
    const int64_t start = uniform(ws - 40, we + 10);
    // Mostly valid; a few zero-length or inverted ones, and rarely a misfiled kind.
    const int64_t len = uniform(0, 20) == 0 ? -uniform(1, 5) : uniform(0, size.max_len);
    OpKind kind;
    if (uniform(0, 30) == 0) {
      kind = static_cast<OpKind>(uniform(0, 8));
    } else {
      kind = device ? static_cast<OpKind>(uniform(0, 4)) : static_cast<OpKind>(uniform(5, 8));
    }
    return MakeOp(start, start + len, kind);
  };
  HostTrace t;
  t.host = "random";
  t.window_start_ns = uniform(-20, 20);
  t.window_end_ns = t.window_start_ns + uniform(1, size.max_window);
  const int64_t ws = t.window_start_ns;
  const int64_t we = t.window_end_ns;
  const int64_t markers = uniform(0, 7);
  for (int64_t i = 0; i < markers; ++i) {
    const int64_t start = uniform(ws - 20, we);
    t.steps.push_back(
        StepMarker{uniform(0, 4), start, start + uniform(0, size.max_step_len), uniform(0, 2)});
  }
  const int64_t devices = uniform(0, 3);
  for (int64_t d = 0; d < devices; ++d) {
    DeviceTrace dev{d * 2, "/device:GPU:" + std::to_string(d * 2), {}};
    const int64_t ops = uniform(0, size.max_ops);
    for (int64_t i = 0; i < ops; ++i) dev.ops.push_back(random_op(ws, we, /*device=*/true));
    t.devices.push_back(std::move(dev));
  }
  const int64_t host_ops = uniform(0, size.max_ops);
  for (int64_t i = 0; i < host_ops; ++i) t.host_ops.push_back(random_op(ws, we, false));
  return t;
}

// Summarizes `t` and checks the summary against the definitions, nanosecond by nanosecond.
void CheckAgainstOracle(const HostTrace& t, const BreakdownOptions& options) {
  const HostSummary s = SummarizeHost(t, options);

  // Steps by the definition: markers grouped by number, union window, wholly inside.
  std::map<int64_t, std::pair<int64_t, int64_t>> windows;
  for (const StepMarker& m : t.steps) {
    auto [it, fresh] = windows.try_emplace(m.step, m.start_ns, m.end_ns);
    if (!fresh) {
      it->second.first = std::min(it->second.first, m.start_ns);
      it->second.second = std::max(it->second.second, m.end_ns);
    }
  }
  std::vector<std::pair<int64_t, std::pair<int64_t, int64_t>>> want_steps;
  int64_t want_partial = 0;
  for (const auto& [step, w] : windows) {
    if (w.first < t.window_start_ns || w.second > t.window_end_ns) {
      ++want_partial;
    } else if (w.second - w.first <= options.max_step_ns) {
      want_steps.push_back({step, w});
    }
  }
  if (t.steps.empty()) want_steps.push_back({-1, {t.window_start_ns, t.window_end_ns}});
  EXPECT_EQ(s.has_markers, !t.steps.empty());
  EXPECT_EQ(s.partial_steps, want_partial);
  ASSERT_EQ(s.steps.size(), want_steps.size());

  // Valid ops only; host kinds count as host activity wherever they were filed.
  std::vector<const Op*> host_ops;
  std::vector<std::vector<const Op*>> device_ops(t.devices.size());
  std::vector<const Op*> all_device_ops;
  for (const Op& op : t.host_ops) {
    if (op.end_ns >= op.start_ns && IsHostKind(op.kind)) host_ops.push_back(&op);
  }
  for (size_t d = 0; d < t.devices.size(); ++d) {
    for (const Op& op : t.devices[d].ops) {
      if (op.end_ns < op.start_ns) continue;
      if (IsHostKind(op.kind)) {
        host_ops.push_back(&op);
      } else {
        device_ops[d].push_back(&op);
        all_device_ops.push_back(&op);
      }
    }
  }

  for (size_t i = 0; i < want_steps.size(); ++i) {
    const HostStep& got = s.steps[i];
    const auto& [step, w] = want_steps[i];
    ASSERT_EQ(got.step, step);
    ASSERT_EQ(got.start_ns, w.first);
    ASSERT_EQ(got.end_ns, w.second);
    const int64_t wall = got.end_ns - got.start_ns;
    // The property: everything adds up to the step's wall time, to the nanosecond.
    EXPECT_EQ(got.host.total(), wall);
    ASSERT_EQ(got.devices.size(), t.devices.size());
    for (size_t d = 0; d < t.devices.size(); ++d) {
      EXPECT_EQ(got.devices[d].first, t.devices[d].id);
      EXPECT_EQ(got.devices[d].second.total(), wall);
    }
    // And every nanosecond went to the right category.
    std::vector<CategoryTimes> want_devices(t.devices.size());
    CategoryTimes want_host;
    for (int64_t ns = got.start_ns; ns < got.end_ns; ++ns) {
      for (size_t d = 0; d < t.devices.size(); ++d) {
        ++want_devices[d][OracleCategory(device_ops[d], host_ops, ns)];
      }
      ++want_host[OracleCategory(all_device_ops, host_ops, ns)];
    }
    EXPECT_EQ(got.host.ns, want_host.ns);
    for (size_t d = 0; d < t.devices.size(); ++d) {
      EXPECT_EQ(got.devices[d].second.ns, want_devices[d].ns) << "device " << d;
    }
  }
}

TEST(SummarizeHostPropertyTest, RandomTracesMatchTheOracleAndAddUp) {
  std::mt19937_64 rng(20240607);
  for (int trial = 0; trial < 600; ++trial) {
    SCOPED_TRACE(testing::Message() << "trial " << trial);
    BreakdownOptions options;
    if (trial % 4 == 0) options.max_step_ns = 80;
    CheckAgainstOracle(RandomTrace(rng), options);
    if (testing::Test::HasFailure()) return;
  }
}

// Thousands of op edges: the radix sort path.
TEST(SummarizeHostPropertyTest, LargeRandomTracesMatchTheOracle) {
  std::mt19937_64 rng(99);
  const RandomSize size{/*max_window=*/3000, /*max_ops=*/500, /*max_len=*/300,
                        /*max_step_len=*/1500};
  for (int trial = 0; trial < 6; ++trial) {
    SCOPED_TRACE(testing::Message() << "trial " << trial);
    CheckAgainstOracle(RandomTrace(rng, size), BreakdownOptions{});
    if (testing::Test::HasFailure()) return;
  }
}

// Steps spread over more than 2^47 ns take the wide (16-byte event) path: a far step must not
// change the others' numbers.
TEST(SummarizeHostPropertyTest, WideAndPackedPathsAgree) {
  std::mt19937_64 rng(5);
  for (int trial = 0; trial < 20; ++trial) {
    SCOPED_TRACE(testing::Message() << "trial " << trial);
    HostTrace t = RandomTrace(rng, RandomSize{/*max_window=*/3000, /*max_ops=*/500, /*max_len=*/300,
                                              /*max_step_len=*/1500});
    if (t.steps.empty()) t.steps.push_back(StepMarker{0, 0, 1, 0});
    const HostSummary packed = SummarizeHost(t);
    constexpr int64_t kFar = int64_t{1} << 50;
    t.window_end_ns = kFar + 10;
    t.steps.push_back(StepMarker{1000, kFar, kFar + 5, 0});
    t.host_ops.push_back(MakeOp(kFar, kFar + 3, OpKind::kHostOther));
    const HostSummary wide = SummarizeHost(t);
    // Steps cut by the old window's end may now be complete: compare the common ones.
    for (const HostStep& p : packed.steps) {
      const auto it = std::find_if(wide.steps.begin(), wide.steps.end(),
                                   [&](const HostStep& w) { return w.step == p.step; });
      ASSERT_NE(it, wide.steps.end());
      EXPECT_EQ(it->host.ns, p.host.ns);
      ASSERT_EQ(it->devices.size(), p.devices.size());
      for (size_t d = 0; d < p.devices.size(); ++d) {
        EXPECT_EQ(it->devices[d].second.ns, p.devices[d].second.ns);
      }
    }
    ASSERT_FALSE(wide.steps.empty());
    EXPECT_EQ(wide.steps.back().step, 1000);
    EXPECT_EQ(wide.steps.back().host.ns, Cats({{Category::kHost, 3}, {Category::kIdle, 2}}).ns);
  }
}

// Consuming the trace (what analyze and the engine do, to halve the peak) changes nothing but the
// trace: its ops are gone afterwards, on both sweep paths.
TEST(SummarizeHostPropertyTest, ConsumingTheTraceGivesTheSameSummary) {
  std::mt19937_64 rng(77);
  for (int trial = 0; trial < 40; ++trial) {
    SCOPED_TRACE(testing::Message() << "trial " << trial);
    HostTrace t = RandomTrace(rng, RandomSize{/*max_window=*/3000, /*max_ops=*/500,
                                              /*max_len=*/300, /*max_step_len=*/1500});
    if (trial % 2 == 1) {  // the wide path
      constexpr int64_t kFar = int64_t{1} << 50;
      t.window_end_ns = kFar + 10;
      t.steps.push_back(StepMarker{1000, kFar, kFar + 5, 0});
    }
    const HostSummary kept = SummarizeHost(t);
    HostTrace consumed = t;
    const HostSummary moved = SummarizeHost(std::move(consumed));
    ASSERT_EQ(moved.steps.size(), kept.steps.size());
    for (size_t i = 0; i < kept.steps.size(); ++i) {
      EXPECT_EQ(moved.steps[i].step, kept.steps[i].step);
      EXPECT_EQ(moved.steps[i].host.ns, kept.steps[i].host.ns);
      ASSERT_EQ(moved.steps[i].devices.size(), kept.steps[i].devices.size());
      for (size_t d = 0; d < kept.steps[i].devices.size(); ++d) {
        EXPECT_EQ(moved.steps[i].devices[d].second.ns, kept.steps[i].devices[d].second.ns);
      }
    }
    EXPECT_EQ(moved.warnings, kept.warnings);
    EXPECT_EQ(moved.partial_steps, kept.partial_steps);
    // NOLINTNEXTLINE(bugprone-use-after-move): the contract is what it leaves behind.
    EXPECT_TRUE(consumed.host_ops.empty());
    for (const DeviceTrace& d : consumed.devices) EXPECT_TRUE(d.ops.empty());
    EXPECT_EQ(consumed.devices.size(), t.devices.size());
  }
}

// --- The pod view ------------------------------------------------------------------------------

// A synchronous data-parallel job like docs/synthetic-job.md's, one GPU per host: per step,
// input wait (10 ms + stall), H2D (5 ms), 4 kernels (50 ms x factor in all), an all-reduce from
// when the host is ready until the slowest host is ready + 15 ms, D2H (2 ms), sync.
struct JobSpec {
  int hosts = 4;
  int steps = 1;
  int64_t period_ns = 120 * kMs;
  std::function<double(int host, int step)> factor = [](int, int) { return 1.0; };
  std::function<int64_t(int host, int step)> stall_ns = [](int, int) { return int64_t{0}; };
};

std::vector<HostTrace> Job(const JobSpec& spec) {
  std::vector<HostTrace> traces(static_cast<size_t>(spec.hosts));
  for (int h = 0; h < spec.hosts; ++h) {
    HostTrace& t = traces[static_cast<size_t>(h)];
    t.host = "worker-" + std::to_string(h);
    t.window_start_ns = 0;
    t.window_end_ns = spec.steps * spec.period_ns;
    t.devices = {DeviceTrace{0, "/device:GPU:0", {}}};
  }
  for (int k = 0; k < spec.steps; ++k) {
    const int64_t s = k * spec.period_ns;
    std::vector<int64_t> ready(static_cast<size_t>(spec.hosts));
    std::vector<int64_t> compute_start(static_cast<size_t>(spec.hosts));
    for (int h = 0; h < spec.hosts; ++h) {
      const int64_t input_end = s + 10 * kMs + spec.stall_ns(h, k);
      const int64_t h2d_end = input_end + 10 * kUs + 5 * kMs;
      compute_start[static_cast<size_t>(h)] = h2d_end + 8 * kUs;
      ready[static_cast<size_t>(h)] =
          compute_start[static_cast<size_t>(h)] +
          std::llround(static_cast<double>(50 * kMs) * spec.factor(h, k));
    }
    const int64_t allreduce_end = *std::max_element(ready.begin(), ready.end()) + 15 * kMs;
    for (int h = 0; h < spec.hosts; ++h) {
      HostTrace& t = traces[static_cast<size_t>(h)];
      std::vector<Op>& dev = t.devices[0].ops;
      const int64_t input_end = s + 10 * kMs + spec.stall_ns(h, k);
      t.steps.push_back(StepMarker{k, s, s + spec.period_ns, 1000});
      t.host_ops.push_back(MakeOp(s, input_end, OpKind::kHostInputWait));
      t.host_ops.push_back(MakeOp(input_end, input_end + 10 * kUs, OpKind::kHostLaunch));
      dev.push_back(
          MakeOp(input_end + 10 * kUs, input_end + 10 * kUs + 5 * kMs, OpKind::kMemcpyH2D));
      const int64_t c0 = compute_start[static_cast<size_t>(h)];
      const int64_t c1 = ready[static_cast<size_t>(h)];
      for (int j = 0; j < 4; ++j) {
        const int64_t launch = c0 - 8 * kUs + int64_t{j} * 10 * kUs;
        t.host_ops.push_back(MakeOp(launch, launch + 8 * kUs, OpKind::kHostLaunch));
      }
      for (int j = 0; j < 4; ++j) {
        dev.push_back(
            MakeOp(c0 + (c1 - c0) * j / 4, c0 + (c1 - c0) * (j + 1) / 4, OpKind::kDeviceCompute));
      }
      t.host_ops.push_back(MakeOp(c0 + 40 * kUs, c0 + 48 * kUs, OpKind::kHostLaunch));
      dev.push_back(MakeOp(c1, allreduce_end, OpKind::kCollective));
      t.host_ops.push_back(MakeOp(allreduce_end, allreduce_end + 8 * kUs, OpKind::kHostLaunch));
      dev.push_back(
          MakeOp(allreduce_end + 8 * kUs, allreduce_end + 8 * kUs + 2 * kMs, OpKind::kMemcpyD2H));
      t.host_ops.push_back(
          MakeOp(allreduce_end + 8 * kUs, allreduce_end + 13 * kUs + 2 * kMs, OpKind::kHostSync));
    }
  }
  return traces;
}

std::vector<HostSummary> Summaries(const std::vector<HostTrace>& traces) {
  std::vector<HostSummary> out;
  out.reserve(traces.size());
  for (const HostTrace& t : traces) out.push_back(SummarizeHost(t));
  return out;
}

TEST(BuildPodBreakdownTest, ComputeStragglerIsFoundWithItsCause) {
  JobSpec spec;
  spec.factor = [](int h, int) { return h == 1 ? 1.5 : 1.0; };
  const PodBreakdown pod = BuildPodBreakdown(Summaries(Job(spec)));
  ASSERT_THAT(pod.steps, SizeIs(1));
  const PodStep& step = pod.steps[0];
  EXPECT_EQ(step.step, 0);
  ASSERT_THAT(step.hosts, SizeIs(4));
  EXPECT_EQ(step.pod_step_time_ns, 120 * kMs);
  EXPECT_EQ(step.spread_ns, 0);  // markers span the step grid: every rank's step is as long
  EXPECT_EQ(step.straggler, "worker-1");
  EXPECT_EQ(step.cause, Category::kCompute);
  EXPECT_EQ(step.cause_excess_ns, 25 * kMs);
  // What if worker-1 had computed at the median pace: the step 25 ms shorter.
  EXPECT_EQ(step.straggler_cost_ns, 25 * kMs);
  EXPECT_EQ(step.median_pace_cost_ns, 25 * kMs);
  EXPECT_EQ(step.hosts[1].categories[Category::kCompute], 75 * kMs);
  EXPECT_EQ(step.hosts[1].categories[Category::kCollectives], 15 * kMs);
  EXPECT_EQ(step.hosts[0].categories[Category::kCollectives], 40 * kMs);
  EXPECT_EQ(step.hosts[0].categories[Category::kInput], 15 * kMs);
  EXPECT_EQ(step.hosts[0].categories[Category::kOutput], 2 * kMs);
  EXPECT_EQ(step.hosts[0].categories[Category::kHost], 26 * kUs);
  EXPECT_EQ(step.bottleneck, Category::kCompute);
  EXPECT_EQ(step.why,
            "worker-1 is the straggler: compute 75.0 ms vs 50.0 ms median (+25.0 ms); the other "
            "hosts wait for it inside their collectives (40.0 ms median vs its 15.0 ms): "
            "waiting, not communicating");
  EXPECT_EQ(pod.hosts[1].straggler_steps, 1);
  EXPECT_THAT(pod.warnings, IsEmpty());
}

TEST(BuildPodBreakdownTest, InputBoundHostIsFound) {
  JobSpec spec;
  spec.stall_ns = [](int h, int) { return h == 2 ? 30 * kMs : int64_t{0}; };
  const PodBreakdown pod = BuildPodBreakdown(Summaries(Job(spec)));
  ASSERT_THAT(pod.steps, SizeIs(1));
  const PodStep& step = pod.steps[0];
  EXPECT_EQ(step.straggler, "worker-2");
  EXPECT_EQ(step.cause, Category::kInput);
  EXPECT_EQ(step.cause_excess_ns, 30 * kMs);
  EXPECT_EQ(step.hosts[2].categories[Category::kInput], 45 * kMs);
  EXPECT_EQ(step.hosts[0].categories[Category::kCollectives], 45 * kMs);
  EXPECT_THAT(step.why, HasSubstr("input 45.0 ms vs 15.0 ms median (+30.0 ms)"));
  EXPECT_THAT(step.why, HasSubstr("waiting, not communicating"));
}

TEST(BuildPodBreakdownTest, StragglerChangesAndConsistentlySlowHosts) {
  JobSpec spec;
  spec.hosts = 3;
  spec.steps = 6;
  // worker-2 in steps 0..1 and 5, worker-0 in steps 2..4.
  spec.factor = [](int h, int k) {
    const int slow = (k >= 2 && k <= 4) ? 0 : 2;
    return h == slow ? 1.2 : 1.0;
  };
  const PodBreakdown pod = BuildPodBreakdown(Summaries(Job(spec)));
  ASSERT_THAT(pod.steps, SizeIs(6));
  EXPECT_THAT(pod.verdict.straggler.changes, ElementsAre(2, 5));
  EXPECT_THAT(pod.verdict.consistently_slow.HostNames(),
              IsEmpty());  // 3 of 6 among 3 hosts: chance
  EXPECT_EQ(pod.hosts[0].straggler_steps, 3);
  EXPECT_EQ(pod.hosts[2].straggler_steps, 3);

  // Named in 5 of 6 steps among 3 hosts: P(>= 5 of 6 at 1/3) = 1.8 %, not beyond chance at 1 %.
  spec.factor = [](int h, int k) { return h == 1 && k != 3 ? 1.3 : (h == 0 ? 1.1 : 1.0); };
  const PodBreakdown slow = BuildPodBreakdown(Summaries(Job(spec)));
  EXPECT_THAT(slow.verdict.consistently_slow.HostNames(), IsEmpty());
  EXPECT_THAT(slow.verdict.straggler.changes, ElementsAre(3, 4));
  EXPECT_EQ(slow.hosts[1].straggler_steps, 5);
  // 9 of 10: P = 0.04 %, and slower on the median: consistently slow.
  spec.steps = 10;
  const PodBreakdown slower = BuildPodBreakdown(Summaries(Job(spec)));
  EXPECT_EQ(slower.hosts[1].straggler_steps, 9);
  EXPECT_THAT(slower.verdict.consistently_slow.HostNames(), ElementsAre("worker-1"));
}

TEST(BuildPodBreakdownTest, AcrossStepStatistics) {
  JobSpec spec;
  spec.hosts = 2;
  spec.steps = 4;
  spec.factor = [](int h, int k) { return h == 0 ? 1.0 + 0.1 * k : 1.0; };  // 50, 55, 60, 65
  const PodBreakdown pod = BuildPodBreakdown(Summaries(Job(spec)));
  ASSERT_THAT(pod.hosts, SizeIs(2));
  const HostReport& r = pod.hosts[0];
  EXPECT_EQ(r.host, "worker-0");
  EXPECT_EQ(r.steps, 4);
  EXPECT_TRUE(r.has_markers);
  const Stats& compute = r.categories[static_cast<int>(Category::kCompute)];
  EXPECT_DOUBLE_EQ(compute.mean_ns, 57.5 * kMs);
  EXPECT_EQ(compute.p50_ns, 55 * kMs);  // nearest rank: the lower middle
  EXPECT_EQ(compute.p90_ns, 65 * kMs);
  EXPECT_EQ(r.step_time.p50_ns, 120 * kMs);
  EXPECT_DOUBLE_EQ(pod.pod_step_time.mean_ns, 120.0 * kMs);
  // Step 0: identical hosts: no straggler, whoever would win the tie.
  EXPECT_EQ(pod.steps[0].straggler, "");
  EXPECT_EQ(pod.steps[0].straggler_excess_ns, 0);
  EXPECT_EQ(pod.steps[0].cause, Category::kIdle);
  EXPECT_THAT(pod.steps[0].why, HasSubstr("no straggler: the hosts' time outside collectives is "
                                          "within 0.0 ms of each other"));
  EXPECT_EQ(pod.steps[1].straggler, "worker-0");
  EXPECT_EQ(pod.steps[1].cause_excess_ns, 5 * kMs);  // vs the lower of two: the other host
}

TEST(BuildPodBreakdownTest, SingleHostHasNoStraggler) {
  JobSpec spec;
  spec.hosts = 1;
  spec.steps = 3;
  const PodBreakdown pod = BuildPodBreakdown(Summaries(Job(spec)));
  ASSERT_THAT(pod.steps, SizeIs(3));
  for (const PodStep& step : pod.steps) {
    EXPECT_EQ(step.straggler, "");
    EXPECT_EQ(step.cause, Category::kIdle);
    EXPECT_EQ(step.spread_ns, 0);
    EXPECT_EQ(step.bottleneck, Category::kCompute);
    EXPECT_EQ(step.why,
              "single host worker-0: no straggler; largest category compute (50.0 ms of 120.0 "
              "ms)");
  }
  EXPECT_THAT(pod.verdict.straggler.changes, IsEmpty());
  EXPECT_THAT(pod.verdict.consistently_slow.HostNames(), IsEmpty());
  EXPECT_EQ(pod.hosts[0].straggler_steps, 0);
}

TEST(BuildPodBreakdownTest, StepsOnSomeHostsOnlyAndHostsWithoutMarkersWarn) {
  JobSpec spec;
  spec.hosts = 3;
  spec.steps = 3;
  std::vector<HostTrace> traces = Job(spec);
  traces[1].window_start_ns = 1;  // step 0 is partial on worker-1
  traces[2].steps.clear();        // worker-2 has no markers
  const PodBreakdown pod = BuildPodBreakdown(Summaries(traces));
  ASSERT_THAT(pod.steps, SizeIs(3));
  EXPECT_THAT(pod.steps[0].hosts, SizeIs(1));
  EXPECT_EQ(pod.steps[0].straggler, "");
  EXPECT_THAT(pod.steps[1].hosts, SizeIs(2));
  EXPECT_EQ(pod.hosts[1].partial_steps, 1);
  EXPECT_FALSE(pod.hosts[2].has_markers);
  EXPECT_EQ(pod.hosts[2].steps, 1);
  EXPECT_THAT(pod.hosts[2].warnings, ElementsAre(HasSubstr("no step markers")));
  EXPECT_THAT(pod.warnings, ElementsAre(HasSubstr("worker-2 has no step markers"),
                                        HasSubstr("step 0 lacks worker-1"),
                                        HasSubstr("over the 2 steps every host has; 1 steps")));
  EXPECT_FALSE(pod.steps[0].on_every_host);
  EXPECT_TRUE(pod.steps[1].on_every_host);
  EXPECT_EQ(pod.steps_on_every_host, 2);
}

TEST(BuildPodBreakdownTest, HostsWithoutMarkersAreComparedAsWholeWindows) {
  JobSpec spec;
  spec.hosts = 2;
  spec.steps = 2;
  spec.factor = [](int h, int) { return h == 1 ? 1.4 : 1.0; };
  std::vector<HostTrace> traces = Job(spec);
  for (HostTrace& t : traces) t.steps.clear();
  const PodBreakdown pod = BuildPodBreakdown(Summaries(traces));
  ASSERT_THAT(pod.steps, SizeIs(1));
  EXPECT_EQ(pod.steps[0].step, -1);
  EXPECT_EQ(pod.steps[0].straggler, "worker-1");
  EXPECT_EQ(pod.steps[0].cause, Category::kCompute);
  EXPECT_EQ(pod.steps[0].cause_excess_ns, 40 * kMs);
  EXPECT_THAT(pod.warnings, ElementsAre(HasSubstr("no host has step markers")));
}

TEST(BuildPodBreakdownTest, NoCollectivesMeansTheLongestStepStraggles) {
  std::vector<HostSummary> hosts(2);
  for (int h = 0; h < 2; ++h) {
    hosts[h].host = "h" + std::to_string(h);
    HostStep s;
    s.step = 7;
    s.end_ns = int64_t{h + 1} * 100 * kMs;
    s.host[Category::kHost] = s.end_ns;
    hosts[h].steps.push_back(s);
  }
  const PodBreakdown pod = BuildPodBreakdown(hosts);
  ASSERT_THAT(pod.steps, SizeIs(1));
  EXPECT_EQ(pod.steps[0].straggler, "h1");
  EXPECT_EQ(pod.steps[0].spread_ns, 100 * kMs);
  EXPECT_EQ(pod.steps[0].cause, Category::kHost);
  EXPECT_THAT(pod.steps[0].why, HasSubstr("no collectives in this step"));
}

TEST(BuildPodBreakdownTest, EmptyPodWarns) {
  const PodBreakdown pod = BuildPodBreakdown({});
  EXPECT_THAT(pod.steps, IsEmpty());
  EXPECT_THAT(pod.warnings, ElementsAre(HasSubstr("no hosts")));
}

// A synchronous data-parallel pod, hand-built: per step every host computes 50 ms x its factor x
// (1 + jitter x N(0, 1)), then waits in the all-reduce for the slowest; every step is as long.
std::vector<HostSummary> SyncPod(int hosts, int steps, double jitter,
                                 const std::function<double(int)>& factor, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> noise(0, 1);
  std::vector<HostSummary> out(static_cast<size_t>(hosts));
  for (int h = 0; h < hosts; ++h) out[static_cast<size_t>(h)].host = absl::StrCat("worker-", h);
  for (int k = 0; k < steps; ++k) {
    std::vector<int64_t> compute(static_cast<size_t>(hosts));
    for (int h = 0; h < hosts; ++h) {
      compute[static_cast<size_t>(h)] =
          std::llround(50.0 * kMs * factor(h) * (1 + jitter * noise(rng)));
    }
    const int64_t pod = *std::max_element(compute.begin(), compute.end()) + 5 * kMs;
    for (int h = 0; h < hosts; ++h) {
      HostStep st;
      st.step = k;
      st.start_ns = int64_t{k} * 200 * kMs;
      st.end_ns = st.start_ns + pod;
      st.host[Category::kCompute] = compute[static_cast<size_t>(h)];
      st.host[Category::kCollectives] = pod - compute[static_cast<size_t>(h)];
      out[static_cast<size_t>(h)].steps.push_back(st);
    }
  }
  return out;
}

int64_t NamedSteps(const PodBreakdown& pod) {
  return std::count_if(pod.steps.begin(), pod.steps.end(),
                       [](const PodStep& s) { return !s.straggler.empty(); });
}

TEST(StragglerNoiseTest, JitterAloneNamesNoStragglerAndNobodyIsConsistentlySlow) {
  for (const int hosts : {2, 4, 8}) {
    for (const uint64_t seed : {1, 2, 3}) {
      SCOPED_TRACE(testing::Message() << hosts << " hosts, seed " << seed);
      const PodBreakdown pod = BuildPodBreakdown(SyncPod(
          hosts, 200, 0.05, [](int) { return 1.0; }, seed));
      EXPECT_LE(NamedSteps(pod), 10);  // at most 5 % of the steps
      EXPECT_THAT(pod.verdict.consistently_slow.HostNames(), IsEmpty());
      EXPECT_GT(pod.noise_ns, 0);
      EXPECT_GE(pod.noise_floor_ns, 3 * pod.noise_ns - 2);  // z >= 3 (each rounded)
    }
  }
}

TEST(StragglerNoiseTest, IdenticalHostsHaveNoStraggler) {
  const PodBreakdown pod = BuildPodBreakdown(SyncPod(
      4, 30, 0, [](int) { return 1.0; }, 1));
  EXPECT_EQ(NamedSteps(pod), 0);
  EXPECT_THAT(pod.verdict.consistently_slow.HostNames(), IsEmpty());
  EXPECT_THAT(pod.steps[0].why, HasSubstr("no straggler"));
}

TEST(StragglerNoiseTest, ASmallSteadyStragglerAmongQuietHostsIsFound) {
  // 1.03 x: 1.5 ms a step, with 0.05 ms of jitter.
  const PodBreakdown pod = BuildPodBreakdown(SyncPod(
      4, 100, 0.001, [](int h) { return h == 2 ? 1.03 : 1.0; }, 5));
  EXPECT_EQ(NamedSteps(pod), 100);
  EXPECT_EQ(pod.hosts[2].straggler_steps, 100);
  EXPECT_THAT(pod.verdict.consistently_slow.HostNames(), ElementsAre("worker-2"));
  EXPECT_NEAR(static_cast<double>(pod.steps[50].straggler_excess_ns), 1.5 * kMs, 0.5 * kMs);
  // What if it had computed at the median pace: each step ~1.5 ms shorter, ~2.7 % of 55 ms (down
  // to the next-slowest host's pace, a little above the median's).
  EXPECT_EQ(pod.verdict.what_if.steps, 100);
  EXPECT_NEAR(static_cast<double>(pod.verdict.what_if.straggler_cost_ns) / 100, 1.5 * kMs,
              0.2 * kMs);
  EXPECT_LE(pod.verdict.what_if.straggler_cost_ns, pod.verdict.what_if.median_pace_cost_ns);
  EXPECT_GE(pod.verdict.what_if.straggler_cost_ns,
            pod.verdict.what_if.median_pace_cost_ns * 95 / 100);
}

TEST(StragglerNoiseTest, AnIntermittentStragglerDoesNotRaiseTheFloorOverItself) {
  // worker-1 is 30 % slower in every fifth step, in 2 % jitter: named there, and only there.
  const auto slow_every_fifth = [](int hosts, int steps) {
    std::vector<HostSummary> pod = SyncPod(
        hosts, steps, 0.02, [](int) { return 1.0; }, 9);
    for (HostSummary& h : pod) {
      for (HostStep& st : h.steps) {
        if (st.step % 5 != 0) continue;
        const int64_t extra = h.host == "worker-1" ? 15 * kMs : 0;
        st.host[Category::kCompute] += extra;
        st.host[Category::kCollectives] += 15 * kMs - extra;
        st.end_ns += 15 * kMs;
      }
    }
    return pod;
  };
  const PodBreakdown pod = BuildPodBreakdown(slow_every_fifth(8, 100));
  EXPECT_EQ(pod.hosts[1].straggler_steps, 20);
  EXPECT_LE(NamedSteps(pod), 22);
}

// Adds `extra` ns of `c` to every step of `host` (the others wait for it in the collective).
void SlowDown(std::vector<HostSummary>& pod, const std::string& host, Category c, int64_t extra) {
  for (HostSummary& h : pod) {
    for (HostStep& st : h.steps) {
      if (h.host == host) {
        st.host[c] += extra;
        st.host[Category::kCollectives] -= std::min(extra, st.host[Category::kCollectives]);
      }
    }
  }
}

TEST(StepOutlierTest, ASecondSlowHostIsReportedBesideTheStraggler) {
  // worker-1 computes 20 % slower (+10 ms): the straggler. worker-3 waits 4 ms for input every
  // step, hidden behind worker-1 (its collectives absorb it): never the straggler, still reported.
  std::vector<HostSummary> hosts = SyncPod(
      4, 60, 0.002, [](int h) { return h == 1 ? 1.2 : 1.0; }, 3);
  SlowDown(hosts, "worker-3", Category::kInput, 4 * kMs);
  const PodBreakdown pod = BuildPodBreakdown(hosts);
  EXPECT_EQ(pod.hosts[1].straggler_steps, 60);
  EXPECT_EQ(pod.hosts[3].straggler_steps, 0);
  ASSERT_THAT(pod.verdict.stands_out.hosts, SizeIs(2));
  EXPECT_EQ(pod.verdict.stands_out.hosts[0].host, "worker-1");
  EXPECT_EQ(pod.verdict.stands_out.hosts[0].category, Category::kCompute);
  EXPECT_NEAR(static_cast<double>(pod.verdict.stands_out.hosts[0].median_excess_ns), 10.0 * kMs,
              0.5 * kMs);
  EXPECT_EQ(pod.verdict.stands_out.hosts[1].host, "worker-3");
  EXPECT_EQ(pod.verdict.stands_out.hosts[1].category, Category::kInput);
  EXPECT_EQ(pod.verdict.stands_out.hosts[1].median_excess_ns, 4 * kMs);
  EXPECT_EQ(pod.verdict.stands_out.hosts[1].steps, 60);
  EXPECT_EQ(pod.verdict.stands_out.hosts[1].steps_beyond, 60);
  // Per step, both, largest first.
  for (const PodStep& step : pod.steps) {
    ASSERT_THAT(step.outliers, SizeIs(2)) << "step " << step.step;
    EXPECT_EQ(step.outliers[0].host, "worker-1");
    EXPECT_EQ(step.outliers[1].host, "worker-3");
    EXPECT_EQ(step.outliers[1].excess_ns, 4 * kMs);
  }
  EXPECT_GT(pod.category_noise_floor_ns[static_cast<int>(Category::kInput)], 0);
  EXPECT_EQ(pod.category_noise_floor_ns[static_cast<int>(Category::kCollectives)], 0);
}

TEST(StepOutlierTest, NoiseAloneAndIdenticalHostsStandOutNowhere) {
  for (const int hosts : {2, 4, 8}) {
    SCOPED_TRACE(testing::Message() << hosts << " hosts");
    const PodBreakdown noisy = BuildPodBreakdown(SyncPod(
        hosts, 200, 0.05, [](int) { return 1.0; }, 11));
    EXPECT_THAT(noisy.verdict.stands_out.hosts, IsEmpty());
    int64_t flagged = 0;
    for (const PodStep& step : noisy.steps) flagged += !step.outliers.empty();
    EXPECT_LE(flagged, 10);  // at most 5 % of the steps
    const PodBreakdown same = BuildPodBreakdown(SyncPod(
        hosts, 30, 0, [](int) { return 1.0; }, 1));
    EXPECT_THAT(same.verdict.stands_out.hosts, IsEmpty());
    for (const PodStep& step : same.steps) EXPECT_THAT(step.outliers, IsEmpty());
  }
}

TEST(StepOutlierTest, AHostSlowInFewStepsIsNotAnOutlierOfTheCapture) {
  // worker-2 stalls 10 ms on input in 5 of 50 steps: outliers of those steps only.
  std::vector<HostSummary> hosts = SyncPod(
      4, 50, 0.002, [](int) { return 1.0; }, 4);
  for (HostStep& st : hosts[2].steps) {
    if (st.step % 10 == 0) st.host[Category::kInput] += 10 * kMs;
  }
  const PodBreakdown pod = BuildPodBreakdown(hosts);
  EXPECT_THAT(pod.verdict.stands_out.hosts, IsEmpty());
  int64_t flagged = 0;
  for (const PodStep& step : pod.steps) {
    if (step.step % 10 == 0) {
      ASSERT_THAT(step.outliers, SizeIs(1));
      EXPECT_EQ(step.outliers[0].host, "worker-2");
      EXPECT_EQ(step.outliers[0].category, Category::kInput);
    }
    flagged += !step.outliers.empty();
  }
  EXPECT_EQ(flagged, 5);
}

TEST(StragglerDeviceTest, TheStragglersSlowGpuIsNamedOnlyBeyondTheNoise) {
  // Two GPUs per host; worker-1's GPU 1 computes 8 ms longer than its GPU 0 every step.
  const auto pod_with = [](int64_t slow_gpu_extra) {
    std::vector<HostSummary> hosts = SyncPod(
        4, 30, 0.002, [](int h) { return h == 1 ? 1.2 : 1.0; }, 6);
    for (HostSummary& h : hosts) {
      for (HostStep& st : h.steps) {
        for (int64_t d = 0; d < 2; ++d) {
          CategoryTimes c = st.host;
          const int64_t less = h.host == "worker-1" && d == 0 ? slow_gpu_extra : 0;
          c[Category::kCompute] -= less;
          c[Category::kCollectives] += less;
          st.devices.emplace_back(d, c);
        }
      }
    }
    return BuildPodBreakdown(hosts);
  };
  const PodBreakdown pod = pod_with(8 * kMs);
  for (const PodStep& step : pod.steps) {
    ASSERT_EQ(step.straggler, "worker-1") << step.step;
    EXPECT_EQ(step.straggler_device, 1) << step.step;
    EXPECT_EQ(step.straggler_device_excess_ns, 8 * kMs) << step.step;
    EXPECT_THAT(step.why, HasSubstr("of its 2 devices, device 1 is the slowest (+8.0 ms"));
    EXPECT_THAT(step.hosts[1].devices, SizeIs(2));
    // The other hosts' devices agree: their views, which say nothing, are not kept.
    for (const size_t i : {0, 2, 3}) EXPECT_THAT(step.hosts[i].devices, IsEmpty()) << i;
  }
  // GPUs alike: no device named; the straggler's views are kept all the same.
  for (const PodStep& step : pod_with(0).steps) {
    EXPECT_EQ(step.straggler_device, -1) << step.step;
    EXPECT_THAT(step.why, Not(HasSubstr("devices")));
    EXPECT_THAT(step.hosts[1].devices, SizeIs(2));
    EXPECT_THAT(step.hosts[0].devices, IsEmpty());
  }
}

TEST(StepMatchingTest, AHostOnAnotherGridIsLeftOutAndNamed) {
  // worker-3's steps carry the same numbers on a grid 1.37 x as long: 274 ms apart, not 200.
  std::vector<HostSummary> hosts = SyncPod(
      4, 20, 0.01, [](int) { return 1.0; }, 2);
  for (HostStep& st : hosts[3].steps) {
    const int64_t shift = st.step * 74 * kMs;
    st.start_ns += shift;
    st.end_ns += shift;
  }
  const PodBreakdown pod = BuildPodBreakdown(hosts);
  ASSERT_THAT(pod.steps, SizeIs(20));
  EXPECT_THAT(pod.steps[0].hosts, SizeIs(4));  // step 0 starts together
  for (size_t k = 1; k < pod.steps.size(); ++k) {
    ASSERT_THAT(pod.steps[k].hosts, SizeIs(3)) << "step " << pod.steps[k].step;
    for (const PodHostStep& h : pod.steps[k].hosts) EXPECT_NE(h.host, "worker-3");
  }
  EXPECT_EQ(pod.steps_on_every_host, 1);
  EXPECT_THAT(pod.warnings, Contains(AllOf(HasSubstr("worker-3: 19 of its 20 steps start"),
                                           HasSubstr("another step grid"))));
}

TEST(StepMatchingTest, AHostSteadilyOffIsMatchedByNumberAndNamed) {
  // worker-3's steps start 56.6 ms after the others' (~55 ms steps), every step: its clock.
  std::vector<HostSummary> hosts = SyncPod(
      4, 20, 0.01, [](int) { return 1.0; }, 2);
  for (HostStep& st : hosts[3].steps) {
    st.start_ns += 56'600'000;
    st.end_ns += 56'600'000;
  }
  const PodBreakdown pod = BuildPodBreakdown(hosts);
  ASSERT_THAT(pod.steps, SizeIs(20));
  for (const PodStep& step : pod.steps) EXPECT_THAT(step.hosts, SizeIs(4));
  EXPECT_EQ(pod.steps_on_every_host, 20);
  EXPECT_THAT(pod.warnings,
              Contains(AllOf(HasSubstr("worker-3: its steps start 56.6 ms (median, steadily)"),
                             HasSubstr("matched by step number"))));
}

TEST(StepMatchingTest, AHostSharingNoStepNumberIsNamedAndLeftOutOfThePodStatistics) {
  // worker-3 counts its steps from 500: no number in common with the others.
  std::vector<HostSummary> hosts = SyncPod(
      4, 20, 0.01, [](int) { return 1.0; }, 2);
  for (HostStep& st : hosts[3].steps) {
    st.step += 500;
    st.end_ns += 30 * kMs;  // a longer step, which must not enter the pod's step time
  }
  const PodBreakdown pod = BuildPodBreakdown(hosts);
  ASSERT_THAT(pod.steps, SizeIs(40));
  EXPECT_EQ(pod.steps_on_every_host, 20);  // the three's steps; worker-3 is expected in none
  for (const PodStep& step : pod.steps) {
    EXPECT_EQ(step.on_every_host, step.hosts.size() == 3) << step.step;
  }
  EXPECT_LT(pod.pod_step_time.p90_ns, 60 * kMs);  // its 85 ms steps are not the pod's
  EXPECT_THAT(pod.warnings, Contains(HasSubstr("worker-3 shares none of its 20 steps")));
  EXPECT_THAT(pod.warnings, Not(Contains(HasSubstr("lacks"))));
}

TEST(StepMatchingTest, AStepSomeHostsLackNamesNoStraggler) {
  // worker-1, the straggler, lacks the last step (cut by the window): nobody else is named there.
  std::vector<HostSummary> hosts = SyncPod(
      4, 10, 0.002, [](int h) { return h == 1 ? 1.3 : 1.0; }, 2);
  hosts[1].steps.pop_back();
  const PodBreakdown pod = BuildPodBreakdown(hosts);
  ASSERT_THAT(pod.steps, SizeIs(10));
  EXPECT_FALSE(pod.steps.back().on_every_host);
  EXPECT_EQ(pod.steps.back().straggler, "");
  EXPECT_THAT(pod.steps.back().why, HasSubstr("no straggler named: only 3 of the hosts"));
  EXPECT_THAT(pod.verdict.straggler.changes, IsEmpty());
  for (size_t k = 0; k + 1 < pod.steps.size(); ++k) EXPECT_EQ(pod.steps[k].straggler, "worker-1");
}

TEST(StepMatchingTest, TwoHostsThatDisagreeAreComparedButDoubtful) {
  // Two hosts on different grids: no majority to say which one is off.
  std::vector<HostSummary> hosts = SyncPod(
      2, 10, 0.01, [](int) { return 1.0; }, 2);
  for (HostStep& st : hosts[1].steps) {
    const int64_t shift = st.step * 74 * kMs;
    st.start_ns += shift;
    st.end_ns += shift;
  }
  const PodBreakdown pod = BuildPodBreakdown(hosts);
  ASSERT_THAT(pod.steps, SizeIs(10));
  for (const PodStep& step : pod.steps) EXPECT_THAT(step.hosts, SizeIs(2));
  EXPECT_THAT(pod.warnings,
              Contains(AllOf(HasSubstr("9 steps have hosts whose starts disagree"),
                             HasSubstr("step 1: worker-0 at 0.0 ms, worker-1 at 74.0 ms"))));
}

TEST(StepMatchingTest, StepsAreInTimeOrderWhenTheirNumbersWrap) {
  std::vector<HostSummary> hosts = SyncPod(
      2, 4, 0.01, [](int) { return 1.0; }, 2);
  for (HostSummary& h : hosts) {
    for (HostStep& st : h.steps) st.step = (999'998 + st.step) % 1'000'000;
  }
  const PodBreakdown pod = BuildPodBreakdown(hosts);
  std::vector<int64_t> order;
  for (const PodStep& step : pod.steps) order.push_back(step.step);
  EXPECT_THAT(order, ElementsAre(999'998, 999'999, 0, 1));
}

TEST(StepMatchingTest, ACaptureShorterThanAStepNamesNoStragglerAndSaysSo) {
  std::vector<HostSummary> hosts(3);
  for (size_t h = 0; h < hosts.size(); ++h) {
    hosts[h].host = absl::StrCat("worker-", h);
    HostStep cut;
    cut.step = 7;
    cut.end_ns = 30 * kMs + static_cast<int64_t>(h) * 100'000;  // capture-timing noise
    cut.host[Category::kCompute] = cut.end_ns;
    hosts[h].partial.push_back(cut);
    hosts[h].partial_steps = 1;
  }
  const PodBreakdown pod = BuildPodBreakdown(hosts);
  EXPECT_THAT(pod.steps, IsEmpty());
  EXPECT_THAT(pod.warnings, Contains(HasSubstr("the capture is shorter than a step")));
  for (const HostReport& h : pod.hosts) EXPECT_EQ(h.straggler_steps, 0);
}

TEST(BuildPodBreakdownPropertyTest, RandomPodsAreConsistent) {
  std::mt19937_64 rng(7);
  for (int trial = 0; trial < 200; ++trial) {
    SCOPED_TRACE(testing::Message() << "trial " << trial);
    std::vector<HostSummary> hosts(std::uniform_int_distribution<size_t>(1, 6)(rng));
    for (size_t h = 0; h < hosts.size(); ++h) {
      hosts[h].host = absl::StrCat("h", h);
      for (int64_t k = 0; k < 5; ++k) {
        if (rng() % 5 == 0) continue;
        HostStep s;
        s.step = k;
        for (int64_t& ns : s.host.ns) ns = static_cast<int64_t>(rng() % 1000);
        s.end_ns = s.host.total();
        hosts[h].steps.push_back(s);
      }
    }
    const PodBreakdown pod = BuildPodBreakdown(hosts);
    int64_t previous = -1;
    for (const PodStep& step : pod.steps) {
      EXPECT_GT(step.step, previous);
      previous = step.step;
      ASSERT_FALSE(step.hosts.empty());
      int64_t max_time = 0;
      int64_t min_time = step.hosts[0].step_time_ns;
      int64_t min_collectives = step.hosts[0].categories[Category::kCollectives];
      for (const PodHostStep& h : step.hosts) {
        max_time = std::max(max_time, h.step_time_ns);
        min_time = std::min(min_time, h.step_time_ns);
        min_collectives = std::min(min_collectives, h.categories[Category::kCollectives]);
      }
      EXPECT_EQ(step.pod_step_time_ns, max_time);
      EXPECT_EQ(step.spread_ns, max_time - min_time);
      EXPECT_FALSE(step.why.empty());
      for (size_t i = 0; i < step.outliers.size(); ++i) {
        const StepOutlier& o = step.outliers[i];
        EXPECT_NE(o.category, Category::kCollectives);
        EXPECT_NE(o.category, Category::kIdle);
        EXPECT_GT(o.excess_ns, pod.category_noise_floor_ns[static_cast<int>(o.category)]);
        if (i > 0) {
          EXPECT_LE(o.excess_ns, step.outliers[i - 1].excess_ns);
        }
      }
      if (step.hosts.size() == 1) {
        EXPECT_THAT(step.outliers, IsEmpty());
      }
      if (step.hosts.size() == 1) {
        EXPECT_EQ(step.straggler, "");
        continue;
      }
      // Named exactly when the candidate's excess passes the noise floor, in a step every host has
      // (or in any step when none is on every host).
      const bool comparable = step.on_every_host || pod.steps_on_every_host == 0;
      EXPECT_EQ(step.straggler.empty(),
                !comparable || step.straggler_excess_ns <= pod.noise_floor_ns);
      if (step.straggler.empty()) {
        EXPECT_THAT(step.why, HasSubstr("no straggler"));
        continue;
      }
      EXPECT_GT(step.straggler_excess_ns, 0);
      const auto it = std::find_if(step.hosts.begin(), step.hosts.end(),
                                   [&](const PodHostStep& h) { return h.host == step.straggler; });
      ASSERT_NE(it, step.hosts.end());
      EXPECT_EQ(it->categories[Category::kCollectives], min_collectives);
      EXPECT_GE(step.cause_excess_ns, 0);
      EXPECT_NE(step.cause, Category::kCollectives);
      EXPECT_EQ(step.cause_excess_ns == 0, step.cause == Category::kIdle);
    }
  }
}

}  // namespace
}  // namespace profctl::analysis
