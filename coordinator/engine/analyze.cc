#include "coordinator/engine/analyze.h"

#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <memory>
#include <optional>
#include <thread>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "analysis/readers/kineto_reader.h"
#include "analysis/readers/xspace_reader.h"
#include "analysis/tools/tool_readers.h"
#include "common/byte_source.h"
#include "common/file_util.h"
#include "coordinator/engine/session_writer.h"
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

TraceInput InputFor(const std::string& path, const TraceKind& kind) {
  TraceInput in;
  in.path = path;
  in.format = kind.format;
  const std::string base = Basename(path);
  in.host = kind.format == Format::kXSpace ? base.substr(0, base.size() - kXPlaneSuffix.size())
                                           : analysis::KinetoFileStem(path);
  return in;
}

absl::Status AddSession(const std::string& dir, AnalyzeInputs* out) {
  absl::StatusOr<std::string> json = ReadFile(JoinPath(dir, kManifestFileName));
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
        if (const TraceKind* kind = KindOf(name)) {
          out.files.push_back(InputFor(JoinPath(path, name), *kind));
          ++found;
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
    const TraceKind* kind = KindOf(Basename(path));
    if (kind == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(
          path, ": not a trace file profctl reads (*.xplane.pb, *.pt.trace.json[.gz])"));
    }
    out.files.push_back(InputFor(path, *kind));
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

// One input, read and summarized: the bytes and the decoded trace are dropped on return.
absl::StatusOr<analysis::HostSummary> SummarizeInput(const TraceInput& in,
                                                     const analysis::ReaderOptions& options) {
  absl::StatusOr<analysis::HostTrace> trace = [&]() -> absl::StatusOr<analysis::HostTrace> {
    if (in.format == Format::kKineto) {
      absl::StatusOr<std::string> bytes = ReadFile(in.path);
      if (!bytes.ok()) return bytes.status();
      return analysis::ReadKinetoTraceFile(*bytes, in.path, in.offset_ns, options);
    }
    // Streamed from the file (pread through a small buffer): no whole-file copy, no XSpace.
    absl::StatusOr<std::unique_ptr<FileByteSource>> file = FileByteSource::OpenFile(in.path);
    if (!file.ok()) return file.status();
    return analysis::ReadXSpaceHost(**file, in.host, in.offset_ns, options);
  }();
  if (!trace.ok()) return trace.status();
  return analysis::SummarizeHost(*std::move(trace));
}

}  // namespace

namespace {

struct HostToolInput {
  analysis::HostSummary summary;
  std::vector<analysis::HostTools> tools;  // per requested tool
};

// One input, read twice (the breakdown's reader and the tools' reader), summarized and reduced.
absl::StatusOr<HostToolInput> ToolInput(const TraceInput& in,
                                        const analysis::ReaderOptions& options,
                                        const std::vector<analysis::Tool>& tools) {
  absl::StatusOr<std::string> bytes = ReadFile(in.path);
  if (!bytes.ok()) return bytes.status();
  absl::StatusOr<analysis::HostTrace> trace =
      in.format == Format::kKineto
          ? analysis::ReadKinetoTraceFile(*bytes, in.path, in.offset_ns, options)
          : analysis::ReadXSpaceHost(StringByteSource(*bytes), in.host, in.offset_ns, options);
  if (!trace.ok()) return trace.status();
  absl::StatusOr<analysis::ToolTrace> detail =
      in.format == Format::kKineto
          ? analysis::ReadKinetoToolsFile(*bytes, in.path, in.offset_ns, options)
          : analysis::ReadXSpaceToolsBytes(*bytes, in.host, in.offset_ns, options);
  if (!detail.ok()) return detail.status();
  HostToolInput out;
  out.summary = analysis::SummarizeHost(*std::move(trace));
  for (const analysis::Tool tool : tools) {
    out.tools.push_back(analysis::ComputeHostTools(tool, *detail, out.summary));
  }
  return out;
}

}  // namespace

AnalyzeToolResult AnalyzeTools(const AnalyzeInputs& inputs, const analysis::ReaderOptions& options,
                               const std::vector<analysis::Tool>& tools, int jobs) {
  const size_t n = inputs.files.size();
  std::vector<std::optional<absl::StatusOr<HostToolInput>>> done(n);
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t i = next.fetch_add(1); i < n; i = next.fetch_add(1)) {
      done[i] = ToolInput(inputs.files[i], options, tools);
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
  absl::flat_hash_set<std::string> taken;
  for (size_t i = 0; i < n; ++i) {
    absl::StatusOr<HostToolInput>& in = *done[i];
    if (!in.ok()) {
      result.breakdown.errors.push_back(
          absl::StrCat(inputs.files[i].path, ": ", in.status().message()));
      continue;
    }
    // Named as AnalyzeTraces names them.
    std::string host = in->summary.host;
    for (int k = 2; taken.contains(host); ++k) host = absl::StrCat(in->summary.host, "-", k);
    taken.insert(host);
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
    summaries.push_back(std::move(in->summary));
  }
  result.breakdown.breakdown = analysis::BuildPodBreakdown(summaries);
  for (size_t t = 0; t < tools.size(); ++t) {
    result.tools.push_back(
        analysis::BuildPodTools(tools[t], std::move(hosts[t]), result.breakdown.breakdown));
  }
  return result;
}

AnalyzeResult AnalyzeTraces(const AnalyzeInputs& inputs, const analysis::ReaderOptions& options,
                            int jobs) {
  const size_t n = inputs.files.size();
  std::vector<std::optional<absl::StatusOr<analysis::HostSummary>>> done(n);
  // Workers take the next input in order; results land in input order.
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t i = next.fetch_add(1); i < n; i = next.fetch_add(1)) {
      done[i] = SummarizeInput(inputs.files[i], options);
    }
  };
  {
    std::vector<std::thread> workers;
    for (int w = 1; w < AnalyzeJobs(jobs, n); ++w) workers.emplace_back(work);
    work();
    for (std::thread& t : workers) t.join();
  }

  AnalyzeResult result;
  std::vector<analysis::HostSummary> summaries;
  absl::flat_hash_set<std::string> taken;
  for (size_t i = 0; i < n; ++i) {
    absl::StatusOr<analysis::HostSummary>& summary = *done[i];
    if (!summary.ok()) {
      result.errors.push_back(absl::StrCat(inputs.files[i].path, ": ", summary.status().message()));
      continue;
    }
    // Two ranks' files may name the same host (same stem, same rank): keep both, apart.
    std::string host = summary->host;
    for (int k = 2; taken.contains(host); ++k) host = absl::StrCat(summary->host, "-", k);
    taken.insert(host);
    summary->host = host;
    result.hosts.push_back(host);
    summaries.push_back(*std::move(summary));
  }
  result.breakdown = analysis::BuildPodBreakdown(summaries);
  return result;
}

}  // namespace profctl::coordinator
