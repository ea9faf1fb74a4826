// Walking the protobuf wire format of an XSpace (tensorflow/profiler/xplane.proto, TSL_WIRE.md)
// without decoding it into messages: the field numbers, a cursor over a byte range of a
// ByteSource, an XStat as read, and a table from metadata ids to what the reader decided about
// them. Internal to analysis/readers (xspace_reader.cc): users include xspace_reader.h. Inline,
// as the reader's per-event loop calls it for every field.
#ifndef PROFCTL_ANALYSIS_READERS_XSPACE_WIRE_H_
#define PROFCTL_ANALYSIS_READERS_XSPACE_WIRE_H_

#include <algorithm>
#include <climits>
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "common/byte_source.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream.h"
#include "google/protobuf/wire_format_lite.h"

namespace profctl::analysis::xspace_wire {

// Field numbers of tensorflow/profiler/xplane.proto (TSL_WIRE.md) and of protobuf map entries.
enum SpaceField : uint32_t { kSpacePlanes = 1, kSpaceErrors = 2, kSpaceWarnings = 3 };
enum PlaneField : uint32_t {
  kPlaneName = 2,
  kPlaneLines = 3,
  kPlaneEventMetadata = 4,
  kPlaneStatMetadata = 5,
  kPlaneStats = 6,
};
enum LineField : uint32_t { kLineId = 1, kLineName = 2, kLineTimestampNs = 3, kLineEvents = 4 };
enum EventField : uint32_t {
  kEventMetadataId = 1,
  kEventOffsetPs = 2,
  kEventDurationPs = 3,
  kEventStats = 4,
  kEventNumOccurrences = 5,
};
enum StatField : uint32_t {
  kStatMetadataId = 1,
  kStatDouble = 2,
  kStatUint64 = 3,
  kStatInt64 = 4,
  kStatStr = 5,
  kStatBytes = 6,
  kStatRef = 7,
};
enum MapEntryField : uint32_t { kMapKey = 1, kMapValue = 2 };
constexpr uint32_t kEventMetadataName = 2;
constexpr uint32_t kEventMetadataStats = 5;
constexpr uint32_t kStatMetadataName = 2;

enum WireType : uint32_t { kVarint = 0, kFixed64 = 1, kLengthDelimited = 2, kFixed32 = 5 };

// Names longer than this are cut when read: they only feed warnings, matching and classification
// (a step name is at most kMaxStepNameLength).
constexpr uint32_t kMaxNameBytes = 4096;

// A byte range of the source: a message or a length-delimited field's value.
struct Range {
  uint64_t offset = 0;
  uint64_t size = 0;
};

// One pass over a byte range of the source. Every Read*/Skip returns false on malformed or
// missing bytes; the caller then stops and reports Position().
class Cursor {
 public:
  Cursor(const ByteSource& source, Range range)
      : stream_(source.Open(range.offset, range.size)), in_(stream_.get()), base_(range.offset) {
    in_.SetTotalBytesLimit(INT_MAX);
  }

  uint64_t Position() const { return base_ + static_cast<uint64_t>(in_.CurrentPosition()); }

  // Calls field(number, wire_type, tag) for each field up to the current limit (the end of the
  // range, or of the message entered by Message()); field returns false on malformed bytes.
  template <typename F>
  bool Fields(F&& field) {
    for (;;) {
      const uint32_t tag = in_.ReadTag();
      if (tag == 0) return in_.ConsumedEntireMessage();
      if (!field(tag >> 3, tag & 7, tag)) return false;
    }
  }

  // Enters the length-delimited message at the cursor and walks its fields.
  template <typename F>
  bool Message(F&& field) {
    uint32_t length = 0;
    if (!in_.ReadVarint32(&length) || length > INT_MAX) return false;
    const google::protobuf::io::CodedInputStream::Limit limit =
        in_.PushLimit(static_cast<int>(length));
    const bool ok = Fields(std::forward<F>(field));
    in_.PopLimit(limit);
    return ok;
  }

