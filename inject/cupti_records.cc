#include "inject/cupti_records.h"

#include <cupti_driver_cbid.h>
#include <cupti_runtime_cbid.h>
#include <cxxabi.h>

#include <cstdlib>
#include <cstring>
#include <string_view>

namespace profctl::inject {
namespace {

// The CUDA 13.0 record structs, one per kind handled (CUPTI_NOTES.md).
using KernelActivity = CUpti_ActivityKernel10;
using MemcpyActivity = CUpti_ActivityMemcpy6;
using MemsetActivity = CUpti_ActivityMemset4;
using MemoryActivity = CUpti_ActivityMemory4;
using DeviceActivity = CUpti_ActivityDevice5;
// CUDA 13.0 emits Synchronization2 for CUPTI_ACTIVITY_KIND_SYNCHRONIZATION (the first version is
// in cupti_activity_deprecated.h); its first fields are those of the first version.
using SyncActivity = CUpti_ActivitySynchronization2;

bool AllZero(const uint8_t (&bytes)[16]) {
  for (const uint8_t b : bytes) {
    if (b != 0) return false;
  }
  return true;
}

std::string_view View(const char* s) { return s != nullptr ? std::string_view(s) : ""; }

// Kernel names arrive mangled; XProf and people read demangled ones.
uint32_t InternKernelName(RecordBatchWriter& writer, const char* name) {
  if (name == nullptr) return kNoString;
  if (name[0] == '_' && name[1] == 'Z') {
    int status = 0;
    char* demangled = abi::__cxa_demangle(name, nullptr, nullptr, &status);
    if (status == 0 && demangled != nullptr) {
      const uint32_t index = writer.Intern(demangled);
      std::free(demangled);  // NOLINT(cppcoreguidelines-no-malloc): __cxa_demangle's contract
      return index;
    }
    std::free(demangled);  // NOLINT(cppcoreguidelines-no-malloc)
  }
  return writer.Intern(name);
}

template <typename T>
const T& As(const CUpti_Activity& record) {
  return reinterpret_cast<const T&>(record);  // NOLINT: CUPTI's documented record layout
}

}  // namespace

size_t CuptiRecordSize(CUpti_ActivityKind kind) {
  switch (kind) {
    case CUPTI_ACTIVITY_KIND_KERNEL:
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
      return sizeof(KernelActivity);
    case CUPTI_ACTIVITY_KIND_MEMCPY:
      return sizeof(MemcpyActivity);
    case CUPTI_ACTIVITY_KIND_MEMSET:
      return sizeof(MemsetActivity);
    case CUPTI_ACTIVITY_KIND_RUNTIME:
    case CUPTI_ACTIVITY_KIND_DRIVER:
      return sizeof(CUpti_ActivityAPI);
    case CUPTI_ACTIVITY_KIND_MARKER:
      return sizeof(CUpti_ActivityMarker2);
    case CUPTI_ACTIVITY_KIND_MEMORY2:
      return sizeof(MemoryActivity);
    case CUPTI_ACTIVITY_KIND_DEVICE:
      return sizeof(DeviceActivity);
    case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION:
      return sizeof(SyncActivity);
    default:
      return 0;
  }
}

const CUpti_Activity* NextCuptiRecord(const uint8_t* buffer, size_t valid_size, size_t* offset) {
  if (buffer == nullptr || *offset >= valid_size ||
      valid_size - *offset < sizeof(CUpti_ActivityKind)) {
    return nullptr;
  }
  CUpti_ActivityKind kind;
  std::memcpy(&kind, buffer + *offset, sizeof(kind));
  const size_t size = CuptiRecordSize(kind);
  if (size == 0 || valid_size - *offset < size) return nullptr;
  const auto* record = reinterpret_cast<const CUpti_Activity*>(buffer + *offset);  // NOLINT
  *offset += size;
  return record;
}

namespace {

// The _ptsz forms are the per-thread default stream's.
constexpr DriverLaunchCall kDriverLaunches[] = {
    {CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, "cuLaunchKernel"},
    {CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz, "cuLaunchKernel"},
    {CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx, "cuLaunchKernelEx"},
    {CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz, "cuLaunchKernelEx"},
    {CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel, "cuLaunchCooperativeKernel"},
    {CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel_ptsz, "cuLaunchCooperativeKernel"},
    {CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernelMultiDevice,
     "cuLaunchCooperativeKernelMultiDevice"},
    {CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch, "cuGraphLaunch"},
    {CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch_ptsz, "cuGraphLaunch"},
};

// The runtime calls the converter names without libcupti, and a light window records
// (RuntimeWindowCalls): launches, copies, sets, synchronisation, allocation.
constexpr ApiCallName kRuntimeWindowCalls[] = {
    {CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, "cudaLaunchKernel"},
    {CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_ptsz_v7000, "cudaLaunchKernel"},
    {CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_v13000, "cudaLaunchKernel"},
    {CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_ptsz_v13000, "cudaLaunchKernel"},
    {CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_v11060, "cudaLaunchKernelExC"},
    {CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_ptsz_v11060, "cudaLaunchKernelExC"},
    {CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernel_v9000, "cudaLaunchCooperativeKernel"},
    {CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernel_ptsz_v9000,
     "cudaLaunchCooperativeKernel"},
    {CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000, "cudaGraphLaunch"},
    {CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_ptsz_v10000, "cudaGraphLaunch"},
    {CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy_v3020, "cudaMemcpy"},
    {CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_v3020, "cudaMemcpyAsync"},
    {CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_ptsz_v7000, "cudaMemcpyAsync"},
    {CUPTI_RUNTIME_TRACE_CBID_cudaMemsetAsync_v3020, "cudaMemsetAsync"},
    {CUPTI_RUNTIME_TRACE_CBID_cudaMemsetAsync_ptsz_v7000, "cudaMemsetAsync"},
    {CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_v3020, "cudaStreamSynchronize"},
    {CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_ptsz_v7000, "cudaStreamSynchronize"},
    {CUPTI_RUNTIME_TRACE_CBID_cudaDeviceSynchronize_v3020, "cudaDeviceSynchronize"},
    {CUPTI_RUNTIME_TRACE_CBID_cudaEventSynchronize_v3020, "cudaEventSynchronize"},
    {CUPTI_RUNTIME_TRACE_CBID_cudaEventRecord_v3020, "cudaEventRecord"},
    {CUPTI_RUNTIME_TRACE_CBID_cudaEventRecord_ptsz_v7000, "cudaEventRecord"},
    {CUPTI_RUNTIME_TRACE_CBID_cudaStreamWaitEvent_v3020, "cudaStreamWaitEvent"},
    {CUPTI_RUNTIME_TRACE_CBID_cudaMalloc_v3020, "cudaMalloc"},
    {CUPTI_RUNTIME_TRACE_CBID_cudaFree_v3020, "cudaFree"},
    {CUPTI_RUNTIME_TRACE_CBID_cudaMallocAsync_v11020, "cudaMallocAsync"},
    {CUPTI_RUNTIME_TRACE_CBID_cudaFreeAsync_v11020, "cudaFreeAsync"},
};

}  // namespace

const DriverLaunchCall* DriverLaunchCalls(size_t* count) {
  *count = sizeof(kDriverLaunches) / sizeof(kDriverLaunches[0]);
  return kDriverLaunches;
}

const ApiCallName* RuntimeWindowCalls(size_t* count) {
  *count = sizeof(kRuntimeWindowCalls) / sizeof(kRuntimeWindowCalls[0]);
  return kRuntimeWindowCalls;
}

const char* BuiltinApiName(uint8_t domain, uint32_t cbid) {
  if (domain == static_cast<uint8_t>(ApiDomain::kDriver)) {
    for (const DriverLaunchCall& d : kDriverLaunches) {
      if (d.cbid == cbid) return d.name;
    }
    return nullptr;
  }
  if (domain != static_cast<uint8_t>(ApiDomain::kRuntime)) return nullptr;
  for (const ApiCallName& r : kRuntimeWindowCalls) {
    if (r.cbid == cbid) return r.name;
  }
  return nullptr;
}

namespace {

// One converter per CUPTI activity record kind: the record in our format (inject/records.h).

KernelRecord KernelRecordOf(const KernelActivity& k, RecordBatchWriter& w) {
  KernelRecord r;
  r.start_ns = k.start;
  r.end_ns = k.end;
  r.device_id = k.deviceId;
  r.context_id = k.contextId;
  r.stream_id = k.streamId;
  r.correlation_id = k.correlationId;
  r.grid[0] = k.gridX;
  r.grid[1] = k.gridY;
  r.grid[2] = k.gridZ;
  r.block[0] = k.blockX;
  r.block[1] = k.blockY;
  r.block[2] = k.blockZ;
  r.registers_per_thread = k.registersPerThread;
  r.static_shared_bytes = static_cast<uint32_t>(k.staticSharedMemory);
  r.dynamic_shared_bytes = static_cast<uint32_t>(k.dynamicSharedMemory);
  r.name = InternKernelName(w, k.name);
  return r;
}

MemcpyRecord MemcpyRecordOf(const MemcpyActivity& c) {
  MemcpyRecord r;
  r.start_ns = c.start;
  r.end_ns = c.end;
  r.bytes = c.bytes;
  r.device_id = c.deviceId;
  r.context_id = c.contextId;
  r.stream_id = c.streamId;
  r.correlation_id = c.correlationId;
  r.copy_kind = c.copyKind;
  r.src_kind = c.srcKind;
  r.dst_kind = c.dstKind;
  r.flags = c.flags;
  return r;
}

MemsetRecord MemsetRecordOf(const MemsetActivity& s) {
  MemsetRecord r;
  r.start_ns = s.start;
  r.end_ns = s.end;
  r.bytes = s.bytes;
  r.device_id = s.deviceId;
  r.context_id = s.contextId;
  r.stream_id = s.streamId;
  r.correlation_id = s.correlationId;
  r.value = s.value;
  r.memory_kind = s.memoryKind;
  r.flags = s.flags;
  return r;
}

// `domain`: ApiDomain's value; the name is the caller's to intern.
ApiRecord ApiRecordOf(const CUpti_ActivityAPI& a, uint8_t domain) {
  ApiRecord r;
  r.start_ns = a.start;
  r.end_ns = a.end;
  r.pid = a.processId;
  r.tid = a.threadId;
  r.correlation_id = a.correlationId;
  r.cbid = a.cbid;
  r.domain = domain;
  return r;
}

// False for an operation other than an allocation or a release (the record is ignored).
bool MemoryRecordOf(const MemoryActivity& m, MemoryRecord* out) {
  MemoryRecord& r = *out;
  r.timestamp_ns = m.timestamp;
  r.address = m.address;
  r.bytes = m.bytes;
  r.device_id = m.deviceId;
  r.stream_id = m.streamId;
  r.correlation_id = m.correlationId;
  r.pid = m.processId;
  r.operation =
      static_cast<uint8_t>(m.memoryOperationType == CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION
                               ? MemoryOperation::kAllocation
                               : MemoryOperation::kRelease);
  r.memory_kind = static_cast<uint8_t>(m.memoryKind);
  return m.memoryOperationType == CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION ||
         m.memoryOperationType == CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE;
}

DeviceRecord DeviceRecordOf(const DeviceActivity& d, RecordBatchWriter& w) {
  DeviceRecord r;
  r.memory_size = d.globalMemorySize;
  r.memory_bandwidth = d.globalMemoryBandwidth * 1000;  // CUPTI: KB/s
  r.device_id = d.id;
  r.name = w.Intern(View(d.name));
  r.compute_capability_major = d.computeCapabilityMajor;
  r.compute_capability_minor = d.computeCapabilityMinor;
  r.sm_count = d.numMultiprocessors;
  r.core_clock_khz = d.coreClockRate;
  r.max_warps_per_sm = d.maxWarpsPerMultiprocessor;
  r.max_blocks_per_sm = d.maxBlocksPerMultiprocessor;
  r.max_registers_per_sm = d.maxRegistersPerMultiprocessor;
  r.max_shared_bytes_per_sm = d.maxSharedMemoryPerMultiprocessor;
  static_assert(sizeof(d.uuid.bytes) == sizeof(r.uuid));
  static_assert(sizeof(d.migUuid.bytes) == sizeof(r.mig_uuid));
  std::memcpy(r.uuid, d.uuid.bytes, sizeof(r.uuid));
  if (!AllZero(r.uuid)) r.flags |= kDeviceHasUuid;
  if (d.isMigEnabled != 0) {
    std::memcpy(r.mig_uuid, d.migUuid.bytes, sizeof(r.mig_uuid));
    r.flags |= kDeviceIsMig;
  }
  return r;
}

SynchronizationRecord SynchronizationRecordOf(const SyncActivity& s) {
  SynchronizationRecord r;
  r.start_ns = s.start;
  r.end_ns = s.end;
  r.correlation_id = s.correlationId;
  r.context_id = s.contextId;
  r.stream_id = s.streamId;
  r.cuda_event_id = s.cudaEventId;
  // CUPTI's type as it is; an unknown value above 255 reads as unknown.
  const auto type = static_cast<uint32_t>(s.type);
  r.type = type <= 0xFF ? static_cast<uint8_t>(type) : 0;
  return r;
}

}  // namespace

void CuptiRecordConverter::Add(const CUpti_Activity& record) {
  RecordBatchWriter& w = *writer_;
  switch (record.kind) {
    case CUPTI_ACTIVITY_KIND_KERNEL:
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
      w.Add(KernelRecordOf(As<KernelActivity>(record), w));
      return;
    case CUPTI_ACTIVITY_KIND_MEMCPY:
      w.Add(MemcpyRecordOf(As<MemcpyActivity>(record)));
      return;
    case CUPTI_ACTIVITY_KIND_MEMSET:
      w.Add(MemsetRecordOf(As<MemsetActivity>(record)));
      return;
    case CUPTI_ACTIVITY_KIND_RUNTIME:
    case CUPTI_ACTIVITY_KIND_DRIVER: {
      if (record.kind == CUPTI_ACTIVITY_KIND_DRIVER &&
          BuiltinApiName(static_cast<uint8_t>(ApiDomain::kDriver),
                         As<CUpti_ActivityAPI>(record).cbid) == nullptr) {
        ++ignored_;  // not a launch: the window records every driver call, keeps these only
        return;
      }
      ApiRecord r = ApiRecordOf(
          As<CUpti_ActivityAPI>(record),
          static_cast<uint8_t>(record.kind == CUPTI_ACTIVITY_KIND_RUNTIME ? ApiDomain::kRuntime
                                                                          : ApiDomain::kDriver));
      r.name = w.Intern(View(api_name_(r.domain, r.cbid)));
      w.Add(r);
      return;
    }
    case CUPTI_ACTIVITY_KIND_MARKER:
      AddMarker(As<CUpti_ActivityMarker2>(record));
      return;
    case CUPTI_ACTIVITY_KIND_MEMORY2: {
      MemoryRecord r;
      if (MemoryRecordOf(As<MemoryActivity>(record), &r)) {
        w.Add(r);
      } else {
        ++ignored_;
      }
      return;
    }
    case CUPTI_ACTIVITY_KIND_DEVICE:
      w.Add(DeviceRecordOf(As<DeviceActivity>(record), w));
      return;
    case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION:
      w.Add(SynchronizationRecordOf(As<SyncActivity>(record)));
      return;
    default:
      ++ignored_;
      return;
  }
}

void CuptiRecordConverter::AddMarker(const CUpti_ActivityMarker2& m) {
  uint32_t pid = 0, tid = 0;
  if (m.objectKind == CUPTI_ACTIVITY_OBJECT_THREAD ||
      m.objectKind == CUPTI_ACTIVITY_OBJECT_PROCESS) {
    pid = m.objectId.pt.processId;
    tid = m.objectId.pt.threadId;
  }
  const auto flags = static_cast<uint32_t>(m.flags);
  if ((flags & CUPTI_ACTIVITY_FLAG_MARKER_START) != 0) {
    if (open_.size() >= kMaxOpenRanges && open_.find(m.id) == open_.end()) {
      ++unmatched_;
      return;
    }
    open_[m.id] =
        OpenRange{m.timestamp, pid, tid, std::string(View(m.name)), std::string(View(m.domain))};
    return;
  }
  if ((flags & CUPTI_ACTIVITY_FLAG_MARKER_END) != 0) {
    auto it = open_.find(m.id);
    if (it == open_.end()) {
      ++unmatched_;
      return;
    }
    const OpenRange& open = it->second;
    NvtxRangeRecord r;
    r.start_ns = open.start_ns;
    r.end_ns = m.timestamp >= open.start_ns ? m.timestamp : open.start_ns;
    r.pid = open.pid;
    r.tid = open.tid;
    r.id = m.id;
    // Names are interned at the end: the batch that was current at the start may be gone.
    r.name = writer_->Intern(open.name);
    r.domain = writer_->Intern(open.domain);
    open_.erase(it);
    writer_->Add(r);
    return;
  }
  if ((flags & CUPTI_ACTIVITY_FLAG_MARKER_INSTANTANEOUS) != 0) {
    NvtxRangeRecord r;
    r.start_ns = r.end_ns = m.timestamp;
    r.pid = pid;
    r.tid = tid;
    r.id = m.id;
    r.name = writer_->Intern(View(m.name));
    r.domain = writer_->Intern(View(m.domain));
    writer_->Add(r);
    return;
  }
  ++ignored_;
}

void AddStepMarker(const CUpti_Activity& record, StepRangeTracker* tracker) {
  if (record.kind != CUPTI_ACTIVITY_KIND_MARKER) return;
  const auto& m = As<CUpti_ActivityMarker2>(record);
  const auto flags = static_cast<uint32_t>(m.flags);
  if ((flags & CUPTI_ACTIVITY_FLAG_MARKER_START) != 0) {
    tracker->OnStart(m.id, m.timestamp, View(m.name));
  } else if ((flags & CUPTI_ACTIVITY_FLAG_MARKER_END) != 0) {
    tracker->OnEnd(m.id, m.timestamp);
  }
}

void CuptiRecordConverter::AddBuffer(const uint8_t* buffer, size_t valid_size) {
  size_t offset = 0;
  while (const CUpti_Activity* record = NextCuptiRecord(buffer, valid_size, &offset)) Add(*record);
}

}  // namespace profctl::inject
