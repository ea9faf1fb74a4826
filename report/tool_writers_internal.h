// Internal to the tool writers (tool_writers.h is the interface): the helpers every tool's
// writers share and each tool's three writers, one file per tool (tool_writers_<tool>.cc). The
// table in tool_writers.cc names them once per tool, in the order of analysis::AllTools().
// Pure and thread-compatible like the writers themselves.
#ifndef PROFCTL_REPORT_TOOL_WRITERS_INTERNAL_H_
#define PROFCTL_REPORT_TOOL_WRITERS_INTERNAL_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "analysis/tools/tools.h"
#include "report/json_out.h"

namespace profctl::report::tool_writers_internal {

using Json = JsonOut;

// How the terminal tables are cut: names shortened in the middle to max_name_width, at most
// `limit` rows per section.
struct TableStyle {
  int max_name_width = 60;
  size_t limit = 20;  // rows per section
};

// One RFC 4180 CSV row, fields quoted where needed, ending in '\n'.
void Row(std::string* out, const std::vector<std::string>& fields);
// Nanoseconds as milliseconds / microseconds with three decimals ("1.500").
std::string MsText(int64_t ns);
std::string UsText(int64_t ns);
// A JSON array of pie slices: one object per slice, {name_key: name, time_key: its time in us,
// "pct"}.
void SliceRows(Json& j, const std::vector<analysis::PieSlice>& slices, absl::string_view name_key,
               absl::string_view time_key);
// part of whole in percent; 0 when whole is not positive.
double Pct(int64_t part, int64_t whole);
// `s` for a terminal: control characters as '?', shortened in the middle to max_width (>= 8).
std::string Printable(absl::string_view s, int max_width);

// Each tool's writers. Json: the tool's payload, after the common keys ToolJson writes; Csv: the
// whole CSV, header row first; Table: the terminal table after its title line.
void OverviewJson(Json& j, const analysis::PodTools& p);
void OverviewCsv(std::string& out, const analysis::PodTools& p);
void OverviewTable(std::string& out, const analysis::PodTools& p, const TableStyle& style);

void KernelStatsJson(Json& j, const analysis::PodTools& p);
void KernelStatsCsv(std::string& out, const analysis::PodTools& p);
void KernelStatsTable(std::string& out, const analysis::PodTools& p, const TableStyle& style);

void OpStatsJson(Json& j, const analysis::PodTools& p);
void OpStatsCsv(std::string& out, const analysis::PodTools& p);
void OpStatsTable(std::string& out, const analysis::PodTools& p, const TableStyle& style);

void InputJson(Json& j, const analysis::PodTools& p);
void InputPipelineCsv(std::string& out, const analysis::PodTools& p);
void InputPipelineTable(std::string& out, const analysis::PodTools& p, const TableStyle& style);

void MemoryJson(Json& j, const analysis::PodTools& p);
void MemoryCsv(std::string& out, const analysis::PodTools& p);
void MemoryTable(std::string& out, const analysis::PodTools& p, const TableStyle& style);

void TimelineJson(Json& j, const analysis::PodTools& p);
void TimelineCsv(std::string& out, const analysis::PodTools& p);
void TimelineTable(std::string& out, const analysis::PodTools& p, const TableStyle& style);

}  // namespace profctl::report::tool_writers_internal

#endif  // PROFCTL_REPORT_TOOL_WRITERS_INTERNAL_H_
