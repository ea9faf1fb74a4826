#include "agent/collectors/cupti/cupti_xspace.h"

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "agent/collectors/cupti/cupti_xspace_internal.h"
#include "re2/re2.h"
#include "xspace/xspace.h"

namespace profctl::agent::cupti {
namespace xspace_internal {
namespace {

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

}  // namespace

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

CuptiXSpaceStats CuptiXSpaceBuilder::Emit(tensorflow::profiler::XSpace* space) {
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
    XPlaneBuilder plane(space->add_planes(), id, absl::StrCat(xspace::kGpuPlanePrefix, id), start_);
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

absl::string_view CuptiXSpaceBuilder::ApiName(uint32_t cbid) {
  auto [it, added] = api_names_.try_emplace(cbid);
  if (added) it->second = absl::StrCat("cuda_api_", cbid);
  return it->second;
}

}  // namespace xspace_internal

std::optional<double> TheoreticalOccupancyPct(const inject::KernelRecord& k,
                                              const inject::DeviceRecord& d) {
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
      xspace_internal::CeilTo(int64_t{k.registers_per_thread} * kWarpSize, kRegisterAllocUnit);
  const int64_t by_regs = regs_per_warp == 0 ? int64_t{d.max_blocks_per_sm}
                                             : (d.max_registers_per_sm / regs_per_warp) / warps;
  const int64_t shared =
      xspace_internal::CeilTo(int64_t{k.static_shared_bytes} + k.dynamic_shared_bytes,
                              kSharedAllocUnit) +
      kSharedReservedPerBlock;
  const int64_t by_shared = int64_t{d.max_shared_bytes_per_sm} / shared;
  const int64_t blocks = std::min({int64_t{d.max_blocks_per_sm}, by_warps, by_regs, by_shared});
  return static_cast<double>(blocks * warps * 100) / static_cast<double>(d.max_warps_per_sm);
}

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
  xspace_internal::CuptiXSpaceBuilder builder(batches, options, step_re);
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
