#include "coordinator/session_writer.h"

#include <sys/stat.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/file_util.h"
#include "common/status_macros.h"
#include "google/protobuf/util/json_util.h"

namespace profctl::coordinator {

std::string XPlaneFileName(const std::string& host) { return absl::StrCat(host, ".xplane.pb"); }
std::string RejectedXPlaneFileName(const std::string& host) {
  return absl::StrCat(host, ".xplane.pb.invalid");
}

std::string ManifestJson(const profctl::v1::SessionManifest& manifest) {
  std::string json;
  google::protobuf::util::JsonPrintOptions options;
  options.add_whitespace = true;
  options.preserve_proto_field_names = true;
  options.always_print_primitive_fields = true;
  // Cannot fail for a message built in this process (no Any fields, valid UTF-8 checked by proto).
  (void)google::protobuf::util::MessageToJsonString(manifest, &json, options);
  return json;
}

absl::StatusOr<SessionDir> SessionDir::Create(const std::string& logdir,
                                              const std::string& session) {
  PROFCTL_RETURN_IF_ERROR(ValidateFileStem("session name", session));
  const std::string parent = JoinPath(logdir, "plugins/profile");
  PROFCTL_RETURN_IF_ERROR(MakeDirs(parent));
  std::string path = JoinPath(parent, session);
  if (mkdir(path.c_str(), 0755) != 0) {
    if (errno == EEXIST) {
      return absl::AlreadyExistsError(absl::StrCat(
          "session folder ", path, " already exists; choose another --session or --logdir"));
    }
    return absl::PermissionDeniedError(
        absl::StrCat("cannot create ", path, ": ", std::strerror(errno)));
  }
  char resolved[PATH_MAX];
  if (realpath(path.c_str(), resolved) != nullptr) path = resolved;
  return SessionDir(std::move(path));
}

absl::StatusOr<std::string> SessionDir::Write(const std::string& name, absl::string_view contents) {
  if (name.empty() || absl::StrContains(name, '/')) {
    return absl::InvalidArgumentError(absl::StrCat("bad file name '", name, "'"));
  }
  PROFCTL_RETURN_IF_ERROR(WriteFileAtomically(JoinPath(path_, name), contents));
  return name;
}

}  // namespace profctl::coordinator
