// What both pod trace writers (pod_trace_writer.h: Chrome JSON; pod_perfetto_trace.h: Perfetto's
// protobuf) find in a host's trace before rendering it: which launches and device work a flow
// arrow joins, and which plane shows each GPU. Internal to report/.
#ifndef PROFCTL_REPORT_POD_TRACE_FLOWS_H_
#define PROFCTL_REPORT_POD_TRACE_FLOWS_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <vector>

#include "tensorflow/profiler/xplane.pb.h"

namespace profctl::report::pod_trace {

enum class PlaneKind { kHost, kDevice, kOther };
PlaneKind KindOf(const tensorflow::profiler::XPlane& plane);

// The stat `stat_id` of `event` as an integer (int64 or uint64 value), if present.
std::optional<uint64_t> IntStat(const tensorflow::profiler::XEvent& event,
                                std::optional<int64_t> stat_id);

// The correlation ids with both a launch (a host-plane event carrying one) and device work (a
// device-plane event carrying it), and which plane shows each GPU. Planes are numbered as the
// writers number them: the planes with lines, in order, 0 for the first; only the first
// `max_planes` of them are looked at (the writers leave the rest out). Memory: 8 bytes per
// correlated event while it is built, then 10 bytes per matched id.
struct FlowIndex {
  std::vector<uint64_t> matched;         // sorted, unique
  std::vector<uint8_t> started;          // per matched id: its launch end was written
  std::vector<uint8_t> finished;         // per matched id: its device end was written
  std::map<int64_t, int64_t> gpu_plane;  // device ordinal -> its "/device:GPU:<n>" plane's number

  // The index of `corr` in `matched`, if both ends are in the trace.
  std::optional<size_t> Find(uint64_t corr) const;
};
FlowIndex IndexFlows(const tensorflow::profiler::XSpace& space, int64_t max_planes);

}  // namespace profctl::report::pod_trace

#endif  // PROFCTL_REPORT_POD_TRACE_FLOWS_H_
