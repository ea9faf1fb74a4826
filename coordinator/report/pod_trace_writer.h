// The aligned pod timeline in Chrome trace-event JSON (opens in Perfetto and chrome://tracing),
// written as a gzip stream one host at a time, so memory stays bounded however big the pod.
//
// Content: {"displayTimeUnit":"ns","otherData":{"base_time_ns":B,"producer":"profctl"},
// "traceEvents":[...]} with one process per (host, plane that has lines), named "<host> <plane>"
// and sorted in the order added; one thread per line (tid = display_id, else id) named after the
// line (display_name, else name); one complete ("X") event per XEvent (events with
// num_occurrences are skipped) with its stats as args. Times are microseconds with three
// decimals (exact ns): ts = (agent-clock start - offset_ns - base_ns) / 1000, so every host sits
// on the coordinator's clock, relative to B. Agent-clock times come from xspace::ProfileStartNs
// and xspace::EventStartNs: relative (XProf-style) and absolute-line files both align.
#ifndef PROFCTL_COORDINATOR_REPORT_POD_TRACE_WRITER_H_
#define PROFCTL_COORDINATOR_REPORT_POD_TRACE_WRITER_H_

#include <cstdint>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/gzip.h"
#include "tensorflow/profiler/xplane.pb.h"

namespace profctl::report {

// Lifecycle: Open, AddHost for each host (the caller may drop each XSpace once added), Finish.
// The file appears at `path` only when Finish succeeds (common/gzip.h GzipFileWriter: temporary
// file + rename); a writer destroyed unfinished, or any error, leaves nothing there. Errors are
// sticky and name the path. Memory: a 64 KiB text buffer plus the gzip state, independent of
// the number of hosts and events. Movable; not thread-safe.
class PodTraceWriter {
 public:
  // `path`: the gzip file to create (conventionally <session>/pod.trace.json.gz); its folder must
  // exist. `base_ns`: the coordinator-clock instant shown as time 0 (e.g. the capture's start).
  static absl::StatusOr<PodTraceWriter> Open(const std::string& path, int64_t base_ns);

  // Appends every plane with lines of `space` as processes named "<host> <plane name>".
  // `offset_ns`: the host's clock offset used to align it, agent_clock - coordinator_clock
  // (e.g. analysis::HostOffset::offset_ns). `space` should have passed xspace::Validate; times
  // that would not fit int64 ns saturate. FAILED_PRECONDITION after Finish.
  absl::Status AddHost(absl::string_view host, const tensorflow::profiler::XSpace& space,
                       int64_t offset_ns);

  // Closes the JSON document and the gzip stream and renames the file onto `path`.
  absl::Status Finish();

  int64_t hosts() const { return hosts_; }
  int64_t events() const { return events_; }

 private:
  PodTraceWriter(GzipFileWriter out, int64_t base_ns) : out_(std::move(out)), base_ns_(base_ns) {}
  // Starts a new element of traceEvents.
  void BeginEvent();
  // Hands the buffer to the gzip writer once it holds at least `threshold` bytes.
  absl::Status Flush(size_t threshold);

  GzipFileWriter out_;
  int64_t base_ns_;
  absl::Status error_;  // sticky
  std::string buffer_;
  bool first_event_ = true;
  bool finished_ = false;
  int64_t next_pid_ = 1;
  int64_t hosts_ = 0;
  int64_t events_ = 0;
};

}  // namespace profctl::report

#endif  // PROFCTL_COORDINATOR_REPORT_POD_TRACE_WRITER_H_
