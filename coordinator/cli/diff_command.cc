// `profctl diff A B`: what changed between two captures (saved sessions, folders or trace files
// of any source `analyze` reads), of one run or two: what changed most, per paired host and for
// the pod the change in time per step of each category, the steps, the straggler and its cause,
// the kernels (with the copies and memsets) and ops whose time changed most.
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "analysis/tools/diff.h"
#include "common/file_util.h"
#include "common/flags.h"
#include "coordinator/cli/command.h"
#include "coordinator/offline/analyze.h"
#include "report/diff_writers.h"

namespace profctl::coordinator {

namespace {

struct DiffFlags {
  bool json = false;
  bool csv = false;
  std::string html;
  std::string step_pattern{analysis::kDefaultStepPattern};
  int64_t jobs = 0;
  int64_t top = 10;
  std::vector<std::string> paths;
};

std::optional<int> ParseDiffFlags(const std::vector<std::string>& args, const CliEnv& env,
                                  DiffFlags* f) {
  FlagSet fs("profctl diff",
             "A B [--json|--csv] [--html=FILE] [--top=N] [--step-pattern=RE] [--jobs=N]");
  fs.Bool("json", &f->json, "print the diff as JSON on stdout instead of the table");
  fs.Bool("csv", &f->csv, "print the diff as CSV (one row per value) on stdout");
  fs.String("html", &f->html,
            "also write the diff as a self-contained HTML page to FILE (a new file, or a regular "
            "file it may write: never a device, FIFO, directory or link)");
  fs.Int64("top", &f->top, "kernels and ops listed: those whose time per step changed most");
  fs.String("step-pattern", &f->step_pattern,
            "RE2 pattern naming step markers (NVTX ranges, annotations); group 1 = step number");
  fs.Int64(
      "jobs", &f->jobs,
      absl::StrCat("hosts read at once per side (0: one per core, at most ", kMaxAutoJobs, ")"));
  fs.RejectEmpty("step-pattern");
  fs.RejectEmpty("html");
  if (absl::Status s = fs.Parse(args); !s.ok()) return UsageError(env, "diff", s.message());
  if (fs.help_requested()) {
    *env.out << fs.Help()
             << "\nA, B: each a saved session folder, a folder of trace files (*.xplane.pb, "
                "*.pt.trace.json[.gz]) or one such file, as `profctl analyze` reads them. Hosts "
                "are paired by rank (Kineto distributedInfo) and name; when none pair, one to "
                "one when each side has one host, else by role (the name without its numbers), "
                "else by position; a host left unpaired is listed on its side. The first line "
                "says what changed most. Changes are B - A, per step (docs/tools.md \"profctl "
                "diff\").\n";
    return kExitOk;
  }
  if (f->json && f->csv) return UsageError(env, "diff", "--json and --csv exclude each other");
  if (f->jobs < 0 || f->jobs > 256) {
    return UsageError(env, "diff", absl::StrCat("--jobs=", f->jobs, ": must be 0..256"));
  }
  if (f->top < 0 || f->top > 10000) {
    return UsageError(env, "diff", absl::StrCat("--top=", f->top, ": must be 0..10000"));
  }
  // Before any trace is read: the page only ever replaces a regular file we may write.
  if (!f->html.empty()) {
    if (absl::Status s = CheckReplaceable(f->html); !s.ok()) {
      return UsageError(env, "diff", absl::StrCat("--html: ", s.message()));
    }
  }
  f->paths = fs.positional();
  if (f->paths.size() != 2) {
    return UsageError(env, "diff",
                      absl::StrCat("give two captures to compare, A and B (got ", f->paths.size(),
                                   f->paths.size() == 1 ? " path" : " paths", ")"));
  }
  return std::nullopt;
}

}  // namespace

int DiffCommand(const std::vector<std::string>& args, const CliEnv& env) {
  DiffFlags f;
  if (std::optional<int> rc = ParseDiffFlags(args, env, &f)) return *rc;
  analysis::ReaderOptions options;
  options.step_pattern = f.step_pattern;
  if (absl::Status s = analysis::ValidateReaderOptions(options); !s.ok()) {
    return UsageError(env, "diff", absl::StrCat("--step-pattern: ", s.message()));
  }
  const char* const side_names[] = {"A", "B"};
  std::vector<AnalyzeInputs> inputs;
  for (size_t i = 0; i < 2; ++i) {
    absl::StatusOr<AnalyzeInputs> in = ExpandAnalyzeInputs({f.paths[i]});
    if (!in.ok()) {
      return UsageError(env, "diff", absl::StrCat(side_names[i], ": ", in.status().message()));
    }
    inputs.push_back(*std::move(in));
  }
  const std::vector<analysis::Tool> tools = {analysis::Tool::kKernelStats,
                                             analysis::Tool::kOpStats};
  std::vector<AnalyzeToolResult> results;
  // Per side: the copies and memsets of each input's trace (by input), then of the pod.
  std::vector<std::vector<analysis::DeviceTransferStat>> transfers(2);
  int rc = kExitOk;
  for (size_t i = 0; i < 2; ++i) {
    std::vector<std::vector<analysis::DeviceTransferStat>> by_input(inputs[i].files.size());
    // Each call writes its own input's slot.
    results.push_back(AnalyzeTools(inputs[i], options, tools, static_cast<int>(f.jobs),
                                   [&by_input](size_t input, const analysis::ToolTrace& trace) {
                                     by_input[input] = analysis::ComputeDeviceTransfers(trace);
                                   }));
    std::vector<std::vector<analysis::DeviceTransferStat>> hosts;
    for (const size_t input : results.back().host_inputs) hosts.push_back(by_input[input]);
    transfers[i] = analysis::MergeDeviceTransfers(hosts);
    const AnalyzeResult& r = results.back().breakdown;
    for (const report::FailedFile& e : r.failed_files) {
      *env.err << "profctl diff: " << side_names[i] << ": " << e.path << ": " << e.error << "\n";
      rc = kExitPartial;
    }
    for (const std::string& w : r.warnings) {
      *env.err << "profctl diff: " << side_names[i] << ": warning: " << w << "\n";
    }
    if (r.hosts.empty()) {
      *env.err << "profctl diff: " << side_names[i] << ": no trace could be analysed in "
               << f.paths[i] << "\n";
      return kExitFailed;
    }
  }
  auto side = [&](size_t i) {
    const AnalyzeToolResult& r = results[i];
    return analysis::DiffInput{.breakdown = &r.breakdown.breakdown,
                               .has_tools = true,
                               .kernels = r.tools[0].kernels,
                               .ops = r.tools[1].ops.by_op,
                               .transfers = transfers[i],
                               .ranks = r.ranks};
  };
  const analysis::Diff diff =
      analysis::ComputeDiff(side(0), side(1), {.top_n = static_cast<size_t>(f.top)});
  const report::DiffContext context{.a = f.paths[0], .b = f.paths[1]};
  if (!f.html.empty()) {
    if (absl::Status s = WriteFileAtomically(f.html, report::DiffHtml(diff, context)); !s.ok()) {
      *env.err << "profctl diff: --html=" << f.html << ": " << s.message() << "\n";
      rc = kExitFailed;
    }
  }
  if (f.json) {
    *env.out << report::DiffJson(diff, context);
  } else if (f.csv) {
    *env.out << report::DiffCsv(diff);
  } else {
    *env.out << report::FormatDiffTable(diff, context);
    if (!f.html.empty() && rc != kExitFailed) *env.out << "report: " << f.html << "\n";
  }
  return rc;
}

}  // namespace profctl::coordinator
