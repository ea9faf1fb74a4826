#include "inject/cupti_tracer.h"

#include <dlfcn.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string_view>
#include <utility>

#include "inject/launch_callbacks.h"

namespace profctl::inject {
namespace {

int64_t RealtimeNs() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

// Kinds recorded only inside a window (MARKER and DEVICE are on from initialisation).
constexpr CUpti_ActivityKind kWindowKinds[] = {
    CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL,
    CUPTI_ACTIVITY_KIND_MEMCPY,
    CUPTI_ACTIVITY_KIND_MEMSET,
    CUPTI_ACTIVITY_KIND_RUNTIME,
    CUPTI_ACTIVITY_KIND_MEMORY2,
    CUPTI_ACTIVITY_KIND_SYNCHRONIZATION,
};

const char* KindName(CUpti_ActivityKind kind) {
  switch (kind) {
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
      return "CONCURRENT_KERNEL";
    case CUPTI_ACTIVITY_KIND_MEMCPY:
      return "MEMCPY";
    case CUPTI_ACTIVITY_KIND_MEMSET:
      return "MEMSET";
    case CUPTI_ACTIVITY_KIND_RUNTIME:
      return "RUNTIME";
    case CUPTI_ACTIVITY_KIND_MEMORY2:
      return "MEMORY2";
    case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION:
      return "SYNCHRONIZATION";
    case CUPTI_ACTIVITY_KIND_MARKER:
      return "MARKER";
    case CUPTI_ACTIVITY_KIND_DEVICE:
      return "DEVICE";
    default:
      return "?";
  }
}

// Whether environment variable `name` is set to exactly `value` (the diagnosis switches).
bool EnvIs(const char* name, std::string_view value) {
  const char* v = std::getenv(name);
  return v != nullptr && std::string_view(v) == value;
}

void CUPTIAPI ProbeCallback(void* /*userdata*/, CUpti_CallbackDomain /*domain*/,
                            CUpti_CallbackId /*cbid*/, const void* /*data*/) {}

}  // namespace

// libcupti's entry points, resolved with dlsym.
struct CuptiTracer::Api {
  CUptiResult(CUPTIAPI* register_callbacks)(CUpti_BuffersCallbackRequestFunc,
                                            CUpti_BuffersCallbackCompleteFunc) = nullptr;
  CUptiResult(CUPTIAPI* enable)(CUpti_ActivityKind) = nullptr;
  CUptiResult(CUPTIAPI* disable)(CUpti_ActivityKind) = nullptr;
  CUptiResult(CUPTIAPI* flush_all)(uint32_t) = nullptr;
  CUptiResult(CUPTIAPI* next_record)(uint8_t*, size_t, CUpti_Activity**) = nullptr;
  CUptiResult(CUPTIAPI* dropped)(CUcontext, uint32_t, size_t*) = nullptr;
  CUptiResult(CUPTIAPI* timestamp)(uint64_t*) = nullptr;
  CUptiResult(CUPTIAPI* result_string)(CUptiResult, const char**) = nullptr;
  CUptiResult(CUPTIAPI* callback_name)(CUpti_CallbackDomain, uint32_t, const char**) = nullptr;
  CUptiResult(CUPTIAPI* subscribe_v2)(CUpti_SubscriberHandle*, CUpti_CallbackFunc, void*,
                                      CUpti_SubscriberParams*) = nullptr;
  CUptiResult(CUPTIAPI* unsubscribe)(CUpti_SubscriberHandle) = nullptr;
  CUptiResult(CUPTIAPI* enable_callback)(uint32_t, CUpti_SubscriberHandle, CUpti_CallbackDomain,
                                         CUpti_CallbackId) = nullptr;
  // CUDA 12.x+; absent from older libcupti (then driver-API launches go unrecorded).
  CUptiResult(CUPTIAPI* enable_driver_api)(CUpti_CallbackId, uint8_t) = nullptr;
  CUptiResult(CUPTIAPI* enable_runtime_api)(CUpti_CallbackId, uint8_t) = nullptr;
  // The detach after a window (PROFCTL_INJECT_DETACH=1).
  CUptiResult(CUPTIAPI* enable_domain)(uint32_t, CUpti_SubscriberHandle,
                                       CUpti_CallbackDomain) = nullptr;
  CUptiResult(CUPTIAPI* finalize)() = nullptr;
};

CuptiTracer* CuptiTracer::Get() {
  static CuptiTracer* const tracer = new CuptiTracer();  // never destroyed, see the header
  return tracer;
}

bool CuptiTracer::Initialize() {
  std::call_once(init_once_, [this] {
    // The soname first: a framework's own copy, already loaded, is the one to share.
    std::string candidates[] = {"libcupti.so.13", "libcupti.so", "", "", ""};
    if (const char* path = std::getenv("PROFCTL_CUPTI_PATH"); path != nullptr) candidates[2] = path;
    if (const char* home = std::getenv("CUDA_HOME"); home != nullptr && *home != '\0') {
      candidates[3] = std::string(home) + "/lib64/libcupti.so.13";
    }
    candidates[4] = "/usr/local/cuda/lib64/libcupti.so.13";
    for (const std::string& name : candidates) {
      if (name.empty()) continue;
      lib_ = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
      if (lib_ != nullptr) break;
    }
    if (lib_ == nullptr) {
      unavailable_ = "libcupti could not be loaded (set PROFCTL_CUPTI_PATH)";
      return;
    }
    api_ = std::make_unique<Api>();
    auto sym = [this](auto* fn, const char* name) {
      *fn = reinterpret_cast<std::remove_pointer_t<decltype(fn)>>(dlsym(lib_, name));
      return *fn != nullptr;
    };
    const bool complete = sym(&api_->register_callbacks, "cuptiActivityRegisterCallbacks") &&
                          sym(&api_->enable, "cuptiActivityEnable") &&
                          sym(&api_->disable, "cuptiActivityDisable") &&
                          sym(&api_->flush_all, "cuptiActivityFlushAll") &&
                          sym(&api_->next_record, "cuptiActivityGetNextRecord") &&
                          sym(&api_->dropped, "cuptiActivityGetNumDroppedRecords") &&
                          sym(&api_->timestamp, "cuptiGetTimestamp");
    sym(&api_->result_string, "cuptiGetResultString");
    sym(&api_->callback_name, "cuptiGetCallbackName");
    sym(&api_->subscribe_v2, "cuptiSubscribe_v2");
    sym(&api_->unsubscribe, "cuptiUnsubscribe");
    sym(&api_->enable_callback, "cuptiEnableCallback");
    sym(&api_->enable_driver_api, "cuptiActivityEnableDriverApi");
    sym(&api_->enable_runtime_api, "cuptiActivityEnableRuntimeApi");
    sym(&api_->enable_domain, "cuptiEnableDomain");
    sym(&api_->finalize, "cuptiFinalize");
    nvtx_entry_ = dlsym(lib_, "InitializeInjectionNvtx2");
    if (!complete) {
      unavailable_ = "libcupti lacks the activity API";
      return;
    }
    if (const std::string holder = ProbeSubscriber(); !holder.empty()) {
      unavailable_ = "held by another CUPTI subscriber (" + holder + ")";
      return;
    }
    if (unavailable_ = Attach(); !unavailable_.empty()) return;
    detach_after_window_ = DetachFromEnvironment();
    launch_window_ = LaunchWindowFromEnvironment();
    detach_ = std::make_unique<CuptiDetach>(CuptiDetach::Hooks{
        .subscribe = [this] { return SubscribeForDetach(); },
        .unsubscribe =
            [this] {
              api_->unsubscribe(detach_subscriber_);
              detach_subscriber_ = nullptr;
            },
        .finalize =
            [this] {
              // The NVTX hooks stop calling libcupti first, unless one is inside it now.
              if (!StopForwardingToCupti(&cupti_attached_)) return CuptiDetach::Finalized::kBusy;
              const CUptiResult r = api_->finalize();  // ends every subscription, ours too
              // A diagnosis switch's outcome, once a process on stderr (the GPU run reads it).
              static std::atomic<bool> said{false};
              const bool first = !said.exchange(true);
              if (r != CUPTI_SUCCESS) {
                cupti_attached_.store(true, std::memory_order_seq_cst);
                if (first) {
                  std::fprintf(stderr, "profctl-inject: pid %d: cuptiFinalize refused: %s\n",
                               static_cast<int>(getpid()), ResultString(r).c_str());
                }
                return CuptiDetach::Finalized::kFailed;
              }
              detach_subscriber_ = nullptr;
              if (first) {
                std::fprintf(stderr,
                             "profctl-inject: pid %d: CUPTI detached after a window "
                             "(PROFCTL_INJECT_DETACH=1)\n",
                             static_cast<int>(getpid()));
              }
              return CuptiDetach::Finalized::kDetached;
            },
        .attach =
            [this] {
              if (!Attach().empty()) return false;
              cupti_attached_.store(true, std::memory_order_seq_cst);
              return true;
            },
    });
    initialized_ = true;
  });
  return initialized_;
}

std::string CuptiTracer::Attach() {
  if (CUptiResult r = api_->register_callbacks(&BufferRequested, &BufferCompleted);
      r != CUPTI_SUCCESS) {
    return "cuptiActivityRegisterCallbacks: " + ResultString(r);
  }
  // NVTX markers must be enabled before the first NVTX call (CUPTI_NOTES.md), device records
  // before contexts are created. Failures here (no GPU) leave the window kinds to report them.
  // PROFCTL_INJECT_IDLE_KINDS=0 (a diagnosis switch, docs/gpu-verification.md) leaves both off:
  // no NVTX steps outside a window then.
  if (!EnvIs("PROFCTL_INJECT_IDLE_KINDS", "0")) {
    api_->enable(CUPTI_ACTIVITY_KIND_MARKER);
    api_->enable(CUPTI_ACTIVITY_KIND_DEVICE);
  }
  return "";
}

bool CuptiTracer::SubscribeForDetach() {
  CUpti_SubscriberParams params{};
  params.structSize = CUpti_SubscriberParams_STRUCT_SIZE;
  params.subscriberName = "profctl detach";
  CUpti_SubscriberHandle handle = nullptr;
  if (api_->subscribe_v2(&handle, &DetachCallback, nullptr, &params) != CUPTI_SUCCESS) {
    return false;
  }
  const bool runtime = api_->enable_domain(1, handle, CUPTI_CB_DOMAIN_RUNTIME_API) == CUPTI_SUCCESS;
  const bool driver = api_->enable_domain(1, handle, CUPTI_CB_DOMAIN_DRIVER_API) == CUPTI_SUCCESS;
  if (!runtime && !driver) {
    api_->unsubscribe(handle);
    return false;
  }
  detach_subscriber_ = handle;
  return true;
}

void CuptiTracer::RequestDetach() {
  // The light level's subscription is the only one CUPTI allows: no detach while it is held.
  if (!detach_after_window_ || detach_ == nullptr || launch_subscriber_ != nullptr ||
      api_->finalize == nullptr || api_->subscribe_v2 == nullptr || api_->unsubscribe == nullptr ||
      api_->enable_domain == nullptr) {
    return;
  }
  detach_->Request();
}

void CUPTIAPI CuptiTracer::DetachCallback(void* /*userdata*/, CUpti_CallbackDomain domain,
                                          CUpti_CallbackId /*cbid*/, const void* data) {
  if (domain != CUPTI_CB_DOMAIN_RUNTIME_API && domain != CUPTI_CB_DOMAIN_DRIVER_API) return;
  if (static_cast<const CUpti_CallbackData*>(data)->callbackSite != CUPTI_API_EXIT) return;
  Get()->detach_->OnApiExit();
}

bool CuptiTracer::DetachFromEnvironment() { return EnvIs("PROFCTL_INJECT_DETACH", "1"); }

bool CuptiTracer::NvtxStepsFromEnvironment() { return EnvIs("PROFCTL_INJECT_NVTX_STEPS", "1"); }

int CuptiTracer::InstallNvtxHooks(const void* get_export_table, bool forward_to_cupti) {
  NvtxHookTarget target;
  target.mu = &steps_mu_;
  target.steps = &steps_;
  target.forward = &cupti_attached_;
  const int ok = profctl::inject::InstallNvtxHooks(
      get_export_table, forward_to_cupti ? nvtx_entry_ : nullptr, target);
  if (ok == 0) return 0;
  nvtx_steps_.store(true, std::memory_order_release);
  // Application threads take steps_mu_ now: a fork while another thread holds it must not leave
  // the child a locked mutex (a DataLoader worker's first step range would wait forever).
  static std::once_flag fork_once;
  std::call_once(fork_once, [] {
    pthread_atfork([] { Get()->steps_mu_.lock(); }, [] { Get()->steps_mu_.unlock(); },
                   [] { Get()->steps_mu_.unlock(); });
  });
  return ok;
}

bool CuptiTracer::LaunchWindowFromEnvironment() {
  return EnvIs("PROFCTL_INJECT_WINDOW", "launches");
}

std::string CuptiTracer::ResultString(CUptiResult result) const {
  const char* text = nullptr;
  if (api_ != nullptr && api_->result_string != nullptr &&
      api_->result_string(result, &text) == CUPTI_SUCCESS && text != nullptr) {
    return text;
  }
  return "CUPTI error " + std::to_string(static_cast<int>(result));
}

std::string CuptiTracer::ProbeSubscriber() {
  if (api_->subscribe_v2 == nullptr || api_->unsubscribe == nullptr) return "";
  char holder[CUPTI_OLD_SUBSCRIBER_NAME_MIN_LEN * 2] = {};
  CUpti_SubscriberParams params{};
  params.structSize = CUpti_SubscriberParams_STRUCT_SIZE;
  params.subscriberName = "profctl";
  params.oldSubscriberName = holder;
  params.oldSubscriberSize = sizeof(holder);
  CUpti_SubscriberHandle handle = nullptr;
  const CUptiResult r = api_->subscribe_v2(&handle, &ProbeCallback, nullptr, &params);
  if (r == CUPTI_SUCCESS) {
    api_->unsubscribe(handle);
    return "";
  }
  if (r == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED) {
    holder[sizeof(holder) - 1] = '\0';
    return holder[0] != '\0' ? std::string(holder) : std::string("unknown tool");
  }
  return "";  // other errors (no driver) are not a conflict; enabling reports them
}

bool CuptiTracer::LazyFromEnvironment() { return EnvIs("PROFCTL_INJECT_LAZY", "1"); }

std::string CuptiTracer::Unavailable() {
  // Asked at every connection: lazily, not before the first window (Enable initializes).
  static const bool lazy = LazyFromEnvironment();
  if (lazy && !initialized_) return "";
  if (!Initialize()) return unavailable_;
  return "";
}

int64_t CuptiTracer::Calibrate() {
  int64_t best_gap = INT64_MAX;
  int64_t offset = 0;
  for (int i = 0; i < 100; ++i) {
    uint64_t gpu = 0;
    const int64_t before = RealtimeNs();
    if (api_->timestamp(&gpu) != CUPTI_SUCCESS) return 0;
    const int64_t after = RealtimeNs();
    if (after - before < best_gap) {
      best_gap = after - before;
      offset = static_cast<int64_t>(gpu) - (before + (after - before) / 2);
    }
  }
  return offset;
}

bool CuptiTracer::Enable(std::string* error, int64_t* gpu_minus_wall_ns) {
  if (!Initialize()) {
    *error = unavailable_;
    return false;
  }
  if (!detach_->EnsureAttached()) {
    *error = "CUPTI could not be attached again after its detach";
    return false;
  }
  // While the light level holds the subscription, nobody else can: the probe would find us.
  if (const std::string holder = launch_subscriber_ == nullptr ? ProbeSubscriber() : "";
      !holder.empty()) {
    *error = "held by another CUPTI subscriber (" + holder + ")";
    return false;
  }
  const int64_t offset = Calibrate();
  {
    std::lock_guard<std::mutex> lock(mu_);
    writer_ = std::make_unique<RecordBatchWriter>(kBatchBytes);
    converter_ = std::make_unique<CuptiRecordConverter>(writer_.get(), &ApiName);
    pending_.clear();
    pending_bytes_ = 0;
    dropped_ = 0;
    gpu_minus_wall_ns_ = offset;
    for (const std::vector<uint8_t>& device : devices_) {
      converter_->Add(*reinterpret_cast<const CUpti_Activity*>(device.data()));
    }
    collecting_ = true;
  }
  size_t ignored = 0;
  api_->dropped(nullptr, 0, &ignored);  // resets CUPTI's count
  // A light window records the runtime calls it needs one by one, where libcupti can.
  runtime_calls_ = launch_window_ && EnableRuntimeCalls(1);
  for (size_t i = 0; i < sizeof(kWindowKinds) / sizeof(kWindowKinds[0]); ++i) {
    if (runtime_calls_ && kWindowKinds[i] == CUPTI_ACTIVITY_KIND_RUNTIME) continue;
    const CUptiResult r = api_->enable(kWindowKinds[i]);
    if (r != CUPTI_SUCCESS) {
      for (size_t j = 0; j < i; ++j) api_->disable(kWindowKinds[j]);
      if (runtime_calls_) EnableRuntimeCalls(0);
      *error =
          std::string("cuptiActivityEnable(") + KindName(kWindowKinds[i]) + "): " + ResultString(r);
      Discard();
      return false;
    }
  }
  // The driver API's kernel launches (cuBLAS, Triton, XLA): every driver call is recorded and the
  // converter keeps the launches (DriverLaunchCalls). Best effort: where the kind cannot be
  // enabled, the launches one by one; a libcupti that can do neither leaves those kernels without
  // a launch, nothing worse.
  driver_kind_ = !launch_window_ && api_->enable(CUPTI_ACTIVITY_KIND_DRIVER) == CUPTI_SUCCESS;
  if (!driver_kind_) EnableDriverLaunches(1);
  *gpu_minus_wall_ns = offset;
  return true;
}

void CuptiTracer::EnableDriverLaunches(uint8_t enable) {
  if (api_->enable_driver_api == nullptr) return;
  size_t count = 0;
  const DriverLaunchCall* calls = DriverLaunchCalls(&count);
  for (size_t i = 0; i < count; ++i) api_->enable_driver_api(calls[i].cbid, enable);
}

bool CuptiTracer::EnableRuntimeCalls(uint8_t enable) {
  if (api_->enable_runtime_api == nullptr) return false;
  size_t count = 0;
  const ApiCallName* calls = RuntimeWindowCalls(&count);
  bool all = true;
  for (size_t i = 0; i < count; ++i) {
    all = api_->enable_runtime_api(calls[i].cbid, enable) == CUPTI_SUCCESS && all;
  }
  return all;
}

void CuptiTracer::Disable() {
  if (!initialized_) return;
  for (CUpti_ActivityKind kind : kWindowKinds) api_->disable(kind);
  if (runtime_calls_) {
    EnableRuntimeCalls(0);
    runtime_calls_ = false;
  }
  if (driver_kind_) {
    api_->disable(CUPTI_ACTIVITY_KIND_DRIVER);
    driver_kind_ = false;
  } else {
    EnableDriverLaunches(0);
  }
}

uint64_t CuptiTracer::Flush(const std::function<void(std::vector<uint8_t>)>& sink) {
  if (!initialized_) return 0;
  api_->flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  size_t cupti_dropped = 0;
  api_->dropped(nullptr, 0, &cupti_dropped);
  std::vector<std::vector<uint8_t>> batches;
  uint64_t dropped = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!collecting_) return 0;
    dropped_ += cupti_dropped + refused_buffers_.exchange(0);
    RotateBatch();
    batches = std::move(pending_);
    pending_.clear();
    pending_bytes_ = 0;
    dropped = dropped_;
    collecting_ = false;
    converter_.reset();
    writer_.reset();
  }
  for (std::vector<uint8_t>& batch : batches) sink(std::move(batch));
  RequestDetach();
  return dropped;
}

