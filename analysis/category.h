// The categories a step's time is split into: the one vocabulary of every output (the
// overview's finer categories each name their parent here).
#ifndef PROFCTL_ANALYSIS_CATEGORY_H_
#define PROFCTL_ANALYSIS_CATEGORY_H_

#include <cstdint>

#include "absl/strings/string_view.h"

namespace profctl::analysis {

// Where a step's time went. Every instant of a step's window on a device is given exactly one
// category, by this precedence (first that applies wins), so the categories of a step add up to
// its wall time to the nanosecond:
//   compute      the device runs a non-collective kernel;
//   output       the device copies device-to-host;
//   d2d          the device copies device-to-device / peer;
//   collectives  the device runs a collective;
//   input        the device copies host-to-device, or the device is idle while the host waits
//                for input;
//   host         the device is idle while the host launches work or runs other host code, and
//                no host thread is blocked on the device (cudaStreamSynchronize is not
//                overhead, even nested in a framework op such as aten::item);
//   idle         nothing of the above.
enum class Category : uint8_t {
  kCompute = 0,
  kOutput,
  kDeviceToDevice,
  kCollectives,
  kInput,
  kHost,
  kIdle,
};
inline constexpr int kNumCategories = 7;
// "compute", "output", "d2d", "collectives", "input", "host", "idle".
absl::string_view CategoryName(Category c);

}  // namespace profctl::analysis

#endif  // PROFCTL_ANALYSIS_CATEGORY_H_
