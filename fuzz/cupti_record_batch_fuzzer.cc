// Fuzzes the reader of record batches from the CUPTI injection library
// (agent/collectors/cupti/record_batch.h): bytes from a process on the host that the agent does not
// trust. A batch that parses is then built into an XSpace (cupti_xspace.h), which must validate.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/strings/string_view.h"
#include "agent/collectors/cupti/cupti_xspace.h"
#include "agent/collectors/cupti/record_batch.h"
#include "fuzz/fuzz_util.h"
#include "xspace/xspace.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view bytes(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<profctl::agent::cupti::RecordBatch> batch =
      profctl::agent::cupti::ParseRecordBatch(bytes);
  if (!batch.ok()) {
    profctl::fuzz::Check(!batch.status().message().empty());
    return 0;
  }
  profctl::agent::cupti::CuptiXSpaceOptions options;
  options.hostname = "fuzz";
  options.profile_start_ns = 1;
  options.profile_stop_ns = 1'000'000'000'000'000;  // ~11 days: ps offsets fit int64
  tensorflow::profiler::XSpace space;
  absl::StatusOr<profctl::agent::cupti::CuptiXSpaceStats> stats =
      profctl::agent::cupti::BuildCuptiXSpace({*batch}, options, &space);
  profctl::fuzz::Check(stats.ok());
  profctl::fuzz::Check(profctl::xspace::Validate(space).ok());
  return 0;
}
