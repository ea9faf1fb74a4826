// Fuzzes the --workers list parser and the worker-file parser (--workers=@FILE;
// coordinator/clients/worker.h): any bytes give a list or an error, every accepted worker
// round-trips (its target() parses back to the same host and port, its file_stem() is a plain
// file name), and a file's error names the file.
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
  const auto check_list = [](const absl::StatusOr<std::vector<WorkerAddress>>& list) {
    if (!list.ok()) return;
    Check(!list->empty());
    for (const WorkerAddress& w : *list) {
      Check(!w.host.empty() && w.port >= 1 && w.port <= 65535);
      absl::StatusOr<WorkerAddress> again = profctl::coordinator::ParseWorker(w.target());
      Check(again.ok() && again->host == w.host && again->port == w.port);
      const std::string stem = w.file_stem();
      Check(!stem.empty() && !absl::StrContains(stem, '/') && stem != "." && stem != "..");
    }
  };
  absl::StatusOr<std::vector<WorkerAddress>> list = profctl::coordinator::ParseWorkerList(text);
  Check(list.ok() || !list.status().message().empty());
  check_list(list);
  absl::StatusOr<std::vector<WorkerAddress>> file =
      profctl::coordinator::ParseWorkerFile(text, "pod.txt");
  Check(file.ok() || absl::StartsWith(file.status().message(), "pod.txt"));
  check_list(file);
  return 0;
}
