// What every trace-reader fuzzer does with a trace it read: the rest of `profctl analyze`'s path
// (summary, pod breakdown, the JSON/CSV/table writers), with the checks that hold for any input.
#ifndef PROFCTL_FUZZ_ANALYZE_TRACE_H_
#define PROFCTL_FUZZ_ANALYZE_TRACE_H_

#include <string>
#include <utility>
#include <vector>

#include "analysis/breakdown.h"
#include "analysis/host_trace.h"
#include "fuzz/fuzz_util.h"
#include "rapidjson/document.h"
#include "report/breakdown_writers.h"

namespace profctl::fuzz {

// Whether '<', '>' and '&' occur only inside JSON strings: what report.html relies on when it
// embeds the JSON in a script element with those three characters written as \u escapes
// (html_report.cc AppendJsonForScript). Inside strings they are fine (kernel names have them).
inline bool MarkupOnlyInStrings(const std::string& json) {
  bool in_string = false;
  for (size_t i = 0; i < json.size(); ++i) {
    const char c = json[i];
    if (in_string) {
      if (c == '\\') {
        ++i;  // the escaped character
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '<' || c == '>' || c == '&') {
      return false;
    }
  }
  return !in_string;
}

// Summarizes `trace` as two hosts of one pod (the second a copy under another name), builds the
// pod breakdown and renders it. The JSON must parse, with markup characters only inside strings.
inline void AnalyzeTrace(const analysis::HostTrace& trace) {
  std::vector<analysis::HostSummary> hosts;
  hosts.push_back(analysis::SummarizeHost(trace));
  hosts.push_back(hosts.front());
  hosts.back().host += "-copy";
  const analysis::PodBreakdown pod = analysis::BuildPodBreakdown(hosts);
  report::BreakdownContext context;
  context.session = "fuzz";
  context.source = report::BreakdownSource::kAnalyze;
  const std::string json = report::BreakdownJson(pod, context);
  rapidjson::Document doc;
  doc.Parse(json.data(), json.size());
  Check(!doc.HasParseError() && doc.IsObject());
  Check(MarkupOnlyInStrings(json));
  (void)report::BreakdownCsv(pod);
  (void)report::FormatBreakdownTable(pod, context);
}

}  // namespace profctl::fuzz

#endif  // PROFCTL_FUZZ_ANALYZE_TRACE_H_
