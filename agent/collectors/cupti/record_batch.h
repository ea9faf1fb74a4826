// Reads a record batch from the injection library (inject/records.h; docs/cupti.md) into plain
// vectors. The bytes come from a process on this host that we do not trust: the reader checks
// every length, count, string index and version, and allocates only for what the bytes hold.
#ifndef PROFCTL_AGENT_COLLECTORS_CUPTI_RECORD_BATCH_H_
#define PROFCTL_AGENT_COLLECTORS_CUPTI_RECORD_BATCH_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "inject/records.h"

namespace profctl::agent::cupti {

// One parsed batch: the header's fields, the string table and the records by kind, in the order
// they came.
struct RecordBatch {
  uint16_t version = 0;
  uint32_t pid = 0;
  int64_t gpu_minus_wall_ns = 0;
  uint64_t dropped_records = 0;
  // Records of kinds this reader does not know (newer writers), skipped.
  int64_t unknown_records = 0;
  std::vector<std::string> strings;
  std::vector<inject::KernelRecord> kernels;
  std::vector<inject::MemcpyRecord> memcpys;
  std::vector<inject::MemsetRecord> memsets;
  std::vector<inject::ApiRecord> apis;
  std::vector<inject::NvtxRangeRecord> ranges;
  std::vector<inject::MemoryRecord> memory;
  std::vector<inject::DeviceRecord> devices;
  std::vector<inject::SynchronizationRecord> syncs;

  // The string at `index`, "" for kNoString. Every index in a parsed batch is valid.
  absl::string_view String(uint32_t index) const {
    return index < strings.size() ? absl::string_view(strings[index]) : absl::string_view();
  }
};

// The heap bytes `batch` holds (its vectors' capacities and strings), for accounting.
int64_t HeldBytes(const RecordBatch& batch);

// The largest batch accepted (the writer's kMaxBatchBytes).
inline constexpr size_t kMaxRecordBatchBytes = size_t{256} << 20;

// Parses one batch. Errors are INVALID_ARGUMENT naming the field, its value and the byte offset:
// bytes over kMaxRecordBatchBytes, a bad magic, an unknown version, a header_size below this
// version's header, section lengths that disagree with the bytes, a string entry or record that
// runs past its section, a record size not a multiple of 8 or below its kind's struct,
// counts that disagree with what the sections hold, a string index past the table, time ranges
// that end before they start, and enum fields out of range (API domain, memory operation; a
// synchronization type is CUPTI's and any value is kept: unknown ones read as unknown).
absl::StatusOr<RecordBatch> ParseRecordBatch(absl::string_view bytes);

}  // namespace profctl::agent::cupti

#endif  // PROFCTL_AGENT_COLLECTORS_CUPTI_RECORD_BATCH_H_
