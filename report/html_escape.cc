#include "report/html_escape.h"

#include <string>

#include "absl/strings/string_view.h"

namespace profctl::report {

void AppendHtmlEscaped(std::string* out, absl::string_view s) {
  for (const char c : s) {
    switch (c) {
      case '&':
        out->append("&amp;");
        break;
      case '<':
        out->append("&lt;");
        break;
      case '>':
        out->append("&gt;");
        break;
      case '"':
        out->append("&quot;");
        break;
      case '\'':
        out->append("&#39;");
        break;
      default:
        out->push_back(c);
    }
  }
}

void AppendJsonForScript(std::string* out, absl::string_view json) {
  for (const char c : json) {
    switch (c) {
      case '<':
        out->append("\\u003c");
        break;
      case '>':
        out->append("\\u003e");
        break;
      case '&':
        out->append("\\u0026");
        break;
      default:
        out->push_back(c);
    }
  }
}

void AppendInlineStyle(std::string* out, absl::string_view css) {
  out->append("<style>\n");
  out->append(css.data(), css.size());
  out->append("</style>\n");
}

void AppendInlineScript(std::string* out, absl::string_view js) {
  out->append("<script>\n");
  out->append(js.data(), js.size());
  out->append("</script>\n");
}

}  // namespace profctl::report
