// Fuzzes the framing of a Capture/Fetch stream as an agent sends it
// (coordinator/clients/capture_framing.h CaptureFramer): what reaches the CaptureStream must follow
// its contract (agent_client.h) whatever the chunks, and a stream the framer finishes OK is whole
// and matches its trailer.
//
// Input: one byte b (max_trace_bytes = 2^(b % 40)), then CaptureChunk messages, each a varint
// length and that many bytes (protobuf's delimited format). The stream stops at the first chunk
// that does not parse (gRPC would fail the call) or that the framer refuses.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "absl/strings/match.h"
#include "common/gzip.h"
#include "coordinator/clients/agent_client.h"
#include "coordinator/clients/capture_framing.h"
#include "fuzz/fuzz_util.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/stubs/logging.h"
#include "profctl/v1/agent.pb.h"

namespace {

using profctl::fuzz::Check;

// Checks the order of calls against CaptureStream's contract and keeps what it was given.
class CheckingStream final : public profctl::coordinator::CaptureStream {
 public:
  void OnStarted(int64_t /*agent_start_ns*/) override {
    Check(!started_ && !header_);
    started_ = true;
  }
  void OnHeader(const profctl::coordinator::CaptureHeaderInfo& header) override {
    Check(!header_);
    header_ = true;
    total_ = header.total_bytes;
  }
  absl::Status OnData(std::string_view chunk) override {
    Check(header_);
    data_.append(chunk);
    Check(data_.size() <= total_);
    // A sink that fails (a full disk) on a chunk starting with 0xFF.
    if (!chunk.empty() && static_cast<unsigned char>(chunk.front()) == 0xFF) {
      return absl::ResourceExhaustedError("fuzz: sink full");
    }
    return absl::OkStatus();
  }
  void OnDone(absl::Status /*status*/) override { Check(false); }  // the caller's, not the framer's

  bool header() const { return header_; }
  uint64_t total() const { return total_; }
  const std::string& data() const { return data_; }

 private:
  bool started_ = false;
  bool header_ = false;
  uint64_t total_ = 0;
  std::string data_;
};

}  // namespace

// Protobuf logs every string field that is not UTF-8 (such a message fails to parse): quiet.
extern "C" int LLVMFuzzerInitialize(int* /*argc*/, char*** /*argv*/) {
  google::protobuf::SetLogHandler(nullptr);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint64_t max_trace_bytes = uint64_t{1} << (data[0] % 40);
  google::protobuf::io::CodedInputStream in(data + 1, static_cast<int>(size - 1));
  CheckingStream stream;
  profctl::coordinator::CaptureFramer framer("Capture", max_trace_bytes, &stream);
  profctl::v1::CaptureChunk last;
  absl::Status status;
  uint32_t length = 0;
  while (status.ok() && in.ReadVarint32(&length)) {
    std::string bytes;
    if (!in.ReadString(&bytes, static_cast<int>(length))) break;
    profctl::v1::CaptureChunk chunk;
    if (!chunk.ParseFromString(bytes)) break;
    status = framer.Accept(chunk);
    // The stream hears of a header exactly when the framer saw one (also one over the limit).
    Check(stream.header() == framer.header_seen());
    if (status.ok()) last = chunk;
  }
  if (!status.ok()) {
    // The framer's own errors name the RPC; the sink's come back unchanged.
    Check(absl::StartsWith(status.message(), "Capture: ") || status.message() == "fuzz: sink full");
    return 0;
  }
  if (framer.Finish().ok()) {
    // Whole: the header, every announced byte, and a trailer that counts and checks them.
    Check(stream.header() && stream.data().size() == stream.total());
    Check(stream.total() <= max_trace_bytes);
    Check(last.has_trailer());
    Check(!last.trailer().has_crc32() ||
          last.trailer().crc32() == profctl::Crc32(0, stream.data()));
  }
  return 0;
}
