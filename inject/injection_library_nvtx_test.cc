// dlopens the real libprofctl_inject.so with PROFCTL_INJECT_NVTX_STEPS=1 into this process (no
// GPU) beside a fake agent, hands it an NVTX export table as NVTX would, and calls the range
// handlers the library put in NVTX's slots: a step range pushed and popped there reaches the
// agent as a step sample on CLOCK_REALTIME, with no CUPTI buffer in between (here CUPTI has no
// GPU to record anything).
#define NVTX_NO_IMPL
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <nvtx3/nvToolsExt.h>
#include <poll.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "inject/fake_agent_socket.h"
#include "inject/inject_client.h"
#include "inject/socket_protocol.h"
#include "tests/build_paths.h"

namespace profctl::inject {
namespace {

constexpr int kTimeoutMs = 20'000;

// NVTX's side: one module's CORE and CORE2 slots, as its header-only implementation keeps them.
std::array<NvtxFunctionPointer, NVTX_CBID_CORE_SIZE + 1> g_core{};
std::array<NvtxFunctionPointer*, NVTX_CBID_CORE_SIZE + 1> g_core_table{};
std::array<NvtxFunctionPointer, NVTX_CBID_CORE2_SIZE + 1> g_core2{};
std::array<NvtxFunctionPointer*, NVTX_CBID_CORE2_SIZE + 1> g_core2_table{};

int NVTX_API GetModuleFunctionTable(NvtxCallbackModule module, NvtxFunctionTable* table,
                                    unsigned int* size) {
  if (module == NVTX_CB_MODULE_CORE) {
    *table = g_core_table.data();
    *size = NVTX_CBID_CORE_SIZE;
    return 1;
  }
  if (module == NVTX_CB_MODULE_CORE2) {
    *table = g_core2_table.data();
    *size = NVTX_CBID_CORE2_SIZE;
    return 1;
  }
  return 0;
}

const NvtxExportTableCallbacks kCallbacks = {sizeof(NvtxExportTableCallbacks),
                                             &GetModuleFunctionTable};

const void* NVTX_API GetExportTable(uint32_t id) {
  return id == NVTX_ETID_CALLBACKS ? &kCallbacks : nullptr;
}

int64_t RealtimeNs() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

// The library dlopen'ed with PROFCTL_INJECT_NVTX_STEPS=1 and NVTX's injection entry called with
// this test's export table, as NVTX would at its first call; its handle in `*lib`.
void LoadWithNvtxSteps(void** lib) {
  for (size_t i = 1; i < g_core_table.size() - 1; ++i) g_core_table[i] = &g_core[i];
  for (size_t i = 1; i < g_core2_table.size() - 1; ++i) g_core2_table[i] = &g_core2[i];
  setenv("PROFCTL_INJECT_NVTX_STEPS", "1", 1);
  *lib = dlopen(test_paths::InjectLibrary().c_str(), RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(*lib, nullptr) << dlerror();
  using NvtxEntry = int (*)(const void*);
  auto nvtx_init = reinterpret_cast<NvtxEntry>(dlsym(*lib, "InitializeInjectionNvtx2"));
  ASSERT_NE(nvtx_init, nullptr);
  ASSERT_EQ(nvtx_init(reinterpret_cast<const void*>(&GetExportTable)), 1);
}

// Sends SendPending{token} and reads until its PendingSent: the step samples sent before it.
std::vector<StepSampleEntry> StepsUpToPendingSent(FakeAgent* agent, uint64_t token) {
  agent->Send(MessageType::kSendPending, CommandMessage{token});
  std::vector<StepSampleEntry> steps;
  uint16_t type = 0;
  std::vector<uint8_t> payload;
  while (agent->Read(&type, &payload)) {
    if (type == static_cast<uint16_t>(MessageType::kStepSamples)) {
      std::vector<StepSampleEntry> got;
      const char* why = nullptr;
      EXPECT_TRUE(DecodeStepSamples(payload.data(), payload.size(), &got, &why)) << why;
      steps.insert(steps.end(), got.begin(), got.end());
    } else if (type == static_cast<uint16_t>(MessageType::kStatus)) {
      StatusMessage s;
      EXPECT_TRUE(DecodeMessage(payload.data(), payload.size(), &s));
      if (s.code == static_cast<uint32_t>(StatusCode::kPendingSent)) return steps;
    }
  }
  ADD_FAILURE() << "no PendingSent for SendPending " << token;
  return steps;
}

// A fork (a DataLoader worker) while other threads record steps: the child's own step ranges
// must not wait forever on a tracker mutex it inherited locked.
TEST(InjectionLibraryNvtxTest, AForkWhileStepsAreRecordedNeverLeavesTheChildStuck) {
  setenv(kAgentSocketEnv, "/nonexistent/profctl-agent.sock", 1);  // no agent: steps just wait
  void* lib = nullptr;
  ASSERT_NO_FATAL_FAILURE(LoadWithNvtxSteps(&lib));
  auto push = reinterpret_cast<nvtxRangePushA_impl_fntype>(g_core[NVTX_CBID_CORE_RangePushA]);
  auto pop = reinterpret_cast<nvtxRangePop_impl_fntype>(g_core[NVTX_CBID_CORE_RangePop]);
  ASSERT_NE(push, nullptr);

  std::atomic<bool> stop{false};
  std::vector<std::thread> threads;
  for (int t = 0; t < 2; ++t) {
    threads.emplace_back([&] {
      while (!stop.load()) {
        push("train_step 7");
        pop();
      }
    });
  }
  int stuck = 0;
  for (int i = 0; i < 50; ++i) {
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      alarm(10);  // a child stuck on an inherited lock dies of SIGALRM (a bound, not a timing)
      push("train_step 1");
      pop();
      _exit(0);
    }
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      ++stuck;
      break;  // one is enough to fail
    }
  }
  stop = true;
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(stuck, 0);
}

TEST(InjectionLibraryNvtxTest, StepRangesReachTheAgentThroughTheLibrarysOwnHandlers) {
  char tmpl[] = "/tmp/profctl-inject-nvtx-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  const std::string sock = dir + "/agent.sock";
  setenv(kAgentSocketEnv, sock.c_str(), 1);
  FakeAgent agent(sock, kTimeoutMs);
  void* lib = nullptr;
  ASSERT_NO_FATAL_FAILURE(LoadWithNvtxSteps(&lib));
  // The range calls are the library's now; the others it left to libcupti (or NVTX's no-op).
  ASSERT_NE(g_core[NVTX_CBID_CORE_RangePushA], nullptr);
  ASSERT_NE(g_core[NVTX_CBID_CORE_RangePop], nullptr);
  ASSERT_NE(g_core2[NVTX_CBID_CORE2_DomainRangePushEx], nullptr);

  ASSERT_TRUE(agent.Accept());
  RegisterMessage reg;
  ASSERT_TRUE(agent.ReadMessage(MessageType::kRegister, &reg));

  // The library drops what waited before it registered (stale steps) once it serves: a first
  // SendPending answered says it does, so the steps below come after that.
  ASSERT_NO_FATAL_FAILURE(StepsUpToPendingSent(&agent, 6));

  const int64_t before = RealtimeNs();
  auto push = reinterpret_cast<nvtxRangePushA_impl_fntype>(g_core[NVTX_CBID_CORE_RangePushA]);
  auto pop = reinterpret_cast<nvtxRangePop_impl_fntype>(g_core[NVTX_CBID_CORE_RangePop]);
  push("train_step 42");
  push("forward");
  pop();
  pop();
  push("not a step");
  pop();
  const int64_t after = RealtimeNs();

  // Asked for what it holds now (a snapshot's SendPending): the step comes at once.
  const std::vector<StepSampleEntry> steps = StepsUpToPendingSent(&agent, 7);
  ASSERT_EQ(steps.size(), 1u);
  EXPECT_EQ(steps[0].step_num, 42);
  EXPECT_GE(steps[0].start_wall_ns, before);
  EXPECT_LE(steps[0].end_wall_ns, after);
  EXPECT_LE(steps[0].start_wall_ns, steps[0].end_wall_ns);

  agent.Close();
  dlclose(lib);
  unlink(sock.c_str());
  rmdir(dir.c_str());
}

}  // namespace
}  // namespace profctl::inject