  bool Skip(uint32_t tag) {
    return google::protobuf::internal::WireFormatLite::SkipField(&in_, tag);
  }
  bool Varint(uint64_t* v) { return in_.ReadVarint64(v); }
  bool Int64(int64_t* v) {
    uint64_t u = 0;
    if (!in_.ReadVarint64(&u)) return false;
    *v = static_cast<int64_t>(u);
    return true;
  }
  bool Fixed64(uint64_t* v) { return in_.ReadLittleEndian64(v); }
  // A length-delimited value; at most `max_bytes` of it are kept in *out.
  bool String(std::string* out, uint32_t max_bytes = UINT32_MAX) {
    uint32_t length = 0;
    if (!in_.ReadVarint32(&length) || length > INT_MAX) return false;
    const uint32_t keep = std::min(length, max_bytes);
    if (!in_.ReadString(out, static_cast<int>(keep))) return false;
    return in_.Skip(static_cast<int>(length - keep));
  }
  // The range of a length-delimited value, skipped.
  bool SkipRange(Range* range) {
    uint32_t length = 0;
    if (!in_.ReadVarint32(&length) || length > INT_MAX) return false;
    range->offset = Position();
    range->size = length;
    return in_.Skip(static_cast<int>(length));
  }

 private:
  std::unique_ptr<google::protobuf::io::ZeroCopyInputStream> stream_;
  google::protobuf::io::CodedInputStream in_;
  uint64_t base_;
};

// An XStat as read: its metadata id and the last value field (a oneof). String and bytes values
// go to a caller's scratch string.
struct RawStat {
  enum class Kind : uint8_t { kNone, kDouble, kUint64, kInt64, kStr, kBytes, kRef };
  int64_t metadata_id = 0;
  Kind kind = Kind::kNone;
  uint64_t bits = 0;  // uint64, int64 (two's complement), ref or double bits
};

inline bool ReadStat(Cursor& c, RawStat* stat, std::string* str) {
  *stat = RawStat();
  return c.Message([&](uint32_t field, uint32_t wire, uint32_t tag) {
    if (wire == kVarint) {
      switch (field) {
        case kStatMetadataId:
          return c.Int64(&stat->metadata_id);
        case kStatUint64:
          stat->kind = RawStat::Kind::kUint64;
          return c.Varint(&stat->bits);
        case kStatInt64:
          stat->kind = RawStat::Kind::kInt64;
          return c.Varint(&stat->bits);
        case kStatRef:
          stat->kind = RawStat::Kind::kRef;
          return c.Varint(&stat->bits);
        default:
          break;
      }
    } else if (wire == kFixed64 && field == kStatDouble) {
      stat->kind = RawStat::Kind::kDouble;
      return c.Fixed64(&stat->bits);
    } else if (wire == kLengthDelimited && (field == kStatStr || field == kStatBytes)) {
      stat->kind = field == kStatStr ? RawStat::Kind::kStr : RawStat::Kind::kBytes;
      return c.String(str, kMaxNameBytes);
    }
    return c.Skip(tag);
  });
}

// An integer stat value (int64, or uint64 within int64), else nullopt.
inline std::optional<int64_t> IntValue(const RawStat& s) {
  if (s.kind == RawStat::Kind::kInt64) return static_cast<int64_t>(s.bits);
  if (s.kind == RawStat::Kind::kUint64 &&
      s.bits <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    return static_cast<int64_t>(s.bits);
  }
  return std::nullopt;
}

// Lookup from a metadata id to a precomputed value: a vector when the ids are dense (the usual
// 1..N), a hash map otherwise. A repeated id keeps its last value, as a protobuf map does.
template <typename T>
class IdTable {
 public:
  IdTable() = default;
  explicit IdTable(std::vector<std::pair<int64_t, T>> entries) {
    int64_t max_id = -1;
    bool dense = true;
    for (const auto& [id, unused] : entries) {
      if (id < 0) dense = false;
      max_id = std::max(max_id, id);
    }
    dense_mode_ = dense && max_id < 4 * static_cast<int64_t>(entries.size()) + 1024;
    if (dense_mode_) {
      dense_.resize(static_cast<size_t>(max_id + 1));
      for (auto& [id, v] : entries) dense_[static_cast<size_t>(id)] = std::move(v);
    } else {
      sparse_.reserve(entries.size());
      for (auto& [id, v] : entries) sparse_.insert_or_assign(id, std::move(v));
    }
  }

  // nullptr when the id has no entry.
  const T* Find(int64_t id) const {
    if (dense_mode_) {
      if (id < 0 || static_cast<uint64_t>(id) >= dense_.size()) return nullptr;
      const std::optional<T>& v = dense_[static_cast<size_t>(id)];
      return v ? &*v : nullptr;
    }
    auto it = sparse_.find(id);
    return it == sparse_.end() ? nullptr : &it->second;
  }

 private:
  bool dense_mode_ = true;
  std::vector<std::optional<T>> dense_;
  absl::flat_hash_map<int64_t, T> sparse_;
};

}  // namespace profctl::analysis::xspace_wire

#endif  // PROFCTL_ANALYSIS_READERS_XSPACE_WIRE_H_
