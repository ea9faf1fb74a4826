// profctl_fake_cuda_app: a stand-in for a CUDA training process running under
// libprofctl_inject.so, for tests on machines without a GPU (tests/cupti_e2e_check.py).
//
// It is the injection library minus CUPTI: the library's own agent client (InjectClient,
// RegistrationFromEnvironment: PROFCTL_AGENT_SOCKET, RANK, LOCAL_RANK, CUDA_VISIBLE_DEVICES) and
// its own record conversion (CuptiRecordConverter over real CUDA 13 CUPTI structs laid out as
// libcupti lays out its activity buffers). Only the GPU is simulated: when the agent's window
// ends, the tracer writes the records a data-parallel training step would have produced over the
// window, on a GPU clock `--gpu-offset-ms` away from the wall clock:
//
//   NVTX "train_step <n>" [ H2D copy (--input-ms) | kernels (--compute-ms) | all-reduce kernel
//   until --pod-ready-ms + --allreduce-ms | D2H copy ] with the CUDA API calls that launched them
//   (correlation ids; the GEMMs through the driver's cuLaunchKernelEx, as cuBLAS does), a
//   cudaStreamSynchronize and its synchronization record, and the device.
//
// Steps start every --step-ms on the wall clock (step n at n * step-ms since the epoch), so
// processes given the same --step-ms share step numbers and boundaries, as the ranks of one job
// do. The all-reduce of every rank ends at --pod-ready-ms + --allreduce-ms into the step: a rank
// whose input + compute ends earlier waits inside it (give every rank the slowest one's
// --pod-ready-ms).
//
// Between and during windows it also sends what the library sends unprompted: the step signal
// (each step that ended since it started, as StepSamples) and, while the agent's flight recorder
// asks for it, each step's all-reduce launch (CollectiveLaunches, from the main thread), as the
// library's CUPTI launch callbacks would have kept it (tests/cupti_recorder_e2e_check.py).
//
//   --held-by=TEXT   GPU tracing is unavailable ("held by TEXT"), as when another CUPTI subscriber
//                    (Kineto, Nsight) is there: the agent must report it, not record silence.
//   --ready-file=F   written (atomically) once the agent has the registration.
//   --run-ms=N       exit after N ms (default: run until SIGTERM/SIGINT).
//   --kernels=N      compute kernels per step (default 4; thousands make a window of hundreds of
//                    MB of records, for measuring the agent's memory: docs/agent-protection.md).
//   --steps=N        ignored (examples/cuda_steps' flag: scripts/gpu_verify.py's tests run this
//                    app in its place).
//   --die-in-window-ms=N
//                    SIGKILL itself N ms after recording starts (a rank that crashes mid-capture:
//                    the agent must keep every other process's data).
#include <cupti_activity.h>
#include <cupti_driver_cbid.h>
#include <cupti_runtime_cbid.h>
#include <signal.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "inject/cupti_records.h"
#include "inject/inject_client.h"
#include "inject/launcher_env.h"
#include "inject/record_batch_writer.h"
#include "tests/cupti_test_records.h"
#include "tests/test_time.h"

namespace profctl::inject {
namespace {

using ::profctl::test_time::kMs;
using ::profctl::test_time::kUs;
constexpr size_t kBatchBytes = size_t{1} << 20;

struct Options {
  int64_t step_ns = 20 * kMs;
  int64_t input_ns = 1500 * kUs;
  int64_t compute_ns = 10 * kMs;
  int64_t pod_ready_ns = -1;  // -1: this rank's own input + compute
  int64_t allreduce_ns = 2 * kMs;
  int64_t gpu_offset_ns = 0;
  int kernels = 4;
  std::string held_by;
  std::string ready_file;
  std::string socket;
  int64_t die_in_window_ns = -1;
};

// CLOCK_REALTIME ns at which recording started (0: not recording), for --die-in-window-ms.
std::atomic<int64_t> g_recording_since{0};

int64_t WallNs() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

// A CUPTI activity buffer: records back to back, each sizeof its struct (8-aligned), as libcupti
// lays them out. Full buffers are handed to the converter, as CUPTI's buffer-completed callback
// does.
class ActivityBuffer {
 public:
  explicit ActivityBuffer(CuptiRecordConverter* converter) : converter_(converter) {}
  ~ActivityBuffer() { Complete(); }
  ActivityBuffer(const ActivityBuffer&) = delete;
  ActivityBuffer& operator=(const ActivityBuffer&) = delete;

