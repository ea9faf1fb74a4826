#include "inject/cupti_detach.h"

namespace profctl::inject {

bool CuptiDetach::Request() {
  std::lock_guard<std::mutex> lock(mu_);
  if (!attached_ || subscribed_) return true;
  if (!hooks_.subscribe()) return false;
  subscribed_ = true;
  requested_.store(true, std::memory_order_release);
  return true;
}

void CuptiDetach::OnApiExit() {
  if (!requested_.load(std::memory_order_acquire)) return;
  std::unique_lock<std::mutex> lock(mu_, std::try_to_lock);
  if (!lock.owns_lock()) return;  // the client is attaching or polling: the next exit tries again
  if (!requested_.exchange(false, std::memory_order_acq_rel)) return;
  switch (hooks_.finalize()) {
    case Finalized::kDetached:
      subscribed_ = false;
      attached_ = false;
      detaches_.fetch_add(1, std::memory_order_relaxed);
      return;
    case Finalized::kBusy:
      requested_.store(true, std::memory_order_release);
      return;
    case Finalized::kFailed:
      refusals_.fetch_add(1, std::memory_order_relaxed);
      return;  // attached and still subscribed: EnsureAttached unsubscribes
  }
}

bool CuptiDetach::EnsureAttached() {
  std::lock_guard<std::mutex> lock(mu_);
  if (subscribed_) {
    requested_.store(false, std::memory_order_release);
    hooks_.unsubscribe();
    subscribed_ = false;
  }
  if (attached_) return true;
  if (!hooks_.attach()) return false;
  attached_ = true;
  attaches_.fetch_add(1, std::memory_order_relaxed);
  return true;
}

bool CuptiDetach::WhileAttached(const std::function<void()>& fn) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!attached_) return false;
  fn();
  return true;
}

bool CuptiDetach::attached() {
  std::lock_guard<std::mutex> lock(mu_);
  return attached_;
}

}  // namespace profctl::inject
