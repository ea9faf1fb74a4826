#include "xspace/tsl_profile.h"

#include <algorithm>
#include <climits>
#include <cstdint>

#include "absl/strings/str_cat.h"
#include "common/file_util.h"
#include "xspace/xspace.h"

namespace profctl::tsl {

tensorflow::ProfileRequest MakeTslProfileRequest(const TslProfileParams& params) {
  tensorflow::ProfileRequest r;
  const auto duration_ms = static_cast<uint64_t>(std::max<int64_t>(params.duration_ms, 0));
  r.set_duration_ms(duration_ms);
  r.add_tools(std::string(kTslXPlaneTool));
  r.set_repository_root(params.repository_root);
  r.set_session_id(params.session_id);
  r.set_host_name(params.host_name);
  r.set_emit_xspace(true);
  tensorflow::ProfileOptions* o = r.mutable_opts();
  // Version 0 makes servers drop every option, the start time included.
  o->set_version(1);
  o->set_duration_ms(duration_ms);
  o->set_start_timestamp_ns(static_cast<uint64_t>(std::max<int64_t>(params.start_at_ns, 0)));
  o->set_session_id(params.session_id);
  o->set_include_dataset_ops(true);
  o->set_host_tracer_level(params.tracer_levels.host);
  o->set_device_tracer_level(params.tracer_levels.device);
  o->set_python_tracer_level(params.tracer_levels.python);
  return r;
}

absl::Status ValidateTracerLevels(int64_t host, int64_t device, int64_t python,
                                  const TracerLevelNames& names) {
  struct Level {
    const char* name;
    int64_t value;
    uint32_t max;
    const char* meaning;
  };
  for (const Level& l : {Level{names.host, host, kMaxHostTracerLevel,
                               "0 off, 1 user annotations, 2 also framework ops, 3 verbose"},
                         Level{names.device, device, kMaxDeviceTracerLevel, "0 off, 1 on"},
                         Level{names.python, python, kMaxPythonTracerLevel, "0 off, 1 on"}}) {
    if (l.value < 0 || l.value > static_cast<int64_t>(l.max)) {
      return absl::InvalidArgumentError(
          absl::StrCat(l.name, "=", l.value, " is not in 0..", l.max, " (", l.meaning, ")"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> TraceFromProfileResponse(const tensorflow::ProfileResponse& response,
                                                     const tensorflow::ProfileRequest& request,
                                                     std::string* where) {
  auto say = [&](absl::string_view shape) {
    if (where != nullptr) *where = std::string(shape);
  };
  if (response.has_xspace()) {
    say("inline xspace");
    return response.xspace().SerializeAsString();
  }
  for (const tensorflow::ProfileToolData& tool : response.tool_data()) {
    if (tool.name() == kTslXPlaneTool) {
      say("tool_data xplane.pb");
      return tool.data();
    }
  }
  if (response.empty_trace()) {
    return absl::NotFoundError("Profile: the server recorded nothing (empty_trace)");
  }
  // Saved on the server's own disk.
  const std::string path = JoinPath(JoinPath(request.repository_root(), request.session_id()),
                                    absl::StrCat(request.host_name(), ".", kTslXPlaneTool));
  say(absl::StrCat("saved by the server as ", path));
  if (request.repository_root().empty()) {
    return absl::NotFoundError(
        "Profile: the server saved its trace on its own disk, at a path it did not say (no "
        "repository_root was sent)");
  }
  absl::StatusOr<std::string> bytes = ReadFile(path);
  if (!bytes.ok()) {
    return absl::NotFoundError(
        absl::StrCat("Profile: the server saved its trace on its own disk as ", path,
                     ", which this machine cannot read (", bytes.status().message(),
                     "); copy it into the session folder and run profctl analyze there"));
  }
  return bytes;
}

absl::Status RebaseTslSpace(tensorflow::profiler::XSpace* space, int64_t new_start_ns,
                            int64_t clock_skew_ns, int64_t* their_start_ns) {
  const int64_t their_start = xspace::ProfileStartNs(*space);
  if (their_start_ns != nullptr) *their_start_ns = their_start;
  const __int128 shift =
      static_cast<__int128>(their_start) + clock_skew_ns - static_cast<__int128>(new_start_ns);
  auto* planes = space->mutable_planes();
  for (int i = planes->size() - 1; i >= 0; --i) {
    if (planes->Get(i).name() == xspace::kTaskEnvPlaneName) planes->DeleteSubrange(i, 1);
  }
  for (tensorflow::profiler::XPlane& plane : *planes) {
    for (tensorflow::profiler::XLine& line : *plane.mutable_lines()) {
      const __int128 ts = line.timestamp_ns() + shift;
      if (ts > INT64_MAX || ts < INT64_MIN) {
        return absl::InvalidArgumentError(absl::StrCat(
            "sent a trace profctl cannot use: plane '", plane.name(), "' line '", line.name(),
            "' timestamp_ns ", line.timestamp_ns(), " is out of range once re-based"));
      }
      line.set_timestamp_ns(static_cast<int64_t>(ts));
    }
  }
  if (absl::Status s = xspace::Validate(*space); !s.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("sent a trace profctl cannot use (its planes are dropped): ", s.message(),
                     their_start == 0 ? " (it has no Task Environment profile_start_time, so its "
                                        "line timestamps were read as absolute)"
                                      : ""));
  }
  return absl::OkStatus();
}

}  // namespace profctl::tsl
