// Worker addresses as given on the command line (--workers=host:port,...).
#ifndef PROFCTL_COORDINATOR_WORKER_H_
#define PROFCTL_COORDINATOR_WORKER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace profctl::coordinator {

struct WorkerAddress {
  std::string address;  // as given, e.g. "host1:6000" or "[::1]:6000"
  std::string host;     // "host1" or "::1"
  int port = 0;
  // gRPC target ("host1:6000", "[::1]:6000").
  std::string target() const;
  // File stem: the address with ':' -> '_' and IPv6 brackets dropped ("host1_6000", "__1_6000").
  std::string file_stem() const;
};

// Parses one "host:port" or "[ipv6]:port". Errors name the entry and what is wrong with it.
absl::StatusOr<WorkerAddress> ParseWorker(const std::string& text);

// Parses a comma-separated list; rejects an empty list, empty entries and duplicates.
absl::StatusOr<std::vector<WorkerAddress>> ParseWorkerList(const std::string& text);

}  // namespace profctl::coordinator

#endif  // PROFCTL_COORDINATOR_WORKER_H_
