// Executor: where waiting becomes a posted task instead of a blocked thread.
//
// Contract shared by every implementation:
//   - Tasks run one at a time, never concurrently with each other (a sequence, like an Asio
//     strand), so state touched only from tasks needs no lock.
//   - Post(task) runs task soon, after tasks already posted.
//   - PostAt(deadline, task) runs task once clock().MonoNs() >= deadline (monotonic time), never
//     before. Only FakeExecutor promises posting order for equal deadlines; logic must not rely
//     on the order of timers. There is no cancel: a timer task checks whether it still matters
//     (e.g. compares a generation number) when it runs.
//   - Post/PostAt are thread-safe: transport threads (gRPC callbacks) post into the executor.
//   - Tasks never block on time; they post continuations.
//   - RunsCurrentTask() tells whether the calling thread is running one of this executor's
//     tasks now: executor-bound classes check it (PROFCTL_DCHECK_ON_SEQUENCE, common/check.h).
//
// AsioExecutor runs tasks on its own thread(s) over a Boost.Asio io_context and strand.
// FakeExecutor (tests) runs nothing on its own: the test advances a FakeClock through it and due
// tasks run inline on the test's thread, so a 1,000-host capture runs in milliseconds with no
// threads and no sleeps.
#ifndef PROFCTL_COMMON_EXECUTOR_H_
#define PROFCTL_COMMON_EXECUTOR_H_

#include <cstdint>
#include <memory>

#include "absl/functional/any_invocable.h"
#include "common/clock.h"

namespace profctl {

class Executor {
 public:
  using Task = absl::AnyInvocable<void() &&>;
  virtual ~Executor() = default;
  virtual void Post(Task task) = 0;
  virtual void PostAt(int64_t deadline_mono_ns, Task task) = 0;
  // The clock the deadlines are measured on.
  virtual const Clock& clock() const = 0;
  // True while the calling thread runs one of this executor's tasks.
  bool RunsCurrentTask() const;

 protected:
  // Implementations run every task inside one: it marks the thread as running this executor's
  // task until it goes out of scope (nested scopes restore the outer one).
  class TaskScope {
   public:
    explicit TaskScope(const Executor* executor);
    ~TaskScope();
    TaskScope(const TaskScope&) = delete;
    TaskScope& operator=(const TaskScope&) = delete;

   private:
    const Executor* outer_;
  };
};

// A real executor: `threads` threads run an io_context; tasks are sequenced on one strand.
// The destructor stops the threads after the task running now (if any) ends; every task not yet
// run, due or not, is dropped. Destroy what posts into it first.
class AsioExecutor final : public Executor {
 public:
  // `clock` must be a clock whose MonoNs() is CLOCK_MONOTONIC (RealClock): Asio timers wait on
  // std::chrono::steady_clock.
  explicit AsioExecutor(const Clock* clock, int threads = 1);
  ~AsioExecutor() override;
  AsioExecutor(const AsioExecutor&) = delete;
  AsioExecutor& operator=(const AsioExecutor&) = delete;

  void Post(Task task) override;
  void PostAt(int64_t deadline_mono_ns, Task task) override;
  const Clock& clock() const override { return *clock_; }

 private:
  struct Impl;
  const Clock* clock_;
  std::unique_ptr<Impl> impl_;
};

// Runs independent jobs that may block (parsing, disk I/O, fsync) concurrently on a few
// threads, unlike an Executor's one-at-a-time tasks. Jobs post their results back to an Executor.
class WorkPool {
 public:
  virtual ~WorkPool() = default;
  virtual void Submit(Executor::Task job) = 0;
};

// A WorkPool of `threads` threads. The destructor waits for every submitted job to finish.
class ThreadWorkPool final : public WorkPool {
 public:
  explicit ThreadWorkPool(int threads);
  ~ThreadWorkPool() override;
  ThreadWorkPool(const ThreadWorkPool&) = delete;
  ThreadWorkPool& operator=(const ThreadWorkPool&) = delete;
  void Submit(Executor::Task job) override;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace profctl

#endif  // PROFCTL_COMMON_EXECUTOR_H_