void CuptiTracer::TakeReady(const std::function<void(std::vector<uint8_t>)>& sink) {
  std::vector<std::vector<uint8_t>> batches;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!collecting_ || pending_.empty()) return;
    batches = std::move(pending_);
    pending_.clear();
    pending_bytes_ = 0;
  }
  for (std::vector<uint8_t>& batch : batches) sink(std::move(batch));
}

void CuptiTracer::PollSteps() {
  // Completed buffers only (not FORCED): cheap, and the records it hands over are whole.
  FlushForSteps(0);
}

void CuptiTracer::PollStepsNow(bool idle) {
  if (!initialized_) return;
  bool window = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    window = collecting_;
  }
  FlushForSteps(idle && !window ? CUPTI_ACTIVITY_FLAG_FLUSH_FORCED : 0);
}

void CuptiTracer::FlushForSteps(uint32_t flags) {
  if (!initialized_) return;
  // The buffer callback runs on this thread or CUPTI's and takes mu_; we do not hold it here.
  // Detached, no CUPTI call at all (one would attach it again). With the NVTX hooks the steps
  // need no flush, but the MARKER buffers are still handed over as before (a window would
  // otherwise get every marker since the last one), and only the light level's launches need
  // the clock offset.
  const bool hooks = nvtx_steps_.load(std::memory_order_acquire);
  detach_->WhileAttached([&] {
    api_->flush_all(flags);
    if (hooks && launch_subscriber_ == nullptr) return;
    if (const int64_t offset = Calibrate(); offset != 0) steps_gpu_minus_wall_ns_ = offset;
  });
}

