// Fuzzes the PyTorch profiler (Kineto JSON) reader `profctl analyze` uses for *.pt.trace.json and
// *.pt.trace.json.gz (analysis/readers/kineto_reader.h): gzip is unwrapped first when the
// bytes start with its magic, then the JSON read, then the trace analysed (analyze_trace.h).
// The same text is read again in pieces of 1 to 13 bytes (ReadKinetoTraceFrom, as a file is
// read while it inflates): the result must be the same, errors and their positions included.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"
#include "analysis/readers/kineto_reader.h"
#include "fuzz/analyze_trace.h"

namespace {

// A text in pieces of 1, 2, ... 13 bytes, round and round.
class Pieces : public profctl::analysis::KinetoTextSource {
 public:
  explicit Pieces(absl::string_view text) : text_(text) {}
  absl::StatusOr<absl::string_view> Next() override {
    const size_t n = std::min(text_.size(), next_);
    next_ = next_ % 13 + 1;
    const absl::string_view piece = text_.substr(0, n);
    text_.remove_prefix(n);
    return piece;
  }

 private:
  absl::string_view text_;
  size_t next_ = 1;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view bytes(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<profctl::analysis::HostTrace> trace = profctl::analysis::ReadKinetoTraceFile(
      bytes, "/logs/fuzz.pt.trace.json.gz", /*offset_ns=*/1'000'000);
  if (size < 2 || data[0] != 0x1f || data[1] != 0x8b) {  // plain JSON: read it in pieces too
    Pieces pieces(bytes);
    absl::StatusOr<profctl::analysis::HostTrace> streamed =
        profctl::analysis::ReadKinetoTraceFrom(pieces, "fuzz", /*offset_ns=*/1'000'000);
    absl::StatusOr<profctl::analysis::HostTrace> whole =
        profctl::analysis::ReadKinetoTrace(bytes, "fuzz", /*offset_ns=*/1'000'000);
    profctl::fuzz::Check(streamed.status() == whole.status());
    if (whole.ok()) {
      profctl::fuzz::Check(streamed->host_ops.size() == whole->host_ops.size() &&
                           streamed->devices.size() == whole->devices.size() &&
                           streamed->steps.size() == whole->steps.size() &&
                           streamed->warnings == whole->warnings);
    }
  }
  if (!trace.ok()) {
    profctl::fuzz::Check(!trace.status().message().empty());
    return 0;
  }
  profctl::fuzz::AnalyzeTrace(*trace);
  return 0;
}
