// What tool_readers.cc, the front door of tool_readers.h, hands to the two format readers
// (xspace_tool_reader.cc, kineto_tool_reader.cc) once it has checked the options and the offset.
// Internal to analysis/tools: users include tool_readers.h.
#ifndef PROFCTL_ANALYSIS_TOOLS_TOOL_READERS_INTERNAL_H_
#define PROFCTL_ANALYSIS_TOOLS_TOOL_READERS_INTERNAL_H_

#include <cstdint>
#include <limits>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "analysis/op_classify.h"
#include "analysis/tools/tool_trace.h"
#include "tensorflow/profiler/xplane.pb.h"

namespace profctl::analysis::tool_readers_internal {

inline constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();

// A host event of the kHostOther class whose name says it compiles (both formats' rule).
inline bool IsCompileName(absl::string_view name) { return ContainsIgnoreCase(name, "compil"); }

// Every host, device and memory event, the environment and the window of `space` into `out`
// (whose host is set), times less `offset_ns`; bad events become out->warnings. The space has
// a host or device plane and `offset_ns` is in range (the caller checked).
void ReadXSpaceToolEvents(const tensorflow::profiler::XSpace& space, int64_t offset_ns,
                          const StepMatcher& matcher, ToolTrace* out);

// A Kineto document's JSON (not gzip) as one ToolTrace; INVALID_ARGUMENT naming `default_host`
// when it is not JSON or has no traceEvents. `offset_ns` is in range (the caller checked).
// Parsed in place: the text is taken (move it in) and overwritten, so the document holds no
// copy of its strings. Memory: the text, plus RapidJSON's 16 bytes per value and 32 per object
// member while it is read.
absl::StatusOr<ToolTrace> ReadKinetoToolDocument(std::string json, const std::string& default_host,
                                                 int64_t offset_ns, const StepMatcher& matcher);

}  // namespace profctl::analysis::tool_readers_internal

#endif  // PROFCTL_ANALYSIS_TOOLS_TOOL_READERS_INTERNAL_H_
