#include "coordinator/offline/analyze.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <memory>
#include <optional>
#include <thread>
#include <utility>

#include "absl/algorithm/container.h"
#include "absl/container/flat_hash_map.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "analysis/hang_verdict.h"
#include "analysis/readers/kineto_reader.h"
#include "analysis/readers/trace_file.h"
#include "analysis/readers/xspace_reader.h"
#include "analysis/tools/tool_readers.h"
#include "common/byte_source.h"
#include "common/executor.h"
#include "common/file_util.h"
#include "common/gzip.h"
#include "common/status_macros.h"
#include "coordinator/engine/pod_outputs.h"
#include "coordinator/engine/step_signal.h"
#include "coordinator/session/session_writer.h"
#include "google/protobuf/util/json_util.h"
#include "profctl/v1/session.pb.h"

namespace profctl::coordinator {
namespace {

using Format = TraceInput::Format;

constexpr absl::string_view kXPlaneSuffix = ".xplane.pb";

// Which files are traces, by name: one table, so a new reader is one line here.
struct TraceKind {
  absl::string_view suffix;
  Format format;
};
constexpr TraceKind kTraceKinds[] = {
    {kXPlaneSuffix, Format::kXSpace},       {".pt.trace.json", Format::kKineto},
    {".pt.trace.json.gz", Format::kKineto}, {".trace.json", Format::kKineto},
    {".trace.json.gz", Format::kKineto},
};

const TraceKind* KindOf(absl::string_view name) {
  for (const TraceKind& k : kTraceKinds) {
    if (absl::EndsWith(name, k.suffix) && name.size() > k.suffix.size()) return &k;
  }
  return nullptr;
}

std::string Basename(absl::string_view path) {
  while (absl::EndsWith(path, "/") && path.size() > 1) path.remove_suffix(1);
  const size_t slash = path.rfind('/');
  return std::string(slash == absl::string_view::npos ? path : path.substr(slash + 1));
}

bool IsDir(const std::string& path) {
  struct stat st {};
  return stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

std::vector<std::string> ListDir(const std::string& dir) {
  std::vector<std::string> names;
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d)) {
      const std::string name = e->d_name;
      if (name != "." && name != "..") names.push_back(name);
    }
    closedir(d);
  }
  std::sort(names.begin(), names.end());
  return names;
}

// How many of a file's first bytes ContentFormat looks at (inflated, when gzipped).
constexpr size_t kSniffBytes = 4096;

// The format `head` (a file's first bytes) shows, if any: JSON text (an object or array, after
// blanks and a UTF-8 byte order mark) is a Chrome trace; a protobuf starting with one of an
// XSpace's fields (planes, errors, warnings, hostnames: tags 0x0a, 0x12, 0x1a, 0x22) an XSpace.
// JSON is tried first and strictly ('{' then '"' or '}', '[' then '{' or ']'), so an XSpace
// whose first plane is 91 or 123 bytes long (0x0a then '[' or '{') is not taken for JSON.
std::optional<Format> ContentFormat(absl::string_view head) {
  absl::string_view text = head;
  absl::ConsumePrefix(&text, "\xEF\xBB\xBF");
  text = absl::StripLeadingAsciiWhitespace(text);
  if (!text.empty() && (text[0] == '{' || text[0] == '[')) {
    const absl::string_view next = absl::StripLeadingAsciiWhitespace(text.substr(1));
    const bool object = text[0] == '{';
    if (next.empty() || next[0] == (object ? '"' : '{') || next[0] == (object ? '}' : ']')) {
      return Format::kKineto;
    }
  }
  if (!head.empty()) {
    const auto tag = static_cast<unsigned char>(head[0]);
    if (tag == 0x0a || tag == 0x12 || tag == 0x1a || tag == 0x22) return Format::kXSpace;
  }
  return std::nullopt;
}

// The format of the file at `path` by its first bytes (gzip inflated first: only JSON is read
// gzipped); nullopt when they say neither or cannot be read (the reader then names why).
std::optional<Format> SniffFile(const std::string& path) {
  absl::StatusOr<UniqueFd> fd = OpenRegularFile(path);
  if (!fd.ok()) return std::nullopt;
  std::string head(kSniffBytes, '\0');
  const ssize_t n = pread(fd->get(), head.data(), head.size(), 0);
  if (n <= 0) return std::nullopt;
  head.resize(static_cast<size_t>(n));
  if (head.size() >= 2 && head[0] == '\x1f' && head[1] == '\x8b') {
    absl::StatusOr<std::string> text = GzipInflatePrefix(head, kSniffBytes);
    if (!text.ok()) return std::nullopt;
    const std::optional<Format> format = ContentFormat(*text);
    if (format == Format::kKineto) return format;
    return std::nullopt;
  }
  return ContentFormat(head);
}