size_t CuptiTracer::TakeSteps(StepSampleEntry* out, size_t max) {
  size_t n = 0;
  {
    std::lock_guard<std::mutex> lock(steps_mu_);
    n = steps_.Take(out, max);
  }
  if (nvtx_steps_.load(std::memory_order_acquire)) return n;  // CLOCK_REALTIME already
  for (size_t i = 0; i < n; ++i) {
    out[i].start_wall_ns -= steps_gpu_minus_wall_ns_;
    out[i].end_wall_ns -= steps_gpu_minus_wall_ns_;
  }
  return n;
}

bool CuptiTracer::SetCollectiveLaunches(bool on, std::string* error) {
  if (!on) {
    if (launch_subscriber_ != nullptr) api_->unsubscribe(launch_subscriber_);
    launch_subscriber_ = nullptr;
    return true;
  }
  if (!Initialize()) {
    *error = unavailable_;
    return false;
  }
  if (launch_subscriber_ != nullptr) return true;
  if (!detach_->EnsureAttached()) {
    *error = "CUPTI could not be attached again after its detach";
    return false;
  }
  if (api_->subscribe_v2 == nullptr || api_->unsubscribe == nullptr ||
      api_->enable_callback == nullptr) {
    *error = "libcupti lacks the callback API";
    return false;
  }
  char holder[CUPTI_OLD_SUBSCRIBER_NAME_MIN_LEN * 2] = {};
  CUpti_SubscriberParams params{};
  params.structSize = CUpti_SubscriberParams_STRUCT_SIZE;
  params.subscriberName = "profctl flight recorder";
  params.oldSubscriberName = holder;
  params.oldSubscriberSize = sizeof(holder);
  CUpti_SubscriberHandle handle = nullptr;
  const CUptiResult r = api_->subscribe_v2(&handle, &LaunchCallback, &launches_, &params);
  if (r != CUPTI_SUCCESS) {
    holder[sizeof(holder) - 1] = '\0';
    *error = r == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED
                 ? "held by another CUPTI subscriber (" +
                       std::string(holder[0] != '\0' ? holder : "unknown tool") + ")"
                 : "cuptiSubscribe: " + ResultString(r);
    return false;
  }
  size_t count = 0;
  const LaunchCallbackId* ids = LaunchCallbackIds(&count);
  size_t enabled = 0;
  for (size_t i = 0; i < count; ++i) {
    if (api_->enable_callback(1, handle, ids[i].domain, ids[i].cbid) == CUPTI_SUCCESS) ++enabled;
  }
  if (enabled == 0) {
    api_->unsubscribe(handle);
    *error = "cuptiEnableCallback refused every launch callback";
    return false;
  }
  launch_subscriber_ = handle;
  return true;
}

