// The compact record format the injection library (libprofctl_inject.so) sends the agent: one
// batch of fixed-size, versioned records per flush. docs/cupti.md describes it byte by byte.
//
// PLAIN C++ AND LIBC ONLY. This header is compiled into the injection library, which lives inside
// the user's CUDA process next to the framework's own protobuf/gRPC/abseil and so links none of
// them. The agent-side reader (agent/collectors/cupti/record_batch.h) includes it too.
//
// LAYOUT. Both ends run on one host: integers are in the host's byte order (little-endian on every
// platform CUDA supports), structs have no implicit padding (static_asserts below), and every
// record is a multiple of 8 bytes. A batch is
//   BatchHeader | string table (string_table_bytes) | records (record_bytes)
// The string table is a sequence of entries `uint32 length | length bytes` (no terminator, no
// padding); a string index is the entry's ordinal. kNoString means "no string". Each record starts
// with a RecordHeader naming its kind and its size in bytes.
//
// VERSIONS. BatchHeader::version is kRecordFormatVersion; a reader rejects versions it does not
// know. Within a version a record may grow at its end (readers read the prefix they know and skip
// the rest by RecordHeader::size), and a reader skips, and counts, kinds it does not know: so
// adding a field or a kind is compatible, and changing or removing one needs a new version.
#ifndef PROFCTL_INJECT_RECORDS_H_
#define PROFCTL_INJECT_RECORDS_H_

#include <cstddef>
#include <cstdint>

