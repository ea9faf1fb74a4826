#include "agent/collectors/cupti/inject_server.h"

#include <gtest/gtest.h>
#include <poll.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "agent/collectors/cupti/inject_test_util.h"
#include "inject/collective_launches.h"
#include "inject/inject_client.h"
#include "inject/socket_protocol.h"
#include "tests/fake_clock.h"
#include "tests/status_matchers.h"

using ::profctl::testkit::IsOk;

namespace profctl::agent::cupti {
namespace {

using inject::MessageType;
using inject::StatusCode;
using testing_util::FakeProcess;
using testing_util::TempDir;

class InjectServerTest : public ::testing::Test {
 protected:
  void StartServer(InjectServerOptions options = {}) {
    options.socket_path = dir_.path() + "/run/agent.sock";
    // Every fake process here is this test's own pid: the per-process cap is lifted unless a
    // test sets it.
    if (options.max_connections_per_peer == InjectServerOptions{}.max_connections_per_peer) {
      options.max_connections_per_peer = 1000;
    }
    absl::StatusOr<std::unique_ptr<InjectServer>> s = InjectServer::Start(options);
    ASSERT_THAT(s, IsOk());
    server_ = *std::move(s);
  }
  std::unique_ptr<FakeProcess> Connect(uint32_t pid, int rank = -1) {
    auto p = std::make_unique<FakeProcess>(server_->socket_path());
    EXPECT_TRUE(p->connected());
    p->Register(pid, rank);
    return p;
  }

