// The injection library's Tracer on CUPTI's activity API. libcupti is dlopen'ed at run time
// (`libcupti.so.13`, the soname a framework such as PyTorch has usually loaded already from its
// own wheel, so the loader hands back that copy; else `libcupti.so`, then $PROFCTL_CUPTI_PATH):
// the library loads, and the process runs, where CUPTI is absent. Plain C++, libc and CUPTI's
// header types only: part of the injection library.
//
// WHAT IT RECORDS. From initialisation (InitializeInjection, before the first NVTX call, as
// CUPTI_NOTES.md found necessary): MARKER (NVTX) and DEVICE. During a window: CONCURRENT_KERNEL,
// MEMCPY, MEMSET, RUNTIME, MEMORY2 and SYNCHRONIZATION as well. Buffers completed outside a window
// are discarded, except DEVICE records, which are kept (at most kMaxDevices) and added to every
// window's first batch, and MARKER records, which feed the step signal (below) inside and outside
// windows.
//
// BOUNDED MEMORY. CUPTI buffers are kBufferBytes each, at most kMaxBuffers outstanding (CUPTI
// drops, and counts, records when refused one); finished batches are streamed to the agent during
// the window (TakeReady) and at most kMaxPendingBatchBytes wait (then records are dropped and
// counted).
//
// CONFLICTS. CUPTI allows one callback subscriber per process. The activity API needs none, so we
// hold one only for the light level (below); before every window a probe subscription (taken and
// released at once) tells whether another tool (torch.profiler's Kineto, JAX/TF's tracer, Nsight)
// holds it, and then the window is refused: "held by another CUPTI subscriber (<its name>)".
//
// STEP SIGNAL. Every MARKER record, inside a window or not, also goes to a StepRangeTracker
// (step_samples.h), which keeps the NVTX ranges with step names. PollSteps (the client's thread,
// about once a second) asks CUPTI for the buffers it holds (cuptiActivityFlushAll(0): completed
// buffers, not forced, so it never waits on the GPU) and re-measures the GPU clock against
// CLOCK_REALTIME; TakeSteps converts the samples with that offset.
//
// LIGHT LEVEL. While the agent's flight recorder asks for it (SetCollectiveLaunches), the tracer
// holds a CUPTI callback subscription with the kernel launch callbacks only
// (launch_callbacks.h): each launch of the application runs OnLaunchCallback on its own thread,
// which keeps the NCCL kernels' launches (collective_launches.h, times on CUPTI's clock, made
// CLOCK_REALTIME by TakeLaunches with the step signal's offset). Holding the subscription keeps
// another tool from subscribing (CUPTI allows one): the window probe is skipped then (the holder
// is us), and the subscription is released when the agent says so or the connection ends.
//
// DIAGNOSIS SWITCHES (docs/cupti.md "Cost on a real GPU"; read once, at load; not for
// production): PROFCTL_INJECT_DETACH=1 detaches CUPTI after every window (cupti_detach.h; the step
// signal stops until the next window, which attaches again), PROFCTL_INJECT_WINDOW=launches
// records the API calls of RuntimeWindowCalls and DriverLaunchCalls one by one instead of the
// RUNTIME and DRIVER kinds (every call), PROFCTL_INJECT_NVTX_STEPS=1 takes the step signal from
// the library's own NVTX range handlers (nvtx_hooks.h; libcupti still gets every NVTX call while
// attached) instead of CUPTI's MARKER records, so it goes on while CUPTI is detached.
//
// THREADING. Enable/Disable/Flush/Discard/PollSteps/TakeSteps come from the client's thread;
// CUPTI's buffer callbacks from CUPTI's threads (or the flushing thread); one mutex guards the
// converter and the batches.
#ifndef PROFCTL_INJECT_CUPTI_TRACER_H_
#define PROFCTL_INJECT_CUPTI_TRACER_H_

