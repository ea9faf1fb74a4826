#include "coordinator/engine/capture_engine.h"

#include <atomic>
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "coordinator/engine/capture_session.h"

namespace profctl::coordinator {

CaptureEngine::CaptureEngine(Dependencies deps, CaptureEngineOptions options)
    : deps_(std::move(deps)), options_(options) {}

CaptureEngine::~CaptureEngine() {
  if (session_ == nullptr) return;
  // A task of the session may be running on the executor right now, holding it: then the
  // session ends when that task does; and its finish job may be running. Wait for both, so
  // nothing of them (the clients' callbacks, the sink) outlives the engine and what the caller
  // gave it.
  std::shared_ptr<absl::Notification> gone = session_->gone();
  session_.reset();
  gone->WaitForNotification();
}

void CaptureEngine::Start(const CapturePlan& plan, DoneCallback done) {
  absl::Status bad;
  if (plan.workers.empty()) bad = absl::InvalidArgumentError("no workers to capture");
  if (plan.duration_ms < 1) {
    bad = absl::InvalidArgumentError(absl::StrCat("duration_ms=", plan.duration_ms, " < 1"));
  }
  if (!bad.ok()) {
    deps_.executor->Post([done = std::move(done), bad]() mutable { std::move(done)(bad); });
    return;
  }
  cancels_ = std::make_shared<std::atomic<int>>(0);
  session_ = std::make_shared<Session>(deps_, options_, plan, std::move(done), cancels_);
  deps_.executor->Post([weak = std::weak_ptr<Session>(session_)] {
    if (std::shared_ptr<Session> s = weak.lock()) s->Begin();
  });
}

void CaptureEngine::Cancel() {
  // Counted at once (any thread), so that an interrupt that comes while the outputs are written
  // stops them even though the executor's Interrupt then finds the session handed off.
  if (cancels_ != nullptr) cancels_->fetch_add(1);
  deps_.executor->Post([weak = std::weak_ptr<Session>(session_)] {
    if (std::shared_ptr<Session> s = weak.lock()) s->Interrupt();
  });
}

}  // namespace profctl::coordinator