size_t CuptiTracer::TakeLaunches(CollectiveLaunchEntry* out, size_t max) {
  const size_t n = launches_.Take(out, max);
  for (size_t i = 0; i < n; ++i) out[i].wall_ns -= steps_gpu_minus_wall_ns_;
  return n;
}

void CUPTIAPI CuptiTracer::LaunchCallback(void* userdata, CUpti_CallbackDomain domain,
                                          CUpti_CallbackId /*cbid*/, const void* data) {
  // Only the launch callbacks are enabled. Never throws (no allocation, a mutex at most).
  OnLaunchCallback(static_cast<CollectiveLaunchRecorder*>(userdata), domain, data);
}

uint64_t CuptiTracer::GpuNowNs() {
  CuptiTracer* self = Get();
  uint64_t t = 0;
  if (self->api_ == nullptr || self->api_->timestamp(&t) != CUPTI_SUCCESS) return 0;
  return t;
}

uint32_t CuptiTracer::ThreadId() { return static_cast<uint32_t>(syscall(SYS_gettid)); }

void CuptiTracer::Discard() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    collecting_ = false;
    converter_.reset();
    writer_.reset();
    pending_.clear();
    pending_bytes_ = 0;
  }
  if (initialized_) RequestDetach();
}

void CuptiTracer::RotateBatch() {
  if (writer_ == nullptr || writer_->record_count() == 0) return;
  const uint64_t carried = dropped_;
  const uint64_t lost = writer_->record_count() + writer_->dropped_records();
  std::vector<uint8_t> batch =
      writer_->Finish(static_cast<uint32_t>(getpid()), gpu_minus_wall_ns_, carried);
  if (pending_bytes_ + batch.size() > kMaxPendingBatchBytes) {
    dropped_ = carried + lost;  // the agent learns of them with the next batch that fits
    return;
  }
  dropped_ = 0;  // counted in this batch's header
  pending_bytes_ += batch.size();
  pending_.push_back(std::move(batch));
}

