// Waiting out the kernel's TIME_WAIT sockets between whole-system benchmark runs
// (multihost_benchmark, grpc_floor_benchmark).
#ifndef PROFCTL_BENCH_TIME_WAIT_H_
#define PROFCTL_BENCH_TIME_WAIT_H_

#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace profctl::bench {

// TCP sockets in TIME_WAIT ("tw N" in /proc/net/sockstat); -1 when unknown.
inline int64_t TimeWaitSockets() {
  std::ifstream in("/proc/net/sockstat");
  std::stringstream buf;
  buf << in.rdbuf();
  const std::string text = buf.str();
  const size_t at = text.find(" tw ");
  if (at == std::string::npos) return -1;
  const size_t end = text.find_first_of(" \n", at + 4);
  int64_t n = -1;
  return absl::SimpleAtoi(text.substr(at + 4, end - at - 4), &n) ? n : -1;
}

// A 1,024-host run leaves about 8,000 loopback connections in TIME_WAIT for 60 s, and while they
// linger every new connection costs the kernel more (picking an ephemeral port walks them): runs
// back to back got slower one after the other (wall - duration 2.1 s -> 3.2 s over 6 runs).
// Waits, at most 75 s, until fewer than 100 are left; returns the seconds waited.
inline double AwaitTimeWaitDrained() {
  const absl::Time start = absl::Now();
  while (TimeWaitSockets() >= 100 && absl::Now() - start < absl::Seconds(75)) {
    absl::SleepFor(absl::Seconds(1));
  }
  return absl::ToDoubleSeconds(absl::Now() - start);
}

}  // namespace profctl::bench

#endif  // PROFCTL_BENCH_TIME_WAIT_H_