TraceInput InputFor(const std::string& path, Format format) {
  TraceInput in;
  in.path = path;
  in.format = format;
  const std::string base = Basename(path);
  if (format == Format::kKineto) {
    in.host = analysis::KinetoFileStem(path);
  } else if (absl::EndsWith(base, kXPlaneSuffix) && base.size() > kXPlaneSuffix.size()) {
    in.host = base.substr(0, base.size() - kXPlaneSuffix.size());
  } else if (absl::EndsWith(base, ".pb") && base.size() > 3) {
    in.host = base.substr(0, base.size() - 3);
  } else {
    in.host = base;
  }
  return in;
}

// `path` as its content says, else as its name says (nullptr kind: none).
std::optional<TraceInput> InputByContent(const std::string& path, const TraceKind* kind) {
  std::optional<Format> format = SniffFile(path);
  if (!format && kind != nullptr) format = kind->format;
  if (!format) return std::nullopt;
  return InputFor(path, *format);
}

// A folder's file whose name is no trace's: read when its first bytes are a Chrome trace's JSON
// (an object or array with "traceEvents" or "schemaVersion" in them: PyTorch's traces under any
// name); else nullopt and *why says what it is.
std::optional<TraceInput> UnnamedTrace(const std::string& path, std::string* why) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) {
    *why = "cannot be read";
    return std::nullopt;
  }
  if (S_ISDIR(st.st_mode)) {
    *why = "a folder: analyze reads the files of the folders it is given, not their subfolders";
    return std::nullopt;
  }
  if (!S_ISREG(st.st_mode)) {
    *why = absl::StrCat(FileTypeName(st.st_mode), ", not a regular file");
    return std::nullopt;
  }
  if (st.st_size == 0) {
    *why = "empty";
    return std::nullopt;
  }
  std::string head(kSniffBytes, '\0');
  absl::StatusOr<UniqueFd> fd = OpenRegularFile(path);
  const ssize_t n = fd.ok() ? pread(fd->get(), head.data(), head.size(), 0) : -1;
  if (n <= 0) {
    *why = "cannot be read";
    return std::nullopt;
  }
  head.resize(static_cast<size_t>(n));
  if (head.size() >= 2 && head[0] == '\x1f' && head[1] == '\x8b') {
    absl::StatusOr<std::string> text = GzipInflatePrefix(head, kSniffBytes);
    if (!text.ok()) {
      *why = "gzip that does not inflate";
      return std::nullopt;
    }
    head = *std::move(text);
  }
  if (ContentFormat(head) != Format::kKineto) {
    *why =
        "not a trace by its name (*.xplane.pb, *.pt.trace.json[.gz], *.trace.json[.gz]) or its "
        "first bytes (a Chrome trace's JSON)";
    return std::nullopt;
  }
  if (!absl::StrContains(head, "\"traceEvents\"") &&
      !absl::StrContains(head, "\"schemaVersion\"")) {
    *why = absl::StrCat(
        "JSON, but not a Chrome trace: no \"traceEvents\" or \"schemaVersion\" in its first ",
        kSniffBytes / 1024, " KiB");
    return std::nullopt;
  }
  return InputFor(path, Format::kKineto);
}

