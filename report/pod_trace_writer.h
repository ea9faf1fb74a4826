// The aligned pod timeline in Chrome trace-event JSON (opens in Perfetto and chrome://tracing),
// written as one gzip stream host by host, so memory stays bounded however big the pod; hosts
// can be rendered and compressed in parallel and joined in order.
//
// Content: {"displayTimeUnit":"ns","otherData":{"base_time_ns":B,"producer":"profctl"},
// "traceEvents":[...]} with one process per (host, plane that has lines), named "<host> <plane>"
// and sorted in the order added; one thread per line (tid = display_id, else id) named after the
// line (display_name, else name); one complete ("X") event per XEvent (events with
// num_occurrences are skipped) with its stats as args. Times are microseconds with three
// decimals (exact ns): ts = (agent-clock start - offset_ns - base_ns) / 1000, so every host sits
// on the coordinator's clock, relative to B. Agent-clock times come from xspace::ProfileStartNs
// and xspace::EventStartNs: relative (XProf-style) and absolute-line files both align.
//
// Flows: a host-plane event (a CUDA API launch) and a device-plane event (its kernel or memcpy)
// with the same `correlation_id` stat get a flow arrow: {"ph":"s"} on the launch and
// {"ph":"f","bp":"e"} on the device work, "cat" and "name" "launch", each right after its slice
// with the slice's pid, tid and ts, and the two slices get "cat":"launch" too. So both viewers
// bind each end to its slice: Chrome DevTools' trace engine binds a flow event to the slice with
// the same ts, pid, tid and cat; Perfetto binds "s" and "f" with "bp":"e" to the innermost
// slice open at ts on that thread (the slice just written: a parent that starts at the same
// instant comes before it in the file, and has no category). "id" = host_index <<
// kFlowIdHostShift | n, where n (1, 2, ...) numbers the host's matched correlation ids in order
// (unique across hosts, exact as a JSON double up to 8,192 hosts). Only when both ends are in the
// trace; one arrow per id (its first launch and first device event).
// Memory: a counter ("ph":"C") "GPU <n> memory in use" {"bytes":...} per GPU, on the process of
// that host's "/device:GPU:<n>" plane (else of the plane carrying the events), one sample per
// MemoryAllocation/MemoryDeallocation event with `bytes_allocated` and `device_ordinal` stats
// (host allocators, named cpu or host, left out); the events stay as slices with their details.
// GPU tracks: a `/device:GPU:<n>` plane without derived lines of its own (profctl's collectors
// and today's TF/JAX servers leave them to XProf; a file that has them is shown as it is) gets
// xspace::DerivedLinesBuilder's as threads of its process, tid = TSL's line id as an unsigned
// 32-bit number (Steps 3735928559, TensorFlow Ops 3735928562, XLA Ops 3735928564), named
// "Steps", "TensorFlow Ops", "XLA Ops": one complete event per derived event, "cat":"derived",
// with "args":{"step_num":n} when it has a step. Counted apart (derived_events), not in events.
// Pod steps: AddPodSteps.
#ifndef PROFCTL_REPORT_POD_TRACE_WRITER_H_
#define PROFCTL_REPORT_POD_TRACE_WRITER_H_

#include <cstdint>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "analysis/breakdown.h"
#include "common/gzip.h"
#include "tensorflow/profiler/xplane.pb.h"

namespace profctl::report {

// One host's part of a pod trace, rendered and compressed on its own by PodTraceWriter::Render
// (on any thread), to be added in host order with PodTraceWriter::AddRendered.
struct RenderedHost {
  DeflatedPiece piece;         // its events, comma-separated, with no comma before or after
  int64_t events = 0;          // complete ("X") events
  int64_t flow_events = 0;     // "s" and "f" events
  int64_t counter_events = 0;  // "C" samples
  int64_t derived_events = 0;  // complete ("X") events of the GPUs' derived tracks
  int64_t planes_skipped = 0;  // planes with lines past the first kPidsPerHost - 1
  int64_t host_index = 0;      // what it was rendered for
  int64_t base_ns = 0;
};

// Lifecycle: Open, then for each host in order AddHost (renders it here) or AddRendered (rendered
// elsewhere, e.g. several hosts at once on a pool), then Finish. The file appears at `path` only
// when Finish succeeds (common/gzip.h GzipFileWriter: temporary file + rename); a writer
// destroyed unfinished, or any error, leaves nothing there. Errors are sticky and name the path.
// Memory: the gzip state plus one host's compressed events, independent of the number of
// hosts. Movable; not thread-safe (Render is: it touches no writer).
//
// Process ids: host k (0-based, in the order added) owns pids k * kPidsPerHost + 1 and up, one
// per plane with lines, so hosts rendered apart never collide and processes sort by host, then
// plane. A host's planes past the first kPidsPerHost - 1 with lines are left out and counted.
class PodTraceWriter {
 public:
  static constexpr int64_t kPidsPerHost = 1 << 16;
  static constexpr int kFlowIdHostShift = 40;

