#include "agent/collectors/cupti/cupti_xspace.h"

#include <algorithm>
#include <array>
#include <functional>
#include <iterator>
#include <limits>
#include <map>
#include <numeric>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "agent/collectors/cupti/tf_op_names.h"
#include "re2/re2.h"
#include "xspace/xspace.h"

namespace profctl::agent::cupti {
namespace {

using inject::DeviceRecord;
using inject::KernelRecord;
using xspace::kApiOpScope;
using xspace::kNvtxOpScope;
using xspace::XPlaneBuilder;

constexpr int64_t kHostPlaneId = 49;  // as TSL numbers its host plane
// TSL's ContextType::kGeneric, for the step joins (as the synthetic job).
constexpr int64_t kStepContextType = 0;
// The consumer wrapper joining a launching thread's work to a step marked on another thread.
// No digits: neither this builder's nor the breakdown reader's step pattern can take it for a
// step. XProf counts its span as host compute, as the thread's work between its launches is.
constexpr absl::string_view kStepJoinName = "launches in step";
constexpr absl::string_view kStatTfOp = "tf_op";

// CUpti_ActivityMemcpyKind values (kept in MemcpyRecord::copy_kind).
enum CopyKind : uint8_t {
  kHtoD = 1,
  kDtoH = 2,
  kHtoA = 3,
  kAtoH = 4,
  kAtoA = 5,
  kAtoD = 6,
  kDtoA = 7,
  kDtoD = 8,
  kHtoH = 9,
  kPtoP = 10
};
// CUPTI_ACTIVITY_FLAG_MEMCPY_ASYNC / MEMSET_ASYNC.
constexpr uint32_t kAsyncFlag = 1;

// CUpti_ActivityMemoryKind names, as CUPTI writes them in memcpy_details.
absl::string_view MemoryKindName(uint32_t kind) {
  static constexpr std::array<absl::string_view, 8> kNames = {
      "unknown", "pageable", "pinned",        "device",
      "array",   "managed",  "device_static", "managed_static"};
  return kind < kNames.size() ? kNames[kind] : kNames[0];
}

// XProf classifies copies by name prefix (TSL_WIRE.md); the stream line lists CUPTI's kind.
struct CopyNames {
  absl::string_view event;
  absl::string_view stream_kind;
};
CopyNames CopyNamesOf(uint8_t kind) {
  switch (kind) {
    case kHtoD:
    case kAtoD:
      return {"MemcpyHToD", "MemcpyH2D"};
    case kDtoH:
    case kDtoA:
      return {"MemcpyDToH", "MemcpyD2H"};
    case kDtoD:
    case kAtoA:
      return {"MemcpyDToD", "MemcpyD2D"};
    case kPtoP:
      return {"MemcpyDToD", "MemcpyP2P"};
    case kHtoA:
      return {"MemcpyHToA", "MemcpyH2D"};
    case kAtoH:
      return {"MemcpyAToH", "MemcpyD2H"};
    case kHtoH:
      return {"MemcpyHToH", "MemcpyD2D"};
    default:
      return {"Memcpy", "MemcpyD2D"};
  }
}

// Stream kinds in the order CUPTI lists them.
constexpr std::array<absl::string_view, 6> kStreamKindOrder = {
    "Compute", "MemcpyH2D", "MemcpyD2H", "MemcpyD2D", "MemcpyP2P", "Memset"};

// Synchronization events are named as TSL's CUPTI tracer names them
// (xla/backends/profiler/gpu/cupti_buffer_events.cc, AddSynchronizationActivityEvent).
absl::string_view SyncEventName(uint8_t type) {
  switch (static_cast<inject::SyncType>(type)) {
    case inject::SyncType::kEventSynchronize:
      return "cuEventSynchronize";
    case inject::SyncType::kStreamWaitEvent:
      return "cuStreamWaitEvent";
    case inject::SyncType::kStreamSynchronize:
      return "cuStreamSynchronize";
    case inject::SyncType::kContextSynchronize:
      return "cuCtxSynchronize";
    default:
      return "unknown synchronization event";
  }
}

uint64_t HostCorrelation(uint32_t pid, uint32_t id) {
  return (static_cast<uint64_t>(pid) << 32) | id;
}

int64_t CeilTo(int64_t v, int64_t unit) { return (v + unit - 1) / unit * unit; }

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

void AddDoubleStat(xspace::XEvent* event, int64_t stat_id, double v) {
  xspace::XStat* s = event->add_stats();
  s->set_metadata_id(stat_id);
  s->set_double_value(v);
}
// A ref value, as TSL stores repeated strings (kernel_details, memcpy_details).
void AddRefStat(XPlaneBuilder& plane, xspace::XEvent* event, absl::string_view stat,
                absl::string_view v) {
  xspace::XStat* s = event->add_stats();
  s->set_metadata_id(plane.StatMetadataId(stat));
  s->set_ref_value(static_cast<uint64_t>(plane.StatMetadataId(v)));
}
void AddPlaneStrStat(XPlaneBuilder& plane, absl::string_view name, absl::string_view v) {
  xspace::XStat* s = plane.plane()->add_stats();
  s->set_metadata_id(plane.StatMetadataId(name));
  s->set_str_value(std::string(v));
}

// XProf's GPU device capability stats, with the value types TSL's CUPTI tracer writes.
void AddDeviceCapabilities(XPlaneBuilder& p, const DeviceRecord& d, absl::string_view name) {
  AddPlaneStrStat(p, "device_vendor", "Nvidia");
  AddPlaneStrStat(p, "gpu_device_name", name);
  p.AddPlaneStat(p.StatMetadataId("clock_rate"), static_cast<int64_t>(d.core_clock_khz));
  p.AddPlaneStat(p.StatMetadataId("core_count"), static_cast<int64_t>(d.sm_count));
  p.AddPlaneStat(p.StatMetadataId("memory_bandwidth"), d.memory_bandwidth);
  p.AddPlaneStat(p.StatMetadataId("memory_size"), d.memory_size);
  p.AddPlaneStat(p.StatMetadataId("compute_cap_major"),
                 static_cast<int64_t>(d.compute_capability_major));
  p.AddPlaneStat(p.StatMetadataId("compute_cap_minor"),
                 static_cast<int64_t>(d.compute_capability_minor));
}

// Events of one line, placed in start order (longer first at equal starts, so enclosing ranges
// come before what they enclose; a step-join wrapper before an event with its very span, which it
// wraps).
using LineEvents = std::vector<Pending>;
void EmitLine(XPlaneBuilder& plane, xspace::XLine* line, LineEvents& events) {
  std::stable_sort(events.begin(), events.end(), [](const Pending& a, const Pending& b) {
    if (a.start_ns != b.start_ns) return a.start_ns < b.start_ns;
    if (a.duration_ns != b.duration_ns) return a.duration_ns > b.duration_ns;
    return a.role == Role::kJoin && b.role != Role::kJoin;
  });
  for (Pending& p : events) {
    xspace::XEvent* e =
        plane.AddEvent(line, plane.EventMetadataId(p.name), p.start_ns, p.duration_ns);
    if (p.stats) p.stats(plane, e);
    if (p.cut) plane.AddStat(e, plane.StatMetadataId(xspace::kStatStepCut), int64_t{1});
  }
}

}  // namespace

std::optional<double> TheoreticalOccupancyPct(const KernelRecord& k, const DeviceRecord& d) {
  constexpr int64_t kWarpSize = 32;
  constexpr int64_t kRegisterAllocUnit = 256;  // registers, per warp
  constexpr int64_t kSharedAllocUnit = 128;
  constexpr int64_t kSharedReservedPerBlock = 1024;
  if (d.max_warps_per_sm == 0 || d.max_blocks_per_sm == 0 || d.max_registers_per_sm == 0 ||
      d.max_shared_bytes_per_sm == 0) {
    return std::nullopt;
  }
  // CUDA allows at most 1024 threads per block; anything else is not a real launch.
  constexpr int64_t kMaxThreadsPerBlock = 1024;
  int64_t threads = 1;
  for (const int32_t dim : k.block) {
    if (dim <= 0 || dim > kMaxThreadsPerBlock) return std::nullopt;
    threads *= dim;
    if (threads > kMaxThreadsPerBlock) return std::nullopt;
  }
  const int64_t warps = (threads + kWarpSize - 1) / kWarpSize;
  const int64_t by_warps = int64_t{d.max_warps_per_sm} / warps;
  const int64_t regs_per_warp =
      CeilTo(int64_t{k.registers_per_thread} * kWarpSize, kRegisterAllocUnit);
  const int64_t by_regs = regs_per_warp == 0 ? int64_t{d.max_blocks_per_sm}
                                             : (d.max_registers_per_sm / regs_per_warp) / warps;
  const int64_t shared =
      CeilTo(int64_t{k.static_shared_bytes} + k.dynamic_shared_bytes, kSharedAllocUnit) +
      kSharedReservedPerBlock;
  const int64_t by_shared = int64_t{d.max_shared_bytes_per_sm} / shared;
  const int64_t blocks = std::min({int64_t{d.max_blocks_per_sm}, by_warps, by_regs, by_shared});
  return static_cast<double>(blocks * warps * 100) / static_cast<double>(d.max_warps_per_sm);
}

namespace {

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

