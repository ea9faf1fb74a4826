// The Unix-socket protocol between the injection library (libprofctl_inject.so, inside a CUDA
// process) and the local agent's inject server (agent/inject_server.h). docs/cupti.md describes
// it; this header is the definition both ends compile.
//
// PLAIN C++ AND LIBC ONLY: compiled into the injection library, which links no protobuf, gRPC,
// abseil or spdlog.
//
// FRAMING. Every message is a FrameHeader followed by `length` payload bytes. Both ends run on one
// host: integers in host byte order (little-endian on every platform CUDA supports); the structs
// have no implicit padding (static_asserts below). Strings are fixed char arrays, NUL-padded; a
// reader forces the last byte to NUL.
//
// VERSIONS. A reader refuses a frame whose magic is wrong or whose version it does not know (the
// connection is then closed: the stream cannot be resynchronised). Within a version a message may
// grow at its end (readers take the prefix they know; a payload shorter than the reader's struct
// is an error) and new types may be added: a reader skips types it does not know by `length`.
// Lengths above the type's cap (kMaxRecordBatchFrameBytes for record batches, kMaxControlFrameBytes
// for everything else) are refused before anything is allocated.
//
// CONVERSATION (agent = A, library = L):
//   L->A Register                 once, first
//   A->L Enable{token, window}    L answers Status{kEnabled} (or kUnavailable / kError)
//   A->L Disable{token}           L answers Status{kDisabled}
//   A->L Flush{token}             L sends RecordBatch frames, then Status{kFlushDone}
//   L->A Status{kUnavailable}     also unprompted: GPU tracing cannot work in this process
//   L->A StepSamples              unprompted, any time after Register, window open or not: the
//                                 NVTX step ranges that ended lately, about once a second (more
//                                 frames in a row when more than one frame's worth ended); no
//                                 answer. Added within version 1: an agent that does not know
//                                 the type skips it by length, so the version stays 1.
//   A->L Recorder{flags}          after Register, and whenever it changes: whether the agent's
//                                 flight recorder wants the light level (collective launches);
//                                 no answer. A library that does not know it skips it.
//   L->A CollectiveLaunches       unprompted, with the step samples, while the light level is
//                                 on: the NCCL kernel launches since the last frame. Both added
//                                 within version 1, as StepSamples was.
//   A->L SendPending{token}       L sends the StepSamples and CollectiveLaunches it holds now,
//                                 then Status{kPendingSent, token} (a flight recorder snapshot).
//                                 Added within version 1: an older library skips it and never
//                                 answers, so the agent waits a bounded time.
//   either Bye                    the sender is going away; the other side closes
// Every command carries the agent's session token; the library echoes it in its answers, so
// replies to an old session are recognised and ignored.
#ifndef PROFCTL_INJECT_SOCKET_PROTOCOL_H_
#define PROFCTL_INJECT_SOCKET_PROTOCOL_H_

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>
#include <vector>

