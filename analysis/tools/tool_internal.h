// What the tools share (tools.cc and the one file per tool): linking device events to the host
// ops that launched them, and the descriptor table's entries. Internal to analysis/tools: users
// include tools.h.
#ifndef PROFCTL_ANALYSIS_TOOLS_TOOL_INTERNAL_H_
#define PROFCTL_ANALYSIS_TOOLS_TOOL_INTERNAL_H_

#include <cstdint>
#include <initializer_list>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"
#include "analysis/breakdown.h"
#include "analysis/tools/tool_trace.h"
#include "analysis/tools/tools.h"

namespace profctl::analysis {

bool ContainsAnyIgnoreCase(absl::string_view s, std::initializer_list<absl::string_view> parts);

// --- linking kernels to ops (op_links.cc) --------------------------------------------------------

bool IsOpRole(HostEventRole r);

// The host events as per-thread trees (nesting by time), and the links from device events to the
// host event that launched them.
class HostForest {
 public:
  explicit HostForest(const ToolTrace& t);

  // Host events in (thread, start, longer first) order: parents before children.
  const std::vector<int32_t>& order() const { return order_; }
  int32_t parent(int32_t i) const { return parent_[static_cast<size_t>(i)]; }

  // The innermost op (framework op or annotation) at or above host event i.
  int32_t EnclosingOp(int32_t i) const {
    while (i >= 0 && !IsOpRole(t_.host_events[static_cast<size_t>(i)].role)) i = parent(i);
    return i;
  }

  // The host op that launched device event d, or -1: Kineto `External id`, else the CUPTI
  // correlation to a runtime call and its innermost enclosing op.
  int32_t LaunchingOp(const DeviceEvent& d) const {
    if (d.link_id >= 0) {
      auto it = by_link_.find(d.link_id);
      if (it != by_link_.end()) return it->second;
    }
    if (d.correlation_id >= 0) {
      auto it = by_correlation_.find(d.correlation_id);
      if (it != by_correlation_.end()) return EnclosingOp(it->second);
    }
    return -1;
  }

  // For device event d whose launch call no op encloses on its own thread (PyTorch's autograd
  // engine thread in a capture without its ops, e.g. profctl's CUPTI path with NVTX ranges on
  // the main thread only): the innermost op running on another thread when the call started
  // (of those, the one that started last), or -1.
  int32_t OpElsewhereAtLaunch(const DeviceEvent& d) const;

 private:
  const ToolTrace& t_;
  std::vector<int32_t> parent_;
  std::vector<int32_t> order_;
  absl::flat_hash_map<int64_t, int32_t> by_link_;
  absl::flat_hash_map<int64_t, int32_t> by_correlation_;
  std::vector<int32_t> ops_by_start_;  // op-role events of every thread, by start
};

// An op's type from its name: TF `scope/Name:Type`, HLO `fusion.12` -> `fusion`, else the name.
absl::string_view OpTypeOf(absl::string_view op);

struct OpRef {
  absl::string_view name;
  absl::string_view type;
  int32_t host = -1;  // host event index when the op is a host event
};

// The op that launched device event d: its own `op` stat, else the launching host op.
OpRef ResolveOp(const ToolTrace& t, const HostForest& forest, const DeviceEvent& d);

// --- the descriptor table's entries (ToolInfo), one file per tool --------------------------------

void OverviewForHost(const ToolTrace& trace, const HostSummary& summary, HostTools& h);
void OverviewForPod(PodTools& pod, const PodBreakdown& breakdown);
void KernelStatsForHost(const ToolTrace& trace, const HostSummary& summary, HostTools& h);
void KernelStatsForPod(PodTools& pod, const PodBreakdown& breakdown);
void OpStatsForHost(const ToolTrace& trace, const HostSummary& summary, HostTools& h);
void OpStatsForPod(PodTools& pod, const PodBreakdown& breakdown);
void InputPipelineForHost(const ToolTrace& trace, const HostSummary& summary, HostTools& h);
void MemoryForHost(const ToolTrace& trace, const HostSummary& summary, HostTools& h);
void TimelineForHost(const ToolTrace& trace, const HostSummary& summary, HostTools& h);
void TimelineForPod(PodTools& pod, const PodBreakdown& breakdown);

}  // namespace profctl::analysis

#endif  // PROFCTL_ANALYSIS_TOOLS_TOOL_INTERNAL_H_
