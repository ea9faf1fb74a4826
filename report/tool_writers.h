// Renders the profiler's tools (analysis/tools.h) for machines and people: JSON (versioned,
// docs/tools.md "JSON"), CSV (docs/tools.md "CSV") and the terminal table `profctl analyze
// --tool=...` prints. Pure: the whole text is returned, no file is touched; callers write files
// atomically (common/file_util.h). Thread-compatible.
#ifndef PROFCTL_REPORT_TOOL_WRITERS_H_
#define PROFCTL_REPORT_TOOL_WRITERS_H_

#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "analysis/tools/tools.h"
#include "report/json_out.h"

namespace profctl::report {

struct ToolContext {
  std::string session;  // "analyze" for loose files
  // The inputs `analyze` could not analyse, written as `failed_files` after `warnings`.
  std::vector<FailedFile> failed_files = {};
};

// One JSON object, keys in a fixed order, ending in a newline: schema_version, producer, tool,
// session, hosts (names), then the tool's payload (docs/tools.md).
std::string ToolJson(const analysis::PodTools& tools, const ToolContext& context);

// RFC 4180 CSV with a header row; one row per host x item (docs/tools.md).
std::string ToolCsv(const analysis::PodTools& tools);

struct ToolTableOptions {
  int max_rows = 20;        // rows per table (kernels, ops, stages, live allocations)
  int max_name_width = 60;  // longer names are shortened in the middle
};
// The readable terminal table. Bounded by max_rows per section; control characters shown as '?'.
std::string FormatToolTable(const analysis::PodTools& tools, const ToolContext& context,
                            const ToolTableOptions& options = {});

// The tools the writers know, in their table's order: analysis::AllTools()'s (a test holds them
// together, so a new tool cannot go without its writers).
std::vector<analysis::Tool> ToolsWithWriters();

// The file a tool's outputs are written to beside the breakdown: "tool_<name>.json" / ".csv".
std::string ToolFileName(analysis::Tool tool, absl::string_view extension);

}  // namespace profctl::report

#endif  // PROFCTL_REPORT_TOOL_WRITERS_H_
