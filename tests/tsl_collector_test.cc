// The agent's tsl collector: during the agent's window it captures framework
// profiler servers on its host (tests/fake_tsl_server.h, shaped like JAX's/TensorFlow's, here with
// TPU planes) and merges their planes into the host's XSpace beside the synthetic collector's:
// re-based exactly onto the session's profile start (relative and absolute inputs), one plane per
// name, metadata ids remapped with every name and stat kept; absent, busy and slow servers cost
// only their own planes; a cancelled capture terminates the servers too.
//
// The agent's session runs on a fake clock and executor (no sleeps); the fake servers read the
// same fake host clock, the agent's clock being skewed from it as with --clock-skew-ms.
#include "agent/collectors/tsl/tsl_collector.h"

#include <algorithm>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/notification.h"
#include "agent/capture_manager.h"
#include "agent/collectors/synthetic/synthetic_collector.h"
#include "agent/service/agent_server.h"
#include "common/executor.h"
#include "common/file_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/fake_clock.h"
#include "tests/fake_executor.h"
#include "tests/fake_tsl_server.h"
#include "tests/loopback.h"
#include "tests/status_matchers.h"
#include "tests/test_time.h"
#include "tests/trace_data.h"
#include "xspace/xspace.h"

using ::profctl::testkit::IsOk;

namespace profctl::agent {
namespace {

using ::profctl::testkit::FakeClock;
using ::profctl::testkit::FakeExecutor;
using ::profctl::testkit::FakeTslServer;
using ::profctl::testkit::FakeTslServerOptions;
using tensorflow::profiler::XLine;
using tensorflow::profiler::XPlane;
using tensorflow::profiler::XSpace;
using tensorflow::profiler::XStat;
using ::testing::AllOf;
using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::UnorderedElementsAre;
using ::testing::UnorderedElementsAreArray;
using Shape = FakeTslServerOptions::Shape;

using ::profctl::test_data::DataPath;
using ::profctl::test_time::kMs;
// The agent's clock runs this far ahead of the host clock the framework servers read.
constexpr int64_t kAgentSkewNs = 7 * kMs + 123;

synthetic::SyntheticJobConfig SkewedJob(int64_t rank, int64_t skew_ns) {
  synthetic::SyntheticJobConfig c;
  c.rank = rank;
  c.world = 2;
  c.seed = 5;
  c.step_ms = 40;
  c.gpus = 2;
  c.kernels_per_step = 3;
  c.clock_skew_ns = skew_ns;
  return c;
}

// A stat as a person reads it (name=value; a ref resolved to the name it refers to).
std::string StatText(const XPlane& plane, const XStat& s) {
  auto name = [&](uint64_t id) -> std::string {
    auto it = plane.stat_metadata().find(static_cast<int64_t>(id));
    return it == plane.stat_metadata().end() ? "<undefined>" : it->second.name();
  };
  switch (s.value_case()) {
    case XStat::kInt64Value:
      return absl::StrCat(name(s.metadata_id()), "=i", s.int64_value());
    case XStat::kUint64Value:
      return absl::StrCat(name(s.metadata_id()), "=u", s.uint64_value());
    case XStat::kDoubleValue:
      return absl::StrCat(name(s.metadata_id()), "=d", s.double_value());
    case XStat::kStrValue:
      return absl::StrCat(name(s.metadata_id()), "=s", s.str_value());
    case XStat::kRefValue:
      return absl::StrCat(name(s.metadata_id()), "=ref:", name(s.ref_value()));
    default:
      return absl::StrCat(name(s.metadata_id()), "=?");
  }
}

template <typename Stats>
std::string StatsText(const XPlane& plane, const Stats& stats) {
  std::vector<std::string> parts;
  for (const XStat& s : stats) parts.push_back(StatText(plane, s));
  std::sort(parts.begin(), parts.end());
  return absl::StrJoin(parts, ",");
}

// Every event of `space` (Task Environment aside) as
// "plane|line|name[metadata stats]|absolute start + shift_ns|duration ps|stats".
std::vector<std::string> Events(const XSpace& space, int64_t shift_ns = 0) {
  const int64_t profile_start = xspace::ProfileStartNs(space);
  std::vector<std::string> out;
  for (const XPlane& plane : space.planes()) {
    if (plane.name() == xspace::kTaskEnvPlaneName) continue;
    for (const XLine& line : plane.lines()) {
      for (const auto& e : line.events()) {
        auto md = plane.event_metadata().find(e.metadata_id());
        const std::string name =
            md == plane.event_metadata().end()
                ? "<undefined>"
                : absl::StrCat(md->second.name(), "[", StatsText(plane, md->second.stats()), "]");
        out.push_back(absl::StrCat(plane.name(), "|", line.name(), "|", name, "|",
                                   xspace::EventStartNs(profile_start, line, e) + shift_ns, "|",
                                   e.duration_ps(), "|", StatsText(plane, e.stats())));
      }
    }
  }
  return out;
}

std::vector<std::string> PlaneNames(const XSpace& space) {
  std::vector<std::string> names;
  for (const XPlane& p : space.planes()) names.push_back(p.name());
  return names;
}

std::vector<std::string> LineNames(const XPlane& plane) {
  std::vector<std::string> names;
  for (const XLine& l : plane.lines()) names.push_back(l.name());
  return names;
}

// No plane name twice, one Task Environment, line ids and display ids unique per plane.
void ExpectOnePlanePerNameAndUniqueLineIds(const XSpace& space) {
  absl::flat_hash_set<std::string> names;
  for (const XPlane& plane : space.planes()) {
    EXPECT_TRUE(names.insert(plane.name()).second) << "plane twice: " << plane.name();
    absl::flat_hash_set<int64_t> ids;
    absl::flat_hash_set<int64_t> display_ids;
    for (const XLine& line : plane.lines()) {
      EXPECT_TRUE(ids.insert(line.id()).second) << plane.name() << " line id " << line.id();
      const int64_t display = line.display_id() != 0 ? line.display_id() : line.id();
      EXPECT_TRUE(display_ids.insert(display).second) << plane.name() << " display id " << display;
    }
  }
}

struct Outcome {
  std::optional<CaptureResult> result;
};

MATCHER_P(SourceFailed, address, "") {
  return arg.kind() == profctl::v1::SHORTFALL_KIND_SOURCE_FAILED && arg.amount() == 1 &&
         absl::StrContains(arg.detail(),
                           absl::StrCat("framework profiler server ", address, " gave no planes"));
}

class TslCollectorTest : public ::testing::Test {
 protected:
  // The host clock the framework servers read, and the agent's, skewed from it.
  FakeClock host_clock_;
  SkewedClock agent_clock_{&host_clock_, kAgentSkewNs};
  FakeExecutor executor_{&host_clock_};
  SyntheticCollector synthetic_{SkewedJob(/*rank=*/0, kAgentSkewNs)};

