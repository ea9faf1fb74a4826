// Checks of internal invariants (STYLE.md, "Errors"): untrusted input gets a Status, a broken
// invariant of our own code gets a DCHECK. PROFCTL_DCHECK aborts with the condition and where it
// failed in builds without NDEBUG (./dev test's Debug build, so CI); it compiles to nothing in
// release builds, so it may sit on hot paths.
#ifndef PROFCTL_COMMON_CHECK_H_
#define PROFCTL_COMMON_CHECK_H_

namespace profctl::check_internal {

[[noreturn]] void DcheckFailed(const char* condition, const char* file, int line);

}  // namespace profctl::check_internal

#ifdef NDEBUG
#define PROFCTL_DCHECK(condition) \
  do {                            \
  } while (false && (condition))
#else
#define PROFCTL_DCHECK(condition)                                              \
  do {                                                                         \
    if (!(condition)) {                                                        \
      ::profctl::check_internal::DcheckFailed(#condition, __FILE__, __LINE__); \
    }                                                                          \
  } while (false)
#endif

// Executor-bound code asserts it runs as one of `executor`'s tasks (the executor's contract:
// tasks run one at a time, so such state needs no lock), as Perfetto's PERFETTO_DCHECK_THREAD.
#define PROFCTL_DCHECK_ON_SEQUENCE(executor) PROFCTL_DCHECK((executor).RunsCurrentTask())

#endif  // PROFCTL_COMMON_CHECK_H_
