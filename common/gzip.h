// gzip compression (zlib) of an in-memory buffer.
#ifndef PROFCTL_COMMON_GZIP_H_
#define PROFCTL_COMMON_GZIP_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace profctl {

absl::StatusOr<std::string> GzipCompress(absl::string_view data);
absl::StatusOr<std::string> GzipDecompress(absl::string_view data);

}  // namespace profctl

#endif  // PROFCTL_COMMON_GZIP_H_
