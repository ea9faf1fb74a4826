// The library's own NVTX range handlers (PROFCTL_INJECT_NVTX_STEPS=1, docs/cupti.md "Cost on a
// real GPU", item 2): the step signal from NVTX without CUPTI's buffers.
//
// NVTX hands its function table to the injection library once per module that uses it
// (InitializeInjectionNvtx2 with NVTX's export table; CUPTI_NOTES.md, "the NVTX trick"). Without
// these hooks the library forwards that call to libcupti, which fills the table with its own
// handlers, and the step signal comes from CUPTI's MARKER records (so CUPTI must stay attached and
// MARKER enabled between windows). With them, InstallNvtxHooks:
//   1. gives libcupti's entry (when there is one) an export table of its own: the CORE and CORE2
//      modules' slots are shadow slots, the other modules NVTX's own;
//   2. puts in NVTX's CORE/CORE2 slots our handlers for the range calls (push/pop, start/end, in
//      the default domain and in others) and libcupti's handlers as they are for every other
//      call (marks, names, domains, registered strings);
//   3. our range handlers match a range's name once (step_names.h), keep the step ranges on a
//      per-thread stack (push/pop) or by id (start/end), and give each step's start and end, on
//      CLOCK_REALTIME, to the target's tracker; then they call libcupti's handler, while the
//      target says CUPTI is attached (a range pushed while it was not is not popped to it).
// A range that is not a step costs a name match and a thread-local stack entry (a start/end one
// an id, its end a look at a count); no lock, no allocation. Passing a call on to libcupti adds
// two atomic counts of the hooks inside it (a detach waits until none is). Names in wide or
// registered strings are not matched (passed on only). Start/end ranges started while CUPTI was
// detached get ids of our own (top bit set), whose end is not passed on.
//
// Only the range calls are ours: NVTX's other calls (marks, names, domains, registered strings)
// go to libcupti's handlers directly, attached or not.
//
// Plain C++ and NVTX's header types: part of the injection library.
#ifndef PROFCTL_INJECT_NVTX_HOOKS_H_
#define PROFCTL_INJECT_NVTX_HOOKS_H_

#include <atomic>
#include <cstdint>
#include <mutex>

#include "inject/step_samples.h"

namespace profctl::inject {

struct NvtxHookTarget {
  // Guards `steps`; taken only for a step range's start and end.
  std::mutex* mu = nullptr;
  StepRangeTracker* steps = nullptr;
  // Whether libcupti's handlers may be called now (CUPTI attached).
  const std::atomic<bool>* forward = nullptr;
  // The clock of the step samples (nanoseconds); CLOCK_REALTIME when null.
  int64_t (*now_ns)() = nullptr;
};

// NVTX's InitializeInjectionNvtx2 argument (`NvtxGetExportTableFunc_t`) and libcupti's own
// InitializeInjectionNvtx2 (or null: no forwarding). Returns what NVTX expects of an injection's
// entry: non-zero on success. The first call sets the target (later calls, from other modules,
// share it); `target` must outlive the process.
int InstallNvtxHooks(const void* get_export_table, void* cupti_entry, const NvtxHookTarget& target);

// Step ranges seen by the hooks that a full per-thread stack (64 deep) or a full start/end table
// could not follow.
uint64_t NvtxHooksUntracked();

// Before cuptiFinalize: clears `forward` (the target's), so that no hook enters libcupti any
// more, unless one is inside it now: then `forward` stays set and the answer is false (try again
// at a later moment). Any thread; never blocks.
bool StopForwardingToCupti(std::atomic<bool>* forward);

}  // namespace profctl::inject

#endif  // PROFCTL_INJECT_NVTX_HOOKS_H_
