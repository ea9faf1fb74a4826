#include "agent/collectors/cupti/collective_launches.h"

#include <string_view>

#include "absl/strings/str_cat.h"
#include "inject/collective_launches.h"

namespace profctl::agent::cupti {

std::string NcclLaunchEventName(absl::string_view kernel_name) {
  const std::string_view op =
      inject::NcclKernelOp(std::string_view(kernel_name.data(), kernel_name.size()));
  if (op.empty()) return "ncclKernel";
  return absl::StrCat("nccl", absl::string_view(op.data(), op.size()));
}

void AddCollectiveLaunchStats(const CollectiveLaunch& launch, xspace::XPlaneBuilder& plane,
                              xspace::XEvent* event) {
  plane.AddStat(event, plane.StatMetadataId(kStatKernelName), *launch.kernel_name);
  plane.AddStat(event, plane.StatMetadataId(kStatNcclLaunchSeq), static_cast<int64_t>(launch.seq));
}

}  // namespace profctl::agent::cupti
