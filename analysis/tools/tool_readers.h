// Readers of the opt-in ToolTrace (tool_trace.h): names, kernel details, op links, memory events,
// input events and the run environment, from the same files as the breakdown's readers.
//
// WHY SEPARATE READERS. The breakdown's readers (xspace_reader.h, kineto_reader.h) are tuned
// streaming walkers whose per-event work is a table lookup; adding names, stats and links to their
// loops would cost every `analyze` run. These readers run only for `--tool=...` and decode the
// whole file (an XSpace message; a RapidJSON document), trading memory (about 3-4x the file) for
// simple code. They apply the SAME rules as the breakdown's readers, so the tools' categories
// match the breakdown's to the nanosecond:
//   - the same events: host wrappers (step roots `_r`, consumer `_ct`/`_c` events, Python frames
//     that are not input waits, Kineto categories that are not activity) are not host events;
//     device events come from the same lines (CUPTI stream lines; TPU `XLA Ops` when present);
//   - the same classes (op_classify.h) and step markers (ReaderOptions::step_pattern);
//   - the same times: xspace/xspace.h's EventStartNs/EventEndNs, Kineto's base time, exact
//     decimal microseconds, minus `offset_ns`.
// docs/tools.md lists, per framework, which events and stats feed which tool.
//
// BAD INPUT: as the breakdown's readers: bytes that are not an XSpace, JSON that is not a trace
// are INVALID_ARGUMENT/DATA_LOSS naming the host; bad events are dropped with one warning per
// kind of problem.
#ifndef PROFCTL_ANALYSIS_TOOLS_TOOL_READERS_H_
#define PROFCTL_ANALYSIS_TOOLS_TOOL_READERS_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "analysis/op_classify.h"
#include "analysis/tools/tool_trace.h"
#include "tensorflow/profiler/xplane.pb.h"

namespace profctl::analysis {

// A decoded XSpace (TensorFlow, JAX, XProf, profctl). `host` and `offset_ns` as ReadXSpaceHost.
absl::StatusOr<ToolTrace> ReadXSpaceTools(const tensorflow::profiler::XSpace& space,
                                          const std::string& host, int64_t offset_ns,
                                          const ReaderOptions& options = {});
// The same from a serialized XSpace.
absl::StatusOr<ToolTrace> ReadXSpaceToolsBytes(absl::string_view bytes, const std::string& host,
                                               int64_t offset_ns,
                                               const ReaderOptions& options = {});

// A PyTorch (Kineto) trace's JSON; the host is "rank-<N>" from distributedInfo, else
// `default_host`, as ReadKinetoTrace.
absl::StatusOr<ToolTrace> ReadKinetoTools(absl::string_view json_text,
                                          const std::string& default_host, int64_t offset_ns,
                                          const ReaderOptions& options = {});
// A trace file's bytes (gzip or not), as ReadKinetoTraceFile; errors name `path`. Copies them
// (the JSON is parsed in place); ReadKinetoToolsFileOwned takes them instead.
absl::StatusOr<ToolTrace> ReadKinetoToolsFile(absl::string_view contents, absl::string_view path,
                                              int64_t offset_ns, const ReaderOptions& options = {});
// The same from bytes it owns (move them in): gzip is inflated and the compressed bytes dropped,
// then the JSON is parsed in place. Memory while it reads: the text, plus RapidJSON's DOM of it
// without its strings (16 bytes per JSON value and 32 per object member), plus the ToolTrace.
absl::StatusOr<ToolTrace> ReadKinetoToolsFileOwned(std::string contents, absl::string_view path,
                                                   int64_t offset_ns,
                                                   const ReaderOptions& options = {});

}  // namespace profctl::analysis

#endif  // PROFCTL_ANALYSIS_TOOLS_TOOL_READERS_H_
