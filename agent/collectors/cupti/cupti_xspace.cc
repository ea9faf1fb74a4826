#include "agent/collectors/cupti/cupti_xspace.h"

#include <algorithm>
#include <array>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "re2/re2.h"
#include "xspace/xspace.h"

namespace profctl::agent::cupti {
namespace {

using inject::DeviceRecord;
using inject::KernelRecord;
using xspace::XPlaneBuilder;

constexpr int64_t kHostPlaneId = 49;  // as TSL numbers its host plane
// TSL's ContextType::kGeneric, for the step joins (as the synthetic job).
constexpr int64_t kStepContextType = 0;

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

// One event before it is placed: lines are filled in start order.
struct Pending {
  int64_t start_ns = 0;
  int64_t duration_ns = 0;
  std::string name;
  // Filled by the emitter for its kind.
  std::function<void(XPlaneBuilder&, xspace::XEvent*)> stats;
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
// come before what they enclose).
using LineEvents = std::vector<Pending>;
void EmitLine(XPlaneBuilder& plane, xspace::XLine* line, LineEvents& events) {
  std::stable_sort(events.begin(), events.end(), [](const Pending& a, const Pending& b) {
    return a.start_ns != b.start_ns ? a.start_ns < b.start_ns : a.duration_ns > b.duration_ns;
  });
  for (Pending& p : events) {
    xspace::XEvent* e =
        plane.AddEvent(line, plane.EventMetadataId(p.name), p.start_ns, p.duration_ns);
    if (p.stats) p.stats(plane, e);
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
// window, device work, API calls, synchronizations, NVTX ranges and steps, memory; then Emit.
// Each pass reads what the earlier ones found (which device a launch went to, where each API
// call ran) and adds its events to the lines the last one emits.
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
  // XProf could not give them a step (its conformance rule "correlation"), and CUPTI itself
  // records no kernel launched before it was enabled. Counted apart (launched_outside).
  void FindUnlaunched() {
    for (const RecordBatch& b : batches_) {
      for (const inject::ApiRecord& a : b.apis) {
        int64_t s = 0, e = 0;
        if (!Inside(b, a.start_ns, a.end_ns, &s, &e)) {
          unlaunched_.insert(HostCorrelation(b.pid, a.correlation_id));
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
        p.name = name.empty() ? absl::StrCat("cuda_api_", a.cbid) : std::string(name);
        const uint64_t corr = HostCorrelation(a.pid != 0 ? a.pid : b.pid, a.correlation_id);
        if (auto it = launch_device_.find(corr); it != launch_device_.end()) {
          const uint64_t device = it->second;
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
        p.name = std::string(SyncEventName(y.type));
        std::optional<uint64_t> device;
        // A correlation id on a host event marks a launch (XProf, and the conformance checker,
        // want its device_id): only when the device is known and the API call does not carry the
        // id already.
        if (auto it = context_device_.find(HostCorrelation(b.pid, y.context_id));
            it != context_device_.end() && !launch_device_.contains(corr)) {
          device = it->second;
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

  // NVTX ranges on their threads; those matching the step pattern grouped by step number.
  void AddNvtxRanges() {
    for (const RecordBatch& b : batches_) {
      for (const inject::NvtxRangeRecord& r : b.ranges) {
        Pending p;
        if (!Place(b, r.start_ns, r.end_ns, &p.start_ns, &p.duration_ns)) continue;
        const absl::string_view name = b.String(r.name);
        p.name = name.empty() ? "nvtx_range" : std::string(name);
        auto& thread = threads_[r.tid];
        thread.first = r.pid != 0 ? r.pid : b.pid;
        int64_t step = 0;
        if (RE2::PartialMatch(p.name, step_re_, &step) && step >= 0) {
          steps_[step].push_back({p.start_ns, r.tid, thread.second.size()});
        }
        thread.second.push_back(std::move(p));
        ++stats_.nvtx_ranges;
      }
    }
  }

  // Per step number, the earliest range is the root (XProf's step); the others join it.
  void LinkSteps() {
    for (auto& [step_num, ranges] : steps_) {
      std::stable_sort(ranges.begin(), ranges.end(), [](const StepRange& a, const StepRange& b) {
        return a.start_ns != b.start_ns ? a.start_ns < b.start_ns : a.tid < b.tid;
      });
      const StepRange& root = ranges.front();
      const auto context = static_cast<int64_t>((uint64_t{root.tid} << 32) |
                                                (static_cast<uint64_t>(step_num) & 0xFFFFFFFF));
      const bool joined = ranges.size() > 1;
      threads_[root.tid].second[root.index].stats = [step = step_num, context, joined](
                                                        XPlaneBuilder& plane, xspace::XEvent* e) {
        plane.AddStat(e, plane.StatMetadataId(xspace::kStatIsRoot), int64_t{1});
        plane.AddStat(e, plane.StatMetadataId(xspace::kStatStepNum), step);
        if (joined) {
          plane.AddStat(e, plane.StatMetadataId("_pt"), kStepContextType);
          plane.AddStat(e, plane.StatMetadataId("_p"), context);
        }
      };
      for (size_t i = 1; i < ranges.size(); ++i) {
        threads_[ranges[i].tid].second[ranges[i].index].stats = [context](XPlaneBuilder& plane,
                                                                          xspace::XEvent* e) {
          plane.AddStat(e, plane.StatMetadataId("_ct"), kStepContextType);
          plane.AddStat(e, plane.StatMetadataId("_c"), context);
        };
      }
      ++stats_.steps;
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
    uint32_t tid = 0;
    size_t index = 0;  // into threads_[tid].second
  };

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
  bool LaunchedOutside(const RecordBatch& b, uint32_t correlation_id) {
    if (!unlaunched_.contains(HostCorrelation(b.pid, correlation_id))) return false;
    ++stats_.launched_outside;
    return true;
  }

  void AddKernels(const RecordBatch& b) {
    for (const KernelRecord& k : b.kernels) {
      Pending p;
      if (LaunchedOutside(b, k.correlation_id) ||
          !Place(b, k.start_ns, k.end_ns, &p.start_ns, &p.duration_ns)) {
        continue;
      }
      const absl::string_view name = b.String(k.name);
      p.name = name.empty() ? "kernel" : std::string(name);
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
      p.stats = [corr, details = std::move(details), occupancy](XPlaneBuilder& plane,
                                                                xspace::XEvent* e) {
        plane.AddStat(e, plane.StatMetadataId(xspace::kStatCorrelationId), corr);
        AddRefStat(plane, e, xspace::kStatKernelDetails, details);
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
      if (LaunchedOutside(b, c.correlation_id) ||
          !Place(b, c.start_ns, c.end_ns, &p.start_ns, &p.duration_ns)) {
        continue;
      }
      const CopyNames names = CopyNamesOf(c.copy_kind);
      p.name = std::string(names.event);
      const uint64_t corr = HostCorrelation(b.pid, c.correlation_id);
      launch_device_[corr] = c.device_id;
      context_device_[HostCorrelation(b.pid, c.context_id)] = c.device_id;
      std::string details = absl::StrCat(
          "kind_src:", MemoryKindName(c.src_kind), " kind_dst:", MemoryKindName(c.dst_kind),
          " size:", c.bytes, " dest:", c.device_id, " async:", (c.flags & kAsyncFlag) != 0 ? 1 : 0);
      p.stats = [corr, details = std::move(details)](XPlaneBuilder& plane, xspace::XEvent* e) {
        plane.AddStat(e, plane.StatMetadataId(xspace::kStatCorrelationId), corr);
        AddRefStat(plane, e, xspace::kStatMemcpyDetails, details);
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
      if (LaunchedOutside(b, m.correlation_id) ||
          !Place(b, m.start_ns, m.end_ns, &p.start_ns, &p.duration_ns)) {
        continue;
      }
      p.name = "Memset";
      const uint64_t corr = HostCorrelation(b.pid, m.correlation_id);
      launch_device_[corr] = m.device_id;
      context_device_[HostCorrelation(b.pid, m.context_id)] = m.device_id;
      std::string details = absl::StrCat("kind:", MemoryKindName(m.memory_kind), " size:", m.bytes,
                                         " async:", (m.flags & kAsyncFlag) != 0 ? 1 : 0);
      p.stats = [corr, details = std::move(details)](XPlaneBuilder& plane, xspace::XEvent* e) {
        plane.AddStat(e, plane.StatMetadataId(xspace::kStatCorrelationId), corr);
        AddRefStat(plane, e, "memset_details", details);
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
  std::map<uint32_t, std::map<uint32_t, Stream>> gpu_;
  std::map<uint32_t, std::pair<uint32_t, LineEvents>> threads_;  // tid -> (pid, events)
  absl::flat_hash_map<uint64_t, ApiSpan> api_spans_;
  std::map<int64_t, std::vector<StepRange>> steps_;
  std::map<std::pair<uint32_t, uint32_t>, std::pair<int64_t, int64_t>> in_use_;  // (now, peak)
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
  builder.AddMemoryEvents();
  return builder.Emit(space);
}

}  // namespace profctl::agent::cupti
