// The front door of tool_readers.h: options, offsets and bytes are checked here; the formats'
// events are read by xspace_tool_reader.cc and kineto_tool_reader.cc.
#include "analysis/tools/tool_readers.h"

#include <algorithm>
#include <limits>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "analysis/alignment.h"
#include "analysis/readers/kineto_reader.h"
#include "analysis/tools/tool_readers_internal.h"
#include "common/gzip.h"
#include "xspace/xspace.h"

namespace profctl::analysis {

namespace {

using tensorflow::profiler::XPlane;
using tensorflow::profiler::XSpace;

absl::Status CheckOffset(const std::string& host, int64_t offset_ns) {
  if (offset_ns < -kMaxAbsOffsetNs || offset_ns > kMaxAbsOffsetNs) {
    return absl::InvalidArgumentError(absl::StrCat("host ", host, ": clock offset ", offset_ns,
                                                   " ns is out of range (|offset| <= 2^61 ns)"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ToolTrace> ReadXSpaceTools(const XSpace& space, const std::string& host,
                                          int64_t offset_ns, const ReaderOptions& options) {
  absl::StatusOr<StepMatcher> matcher = StepMatcher::Create(options.step_pattern);
  if (!matcher.ok()) return matcher.status();
  if (absl::Status s = CheckOffset(host, offset_ns); !s.ok()) return s;
  const bool any_trace_plane =
      std::any_of(space.planes().begin(), space.planes().end(), [](const XPlane& p) {
        return p.name() == xspace::kHostPlaneName ||
               absl::StartsWith(p.name(), xspace::kGpuPlanePrefix) ||
               absl::StartsWith(p.name(), xspace::kTpuPlanePrefix) ||
               absl::StartsWith(p.name(), xspace::kCustomPlanePrefix);
      });
  if (!any_trace_plane) {
    return absl::InvalidArgumentError(absl::StrCat(
        "host ", host, ": the XSpace has no /host:CPU and no /device:{GPU,TPU,CUSTOM}:N plane (",
        space.planes_size(), " planes): not a host trace",
        space.errors().empty() ? "" : "; the trace says: ",
        space.errors().empty() ? "" : space.errors(0)));
  }
  ToolTrace out;
  out.host = host;
  tool_readers_internal::ReadXSpaceToolEvents(space, offset_ns, *matcher, &out);
  return out;
}

absl::StatusOr<ToolTrace> ReadXSpaceToolsBytes(absl::string_view bytes, const std::string& host,
                                               int64_t offset_ns, const ReaderOptions& options) {
  XSpace space;
  if (bytes.size() > static_cast<size_t>(std::numeric_limits<int>::max()) ||
      !space.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
    return absl::DataLossError(
        absl::StrCat("host ", host, ": not a valid serialized XSpace (", bytes.size(), " bytes)"));
  }
  return ReadXSpaceTools(space, host, offset_ns, options);
}

absl::StatusOr<ToolTrace> ReadKinetoTools(absl::string_view json_text,
                                          const std::string& default_host, int64_t offset_ns,
                                          const ReaderOptions& options) {
  absl::StatusOr<StepMatcher> matcher = StepMatcher::Create(options.step_pattern);
  if (!matcher.ok()) return matcher.status();
  if (absl::Status s = CheckOffset(default_host, offset_ns); !s.ok()) return s;
  if (absl::Status s = CheckKinetoJsonLimits(json_text, options); !s.ok()) {
    return absl::Status(s.code(),
                        absl::StrCat("Kineto trace of ", default_host, ": ", s.message()));
  }
  return tool_readers_internal::ReadKinetoToolDocument(std::string(json_text), default_host,
                                                       offset_ns, *matcher);
}

absl::StatusOr<ToolTrace> ReadKinetoToolsFile(absl::string_view contents, absl::string_view path,
                                              int64_t offset_ns, const ReaderOptions& options) {
  return ReadKinetoToolsFileOwned(std::string(contents), path, offset_ns, options);
}

absl::StatusOr<ToolTrace> ReadKinetoToolsFileOwned(std::string contents, absl::string_view path,
                                                   int64_t offset_ns,
                                                   const ReaderOptions& options) {
  const std::string host = KinetoFileStem(path);
  const auto named = [&](const absl::Status& s) {
    return absl::Status(s.code(), absl::StrCat(path, ": ", s.message()));
  };
  absl::StatusOr<StepMatcher> matcher = StepMatcher::Create(options.step_pattern);
  if (!matcher.ok()) return named(matcher.status());
  if (absl::Status s = CheckOffset(host, offset_ns); !s.ok()) return named(s);
  std::string inflated;
  absl::StatusOr<absl::string_view> text = GunzipIfCompressed(contents, path, &inflated, options);
  if (!text.ok()) return text.status();                                 // names `path`
  if (text->data() == inflated.data()) contents = std::move(inflated);  // the gzip bytes go
  if (absl::Status s = CheckKinetoJsonLimits(contents, options); !s.ok()) {
    return named(absl::Status(s.code(), absl::StrCat("Kineto trace of ", host, ": ", s.message())));
  }
  absl::StatusOr<ToolTrace> trace =
      tool_readers_internal::ReadKinetoToolDocument(std::move(contents), host, offset_ns, *matcher);
  if (!trace.ok()) return named(trace.status());
  return trace;
}

}  // namespace profctl::analysis
