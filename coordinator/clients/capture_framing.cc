#include "coordinator/clients/capture_framing.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/gzip.h"

namespace profctl::coordinator {

using profctl::v1::CaptureChunk;

namespace {

// What the agent says its trace lacks, as far as a person reads it: at most 16 shortfalls, each
// sentence at most 300 bytes (cut on a character boundary) with control characters as '?', so a
// lying peer cannot flood session.json or write escapes to the terminal.
std::vector<profctl::v1::Shortfall> BoundedShortfalls(const profctl::v1::CaptureHeader& h) {
  constexpr int kMaxShortfalls = 16;
  constexpr size_t kMaxDetailBytes = 300;
  std::vector<profctl::v1::Shortfall> out;
  for (const profctl::v1::Shortfall& f : h.shortfalls()) {
    if (static_cast<int>(out.size()) == kMaxShortfalls) break;
    profctl::v1::Shortfall& s = out.emplace_back(f);
    std::string& detail = *s.mutable_detail();
    if (detail.size() > kMaxDetailBytes) {
      size_t n = kMaxDetailBytes;
      while (n > 0 && (static_cast<unsigned char>(detail[n]) & 0xC0) == 0x80) --n;
      detail.resize(n);
      detail += "...";
    }
    for (char& c : detail) {
      if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = '?';
    }
  }
  return out;
}

}  // namespace

absl::Status CaptureFramer::Accept(const CaptureChunk& chunk) {
  switch (chunk.part_case()) {
    case CaptureChunk::kStarted:
      if (header_)
        return absl::DataLossError(absl::StrCat(rpc_, ": agent sent 'started' after the header"));
      if (started_)
        return absl::DataLossError(absl::StrCat(rpc_, ": agent sent a second 'started'"));
      started_ = true;
      stream_->OnStarted(chunk.started().start_ns());
      return absl::OkStatus();
    case CaptureChunk::kHeader: {
      if (header_) return absl::DataLossError(absl::StrCat(rpc_, ": agent sent a second header"));
      header_ = true;
      const profctl::v1::CaptureHeader& h = chunk.header();
      total_ = h.total_bytes();
      // The stream hears of the header even when the trace is over our limit: the engine tells
      // the agent's "not now" (RESOURCE_EXHAUSTED before any header: retried) from our refusal.
      stream_->OnHeader({h.start_ns(), h.stop_ns(), total_, h.cancelled(), h.name(), h.hostname(),
                         h.cancel_reason(), h.dropped_events(), BoundedShortfalls(h)});
      if (total_ > max_trace_bytes_) {
        return absl::ResourceExhaustedError(absl::StrCat(
            rpc_, ": agent announced a ", total_, "-byte trace; the limit is ", max_trace_bytes_));
      }
      return absl::OkStatus();
    }
    case CaptureChunk::kData: {
      if (!header_ || trailer_) {
        return absl::DataLossError(absl::StrCat(rpc_, ": agent sent data outside header..trailer"));
      }
      const std::string& data = chunk.data();
      if (data.size() > total_ - received_) {
        return absl::DataLossError(absl::StrCat(rpc_, ": agent sent more than the announced ",
                                                total_, " bytes (", received_ + data.size(),
                                                " so far)"));
      }
      received_ += data.size();
      ++chunks_;
      crc32_ = Crc32(crc32_, data);
      return stream_->OnData(data);
    }
    case CaptureChunk::kTrailer:
      if (!header_ || trailer_) {
        return absl::DataLossError(absl::StrCat(rpc_, ": agent sent a trailer out of order"));
      }
      trailer_ = true;
      if (chunk.trailer().chunks() != chunks_) {
        return absl::DataLossError(absl::StrCat(rpc_, ": agent's trailer counts ",
                                                chunk.trailer().chunks(), " chunks, received ",
                                                chunks_));
      }
      if (chunk.trailer().has_crc32() && chunk.trailer().crc32() != crc32_) {
        return absl::DataLossError(absl::StrCat(rpc_, ": checksum mismatch: the agent's CRC-32 is ",
                                                absl::Hex(chunk.trailer().crc32(), absl::kZeroPad8),
                                                ", the ", received_, " bytes received give ",
                                                absl::Hex(crc32_, absl::kZeroPad8),
                                                " (corrupted in transit)"));
      }
      return absl::OkStatus();
    case CaptureChunk::PART_NOT_SET:
      break;
  }
  return absl::DataLossError(absl::StrCat(rpc_, ": agent sent an empty chunk"));
}

absl::Status CaptureFramer::Finish() const {
  if (!header_) return absl::DataLossError(absl::StrCat(rpc_, ": stream ended before its header"));
  if (!trailer_ || received_ != total_) {
    return absl::DataLossError(
        absl::StrCat(rpc_, ": stream ended after ", received_, " of ", total_, " bytes"));
  }
  return absl::OkStatus();
}

}  // namespace profctl::coordinator
