// Text into report.html: escaping for markup and for JSON embedded in a <script> element.
// Internal to report/ (html_report.cc, html_tool_tabs.cc, diff_writers.cc): users include
// html_report.h.
#ifndef PROFCTL_REPORT_HTML_ESCAPE_H_
#define PROFCTL_REPORT_HTML_ESCAPE_H_

#include <string>

#include "absl/strings/string_view.h"

namespace profctl::report {

// `s` with &, <, >, " and ' as character references, appended to *out.
void AppendHtmlEscaped(std::string* out, absl::string_view s);

// JSON text that is safe inside <script>: '<', '>' and '&' only occur inside JSON strings (the
// JSON writer emits no other text containing them), where \u003c etc. mean the same characters,
// so the embedded document parses to exactly the same values as the file.
void AppendJsonForScript(std::string* out, absl::string_view json);

// An asset (report_assets.h) inlined as <style>css</style> / <script>js</script> and a line
// break. The assets hold no "</style" or "</script" (html_report_test.cc checks), so they cannot
// close their element early.
void AppendInlineStyle(std::string* out, absl::string_view css);
void AppendInlineScript(std::string* out, absl::string_view js);

}  // namespace profctl::report

#endif  // PROFCTL_REPORT_HTML_ESCAPE_H_
