#include "tests/fake_executor.h"

#include <limits>

namespace profctl::testkit {

void FakeExecutor::PostAt(int64_t deadline_mono_ns, Task task) {
  absl::MutexLock lock(&mu_);
  tasks_.emplace(std::make_pair(deadline_mono_ns, seq_++), std::move(task));
}

bool FakeExecutor::PopDue(int64_t limit, int64_t* deadline, Task* task) {
  absl::MutexLock lock(&mu_);
  if (tasks_.empty() || tasks_.begin()->first.first > limit) return false;
  auto it = tasks_.begin();
  *deadline = it->first.first;
  *task = std::move(it->second);
  tasks_.erase(it);
  return true;
}

int FakeExecutor::RunUntilIdle() {
  int ran = 0;
  int64_t deadline = 0;
  Task task;
  while (PopDue(clock_->MonoNs(), &deadline, &task)) {
    const TaskScope scope(this);
    std::move(task)();
    ++ran;
  }
  return ran;
}

void FakeExecutor::AdvanceTo(int64_t mono_ns) {
  int64_t deadline = 0;
  Task task;
  while (PopDue(mono_ns, &deadline, &task)) {
    if (deadline > clock_->MonoNs()) clock_->Advance(deadline - clock_->MonoNs());
    const TaskScope scope(this);
    std::move(task)();
  }
  if (mono_ns > clock_->MonoNs()) clock_->Advance(mono_ns - clock_->MonoNs());
}

bool FakeExecutor::RunUntil(const std::function<bool()>& done, int64_t limit_mono_ns) {
  while (!done()) {
    int64_t next = 0;
    {
      absl::MutexLock lock(&mu_);
      if (tasks_.empty()) break;
      next = tasks_.begin()->first.first;
    }
    if (next > limit_mono_ns) break;
    int64_t deadline = 0;
    Task task;
    if (!PopDue(next, &deadline, &task)) continue;
    if (deadline > clock_->MonoNs()) clock_->Advance(deadline - clock_->MonoNs());
    const TaskScope scope(this);
    std::move(task)();
  }
  return done();
}

size_t FakeExecutor::pending() const {
  absl::MutexLock lock(&mu_);
  return tasks_.size();
}

}  // namespace profctl::testkit