  static FakeTslServerOptions TpuServer(const FakeClock* clock) {
    FakeTslServerOptions o;
    o.job = SkewedJob(/*rank=*/1, /*skew_ns=*/0);
    o.clock = clock;
    o.tpu_planes = true;
    return o;
  }

  TslCollectorOptions Tsl(const std::vector<std::string>& servers, int64_t grace_ms = 10'000) {
    TslCollectorOptions o;
    o.servers = servers;
    o.grace_ms = grace_ms;
    o.clock_skew_ns = kAgentSkewNs;
    return o;
  }

  // The synthetic collector alone over [start, stop] (it is a pure function of the window).
  XSpace SyntheticAlone(int64_t start, int64_t stop) {
    SyntheticCollector alone(SkewedJob(/*rank=*/0, kAgentSkewNs));
    XSpace space;
    EXPECT_THAT(alone.Prepare({"alone", start, stop - start}), IsOk());
    EXPECT_THAT(alone.Start(start), IsOk());
    EXPECT_THAT(alone.Stop(stop), IsOk());
    EXPECT_THAT(alone.Collect(&space), IsOk());
    return space;
  }

  // Begins and runs a capture starting `start_in_ms` from now on the agent's clock, runs its
  // Prepare, then waits (really, without sleeping) until `servers` received their Profile.
  std::unique_ptr<CaptureManager::Session> Launch(CaptureManager* manager, Outcome* out,
                                                  int64_t start_in_ms, int64_t duration_ms,
                                                  const std::vector<FakeTslServer*>& servers,
                                                  const std::string& id = "sess-1") {
    auto session = manager->Begin({id, agent_clock_.WallNs() + start_in_ms * kMs, duration_ms, {}});
    EXPECT_THAT(session, IsOk());
    if (!session.ok()) return nullptr;
    (*session)->Run({.on_started = nullptr,
                     .on_done = [out](CaptureResult r) { out->result.emplace(std::move(r)); }});
    executor_.RunUntilIdle();  // Prepare: every Profile is sent now
    for (FakeTslServer* s : servers) s->AwaitRequests(1);
    return *std::move(session);
  }
};

// --- merging ----------------------------------------------------------------------------------

struct ShapeCase {
  const char* name;
  Shape shape;
  bool absolute;
};

void PrintTo(const ShapeCase& c, std::ostream* os) { *os << c.name; }

class TslCollectorMergeTest : public TslCollectorTest,
                              public ::testing::WithParamInterface<ShapeCase> {};

TEST_P(TslCollectorMergeTest, MergesTpuPlanesBesideTheSyntheticCollectorsExactly) {
  FakeTslServerOptions so = TpuServer(&host_clock_);
  so.shape = GetParam().shape;
  so.absolute_line_times = GetParam().absolute;
  FakeTslServer server(so);
  const std::string address = testkit::LoopbackAddress(server.port());
  TslCollector tsl(Tsl({address}), &agent_clock_);
  CaptureManager manager({&agent_clock_, {&synthetic_, &tsl}, &executor_},
                         {.max_duration_ms = 10'000, .host_name = "host-a"});

  Outcome out;
  const int64_t planned = agent_clock_.WallNs() + 100 * kMs;
  auto session = Launch(&manager, &out, /*start_in_ms=*/100, /*duration_ms=*/200, {&server});
  ASSERT_NE(session, nullptr);

  // The request: our window on the server's clock, new option semantics, both durations.
  ASSERT_EQ(server.requests().size(), 1u);
  const tensorflow::ProfileRequest req = server.requests()[0];
  EXPECT_EQ(req.opts().version(), 1u);
  EXPECT_EQ(req.opts().start_timestamp_ns(), static_cast<uint64_t>(planned - kAgentSkewNs));
  EXPECT_EQ(req.duration_ms(), 200u);
  EXPECT_EQ(req.opts().duration_ms(), 200u);
  EXPECT_EQ(req.session_id(), "sess-1");
  EXPECT_EQ(req.opts().session_id(), "sess-1");
  EXPECT_TRUE(req.emit_xspace());

  executor_.Advance(100 * kMs);  // start
  executor_.Advance(200 * kMs);  // stop, then Collect (waits for the answer)
  ASSERT_TRUE(out.result.has_value());
  const XSpace& space = out.result->space;
  EXPECT_THAT(space.errors(), IsEmpty());
  EXPECT_EQ(server.last_start_ns(), planned - kAgentSkewNs);  // it recorded our window
  EXPECT_EQ(xspace::ProfileStartNs(space), planned);
  EXPECT_EQ(xspace::ProfileStopNs(space), planned + 200 * kMs);
  EXPECT_THAT(xspace::Validate(space), IsOk()) << xspace::Validate(space);

  // Every event of both sources, at its exact instant on the agent's clock, with its name,
  // metadata stats and stats (refs resolved): nothing lost, nothing renamed, nothing moved.
  const XSpace theirs = server.last_space();
  EXPECT_EQ(xspace::ProfileStartNs(theirs), GetParam().absolute ? 0 : planned - kAgentSkewNs);
  std::vector<std::string> expected = Events(SyntheticAlone(planned, planned + 200 * kMs));
  const std::vector<std::string> framework = Events(theirs, /*shift_ns=*/kAgentSkewNs);
  expected.insert(expected.end(), framework.begin(), framework.end());
  EXPECT_THAT(Events(space), UnorderedElementsAreArray(expected));
  EXPECT_GT(framework.size(), 100u);

  // One plane per name: the host and GPU planes of both sources merged, the TPU planes added, one
  // Task Environment (ours).
  ExpectOnePlanePerNameAndUniqueLineIds(space);
  EXPECT_THAT(PlaneNames(space),
              UnorderedElementsAreArray({"/host:CPU", "/device:GPU:0", "/device:GPU:1",
                                         "Task Environment", "/device:TPU:0", "/device:TPU:1"}));
  const XPlane* tpu = xspace::FindPlane(space, "/device:TPU:0");
  ASSERT_NE(tpu, nullptr);
  EXPECT_THAT(LineNames(*tpu), ElementsAre("XLA Modules", "XLA Ops"));
  EXPECT_NE(tpu->id(), xspace::FindPlane(space, "/device:GPU:1")->id());  // its id 1 was taken
  const XPlane* host = xspace::FindPlane(space, "/host:CPU");
  ASSERT_NE(host, nullptr);
  EXPECT_THAT(LineNames(*host), Contains("tf_data_iterator"));
  EXPECT_EQ(host->id(), 49);
  EXPECT_THAT(space.hostnames(), ElementsAre("host-a"));
}

INSTANTIATE_TEST_SUITE_P(Shapes, TslCollectorMergeTest,
                         ::testing::Values(ShapeCase{"InlineRelative", Shape::kInlineXSpace, false},
                                           ShapeCase{"ToolDataRelative", Shape::kToolData, false},
                                           ShapeCase{"InlineAbsolute", Shape::kInlineXSpace, true}),
                         [](const auto& param_info) { return std::string(param_info.param.name); });

TEST_F(TslCollectorTest, CollectorOrderDoesNotMatterAndTheCollectorIsReusable) {
  FakeTslServer server(TpuServer(&host_clock_));
  TslCollector tsl(Tsl({testkit::LoopbackAddress(server.port())}), &agent_clock_);
  // tsl first: the synthetic collector then appends planes the space has; the session merges them.
  CaptureManager manager({&agent_clock_, {&tsl, &synthetic_}, &executor_},
                         {.max_duration_ms = 10'000, .host_name = "host-a"});
  for (int round = 0; round < 2; ++round) {
    Outcome out;
    const int64_t planned = agent_clock_.WallNs() + 10 * kMs;
    auto session = Launch(&manager, &out, 10, 100, {&server}, absl::StrCat("round-", round));
    server.AwaitRequests(static_cast<size_t>(round) + 1);
    executor_.Advance(110 * kMs);
    ASSERT_TRUE(out.result.has_value());
    EXPECT_THAT(out.result->space.errors(), IsEmpty());
    EXPECT_THAT(out.result->shortfalls, IsEmpty()) << round;
    ExpectOnePlanePerNameAndUniqueLineIds(out.result->space);
    std::vector<std::string> expected = Events(SyntheticAlone(planned, planned + 100 * kMs));
    const std::vector<std::string> framework = Events(server.last_space(), kAgentSkewNs);
    expected.insert(expected.end(), framework.begin(), framework.end());
    EXPECT_THAT(Events(out.result->space), UnorderedElementsAreArray(expected)) << round;
  }
}

// A real JAX server's answer (JAX 0.11 on an H200, tests/data/traces/h200_jax_steps.xplane.pb),
// replayed over the window asked for: every one of its planes but its Task Environment joins the
// host's trace, its scope-range tree plane (stats keyed by scope ids, no metadata) included.
TEST_F(TslCollectorTest, ARealJaxServersTraceJoinsTheHostsTrace) {
  absl::StatusOr<std::string> bytes = ReadFile(DataPath("h200_jax_steps.xplane.pb"));
  ASSERT_THAT(bytes, IsOk());
  XSpace jax;
  ASSERT_TRUE(jax.ParseFromString(*bytes));
  FakeTslServerOptions so = TpuServer(&host_clock_);
  so.tpu_planes = false;
  so.replay = &jax;
  FakeTslServer server(so);
  TslCollector tsl(Tsl({testkit::LoopbackAddress(server.port())}), &agent_clock_);
  CaptureManager manager({&agent_clock_, {&tsl}, &executor_},
                         {.max_duration_ms = 10'000, .host_name = "host-a"});
  Outcome out;
  auto session = Launch(&manager, &out, 0, 1000, {&server});
  executor_.Advance(1000 * kMs);
  ASSERT_TRUE(out.result.has_value());
  EXPECT_THAT(out.result->space.errors(), IsEmpty());
  EXPECT_THAT(out.result->shortfalls, IsEmpty());
  for (absl::string_view plane :
       {absl::string_view("/device:GPU:0"), absl::string_view("/host:CPU"),
        xspace::kScopeRangeCallStackPlaneName}) {
    EXPECT_NE(xspace::FindPlane(out.result->space, plane), nullptr) << plane;
  }
  int64_t kernels = 0;
  for (const XLine& line : xspace::FindPlane(out.result->space, "/device:GPU:0")->lines()) {
    kernels += line.events_size();
  }
  EXPECT_GT(kernels, 1000);
}

// --- servers that fail ------------------------------------------------------------------------

TEST_F(TslCollectorTest, AbsentAndBusyServersCostOnlyTheirOwnPlanes) {
  FakeTslServer good(TpuServer(&host_clock_));
  FakeTslServerOptions busy_options = TpuServer(&host_clock_);
  busy_options.busy = true;
  FakeTslServer busy(busy_options);
  const std::string absent = testkit::LoopbackAddress(testkit::ClosedLoopbackPort());
  const std::string busy_address = testkit::LoopbackAddress(busy.port());
  TslCollector tsl(Tsl({absent, busy_address, testkit::LoopbackAddress(good.port())}),
                   &agent_clock_);
  CaptureManager manager({&agent_clock_, {&synthetic_, &tsl}, &executor_},
                         {.max_duration_ms = 10'000, .host_name = "host-a"});
  Outcome out;
  const int64_t planned = agent_clock_.WallNs() + 50 * kMs;
  auto session = Launch(&manager, &out, 50, 100, {&good, &busy});
  executor_.Advance(150 * kMs);
  ASSERT_TRUE(out.result.has_value());
  const XSpace& space = out.result->space;
  EXPECT_THAT(
      space.errors(),
      UnorderedElementsAre(
          AllOf(HasSubstr(absl::StrCat("tsl ", absent, ": unreachable")), HasSubstr("UNAVAILABLE")),
          AllOf(HasSubstr(absl::StrCat("tsl ", busy_address, ": busy")),
                HasSubstr("ALREADY_EXISTS"), HasSubstr("another profiling session"))));
  // Each missing server is a shortfall, so the host is reported INCOMPLETE rather than ok.
  EXPECT_THAT(out.result->shortfalls,
              UnorderedElementsAre(SourceFailed(absent), SourceFailed(busy_address)));
  // The good server's planes and the synthetic collector's are all there.
  std::vector<std::string> expected = Events(SyntheticAlone(planned, planned + 100 * kMs));
  const std::vector<std::string> framework = Events(good.last_space(), kAgentSkewNs);
  expected.insert(expected.end(), framework.begin(), framework.end());
  EXPECT_THAT(Events(space), UnorderedElementsAreArray(expected));
  EXPECT_NE(xspace::FindPlane(space, "/device:TPU:1"), nullptr);
}

TEST_F(TslCollectorTest, SlowServerIsGivenUpAfterTheWindowPlusGraceAndTheRestIsKept) {
  FakeTslServerOptions so = TpuServer(&host_clock_);
  so.hold = true;  // never answers on its own
  FakeTslServer slow(so);
  const std::string address = testkit::LoopbackAddress(slow.port());
  TslCollector tsl(Tsl({address}, /*grace_ms=*/0), &agent_clock_);
  CaptureManager manager({&agent_clock_, {&synthetic_, &tsl}, &executor_},
                         {.max_duration_ms = 10'000, .host_name = "host-a"});
  Outcome out;
  const int64_t planned = agent_clock_.WallNs() + 20 * kMs;
  auto session = Launch(&manager, &out, 20, 100, {&slow});
  slow.AwaitHeld(1);
  executor_.Advance(120 * kMs);  // Collect waits out the call's deadline (real time: ~120 ms)
  ASSERT_TRUE(out.result.has_value());
  const XSpace& space = out.result->space;
  EXPECT_THAT(space.errors(),
              ElementsAre(AllOf(HasSubstr(absl::StrCat("tsl ", address, ": slow")),
                                HasSubstr("window + 0 ms grace"), HasSubstr("DEADLINE_EXCEEDED"))));
  EXPECT_THAT(out.result->shortfalls, ElementsAre(SourceFailed(address)));
  EXPECT_THAT(Events(space),
              UnorderedElementsAreArray(Events(SyntheticAlone(planned, planned + 100 * kMs))));
  EXPECT_EQ(xspace::FindPlane(space, "/device:TPU:0"), nullptr);
  EXPECT_THAT(slow.terminated(), IsEmpty());  // the window ran its course: nothing to cancel
}

TEST_F(TslCollectorTest, UnusableTraceIsReportedAndDropped) {
  // Relative line timestamps but no Task Environment: read as absolute (the rule for files without
  // a profile start), they lie ~56 years before our window, which XProf's int64 picoseconds
  // cannot hold.
  FakeTslServerOptions so = TpuServer(&host_clock_);
  so.drop_task_environment = true;
  FakeTslServer server(so);
  const std::string address = testkit::LoopbackAddress(server.port());
  TslCollector tsl(Tsl({address}), &agent_clock_);
  CaptureManager manager({&agent_clock_, {&synthetic_, &tsl}, &executor_},
                         {.max_duration_ms = 10'000, .host_name = "host-a"});
  Outcome out;
  auto session = Launch(&manager, &out, 0, 50, {&server});
  executor_.Advance(50 * kMs);
  ASSERT_TRUE(out.result.has_value());
  EXPECT_THAT(
      out.result->space.errors(),
      ElementsAre(AllOf(HasSubstr(absl::StrCat("tsl ", address, ": ")), HasSubstr("cannot use"),
                        HasSubstr("overflows"), HasSubstr("no Task Environment"))));
  EXPECT_THAT(out.result->shortfalls, ElementsAre(SourceFailed(address)));
  EXPECT_EQ(xspace::FindPlane(out.result->space, "/device:TPU:0"), nullptr);
  EXPECT_THAT(PlaneNames(out.result->space),
              UnorderedElementsAreArray(
                  {"/host:CPU", "/device:GPU:0", "/device:GPU:1", "Task Environment"}));
  EXPECT_GT(xspace::CountEvents(out.result->space), 0);  // the synthetic collector's
}

// --- cancel -----------------------------------------------------------------------------------

TEST_F(TslCollectorTest, CancelTerminatesTheServerAndKeepsWhatItRecorded) {
  FakeTslServerOptions so = TpuServer(&host_clock_);
  so.hold = true;  // records until its window ends or it is terminated
  FakeTslServer server(so);
  TslCollector tsl(Tsl({testkit::LoopbackAddress(server.port())}), &agent_clock_);
  CaptureManager manager({&agent_clock_, {&synthetic_, &tsl}, &executor_},
                         {.max_duration_ms = 10'000, .host_name = "host-a"});
  Outcome out;
  const int64_t planned = agent_clock_.WallNs() + 10 * kMs;
  auto session = Launch(&manager, &out, 10, 1000, {&server});
  server.AwaitHeld(1);
  executor_.Advance(10 * kMs);   // start
  executor_.Advance(250 * kMs);  // recording...
  ASSERT_THAT(manager.Cancel("sess-1"), IsOk());
  executor_.RunUntilIdle();  // Stop (sends Terminate), then Collect waits for the answer
  ASSERT_TRUE(out.result.has_value());
  EXPECT_TRUE(out.result->cancelled);
  EXPECT_THAT(server.terminated(), ElementsAre("sess-1"));
  const XSpace& space = out.result->space;
  EXPECT_THAT(space.errors(), IsEmpty());
  // The server stopped at the cancel instant (its clock), and what it had is merged exactly.
  EXPECT_EQ(server.last_stop_ns(), planned + 250 * kMs - kAgentSkewNs);
  std::vector<std::string> expected = Events(SyntheticAlone(planned, planned + 250 * kMs));
  const std::vector<std::string> framework = Events(server.last_space(), kAgentSkewNs);
  expected.insert(expected.end(), framework.begin(), framework.end());
  EXPECT_THAT(Events(space), UnorderedElementsAreArray(expected));
  EXPECT_NE(xspace::FindPlane(space, "/device:TPU:0"), nullptr);
}

TEST_F(TslCollectorTest, CancelBeforeTheStartTerminatesTheServerToo) {
  FakeTslServerOptions so = TpuServer(&host_clock_);
  so.hold = true;
  FakeTslServer server(so);
  TslCollector tsl(Tsl({testkit::LoopbackAddress(server.port())}), &agent_clock_);
  CaptureManager manager({&agent_clock_, {&synthetic_, &tsl}, &executor_},
                         {.max_duration_ms = 10'000, .host_name = "host-a"});
  Outcome out;
  auto session = Launch(&manager, &out, 500, 1000, {&server});
  server.AwaitHeld(1);
  ASSERT_THAT(manager.Cancel("sess-1"), IsOk());
  executor_.RunUntilIdle();
  ASSERT_TRUE(out.result.has_value());
  EXPECT_TRUE(out.result->cancelled);
  EXPECT_EQ(xspace::CountEvents(out.result->space), 0);
  server.AwaitTerminated(1);  // Terminate is on its way without anyone waiting for it
  EXPECT_THAT(server.terminated(), ElementsAre("sess-1"));
}

// --- the agent's wiring -----------------------------------------------------------------------

TEST(TslAgentServerTest, TslLocalAddsTheFrameworkServersPlanesToTheAgentsCaptures) {
  FakeTslServerOptions so;
  so.job = SkewedJob(/*rank=*/1, /*skew_ns=*/0);
  so.tpu_planes = true;
  FakeTslServer server(so);
  absl::StatusOr<AgentOptions> options =
      ParseAgentOptions({"--port=0", "--port-file=/dev/null", "--bind=127.0.0.1",
                         absl::StrCat("--tsl-local=", testkit::LoopbackAddress(server.port()))},
                        /*nvidia_probe=*/"/nonexistent");  // as on a host without a GPU
  ASSERT_THAT(options, IsOk());
  EXPECT_THAT(options->collectors, ElementsAre("synthetic", "tsl"));
  RealClock clock;
  AsioExecutor executor(&clock, /*threads=*/1);
  absl::StatusOr<std::unique_ptr<AgentServer>> agent =
      AgentServer::Start(*options, {.clock = &clock, .executor = &executor, .hostname = "h"});
  ASSERT_THAT(agent, IsOk());
  auto session = (*agent)->manager_for_testing(0).Begin({"wired", 0, 30, {}});
  ASSERT_THAT(session, IsOk());
  absl::Notification done;
  std::optional<CaptureResult> result;
  (*session)->Run({.on_started = nullptr, .on_done = [&](CaptureResult r) {
                     result.emplace(std::move(r));
                     done.Notify();
                   }});
  done.WaitForNotification();
  ASSERT_TRUE(result.has_value());
  EXPECT_THAT(result->space.errors(), IsEmpty());
  ExpectOnePlanePerNameAndUniqueLineIds(result->space);
  EXPECT_NE(xspace::FindPlane(result->space, "/device:TPU:1"), nullptr);
  EXPECT_NE(xspace::FindPlane(result->space, "/device:GPU:0"), nullptr);
  ASSERT_EQ(server.requests().size(), 1u);
  EXPECT_EQ(server.requests()[0].session_id(), "wired");
}

// --- addresses --------------------------------------------------------------------------------

TEST(TslAddressTest, AcceptsHostPortIpv6AndTheGrpcScheme) {
  EXPECT_EQ(*ParseTslAddress("localhost:9999"), "localhost:9999");
  EXPECT_EQ(*ParseTslAddress(" 127.0.0.1:6000 "), "127.0.0.1:6000");
  EXPECT_EQ(*ParseTslAddress("[::1]:9999"), "[::1]:9999");
  EXPECT_EQ(*ParseTslAddress("grpc://localhost:9999"), "localhost:9999");
  absl::StatusOr<std::vector<std::string>> list = ParseTslAddressList("localhost:9999, [::1]:9998");
  ASSERT_THAT(list, IsOk());
  EXPECT_THAT(*list, ElementsAre("localhost:9999", "[::1]:9998"));
  EXPECT_THAT(*ParseTslAddressList(""), IsEmpty());
}

TEST(TslAddressTest, BadAddressesAreNamedWithTheProblem) {
  auto error = [](absl::string_view text) {
    absl::StatusOr<std::string> r = ParseTslAddress(text);
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << text;
    return std::string(r.status().message());
  };
  EXPECT_THAT(error("localhost"), AllOf(HasSubstr("'localhost'"), HasSubstr("no port")));
  EXPECT_THAT(error("localhost:0"), HasSubstr("port '0'; want a number in 1..65535"));
  EXPECT_THAT(error("localhost:65536"), HasSubstr("port '65536'"));
  EXPECT_THAT(error("localhost:99x"), HasSubstr("port '99x'"));
  EXPECT_THAT(error(":9999"), HasSubstr("no host"));
  EXPECT_THAT(error("::1:9999"), HasSubstr("IPv6 address without brackets"));
  EXPECT_THAT(error("[::1]"), HasSubstr("no port"));
  EXPECT_THAT(error("[::1:9999"), HasSubstr("no ']'"));
  EXPECT_THAT(error("http://localhost:9999"), HasSubstr("unknown scheme"));
  EXPECT_THAT(error("local host:1"), HasSubstr("cannot be in a host name"));
  EXPECT_THAT(ParseTslAddressList("a:1,,b:2").status().message(), HasSubstr("empty entry"));
  EXPECT_THAT(ParseTslAddressList("a:1,grpc://a:1").status().message(),
              HasSubstr("'a:1' is listed twice"));
}

}  // namespace
}  // namespace profctl::agent