  void CollectDevices() {
    for (const RecordBatch& b : batches_) {
      stats_.dropped_records += b.dropped_records;
      for (const DeviceRecord& d : b.devices) {
        devices_.try_emplace(d.device_id, d, std::string(b.String(d.name)));
      }
    }
  }

  // API calls left out by the window: the device work they launched is left out too. A process
  // enables CUPTI at the requested instant, but the agent's window opens when its own timer
  // fires (a millisecond later on a loaded host), so the first kernels of a capture can come
  // from launches that fall before it; at the end, a synchronous call (cudaMemcpy) can outlast
  // the window while its copy does not. Kept, such work would be device events with no launch:
  // XProf could not give them a step (its conformance rule "correlation"). So is device work
  // whose launch was not recorded at all: on an H100 with CUDA 13 (docs/gpu-verification.md),
  // CUPTI recorded the first kernels and memsets of a window whose launches came before it was
  // enabled. Counted apart (launched_outside).
  void FindUnlaunched() {
    for (const RecordBatch& b : batches_) {
      for (const inject::ApiRecord& a : b.apis) {
        int64_t s = 0, e = 0;
        if (!Inside(b, a.start_ns, a.end_ns, &s, &e)) {
          unlaunched_.insert(HostCorrelation(b.pid, a.correlation_id));
        } else {
          launched_.insert(HostCorrelation(b.pid, a.correlation_id));
        }
      }
    }
  }

