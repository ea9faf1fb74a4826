// What every trace-reader fuzzer does with a trace it read: the rest of `profctl analyze`'s path
// (summary, pod breakdown, the JSON/CSV/table writers), with the checks that hold for any input.
#ifndef PROFCTL_FUZZ_ANALYZE_TRACE_H_
#define PROFCTL_FUZZ_ANALYZE_TRACE_H_

#include <string>
#include <utility>
#include <vector>

#include "coordinator/analysis/breakdown.h"
#include "coordinator/analysis/host_trace.h"
#include "coordinator/report/breakdown_writers.h"
#include "fuzz/fuzz_util.h"
#include "rapidjson/document.h"

namespace profctl::fuzz {

// Summarizes `trace` as two hosts of one pod (the second a copy under another name), builds the
// pod breakdown and renders it. The JSON must parse and, as report.html embeds it in a script
// element, hold no '<' (the writer escapes it in strings).
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
  Check(json.find('<') == std::string::npos);
  (void)report::BreakdownCsv(pod);
  (void)report::FormatBreakdownTable(pod, context);
}

}  // namespace profctl::fuzz

#endif  // PROFCTL_FUZZ_ANALYZE_TRACE_H_
