// Logging setup for binaries: spdlog to stderr. Libraries log through spdlog's default logger.
#ifndef PROFCTL_COMMON_LOGGING_H_
#define PROFCTL_COMMON_LOGGING_H_

#include <string>

#include "absl/status/status.h"

namespace profctl {

// level: trace, debug, info, warn, error, off. `program` prefixes every line.
absl::Status SetupLogging(const std::string& program, const std::string& level);

}  // namespace profctl

#endif  // PROFCTL_COMMON_LOGGING_H_
