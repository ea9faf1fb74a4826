#include "inject/inject_client.h"

#include <gtest/gtest.h>
#include <poll.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "inject/fake_agent_socket.h"

namespace profctl::inject {
namespace {

// The fake agent's waits are on real sockets, bounded by this deadline (never a sleep).
constexpr int kTimeoutMs = 10'000;

class FakeTracer : public Tracer {
 public:
  std::string Unavailable() override {
    std::lock_guard<std::mutex> lock(mu);
    return unavailable;
  }
  bool Enable(std::string* error, int64_t* gpu_minus_wall_ns) override {
    std::lock_guard<std::mutex> lock(mu);
    ++enables;
    if (!enable_error.empty()) {
      *error = enable_error;
      return false;
    }
    *gpu_minus_wall_ns = 123;
    recording = true;
    return true;
  }
  void Disable() override {
    std::lock_guard<std::mutex> lock(mu);
    ++disables;
    recording = false;
  }
  uint64_t Flush(const std::function<void(std::vector<uint8_t>)>& sink) override {
    {
      std::lock_guard<std::mutex> lock(mu);
      ++flushes;
    }
    sink(std::vector<uint8_t>(64, 1));
    sink(std::vector<uint8_t>(128, 2));
    return 7;
  }
  void Discard() override {
    std::lock_guard<std::mutex> lock(mu);
    ++discards;
  }
  void TakeReady(const std::function<void(std::vector<uint8_t>)>& sink) override {
    std::vector<std::vector<uint8_t>> batches;
    {
      std::lock_guard<std::mutex> lock(mu);
      batches.swap(ready);
    }
    for (auto& b : batches) sink(std::move(b));
  }
  void PollSteps() override {
    std::lock_guard<std::mutex> lock(mu);
    ++step_polls;
  }
  void PollStepsNow(bool idle) override {
    std::lock_guard<std::mutex> lock(mu);
    now_polls.push_back(idle);
  }
  size_t TakeSteps(StepSampleEntry* out, size_t max) override {
    std::lock_guard<std::mutex> lock(mu);
    size_t n = 0;
    while (n < max && n < steps.size()) {
      out[n] = steps[n];
      ++n;
    }
    steps.erase(steps.begin(), steps.begin() + static_cast<ptrdiff_t>(n));
    return n;
  }
  void AddSteps(int64_t first, int count) {
    std::lock_guard<std::mutex> lock(mu);
    for (int i = 0; i < count; ++i) {
      const int64_t step = first + i;
      steps.push_back({step * 1'000, step * 1'000 + 700, step});
    }
  }
  bool SetCollectiveLaunches(bool on, std::string* error) override {
    std::lock_guard<std::mutex> lock(mu);
    light_calls.push_back(on);
    if (on && !light_error.empty()) {
      *error = light_error;
      return false;
    }
    return true;
  }
  size_t TakeLaunches(CollectiveLaunchEntry* out, size_t max) override {
    std::lock_guard<std::mutex> lock(mu);
    size_t n = 0;
    while (n < max && n < launches.size()) {
      out[n] = launches[n];
      ++n;
    }
    launches.erase(launches.begin(), launches.begin() + static_cast<ptrdiff_t>(n));
    return n;
  }
  std::string_view LaunchName(uint32_t id) override {
    return id == 5 ? "ncclDevKernel_AllReduce_Sum_f32_RING_LL" : "ncclDevKernel_AllGather_RING_LL";
  }
  uint64_t TakeLaunchesDropped() override {
    std::lock_guard<std::mutex> lock(mu);
    return std::exchange(launches_dropped, 0);
  }
  void ClearLaunches() override {
    std::lock_guard<std::mutex> lock(mu);
    launches_dropped += launches.size();
    launches.clear();
  }
  void AddLaunch(int64_t wall_ns, uint64_t seq, uint32_t name_id) {
    std::lock_guard<std::mutex> lock(mu);
    launches.push_back({wall_ns, seq, /*tid=*/31, name_id});
  }
  std::vector<bool> LightCalls() {
    std::lock_guard<std::mutex> lock(mu);
    return light_calls;
  }
  std::vector<CollectiveLaunchEntry> launches;
  uint64_t launches_dropped = 0;
  std::vector<bool> light_calls;
  std::string light_error;
  std::vector<std::vector<uint8_t>> ready;
  std::vector<StepSampleEntry> steps;
  int step_polls = 0;
  std::vector<bool> now_polls;  // PollStepsNow's `idle`, in order

