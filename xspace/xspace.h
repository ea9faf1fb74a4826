// Building, reading and validating XSpace traces (tensorflow.profiler.XSpace).
//
// Time on disk, as TSL writes it and XProf reads it (TSL_WIRE.md "How XProf reads an XSpace"):
//   - The profile start P is the uint64 stat `profile_start_time` of the `Task Environment` plane:
//     ns since the Unix epoch on the recording host's own clock (`profile_stop_time` likewise).
//   - XLine.timestamp_ns is relative to P, and an event starts at timestamp_ns + offset_ps / 1000
//     after P. XProf computes timestamp_ns * 1000 + offset_ps in int64 picoseconds, so absolute
//     epoch line timestamps (~1.8e18 ns) overflow there; relative ones do not.
//   - The rule for files without a profile start: P = 0, i.e. line timestamps are absolute
//     (foreign writers, and profctl files written before lines became relative). Only a uint64
//     `profile_start_time` counts, as TSL writes it: older profctl files stored an int64 one next
//     to absolute lines, and reading that as P would count the start twice.
// Every consumer reads times through ProfileStartNs() and EventStartNs()/EventEndNs(); nothing
// adds timestamp_ns and offset_ps itself. Writers pass absolute times to an XPlaneBuilder made
// with the profile start and record the window with SetProfileWindow().
#ifndef PROFCTL_XSPACE_XSPACE_H_
#define PROFCTL_XSPACE_XSPACE_H_

#include <algorithm>
#include <array>
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
inline constexpr absl::string_view kTpuPlanePrefix = "/device:TPU:";
inline constexpr absl::string_view kCustomPlanePrefix = "/device:CUSTOM:";
inline constexpr absl::string_view kTaskEnvPlaneName = "Task Environment";
// TSL's tree of scope-range ids (JAX 0.11 writes it): its plane-level stats are keyed by a scope
// range id (metadata_id) holding the parent's id, not by a stat metadata entry. Validate accepts
// them as they are; XProf reads the plane so.
inline constexpr absl::string_view kScopeRangeCallStackPlaneName = "/host:__ScopeRangeCallStack__";
inline constexpr absl::string_view kStatStepNum = "step_num";
// profctl's own, on a step marker its writer clipped at an edge of the recorded window (the step
// began before the window or ended after it): int64 1. Readers keep such a step as partial; XProf
// ignores the stat. The agent also puts it on any event it clips when it trims a late stop back
// to the window.
inline constexpr absl::string_view kStatStepCut = "profctl_step_cut";
// The tf_op scopes profctl's CUPTI path writes for device work with no framework op: the NVTX
// range it was launched in ("nvtx/forward_backward:ForwardBackward") or its launch call
// ("cuda/cudaLaunchKernel:CudaLaunchKernel"). XProf files them as TensorFlow ops, which its op
// tools need; profctl's own tools know they are not one.
inline constexpr absl::string_view kNvtxOpScope = "nvtx";
inline constexpr absl::string_view kApiOpScope = "cuda";
// Whether a tf_op is one of those.
inline bool IsCuptiDerivedOp(absl::string_view tf_op) {
  for (const absl::string_view scope : {kNvtxOpScope, kApiOpScope}) {
    if (tf_op.size() > scope.size() && tf_op.substr(0, scope.size()) == scope &&
        tf_op[scope.size()] == '/') {
      return true;
    }
  }
  return false;
}
inline constexpr absl::string_view kStatIsRoot = "_r";
inline constexpr absl::string_view kStatCorrelationId = "correlation_id";
inline constexpr absl::string_view kStatDeviceId = "device_id";
inline constexpr absl::string_view kStatKernelDetails = "kernel_details";
inline constexpr absl::string_view kStatMemcpyDetails = "memcpy_details";
inline constexpr absl::string_view kStatProfileStart = "profile_start_time";
inline constexpr absl::string_view kStatProfileStop = "profile_stop_time";

// The `Task Environment` plane's id when SetProfileWindow creates it (ids are only keys).
inline constexpr int64_t kTaskEnvPlaneId = 1000;

// Lines XProf derives from a device's own (stream) lines, and TSL writes for TPUs: they repeat,
// nested, the time of the stream lines, so a reader of device activity skips them.
inline constexpr std::array<absl::string_view, 10> kDerivedLineNames = {"Steps",
                                                                        "XLA Modules",
                                                                        "XLA Ops",
                                                                        "Framework Ops",
                                                                        "TensorFlow Ops",
                                                                        "TensorFlow Name Scope",
                                                                        "Framework Name Scope",
                                                                        "Source code",
                                                                        "Launch Stats",
                                                                        "_counters_"};
inline bool IsDerivedLine(absl::string_view name) {
  return std::find(kDerivedLineNames.begin(), kDerivedLineNames.end(), name) !=
         kDerivedLineNames.end();
}

