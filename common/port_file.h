// The --port-file profctl-agent and `profctl serve` write once their servers listen (with
// --port=0, how a caller learns the ports): one format for both. The gRPC port of each endpoint,
// one per line (one line, but for an agent serving --endpoints=N), then "metrics=PORT" when a
// metrics server listens. Callers write it atomically, so a reader never sees half of one.
#ifndef PROFCTL_COMMON_PORT_FILE_H_
#define PROFCTL_COMMON_PORT_FILE_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace profctl {

struct PortFile {
  std::vector<int> ports;  // the gRPC endpoints, in order
  int metrics_port = -1;   // -1: no metrics server
};

std::string PortFileText(const PortFile& file);

// Parses a port file. NAME=PORT lines other than metrics= name servers this reader does not know
// and are skipped. DATA_LOSS naming the line for one that is not a port; NOT_FOUND for a file
// without a port (not written yet).
absl::StatusOr<PortFile> ParsePortFile(absl::string_view text);

// `profctl serve`'s port file: one service port and its metrics port. Also reads the format
// `profctl serve` wrote before it wrote "metrics=": the metrics port as a second bare line.
absl::StatusOr<PortFile> ParseServePortFile(absl::string_view text);

}  // namespace profctl

#endif  // PROFCTL_COMMON_PORT_FILE_H_