  // Device side: per device, per stream.
  void AddDeviceWork() {
    for (const RecordBatch& b : batches_) {
      AddKernels(b);
      AddMemcpys(b);
      AddMemsets(b);
    }
  }

  // Host side, per thread: each API call, with the device it launched work on.
  void AddApiCalls() {
    for (const RecordBatch& b : batches_) {
      for (const inject::ApiRecord& a : b.apis) {
        Pending p;
        if (!Place(b, a.start_ns, a.end_ns, &p.start_ns, &p.duration_ns)) continue;
        const absl::string_view name = b.String(a.name);
        p.name = name.empty() ? ApiName(a.cbid) : name;
        const uint64_t corr = HostCorrelation(a.pid != 0 ? a.pid : b.pid, a.correlation_id);
        if (auto it = launch_device_.find(corr); it != launch_device_.end()) {
          const uint64_t device = it->second;
          p.role = Role::kLaunch;
          p.correlation_id = corr;
          p.stats = [corr, device](XPlaneBuilder& plane, xspace::XEvent* e) {
            plane.AddStat(e, plane.StatMetadataId(xspace::kStatCorrelationId), corr);
            plane.AddStat(e, plane.StatMetadataId(xspace::kStatDeviceId), device);
          };
        }
        api_spans_[corr] = ApiSpan{a.tid, p.start_ns, p.start_ns + p.duration_ns};
        auto& thread = threads_[a.tid];
        thread.first = a.pid != 0 ? a.pid : b.pid;
        thread.second.push_back(std::move(p));
        ++stats_.api_calls;
      }
    }
  }

  // Synchronization: on the thread of the API call that synchronized (same correlation id),
  // inside that call's span, as TSL shows cuStreamSynchronize on its host thread lines.
  void AddSynchronizations() {
    for (const RecordBatch& b : batches_) {
      for (const inject::SynchronizationRecord& y : b.syncs) {
        Pending p;
        if (!Place(b, y.start_ns, y.end_ns, &p.start_ns, &p.duration_ns)) continue;
        const uint64_t corr = HostCorrelation(b.pid, y.correlation_id);
        auto api = api_spans_.find(corr);
        if (api == api_spans_.end()) {
          ++stats_.unmatched_synchronizations;
          continue;
        }
        // Clamped into the call, so the line nests even where the two readings disagree.
        const int64_t begin = std::clamp(p.start_ns, api->second.start_ns, api->second.end_ns);
        const int64_t end = std::clamp(p.start_ns + p.duration_ns, begin, api->second.end_ns);
        p.start_ns = begin;
        p.duration_ns = end - begin;
        p.name = SyncEventName(y.type);
        std::optional<uint64_t> device;
        // A correlation id on a host event marks a launch (XProf, and the conformance checker,
        // want its device_id): only when the device is known and the API call does not carry the
        // id already.
        if (auto it = context_device_.find(HostCorrelation(b.pid, y.context_id));
            it != context_device_.end() && !launch_device_.contains(corr)) {
          device = it->second;
          p.role = Role::kLaunch;
          p.correlation_id = corr;
        }
        const uint64_t context = y.context_id;
        const std::optional<uint64_t> stream = y.stream_id != inject::kSyncNotApplicable
                                                   ? std::optional<uint64_t>(y.stream_id)
                                                   : std::nullopt;
        const std::optional<uint64_t> event = y.cuda_event_id != inject::kSyncNotApplicable
                                                  ? std::optional<uint64_t>(y.cuda_event_id)
                                                  : std::nullopt;
        p.stats = [corr, device, context, stream, event](XPlaneBuilder& plane, xspace::XEvent* e) {
          if (device) {
            plane.AddStat(e, plane.StatMetadataId(xspace::kStatCorrelationId), corr);
            plane.AddStat(e, plane.StatMetadataId(xspace::kStatDeviceId), *device);
          }
          plane.AddStat(e, plane.StatMetadataId("context_id"), context);
          if (stream) plane.AddStat(e, plane.StatMetadataId("stream_id"), *stream);
          if (event) plane.AddStat(e, plane.StatMetadataId("cuda_event_id"), *event);
        };
        threads_[api->second.tid].second.push_back(std::move(p));
        ++stats_.synchronizations;
      }
    }
  }

  // A step range (its name matches the step pattern) that overlaps the window without lying
  // wholly inside it: *p clipped to the window and marked cut.
  bool ClipStepRange(const RecordBatch& b, const inject::NvtxRangeRecord& r, absl::string_view name,
                     Pending* p) {
    int64_t s = 0, e = 0;
    if (__builtin_sub_overflow(static_cast<int64_t>(r.start_ns), b.gpu_minus_wall_ns, &s) ||
        __builtin_sub_overflow(static_cast<int64_t>(r.end_ns), b.gpu_minus_wall_ns, &e) || e < s ||
        (s >= start_ && e <= stop_) || e <= start_ || s >= stop_) {
      return false;
    }
    int64_t step = 0;
    if (!RE2::PartialMatch(re2::StringPiece(name.data(), name.size()), step_re_, &step) ||
        step < 0) {
      return false;
    }
    p->start_ns = std::max(s, start_);
    p->duration_ns = std::min(e, stop_) - p->start_ns;
    p->cut = true;
    return p->duration_ns > 0;
  }