const char* CuptiTracer::ApiName(uint8_t domain, uint32_t cbid) {
  CuptiTracer* self = Get();
  const char* name = nullptr;
  if (self->api_ != nullptr && self->api_->callback_name != nullptr) {
    const CUpti_CallbackDomain d =
        domain == 1 ? CUPTI_CB_DOMAIN_RUNTIME_API : CUPTI_CB_DOMAIN_DRIVER_API;
    if (self->api_->callback_name(d, cbid, &name) == CUPTI_SUCCESS && name != nullptr) {
      return name;
    }
  }
  return BuiltinApiName(domain, cbid);
}

void CUPTIAPI CuptiTracer::BufferRequested(uint8_t** buffer, size_t* size, size_t* max_records) {
  CuptiTracer* self = Get();
  *max_records = 0;
  if (self->outstanding_buffers_.fetch_add(1) >= kMaxBuffers) {
    self->outstanding_buffers_.fetch_sub(1);
    self->refused_buffers_.fetch_add(1);
    *buffer = nullptr;
    *size = 0;
    return;
  }
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, kBufferBytes));
  *size = *buffer != nullptr ? kBufferBytes : 0;
  if (*buffer == nullptr) self->outstanding_buffers_.fetch_sub(1);
}

void CUPTIAPI CuptiTracer::BufferCompleted(CUcontext /*context*/, uint32_t /*stream_id*/,
                                           uint8_t* buffer, size_t /*size*/, size_t valid_size) {
  CuptiTracer* self = Get();
  if (buffer == nullptr) return;
  try {
    self->OnBuffer(buffer, valid_size);
  } catch (...) {  // bad_alloc: the buffer's records are lost, the process goes on
  }
  std::free(buffer);
  self->outstanding_buffers_.fetch_sub(1);
}

