#include "xspace/tsl_profile.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/file_util.h"

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
  o->set_host_tracer_level(kTslHostTracerLevel);
  o->set_device_tracer_level(kTslDeviceTracerLevel);
  return r;
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

}  // namespace profctl::tsl