  // NVTX ranges on their threads; those matching the step pattern grouped by step number.
  void AddNvtxRanges() {
    for (const RecordBatch& b : batches_) {
      for (const inject::NvtxRangeRecord& r : b.ranges) {
        Pending p;
        const absl::string_view name = b.String(r.name);
        // A step cut by the window is kept, clipped to it and marked, so the breakdown keeps it
        // as a partial step (a capture shorter than a step still has its steps).
        if (!ClipStepRange(b, r, name, &p) &&
            !Place(b, r.start_ns, r.end_ns, &p.start_ns, &p.duration_ns)) {
          continue;
        }
        p.name = name.empty() ? absl::string_view("nvtx_range") : name;
        auto& thread = threads_[r.tid];
        thread.first = r.pid != 0 ? r.pid : b.pid;
        int64_t step = 0;
        p.role = Role::kRange;
        if (RE2::PartialMatch(re2::StringPiece(p.name.data(), p.name.size()), step_re_, &step) &&
            step >= 0) {
          p.role = Role::kStep;
          steps_[step].push_back(
              {p.start_ns, p.end_ns(), thread.first, r.tid, thread.second.size()});
        }
        thread.second.push_back(std::move(p));
        ++stats_.nvtx_ranges;
      }
    }
  }

  // Per step number, the earliest range on the host is the root (XProf's step); the others join
  // it. Each process's step spans are kept for the launching threads' joins.
  void LinkSteps() {
    for (auto& [step_num, ranges] : steps_) {
      std::stable_sort(ranges.begin(), ranges.end(), [](const StepRange& a, const StepRange& b) {
        return a.start_ns != b.start_ns ? a.start_ns < b.start_ns : a.tid < b.tid;
      });
      const StepRange& root = ranges.front();
      const auto context = static_cast<int64_t>((uint64_t{root.tid} << 32) |
                                                (static_cast<uint64_t>(step_num) & 0xFFFFFFFF));
      roots_[step_num] = StepRoot{root.tid, root.index, context, /*joined=*/ranges.size() > 1};
      for (size_t i = 1; i < ranges.size(); ++i) {
        threads_[ranges[i].tid].second[ranges[i].index].stats = [context](XPlaneBuilder& plane,
                                                                          xspace::XEvent* e) {
          plane.AddStat(e, plane.StatMetadataId("_ct"), kStepContextType);
          plane.AddStat(e, plane.StatMetadataId("_c"), context);
        };
      }
      for (const StepRange& r : ranges) {
        step_spans_[r.pid].push_back({r.start_ns, r.end_ns, step_num, r.tid});
      }
      ++stats_.steps;
    }
    // A process's steps, in start order and disjoint: of spans that overlap (two threads marking
    // one step), the earliest (longest at equal starts) is kept.
    for (auto& [pid, spans] : step_spans_) {
      std::sort(spans.begin(), spans.end(), [](const StepSpan& a, const StepSpan& b) {
        return std::tie(a.start_ns, b.end_ns, a.tid, a.step) <
               std::tie(b.start_ns, a.end_ns, b.tid, b.step);
      });
      size_t kept = 0;
      for (const StepSpan& s : spans) {
        if (kept == 0 || s.start_ns >= spans[kept - 1].end_ns) spans[kept++] = s;
      }
      spans.resize(kept);
    }
  }

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
  void JoinLaunchingThreads() {
    for (auto& [tid, thread] : threads_) {
      auto spans = step_spans_.find(thread.first);
      if (spans != step_spans_.end()) JoinThread(tid, spans->second, thread.second);
    }
  }

  // Each launch's op, the tf_op of the device work it launched: the innermost NVTX range that is
  // not a step holding the launch's start on its own thread; else the one on the thread that
  // marks the process's step holding the launch, at the launch's start (the main thread's
  // "forward_backward" for the autograd thread's launches); else the launching API call.
  void AssignOps() {
    absl::flat_hash_map<uint32_t, std::vector<OpPoint>> timelines;
    for (const auto& [tid, thread] : threads_) {
      std::vector<OpPoint> points = RangeTimeline(thread.second);
      if (!points.empty()) timelines[tid] = std::move(points);
    }
    const auto op_at = [&](uint32_t tid, int64_t t) {
      auto it = timelines.find(tid);
      return it == timelines.end() ? -1 : OpAt(it->second, t);
    };
    for (const auto& [tid, thread] : threads_) {
      const auto spans = step_spans_.find(thread.first);
      for (const Pending& e : thread.second) {
        if (e.role != Role::kLaunch || !launch_device_.contains(e.correlation_id)) continue;
        int32_t op = op_at(tid, e.start_ns);
        if (op < 0 && spans != step_spans_.end()) {
          const size_t s = SpanHolding(spans->second, e.start_ns, e.end_ns());
          if (s != kNone && spans->second[s].tid != tid) {
            op = op_at(spans->second[s].tid, e.start_ns);
          }
        }
        if (op < 0) op = InternOp(TfOp(kApiOpScope, ApiBaseName(e.name)));
        launch_ops_[e.correlation_id] = op;
      }
    }
  }