namespace profctl::inject {

// "PFSK" read as a little-endian uint32.
inline constexpr uint32_t kFrameMagic = 0x4B534650;
inline constexpr uint16_t kProtocolVersion = 1;
// The agent's socket when PROFCTL_AGENT_SOCKET is not set (and the agent's --inject-socket
// default).
inline constexpr const char* kDefaultAgentSocket = "/tmp/profctl/agent.sock";
inline constexpr const char* kAgentSocketEnv = "PROFCTL_AGENT_SOCKET";

// Payload caps. A record batch frame carries one records.h batch; the library makes them at most
// 4 MiB, the agent accepts up to this.
inline constexpr uint32_t kMaxRecordBatchFrameBytes = 16u << 20;
inline constexpr uint32_t kMaxControlFrameBytes = 64u << 10;

enum class MessageType : uint16_t {
  kRegister = 1,
  kEnable = 2,
  kDisable = 3,
  kFlush = 4,
  kRecordBatch = 5,
  kStatus = 6,
  kBye = 7,
  kStepSamples = 8,
  kCollectiveLaunches = 9,
  kRecorder = 10,
  // A->L: CommandMessage{token}: send the step samples and collective launches waiting now, not
  // at the next step-signal round, then Status kPendingSent{token} (a flight recorder snapshot
  // wants its last second). A library older than this message skips it; the agent waits for the
  // answer a bounded time.
  kSendPending = 11,
};

struct FrameHeader {
  uint32_t magic = kFrameMagic;
  uint16_t version = kProtocolVersion;
  uint16_t type = 0;    // MessageType
  uint32_t length = 0;  // payload bytes after this header
  uint32_t reserved = 0;
};
static_assert(sizeof(FrameHeader) == 16);

// L->A, first message. Ranks are -1 when no launcher variable names them.
struct RegisterMessage {
  uint32_t pid = 0;
  int32_t rank = -1;
  int32_t local_rank = -1;
  // Bit 0: libcupti was loaded; bit 1: NVTX injection was initialised through this library.
  uint32_t flags = 0;
  char hostname[256] = {};
  // CUDA_VISIBLE_DEVICES as the process saw it (the device list CUDA will number from 0).
  char visible_devices[256] = {};
  // The variable the rank came from ("RANK", "OMPI_COMM_WORLD_RANK", ...), or empty.
  char rank_source[64] = {};
  // /proc/self/comm.
  char process_name[64] = {};
};
static_assert(sizeof(RegisterMessage) == 656);
inline constexpr uint32_t kRegisterFlagCuptiLoaded = 1;
inline constexpr uint32_t kRegisterFlagNvtx = 2;

// A->L: record from start_wall_ns (CLOCK_REALTIME; at once when in the past) until Disable, or
// until end_wall_ns when that is not 0 (the library's own stop, in case the agent goes away).
struct EnableMessage {
  uint64_t token = 0;
  int64_t start_wall_ns = 0;
  int64_t end_wall_ns = 0;
  char session_id[128] = {};
};
static_assert(sizeof(EnableMessage) == 152);

// A->L: Disable and Flush.
struct CommandMessage {
  uint64_t token = 0;
};
static_assert(sizeof(CommandMessage) == 8);

enum class StatusCode : uint32_t {
  kEnabled = 1,      // recording; value0 = actual start (CLOCK_REALTIME), value1 = gpu - wall ns
  kDisabled = 2,     // value0 = actual stop (CLOCK_REALTIME)
  kFlushDone = 3,    // every batch of the session was sent before this; dropped = records lost
                     // that no batch header counts (the total is their sum plus this)
  kUnavailable = 4,  // GPU tracing cannot work in this process (text says why); it stays so
  kError = 5,        // this command failed (text says why); the process stays usable
  kPendingSent = 6,  // every step sample and launch waiting at SendPending was sent before this
};

// L->A.
struct StatusMessage {
  uint64_t token = 0;  // the command's token; 0 when unprompted
  uint32_t code = 0;   // StatusCode
  uint32_t reserved = 0;
  int64_t value0 = 0;
  int64_t value1 = 0;
  uint64_t dropped = 0;
  char text[256] = {};
};
static_assert(sizeof(StatusMessage) == 296);

// L->A StepSamples: a StepSamplesHeader, then `count` entries of `entry_bytes` each (exactly:
// a payload of any other length is an error). An entry may grow at its end within version 1
// (entry_bytes > sizeof(StepSampleEntry): readers take the prefix); a smaller one is an error.
// Times are the library's CLOCK_REALTIME (calibrated from CUPTI's clock).
inline constexpr uint32_t kMaxStepSamplesPerFrame = 256;
struct StepSamplesHeader {
  uint32_t count = 0;
  uint32_t entry_bytes = 0;  // sizeof(StepSampleEntry) for this version's writers
};
static_assert(sizeof(StepSamplesHeader) == 8);
struct StepSampleEntry {
  int64_t start_wall_ns = 0;  // the NVTX step range's start, CLOCK_REALTIME ns
  int64_t end_wall_ns = 0;    // its end
  int64_t step_num = -1;      // the number in its name (inject/step_names.h)
};
static_assert(sizeof(StepSampleEntry) == 24);
// The most bytes an entry may claim: keeps count * entry_bytes far from overflowing.
inline constexpr uint32_t kMaxStepSampleEntryBytes = 256;

// A->L Recorder: what the agent's flight recorder wants kept outside windows. Sent after
// Register and again when it changes; the library applies the latest (and turns everything off
// when the connection ends).
struct RecorderMessage {
  uint32_t flags = 0;  // kRecorderFlag*
  uint32_t reserved = 0;
};
static_assert(sizeof(RecorderMessage) == 8);
// Keep the launches of NCCL kernels (CUPTI launch callbacks; docs/cupti.md).
inline constexpr uint32_t kRecorderFlagCollectiveLaunches = 1;

// L->A CollectiveLaunches: a CollectiveLaunchesHeader, then `names_bytes` of names
// (`name_count` NUL-terminated strings, back to back, each at most
// kMaxCollectiveLaunchNameBytes with its NUL), then `count` entries of `entry_bytes` each whose
// name_index points into this frame's names. The length must be exactly header + names_bytes +
// count * entry_bytes. Entries may grow at their end within version 1 (readers take the
// prefix). Times are the library's CLOCK_REALTIME (calibrated from CUPTI's clock, as the step
// samples').
inline constexpr uint32_t kMaxCollectiveLaunchesPerFrame = 512;
inline constexpr uint32_t kMaxCollectiveLaunchNamesPerFrame = 64;
inline constexpr uint32_t kMaxCollectiveLaunchNameBytes = 256;
struct CollectiveLaunchesHeader {
  uint32_t count = 0;
  uint32_t entry_bytes = 0;  // sizeof(CollectiveLaunchEntry) for this version's writers
  uint32_t name_count = 0;
  uint32_t names_bytes = 0;
  uint64_t dropped = 0;  // launches the library lost since its previous frame (ring full)
};
static_assert(sizeof(CollectiveLaunchesHeader) == 24);
struct CollectiveLaunchEntry {
  int64_t wall_ns = 0;      // the launch call's entry, CLOCK_REALTIME ns
  uint64_t seq = 0;         // the process's NCCL launches counted from 0
  uint32_t tid = 0;         // the launching thread (gettid)
  uint32_t name_index = 0;  // the kernel's name: an index into the frame's names
};
static_assert(sizeof(CollectiveLaunchEntry) == 24);

// One decoded CollectiveLaunches frame; the names view the payload it was decoded from.
struct CollectiveLaunchesFrame {
  std::vector<CollectiveLaunchEntry> entries;
  std::vector<std::string_view> names;
  uint64_t dropped = 0;
};

// Appends one CollectiveLaunches frame to `out`: `count` entries (at most
// kMaxCollectiveLaunchesPerFrame) whose name_index points into `names` (at most
// kMaxCollectiveLaunchNamesPerFrame, each cut to kMaxCollectiveLaunchNameBytes - 1).
inline void AppendCollectiveLaunches(const CollectiveLaunchEntry* entries, size_t count,
                                     const std::string_view* names, size_t name_count,
                                     uint64_t dropped, std::vector<uint8_t>* out) {
  if (count > kMaxCollectiveLaunchesPerFrame) count = kMaxCollectiveLaunchesPerFrame;
  if (name_count > kMaxCollectiveLaunchNamesPerFrame)
    name_count = kMaxCollectiveLaunchNamesPerFrame;
  CollectiveLaunchesHeader header;
  header.count = static_cast<uint32_t>(count);
  header.entry_bytes = sizeof(CollectiveLaunchEntry);
  header.name_count = static_cast<uint32_t>(name_count);
  header.dropped = dropped;
  for (size_t i = 0; i < name_count; ++i) {
    const size_t n = names[i].size() < kMaxCollectiveLaunchNameBytes - 1
                         ? names[i].size()
                         : kMaxCollectiveLaunchNameBytes - 1;
    header.names_bytes += static_cast<uint32_t>(n + 1);
  }
  FrameHeader frame;
  frame.type = static_cast<uint16_t>(MessageType::kCollectiveLaunches);
  frame.length = static_cast<uint32_t>(sizeof(header) + header.names_bytes +
                                       count * sizeof(CollectiveLaunchEntry));
  size_t at = out->size();
  out->resize(at + sizeof(frame) + frame.length);
  uint8_t* p = out->data() + at;
  std::memcpy(p, &frame, sizeof(frame));
  p += sizeof(frame);
  std::memcpy(p, &header, sizeof(header));
  p += sizeof(header);
  for (size_t i = 0; i < name_count; ++i) {
    const size_t n = names[i].size() < kMaxCollectiveLaunchNameBytes - 1
                         ? names[i].size()
                         : kMaxCollectiveLaunchNameBytes - 1;
    if (n > 0) std::memcpy(p, names[i].data(), n);
    p[n] = 0;
    p += n + 1;
  }
  if (count > 0) std::memcpy(p, entries, count * sizeof(CollectiveLaunchEntry));
}

// Reads a CollectiveLaunches payload into `out` (its names view `payload`). False, with `*why`
// set, when it is shorter than its header; counts more entries or names than the caps; has
// entries smaller than CollectiveLaunchEntry (or over kMaxStepSampleEntryBytes, or not a multiple
// of 8); its length is not exactly header + names_bytes + count * entry_bytes; its names are not
// exactly name_count NUL-terminated strings of at most kMaxCollectiveLaunchNameBytes; or an
// entry's name_index is not one of them.
inline bool DecodeCollectiveLaunches(const uint8_t* payload, size_t length,
                                     CollectiveLaunchesFrame* out, const char** why) {
  out->entries.clear();
  out->names.clear();
  CollectiveLaunchesHeader header;
  if (length < sizeof(header)) {
    *why = "CollectiveLaunches shorter than its header";
    return false;
  }
  std::memcpy(&header, payload, sizeof(header));
  if (header.count > kMaxCollectiveLaunchesPerFrame ||
      header.name_count > kMaxCollectiveLaunchNamesPerFrame) {
    *why = "CollectiveLaunches count over its cap";
    return false;
  }
  if (header.entry_bytes < sizeof(CollectiveLaunchEntry) ||
      header.entry_bytes > kMaxStepSampleEntryBytes || header.entry_bytes % 8 != 0) {
    *why = "CollectiveLaunches entry size not supported";
    return false;
  }
  if (header.names_bytes > header.name_count * kMaxCollectiveLaunchNameBytes ||
      length !=
          sizeof(header) + size_t{header.names_bytes} + size_t{header.count} * header.entry_bytes) {
    *why = "CollectiveLaunches length does not match its counts";
    return false;
  }
  const char* names = reinterpret_cast<const char*>(payload + sizeof(header));
  size_t at = 0;
  for (uint32_t i = 0; i < header.name_count; ++i) {
    const size_t n = strnlen(names + at, header.names_bytes - at);
    if (at + n == header.names_bytes || n + 1 > kMaxCollectiveLaunchNameBytes) {
      *why = "CollectiveLaunches names do not match name_count";
      return false;
    }
    out->names.emplace_back(names + at, n);
    at += n + 1;
  }
  if (at != header.names_bytes) {
    *why = "CollectiveLaunches names do not match name_count";
    return false;
  }
  const uint8_t* entries = payload + sizeof(header) + header.names_bytes;
  out->entries.resize(header.count);
  for (uint32_t i = 0; i < header.count; ++i) {
    std::memcpy(&out->entries[i], entries + size_t{i} * header.entry_bytes,
                sizeof(CollectiveLaunchEntry));
    if (out->entries[i].name_index >= header.name_count) {
      out->entries.clear();
      out->names.clear();
      *why = "CollectiveLaunches entry names no name of its frame";
      return false;
    }
  }
  out->dropped = header.dropped;
  return true;
}

// Copies `s` into a fixed char array, cut to fit, NUL-terminated.
template <size_t N>
void SetText(char (&dst)[N], std::string_view s) {
  const size_t n = s.size() < N - 1 ? s.size() : N - 1;
  std::memcpy(dst, s.data(), n);
  std::memset(dst + n, 0, N - n);
}
// The text of a fixed char array (up to its first NUL, at most N - 1 bytes).
template <size_t N>
std::string_view GetText(const char (&src)[N]) {
  return std::string_view(src, strnlen(src, N - 1));
}

// The most payload a frame of `type` may carry.
inline uint32_t MaxPayloadBytes(uint16_t type) {
  return type == static_cast<uint16_t>(MessageType::kRecordBatch) ? kMaxRecordBatchFrameBytes
                                                                  : kMaxControlFrameBytes;
}

// Appends one frame to `out`.
inline void AppendFrame(MessageType type, const void* payload, size_t length,
                        std::vector<uint8_t>* out) {
  FrameHeader header;
  header.type = static_cast<uint16_t>(type);
  header.length = static_cast<uint32_t>(length);
  const size_t at = out->size();
  out->resize(at + sizeof(header) + length);
  std::memcpy(out->data() + at, &header, sizeof(header));
  if (length > 0) std::memcpy(out->data() + at + sizeof(header), payload, length);
}
template <typename Message>
void AppendMessage(MessageType type, const Message& message, std::vector<uint8_t>* out) {
  AppendFrame(type, &message, sizeof(message), out);
}

// Appends one StepSamples frame of `count` entries (at most kMaxStepSamplesPerFrame) to `out`.
inline void AppendStepSamples(const StepSampleEntry* entries, size_t count,
                              std::vector<uint8_t>* out) {
  if (count > kMaxStepSamplesPerFrame) count = kMaxStepSamplesPerFrame;
  StepSamplesHeader header;
  header.count = static_cast<uint32_t>(count);
  header.entry_bytes = sizeof(StepSampleEntry);
  FrameHeader frame;
  frame.type = static_cast<uint16_t>(MessageType::kStepSamples);
  frame.length = static_cast<uint32_t>(sizeof(header) + count * sizeof(StepSampleEntry));
  const size_t at = out->size();
  out->resize(at + sizeof(frame) + frame.length);
  uint8_t* p = out->data() + at;
  std::memcpy(p, &frame, sizeof(frame));
  std::memcpy(p + sizeof(frame), &header, sizeof(header));
  if (count > 0) {
    std::memcpy(p + sizeof(frame) + sizeof(header), entries, count * sizeof(StepSampleEntry));
  }
}

// Reads a StepSamples payload into `out` (replacing its contents). False, with `*why` set, when
// it is shorter than its header, counts more than kMaxStepSamplesPerFrame entries, has entries
// smaller than StepSampleEntry (or over kMaxStepSampleEntryBytes, or not a multiple of 8), or
// its length is not exactly header + count * entry_bytes.
inline bool DecodeStepSamples(const uint8_t* payload, size_t length,
                              std::vector<StepSampleEntry>* out, const char** why) {
  out->clear();
  StepSamplesHeader header;
  if (length < sizeof(header)) {
    *why = "StepSamples shorter than its header";
    return false;
  }
  std::memcpy(&header, payload, sizeof(header));
  if (header.count > kMaxStepSamplesPerFrame) {
    *why = "StepSamples count over its cap";
    return false;
  }
  if (header.entry_bytes < sizeof(StepSampleEntry) ||
      header.entry_bytes > kMaxStepSampleEntryBytes || header.entry_bytes % 8 != 0) {
    *why = "StepSamples entry size not supported";
    return false;
  }
  if (length != sizeof(header) + size_t{header.count} * header.entry_bytes) {
    *why = "StepSamples length does not match its count";
    return false;
  }
  out->resize(header.count);
  for (uint32_t i = 0; i < header.count; ++i) {
    std::memcpy(&(*out)[i], payload + sizeof(header) + size_t{i} * header.entry_bytes,
                sizeof(StepSampleEntry));
  }
  return true;
}

// Reads a fixed-size message from a payload: its prefix when the payload is longer (a newer
// writer), false when it is shorter. Fixed char arrays are NUL-terminated afterwards by the
// caller's GetText.
template <typename Message>
bool DecodeMessage(const uint8_t* payload, size_t length, Message* out) {
  if (length < sizeof(Message)) return false;
  std::memcpy(out, payload, sizeof(Message));
  return true;
}

// Splits a byte stream into frames, incrementally. Feed it what the socket gave, then take frames
// until it has none. It holds at most one frame's payload (bounded by MaxPayloadBytes) plus what
// was fed and not yet taken.
class FrameDecoder {
 public:
  enum class Result {
    kFrame,     // *type and *payload are set; the payload stays valid until the next call
    kNeedMore,  // feed more bytes
    kError,     // the stream is broken (error() says why): close it
  };

