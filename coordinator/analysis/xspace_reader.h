// Reads one host's XSpace (TensorFlow, JAX, XProf and profctl `.xplane.pb` files) into the
// framework-neutral HostTrace the step breakdown works on. Pure: no I/O (decode the file first).
// What counts as a step marker, input wait, launch, sync, collective and memcpy is in
// op_classify.h, shared with the Kineto reader; docs/pod-step-breakdown.md links there.
//
// TIME. Every time is read through xspace::ProfileStartNs and xspace::EventStartNs/EventEndNs
// (relative and absolute-line files both work) and moved onto the common timeline as
// agent time - offset_ns.
//
// WINDOW. [profile_start_time, profile_stop_time] of the `Task Environment` plane. Without a
// profile_start_time (foreign files with absolute line timestamps), the span of every event read
// below; with a start but no stop, from the start to the last event end.
//
// WHAT IS READ
//   `/host:CPU`, every line (one per thread; NVTX ranges land here too):
//     - step markers: `_r` >= 1 with an integer `step_num`, or a name matching the step pattern
//       (StepMarker::thread_id = the line id);
//     - host ops: ClassifyHostOpName, except step markers, `_r` roots without step_num and
//       Python frames (`$...`) that are not input waits, which are wrappers, not host work.
//   `/device:GPU:N`, `/device:CUSTOM:N`: every line except XProf's derived lines (`Steps`,
//     `XLA Modules`, `XLA Ops`, `Framework Ops`, `TensorFlow Ops`, `TensorFlow Name Scope`,
//     `Framework Name Scope`, `Source code`, `Launch Stats`, `_counters_`), i.e. the CUPTI stream
//     lines `Stream #S(...)`: derived lines repeat the same kernels and would count them twice.
//   `/device:TPU:N`: the `XLA Ops` line(s) when present (the other TPU lines nest the same
//     time: steps, modules, framework ops); otherwise every line but the derived ones above.
//   Device events: `memcpy_details` (event or metadata stat) when it names a direction, else
//   ClassifyDeviceOpName. DeviceTrace::id is N, DeviceTrace::name the plane name; a device plane
//   without events still gives a DeviceTrace (an idle device). Other planes are ignored.
//   XSpace `errors`/`warnings` are passed on as warnings.
//
// BAD INPUT never crashes and never stops the read: events with negative duration, unknown
// metadata ids or times outside +-kMaxAbsTimeNs are dropped, step roots with a non-integer
// step_num and step numbers that do not fit int64 are ignored, device planes with a bad ordinal
// are skipped; each kind of problem is one line in HostTrace::warnings with its count and the
// first place it happened.
//
// SPEED. Names are classified once per event metadata id per plane (never per event); per event
// the reader does a table lookup, the time conversion, and a scan of the event's own stats only
// where a plane has `_r`/`step_num` (host) or `memcpy_details` (device) stats. No per-event
// allocation besides the output vectors.
#ifndef PROFCTL_COORDINATOR_ANALYSIS_XSPACE_READER_H_
#define PROFCTL_COORDINATOR_ANALYSIS_XSPACE_READER_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "coordinator/analysis/host_trace.h"
#include "coordinator/analysis/op_classify.h"
#include "tensorflow/profiler/xplane.pb.h"

namespace profctl::analysis {

// One host's trace. `host` names it in the result; `offset_ns` is the host's clock offset
// (agent clock - common clock, as alignment.h's HostOffset::offset_ns), 0 when the trace is
// already on the common timeline.
// Errors (INVALID_ARGUMENT): a bad step pattern (ValidateReaderOptions), |offset_ns| >
// kMaxAbsOffsetNs, a profile start/stop outside +-kMaxAbsTimeNs, or a space with neither a
// `/host:CPU` nor a device plane (not a host trace). Everything else is a warning.
absl::StatusOr<HostTrace> ReadXSpaceHost(const tensorflow::profiler::XSpace& space,
                                         const std::string& host, int64_t offset_ns,
                                         const ReaderOptions& options = {});

}  // namespace profctl::analysis

#endif  // PROFCTL_COORDINATOR_ANALYSIS_XSPACE_READER_H_
