// Building, reading and validating XSpace traces (tensorflow.profiler.XSpace).
//
// Event times in XSpace are XLine.timestamp_ns + XEvent.offset_ps. Absolute picoseconds since the
// epoch overflow int64, so everything here works in absolute nanoseconds and converts offsets.
#ifndef PROFCTL_COMMON_XSPACE_H_
#define PROFCTL_COMMON_XSPACE_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "tensorflow/profiler/xplane.pb.h"

namespace profctl::xspace {

using tensorflow::profiler::XEvent;
using tensorflow::profiler::XEventMetadata;
using tensorflow::profiler::XLine;
using tensorflow::profiler::XPlane;
using tensorflow::profiler::XSpace;
using tensorflow::profiler::XStat;
using tensorflow::profiler::XStatMetadata;

// Well-known plane, line and stat names (TSL_WIRE.md).
inline constexpr absl::string_view kHostPlaneName = "/host:CPU";
inline constexpr absl::string_view kGpuPlanePrefix = "/device:GPU:";
inline constexpr absl::string_view kTaskEnvPlaneName = "Task Environment";
inline constexpr absl::string_view kStatStepNum = "step_num";
inline constexpr absl::string_view kStatIsRoot = "_r";
inline constexpr absl::string_view kStatCorrelationId = "correlation_id";
inline constexpr absl::string_view kStatDeviceId = "device_id";
inline constexpr absl::string_view kStatKernelDetails = "kernel_details";
inline constexpr absl::string_view kStatMemcpyDetails = "memcpy_details";
inline constexpr absl::string_view kStatProfileStart = "profile_start_time";
inline constexpr absl::string_view kStatProfileStop = "profile_stop_time";

// Appends to one plane, interning event and stat names. The plane must outlive the builder.
class XPlaneBuilder {
 public:
  XPlaneBuilder(XPlane* plane, int64_t id, absl::string_view name);

  int64_t EventMetadataId(absl::string_view name);
  int64_t StatMetadataId(absl::string_view name);
  // A line whose events are stored relative to `timestamp_ns`; events must not start before it.
  XLine* AddLine(int64_t id, absl::string_view name, int64_t timestamp_ns);
  XEvent* AddEvent(XLine* line, int64_t metadata_id, int64_t start_ns, int64_t duration_ns);

  void AddStat(XEvent* event, int64_t stat_id, int64_t v);
  void AddStat(XEvent* event, int64_t stat_id, uint64_t v);
  void AddStat(XEvent* event, int64_t stat_id, absl::string_view v);
  void AddPlaneStat(int64_t stat_id, int64_t v);

  XPlane* plane() { return plane_; }

 private:
  XPlane* plane_;
  absl::flat_hash_map<std::string, int64_t> event_ids_;
  absl::flat_hash_map<std::string, int64_t> stat_ids_;
};

// Absolute start of an event in nanoseconds.
inline int64_t EventStartNs(const XLine& line, const XEvent& event) {
  return line.timestamp_ns() + event.offset_ps() / 1000;
}
inline int64_t EventDurationNs(const XEvent& event) { return event.duration_ps() / 1000; }

// Read access to one plane with names resolved.
class XPlaneReader {
 public:
  explicit XPlaneReader(const XPlane& plane);
  absl::string_view EventName(const XEvent& event) const;
  std::optional<int64_t> StatId(absl::string_view name) const;
  // The stat named `name` on `event` as an integer (int64 or uint64 value), if present.
  std::optional<int64_t> IntStat(const XEvent& event, absl::string_view name) const;
  std::optional<std::string> StrStat(const XEvent& event, absl::string_view name) const;
  // Calls fn for every event of every line, in stored order.
  void ForEachEvent(absl::FunctionRef<void(const XLine&, const XEvent&)> fn) const;
  const XPlane& plane() const { return plane_; }

 private:
  const XPlane& plane_;
  absl::flat_hash_map<std::string, int64_t> stat_ids_;
};

const XPlane* FindPlane(const XSpace& space, absl::string_view name);

// Total number of events in the space.
int64_t CountEvents(const XSpace& space);

// Checks what consumers rely on, for traces that came from elsewhere: every event's metadata id is
// defined in its plane, offsets and durations are not negative, stat ids are defined, plane names
// are set. The error names the plane, line and event index.
absl::Status Validate(const XSpace& space);

}  // namespace profctl::xspace

#endif  // PROFCTL_COMMON_XSPACE_H_
