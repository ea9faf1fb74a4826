// Tests only: the agent's end of the injection library's socket (socket_protocol.h), listening
// on a Unix path: accept the library's connection, read its frames, send it messages. Every wait
// is bounded by `timeout_ms` (a failure, never a sleep).
#ifndef PROFCTL_INJECT_FAKE_AGENT_SOCKET_H_
#define PROFCTL_INJECT_FAKE_AGENT_SOCKET_H_

#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "inject/inject_client.h"
#include "inject/read_frame_for_tests.h"
#include "inject/socket_protocol.h"

namespace profctl::inject {

class FakeAgent {
 public:
  FakeAgent(const std::string& path, int timeout_ms) : timeout_ms_(timeout_ms) {
    listen_fd_ = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
    EXPECT_EQ(bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    EXPECT_EQ(listen(listen_fd_, 8), 0);
  }
  ~FakeAgent() { Close(); }
  FakeAgent(const FakeAgent&) = delete;
  FakeAgent& operator=(const FakeAgent&) = delete;

  // Waits for the library's connection (a new one replaces the last).
  bool Accept() {
    pollfd p{listen_fd_, POLLIN, 0};
    if (poll(&p, 1, timeout_ms_) != 1) return false;
    CloseClient();
    fd_ = accept(listen_fd_, nullptr, nullptr);
    decoder_ = FrameDecoder();
    return fd_ >= 0;
  }
  void CloseClient() {
    if (fd_ >= 0) close(fd_);
    fd_ = -1;
  }
  // Stops listening too.
  void Close() {
    CloseClient();
    if (listen_fd_ >= 0) close(listen_fd_);
    listen_fd_ = -1;
  }
  // The next frame, or false at the deadline or when the client closed.
  bool Read(uint16_t* type, std::vector<uint8_t>* payload) {
    return ReadFrameForTests(fd_, &decoder_, timeout_ms_, type, payload);
  }
  template <typename M>
  bool ReadMessage(MessageType want, M* out) {
    uint16_t type = 0;
    std::vector<uint8_t> payload;
    if (!Read(&type, &payload)) return false;
    EXPECT_EQ(type, static_cast<uint16_t>(want));
    return type == static_cast<uint16_t>(want) &&
           DecodeMessage(payload.data(), payload.size(), out);
  }
  StatusMessage ReadStatus() {
    StatusMessage m;
    EXPECT_TRUE(ReadMessage(MessageType::kStatus, &m));
    return m;
  }
  template <typename M>
  void Send(MessageType type, const M& m) {
    std::vector<uint8_t> out;
    AppendMessage(type, m, &out);
    SendRaw(out);
  }
  void SendRaw(const std::vector<uint8_t>& bytes) {
    ASSERT_TRUE(SendAll(fd_, bytes.data(), bytes.size(), timeout_ms_));
  }

 private:
  int timeout_ms_;
  int listen_fd_ = -1;
  int fd_ = -1;
  FrameDecoder decoder_;
};

}  // namespace profctl::inject

#endif  // PROFCTL_INJECT_FAKE_AGENT_SOCKET_H_
