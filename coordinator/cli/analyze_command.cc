// `profctl analyze`: the pod step breakdown and the tools of saved sessions and trace files.
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/file_util.h"
#include "common/flags.h"
#include "common/status_macros.h"
#include "coordinator/cli/command.h"
#include "coordinator/offline/analyze.h"
#include "report/breakdown_writers.h"
#include "report/html_report.h"
#include "report/tool_writers.h"

namespace profctl::coordinator {

namespace {

struct AnalyzeFlags {
  bool json = false;
  bool csv = false;
  std::string out_dir;
  std::string step_pattern{analysis::kDefaultStepPattern};
  int64_t jobs = 0;
  int64_t max_file_mb = static_cast<int64_t>(analysis::kDefaultMaxFileBytes >> 20);
  int64_t max_inflated_mb = static_cast<int64_t>(analysis::kDefaultMaxInflatedBytes >> 20);
  int64_t max_inflate_ratio = static_cast<int64_t>(analysis::kDefaultMaxInflateRatio);
  int64_t max_string_kb = static_cast<int64_t>(analysis::kDefaultMaxStringBytes >> 10);
  std::string tool_name;
  bool include_idle = false;
  bool pod_trace = false;
  std::vector<std::string> paths;
};

// Parses the flags into *f. Returns the exit code when the command is done (--help, a usage
// error), nullopt when it should run.
std::optional<int> ParseAnalyzeFlags(const std::vector<std::string>& args, const CliEnv& env,
                                     AnalyzeFlags* f) {
  FlagSet fs("profctl analyze",
             "PATH... [--tool=NAME] [--json|--csv] [--step-pattern=RE] [--out=DIR] [--pod-trace] "
             "[--jobs=N] "
             "[--max-file-mb=N] [--max-inflated-mb=N] [--max-inflate-ratio=N] [--max-string-kb=N]");
  fs.String("tool", &f->tool_name,
            absl::StrCat("run one of the profiler's tools instead of the step breakdown: ",
                         analysis::ToolNamesForHelp(), ", or all (docs/tools.md)"));
  fs.Bool("include-idle", &f->include_idle,
          "op_stats: count idle time as an IDLE row in the percentages and pie charts");
  fs.Bool("json", &f->json, "print pod_step_breakdown.json on stdout instead of the table");
  fs.Bool("csv", &f->csv, "print the breakdown as CSV (one row per step x host) on stdout");
  fs.String("out", &f->out_dir,
            "write pod_step_breakdown.json/.csv and report.html into DIR (default: the session "
            "folder when PATH is one; else none)");
  fs.Bool("pod-trace", &f->pod_trace,
          "a saved session folder: also write pod.perfetto-trace.gz (every saved host on the "
          "session's aligned timeline, as the capture writes it) into --out");
  fs.String("step-pattern", &f->step_pattern,
            "RE2 pattern naming step markers (NVTX ranges, annotations); group 1 = step number");
  fs.Int64("jobs", &f->jobs,
           absl::StrCat("hosts read at once, one thread each (0: one per core, at most ",
                        kMaxAutoJobs, "); memory grows with it (about 24 bytes per event each)"));
  fs.Int64("max-file-mb", &f->max_file_mb,
           "refuse a trace file larger than this many MiB before reading it (a JSON trace is "
           "held in memory whole)");
  fs.Int64("max-inflated-mb", &f->max_inflated_mb,
           "refuse a gzipped trace that inflates past this many MiB (it is held in memory)");
  fs.Int64("max-inflate-ratio", &f->max_inflate_ratio,
           "refuse a gzipped trace that inflates past this many times its size (a gzip bomb; "
           "0: no ratio cap)");
  fs.Int64("max-string-kb", &f->max_string_kb,
           "refuse a JSON trace holding a string (a name, an arg) longer than this many KiB");
  fs.RejectEmpty("out");
  fs.RejectEmpty("step-pattern");
  fs.RejectEmpty("tool");
  if (absl::Status s = fs.Parse(args); !s.ok()) return UsageError(env, "analyze", s.message());
  if (fs.help_requested()) {
    *env.out << fs.Help()
             << "\nPATH: a saved session folder (LOGDIR/plugins/profile/SESSION), a folder of "
                "*.xplane.pb files (TensorFlow, JAX, profctl) or of PyTorch profiler traces "
                "(*.pt.trace.json[.gz], one per rank), or such files under any name (read by "
                "content: an XSpace, or a Chrome-trace JSON such as trace.json, gzipped or "
                "not).\n"
             << "--tool=NAME prints that tool (--json/--csv: its JSON/CSV) and, with --out or a "
                "session folder, writes tool_NAME.json/.csv there and report.html with its tab; "
                "--tool=all does every tool.\n";
    return kExitOk;
  }
  if (f->json && f->csv) return UsageError(env, "analyze", "--json and --csv exclude each other");
  if (f->jobs < 0 || f->jobs > 256) {
    return UsageError(env, "analyze", absl::StrCat("--jobs=", f->jobs, ": must be 0..256"));
  }
  if (f->max_file_mb < 1 || f->max_file_mb > (int64_t{1} << 30)) {
    return UsageError(env, "analyze",
                      absl::StrCat("--max-file-mb=", f->max_file_mb, ": must be 1..2^30"));
  }
  if (f->max_inflated_mb < 1 || f->max_inflated_mb > (int64_t{1} << 30)) {
    return UsageError(env, "analyze",
                      absl::StrCat("--max-inflated-mb=", f->max_inflated_mb, ": must be 1..2^30"));
  }
  if (f->max_inflate_ratio < 0 || f->max_inflate_ratio > 1'000'000) {
    return UsageError(
        env, "analyze",
        absl::StrCat("--max-inflate-ratio=", f->max_inflate_ratio, ": must be 0..1000000"));
  }
  if (f->max_string_kb < 1 || f->max_string_kb > (int64_t{1} << 30)) {
    return UsageError(env, "analyze",
                      absl::StrCat("--max-string-kb=", f->max_string_kb, ": must be 1..2^30"));
  }
  f->paths = fs.positional();
  return std::nullopt;
}

// The tools --tool names (none: the breakdown) into *tools; else the usage error's exit code.
std::optional<int> ResolveTools(const AnalyzeFlags& f, const CliEnv& env,
                                std::vector<analysis::Tool>* tools) {
  if (f.tool_name == "all") {
    for (const analysis::ToolInfo& t : analysis::AllTools()) tools->push_back(t.tool);
    if (f.json || f.csv) {
      return UsageError(env, "analyze",
                        "--tool=all prints tables; for --json/--csv pick one tool (--out writes "
                        "every tool's JSON and CSV)");
    }
  } else if (!f.tool_name.empty()) {
    const std::optional<analysis::Tool> tool = analysis::ToolByName(f.tool_name);
    if (!tool) {
      std::vector<std::string> known = {"all"};
      for (const analysis::ToolInfo& t : analysis::AllTools()) known.emplace_back(t.name);
      const std::string closest = ClosestName(f.tool_name, known);
      return UsageError(
          env, "analyze",
          absl::StrCat("--tool=", f.tool_name, ": unknown tool '", f.tool_name, "'",
                       closest.empty() ? "" : absl::StrCat(" (did you mean '", closest, "'?)"),
                       "; the tools are ", analysis::ToolNamesForHelp(), " or all"));
    }
    tools->push_back(*tool);
  }
  return std::nullopt;
}

// Each input's file under its host, for the report's links: relative to the session folder
// when the outputs are written there.
void LinkHostFiles(const AnalyzeInputs& inputs, const std::string& out_dir,
                   report::BreakdownContext* context) {
  for (const TraceInput& in : inputs.files) {
    std::string link = in.path;
    if (!inputs.session_dir.empty() && out_dir == inputs.session_dir &&
        absl::StartsWith(link, inputs.session_dir + "/")) {
      link = link.substr(inputs.session_dir.size() + 1);  // relative: the report links it
    }
    context->host_files[in.host].push_back(link);
  }
}

// Each tool's tool_<name>.json and .csv in `out_dir`, and report.html: the breakdown with a tab
// per tool (all atomically).
absl::Status WriteToolFiles(const AnalyzeInputs& inputs, const AnalyzeToolResult& r,
                            const std::vector<std::string>& tool_jsons, const std::string& session,
                            const std::string& out_dir) {
  PROFCTL_RETURN_IF_ERROR(MakeDirs(out_dir));
  for (size_t t = 0; t < r.tools.size(); ++t) {
    PROFCTL_RETURN_IF_ERROR(WriteFileAtomically(
        JoinPath(out_dir, report::ToolFileName(r.tools[t].tool, "json")), tool_jsons[t]));
    PROFCTL_RETURN_IF_ERROR(
        WriteFileAtomically(JoinPath(out_dir, report::ToolFileName(r.tools[t].tool, "csv")),
                            report::ToolCsv(r.tools[t])));
  }
  report::BreakdownContext page;
  page.session = session;
  page.source = report::BreakdownSource::kAnalyze;
  page.snapshot_past_ms = inputs.snapshot_past_ms;
  LinkHostFiles(inputs, out_dir, &page);
  return WriteFileAtomically(JoinPath(out_dir, report::kReportHtmlFile),
                             report::HtmlReport(r.breakdown.breakdown, page, tool_jsons));
}

// Every failed file with why, every warning of the run (the files skipped), and every class of
// events a host's reader could not place (ignored or dropped), on stderr: nothing read or left
// out goes unsaid, however long the table's list of warnings.
void PrintProblems(const AnalyzeResult& r, const CliEnv& env) {
  for (const report::FailedFile& f : r.failed_files) {
    *env.err << "profctl analyze: " << f.path << ": " << f.error << "\n";
  }
  for (const std::string& w : r.warnings) *env.err << "profctl analyze: warning: " << w << "\n";
  for (const analysis::HostReport& h : r.breakdown.hosts) {
    for (const std::string& w : h.warnings) {
      if (absl::StrContains(w, "ignored") || absl::StrContains(w, "dropped") ||
          absl::StrContains(w, "not placed")) {
        *env.err << "profctl analyze: warning: " << h.host << ": " << w << "\n";
      }
    }
  }
}

// Tools: their JSON/CSV/table instead of the breakdown's; with an output folder, their files.
int RunTools(const AnalyzeFlags& f, const AnalyzeInputs& inputs,
             const analysis::ReaderOptions& options, const std::vector<analysis::Tool>& tools,
             const CliEnv& env) {
  AnalyzeToolResult r = AnalyzeTools(inputs, options, tools, static_cast<int>(f.jobs));
  for (analysis::PodTools& t : r.tools) t.include_idle = f.include_idle;
  PrintProblems(r.breakdown, env);
  if (r.breakdown.hosts.empty()) {
    *env.err << "profctl analyze: no trace could be analysed\n";
    return kExitFailed;
  }
  report::ToolContext tool_context;
  tool_context.session = inputs.session.empty() ? "analyze" : inputs.session;
  tool_context.failed_files = r.breakdown.failed_files;
  std::vector<std::string> tool_jsons;
  for (const analysis::PodTools& t : r.tools) {
    tool_jsons.push_back(report::ToolJson(t, tool_context));
  }
  int tool_rc = r.breakdown.failed_files.empty() ? kExitOk : kExitPartial;
  if (!f.out_dir.empty()) {
    if (absl::Status s = WriteToolFiles(inputs, r, tool_jsons, tool_context.session, f.out_dir);
        !s.ok()) {
      *env.err << "profctl analyze: " << s.message() << "\n";
      tool_rc = kExitPartial;
    }
  }
  for (size_t t = 0; t < r.tools.size(); ++t) {
    if (f.json) {
      *env.out << tool_jsons[t];
    } else if (f.csv) {
      *env.out << report::ToolCsv(r.tools[t]);
    } else {
      *env.out << (t > 0 ? "\n" : "") << report::FormatToolTable(r.tools[t], tool_context);
    }
  }
  return tool_rc;
}

// The pod step breakdown: its JSON/CSV/table, and with an output folder every breakdown output.
int RunBreakdown(const AnalyzeFlags& f, const AnalyzeInputs& inputs,
                 const analysis::ReaderOptions& options, const CliEnv& env) {
  const AnalyzeResult result = AnalyzeTraces(inputs, options, static_cast<int>(f.jobs));
  PrintProblems(result, env);
  if (result.hosts.empty()) {
    *env.err << "profctl analyze: no trace could be analysed\n";
    return kExitFailed;
  }
  report::BreakdownContext context;
  context.session = inputs.session.empty() ? "analyze" : inputs.session;
  context.source = report::BreakdownSource::kAnalyze;
  context.snapshot_past_ms = inputs.snapshot_past_ms;
  context.failed_files = result.failed_files;
  LinkHostFiles(inputs, f.out_dir, &context);
  int rc = result.failed_files.empty() ? kExitOk : kExitPartial;
  if (!f.out_dir.empty()) {
    if (absl::Status s = MakeDirs(f.out_dir); !s.ok()) {
      *env.err << "profctl analyze: " << s.message() << "\n";
      return kExitFailed;
    }
    context.report_path = JoinPath(f.out_dir, report::kReportHtmlFile);
    for (const report::BreakdownOutput& out : report::BreakdownOutputs()) {
      if (absl::Status s = WriteFileAtomically(JoinPath(f.out_dir, out.file_name),
                                               out.render(result.breakdown, context));
          !s.ok()) {
        *env.err << "profctl analyze: " << s.message() << "\n";
        rc = kExitPartial;
      }
    }
  }
  if (f.pod_trace) {
    std::vector<std::string> warnings;
    absl::StatusOr<std::string> written = WriteSessionPodTrace(inputs, &result.breakdown, f.out_dir,
                                                               static_cast<int>(f.jobs), &warnings);
    for (const std::string& w : warnings) *env.err << "profctl analyze: warning: " << w << "\n";
    if (!written.ok()) {
      *env.err << "profctl analyze: " << written.status().message() << "\n";
      rc = kExitPartial;
    }
  }
  if (f.json) {
    *env.out << report::BreakdownJson(result.breakdown, context);
  } else if (f.csv) {
    *env.out << report::BreakdownCsv(result.breakdown);
  } else {
    *env.out << report::FormatBreakdownTable(result.breakdown, context);
  }
  return rc;
}

}  // namespace

int AnalyzeCommand(const std::vector<std::string>& args, const CliEnv& env) {
  AnalyzeFlags f;
  if (std::optional<int> rc = ParseAnalyzeFlags(args, env, &f)) return *rc;
  analysis::ReaderOptions options;
  options.step_pattern = f.step_pattern;
  options.max_file_bytes = static_cast<uint64_t>(f.max_file_mb) << 20;
  options.max_inflated_bytes = static_cast<uint64_t>(f.max_inflated_mb) << 20;
  options.max_inflate_ratio = static_cast<uint64_t>(f.max_inflate_ratio);
  options.max_string_bytes = static_cast<uint64_t>(f.max_string_kb) << 10;
  if (absl::Status s = analysis::ValidateReaderOptions(options); !s.ok()) {
    return UsageError(env, "analyze", absl::StrCat("--step-pattern: ", s.message()));
  }
  std::vector<analysis::Tool> tools;
  if (std::optional<int> rc = ResolveTools(f, env, &tools)) return *rc;
  absl::StatusOr<AnalyzeInputs> inputs = ExpandAnalyzeInputs(f.paths);
  if (!inputs.ok()) return UsageError(env, "analyze", inputs.status().message());
  if (f.out_dir.empty()) f.out_dir = inputs->session_dir;
  if (f.pod_trace && (inputs->session_dir.empty() || !tools.empty())) {
    return UsageError(env, "analyze",
                      "--pod-trace needs one saved session folder (its session.json aligns the "
                      "hosts) and no --tool");
  }
  if (!tools.empty()) return RunTools(f, *inputs, options, tools, env);
  return RunBreakdown(f, *inputs, options, env);
}

}  // namespace profctl::coordinator