#include <cupti_activity.h>
#include <cupti_callbacks.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "inject/collective_launches.h"
#include "inject/cupti_detach.h"
#include "inject/cupti_records.h"
#include "inject/inject_client.h"
#include "inject/nvtx_hooks.h"
#include "inject/record_batch_writer.h"
#include "inject/step_samples.h"

namespace profctl::inject {

class CuptiTracer final : public Tracer {
 public:
  static constexpr size_t kBufferBytes = size_t{4} << 20;
  static constexpr int kMaxBuffers = 16;
  static constexpr size_t kBatchBytes = size_t{4} << 20;
  static constexpr size_t kMaxPendingBatchBytes = size_t{64} << 20;
  static constexpr size_t kMaxDevices = 64;

  // The one tracer of the process (CUPTI's buffer callbacks are plain functions), created on first
  // use and never destroyed (the process may exit while CUPTI's threads still call it).
  static CuptiTracer* Get();

  // Loads libcupti, registers the buffer callbacks and enables MARKER and DEVICE. Idempotent;
  // false when libcupti cannot be loaded or registration fails (Unavailable() says why).
  bool Initialize();
  // PROFCTL_INJECT_LAZY=1 (a diagnosis switch, docs/cupti.md): libcupti is not touched before
  // the first window (Unavailable() does not load it), and NVTX is not taken at all.
  static bool LazyFromEnvironment();
  // PROFCTL_INJECT_DETACH=1 and PROFCTL_INJECT_WINDOW=launches (above).
  static bool DetachFromEnvironment();
  static bool LaunchWindowFromEnvironment();
  static bool NvtxStepsFromEnvironment();
  // NVTX's injection entry under PROFCTL_INJECT_NVTX_STEPS=1: the library's own range handlers,
  // forwarding to libcupti's entry when `forward_to_cupti` (and it was loaded). What NVTX
  // expects back: non-zero on success.
  int InstallNvtxHooks(const void* get_export_table, bool forward_to_cupti);
  // libcupti's own NVTX entry point (InitializeInjectionNvtx2), or nullptr.
  void* nvtx_entry() const { return nvtx_entry_; }
  bool loaded() const { return lib_ != nullptr; }

  std::string Unavailable() override;
  bool Enable(std::string* error, int64_t* gpu_minus_wall_ns) override;
  void Disable() override;
  uint64_t Flush(const std::function<void(std::vector<uint8_t>)>& sink) override;
  void Discard() override;
  void TakeReady(const std::function<void(std::vector<uint8_t>)>& sink) override;
  void PollSteps() override;
  // While idle, a forced flush: CUPTI hands over the buffer it is filling too (only MARKER and
  // DEVICE records are on then, all complete), so the last steps reach a snapshot.
  void PollStepsNow(bool idle) override;
  size_t TakeSteps(StepSampleEntry* out, size_t max) override;
  bool SetCollectiveLaunches(bool on, std::string* error) override;
  size_t TakeLaunches(CollectiveLaunchEntry* out, size_t max) override;
  std::string_view LaunchName(uint32_t id) override { return launches_.Name(id); }
  uint64_t TakeLaunchesDropped() override { return launches_.TakeDropped(); }
  void ClearLaunches() override { launches_.Clear(); }

 private:
  CuptiTracer() = default;