  // The roots' stats, once the joins are known.
  void MarkStepRoots() {
    for (const auto& [step_num, root] : roots_) {
      threads_[root.tid].second[root.index].stats = [step = step_num, context = root.context,
                                                     joined = root.joined](XPlaneBuilder& plane,
                                                                           xspace::XEvent* e) {
        plane.AddStat(e, plane.StatMetadataId(xspace::kStatIsRoot), int64_t{1});
        plane.AddStat(e, plane.StatMetadataId(xspace::kStatStepNum), step);
        if (joined) {
          plane.AddStat(e, plane.StatMetadataId("_pt"), kStepContextType);
          plane.AddStat(e, plane.StatMetadataId("_p"), context);
        }
      };
    }
  }

  // Device memory: running bytes in use per (pid, device), from zero at the window start.
  void AddMemoryEvents() {
    for (const RecordBatch& b : batches_) {
      for (const inject::MemoryRecord& m : b.memory) {
        Pending p;
        if (!Place(b, m.timestamp_ns, m.timestamp_ns, &p.start_ns, &p.duration_ns)) continue;
        const bool alloc =
            m.operation == static_cast<uint8_t>(inject::MemoryOperation::kAllocation);
        const uint32_t pid = m.pid != 0 ? m.pid : b.pid;
        p.name = alloc ? "MemoryAllocation" : "MemoryDeallocation";
        const auto bytes = static_cast<int64_t>(std::min<uint64_t>(m.bytes, INT64_MAX / 4));
        auto& [now, peak] = in_use_[{pid, m.device_id}];
        // Saturates: bytes < 2^61, so now + bytes cannot overflow before the cap.
        now = alloc ? std::min<int64_t>(now + bytes, INT64_MAX / 2)
                    : std::max<int64_t>(0, now - bytes);
        peak = std::max(peak, now);
        const int64_t device = m.device_id, allocated = now, peak_now = peak;
        const auto addr = static_cast<int64_t>(m.address);
        p.stats = [=](XPlaneBuilder& plane, xspace::XEvent* e) {
          plane.AddStat(e, plane.StatMetadataId("allocator_name"), absl::StrCat("cuda_", device));
          plane.AddStat(e, plane.StatMetadataId("device_ordinal"), device);
          plane.AddStat(e, plane.StatMetadataId("bytes_allocated"), allocated);
          plane.AddStat(e, plane.StatMetadataId("peak_bytes_in_use"), peak_now);
          plane.AddStat(e, plane.StatMetadataId("requested_bytes"), bytes);
          plane.AddStat(e, plane.StatMetadataId("allocation_bytes"), bytes);
          plane.AddStat(e, plane.StatMetadataId("addr"), addr);
        };
        auto& thread = threads_[pid];  // the process's main thread
        thread.first = pid;
        thread.second.push_back(std::move(p));
        ++stats_.memory_events;
      }
    }
  }

  // The flight recorder's NCCL launches: instants on the launching thread's line, already on the
  // window's clock; their names live in launch_names_ (map nodes do not move).
  void AddCollectiveLaunches() {
    for (const CollectiveLaunch& launch : options_.collective_launches) {
      if (launch.wall_ns < start_ || launch.wall_ns > stop_ || launch.kernel_name == nullptr) {
        ++stats_.outside_window;
        continue;
      }
      Pending p;
      p.start_ns = launch.wall_ns;
      p.name =
          launch_names_.try_emplace(*launch.kernel_name, NcclLaunchEventName(*launch.kernel_name))
              .first->second;
      p.stats = [&launch](XPlaneBuilder& plane, xspace::XEvent* e) {
        AddCollectiveLaunchStats(launch, plane, e);
      };
      auto& thread = threads_[launch.tid];
      thread.first = launch.pid;
      thread.second.push_back(std::move(p));
      ++stats_.collective_launches;
    }
  }

  // The host plane, one plane per GPU, the window.
  CuptiXSpaceStats Emit(tensorflow::profiler::XSpace* space) {
    XPlaneBuilder host(space->add_planes(), kHostPlaneId, xspace::kHostPlaneName, start_);
    for (auto& [tid, thread] : threads_) {
      xspace::XLine* line =
          host.AddLine(tid, absl::StrCat("pid ", thread.first, " tid ", tid), start_);
      EmitLine(host, line, thread.second);
    }
    std::set<uint32_t> device_ids;
    for (const auto& [id, unused] : devices_) device_ids.insert(id);
    for (const auto& [id, unused] : gpu_) device_ids.insert(id);
    for (const uint32_t id : device_ids) {
      XPlaneBuilder plane(space->add_planes(), id, absl::StrCat(xspace::kGpuPlanePrefix, id),
                          start_);
      if (auto it = devices_.find(id); it != devices_.end()) {
        AddDeviceCapabilities(plane, it->second.first, it->second.second);
      }
      auto streams = gpu_.find(id);
      if (streams == gpu_.end()) continue;
      for (auto& [stream_id, stream] : streams->second) {
        std::string kinds;
        for (absl::string_view kind : kStreamKindOrder) {
          if (stream.kinds.contains(kind)) absl::StrAppend(&kinds, kinds.empty() ? "" : ",", kind);
        }
        xspace::XLine* line =
            plane.AddLine(stream_id, absl::StrCat("Stream #", stream_id, "(", kinds, ")"), start_);
        EmitLine(plane, line, stream.events);
      }
    }
    space->add_hostnames(options_.hostname);
    xspace::SetProfileWindow(space, start_, stop_);
    return stats_;
  }

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
  static size_t SpanHolding(const std::vector<StepSpan>& spans, int64_t start, int64_t end) {
    auto it = std::upper_bound(spans.begin(), spans.end(), start,
                               [](int64_t t, const StepSpan& s) { return t < s.start_ns; });
    if (it == spans.begin()) return kNone;
    --it;
    return end <= it->end_ns ? static_cast<size_t>(it - spans.begin()) : kNone;
  }

