// The flight recorder's light level inside the injection library (docs/cupti.md, "The always-on
// level"): the launches of NCCL's collective kernels, seen by CUPTI's launch callbacks on the
// application's own threads, kept until the client sends them to the agent
// (socket_protocol.h CollectiveLaunches). Plain C++ only: part of the injection library.
//
// COST. This runs inside every kernel launch of the application while the light level is on.
// A launch whose kernel is no NCCL kernel costs a look at the first bytes of its name
// (MaybeNcclKernel: "nccl", or "_Z<digits>nccl" for a mangled name) and nothing else: no lock,
// no clock, no allocation. An NCCL launch (a few per training step) takes a mutex, reads the
// clock and the thread id, interns its name (a pointer compare, else a string compare against
// the names seen so far) and writes one entry into a fixed ring; when the ring is full the
// oldest entry is overwritten (and counted): the agent wants the latest launches. Nothing is
// allocated after construction.
//
// THREADING. OnLaunch from any application thread at once; Take, TakeDropped, Clear and Name
// from the client's thread. One mutex, taken by NCCL launches only.
#ifndef PROFCTL_INJECT_COLLECTIVE_LAUNCHES_H_
#define PROFCTL_INJECT_COLLECTIVE_LAUNCHES_H_

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string_view>

#include "inject/socket_protocol.h"

namespace profctl::inject {

// The NCCL op of a kernel name: "AllReduce" for "ncclDevKernel_AllReduce_Sum_f32_RING_LL",
// "_Z38ncclDevKernel_AllReduce_Sum_f32_RING_LL24ncclDevKernelArgs4K" (the mangled form CUPTI
// may give) or "ncclKernel_AllReduce_RING_LL_Sum_int8_t" (NCCL before 2.19): the word after
// "ncclDevKernel_" or "ncclKernel_" (letters and digits, up to '_', '(' or the end; at most the
// mangled identifier's length). Empty when the name is no NCCL kernel or the word is empty.
std::string_view NcclKernelOp(std::string_view name);

// The cheap first look at a kernel name, for every launch: false for a name that cannot be an
// NCCL kernel's after reading its first bytes ("nccl", or "_Z", digits, "nccl"). True only says
// NcclKernelOp should look.
inline bool MaybeNcclKernel(const char* name) {
  if (name == nullptr) return false;
  if (name[0] == '_' && name[1] == 'Z') {
    name += 2;
    while (*name >= '0' && *name <= '9') ++name;
  }
  return name[0] == 'n' && name[1] == 'c' && name[2] == 'c' && name[3] == 'l';
}

class CollectiveLaunchRecorder {
 public:
  static constexpr size_t kCapacity = 4096;
  // Distinct kernel names kept; id 0 is the name of launches beyond them.
  static constexpr size_t kMaxNames = 256;
  static constexpr size_t kMaxNameBytes = kMaxCollectiveLaunchNameBytes;  // with the NUL
  // Threads inside a runtime launch of an NCCL kernel at once (see OnLaunch).
  static constexpr size_t kMaxOpenRuntimeLaunches = 64;
  static constexpr std::string_view kOverflowName = "ncclKernel_Unknown_too_many_kernel_names";

  // `now_ns` gives the time of a launch (the tracer: CUPTI's clock, as the step samples' times),
  // `thread_id` the calling thread's id (the tracer: gettid). Both are called for NCCL launches
  // only.
  CollectiveLaunchRecorder(uint64_t (*now_ns)(), uint32_t (*thread_id)());

  // One launch callback: `runtime` for the runtime API (else the driver API), `enter` at the
  // call's entry (else its exit), `symbol` the kernel's name as CUPTI gives it (may be null).
  // Records NCCL launches at entry. A driver launch made inside a runtime launch of an NCCL
  // kernel on the same thread (the runtime calling the driver) is not recorded twice. Returns
  // true when it recorded one.
  bool OnLaunch(bool runtime, bool enter, const char* symbol);

  // Moves up to `max` recorded launches to `out`, oldest first (wall_ns on the `now_ns` clock,
  // name_index = a name id for Name()); returns how many.
  size_t Take(CollectiveLaunchEntry* out, size_t max);
  // The name of an id Take gave (stable for the recorder's life).
  std::string_view Name(uint32_t id);
  // Launches overwritten in the full ring or cleared since the last call.
  uint64_t TakeDropped();
  // Throws every waiting launch away (counted as dropped); returns how many.
  size_t Clear();

  uint64_t recorded() const { return seq_.load(std::memory_order_relaxed); }
  size_t ready();

 private:
  uint32_t Intern(const char* symbol);  // requires mu_

  uint64_t (*const now_ns_)();
  uint32_t (*const thread_id_)();
  std::atomic<uint64_t> seq_{0};
  std::mutex mu_;
  std::array<CollectiveLaunchEntry, kCapacity> ring_{};
  size_t head_ = 0;
  size_t size_ = 0;
  uint64_t dropped_ = 0;
  struct NameSlot {
    const char* pointer = nullptr;  // CUPTI's pointer when it was first seen
    char text[kMaxNameBytes] = {};
  };
  std::array<NameSlot, kMaxNames> names_{};
  size_t name_count_ = 1;                                         // names_[0] is kOverflowName
  std::array<uint32_t, kMaxOpenRuntimeLaunches> open_runtime_{};  // thread ids
  size_t open_runtime_count_ = 0;
};

}  // namespace profctl::inject

#endif  // PROFCTL_INJECT_COLLECTIVE_LAUNCHES_H_
