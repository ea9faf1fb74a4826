// Fuzzes the --workers list parser (coordinator/clients/worker.h): any bytes give a list or an
// error, and every accepted worker round-trips: its target() parses back to the same host and port,
// and its file_stem() is a plain file name.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "coordinator/clients/worker.h"
#include "fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using profctl::coordinator::WorkerAddress;
  using profctl::fuzz::Check;
  const std::string text(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<std::vector<WorkerAddress>> list = profctl::coordinator::ParseWorkerList(text);
  if (!list.ok()) {
    Check(!list.status().message().empty());
    return 0;
  }
  Check(!list->empty());
  for (const WorkerAddress& w : *list) {
    Check(!w.host.empty() && w.port >= 1 && w.port <= 65535);
    absl::StatusOr<WorkerAddress> again = profctl::coordinator::ParseWorker(w.target());
    Check(again.ok() && again->host == w.host && again->port == w.port);
    const std::string stem = w.file_stem();
    Check(!stem.empty() && !absl::StrContains(stem, '/') && stem != "." && stem != "..");
  }
  return 0;
}
