// Appending protobuf wire-format fields to a string: what the pod trace's Perfetto writer
// (pod_perfetto_trace.h) needs to emit packets without building messages. A nested message is
// written into a scratch string first, then appended as a length-delimited field. Inline: the
// writer calls these for every field of every packet.
#ifndef PROFCTL_REPORT_PROTO_WIRE_H_
#define PROFCTL_REPORT_PROTO_WIRE_H_

#include <cstdint>
#include <cstring>
#include <string>

#include "absl/strings/string_view.h"

namespace profctl::report::proto_wire {

enum WireType : uint32_t { kVarint = 0, kFixed64 = 1, kLengthDelimited = 2 };

inline void AppendVarint(std::string* out, uint64_t v) {
  char buf[10];
  size_t n = 0;
  while (v >= 0x80) {
    buf[n++] = static_cast<char>(static_cast<uint8_t>(v) | 0x80);
    v >>= 7;
  }
  buf[n++] = static_cast<char>(v);
  out->append(buf, n);
}

inline void AppendTag(std::string* out, uint32_t field, WireType type) {
  AppendVarint(out, (uint64_t{field} << 3) | type);
}

// An int64 or enum field is its two's complement as a varint (10 bytes when negative), as
// protobuf writes it.
inline void AppendVarintField(std::string* out, uint32_t field, uint64_t v) {
  AppendTag(out, field, kVarint);
  AppendVarint(out, v);
}

inline void AppendFixed64Field(std::string* out, uint32_t field, uint64_t v) {
  AppendTag(out, field, kFixed64);
  char buf[8];
  for (int i = 0; i < 8; ++i) buf[i] = static_cast<char>(v >> (8 * i));  // little-endian
  out->append(buf, 8);
}

inline void AppendDoubleField(std::string* out, uint32_t field, double v) {
  uint64_t bits = 0;
  static_assert(sizeof(bits) == sizeof(v));
  std::memcpy(&bits, &v, sizeof(bits));
  AppendFixed64Field(out, field, bits);
}

// A string, bytes or nested message field: its bytes, after the tag and their length.
inline void AppendBytesField(std::string* out, uint32_t field, absl::string_view bytes) {
  AppendTag(out, field, kLengthDelimited);
  AppendVarint(out, bytes.size());
  out->append(bytes.data(), bytes.size());
}

}  // namespace profctl::report::proto_wire

#endif  // PROFCTL_REPORT_PROTO_WIRE_H_
