#ifndef PROFCTL_TESTS_TEST_TIME_H_
#define PROFCTL_TESTS_TEST_TIME_H_

#include <cstdint>

// Time units and a first instant for tests, in nanoseconds, defined once: the test build compiles
// several test files as one unit (PROFCTL_UNITY_BUILD), where two files' own `kMs` would collide.
// A test takes what it uses with `using ::profctl::test_time::kMs;`.
namespace profctl::test_time {

inline constexpr int64_t kUs = 1'000;
inline constexpr int64_t kMs = 1'000'000;
inline constexpr int64_t kS = 1'000'000'000;
inline constexpr int64_t kSec = kS;
inline constexpr int64_t kMinute = 60 * kS;
inline constexpr int64_t kHour = 60 * kMinute;
inline constexpr int64_t kDay = 24 * kHour;
// 2026-01-01 00:00:00 UTC.
inline constexpr int64_t kT0 = 1'767'225'600LL * kS;

}  // namespace profctl::test_time

#endif  // PROFCTL_TESTS_TEST_TIME_H_
