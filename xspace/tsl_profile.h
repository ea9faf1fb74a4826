// The client side of one tensorflow.ProfilerService `Profile` call, as pure functions shared by
// everything that captures a TensorFlow/JAX/TSL profiler server: the coordinator (grpc:// workers,
// coordinator/clients/tsl_agent_client.h) and the agent's `tsl` collector (local framework servers,
// agent/collectors/tsl/tsl_collector.h). No transport here: the callers own their channels. Wire
// facts: TSL_WIRE.md; what profctl does with them: docs/tensorflow-interop.md.
#ifndef PROFCTL_XSPACE_TSL_PROFILE_H_
#define PROFCTL_XSPACE_TSL_PROFILE_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "tensorflow/profiler/profiler_service.pb.h"
#include "tensorflow/profiler/xplane.pb.h"

namespace profctl::tsl {

// TSL servers record the host, device and Python tracers at these levels when a request's
// options are honoured (version >= 1); they are the TensorFlow client's (and TensorBoard's Capture
// Profile dialog's) defaults. Host: 0 off, 1 user annotations (TraceMe) only, 2 also high-level
// framework ops, 3 verbose; device: 0 off, 1 on; Python: 0 off, 1 on.
inline constexpr uint32_t kTslHostTracerLevel = 2;
inline constexpr uint32_t kTslDeviceTracerLevel = 1;
inline constexpr uint32_t kTslPythonTracerLevel = 0;
inline constexpr uint32_t kMaxHostTracerLevel = 3;
inline constexpr uint32_t kMaxDeviceTracerLevel = 1;
inline constexpr uint32_t kMaxPythonTracerLevel = 1;

// The tracer levels a Profile call asks a framework's server for.
struct TracerLevels {
  uint32_t host = kTslHostTracerLevel;
  uint32_t device = kTslDeviceTracerLevel;
  uint32_t python = kTslPythonTracerLevel;
};

// How a front door spells the three levels in its errors (flags, request fields, YAML keys).
struct TracerLevelNames {
  const char* host;
  const char* device;
  const char* python;
};

// The one range rule for tracer levels (host 0..3, device 0..1, python 0..1), for every front
// door: INVALID_ARGUMENT naming the first level out of range as `names` spell it, its value and
// its range. Signed, so a negative flag value is named as given.
absl::Status ValidateTracerLevels(int64_t host, int64_t device, int64_t python,
                                  const TracerLevelNames& names);
// The tool that names an XSpace in `tool_data` and in saved file names.
inline constexpr absl::string_view kTslXPlaneTool = "xplane.pb";

// What one Profile call asks for.
struct TslProfileParams {
  std::string session_id;
  // Start instant in ns since the epoch on the *server's* wall clock; 0 = at once.
  int64_t start_at_ns = 0;
  int64_t duration_ms = 0;
  // Names the file a server that can only save writes (`<repository_root>/<session_id>/
  // <host_name>.xplane.pb`).
  std::string host_name = {};
  // The absolute folder such a server saves into; "" when the caller cannot read its disk.
  std::string repository_root = {};
  TracerLevels tracer_levels = {};
};

// The request: version 1 (version 0 makes servers drop every option, the start time included),
// start_timestamp_ns, duration_ms in both fields, the session id in both fields, host_name,
// repository_root, the `xplane.pb` tool, emit_xspace, include_dataset_ops and `tracer_levels`.
tensorflow::ProfileRequest MakeTslProfileRequest(const TslProfileParams& params);

// The serialized XSpace a Profile answer carries, in any of the three shapes servers use:
// `xspace` inline (emit_xspace), a `tool_data` entry named `xplane.pb`, or only
// `empty_trace=false`, meaning the server wrote
// `<repository_root>/<session_id>/<host_name>.xplane.pb` on its own disk: read from there when this
// machine can see the path, else NOT_FOUND naming it. `*where` (if given) says which shape it was.
// `empty_trace=true`: NOT_FOUND (the server recorded nothing). Messages start with "Profile: ".
absl::StatusOr<std::string> TraceFromProfileResponse(const tensorflow::ProfileResponse& response,
                                                     const tensorflow::ProfileRequest& request,
                                                     std::string* where = nullptr);

// The one re-basing rule for a server's XSpace, shared by the coordinator (grpc:// workers) and
// the agent's `tsl` collector: their events are at (their profile start P, or 0 when their lines
// are absolute: xspace.h) + line timestamp + offset; on the caller's clock that is + clock_skew_ns.
// Every line is moved to be relative to `new_start_ns` (ns since the epoch on the caller's clock),
// offsets within a line unchanged; their `Task Environment` planes are removed (the caller records
// its own window with xspace::SetProfileWindow). Then the space is validated. Errors
// (INVALID_ARGUMENT) name the line out of range, or what Validate found, and say when the lines
// were read as absolute. `*their_start_ns` (if given) gets P (0: absolute lines).
absl::Status RebaseTslSpace(tensorflow::profiler::XSpace* space, int64_t new_start_ns,
                            int64_t clock_skew_ns, int64_t* their_start_ns = nullptr);

}  // namespace profctl::tsl

#endif  // PROFCTL_XSPACE_TSL_PROFILE_H_
