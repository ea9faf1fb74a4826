#include "inject/nvtx_hooks.h"

#define NVTX_NO_IMPL
#include <nvtx3/nvToolsExt.h>
#undef NVTX_NO_IMPL

#include <time.h>

#include <array>
#include <string_view>
#include <utility>

#include "inject/step_names.h"

namespace profctl::inject {
namespace {

using GetExportTableFn = const void*(NVTX_API*)(uint32_t);
using CuptiEntryFn = int (*)(const void*);

constexpr size_t kCoreSize = NVTX_CBID_CORE_SIZE;
constexpr size_t kCore2Size = NVTX_CBID_CORE2_SIZE;
// Modules (libraries with NVTX of their own) whose tables the library can hold for libcupti.
constexpr size_t kMaxModules = 32;
constexpr uint32_t kStackDepth = 64;
constexpr size_t kMaxStartSteps = 64;

NvtxHookTarget g_target;
std::atomic<bool> g_have_target{false};
std::atomic<uint64_t> g_untracked{0};
std::atomic<uint32_t> g_next_push_id{1};

// libcupti's handlers of the calls we hook: the slots we show libcupti for those calls (one set,
// shared by every module: the handlers are libcupti's, whichever module asks). libcupti's entry
// keeps NVTX's export table and fills the slots later, when it initialises (not in the entry:
// seen with CUDA 13's libcupti), so the hooks read them at every call.
std::array<NvtxFunctionPointer, kCoreSize> g_shadow_core{};
std::array<NvtxFunctionPointer, kCore2Size> g_shadow_core2{};

// One module's export table as libcupti sees it: for the hooked calls our shadow slots, for the
// rest NVTX's own slots (so libcupti's handlers of marks, names and domains go straight in).
struct Module {
  const NvtxExportTableCallbacks* callbacks = nullptr;
  GetExportTableFn get = nullptr;
  std::array<NvtxFunctionPointer*, kCoreSize + 1> core{};
  std::array<NvtxFunctionPointer*, kCore2Size + 1> core2{};
  unsigned int core_size = 0;
  unsigned int core2_size = 0;
};
std::mutex g_install_mu;
std::array<Module, kMaxModules> g_modules{};
std::atomic<size_t> g_module_count{0};

int64_t RealtimeNs() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

int64_t Now() { return g_target.now_ns != nullptr ? g_target.now_ns() : RealtimeNs(); }

bool Forwarding() {
  return g_target.forward == nullptr || g_target.forward->load(std::memory_order_seq_cst);
}

// Hooks inside one of libcupti's handlers now. A detach (StopForwardingToCupti) clears
// `forward` and then reads this: either it sees a hook inside and waits for a later API exit,
// or the hook, which counts itself before it reads `forward`, sees it cleared and stays out.
std::atomic<int> g_in_cupti{0};

// Enters libcupti's handler when there is one and CUPTI is attached; the handler must be called
// before this ends.
class CuptiCall {
 public:
  explicit CuptiCall(bool have_handler) {
    if (!have_handler || !Forwarding()) return;
    g_in_cupti.fetch_add(1, std::memory_order_seq_cst);
    if (Forwarding()) {
      entered_ = true;
    } else {
      g_in_cupti.fetch_sub(1, std::memory_order_release);
    }
  }
  ~CuptiCall() {
    if (entered_) g_in_cupti.fetch_sub(1, std::memory_order_release);
  }
  CuptiCall(const CuptiCall&) = delete;
  CuptiCall& operator=(const CuptiCall&) = delete;
  bool entered() const { return entered_; }