  template <typename T>
  T& Add() {
    static_assert(sizeof(T) % 8 == 0);
    if (size_ + sizeof(T) > sizeof(bytes_)) Complete();
    T* record = reinterpret_cast<T*>(bytes_ + size_);
    std::memset(record, 0, sizeof(T));
    size_ += sizeof(T);
    return *record;
  }
  void Complete() {
    if (size_ > 0) converter_->AddBuffer(bytes_, size_);
    size_ = 0;
  }

 private:
  CuptiRecordConverter* converter_;
  alignas(8) uint8_t bytes_[64 * 1024] = {};
  size_t size_ = 0;
};

// The Tracer the library would have, with the GPU simulated (see the file comment).
class SimulatedGpuTracer : public Tracer {
 public:
  explicit SimulatedGpuTracer(const Options& options)
      : options_(options),
        pid_(static_cast<uint32_t>(getpid())),
        tid_(static_cast<uint32_t>(syscall(SYS_gettid))) {}

  std::string Unavailable() override {
    return options_.held_by.empty() ? ""
                                    : "held by another CUPTI subscriber (" + options_.held_by + ")";
  }
  bool Enable(std::string* error, int64_t* gpu_minus_wall_ns) override {
    if (!Unavailable().empty()) {
      *error = Unavailable();
      return false;
    }
    start_ns_ = WallNs();
    stop_ns_ = 0;
    g_recording_since.store(start_ns_);
    *gpu_minus_wall_ns = options_.gpu_offset_ns;
    return true;
  }
  void Disable() override {
    stop_ns_ = WallNs();
    g_recording_since.store(0);
  }
  uint64_t Flush(const std::function<void(std::vector<uint8_t>)>& sink) override {
    if (stop_ns_ == 0) stop_ns_ = WallNs();
    RecordBatchWriter writer(kBatchBytes);
    CuptiRecordConverter converter(&writer);
    {
      ActivityBuffer buffer(&converter);
      Device(buffer);
      // Every step that starts inside the window and ends inside it.
      const int64_t first = (start_ns_ + options_.step_ns - 1) / options_.step_ns;
      for (int64_t n = first; (n + 1) * options_.step_ns <= stop_ns_; ++n) {
        Step(buffer, n, n * options_.step_ns);
        if (writer.size_bytes() > kBatchBytes / 2) {
          buffer.Complete();
          sink(writer.Finish(pid_, options_.gpu_offset_ns, 0));
        }
      }
    }
    if (writer.record_count() > 0) sink(writer.Finish(pid_, options_.gpu_offset_ns, 0));
    // Records the writer had no room for are in its batch headers; none were lost elsewhere.
    return 0;
  }
  void Discard() override {
    stop_ns_ = 0;
    g_recording_since.store(0);
  }

  // The step signal and the flight recorder's light level, simulated: every step that ended
  // since the last call (from the process's start), and, while the agent's recorder asks for
  // them, each step's all-reduce launch (the one Step writes), from the main thread.
  size_t TakeSteps(StepSampleEntry* out, size_t max) override {
    const int64_t now = WallNs();
    if (next_step_ < 0) next_step_ = now / options_.step_ns + 1;
    size_t n = 0;
    while (n < max) {
      const int64_t t = next_step_ * options_.step_ns;
      const int64_t end = StepEnd(t);
      if (end > now) break;
      out[n++] = {t + 10 * kUs, end, next_step_ % 1'000'000};
      if (launches_on_ && launches_.size() < 4096) {
        launches_.push_back({AllReduceLaunchAt(t), launch_seq_++, tid_, /*name_index=*/1});
      }
      ++next_step_;
    }
    return n;
  }
  bool SetCollectiveLaunches(bool on, std::string* /*error*/) override {
    launches_on_ = on;
    return true;
  }
  size_t TakeLaunches(CollectiveLaunchEntry* out, size_t max) override {
    const size_t n = std::min(max, launches_.size());
    std::copy(launches_.begin(), launches_.begin() + static_cast<ptrdiff_t>(n), out);
    launches_.erase(launches_.begin(), launches_.begin() + static_cast<ptrdiff_t>(n));
    return n;
  }
  std::string_view LaunchName(uint32_t /*id*/) override { return kAllReduceKernel; }
  void ClearLaunches() override { launches_.clear(); }

 private:
  static constexpr const char* kAllReduceKernel = "ncclDevKernel_AllReduce_Sum_bf16_RING_LL";

