#include "coordinator/capture_engine.h"

#include <map>
#include <mutex>
#include <thread>

#include "common/gzip.h"
#include "common/xspace.h"
#include "gmock/gmock.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "tests/fake_agent.h"
#include "tests/fake_clock.h"
#include "tests/memory_sink.h"

namespace profctl::coordinator {
namespace {

using ::profctl::testing::FakeAgent;
using ::profctl::testing::FakeAgentFactory;
using ::profctl::testing::FakeClock;
using ::profctl::testing::MemorySink;
using ::testing::HasSubstr;

agent::SyntheticJobConfig Rank(int r) {
  agent::SyntheticJobConfig c;
  c.rank = r;
  c.world = 3;
  c.step_ms = 20;
  return c;
}

class CaptureEngineTest : public ::testing::Test {
 protected:
  CapturePlan Plan(std::vector<std::string> addresses, int64_t duration_ms = 500) {
    CapturePlan plan{{}, duration_ms, "sess", "/logs"};
    for (const std::string& a : addresses) plan.workers.push_back(*ParseWorker(a));
    return plan;
  }
  profctl::v1::SessionManifest Run(const CapturePlan& plan) {
    CaptureEngine engine(
        {&clock_, &factory_, &sink_, [&](const std::string& l) { progress_.push_back(l); }}, {});
    absl::StatusOr<profctl::v1::SessionManifest> m = engine.Run(plan);
    EXPECT_TRUE(m.ok()) << m.status();
    return *m;
  }
  FakeClock clock_;
  FakeAgentFactory factory_;
  MemorySink sink_;
  std::vector<std::string> progress_;
};

TEST_F(CaptureEngineTest, CapturesEveryHostAtOneInstantAndWritesAllOutputs) {
  FakeAgent a(&clock_, {.clock_offset_ns = 0, .name = "w0"}, Rank(0));
  FakeAgent b(&clock_, {.clock_offset_ns = 25 * kNanosPerMilli, .name = "w1"}, Rank(1));
  FakeAgent c(&clock_, {.clock_offset_ns = -7 * kNanosPerMilli}, Rank(2));
  factory_.Add("h0:1", &a);
  factory_.Add("h1:1", &b);
  factory_.Add("h2:1", &c);
  const int64_t now = clock_.WallNs();
  profctl::v1::SessionManifest m = Run(Plan({"h0:1", "h1:1", "h2:1"}));

  EXPECT_EQ(m.status(), "ok");
  EXPECT_EQ(m.session_dir(), "/mem/session");
  EXPECT_EQ(m.start_at_ns(), now + 200 * kNanosPerMilli);  // min lead: clocks do not move here
  ASSERT_EQ(m.hosts_size(), 3);
  EXPECT_EQ(m.hosts(0).host(), "w0");
  EXPECT_EQ(m.hosts(1).host(), "w1");
  EXPECT_EQ(m.hosts(2).host(), "h2_1");  // no agent name: the address
  const int64_t offsets[] = {0, 25 * kNanosPerMilli, -7 * kNanosPerMilli};
  for (int i = 0; i < 3; ++i) {
    const auto& h = m.hosts(i);
    EXPECT_EQ(h.status(), "ok") << h.error();
    EXPECT_EQ(h.clock().offset_ns(), offsets[i]);
    EXPECT_EQ(h.clock().samples(), 5u);
    // Each agent was asked to start at the common instant translated to its clock...
    EXPECT_EQ(h.agent_start_ns(), m.start_at_ns() + offsets[i]);
    // ... which aligns back to the same instant on the coordinator's clock.
    EXPECT_EQ(h.aligned_start_ns(), m.start_at_ns());
    EXPECT_EQ(h.aligned_stop_ns(), m.start_at_ns() + 500 * kNanosPerMilli);
    EXPECT_GT(h.steps(), 15u);
    ASSERT_TRUE(sink_.files.contains(h.xplane_file()));
    tensorflow::profiler::XSpace space;
    ASSERT_TRUE(space.ParseFromString(sink_.files[h.xplane_file()]));
    EXPECT_EQ(h.bytes(), sink_.files[h.xplane_file()].size());
    EXPECT_EQ(h.events(), static_cast<uint64_t>(xspace::CountEvents(space)));
  }
  EXPECT_EQ(m.pod_trace_file(), "pod.trace.json.gz");
  ASSERT_TRUE(sink_.files.contains("session.json"));
  profctl::v1::SessionManifest reread;
  ASSERT_TRUE(
      google::protobuf::util::JsonStringToMessage(sink_.files["session.json"], &reread).ok());
  EXPECT_EQ(reread.status(), "ok");
  EXPECT_EQ(reread.hosts(1).clock().offset_ns(), 25 * kNanosPerMilli);
  EXPECT_THAT(progress_, ::testing::Contains(HasSubstr("window starts in 200 ms")));
}

TEST_F(CaptureEngineTest, UnreachableAndFailingHostsDoNotCostTheOthers) {
  FakeAgent ok(&clock_, {.name = "good"}, Rank(0));
  FakeAgent busy(&clock_, {.capture_error = absl::AlreadyExistsError("agent busy"), .name = "busy"},
                 Rank(1));
  FakeAgent no_clock(&clock_, {.sync_error = absl::DeadlineExceededError("slow"), .name = "nc"},
                     Rank(2));
  factory_.Add("good:1", &ok);
  factory_.Add("busy:1", &busy);
  factory_.Add("nc:1", &no_clock);
  profctl::v1::SessionManifest m = Run(Plan({"good:1", "down:1", "busy:1", "nc:1"}));
  EXPECT_EQ(m.status(), "partial");
  EXPECT_EQ(m.hosts(0).status(), "ok");
  EXPECT_EQ(m.hosts(1).status(), "failed");
  EXPECT_THAT(m.hosts(1).error(), HasSubstr("prepare: UNAVAILABLE: failed to connect to down:1"));
  EXPECT_EQ(m.hosts(1).xplane_file(), "");
  EXPECT_THAT(m.hosts(2).error(), HasSubstr("capture: ALREADY_EXISTS: agent busy"));
  EXPECT_THAT(m.hosts(3).error(), HasSubstr("clock sync: DEADLINE_EXCEEDED"));
  EXPECT_EQ(no_clock.captures(), 0);  // never asked to capture without an offset
  EXPECT_TRUE(sink_.files.contains("good.xplane.pb"));
  EXPECT_TRUE(sink_.files.contains("pod.trace.json.gz"));
  EXPECT_TRUE(sink_.files.contains("session.json"));
}

TEST_F(CaptureEngineTest, CorruptTraceIsKeptAsInvalidAndReported) {
  FakeAgent bad(&clock_, {.corrupt_trace = true, .name = "bad"}, Rank(0));
  factory_.Add("bad:1", &bad);
  profctl::v1::SessionManifest m = Run(Plan({"bad:1"}));
  EXPECT_EQ(m.status(), "failed");
  EXPECT_THAT(m.hosts(0).error(), HasSubstr("agent sent an invalid trace"));
  EXPECT_THAT(m.hosts(0).error(), HasSubstr("bad.xplane.pb.invalid"));
  EXPECT_FALSE(sink_.files.contains("bad.xplane.pb"));
  EXPECT_EQ(sink_.files["bad.xplane.pb.invalid"].size(), 11u);
  EXPECT_FALSE(sink_.files.contains("pod.trace.json.gz"));  // nothing to show
  EXPECT_TRUE(sink_.files.contains("session.json"));        // but the story is written
}

TEST_F(CaptureEngineTest, WriteFailureIsPerHost) {
  FakeAgent a(&clock_, {.name = "a"}, Rank(0));
  FakeAgent b(&clock_, {.name = "b"}, Rank(1));
  factory_.Add("a:1", &a);
  factory_.Add("b:1", &b);
  sink_.fail_name = "b.xplane.pb";
  profctl::v1::SessionManifest m = Run(Plan({"a:1", "b:1"}));
  EXPECT_EQ(m.status(), "partial");
  EXPECT_EQ(m.hosts(0).status(), "ok");
  EXPECT_THAT(m.hosts(1).error(), HasSubstr("write: RESOURCE_EXHAUSTED: disk full"));
}

TEST_F(CaptureEngineTest, AgentDurationLimitIsCheckedBeforeCapturing) {
  FakeAgent a(&clock_, {.name = "a"}, Rank(0));
  factory_.Add("a:1", &a);
  profctl::v1::SessionManifest m = Run(Plan({"a:1"}, /*duration_ms=*/120'000));
  EXPECT_THAT(m.hosts(0).error(), HasSubstr("at most 60000 ms, asked for 120000"));
  EXPECT_EQ(a.captures(), 0);
}

TEST_F(CaptureEngineTest, PodTraceIsAlignedChromeJson) {
  FakeAgent a(&clock_, {.clock_offset_ns = 0, .name = "a"}, Rank(0));
  FakeAgent b(&clock_, {.clock_offset_ns = 33 * kNanosPerMilli, .name = "b"}, Rank(1));
  factory_.Add("a:1", &a);
  factory_.Add("b:1", &b);
  profctl::v1::SessionManifest m = Run(Plan({"a:1", "b:1"}, 300));
  ASSERT_EQ(m.status(), "ok");
  absl::StatusOr<std::string> json = GzipDecompress(sink_.files["pod.trace.json.gz"]);
  ASSERT_TRUE(json.ok());
  google::protobuf::Struct doc;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(*json, &doc).ok());
  const auto& events = doc.fields().at("traceEvents").list_value().values();
  std::map<double, std::string> process_names;
  // All-reduce ends per process: after alignment both hosts' ends coincide exactly.
  std::map<std::string, std::vector<double>> nccl_ends;
  int64_t complete_events = 0;
  for (const auto& v : events) {
    const auto& f = v.struct_value().fields();
    if (f.at("ph").string_value() == "M" && f.at("name").string_value() == "process_name") {
      process_names[f.at("pid").number_value()] =
          f.at("args").struct_value().fields().at("name").string_value();
    }
    if (f.at("ph").string_value() != "X") continue;
    ++complete_events;
    EXPECT_GE(f.at("ts").number_value(), 0.0);  // nothing before the common start
    if (f.at("name").string_value().rfind("ncclDevKernel", 0) == 0) {
      nccl_ends[process_names[f.at("pid").number_value()]].push_back(f.at("ts").number_value() +
                                                                     f.at("dur").number_value());
    }
  }
  EXPECT_EQ(complete_events, static_cast<int64_t>(m.hosts(0).events() + m.hosts(1).events()));
  EXPECT_THAT(process_names, ::testing::Contains(::testing::Pair(::testing::_, "b /device:GPU:0")));
  ASSERT_FALSE(nccl_ends["a /device:GPU:0"].empty());
  // Exact to the nanosecond; the tolerance only absorbs adding two decimals in floating point.
  EXPECT_THAT(nccl_ends["a /device:GPU:0"],
              ::testing::Pointwise(::testing::DoubleNear(1e-4), nccl_ends["b /device:GPU:0"]));
}

TEST_F(CaptureEngineTest, ReportsProgressEverySecondWhileWaiting) {
  FakeAgent slow(&clock_, {.capture_wait_ns = 10 * kNanosPerSecond, .name = "slow"}, Rank(0));
  factory_.Add("slow:1", &slow);
  std::thread runner([&] { Run(Plan({"slow:1"}, /*duration_ms=*/2000)); });
  for (int s = 1; s <= 3; ++s) {
    clock_.AwaitWaiters(2);  // the agent's transfer and the engine's next tick
    clock_.Advance(kNanosPerSecond);
  }
  clock_.AwaitWaiters(2);
  clock_.Advance(7 * kNanosPerSecond);
  runner.join();
  // The window opens 200 ms after the plan: ticks at 1, 2 and 3 s.
  EXPECT_THAT(progress_, ::testing::IsSupersetOf({"recording: 1 of 2 s", "recording: 2 of 2 s",
                                                  "waiting for 1 host(s) to send their traces"}));
  EXPECT_THAT(progress_, ::testing::Contains(HasSubstr("slow: saved slow.xplane.pb")));
}

TEST_F(CaptureEngineTest, CancelMidCaptureSavesWhatWasRecorded) {
  FakeAgent slow(&clock_, {.capture_wait_ns = 10 * kNanosPerSecond, .name = "slow"}, Rank(0));
  factory_.Add("slow:1", &slow);
  CaptureEngine engine({&clock_, &factory_, &sink_, nullptr}, {});
  absl::StatusOr<profctl::v1::SessionManifest> m;
  std::thread runner([&] { m = engine.Run(Plan({"slow:1"}, /*duration_ms=*/5000)); });
  clock_.AwaitWaiters(2);  // the agent is recording, the engine is ticking
  clock_.Advance(1500 * kNanosPerMilli);
  clock_.AwaitWaiters(2);
  engine.Cancel();
  runner.join();
  ASSERT_TRUE(m.ok());
  const auto& h = m->hosts(0);
  EXPECT_EQ(h.status(), "ok");
  EXPECT_TRUE(h.cancelled());
  EXPECT_EQ(h.agent_stop_ns() - h.agent_start_ns(), 1500 * kNanosPerMilli);
  EXPECT_TRUE(sink_.files.contains("slow.xplane.pb"));
  EXPECT_THAT(m->errors(), ::testing::ElementsAre(HasSubstr("interrupted")));
  EXPECT_TRUE(sink_.files.contains("session.json"));
}

TEST_F(CaptureEngineTest, CancelBeforeCaptureAsksNoHostToRecord) {
  FakeAgent a(&clock_, {.name = "a"}, Rank(0));
  factory_.Add("a:1", &a);
  CaptureEngine engine({&clock_, &factory_, &sink_, nullptr}, {});
  engine.Cancel();
  absl::StatusOr<profctl::v1::SessionManifest> m = engine.Run(Plan({"a:1"}));
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->status(), "failed");
  EXPECT_EQ(m->hosts(0).error(), "interrupted before capture");
  EXPECT_EQ(a.captures(), 0);
  EXPECT_EQ(factory_.connects(), 0);
}

TEST(AssignHostStemsTest, NamesWinUnlessUnsafeOrTaken) {
  std::vector<WorkerAddress> w;
  for (const char* a : {"h:1", "h:2", "h:3", "h:4"}) w.push_back(*ParseWorker(a));
  EXPECT_THAT(AssignHostStems(w, {"gpu0", "gpu0", "../evil", ""}),
              ::testing::ElementsAre("gpu0", "h_2", "h_3", "h_4"));
  // A name equal to another host's address stem pushes that one to a suffix.
  EXPECT_THAT(AssignHostStems(w, {"h_2", "", "", ""}),
              ::testing::ElementsAre("h_2", "h_2-2", "h_3", "h_4"));
}

}  // namespace
}  // namespace profctl::coordinator