absl::Status AddSession(const std::string& dir, AnalyzeInputs* out) {
  const std::string manifest = JoinPath(dir, kManifestFileName);
  absl::StatusOr<std::string> json = ReadManifestFile(manifest);
  if (!json.ok()) return json.status();
  profctl::v1::SessionManifest m;
  google::protobuf::util::JsonParseOptions options;
  options.ignore_unknown_fields = true;  // newer profctl versions may add fields
  if (!google::protobuf::util::JsonStringToMessage(*json, &m, options).ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(JoinPath(dir, kManifestFileName), ": not a profctl session manifest"));
  }
  out->session_dir = dir;
  out->session = m.request().session().empty() ? Basename(dir) : m.request().session();
  out->snapshot_past_ms = static_cast<int64_t>(m.request().past_ms());
  out->start_at_ns = m.start_at_ns();
  // A session left RUNNING (its coordinator was killed, or is still at it) lists hosts as of its
  // last snapshot, which lags: a host with a trace under its name counts too (the trace is only
  // ever renamed into place once validated; one that does not read is named as an error).
  const bool unfinished = m.status() == profctl::v1::SESSION_STATUS_RUNNING;
  for (auto& h : *m.mutable_hosts()) {
    if (unfinished && h.status() != profctl::v1::HOST_STATUS_FAILED && h.xplane_file().empty() &&
        ValidateFileStem("host", h.host()).ok() &&
        PathExists(JoinPath(dir, XPlaneFileName(h.host())))) {
      h.set_status(profctl::v1::HOST_STATUS_OK);
      h.set_xplane_file(XPlaneFileName(h.host()));
    }
    const bool saved = h.status() == profctl::v1::HOST_STATUS_OK ||
                       h.status() == profctl::v1::HOST_STATUS_INCOMPLETE;
    if (!saved || h.xplane_file().empty()) continue;
    // profctl writes plain names (session_writer.h XPlaneFileName); an edited or foreign manifest
    // must not send analyze out of the folder ("../../x") or into subfolders (found by
    // fuzz/session_manifest_fuzzer.cc).
    const std::string& file = h.xplane_file();
    if (absl::StrContains(file, '/') || file == "." || file == "..") {
      return absl::InvalidArgumentError(
          absl::StrCat(JoinPath(dir, kManifestFileName), ": host '", h.host(), "' names file '",
                       file, "', which is not a file name in the session folder"));
    }
    TraceInput in;
    in.path = JoinPath(dir, h.xplane_file());
    in.format = Format::kXSpace;
    in.host = h.host();
    in.offset_ns = h.clock().offset_ns();  // the session's alignment
    out->files.push_back(std::move(in));
  }
  // The workers in the request's order, each with its saved trace, for the hang verdict.
  std::vector<bool> taken(out->files.size(), false);
  for (const std::string& address : m.request().workers()) {
    AnalyzeInputs::Worker& w = out->workers.emplace_back();
    w.host = address;
    for (const profctl::v1::HostResult& h : m.hosts()) {
      if (h.address() != address) continue;
      w.host = h.host();
      w.signal = HangSignalOf(h.step_signal());
      for (size_t i = 0; i < out->files.size(); ++i) {
        if (taken[i] || out->files[i].host != h.host()) continue;
        taken[i] = true;
        w.file = static_cast<int>(i);
        break;
      }
      break;
    }
  }
  if (out->files.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(dir, ": the session saved no host's trace (see its session.json)"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<AnalyzeInputs> ExpandAnalyzeInputs(const std::vector<std::string>& paths) {
  if (paths.empty()) return absl::InvalidArgumentError("no path given");
  AnalyzeInputs out;
  for (const std::string& path : paths) {
    if (IsDir(path)) {
      if (PathExists(JoinPath(path, kManifestFileName))) {
        if (paths.size() > 1) {
          return absl::InvalidArgumentError(absl::StrCat(
              path, " is a saved session: analyse it on its own (its offsets align its hosts)"));
        }
        absl::Status s = AddSession(path, &out);
        if (!s.ok()) return s;
        continue;
      }
      size_t found = 0;
      for (const std::string& name : ListDir(path)) {
        const std::string file = JoinPath(path, name);
        if (const TraceKind* kind = KindOf(name)) {
          out.files.push_back(InputByContent(file, kind).value_or(InputFor(file, kind->format)));
          ++found;
        } else if (std::string why; std::optional<TraceInput> in = UnnamedTrace(file, &why)) {
          out.files.push_back(*std::move(in));
          ++found;
        } else {
          out.skipped.push_back({file, std::move(why)});
        }
      }
      if (found == 0) {
        const std::string runs_dir = JoinPath(path, "plugins/profile");
        if (IsDir(runs_dir)) {
          return absl::InvalidArgumentError(
              absl::StrCat(path, " is a logdir: pass one run folder, e.g. ", runs_dir,
                           "/<run>; runs: ", absl::StrJoin(ListDir(runs_dir), ", ")));
        }
        return absl::InvalidArgumentError(absl::StrCat(
            path, ": no *.xplane.pb or *.pt.trace.json[.gz] files and no session.json"));
      }
      continue;
    }
    if (!PathExists(path)) return absl::InvalidArgumentError(absl::StrCat(path, ": no such file"));
    if (absl::StatusOr<UniqueFd> file = OpenRegularFile(path); !file.ok()) return file.status();
    std::optional<TraceInput> in = InputByContent(path, KindOf(Basename(path)));
    if (!in) {
      return absl::InvalidArgumentError(absl::StrCat(
          path,
          ": not a trace file profctl reads: its first bytes are neither an XSpace protobuf "
          "(*.xplane.pb) nor a Chrome-trace JSON (PyTorch's *.pt.trace.json[.gz], trace.json)"));
    }
    out.files.push_back(*std::move(in));
  }
  return out;
}

int AnalyzeJobs(int requested, size_t inputs) {
  int jobs = requested;
  if (jobs <= 0) {
    jobs = std::clamp(static_cast<int>(std::thread::hardware_concurrency()), 1, kMaxAutoJobs);
  }
  return std::max(1, std::min(jobs, static_cast<int>(std::max<size_t>(inputs, 1))));
}

namespace {

// One input, read and summarized, with its hang record when `hang` is set (a session folder's
// XSpace files, in the same pass): the bytes and the decoded trace are dropped on return.
// `kineto_threads`: 2 reads and inflates a Kineto file on a second thread while this one parses
// (when cores are spare), 1 does it all here.
struct InputSummary {
  analysis::HostSummary summary;
  std::optional<analysis::RankCollectives> collectives;
};
absl::StatusOr<InputSummary> SummarizeInput(const TraceInput& in,
                                            const analysis::ReaderOptions& options,
                                            int kineto_threads, const analysis::StepMatcher* hang) {
  InputSummary out;
  absl::StatusOr<analysis::HostTrace> trace = [&]() -> absl::StatusOr<analysis::HostTrace> {
    if (in.format == Format::kKineto) {
      // Parsed as it is read and inflated, under the caps: the text is never held whole, so a
      // hostile file costs no more than a valid one.
      return analysis::ReadKinetoTraceFromPath(in.path, in.offset_ns, options, kineto_threads);
    }
    // Streamed from the file (pread through a small buffer): no whole-file copy, no XSpace.
    if (absl::Status s = analysis::CheckTraceFileSize(in.path, options); !s.ok()) return s;
    absl::StatusOr<std::unique_ptr<FileByteSource>> file = FileByteSource::OpenFile(in.path);
    if (!file.ok()) return file.status();
    if (hang == nullptr) return analysis::ReadXSpaceHost(**file, in.host, in.offset_ns, options);
    absl::StatusOr<analysis::HostDecode> decoded = analysis::DecodeXSpaceHost(
        **file, in.host, in.offset_ns, *hang, {.breakdown = true, .collectives = true});
    if (!decoded.ok()) return decoded.status();
    if (decoded->trace.ok()) out.collectives = std::move(decoded->collectives);
    return std::move(decoded->trace);
  }();
  if (!trace.ok()) return trace.status();
  out.summary = analysis::SummarizeHost(*std::move(trace));
  return out;
}

}  // namespace

namespace {

// A failed input: its path and the reader's message without the path it may start with.
report::FailedFile Failed(const TraceInput& in, const absl::Status& status) {
  absl::string_view why = status.message();
  absl::ConsumePrefix(&why, absl::StrCat(in.path, ": "));
  return {in.path, std::string(why)};
}

// Gives each analysed file a distinct host name, in input order: a name another file already
// took (two files of one rank, or two hosts of one name) gets "-2", "-3", ..., with a warning
// naming both files, so neither is lost and nobody is misled.
class HostNamer {
 public:
  std::string Name(const std::string& host, const std::string& path,
                   std::vector<std::string>* warnings) {
    const auto [first, inserted] = taken_.emplace(host, path);
    if (inserted) return host;
    const std::string first_path = first->second;  // emplace below may move it
    std::string renamed = host;
    for (int k = 2; taken_.contains(renamed); ++k) renamed = absl::StrCat(host, "-", k);
    taken_.emplace(renamed, path);
    warnings->push_back(absl::StrCat("two files claim host ", host, ": ", first_path, " and ", path,
                                     " (the same rank twice?); the second is reported as ",
                                     renamed));
    return renamed;
  }

 private:
  absl::flat_hash_map<std::string, std::string> taken_;  // host -> the file that took it
};

// Each file the inputs' folders held and analyze did not read, with why, as a warning.
void AddSkipped(const AnalyzeInputs& inputs, std::vector<std::string>* warnings) {
  for (const AnalyzeInputs::Skipped& s : inputs.skipped) {
    warnings->push_back(absl::StrCat("skipped ", s.path, ": ", s.why));
  }
}

struct HostToolInput {
  analysis::HostSummary summary;
  std::vector<analysis::HostTools> tools;  // per requested tool
  int64_t rank = -1;                       // HostTrace::rank
};

// One input, read twice (the breakdown's reader and the tools' reader), summarized and reduced.
absl::StatusOr<HostToolInput> ToolInput(size_t index, const TraceInput& in,
                                        const analysis::ReaderOptions& options,
                                        const std::vector<analysis::Tool>& tools,
                                        const DetailVisitor& visit) {
  // Read under the caps (a Kineto file's text inflated and its strings checked as it is read).
  absl::StatusOr<std::string> bytes = in.format == Format::kKineto
                                          ? analysis::ReadKinetoTraceText(in.path, options)
                                          : analysis::ReadTraceFile(in.path, options);
  if (!bytes.ok()) return bytes.status();
  absl::StatusOr<analysis::HostTrace> trace =
      in.format == Format::kKineto
          ? analysis::ReadKinetoTraceFile(*bytes, in.path, in.offset_ns, options)
          : analysis::ReadXSpaceHost(StringByteSource(*bytes), in.host, in.offset_ns, options);
  if (!trace.ok()) return trace.status();
  HostToolInput out;
  out.rank = trace->rank;
  out.summary = analysis::SummarizeHost(*std::move(trace));  // the events go before the detail
  // A Kineto file's bytes are handed over: parsed in place, no copy beside them.
  absl::StatusOr<analysis::ToolTrace> detail =
      in.format == Format::kKineto
          ? analysis::ReadKinetoToolsFileOwned(*std::move(bytes), in.path, in.offset_ns, options)
          : analysis::ReadXSpaceToolsBytes(*bytes, in.host, in.offset_ns, options);
  if (!detail.ok()) return detail.status();
  for (const analysis::Tool tool : tools) {
    out.tools.push_back(analysis::ComputeHostTools(tool, *detail, out.summary));
  }
  if (visit) visit(index, *detail);
  return out;
}

}  // namespace

AnalyzeToolResult AnalyzeTools(const AnalyzeInputs& inputs, const analysis::ReaderOptions& options,
                               const std::vector<analysis::Tool>& tools, int jobs,
                               const DetailVisitor& visit) {
  const size_t n = inputs.files.size();
  std::vector<std::optional<absl::StatusOr<HostToolInput>>> done(n);
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t i = next.fetch_add(1); i < n; i = next.fetch_add(1)) {
      done[i] = ToolInput(i, inputs.files[i], options, tools, visit);
    }
  };
  {
    std::vector<std::thread> workers;
    for (int w = 1; w < AnalyzeJobs(jobs, n); ++w) workers.emplace_back(work);
    work();
    for (std::thread& t : workers) t.join();
  }
  AnalyzeToolResult result;
  std::vector<analysis::HostSummary> summaries;
  std::vector<std::vector<analysis::HostTools>> hosts(tools.size());
  HostNamer namer;
  for (size_t i = 0; i < n; ++i) {
    absl::StatusOr<HostToolInput>& in = *done[i];
    if (!in.ok()) {
      result.breakdown.failed_files.push_back(Failed(inputs.files[i], in.status()));
      continue;
    }
    // Named as AnalyzeTraces names them.
    const std::string host =
        namer.Name(in->summary.host, inputs.files[i].path, &result.breakdown.warnings);
    in->summary.host = host;
    for (size_t t = 0; t < tools.size(); ++t) {
      analysis::HostTools& h = in->tools[t];
      h.host = host;
      h.overview.host = host;
      h.input.host = host;
      for (analysis::DeviceMemory& m : h.memory) m.host = host;
      hosts[t].push_back(std::move(h));
    }
    result.breakdown.hosts.push_back(host);
    result.host_inputs.push_back(i);
    result.ranks.push_back(in->rank);
    summaries.push_back(std::move(in->summary));
  }
  AddSkipped(inputs, &result.breakdown.warnings);
  result.breakdown.breakdown = analysis::BuildPodBreakdown(summaries);
  absl::c_copy(result.breakdown.warnings, std::back_inserter(result.breakdown.breakdown.warnings));
  for (size_t t = 0; t < tools.size(); ++t) {
    result.tools.push_back(
        analysis::BuildPodTools(tools[t], std::move(hosts[t]), result.breakdown.breakdown));
  }
  return result;
}

