#include "common/process_setup.h"

#include <malloc.h>
#include <sys/resource.h>

#include "absl/synchronization/mutex.h"

namespace profctl {

uint64_t RaiseOpenFileLimit() {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0) return 0;
  if (limit.rlim_cur < limit.rlim_max) {
    rlimit raised = limit;
    raised.rlim_cur = limit.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &raised) == 0) limit = raised;
  }
  return limit.rlim_cur == RLIM_INFINITY ? UINT64_MAX : static_cast<uint64_t>(limit.rlim_cur);
}

void DisableMutexDeadlockDetection() {
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
}

void ReturnLargeBuffersToTheSystem() { mallopt(M_MMAP_THRESHOLD, 1 << 20); }

bool LimitMallocArenas(int arenas) { return mallopt(M_ARENA_MAX, arenas) == 1; }

}  // namespace profctl