  // The span of Step's work for a step starting at `t`, as Step lays it out.
  int64_t PerKernel() const { return std::max<int64_t>(1, options_.compute_ns / options_.kernels); }
  int64_t Gap() const { return std::clamp<int64_t>(PerKernel(), 2, 20 * kUs); }
  int64_t AllReduceLaunchAt(int64_t t) const {
    return t + 50 * kUs + options_.kernels * Gap() + 20 * kUs;
  }
  int64_t StepEnd(int64_t t) const {
    const int64_t k_at = t + 100 * kUs + options_.input_ns + options_.kernels * PerKernel();
    const int64_t ready = options_.pod_ready_ns >= 0 ? t + 100 * kUs + options_.pod_ready_ns : k_at;
    return std::max(ready, k_at) + options_.allreduce_ns + 100 * kUs + 20 * kUs;
  }

  uint64_t Gpu(int64_t wall_ns) const {
    return static_cast<uint64_t>(wall_ns + options_.gpu_offset_ns);
  }

  static void Device(ActivityBuffer& b) {
    testkit::FillH100Device(b.Add<CUpti_ActivityDevice5>(), 0, "profctl fake GPU");
  }

  void Api(ActivityBuffer& b, CUpti_CallbackId cbid, uint32_t corr, int64_t start, int64_t end,
           CUpti_ActivityKind kind = CUPTI_ACTIVITY_KIND_RUNTIME) {
    testkit::FillApi(b.Add<CUpti_ActivityAPI>(), kind, cbid, corr, Gpu(start), Gpu(end), pid_,
                     tid_);
  }
  void Marker(ActivityBuffer& b, CUpti_ActivityFlag flag, uint32_t id, int64_t at,
              const char* name) {
    testkit::FillMarker(b.Add<CUpti_ActivityMarker2>(), flag, id, Gpu(at), pid_, tid_, name);
  }
  void Kernel(ActivityBuffer& b, const char* name, uint32_t stream, uint32_t corr, int64_t start,
              int64_t end) {
    auto& k = b.Add<CUpti_ActivityKernel10>();
    k.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
    k.start = Gpu(start);
    k.end = Gpu(end);
    k.deviceId = 0;
    k.streamId = stream;
    k.correlationId = corr;
    k.gridX = 132;
    k.gridY = k.gridZ = 1;
    k.blockX = 384;
    k.blockY = k.blockZ = 1;
    k.registersPerThread = 168;
    k.dynamicSharedMemory = 215040;
    k.name = name;
  }
  void Memcpy(ActivityBuffer& b, CUpti_ActivityMemcpyKind kind, uint64_t bytes, uint32_t stream,
              uint32_t corr, int64_t start, int64_t end) {
    auto& c = b.Add<CUpti_ActivityMemcpy6>();
    c.kind = CUPTI_ACTIVITY_KIND_MEMCPY;
    c.copyKind = kind;
    c.srcKind = kind == CUPTI_ACTIVITY_MEMCPY_KIND_HTOD ? CUPTI_ACTIVITY_MEMORY_KIND_PINNED
                                                        : CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
    c.dstKind = kind == CUPTI_ACTIVITY_MEMCPY_KIND_HTOD ? CUPTI_ACTIVITY_MEMORY_KIND_DEVICE
                                                        : CUPTI_ACTIVITY_MEMORY_KIND_PINNED;
    c.flags = CUPTI_ACTIVITY_FLAG_MEMCPY_ASYNC;
    c.bytes = bytes;
    c.start = Gpu(start);
    c.end = Gpu(end);
    c.deviceId = 0;
    c.streamId = stream;
    c.correlationId = corr;
  }