namespace profctl::inject {

// "PFRB" read as a little-endian uint32.
inline constexpr uint32_t kBatchMagic = 0x42524650;
inline constexpr uint16_t kRecordFormatVersion = 1;
inline constexpr uint32_t kNoString = 0xFFFFFFFFu;

enum class RecordKind : uint16_t {
  kKernel = 1,
  kMemcpy = 2,
  kMemset = 3,
  kApi = 4,
  kNvtxRange = 5,
  kMemory = 6,
  kDevice = 7,
  kSynchronization = 8,
};

// Starts every record.
struct RecordHeader {
  uint16_t kind = 0;  // RecordKind
  uint16_t size = 0;  // bytes of the whole record, header included; a multiple of 8, >= 8
  uint32_t reserved = 0;
};
static_assert(sizeof(RecordHeader) == 8);

// Starts every batch.
struct BatchHeader {
  uint32_t magic = kBatchMagic;
  uint16_t version = kRecordFormatVersion;
  uint16_t header_size = 0;  // sizeof(BatchHeader) for this version
  uint32_t pid = 0;          // the process the records come from
  uint32_t record_count = 0;
  uint32_t string_count = 0;
  uint32_t string_table_bytes = 0;
  uint64_t record_bytes = 0;
  // Calibration: GPU timestamp - CLOCK_REALTIME ns, measured by the process at window start. Every
  // time in the batch is on the GPU clock; the agent subtracts this to get wall-clock time.
  int64_t gpu_minus_wall_ns = 0;
  // Records CUPTI or the library dropped (buffers full, cap reached) before this batch.
  uint64_t dropped_records = 0;
  uint64_t reserved = 0;
};
static_assert(sizeof(BatchHeader) == 56);

// Device activity. Times are ns on the GPU clock (see BatchHeader::gpu_minus_wall_ns).
struct KernelRecord {
  RecordHeader header = {static_cast<uint16_t>(RecordKind::kKernel), sizeof(KernelRecord), 0};
  uint64_t start_ns = 0;
  uint64_t end_ns = 0;
  uint32_t device_id = 0;
  uint32_t context_id = 0;
  uint32_t stream_id = 0;
  uint32_t correlation_id = 0;
  int32_t grid[3] = {};
  int32_t block[3] = {};
  uint32_t registers_per_thread = 0;
  uint32_t static_shared_bytes = 0;   // per block
  uint32_t dynamic_shared_bytes = 0;  // per block
  uint32_t name = kNoString;          // string index: the (mangled or demangled) kernel name
};
static_assert(sizeof(KernelRecord) == 80);

// CUPTI's CUpti_ActivityMemcpyKind and CUpti_ActivityMemoryKind values are kept as they are.
struct MemcpyRecord {
  RecordHeader header = {static_cast<uint16_t>(RecordKind::kMemcpy), sizeof(MemcpyRecord), 0};
  uint64_t start_ns = 0;
  uint64_t end_ns = 0;
  uint64_t bytes = 0;
  uint32_t device_id = 0;
  uint32_t context_id = 0;
  uint32_t stream_id = 0;
  uint32_t correlation_id = 0;
  uint8_t copy_kind = 0;  // CUpti_ActivityMemcpyKind: 1 HtoD, 2 DtoH, 8 DtoD, 10 PtoP, ...
  uint8_t src_kind = 0;   // CUpti_ActivityMemoryKind: 1 pageable, 2 pinned, 3 device, ...
  uint8_t dst_kind = 0;
  uint8_t flags = 0;  // CUPTI's flags; bit 0 (CUPTI_ACTIVITY_FLAG_MEMCPY_ASYNC): async
  uint32_t reserved = 0;
};
static_assert(sizeof(MemcpyRecord) == 56);

struct MemsetRecord {
  RecordHeader header = {static_cast<uint16_t>(RecordKind::kMemset), sizeof(MemsetRecord), 0};
  uint64_t start_ns = 0;
  uint64_t end_ns = 0;
  uint64_t bytes = 0;
  uint32_t device_id = 0;
  uint32_t context_id = 0;
  uint32_t stream_id = 0;
  uint32_t correlation_id = 0;
  uint32_t value = 0;
  uint16_t memory_kind = 0;  // CUpti_ActivityMemoryKind
  uint16_t flags = 0;
};
static_assert(sizeof(MemsetRecord) == 56);

enum class ApiDomain : uint8_t { kRuntime = 1, kDriver = 2 };

// A CUDA runtime or driver API call on a host thread.
struct ApiRecord {
  RecordHeader header = {static_cast<uint16_t>(RecordKind::kApi), sizeof(ApiRecord), 0};
  uint64_t start_ns = 0;
  uint64_t end_ns = 0;
  uint32_t pid = 0;
  uint32_t tid = 0;
  uint32_t correlation_id = 0;
  uint32_t cbid = 0;          // CUPTI callback id in its domain
  uint32_t name = kNoString;  // string index, e.g. "cudaLaunchKernel"
  uint8_t domain = 0;         // ApiDomain
  uint8_t reserved[3] = {};
};
static_assert(sizeof(ApiRecord) == 48);

// An NVTX push/pop (or start/end) range, paired by the library from CUPTI's start/end markers.
struct NvtxRangeRecord {
  RecordHeader header = {static_cast<uint16_t>(RecordKind::kNvtxRange), sizeof(NvtxRangeRecord), 0};
  uint64_t start_ns = 0;
  uint64_t end_ns = 0;
  uint32_t pid = 0;
  uint32_t tid = 0;
  uint32_t name = kNoString;    // string index
  uint32_t domain = kNoString;  // string index; kNoString for the default domain
  uint32_t id = 0;              // CUPTI's marker id
  uint32_t reserved = 0;
};
static_assert(sizeof(NvtxRangeRecord) == 48);

enum class MemoryOperation : uint8_t { kAllocation = 1, kRelease = 2 };

// A device memory allocation or release (CUPTI_ACTIVITY_KIND_MEMORY2).
struct MemoryRecord {
  RecordHeader header = {static_cast<uint16_t>(RecordKind::kMemory), sizeof(MemoryRecord), 0};
  uint64_t timestamp_ns = 0;
  uint64_t address = 0;
  uint64_t bytes = 0;
  uint32_t device_id = 0;
  uint32_t stream_id = 0;
  uint32_t correlation_id = 0;
  uint32_t pid = 0;
  uint8_t operation = 0;    // MemoryOperation
  uint8_t memory_kind = 0;  // CUpti_ActivityMemoryKind
  uint8_t reserved[6] = {};
};
static_assert(sizeof(MemoryRecord) == 56);

// A device's properties (CUPTI_ACTIVITY_KIND_DEVICE): XProf's capability stats and the limits
// theoretical occupancy is computed for.
struct DeviceRecord {
  RecordHeader header = {static_cast<uint16_t>(RecordKind::kDevice), sizeof(DeviceRecord), 0};
  uint64_t memory_size = 0;       // bytes
  uint64_t memory_bandwidth = 0;  // bytes/s
  uint32_t device_id = 0;
  uint32_t name = kNoString;  // string index, e.g. "NVIDIA H100 80GB HBM3"
  uint32_t compute_capability_major = 0;
  uint32_t compute_capability_minor = 0;
  uint32_t sm_count = 0;
  uint32_t core_clock_khz = 0;
  uint32_t max_warps_per_sm = 0;
  uint32_t max_blocks_per_sm = 0;
  uint32_t max_registers_per_sm = 0;
  uint32_t max_shared_bytes_per_sm = 0;
  // Added within version 1 (a library that predates them sends the 64-byte prefix above; readers
  // fill what is absent with zeros, i.e. flags 0: no UUID known).
  // The device's UUID (CUpti_ActivityDevice5::uuid, the 16 bytes nvidia-smi prints as
  // "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx"); valid when flags has kDeviceHasUuid.
  uint8_t uuid[16] = {};
  // The MIG instance's UUID (CUpti_ActivityDevice5::migUuid, printed "MIG-..."), when flags has
  // kDeviceIsMig (all zero if CUPTI did not give one).
  uint8_t mig_uuid[16] = {};
  uint32_t flags = 0;  // DeviceRecordFlags
  uint32_t reserved = 0;
};
static_assert(sizeof(DeviceRecord) == 104);
// The size of a DeviceRecord from a library that predates `uuid`: what a reader requires at least.
inline constexpr uint16_t kDeviceRecordMinSize = 64;
static_assert(offsetof(DeviceRecord, uuid) == kDeviceRecordMinSize);

// DeviceRecord::flags bits.
enum DeviceRecordFlags : uint32_t {
  kDeviceHasUuid = 1u << 0,  // `uuid` holds the device's UUID
  kDeviceIsMig = 1u << 1,    // the device is a MIG instance; `mig_uuid` holds its UUID
};

// CUPTI's CUpti_ActivitySynchronizationType values, kept as they are.
enum class SyncType : uint8_t {
  kUnknown = 0,
  kEventSynchronize = 1,   // cuEventSynchronize / cudaEventSynchronize
  kStreamWaitEvent = 2,    // cuStreamWaitEvent / cudaStreamWaitEvent
  kStreamSynchronize = 3,  // cuStreamSynchronize / cudaStreamSynchronize
  kContextSynchronize = 4  // cuCtxSynchronize / cudaDeviceSynchronize
};

// CUPTI's CUPTI_SYNCHRONIZATION_INVALID_VALUE: the stream or event does not apply to this type.
inline constexpr uint32_t kSyncNotApplicable = 0xFFFFFFFFu;

// A host thread synchronizing with the device (CUPTI_ACTIVITY_KIND_SYNCHRONIZATION): the span of
// the synchronization call. CUPTI names no device or thread: the agent finds the device from
// `context_id` (the process's device activity) and the thread from the API call with the same
// `correlation_id`.
struct SynchronizationRecord {
  RecordHeader header = {static_cast<uint16_t>(RecordKind::kSynchronization),
                         sizeof(SynchronizationRecord), 0};
  uint64_t start_ns = 0;
  uint64_t end_ns = 0;
  uint32_t correlation_id = 0;                  // the synchronizing API call's
  uint32_t context_id = 0;                      // the context synchronized, or the stream's/event's
  uint32_t stream_id = kSyncNotApplicable;      // not for context and event synchronization
  uint32_t cuda_event_id = kSyncNotApplicable;  // only for event synchronization, stream waits
  uint8_t type = 0;                             // SyncType (unknown values are kept)
  uint8_t reserved[7] = {};
};
static_assert(sizeof(SynchronizationRecord) == 48);

}  // namespace profctl::inject

#endif  // PROFCTL_INJECT_RECORDS_H_
