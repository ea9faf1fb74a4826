// Where a capture's files go. TraceSink is the seam the engine writes through; SessionDir is the
// on-disk session folder DIR/plugins/profile/<session>/ that TensorBoard/XProf read.
#ifndef PROFCTL_COORDINATOR_SESSION_WRITER_H_
#define PROFCTL_COORDINATOR_SESSION_WRITER_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "profctl/v1/session.pb.h"

namespace profctl::coordinator {

// Thread-safe: hosts' traces are written concurrently as they arrive. Every write is atomic.
class TraceSink {
 public:
  virtual ~TraceSink() = default;
  // Writes `name` (a plain file name) into the session; returns its path relative to the session.
  virtual absl::StatusOr<std::string> Write(const std::string& name,
                                            absl::string_view contents) = 0;
  virtual std::string location() const = 0;
};

class SessionDir final : public TraceSink {
 public:
  // Creates DIR/plugins/profile/<session>/. ALREADY_EXISTS when that session folder exists:
  // a capture never overwrites an earlier one.
  static absl::StatusOr<SessionDir> Create(const std::string& logdir, const std::string& session);

  absl::StatusOr<std::string> Write(const std::string& name, absl::string_view contents) override;
  std::string location() const override { return path_; }

 private:
  explicit SessionDir(std::string path) : path_(std::move(path)) {}
  std::string path_;
};

// session.json's text: the manifest as JSON with proto field names, every field printed.
std::string ManifestJson(const profctl::v1::SessionManifest& manifest);

// File names inside a session.
std::string XPlaneFileName(const std::string& host);          // <host>.xplane.pb
std::string RejectedXPlaneFileName(const std::string& host);  // <host>.xplane.pb.invalid
inline constexpr char kManifestFileName[] = "session.json";
inline constexpr char kPodTraceFileName[] = "pod.trace.json.gz";

}  // namespace profctl::coordinator

#endif  // PROFCTL_COORDINATOR_SESSION_WRITER_H_
