#include "agent/collectors/cupti/cupti_collector.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "agent/collectors/cupti/inject_test_util.h"
#include "common/xspace.h"
#include "tests/fake_clock.h"

namespace profctl::agent::cupti {
namespace {

using inject::StatusCode;
using tensorflow::profiler::XPlane;
using tensorflow::profiler::XSpace;
using testing_util::FakeProcess;
using testing_util::TempDir;

constexpr int64_t kSec = 1'000'000'000;

const XPlane* FindPlane(const XSpace& space, absl::string_view name) {
  for (const XPlane& p : space.planes()) {
    if (p.name() == name) return &p;
  }
  return nullptr;
}

bool HasEntry(const google::protobuf::RepeatedPtrField<std::string>& entries,
              absl::string_view needle) {
  for (const std::string& e : entries) {
    if (absl::StrContains(e, needle)) return true;
  }
  return false;
}

class CuptiCollectorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    InjectServerOptions options;
    options.socket_path = dir_.path() + "/agent.sock";
    absl::StatusOr<std::unique_ptr<InjectServer>> s = InjectServer::Start(options);
    ASSERT_TRUE(s.ok()) << s.status();
    server_ = *std::move(s);
  }
  std::unique_ptr<CuptiCollector> MakeCollector(int64_t skew_ns = 0) {
    CuptiCollectorOptions options;
    options.hostname = "gpu-host";
    options.clock_skew_ns = skew_ns;
    options.flush_timeout_ms = 10'000;
    return std::make_unique<CuptiCollector>(server_.get(), options, &clock_);
  }
  std::unique_ptr<FakeProcess> Connect(uint32_t pid, int rank) {
    auto p = std::make_unique<FakeProcess>(server_->socket_path());
    p->Register(pid, rank);
    return p;
  }

  TempDir dir_;
  testing::FakeClock clock_;
  std::unique_ptr<InjectServer> server_;
};

