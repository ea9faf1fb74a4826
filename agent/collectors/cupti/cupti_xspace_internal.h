// The builder behind BuildCuptiXSpace (cupti_xspace.h), shared by the files of its passes and
// included by nothing else: cupti_xspace.cc (the entry point, the emitter), cupti_xspace_device.cc
// (devices, device work, memory) and cupti_xspace_host.cc (API calls, synchronizations, NVTX
// ranges and steps, the launching threads' step joins, ops, collective launches).
#ifndef PROFCTL_AGENT_COLLECTORS_CUPTI_CUPTI_XSPACE_INTERNAL_H_
#define PROFCTL_AGENT_COLLECTORS_CUPTI_CUPTI_XSPACE_INTERNAL_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/string_view.h"
#include "agent/collectors/cupti/cupti_xspace.h"
#include "agent/collectors/cupti/record_batch.h"
#include "re2/re2.h"
#include "tensorflow/profiler/xplane.pb.h"
#include "xspace/xspace.h"

namespace profctl::agent::cupti::xspace_internal {

using inject::DeviceRecord;
using inject::KernelRecord;
using xspace::XPlaneBuilder;

inline constexpr int64_t kHostPlaneId = 49;  // as TSL numbers its host plane
// TSL's ContextType::kGeneric, for the step joins (as the synthetic job).
inline constexpr int64_t kStepContextType = 0;
// The consumer wrapper joining a launching thread's work to a step marked on another thread.
// No digits: neither this builder's nor the breakdown reader's step pattern can take it for a
// step. XProf counts its span as host compute, as the thread's work between its launches is.
inline constexpr absl::string_view kStepJoinName = "launches in step";
inline constexpr absl::string_view kStatTfOp = "tf_op";

// Stream kinds in the order CUPTI lists them.
inline constexpr std::array<absl::string_view, 6> kStreamKindOrder = {
    "Compute", "MemcpyH2D", "MemcpyD2H", "MemcpyD2D", "MemcpyP2P", "Memset"};

inline uint64_t HostCorrelation(uint32_t pid, uint32_t id) {
  return (static_cast<uint64_t>(pid) << 32) | id;
}

inline int64_t CeilTo(int64_t v, int64_t unit) { return (v + unit - 1) / unit * unit; }

// What a host event is to the step joins and to op attribution.
enum class Role : uint8_t {
  kOther,
  kLaunch,  // carries a correlation id (an API call that launched device work, a sync)
  kRange,   // an NVTX range that is not a step
  kStep,    // an NVTX range that is a step
  kJoin,    // a consumer wrapper joining a launching thread's work to a step
};

// One event before it is placed: lines are filled in start order.
struct Pending {
  int64_t start_ns = 0;
  int64_t duration_ns = 0;
  // Into a batch's string table, a literal, or the builder's own names (api_names_): every
  // event's name without a copy of its own (kernel names are long).
  absl::string_view name;
  Role role = Role::kOther;
  uint64_t correlation_id = 0;  // kLaunch
  bool cut = false;             // kStep: clipped at a window edge (xspace::kStatStepCut)
  // Filled by the emitter for its kind.
  std::function<void(XPlaneBuilder&, xspace::XEvent*)> stats;

  int64_t end_ns() const { return start_ns + duration_ns; }
};

// Events of one line, placed in start order (longer first at equal starts, so enclosing ranges
// come before what they enclose; a step-join wrapper before an event with its very span, which it
// wraps).
using LineEvents = std::vector<Pending>;
void EmitLine(XPlaneBuilder& plane, xspace::XLine* line, LineEvents& events);

// BuildCuptiXSpace's passes over the batches, in order: devices, launches left out by the
// window, device work, API calls, synchronizations, NVTX ranges and steps, the launching
// threads' step joins, the ops of device work, memory; then Emit. Each pass reads what the
// earlier ones found (which device a launch went to, where each API call ran, which thread
// marks which step) and adds its events to the lines the last one emits.
class CuptiXSpaceBuilder {
 public:
  CuptiXSpaceBuilder(const std::vector<RecordBatch>& batches, const CuptiXSpaceOptions& options,
                     const RE2& step_re)
      : batches_(batches),
        options_(options),
        start_(options.profile_start_ns),
        stop_(options.profile_stop_ns),
        step_re_(step_re) {}

