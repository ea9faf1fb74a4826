#ifndef PROFCTL_COMMON_VERSION_H_
#define PROFCTL_COMMON_VERSION_H_

namespace profctl {
// Set from CMake's project(VERSION): what agents report in GetInfo and ping shows.
inline constexpr const char* kVersion = PROFCTL_VERSION;

// What `--version` prints: kVersion, then "(git DESCRIBE)" when the source was a git checkout
// at configure time (`git describe --always --dirty --tags`), e.g. "0.1.0 (git 59c240f-dirty)".
const char* VersionDescription();
}  // namespace profctl

#endif  // PROFCTL_COMMON_VERSION_H_
