// The flight recorder's collective launches on the agent's side (docs/cupti.md, "The always-on
// level"): what a snapshot writes for each NCCL kernel launch the injection library kept
// (inject/collective_launches.h).
//
// CONTRACT (read by analysis/hang_verdict): each launch is an event on the launching thread's
// line (id = tid) of /host:CPU, at the launch call's entry, 0 ns long, named
// "nccl<Op>" from the kernel's name (NcclLaunchEventName: "ncclDevKernel_AllReduce_Sum_f32_RING_LL"
// -> "ncclAllReduce"), with a str stat "kernel_name" holding the kernel's full name as CUPTI gave
// it and an int64 stat "nccl_launch_seq", the process's NCCL launches counted from 0.
#ifndef PROFCTL_AGENT_COLLECTORS_CUPTI_COLLECTIVE_LAUNCHES_H_
#define PROFCTL_AGENT_COLLECTORS_CUPTI_COLLECTIVE_LAUNCHES_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/strings/string_view.h"
#include "xspace/xspace.h"

namespace profctl::agent::cupti {

inline constexpr absl::string_view kStatKernelName = "kernel_name";
inline constexpr absl::string_view kStatNcclLaunchSeq = "nccl_launch_seq";

// One NCCL kernel launch, on the agent's clock.
struct CollectiveLaunch {
  uint32_t pid = 0;
  uint32_t tid = 0;
  int64_t wall_ns = 0;
  uint64_t seq = 0;
  std::shared_ptr<const std::string> kernel_name;  // never null
};

// "nccl" + the kernel's NCCL op (inject::NcclKernelOp): ncclAllReduce, ncclAllGather,
// ncclReduceScatter, ncclBroadcast, ncclReduce, ncclSendRecv, ncclSend, ncclRecv; NCCL's generic
// kernels, whose op is chosen on the device, give "ncclGeneric". "ncclKernel" for a name with
// no op.
std::string NcclLaunchEventName(absl::string_view kernel_name);

// Adds kernel_name and nccl_launch_seq to the launch's event.
void AddCollectiveLaunchStats(const CollectiveLaunch& launch, xspace::XPlaneBuilder& plane,
                              xspace::XEvent* event);

}  // namespace profctl::agent::cupti

#endif  // PROFCTL_AGENT_COLLECTORS_CUPTI_COLLECTIVE_LAUNCHES_H_
