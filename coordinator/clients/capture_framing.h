// The framing of a Capture (or Fetch) stream, checked chunk by chunk: what a peer sends is
// untrusted, so every CaptureChunk is checked against the stream so far before it reaches the
// CaptureStream (agent_client.h). Transport-free, so the gRPC client and the fuzzer share it.
//
// Violations (the first one ends the stream; the caller cancels the RPC and reports it):
//   started after the header, or twice             DATA_LOSS
//   a second header                                 DATA_LOSS
//   total_bytes over max_trace_bytes                RESOURCE_EXHAUSTED (after OnHeader)
//   data before the header or after the trailer     DATA_LOSS
//   data beyond the announced total_bytes           DATA_LOSS
//   a trailer out of order or with a wrong count    DATA_LOSS
//   a trailer CRC-32 the data does not match        DATA_LOSS ("checksum mismatch")
//   a chunk with no part set                        DATA_LOSS
//   CaptureStream::OnData returned an error         that error, unchanged
// Messages start with the RPC's name ("Capture: ...", "Fetch: ...").
#ifndef PROFCTL_COORDINATOR_CLIENTS_CAPTURE_FRAMING_H_
#define PROFCTL_COORDINATOR_CLIENTS_CAPTURE_FRAMING_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "coordinator/clients/agent_client.h"
#include "profctl/v1/agent.pb.h"

namespace profctl::coordinator {

class CaptureFramer {
 public:
  // `stream` gets OnStarted/OnHeader/OnData as chunks are accepted (never OnDone: the caller
  // ends the stream). Not owned; must outlive the framer's use.
  CaptureFramer(absl::string_view rpc, uint64_t max_trace_bytes, CaptureStream* stream)
      : rpc_(rpc), max_trace_bytes_(max_trace_bytes), stream_(stream) {}

  // The next chunk of the stream: OK, or the first violation (then stop feeding it).
  absl::Status Accept(const profctl::v1::CaptureChunk& chunk);
  // The peer ended the stream with OK: DATA_LOSS unless the stream was complete (header, every
  // announced byte, trailer).
  absl::Status Finish() const;

  bool header_seen() const { return header_; }
  bool started_seen() const { return started_; }

 private:
  const std::string rpc_;
  const uint64_t max_trace_bytes_;
  CaptureStream* const stream_;
  bool started_ = false;
  bool header_ = false;
  bool trailer_ = false;
  uint64_t total_ = 0;
  uint64_t received_ = 0;
  uint64_t chunks_ = 0;
  uint32_t crc32_ = 0;  // of the data received so far
};

}  // namespace profctl::coordinator

#endif  // PROFCTL_COORDINATOR_CLIENTS_CAPTURE_FRAMING_H_