  // One training step starting at `t` (wall ns).
  void Step(ActivityBuffer& b, int64_t n, int64_t t) {
    static constexpr const char* kKernels[] = {
        "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1",
        "void at::native::vectorized_elementwise_kernel<4, at::native::GeluCUDAKernelImpl>",
        "sm90_xmma_gemm_bf16bf16_bf16f32_f32_nn_n_tilesize128x256x64_warpgroupsize2x1x1",
        "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::MeanOps>>",
    };
    constexpr uint32_t kCompute = 7, kH2d = 13, kComm = 21;
    const uint32_t marker = static_cast<uint32_t>(n & 0x7FFFFFFF);
    // Step numbers as a job shows them (small), the same in every process with this --step-ms.
    step_name_ = "train_step " + std::to_string(n % 1'000'000);
    const int64_t ids = std::max(64, options_.kernels + 8);  // correlation ids a step uses
    uint32_t corr = static_cast<uint32_t>((n * ids) & 0xFFFFFFFF);
    Marker(b, CUPTI_ACTIVITY_FLAG_MARKER_START, marker, t + 10 * kUs, step_name_.c_str());
    // Input: an async H2D copy.
    int64_t at = t + 50 * kUs;
    Api(b, CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_v3020, ++corr, at, at + 10 * kUs);
    const int64_t input_end = t + 100 * kUs + options_.input_ns;
    Memcpy(b, CUPTI_ACTIVITY_MEMCPY_KIND_HTOD, 32 << 20, kH2d, corr, t + 100 * kUs, input_end);
    // Compute: kernels back to back after the input.
    const int64_t per_kernel = std::max<int64_t>(1, options_.compute_ns / options_.kernels);
    // Launches 20 us apart (closer with thousands of kernels, so they stay in the step).
    const int64_t gap = std::clamp<int64_t>(per_kernel, 2, 20 * kUs);
    int64_t k_at = input_end;
    for (int i = 0; i < options_.kernels; ++i) {
      at += gap;
      if (i % 2 == 0) {  // a GEMM: cuBLAS launches it through the driver API
        Api(b, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx, ++corr, at, at + gap * 2 / 5,
            CUPTI_ACTIVITY_KIND_DRIVER);
      } else {
        Api(b, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, ++corr, at, at + gap * 2 / 5);
      }
      Kernel(b, kKernels[i % 4], kCompute, corr, k_at, k_at + per_kernel);
      k_at += per_kernel;
    }
    // The all-reduce: from this rank's end of compute until the slowest rank's plus its own time.
    const int64_t ready = options_.pod_ready_ns >= 0 ? t + 100 * kUs + options_.pod_ready_ns : k_at;
    const int64_t reduce_end = std::max(ready, k_at) + options_.allreduce_ns;
    at += 20 * kUs;
    Api(b, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, ++corr, at, at + 8 * kUs);
    Kernel(b, kAllReduceKernel, kComm, corr, k_at, reduce_end);
    // The loss back to the host, then the host waits for the stream.
    at += 20 * kUs;
    Api(b, CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_v3020, ++corr, at, at + 10 * kUs);
    const int64_t out_end = reduce_end + 100 * kUs;
    Memcpy(b, CUPTI_ACTIVITY_MEMCPY_KIND_DTOH, 4096, kCompute, corr, reduce_end, out_end);
    at += 20 * kUs;
    Api(b, CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_v3020, ++corr, at, out_end + 5 * kUs);
    auto& y = b.Add<CUpti_ActivitySynchronization2>();
    y.kind = CUPTI_ACTIVITY_KIND_SYNCHRONIZATION;
    y.type = CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE;
    y.start = Gpu(at + 1 * kUs);
    y.end = Gpu(out_end + 4 * kUs);
    y.correlationId = corr;
    y.streamId = kCompute;
    y.cudaEventId = CUPTI_SYNCHRONIZATION_INVALID_VALUE;
    y.cudaEventSyncId = CUPTI_SYNCHRONIZATION_INVALID_VALUE;
    Marker(b, CUPTI_ACTIVITY_FLAG_MARKER_END, marker, out_end + 20 * kUs, nullptr);
    // The converter copies the start's name when the buffer completes: now, while step_name_
    // still holds it.
    b.Complete();
  }

