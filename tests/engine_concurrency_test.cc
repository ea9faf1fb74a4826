// Two captures on one executor, as `profctl serve` runs them: one session's finish phase (pod
// outputs, session.json: disk and CPU bound) must never stall another session's capture. Real
// agents (in-process, gRPC over loopback), a real executor and pools; session A's breakdown file
// write is held until session B has finished, which B can only do while A is finishing.
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "agent/service/agent_server.h"
#include "common/clock.h"
#include "common/executor.h"
#include "coordinator/clients/grpc_agent_client.h"
#include "coordinator/engine/capture_engine.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "report/breakdown_writers.h"
#include "tests/memory_sink.h"
#include "tests/status_matchers.h"

namespace profctl {
namespace {

using ::profctl::testkit::IsOk;

class EngineConcurrencyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    agent::AgentOptions o;
    o.port = 0;
    o.bind = "127.0.0.1";
    o.endpoints = 2;
    o.synthetic = "step_ms=20";
    absl::StatusOr<std::unique_ptr<agent::AgentServer>> server = agent::AgentServer::Start(
        o, {.clock = &clock_, .executor = &agent_executor_, .hostname = "machine"});
    ASSERT_THAT(server, IsOk());
    agents_ = *std::move(server);
  }

  coordinator::CapturePlan Plan(int endpoint, int64_t duration_ms, const std::string& session) {
    coordinator::CapturePlan plan;
    plan.workers = *coordinator::ParseWorkerList(
        absl::StrCat("127.0.0.1:", agents_->ports()[static_cast<size_t>(endpoint)]));
    plan.duration_ms = duration_ms;
    plan.session = session;
    plan.tolerance_ms = 1000;  // a loaded CI machine: punctuality is not what is under test
    return plan;
  }

  RealClock clock_;
  AsioExecutor agent_executor_{&clock_};
  std::unique_ptr<agent::AgentServer> agents_;
  // The daemon's: one executor (one sequence) for every session, its pools and its clients.
  AsioExecutor executor_{&clock_};
  ThreadWorkPool pool_{/*threads=*/2};
  ThreadWorkPool finisher_{/*threads=*/2};
  coordinator::GrpcAgentClientFactory clients_{{.clock = &clock_}};

  coordinator::CaptureEngine::Dependencies Deps(coordinator::TraceSink* sink) {
    return {.executor = &executor_,
            .pool = &pool_,
            .finisher = &finisher_,
            .clients = &clients_,
            .sink = sink};
  }
};

TEST_F(EngineConcurrencyTest, OneSessionsFinishNeverStallsAnotherSessionOnTheSameExecutor) {
  absl::Notification a_finishing, b_done, a_done;
  bool b_finished_while_a_was_finishing = false;
  testkit::MemorySink sink_a, sink_b;
  sink_a.on_write = [&](const std::string& name) {
    // Written only by the finish phase (session.json is also flushed while capturing).
    if (name != report::kBreakdownJsonFile) return;
    a_finishing.Notify();
    // Held until B is done: B's window ends, its traces arrive and it finishes on the executor
    // meanwhile, or not at all if A's finish held the executor (then this gives up at 30 s).
    b_finished_while_a_was_finishing = b_done.WaitForNotificationWithTimeout(absl::Seconds(30));
  };
  coordinator::CaptureEngine a(Deps(&sink_a), {});
  coordinator::CaptureEngine b(Deps(&sink_b), {});
  absl::StatusOr<v1::SessionManifest> ma, mb;
  a.Start(Plan(0, 100, "a"), [&](absl::StatusOr<v1::SessionManifest> m) {
    ma = std::move(m);
    a_done.Notify();
  });
  b.Start(Plan(1, 1500, "b"), [&](absl::StatusOr<v1::SessionManifest> m) {
    mb = std::move(m);
    b_done.Notify();
  });
  ASSERT_TRUE(a_finishing.WaitForNotificationWithTimeout(absl::Seconds(60)));
  ASSERT_TRUE(b_done.WaitForNotificationWithTimeout(absl::Seconds(60)));
  ASSERT_TRUE(a_done.WaitForNotificationWithTimeout(absl::Seconds(60)));
  EXPECT_TRUE(b_finished_while_a_was_finishing);
  ASSERT_THAT(ma, IsOk());
  ASSERT_THAT(mb, IsOk());
  EXPECT_EQ(ma->status(), v1::SESSION_STATUS_OK) << ma->DebugString();
  EXPECT_EQ(mb->status(), v1::SESSION_STATUS_OK) << mb->DebugString();
  // Each finish wrote its own session's files.
  for (const testkit::MemorySink* sink : {&sink_a, &sink_b}) {
    EXPECT_TRUE(sink->files.contains(coordinator::kManifestFileName));
    EXPECT_TRUE(sink->files.contains(std::string(report::kBreakdownJsonFile)));
  }
}