TEST_F(CuptiCollectorTest, TwoProcessesOneHeldByAnotherSubscriber) {
  auto collector = MakeCollector();
  auto a = Connect(101, 0);
  auto b = Connect(102, 1);
  ASSERT_TRUE(server_->WaitForProcessesForTesting(2, absl::Seconds(10)));
  const int64_t w = clock_.WallNs();
  ASSERT_TRUE(collector->Prepare({"sess", w + kSec, 5 * kSec}).ok());
  const inject::EnableMessage e = a->ExpectEnable();
  EXPECT_EQ(e.start_wall_ns, w + kSec);
  EXPECT_EQ(e.end_wall_ns, w + 6 * kSec + 2 * kSec);  // planned end + end_slack_ms
  EXPECT_EQ(inject::GetText(e.session_id), "sess");
  b->ExpectEnable();
  constexpr int64_t kOffset = 123'456;  // this process's GPU clock - CLOCK_REALTIME
  a->SendStatus(e.token, StatusCode::kEnabled, w + kSec, kOffset);
  b->SendStatus(e.token, StatusCode::kUnavailable, 0, 0,
                "held by another CUPTI subscriber (CUPTI for torch.profiler)");
  ASSERT_TRUE(collector->Start(w + kSec).ok());
  ASSERT_TRUE(collector->Stop(w + 6 * kSec).ok());
  const uint64_t gpu_start = static_cast<uint64_t>(w + 2 * kSec + kOffset);
  a->AnswerDisableAndFlush(e.token,
                           {FakeProcess::SmallBatch(101, gpu_start, gpu_start + 5'000, kOffset)},
                           /*dropped=*/3);
  b->AnswerDisableAndFlush(e.token, {});
  XSpace space;
  ASSERT_TRUE(collector->Collect(&space).ok());
  const XPlane* gpu = FindPlane(space, "/device:GPU:0");
  ASSERT_NE(gpu, nullptr);
  ASSERT_EQ(gpu->lines_size(), 1);
  ASSERT_EQ(gpu->lines(0).events_size(), 1);
  const auto& line = gpu->lines(0);
  // Calibrated onto the agent's clock: 1 s after the profile start.
  EXPECT_EQ(line.timestamp_ns() + line.events(0).offset_ps() / 1000, kSec);
  EXPECT_EQ(line.events(0).duration_ps(), 5'000'000);
  EXPECT_TRUE(HasEntry(space.errors(),
                       "cupti pid 102 (rank 1): GPU tracing unavailable: held by "
                       "another CUPTI subscriber (CUPTI for torch.profiler)"))
      << space.DebugString();
  EXPECT_TRUE(HasEntry(space.warnings(), "cupti pid 101 (rank 0): 3 GPU activity records"));
}

TEST_F(CuptiCollectorTest, CalibratesAroundTheAgentsClockSkew) {
  constexpr int64_t kSkew = 3 * kSec;  // agent wall = CLOCK_REALTIME + 3 s
  auto collector = MakeCollector(kSkew);
  auto a = Connect(7, -1);
  ASSERT_TRUE(server_->WaitForProcessesForTesting(1, absl::Seconds(10)));
  const int64_t w = clock_.WallNs();
  ASSERT_TRUE(collector->Prepare({"s", w + kSec, kSec}).ok());
  const inject::EnableMessage e = a->ExpectEnable();
  EXPECT_EQ(e.start_wall_ns, w + kSec - kSkew);  // the process's clock
  a->SendStatus(e.token, StatusCode::kEnabled);
  ASSERT_TRUE(collector->Start(w + kSec).ok());
  ASSERT_TRUE(collector->Stop(w + 2 * kSec).ok());
  // GPU clock == CLOCK_REALTIME here; the event is at agent time w + 1.5 s.
  const auto real = static_cast<uint64_t>(w + kSec + kSec / 2 - kSkew);
  a->AnswerDisableAndFlush(e.token, {FakeProcess::SmallBatch(7, real, real + 1'000, 0)});
  XSpace space;
  ASSERT_TRUE(collector->Collect(&space).ok());
  const XPlane* gpu = FindPlane(space, "/device:GPU:0");
  ASSERT_NE(gpu, nullptr);
  const auto& line = gpu->lines(0);
  EXPECT_EQ(line.timestamp_ns() + line.events(0).offset_ps() / 1000, kSec / 2);
  EXPECT_TRUE(space.errors().empty()) << space.DebugString();
}

TEST_F(CuptiCollectorTest, RanksThatEachSeeOneGpuLandOnTheirOwnPlanes) {
  auto collector = MakeCollector();
  auto a = std::make_unique<FakeProcess>(server_->socket_path());
  a->Register(1, 0, "2");
  auto b = std::make_unique<FakeProcess>(server_->socket_path());
  b->Register(2, 1, "3");
  ASSERT_TRUE(server_->WaitForProcessesForTesting(2, absl::Seconds(10)));
  const int64_t w = clock_.WallNs();
  ASSERT_TRUE(collector->Prepare({"s", 0, kSec}).ok());
  const uint64_t token = a->ExpectEnable().token;
  b->ExpectEnable();
  a->SendStatus(token, StatusCode::kEnabled);
  b->SendStatus(token, StatusCode::kEnabled);
  ASSERT_TRUE(collector->Start(w).ok());
  ASSERT_TRUE(collector->Stop(w + kSec).ok());
  const auto t = static_cast<uint64_t>(w + kSec / 2);
  a->AnswerDisableAndFlush(token, {FakeProcess::SmallBatch(1, t, t + 100)});  // device 0
  b->AnswerDisableAndFlush(token, {FakeProcess::SmallBatch(2, t, t + 100)});  // device 0
  XSpace space;
  ASSERT_TRUE(collector->Collect(&space).ok());
  EXPECT_EQ(FindPlane(space, "/device:GPU:0"), nullptr);
  EXPECT_NE(FindPlane(space, "/device:GPU:2"), nullptr);
  EXPECT_NE(FindPlane(space, "/device:GPU:3"), nullptr);
}

TEST(RemapVisibleDevicesTest, OnlyPlainIndexListsAreMapped) {
  RecordBatch batch;
  batch.kernels.resize(3);
  batch.kernels[0].device_id = 0;
  batch.kernels[1].device_id = 1;
  batch.kernels[2].device_id = 5;  // past the list: kept
  batch.devices.resize(1);
  RemapVisibleDevices(" 4, 6", &batch);
  EXPECT_EQ(batch.kernels[0].device_id, 4u);
  EXPECT_EQ(batch.kernels[1].device_id, 6u);
  EXPECT_EQ(batch.kernels[2].device_id, 5u);
  EXPECT_EQ(batch.devices[0].device_id, 4u);
  for (const char* kept :
       {"", "GPU-8f6e3c1a-1111-2222-3333-444455556666", "MIG-abc", "1,x", "-1", "1,,2"}) {
    RecordBatch b;
    b.kernels.resize(1);
    b.kernels[0].device_id = 0;
    RemapVisibleDevices(kept, &b);
    EXPECT_EQ(b.kernels[0].device_id, 0u) << kept;
  }
}

TEST_F(CuptiCollectorTest, NoProcessIsAWarningNotAFailure) {
  auto collector = MakeCollector();
  const int64_t w = clock_.WallNs();
  ASSERT_TRUE(collector->Prepare({"s", 0, kSec}).ok());
  ASSERT_TRUE(collector->Start(w).ok());
  ASSERT_TRUE(collector->Stop(w + kSec).ok());
  XSpace space;
  ASSERT_TRUE(collector->Collect(&space).ok());
  EXPECT_TRUE(HasEntry(space.warnings(), "no CUDA process is connected"));
  EXPECT_EQ(FindPlane(space, "/device:GPU:0"), nullptr);
}

TEST_F(CuptiCollectorTest, UnusableBatchesAndVanishedProcessesAreErrors) {
  auto collector = MakeCollector();
  auto a = Connect(1, 0);
  auto b = Connect(2, 1);
  ASSERT_TRUE(server_->WaitForProcessesForTesting(2, absl::Seconds(10)));
  const int64_t w = clock_.WallNs();
  ASSERT_TRUE(collector->Prepare({"s", 0, kSec}).ok());
  const uint64_t token = a->ExpectEnable().token;
  b->ExpectEnable();
  a->SendStatus(token, StatusCode::kEnabled);
  b->SendStatus(token, StatusCode::kEnabled);
  ASSERT_TRUE(collector->Start(w).ok());
  b.reset();  // dies
  ASSERT_TRUE(collector->Stop(w + kSec).ok());
  a->AnswerDisableAndFlush(token, {std::vector<uint8_t>(100, 0xEE)});
  XSpace space;
  ASSERT_TRUE(collector->Collect(&space).ok());
  EXPECT_TRUE(HasEntry(space.errors(), "cupti pid 1 (rank 0): unusable record batch"));
  EXPECT_TRUE(HasEntry(space.errors(), "cupti pid 2 (rank 1): connection lost"));
}

TEST_F(CuptiCollectorTest, LifecycleErrorsAndAbort) {
  auto collector = MakeCollector();
  XSpace space;
  EXPECT_EQ(collector->Collect(&space).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(collector->Stop(1).code(), absl::StatusCode::kFailedPrecondition);
  auto a = Connect(1, 0);
  ASSERT_TRUE(server_->WaitForProcessesForTesting(1, absl::Seconds(10)));
  ASSERT_TRUE(collector->Prepare({"s", clock_.WallNs() + kSec, kSec}).ok());
  a->ExpectEnable();
  collector->Abort();
  uint16_t type = 0;
  std::vector<uint8_t> payload;
  ASSERT_TRUE(a->Read(&type, &payload));
  EXPECT_EQ(type, static_cast<uint16_t>(inject::MessageType::kDisable));
  CuptiCollector without(nullptr, {}, &clock_);
  EXPECT_EQ(without.Prepare({"s", 0, kSec}).code(), absl::StatusCode::kFailedPrecondition);
}

TEST_F(CuptiCollectorTest, StepSignalFromTwoProcessesOnTheAgentsClock) {
  constexpr int64_t kSkew = -11'000'000;  // agent wall = CLOCK_REALTIME - 11 ms
  constexpr int64_t kMs = 1'000'000;
  auto collector = MakeCollector(kSkew);
  EXPECT_TRUE(collector->HasStepSignal());
  auto a = Connect(10, 0);
  auto b = Connect(20, -1);
  ASSERT_TRUE(server_->WaitForProcessesForTesting(2, absl::Seconds(10)));
  const int64_t r = 1'700'000'000 * kSec;  // the processes' CLOCK_REALTIME
  a->SendSteps({{r, r + 100 * kMs, 5}, {r + 100 * kMs, r + 200 * kMs, 6}});
  b->SendSteps({{r + 60 * kMs, r + 150 * kMs, 40}});
  ASSERT_TRUE(server_->WaitForStepSamplesForTesting(3, absl::Seconds(10)));

  std::vector<StepSample> out = {StepSample{}};  // appended to, not replaced
  collector->RecentSteps(r + kSkew, r + 200 * kMs + kSkew, 10, &out);
  ASSERT_EQ(out.size(), 4u);
  EXPECT_EQ(out[1].end_wall_ns, r + 100 * kMs + kSkew);
  EXPECT_EQ(out[1].duration_ns, 100 * kMs);
  EXPECT_EQ(out[1].step_num, 5);
  EXPECT_EQ(out[1].source, "cupti pid 10 rank 0");
  EXPECT_EQ(out[2].end_wall_ns, r + 150 * kMs + kSkew);
  EXPECT_EQ(out[2].duration_ns, 90 * kMs);
  EXPECT_EQ(out[2].step_num, 40);
  EXPECT_EQ(out[2].source, "cupti pid 20");
  EXPECT_EQ(out[3].step_num, 6);
  // since is exclusive, now inclusive, on the agent's clock.
  out.clear();
  collector->RecentSteps(r + 100 * kMs + kSkew, r + 150 * kMs + kSkew, 10, &out);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].step_num, 40);
  // The bounds are the agent's: (r+95 ms, r+145 ms] there is (r+106 ms, r+156 ms] in realtime.
  out.clear();
  collector->RecentSteps(r + 95 * kMs, r + 145 * kMs, 10, &out);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].step_num, 40);
  // The latest `max`, oldest first; extreme bounds do not overflow.
  out.clear();
  collector->RecentSteps(INT64_MIN, INT64_MAX, 2, &out);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].step_num, 40);
  EXPECT_EQ(out[1].step_num, 6);
  // During a capture too.
  ASSERT_TRUE(collector->Prepare({"s", clock_.WallNs() + kSec, kSec}).ok());
  a->ExpectEnable();
  b->ExpectEnable();
  a->SendSteps({{r + 200 * kMs, r + 300 * kMs, 7}});
  ASSERT_TRUE(server_->WaitForStepSamplesForTesting(4, absl::Seconds(10)));
  out.clear();
  collector->RecentSteps(r + 200 * kMs + kSkew, INT64_MAX, 10, &out);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].step_num, 7);
  collector->Abort();
  // No server: no steps, still a step signal.
  CuptiCollector without(nullptr, {}, &clock_);
  out.clear();
  without.RecentSteps(INT64_MIN, INT64_MAX, 10, &out);
  EXPECT_TRUE(out.empty());
}

}  // namespace
}  // namespace profctl::agent::cupti
