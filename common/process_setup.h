// One-time process settings for profctl's binaries (called from main, never from libraries).
#ifndef PROFCTL_COMMON_PROCESS_SETUP_H_
#define PROFCTL_COMMON_PROCESS_SETUP_H_

#include <cstdint>

namespace profctl {

// Raises the soft RLIMIT_NOFILE to the hard limit (a coordinator holds a socket and, while a
// trace streams in, a file per host: Debian's default soft limit of 1,024 is too low for a big
// pod). Returns the soft limit now in force, or 0 when it cannot be read.
uint64_t RaiseOpenFileLimit();

// Debian's Abseil is built without NDEBUG, so absl::Mutex keeps a lock-order graph for deadlock
// detection in our release binaries too: measured at ~14 % of the coordinator's CPU with 1,024
// hosts, all inside gRPC (docs/perf.md). Turns it off; tests keep it on.
void DisableMutexDeadlockDetection();

}  // namespace profctl

#endif  // PROFCTL_COMMON_PROCESS_SETUP_H_
