// Time, injected everywhere: logic never calls now() or sleeps on its own.
//
// Times are int64 nanoseconds. Wall time (since the Unix epoch) is for instants that cross hosts;
// monotonic time is for intervals and deadlines on one host. Never subtract one from the other.
#ifndef PROFCTL_COMMON_CLOCK_H_
#define PROFCTL_COMMON_CLOCK_H_

#include <cstdint>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace profctl {

inline constexpr int64_t kNanosPerMicro = 1000;
inline constexpr int64_t kNanosPerMilli = 1'000'000;
inline constexpr int64_t kNanosPerSecond = 1'000'000'000;

// A one-way "stop now" flag that wakes whoever waits on it, whatever clock they wait with.
// Thread-safe.
class StopSignal {
 public:
  StopSignal() = default;
  StopSignal(const StopSignal&) = delete;
  StopSignal& operator=(const StopSignal&) = delete;

  // Idempotent. Wakes every waiter.
  void Stop();
  bool stopped() const;

  // Blocks until Stop() was called, `done(arg)` returns true, or `real_timeout` of real time
  // passed. `done` is evaluated under this signal's lock, at entry and after every Poke(). Returns
  // true when stopped.
  bool Wait(bool (*done)(const void* arg), const void* arg, absl::Duration real_timeout) const;

  // Makes waiters re-evaluate their `done` condition (used by clocks whose time jumps).
  void Poke() const;

 private:
  mutable absl::Mutex mu_;
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
};

class Clock {
 public:
  virtual ~Clock() = default;
  // Nanoseconds since the Unix epoch (CLOCK_REALTIME on a real host).
  virtual int64_t WallNs() const = 0;
  // Nanoseconds on a clock that never jumps (CLOCK_MONOTONIC on a real host).
  virtual int64_t MonoNs() const = 0;
  // Blocks until MonoNs() >= deadline_mono_ns or `stop` is stopped. Returns true when the deadline
  // was reached, false when stopped first. Thread-safe.
  virtual bool WaitUntil(int64_t deadline_mono_ns, const StopSignal& stop) const = 0;
};

// The host's real clocks.
class RealClock final : public Clock {
 public:
  int64_t WallNs() const override;
  int64_t MonoNs() const override;
  bool WaitUntil(int64_t deadline_mono_ns, const StopSignal& stop) const override;
};

// Another clock's wall time shifted by a constant, for emulating a host whose clock is off
// (profctl-agent --clock-skew-ms). Monotonic time and waiting are the base clock's.
class SkewedClock final : public Clock {
 public:
  SkewedClock(const Clock* base, int64_t skew_ns) : base_(base), skew_ns_(skew_ns) {}
  int64_t WallNs() const override { return base_->WallNs() + skew_ns_; }
  int64_t MonoNs() const override { return base_->MonoNs(); }
  bool WaitUntil(int64_t deadline_mono_ns, const StopSignal& stop) const override {
    return base_->WaitUntil(deadline_mono_ns, stop);
  }
  int64_t skew_ns() const { return skew_ns_; }

 private:
  const Clock* base_;
  int64_t skew_ns_;
};

}  // namespace profctl

#endif  // PROFCTL_COMMON_CLOCK_H_
