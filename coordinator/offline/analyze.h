// profctl analyze: the pod step breakdown, offline, for saved sessions, folders of XSpace files
// (ours, TensorFlow's, JAX's) and PyTorch profiler traces (Kineto JSON, one file per rank).
//
// Each input is read, decoded, summarized and dropped by one of `jobs` worker threads (one per
// core, at most kMaxAutoJobs, by default). XSpace files are streamed through the wire-format
// reader (pread through a 256 KiB buffer, no XSpace built), so memory is about `jobs` decoded
// host traces (24 bytes per event) plus a compact per-step summary per host, whatever the file
// sizes (docs/perf.md). A file that cannot be read or decoded is reported with its path and the
// problem; the other hosts are still analysed. Results do not depend on `jobs`.
#ifndef PROFCTL_COORDINATOR_OFFLINE_ANALYZE_H_
#define PROFCTL_COORDINATOR_OFFLINE_ANALYZE_H_

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "analysis/breakdown.h"
#include "analysis/hang_verdict.h"
#include "analysis/op_classify.h"
#include "analysis/tools/tools.h"
#include "report/json_out.h"

namespace profctl::coordinator {

// One trace file to analyse, with how to read it.
struct TraceInput {
  enum class Format { kXSpace, kKineto };
  std::string path;
  Format format = Format::kXSpace;
  std::string host;       // name to report; Kineto files may rename it from distributedInfo
  int64_t offset_ns = 0;  // agent clock - common clock (from the session's alignment), else 0
};

struct AnalyzeInputs {
  std::vector<TraceInput> files;
  // When the paths were exactly one saved session folder: that folder (outputs go there by
  // default) and its name.
  std::string session_dir;
  std::string session;
  int64_t start_at_ns = 0;  // a session folder: its common start (the pod trace's time 0)
  // A session folder only: every worker of its request, in order (a worker's rank is its
  // position), with the index into `files` of its saved trace (-1: none, a failed host). The
  // hang verdict is judged only over these (analysis/hang_verdict.h).
  struct Worker {
    std::string host;
    int file = -1;
    // Its agent's step signal at the window's end (HostResult.step_signal), when answered.
    std::optional<analysis::StepSignal> signal;
  };
  std::vector<Worker> workers;
  // Files in the folders given that are not read, each with why (not a trace by its name or its
  // first bytes, a subfolder, ...): AnalyzeTraces/AnalyzeTools name each in their warnings.
  struct Skipped {
    std::string path;
    std::string why;
  };
  std::vector<Skipped> skipped;
  // A saved session that is a snapshot (`capture --last`): the past it covers, in ms; else 0.
  int64_t snapshot_past_ms = 0;
};

// Expands the command line's paths: a session folder (session.json: per-host files and aligned
// offsets), a folder of *.xplane.pb / *.pt.trace.json[.gz] / *.trace.json[.gz] files (and of
// other files whose first bytes are a Chrome trace's JSON: an object with "traceEvents" or
// "schemaVersion" in its first 4 KiB; every other entry is listed in `skipped` with why), or
// single files of any name. A file's format is judged by its first bytes (gzip is looked into):
// JSON (an object or array: a Chrome trace, read by the Kineto reader) or a protobuf whose first
// field is an XSpace's (read as an XSpace); by its name when its bytes say neither (the reader
// then names the problem). INVALID_ARGUMENT naming the path for anything else (a missing path,
// a folder with no trace, a file that is neither by content nor by name); a logdir is answered
// with the runs found under plugins/profile/.
absl::StatusOr<AnalyzeInputs> ExpandAnalyzeInputs(const std::vector<std::string>& paths);

struct AnalyzeResult {
  analysis::PodBreakdown breakdown;
  std::vector<std::string> hosts;                // analysed, in order
  std::vector<report::FailedFile> failed_files;  // per file that could not be analysed
  // Per host name claimed by two files (two files of one rank): both files named, and the name
  // the second is reported under. Also in breakdown.warnings.
  std::vector<std::string> warnings;
};

inline constexpr int kMaxAutoJobs = 4;
// The worker count AnalyzeTraces uses: `requested` when > 0, else the cores (at most
// kMaxAutoJobs); never more than the inputs, at least 1.
int AnalyzeJobs(int requested, size_t inputs);

// Reads and summarizes every input on `jobs` threads (0: AnalyzeJobs' default), then builds the
// pod view. Hosts and errors come in input order. For a session folder (`workers` not empty),
// each XSpace's hang record (its collectives) is read in the same pass as its breakdown input
// (analysis/readers/xspace_reader.h DecodeXSpaceHost), and the pod's hang verdict judged as an
// input of the pod's verdicts (breakdown.verdict.hang).
AnalyzeResult AnalyzeTraces(const AnalyzeInputs& inputs, const analysis::ReaderOptions& options,
                            int jobs = 0);

struct AnalyzeToolResult {
  AnalyzeResult breakdown;                // the step breakdown of the same inputs
  std::vector<analysis::PodTools> tools;  // one per requested tool, in request order; hosts in
                                          // the order of breakdown.hosts
  // Per host of breakdown.hosts: the input it came from (index into AnalyzeInputs::files) and
  // the rank its trace states (Kineto distributedInfo.rank; -1: none).
  std::vector<size_t> host_inputs;
  std::vector<int64_t> ranks;
};

// Called on the worker thread with each input's index and its detail trace, once its tools are
// computed and before the trace is dropped: something more to take from it (the diff's copies
// and memsets). Calls for different inputs run concurrently.
using DetailVisitor = std::function<void(size_t input, const analysis::ToolTrace& trace)>;

// `profctl analyze --tool=...`: as AnalyzeTraces, and per input also the opt-in detail trace
// (tool_readers.h), reduced to each of `tools`' per-host results on the worker thread and dropped
// there (one detail read per file, whatever the number of tools). Costs more than AnalyzeTraces:
// each file is also decoded whole (docs/tools.md "Cost").
AnalyzeToolResult AnalyzeTools(const AnalyzeInputs& inputs, const analysis::ReaderOptions& options,
                               const std::vector<analysis::Tool>& tools, int jobs = 0,
                               const DetailVisitor& visit = nullptr);

// `profctl analyze --pod-trace`: the pod trace of a session folder (pod.perfetto-trace.gz, as the
// capture writes it: every saved host aligned with the session's offsets, times from its
// common start, the pod's step track from `breakdown` when not null) into `out_dir`, its hosts
// rendered on `jobs` threads (0: AnalyzeJobs' default). Returns the file's path; a host that
// cannot be read is left out and named in *warnings. INVALID_ARGUMENT when `inputs` is not one
// session folder (loose files have no common timeline).
absl::StatusOr<std::string> WriteSessionPodTrace(const AnalyzeInputs& inputs,
                                                 const analysis::PodBreakdown* breakdown,
                                                 const std::string& out_dir, int jobs,
                                                 std::vector<std::string>* warnings);

}  // namespace profctl::coordinator

#endif  // PROFCTL_COORDINATOR_OFFLINE_ANALYZE_H_