  struct Api;
  static void CUPTIAPI BufferRequested(uint8_t** buffer, size_t* size, size_t* max_records);
  static void CUPTIAPI BufferCompleted(CUcontext context, uint32_t stream_id, uint8_t* buffer,
                                       size_t size, size_t valid_size);
  static const char* ApiName(uint8_t domain, uint32_t cbid);
  static void CUPTIAPI LaunchCallback(void* userdata, CUpti_CallbackDomain domain,
                                      CUpti_CallbackId cbid, const void* data);
  // The detach subscription's callback: every runtime and driver API call, until it detaches.
  static void CUPTIAPI DetachCallback(void* userdata, CUpti_CallbackDomain domain,
                                      CUpti_CallbackId cbid, const void* data);
  static uint64_t GpuNowNs();
  static uint32_t ThreadId();
  // Turns the DRIVER records of DriverLaunchCalls() (cupti_records.h) on (1) or off (0).
  void EnableDriverLaunches(uint8_t enable);
  // Turns the RUNTIME records of RuntimeWindowCalls() on (1) or off (0); false when this libcupti
  // cannot.
  bool EnableRuntimeCalls(uint8_t enable);
  // Registers the buffer callbacks and enables the idle kinds (MARKER, DEVICE); "" or the error.
  std::string Attach();
  // After a window under PROFCTL_INJECT_DETACH=1: a detach at the next API exit.
  void RequestDetach();
  // The detach's subscription to every runtime and driver API callback (CuptiDetach::Hooks).
  bool SubscribeForDetach();
  void OnBuffer(uint8_t* buffer, size_t valid_size);
  // Finishes the current batch into pending_. Requires mu_.
  void RotateBatch();
  std::string ResultString(CUptiResult result) const;
  // Another CUPTI subscriber's name when one holds the process, "" otherwise.
  std::string ProbeSubscriber();
  // Measures the GPU clock minus CLOCK_REALTIME (min-gap pair of 100 samples).
  int64_t Calibrate();
  // The step signal's poll: CUPTI hands over its buffers (cuptiActivityFlushAll(flags)), then the
  // step samples' clock offset is measured again. No-op before Initialize.
  void FlushForSteps(uint32_t flags);

  std::once_flag init_once_;
  bool initialized_ = false;
  std::string unavailable_;
  void* lib_ = nullptr;
  void* nvtx_entry_ = nullptr;
  std::unique_ptr<Api> api_;
  std::atomic<int> outstanding_buffers_{0};
  std::atomic<uint64_t> refused_buffers_{0};
  // The window enabled CUPTI_ACTIVITY_KIND_DRIVER (else the launches one by one); the client's
  // thread only (Enable/Disable).
  bool driver_kind_ = false;

  std::mutex mu_;
  bool collecting_ = false;  // guarded by mu_
  int64_t gpu_minus_wall_ns_ = 0;
  std::unique_ptr<RecordBatchWriter> writer_;
  std::unique_ptr<CuptiRecordConverter> converter_;
  std::vector<std::vector<uint8_t>> pending_;
  size_t pending_bytes_ = 0;
  uint64_t dropped_ = 0;                       // records dropped this window (pending cap, CUPTI)
  std::vector<std::vector<uint8_t>> devices_;  // raw CUpti_ActivityDevice records
  // The step signal's ranges: GPU-clock times from MARKER records, or CLOCK_REALTIME ones from
  // the NVTX hooks (nvtx_steps_). Its own mutex: an application thread's step start waits on no
  // window's buffer conversion.
  std::mutex steps_mu_;
  StepRangeTracker steps_;  // guarded by steps_mu_
  std::atomic<bool> nvtx_steps_{false};
  // CUPTI attached (the hooks call libcupti's handlers only then): cleared before a detach's
  // cuptiFinalize, set after an attach.
  std::atomic<bool> cupti_attached_{true};
  int64_t steps_gpu_minus_wall_ns_ = 0;                      // the client's thread only (PollSteps)
  CollectiveLaunchRecorder launches_{&GpuNowNs, &ThreadId};  // thread-safe; GPU-clock times
  // The light level's subscription, null when off; the client's thread only.
  CUpti_SubscriberHandle launch_subscriber_ = nullptr;
  // The diagnosis switches, read in Initialize.
  bool detach_after_window_ = false;
  bool launch_window_ = false;
  // The window recorded RuntimeWindowCalls one by one (else the RUNTIME kind); client's thread.
  bool runtime_calls_ = false;
  // When CUPTI is attached (created in Initialize); the detach subscription's handle.
  std::unique_ptr<CuptiDetach> detach_;
  CUpti_SubscriberHandle detach_subscriber_ = nullptr;
};

}  // namespace profctl::inject

#endif  // PROFCTL_INJECT_CUPTI_TRACER_H_