// The profile start P in ns since the epoch on the recording host's clock: the first uint64
// `profile_start_time` on a `Task Environment` plane, or 0 when there is none (then line
// timestamps are absolute, see the top of this file). A value above INT64_MAX (Validate rejects
// it) reads as INT64_MAX.
int64_t ProfileStartNs(const XSpace& space);
// The uint64 `profile_stop_time` beside it, if present (same rules).
std::optional<int64_t> ProfileStopNs(const XSpace& space);

// Records the recording window [start_ns, stop_ns] (ns since the epoch, both >= 0, on the
// recording host's clock) as uint64 `profile_start_time`/`profile_stop_time` on the space's first
// `Task Environment` plane, creating it (id kTaskEnvPlaneId) if needed and replacing earlier values
// of these two stats. Idempotent: every writer of one session may call it with the same window.
// Lines written for this space must be relative to start_ns (XPlaneBuilder with start_ns).
void SetProfileWindow(XSpace* space, int64_t start_ns, int64_t stop_ns);

// Absolute start, end and duration of an event in ns (on the recording host's clock), given its
// space's ProfileStartNs(). Start and end round down to whole ns; an event that does not fit in
// int64 ns (Validate rejects those) saturates instead of overflowing. Events that carry
// num_occurrences instead of an offset start at their line's timestamp.
int64_t EventStartNs(int64_t profile_start_ns, const XLine& line, const XEvent& event);
int64_t EventEndNs(int64_t profile_start_ns, const XLine& line, const XEvent& event);
// The same from the raw field values (XLine.timestamp_ns, XEvent.offset_ps, XEvent.duration_ps),
// for readers that walk the wire format instead of decoded messages.
int64_t EventStartNs(int64_t profile_start_ns, int64_t line_timestamp_ns, int64_t offset_ps);
int64_t EventEndNs(int64_t profile_start_ns, int64_t line_timestamp_ns, int64_t offset_ps,
                   int64_t duration_ps);
inline int64_t EventDurationNs(const XEvent& event) { return event.duration_ps() / 1000; }

// Appends to one plane, interning event and stat names; a plane that already has metadata (one
// read from a file) keeps it, and its names resolve to their ids. The plane must outlive the
// builder.
// Times passed in are absolute ns on the recording host's clock; they are stored relative to the
// profile start given at construction, as XProf expects. Not thread-safe.
class XPlaneBuilder {
 public:
  // `profile_start_ns`: the space's profile start (what SetProfileWindow records); >= 0.
  XPlaneBuilder(XPlane* plane, int64_t id, absl::string_view name, int64_t profile_start_ns);
  // For planes without lines (Task Environment, metadata planes) and for spaces with no profile
  // start: times are stored as given (profile start 0, i.e. absolute line timestamps).
  XPlaneBuilder(XPlane* plane, int64_t id, absl::string_view name)
      : XPlaneBuilder(plane, id, name, /*profile_start_ns=*/0) {}

  int64_t EventMetadataId(absl::string_view name);
  int64_t StatMetadataId(absl::string_view name);
  // A line starting at absolute `timestamp_ns` (stored as timestamp_ns - profile start). Its events
  // must not start before it, and must start less than ~106 days after it (int64 ps offsets).
  XLine* AddLine(int64_t id, absl::string_view name, int64_t timestamp_ns);
  // An event at absolute `start_ns` on `line`, which must belong to this builder's plane.
  XEvent* AddEvent(XLine* line, int64_t metadata_id, int64_t start_ns, int64_t duration_ns);

  void AddStat(XEvent* event, int64_t stat_id, int64_t v);
  void AddStat(XEvent* event, int64_t stat_id, uint64_t v);
  void AddStat(XEvent* event, int64_t stat_id, absl::string_view v);
  void AddPlaneStat(int64_t stat_id, int64_t v);
  void AddPlaneStat(int64_t stat_id, uint64_t v);

  XPlane* plane() { return plane_; }
  int64_t profile_start_ns() const { return profile_start_ns_; }

 private:
  XPlane* plane_;
  int64_t profile_start_ns_;
  absl::flat_hash_map<std::string, int64_t> event_ids_;
  absl::flat_hash_map<std::string, int64_t> stat_ids_;
};

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
// are set, and times fit: profile_start_time/profile_stop_time <= INT64_MAX, every line's
// timestamp_ns * 1000 + offset_ps (+ duration_ps) fits int64 ps as XProf computes it, and every
// event's absolute end fits int64 ns. Errors are INVALID_ARGUMENT naming the plane, line, event
// index and the bad value. Files with absolute epoch line timestamps fail the time check (XProf
// misreads them too); the time helpers above still read them.
absl::Status Validate(const XSpace& space);

}  // namespace profctl::xspace

#endif  // PROFCTL_XSPACE_XSPACE_H_
