// Builds one record batch (records.h) in memory, within a byte cap. Plain C++ and libc only: part
// of the injection library.
//
// Not thread-safe: the library's buffer-completed callback owns one writer at a time.
#ifndef PROFCTL_INJECT_RECORD_BATCH_WRITER_H_
#define PROFCTL_INJECT_RECORD_BATCH_WRITER_H_

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "inject/records.h"

namespace profctl::inject {

// Longer strings (kernel names of deep templates run to kilobytes) are cut to this many bytes.
inline constexpr size_t kMaxStringBytes = size_t{16} * 1024;
// The largest batch a writer makes (the reader accepts up to kMaxBatchBytes too).
inline constexpr size_t kMaxBatchBytes = size_t{256} << 20;

class RecordBatchWriter {
 public:
  // `max_bytes`: the most a finished batch may take, header and string table included (>= 4 KiB
  // is sensible; more than kMaxBatchBytes counts as kMaxBatchBytes). What does not fit is dropped
  // and counted.
  explicit RecordBatchWriter(size_t max_bytes)
      : max_bytes_(max_bytes < kMaxBatchBytes ? max_bytes : kMaxBatchBytes) {}

  // The index of `s` in the string table (cut to kMaxStringBytes), adding it if new; kNoString for
  // an empty string, or when the batch has no room for it (then counted in dropped_strings()).
  uint32_t Intern(std::string_view s);

  // Appends one record (any record struct of records.h, its header already filled). False, and
  // the record counted as dropped, when the batch has no room.
  template <typename Record>
  bool Add(const Record& record) {
    static_assert(sizeof(Record) % 8 == 0);
    if (!Fits(sizeof(Record))) {
      ++dropped_records_;
      return false;
    }
    const size_t at = records_.size();
    records_.resize(at + sizeof(Record));
    std::memcpy(records_.data() + at, &record, sizeof(Record));
    ++record_count_;
    return true;
  }

  uint32_t record_count() const { return record_count_; }
  uint64_t dropped_records() const { return dropped_records_; }
  uint64_t dropped_strings() const { return dropped_strings_; }
  size_t size_bytes() const { return sizeof(BatchHeader) + strings_.size() + records_.size(); }

  // The serialized batch; resets the writer (counters included) for the next one.
  // `extra_dropped` is added to the header's dropped_records (CUPTI's own count).
  std::vector<uint8_t> Finish(uint32_t pid, int64_t gpu_minus_wall_ns, uint64_t extra_dropped);

 private:
  bool Fits(size_t more) const { return size_bytes() + more <= max_bytes_; }

  size_t max_bytes_;
  std::vector<uint8_t> strings_;
  std::vector<uint8_t> records_;
  std::unordered_map<std::string, uint32_t> string_index_;
  uint32_t string_count_ = 0;
  uint32_t record_count_ = 0;
  uint64_t dropped_records_ = 0;
  uint64_t dropped_strings_ = 0;
};

}  // namespace profctl::inject

#endif  // PROFCTL_INJECT_RECORD_BATCH_WRITER_H_
