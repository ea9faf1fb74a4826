#include "report/tool_writers.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/json_util.h"
#include "common/version.h"
#include "report/json_out.h"
#include "report/tool_writers_internal.h"

namespace profctl::report {

using analysis::HostTools;
using analysis::PodTools;
using analysis::Tool;

namespace tool_writers_internal {

void Row(std::string* out, const std::vector<std::string>& fields) {
  for (size_t i = 0; i < fields.size(); ++i) {
    if (i > 0) out->push_back(',');
    AppendCsvField(out, fields[i]);
  }
  out->push_back('\n');
}
std::string MsText(int64_t ns) { return absl::StrFormat("%.3f", static_cast<double>(ns) / 1e6); }
std::string UsText(int64_t ns) { return absl::StrFormat("%.3f", static_cast<double>(ns) / 1e3); }

void SliceRows(Json& j, const std::vector<analysis::PieSlice>& slices, absl::string_view name_key,
               absl::string_view time_key) {
  j.BeginArray();
  for (const analysis::PieSlice& s : slices) {
    j.BeginObject();
    j.Key(name_key);
    j.String(s.name);
    j.Key(time_key);
    j.Us(s.self_ns);
    j.Key("pct");
    j.Double(s.pct, 2);
    j.EndObject();
  }
  j.EndArray();
}

double Pct(int64_t part, int64_t whole) {
  return whole <= 0 ? 0.0 : 100.0 * static_cast<double>(part) / static_cast<double>(whole);
}

std::string Printable(absl::string_view s, int max_width) {
  std::string p(s);
  for (char& c : p) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f) c = '?';
  }
  const size_t width = static_cast<size_t>(std::max(max_width, 8));
  if (p.size() <= width) return p;
  const size_t head = (width - 3) / 2;
  const size_t tail = width - 3 - head;
  return absl::StrCat(p.substr(0, head), "...", p.substr(p.size() - tail));
}

namespace {

// Each tool's writers, in the order of analysis::AllTools() (ToolsWithWriters, tested).
struct ToolWriter {
  Tool tool;
  void (*json)(Json& j, const PodTools& p);  // the tool's payload, after the common keys
  void (*csv)(std::string& out, const PodTools& p);
  void (*table)(std::string& out, const PodTools& p, const TableStyle& style);
};

constexpr ToolWriter kWriters[] = {
    {Tool::kOverview, OverviewJson, OverviewCsv, OverviewTable},
    {Tool::kKernelStats, KernelStatsJson, KernelStatsCsv, KernelStatsTable},
    {Tool::kOpStats, OpStatsJson, OpStatsCsv, OpStatsTable},
    {Tool::kInputPipeline, InputJson, InputPipelineCsv, InputPipelineTable},
    {Tool::kMemory, MemoryJson, MemoryCsv, MemoryTable},
    {Tool::kTimeline, TimelineJson, TimelineCsv, TimelineTable},
};

const ToolWriter& WriterFor(Tool tool) {
  for (const ToolWriter& w : kWriters) {
    if (w.tool == tool) return w;
  }
  return kWriters[0];  // unreachable: every tool has its writers (ToolsWithWriters)
}

}  // namespace
}  // namespace tool_writers_internal

using tool_writers_internal::Json;
using tool_writers_internal::kWriters;
using tool_writers_internal::Printable;
using tool_writers_internal::TableStyle;
using tool_writers_internal::ToolWriter;
using tool_writers_internal::WriterFor;

std::vector<Tool> ToolsWithWriters() {
  std::vector<Tool> tools;
  for (const ToolWriter& w : kWriters) tools.push_back(w.tool);
  return tools;
}

std::string ToolFileName(Tool tool, absl::string_view extension) {
  return absl::StrCat("tool_", analysis::ToolName(tool), ".", extension);
}

std::string ToolJson(const PodTools& p, const ToolContext& context) {
  Json j(/*pretty_depth=*/3);
  j.BeginObject();
  j.Key("schema_version");
  j.Int(PodTools::kSchemaVersion);
  j.Key("producer");
  j.String(absl::StrCat("profctl ", kVersion));
  j.Key("tool");
  j.String(analysis::ToolName(p.tool));
  j.Key("session");
  j.String(context.session);
  j.Key("hosts");
  j.BeginArray();
  for (const HostTools& h : p.hosts) j.String(h.host);
  j.EndArray();
  WriterFor(p.tool).json(j, p);
  j.Key("warnings");
  j.BeginArray();
  for (const HostTools& h : p.hosts) {
    for (const std::string& w : h.warnings) j.String(absl::StrCat(h.host, ": ", w));
  }
  j.EndArray();
  WriteFailedFiles(j, context.failed_files);
  j.EndObject();
  return j.Take();
}

std::string ToolCsv(const PodTools& p) {
  std::string out;
  WriterFor(p.tool).csv(out, p);
  return out;
}

std::string FormatToolTable(const PodTools& p, const ToolContext& context,
                            const ToolTableOptions& options) {
  std::string out;
  const TableStyle style{options.max_name_width,
                         static_cast<size_t>(std::max(options.max_rows, 1))};
  const int w = style.max_name_width;
  absl::StrAppend(&out, "profctl ", analysis::ToolName(p.tool), ": ", Printable(context.session, w),
                  ", ", p.hosts.size(), " host(s)\n");
  WriterFor(p.tool).table(out, p, style);
  for (const HostTools& h : p.hosts) {
    for (const std::string& warning : h.warnings) {
      absl::StrAppend(&out, "warning: ", Printable(h.host, w), ": ", Printable(warning, 400), "\n");
    }
  }
  return out;
}

}  // namespace profctl::report