  void CollectDevices();

  // API calls left out by the window: the device work they launched is left out too. A process
  // enables CUPTI at the requested instant, but the agent's window opens when its own timer
  // fires (a millisecond later on a loaded host), so the first kernels of a capture can come
  // from launches that fall before it; at the end, a synchronous call (cudaMemcpy) can outlast
  // the window while its copy does not. Kept, such work would be device events with no launch:
  // XProf could not give them a step (its conformance rule "correlation"). So is device work
  // whose launch was not recorded at all: on an H100 with CUDA 13 (docs/gpu-verification.md),
  // CUPTI recorded the first kernels and memsets of a window whose launches came before it was
  // enabled. Counted apart (launched_outside).
  void FindUnlaunched();

  // Device side: per device, per stream.
  void AddDeviceWork();

  // Host side, per thread: each API call, with the device it launched work on.
  void AddApiCalls();

  // Synchronization: on the thread of the API call that synchronized (same correlation id),
  // inside that call's span, as TSL shows cuStreamSynchronize on its host thread lines.
  void AddSynchronizations();

  // A step range (its name matches the step pattern) that overlaps the window without lying
  // wholly inside it: *p clipped to the window and marked cut.
  bool ClipStepRange(const RecordBatch& b, const inject::NvtxRangeRecord& r, absl::string_view name,
                     Pending* p);

  // NVTX ranges on their threads; those matching the step pattern grouped by step number.
  void AddNvtxRanges();

  // Per step number, the earliest range on the host is the root (XProf's step); the others join
  // it. Each process's step spans are kept for the launching threads' joins.
  void LinkSteps();

  // A thread that launches device work inside a step that another thread of its process marks,
  // and not inside a step range of its own, joins that step: PyTorch's autograd thread runs the
  // backward pass while the Python main thread is inside "train_step N". XProf groups a thread's
  // events into a step only through a root or a consumer wrapper on that thread, so without one
  // it leaves that device work out of every step. Each wrapper (`_ct`/`_c` of the step's root,
  // which gets `_pt`/`_p`) covers consecutive launches of one step: from the first to the last of
  // the outermost events that hold them and lie wholly inside the step's span (siblings on the
  // line, so the wrapper nests with everything there and never reaches into another step),
  // widened by 1 ns at each end where the line leaves room, so that it encloses even a lone
  // launch strictly. A step range of the thread's own between launches starts a new wrapper.
  void JoinLaunchingThreads();

  // Each launch's op, the tf_op of the device work it launched: the innermost NVTX range that is
  // not a step holding the launch's start on its own thread; else the one on the thread that
  // marks the process's step holding the launch, at the launch's start (the main thread's
  // "forward_backward" for the autograd thread's launches); else the launching API call.
  void AssignOps();

  // The roots' stats, once the joins are known.
  void MarkStepRoots();

  // Device memory: running bytes in use per (pid, device), from zero at the window start.
  void AddMemoryEvents();

  // The flight recorder's NCCL launches: instants on the launching thread's line, already on the
  // window's clock; their names live in launch_names_ (map nodes do not move).
  void AddCollectiveLaunches();

  // The host plane, one plane per GPU, the window.
  CuptiXSpaceStats Emit(tensorflow::profiler::XSpace* space);

 private:
  struct Stream {
    std::set<absl::string_view> kinds;
    LineEvents events;
  };
  // Where each API call went, by host correlation id: its thread and span.
  struct ApiSpan {
    uint32_t tid = 0;
    int64_t start_ns = 0;
    int64_t end_ns = 0;
  };
  struct StepRange {
    int64_t start_ns = 0;
    int64_t end_ns = 0;
    uint32_t pid = 0;
    uint32_t tid = 0;
    size_t index = 0;  // into threads_[tid].second
  };
  // A step as one process marks it.
  struct StepSpan {
    int64_t start_ns = 0;
    int64_t end_ns = 0;
    int64_t step = 0;
    uint32_t tid = 0;  // the marking thread
  };
  struct StepRoot {
    uint32_t tid = 0;
    size_t index = 0;  // into threads_[tid].second
    int64_t context = 0;
    bool joined = false;  // other threads join it (the root produces the context)
  };
  // From time_ns on, the innermost NVTX range open on a thread has this op (-1: none).
  struct OpPoint {
    int64_t time_ns = 0;
    int32_t op = -1;
  };
  static constexpr size_t kNone = std::numeric_limits<size_t>::max();