  const Options& options_;
  const uint32_t pid_;
  const uint32_t tid_;
  int64_t start_ns_ = 0;
  int64_t stop_ns_ = 0;
  std::string step_name_;
  // The step signal and the launches: the client's thread only.
  int64_t next_step_ = -1;
  bool launches_on_ = false;
  uint64_t launch_seq_ = 0;
  std::vector<CollectiveLaunchEntry> launches_;
};

// `flag` VALUE in milliseconds, in [min_ms, 600000]; exits 2 naming the flag otherwise.
bool ParseMs(std::string_view arg, std::string_view flag, int64_t* out_ns, double min_ms = 0) {
  if (arg.substr(0, flag.size()) != flag) return false;
  const std::string value(arg.substr(flag.size()));
  char* end = nullptr;
  errno = 0;
  const double ms = std::strtod(value.c_str(), &end);
  if (value.empty() || *end != '\0' || errno != 0 || !std::isfinite(ms) || ms < min_ms ||
      ms > 600'000) {
    std::fprintf(stderr,
                 "profctl_fake_cuda_app: %.*s wants milliseconds (%.0f..600000), got '%s'\n",
                 static_cast<int>(flag.size() - 1), flag.data(), min_ms, value.c_str());
    std::exit(2);
  }
  *out_ns = static_cast<int64_t>(ms * kMs);
  return true;
}

std::atomic<bool> g_stop{false};

void OnSignal(int /*sig*/) { g_stop.store(true); }

int Main(int argc, char** argv) {
  Options o;
  int64_t run_ns = -1;
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    if (ParseMs(a, "--step-ms=", &o.step_ns) || ParseMs(a, "--input-ms=", &o.input_ns) ||
        ParseMs(a, "--compute-ms=", &o.compute_ns) ||
        ParseMs(a, "--pod-ready-ms=", &o.pod_ready_ns) ||
        ParseMs(a, "--allreduce-ms=", &o.allreduce_ns) ||
        ParseMs(a, "--gpu-offset-ms=", &o.gpu_offset_ns, -600'000) ||
        ParseMs(a, "--run-ms=", &run_ns) ||
        ParseMs(a, "--die-in-window-ms=", &o.die_in_window_ns)) {
      continue;
    }
    if (a.substr(0, 10) == "--kernels=") {
      const std::string value(a.substr(10));
      char* end = nullptr;
      const long n = std::strtol(value.c_str(), &end, 10);
      if (value.empty() || *end != '\0' || n < 1 || n > 1'000'000) {
        std::fprintf(stderr, "profctl_fake_cuda_app: --kernels wants 1..1000000, got '%s'\n",
                     value.c_str());
        return 2;
      }
      o.kernels = static_cast<int>(n);
    } else if (a.substr(0, 8) == "--steps=") {
      // examples/cuda_steps' flag (scripts/gpu_verify.py runs this in its place in tests):
      // accepted, ignored; the loop runs until SIGTERM or --run-ms.
    } else if (a.substr(0, 10) == "--held-by=") {
      o.held_by = std::string(a.substr(10));
    } else if (a.substr(0, 13) == "--ready-file=") {
      o.ready_file = std::string(a.substr(13));
    } else {
      std::fprintf(stderr,
                   "usage: profctl_fake_cuda_app [--step-ms=20] [--input-ms=1.5] "
                   "[--compute-ms=10] [--kernels=4] [--pod-ready-ms=MS] [--allreduce-ms=2] "
                   "[--gpu-offset-ms=0] [--held-by=TEXT] [--ready-file=PATH] [--run-ms=MS] "
                   "[--die-in-window-ms=MS]\n"
                   "unknown argument: %s\n",
                   argv[i]);
      return 2;
    }
  }
  const int64_t busy =
      100 * kUs + std::max(o.pod_ready_ns, o.input_ns + o.compute_ns) + o.allreduce_ns + 200 * kUs;
  if (o.step_ns < kMs || busy > o.step_ns) {
    std::fprintf(stderr,
                 "profctl_fake_cuda_app: a step (%.3f ms of input, compute and all-reduce) does "
                 "not fit in --step-ms=%.3f (at least 1)\n",
                 static_cast<double>(busy) / kMs, static_cast<double>(o.step_ns) / kMs);
    return 2;
  }
  signal(SIGTERM, &OnSignal);
  signal(SIGINT, &OnSignal);

  SimulatedGpuTracer tracer(o);
  InjectClientOptions client_options;
  const char* path = std::getenv(kAgentSocketEnv);
  client_options.socket_path = path != nullptr && *path != '\0' ? path : kDefaultAgentSocket;
  client_options.registration = RegistrationFromEnvironment(true, true);
  client_options.initial_backoff_ms = 20;
  client_options.max_backoff_ms = 200;
  client_options.log_once = [](const std::string& line) {
    std::fprintf(stderr, "profctl_fake_cuda_app: %s\n", line.c_str());
  };
  InjectClient client(std::move(client_options), &tracer);
  client.Start();

  const int64_t started = WallNs();
  bool ready = false;
  while (!g_stop.load() && (run_ns < 0 || WallNs() - started < run_ns)) {
    if (!ready && client.registrations_for_testing() > 0 && !o.ready_file.empty()) {
      const std::string tmp = o.ready_file + ".tmp";
      if (FILE* f = std::fopen(tmp.c_str(), "we"); f != nullptr) {
        std::fprintf(f, "%d\n", static_cast<int>(getpid()));
        std::fclose(f);
        ready = std::rename(tmp.c_str(), o.ready_file.c_str()) == 0;
      }
    }
    if (const int64_t since = g_recording_since.load();
        o.die_in_window_ns >= 0 && since != 0 && WallNs() - since >= o.die_in_window_ns) {
      kill(getpid(), SIGKILL);
    }
    // The "training loop": nothing to compute (the GPU is simulated); wake up to notice the
    // registration, the end of the run and the time to die.
    usleep(10'000);
  }
  client.Stop();
  return 0;
}

}  // namespace
}  // namespace profctl::inject

int main(int argc, char** argv) { return profctl::inject::Main(argc, argv); }
