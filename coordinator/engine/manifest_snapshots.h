// session.json's snapshots while a session runs (status RUNNING), so that a coordinator killed at
// any point leaves a folder that says what it holds. Printed and written on the work pool, one at
// a time: a newer snapshot waits behind the one in flight, replacing any older one waiting, so a
// slow disk stalls no session. Without a pool, written at once by the caller.
//
// Shared by the session (which writes) and its finish job (which closes it before the final
// session.json, so that no snapshot ever lands over it). Thread-safe.
#ifndef PROFCTL_COORDINATOR_ENGINE_MANIFEST_SNAPSHOTS_H_
#define PROFCTL_COORDINATOR_ENGINE_MANIFEST_SNAPSHOTS_H_

#include <functional>
#include <memory>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "common/executor.h"
#include "coordinator/session/session_writer.h"
#include "profctl/v1/session.pb.h"

namespace profctl::coordinator {

class ManifestSnapshots : public std::enable_shared_from_this<ManifestSnapshots> {
 public:
  // `sink` and `pool` (null: write in the caller) must outlive every write; `on_failure` is called
  // once, with the first write's error, on the pool thread that met it (or in the caller).
  ManifestSnapshots(TraceSink* sink, WorkPool* pool,
                    std::function<void(const absl::Status&)> on_failure);

  // Writes `snapshot` (status RUNNING), now or after the one in flight; nothing once closed.
  void Write(std::unique_ptr<profctl::v1::SessionManifest> snapshot);
  // No snapshot is written from now on: one waiting is dropped, one in flight is waited for.
  void Close();

 private:
  // The pool job: writes `snapshot`, then whichever came while it did, until none is waiting.
  void WriteLoop(std::unique_ptr<profctl::v1::SessionManifest> snapshot);
  void Report(const absl::Status& status);

  TraceSink* const sink_;
  WorkPool* const pool_;
  const std::function<void(const absl::Status&)> on_failure_;
  absl::Mutex mu_;
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  bool failed_ ABSL_GUARDED_BY(mu_) = false;
  std::unique_ptr<profctl::v1::SessionManifest> waiting_ ABSL_GUARDED_BY(mu_);
};

}  // namespace profctl::coordinator

#endif  // PROFCTL_COORDINATOR_ENGINE_MANIFEST_SNAPSHOTS_H_
