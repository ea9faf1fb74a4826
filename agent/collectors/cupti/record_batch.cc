#include "agent/collectors/cupti/record_batch.h"

#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"

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

}  // namespace

absl::StatusOr<RecordBatch> ParseRecordBatch(absl::string_view bytes) {
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

  RecordBatch b;
  b.version = h.version;
  b.pid = h.pid;
  b.gpu_minus_wall_ns = h.gpu_minus_wall_ns;
  b.dropped_records = h.dropped_records;

  // String table: entries until the section ends; the count is checked, never trusted.
  size_t at = h.header_size;
  const size_t strings_end = at + h.string_table_bytes;
  while (at < strings_end) {
    if (strings_end - at < sizeof(uint32_t)) return Bad("string length cut short", at);
    const auto length = Load<uint32_t>(bytes.data() + at);
    if (length > strings_end - at - sizeof(uint32_t)) {
      return Bad(absl::StrCat("string of ", length, " bytes runs past the string table"), at);
    }
    b.strings.emplace_back(bytes.substr(at + sizeof(uint32_t), length));
    at += sizeof(uint32_t) + length;
  }
  if (b.strings.size() != h.string_count) {
    return Bad(
        absl::StrCat("string_count ", h.string_count, " but the table holds ", b.strings.size()),
        h.header_size);
  }

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
    const char* p = bytes.data() + at;
    auto need = [&](size_t struct_size) -> absl::Status {
      if (rh.size >= struct_size) return absl::OkStatus();
      return Bad(
          absl::StrCat("record kind ", rh.kind, " of ", rh.size, " bytes, needs ", struct_size),
          at);
    };
    switch (static_cast<RecordKind>(rh.kind)) {
      case RecordKind::kKernel: {
        if (absl::Status s = need(sizeof(inject::KernelRecord)); !s.ok()) return s;
        const auto r = LoadRecord<inject::KernelRecord>(p);
        if (absl::Status s = CheckString(b, r.name, "kernel name", at); !s.ok()) return s;
        if (absl::Status s = CheckRange(r.start_ns, r.end_ns, at); !s.ok()) return s;
        b.kernels.push_back(r);
        break;
      }
      case RecordKind::kMemcpy: {
        if (absl::Status s = need(sizeof(inject::MemcpyRecord)); !s.ok()) return s;
        const auto r = LoadRecord<inject::MemcpyRecord>(p);
        if (absl::Status s = CheckRange(r.start_ns, r.end_ns, at); !s.ok()) return s;
        b.memcpys.push_back(r);
        break;
      }
      case RecordKind::kMemset: {
        if (absl::Status s = need(sizeof(inject::MemsetRecord)); !s.ok()) return s;
        const auto r = LoadRecord<inject::MemsetRecord>(p);
        if (absl::Status s = CheckRange(r.start_ns, r.end_ns, at); !s.ok()) return s;
        b.memsets.push_back(r);
        break;
      }
      case RecordKind::kApi: {
        if (absl::Status s = need(sizeof(inject::ApiRecord)); !s.ok()) return s;
        const auto r = LoadRecord<inject::ApiRecord>(p);
        if (absl::Status s = CheckString(b, r.name, "API name", at); !s.ok()) return s;
        if (absl::Status s = CheckRange(r.start_ns, r.end_ns, at); !s.ok()) return s;
        if (r.domain != static_cast<uint8_t>(inject::ApiDomain::kRuntime) &&
            r.domain != static_cast<uint8_t>(inject::ApiDomain::kDriver)) {
          return Bad(absl::StrCat("API domain ", static_cast<int>(r.domain)), at);
        }
        b.apis.push_back(r);
        break;
      }
      case RecordKind::kNvtxRange: {
        if (absl::Status s = need(sizeof(inject::NvtxRangeRecord)); !s.ok()) return s;
        const auto r = LoadRecord<inject::NvtxRangeRecord>(p);
        if (absl::Status s = CheckString(b, r.name, "NVTX name", at); !s.ok()) return s;
        if (absl::Status s = CheckString(b, r.domain, "NVTX domain", at); !s.ok()) return s;
        if (absl::Status s = CheckRange(r.start_ns, r.end_ns, at); !s.ok()) return s;
        b.ranges.push_back(r);
        break;
      }
      case RecordKind::kMemory: {
        if (absl::Status s = need(sizeof(inject::MemoryRecord)); !s.ok()) return s;
        const auto r = LoadRecord<inject::MemoryRecord>(p);
        if (absl::Status s = CheckRange(r.timestamp_ns, r.timestamp_ns, at); !s.ok()) return s;
        if (r.operation != static_cast<uint8_t>(inject::MemoryOperation::kAllocation) &&
            r.operation != static_cast<uint8_t>(inject::MemoryOperation::kRelease)) {
          return Bad(absl::StrCat("memory operation ", static_cast<int>(r.operation)), at);
        }
        b.memory.push_back(r);
        break;
      }
      case RecordKind::kDevice: {
        // UUIDs were added within version 1: an older library's record is their prefix.
        if (absl::Status s = need(inject::kDeviceRecordMinSize); !s.ok()) return s;
        // (`flags` is its last field but one, so a cut record reads as "no UUID".)
        const auto r = LoadRecordPrefix<inject::DeviceRecord>(p, rh.size);
        if (absl::Status s = CheckString(b, r.name, "device name", at); !s.ok()) return s;
        b.devices.push_back(r);
        break;
      }
      case RecordKind::kSynchronization: {
        if (absl::Status s = need(sizeof(inject::SynchronizationRecord)); !s.ok()) return s;
        const auto r = LoadRecord<inject::SynchronizationRecord>(p);
        if (absl::Status s = CheckRange(r.start_ns, r.end_ns, at); !s.ok()) return s;
        b.syncs.push_back(r);
        break;
      }
      default:
        ++b.unknown_records;
        break;
    }
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
