// BuildCuptiXSpace's device passes: devices, the launches the window leaves out, kernels,
// copies and sets per device and stream, device memory in use (cupti_xspace_internal.h).
#include <algorithm>
#include <array>
#include <cstdint>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "agent/collectors/cupti/cupti_xspace_internal.h"

namespace profctl::agent::cupti::xspace_internal {
namespace {

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

}  // namespace

void CuptiXSpaceBuilder::CollectDevices() {
  for (const RecordBatch& b : batches_) {
    stats_.dropped_records += b.dropped_records;
    for (const DeviceRecord& d : b.devices) {
      devices_.try_emplace(d.device_id, d, std::string(b.String(d.name)));
    }
  }
}

void CuptiXSpaceBuilder::FindUnlaunched() {
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

void CuptiXSpaceBuilder::AddDeviceWork() {
  for (const RecordBatch& b : batches_) {
    AddKernels(b);
    AddMemcpys(b);
    AddMemsets(b);
  }
}

void CuptiXSpaceBuilder::AddMemoryEvents() {
  for (const RecordBatch& b : batches_) {
    for (const inject::MemoryRecord& m : b.memory) {
      Pending p;
      if (!Place(b, m.timestamp_ns, m.timestamp_ns, &p.start_ns, &p.duration_ns)) continue;
      const bool alloc = m.operation == static_cast<uint8_t>(inject::MemoryOperation::kAllocation);
      const uint32_t pid = m.pid != 0 ? m.pid : b.pid;
      p.name = alloc ? "MemoryAllocation" : "MemoryDeallocation";
      const auto bytes = static_cast<int64_t>(std::min<uint64_t>(m.bytes, INT64_MAX / 4));
      auto& [now, peak] = in_use_[{pid, m.device_id}];
      // Saturates: bytes < 2^61, so now + bytes cannot overflow before the cap.
      now =
          alloc ? std::min<int64_t>(now + bytes, INT64_MAX / 2) : std::max<int64_t>(0, now - bytes);
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

bool CuptiXSpaceBuilder::Inside(const RecordBatch& b, uint64_t gpu_start, uint64_t gpu_end,
                                int64_t* s, int64_t* e) const {
  return !__builtin_sub_overflow(static_cast<int64_t>(gpu_start), b.gpu_minus_wall_ns, s) &&
         !__builtin_sub_overflow(static_cast<int64_t>(gpu_end), b.gpu_minus_wall_ns, e) &&
         *s >= start_ && *e <= stop_ && *e >= *s;
}

bool CuptiXSpaceBuilder::Place(const RecordBatch& b, uint64_t gpu_start, uint64_t gpu_end,
                               int64_t* begin, int64_t* duration) {
  int64_t s = 0, e = 0;
  if (!Inside(b, gpu_start, gpu_end, &s, &e)) {
    ++stats_.outside_window;
    return false;
  }
  *begin = s;
  *duration = e - s;
  return true;
}

bool CuptiXSpaceBuilder::LaunchedOutside(const RecordBatch& b, uint32_t correlation_id,
                                         uint64_t gpu_start, uint64_t gpu_end) {
  const uint64_t c = HostCorrelation(b.pid, correlation_id);
  if (!unlaunched_.contains(c) && launched_.contains(c)) return false;
  ++stats_.launched_outside;
  int64_t s = 0, e = 0;
  if (!unlaunched_.contains(c) && Inside(b, gpu_start, gpu_end, &s, &e)) {
    ++stats_.unrecorded_launches;
  }
  return true;
}

void CuptiXSpaceBuilder::AddKernels(const RecordBatch& b) {
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

void CuptiXSpaceBuilder::AddMemcpys(const RecordBatch& b) {
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
    p.stats = [this, corr, details = std::move(details)](XPlaneBuilder& plane, xspace::XEvent* e) {
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

void CuptiXSpaceBuilder::AddMemsets(const RecordBatch& b) {
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
    p.stats = [this, corr, details = std::move(details)](XPlaneBuilder& plane, xspace::XEvent* e) {
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

}  // namespace profctl::agent::cupti::xspace_internal
