// The tools' tabs of report.html (docs/tools.md): the embedded tool documents and the script
// and style that draw a tab from each. Internal to report/ (html_report.cc): users include
// html_report.h.
#ifndef PROFCTL_REPORT_HTML_TOOL_TABS_H_
#define PROFCTL_REPORT_HTML_TOOL_TABS_H_

#include <cstddef>
#include <string>

#include "absl/types/span.h"

namespace profctl::report {

// Appends to *out, inside <head> after the breakdown's data and before its script: each of
// `tool_jsons` (ToolJson documents, tool_writers.h) as a <script type="application/json"
// class="tool-data"> element (an overview's long step list downsampled, kMaxToolChartSteps),
// escaped as the breakdown's JSON is, then the tabs' style and
// script. Appends nothing when `tool_jsons` is empty.
void AppendToolTabs(std::string* out, absl::Span<const std::string> tool_jsons);

// The overview's per-host step rows embedded in the page: beyond this many, runs of consecutive
// steps with their means (tool_overview.json keeps every step), so the page stays small.
inline constexpr size_t kMaxToolChartSteps = 240;

}  // namespace profctl::report

#endif  // PROFCTL_REPORT_HTML_TOOL_TABS_H_
