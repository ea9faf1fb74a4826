#include "inject/record_batch_writer.h"

#include <utility>

namespace profctl::inject {

uint32_t RecordBatchWriter::Intern(std::string_view s) {
  if (s.empty()) return kNoString;
  if (s.size() > kMaxStringBytes) s = s.substr(0, kMaxStringBytes);
  auto it = string_index_.find(std::string(s));
  if (it != string_index_.end()) return it->second;
  if (!Fits(sizeof(uint32_t) + s.size()) || string_count_ == kNoString - 1) {
    ++dropped_strings_;
    return kNoString;
  }
  const auto length = static_cast<uint32_t>(s.size());
  const size_t at = strings_.size();
  strings_.resize(at + sizeof(length) + s.size());
  std::memcpy(strings_.data() + at, &length, sizeof(length));
  std::memcpy(strings_.data() + at + sizeof(length), s.data(), s.size());
  string_index_.emplace(std::string(s), string_count_);
  return string_count_++;
}

std::vector<uint8_t> RecordBatchWriter::Finish(uint32_t pid, int64_t gpu_minus_wall_ns,
                                               uint64_t extra_dropped) {
  BatchHeader header;
  header.header_size = sizeof(BatchHeader);
  header.pid = pid;
  header.record_count = record_count_;
  header.string_count = string_count_;
  header.string_table_bytes = static_cast<uint32_t>(strings_.size());
  header.record_bytes = records_.size();
  header.gpu_minus_wall_ns = gpu_minus_wall_ns;
  header.dropped_records = dropped_records_ + extra_dropped;
  std::vector<uint8_t> out(sizeof(header) + strings_.size() + records_.size());
  std::memcpy(out.data(), &header, sizeof(header));
  if (!strings_.empty()) std::memcpy(out.data() + sizeof(header), strings_.data(), strings_.size());
  if (!records_.empty()) {
    std::memcpy(out.data() + sizeof(header) + strings_.size(), records_.data(), records_.size());
  }
  *this = RecordBatchWriter(max_bytes_);
  return out;
}

}  // namespace profctl::inject
