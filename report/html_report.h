// report.html: the pod step breakdown as one self-contained page (no network: inline CSS and JS,
// no fonts, CDNs or images; a Content-Security-Policy forbids any fetch). It embeds
// pod_step_breakdown.json (BreakdownJson; BreakdownJsonOfSteps beyond the bound below, with '<',
// '>' and '&' inside strings written as \u003c, \u003e, \u0026 so no trace text can close the
// script element) and its script draws from that data:
//   - when the breakdown's hang verdict (PodBreakdown::hang) is a hang or "cannot tell", a
//     "Hang" section above the answer, written as escaped HTML with the page: the verdict, its
//     evidence and, for a hang, where each rank involved stood (at most 64 rows);
//   - the answer: the most frequent straggler and why, the input-bound host, straggler changes;
//   - a stacked bar per host for one step (a slider picks the step; the last step first), like
//     XProf's pod viewer: categories stacked bottom-up in CategoryName order;
//   - step time over steps, one line per host, the pod step time and each step's straggler;
//   - the pod's mean host step stacked by category over all steps, and the pod view: every host
//     (rows) over all steps (columns), colored by its busy time (neither in collectives nor
//     idle; the straggler is usually the darkest), both from the series (id "series-data");
//   - the straggler table (the embedded steps: pod time, spread, straggler, cause, excess, why);
//   - the per-host table with links to each host's files (context.host_files, relative links
//     only: absolute paths and URLs are not linked), the pod's files and all warnings.
// Everything from traces (host names, why, warnings) reaches the page as DOM text, never as
// markup. The script reports any error, console.error or blocked fetch in the element #errors
// and sets data-rendered="ok" on <body> once it has drawn everything.
#ifndef PROFCTL_REPORT_HTML_REPORT_H_
#define PROFCTL_REPORT_HTML_REPORT_H_

#include <cstddef>
#include <string>
#include <vector>

#include "absl/types/span.h"
#include "analysis/breakdown.h"
#include "report/breakdown_writers.h"

namespace profctl::report {

// The page stays small however long the session (docs/tools.md, "report.html"): it embeds the
// whole breakdown only up to kReportMaxSteps steps, and never more than kReportMaxHostSteps
// host-steps (so 100 steps at 64 hosts); beyond that the slider and the straggler table show a
// sample (evenly spaced steps, the first and last, and the slowest quarter), and the charts over
// steps draw from a series of at most kReportMaxSeriesPoints points, each the mean of a run of
// consecutive steps, over every step. Bound: 1.7 MB at 10,000 steps x 64 hosts (a test
// checks < 3 MB); pod_step_breakdown.json has every step.
inline constexpr size_t kReportMaxSteps = 300;
inline constexpr size_t kReportMaxHostSteps = 6400;
inline constexpr size_t kReportMinSampledSteps = 16;
inline constexpr size_t kReportMaxSeriesPoints = 400;

// The indices into breakdown.steps that the page embeds in full (ascending).
std::vector<size_t> ReportStepIndices(const analysis::PodBreakdown& breakdown);

// The whole page; the caller writes it atomically as kReportHtmlFile next to the files the
// context links to.
std::string HtmlReport(const analysis::PodBreakdown& breakdown, const BreakdownContext& context);

// The same with a tab per tool (analysis/tools.h): `tool_jsons` are ToolJson documents
// (tool_writers.h), embedded as the breakdown's JSON is and drawn in their own tab (sortable
// tables, the overview's per-step stacked bars, the memory timeline); `#tab=<tool>` opens one.
std::string HtmlReport(const analysis::PodBreakdown& breakdown, const BreakdownContext& context,
                       absl::Span<const std::string> tool_jsons);

}  // namespace profctl::report

#endif  // PROFCTL_REPORT_HTML_REPORT_H_
