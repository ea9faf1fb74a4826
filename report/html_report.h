// report.html: the pod step breakdown as one self-contained page (no network: inline CSS and JS,
// no fonts, CDNs or images; a Content-Security-Policy forbids any fetch). It embeds
// pod_step_breakdown.json verbatim (BreakdownJson, with '<', '>' and '&' inside strings written
// as \u003c, \u003e, \u0026 so no trace text can close the script element) and its script draws
// from that data:
//   - the answer: the most frequent straggler and why, the input-bound host, straggler changes;
//   - a stacked bar per host for one step (a slider picks the step; the last step first), like
//     XProf's pod viewer: categories stacked bottom-up in CategoryName order;
//   - step time over steps, one line per host, the pod step time and each step's straggler;
//   - the straggler table (every step: pod time, spread, straggler, cause, excess, why);
//   - the per-host table with links to each host's files (context.host_files, relative links
//     only: absolute paths and URLs are not linked), the pod's files and all warnings.
// Everything from traces (host names, why, warnings) reaches the page as DOM text, never as
// markup. The script reports any error, console.error or blocked fetch in the element #errors
// and sets data-rendered="ok" on <body> once it has drawn everything.
#ifndef PROFCTL_REPORT_HTML_REPORT_H_
#define PROFCTL_REPORT_HTML_REPORT_H_

#include <string>

#include "absl/types/span.h"
#include "analysis/breakdown.h"
#include "report/breakdown_writers.h"

namespace profctl::report {

// The whole page; the caller writes it atomically as kReportHtmlFile next to the files the
// context links to. Size: the JSON plus ~25 KB.
std::string HtmlReport(const analysis::PodBreakdown& breakdown, const BreakdownContext& context);

// The same with a tab per tool (analysis/tools.h): `tool_jsons` are ToolJson documents
// (tool_writers.h), embedded as the breakdown's JSON is and drawn in their own tab (sortable
// tables, the overview's per-step stacked bars, the memory timeline); `#tab=<tool>` opens one.
std::string HtmlReport(const analysis::PodBreakdown& breakdown, const BreakdownContext& context,
                       absl::Span<const std::string> tool_jsons);

}  // namespace profctl::report

#endif  // PROFCTL_REPORT_HTML_REPORT_H_
