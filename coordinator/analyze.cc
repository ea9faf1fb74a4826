#include "coordinator/analyze.h"

#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/file_util.h"
#include "common/xspace.h"
#include "coordinator/analysis/kineto_reader.h"
#include "coordinator/analysis/xspace_reader.h"
#include "coordinator/session_writer.h"
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
  for (const auto& h : m.hosts()) {
    if (h.status() != profctl::v1::HOST_STATUS_OK || h.xplane_file().empty()) continue;
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

AnalyzeResult AnalyzeTraces(const AnalyzeInputs& inputs, const analysis::ReaderOptions& options) {
  AnalyzeResult result;
  std::vector<analysis::HostSummary> summaries;
  absl::flat_hash_set<std::string> taken;
  for (const TraceInput& in : inputs.files) {
    // One host at a time: its bytes and decoded trace are dropped before the next is read.
    absl::StatusOr<analysis::HostTrace> trace = [&]() -> absl::StatusOr<analysis::HostTrace> {
      absl::StatusOr<std::string> bytes = ReadFile(in.path);
      if (!bytes.ok()) return bytes.status();
      if (in.format == Format::kKineto) {
        return analysis::ReadKinetoTraceFile(*bytes, in.path, in.offset_ns, options);
      }
      tensorflow::profiler::XSpace space;
      if (!space.ParseFromString(*bytes)) {
        return absl::DataLossError("not a serialized XSpace (tensorflow.profiler.XSpace)");
      }
      bytes->clear();
      if (absl::Status valid = xspace::Validate(space); !valid.ok()) return valid;
      return analysis::ReadXSpaceHost(space, in.host, in.offset_ns, options);
    }();
    if (!trace.ok()) {
      result.errors.push_back(absl::StrCat(in.path, ": ", trace.status().message()));
      continue;
    }
    // Two ranks' files may name the same host (same stem, same rank): keep both, apart.
    std::string host = trace->host;
    for (int n = 2; taken.contains(host); ++n) host = absl::StrCat(trace->host, "-", n);
    taken.insert(host);
    trace->host = host;
    summaries.push_back(analysis::SummarizeHost(*trace));
    result.hosts.push_back(host);
  }
  result.breakdown = analysis::BuildPodBreakdown(summaries);
  return result;
}

}  // namespace profctl::coordinator
