// The library's NVTX hooks under NVTX's own implementation (the header-only nvtx3 of the CUDA
// toolkit): this test binary is an NVTX module whose static injection (NVTX's
// InitializeInjectionNvtx2_fnptr, the path NVTX takes when NVTX_INJECTION64_PATH is unset) installs
// the hooks, with a stand-in libcupti that behaves as CUDA 13's did when called with no GPU: its
// entry keeps NVTX's export table and fills the slots only later, when it initialises.
//
// NVTX initialises once per process, so the cases run in order inside one test.
#include "inject/nvtx_hooks.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nvtx3/nvToolsExt.h>

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "inject/step_samples.h"

namespace profctl::inject {
namespace {

using ::testing::ElementsAre;

std::mutex g_mu;
StepRangeTracker g_steps;
std::atomic<bool> g_forward{true};
std::atomic<int64_t> g_clock{1'000'000};
int64_t FakeNow() { return g_clock.fetch_add(1000) + 1000; }

// ---- The stand-in libcupti. ----
using GetExportTableFn = const void*(NVTX_API*)(uint32_t);
GetExportTableFn g_kept = nullptr;
std::atomic<int> g_push{0}, g_pop{0}, g_start{0}, g_end{0}, g_mark{0}, g_domain_push{0},
    g_domain_pop{0}, g_domain_create{0};
std::atomic<uint64_t> g_last_end{0};
nvtxDomainHandle_t g_last_domain = nullptr;
std::mutex g_fake_mu;
std::string g_last_push;  // guarded by g_fake_mu
std::atomic<int> g_cupti_level{0};

// When set, the next push handler tries a detach from inside libcupti.
bool g_stop_inside = false;
bool g_stopped_inside = true;

int NVTX_API CuptiPushA(const char* message) {
  ++g_push;
  if (g_stop_inside) g_stopped_inside = StopForwardingToCupti(&g_forward);
  {
    std::lock_guard<std::mutex> lock(g_fake_mu);
    g_last_push = message;
  }
  return 100 + g_cupti_level++;
}
int NVTX_API CuptiPushEx(const nvtxEventAttributes_t* attr) {
  return CuptiPushA(attr->message.ascii);
}
int NVTX_API CuptiPop() {
  ++g_pop;
  return 100 + --g_cupti_level;
}
nvtxRangeId_t NVTX_API CuptiStartA(const char* /*message*/) { return 5000 + g_start++; }
nvtxRangeId_t NVTX_API CuptiStartEx(const nvtxEventAttributes_t* /*attr*/) {
  return 5000 + g_start++;
}
void NVTX_API CuptiEnd(nvtxRangeId_t id) {
  ++g_end;
  g_last_end = id;
}
void NVTX_API CuptiMarkA(const char* /*message*/) { ++g_mark; }
nvtxDomainHandle_t NVTX_API CuptiDomainCreateA(const char* /*name*/) {
  ++g_domain_create;
  static int domain = 0;
  return reinterpret_cast<nvtxDomainHandle_t>(&domain);
}
int NVTX_API CuptiDomainPushEx(nvtxDomainHandle_t domain, const nvtxEventAttributes_t* /*a*/) {
  ++g_domain_push;
  g_last_domain = domain;
  return 0;
}
int NVTX_API CuptiDomainPop(nvtxDomainHandle_t domain) {
  ++g_domain_pop;
  g_last_domain = domain;
  return 0;
}

int CuptiEntry(const void* get_export_table) {
  g_kept = reinterpret_cast<GetExportTableFn>(const_cast<void*>(get_export_table));
  return 1;
}

template <typename Fn>
void Put(NvtxFunctionTable table, unsigned int size, unsigned int cbid, Fn fn) {
  ASSERT_LT(cbid, size);
  ASSERT_NE(table[cbid], nullptr);
  *table[cbid] = reinterpret_cast<NvtxFunctionPointer>(fn);
}

// What libcupti does when it initialises: fills the tables the kept export table gives it.
void CuptiInitializes() {
  ASSERT_NE(g_kept, nullptr);
  const auto* callbacks = static_cast<const NvtxExportTableCallbacks*>(g_kept(NVTX_ETID_CALLBACKS));
  ASSERT_NE(callbacks, nullptr);
  NvtxFunctionTable core = nullptr;
  unsigned int core_size = 0;
  ASSERT_EQ(callbacks->GetModuleFunctionTable(NVTX_CB_MODULE_CORE, &core, &core_size), 1);
  Put(core, core_size, NVTX_CBID_CORE_RangePushA, &CuptiPushA);
  Put(core, core_size, NVTX_CBID_CORE_RangePushEx, &CuptiPushEx);
  Put(core, core_size, NVTX_CBID_CORE_RangePop, &CuptiPop);
  Put(core, core_size, NVTX_CBID_CORE_RangeStartA, &CuptiStartA);
  Put(core, core_size, NVTX_CBID_CORE_RangeStartEx, &CuptiStartEx);
  Put(core, core_size, NVTX_CBID_CORE_RangeEnd, &CuptiEnd);
  Put(core, core_size, NVTX_CBID_CORE_MarkA, &CuptiMarkA);
  NvtxFunctionTable core2 = nullptr;
  unsigned int core2_size = 0;
  ASSERT_EQ(callbacks->GetModuleFunctionTable(NVTX_CB_MODULE_CORE2, &core2, &core2_size), 1);
  Put(core2, core2_size, NVTX_CBID_CORE2_DomainCreateA, &CuptiDomainCreateA);
  Put(core2, core2_size, NVTX_CBID_CORE2_DomainRangePushEx, &CuptiDomainPushEx);
  Put(core2, core2_size, NVTX_CBID_CORE2_DomainRangePop, &CuptiDomainPop);
  // Another module's table (CUDA's naming calls) is NVTX's own, passed through.
  NvtxFunctionTable cuda = nullptr;
  unsigned int cuda_size = 0;
  EXPECT_EQ(callbacks->GetModuleFunctionTable(NVTX_CB_MODULE_CUDA, &cuda, &cuda_size), 1);
  EXPECT_NE(cuda, nullptr);
}

std::atomic<int> g_installs{0};

}  // namespace

// NVTX's static injection entry (nvtx_static_injection.cc points NVTX at it).
int NVTX_API NvtxStaticInjection(NvtxGetExportTableFunc_t get_export_table) {
  ++g_installs;
  NvtxHookTarget target;
  target.mu = &g_mu;
  target.steps = &g_steps;
  target.forward = &g_forward;
  target.now_ns = &FakeNow;
  return InstallNvtxHooks(reinterpret_cast<const void*>(get_export_table),
                          reinterpret_cast<void*>(&CuptiEntry), target);
}

namespace {

std::vector<StepSampleEntry> TakeSteps() {
  std::lock_guard<std::mutex> lock(g_mu);
  std::vector<StepSampleEntry> out(StepRangeTracker::kCapacity);
  out.resize(g_steps.Take(out.data(), out.size()));
  return out;
}

// The step numbers of the samples taken, in order.
std::vector<int64_t> TakeStepNums() {
  std::vector<int64_t> nums;
  for (const StepSampleEntry& s : TakeSteps()) nums.push_back(s.step_num);
  return nums;
}

nvtxEventAttributes_t Ascii(const char* message) {
  nvtxEventAttributes_t a{};
  a.version = NVTX_VERSION;
  a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
  a.messageType = NVTX_MESSAGE_TYPE_ASCII;
  a.message.ascii = message;
  return a;
}

TEST(NvtxHooksTest, StepsComeFromNvtxItselfAndLibcuptiStillGetsItsCalls) {
  // Before libcupti initialises: the hooks alone. Levels are ours; a mark goes nowhere.
  EXPECT_EQ(nvtxRangePushA("train_step 7"), 0);
  EXPECT_EQ(nvtxRangePushA("forward"), 1);
  EXPECT_EQ(nvtxRangePop(), 0);
  EXPECT_EQ(nvtxRangePop(), 0);
  nvtxMarkA("nothing listens yet");
  EXPECT_EQ(g_installs.load(), 1);
  std::vector<StepSampleEntry> steps = TakeSteps();
  ASSERT_EQ(steps.size(), 1u);
  EXPECT_EQ(steps[0].step_num, 7);
  EXPECT_GT(steps[0].end_wall_ns, steps[0].start_wall_ns);  // the injected clock, 4 reads apart
  EXPECT_EQ(g_push.load(), 0);

  // libcupti initialises: the hooked calls reach it through our slots, the rest directly.
  CuptiInitializes();
  nvtxMarkA("a mark");
  EXPECT_EQ(g_mark.load(), 1);
  EXPECT_EQ(nvtxRangePushA("train_step 8"), 100);  // libcupti's answer is the caller's
  EXPECT_EQ(g_last_push, "train_step 8");          // one thread so far
  nvtxEventAttributes_t forward_attr = Ascii("forward");
  EXPECT_EQ(nvtxRangePushEx(&forward_attr), 101);
  EXPECT_EQ(nvtxRangePop(), 101);
  EXPECT_EQ(nvtxRangePop(), 100);
  EXPECT_EQ(g_push.load(), 2);
  EXPECT_EQ(g_pop.load(), 2);
  EXPECT_THAT(TakeStepNums(), ElementsAre(8));

  // CUPTI detached: the step signal goes on, libcupti hears nothing, and a range pushed then is
  // not popped to it after CUPTI is back.
  g_forward = false;
  nvtxRangePushA("train_step 9");
  g_forward = true;
  nvtxRangePop();
  EXPECT_EQ(g_push.load(), 2);
  EXPECT_EQ(g_pop.load(), 2);
  EXPECT_THAT(TakeStepNums(), ElementsAre(9));

  // A start while CUPTI is detached gets an id of our own, whose end libcupti never hears of.
  g_forward = false;
  const nvtxRangeId_t own = nvtxRangeStartA("train_step 99");
  g_forward = true;
  EXPECT_NE(own & (nvtxRangeId_t{1} << 63), 0u);
  const int starts_before = g_start.load();
  const int ends_before = g_end.load();
  nvtxRangeEnd(own);
  EXPECT_EQ(g_start.load(), starts_before);
  EXPECT_EQ(g_end.load(), ends_before);
  EXPECT_THAT(TakeStepNums(), ElementsAre(99));

  // Start/end ranges: libcupti's ids are the caller's, and end on another thread.
  const nvtxRangeId_t id = nvtxRangeStartA("train_step 10");
  EXPECT_EQ(id, 5000u);
  nvtxEventAttributes_t step11 = Ascii("step 11");
  const nvtxRangeId_t id11 = nvtxRangeStartEx(&step11);
  std::thread([&] { nvtxRangeEnd(id); }).join();
  nvtxRangeEnd(id11);
  EXPECT_EQ(g_end.load(), ends_before + 2);
  EXPECT_EQ(g_last_end.load(), id11);
  EXPECT_THAT(TakeStepNums(), ElementsAre(10, 11));

  // Domains: libcupti's handle, a push/pop in the domain, and stacks kept per domain.
  nvtxDomainHandle_t domain = nvtxDomainCreateA("trainer");
  EXPECT_EQ(g_domain_create.load(), 1);
  ASSERT_NE(domain, nullptr);
  nvtxEventAttributes_t step12 = Ascii("train_step 12");
  nvtxDomainRangePushEx(domain, &step12);
  nvtxRangePushA("train_step 13");  // default domain
  nvtxDomainRangePop(domain);       // ends step 12, not 13
  std::this_thread::yield();
  nvtxRangePop();  // ends step 13
  EXPECT_EQ(g_domain_push.load(), 1);
  EXPECT_EQ(g_domain_pop.load(), 1);
  EXPECT_EQ(g_last_domain, domain);
  EXPECT_THAT(TakeStepNums(), ElementsAre(12, 13));

  // Deeper than the per-thread stack: the overflow pops first, the outer step still ends.
  nvtxRangePushA("train_step 14");
  for (int i = 0; i < 70; ++i) nvtxRangePushA("layer");
  for (int i = 0; i < 70; ++i) nvtxRangePop();
  nvtxRangePop();
  EXPECT_THAT(TakeStepNums(), ElementsAre(14));
  EXPECT_EQ(NvtxHooksUntracked(), 0u);

  // More step ranges open at once than the start/end table holds: the excess is counted, and
  // once they end the table is whole again.
  std::vector<nvtxRangeId_t> open;
  for (int i = 0; i < 70; ++i) {
    open.push_back(nvtxRangeStartA(("train_step " + std::to_string(2000 + i)).c_str()));
  }
  EXPECT_EQ(NvtxHooksUntracked(), 6u);
  for (nvtxRangeId_t r : open) nvtxRangeEnd(r);
  steps = TakeSteps();
  EXPECT_EQ(steps.size(), 64u);
  const nvtxRangeId_t again = nvtxRangeStartA("train_step 3000");
  nvtxRangeEnd(again);
  EXPECT_THAT(TakeStepNums(), ElementsAre(3000));

  // A detach while a hook is inside libcupti waits: StopForwardingToCupti from inside a handler
  // (as a finalize on another thread would find it) says not now and leaves forwarding on.
  g_stop_inside = true;
  nvtxRangePushA("probe");
  g_stop_inside = false;
  EXPECT_FALSE(g_stopped_inside);
  EXPECT_TRUE(g_forward.load());
  nvtxRangePop();
  EXPECT_TRUE(StopForwardingToCupti(&g_forward));  // nobody inside now
  EXPECT_FALSE(g_forward.load());
  g_forward = true;

  // Threads, each with its own stack.
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([t] {
      for (int i = 0; i < 50; ++i) {
        const std::string name = "train_step " + std::to_string(t * 1000 + i);
        nvtxRangePushA(name.c_str());
        nvtxRangePushA("inner");
        nvtxRangePop();
        nvtxRangePop();
      }
    });
  }
  for (std::thread& t : threads) t.join();
  steps = TakeSteps();
  EXPECT_EQ(steps.size(), 200u);
  for (const StepSampleEntry& s : steps) EXPECT_GE(s.end_wall_ns, s.start_wall_ns);
  EXPECT_EQ(g_cupti_level.load(), 0);  // every push libcupti saw was popped to it
}

}  // namespace
}  // namespace profctl::inject
