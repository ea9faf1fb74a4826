// The aligned pod timeline in Chrome trace-event JSON (opens in Perfetto and chrome://tracing).
//
// One process per (host, plane) named "<host> <plane>", one thread per line named after it, one
// complete ("X") event per XEvent with its stats as args. Each host's times are moved onto the
// coordinator's clock by subtracting its measured offset, then made relative to `base_ns`, so
// timestamps stay small enough for exact microsecond decimals.
#ifndef PROFCTL_COORDINATOR_TRACE_JSON_H_
#define PROFCTL_COORDINATOR_TRACE_JSON_H_

#include <cstdint>
#include <string>
#include <vector>

#include "tensorflow/profiler/xplane.pb.h"

namespace profctl::coordinator {

struct HostTrace {
  std::string host;
  const tensorflow::profiler::XSpace* space = nullptr;
  int64_t offset_ns = 0;  // host clock - coordinator clock
};

std::string PodTraceJson(const std::vector<HostTrace>& hosts, int64_t base_ns);

}  // namespace profctl::coordinator

#endif  // PROFCTL_COORDINATOR_TRACE_JSON_H_
