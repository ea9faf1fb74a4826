// Fuzzes the PyTorch profiler (Kineto JSON) reader `profctl analyze` uses for *.pt.trace.json and
// *.pt.trace.json.gz (analysis/readers/kineto_reader.h): gzip is unwrapped first when the
// bytes start with its magic, then the JSON read, then the trace analysed (analyze_trace.h).
#include <cstddef>
#include <cstdint>

#include "absl/strings/string_view.h"
#include "analysis/readers/kineto_reader.h"
#include "fuzz/analyze_trace.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view bytes(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<profctl::analysis::HostTrace> trace = profctl::analysis::ReadKinetoTraceFile(
      bytes, "/logs/fuzz.pt.trace.json.gz", /*offset_ns=*/1'000'000);
  if (!trace.ok()) {
    profctl::fuzz::Check(!trace.status().message().empty());
    return 0;
  }
  profctl::fuzz::AnalyzeTrace(*trace);
  return 0;
}