  TempDir dir_;
  // Before server_: the server's thread reads the clock until server_ is destroyed.
  testkit::FakeClock clock_;
  std::unique_ptr<InjectServer> server_;
};

TEST_F(InjectServerTest, CreatesAPrivateFolderAndSocket) {
  StartServer();
  struct stat st {};
  ASSERT_EQ(stat((dir_.path() + "/run").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  ASSERT_EQ(stat(server_->socket_path().c_str(), &st), 0);
  EXPECT_TRUE(S_ISSOCK(st.st_mode));
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  const std::string path = server_->socket_path();
  server_.reset();
  EXPECT_NE(stat(path.c_str(), &st), 0) << "the socket is removed at shutdown";
}

TEST_F(InjectServerTest, AWiderModeOpensTheSocketAndItsFolder) {
  InjectServerOptions options;
  options.socket_mode = 0660;
  StartServer(options);
  struct stat st {};
  ASSERT_EQ(stat((dir_.path() + "/run").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0710u);
  ASSERT_EQ(stat(server_->socket_path().c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0660u);
}

TEST(ParseSocketModeTest, OctalWithOwnerReadWrite) {
  EXPECT_EQ(*ParseSocketMode("600"), 0600u);
  EXPECT_EQ(*ParseSocketMode("0660"), 0660u);
  EXPECT_EQ(*ParseSocketMode("0666"), 0666u);
  for (const char* bad : {"", "0400", "0700x", "888", "1600", "77777", "-600"}) {
    EXPECT_EQ(ParseSocketMode(bad).status().code(), absl::StatusCode::kInvalidArgument) << bad;
  }
}

TEST_F(InjectServerTest, ReplacesAStaleSocketButNotALiveOne) {
  const std::string path = dir_.path() + "/run/agent.sock";
  mkdir((dir_.path() + "/run").c_str(), 0700);
  {  // a socket file whose agent is gone
    const int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
    ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    close(fd);
  }
  StartServer();
  InjectServerOptions second;
  second.socket_path = path;
  absl::StatusOr<std::unique_ptr<InjectServer>> s = InjectServer::Start(second);
  EXPECT_EQ(s.status().code(), absl::StatusCode::kFailedPrecondition) << s.status();
}

TEST_F(InjectServerTest, RefusesBadPaths) {
  InjectServerOptions options;
  options.socket_path = dir_.path() + "/" + std::string(200, 'x');
  EXPECT_EQ(InjectServer::Start(options).status().code(), absl::StatusCode::kInvalidArgument);
  options.socket_path = dir_.path() + "/file";
  FILE* f = fopen(options.socket_path.c_str(), "w");
  fclose(f);
  EXPECT_EQ(InjectServer::Start(options).status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST_F(InjectServerTest, EightProcessesInOneWindow) {
  StartServer();
  std::vector<std::unique_ptr<FakeProcess>> procs;
  for (int i = 0; i < 8; ++i) procs.push_back(Connect(1000 + i, i));
  ASSERT_TRUE(server_->WaitForProcessesForTesting(8, absl::Seconds(10)));
  EXPECT_EQ(server_->Processes().size(), 8u);
  const uint64_t token = server_->OpenWindow("s1", 0, 0);
  for (auto& p : procs) {
    const inject::EnableMessage e = p->ExpectEnable();
    EXPECT_EQ(e.token, token);
    EXPECT_EQ(inject::GetText(e.session_id), "s1");
    p->SendStatus(token, StatusCode::kEnabled, 0, 42);
  }
  server_->CloseWindow(token);
  for (size_t i = 0; i < procs.size(); ++i) {
    procs[i]->AnswerDisableAndFlush(token, {FakeProcess::SmallBatch(1000 + i)}, /*dropped=*/i);
  }
  std::vector<InjectWindowResult> results = server_->TakeWindow(token, absl::Seconds(10));
  ASSERT_EQ(results.size(), 8u);
  for (const InjectWindowResult& r : results) {
    EXPECT_TRUE(r.enabled);
    EXPECT_TRUE(r.flushed);
    EXPECT_FALSE(r.gone);
    EXPECT_EQ(r.gpu_minus_wall_ns, 42);
    EXPECT_EQ(r.batches.size(), 1u);
    EXPECT_EQ(r.dropped_records, r.process.pid - 1000);
    EXPECT_TRUE(r.errors.empty());
    EXPECT_EQ(r.process.rank, static_cast<int32_t>(r.process.pid - 1000));
    EXPECT_EQ(r.process.peer_pid, getpid());
  }
  // The window is forgotten: a second TakeWindow has nothing.
  EXPECT_TRUE(server_->TakeWindow(token, absl::ZeroDuration()).empty());
}

TEST_F(InjectServerTest, AProcessThatVanishesLosesOnlyItsOwnData) {
  StartServer();
  auto a = Connect(1);
  auto b = Connect(2);
  ASSERT_TRUE(server_->WaitForProcessesForTesting(2, absl::Seconds(10)));
  const uint64_t token = server_->OpenWindow("s", 0, 0);
  a->ExpectEnable();
  b->ExpectEnable();
  a->SendStatus(token, StatusCode::kEnabled);
  b->SendStatus(token, StatusCode::kEnabled);
  b->SendBatch(FakeProcess::SmallBatch(2));  // sent before dying: kept
  b.reset();                                 // dies mid-capture
  server_->CloseWindow(token);
  a->AnswerDisableAndFlush(token, {FakeProcess::SmallBatch(1)});
  std::vector<InjectWindowResult> results = server_->TakeWindow(token, absl::Seconds(10));
  ASSERT_EQ(results.size(), 2u);
  for (const InjectWindowResult& r : results) {
    if (r.process.pid == 1) {
      EXPECT_TRUE(r.flushed);
      EXPECT_TRUE(r.errors.empty());
    } else {
      EXPECT_TRUE(r.gone);
      EXPECT_FALSE(r.flushed);
      ASSERT_EQ(r.errors.size(), 1u);
      EXPECT_NE(r.errors[0].find("connection lost during the capture"), std::string::npos);
    }
    EXPECT_EQ(r.batches.size(), 1u);
  }
}

TEST_F(InjectServerTest, AStalledProcessIsGivenUpAtTheDeadline) {
  StartServer();
  auto a = Connect(1);
  auto stalled = Connect(2);
  ASSERT_TRUE(server_->WaitForProcessesForTesting(2, absl::Seconds(10)));
  const uint64_t token = server_->OpenWindow("s", 0, 0);
  a->ExpectEnable();
  server_->CloseWindow(token);
  a->AnswerDisableAndFlush(token, {FakeProcess::SmallBatch(1)});
  // `stalled` never answers.
  std::vector<InjectWindowResult> results = server_->TakeWindow(token, absl::Milliseconds(200));
  ASSERT_EQ(results.size(), 2u);
  for (const InjectWindowResult& r : results) {
    if (r.process.pid == 1) {
      EXPECT_TRUE(r.flushed);
    } else {
      EXPECT_FALSE(r.flushed);
      ASSERT_FALSE(r.errors.empty());
      EXPECT_NE(r.errors.back().find("did not finish flushing"), std::string::npos);
    }
  }
  EXPECT_TRUE(stalled->WaitClosed()) << "a stalled process is disconnected";
  EXPECT_TRUE(server_->WaitForProcessesForTesting(1, absl::Seconds(1)));
  EXPECT_EQ(server_->Processes().size(), 1u);
}

TEST_F(InjectServerTest, AFloodIsCappedAndHurtsNobodyElse) {
  InjectServerOptions options;
  options.max_client_window_bytes = 1 << 20;
  StartServer(options);
  auto flood = Connect(1);
  auto calm = Connect(2);
  ASSERT_TRUE(server_->WaitForProcessesForTesting(2, absl::Seconds(10)));
  const uint64_t token = server_->OpenWindow("s", 0, 0);
  flood->ExpectEnable();
  calm->ExpectEnable();
  const std::vector<uint8_t> big(256 << 10, 0x5A);
  for (int i = 0; i < 40; ++i) flood->SendBatch(big);  // 10 MiB against a 1 MiB cap
  server_->CloseWindow(token);
  flood->AnswerDisableAndFlush(token, {});
  calm->AnswerDisableAndFlush(token, {FakeProcess::SmallBatch(2)});
  std::vector<InjectWindowResult> results = server_->TakeWindow(token, absl::Seconds(10));
  ASSERT_EQ(results.size(), 2u);
  for (const InjectWindowResult& r : results) {
    EXPECT_TRUE(r.flushed);
    if (r.process.pid == 1) {
      EXPECT_TRUE(r.over_cap);
      EXPECT_LE(r.bytes, 1 << 20);
      EXPECT_EQ(r.batches.size(), 4u);
      EXPECT_EQ(r.errors.size(), 1u);
    } else {
      EXPECT_FALSE(r.over_cap);
      EXPECT_EQ(r.batches.size(), 1u);
    }
  }
}

TEST_F(InjectServerTest, GarbageHalfMessagesAndOversizeFramesCloseOnlyThatConnection) {
  StartServer();
  auto good = Connect(1);
  ASSERT_TRUE(server_->WaitForProcessesForTesting(1, absl::Seconds(10)));
  {  // random bytes
    FakeProcess garbage(server_->socket_path());
    std::mt19937 rng(7);
    std::vector<uint8_t> bytes(4096);
    for (uint8_t& b : bytes) b = static_cast<uint8_t>(rng());
    garbage.SendRaw(bytes);
    EXPECT_TRUE(garbage.WaitClosed());
  }
  {  // a frame header announcing more than the cap
    FakeProcess oversize(server_->socket_path());
    oversize.Register(3, -1);
    inject::FrameHeader h;
    h.type = static_cast<uint16_t>(MessageType::kRecordBatch);
    h.length = inject::kMaxRecordBatchFrameBytes + 1;
    oversize.SendRaw({reinterpret_cast<uint8_t*>(&h), reinterpret_cast<uint8_t*>(&h) + sizeof(h)});
    EXPECT_TRUE(oversize.WaitClosed());
  }
  {  // a status before Register
    FakeProcess early(server_->socket_path());
    early.SendStatus(0, StatusCode::kEnabled);
    EXPECT_TRUE(early.WaitClosed());
  }
  {  // half a message, then gone
    FakeProcess half(server_->socket_path());
    std::vector<uint8_t> frame;
    inject::RegisterMessage reg;
    inject::AppendMessage(MessageType::kRegister, reg, &frame);
    frame.resize(frame.size() / 2);
    half.SendRaw(frame);
  }
  {  // a short Register payload
    FakeProcess shortreg(server_->socket_path());
    std::vector<uint8_t> frame;
    inject::AppendFrame(MessageType::kRegister, "abc", 3, &frame);
    shortreg.SendRaw(frame);
    EXPECT_TRUE(shortreg.WaitClosed());
  }
  // The well-behaved process still works.
  const uint64_t token = server_->OpenWindow("s", 0, 0);
  good->ExpectEnable();
  server_->CloseWindow(token);
  good->AnswerDisableAndFlush(token, {FakeProcess::SmallBatch(1)});
  std::vector<InjectWindowResult> results = server_->TakeWindow(token, absl::Seconds(10));
  ASSERT_EQ(results.size(), 1u);
  EXPECT_TRUE(results[0].flushed);
  EXPECT_EQ(server_->Processes().size(), 1u);
}

TEST_F(InjectServerTest, PartialFramesOverTheReceiveCapCloseTheirConnection) {
  InjectServerOptions options;
  options.max_receive_buffer_bytes = 1 << 20;
  StartServer(options);
  auto good = Connect(1);
  FakeProcess hog(server_->socket_path());
  hog.Register(2, -1);
  ASSERT_TRUE(server_->WaitForProcessesForTesting(2, absl::Seconds(10)));
  inject::FrameHeader h;
  h.type = static_cast<uint16_t>(MessageType::kRecordBatch);
  h.length = 8 << 20;  // within the frame cap, never completed
  std::vector<uint8_t> bytes(reinterpret_cast<uint8_t*>(&h),
                             reinterpret_cast<uint8_t*>(&h) + sizeof(h));
  bytes.resize(bytes.size() + (2 << 20), 0);
  hog.SendRaw(bytes);
  EXPECT_TRUE(hog.WaitClosed());
  EXPECT_TRUE(server_->WaitForProcessesForTesting(1, absl::Seconds(1)));
  EXPECT_EQ(server_->Processes().size(), 1u);
}

TEST_F(InjectServerTest, ConnectionsBeyondTheLimitAreRefused) {
  InjectServerOptions options;
  options.max_clients = 2;
  StartServer(options);
  auto a = Connect(1);
  auto b = Connect(2);
  ASSERT_TRUE(server_->WaitForProcessesForTesting(2, absl::Seconds(10)));
  FakeProcess c(server_->socket_path());
  EXPECT_TRUE(c.WaitClosed());
  EXPECT_EQ(server_->Processes().size(), 2u);
}

TEST_F(InjectServerTest, ConnectionsThatNeverRegisterAreClosedAfterTheTimeout) {
  testkit::FakeClock& clock = clock_;  // outlives server_ (a local one did not: ASan, under load)
  InjectServerOptions options;
  options.clock = &clock;
  options.register_timeout = absl::Seconds(5);
  StartServer(options);
  FakeProcess idle1(server_->socket_path());
  FakeProcess idle2(server_->socket_path());
  auto registered = Connect(1);
  ASSERT_TRUE(server_->WaitForConnectionsAtLeastForTesting(3, absl::Seconds(10)));
  ASSERT_TRUE(server_->WaitForProcessesForTesting(1, absl::Seconds(10)));
  clock.Advance(4 * kNanosPerSecond);
  server_->CloseUnregisteredForTesting();
  EXPECT_EQ(server_->connections_for_testing(), 3u);
  FakeProcess idle3(server_->socket_path());  // accepted at 4 s
  ASSERT_TRUE(server_->WaitForConnectionsAtLeastForTesting(4, absl::Seconds(10)));
  clock.Advance(2 * kNanosPerSecond);
  server_->CloseUnregisteredForTesting();
  EXPECT_TRUE(idle1.WaitClosed());
  EXPECT_TRUE(idle2.WaitClosed());
  EXPECT_EQ(server_->connections_for_testing(), 2u);
  clock.Advance(4 * kNanosPerSecond);
  server_->CloseUnregisteredForTesting();
  EXPECT_TRUE(idle3.WaitClosed());
  EXPECT_EQ(server_->connections_for_testing(), 1u);
  ASSERT_EQ(server_->Processes().size(), 1u);
  EXPECT_EQ(server_->Processes()[0].pid, 1u);
}

TEST_F(InjectServerTest, IdleConnectionsCannotLockProcessesOut) {
  InjectServerOptions options;
  options.max_clients = 4;
  StartServer(options);
  std::vector<std::unique_ptr<FakeProcess>> idle;
  for (int i = 0; i < 4; ++i) {
    idle.push_back(std::make_unique<FakeProcess>(server_->socket_path()));
    ASSERT_TRUE(server_->WaitForConnectionsAtLeastForTesting(i + 1, absl::Seconds(10)));
  }
  // Each CUDA process takes the place of the oldest connection that never registered.
  std::vector<std::unique_ptr<FakeProcess>> procs;
  for (int i = 0; i < 4; ++i) {
    procs.push_back(Connect(100 + i, i));
    ASSERT_TRUE(server_->WaitForProcessesForTesting(i + 1, absl::Seconds(10)));
    EXPECT_TRUE(idle[i]->WaitClosed()) << i;
  }
  EXPECT_EQ(server_->connections_for_testing(), 4u);
  // All four registered: a fifth is refused.
  FakeProcess fifth(server_->socket_path());
  EXPECT_TRUE(fifth.WaitClosed());
  EXPECT_EQ(server_->Processes().size(), 4u);
}

TEST_F(InjectServerTest, OneProcessCannotOpenMoreThanItsShare) {
  InjectServerOptions options;
  options.max_connections_per_peer = 2;
  StartServer(options);
  FakeProcess a(server_->socket_path());
  FakeProcess b(server_->socket_path());
  ASSERT_TRUE(server_->WaitForConnectionsAtLeastForTesting(2, absl::Seconds(10)));
  FakeProcess c(server_->socket_path());  // the same pid (this test's) a third time
  EXPECT_TRUE(c.WaitClosed());
  EXPECT_EQ(server_->connections_for_testing(), 2u);
  a.Register(7, 0);
  EXPECT_TRUE(server_->WaitForProcessesForTesting(1, absl::Seconds(10)));
}

TEST(WindowCapsTest, AWindowIsCappedSoThatCollectingItStaysUnderTheHeldCap) {
  constexpr int64_t kMiB = int64_t{1} << 20;
  // The default --max-held-mb=512: a window may bring 512 / kCollectBytesMultiple MiB.
  InjectServerOptions o = WithWindowCapsUnder(512 * kMiB, {});
  EXPECT_EQ(o.max_window_bytes, 512 * kMiB / kCollectBytesMultiple);
  EXPECT_LE(o.max_client_window_bytes, o.max_window_bytes);
  EXPECT_LE(o.max_window_bytes * kCollectBytesMultiple, 512 * kMiB);
  // A larger held cap lifts it up to the server's own caps, no further.
  o = WithWindowCapsUnder(64 * 1024 * kMiB, {});
  EXPECT_EQ(o.max_window_bytes, InjectServerOptions{}.max_window_bytes);
  EXPECT_EQ(o.max_client_window_bytes, InjectServerOptions{}.max_client_window_bytes);
  EXPECT_GE(WithWindowCapsUnder(1, {}).max_window_bytes, 1);
}

TEST_F(InjectServerTest, LateRegistrantsJoinTheOpenWindowAndUnknownTypesAreSkipped) {
  StartServer();
  const uint64_t token = server_->OpenWindow("s", 0, 0);
  auto late = Connect(9);
  std::vector<uint8_t> unknown;
  inject::AppendFrame(static_cast<MessageType>(4000), "future", 6, &unknown);
  late->SendRaw(unknown);
  EXPECT_EQ(late->ExpectEnable().token, token);
  late->SendStatus(0, StatusCode::kUnavailable, 0, 0,
                   "held by another CUPTI subscriber (Nsight Systems)");
  server_->CloseWindow(token);
  late->AnswerDisableAndFlush(token, {});
  std::vector<InjectWindowResult> results = server_->TakeWindow(token, absl::Seconds(10));
  ASSERT_EQ(results.size(), 1u);
  EXPECT_EQ(results[0].process.unavailable, "held by another CUPTI subscriber (Nsight Systems)");
  ASSERT_EQ(results[0].errors.size(), 1u);
  EXPECT_EQ(results[0].errors[0],
            "GPU tracing unavailable: held by another CUPTI subscriber (Nsight Systems)");
}

std::vector<inject::StepSampleEntry> Steps(int64_t first_step, int count, int64_t first_end_ns,
                                           int64_t period_ns, int64_t duration_ns) {
  std::vector<inject::StepSampleEntry> out;
  for (int i = 0; i < count; ++i) {
    const int64_t end = first_end_ns + i * period_ns;
    out.push_back({end - duration_ns, end, first_step + i});
  }
  return out;
}

TEST_F(InjectServerTest, StepSamplesAreKeptPerProcessWindowOrNot) {
  InjectServerOptions options;
  options.max_steps_per_process = 4;
  StartServer(options);
  auto a = Connect(4242, /*rank=*/3);
  auto b = Connect(77);  // no rank
  ASSERT_TRUE(server_->WaitForProcessesForTesting(2, absl::Seconds(10)));
  // a: steps 1..6 ending at 1000, 2000, ... 6000; only the latest 4 are kept.
  a->SendSteps(Steps(/*first_step=*/1, /*count=*/6, /*first_end_ns=*/1'000, /*period_ns=*/1'000,
                     /*duration_ns=*/900));
  // b: a backwards sample, a negative step and one before the epoch are skipped.
  b->SendSteps({{2'600, 2'500, 1}, {2'400, 2'500, -1}, {-5, 2'500, 2}, {2'000, 2'500, 9}});
  ASSERT_TRUE(server_->WaitForStepSamplesForTesting(7, absl::Seconds(10)));
  std::vector<InjectStepSample> got;
  server_->RecentSteps(0, 10'000, 100, &got);
  ASSERT_EQ(got.size(), 5u);
  EXPECT_EQ(got[0].step_num, 9);
  EXPECT_EQ(got[0].source, "cupti pid 77");
  EXPECT_EQ(got[0].start_realtime_ns, 2'000);
  EXPECT_EQ(got[0].end_realtime_ns, 2'500);
  EXPECT_EQ(got[1].step_num, 3);
  EXPECT_EQ(got[1].source, "cupti pid 4242 rank 3");
  EXPECT_EQ(got[1].start_realtime_ns, 2'100);
  EXPECT_EQ(got[1].end_realtime_ns, 3'000);
  EXPECT_EQ(got[4].step_num, 6);
  // (since, now] on the end, and the latest `max`.
  got.clear();
  server_->RecentSteps(/*since_realtime_ns=*/3'000, /*now_realtime_ns=*/5'000, 100, &got);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].step_num, 4);
  EXPECT_EQ(got[1].step_num, 5);
  got.clear();
  server_->RecentSteps(0, 10'000, /*max=*/2, &got);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].step_num, 5);
  EXPECT_EQ(got[1].step_num, 6);
  got.clear();
  server_->RecentSteps(0, 10'000, /*max=*/0, &got);
  EXPECT_TRUE(got.empty());
  // Accepted during a window as well.
  const uint64_t token = server_->OpenWindow("s", 0, 0);
  a->ExpectEnable();
  b->ExpectEnable();
  a->SendSteps(Steps(/*first_step=*/7, /*count=*/1, /*first_end_ns=*/7'000, 0, 500));
  ASSERT_TRUE(server_->WaitForStepSamplesForTesting(8, absl::Seconds(10)));
  got.clear();
  server_->RecentSteps(6'000, 10'000, 100, &got);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].step_num, 7);
  server_->AbortWindow(token);
  // A process's steps go with its connection.
  b.reset();
  ASSERT_TRUE(server_->WaitForConnectionsAtMostForTesting(1, absl::Seconds(10)));
  got.clear();
  server_->RecentSteps(0, 10'000, 100, &got);
  ASSERT_EQ(got.size(), 4u);
  for (const InjectStepSample& sample : got) EXPECT_EQ(sample.source, "cupti pid 4242 rank 3");
}

TEST_F(InjectServerTest, CollectiveLaunchesAreAskedForKeptPerProcessAndInterned) {
  InjectServerOptions options;
  options.max_launches_per_process = 3;
  options.max_launch_names_per_process = 2;
  StartServer(options);
  auto a = Connect(4242, /*rank=*/3);
  ASSERT_TRUE(server_->WaitForProcessesForTesting(1, absl::Seconds(10)));
  // Registered before: told when the recorder starts; registering after: told at once.
  server_->SetCollectiveLaunches(true);
  EXPECT_EQ(a->ExpectRecorder(), inject::kRecorderFlagCollectiveLaunches);
  auto b = Connect(77);
  EXPECT_EQ(b->ExpectRecorder(), inject::kRecorderFlagCollectiveLaunches);
  const std::string all_reduce = "ncclDevKernel_AllReduce_Sum_f32_RING_LL";
  const std::string all_gather = "ncclDevKernel_AllGather_RING_LL";
  // a: four launches, the latest three kept; 5 lost in the library.
  a->SendLaunches({{1'000, 0, 11, 0}, {2'000, 1, 12, 1}, {3'000, 2, 11, 0}, {4'000, 3, 11, 1}},
                  {all_reduce, all_gather}, /*dropped=*/5);
  // b: one before the epoch is skipped; a third name is over the per-process cap.
  b->SendLaunches({{-5, 0, 7, 0}, {2'500, 1, 7, 0}}, {all_reduce});
  b->SendLaunches({{3'500, 2, 7, 0}, {3'600, 3, 7, 1}}, {all_gather, "ncclDevKernel_Reduce_Sum"});
  ASSERT_TRUE(server_->WaitForLaunchesForTesting(7, absl::Seconds(10)));
  std::vector<InjectCollectiveLaunch> got;
  server_->RecentLaunches(0, 10'000, &got);
  ASSERT_EQ(got.size(), 6u);
  EXPECT_EQ(got[0].pid, 4242u);
  EXPECT_EQ(got[0].realtime_ns, 2'000);
  EXPECT_EQ(got[0].seq, 1u);
  EXPECT_EQ(got[0].tid, 12u);
  EXPECT_EQ(*got[0].kernel_name, all_gather);
  EXPECT_EQ(got[1].pid, 77u);
  EXPECT_EQ(got[1].realtime_ns, 2'500);
  EXPECT_EQ(*got[1].kernel_name, all_reduce);
  EXPECT_EQ(got[2].realtime_ns, 3'000);
  EXPECT_EQ(*got[3].kernel_name, all_gather);
  EXPECT_EQ(*got[4].kernel_name, "ncclKernel_Unknown_too_many_names");
  EXPECT_EQ(got[5].realtime_ns, 4'000);
  EXPECT_EQ(server_->collective_launches_dropped(), 5u);
  // One kernel's launches of one process share its name.
  EXPECT_EQ(got[0].kernel_name.get(), got[5].kernel_name.get());
  std::vector<InjectCollectiveLaunch> a_only;
  server_->RecentLaunches(2'500, 10'000, &a_only);
  ASSERT_EQ(a_only.size(), 4u);  // (since, now]
  EXPECT_EQ(a_only[0].realtime_ns, 3'000);
  // They go with the connection; the recorder's end tells the rest.
  b.reset();
  ASSERT_TRUE(server_->WaitForConnectionsAtMostForTesting(1, absl::Seconds(10)));
  got.clear();
  server_->RecentLaunches(0, 10'000, &got);
  EXPECT_EQ(got.size(), 3u);
  server_->SetCollectiveLaunches(false);
  EXPECT_EQ(a->ExpectRecorder(), 0u);
}

TEST_F(InjectServerTest, BadCollectiveLaunchesCloseOnlyThatConnection) {
  StartServer();
  auto good = Connect(1);
  ASSERT_TRUE(server_->WaitForProcessesForTesting(1, absl::Seconds(10)));
  {  // an entry naming no name of its frame
    FakeProcess bad(server_->socket_path());
    bad.Register(2, -1);
    bad.SendLaunches({{1'000, 0, 1, /*name_index=*/3}}, {"ncclDevKernel_AllReduce"});
    EXPECT_TRUE(bad.WaitClosed());
  }
  {  // shorter than its header
    FakeProcess garbage(server_->socket_path());
    garbage.Register(3, -1);
    std::vector<uint8_t> frame;
    inject::AppendFrame(MessageType::kCollectiveLaunches, "xyz", 3, &frame);
    garbage.SendRaw(frame);
    EXPECT_TRUE(garbage.WaitClosed());
  }
  good->SendLaunches({{1'000, 0, 1, 0}}, {"ncclDevKernel_AllReduce"});
  ASSERT_TRUE(server_->WaitForLaunchesForTesting(1, absl::Seconds(10)));
  EXPECT_EQ(server_->connections_for_testing(), 1u);
}

TEST_F(InjectServerTest, BadStepSamplesCloseOnlyThatConnection) {
  StartServer();
  auto good = Connect(1);
  ASSERT_TRUE(server_->WaitForProcessesForTesting(1, absl::Seconds(10)));
  {  // before Register
    FakeProcess early(server_->socket_path());
    early.SendSteps(Steps(1, 1, 1'000, 0, 10));
    EXPECT_TRUE(early.WaitClosed());
  }
  {  // a count over the cap (the frame is otherwise consistent)
    FakeProcess over(server_->socket_path());
    over.Register(2, -1);
    const uint32_t count = inject::kMaxStepSamplesPerFrame + 1;
    std::vector<uint8_t> payload(sizeof(inject::StepSamplesHeader) +
                                 count * sizeof(inject::StepSampleEntry));
    const inject::StepSamplesHeader h{count, sizeof(inject::StepSampleEntry)};
    std::memcpy(payload.data(), &h, sizeof(h));
    std::vector<uint8_t> frame;
    inject::AppendFrame(MessageType::kStepSamples, payload.data(), payload.size(), &frame);
    over.SendRaw(frame);
    EXPECT_TRUE(over.WaitClosed());
  }
  {  // a length that does not match the count
    FakeProcess mismatch(server_->socket_path());
    mismatch.Register(3, -1);
    std::vector<uint8_t> payload(sizeof(inject::StepSamplesHeader) +
                                 2 * sizeof(inject::StepSampleEntry));
    const inject::StepSamplesHeader h{3, sizeof(inject::StepSampleEntry)};
    std::memcpy(payload.data(), &h, sizeof(h));
    std::vector<uint8_t> frame;
    inject::AppendFrame(MessageType::kStepSamples, payload.data(), payload.size(), &frame);
    mismatch.SendRaw(frame);
    EXPECT_TRUE(mismatch.WaitClosed());
  }
  {  // garbage: a payload shorter than its header
    FakeProcess garbage(server_->socket_path());
    garbage.Register(4, -1);
    std::vector<uint8_t> frame;
    inject::AppendFrame(MessageType::kStepSamples, "xyz", 3, &frame);
    garbage.SendRaw(frame);
    EXPECT_TRUE(garbage.WaitClosed());
  }
  // The well-behaved process is still served, and its steps still count.
  good->SendSteps(Steps(5, 2, 1'000, 1'000, 100));
  ASSERT_TRUE(server_->WaitForStepSamplesForTesting(2, absl::Seconds(10)));
  std::vector<InjectStepSample> got;
  server_->RecentSteps(0, 10'000, 10, &got);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].source, "cupti pid 1");
  EXPECT_EQ(server_->Processes().size(), 1u);
}

// A snapshot asks every process for the steps it holds (SendPending) and waits until each has
// sent them: frames of one connection are handled in order, so when it returns they are in. A
// library older than SendPending never answers: counted, after the bounded wait.
TEST_F(InjectServerTest, RequestPendingWaitsUntilEachProcessSentWhatItHolds) {
  StartServer();
  auto fresh = Connect(1);
  ASSERT_TRUE(server_->WaitForProcessesForTesting(1, absl::Seconds(10)));
  std::thread answer([&] {
    uint16_t type = 0;
    std::vector<uint8_t> payload;
    ASSERT_TRUE(fresh->Read(&type, &payload));
    ASSERT_EQ(type, static_cast<uint16_t>(MessageType::kSendPending));
    inject::CommandMessage m;
    ASSERT_TRUE(inject::DecodeMessage(payload.data(), payload.size(), &m));
    fresh->SendSteps(Steps(1, 2, 1'000, 1'000, 100));
    inject::StatusMessage done;
    done.token = m.token;
    done.code = static_cast<uint32_t>(StatusCode::kPendingSent);
    fresh->Send(MessageType::kStatus, done);
  });
  EXPECT_EQ(server_->RequestPending(absl::Seconds(30)), 0u);
  std::vector<InjectStepSample> got;
  server_->RecentSteps(0, 10'000, 10, &got);
  EXPECT_EQ(got.size(), 2u);
  answer.join();

  fresh.reset();
  ASSERT_TRUE(server_->WaitForConnectionsAtMostForTesting(0, absl::Seconds(10)));
  auto old = Connect(2);  // reads nothing, answers nothing
  ASSERT_TRUE(server_->WaitForProcessesForTesting(1, absl::Seconds(10)));
  EXPECT_EQ(server_->RequestPending(absl::Milliseconds(100)), 1u);
  EXPECT_EQ(server_->Processes().size(), 1u);  // an old library is not dropped for it
}

TEST_F(InjectServerTest, AbortTellsProcessesToStop) {
  StartServer();
  auto a = Connect(1);
  ASSERT_TRUE(server_->WaitForProcessesForTesting(1, absl::Seconds(10)));
  const uint64_t token = server_->OpenWindow("s", 1, 2);
  a->ExpectEnable();
  server_->AbortWindow(token);
  uint16_t type = 0;
  std::vector<uint8_t> payload;
  ASSERT_TRUE(a->Read(&type, &payload));
  EXPECT_EQ(type, static_cast<uint16_t>(MessageType::kDisable));
  EXPECT_TRUE(server_->TakeWindow(token, absl::ZeroDuration()).empty());
}

// The library's own client (inject/inject_client.h) against the real server.
class ScriptedTracer : public inject::Tracer {
 public:
  std::string Unavailable() override { return ""; }
  bool Enable(std::string* /*error*/, int64_t* gpu_minus_wall_ns) override {
    *gpu_minus_wall_ns = 77;
    return true;
  }
  void Disable() override {}
  uint64_t Flush(const std::function<void(std::vector<uint8_t>)>& sink) override {
    sink(FakeProcess::SmallBatch(static_cast<uint32_t>(getpid())));
    return 3;
  }
  void Discard() override {}
  size_t TakeSteps(inject::StepSampleEntry* out, size_t max) override {
    std::lock_guard<std::mutex> lock(mu);
    size_t n = 0;
    for (; n < max && n < steps.size(); ++n) out[n] = steps[n];
    steps.erase(steps.begin(), steps.begin() + static_cast<ptrdiff_t>(n));
    return n;
  }
  std::mutex mu;
  std::vector<inject::StepSampleEntry> steps;
};

TEST_F(InjectServerTest, TheLibrarysClientTalksToTheServer) {
  StartServer();
  ScriptedTracer tracer;
  inject::InjectClientOptions options;
  options.socket_path = server_->socket_path();
  options.registration.pid = 31;
  options.registration.rank = 2;
  options.initial_backoff_ms = 5;
  options.step_interval_ms = 5;
  inject::InjectClient client(std::move(options), &tracer);
  client.Start();
  ASSERT_TRUE(server_->WaitForProcessesForTesting(1, absl::Seconds(10)));
  const uint64_t token = server_->OpenWindow("s", 0, 0);
  server_->CloseWindow(token);
  std::vector<InjectWindowResult> results = server_->TakeWindow(token, absl::Seconds(10));
  ASSERT_EQ(results.size(), 1u);
  EXPECT_TRUE(results[0].enabled);
  EXPECT_TRUE(results[0].flushed);
  EXPECT_EQ(results[0].gpu_minus_wall_ns, 77);
  EXPECT_EQ(results[0].batches.size(), 1u);
  EXPECT_EQ(results[0].dropped_records, 3u);
  // The step signal, between captures (the window's round trip put the client in its loop).
  {
    std::lock_guard<std::mutex> lock(tracer.mu);
    tracer.steps = Steps(/*first_step=*/3, /*count=*/300, /*first_end_ns=*/10'000,
                         /*period_ns=*/1'000, /*duration_ns=*/800);
  }
  ASSERT_TRUE(server_->WaitForStepSamplesForTesting(300, absl::Seconds(10)));
  std::vector<InjectStepSample> got;
  server_->RecentSteps(0, INT64_MAX, 1'000, &got);
  ASSERT_EQ(got.size(), 300u);
  EXPECT_EQ(got.front().step_num, 3);
  EXPECT_EQ(got.front().end_realtime_ns, 10'000);
  EXPECT_EQ(got.front().start_realtime_ns, 9'200);
  EXPECT_EQ(got.back().step_num, 302);
  EXPECT_EQ(got.back().source, "cupti pid 31 rank 2");
  client.Stop();
}

// The light level through the library's own client and a tracer whose launches come from the
// library's real recorder (inject/collective_launches.h): the Recorder message, the frames
// (more launches than one frame holds, more names than one frame's table), the server's copy.
uint64_t g_launch_clock = 0;
uint64_t LaunchClock() { return g_launch_clock += 1'000; }
uint32_t LaunchThread() { return 4321; }

class RecorderTracer : public ScriptedTracer {
 public:
  bool SetCollectiveLaunches(bool on, std::string* /*error*/) override {
    on_.store(on);
    return true;
  }
  size_t TakeLaunches(inject::CollectiveLaunchEntry* out, size_t max) override {
    return launches.Take(out, max);
  }
  std::string_view LaunchName(uint32_t id) override { return launches.Name(id); }
  uint64_t TakeLaunchesDropped() override { return launches.TakeDropped(); }
  void ClearLaunches() override { launches.Clear(); }
  bool on() const { return on_.load(); }

  inject::CollectiveLaunchRecorder launches{&LaunchClock, &LaunchThread};

 private:
  std::atomic<bool> on_{false};
};

TEST_F(InjectServerTest, TheLibrarysRecorderSendsCollectiveLaunchesToTheServer) {
  StartServer();
  RecorderTracer tracer;
  inject::InjectClientOptions options;
  options.socket_path = server_->socket_path();
  options.registration.pid = 41;
  options.initial_backoff_ms = 5;
  options.step_interval_ms = 5;
  inject::InjectClient client(std::move(options), &tracer);
  client.Start();
  ASSERT_TRUE(server_->WaitForProcessesForTesting(1, absl::Seconds(10)));
  server_->SetCollectiveLaunches(true);
  // The client applies the Recorder message before it answers the window's commands after it.
  const uint64_t token = server_->OpenWindow("s", 0, 0);
  server_->CloseWindow(token);
  ASSERT_EQ(server_->TakeWindow(token, absl::Seconds(10)).size(), 1u);
  EXPECT_TRUE(tracer.on());
  // 600 launches of 70 kernels: two frames of launches, names split over frame tables.
  std::vector<std::string> names;
  for (int i = 0; i < 70; ++i) {
    names.push_back(absl::StrCat("ncclDevKernel_AllReduce_Sum_f32_RING_LL_", i));
  }
  for (int i = 0; i < 600; ++i) {
    ASSERT_TRUE(tracer.launches.OnLaunch(/*runtime=*/false, /*enter=*/true,
                                         names[static_cast<size_t>(i) % names.size()].c_str()));
  }
  ASSERT_TRUE(server_->WaitForLaunchesForTesting(600, absl::Seconds(10)));
  std::vector<InjectCollectiveLaunch> got;
  server_->RecentLaunches(0, INT64_MAX, &got);
  ASSERT_EQ(got.size(), 600u);
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_EQ(got[i].seq, i);
    ASSERT_EQ(got[i].pid, 41u);
    ASSERT_EQ(got[i].tid, 4321u);
    ASSERT_EQ(*got[i].kernel_name, names[i % names.size()]) << i;
  }
  EXPECT_EQ(client.launches_dropped(), 0u);
  // The recorder's end releases the library's subscription.
  server_->SetCollectiveLaunches(false);
  const uint64_t again = server_->OpenWindow("t", 0, 0);
  server_->CloseWindow(again);
  ASSERT_EQ(server_->TakeWindow(again, absl::Seconds(10)).size(), 1u);
  EXPECT_FALSE(tracer.on());
  client.Stop();
}

}  // namespace
}  // namespace profctl::agent::cupti