AnalyzeResult AnalyzeTraces(const AnalyzeInputs& inputs, const analysis::ReaderOptions& options,
                            int jobs) {
  const size_t n = inputs.files.size();
  std::vector<std::optional<absl::StatusOr<InputSummary>>> done(n);
  // The hang verdict's record of each input (a session folder's XSpace files only), read in the
  // same pass as its summary.
  std::optional<analysis::StepMatcher> matcher;
  if (!inputs.workers.empty()) {
    absl::StatusOr<analysis::StepMatcher> m = analysis::StepMatcher::Create(options.step_pattern);
    if (m.ok()) matcher = *std::move(m);
  }
  std::vector<std::optional<analysis::RankCollectives>> collectives(n);
  // Workers take the next input in order; results land in input order. A Kineto file is read
  // and inflated on a thread of its own only when the workers leave a core for it.
  const int workers_n = AnalyzeJobs(jobs, n);
  const int kineto_threads =
      workers_n < static_cast<int>(std::thread::hardware_concurrency()) ? 2 : 1;
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t i = next.fetch_add(1); i < n; i = next.fetch_add(1)) {
      done[i] = SummarizeInput(inputs.files[i], options, kineto_threads,
                               matcher.has_value() ? &*matcher : nullptr);
    }
  };
  {
    std::vector<std::thread> workers;
    for (int w = 1; w < workers_n; ++w) workers.emplace_back(work);
    work();
    for (std::thread& t : workers) t.join();
  }

  AnalyzeResult result;
  std::vector<analysis::HostSummary> summaries;
  HostNamer namer;
  for (size_t i = 0; i < n; ++i) {
    absl::StatusOr<InputSummary>& input = *done[i];
    if (!input.ok()) {
      result.failed_files.push_back(Failed(inputs.files[i], input.status()));
      continue;
    }
    collectives[i] = std::move(input->collectives);
    analysis::HostSummary* summary = &input->summary;
    // Two ranks' files may name the same host (same stem, same rank): keep both, apart, warned.
    const std::string host = namer.Name(summary->host, inputs.files[i].path, &result.warnings);
    summary->host = host;
    result.hosts.push_back(host);
    summaries.push_back(std::move(*summary));
  }
  AddSkipped(inputs, &result.warnings);
  // The hang verdict is an input of the breakdown's verdicts.
  analysis::PodInputs pod_inputs;
  if (matcher.has_value()) {
    std::vector<analysis::HangRankInput> ranks;
    for (const AnalyzeInputs::Worker& w : inputs.workers) {
      analysis::HangRankInput& r = ranks.emplace_back();
      r.host = w.host;
      r.rank = static_cast<int64_t>(ranks.size()) - 1;
      if (w.file < 0 || static_cast<size_t>(w.file) >= n) continue;
      r.offset_ns = inputs.files[static_cast<size_t>(w.file)].offset_ns;
      r.signal = w.signal;  // as the capture judged: saved hosts' signals only
      r.trace = std::move(collectives[static_cast<size_t>(w.file)]);
    }
    pod_inputs.hang = analysis::JudgeHang(ranks);
  }
  result.breakdown = analysis::BuildPodBreakdown(summaries, pod_inputs);
  absl::c_copy(result.warnings, std::back_inserter(result.breakdown.warnings));
  return result;
}

