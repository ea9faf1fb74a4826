// Tests only: the next frame (socket_protocol.h) from a socket, waiting at most `timeout_ms` for
// each read: the shared reading loop of the tests that play either end of the injection
// library's socket (inject/fake_agent_socket.h, agent/collectors/cupti/inject_test_util.h).
#ifndef PROFCTL_INJECT_READ_FRAME_FOR_TESTS_H_
#define PROFCTL_INJECT_READ_FRAME_FOR_TESTS_H_

#include <poll.h>
#include <sys/socket.h>

#include <cstdint>
#include <vector>

#include "inject/socket_protocol.h"

namespace profctl::inject {

// True with the next frame; false at a decoding error, when a read waited `timeout_ms` in vain,
// or when the peer closed. Bytes read past the frame stay in `decoder`.
inline bool ReadFrameForTests(int fd, FrameDecoder* decoder, int timeout_ms, uint16_t* type,
                              std::vector<uint8_t>* payload) {
  for (;;) {
    const FrameDecoder::Result r = decoder->Next(type, payload);
    if (r == FrameDecoder::Result::kFrame) return true;
    if (r == FrameDecoder::Result::kError) return false;
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, timeout_ms) != 1) return false;
    uint8_t buf[4096];
    const ssize_t n = recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) return false;
    decoder->Feed(buf, static_cast<size_t>(n));
  }
}

}  // namespace profctl::inject

#endif  // PROFCTL_INJECT_READ_FRAME_FOR_TESTS_H_
