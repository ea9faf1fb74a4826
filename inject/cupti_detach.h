// When libcupti is attached to the process, and the detach after a window (docs/cupti.md, "Cost on
// a real GPU"): CUPTI stays attached once a window has enabled it (its API hooks in place, a
// launch-bound step measured +14 % slower on an H200 after a capture), unless `cuptiFinalize`
// detaches it, which CUPTI asks be called at the exit of a CUDA API call. So after a window
// the tracer asks for a detach (Request): it subscribes to the API callbacks, and the first API
// exit on any thread finalizes (OnApiExit). The next window, or the flight recorder's light level,
// attaches again (EnsureAttached) or, when the detach has not happened yet, cancels it.
//
// Plain C++ and no CUPTI: the tracer gives the calls (Hooks), tests give counters. One mutex
// orders the three; an API callback never waits on it (try-lock: a callback that finds it held
// returns, and the next API exit tries again). The finalize itself runs on the application's
// thread that made the API call (CUPTI's rule), as long as CUPTI takes.
//
// While detached, nothing may call CUPTI (a CUPTI call attaches it again, silently): the step
// signal's poll asks WhileAttached.
#ifndef PROFCTL_INJECT_CUPTI_DETACH_H_
#define PROFCTL_INJECT_CUPTI_DETACH_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <mutex>

namespace profctl::inject {

class CuptiDetach {
 public:
  // What a finalize did: detached; not now (an NVTX hook is inside libcupti: the next API exit
  // tries again); or CUPTI refused (it stays attached; the subscription goes at the next
  // EnsureAttached, from the client's thread).
  enum class Finalized { kDetached, kBusy, kFailed };

  struct Hooks {
    // Subscribes to every runtime and driver API callback (true when done). Client thread.
    std::function<bool()> subscribe;
    // Releases that subscription (a detach cancelled before it happened). Client thread.
    std::function<void()> unsubscribe;
    // cuptiFinalize: detaches CUPTI, the subscription with it. An API callback's thread.
    std::function<Finalized()> finalize;
    // Registers the buffer callbacks and enables the idle kinds again (true when done). Client
    // thread.
    std::function<bool()> attach;
  };

  explicit CuptiDetach(Hooks hooks) : hooks_(std::move(hooks)) {}

  // After a window: asks for a detach at the next API exit. No-op when detached or already asked;
  // false when the subscription was refused (CUPTI stays attached).
  bool Request();
  // From the API callback (its exit site): finalizes when a detach was asked for. Never blocks.
  void OnApiExit();
  // Before a window or the light level: cancels an asked-for detach, or attaches again. False
  // when attaching failed (CUPTI's state is then unknown; the window reports its own error).
  bool EnsureAttached();
  // Runs `fn` while holding the attachment (no detach meanwhile) when attached; false otherwise.
  bool WhileAttached(const std::function<void()>& fn);

  bool attached();
  bool pending() const { return requested_.load(std::memory_order_acquire); }
  uint64_t detaches() const { return detaches_.load(std::memory_order_relaxed); }
  uint64_t attaches() const { return attaches_.load(std::memory_order_relaxed); }
  // cuptiFinalize calls that failed (CUPTI stayed attached).
  uint64_t refusals() const { return refusals_.load(std::memory_order_relaxed); }

 private:
  Hooks hooks_;
  std::mutex mu_;
  bool attached_ = true;     // guarded by mu_
  bool subscribed_ = false;  // guarded by mu_
  std::atomic<bool> requested_{false};
  std::atomic<uint64_t> detaches_{0};
  std::atomic<uint64_t> attaches_{0};
  std::atomic<uint64_t> refusals_{0};
};

}  // namespace profctl::inject

#endif  // PROFCTL_INJECT_CUPTI_DETACH_H_
