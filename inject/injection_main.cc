// libprofctl_inject.so's entry points: the only symbols it exports (exports.map).
//
//   InitializeInjection       called by the CUDA driver at CUDA initialisation when
//                             CUDA_INJECTION64_PATH names this library.
//   InitializeInjectionNvtx2  called by NVTX at its first use when NVTX_INJECTION64_PATH names this
//                             library: we hand NVTX to the libcupti we loaded (CUPTI_NOTES.md, "the
//                             NVTX trick"), so NVTX ranges arrive as CUPTI marker records.
//
// Both return at once: libcupti is loaded and its callbacks registered on the caller's thread
// (cheap; CUPTI needs it before the first NVTX call and before contexts exist), and everything
// that may wait (connecting to the agent, retrying) runs on a background thread. Nothing here
// throws, exits or blocks; at most one line goes to stderr, ever (and one more under the
// PROFCTL_INJECT_DETACH=1 diagnosis switch: whether CUPTI detached).
#include <pthread.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>

#include "inject/cupti_tracer.h"
#include "inject/inject_client.h"
#include "inject/launcher_env.h"

namespace profctl::inject {
namespace {

std::atomic<bool> g_logged{false};

void LogOnce(const std::string& line) {
  if (g_logged.exchange(true)) return;
  std::fprintf(stderr, "profctl-inject: pid %d: %s\n", static_cast<int>(getpid()), line.c_str());
}

bool Lazy() { return CuptiTracer::LazyFromEnvironment(); }

std::once_flag g_client_once;
InjectClient* g_client = nullptr;  // never destroyed (see StartClientOnce)
std::atomic<bool> g_nvtx{false};

// Starts the agent connection once per process. The client is never destroyed: its thread lives
// as long as the process (and the library is linked -z nodelete, so dlclose cannot unmap it).
void StartClientOnce() {
  std::call_once(g_client_once, [] {
    try {
      CuptiTracer* tracer = CuptiTracer::Get();
      if (!Lazy() && !tracer->Initialize()) {
        LogOnce("GPU tracing unavailable: " + tracer->Unavailable());
      }
      InjectClientOptions options;
      const char* path = std::getenv(kAgentSocketEnv);
      options.socket_path = path != nullptr && *path != '\0' ? path : kDefaultAgentSocket;
      options.registration = RegistrationFromEnvironment(tracer->loaded(), g_nvtx.load());
      options.log_once = &LogOnce;
      g_client = new InjectClient(std::move(options), tracer);
      // A forked child (a DataLoader worker) keeps no copy of the agent connection.
      pthread_atfork(nullptr, nullptr, [] { g_client->CloseInheritedConnectionInChild(); });
      g_client->Start();
    } catch (...) {  // fail-open
    }
  });
}

}  // namespace
}  // namespace profctl::inject

extern "C" {

__attribute__((visibility("default"))) int InitializeInjection(void) {
  profctl::inject::StartClientOnce();
  return 1;
}

// NVTX's injection entry: `int InitializeInjectionNvtx2(NvtxGetExportTableFunc_t)`; non-zero is
// success. We forward to libcupti's own, which then receives NVTX's calls.
__attribute__((visibility("default"))) int InitializeInjectionNvtx2(const void* get_export_table) {
  using NvtxEntry = int (*)(const void*);
  profctl::inject::CuptiTracer* tracer = profctl::inject::CuptiTracer::Get();
  // PROFCTL_INJECT_NVTX_STEPS=1: our own range handlers give the step signal; libcupti gets
  // NVTX through them (not under PROFCTL_INJECT_LAZY=1, which keeps libcupti out until a window).
  static const bool nvtx_steps = profctl::inject::CuptiTracer::NvtxStepsFromEnvironment();
  if (nvtx_steps) {
    const bool lazy = profctl::inject::Lazy();
    if (!lazy) tracer->Initialize();
    profctl::inject::g_nvtx.store(true);
    const int ok = tracer->InstallNvtxHooks(get_export_table, !lazy && tracer->loaded());
    profctl::inject::StartClientOnce();
    return ok;
  }
  if (profctl::inject::Lazy()) {
    profctl::inject::StartClientOnce();
    return 0;
  }
  tracer->Initialize();
  profctl::inject::g_nvtx.store(true);
  void* entry = tracer->nvtx_entry();
  const int ok = entry != nullptr ? reinterpret_cast<NvtxEntry>(entry)(get_export_table) : 0;
  profctl::inject::StartClientOnce();
  return ok;
}

}  // extern "C"
