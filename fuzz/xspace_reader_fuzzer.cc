// Fuzzes the wire-format XSpace reader `profctl analyze` uses for *.xplane.pb files
// (analysis/readers/xspace_reader.h), which reads files that were never validated (TensorFlow,
// JAX, XProf or anyone's), then analyses what it read (analyze_trace.h).
#include <cstddef>
#include <cstdint>

#include "absl/strings/string_view.h"
#include "analysis/readers/xspace_reader.h"
#include "common/byte_source.h"
#include "fuzz/analyze_trace.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const profctl::StringByteSource bytes(
      absl::string_view(reinterpret_cast<const char*>(data), size));
  absl::StatusOr<profctl::analysis::HostTrace> trace =
      profctl::analysis::ReadXSpaceHost(bytes, "fuzz-host", /*offset_ns=*/-1'000'000);
  if (!trace.ok()) {
    profctl::fuzz::Check(!trace.status().message().empty());
    return 0;
  }
  profctl::fuzz::AnalyzeTrace(*trace);
  return 0;
}
