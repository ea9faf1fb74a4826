// Loopback helpers shared by multi-process tests and benchmarks (header-only: the benchmarks
// build with tests off).
#ifndef PROFCTL_TESTS_LOOPBACK_H_
#define PROFCTL_TESTS_LOOPBACK_H_

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"

namespace profctl::testkit {

// `n` distinct loopback ports with nothing listening, chosen by the kernel (no fixed port is ever
// assumed). All are bound before any is closed: one at a time, the kernel may hand out the same
// port twice, and a worker list that repeats an address is refused.
inline std::vector<int> ClosedLoopbackPorts(int n) {
  std::vector<int> fds, ports;
  for (int i = 0; i < n; ++i) {
    const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(addr);
    bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
    getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
    fds.push_back(fd);
    ports.push_back(ntohs(addr.sin_port));
  }
  for (const int fd : fds) close(fd);
  return ports;
}

// One such port.
inline int ClosedLoopbackPort() { return ClosedLoopbackPorts(1)[0]; }

// "127.0.0.1:<port>".
inline std::string LoopbackAddress(int port) { return absl::StrCat("127.0.0.1:", port); }

}  // namespace profctl::testkit

#endif  // PROFCTL_TESTS_LOOPBACK_H_
