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

// Large buffers (>= 1 MiB: a host's decoded ops, sort keys, trace bytes) are mmap()ed and given
// back to the system when freed. glibc's default raises its mmap threshold to the largest block
// freed so far (up to 32 MiB), after which such buffers live in the heap and its per-thread
// arenas, where long-lived small allocations in between keep the freed space from being returned:
// `profctl analyze` over 64 x 65 MiB files peaked at 134 MiB with two jobs and 91 MiB with this
// (docs/perf.md). The cost is fresh pages (page faults) per host, about 5 % CPU there.
void ReturnLargeBuffersToTheSystem();

// At most `arenas` glibc malloc arenas (mallopt M_ARENA_MAX; glibc's default is 8 a core). Each
// thread that allocates takes an arena of its own while there are fewer than the limit, and an
// arena keeps the pages its peak needed: with gRPC's threads, the session's executor and the save
// pool each in its own, the coordinator's peak RSS at 1,024 hosts was 3-13 MiB (up to 10 %) above
// what two shared arenas hold, for no CPU difference there or in `profctl analyze`
// (docs/perf.md). Call from main before any thread starts. Returns false where the allocator
// refuses the setting (a sanitizer's malloc).
bool LimitMallocArenas(int arenas);

}  // namespace profctl

#endif  // PROFCTL_COMMON_PROCESS_SETUP_H_