void CuptiTracer::OnBuffer(uint8_t* buffer, size_t valid_size) {
  std::lock_guard<std::mutex> lock(mu_);
  CUpti_Activity* record = nullptr;
  const size_t device_size = CuptiRecordSize(CUPTI_ACTIVITY_KIND_DEVICE);
  // Without the NVTX hooks the step signal comes from these MARKER records; only the client's
  // thread (TakeSteps) waits on steps_mu_ then.
  const bool hooks = nvtx_steps_.load(std::memory_order_relaxed);
  std::unique_lock<std::mutex> steps_lock(steps_mu_, std::defer_lock);
  while (api_->next_record(buffer, valid_size, &record) == CUPTI_SUCCESS && record != nullptr) {
    if (record->kind == CUPTI_ACTIVITY_KIND_DEVICE && devices_.size() < kMaxDevices) {
      const auto* bytes = reinterpret_cast<const uint8_t*>(record);
      devices_.emplace_back(bytes, bytes + device_size);
    }
    if (record->kind == CUPTI_ACTIVITY_KIND_MARKER && !hooks) {
      if (!steps_lock.owns_lock()) steps_lock.lock();  // once a buffer
      AddStepMarker(*record, &steps_);
    }
    if (!collecting_ || converter_ == nullptr) continue;
    // Room for the largest record plus its longest string, else a new batch.
    if (writer_->size_bytes() + kMaxStringBytes + 256 > kBatchBytes) RotateBatch();
    converter_->Add(*record);
  }
}

}  // namespace profctl::inject