  // JoinLaunchingThreads for one thread's line, whose process marks `spans`.
  void JoinThread(uint32_t tid, const std::vector<StepSpan>& spans, LineEvents& events) {
    const size_t n = events.size();
    std::vector<size_t> order(n);
    std::iota(order.begin(), order.end(), size_t{0});
    std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
      const Pending& x = events[a];
      const Pending& y = events[b];
      if (x.start_ns != y.start_ns) return x.start_ns < y.start_ns;
      if (x.duration_ns != y.duration_ns) return x.duration_ns > y.duration_ns;
      return a < b;
    });
    // The line as a forest, in EmitLine's order: each event's parent (the innermost event
    // holding it), its siblings before and after it, whether a step range holds it (or is it),
    // the step span holding it and its outermost ancestor-or-self held by that same span.
    struct Node {
      size_t parent = kNone;
      size_t prev = kNone;
      size_t next = kNone;
      size_t span = kNone;
      size_t top = kNone;
      bool in_step = false;
    };
    std::vector<Node> nodes(n);
    std::vector<size_t> last_child(n + 1, kNone);  // [n]: the line's top level
    std::vector<size_t> open;
    std::vector<int64_t> step_starts;  // the line's own step ranges, in start order
    for (const size_t i : order) {
      const Pending& e = events[i];
      while (!open.empty() && events[open.back()].end_ns() <= e.start_ns) open.pop_back();
      Node& node = nodes[i];
      if (!open.empty() && events[open.back()].end_ns() >= e.end_ns()) node.parent = open.back();
      size_t& last = last_child[node.parent == kNone ? n : node.parent];
      node.prev = last;
      if (last != kNone) nodes[last].next = i;
      last = i;
      node.in_step = e.role == Role::kStep || (node.parent != kNone && nodes[node.parent].in_step);
      if (e.role == Role::kStep) step_starts.push_back(e.start_ns);
      node.span = SpanHolding(spans, e.start_ns, e.end_ns());
      node.top =
          node.parent != kNone && nodes[node.parent].span == node.span ? nodes[node.parent].top : i;
      open.push_back(i);
    }

