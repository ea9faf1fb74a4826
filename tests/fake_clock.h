// A Clock for tests: time moves only when the test says so.
//
// Manual mode (default): WaitUntil blocks until Advance() moves monotonic time past the deadline
// or the StopSignal fires; AwaitWaiters(n) lets a test wait (really, without sleeping) until n
// threads are blocked in WaitUntil. Auto-advance mode: WaitUntil jumps time to the deadline at
// once, so code that waits runs in microseconds.
#ifndef PROFCTL_TESTS_FAKE_CLOCK_H_
#define PROFCTL_TESTS_FAKE_CLOCK_H_

#include <atomic>
#include <cstdint>
#include <set>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "common/clock.h"

namespace profctl::testkit {

class FakeClock final : public Clock {
 public:
  // 2026-01-01T00:00:00Z, an arbitrary but realistic wall time.
  static constexpr int64_t kDefaultWallNs = 1'767'225'600LL * kNanosPerSecond;

  explicit FakeClock(int64_t wall_ns = kDefaultWallNs, int64_t mono_ns = kNanosPerSecond)
      : wall_ns_(wall_ns), mono_ns_(mono_ns) {}

  int64_t WallNs() const override {
    const int64_t stall = stall_next_wall_read_ns_.exchange(0);
    if (stall != 0) {  // both clocks move: time passed before this read
      mono_ns_ += stall;
      wall_ns_ += stall;
    }
    return wall_ns_.load();
  }
  int64_t MonoNs() const override { return mono_ns_.load(); }
  bool WaitUntil(int64_t deadline_mono_ns, const StopSignal& stop) const override;

  // Moves wall and monotonic time forward by ns and wakes waiters whose deadline passed.
  void Advance(int64_t ns);
  // Moves the wall clock alone (a clock step: NTP, an operator); negative goes back.
  void JumpWall(int64_t ns) { wall_ns_ += ns; }
  void SetAutoAdvance(bool on) { auto_advance_.store(on); }
  // The next WallNs() first moves both clocks by ns, as if the reading thread had been preempted
  // just before it (what splits a wall/monotonic pair on a loaded machine). Wakes no waiter.
  void StallBeforeNextWallRead(int64_t ns) { stall_next_wall_read_ns_.store(ns); }
  // Blocks until at least n threads wait in WaitUntil for a deadline still in the future (a
  // waiter whose deadline has passed but has not woken yet does not count).
  void AwaitWaiters(int n) const;

 private:
  mutable std::atomic<int64_t> wall_ns_;  // mutable: auto-advance moves time in WaitUntil
  mutable std::atomic<int64_t> mono_ns_;
  mutable std::atomic<int64_t> stall_next_wall_read_ns_{0};
  std::atomic<bool> auto_advance_{false};
  mutable absl::Mutex mu_;
  struct Waiter {
    const StopSignal* stop;
    int64_t deadline;
    bool operator<(const Waiter& o) const {
      return stop != o.stop ? stop < o.stop : deadline < o.deadline;
    }
  };
  mutable std::multiset<Waiter> waiters_ ABSL_GUARDED_BY(mu_);
};

}  // namespace profctl::testkit

#endif  // PROFCTL_TESTS_FAKE_CLOCK_H_
