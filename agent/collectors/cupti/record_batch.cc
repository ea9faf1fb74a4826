#include "agent/collectors/cupti/record_batch.h"

#include <cstring>
#include <type_traits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace profctl::agent::cupti {
namespace {

using inject::RecordKind;

absl::Status Bad(absl::string_view what, size_t offset) {
  return absl::InvalidArgumentError(
      absl::StrCat("cupti record batch: ", what, " at byte ", offset));
}

template <typename T>
T Load(const char* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

// Reads a record of type T from `[p, p + size)` (size >= sizeof(T): newer writers may append).
template <typename T>
T LoadRecord(const char* p) {
  return Load<T>(p);
}

// Reads a record of type T that grew within the version from `[p, p + size)`: an older writer's
// shorter record (size >= the caller's minimum) leaves the fields it lacks at their defaults.
template <typename T>
T LoadRecordPrefix(const char* p, size_t size) {
  T v;
  std::memcpy(&v, p, size < sizeof(T) ? size : sizeof(T));
  return v;
}

absl::Status CheckString(const RecordBatch& b, uint32_t index, absl::string_view field,
                         size_t offset) {
  if (index == inject::kNoString || index < b.strings.size()) return absl::OkStatus();
  return Bad(
      absl::StrCat(field, " string index ", index, " is past the table of ", b.strings.size()),
      offset);
}

absl::Status CheckRange(uint64_t start, uint64_t end, size_t offset) {
  if (end < start) return Bad(absl::StrCat("end ", end, " before start ", start), offset);
  // Times must fit int64 ns as the XSpace converter computes them.
  if (end > static_cast<uint64_t>(INT64_MAX))
    return Bad(absl::StrCat("time ", end, " too large"), offset);
  return absl::OkStatus();
}

// The batch header, checked against the batch's size.
absl::StatusOr<inject::BatchHeader> ReadHeader(absl::string_view bytes) {
  if (bytes.size() > kMaxRecordBatchBytes) {
    return Bad(absl::StrCat(bytes.size(), " bytes exceed the limit of ", kMaxRecordBatchBytes), 0);
  }
  if (bytes.size() < sizeof(inject::BatchHeader)) {
    return Bad(absl::StrCat("only ", bytes.size(), " bytes, the header needs ",
                            sizeof(inject::BatchHeader)),
               0);
  }
  const auto h = Load<inject::BatchHeader>(bytes.data());
  if (h.magic != inject::kBatchMagic)
    return Bad(absl::StrCat("bad magic 0x", absl::Hex(h.magic)), 0);
  if (h.version != inject::kRecordFormatVersion) {
    return Bad(absl::StrCat("unknown version ", h.version, " (this reader knows ",
                            inject::kRecordFormatVersion, ")"),
               4);
  }
  if (h.header_size < sizeof(inject::BatchHeader) || h.header_size % 8 != 0 ||
      h.header_size > bytes.size()) {
    return Bad(absl::StrCat("header_size ", h.header_size), 6);
  }
  const size_t rest = bytes.size() - h.header_size;
  if (h.string_table_bytes > rest || h.record_bytes != rest - h.string_table_bytes) {
    return Bad(
        absl::StrCat("string_table_bytes ", h.string_table_bytes, " + record_bytes ",
                     h.record_bytes, " do not add up to the ", rest, " bytes after the header"),
        h.header_size);
  }
  return h;
}

// The string table into b->strings: entries until the section ends; the count is checked, never
// trusted. Returns the offset of the first record.
absl::StatusOr<size_t> ReadStrings(absl::string_view bytes, const inject::BatchHeader& h,
                                   RecordBatch* b) {
  size_t at = h.header_size;
  const size_t strings_end = at + h.string_table_bytes;
  while (at < strings_end) {
    if (strings_end - at < sizeof(uint32_t)) return Bad("string length cut short", at);
    const auto length = Load<uint32_t>(bytes.data() + at);
    if (length > strings_end - at - sizeof(uint32_t)) {
      return Bad(absl::StrCat("string of ", length, " bytes runs past the string table"), at);
    }
    b->strings.emplace_back(bytes.substr(at + sizeof(uint32_t), length));
    at += sizeof(uint32_t) + length;
  }
  if (b->strings.size() != h.string_count) {
    return Bad(
        absl::StrCat("string_count ", h.string_count, " but the table holds ", b->strings.size()),
        h.header_size);
  }
  return at;
}

// The record at byte `at` (`p`), whose header `rh` was checked, into its list in *b; a kind this
// reader does not know is counted.
absl::Status ReadRecord(const char* p, const inject::RecordHeader& rh, size_t at, RecordBatch* b) {
  auto need = [&](size_t struct_size) -> absl::Status {
    if (rh.size >= struct_size) return absl::OkStatus();
    return Bad(
        absl::StrCat("record kind ", rh.kind, " of ", rh.size, " bytes, needs ", struct_size), at);
  };
  switch (static_cast<RecordKind>(rh.kind)) {
    case RecordKind::kKernel: {
      PROFCTL_RETURN_IF_ERROR(need(sizeof(inject::KernelRecord)));
      const auto r = LoadRecord<inject::KernelRecord>(p);
      PROFCTL_RETURN_IF_ERROR(CheckString(*b, r.name, "kernel name", at));
      PROFCTL_RETURN_IF_ERROR(CheckRange(r.start_ns, r.end_ns, at));
      b->kernels.push_back(r);
      break;
    }
    case RecordKind::kMemcpy: {
      PROFCTL_RETURN_IF_ERROR(need(sizeof(inject::MemcpyRecord)));
      const auto r = LoadRecord<inject::MemcpyRecord>(p);
      PROFCTL_RETURN_IF_ERROR(CheckRange(r.start_ns, r.end_ns, at));
      b->memcpys.push_back(r);
      break;
    }
    case RecordKind::kMemset: {
      PROFCTL_RETURN_IF_ERROR(need(sizeof(inject::MemsetRecord)));
      const auto r = LoadRecord<inject::MemsetRecord>(p);
      PROFCTL_RETURN_IF_ERROR(CheckRange(r.start_ns, r.end_ns, at));
      b->memsets.push_back(r);
      break;
    }
    case RecordKind::kApi: {
      PROFCTL_RETURN_IF_ERROR(need(sizeof(inject::ApiRecord)));
      const auto r = LoadRecord<inject::ApiRecord>(p);
      PROFCTL_RETURN_IF_ERROR(CheckString(*b, r.name, "API name", at));
      PROFCTL_RETURN_IF_ERROR(CheckRange(r.start_ns, r.end_ns, at));
      if (r.domain != static_cast<uint8_t>(inject::ApiDomain::kRuntime) &&
          r.domain != static_cast<uint8_t>(inject::ApiDomain::kDriver)) {
        return Bad(absl::StrCat("API domain ", static_cast<int>(r.domain)), at);
      }
      b->apis.push_back(r);
      break;
    }
    case RecordKind::kNvtxRange: {
      PROFCTL_RETURN_IF_ERROR(need(sizeof(inject::NvtxRangeRecord)));
      const auto r = LoadRecord<inject::NvtxRangeRecord>(p);
      PROFCTL_RETURN_IF_ERROR(CheckString(*b, r.name, "NVTX name", at));
      PROFCTL_RETURN_IF_ERROR(CheckString(*b, r.domain, "NVTX domain", at));
      PROFCTL_RETURN_IF_ERROR(CheckRange(r.start_ns, r.end_ns, at));
      b->ranges.push_back(r);
      break;
    }
    case RecordKind::kMemory: {
      PROFCTL_RETURN_IF_ERROR(need(sizeof(inject::MemoryRecord)));
      const auto r = LoadRecord<inject::MemoryRecord>(p);
      PROFCTL_RETURN_IF_ERROR(CheckRange(r.timestamp_ns, r.timestamp_ns, at));
      if (r.operation != static_cast<uint8_t>(inject::MemoryOperation::kAllocation) &&
          r.operation != static_cast<uint8_t>(inject::MemoryOperation::kRelease)) {
        return Bad(absl::StrCat("memory operation ", static_cast<int>(r.operation)), at);
      }
      b->memory.push_back(r);
      break;
    }
    case RecordKind::kDevice: {
      // UUIDs were added within version 1: an older library's record is their prefix.
      PROFCTL_RETURN_IF_ERROR(need(inject::kDeviceRecordMinSize));
      // (`flags` is its last field but one, so a cut record reads as "no UUID".)
      const auto r = LoadRecordPrefix<inject::DeviceRecord>(p, rh.size);
      PROFCTL_RETURN_IF_ERROR(CheckString(*b, r.name, "device name", at));
      b->devices.push_back(r);
      break;
    }
    case RecordKind::kSynchronization: {
      PROFCTL_RETURN_IF_ERROR(need(sizeof(inject::SynchronizationRecord)));
      const auto r = LoadRecord<inject::SynchronizationRecord>(p);
      PROFCTL_RETURN_IF_ERROR(CheckRange(r.start_ns, r.end_ns, at));
      b->syncs.push_back(r);
      break;
    }
    default:
      ++b->unknown_records;
      break;
  }
  return absl::OkStatus();
}

}  // namespace

int64_t HeldBytes(const RecordBatch& b) {
  auto bytes = [](const auto& v) {
    return static_cast<int64_t>(v.capacity() *
                                sizeof(typename std::decay_t<decltype(v)>::value_type));
  };
  int64_t n = bytes(b.strings) + bytes(b.kernels) + bytes(b.memcpys) + bytes(b.memsets) +
              bytes(b.apis) + bytes(b.ranges) + bytes(b.memory) + bytes(b.devices) + bytes(b.syncs);
  for (const std::string& s : b.strings) {
    if (s.capacity() > 15) n += static_cast<int64_t>(s.capacity());  // beyond the inline buffer
  }
  return n;
}

absl::StatusOr<RecordBatch> ParseRecordBatch(absl::string_view bytes) {
  PROFCTL_ASSIGN_OR_RETURN(const inject::BatchHeader h, ReadHeader(bytes));
  RecordBatch b;
  b.version = h.version;
  b.pid = h.pid;
  b.gpu_minus_wall_ns = h.gpu_minus_wall_ns;
  b.dropped_records = h.dropped_records;
  PROFCTL_ASSIGN_OR_RETURN(size_t at, ReadStrings(bytes, h, &b));

  int64_t records = 0;
  const size_t end = bytes.size();
  while (at < end) {
    if (end - at < sizeof(inject::RecordHeader)) return Bad("record header cut short", at);
    const auto rh = Load<inject::RecordHeader>(bytes.data() + at);
    if (rh.size < sizeof(inject::RecordHeader) || rh.size % 8 != 0) {
      return Bad(absl::StrCat("record size ", rh.size), at);
    }
    if (rh.size > end - at) {
      return Bad(absl::StrCat("record of ", rh.size, " bytes runs past the batch"), at);
    }
    PROFCTL_RETURN_IF_ERROR(ReadRecord(bytes.data() + at, rh, at, &b));
    ++records;
    at += rh.size;
  }
  if (records != h.record_count) {
    return Bad(absl::StrCat("record_count ", h.record_count, " but the batch holds ", records),
               h.header_size + h.string_table_bytes);
  }
  return b;
}

}  // namespace profctl::agent::cupti
