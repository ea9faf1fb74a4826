#include "report/pod_trace_flows.h"

#include <algorithm>
#include <iterator>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "xspace/xspace.h"

namespace profctl::report::pod_trace {

using tensorflow::profiler::XEvent;
using tensorflow::profiler::XLine;
using tensorflow::profiler::XPlane;
using tensorflow::profiler::XSpace;
using tensorflow::profiler::XStat;

PlaneKind KindOf(const XPlane& plane) {
  if (absl::StartsWith(plane.name(), "/host:")) return PlaneKind::kHost;
  if (absl::StartsWith(plane.name(), "/device:")) return PlaneKind::kDevice;
  return PlaneKind::kOther;
}

std::optional<uint64_t> IntStat(const XEvent& event, std::optional<int64_t> stat_id) {
  if (!stat_id.has_value()) return std::nullopt;
  for (const XStat& st : event.stats()) {
    if (st.metadata_id() != *stat_id) continue;
    if (st.value_case() == XStat::kUint64Value) return st.uint64_value();
    if (st.value_case() == XStat::kInt64Value) return static_cast<uint64_t>(st.int64_value());
    return std::nullopt;
  }
  return std::nullopt;
}

std::optional<size_t> FlowIndex::Find(uint64_t corr) const {
  auto it = std::lower_bound(matched.begin(), matched.end(), corr);
  if (it == matched.end() || *it != corr) return std::nullopt;
  return static_cast<size_t>(it - matched.begin());
}

FlowIndex IndexFlows(const XSpace& space, int64_t max_planes) {
  FlowIndex index;
  std::vector<uint64_t> launches;
  std::vector<uint64_t> device;
  int64_t number = -1;
  for (const XPlane& plane : space.planes()) {
    if (plane.lines_size() == 0) continue;
    if (++number >= max_planes) break;
    const PlaneKind kind = KindOf(plane);
    if (kind == PlaneKind::kOther) continue;
    int64_t ordinal = 0;
    if (absl::StartsWith(plane.name(), xspace::kGpuPlanePrefix) &&
        absl::SimpleAtoi(plane.name().substr(xspace::kGpuPlanePrefix.size()), &ordinal)) {
      index.gpu_plane.emplace(ordinal, number);
    }
    const std::optional<int64_t> corr_id =
        xspace::XPlaneReader(plane).StatId(xspace::kStatCorrelationId);
    if (!corr_id.has_value()) continue;
    std::vector<uint64_t>& ids = kind == PlaneKind::kHost ? launches : device;
    for (const XLine& line : plane.lines()) {
      for (const XEvent& event : line.events()) {
        if (event.data_case() == XEvent::kNumOccurrences) continue;
        if (std::optional<uint64_t> c = IntStat(event, corr_id)) ids.push_back(*c);
      }
    }
  }
  for (std::vector<uint64_t>* ids : {&launches, &device}) {
    std::sort(ids->begin(), ids->end());
    ids->erase(std::unique(ids->begin(), ids->end()), ids->end());
  }
  std::set_intersection(launches.begin(), launches.end(), device.begin(), device.end(),
                        std::back_inserter(index.matched));
  index.started.assign(index.matched.size(), 0);
  index.finished.assign(index.matched.size(), 0);
  return index;
}

}  // namespace profctl::report::pod_trace
