#ifndef PROFCTL_COMMON_VERSION_H_
#define PROFCTL_COMMON_VERSION_H_

namespace profctl {
// Set from CMake's project(VERSION).
inline constexpr const char* kVersion = PROFCTL_VERSION;
}  // namespace profctl

#endif  // PROFCTL_COMMON_VERSION_H_
