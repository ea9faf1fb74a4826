// An Executor for tests: nothing runs until the test says so, and time is a FakeClock.
//
// Post/PostAt only queue (thread-safe). RunUntilIdle() runs every task already due; AdvanceTo()
// walks the fake clock forward timer by timer, running each due task inline on the caller's
// thread with the clock set to its deadline, so a test sees exactly what a real executor would
// do, in microseconds and without threads.
#ifndef PROFCTL_TESTS_FAKE_EXECUTOR_H_
#define PROFCTL_TESTS_FAKE_EXECUTOR_H_

#include <cstdint>
#include <functional>
#include <map>
#include <utility>

#include "absl/synchronization/mutex.h"
#include "common/executor.h"
#include "tests/fake_clock.h"

namespace profctl::testkit {

class FakeExecutor final : public Executor {
 public:
  explicit FakeExecutor(FakeClock* clock) : clock_(clock) {}

  void Post(Task task) override { PostAt(clock_->MonoNs(), std::move(task)); }
  void PostAt(int64_t deadline_mono_ns, Task task) override;
  const Clock& clock() const override { return *clock_; }

  // Runs tasks due now (including those they post for now) until none is due. Returns how many
  // ran.
  int RunUntilIdle();
  // Moves time forward to `mono_ns`, running every task due on the way at its deadline.
  void AdvanceTo(int64_t mono_ns);
  void Advance(int64_t ns) { AdvanceTo(clock_->MonoNs() + ns); }
  // Runs tasks, jumping time to the next deadline whenever nothing is due, until `done()` is true
  // or no task is left or time would pass `limit_mono_ns`. Returns done().
  bool RunUntil(const std::function<bool()>& done, int64_t limit_mono_ns);
  // Tasks waiting, due or not.
  size_t pending() const;

 private:
  // Removes and returns the earliest task due at or before `limit`, if any.
  bool PopDue(int64_t limit, int64_t* deadline, Task* task);

  FakeClock* clock_;
  mutable absl::Mutex mu_;
  uint64_t seq_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<std::pair<int64_t, uint64_t>, Task> tasks_ ABSL_GUARDED_BY(mu_);
};

}  // namespace profctl::testkit

#endif  // PROFCTL_TESTS_FAKE_EXECUTOR_H_
