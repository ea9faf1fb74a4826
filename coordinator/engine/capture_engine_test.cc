#include "coordinator/engine/capture_engine.h"

#include <unistd.h>

#include <cstdlib>
#include <map>
#include <optional>
#include <random>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/file_util.h"
#include "common/gzip.h"
#include "gmock/gmock.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "report/perfetto_trace_check.h"
#include "tests/attempt_kinds.h"
#include "tests/fake_agent.h"
#include "tests/fake_clock.h"
#include "tests/fake_executor.h"
#include "tests/memory_sink.h"
#include "tests/status_matchers.h"
#include "tests/temp_dir.h"
#include "xspace/xspace.h"

using ::profctl::testkit::IsOk;

namespace profctl::coordinator {
namespace {

using ::profctl::testkit::FakeAgent;
using ::profctl::testkit::FakeAgentBehavior;
using ::profctl::testkit::FakeAgentFactory;
using ::profctl::testkit::FakeClock;
using ::profctl::testkit::FakeExecutor;
using ::profctl::testkit::MemorySink;
using ::profctl::v1::HostResult;
using ::profctl::v1::SessionManifest;
using ::testing::AllOf;
using ::testing::Contains;
using ::testing::ContainsRegex;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

// The session's Perfetto pod trace, read back by the rules of report/perfetto_trace_check.h.
report::PerfettoTraceModel ReadPodTrace(const std::string& path) {
  absl::StatusOr<std::string> gz = ReadFile(path);
  EXPECT_THAT(gz, IsOk());
  absl::StatusOr<std::string> bytes = GzipDecompress(gz.ok() ? *gz : "");
  EXPECT_THAT(bytes, IsOk());
  absl::StatusOr<report::PerfettoTraceModel> m =
      report::ReadPerfettoTrace(bytes.ok() ? *bytes : "");
  EXPECT_THAT(m, IsOk());
  return m.ok() ? *std::move(m) : report::PerfettoTraceModel{};
}

bool HasProcess(const report::PerfettoTraceModel& m, const std::string& name) {
  for (const auto& [uuid, t] : m.tracks) {
    if (t.pid >= 0 && t.name == name) return true;
  }
  return false;
}

synthetic::SyntheticJobConfig Rank(int r, int world = 3) {
  synthetic::SyntheticJobConfig c;
  c.rank = r;
  c.world = world;
  c.step_ms = 20;
  c.jitter = 0.02;
  return c;
}

class CaptureEngineTest : public ::testing::Test {
 protected:
  CapturePlan Plan(std::vector<std::string> addresses, int64_t duration_ms = 500) {
    CapturePlan plan{{}, duration_ms, "sess", "/logs"};
    for (const std::string& a : addresses) plan.workers.push_back(*ParseWorker(a));
    return plan;
  }
  FakeAgent& Agent(const std::string& address, FakeAgentBehavior b,
                   synthetic::SyntheticJobConfig job = Rank(0)) {
    agents_.push_back(std::make_unique<FakeAgent>(&ex_, &clock_, std::move(b), job));
    factory_.Add(address, agents_.back().get());
    return *agents_.back();
  }
  SessionManifest Run(const CapturePlan& plan, CaptureEngineOptions options = {},
                      const std::function<void(CaptureEngine&)>& during = {}) {
    CaptureEngine engine({.executor = &ex_,
                          .pool = pool_,
                          .clients = &factory_,
                          .sink = &sink_,
                          .progress = [&](const std::string& l) { progress_.push_back(l); },
                          .manifest_written = manifest_written_,
                          .decode = decode_},
                         options);
    std::optional<absl::StatusOr<SessionManifest>> result;
    engine.Start(plan, [&](absl::StatusOr<SessionManifest> m) { result = std::move(m); });
    if (during) during(engine);
    EXPECT_TRUE(
        ex_.RunUntil([&] { return result.has_value(); }, clock_.MonoNs() + 3600 * kNanosPerSecond))
        << "engine did not finish";
    if (!result.has_value()) return {};
    EXPECT_TRUE(result->ok()) << result->status();
    return result->ok() ? **result : SessionManifest{};
  }
  static const HostResult& Host(const SessionManifest& m, const std::string& address) {
    for (const HostResult& h : m.hosts()) {
      if (h.address() == address) return h;
    }
    static const HostResult kNone;
    ADD_FAILURE() << "no host " << address;
    return kNone;
  }

  void SetUp() override { sink_.dir = tmp_.path(); }

  // 18 healthy agents of a pod of 20 (ranks 0..17) that get ready at about 600..700 ms.
  std::vector<std::string> EighteenReadyAt600To700Ms() {
    std::vector<std::string> addresses;
    for (int i = 0; i < 18; ++i) {
      const int64_t one_way = (100 + i) * kNanosPerMilli;
      addresses.push_back(absl::StrCat("h", i, ":1"));
      Agent(addresses.back(), {.up_delay_ns = one_way, .down_delay_ns = one_way}, Rank(i, 20));
    }
    return addresses;
  }
  // The latest prepare time of the first n hosts, each of which must be OK.
  static double LastReadyMs(const SessionManifest& m, int n) {
    double last = 0;
    for (int i = 0; i < n; ++i) {
      const HostResult& h = m.hosts(i);
      EXPECT_EQ(h.status(), v1::HOST_STATUS_OK) << h.address() << " " << h.error().message();
      last = std::max(last, h.prepare_ms());
    }
    return last;
  }