  // The span of `spans` (disjoint, in start order) holding [start, end], or kNone.
  static size_t SpanHolding(const std::vector<StepSpan>& spans, int64_t start, int64_t end);

  // JoinLaunchingThreads for one thread's line, whose process marks `spans`.
  void JoinThread(uint32_t tid, const std::vector<StepSpan>& spans, LineEvents& events);

  // A thread's NVTX ranges that are not steps, as a timeline of the innermost one open.
  std::vector<OpPoint> RangeTimeline(const LineEvents& events);
  static int32_t OpAt(const std::vector<OpPoint>& points, int64_t t);
  int32_t InternOp(const std::string& op);
  // The tf_op of the device work with this host correlation id.
  absl::string_view OpOf(uint64_t correlation_id) const;

  // Whether a record lies wholly inside the window; its wall-clock [*s, *e) when it does.
  bool Inside(const RecordBatch& b, uint64_t gpu_start, uint64_t gpu_end, int64_t* s,
              int64_t* e) const;
  // Wall-clock [begin, end) of a record, if wholly inside the window; else counted.
  bool Place(const RecordBatch& b, uint64_t gpu_start, uint64_t gpu_end, int64_t* begin,
             int64_t* duration);
  // Device work whose launch is not inside the window, or was never recorded: left out, counted.
  // Work inside the window whose launch no batch holds at all is counted apart too
  // (unrecorded_launches): its launches were lost, not merely outside the window.
  bool LaunchedOutside(const RecordBatch& b, uint32_t correlation_id, uint64_t gpu_start,
                       uint64_t gpu_end);

  void AddKernels(const RecordBatch& b);
  void AddMemcpys(const RecordBatch& b);
  void AddMemsets(const RecordBatch& b);

  const std::vector<RecordBatch>& batches_;
  const CuptiXSpaceOptions& options_;
  const int64_t start_;
  const int64_t stop_;
  const RE2& step_re_;
  CuptiXSpaceStats stats_;
  std::map<uint32_t, std::pair<DeviceRecord, std::string>> devices_;
  // Which correlation ids launched device work on which device.
  absl::flat_hash_map<uint64_t, uint32_t> launch_device_;
  // (pid << 32 | CUDA context id) -> device, from the device activity (synchronization records
  // name a context, not a device).
  absl::flat_hash_map<uint64_t, uint32_t> context_device_;
  absl::flat_hash_set<uint64_t> unlaunched_;
  absl::flat_hash_set<uint64_t> launched_;  // API calls inside the window
  std::map<uint32_t, std::map<uint32_t, Stream>> gpu_;
  std::map<uint32_t, std::pair<uint32_t, LineEvents>> threads_;  // tid -> (pid, events)
  absl::flat_hash_map<uint64_t, ApiSpan> api_spans_;
  std::map<int64_t, std::vector<StepRange>> steps_;
  std::map<int64_t, StepRoot> roots_;
  absl::flat_hash_map<uint32_t, std::vector<StepSpan>> step_spans_;  // by pid
  // Op names (tf_op), each once, and the op of each launch by host correlation id.
  std::vector<std::string> ops_;
  absl::flat_hash_map<std::string, int32_t> op_index_;
  absl::flat_hash_map<uint64_t, int32_t> launch_ops_;
  std::map<std::pair<uint32_t, uint32_t>, std::pair<int64_t, int64_t>> in_use_;  // (now, peak)
  // "cuda_api_<cbid>" for API records without a name, each once (map nodes do not move).
  std::map<uint32_t, std::string> api_names_;
  // Kernel name -> "nccl<Op>", each once.
  std::map<std::string, std::string, std::less<>> launch_names_;

  absl::string_view ApiName(uint32_t cbid);
};

}  // namespace profctl::agent::cupti::xspace_internal

#endif  // PROFCTL_AGENT_COLLECTORS_CUPTI_CUPTI_XSPACE_INTERNAL_H_