// session.json's running snapshots are printed and written on the pool: a snapshot write that
// hangs (a slow disk) stalls no session on the executor, and never lands over the final file.
TEST_F(EngineConcurrencyTest, ARunningSnapshotWriteThatHangsStallsNothingAndNeverLandsLast) {
  absl::Notification b_done, a_done;
  bool b_finished_while_a_snapshot_hung = false;
  bool held = false;  // only A's first snapshot (written at Begin) is held
  testkit::MemorySink sink_a, sink_b;
  sink_a.on_write = [&](const std::string& name) {
    if (name != coordinator::kManifestFileName || held) return;
    held = true;
    b_finished_while_a_snapshot_hung = b_done.WaitForNotificationWithTimeout(absl::Seconds(30));
  };
  coordinator::CaptureEngine a(Deps(&sink_a), {});
  coordinator::CaptureEngine b(Deps(&sink_b), {});
  absl::StatusOr<v1::SessionManifest> ma, mb;
  a.Start(Plan(0, 100, "a"), [&](absl::StatusOr<v1::SessionManifest> m) {
    ma = std::move(m);
    a_done.Notify();
  });
  b.Start(Plan(1, 300, "b"), [&](absl::StatusOr<v1::SessionManifest> m) {
    mb = std::move(m);
    b_done.Notify();
  });
  ASSERT_TRUE(b_done.WaitForNotificationWithTimeout(absl::Seconds(60)));
  ASSERT_TRUE(a_done.WaitForNotificationWithTimeout(absl::Seconds(60)));
  EXPECT_TRUE(b_finished_while_a_snapshot_hung);
  ASSERT_THAT(ma, IsOk());
  ASSERT_THAT(mb, IsOk());
  EXPECT_EQ(ma->status(), v1::SESSION_STATUS_OK) << ma->DebugString();
  EXPECT_EQ(mb->status(), v1::SESSION_STATUS_OK) << mb->DebugString();
  // The last session.json written is the final one, not the snapshot that hung.
  const std::string& final_json = sink_a.files.at(coordinator::kManifestFileName);
  EXPECT_THAT(final_json, ::testing::HasSubstr("SESSION_STATUS_OK"));
  EXPECT_THAT(final_json, ::testing::Not(::testing::HasSubstr("SESSION_STATUS_RUNNING")));
}

// Wait-die over real agents (gRPC on loopback, one agent process with 8 endpoints): two captures
// started together on the daemon's executor, listing the pod in opposite orders, three times.
// Each time exactly one gets the whole pod and the other none of it, never a split pod.
TEST_F(EngineConcurrencyTest, TwoCapturesOfOnePodStartedTogetherLeaveItWholeToOne) {
  agent::AgentOptions o;
  o.port = 0;
  o.bind = "127.0.0.1";
  o.endpoints = 8;
  o.synthetic = "step_ms=20";
  absl::StatusOr<std::unique_ptr<agent::AgentServer>> pod = agent::AgentServer::Start(
      o, {.clock = &clock_, .executor = &agent_executor_, .hostname = "machine"});
  ASSERT_THAT(pod, IsOk());
  std::vector<std::string> addresses;
  for (int port : (*pod)->ports()) addresses.push_back(absl::StrCat("127.0.0.1:", port));
  std::vector<std::string> reversed(addresses.rbegin(), addresses.rend());
  for (int round = 0; round < 3; ++round) {
    coordinator::CapturePlan pa, pb;
    pa.workers = *coordinator::ParseWorkerList(absl::StrJoin(addresses, ","));
    pb.workers = *coordinator::ParseWorkerList(absl::StrJoin(reversed, ","));
    pa.duration_ms = pb.duration_ms = 300;
    pa.tolerance_ms = pb.tolerance_ms = 1000;
    pa.session = absl::StrCat("pod-a", round);
    pb.session = absl::StrCat("pod-b", round);
    testkit::MemorySink sink_a, sink_b;
    coordinator::CaptureEngine a(Deps(&sink_a), {});
    coordinator::CaptureEngine b(Deps(&sink_b), {});
    absl::Notification a_done, b_done;
    absl::StatusOr<v1::SessionManifest> ma, mb;
    a.Start(pa, [&](absl::StatusOr<v1::SessionManifest> m) {
      ma = std::move(m);
      a_done.Notify();
    });
    b.Start(pb, [&](absl::StatusOr<v1::SessionManifest> m) {
      mb = std::move(m);
      b_done.Notify();
    });
    ASSERT_TRUE(a_done.WaitForNotificationWithTimeout(absl::Seconds(60)));
    ASSERT_TRUE(b_done.WaitForNotificationWithTimeout(absl::Seconds(60)));
    ASSERT_THAT(ma, IsOk());
    ASSERT_THAT(mb, IsOk());
    int whole = 0;
    for (const v1::SessionManifest* m : {&*ma, &*mb}) {
      int ok = 0;
      int busy = 0;
      for (const v1::HostResult& h : m->hosts()) {
        ok += h.status() == v1::HOST_STATUS_OK;
        busy += h.error().code() == static_cast<int>(absl::StatusCode::kAlreadyExists);
      }
      EXPECT_TRUE(ok == 8 || busy == 8) << "round " << round << ": split pod\n" << m->DebugString();
      whole += ok == 8;
    }
    EXPECT_EQ(whole, 1) << "round " << round << "\n" << ma->DebugString() << mb->DebugString();
  }
}

}  // namespace
}  // namespace profctl