    // Consecutive sibling events holding launches of one step, one wrapper each.
    struct Group {
      size_t span = kNone;
      size_t container = kNone;  // their parent
      size_t first = kNone;
      size_t last = kNone;
    };
    std::optional<Group> group;
    LineEvents wrappers;
    const auto close = [&] {
      if (!group) return;
      const StepSpan& s = spans[group->span];
      const Pending& first = events[group->first];
      const Pending& last = events[group->last];
      int64_t lo = s.start_ns;
      int64_t hi = s.end_ns;
      if (group->container != kNone) {
        lo = std::max(lo, events[group->container].start_ns);
        hi = std::min(hi, events[group->container].end_ns());
      }
      if (const size_t prev = nodes[group->first].prev; prev != kNone) {
        lo = std::max(lo, events[prev].end_ns());
      }
      if (const size_t next = nodes[group->last].next; next != kNone) {
        hi = std::min(hi, events[next].start_ns);
      }
      Pending w;
      w.start_ns = first.start_ns - (lo < first.start_ns ? 1 : 0);
      w.duration_ns = last.end_ns() + (hi > last.end_ns() ? 1 : 0) - w.start_ns;
      w.name = kStepJoinName;
      w.role = Role::kJoin;
      StepRoot& root = roots_.at(s.step);
      root.joined = true;
      w.stats = [context = root.context](XPlaneBuilder& plane, xspace::XEvent* e) {
        plane.AddStat(e, plane.StatMetadataId("_ct"), kStepContextType);
        plane.AddStat(e, plane.StatMetadataId("_c"), context);
      };
      wrappers.push_back(std::move(w));
      ++stats_.step_joins;
      group.reset();
    };
    for (const size_t i : order) {
      const Node& node = nodes[i];
      if (events[i].role != Role::kLaunch || node.in_step || node.span == kNone ||
          spans[node.span].tid == tid) {
        continue;  // not a launch, in a step of the thread's own, in no step, or ours
      }
      const size_t item = node.top;
      const size_t container = nodes[item].parent;
      if (group && group->span == node.span && group->container == container) {
        if (item == group->last) continue;
        const int64_t from = events[group->last].end_ns();
        auto own = std::lower_bound(step_starts.begin(), step_starts.end(), from);
        if (own == step_starts.end() || *own >= events[item].start_ns) {
          group->last = item;
          continue;
        }
      }
      close();
      group = Group{node.span, container, item, item};
    }
    close();
    for (Pending& w : wrappers) events.push_back(std::move(w));
  }

  // A thread's NVTX ranges that are not steps, as a timeline of the innermost one open.
  std::vector<OpPoint> RangeTimeline(const LineEvents& events) {
    std::vector<size_t> ranges;
    for (size_t i = 0; i < events.size(); ++i) {
      if (events[i].role == Role::kRange) ranges.push_back(i);
    }
    std::sort(ranges.begin(), ranges.end(), [&](size_t a, size_t b) {
      const Pending& x = events[a];
      const Pending& y = events[b];
      if (x.start_ns != y.start_ns) return x.start_ns < y.start_ns;
      if (x.duration_ns != y.duration_ns) return x.duration_ns > y.duration_ns;
      return a < b;
    });
    std::vector<OpPoint> points;
    std::vector<std::pair<int64_t, int32_t>> open;  // (end, op)
    const auto close_until = [&](int64_t t) {
      while (!open.empty() && open.back().first <= t) {
        // Never before the last point (ranges that partly overlap close late).
        const int64_t at = std::max(open.back().first, points.back().time_ns);
        open.pop_back();
        points.push_back({at, open.empty() ? -1 : open.back().second});
      }
    };
    for (const size_t i : ranges) {
      close_until(events[i].start_ns);
      const int32_t op = InternOp(TfOp(kNvtxOpScope, events[i].name));
      open.emplace_back(events[i].end_ns(), op);
      points.push_back({events[i].start_ns, op});
    }
    close_until(std::numeric_limits<int64_t>::max());
    return points;
  }
  static int32_t OpAt(const std::vector<OpPoint>& points, int64_t t) {
    auto it = std::upper_bound(points.begin(), points.end(), t,
                               [](int64_t v, const OpPoint& p) { return v < p.time_ns; });
    return it == points.begin() ? -1 : std::prev(it)->op;
  }
  int32_t InternOp(const std::string& op) {
    auto [it, added] = op_index_.try_emplace(op, static_cast<int32_t>(ops_.size()));
    if (added) ops_.push_back(it->first);
    return it->second;
  }
  // The tf_op of the device work with this host correlation id.
  absl::string_view OpOf(uint64_t correlation_id) const {
    auto it = launch_ops_.find(correlation_id);
    return it == launch_ops_.end() ? kUnrecordedLaunchOp
                                   : absl::string_view(ops_[static_cast<size_t>(it->second)]);
  }

  // Whether a record lies wholly inside the window; its wall-clock [*s, *e) when it does.
  bool Inside(const RecordBatch& b, uint64_t gpu_start, uint64_t gpu_end, int64_t* s,
              int64_t* e) const {
    return !__builtin_sub_overflow(static_cast<int64_t>(gpu_start), b.gpu_minus_wall_ns, s) &&
           !__builtin_sub_overflow(static_cast<int64_t>(gpu_end), b.gpu_minus_wall_ns, e) &&
           *s >= start_ && *e <= stop_ && *e >= *s;
  }
  // Wall-clock [begin, end) of a record, if wholly inside the window; else counted.
  bool Place(const RecordBatch& b, uint64_t gpu_start, uint64_t gpu_end, int64_t* begin,
             int64_t* duration) {
    int64_t s = 0, e = 0;
    if (!Inside(b, gpu_start, gpu_end, &s, &e)) {
      ++stats_.outside_window;
      return false;
    }
    *begin = s;
    *duration = e - s;
    return true;
  }
  // Device work whose launch is not inside the window, or was never recorded: left out, counted.
  // Work inside the window whose launch no batch holds at all is counted apart too
  // (unrecorded_launches): its launches were lost, not merely outside the window.
  bool LaunchedOutside(const RecordBatch& b, uint32_t correlation_id, uint64_t gpu_start,
                       uint64_t gpu_end) {
    const uint64_t c = HostCorrelation(b.pid, correlation_id);
    if (!unlaunched_.contains(c) && launched_.contains(c)) return false;
    ++stats_.launched_outside;
    int64_t s = 0, e = 0;
    if (!unlaunched_.contains(c) && Inside(b, gpu_start, gpu_end, &s, &e)) {
      ++stats_.unrecorded_launches;
    }
    return true;
  }

  void AddKernels(const RecordBatch& b) {
    for (const KernelRecord& k : b.kernels) {
      Pending p;
      if (LaunchedOutside(b, k.correlation_id, k.start_ns, k.end_ns) ||
          !Place(b, k.start_ns, k.end_ns, &p.start_ns, &p.duration_ns)) {
        continue;
      }
      const absl::string_view name = b.String(k.name);
      p.name = name.empty() ? absl::string_view("kernel") : name;
      const uint64_t corr = HostCorrelation(b.pid, k.correlation_id);
      launch_device_[corr] = k.device_id;
      context_device_[HostCorrelation(b.pid, k.context_id)] = k.device_id;
      std::optional<double> occupancy;
      if (auto it = devices_.find(k.device_id); it != devices_.end()) {
        occupancy = TheoreticalOccupancyPct(k, it->second.first);
      }
      std::string details = absl::StrCat(
          "regs:", k.registers_per_thread, " static_shared:", k.static_shared_bytes,
          " dynamic_shared:", k.dynamic_shared_bytes, " grid:", k.grid[0], ",", k.grid[1], ",",
          k.grid[2], " block:", k.block[0], ",", k.block[1], ",", k.block[2]);
      if (occupancy) absl::StrAppend(&details, " occ_pct:", *occupancy);
      p.stats = [this, corr, details = std::move(details), occupancy](XPlaneBuilder& plane,
                                                                      xspace::XEvent* e) {
        plane.AddStat(e, plane.StatMetadataId(xspace::kStatCorrelationId), corr);
        AddRefStat(plane, e, xspace::kStatKernelDetails, details);
        AddRefStat(plane, e, kStatTfOp, OpOf(corr));
        if (occupancy) {
          AddDoubleStat(e, plane.StatMetadataId("theoretical_occupancy_pct"), *occupancy);
        }
      };
      Stream& s = gpu_[k.device_id][k.stream_id];
      s.kinds.insert("Compute");
      s.events.push_back(std::move(p));
      ++stats_.kernels;
    }
  }
  void AddMemcpys(const RecordBatch& b) {
    for (const inject::MemcpyRecord& c : b.memcpys) {
      Pending p;
      if (LaunchedOutside(b, c.correlation_id, c.start_ns, c.end_ns) ||
          !Place(b, c.start_ns, c.end_ns, &p.start_ns, &p.duration_ns)) {
        continue;
      }
      const CopyNames names = CopyNamesOf(c.copy_kind);
      p.name = names.event;
      const uint64_t corr = HostCorrelation(b.pid, c.correlation_id);
      launch_device_[corr] = c.device_id;
      context_device_[HostCorrelation(b.pid, c.context_id)] = c.device_id;
      std::string details = absl::StrCat(
          "kind_src:", MemoryKindName(c.src_kind), " kind_dst:", MemoryKindName(c.dst_kind),
          " size:", c.bytes, " dest:", c.device_id, " async:", (c.flags & kAsyncFlag) != 0 ? 1 : 0);
      p.stats = [this, corr, details = std::move(details)](XPlaneBuilder& plane,
                                                           xspace::XEvent* e) {
        plane.AddStat(e, plane.StatMetadataId(xspace::kStatCorrelationId), corr);
        AddRefStat(plane, e, xspace::kStatMemcpyDetails, details);
        AddRefStat(plane, e, kStatTfOp, OpOf(corr));
      };
      Stream& s = gpu_[c.device_id][c.stream_id];
      s.kinds.insert(names.stream_kind);
      s.events.push_back(std::move(p));
      ++stats_.memcpys;
    }
  }
  void AddMemsets(const RecordBatch& b) {
    for (const inject::MemsetRecord& m : b.memsets) {
      Pending p;
      if (LaunchedOutside(b, m.correlation_id, m.start_ns, m.end_ns) ||
          !Place(b, m.start_ns, m.end_ns, &p.start_ns, &p.duration_ns)) {
        continue;
      }
      p.name = "Memset";
      const uint64_t corr = HostCorrelation(b.pid, m.correlation_id);
      launch_device_[corr] = m.device_id;
      context_device_[HostCorrelation(b.pid, m.context_id)] = m.device_id;
      std::string details = absl::StrCat("kind:", MemoryKindName(m.memory_kind), " size:", m.bytes,
                                         " async:", (m.flags & kAsyncFlag) != 0 ? 1 : 0);
      p.stats = [this, corr, details = std::move(details)](XPlaneBuilder& plane,
                                                           xspace::XEvent* e) {
        plane.AddStat(e, plane.StatMetadataId(xspace::kStatCorrelationId), corr);
        AddRefStat(plane, e, "memset_details", details);
        AddRefStat(plane, e, kStatTfOp, OpOf(corr));
      };
      Stream& s = gpu_[m.device_id][m.stream_id];
      s.kinds.insert("Memset");
      s.events.push_back(std::move(p));
      ++stats_.memsets;
    }
  }

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

  absl::string_view ApiName(uint32_t cbid) {
    auto [it, added] = api_names_.try_emplace(cbid);
    if (added) it->second = absl::StrCat("cuda_api_", cbid);
    return it->second;
  }
};

}  // namespace

