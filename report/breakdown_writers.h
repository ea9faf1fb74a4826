// Renders an analysis::PodBreakdown for machines and people: pod_step_breakdown.json (versioned,
// docs/breakdown-schema.md), the same as CSV (one row per step x host), and the terminal table
// that `capture`, `demo` and `analyze` print. report.html is in html_report.h.
//
// Writers are pure: they return the whole text and touch no file; the caller writes each output
// atomically (common/file_util.h) into one folder, conventionally the session folder, with the
// names of BreakdownOutputs(). Not a streaming API: a 1,024-host x 100-step breakdown is ~20 MB
// of JSON. Thread-compatible (no shared state).
#ifndef PROFCTL_REPORT_BREAKDOWN_WRITERS_H_
#define PROFCTL_REPORT_BREAKDOWN_WRITERS_H_

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "analysis/breakdown.h"
#include "report/json_out.h"

namespace profctl::report {

// Where a breakdown came from.
enum class BreakdownSource : uint8_t {
  kCapture = 0,  // analysed at the end of `profctl capture` / `profctl demo`
  kAnalyze,      // `profctl analyze` over saved files
};
// "capture", "analyze".
absl::string_view BreakdownSourceName(BreakdownSource source);

// What the writers know besides the breakdown itself.
struct BreakdownContext {
  std::string session;  // the session (run) name; may be empty for `analyze` over loose files
  BreakdownSource source = BreakdownSource::kCapture;
  // Per host name: its files (e.g. "worker-0.xplane.pb"), as paths relative to the folder the
  // outputs are written into, '/'-separated. Written to the JSON and linked from report.html
  // (which refuses absolute paths and URLs). Hosts without an entry get no links.
  std::map<std::string, std::vector<std::string>> host_files;
  // Pod-level files, relative like host_files (e.g. "pod.trace.json.gz", "session.json").
  std::vector<std::string> session_files;
  // `analyze` only: the inputs that could not be analysed, in input order. Written to the JSON
  // as `failed_files` when source is kAnalyze (also when empty).
  std::vector<FailedFile> failed_files = {};
  // report.html as the terminal table should show it (absolute, or relative to the working
  // directory); empty: the table does not mention it. Not written to the JSON.
  std::string report_path;
  // A snapshot (`capture --last`): the past it covers, in ms (> 0); report.html says so. Not
  // written to the JSON.
  int64_t snapshot_past_ms = 0;
};

// Milliseconds with exactly three decimals, from integer nanoseconds rounded half away from zero
// to the microsecond, without floating point: 1'234'567 -> "1.235", -500 -> "-0.001",
// 0 -> "0.000". Every time in the JSON, CSV and table is written this way.
std::string FormatMs(int64_t ns);

// A step's categories rounded to whole microseconds so that, printed with FormatMs, they add up
// exactly to its rounded time (largest remainder: each rounded down, the microseconds missing go
// to the largest remainders, ties in category order). Categories that are not a partition of
// `total_ns` are rounded each on its own.
std::array<int64_t, analysis::kNumCategories> RoundCategoriesToUs(const analysis::CategoryTimes& t,
                                                                  int64_t total_ns);

// pod_step_breakdown.json, schema version analysis::PodBreakdown::kSchemaVersion: one JSON object
// with a fixed key order, ending in a newline. docs/breakdown-schema.md lists every field.
std::string BreakdownJson(const analysis::PodBreakdown& breakdown, const BreakdownContext& context);

// The same with only the steps at `step_indices` (ascending indices into breakdown.steps) in
// "steps"; everything else (the summary, the hosts' statistics) still covers every step. For
// report.html, which shows a sample of the steps of a long session.
std::string BreakdownJsonOfSteps(const analysis::PodBreakdown& breakdown,
                                 const BreakdownContext& context,
                                 absl::Span<const size_t> step_indices);

// pod_step_breakdown.csv (RFC 4180 quoting, '\n' line ends): the header
//   step,host,step_time_ms,compute_ms,output_ms,d2d_ms,collectives_ms,input_ms,host_ms,idle_ms,
//   straggler,pod_step_time_ms,straggler_cost_ms,stands_out,device_busy_ms
// then one row per step x host in step, then host, order; straggler is true/false; stands_out
// lists the host's categories beyond the noise in that step ("input+4.000 compute+1.250");
// device_busy_ms, for a host with several devices, each one's time outside collectives
// ("0:48.100 1:51.300").
std::string BreakdownCsv(const analysis::PodBreakdown& breakdown);

struct TableOptions {
  // The per-step section shows the last `max_steps` steps...
  int max_steps = 3;
  // ...with at most this many hosts each (the straggler and the slowest; the others are
  // summarized in one line).
  int max_hosts_per_step = 8;
  // The per-host section shows at most this many hosts (the most frequent stragglers, then the
  // slowest); the others are summarized in one line.
  int max_hosts = 16;
  // Host names longer than this are shortened in the middle ("..."); the files have them whole.
  int max_host_width = 48;
};

// The readable terminal table: per host mean step time and categories, the last steps with one
// line per host and the straggler marked, then a few lines answering "who is slow and why": the
// most frequent straggler with its typical cause and excess, the hang verdict unless it is "none"
// (PodBreakdown::hang: its sentence; for a hang at most 8 ranks and its evidence), every host that
// stands out in a category (PodBreakdown::outliers), the input-bound host, the steps where the
// straggler changes, the consistently slow hosts, warnings, and context.report_path. Bounded: at
// most ~max_hosts + max_steps * (max_hosts_per_step + 2) + 30 lines, whatever the pod. Control
// characters in host names and messages are shown as '?'.
std::string FormatBreakdownTable(const analysis::PodBreakdown& breakdown,
                                 const BreakdownContext& context, const TableOptions& options = {});

// The breakdown's files, named once: what a capture and `analyze` write into their output folder
// (the JSON, the CSV and report.html, in that order).
struct BreakdownOutput {
  absl::string_view file_name;
  std::string (*render)(const analysis::PodBreakdown&, const BreakdownContext&);
};
absl::Span<const BreakdownOutput> BreakdownOutputs();

inline constexpr absl::string_view kBreakdownJsonFile = "pod_step_breakdown.json";
inline constexpr absl::string_view kBreakdownCsvFile = "pod_step_breakdown.csv";
inline constexpr absl::string_view kReportHtmlFile = "report.html";

}  // namespace profctl::report

#endif  // PROFCTL_REPORT_BREAKDOWN_WRITERS_H_