 private:
  bool entered_ = false;
};

template <typename Fn, size_t N>
Fn Cupti(std::array<NvtxFunctionPointer, N>& slots, size_t cbid) {
  return reinterpret_cast<Fn>(
      std::atomic_ref<NvtxFunctionPointer>(slots[cbid]).load(std::memory_order_acquire));
}

// A range's name when NVTX gives it as ASCII; "" otherwise.
std::string_view AsciiName(const nvtxEventAttributes_t* attr) {
  if (attr == nullptr || attr->messageType != NVTX_MESSAGE_TYPE_ASCII ||
      attr->message.ascii == nullptr) {
    return {};
  }
  return attr->message.ascii;
}

bool IsStep(std::string_view name) {
  int64_t n = 0;
  return !name.empty() && MatchStepName(name, &n);
}

void StepStart(uint32_t id, std::string_view name) {
  const int64_t now = Now();
  std::lock_guard<std::mutex> lock(*g_target.mu);
  g_target.steps->OnStart(id, static_cast<uint64_t>(now), name);
}

void StepEnd(uint32_t id) {
  const int64_t now = Now();
  std::lock_guard<std::mutex> lock(*g_target.mu);
  g_target.steps->OnEnd(id, static_cast<uint64_t>(now));
}

// Push/pop: a per-thread stack of (domain, step id or 0, passed to libcupti). Their steps' ids
// in the tracker have the top bit set (start/end ranges': StartStepId).
struct StackEntry {
  const void* domain;
  uint32_t step_id;
  bool forwarded;
};
struct ThreadStack {
  std::array<StackEntry, kStackDepth> entries;
  uint32_t depth = 0;
  uint32_t overflow = 0;  // pushes beyond kStackDepth, popped first
};
thread_local ThreadStack t_stack;

int OnPush(const void* domain, std::string_view name, bool forwarded) {
  ThreadStack& s = t_stack;
  if (s.depth == kStackDepth) {
    ++s.overflow;
    if (IsStep(name)) g_untracked.fetch_add(1, std::memory_order_relaxed);
    return static_cast<int>(s.depth + s.overflow - 1);
  }
  uint32_t id = 0;
  if (IsStep(name)) {
    id = g_next_push_id.fetch_add(1, std::memory_order_relaxed) | 0x8000'0000u;
    StepStart(id, name);
  }
  s.entries[s.depth] = {domain, id, forwarded};
  return static_cast<int>(s.depth++);
}

// Pops `domain`'s innermost range; whether it was passed to libcupti (so its pop is too).
bool OnPop(const void* domain) {
  ThreadStack& s = t_stack;
  if (s.overflow > 0) {
    --s.overflow;
    return true;
  }
  for (uint32_t i = s.depth; i > 0; --i) {
    if (s.entries[i - 1].domain != domain) continue;
    const StackEntry e = s.entries[i - 1];
    for (uint32_t j = i; j < s.depth; ++j) s.entries[j - 1] = s.entries[j];
    --s.depth;
    if (e.step_id != 0) StepEnd(e.step_id);
    return e.forwarded;
  }
  return true;  // a pop of nothing: NVTX's caller's to answer; libcupti says what it says
}

// Start/end: step ranges open by id (any thread may end them), in a table of kMaxStartSteps so
// that the end of a range that is not a step finds nothing to do without a lock (a count of the
// table's entries, exact: set before the start returns its id).
std::array<std::atomic<nvtxRangeId_t>, kMaxStartSteps> g_open_starts{};
std::atomic<int> g_open_start_count{0};

// Ids of our own (CUPTI detached, or no libcupti): the top bit set, so that they are never
// confused with libcupti's, and never ended to it.
constexpr nvtxRangeId_t kOwnRangeId = nvtxRangeId_t{1} << 63;
std::atomic<nvtxRangeId_t> g_next_range_id{1};

// The tracker's id of a start/end range: 30 bits of its id, the 31st for our own ids (the 32nd
// is the push/pop ranges').
uint32_t StartStepId(nvtxRangeId_t id) {
  return static_cast<uint32_t>(id & 0x3fff'ffffu) | ((id & kOwnRangeId) != 0 ? 0x4000'0000u : 0);
}

nvtxRangeId_t OnStart(nvtxRangeId_t id, std::string_view name) {
  if (id == 0 || !IsStep(name)) return id;
  for (std::atomic<nvtxRangeId_t>& slot : g_open_starts) {
    nvtxRangeId_t free = 0;
    if (slot.compare_exchange_strong(free, id, std::memory_order_acq_rel)) {
      g_open_start_count.fetch_add(1, std::memory_order_acq_rel);
      StepStart(StartStepId(id), name);
      return id;
    }
  }
  g_untracked.fetch_add(1, std::memory_order_relaxed);
  return id;
}

void OnEnd(nvtxRangeId_t id) {
  if (id == 0 || g_open_start_count.load(std::memory_order_acquire) == 0) return;
  for (std::atomic<nvtxRangeId_t>& slot : g_open_starts) {
    nvtxRangeId_t open = id;
    if (slot.compare_exchange_strong(open, 0, std::memory_order_acq_rel)) {
      g_open_start_count.fetch_sub(1, std::memory_order_acq_rel);
      StepEnd(StartStepId(id));
      return;
    }
  }
}

nvtxRangeId_t OwnRangeId() {
  return g_next_range_id.fetch_add(1, std::memory_order_relaxed) | kOwnRangeId;
}

// ---- The handlers NVTX calls. ----

int NVTX_API RangePushA(const char* message) {
  auto cupti = Cupti<nvtxRangePushA_impl_fntype>(g_shadow_core, NVTX_CBID_CORE_RangePushA);
  const CuptiCall call(cupti != nullptr);
  const int level = OnPush(nullptr, message != nullptr ? message : "", call.entered());
  return call.entered() ? cupti(message) : level;
}

int NVTX_API RangePushEx(const nvtxEventAttributes_t* attr) {
  auto cupti = Cupti<nvtxRangePushEx_impl_fntype>(g_shadow_core, NVTX_CBID_CORE_RangePushEx);
  const CuptiCall call(cupti != nullptr);
  const int level = OnPush(nullptr, AsciiName(attr), call.entered());
  return call.entered() ? cupti(attr) : level;
}

int NVTX_API RangePushW(const wchar_t* message) {
  auto cupti = Cupti<nvtxRangePushW_impl_fntype>(g_shadow_core, NVTX_CBID_CORE_RangePushW);
  const CuptiCall call(cupti != nullptr);
  const int level = OnPush(nullptr, {}, call.entered());
  return call.entered() ? cupti(message) : level;
}

int NVTX_API RangePop() {
  const bool pushed_to_cupti = OnPop(nullptr);
  auto cupti = Cupti<nvtxRangePop_impl_fntype>(g_shadow_core, NVTX_CBID_CORE_RangePop);
  const CuptiCall call(pushed_to_cupti && cupti != nullptr);
  return call.entered() ? cupti() : 0;
}

int NVTX_API DomainRangePushEx(nvtxDomainHandle_t domain, const nvtxEventAttributes_t* attr) {
  auto cupti =
      Cupti<nvtxDomainRangePushEx_impl_fntype>(g_shadow_core2, NVTX_CBID_CORE2_DomainRangePushEx);
  const CuptiCall call(cupti != nullptr);
  const int level = OnPush(domain, AsciiName(attr), call.entered());
  return call.entered() ? cupti(domain, attr) : level;
}

int NVTX_API DomainRangePop(nvtxDomainHandle_t domain) {
  const bool pushed_to_cupti = OnPop(domain);
  auto cupti =
      Cupti<nvtxDomainRangePop_impl_fntype>(g_shadow_core2, NVTX_CBID_CORE2_DomainRangePop);
  const CuptiCall call(pushed_to_cupti && cupti != nullptr);
  return call.entered() ? cupti(domain) : 0;
}

nvtxRangeId_t NVTX_API RangeStartA(const char* message) {
  auto cupti = Cupti<nvtxRangeStartA_impl_fntype>(g_shadow_core, NVTX_CBID_CORE_RangeStartA);
  const CuptiCall call(cupti != nullptr);
  const nvtxRangeId_t id = call.entered() ? cupti(message) : OwnRangeId();
  return OnStart(id, message != nullptr ? message : "");
}

nvtxRangeId_t NVTX_API RangeStartEx(const nvtxEventAttributes_t* attr) {
  auto cupti = Cupti<nvtxRangeStartEx_impl_fntype>(g_shadow_core, NVTX_CBID_CORE_RangeStartEx);
  const CuptiCall call(cupti != nullptr);
  const nvtxRangeId_t id = call.entered() ? cupti(attr) : OwnRangeId();
  return OnStart(id, AsciiName(attr));
}

void NVTX_API RangeEnd(nvtxRangeId_t id) {
  OnEnd(id);
  auto cupti = Cupti<nvtxRangeEnd_impl_fntype>(g_shadow_core, NVTX_CBID_CORE_RangeEnd);
  const CuptiCall call((id & kOwnRangeId) == 0 && cupti != nullptr);
  if (call.entered()) cupti(id);
}

nvtxRangeId_t NVTX_API DomainRangeStartEx(nvtxDomainHandle_t domain,
                                          const nvtxEventAttributes_t* attr) {
  auto cupti =
      Cupti<nvtxDomainRangeStartEx_impl_fntype>(g_shadow_core2, NVTX_CBID_CORE2_DomainRangeStartEx);
  const CuptiCall call(cupti != nullptr);
  const nvtxRangeId_t id = call.entered() ? cupti(domain, attr) : OwnRangeId();
  return OnStart(id, AsciiName(attr));
}

void NVTX_API DomainRangeEnd(nvtxDomainHandle_t domain, nvtxRangeId_t id) {
  OnEnd(id);
  auto cupti =
      Cupti<nvtxDomainRangeEnd_impl_fntype>(g_shadow_core2, NVTX_CBID_CORE2_DomainRangeEnd);
  const CuptiCall call((id & kOwnRangeId) == 0 && cupti != nullptr);
  if (call.entered()) cupti(domain, id);
}

struct Hook {
  size_t cbid;
  NvtxFunctionPointer fn;
};

template <typename Fn>
NvtxFunctionPointer Generic(Fn fn) {
  return reinterpret_cast<NvtxFunctionPointer>(fn);
}

const Hook kCoreHooks[] = {
    {NVTX_CBID_CORE_RangeStartEx, Generic(&RangeStartEx)},
    {NVTX_CBID_CORE_RangeStartA, Generic(&RangeStartA)},
    {NVTX_CBID_CORE_RangeEnd, Generic(&RangeEnd)},
    {NVTX_CBID_CORE_RangePushEx, Generic(&RangePushEx)},
    {NVTX_CBID_CORE_RangePushA, Generic(&RangePushA)},
    {NVTX_CBID_CORE_RangePushW, Generic(&RangePushW)},
    {NVTX_CBID_CORE_RangePop, Generic(&RangePop)},
};
const Hook kCore2Hooks[] = {
    {NVTX_CBID_CORE2_DomainRangeStartEx, Generic(&DomainRangeStartEx)},
    {NVTX_CBID_CORE2_DomainRangeEnd, Generic(&DomainRangeEnd)},
    {NVTX_CBID_CORE2_DomainRangePushEx, Generic(&DomainRangePushEx)},
    {NVTX_CBID_CORE2_DomainRangePop, Generic(&DomainRangePop)},
};

bool Hooked(const Hook* hooks, size_t n, size_t cbid) {
  for (size_t i = 0; i < n; ++i) {
    if (hooks[i].cbid == cbid) return true;
  }
  return false;
}

// ---- The export tables libcupti sees: one function per module (libcupti calls them later, and
// a function is all it keeps). ----

template <size_t K>
int NVTX_API ShadowGetModuleFunctionTable(NvtxCallbackModule module, NvtxFunctionTable* out_table,
                                          unsigned int* out_size) {
  const Module& m = g_modules[K];
  if (module == NVTX_CB_MODULE_CORE || (module == NVTX_CB_MODULE_CORE2 && m.core2_size > 0)) {
    const bool core = module == NVTX_CB_MODULE_CORE;
    if (out_table != nullptr)
      *out_table = core ? const_cast<NvtxFunctionTable>(m.core.data())
                        : const_cast<NvtxFunctionTable>(m.core2.data());
    if (out_size != nullptr) *out_size = core ? m.core_size : m.core2_size;
    return 1;
  }
  return m.callbacks->GetModuleFunctionTable(module, out_table, out_size);
}

template <size_t K>
const void* NVTX_API ShadowGetExportTable(uint32_t id) {
  static const NvtxExportTableCallbacks callbacks = {sizeof(NvtxExportTableCallbacks),
                                                     &ShadowGetModuleFunctionTable<K>};
  if (id == NVTX_ETID_CALLBACKS) return &callbacks;
  return g_modules[K].get(id);
}

template <size_t... K>
constexpr std::array<GetExportTableFn, sizeof...(K)> ShadowTables(std::index_sequence<K...>) {
  return {&ShadowGetExportTable<K>...};
}
constexpr std::array<GetExportTableFn, kMaxModules> kShadowGetExportTable =
    ShadowTables(std::make_index_sequence<kMaxModules>());

// Points `m`'s table for libcupti at our shadow slots (hooked calls) or NVTX's (the rest), and
// puts our hooks in NVTX's slots. `real`/`real_size` as NVTX's GetModuleFunctionTable gives
// them (slot pointers, index 0 unused).
template <size_t N, size_t H>
unsigned int Wire(NvtxFunctionTable real, unsigned int real_size,
                  std::array<NvtxFunctionPointer, N>* shadow,
                  std::array<NvtxFunctionPointer*, N + 1>* table, const Hook (&hooks)[H]) {
  const size_t n = real_size < N ? real_size : N;
  for (size_t i = 1; i < n; ++i) {
    const bool hooked = Hooked(hooks, H, i);
    (*table)[i] = hooked ? &(*shadow)[i] : real[i];
  }
  for (const Hook& h : hooks) {
    if (h.cbid < n && real[h.cbid] != nullptr) *real[h.cbid] = h.fn;
  }
  return static_cast<unsigned int>(n);
}

}  // namespace

int InstallNvtxHooks(const void* get_export_table, void* cupti_entry,
                     const NvtxHookTarget& target) {
  if (get_export_table == nullptr || target.mu == nullptr || target.steps == nullptr) return 0;
  std::unique_lock<std::mutex> lock(g_install_mu);
  if (!g_have_target.load(std::memory_order_acquire)) {
    g_target = target;
    g_have_target.store(true, std::memory_order_release);
  }
  auto* get = reinterpret_cast<GetExportTableFn>(const_cast<void*>(get_export_table));
  const auto* callbacks = static_cast<const NvtxExportTableCallbacks*>(get(NVTX_ETID_CALLBACKS));
  const size_t k = g_module_count.load(std::memory_order_relaxed);
  if (callbacks == nullptr || callbacks->struct_size < sizeof(NvtxExportTableCallbacks) ||
      callbacks->GetModuleFunctionTable == nullptr || k == kMaxModules) {
    return 0;
  }
  NvtxFunctionTable core = nullptr;
  unsigned int core_size = 0;
  if (callbacks->GetModuleFunctionTable(NVTX_CB_MODULE_CORE, &core, &core_size) == 0 ||
      core == nullptr) {
    return 0;
  }
  Module& m = g_modules[k];
  m.callbacks = callbacks;
  m.get = get;
  m.core_size = Wire(core, core_size, &g_shadow_core, &m.core, kCoreHooks);
  NvtxFunctionTable core2 = nullptr;
  unsigned int core2_size = 0;
  if (callbacks->GetModuleFunctionTable(NVTX_CB_MODULE_CORE2, &core2, &core2_size) != 0 &&
      core2 != nullptr) {
    m.core2_size = Wire(core2, core2_size, &g_shadow_core2, &m.core2, kCore2Hooks);
  }
  g_module_count.store(k + 1, std::memory_order_release);
  lock.unlock();  // libcupti's entry may start another module's NVTX, and so come back here
  if (cupti_entry != nullptr) {
    // Its answer is not ours: the hooks are in whether or not libcupti takes NVTX.
    reinterpret_cast<CuptiEntryFn>(cupti_entry)(
        reinterpret_cast<const void*>(kShadowGetExportTable[k]));
  }
  return 1;
}

bool StopForwardingToCupti(std::atomic<bool>* forward) {
  forward->store(false, std::memory_order_seq_cst);
  if (g_in_cupti.load(std::memory_order_seq_cst) == 0) return true;
  forward->store(true, std::memory_order_seq_cst);
  return false;
}

uint64_t NvtxHooksUntracked() { return g_untracked.load(std::memory_order_relaxed); }

}  // namespace profctl::inject
