#include "common/clock.h"

#include <ctime>

namespace profctl {
namespace {

int64_t ReadClock(clockid_t id) {
  timespec ts{};
  clock_gettime(id, &ts);
  return static_cast<int64_t>(ts.tv_sec) * kNanosPerSecond + ts.tv_nsec;
}

bool Never(const void*) { return false; }

}  // namespace

void StopSignal::Stop() {
  absl::MutexLock lock(&mu_);
  stopped_ = true;
}

bool StopSignal::stopped() const {
  absl::MutexLock lock(&mu_);
  return stopped_;
}

bool StopSignal::Wait(bool (*done)(const void* arg), const void* arg,
                      absl::Duration real_timeout) const {
  struct Ctx {
    const StopSignal* self;
    bool (*done)(const void*);
    const void* arg;
  } ctx{this, done, arg};
  auto ready = [](Ctx* c)
                   ABSL_NO_THREAD_SAFETY_ANALYSIS { return c->self->stopped_ || c->done(c->arg); };
  absl::MutexLock lock(&mu_);
  mu_.AwaitWithTimeout(absl::Condition(+ready, &ctx), real_timeout);
  return stopped_;
}

void StopSignal::Poke() const {
  // Releasing an absl::Mutex re-evaluates the conditions of its waiters.
  absl::MutexLock lock(&mu_);
}

int64_t RealClock::WallNs() const { return ReadClock(CLOCK_REALTIME); }
int64_t RealClock::MonoNs() const { return ReadClock(CLOCK_MONOTONIC); }

bool RealClock::WaitUntil(int64_t deadline_mono_ns, const StopSignal& stop) const {
  for (;;) {
    const int64_t remaining = deadline_mono_ns - MonoNs();
    if (remaining <= 0) return !stop.stopped();
    if (stop.Wait(&Never, nullptr, absl::Nanoseconds(remaining))) return false;
  }
}

}  // namespace profctl