  const testkit::TempDir tmp_;
  FakeClock clock_;
  FakeExecutor ex_{&clock_};
  FakeAgentFactory factory_{&ex_};
  WorkPool* pool_ = nullptr;  // saves on the executor unless a test sets a real pool
  MemorySink sink_;
  std::vector<std::string> progress_;
  std::vector<std::unique_ptr<FakeAgent>> agents_;
  std::function<void(std::string)> manifest_written_;  // Dependencies::manifest_written
  HostDecoder decode_;                                 // Dependencies::decode
};

TEST_F(CaptureEngineTest, CapturesEveryHostAtOneInstantAndWritesAllOutputs) {
  Agent("h0:1", {.name = "w0"}, Rank(0));
  FakeAgent& b = Agent("h1:1",
                       {.clock_offset_ns = 25 * kNanosPerMilli,
                        .up_delay_ns = 300'000,
                        .down_delay_ns = 300'000,
                        .name = "w1"},
                       Rank(1));
  Agent("h2:1", {.clock_offset_ns = -7 * kNanosPerMilli}, Rank(2));
  const SessionManifest m = Run(Plan({"h0:1", "h1:1", "h2:1"}));
  EXPECT_EQ(m.status(), v1::SESSION_STATUS_OK);
  ASSERT_EQ(m.hosts_size(), 3);
  for (const HostResult& h : m.hosts()) {
    EXPECT_EQ(h.status(), v1::HOST_STATUS_OK) << h.address() << " " << h.error().message();
    EXPECT_FALSE(h.late()) << h.address();
    EXPECT_EQ(h.lateness_ns(), 0) << h.address();  // symmetric paths: offsets exact
    EXPECT_GT(h.events(), 0u);
    EXPECT_GT(h.steps(), 10u);
    // Equal round trips: the minimum of 3, then no improvement twice: stop.
    EXPECT_EQ(h.clock().samples(), 3u);
    EXPECT_TRUE(sink_.files.count(h.xplane_file())) << h.xplane_file();
  }
  EXPECT_EQ(Host(m, "h1:1").host(), "w1");
  EXPECT_EQ(Host(m, "h2:1").host(), "h2_1");  // no name: the address
  EXPECT_EQ(Host(m, "h1:1").clock().rtt_offset_ns(), 25 * kNanosPerMilli);
  EXPECT_EQ(Host(m, "h1:1").clock().rtt_ns(), 600'000);
  EXPECT_EQ(Host(m, "h1:1").clock().uncertainty_ns(), 300'000);
  // The agent was asked to start at the common instant in its own clock, and did.
  EXPECT_EQ(b.last_start_ns(), m.start_at_ns() + 25 * kNanosPerMilli);
  EXPECT_EQ(m.start_spread_ns(), 0);
  EXPECT_TRUE(sink_.files.count("session.json"));
  EXPECT_EQ(m.pod_trace_file(), "pod.perfetto-trace.gz");
  EXPECT_EQ(m.pod_trace_json_file(), "");  // only when asked for
  EXPECT_FALSE(PathExists(sink_.dir + "/pod.trace.json.gz"));
  const report::PerfettoTraceModel trace = ReadPodTrace(sink_.dir + "/pod.perfetto-trace.gz");
  EXPECT_TRUE(HasProcess(trace, "w1 /device:GPU:0"));
  EXPECT_GT(trace.slices.size(), 100u);
}

// The step pattern is compiled once per session; one that does not compile (the CLI refuses it
// first) leaves every host out of the breakdown, saying why, and costs no trace.
TEST_F(CaptureEngineTest, AStepPatternThatDoesNotCompileIsNamedAndTheTracesAreKept) {
  Agent("h0:1", {}, Rank(0, 2));
  Agent("h1:1", {}, Rank(1, 2));
  CapturePlan plan = Plan({"h0:1", "h1:1"});
  plan.reader.step_pattern = "(";
  const SessionManifest m = Run(plan);
  EXPECT_EQ(m.step_pattern(), "(");
  int named = 0;
  for (const std::string& e : m.errors()) {
    named += absl::StrContains(e, "left out: step pattern '(' is not a valid RE2 regex");
  }
  EXPECT_EQ(named, 2) << absl::StrJoin(m.errors(), "\n");
  for (const HostResult& h : m.hosts()) {
    EXPECT_EQ(h.status(), v1::HOST_STATUS_OK) << h.address() << " " << h.error().message();
    EXPECT_TRUE(sink_.files.count(h.xplane_file())) << h.xplane_file();
  }
  EXPECT_TRUE(m.breakdown_files().empty());
}

// The Perfetto pod trace joins the parts rendered as each host was saved: nothing is kept decoded
// or read back for it. The JSON one, when asked for, renders each host from the trace kept decoded
// since saving it, within kept_trace_budget_bytes; past the budget it reads the rest back from
// disk. Same files either way.
TEST_F(CaptureEngineTest, PodTraceUsesTheTracesKeptFromSavingWithinTheirBudget) {
  for (int i = 0; i < 3; ++i) Agent(absl::StrCat("h", i, ":1"), {}, Rank(i));
  const auto run = [&](const std::string& session, uint64_t budget, bool json) {
    CapturePlan plan = Plan({"h0:1", "h1:1", "h2:1"});
    plan.session = session;
    plan.pod_trace_json = json;
    sink_.reads = 0;
    CaptureEngineOptions options;
    options.kept_trace_budget_bytes = budget;
    const SessionManifest m = Run(plan, options);
    EXPECT_EQ(m.status(), v1::SESSION_STATUS_OK);
    EXPECT_TRUE(m.request().pod_trace_json() == json);
    EXPECT_EQ(m.pod_trace_file(), "pod.perfetto-trace.gz");
    const report::PerfettoTraceModel trace = ReadPodTrace(sink_.dir + "/pod.perfetto-trace.gz");
    for (const HostResult& h : m.hosts()) {
      EXPECT_TRUE(HasProcess(trace, absl::StrCat(h.host(), " /device:GPU:0"))) << h.host();
    }
    if (json) {
      EXPECT_EQ(m.pod_trace_json_file(), "pod.trace.json.gz");
      absl::StatusOr<std::string> gz = ReadFile(sink_.dir + "/pod.trace.json.gz");
      EXPECT_THAT(gz, IsOk());
      absl::StatusOr<std::string> text = GzipDecompress(gz.ok() ? *gz : "");
      EXPECT_THAT(text, IsOk());
      for (const HostResult& h : m.hosts()) {
        EXPECT_THAT(text.ok() ? *text : "", HasSubstr(absl::StrCat(h.host(), " /device:GPU:0")));
      }
    } else {
      EXPECT_EQ(m.pod_trace_json_file(), "");
    }
    // The hang verdict was judged, from kept traces or the ones read back for the pod trace.
    EXPECT_THAT(sink_.files["pod_step_breakdown.json"],
                ContainsRegex("\"hang\": *[{][^}]*\"verdict\": *\"none\""));
    return m;
  };
  // The Perfetto trace alone reads nothing back, whatever the budget.
  run("p0", 0, false);
  EXPECT_EQ(sink_.reads, 0);
  const SessionManifest all_read = run("s0", 0, true);
  EXPECT_EQ(sink_.reads, 3);
  uint64_t smallest = std::numeric_limits<uint64_t>::max(), largest = 0;
  for (const HostResult& h : all_read.hosts()) {
    smallest = std::min(smallest, h.bytes());
    largest = std::max(largest, h.bytes());
  }
  run("s1", CaptureEngineOptions{}.kept_trace_budget_bytes, true);
  EXPECT_EQ(sink_.reads, 0);
  // Room for one trace, not two: the first saved is kept, the other two are read back.
  ASSERT_LT(largest, smallest * 3 / 2);
  run("s2", smallest * 3 / 2, true);
  EXPECT_EQ(sink_.reads, 2);
}

// Each saved host's trace is decoded once, as it is saved, into everything the outputs use:
// the breakdown, the hang verdict, alignment's collective ends and session.json's counts. The
// finish decodes nothing again, whether the pod trace renders kept traces or reads them back.
TEST_F(CaptureEngineTest, EachHostsTraceIsDecodedOnceForEveryOutput) {
  for (int i = 0; i < 3; ++i) Agent(absl::StrCat("h", i, ":1"), {}, Rank(i));
  std::map<std::string, int> decodes;
  std::vector<analysis::HostDecodeOptions> asked;
  decode_ = [&](const ByteSource& bytes, const std::string& host, int64_t offset_ns,
                const analysis::StepMatcher& matcher, const analysis::HostDecodeOptions& options) {
    ++decodes[host];
    asked.push_back(options);
    return analysis::DecodeXSpaceHost(bytes, host, offset_ns, matcher, options);
  };
  for (const uint64_t budget : {CaptureEngineOptions{}.kept_trace_budget_bytes, uint64_t{0}}) {
    SCOPED_TRACE(budget);
    decodes.clear();
    asked.clear();
    CapturePlan plan = Plan({"h0:1", "h1:1", "h2:1"});
    plan.session = absl::StrCat("once", budget);
    CaptureEngineOptions options;
    options.kept_trace_budget_bytes = budget;
    const SessionManifest m = Run(plan, options);
    ASSERT_EQ(m.status(), v1::SESSION_STATUS_OK);
    EXPECT_EQ(decodes, (std::map<std::string, int>{{"h0_1", 1}, {"h1_1", 1}, {"h2_1", 1}}));
    for (const analysis::HostDecodeOptions& o : asked) {
      EXPECT_TRUE(o.breakdown && o.collectives && o.collective_ends && o.counts);
    }
    // What the one pass gave: counts, alignment from the collectives, the breakdown with its
    // hang verdict, the pod trace.
    for (const HostResult& h : m.hosts()) {
      EXPECT_GT(h.events(), 0u);
      EXPECT_GT(h.steps(), 10u);
      EXPECT_EQ(h.clock().method(), "collectives") << h.address();
    }
    EXPECT_THAT(sink_.files["pod_step_breakdown.json"],
                ContainsRegex("\"hang\": *[{][^}]*\"verdict\": *\"none\""));
    EXPECT_EQ(m.pod_trace_file(), "pod.perfetto-trace.gz");
  }
}

// The breakdown is built and rendered on the pool while the pod trace is written; its files
// name the pod trace only when it was written (a pod trace that fails is left out of them).
// Runs each job as it is submitted: the engine's pool paths, without threads the fake executor
// cannot wait for (the CLI's real pool runs them in the end-to-end tests).
class InlinePool final : public WorkPool {
 public:
  void Submit(Executor::Task job) override { std::move(job)(); }
};

TEST_F(CaptureEngineTest, TheBreakdownNamesThePodTraceOnlyWhenItWasWritten) {
  InlinePool pool;
  pool_ = &pool;
  Agent("h0:1", {.name = "w0"}, Rank(0, 2));
  Agent("h1:1", {.name = "w1"}, Rank(1, 2));
  const SessionManifest written = Run(Plan({"h0:1", "h1:1"}));
  EXPECT_EQ(written.pod_trace_file(), "pod.perfetto-trace.gz");
  EXPECT_EQ(written.breakdown_files_size(), 3);
  EXPECT_THAT(sink_.files["pod_step_breakdown.json"], HasSubstr("\"pod.perfetto-trace.gz\""));
  EXPECT_THAT(sink_.files["report.html"], HasSubstr("pod.perfetto-trace.gz"));
  // The pod trace ends with the breakdown's steps, on a process of its own ordered first.
  const report::PerfettoTraceModel trace = ReadPodTrace(sink_.dir + "/pod.perfetto-trace.gz");
  int steps = 0;
  std::map<uint64_t, std::pair<std::string, std::string>> flows;  // id -> (from, to) processes
  for (const report::PerfettoSliceInfo& s : trace.slices) {
    if (s.process == "pod") {
      EXPECT_EQ(s.track, "steps");
      EXPECT_THAT(s.name, ::testing::MatchesRegex("step [0-9]+"));
      ++steps;
    }
    for (uint64_t id : s.flows_out) flows[id].first = s.process;
    for (uint64_t id : s.flows_in) flows[id].second = s.process;
  }
  EXPECT_GT(steps, 0);
  // The synthetic hosts' launches flow to their kernels (ids 1 << 40 | n on the second), and
  // their GPU memory is a counter on their GPU's process.
  ASSERT_TRUE(flows.contains(1));
  EXPECT_EQ(flows[1], std::make_pair(std::string("w0 /host:CPU"), std::string("w0 /device:GPU:0")));
  ASSERT_TRUE(flows.contains((uint64_t{1} << 40) | 1));
  EXPECT_EQ(flows[(uint64_t{1} << 40) | 1],
            std::make_pair(std::string("w1 /host:CPU"), std::string("w1 /device:GPU:0")));
  int memory = 0;
  for (const report::PerfettoCounterInfo& c : trace.counters) {
    memory += c.process == "w1 /device:GPU:0" && c.track == "GPU 0 memory in use";
  }
  EXPECT_GT(memory, 0);

  sink_.files.clear();
  sink_.dir = tmp_.path() + "/missing";  // the pod trace cannot be created there
  const SessionManifest failed = Run(Plan({"h0:1", "h1:1"}));
  EXPECT_EQ(failed.pod_trace_file(), "");
  EXPECT_THAT(absl::StrJoin(failed.errors(), "\n"), HasSubstr("pod trace: "));
  EXPECT_EQ(failed.breakdown_files_size(), 3);
  const std::string& json = sink_.files["pod_step_breakdown.json"];
  EXPECT_THAT(json, HasSubstr("\"session.json\""));
  EXPECT_THAT(json, ::testing::Not(HasSubstr("pod.perfetto-trace.gz")));
  EXPECT_THAT(sink_.files["report.html"], ::testing::Not(HasSubstr("pod.perfetto-trace.gz")));
  pool_ = nullptr;
}

// Once every host is done, their clients (channels) are torn down by a pool job while the
// outputs are written, not one after another when the session ends. Without a pool they go
// with the session.
TEST_F(CaptureEngineTest, ClientsAreTornDownOnThePoolBeforeTheOutputs) {
  FakeAgent& a = Agent("h0:1", {.name = "w0"}, Rank(0, 2));
  FakeAgent& b = Agent("h1:1", {.name = "w1"}, Rank(1, 2));
  int live_at_breakdown = -1;
  sink_.on_write = [&](const std::string& name) {
    if (name == "pod_step_breakdown.json") live_at_breakdown = a.live_clients() + b.live_clients();
  };
  InlinePool pool;
  pool_ = &pool;
  EXPECT_EQ(Run(Plan({"h0:1", "h1:1"})).status(), v1::SESSION_STATUS_OK);
  EXPECT_EQ(live_at_breakdown, 0);
  pool_ = nullptr;
  EXPECT_EQ(Run(Plan({"h0:1", "h1:1"})).status(), v1::SESSION_STATUS_OK);
  EXPECT_EQ(live_at_breakdown, 2);
  EXPECT_EQ(a.live_clients() + b.live_clients(), 0);
}

// Saving commits each trace at once and leaves its fsync to one SyncCommitted while the pod
// outputs are written: every trace is committed before it and the final session.json written
// after it, with a pool or without; a failed sync is reported, and the traces stay saved.
TEST_F(CaptureEngineTest, TracesAreSyncedOnceAfterTheLastCommitAndBeforeTheFinalSessionJson) {
  Agent("h0:1", {.name = "w0"}, Rank(0, 2));
  Agent("h1:1", {.name = "w1"}, Rank(1, 2));
  std::vector<std::string> order;
  sink_.on_write = [&](const std::string& name) { order.push_back(name); };
  sink_.on_sync = [&] { order.push_back("<sync>"); };
  const auto first = [&](const std::string& name) {
    return std::find(order.begin(), order.end(), name) - order.begin();
  };
  const auto last = [&](const std::string& name) {
    return order.rend() - std::find(order.rbegin(), order.rend(), name) - 1;
  };
  for (const bool with_pool : {false, true}) {
    InlinePool pool;
    pool_ = with_pool ? &pool : nullptr;
    order.clear();
    sink_.syncs = 0;
    const SessionManifest m = Run(Plan({"h0:1", "h1:1"}));
    ASSERT_EQ(m.status(), v1::SESSION_STATUS_OK) << with_pool;
    EXPECT_EQ(sink_.syncs, 1) << with_pool;
    const auto sync = first("<sync>");
    ASSERT_LT(sync, static_cast<ptrdiff_t>(order.size())) << with_pool;
    for (const HostResult& h : m.hosts()) EXPECT_LT(last(h.xplane_file()), sync) << with_pool;
    EXPECT_EQ(order.back(), "session.json") << with_pool;
    EXPECT_GT(last("session.json"), sync) << with_pool;
  }
  pool_ = nullptr;
  sink_.sync_error = absl::DataLossError(
      "cannot sync w0.xplane.pb: Input/output error: it may not survive a crash of this machine");
  const SessionManifest failed = Run(Plan({"h0:1", "h1:1"}));
  EXPECT_EQ(failed.status(), v1::SESSION_STATUS_OK);
  EXPECT_THAT(absl::StrJoin(failed.errors(), "\n"),
              HasSubstr("traces: cannot sync w0.xplane.pb: Input/output error"));
  for (const HostResult& h : failed.hosts()) EXPECT_TRUE(sink_.files.count(h.xplane_file()));
}

TEST_F(CaptureEngineTest, FailuresAreTypedPerHostAndDoNotCostTheOthers) {
  Agent("ok:1", {.name = "ok"});
  Agent("info:1", {.get_info_error = absl::InternalError("boom")});
  Agent("sync:1", {.sync_error = absl::PermissionDeniedError("no")});
  Agent("cap:1", {.capture_error = absl::ResourceExhaustedError("busy disk")});
  Agent("long:1", {.max_duration_ms = 100});
  const SessionManifest m = Run(Plan({"ok:1", "gone:1", "info:1", "sync:1", "cap:1", "long:1"}));
  EXPECT_EQ(m.status(), v1::SESSION_STATUS_PARTIAL);
  EXPECT_EQ(Host(m, "ok:1").status(), v1::HOST_STATUS_OK);
  EXPECT_EQ(Host(m, "gone:1").error().step(), v1::FAILURE_STEP_GET_INFO);
  EXPECT_EQ(Host(m, "gone:1").error().code(), static_cast<int>(absl::StatusCode::kUnavailable));
  EXPECT_EQ(Host(m, "info:1").error().step(), v1::FAILURE_STEP_GET_INFO);
  EXPECT_EQ(Host(m, "sync:1").error().step(), v1::FAILURE_STEP_CLOCK_SYNC);
  EXPECT_EQ(Host(m, "cap:1").error().step(), v1::FAILURE_STEP_CAPTURE);
  EXPECT_THAT(Host(m, "cap:1").error().message(), HasSubstr("busy disk"));
  EXPECT_EQ(Host(m, "long:1").error().step(), v1::FAILURE_STEP_PREPARE);
  EXPECT_THAT(Host(m, "long:1").error().message(), HasSubstr("at most 100 ms"));
  for (const HostResult& h : m.hosts()) {
    if (h.address() != "ok:1") {
      EXPECT_EQ(h.status(), v1::HOST_STATUS_FAILED) << h.address();
    }
  }
}

// "localhost:6000" and "127.0.0.1:6000" are one agent: captured once (the address listed first),
// the other failed at prepare naming it, whichever became ready first; never "busy".
TEST_F(CaptureEngineTest, OneAgentListedTwiceIsCapturedOnce) {
  for (const int64_t first_delay_ms : {0, 5}) {
    SCOPED_TRACE(::testing::Message() << "first listed answers after " << first_delay_ms << " ms");
    const std::string a = absl::StrCat("a", first_delay_ms, ":1");
    const std::string b = absl::StrCat("b", first_delay_ms, ":1");
    const std::string c = absl::StrCat("c", first_delay_ms, ":1");
    Agent(a, {.instance_id = "X", .up_delay_ns = first_delay_ms * kNanosPerMilli, .name = "one"});
    Agent(b, {.instance_id = "X", .name = "one-again"});
    Agent(c, {.instance_id = "Y", .name = "other"});
    const SessionManifest m = Run(Plan({a, b, c}));
    EXPECT_EQ(Host(m, a).status(), v1::HOST_STATUS_OK) << Host(m, a).error().message();
    EXPECT_EQ(Host(m, b).error().step(), v1::FAILURE_STEP_PREPARE);
    EXPECT_THAT(Host(m, b).error().message(),
                HasSubstr(absl::StrCat("the same agent as worker ", a, " (instance id X)")));
    EXPECT_EQ(Host(m, c).status(), v1::HOST_STATUS_OK);
  }
}

TEST_F(CaptureEngineTest, CorruptTraceIsKeptAsInvalidAndWriteFailureIsPerHost) {
  Agent("bad:1", {.corrupt_trace = true, .name = "bad"});
  Agent("full:1", {.name = "full"});
  Agent("ok:1", {.name = "ok"});
  sink_.fail_name = "full.xplane.pb";
  const SessionManifest m = Run(Plan({"bad:1", "full:1", "ok:1"}));
  EXPECT_EQ(Host(m, "bad:1").error().step(), v1::FAILURE_STEP_VALIDATE);
  EXPECT_THAT(Host(m, "bad:1").error().message(), HasSubstr("bad.xplane.pb.invalid"));
  EXPECT_TRUE(sink_.files.count("bad.xplane.pb.invalid"));
  EXPECT_FALSE(sink_.files.count("bad.xplane.pb"));
  EXPECT_EQ(Host(m, "full:1").error().step(), v1::FAILURE_STEP_WRITE);
  EXPECT_EQ(Host(m, "ok:1").status(), v1::HOST_STATUS_OK);
}

// A trace damaged in transit (the stream's CRC-32 does not match) is never saved as a trace; the
// bytes are kept as .invalid for inspection and the host fails naming the problem.
TEST_F(CaptureEngineTest, TraceDamagedInTransitIsKeptAsInvalidNotSaved) {
  Agent("flip:1",
        {.transit_error = absl::DataLossError("Capture: checksum mismatch: test"), .name = "flip"});
  Agent("ok:1", {.name = "ok"});
  const SessionManifest m = Run(Plan({"flip:1", "ok:1"}));
  const HostResult& h = Host(m, "flip:1");
  EXPECT_EQ(h.status(), v1::HOST_STATUS_FAILED);
  EXPECT_EQ(h.error().step(), v1::FAILURE_STEP_CAPTURE);
  EXPECT_EQ(h.error().code(), static_cast<int>(absl::StatusCode::kDataLoss));
  EXPECT_THAT(h.error().message(), HasSubstr("checksum mismatch"));
  EXPECT_THAT(h.error().message(), HasSubstr("kept in"));
  EXPECT_TRUE(sink_.files.count("flip.xplane.pb.invalid"));
  EXPECT_FALSE(sink_.files.count("flip.xplane.pb"));
  EXPECT_EQ(Host(m, "ok:1").status(), v1::HOST_STATUS_OK);
}

TEST_F(CaptureEngineTest, AThousandHostsAllGetTheirCaptureBeforeTheStartAndStartTogether) {
  std::mt19937_64 rng(7);
  std::uniform_int_distribution<int64_t> delay(20'000, 2'000'000);  // 20 us .. 2 ms one way
  std::uniform_int_distribution<int64_t> skew(-5 * kNanosPerSecond, 5 * kNanosPerSecond);
  std::vector<std::string> addresses;
  for (int i = 0; i < 1000; ++i) {
    const int64_t d = delay(rng);
    addresses.push_back(absl::StrCat("host", i, ":6000"));
    synthetic::SyntheticJobConfig job = Rank(i, 1000);
    job.step_ms = 50;
    Agent(addresses.back(),
          {.clock_offset_ns = skew(rng),
           .up_delay_ns = d,
           .down_delay_ns = d,
           .name = absl::StrCat("w", i)},
          job);
  }
  CapturePlan plan = Plan(addresses, 200);
  plan.align = v1::ALIGN_MODE_NTP;
  const int64_t t0 = clock_.MonoNs();
  const SessionManifest m = Run(plan);
  EXPECT_EQ(m.status(), v1::SESSION_STATUS_OK);
  for (size_t i = 0; i < agents_.size(); ++i) {
    const HostResult& h = m.hosts(static_cast<int>(i));
    ASSERT_EQ(h.status(), v1::HOST_STATUS_OK) << h.address() << " " << h.error().message();
    // Capture arrived before start_at: the agent started exactly when asked.
    EXPECT_EQ(agents_[i]->last_start_ns(), h.requested_start_ns()) << h.address();
    EXPECT_FALSE(h.late());
  }
  EXPECT_EQ(m.start_spread_ns(), 0);
  // Preparing took a few round trips, not seconds.
  EXPECT_LT(m.prepare_ms(), 50.0);
  EXPECT_LT(clock_.MonoNs() - t0, 2 * kNanosPerSecond);
}

// Clock samples start once GetInfo has answered, on a connected channel: none is sent to an
// agent that never answers GetInfo, and a quiet path takes the minimum of 3.
TEST_F(CaptureEngineTest, ClockSamplesStartOnceGetInfoHasAnswered) {
  FakeAgent& a = Agent("a:1", {.up_delay_ns = 200'000, .down_delay_ns = 200'000}, Rank(0, 2));
  FakeAgent& hung = Agent("hung:1", {.hang_get_info = true}, Rank(1, 2));
  CapturePlan plan = Plan({"a:1", "hung:1"});
  plan.late = v1::LATE_POLICY_FAIL;
  const SessionManifest m = Run(plan);
  EXPECT_EQ(Host(m, "a:1").status(), v1::HOST_STATUS_OK);
  EXPECT_EQ(Host(m, "a:1").clock().samples(), 3u);
  EXPECT_EQ(a.syncs(), 3);
  EXPECT_EQ(Host(m, "hung:1").error().step(), v1::FAILURE_STEP_PREPARE_TIMEOUT);
  EXPECT_EQ(hung.syncs(), 0);
}

TEST_F(CaptureEngineTest, HostWhoseClockSyncHangsDoesNotMoveTheOthersWindow) {
  for (int i = 0; i < 9; ++i) Agent(absl::StrCat("h", i, ":1"), {}, Rank(i, 10));
  Agent("hung:1", {.hang_sync = true}, Rank(9, 10));
  std::vector<std::string> addresses;
  for (int i = 0; i < 9; ++i) addresses.push_back(absl::StrCat("h", i, ":1"));
  addresses.push_back("hung:1");
  const int64_t t0_wall = clock_.WallNs();
  const SessionManifest m = Run(Plan(addresses, 300));
  // The budget shrank to its floor (the others were ready at once): the window opened then.
  EXPECT_DOUBLE_EQ(m.prepare_budget_ms(), 250.0);
  EXPECT_LE(m.start_at_ns() - t0_wall, 400 * kNanosPerMilli);
  EXPECT_EQ(m.status(), v1::SESSION_STATUS_PARTIAL);
  const HostResult& hung = Host(m, "hung:1");
  EXPECT_EQ(hung.status(), v1::HOST_STATUS_FAILED);
  // --late=capture kept trying until its samples timed out.
  EXPECT_TRUE(hung.error().step() == v1::FAILURE_STEP_CLOCK_SYNC ||
              hung.error().step() == v1::FAILURE_STEP_PREPARE_TIMEOUT)
      << hung.error().DebugString();
  for (int i = 0; i < 9; ++i) {
    EXPECT_EQ(m.hosts(i).status(), v1::HOST_STATUS_OK);
    EXPECT_FALSE(m.hosts(i).late());
  }
}

// Sending every Capture takes the coordinator time, and the lead covers it: what one RPC on a
// connected channel costs, not what the first RPCs of the fan-out cost (they also connect, about
// 10 x more; a lead from those kept 1,024 hosts waiting 0.65 s to send in 0.06 s).
TEST_F(CaptureEngineTest, LeadCoversSendingEveryCaptureAtWhatAConnectedChannelCosts) {
  std::vector<std::string> addresses;
  for (int i = 0; i < 400; ++i) {
    addresses.push_back(absl::StrCat("h", i, ":1"));
    synthetic::SyntheticJobConfig job = Rank(i, 400);
    job.step_ms = 50;
    Agent(addresses.back(),
          {.up_delay_ns = 100 * kNanosPerMicro,
           .down_delay_ns = 100 * kNanosPerMicro,
           .send_cost_ns = 500 * kNanosPerMicro,
           .first_send_cost_ns = 5 * kNanosPerMilli},
          job);
  }
  CapturePlan plan = Plan(addresses, 200);
  plan.align = v1::ALIGN_MODE_NTP;
  const SessionManifest m = Run(plan);
  ASSERT_EQ(m.status(), v1::SESSION_STATUS_OK);
  // Sending 400 Captures takes 200 ms here, past the 100 ms minimum lead: every one still
  // arrived before the start, and the agents started together.
  int64_t max_rtt = 0;
  for (size_t i = 0; i < agents_.size(); ++i) {
    const HostResult& h = m.hosts(static_cast<int>(i));
    EXPECT_EQ(agents_[i]->last_start_ns(), h.requested_start_ns()) << h.address();
    EXPECT_FALSE(h.late()) << h.address();
    max_rtt = std::max(max_rtt, h.clock().rtt_ns());
  }
  EXPECT_EQ(m.start_spread_ns(), 0);
  // The lead: the round trips (the answers queued behind the fan-out look slow), plus
  // 400 x 2 x 0.5 ms; the first RPCs' 5.5 ms a host would have added 4.4 s.
  const int64_t expected_lead =
      std::max(100 * kNanosPerMilli, 2 * max_rtt + 400 * 2 * 500 * kNanosPerMicro);
  const int64_t prepared_wall =
      FakeClock::kDefaultWallNs + static_cast<int64_t>(m.prepare_ms() * 1e6);
  EXPECT_NEAR(static_cast<double>(m.start_at_ns() - prepared_wall),
              static_cast<double>(expected_lead), 1e6);
  EXPECT_NEAR(m.lead_ms() * 1e6, static_cast<double>(expected_lead), 1e3);  // session.json says it
  EXPECT_LT(expected_lead, 2 * kNanosPerSecond);
  // And how much of it sending took: 400 x 0.5 ms.
  EXPECT_NEAR(m.send_ms(), 200.0, 1.0);
}

// The 100 ms minimum lead is a floor, not a margin on top of the send time (twice the measured
// cost is the margin): 50 hosts at 0.4 ms a send need 2 x rtt + 40 ms, under the floor, and get
// the 100 ms, not 100 ms + 40 ms, and still all start together.
TEST_F(CaptureEngineTest, TheMinimumLeadIsAFloorNotAMarginOnTop) {
  std::vector<std::string> addresses;
  for (int i = 0; i < 50; ++i) {
    addresses.push_back(absl::StrCat("h", i, ":1"));
    Agent(addresses.back(),
          {.up_delay_ns = kNanosPerMilli,
           .down_delay_ns = kNanosPerMilli,
           .send_cost_ns = 400 * kNanosPerMicro},
          Rank(i, 50));
  }
  CapturePlan plan = Plan(addresses, 200);
  plan.align = v1::ALIGN_MODE_NTP;
  const SessionManifest m = Run(plan);
  ASSERT_EQ(m.status(), v1::SESSION_STATUS_OK);
  int64_t max_rtt = 0;
  for (const HostResult& h : m.hosts()) {
    EXPECT_FALSE(h.late()) << h.address();
    max_rtt = std::max(max_rtt, h.clock().rtt_ns());
  }
  EXPECT_EQ(m.start_spread_ns(), 0);
  const int64_t sending = 50 * 2 * 400 * kNanosPerMicro;
  ASSERT_LT(2 * max_rtt, 100 * kNanosPerMilli);  // else floor and sum would agree
  EXPECT_NEAR(m.lead_ms() * 1e6,
              static_cast<double>(std::max(100 * kNanosPerMilli, 2 * max_rtt + sending)), 1e3);
}

// A tail of hosts that never answer (5 % dead or hung in a big pod) must not hold the others
// for 4 x the median: once 90 % are ready, the budget is at most 2 x the slowest of them
// (with --late=fail; --late=capture ends sooner, below).
TEST_F(CaptureEngineTest, DerivedBudgetShrinksOnceNineTenthsOfThePodIsReady) {
  std::vector<std::string> addresses;
  for (int i = 0; i < 18; ++i) {
    const int64_t one_way = (20 + 2 * i) * kNanosPerMilli;  // round trips 40..108 ms
    addresses.push_back(absl::StrCat("h", i, ":1"));
    Agent(addresses.back(), {.up_delay_ns = one_way, .down_delay_ns = one_way}, Rank(i, 20));
  }
  Agent("hung-info:1", {.hang_get_info = true}, Rank(18, 20));
  Agent("hung-sync:1", {.hang_sync = true}, Rank(19, 20));
  addresses.push_back("hung-info:1");
  addresses.push_back("hung-sync:1");
  CapturePlan plan = Plan(addresses, 1000);
  plan.late = v1::LATE_POLICY_FAIL;
  const SessionManifest m = Run(plan);
  std::vector<double> ready_ms;
  for (int i = 0; i < 18; ++i) {
    const HostResult& h = m.hosts(i);
    EXPECT_EQ(h.status(), v1::HOST_STATUS_OK) << h.address() << " " << h.error().message();
    EXPECT_FALSE(h.late()) << h.address();
    ready_ms.push_back(h.prepare_ms());
  }
  std::sort(ready_ms.begin(), ready_ms.end());
  const double median_at_half = ready_ms[5];  // the 10 ready first: the median of them
  EXPECT_DOUBLE_EQ(m.prepare_budget_ms(), 2 * ready_ms.back());
  EXPECT_LT(m.prepare_budget_ms(), 4 * median_at_half);
  EXPECT_NEAR(m.prepare_ms(), m.prepare_budget_ms(), 1.0);
  EXPECT_EQ(Host(m, "hung-info:1").status(), v1::HOST_STATUS_FAILED);
  EXPECT_EQ(Host(m, "hung-sync:1").status(), v1::HOST_STATUS_FAILED);
}

// With --late=capture, once 90 % are ready, preparing ends when no other host got ready for a
// while: the hung tail (nothing answered) costs the others 50 ms, not 2 x the slowest; a healthy
// host whose answers are arriving over a slow link (400 ms round trips: ready at ~1.6 s) is
// waited for as its round trips say, and records the whole window with the others.
TEST_F(CaptureEngineTest, WithLateCapturePreparingWaitsForASlowHostOnItsWayNotForTheHungTail) {
  std::vector<std::string> addresses = EighteenReadyAt600To700Ms();
  Agent("hung:1", {.hang_get_info = true}, Rank(18, 20));
  Agent("slow:1", {.up_delay_ns = 200 * kNanosPerMilli, .down_delay_ns = 200 * kNanosPerMilli},
        Rank(19, 20));
  addresses.push_back("hung:1");
  addresses.push_back("slow:1");
  const SessionManifest m = Run(Plan(addresses, 3000));
  const double last_ready_ms = LastReadyMs(m, 18);
  EXPECT_GT(last_ready_ms, 600.0);
  const HostResult& slow = Host(m, "slow:1");
  EXPECT_EQ(slow.status(), v1::HOST_STATUS_OK) << slow.error().message();
  EXPECT_FALSE(slow.late());
  EXPECT_GT(slow.prepare_ms(), last_ready_ms + 50);  // past the quiet end
  EXPECT_NEAR(m.prepare_ms(), slow.prepare_ms() + 50, 1.0);
  EXPECT_EQ(Host(m, "hung:1").status(), v1::HOST_STATUS_FAILED);
}

// A host silent until after preparing ended (its GetInfo answers late: nothing said it was on its
// way) joins after it, with --late=capture: after the start too (the lead covers 2 x the largest
// round trip of the hosts that were ready); it records the rest of the window, flagged late.
TEST_F(CaptureEngineTest, WithLateCaptureAHostSilentUntilAfterPreparingJoinsLate) {
  std::vector<std::string> addresses = EighteenReadyAt600To700Ms();
  Agent("slow:1", {.get_info_delay_ns = 1500 * kNanosPerMilli, .connects = false}, Rank(19, 20));
  addresses.push_back("slow:1");
  const SessionManifest m = Run(Plan(addresses, 3000));
  const HostResult& slow = Host(m, "slow:1");
  EXPECT_GT(slow.prepare_ms(), m.prepare_ms());
  EXPECT_EQ(slow.status(), v1::HOST_STATUS_INCOMPLETE) << slow.error().message();
  EXPECT_EQ(slow.recording(), v1::RECORDING_LATE);
  EXPECT_TRUE(slow.late());
  EXPECT_FALSE(slow.xplane_file().empty());
  // Ready after the start, so late by at least the time from the start to its being ready.
  const double start_after_prepare_ms = m.prepare_ms() + m.lead_ms();
  EXPECT_GT(slow.lateness_ns(), (slow.prepare_ms() - start_after_prepare_ms) * 1e6);
}

// A frozen agent (SIGSTOP, a debugger, a paused container): its host's kernel answers a TCP
// handshake at once while its process answers nothing, so its channel never connects. Preparing
// waits frozen_host_wait_ms for it (or 4 x the pod's slowest GetInfo answer), not its GetInfo's
// 2 s timeout, and says why. A host behind a 600 ms link, whose handshake takes its round trip
// too, is still waited for and captured; a silent host that cannot be probed is waited for as
// before.
TEST_F(CaptureEngineTest, AFrozenHostIsNotWaitedForPastItsHandshakeButASlowLinkIs) {
  Agent("a:1", {}, Rank(0));
  Agent("b:1", {}, Rank(1));
  FakeAgent& frozen =
      Agent("frozen:1", {.handshake_ns = 100 * kNanosPerMicro, .hang_get_info = true}, Rank(2));
  const SessionManifest m = Run(Plan({"a:1", "b:1", "frozen:1"}, 2000));
  EXPECT_EQ(frozen.handshake_probes(), 1);
  EXPECT_NEAR(m.prepare_ms(), 500, 1.0);
  EXPECT_EQ(Host(m, "a:1").status(), v1::HOST_STATUS_OK);
  EXPECT_EQ(Host(m, "b:1").status(), v1::HOST_STATUS_OK);
  EXPECT_EQ(Host(m, "frozen:1").status(), v1::HOST_STATUS_FAILED);
  EXPECT_THAT(Host(m, "frozen:1").error().message(),
              HasSubstr("GetInfo unanswered after 2000 ms (its 2000 ms timeout: its host answered "
                        "a TCP handshake in 0.1 ms, its agent nothing: frozen or stuck?)"));
  EXPECT_THAT(absl::StrJoin(progress_, "\n"),
              HasSubstr("frozen:1: not ready within 500 ms: its host answered a TCP handshake in "
                        "0.1 ms but its agent has answered nothing (frozen or stuck?)"));

  Agent("far:2",
        {.up_delay_ns = 300 * kNanosPerMilli,
         .down_delay_ns = 300 * kNanosPerMilli,
         .handshake_ns = 600 * kNanosPerMilli},
        Rank(2));
  const SessionManifest m1 = Run(Plan({"a:1", "b:1", "far:2"}, 2000));
  const HostResult& far = Host(m1, "far:2");
  EXPECT_EQ(far.status(), v1::HOST_STATUS_OK) << far.error().message();
  EXPECT_FALSE(far.late());
  EXPECT_GE(far.prepare_ms(), 4 * 600.0);

  // The others answer GetInfo only after 300 ms (a coordinator too busy to finish its
  // handshakes, a large pod on few cores): a silent host is given 4 x that, not the 500 ms.
  Agent("busy-a:1", {.get_info_delay_ns = 300 * kNanosPerMilli}, Rank(0));
  Agent("busy-b:1", {.get_info_delay_ns = 300 * kNanosPerMilli}, Rank(1));
  const SessionManifest busy = Run(Plan({"busy-a:1", "busy-b:1", "frozen:1"}, 2000));
  EXPECT_NEAR(busy.prepare_ms(), 1200, 1.0);
  EXPECT_EQ(Host(busy, "busy-a:1").status(), v1::HOST_STATUS_OK);
  EXPECT_EQ(Host(busy, "frozen:1").status(), v1::HOST_STATUS_FAILED);

  // Cannot be probed (the default fake, a peer on a name): its GetInfo's timeout, as before.
  FakeAgent& unprobed = Agent("hung:3", {.hang_get_info = true}, Rank(2));
  const SessionManifest m2 = Run(Plan({"a:1", "b:1", "hung:3"}, 2000));
  EXPECT_EQ(unprobed.handshake_probes(), 1);
  EXPECT_NEAR(m2.prepare_ms(), 2000, 1.0);
  EXPECT_EQ(Host(m2, "hung:3").status(), v1::HOST_STATUS_FAILED);
}

// When every host left has answered nothing (dead, or hung from the first RPC on), none is on
// its way: preparing ends min_prepare_quiet_ms after the last ready host, not a quarter of its
// time later. (The test above keeps the quarter: its slow host has answered.)
TEST_F(CaptureEngineTest, WithOnlySilentHostsLeftPreparingEndsAtTheShortestQuiet) {
  std::vector<std::string> addresses = EighteenReadyAt600To700Ms();
  Agent("hung:1", {.hang_get_info = true, .hang_sync = true}, Rank(18, 20));
  Agent("dead:1",
        {.get_info_error = absl::UnavailableError("GetInfo: fake: connection refused"),
         .sync_error = absl::UnavailableError("SyncClock: fake: connection refused")},
        Rank(19, 20));
  addresses.push_back("hung:1");
  addresses.push_back("dead:1");
  const SessionManifest m = Run(Plan(addresses, 3000));
  const double last_ready_ms = LastReadyMs(m, 18);
  EXPECT_GT(last_ready_ms, 600.0);
  EXPECT_NEAR(m.prepare_ms(), last_ready_ms + 50, 1.0);
  EXPECT_EQ(Host(m, "hung:1").status(), v1::HOST_STATUS_FAILED);
  EXPECT_EQ(Host(m, "dead:1").status(), v1::HOST_STATUS_FAILED);
}

// A host behind a 240 ms round trip needs ~1 s to prepare (GetInfo and 3 clock samples, one
// after another) while the others are ready at once: its GetInfo answered before the 250 ms
// floor, so preparing waits for it as its round trips say instead of ending at the floor and
// leaving it to join late.
TEST_F(CaptureEngineTest, AHostBehindASlowLinkIsWaitedForAsItsRoundTripsSay) {
  Agent("a:1", {}, Rank(0));
  Agent("b:1", {}, Rank(1));
  Agent("far:1", {.up_delay_ns = 120 * kNanosPerMilli, .down_delay_ns = 120 * kNanosPerMilli},
        Rank(2));
  const SessionManifest m = Run(Plan({"a:1", "b:1", "far:1"}, 2000));
  const HostResult& far = Host(m, "far:1");
  EXPECT_EQ(far.status(), v1::HOST_STATUS_OK) << far.error().message();
  EXPECT_FALSE(far.late());
  EXPECT_NEAR(far.clock().rtt_ns(), 240 * kNanosPerMilli, kNanosPerMilli);
  EXPECT_GE(far.prepare_ms(), 4 * 240.0);
  EXPECT_NEAR(m.prepare_ms(), far.prepare_ms(), 1.0);  // ended once it was ready
  EXPECT_EQ(m.status(), v1::SESSION_STATUS_OK);

  // A 600 ms round trip: nothing came back by the floor, but its GetInfo is in flight and it is
  // more than the pod's tenth: preparing waits for that GetInfo (up to its timeout), then for its
  // clock samples as their round trips say; it records the whole window with the others.
  Agent("far:2", {.up_delay_ns = 300 * kNanosPerMilli, .down_delay_ns = 300 * kNanosPerMilli},
        Rank(2));
  const SessionManifest m1 = Run(Plan({"a:1", "b:1", "far:2"}, 2000));
  const HostResult& far1 = Host(m1, "far:2");
  EXPECT_EQ(far1.status(), v1::HOST_STATUS_OK) << far1.error().message();
  EXPECT_FALSE(far1.late());
  EXPECT_NEAR(far1.clock().rtt_ns(), 600 * kNanosPerMilli, kNanosPerMilli);
  EXPECT_GE(far1.prepare_ms(), 4 * 600.0);
  EXPECT_NEAR(m1.prepare_ms(), far1.prepare_ms(), 1.0);
  // With an explicit budget shorter than its clock sync and --late=fail, it fails, and its
  // error says how long each answer took.
  CapturePlan plan = Plan({"a:1", "b:1", "far:2"}, 2000);
  plan.prepare_timeout_ms = 1500;
  plan.late = v1::LATE_POLICY_FAIL;
  const SessionManifest m2 = Run(plan);
  const HostResult& far2 = Host(m2, "far:2");
  EXPECT_EQ(far2.status(), v1::HOST_STATUS_FAILED);
  EXPECT_EQ(far2.error().step(), v1::FAILURE_STEP_PREPARE_TIMEOUT);
  EXPECT_THAT(far2.error().message(), HasSubstr("GetInfo answered after 600 ms"));
  EXPECT_THAT(far2.error().message(), HasSubstr("each answer took 600 ms"));

  // A GetInfo unanswered at its 2 s timeout (a hung host, or an absurd round trip: the fake
  // answers it DEADLINE_EXCEEDED then): preparing waits no longer; it fails naming the numbers,
  // and the others are captured after that wait.
  Agent("far:3", {.hang_get_info = true}, Rank(2));
  const SessionManifest m3 = Run(Plan({"a:1", "b:1", "far:3"}, 2000));
  const HostResult& far3 = Host(m3, "far:3");
  EXPECT_EQ(far3.status(), v1::HOST_STATUS_FAILED);
  EXPECT_EQ(far3.error().step(), v1::FAILURE_STEP_GET_INFO);
  EXPECT_THAT(far3.error().message(),
              HasSubstr("GetInfo unanswered after 2000 ms (its 2000 ms timeout: the host is hung, "
                        "or its round trip is longer than that)"));
  EXPECT_EQ(Host(m3, "a:1").status(), v1::HOST_STATUS_OK);
  EXPECT_LE(m3.prepare_ms(), 2000 + 1.0);
}

// A link that slows down while preparing: each clock sample's answer takes 150 ms longer than the
// last, so what its first answers projected comes too early. Preparing follows each answer's
// projection and waits until the host is ready, not until its first projection.
TEST_F(CaptureEngineTest, AHostWhoseRoundTripsGrowIsFollowedAnswerByAnswer) {
  Agent("a:1", {}, Rank(0));
  Agent("b:1", {}, Rank(1));
  Agent("slowing:1",
        {.up_delay_ns = 100 * kNanosPerMilli,
         .down_delay_ns = 100 * kNanosPerMilli,
         .sync_delay_growth_ns = 150 * kNanosPerMilli},
        Rank(2));
  const SessionManifest m = Run(Plan({"a:1", "b:1", "slowing:1"}, 2000));
  const HostResult& slowing = Host(m, "slowing:1");
  EXPECT_EQ(slowing.status(), v1::HOST_STATUS_OK) << slowing.error().message();
  EXPECT_FALSE(slowing.late());
  EXPECT_NEAR(m.prepare_ms(), slowing.prepare_ms(), 1.0);  // ended once it was ready
  EXPECT_EQ(m.status(), v1::SESSION_STATUS_OK);
}

// A window longer than an agent's --max-duration-ms is refused for that host at prepare, before
// any Capture, naming both numbers and where each comes from; the other hosts are captured.
TEST_F(CaptureEngineTest, AWindowLongerThanAnAgentAcceptsFailsThatHostNamingBothNumbers) {
  Agent("a:1", {}, Rank(0));
  Agent("short:1", {.max_duration_ms = 1000}, Rank(1));
  const SessionManifest m = Run(Plan({"a:1", "short:1"}, 2000));
  EXPECT_EQ(Host(m, "a:1").status(), v1::HOST_STATUS_OK) << Host(m, "a:1").error().message();
  const HostResult& s = Host(m, "short:1");
  EXPECT_EQ(s.status(), v1::HOST_STATUS_FAILED);
  EXPECT_EQ(s.error().step(), v1::FAILURE_STEP_PREPARE);
  EXPECT_EQ(s.error().code(), static_cast<int>(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(s.error().message(),
              HasSubstr("at most 1000 ms (its --max-duration-ms), asked for 2000 ms (--duration)"));
  EXPECT_EQ(m.status(), v1::SESSION_STATUS_PARTIAL);

  // A snapshot (--last) says so in its own words.
  CapturePlan snapshot = Plan({"short:1"}, 2000);
  snapshot.past_ms = 2000;
  const SessionManifest m2 = Run(snapshot);
  EXPECT_THAT(Host(m2, "short:1").error().message(),
              HasSubstr("keeps a past of at most 1000 ms (its --max-duration-ms), asked for 2000 "
                        "ms (--last)"));
}

// A snapshot whose every host fails at once (an agent without --flight-recorder) finishes before
// its instant: the time spent after the window is 0, never negative (was -97 ms in a serve run).
TEST_F(CaptureEngineTest, ASnapshotThatFailsBeforeItsInstantSpendsNoTimeAfterIt) {
  Agent("nopast:1", {.capture_error = absl::FailedPreconditionError("this agent keeps no past")});
  CapturePlan snapshot = Plan({"nopast:1"}, 1000);
  snapshot.past_ms = 1000;
  const SessionManifest m = Run(snapshot);
  EXPECT_EQ(Host(m, "nopast:1").status(), v1::HOST_STATUS_FAILED);
  EXPECT_GE(m.collect_ms(), 0.0);
}

TEST_F(CaptureEngineTest, ExplicitPrepareTimeoutWithLateFailFailsTheUnreadyHostAtOnce) {
  Agent("a:1", {});
  Agent("hung:1", {.hang_get_info = true});
  CapturePlan plan = Plan({"a:1", "hung:1"});
  plan.prepare_timeout_ms = 120;
  plan.late = v1::LATE_POLICY_FAIL;
  const int64_t t0_wall = clock_.WallNs();
  const SessionManifest m = Run(plan);
  EXPECT_DOUBLE_EQ(m.prepare_budget_ms(), 120.0);
  EXPECT_LE(m.start_at_ns() - t0_wall, 120 * kNanosPerMilli + 200 * kNanosPerMilli);
  EXPECT_EQ(Host(m, "hung:1").error().step(), v1::FAILURE_STEP_PREPARE_TIMEOUT);
  EXPECT_THAT(Host(m, "hung:1").error().message(), HasSubstr("GetInfo unanswered"));
  EXPECT_EQ(Host(m, "a:1").status(), v1::HOST_STATUS_OK);
}

TEST_F(CaptureEngineTest, SlowHostJoinsLateWithCaptureAndIsFlagged) {
  Agent("a:1", {}, Rank(0));
  Agent("b:1", {}, Rank(1));
  // Silent until its GetInfo answers at ~600 ms, after an explicit 300 ms budget.
  Agent("slow:1", {.get_info_delay_ns = 600 * kNanosPerMilli, .connects = false}, Rank(2));
  CapturePlan plan = Plan({"a:1", "b:1", "slow:1"}, 3000);
  plan.prepare_timeout_ms = 300;
  const SessionManifest m = Run(plan);
  const HostResult& slow = Host(m, "slow:1");
  // Saved, but not the window asked for: honest status, partial session.
  ASSERT_EQ(slow.status(), v1::HOST_STATUS_INCOMPLETE) << slow.error().message();
  EXPECT_EQ(slow.recording(), v1::RECORDING_LATE);
  EXPECT_THAT(slow.recording_detail(), HasSubstr("late: started"));
  EXPECT_EQ(m.status(), v1::SESSION_STATUS_PARTIAL);
  EXPECT_TRUE(slow.late());
  EXPECT_GE(slow.lateness_ns(), 200 * kNanosPerMilli);
  EXPECT_FALSE(Host(m, "a:1").late());
  EXPECT_EQ(m.start_spread_ns(), slow.lateness_ns());
}

TEST_F(CaptureEngineTest, LatePolicyDecidesAboutAHostThatStartsLate) {
  for (v1::LatePolicy policy : {v1::LATE_POLICY_CAPTURE, v1::LATE_POLICY_FAIL}) {
    SCOPED_TRACE(v1::LatePolicy_Name(policy));
    sink_.files.clear();
    const std::string a = absl::StrCat("a", policy, ":1");
    const std::string l = absl::StrCat("late", policy, ":1");
    Agent(a, {.name = "a"}, Rank(0));
    FakeAgent& late = Agent(l, {.start_delay_ns = 40 * kNanosPerMilli, .name = "late"}, Rank(1));
    CapturePlan plan = Plan({a, l});
    plan.late = policy;
    const SessionManifest m = Run(plan);
    EXPECT_EQ(Host(m, a).status(), v1::HOST_STATUS_OK);
    const HostResult& h = Host(m, l);
    if (policy == v1::LATE_POLICY_CAPTURE) {
      EXPECT_EQ(h.status(), v1::HOST_STATUS_INCOMPLETE);
      EXPECT_EQ(h.recording(), v1::RECORDING_LATE);
      EXPECT_THAT(h.recording_detail(), HasSubstr("40.000 ms after the common start"));
      EXPECT_TRUE(h.late());
      EXPECT_EQ(h.lateness_ns(), 40 * kNanosPerMilli);
      EXPECT_TRUE(sink_.files.count("late.xplane.pb"));
    } else {
      EXPECT_EQ(h.error().step(), v1::FAILURE_STEP_LATE);
      EXPECT_THAT(h.error().message(), HasSubstr("40.000 ms after the common start"));
      EXPECT_FALSE(sink_.files.count("late.xplane.pb"));
      EXPECT_EQ(late.captures(), 1);
    }
  }
}

// Each host's temporary trace file is made when its agent starts recording, inside the window
// (where the coordinator is idle), not when the trace arrives after it; one whose host then fails
// is dropped, and none is left open.
TEST_F(CaptureEngineTest, TraceFilesAreMadeWhileTheWindowIsOpenAndDroppedForAFailedHost) {
  Agent("a:1", {.name = "a"}, Rank(0));
  Agent("b:1", {.clock_offset_ns = 5 * kNanosPerMilli, .name = "b"}, Rank(1));
  Agent("late:1", {.start_delay_ns = 40 * kNanosPerMilli, .name = "late"}, Rank(2));
  std::vector<int64_t> created_at;
  sink_.on_create = [&] { created_at.push_back(clock_.WallNs()); };
  CapturePlan plan = Plan({"a:1", "b:1", "late:1"}, /*duration_ms=*/500);
  plan.late = v1::LATE_POLICY_FAIL;
  const SessionManifest m = Run(plan);
  EXPECT_EQ(Host(m, "a:1").status(), v1::HOST_STATUS_OK);
  EXPECT_EQ(Host(m, "b:1").status(), v1::HOST_STATUS_OK);
  EXPECT_EQ(Host(m, "late:1").error().step(), v1::FAILURE_STEP_LATE);
  ASSERT_EQ(created_at.size(), 3u);
  for (const int64_t t : created_at) {
    EXPECT_GE(t, m.start_at_ns());
    EXPECT_LT(t, m.start_at_ns() + 500 * kNanosPerMilli);
  }
  EXPECT_TRUE(sink_.files.count("a.xplane.pb"));
  EXPECT_TRUE(sink_.files.count("b.xplane.pb"));
  EXPECT_FALSE(sink_.files.count("late.xplane.pb"));
  EXPECT_EQ(sink_.open_files(), 0);
}

TEST_F(CaptureEngineTest, AgentThatSendsNoStartedMessageIsJudgedByItsHeader) {
  Agent("old:1", {.start_delay_ns = 30 * kNanosPerMilli, .send_started = false});
  CapturePlan plan = Plan({"old:1"});
  const SessionManifest m = Run(plan);
  EXPECT_EQ(m.hosts(0).status(), v1::HOST_STATUS_INCOMPLETE);
  EXPECT_EQ(m.hosts(0).recording(), v1::RECORDING_LATE);
  EXPECT_TRUE(m.hosts(0).late());
  EXPECT_EQ(m.hosts(0).lateness_ns(), 30 * kNanosPerMilli);
  // With a tolerance above its lateness the same host is complete.
  plan.tolerance_ms = 50;
  const SessionManifest tolerant = Run(plan);
  EXPECT_EQ(tolerant.hosts(0).status(), v1::HOST_STATUS_OK);
  EXPECT_EQ(tolerant.hosts(0).recording(), v1::RECORDING_COMPLETE);
  EXPECT_FALSE(tolerant.hosts(0).late());
  EXPECT_EQ(tolerant.status(), v1::SESSION_STATUS_OK);
}

TEST_F(CaptureEngineTest, CollectivesRefineOffsetsPastAsymmetricPaths) {
  const int64_t offsets[] = {0, -1537 * kNanosPerMilli, 263 * kNanosPerMilli,
                             4011 * kNanosPerMilli};
  for (int i = 0; i < 4; ++i) {
    FakeAgentBehavior b{.clock_offset_ns = offsets[i], .name = absl::StrCat("w", i)};
    if (i == 1) b.up_delay_ns = 10 * kNanosPerMilli;   // RTT offset off by +5 ms
    if (i == 2) b.down_delay_ns = 6 * kNanosPerMilli;  // off by -3 ms
    if (i == 3) b.up_delay_ns = b.down_delay_ns = 50'000;
    synthetic::SyntheticJobConfig job = Rank(i, 4);
    job.step_ms = 40;
    Agent(absl::StrCat("h", i, ":1"), b, job);
  }
  for (v1::AlignMode mode : {v1::ALIGN_MODE_NTP, v1::ALIGN_MODE_COLLECTIVES}) {
    SCOPED_TRACE(v1::AlignMode_Name(mode));
    sink_.files.clear();
    CapturePlan plan = Plan({"h0:1", "h1:1", "h2:1", "h3:1"}, 1000);
    plan.session = v1::AlignMode_Name(mode);
    plan.align = mode;
    const SessionManifest m = Run(plan);
    ASSERT_EQ(m.status(), v1::SESSION_STATUS_OK);
    int64_t worst = 0;
    for (int i = 1; i < 4; ++i) {
      const auto& c = m.hosts(i).clock();
      // Relative to host 0: what matters for one timeline.
      const int64_t error = (c.offset_ns() - m.hosts(0).clock().offset_ns()) - offsets[i];
      worst = std::max<int64_t>(worst, std::llabs(error));
      // The offset used stays within the clock-sync bound.
      EXPECT_LE(std::llabs(c.offset_ns() - c.rtt_offset_ns()), c.uncertainty_ns()) << i;
      EXPECT_EQ(c.method(), mode == v1::ALIGN_MODE_NTP ? "rtt" : "collectives") << i;
    }
    if (mode == v1::ALIGN_MODE_NTP) {
      EXPECT_GT(worst, 2 * kNanosPerMilli);  // half the asymmetry shows
    } else {
      EXPECT_LT(worst, 100 * kNanosPerMicro);
      EXPECT_GT(m.hosts(1).clock().matched_collectives(), 10u);
    }
  }
}

// Three ranks of one job and a host of another job (another step period and phase, more
// collectives than theirs): the three align on their collectives; the odd one keeps its
// clock-sync offset, and session.json and the breakdown's warnings say so, naming it.
TEST_F(CaptureEngineTest, AHostOnAnotherStepGridKeepsItsClockSyncOffsetAndIsNamed) {
  const int64_t offsets[] = {0, -1537 * kNanosPerMilli, 263 * kNanosPerMilli, 91 * kNanosPerMilli};
  for (int i = 0; i < 3; ++i) {
    synthetic::SyntheticJobConfig job = Rank(i, 3);
    job.step_ms = 40;
    Agent(absl::StrCat("h", i, ":1"), {.clock_offset_ns = offsets[i], .name = absl::StrCat("w", i)},
          job);
  }
  synthetic::SyntheticJobConfig other = Rank(0, 1);
  other.step_ms = 27;
  other.seed = 5;
  Agent("odd:1",
        {.clock_offset_ns = offsets[3],
         .up_delay_ns = 2 * kNanosPerMilli,
         .down_delay_ns = 2 * kNanosPerMilli,
         .name = "odd"},
        other);
  CapturePlan plan = Plan({"odd:1", "h0:1", "h1:1", "h2:1"}, 1000);
  plan.align = v1::ALIGN_MODE_COLLECTIVES;
  const SessionManifest m = Run(plan);
  ASSERT_EQ(m.status(), v1::SESSION_STATUS_OK);
  ASSERT_EQ(m.hosts_size(), 4);
  for (int i = 1; i < 4; ++i) {
    const auto& c = m.hosts(i).clock();
    EXPECT_EQ(c.method(), "collectives") << i;
    EXPECT_EQ(c.warning(), "") << i;
    const int64_t error = (c.offset_ns() - m.hosts(1).clock().offset_ns()) - offsets[i - 1];
    EXPECT_LT(std::llabs(error), 100 * kNanosPerMicro) << i;
  }
  const auto& odd = m.hosts(0).clock();
  EXPECT_EQ(m.hosts(0).host(), "odd");
  EXPECT_EQ(odd.method(), "rtt");
  EXPECT_EQ(odd.offset_ns(), odd.rtt_offset_ns());
  EXPECT_GE(odd.uncertainty_ns(), 2 * kNanosPerMilli);  // RTT/2: what the warning quotes
  EXPECT_THAT(odd.warning(), HasSubstr("collectives do not coincide with the other hosts' ("));
  EXPECT_THAT(odd.warning(), HasSubstr("another step grid"));
  EXPECT_THAT(odd.warning(),
              HasSubstr(absl::StrFormat("so it keeps its clock-sync (rtt) offset, +-%.3f ms",
                                        static_cast<double>(odd.uncertainty_ns()) /
                                            static_cast<double>(kNanosPerMilli))));
  // The breakdown lists it among the odd host's warnings, and only there.
  google::protobuf::Struct doc;
  ASSERT_THAT(
      google::protobuf::util::JsonStringToMessage(sink_.files["pod_step_breakdown.json"], &doc),
      IsOk());
  std::map<std::string, std::vector<std::string>> warnings;
  for (const auto& h : doc.fields().at("hosts").list_value().values()) {
    const auto& f = h.struct_value().fields();
    for (const auto& w : f.at("warnings").list_value().values()) {
      warnings[f.at("host").string_value()].push_back(w.string_value());
    }
  }
  EXPECT_THAT(warnings["odd"], ::testing::Contains(odd.warning()));
  for (const char* host : {"w0", "w1", "w2"}) {
    EXPECT_THAT(warnings[host], ::testing::Each(::testing::Not(HasSubstr("clock:")))) << host;
  }
}

TEST_F(CaptureEngineTest, AgentWhoseClockIsAbsurdIsRejectedWithoutOverflow) {
  Agent("liar:1", {.clock_offset_ns = 3LL * 365 * 24 * 3600 * kNanosPerSecond});
  Agent("ok:1", {});
  const SessionManifest m = Run(Plan({"liar:1", "ok:1"}));
  EXPECT_EQ(Host(m, "liar:1").error().step(), v1::FAILURE_STEP_CLOCK_SYNC);
  EXPECT_THAT(Host(m, "liar:1").error().message(), HasSubstr("more than a year"));
  EXPECT_EQ(Host(m, "ok:1").status(), v1::HOST_STATUS_OK);
}

TEST_F(CaptureEngineTest, CancelMidCaptureSavesWhatWasRecorded) {
  FakeAgent& a = Agent("a:1", {.name = "a"});
  const SessionManifest m = Run(Plan({"a:1"}, 10'000), {}, [&](CaptureEngine& engine) {
    // Interrupt 2 s into the 10 s window.
    ASSERT_TRUE(ex_.RunUntil([&] { return a.last_start_ns() != 0; },
                             clock_.MonoNs() + 60 * kNanosPerSecond));
    ex_.Advance(2 * kNanosPerSecond);
    engine.Cancel();
  });
  EXPECT_EQ(a.cancels(), 1);
  const HostResult& h = m.hosts(0);
  EXPECT_EQ(h.status(), v1::HOST_STATUS_INCOMPLETE);
  EXPECT_EQ(h.recording(), v1::RECORDING_TRUNCATED);
  EXPECT_EQ(h.truncated_by(), v1::TRUNCATED_BY_COORDINATOR);
  EXPECT_EQ(h.requested_duration_ns(), 10 * kNanosPerSecond);
  EXPECT_NEAR(static_cast<double>(h.recorded_duration_ns()), 2.0 * kNanosPerSecond,
              1.0 * kNanosPerMilli);
  EXPECT_EQ(m.status(), v1::SESSION_STATUS_PARTIAL);
  EXPECT_TRUE(h.cancelled());
  EXPECT_NEAR(static_cast<double>(h.agent_stop_ns() - h.agent_start_ns()), 2.0 * kNanosPerSecond,
              1.0 * kNanosPerMilli);
  // The partial trace is saved; the pod outputs are left to profctl analyze.
  EXPECT_EQ(h.xplane_file(), "a.xplane.pb");
  EXPECT_TRUE(sink_.files.count("a.xplane.pb"));
  ASSERT_EQ(m.errors_size(), 2);
  EXPECT_THAT(m.errors(0), HasSubstr("interrupted: capture was cancelled"));
  EXPECT_THAT(m.errors(1), HasSubstr("interrupted: not written: pod.perfetto-trace.gz"));
}

// Ctrl-C while traces are still arriving: the session ends within the grace, every trace saved
// by then is kept, no pod output is written (they cost more than the window: the pod trace of
// 16 big hosts took 28 s), and session.json says which were left out and the command that
// builds them from the saved traces.
TEST_F(CaptureEngineTest, AnInterruptWhileTracesArriveKeepsTheSavedOnesAndWritesNoPodOutput) {
  Agent("fast:1", {.name = "fast"}, Rank(0, 2));
  // Its trace arrives a KiB every 100 ms: tens of seconds. Nor does it answer the step signal
  // asked when the window closed, which an interrupted session does not wait for.
  Agent("slow:1",
        {.name = "slow",
         .chunk_interval_ns = 100 * kNanosPerMilli,
         .chunk_bytes = 1024,
         .hang_step_signal = true},
        Rank(1, 2));
  int64_t interrupted_mono = 0;
  const SessionManifest m = Run(Plan({"fast:1", "slow:1"}, 2000), {}, [&](CaptureEngine& engine) {
    ASSERT_TRUE(ex_.RunUntil([&] { return sink_.files.count("fast.xplane.pb") > 0; },
                             clock_.MonoNs() + 60 * kNanosPerSecond));
    interrupted_mono = clock_.MonoNs();
    engine.Cancel();
  });
  const int64_t grace = CaptureEngineOptions{}.interrupt_grace_ms * kNanosPerMilli;
  EXPECT_LE(clock_.MonoNs() - interrupted_mono, grace + 10 * kNanosPerMilli);

  const HostResult& fast = Host(m, "fast:1");
  EXPECT_EQ(fast.status(), v1::HOST_STATUS_OK);
  EXPECT_EQ(fast.xplane_file(), "fast.xplane.pb");
  const HostResult& slow = Host(m, "slow:1");
  EXPECT_EQ(slow.status(), v1::HOST_STATUS_FAILED);
  EXPECT_EQ(slow.error().step(), v1::FAILURE_STEP_INTERRUPTED);
  EXPECT_THAT(slow.error().message(),
              AllOf(HasSubstr("still sending its trace 1500 ms after the interrupt"),
                    HasSubstr("MiB received); not saved")));
  EXPECT_FALSE(sink_.files.count("slow.xplane.pb"));

  EXPECT_EQ(m.pod_trace_file(), "");
  EXPECT_FALSE(PathExists(sink_.dir + "/pod.perfetto-trace.gz"));
  EXPECT_EQ(m.breakdown_files_size(), 0);
  for (const char* file : {"pod_step_breakdown.json", "pod_step_breakdown.csv", "report.html"}) {
    EXPECT_FALSE(sink_.files.count(file)) << file;
  }
  EXPECT_THAT(m.errors(),
              Contains("interrupted: not written: pod.perfetto-trace.gz, pod_step_breakdown.json, "
                       "pod_step_breakdown.csv, report.html; every saved host's trace is kept; "
                       "build them with: profctl analyze /mem/session --pod-trace"));
  EXPECT_TRUE(sink_.files.count("session.json"));
}

// Without an interrupt the same slow trace is waited for and every output written.
TEST_F(CaptureEngineTest, ASlowTraceIsWaitedForWithoutAnInterrupt) {
  Agent("fast:1", {.name = "fast"}, Rank(0, 2));
  Agent("slow:1",
        {.name = "slow", .chunk_interval_ns = 100 * kNanosPerMilli, .chunk_bytes = 16 << 10},
        Rank(1, 2));
  const SessionManifest m = Run(Plan({"fast:1", "slow:1"}, 2000));
  EXPECT_EQ(m.status(), v1::SESSION_STATUS_OK);
  EXPECT_EQ(m.pod_trace_file(), "pod.perfetto-trace.gz");
  EXPECT_EQ(m.breakdown_files_size(), 3);
  EXPECT_THAT(m.errors(), IsEmpty());
}

// "ok" means the window asked for was recorded, start to end: a recording cut short by someone
// else, or one that ran long (a host frozen mid-window), is saved but INCOMPLETE and makes the
// session partial, saying what happened.
TEST_F(CaptureEngineTest, TruncatedAndOverlongRecordingsAreNotOk) {
  Agent("ok:1", {.name = "ok"}, Rank(0, 4));
  Agent("cut:1", {.cancelled_by_other_after_ns = 1800 * kNanosPerMilli, .name = "cut"}, Rank(1, 4));
  Agent("long:1", {.overrun_ns = 2 * kNanosPerSecond, .name = "long"}, Rank(2, 4));
  // Stopped 40 ms late (a loaded host): over the 5 ms tolerance, but the whole window is there.
  Agent("slow:1", {.overrun_ns = 40 * kNanosPerMilli, .name = "slow"}, Rank(3, 4));
  const SessionManifest m = Run(Plan({"ok:1", "cut:1", "long:1", "slow:1"}, 5000));
  EXPECT_EQ(m.status(), v1::SESSION_STATUS_PARTIAL);
  const HostResult& ok = Host(m, "ok:1");
  EXPECT_EQ(ok.status(), v1::HOST_STATUS_OK);
  EXPECT_EQ(ok.recording(), v1::RECORDING_COMPLETE);
  EXPECT_EQ(ok.recorded_duration_ns(), 5 * kNanosPerSecond);
  const HostResult& cut = Host(m, "cut:1");
  EXPECT_EQ(cut.status(), v1::HOST_STATUS_INCOMPLETE);
  EXPECT_EQ(cut.recording(), v1::RECORDING_TRUNCATED);
  EXPECT_EQ(cut.truncated_by(), v1::TRUNCATED_BY_AGENT);
  EXPECT_EQ(cut.recorded_duration_ns(), 1800 * kNanosPerMilli);
  EXPECT_THAT(cut.recording_detail(),
              HasSubstr("recorded 1800.000 of 5000.000 ms (cancelled at the agent"));
  EXPECT_TRUE(sink_.files.count("cut.xplane.pb"));  // what was recorded is kept
  const HostResult& lng = Host(m, "long:1");
  EXPECT_EQ(lng.status(), v1::HOST_STATUS_INCOMPLETE);
  EXPECT_EQ(lng.recording(), v1::RECORDING_OVERLONG);
  EXPECT_THAT(lng.recording_detail(), HasSubstr("recorded 7000.000 ms for 5000.000 asked"));
  const HostResult& slow = Host(m, "slow:1");
  EXPECT_EQ(slow.status(), v1::HOST_STATUS_OK) << slow.recording_detail();
  EXPECT_EQ(slow.recording(), v1::RECORDING_COMPLETE);
  EXPECT_EQ(slow.recorded_duration_ns(), 5040 * kNanosPerMilli);
  // All three are in the pod's breakdown: an incomplete trace is still a trace.
  EXPECT_TRUE(sink_.files.count("pod_step_breakdown.json"));
  // The session waited for the frozen host: collecting took its 2 s overrun after the window.
  EXPECT_DOUBLE_EQ(m.collect_ms(), 2000.0);
}

// session.json exists from the moment the session starts (RUNNING), so a coordinator killed
// mid-capture leaves a folder that says what it is; it is rewritten as hosts finish.
TEST_F(CaptureEngineTest, ManifestIsWrittenAtTheStartAndUpdatedWhileRunning) {
  Agent("a:1", {.name = "a"});
  Agent("slow:1", {.start_delay_ns = 3 * kNanosPerSecond, .name = "slow"});
  std::vector<v1::SessionManifest> seen;
  std::vector<std::string> seen_text;
  auto snapshot = [&] {
    v1::SessionManifest m;
    EXPECT_THAT(google::protobuf::util::JsonStringToMessage(sink_.files.at("session.json"), &m),
                IsOk());
    seen.push_back(m);
    seen_text.push_back(sink_.files.at("session.json"));
  };
  const SessionManifest final_m = Run(Plan({"a:1", "slow:1"}, 1000), {}, [&](CaptureEngine&) {
    ASSERT_TRUE(ex_.RunUntil([&] { return sink_.files.count("session.json") > 0; },
                             clock_.MonoNs() + kNanosPerSecond));
    snapshot();  // at the start
    // Host a is done about 1 s after the start; slow records until about 4 s.
    ASSERT_TRUE(ex_.RunUntil(
        [&] {
          v1::SessionManifest m;
          return google::protobuf::util::JsonStringToMessage(sink_.files.at("session.json"), &m)
                     .ok() &&
                 m.hosts_size() == 2 && m.hosts(0).status() != v1::HOST_STATUS_UNSPECIFIED;
        },
        clock_.MonoNs() + 10 * kNanosPerSecond));
    snapshot();  // after a finished, before slow
  });
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[0].status(), v1::SESSION_STATUS_RUNNING);
  EXPECT_EQ(seen[0].hosts_size(), 2);
  EXPECT_EQ(seen[0].coordinator_pid(), static_cast<int64_t>(getpid()));
  EXPECT_EQ(seen[1].status(), v1::SESSION_STATUS_RUNNING);
  EXPECT_EQ(seen[1].hosts(0).status(), v1::HOST_STATUS_OK);
  EXPECT_EQ(seen[1].hosts(1).status(), v1::HOST_STATUS_UNSPECIFIED);  // still recording
  EXPECT_NE(final_m.status(), v1::SESSION_STATUS_RUNNING);
  v1::SessionManifest on_disk;
  ASSERT_THAT(google::protobuf::util::JsonStringToMessage(sink_.files.at("session.json"), &on_disk),
              IsOk());
  EXPECT_EQ(on_disk.status(), final_m.status());
  // Snapshots while running leave fields at their default out (printing them all is 5 x
  // slower); the final manifest prints every field.
  EXPECT_THAT(seen_text[1], ::testing::Not(HasSubstr("\"dropped_events\"")));
  EXPECT_THAT(sink_.files.at("session.json"), HasSubstr("\"dropped_events\": \"0\""));
}

// After an interrupt, a host that never answers (hung, or stalled mid-transfer) costs only the
// grace period, not the transfer timeout: the session's outputs are written and it is named.
// The final session.json text is handed over as written (what `profctl capture --json` prints),
// and not when writing it failed: that error is then part of the manifest, not of the file.
TEST_F(CaptureEngineTest, TheWrittenSessionJsonIsHandedOverOnlyWhenItWasWritten) {
  Agent("a:1", {.name = "a"});
  std::optional<std::string> handed;
  manifest_written_ = [&](std::string json) { handed = std::move(json); };
  const SessionManifest m = Run(Plan({"a:1"}));
  ASSERT_TRUE(handed.has_value());
  EXPECT_EQ(*handed, sink_.files["session.json"]);
  EXPECT_EQ(*handed, ManifestJson(m));

  handed.reset();
  sink_.fail_name = "session.json";
  const SessionManifest failed = Run(Plan({"a:1"}));
  EXPECT_FALSE(handed.has_value());
  EXPECT_THAT(absl::StrJoin(failed.errors(), "\n"), HasSubstr("manifest: disk full"));
}

TEST_F(CaptureEngineTest, InterruptEndsWithinTheGraceWhateverTheHostsDo) {
  FakeAgent& a = Agent("a:1", {.name = "a"});
  Agent("hung:1", {.hang_capture = true, .name = "hung"});
  CaptureEngineOptions options;
  options.interrupt_grace_ms = 2000;
  int64_t interrupted_mono = 0;
  const SessionManifest m =
      Run(Plan({"a:1", "hung:1"}, 30'000), options, [&](CaptureEngine& engine) {
        ASSERT_TRUE(ex_.RunUntil([&] { return a.last_start_ns() != 0; },
                                 clock_.MonoNs() + 60 * kNanosPerSecond));
        ex_.Advance(kNanosPerSecond);
        interrupted_mono = clock_.MonoNs();
        engine.Cancel();
      });
  EXPECT_LE(clock_.MonoNs() - interrupted_mono, 2 * kNanosPerSecond + 100 * kNanosPerMilli);
  EXPECT_EQ(Host(m, "a:1").recording(), v1::RECORDING_TRUNCATED);
  const HostResult& hung = Host(m, "hung:1");
  EXPECT_EQ(hung.status(), v1::HOST_STATUS_FAILED);
  EXPECT_EQ(hung.error().step(), v1::FAILURE_STEP_INTERRUPTED);
  EXPECT_THAT(hung.error().message(), HasSubstr("hung: sent nothing back within 2000 ms"));
  EXPECT_TRUE(sink_.files.count("session.json"));
}

TEST_F(CaptureEngineTest, CancelBeforeCaptureAsksNoHostToRecord) {
  FakeAgent& a = Agent("a:1", {});
  const SessionManifest m = Run(Plan({"a:1"}), {}, [&](CaptureEngine& engine) { engine.Cancel(); });
  EXPECT_EQ(a.captures(), 0);
  EXPECT_EQ(m.hosts(0).error().step(), v1::FAILURE_STEP_INTERRUPTED);
  EXPECT_EQ(m.status(), v1::SESSION_STATUS_FAILED);
  EXPECT_TRUE(sink_.files.count("session.json"));
}

TEST_F(CaptureEngineTest, PrepareOnlyReportsIdentityAndClockAndCapturesNothing) {
  FakeAgent& a = Agent("a:1", {.clock_offset_ns = 5 * kNanosPerMilli,
                               .up_delay_ns = 1000,
                               .down_delay_ns = 1000,
                               .name = "alpha"});
  CapturePlan plan = Plan({"a:1", "gone:1"});
  plan.prepare_only = true;
  CaptureEngine engine({.executor = &ex_, .clients = &factory_}, {});
  std::optional<absl::StatusOr<SessionManifest>> result;
  engine.Start(plan, [&](absl::StatusOr<SessionManifest> m) { result = std::move(m); });
  ASSERT_TRUE(ex_.RunUntil([&] { return result.has_value(); }, clock_.MonoNs() + kNanosPerSecond));
  ASSERT_TRUE(result->ok());
  const SessionManifest& m = **result;
  EXPECT_EQ(a.captures(), 0);
  EXPECT_TRUE(sink_.files.empty());
  EXPECT_EQ(m.hosts(0).status(), v1::HOST_STATUS_OK);
  EXPECT_EQ(m.hosts(0).agent_name(), "alpha");
  EXPECT_EQ(m.hosts(0).clock().offset_ns(), 5 * kNanosPerMilli);
  EXPECT_EQ(m.hosts(0).clock().rtt_ns(), 2000);
  EXPECT_EQ(m.hosts(1).status(), v1::HOST_STATUS_FAILED);
}

TEST_F(CaptureEngineTest, ReportsProgressEverySecondWhileRecording) {
  Agent("a:1", {});
  Run(Plan({"a:1"}, 3000));
  int recording = 0;
  for (const std::string& l : progress_) recording += l.rfind("recording:", 0) == 0;
  EXPECT_GE(recording, 2);
  EXPECT_LE(recording, 4);
}

TEST(AssignHostStemsTest, NamesWinUnlessUnsafeOrTaken) {
  std::vector<WorkerAddress> w = {*ParseWorker("a:1"), *ParseWorker("b:2"), *ParseWorker("c:3"),
                                  *ParseWorker("d:4")};
  EXPECT_EQ(AssignHostStems(w, {"x", "x", "bad/name", ""}),
            (std::vector<std::string>{"x", "b_2", "c_3", "d_4"}));
}

// --- Retries, re-fetching and the deadline -----------------------------------------------------

using ::profctl::testkit::AttemptKinds;

TEST_F(CaptureEngineTest, ABusyAgentIsCapturedAgainWithCappedJitteredBackoff) {
  FakeAgent& a = Agent("busy:1", {.capture_failures = {absl::AlreadyExistsError("busy"),
                                                       absl::AlreadyExistsError("busy")}});
  CapturePlan plan = Plan({"busy:1"});
  CaptureEngineOptions options;
  options.retry_initial_backoff_ms = 10;
  options.retry_max_backoff_ms = 15;
  const SessionManifest m = Run(plan, options);
  const HostResult& h = Host(m, "busy:1");
  // Both retries fit in the lead before the window: it still started on time.
  EXPECT_EQ(h.status(), v1::HOST_STATUS_OK) << h.error().message();
  EXPECT_EQ(h.recording(), v1::RECORDING_COMPLETE);
  EXPECT_EQ(h.lateness_ns(), 0);
  EXPECT_EQ(h.attempts(), 3u);
  EXPECT_EQ(a.captures(), 3);
  EXPECT_EQ(a.fetches(), 0);  // "busy with another": our session never reached it
  EXPECT_THAT(AttemptKinds(h), ::testing::ElementsAre("capture:ALREADY_EXISTS",
                                                      "capture:ALREADY_EXISTS", "capture:OK"));
  // 10 ms, then 20 capped at 15, each jittered to 50..100%.
  EXPECT_GE(h.attempt_log(0).backoff_ms(), 5.0);
  EXPECT_LE(h.attempt_log(0).backoff_ms(), 10.0);
  EXPECT_GE(h.attempt_log(1).backoff_ms(), 7.5);
  EXPECT_LE(h.attempt_log(1).backoff_ms(), 15.0);
  EXPECT_EQ(h.attempt_log(2).backoff_ms(), 0.0);
  EXPECT_GT(h.attempt_log(2).start_ms(), h.attempt_log(0).start_ms());
}

TEST_F(CaptureEngineTest, ATransferThatBreaksIsFetchedAgainNotRecordedAgain) {
  FakeAgent& a = Agent("reset:1", {.transfer_failures = {absl::UnavailableError("reset")}});
  FakeAgent& b =
      Agent("flip:1", {.transfer_failures = {absl::DataLossError("checksum mismatch")}}, Rank(1));
  const SessionManifest m = Run(Plan({"reset:1", "flip:1"}));
  EXPECT_EQ(m.status(), v1::SESSION_STATUS_OK);
  for (const char* address : {"reset:1", "flip:1"}) {
    const HostResult& h = Host(m, address);
    EXPECT_EQ(h.status(), v1::HOST_STATUS_OK) << address << " " << h.error().message();
    EXPECT_EQ(h.recording(), v1::RECORDING_COMPLETE) << address;
    EXPECT_EQ(h.attempts(), 2u) << address;
    EXPECT_TRUE(sink_.files.count(h.xplane_file())) << address;
  }
  EXPECT_THAT(AttemptKinds(Host(m, "reset:1")),
              ::testing::ElementsAre("capture:UNAVAILABLE", "fetch:OK"));
  EXPECT_THAT(AttemptKinds(Host(m, "flip:1")),
              ::testing::ElementsAre("capture:DATA_LOSS", "fetch:OK"));
  // Recorded once each: the second attempt read what the agent kept.
  EXPECT_EQ(a.captures(), 1);
  EXPECT_EQ(a.fetches(), 1);
  EXPECT_EQ(b.captures(), 1);
  EXPECT_EQ(b.fetches(), 1);
  // The damaged bytes stay, under a name TensorBoard does not load.
  EXPECT_TRUE(sink_.files.count("flip_1.xplane.pb.invalid"));
}

TEST_F(CaptureEngineTest, AStreamThatBreaksMidWindowGetsTheWholeWindowFromTheAgent) {
  FakeAgent& a = Agent("cut:1", {.break_stream_after_start_ns = 100 * kNanosPerMilli});
  const SessionManifest m = Run(Plan({"cut:1"}, 500));
  const HostResult& h = Host(m, "cut:1");
  EXPECT_EQ(h.status(), v1::HOST_STATUS_OK) << h.error().message();
  EXPECT_EQ(h.recorded_duration_ns(), 500 * kNanosPerMilli);
  EXPECT_EQ(h.lateness_ns(), 0);
  EXPECT_THAT(AttemptKinds(h), ::testing::ElementsAre("capture:UNAVAILABLE", "fetch:OK"));
  EXPECT_EQ(a.captures(), 1);
}

TEST_F(CaptureEngineTest, ARestartedAgentIsRecordedAgainWhileTheWindowIsOpenAndFlaggedLate) {
  // The stream breaks 50 ms into the window because the agent restarted: it holds nothing.
  FakeAgent& a = Agent("restart:1", {.break_stream_after_start_ns = 50 * kNanosPerMilli,
                                     .restart_when_stream_breaks = true});
  const SessionManifest m = Run(Plan({"restart:1"}, 1000));
  const HostResult& h = Host(m, "restart:1");
  EXPECT_EQ(h.status(), v1::HOST_STATUS_INCOMPLETE) << h.error().message();
  EXPECT_EQ(h.recording(), v1::RECORDING_LATE);
  EXPECT_GT(h.lateness_ns(), 50 * kNanosPerMilli);
  EXPECT_EQ(h.recorded_duration_ns(), 1000 * kNanosPerMilli);
  EXPECT_THAT(AttemptKinds(h),
              ::testing::ElementsAre("capture:UNAVAILABLE", "fetch:NOT_FOUND", "capture:OK"));
  EXPECT_EQ(a.captures(), 2);

  // With --late=fail, recording again after the tolerance is pointless: it fails, saying why.
  FakeAgent& b = Agent("restart:2", {.break_stream_after_start_ns = 50 * kNanosPerMilli,
                                     .restart_when_stream_breaks = true});
  CapturePlan plan = Plan({"restart:2"}, 1000);
  plan.late = v1::LATE_POLICY_FAIL;
  const SessionManifest m2 = Run(plan);
  const HostResult& h2 = Host(m2, "restart:2");
  EXPECT_EQ(h2.status(), v1::HOST_STATUS_FAILED);
  EXPECT_THAT(AttemptKinds(h2), ::testing::ElementsAre("capture:UNAVAILABLE", "fetch:NOT_FOUND"));
  EXPECT_EQ(b.captures(), 1);
}

TEST_F(CaptureEngineTest, AnAgentKilledMidWindowAndBackSoonIsRecordedAgainInsideTheWindow) {
  // Killed 1.2 s into a 4 s window, back 0.5 s later: the retries must not all be spent while it
  // is down (100, 200, 400 ms of backoff end 0.7 s after the kill at the latest).
  for (uint64_t seed : {1, 2, 3, 4, 5, 6, 7, 8}) {
    SCOPED_TRACE(seed);
    const std::string address = absl::StrCat("killed:", seed);
    FakeAgent& a = Agent(address, {.break_stream_after_start_ns = 1200 * kNanosPerMilli,
                                   .restart_when_stream_breaks = true,
                                   .down_after_restart_ns = 500 * kNanosPerMilli});
    CapturePlan plan = Plan({address}, 4000);
    plan.retries = 3;
    CaptureEngineOptions options;
    options.retry_jitter_seed = seed;
    const SessionManifest m = Run(plan, options);
    const HostResult& h = Host(m, address);
    EXPECT_EQ(h.status(), v1::HOST_STATUS_INCOMPLETE) << h.error().message();
    EXPECT_EQ(h.recording(), v1::RECORDING_LATE);
    EXPECT_EQ(a.captures(), 2);
    // Recorded again once it was back, well inside the window.
    EXPECT_GT(h.lateness_ns(), 1700 * kNanosPerMilli);
    EXPECT_LT(h.lateness_ns(), 3000 * kNanosPerMilli);
    ASSERT_GE(h.attempt_log_size(), 3);
    EXPECT_EQ(AttemptKinds(h).back(), "capture:OK");
    EXPECT_EQ(AttemptKinds(h).front(), "capture:UNAVAILABLE");
  }
}

// Two captures of the same three agents, started together, listing them in opposite orders: B
// gets to z first (A's GetInfo to z was refused once and waits to try again) but finds x and y
// reserved by A. Each capture gets the whole pod or none of it: B gives up at once, naming the
// busy host and releasing z; A captures all three. A third capture then finds the pod free at
// once (no reservation left to lapse).
TEST_F(CaptureEngineTest, TwoCapturesOfOnePodInOppositeOrdersNeverSplitIt) {
  FakeAgent& x = Agent("x:1", {}, Rank(0));
  FakeAgent& y = Agent("y:1", {}, Rank(1));
  FakeAgent& z = Agent("z:1", {.get_info_failures = {absl::UnavailableError("refused")}}, Rank(2));
  CapturePlan plan_a = Plan({"x:1", "y:1", "z:1"}, 1000);
  plan_a.session = "sess-a";
  CapturePlan plan_b = Plan({"z:1", "y:1", "x:1"}, 1000);
  plan_b.session = "sess-b";
  MemorySink sink_b;
  const testkit::TempDir tmp_b;
  sink_b.dir = tmp_b.path();
  std::vector<std::string> progress_b;
  // Started in the same instant: A's ticket makes it the older.
  CaptureEngine a({.executor = &ex_, .clients = &factory_, .sink = &sink_},
                  {.reservation_ticket = 1});
  CaptureEngine b({.executor = &ex_,
                   .clients = &factory_,
                   .sink = &sink_b,
                   .progress = [&](const std::string& l) { progress_b.push_back(l); }},
                  {.reservation_ticket = 2});
  std::optional<absl::StatusOr<SessionManifest>> ra, rb;
  a.Start(plan_a, [&](absl::StatusOr<SessionManifest> m) { ra = std::move(m); });
  b.Start(plan_b, [&](absl::StatusOr<SessionManifest> m) { rb = std::move(m); });
  const int64_t t0 = clock_.MonoNs();
  ASSERT_TRUE(ex_.RunUntil([&] { return ra.has_value() && rb.has_value(); },
                           clock_.MonoNs() + 3600 * kNanosPerSecond));
  ASSERT_THAT(*ra, IsOk());
  ASSERT_THAT(*rb, IsOk());
  const SessionManifest& ma = **ra;
  const SessionManifest& mb = **rb;
  EXPECT_EQ(ma.status(), v1::SESSION_STATUS_OK);
  for (const HostResult& h : ma.hosts()) {
    EXPECT_EQ(h.status(), v1::HOST_STATUS_OK) << h.address() << " " << h.error().message();
  }
  EXPECT_EQ(mb.status(), v1::SESSION_STATUS_FAILED);
  for (const HostResult& h : mb.hosts()) {
    EXPECT_EQ(h.status(), v1::HOST_STATUS_FAILED) << h.address();
    EXPECT_EQ(h.error().code(), static_cast<int>(absl::StatusCode::kAlreadyExists)) << h.address();
    EXPECT_THAT(h.error().message(), HasSubstr("reserved for another capture")) << h.address();
  }
  ASSERT_GE(mb.errors_size(), 1);
  EXPECT_THAT(mb.errors(0), HasSubstr("the pod is busy"));
  // Nobody recorded for B; A recorded each agent once.
  EXPECT_EQ(x.captures(), 1);
  EXPECT_EQ(y.captures(), 1);
  EXPECT_EQ(z.captures(), 1);
  EXPECT_GE(z.reservations(), 2);  // B reserved z, then A did once B let it go
  // B gave up within its GetInfo round trips, before A's window even opened.
  EXPECT_LT(mb.finished_ns() - ma.start_at_ns(), 0);
  (void)t0;

  // Nothing is left reserved: a third capture gets the whole pod at once.
  CapturePlan plan_c = Plan({"y:1", "z:1", "x:1"}, 500);
  plan_c.session = "sess-c";
  const SessionManifest mc = Run(plan_c);
  EXPECT_EQ(mc.status(), v1::SESSION_STATUS_OK);
  EXPECT_LT(mc.prepare_ms(), 50.0);
}

// Two captures of one pod that each reserve a part of it before meeting the other's part (wait-die,
// docs/life-of-a-capture.md).
class ConcurrentCapturesTest : public CaptureEngineTest {
 protected:
  struct Result {
    SessionManifest manifest;
    std::vector<std::string> progress;
  };
  // Starts `a`, then (after `b_after_ns` on the fake clock) `b`, each with its own ticket and
  // session folder, and runs both to the end.
  std::pair<Result, Result> RunBoth(const CapturePlan& a, uint64_t ticket_a, const CapturePlan& b,
                                    uint64_t ticket_b, int64_t b_after_ns = 0) {
    MemorySink sink_b;
    const testkit::TempDir tmp_b;
    sink_b.dir = tmp_b.path();
    Result ra, rb;
    CaptureEngine ea({.executor = &ex_,
                      .clients = &factory_,
                      .sink = &sink_,
                      .progress = [&](const std::string& l) { ra.progress.push_back(l); }},
                     {.retry_jitter_seed = 7, .reservation_ticket = ticket_a});
    CaptureEngine eb({.executor = &ex_,
                      .clients = &factory_,
                      .sink = &sink_b,
                      .progress = [&](const std::string& l) { rb.progress.push_back(l); }},
                     {.retry_jitter_seed = 8, .reservation_ticket = ticket_b});
    std::optional<absl::StatusOr<SessionManifest>> ma, mb;
    ea.Start(a, [&](absl::StatusOr<SessionManifest> m) { ma = std::move(m); });
    if (b_after_ns > 0) ex_.Advance(b_after_ns);
    eb.Start(b, [&](absl::StatusOr<SessionManifest> m) { mb = std::move(m); });
    EXPECT_TRUE(ex_.RunUntil([&] { return ma.has_value() && mb.has_value(); },
                             clock_.MonoNs() + 3600 * kNanosPerSecond));
    if (ma.has_value() && ma->ok()) ra.manifest = **ma;
    if (mb.has_value() && mb->ok()) rb.manifest = **mb;
    return {ra, rb};
  }
  // N agents; the first half is reached by session `first` 5 ms before `second`, the other half
  // the other way round: each reserves half the pod before it meets the other's half.
  std::vector<std::string> SplitPod(int n, const std::string& first, const std::string& second) {
    std::vector<std::string> addresses;
    for (int i = 0; i < n; ++i) {
      addresses.push_back(absl::StrCat("p", i, ":1"));
      const std::string& late = i < n / 2 ? second : first;
      Agent(addresses.back(), {.reserve_delay_ns = {{late, 5 * kNanosPerMilli}}}, Rank(i, n));
    }
    return addresses;
  }
  CapturePlan Named(std::vector<std::string> addresses, const std::string& session) {
    CapturePlan plan = Plan(std::move(addresses), 1000);
    plan.session = session;
    return plan;
  }
  static void ExpectWhole(const SessionManifest& m) {
    EXPECT_EQ(m.status(), v1::SESSION_STATUS_OK);
    for (const HostResult& h : m.hosts()) {
      EXPECT_EQ(h.status(), v1::HOST_STATUS_OK) << h.address() << " " << h.error().message();
    }
  }
  static void ExpectGaveUpWhole(const SessionManifest& m, const std::string& why) {
    EXPECT_EQ(m.status(), v1::SESSION_STATUS_FAILED);
    ASSERT_GE(m.errors_size(), 1);
    EXPECT_THAT(m.errors(0), HasSubstr("the pod is busy"));
    EXPECT_THAT(m.errors(0), HasSubstr(why));
    for (const HostResult& h : m.hosts()) {
      EXPECT_EQ(h.status(), v1::HOST_STATUS_FAILED) << h.address();
      EXPECT_EQ(h.error().code(), static_cast<int>(absl::StatusCode::kAlreadyExists))
          << h.address() << " " << h.error().message();
      EXPECT_THAT(h.error().message(), HasSubstr(why)) << h.address();
    }
  }
  void ExpectEachAgentCapturedOnce() {
    for (const auto& a : agents_) EXPECT_EQ(a->captures(), 1);
  }
};

// Started in the same instant, 8 agents listed in opposite orders, each capture reserving half
// before it meets the other's half: without a tie-break both gave up (the 10x attack's FAIL). The
// older (here by ticket) waits for its half back, the younger gives up whole and releases its
// half; never a split pod, and a third capture finds it free at once.
TEST_F(ConcurrentCapturesTest, TwoCapturesThatEachReservedHalfThePodLeaveItWholeToTheOlder) {
  std::vector<std::string> pod = SplitPod(8, "sess-a", "sess-b");
  std::vector<std::string> reversed(pod.rbegin(), pod.rend());
  const auto [a, b] =
      RunBoth(Named(pod, "sess-a"), /*ticket_a=*/9, Named(reversed, "sess-b"), /*ticket_b=*/3);
  ExpectWhole(b.manifest);
  ExpectGaveUpWhole(a.manifest, "that capture is older and goes first");
  ExpectEachAgentCapturedOnce();
  // B waited for A's half, within a few round trips of A's release, far inside the budget.
  EXPECT_LT(b.manifest.prepare_ms(), 200.0);
  EXPECT_THAT(absl::StrJoin(b.progress, "\n"),
              HasSubstr("reserved for a younger capture; waiting for it to let go"));
  EXPECT_THAT(absl::StrJoin(b.progress, "\n"), HasSubstr("reserved after waiting"));
  // A gave up before B's window opened.
  EXPECT_LT(a.manifest.finished_ns(), b.manifest.start_at_ns());

  CapturePlan c = Named(pod, "sess-c");
  c.duration_ms = 300;
  const SessionManifest mc = Run(c);
  EXPECT_EQ(mc.status(), v1::SESSION_STATUS_OK);
  EXPECT_LT(mc.prepare_ms(), 50.0);
}

// The same split, but A started 1 ms before B (and draws the larger ticket): the start time
// orders them, so A, the older, gets the whole pod.
TEST_F(ConcurrentCapturesTest, TheOlderCaptureWinsWhenItMeetsTheYoungersReservation) {
  std::vector<std::string> pod = SplitPod(6, "sess-b", "sess-a");
  std::vector<std::string> reversed(pod.rbegin(), pod.rend());
  const auto [a, b] = RunBoth(Named(pod, "sess-a"), /*ticket_a=*/9, Named(reversed, "sess-b"),
                              /*ticket_b=*/3, /*b_after_ns=*/kNanosPerMilli);
  ExpectWhole(a.manifest);
  ExpectGaveUpWhole(b.manifest, "that capture is older and goes first");
  ExpectEachAgentCapturedOnce();
  EXPECT_THAT(absl::StrJoin(a.progress, "\n"), HasSubstr("waiting for it to let go"));
}

// A running capture is no reservation to wait for: a capture that finds one gives up whole at
// once, older or not, and its other reservation is released.
TEST_F(ConcurrentCapturesTest, ARunningCaptureStillMakesTheCaptureGiveUpWhole) {
  Agent("x:1", {}, Rank(0, 2));
  Agent("y:1", {}, Rank(1, 2));
  MemorySink sink_r;
  const testkit::TempDir tmp_r;
  sink_r.dir = tmp_r.path();
  CaptureEngine running({.executor = &ex_, .clients = &factory_, .sink = &sink_r},
                        {.reservation_ticket = 99});
  CapturePlan long_plan = Named({"x:1"}, "sess-running");
  long_plan.duration_ms = 5000;
  std::optional<absl::StatusOr<SessionManifest>> mr;
  running.Start(long_plan, [&](absl::StatusOr<SessionManifest> m) { mr = std::move(m); });
  // Until it records (its window has opened).
  ASSERT_TRUE(ex_.RunUntil([&] { return agents_[0]->last_start_ns() != 0; },
                           clock_.MonoNs() + 10 * kNanosPerSecond));
  const int64_t started = clock_.MonoNs();
  // Older than the running session's reservation ever was: a smaller ticket, same clock.
  CaptureEngine older({.executor = &ex_, .clients = &factory_, .sink = &sink_},
                      {.reservation_ticket = 1});
  std::optional<absl::StatusOr<SessionManifest>> mo;
  older.Start(Named({"y:1", "x:1"}, "sess-late"),
              [&](absl::StatusOr<SessionManifest> m) { mo = std::move(m); });
  ASSERT_TRUE(ex_.RunUntil([&] { return mo.has_value(); }, clock_.MonoNs() + kNanosPerSecond));
  ASSERT_THAT(*mo, IsOk());
  ExpectGaveUpWhole(**mo, "busy with another capture");
  EXPECT_LT(clock_.MonoNs() - started, 50 * kNanosPerMilli);  // at once: no wait
  // y was released: another session can reserve it now.
  EXPECT_THAT(agents_[1]->manager().Reserve("probe", std::string(16, 'k'), 1000), IsOk());
  ASSERT_TRUE(ex_.RunUntil([&] { return mr.has_value(); }, clock_.MonoNs() + 60 * kNanosPerSecond));
  ASSERT_THAT(*mr, IsOk());
  EXPECT_EQ((*mr)->status(), v1::SESSION_STATUS_OK);
}

// The refusal comes last, after every other host is ready: preparing ends with that host's
// failure, and still captures nothing.
TEST_F(ConcurrentCapturesTest, ABusyAnswerAfterEveryOtherHostIsReadyStillGivesUpWhole) {
  FakeAgent& x = Agent("x:1", {.up_delay_ns = 200 * kNanosPerMilli}, Rank(0));
  Agent("y:1", {}, Rank(1));
  Agent("z:1", {}, Rank(2));
  // Held by a session that sent no priority: nothing to wait for.
  ASSERT_THAT(x.manager().Reserve("sess-other", std::string(16, 'o'), 30'000), IsOk());
  const SessionManifest m = Run(Named({"y:1", "z:1", "x:1"}, "sess-a"));
  ExpectGaveUpWhole(m, "reserved for another capture");
  for (const auto& a : agents_) EXPECT_EQ(a->captures(), 0);
}

// A younger reservation that is never let go (its coordinator died) makes the older capture wait
// out its prepare budget, then give up whole saying how long it waited; its own reservations are
// released.
TEST_F(ConcurrentCapturesTest, AYoungerReservationThatOutlivesTheBudgetMakesTheOlderGiveUpWhole) {
  Agent("x:1", {}, Rank(0, 2));
  FakeAgent& y = Agent("y:1", {}, Rank(1, 2));
  const ReservationPriority younger{clock_.WallNs() + kNanosPerSecond, 5};
  ASSERT_THAT(y.manager().Reserve("sess-dead", std::string(16, 'd'), 30'000, younger), IsOk());
  CapturePlan plan = Named({"x:1", "y:1"}, "sess-a");
  plan.prepare_timeout_ms = 1000;
  const SessionManifest m = Run(plan, {.retry_jitter_seed = 3, .reservation_ticket = 1});
  ExpectGaveUpWhole(m, "waited");
  EXPECT_THAT(Host(m, "y:1").error().message(), HasSubstr("for that younger capture to let it go"));
  EXPECT_GE(m.prepare_ms(), 999.0);
  EXPECT_LE(m.prepare_ms(), 1001.0);
  EXPECT_EQ(agents_[0]->captures(), 0);
  EXPECT_THAT(agents_[0]->manager().Reserve("probe", std::string(16, 'k'), 1000), IsOk());
  // An unordered reservation (a coordinator that sends no priority) is never waited for.
  ASSERT_THAT(agents_[0]->manager().Reserve("probe", std::string(16, 'k'), 30'000), IsOk());
  const SessionManifest m2 = Run(Named({"x:1"}, "sess-b"), {.reservation_ticket = 1});
  ExpectGaveUpWhole(m2, "reserved for another capture");
  EXPECT_LT(m2.prepare_ms(), 50.0);
}

// Reservations are leases of 2 s the agent bounds; the session renews each one until its capture
// starts. Here x is reserved at once and y (400 ms each way) is ready only after 3.2 s: other
// sessions find x held all along, and each renewal is a GetInfo with the same reservation.
TEST_F(CaptureEngineTest, AReservationIsRenewedThroughAPrepareLongerThanOneLease) {
  FakeAgent& x = Agent("x:1", {}, Rank(0, 2));
  Agent("y:1", {.up_delay_ns = 400 * kNanosPerMilli, .down_delay_ns = 400 * kNanosPerMilli},
        Rank(1, 2));
  CapturePlan plan = Plan({"x:1", "y:1"});
  plan.prepare_timeout_ms = 6000;
  const std::string key(16, 'p');
  std::map<int64_t, absl::Status> probes;  // ms after the start -> another session's Reserve
  const int64_t t0 = clock_.MonoNs();
  const SessionManifest m = Run(plan, {}, [&](CaptureEngine&) {
    for (const int64_t ms : {1900, 2500, 3100}) {
      ex_.PostAt(t0 + ms * kNanosPerMilli, [&, ms] {
        probes[ms] = x.manager().Reserve("probe", key, 2000);
        if (probes[ms].ok()) x.manager().Cancel("probe", key).IgnoreError();
      });
    }
  });
  EXPECT_GT(m.prepare_ms(), 3000.0);
  for (const auto& [ms, status] : probes) {
    EXPECT_EQ(status.code(), absl::StatusCode::kAlreadyExists) << ms << " ms: " << status;
  }
  EXPECT_EQ(probes.size(), 3u);
  EXPECT_EQ(m.status(), v1::SESSION_STATUS_OK);
  // The grant, then a renewal every 600 ms until x's capture started (3.2 s of prepare and a
  // 1.6 s lead: twice y's round trip), the last ones crossing the Capture (they reserve nothing).
  const int expected = 1 + static_cast<int>((m.prepare_ms() + m.lead_ms()) / 600);
  EXPECT_GE(x.reservations(), expected - 1);
  EXPECT_LE(x.reservations(), expected + 1);
  // Nothing is left held: the capture took it.
  EXPECT_THAT(x.manager().Reserve("after", key, 2000), IsOk());
}

// The same pod, but x stops hearing from the coordinator at 1 s (a coordinator SIGKILLed, a cut
// link): the reservation its last renewal (at 600 ms) granted lapses one lease later, so another
// session gets x within about 2 s; nobody took it meanwhile, so x is still captured.
TEST_F(CaptureEngineTest, AReservationNobodyRenewsLapsesWithinOneLease) {
  FakeAgent& x = Agent("x:1", {}, Rank(0, 2));
  Agent("y:1", {.up_delay_ns = 400 * kNanosPerMilli, .down_delay_ns = 400 * kNanosPerMilli},
        Rank(1, 2));
  CapturePlan plan = Plan({"x:1", "y:1"});
  plan.prepare_timeout_ms = 6000;
  const std::string key(16, 'p');
  std::map<int64_t, absl::Status> probes;
  const int64_t t0 = clock_.MonoNs();
  const SessionManifest m = Run(plan, {}, [&](CaptureEngine&) {
    ex_.PostAt(t0 + 1000 * kNanosPerMilli, [&] { x.behavior().hang_get_info = true; });
    for (const int64_t ms : {2590, 2610}) {
      ex_.PostAt(t0 + ms * kNanosPerMilli, [&, ms] {
        probes[ms] = x.manager().Reserve("probe", key, 2000);
        if (probes[ms].ok()) x.manager().Cancel("probe", key).IgnoreError();
      });
    }
  });
  ASSERT_EQ(probes.size(), 2u);
  EXPECT_EQ(probes[2590].code(), absl::StatusCode::kAlreadyExists) << probes[2590];
  EXPECT_THAT(probes[2610], IsOk());
  EXPECT_THAT(absl::StrJoin(progress_, "\n"), HasSubstr("x:1: its reservation lapsed"));
  EXPECT_EQ(m.status(), v1::SESSION_STATUS_OK);
}

// A host that fails while it holds the session's reservation (its Capture refused before it took
// the agent's slot) has it released at once: another session reserves that agent while the
// others still record, instead of finding it held until the lease lapses.
TEST_F(CaptureEngineTest, AHostThatFailsHoldingItsReservationReleasesItAtOnce) {
  Agent("x:1", {}, Rank(0, 2));
  FakeAgent& y = Agent("y:1", {.capture_error = absl::InvalidArgumentError("bad")}, Rank(1, 2));
  const std::string key(16, 'p');
  std::optional<absl::Status> probe;
  const int64_t t0 = clock_.MonoNs();
  const SessionManifest m = Run(Plan({"x:1", "y:1"}, 5000), {}, [&](CaptureEngine&) {
    ex_.PostAt(t0 + 1000 * kNanosPerMilli,
               [&] { probe = y.manager().Reserve("probe", key, 2000); });
  });
  ASSERT_TRUE(probe.has_value());
  EXPECT_THAT(*probe, IsOk());  // 1 s in: released, not held to its lease's end
  EXPECT_EQ(Host(m, "y:1").status(), v1::HOST_STATUS_FAILED);
  EXPECT_EQ(Host(m, "x:1").status(), v1::HOST_STATUS_OK);
  EXPECT_EQ(y.cancels(), 1);
}

TEST_F(CaptureEngineTest, ErrorsTheAgentMeantAreNotRetried) {
  FakeAgent& a = Agent("auth:1", {.capture_failures = {absl::UnauthenticatedError("no token")}});
  FakeAgent& b = Agent("bad:1", {.capture_failures = {absl::InvalidArgumentError("bad")}}, Rank(1));
  FakeAgent& c =
      Agent("deny:1", {.capture_failures = {absl::PermissionDeniedError("wrong")}}, Rank(2));
  const SessionManifest m = Run(Plan({"auth:1", "bad:1", "deny:1"}));
  EXPECT_EQ(m.status(), v1::SESSION_STATUS_FAILED);
  for (const HostResult& h : m.hosts()) {
    EXPECT_EQ(h.status(), v1::HOST_STATUS_FAILED) << h.address();
    EXPECT_EQ(h.attempts(), 1u) << h.address();
    EXPECT_EQ(h.attempt_log_size(), 1) << h.address();
  }
  EXPECT_EQ(Host(m, "auth:1").error().code(), static_cast<int>(absl::StatusCode::kUnauthenticated));
  EXPECT_EQ(a.captures() + b.captures() + c.captures(), 3);
}

TEST_F(CaptureEngineTest, RetriesEndAndTheErrorSaysHowManyThereWere) {
  Agent("flaky:1", {.capture_failures = {absl::UnavailableError("a"), absl::UnavailableError("b"),
                                         absl::UnavailableError("c")},
                    .can_fetch = false});
  CapturePlan plan = Plan({"flaky:1"}, 5000);
  plan.retries = 2;
  const SessionManifest m = Run(plan);
  const HostResult& h = Host(m, "flaky:1");
  EXPECT_EQ(h.status(), v1::HOST_STATUS_FAILED);
  EXPECT_EQ(h.attempts(), 3u);
  EXPECT_THAT(h.error().message(), HasSubstr("after 3 attempts"));
  EXPECT_EQ(h.attempt_log(2).backoff_ms(), 0.0);
}

TEST_F(CaptureEngineTest, AnAgentDownAtTheStartJoinsWhenItComesBack) {
  Agent("up:1", {});
  FakeAgent& late = Agent(
      "down:1",
      {.get_info_failures = {absl::UnavailableError("refused"), absl::UnavailableError("refused")}},
      Rank(1));
  const SessionManifest m = Run(Plan({"up:1", "down:1"}, 2000));
  const HostResult& h = Host(m, "down:1");
  EXPECT_TRUE(h.status() == v1::HOST_STATUS_OK || h.status() == v1::HOST_STATUS_INCOMPLETE)
      << h.error().message();
  EXPECT_EQ(late.captures(), 1);
  EXPECT_THAT(AttemptKinds(h),
              ::testing::ElementsAre("get_info:UNAVAILABLE", "get_info:UNAVAILABLE", "capture:OK"));
}

TEST_F(CaptureEngineTest, TheDeadlineEndsAHungTransferAndKeepsTheRest) {
  Agent("ok:1", {});
  Agent("hung:1", {.hang_capture = true}, Rank(1));
  CapturePlan plan = Plan({"ok:1", "hung:1"}, 500);
  plan.deadline_ms = 3000;
  const int64_t t0 = clock_.MonoNs();
  const SessionManifest m = Run(plan);
  EXPECT_EQ(m.status(), v1::SESSION_STATUS_PARTIAL);
  EXPECT_EQ(Host(m, "ok:1").status(), v1::HOST_STATUS_OK);
  const HostResult& h = Host(m, "hung:1");
  EXPECT_EQ(h.status(), v1::HOST_STATUS_FAILED);
  EXPECT_EQ(h.error().code(), static_cast<int>(absl::StatusCode::kDeadlineExceeded));
  // Ended at the deadline, not after the default minute-long transfer allowance.
  EXPECT_LE(clock_.MonoNs() - t0, 3100 * kNanosPerMilli);
  EXPECT_GT(m.deadline_ns(), m.start_at_ns());
}

TEST_F(CaptureEngineTest, ADeadlineShorterThanTheWindowCapturesNothing) {
  FakeAgent& a = Agent("ok:1", {});
  CapturePlan plan = Plan({"ok:1"}, 2000);
  plan.deadline_ms = 2001;  // prepare + lead do not fit
  const SessionManifest m = Run(plan);
  EXPECT_EQ(m.status(), v1::SESSION_STATUS_FAILED);
  EXPECT_EQ(a.captures(), 0);
  EXPECT_THAT(Host(m, "ok:1").error().message(), HasSubstr("deadline"));
}

TEST_F(CaptureEngineTest, MinHostsKnownUnreachableBeforeTheWindowCapturesNothing) {
  FakeAgent& a = Agent("ok:1", {});
  CapturePlan plan = Plan({"ok:1", "gone:1", "gone:2"});
  plan.min_hosts = 2;
  plan.late = v1::LATE_POLICY_FAIL;
  const SessionManifest m = Run(plan);
  EXPECT_EQ(m.status(), v1::SESSION_STATUS_FAILED);
  EXPECT_EQ(a.captures(), 0);
  EXPECT_THAT(Host(m, "ok:1").error().message(), HasSubstr("required"));
  EXPECT_EQ(m.request().min_hosts(), 2u);
}

TEST_F(CaptureEngineTest, RequireAllFailsTheSessionButKeepsWhatWasSaved) {
  Agent("ok:1", {});
  Agent("corrupt:1", {.corrupt_trace = true}, Rank(1));
  CapturePlan plan = Plan({"ok:1", "corrupt:1"});
  plan.min_hosts = 2;
  const SessionManifest m = Run(plan);
  EXPECT_EQ(m.status(), v1::SESSION_STATUS_FAILED);
  EXPECT_EQ(Host(m, "ok:1").status(), v1::HOST_STATUS_OK);
  EXPECT_TRUE(sink_.files.count(Host(m, "ok:1").xplane_file()));
  ASSERT_GE(m.errors_size(), 1);
  EXPECT_THAT(m.errors(m.errors_size() - 1), HasSubstr("only 1 of 2 hosts saved"));
}

TEST_F(CaptureEngineTest, InterruptWhileWaitingToCaptureAgainEndsThatHostAtOnce) {
  Agent("busy:1", {.capture_failures = {absl::AlreadyExistsError("busy")}});
  CaptureEngineOptions options;
  options.retry_initial_backoff_ms = 1000;
  options.retry_max_backoff_ms = 1000;
  int64_t interrupted_at = 0;
  const SessionManifest m = Run(Plan({"busy:1"}, 5000), options, [&](CaptureEngine& engine) {
    ASSERT_TRUE(ex_.RunUntil(
        [&] {
          for (const std::string& l : progress_) {
            if (absl::StrContains(l, "capturing again")) return true;
          }
          return false;
        },
        clock_.MonoNs() + 10 * kNanosPerSecond));
    interrupted_at = clock_.MonoNs();
    engine.Cancel();
  });
  const HostResult& h = Host(m, "busy:1");
  EXPECT_EQ(h.status(), v1::HOST_STATUS_FAILED);
  EXPECT_EQ(h.error().step(), v1::FAILURE_STEP_INTERRUPTED);
  EXPECT_LT(clock_.MonoNs() - interrupted_at, 100 * kNanosPerMilli);
}

}  // namespace
}  // namespace profctl::coordinator
