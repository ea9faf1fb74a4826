#include "analysis/tools/tools.h"

#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "analysis/tools/tool_internal.h"

namespace profctl::analysis {
namespace {

// The one table of tools: every tool's name, summary and computation. The report's writers key
// their table (report/tool_writers.cc) on the same Tool values, in this order; a test holds them
// together. Each tool's computation lives in its own file (overview.cc, kernel_stats.cc, ...).
constexpr ToolInfo kTools[] = {
    {Tool::kOverview, "overview",
     "step time by category, 16/32-bit compute, top kernels and ops, run environment, advice",
     OverviewForHost, OverviewForPod},
    {Tool::kKernelStats, "kernel_stats",
     "per (kernel, op): launch configuration, occupancy, Tensor Cores, time", KernelStatsForHost,
     KernelStatsForPod},
    {Tool::kOpStats, "op_stats", "per op and op type: self and total time on host and device",
     OpStatsForHost, OpStatsForPod},
    {Tool::kInputPipeline, "input_pipeline",
     "per step: device time waiting for input; host input stages and the bottleneck",
     InputPipelineForHost, nullptr},
    {Tool::kMemory, "memory", "per device: memory in use over time, peak, live allocations",
     MemoryForHost, nullptr},
    {Tool::kTimeline, "timeline",
     "communication hidden under computation, idle time by cause, kernel launch delay and queue "
     "length per stream (HTA's)",
     TimelineForHost, TimelineForPod},
};

const ToolInfo& Info(Tool tool) {
  for (const ToolInfo& t : kTools) {
    if (t.tool == tool) return t;
  }
  return kTools[0];  // unreachable: every Tool is in the table (tools_test.cc)
}

}  // namespace

absl::Span<const ToolInfo> AllTools() { return kTools; }

std::optional<Tool> ToolByName(absl::string_view name) {
  for (const ToolInfo& t : kTools) {
    if (t.name == name) return t.tool;
  }
  return std::nullopt;
}

absl::string_view ToolName(Tool tool) {
  for (const ToolInfo& t : kTools) {
    if (t.tool == tool) return t.name;
  }
  return "?";
}

std::string ToolNamesForHelp() {
  return absl::StrJoin(kTools, "|",
                       [](std::string* out, const ToolInfo& t) { absl::StrAppend(out, t.name); });
}

HostTools ComputeHostTools(Tool tool, const ToolTrace& trace, const HostSummary& summary) {
  HostTools h;
  h.host = trace.host;
  h.warnings = trace.warnings;
  Info(tool).compute_host(trace, summary, h);
  return h;
}

PodTools BuildPodTools(Tool tool, std::vector<HostTools> hosts, const PodBreakdown& breakdown) {
  PodTools pod;
  pod.tool = tool;
  pod.hosts = std::move(hosts);
  if (const ToolInfo& info = Info(tool); info.merge_pod != nullptr) info.merge_pod(pod, breakdown);
  return pod;
}

}  // namespace profctl::analysis