  void Feed(const uint8_t* data, size_t size) {
    if (size == 0) return;
    const size_t at = buffer_.size();
    buffer_.resize(at + size);
    std::memcpy(buffer_.data() + at, data, size);
  }

  Result Next(uint16_t* type, std::vector<uint8_t>* payload) {
    if (error_ != nullptr) return Result::kError;
    Compact();
    const size_t available = buffer_.size() - consumed_;
    if (available < sizeof(FrameHeader)) return Result::kNeedMore;
    FrameHeader header;
    std::memcpy(&header, buffer_.data() + consumed_, sizeof(header));
    if (header.magic != kFrameMagic) return Fail("bad frame magic");
    if (header.version != kProtocolVersion) return Fail("unknown protocol version");
    if (header.length > MaxPayloadBytes(header.type)) return Fail("frame length over its cap");
    if (available < sizeof(FrameHeader) + header.length) return Result::kNeedMore;
    payload->resize(header.length);
    if (header.length > 0) {
      std::memcpy(payload->data(), buffer_.data() + consumed_ + sizeof(FrameHeader), header.length);
    }
    consumed_ += sizeof(FrameHeader) + header.length;
    *type = header.type;
    return Result::kFrame;
  }

  const char* error() const { return error_; }
  // Bytes fed and not yet taken as frames.
  size_t buffered() const { return buffer_.size() - consumed_; }

 private:
  Result Fail(const char* why) {
    error_ = why;
    return Result::kError;
  }
  void Compact() {
    if (consumed_ == 0) return;
    if (consumed_ == buffer_.size()) {
      buffer_.clear();
    } else if (consumed_ >= (64u << 10) || consumed_ * 2 >= buffer_.size()) {
      buffer_.erase(buffer_.begin(), buffer_.begin() + static_cast<ptrdiff_t>(consumed_));
    } else {
      return;
    }
    consumed_ = 0;
  }

  std::vector<uint8_t> buffer_;
  size_t consumed_ = 0;
  const char* error_ = nullptr;
};

}  // namespace profctl::inject

#endif  // PROFCTL_INJECT_SOCKET_PROTOCOL_H_
