// Loopback helpers shared by multi-process tests and benchmarks (header-only: the benchmarks
// build with tests off).
#ifndef PROFCTL_TESTS_LOOPBACK_H_
#define PROFCTL_TESTS_LOOPBACK_H_

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>

#include "absl/strings/str_cat.h"

namespace profctl::testing {

// A loopback port with nothing listening: bound by the kernel's choice, then closed. No fixed
// port is ever assumed.
inline int ClosedLoopbackPort() {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  close(fd);
  return ntohs(addr.sin_port);
}

// "127.0.0.1:<port>".
inline std::string LoopbackAddress(int port) { return absl::StrCat("127.0.0.1:", port); }

}  // namespace profctl::testing

#endif  // PROFCTL_TESTS_LOOPBACK_H_
