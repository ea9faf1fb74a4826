// The aligned pod timeline in Perfetto's native protobuf trace format (a `Trace` of
// `TracePacket`s, gzipped: pod.perfetto-trace.gz; ui.perfetto.dev and Perfetto's trace processor
// open it). The same content as the Chrome JSON trace (pod_trace_writer.h), at about half of
// its CPU and a third of its size (docs/perf.md): names are interned per sequence, times
// delta-coded.
//
// WHY TWO STEPS. A host's part is rendered as soon as its trace is saved, on its own clock
// (RenderPerfettoHost), into a compressed fragment a fraction of the trace's size; the decoded
// trace is dropped then. The clock offsets are known only once every host is in (collective
// refinement), and they are not in the fragments: PodPerfettoWriter::AddHost writes, before a
// host's fragment, one ClockSnapshot per sequence of it that maps the host's clock onto the
// coordinator's. So the finish only joins fragments, whatever the pod's size.
//
// FORMAT (field numbers: Perfetto's protos/perfetto/trace/*.proto; proto/perfetto/
// pod_trace.proto is the subset written here, which the tests decode the files with):
//   - The file starts with a ClockSnapshot of BOOTTIME and REALTIME, both the coordinator's wall
//     clock at the base (primary_trace_clock BOOTTIME: the trace's time is the coordinator's
//     clock, in ns, and the UI can show it as wall time), and the root TrackDescriptor (uuid 0)
//     asking for processes in explicit order.
//   - One process track per (host, plane with lines): pid = host_index * kPlanesPerHost + n + 1
//     for the host's n-th plane with lines (planes past kPlanesPerHost - 1 left out and
//     counted), named "<host> <plane>", ordered by pid (the pod's own process first), its child
//     tracks in explicit order.
//   - One track per line, child of its plane's process, named after the line (display_name, else
//     name), in line order. Slices on one Perfetto track must nest; events of a line that
//     overlap without nesting go to further tracks of the line ("lanes", at most kMaxLanes per
//     line; what fits none is left out and counted), which share the line's name, rank and
//     sibling_merge_key_int, so the UI shows them as one track. Each GPU plane without derived
//     lines of its own gets the derived tracks "Steps", "TensorFlow Ops", "XLA Ops"
//     (xspace/derived_lines.h) after its lines, each derived event a slice with a `step_num`
//     annotation when it has a step.
//   - Every lane is one packet sequence (trusted_packet_sequence_id = host_index << 16 | n, n >=
//     1; past 65535 sequences a host's further tracks are left out and counted) on the
//     sequence-scoped incremental clock 64 (ns): its first packet clears and sets the incremental
//     state (sequence_flags 3: SEQ_INCREMENTAL_STATE_CLEARED | SEQ_NEEDS_INCREMENTAL_STATE),
//     carries TracePacketDefaults (timestamp_clock_id 64, the lane's track as the default
//     track_uuid) and has timestamp 0; every later packet says SEQ_NEEDS_INCREMENTAL_STATE and
//     gives its time as the ns since the previous packet of the sequence. The sequence's
//     ClockSnapshot (written by AddHost, before the fragment, first_packet_on_sequence) pins clock
//     64 at the lane's first time on the host's clock (is_incremental) to BOOTTIME = that time -
//     offset_ns: Perfetto's clock sync places every packet on the coordinator's clock.
//   - An XEvent is a TYPE_SLICE_BEGIN / TYPE_SLICE_END pair (events with num_occurrences are
//     skipped): name_iid (EventName interned in the sequence, per event metadata id), its stats
//     as debug annotations named by interned DebugAnnotationName (the stat metadata's name,
//     "stat_<id>" without one): double, uint and int values as such, a string as an interned
//     debug_annotation_string_value (per sequence, by its text), a ref as the interned name of
//     the stat metadata it references, bytes as "<N bytes>". Interned data rides in the first
//     packet that refers to it.
//   - Flows: a host-plane event (a CUDA API launch) and a device-plane event (its kernel or
//     memcpy) with the same `correlation_id` get one arrow: the launch's BEGIN has flow_ids
//     [id], the device work's BEGIN terminating_flow_ids [id], id = host_index << 40 | n for the
//     host's n-th matched correlation id (n >= 1). Only when both ends are in the trace; one
//     arrow per id (its first launch and first device event).
//   - Device memory in use: a counter track (unit bytes) "GPU <n> memory in use" per GPU, child
//     of that GPU's plane's process (else of the plane carrying the events), one TYPE_COUNTER
//     sample per MemoryAllocation/MemoryDeallocation event with `bytes_allocated` and
//     `device_ordinal` stats (host allocators, named cpu or host, left out), in time order, on a
//     sequence of its own.
//   - The pod's steps (PodPerfettoWriter::AddPodSteps): a process "pod" ordered first, a track
//     "steps" with one slice "step <n>" per step, as in the JSON trace, on the trace's clock.
// Track uuids are (host_index + 1) << 32 | n (the pod's: kMaxHosts + 1). Nothing here was loaded
// into Perfetto's own trace processor (not available where it was built): the tests decode the
// file with pod_trace.proto and check Perfetto's documented rules (docs/perf.md says which).
#ifndef PROFCTL_REPORT_POD_PERFETTO_TRACE_H_
#define PROFCTL_REPORT_POD_PERFETTO_TRACE_H_

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "analysis/breakdown.h"
#include "common/gzip.h"
#include "tensorflow/profiler/xplane.pb.h"