  std::mutex mu;
  std::string unavailable;
  std::string enable_error;
  bool recording = false;
  int enables = 0, disables = 0, flushes = 0, discards = 0;
};

std::atomic<int64_t> g_fake_now{1'000};
int64_t FakeNow() { return g_fake_now.load(); }

class InjectClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/profctl-inject-test-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    path_ = dir_ + "/agent.sock";
    g_fake_now.store(1'000);
  }
  void TearDown() override {
    client_.reset();
    unlink(path_.c_str());
    rmdir(dir_.c_str());
  }
  void StartClient(int64_t step_interval_ms = 1'000) {
    InjectClientOptions options;
    options.step_interval_ms = step_interval_ms;
    options.socket_path = path_;
    options.registration.pid = 4242;
    options.registration.rank = 3;
    SetText(options.registration.hostname, "host-a");
    options.wall_now_ns = &FakeNow;
    options.initial_backoff_ms = 5;
    options.max_backoff_ms = 20;
    options.log_once = [this](const std::string& line) {
      std::lock_guard<std::mutex> lock(tracer_.mu);
      logs_.push_back(line);
    };
    client_ = std::make_unique<InjectClient>(std::move(options), &tracer_);
    client_->Start();
  }
  // The next StepSamples frame's entries (skipping nothing: it must be the next frame).
  std::vector<StepSampleEntry> ReadSteps(FakeAgent* agent) {
    uint16_t type = 0;
    std::vector<uint8_t> payload;
    std::vector<StepSampleEntry> got;
    const char* why = nullptr;
    EXPECT_TRUE(agent->Read(&type, &payload));
    EXPECT_EQ(type, static_cast<uint16_t>(MessageType::kStepSamples));
    EXPECT_TRUE(DecodeStepSamples(payload.data(), payload.size(), &got, &why)) << why;
    return got;
  }
  RegisterMessage AcceptAndRegister(FakeAgent* agent) {
    EXPECT_TRUE(agent->Accept());
    RegisterMessage reg;
    EXPECT_TRUE(agent->ReadMessage(MessageType::kRegister, &reg));
    return reg;
  }

  std::string dir_;
  std::string path_;
  FakeTracer tracer_;
  std::vector<std::string> logs_;
  std::unique_ptr<InjectClient> client_;
};

TEST_F(InjectClientTest, WaitsForAnAgentThenRegisters) {
  StartClient();  // nobody listens yet: it retries quietly
  FakeAgent agent(path_, kTimeoutMs);
  const RegisterMessage reg = AcceptAndRegister(&agent);
  EXPECT_EQ(reg.pid, 4242u);
  EXPECT_EQ(reg.rank, 3);
  EXPECT_EQ(GetText(reg.hostname), "host-a");
  EXPECT_TRUE(logs_.empty());
}

TEST_F(InjectClientTest, RunsAWindowAndStreamsBatches) {
  FakeAgent agent(path_, kTimeoutMs);
  StartClient();
  AcceptAndRegister(&agent);
  EnableMessage enable;
  enable.token = 77;
  enable.start_wall_ns = 500;  // in the past: at once
  agent.Send(MessageType::kEnable, enable);
  StatusMessage s = agent.ReadStatus();
  EXPECT_EQ(s.code, static_cast<uint32_t>(StatusCode::kEnabled));
  EXPECT_EQ(s.token, 77u);
  EXPECT_EQ(s.value1, 123);
  agent.Send(MessageType::kDisable, CommandMessage{77});
  s = agent.ReadStatus();
  EXPECT_EQ(s.code, static_cast<uint32_t>(StatusCode::kDisabled));
  agent.Send(MessageType::kFlush, CommandMessage{77});
  uint16_t type = 0;
  std::vector<uint8_t> payload;
  ASSERT_TRUE(agent.Read(&type, &payload));
  EXPECT_EQ(type, static_cast<uint16_t>(MessageType::kRecordBatch));
  EXPECT_EQ(payload.size(), 64u);
  ASSERT_TRUE(agent.Read(&type, &payload));
  EXPECT_EQ(payload.size(), 128u);
  s = agent.ReadStatus();
  EXPECT_EQ(s.code, static_cast<uint32_t>(StatusCode::kFlushDone));
  EXPECT_EQ(s.dropped, 7u);
  std::lock_guard<std::mutex> lock(tracer_.mu);
  EXPECT_EQ(tracer_.enables, 1);
  EXPECT_EQ(tracer_.flushes, 1);
  EXPECT_EQ(tracer_.discards, 0);
}

TEST_F(InjectClientTest, StreamsFinishedBatchesDuringTheWindow) {
  FakeAgent agent(path_, kTimeoutMs);
  StartClient();
  AcceptAndRegister(&agent);
  EnableMessage enable;
  enable.token = 3;
  agent.Send(MessageType::kEnable, enable);
  EXPECT_EQ(agent.ReadStatus().code, static_cast<uint32_t>(StatusCode::kEnabled));
  {
    std::lock_guard<std::mutex> lock(tracer_.mu);
    tracer_.ready.push_back(std::vector<uint8_t>(32, 9));
  }
  // Arrives within the stream interval, before any Disable or Flush.
  uint16_t type = 0;
  std::vector<uint8_t> payload;
  ASSERT_TRUE(agent.Read(&type, &payload));
  EXPECT_EQ(type, static_cast<uint16_t>(MessageType::kRecordBatch));
  EXPECT_EQ(payload, std::vector<uint8_t>(32, 9));
}

TEST_F(InjectClientTest, EnablesAtTheGivenWallClockInstant) {
  FakeAgent agent(path_, kTimeoutMs);
  StartClient();
  AcceptAndRegister(&agent);
  EnableMessage enable;
  enable.token = 1;
  enable.start_wall_ns = 5'000'000;  // 5 ms after the fake clock's now
  agent.Send(MessageType::kEnable, enable);
  // A Disable/Flush round trip proves the client saw the Enable without starting early.
  agent.Send(MessageType::kFlush, CommandMessage{999});
  EXPECT_EQ(agent.ReadStatus().code, static_cast<uint32_t>(StatusCode::kFlushDone));
  {
    std::lock_guard<std::mutex> lock(tracer_.mu);
    EXPECT_EQ(tracer_.enables, 0);
  }
  g_fake_now.store(5'000'000);
  const StatusMessage s = agent.ReadStatus();
  EXPECT_EQ(s.code, static_cast<uint32_t>(StatusCode::kEnabled));
  EXPECT_EQ(s.value0, 5'000'000);
}

TEST_F(InjectClientTest, StopsAtTheWindowEndWithoutTheAgent) {
  FakeAgent agent(path_, kTimeoutMs);
  StartClient();
  AcceptAndRegister(&agent);
  EnableMessage enable;
  enable.token = 2;
  enable.start_wall_ns = 0;
  enable.end_wall_ns = 2'000'000;
  agent.Send(MessageType::kEnable, enable);
  EXPECT_EQ(agent.ReadStatus().code, static_cast<uint32_t>(StatusCode::kEnabled));
  g_fake_now.store(2'000'000);
  // The next command is answered after the client's own stop; Flush still delivers.
  agent.Send(MessageType::kFlush, CommandMessage{2});
  uint16_t type = 0;
  std::vector<uint8_t> payload;
  ASSERT_TRUE(agent.Read(&type, &payload));
  EXPECT_EQ(type, static_cast<uint16_t>(MessageType::kRecordBatch));
  std::lock_guard<std::mutex> lock(tracer_.mu);
  EXPECT_GE(tracer_.disables, 1);
  EXPECT_FALSE(tracer_.recording);
}

TEST_F(InjectClientTest, ReportsUnavailableTracing) {
  tracer_.unavailable = "held by another CUPTI subscriber (Nsight Systems)";
  FakeAgent agent(path_, kTimeoutMs);
  StartClient();
  AcceptAndRegister(&agent);
  StatusMessage s = agent.ReadStatus();  // unprompted, right after Register
  EXPECT_EQ(s.code, static_cast<uint32_t>(StatusCode::kUnavailable));
  EXPECT_EQ(s.token, 0u);
  EXPECT_EQ(GetText(s.text), "held by another CUPTI subscriber (Nsight Systems)");
  EnableMessage enable;
  enable.token = 5;
  agent.Send(MessageType::kEnable, enable);
  s = agent.ReadStatus();
  EXPECT_EQ(s.code, static_cast<uint32_t>(StatusCode::kUnavailable));
  EXPECT_EQ(s.token, 5u);
  std::lock_guard<std::mutex> lock(tracer_.mu);
  EXPECT_EQ(tracer_.enables, 0);
}

TEST_F(InjectClientTest, EnableErrorIsReportedAndLoggedOnce) {
  tracer_.enable_error = "cuptiActivityEnable(CONCURRENT_KERNEL): CUPTI_ERROR_UNKNOWN";
  FakeAgent agent(path_, kTimeoutMs);
  StartClient();
  AcceptAndRegister(&agent);
  EnableMessage enable;
  enable.token = 6;
  agent.Send(MessageType::kEnable, enable);
  const StatusMessage s = agent.ReadStatus();
  EXPECT_EQ(s.code, static_cast<uint32_t>(StatusCode::kError));
  EXPECT_EQ(GetText(s.text), tracer_.enable_error);
  agent.Send(MessageType::kFlush, CommandMessage{6});
  EXPECT_EQ(agent.ReadStatus().code, static_cast<uint32_t>(StatusCode::kFlushDone));
  std::lock_guard<std::mutex> lock(tracer_.mu);
  EXPECT_EQ(logs_.size(), 1u);
}

TEST_F(InjectClientTest, AgentVanishingMidCaptureDiscardsAndReconnects) {
  FakeAgent agent(path_, kTimeoutMs);
  StartClient();
  AcceptAndRegister(&agent);
  EnableMessage enable;
  enable.token = 8;
  agent.Send(MessageType::kEnable, enable);
  EXPECT_EQ(agent.ReadStatus().code, static_cast<uint32_t>(StatusCode::kEnabled));
  agent.CloseClient();  // the agent goes away while recording
  AcceptAndRegister(&agent);
  std::lock_guard<std::mutex> lock(tracer_.mu);
  EXPECT_FALSE(tracer_.recording);
  EXPECT_EQ(tracer_.discards, 1);
  EXPECT_EQ(client_->registrations_for_testing(), 2);
}

TEST_F(InjectClientTest, GarbageFromTheAgentDropsTheConnectionOnly) {
  FakeAgent agent(path_, kTimeoutMs);
  StartClient();
  AcceptAndRegister(&agent);
  agent.SendRaw(std::vector<uint8_t>(100, 0xAB));
  AcceptAndRegister(&agent);  // it reconnected
  // Unknown message types are skipped.
  std::vector<uint8_t> unknown;
  AppendFrame(static_cast<MessageType>(77), "xyz", 3, &unknown);
  agent.SendRaw(unknown);
  agent.Send(MessageType::kFlush, CommandMessage{1});
  EXPECT_EQ(agent.ReadStatus().code, static_cast<uint32_t>(StatusCode::kFlushDone));
}

TEST_F(InjectClientTest, AForkedChildLetsGoOfTheConnection) {
  FakeAgent agent(path_, kTimeoutMs);
  StartClient();
  AcceptAndRegister(&agent);
  const pid_t child = fork();
  if (child == 0) {
    client_->CloseInheritedConnectionInChild();
    _exit(0);
  }
  ASSERT_GT(child, 0);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  // The parent's connection is unharmed.
  agent.Send(MessageType::kFlush, CommandMessage{1});
  EXPECT_EQ(agent.ReadStatus().code, static_cast<uint32_t>(StatusCode::kFlushDone));
}

TEST_F(InjectClientTest, SendsStepSamplesBetweenCapturesInFullFrames) {
  FakeAgent agent(path_, kTimeoutMs);
  StartClient(/*step_interval_ms=*/5);
  AcceptAndRegister(&agent);
  // A round trip: the client is past its connect-time cleanup before steps appear.
  agent.Send(MessageType::kFlush, CommandMessage{1});
  EXPECT_EQ(agent.ReadStatus().code, static_cast<uint32_t>(StatusCode::kFlushDone));
  tracer_.AddSteps(/*first=*/1, /*count=*/3);
  std::vector<StepSampleEntry> got = ReadSteps(&agent);
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(got[0].step_num, 1);
  EXPECT_EQ(got[0].start_wall_ns, 1'000);
  EXPECT_EQ(got[0].end_wall_ns, 1'700);
  EXPECT_EQ(got[2].step_num, 3);
  // More than a frame holds: full frames at once, the rest in a short one.
  tracer_.AddSteps(/*first=*/100, /*count=*/kMaxStepSamplesPerFrame + 10);
  got = ReadSteps(&agent);
  ASSERT_EQ(got.size(), kMaxStepSamplesPerFrame);
  EXPECT_EQ(got.front().step_num, 100);
  got = ReadSteps(&agent);
  ASSERT_EQ(got.size(), 10u);
  EXPECT_EQ(got.back().step_num, static_cast<int64_t>(100 + kMaxStepSamplesPerFrame + 9));
  // Steps keep flowing during a window.
  EnableMessage enable;
  enable.token = 4;
  agent.Send(MessageType::kEnable, enable);
  EXPECT_EQ(agent.ReadStatus().code, static_cast<uint32_t>(StatusCode::kEnabled));
  tracer_.AddSteps(/*first=*/7, /*count=*/1);
  got = ReadSteps(&agent);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].step_num, 7);
  // Counted before the next frame went out (the last one may still be on its way).
  EXPECT_GE(client_->step_samples_sent(), 3 + kMaxStepSamplesPerFrame + 10);
  EXPECT_EQ(client_->step_samples_dropped(), 0u);
  std::lock_guard<std::mutex> lock(tracer_.mu);
  EXPECT_GE(tracer_.step_polls, 3);
}

// A flight recorder snapshot asks for the steps held now: they come at once (not at the next
// step-signal round, an hour away here), then PendingSent with the request's token. Idle, the
// tracer may force CUPTI's buffers out; during a window it must not.
TEST_F(InjectClientTest, SendPendingSendsTheStepsHeldNowThenSaysSo) {
  FakeAgent agent(path_, kTimeoutMs);
  StartClient(/*step_interval_ms=*/3'600'000);
  AcceptAndRegister(&agent);
  agent.Send(MessageType::kFlush, CommandMessage{1});
  EXPECT_EQ(agent.ReadStatus().code, static_cast<uint32_t>(StatusCode::kFlushDone));
  tracer_.AddSteps(/*first=*/40, /*count=*/2);
  agent.Send(MessageType::kSendPending, CommandMessage{9});
  std::vector<StepSampleEntry> got = ReadSteps(&agent);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[1].step_num, 41);
  StatusMessage done = agent.ReadStatus();
  EXPECT_EQ(done.code, static_cast<uint32_t>(StatusCode::kPendingSent));
  EXPECT_EQ(done.token, 9u);
  // Nothing held: just the answer.
  agent.Send(MessageType::kSendPending, CommandMessage{10});
  done = agent.ReadStatus();
  EXPECT_EQ(done.code, static_cast<uint32_t>(StatusCode::kPendingSent));
  EXPECT_EQ(done.token, 10u);
  // During a window.
  EnableMessage enable;
  enable.token = 11;
  agent.Send(MessageType::kEnable, enable);
  EXPECT_EQ(agent.ReadStatus().code, static_cast<uint32_t>(StatusCode::kEnabled));
  agent.Send(MessageType::kSendPending, CommandMessage{12});
  EXPECT_EQ(agent.ReadStatus().token, 12u);
  std::lock_guard<std::mutex> lock(tracer_.mu);
  EXPECT_EQ(tracer_.now_polls, (std::vector<bool>{true, true, false}));
}

TEST_F(InjectClientTest, StepSamplesWithNoAgentAreDroppedAndCounted) {
  tracer_.AddSteps(/*first=*/1, /*count=*/5);
  StartClient(/*step_interval_ms=*/5);  // nobody listens
  FakeAgent agent(path_, kTimeoutMs);
  AcceptAndRegister(&agent);
  agent.Send(MessageType::kFlush, CommandMessage{1});
  EXPECT_EQ(agent.ReadStatus().code, static_cast<uint32_t>(StatusCode::kFlushDone));
  EXPECT_EQ(client_->step_samples_dropped(), 5u);
  EXPECT_EQ(client_->step_samples_sent(), 0u);
  // Only steps that end while the agent listens reach it.
  tracer_.AddSteps(/*first=*/9, /*count=*/1);
  const std::vector<StepSampleEntry> got = ReadSteps(&agent);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].step_num, 9);
}

