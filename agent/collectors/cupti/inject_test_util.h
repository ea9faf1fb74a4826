// Test helpers: a temporary folder and a fake injected process that speaks
// inject/socket_protocol.h over a real Unix socket, step by step from the test's thread. Every
// wait is a poll() with a deadline, never a sleep.
#ifndef PROFCTL_AGENT_COLLECTORS_CUPTI_INJECT_TEST_UTIL_H_
#define PROFCTL_AGENT_COLLECTORS_CUPTI_INJECT_TEST_UTIL_H_

#include <gtest/gtest.h>
#include <poll.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "inject/inject_client.h"
#include "inject/read_frame_for_tests.h"
#include "inject/record_batch_writer.h"
#include "inject/records.h"
#include "inject/socket_protocol.h"

namespace profctl::agent::cupti::testing_util {

inline constexpr int kTimeoutMs = 10'000;

class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/profctl-cupti-test-XXXXXX";
    path_ = mkdtemp(tmpl) != nullptr ? tmpl : "/tmp";
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

class FakeProcess {
 public:
  explicit FakeProcess(const std::string& socket_path) {
    fd_ = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::memcpy(addr.sun_path, socket_path.c_str(), socket_path.size() + 1);
    if (connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
      close(fd_);
      fd_ = -1;
    }
  }
  ~FakeProcess() {
    if (fd_ >= 0) close(fd_);
  }
  FakeProcess(const FakeProcess&) = delete;
  FakeProcess& operator=(const FakeProcess&) = delete;

  bool connected() const { return fd_ >= 0; }

  void Register(uint32_t pid, int32_t rank, const std::string& visible_devices = "") {
    inject::RegisterMessage m;
    m.pid = pid;
    m.rank = rank;
    inject::SetText(m.visible_devices, visible_devices);
    inject::SetText(m.hostname, "fake-host");
    inject::SetText(m.process_name, "python3");
    Send(inject::MessageType::kRegister, m);
  }
  template <typename M>
  void Send(inject::MessageType type, const M& m) {
    std::vector<uint8_t> out;
    inject::AppendMessage(type, m, &out);
    SendRaw(out);
  }
  void SendRaw(const std::vector<uint8_t>& bytes) {
    // The server may close us first (that is what some tests check): ignore failures.
    inject::SendAll(fd_, bytes.data(), bytes.size(), kTimeoutMs);
  }
  void SendStatus(uint64_t token, inject::StatusCode code, int64_t v0 = 0, int64_t v1 = 0,
                  const std::string& text = "", uint64_t dropped = 0) {
    inject::StatusMessage m;
    m.token = token;
    m.code = static_cast<uint32_t>(code);
    m.value0 = v0;
    m.value1 = v1;
    m.dropped = dropped;
    inject::SetText(m.text, text);
    Send(inject::MessageType::kStatus, m);
  }
  void SendBatch(const std::vector<uint8_t>& batch) {
    std::vector<uint8_t> out;
    inject::AppendFrame(inject::MessageType::kRecordBatch, batch.data(), batch.size(), &out);
    SendRaw(out);
  }

  // One StepSamples frame, as the library sends it.
  void SendSteps(const std::vector<inject::StepSampleEntry>& samples) {
    std::vector<uint8_t> out;
    inject::AppendStepSamples(samples.data(), samples.size(), &out);
    SendRaw(out);
  }

  // One CollectiveLaunches frame, as the library sends it: `names[i]` is name index i.
  void SendLaunches(const std::vector<inject::CollectiveLaunchEntry>& launches,
                    const std::vector<std::string_view>& names, uint64_t dropped = 0) {
    std::vector<uint8_t> out;
    inject::AppendCollectiveLaunches(launches.data(), launches.size(), names.data(), names.size(),
                                     dropped, &out);
    SendRaw(out);
  }
  // The next frame must be Recorder; its flags.
  uint32_t ExpectRecorder() {
    uint16_t type = 0;
    std::vector<uint8_t> payload;
    inject::RecorderMessage m;
    EXPECT_TRUE(Read(&type, &payload));
    EXPECT_EQ(type, static_cast<uint16_t>(inject::MessageType::kRecorder));
    EXPECT_TRUE(inject::DecodeMessage(payload.data(), payload.size(), &m));
    return m.flags;
  }