namespace profctl::report {

// One host's part of a Perfetto pod trace, on its own clock: what RenderPerfettoHost makes and
// PodPerfettoWriter::AddHost adds. Its memory is its compressed bytes (about a third of the
// host's serialized XSpace) and 16 bytes per sequence.
struct PerfettoHostFragment {
  int64_t host_index = -1;
  DeflatedPiece piece;  // its packets: track descriptors, then each sequence's packets
  struct Sequence {
    uint32_t id = 0;
    int64_t first_ns = 0;  // the time of its first packet, on the host's clock
  };
  std::vector<Sequence> sequences;
  int64_t events = 0;           // slices of XEvents
  int64_t derived_events = 0;   // slices of the GPUs' derived tracks
  int64_t flow_ends = 0;        // flow ids written (two per arrow)
  int64_t counter_samples = 0;  // memory counter samples
  int64_t planes_skipped = 0;   // planes with lines past the first kPlanesPerHost - 1
  int64_t lanes = 0;            // tracks added for events that overlap without nesting
  int64_t events_skipped = 0;   // events of a line that fit none of its kMaxLanes tracks, or of
                                // tracks past the host's sequences
};

// Renders every plane with lines of `space` for the host at `host_index` (< kMaxHosts, unique
// in the pod: it makes the host's pids, sequence ids, track uuids and flow ids), named `host`.
// `space` should have passed xspace::Validate; times that would not fit int64 ns saturate.
// `level`: zlib's. INVALID_ARGUMENT for a host_index out of range; INTERNAL if zlib fails.
// Thread-safe (touches nothing but its arguments).
absl::StatusOr<PerfettoHostFragment> RenderPerfettoHost(absl::string_view host,
                                                        const tensorflow::profiler::XSpace& space,
                                                        int64_t host_index,
                                                        int level = kGzipFastLevel);

// Lifecycle: Open, AddHost for each host (any order; the file is in the order added), at most
// one AddPodSteps, then Finish. The file appears at `path` only when Finish succeeds
// (GzipFileWriter: temporary file + rename); errors are sticky and name the path. Memory: the
// gzip state, whatever the pod's size. Movable; not thread-safe.
class PodPerfettoWriter {
 public:
  static constexpr int64_t kMaxHosts = 65535;
  static constexpr int64_t kPlanesPerHost = 256;
  static constexpr int64_t kMaxLanes = 64;
  static constexpr int kFlowIdHostShift = 40;

  // `path`: the gzip file to create (conventionally <session>/pod.perfetto-trace.gz); its folder
  // must exist. `base_ns`: the coordinator's wall clock at the capture's start (the clock
  // snapshot at the head of the file). `level`: zlib's, for what the writer itself compresses.
  static absl::StatusOr<PodPerfettoWriter> Open(const std::string& path, int64_t base_ns,
                                                int level = kGzipFastLevel);

  // Adds a host's fragment aligned by `offset_ns`, agent_clock - coordinator_clock (e.g.
  // analysis::HostOffset::offset_ns). INVALID_ARGUMENT (and the writer fails) for a fragment
  // with a host_index already added or out of range; FAILED_PRECONDITION after AddPodSteps or
  // Finish (the writer stays usable).
  absl::Status AddHost(const PerfettoHostFragment& fragment, int64_t offset_ns);

  // The pod-wide step track after the last host, as PodTraceWriter::AddPodSteps: one slice per
  // step of `breakdown` from its earliest host start to its latest host end (coordinator clock),
  // with the step, its pod step time, spread, host count, whether on every host and straggler as
  // annotations. FAILED_PRECONDITION after Finish or a second call.
  absl::Status AddPodSteps(const analysis::PodBreakdown& breakdown);

  // Ends the gzip stream and renames the file onto `path`.
  absl::Status Finish();

  int64_t hosts() const { return hosts_; }
  int64_t events() const { return events_; }
  int64_t derived_events() const { return derived_events_; }
  int64_t flow_ends() const { return flow_ends_; }
  int64_t counter_samples() const { return counter_samples_; }
  int64_t pod_steps() const { return pod_steps_; }

 private:
  explicit PodPerfettoWriter(GzipFileWriter out) : out_(std::move(out)) {}
  absl::Status Usable() const;

  GzipFileWriter out_;
  absl::Status error_;  // sticky
  bool finished_ = false;
  std::set<int64_t> host_indices_;
  int64_t hosts_ = 0;
  int64_t events_ = 0;
  int64_t derived_events_ = 0;
  int64_t flow_ends_ = 0;
  int64_t counter_samples_ = 0;
  int64_t pod_steps_ = -1;  // -1: no pod step track yet
};

}  // namespace profctl::report

#endif  // PROFCTL_REPORT_POD_PERFETTO_TRACE_H_