  // `path`: the gzip file to create (conventionally <session>/pod.trace.json.gz); its folder must
  // exist. `base_ns`: the coordinator-clock instant shown as time 0 (e.g. the capture's start).
  // `level`: zlib's, for what AddHost renders.
  static absl::StatusOr<PodTraceWriter> Open(const std::string& path, int64_t base_ns,
                                             int level = kGzipFastLevel);

  // Renders every plane with lines of `space` as processes named "<host> <plane name>", for the
  // host at `host_index` of a writer whose base is `base_ns`. `offset_ns`: the host's clock
  // offset used to align it, agent_clock - coordinator_clock (e.g.
  // analysis::HostOffset::offset_ns). `space` should have passed xspace::Validate; times that
  // would not fit int64 ns saturate. Thread-safe.
  static absl::StatusOr<RenderedHost> Render(absl::string_view host,
                                             const tensorflow::profiler::XSpace& space,
                                             int64_t offset_ns, int64_t base_ns, int64_t host_index,
                                             int level = kGzipFastLevel);

  // Render for the next host, then AddRendered. FAILED_PRECONDITION after Finish or AddPodSteps
  // (the writer stays usable).
  absl::Status AddHost(absl::string_view host, const tensorflow::profiler::XSpace& space,
                       int64_t offset_ns);
  // Adds the next host: one rendered with host_index == hosts() and this writer's base
  // (INVALID_ARGUMENT otherwise, and the writer fails).
  absl::Status AddRendered(const RenderedHost& rendered);

  // The pod-wide step track, after the last host (no host can be added after it): a process
  // "pod" (pid hosts() * kPidsPerHost + 1, sort index -1: above the hosts) with a thread "steps"
  // holding one complete event "step <n>" per step of `breakdown`, from its earliest host start
  // to its latest host end (PodHostStep times are on the coordinator's clock already), with the
  // step, its pod step time, spread, host count and straggler as args. FAILED_PRECONDITION after
  // Finish or a second call.
  absl::Status AddPodSteps(const analysis::PodBreakdown& breakdown);

  // Closes the JSON document and the gzip stream and renames the file onto `path`.
  absl::Status Finish();

  int64_t base_ns() const { return base_ns_; }
  int64_t hosts() const { return hosts_; }
  int64_t events() const { return events_; }
  int64_t flow_events() const { return flow_events_; }
  int64_t counter_events() const { return counter_events_; }
  int64_t derived_events() const { return derived_events_; }
  int64_t pod_steps() const { return pod_steps_; }

 private:
  PodTraceWriter(GzipFileWriter out, int64_t base_ns, int level)
      : out_(std::move(out)), base_ns_(base_ns), level_(level) {}
  absl::Status Usable() const;
  absl::Status HostsOpen() const;  // FAILED_PRECONDITION once the pod's step track is added
  absl::Status Append(absl::string_view events);  // comma-joined events, none before or after

  GzipFileWriter out_;
  int64_t base_ns_;
  int level_;
  absl::Status error_;  // sticky
  bool first_event_ = true;
  bool finished_ = false;
  int64_t hosts_ = 0;
  int64_t events_ = 0;
  int64_t flow_events_ = 0;
  int64_t counter_events_ = 0;
  int64_t derived_events_ = 0;
  int64_t pod_steps_ = -1;  // -1: no pod step track yet
};

}  // namespace profctl::report

#endif  // PROFCTL_REPORT_POD_TRACE_WRITER_H_