absl::StatusOr<CuptiXSpaceStats> BuildCuptiXSpace(const std::vector<RecordBatch>& batches,
                                                  const CuptiXSpaceOptions& options,
                                                  tensorflow::profiler::XSpace* space) {
  const int64_t start = options.profile_start_ns;
  const int64_t stop = options.profile_stop_ns;
  if (start <= 0 || stop < start) {
    return absl::InvalidArgumentError(
        absl::StrCat("cupti xspace: bad window [", start, ", ", stop, "]"));
  }
  const RE2 step_re(options.step_pattern, RE2::Quiet);
  if (!step_re.ok() || step_re.NumberOfCapturingGroups() < 1) {
    return absl::InvalidArgumentError(absl::StrCat("cupti xspace: step pattern '",
                                                   options.step_pattern,
                                                   "' does not compile or has no group"));
  }
  CuptiXSpaceBuilder builder(batches, options, step_re);
  builder.CollectDevices();
  builder.FindUnlaunched();
  builder.AddDeviceWork();
  builder.AddApiCalls();
  builder.AddSynchronizations();
  builder.AddNvtxRanges();
  builder.LinkSteps();
  builder.JoinLaunchingThreads();
  builder.AssignOps();
  builder.MarkStepRoots();
  builder.AddMemoryEvents();
  builder.AddCollectiveLaunches();
  return builder.Emit(space);
}

bool UnrecordedLaunchesAreAShortfall(const CuptiXSpaceStats& s) {
  const int64_t placed = s.kernels + s.memcpys + s.memsets;
  return s.unrecorded_launches > 100 && s.unrecorded_launches * 100 > placed;
}

}  // namespace profctl::agent::cupti
