#include "common/port_file.h"

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"

namespace profctl {
namespace {

constexpr absl::string_view kMetrics = "metrics=";

absl::StatusOr<int> ParsePort(absl::string_view text, absl::string_view line) {
  int port = 0;
  if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(text), &port) || port <= 0 || port > 65535) {
    return absl::DataLossError(absl::StrCat("'", line, "' is not a port"));
  }
  return port;
}

}  // namespace

std::string PortFileText(const PortFile& file) {
  std::string text;
  for (int port : file.ports) absl::StrAppend(&text, port, "\n");
  if (file.metrics_port >= 0) absl::StrAppend(&text, kMetrics, file.metrics_port, "\n");
  return text;
}

absl::StatusOr<PortFile> ParsePortFile(absl::string_view text) {
  PortFile file;
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipWhitespace())) {
    line = absl::StripAsciiWhitespace(line);
    if (absl::StartsWith(line, kMetrics)) {
      absl::StatusOr<int> port = ParsePort(line.substr(kMetrics.size()), line);
      if (!port.ok()) return port.status();
      file.metrics_port = *port;
      continue;
    }
    if (absl::StrContains(line, '=')) continue;  // another server's NAME=PORT
    absl::StatusOr<int> port = ParsePort(line, line);
    if (!port.ok()) return port.status();
    file.ports.push_back(*port);
  }
  if (file.ports.empty()) return absl::NotFoundError("it holds no port yet");
  return file;
}

absl::StatusOr<PortFile> ParseServePortFile(absl::string_view text) {
  absl::StatusOr<PortFile> file = ParsePortFile(text);
  if (!file.ok()) return file;
  if (file->ports.size() == 2 && file->metrics_port < 0) {  // the older format
    file->metrics_port = file->ports[1];
    file->ports.pop_back();
  }
  if (file->ports.size() != 1) {
    return absl::DataLossError(
        absl::StrCat("it lists ", file->ports.size(), " service ports; profctl serve has one"));
  }
  return file;
}

}  // namespace profctl