TEST_F(InjectClientTest, TheAgentsRecorderTurnsCollectiveLaunchesOnAndTheyAreSent) {
  tracer_.AddLaunch(/*wall_ns=*/1, /*seq=*/0, /*name_id=*/5);  // waited for an agent: dropped
  FakeAgent agent(path_, kTimeoutMs);
  StartClient(/*step_interval_ms=*/5);
  AcceptAndRegister(&agent);
  RecorderMessage on;
  on.flags = kRecorderFlagCollectiveLaunches;
  agent.Send(MessageType::kRecorder, on);
  agent.Send(MessageType::kRecorder, on);  // repeated: applied once
  // A round trip: the Recorder messages were handled before it.
  agent.Send(MessageType::kFlush, CommandMessage{1});
  EXPECT_EQ(agent.ReadStatus().code, static_cast<uint32_t>(StatusCode::kFlushDone));
  EXPECT_EQ(tracer_.LightCalls(), std::vector<bool>{true});
  EXPECT_TRUE(client_->collective_launches_on());
  tracer_.AddLaunch(/*wall_ns=*/5'000, /*seq=*/1, /*name_id=*/5);
  tracer_.AddLaunch(/*wall_ns=*/6'000, /*seq=*/2, /*name_id=*/9);
  tracer_.AddLaunch(/*wall_ns=*/7'000, /*seq=*/3, /*name_id=*/5);
  // Step frames (none here) come first in a round; the next frame of launches.
  uint16_t type = 0;
  std::vector<uint8_t> payload;
  do {
    ASSERT_TRUE(agent.Read(&type, &payload));
  } while (type != static_cast<uint16_t>(MessageType::kCollectiveLaunches));
  CollectiveLaunchesFrame got;
  const char* why = nullptr;
  ASSERT_TRUE(DecodeCollectiveLaunches(payload.data(), payload.size(), &got, &why)) << why;
  // The one launch that waited for the agent was dropped (by the client) when it came.
  EXPECT_EQ(got.dropped, 0u);
  EXPECT_EQ(client_->launches_dropped(), 1u);
  ASSERT_EQ(got.entries.size(), 3u);
  ASSERT_EQ(got.names.size(), 2u);  // each name once per frame
  EXPECT_EQ(got.entries[0].wall_ns, 5'000);
  EXPECT_EQ(got.entries[2].seq, 3u);
  EXPECT_EQ(got.entries[1].tid, 31u);
  EXPECT_EQ(got.names[got.entries[0].name_index], "ncclDevKernel_AllReduce_Sum_f32_RING_LL");
  EXPECT_EQ(got.names[got.entries[1].name_index], "ncclDevKernel_AllGather_RING_LL");
  EXPECT_EQ(got.entries[0].name_index, got.entries[2].name_index);
  // The agent turns it off; then it goes away with it on again: off again.
  agent.Send(MessageType::kRecorder, RecorderMessage{});
  agent.Send(MessageType::kFlush, CommandMessage{1});
  do {
    ASSERT_TRUE(agent.Read(&type, &payload));
  } while (type != static_cast<uint16_t>(MessageType::kStatus));
  // Counted once the frame was sent, before the client's thread read the Flush.
  EXPECT_EQ(client_->launches_sent(), 3u);
  EXPECT_EQ(tracer_.LightCalls(), (std::vector<bool>{true, false}));
  agent.Send(MessageType::kRecorder, on);
  agent.Send(MessageType::kFlush, CommandMessage{1});
  do {
    ASSERT_TRUE(agent.Read(&type, &payload));
  } while (type != static_cast<uint16_t>(MessageType::kStatus));
  agent.CloseClient();
  AcceptAndRegister(&agent);  // reconnected: the old connection's end was handled
  EXPECT_EQ(tracer_.LightCalls(), (std::vector<bool>{true, false, true, false}));
  EXPECT_FALSE(client_->collective_launches_on());
}

TEST_F(InjectClientTest, ALightLevelTheTracerRefusesStaysOff) {
  tracer_.light_error = "held by another CUPTI subscriber (Kineto)";
  FakeAgent agent(path_, kTimeoutMs);
  StartClient();
  AcceptAndRegister(&agent);
  RecorderMessage on;
  on.flags = kRecorderFlagCollectiveLaunches;
  agent.Send(MessageType::kRecorder, on);
  agent.Send(MessageType::kFlush, CommandMessage{1});
  EXPECT_EQ(agent.ReadStatus().code, static_cast<uint32_t>(StatusCode::kFlushDone));
  EXPECT_FALSE(client_->collective_launches_on());
  EXPECT_TRUE(logs_.empty());  // not worth the process's one stderr line
}

TEST_F(InjectClientTest, StopEndsTheThreadWhileDisconnected) {
  StartClient();
  client_->Stop();
  EXPECT_EQ(client_->registrations_for_testing(), 0);
}

}  // namespace
}  // namespace profctl::inject
