#include "coordinator/engine/manifest_snapshots.h"

#include <utility>

namespace profctl::coordinator {

ManifestSnapshots::ManifestSnapshots(TraceSink* sink, WorkPool* pool,
                                     std::function<void(const absl::Status&)> on_failure)
    : sink_(sink), pool_(pool), on_failure_(std::move(on_failure)) {}

void ManifestSnapshots::Write(std::unique_ptr<profctl::v1::SessionManifest> snapshot) {
  if (pool_ == nullptr) {
    {
      absl::MutexLock lock(&mu_);
      if (closed_) return;
    }
    Report(sink_->Write(kManifestFileName, RunningManifestJson(*snapshot)).status());
    return;
  }
  {
    absl::MutexLock lock(&mu_);
    if (closed_) return;
    if (writing_) {
      waiting_ = std::move(snapshot);  // replaces an older one still waiting
      return;
    }
    writing_ = true;
  }
  // Printing 1,024 hosts' manifest and writing it took ~5 ms of the executor, every flush. The
  // job holds this object: the finish job's Close waits for it.
  pool_->Submit([self = shared_from_this(), snapshot = std::move(snapshot)]() mutable {
    self->WriteLoop(std::move(snapshot));
  });
}

void ManifestSnapshots::WriteLoop(std::unique_ptr<profctl::v1::SessionManifest> snapshot) {
  while (snapshot != nullptr) {
    Report(sink_->Write(kManifestFileName, RunningManifestJson(*snapshot)).status());
    absl::MutexLock lock(&mu_);
    snapshot = closed_ ? nullptr : std::move(waiting_);
    if (snapshot == nullptr) writing_ = false;
  }
}

void ManifestSnapshots::Report(const absl::Status& status) {
  if (status.ok()) return;
  {
    absl::MutexLock lock(&mu_);
    if (failed_ || closed_) return;  // said once; none after the finish took over
    failed_ = true;
  }
  if (on_failure_) on_failure_(status);
}

void ManifestSnapshots::Close() {
  absl::MutexLock lock(&mu_);
  closed_ = true;
  waiting_.reset();
  mu_.Await(absl::Condition(
      +[](bool* writing) { return !*writing; }, &writing_));
}

}  // namespace profctl::coordinator
