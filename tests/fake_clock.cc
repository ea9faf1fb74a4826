#include "tests/fake_clock.h"

namespace profctl::testkit {

bool FakeClock::WaitUntil(int64_t deadline_mono_ns, const StopSignal& stop) const {
  if (auto_advance_.load()) {
    absl::MutexLock lock(&mu_);
    const int64_t delta = deadline_mono_ns - mono_ns_.load();
    if (delta > 0) {
      mono_ns_ += delta;
      wall_ns_ += delta;
    }
    return !stop.stopped();
  }
  {
    absl::MutexLock lock(&mu_);
    waiters_.insert({&stop, deadline_mono_ns});
  }
  struct Arg {
    const FakeClock* clock;
    int64_t deadline;
  } arg{this, deadline_mono_ns};
  // Evaluated under the signal's lock: reads only atomics, never mu_ (lock order mu_ -> signal).
  const bool stopped = stop.Wait(
      [](const void* a) {
        const auto* p = static_cast<const Arg*>(a);
        return p->clock->mono_ns_.load() >= p->deadline;
      },
      &arg, absl::InfiniteDuration());
  {
    absl::MutexLock lock(&mu_);
    waiters_.erase(waiters_.find({&stop, deadline_mono_ns}));
  }
  return !stopped;
}

void FakeClock::Advance(int64_t ns) {
  absl::MutexLock lock(&mu_);
  mono_ns_ += ns;
  wall_ns_ += ns;
  for (const Waiter& w : waiters_) w.stop->Poke();
}

void FakeClock::AwaitWaiters(int n) const {
  struct Arg {
    const FakeClock* clock;
    int n;
  } arg{this, n};
  absl::MutexLock lock(&mu_);
  mu_.Await(absl::Condition(
      +[](Arg* a) ABSL_NO_THREAD_SAFETY_ANALYSIS {
        int pending = 0;
        for (const Waiter& w : a->clock->waiters_) {
          pending += w.deadline > a->clock->mono_ns_.load() && !w.stop->stopped();
        }
        return pending >= a->n;
      },
      &arg));
}

}  // namespace profctl::testkit