  bool Read(uint16_t* type, std::vector<uint8_t>* payload) {
    return inject::ReadFrameForTests(fd_, &decoder_, kTimeoutMs, type, payload);
  }
  inject::EnableMessage ExpectEnable() {
    uint16_t type = 0;
    std::vector<uint8_t> payload;
    inject::EnableMessage m;
    EXPECT_TRUE(Read(&type, &payload));
    EXPECT_EQ(type, static_cast<uint16_t>(inject::MessageType::kEnable));
    EXPECT_TRUE(inject::DecodeMessage(payload.data(), payload.size(), &m));
    return m;
  }
  // Reads Disable and Flush for `token`, answers them, sends `batches` and kFlushDone.
  void AnswerDisableAndFlush(uint64_t token, const std::vector<std::vector<uint8_t>>& batches,
                             uint64_t dropped = 0) {
    for (inject::MessageType want : {inject::MessageType::kDisable, inject::MessageType::kFlush}) {
      uint16_t type = 0;
      std::vector<uint8_t> payload;
      ASSERT_TRUE(Read(&type, &payload));
      ASSERT_EQ(type, static_cast<uint16_t>(want));
      inject::CommandMessage m;
      ASSERT_TRUE(inject::DecodeMessage(payload.data(), payload.size(), &m));
      EXPECT_EQ(m.token, token);
    }
    SendStatus(token, inject::StatusCode::kDisabled);
    for (const std::vector<uint8_t>& b : batches) SendBatch(b);
    SendStatus(token, inject::StatusCode::kFlushDone, 0, 0, "", dropped);
  }
  // True once the server closed the connection (EOF within the deadline).
  bool WaitClosed() {
    for (;;) {
      pollfd p{fd_, POLLIN, 0};
      if (poll(&p, 1, kTimeoutMs) != 1) return false;
      uint8_t buf[4096];
      const ssize_t n = recv(fd_, buf, sizeof(buf), 0);
      if (n <= 0) return true;
    }
  }

  // A valid batch with one kernel of process `pid`, and its launch 500 ns before it (device work
  // whose launch was not recorded is left out).
  static std::vector<uint8_t> SmallBatch(uint32_t pid, uint64_t start_ns = 1'000,
                                         uint64_t end_ns = 2'000, int64_t gpu_minus_wall = 0) {
    inject::RecordBatchWriter writer(1 << 20);
    inject::ApiRecord a;
    a.start_ns = start_ns - 500;
    a.end_ns = start_ns - 400;
    a.pid = pid;
    a.tid = pid;
    a.correlation_id = 1;
    a.domain = static_cast<uint8_t>(inject::ApiDomain::kRuntime);
    a.name = writer.Intern("cudaLaunchKernel");
    writer.Add(a);
    inject::KernelRecord k;
    k.start_ns = start_ns;
    k.end_ns = end_ns;
    k.stream_id = 7;
    k.correlation_id = 1;
    k.grid[0] = k.grid[1] = k.grid[2] = 1;
    k.block[0] = 128;
    k.block[1] = k.block[2] = 1;
    k.name = writer.Intern("matmul_kernel");
    writer.Add(k);
    return writer.Finish(pid, gpu_minus_wall, 0);
  }

 private:
  int fd_ = -1;
  inject::FrameDecoder decoder_;
};

}  // namespace profctl::agent::cupti::testing_util

#endif  // PROFCTL_AGENT_COLLECTORS_CUPTI_INJECT_TEST_UTIL_H_