absl::StatusOr<std::string> WriteSessionPodTrace(const AnalyzeInputs& inputs,
                                                 const analysis::PodBreakdown* breakdown,
                                                 const std::string& out_dir, int jobs,
                                                 std::vector<std::string>* warnings) {
  if (inputs.session_dir.empty()) {
    return absl::InvalidArgumentError(
        "--pod-trace needs one saved session folder (its session.json aligns the hosts)");
  }
  PROFCTL_RETURN_IF_ERROR(MakeDirs(out_dir));
  std::vector<PodTraceHost> hosts;
  hosts.reserve(inputs.files.size());
  for (const TraceInput& in : inputs.files) {
    hosts.push_back({in.host, in.offset_ns, in.path, [path = in.path] { return ReadFile(path); },
                     nullptr, nullptr, ""});
  }
  const std::string path = JoinPath(out_dir, kPodTraceFileName);
  ThreadWorkPool pool(AnalyzeJobs(jobs, hosts.size()));
  PodTraceOutcome outcome = WritePodTraceFile(std::move(hosts), path, inputs.start_at_ns, &pool,
                                              nullptr, [breakdown] { return breakdown; });
  for (std::string& e : outcome.errors) {
    if (outcome.written) warnings->push_back(std::move(e));
  }
  if (!outcome.written) {
    return absl::InternalError(outcome.errors.empty() ? std::string("pod trace not written")
                                                      : outcome.errors.back());
  }
  return path;
}

}  // namespace profctl::coordinator
