// The report pages' CSS and JavaScript: the files of report/assets/, compiled in at build time
// (cmake/EmbedAssets.cmake, report/CMakeLists.txt), each constant the file's bytes. They are
// edited, linted and tested as what they are (report/assets/format_test.js) and inlined by the
// writers into self-contained pages (html_report.h, diff_writers.h).
#ifndef PROFCTL_REPORT_REPORT_ASSETS_H_
#define PROFCTL_REPORT_REPORT_ASSETS_H_

#include "absl/strings/string_view.h"

namespace profctl::report::assets {

// report.html (html_report.h): its style, the error catcher that runs before anything else
// (reports every error in #errors), the formatting helpers both scripts share (window.profctl),
// the step breakdown's drawing, and the tools' tabs (style and drawing).
extern const absl::string_view kReportCss;
extern const absl::string_view kErrorCatcherJs;
extern const absl::string_view kFormatJs;
extern const absl::string_view kBreakdownJs;
extern const absl::string_view kToolsCss;
extern const absl::string_view kToolsJs;
// The diff page (diff_writers.h): its style only (it holds no script).
extern const absl::string_view kDiffCss;

}  // namespace profctl::report::assets

#endif  // PROFCTL_REPORT_REPORT_ASSETS_H_
