// Reads one host's XSpace (TensorFlow, JAX, XProf and profctl `.xplane.pb` files) into the
// framework-neutral HostTrace the step breakdown works on. Pure: the bytes come through a
// ByteSource (common/byte_source.h: a string, or a file read in small pieces by pread).
//
// WIRE FORMAT, NOT MESSAGES. The reader walks the serialized XSpace with
// io::CodedInputStream and never builds an XSpace: decoding a 1 M-event file into protobuf
// messages and freeing them cost 5x the analysis itself and 3.5x the file in memory
// (docs/perf.md). Per plane it visits the fields in the order it needs them, each visit a pass over
// a byte range of the source: the plane's name and the ranges of its lines (field 3); its
// stat_metadata (5); its event_metadata (4), classified once per id; then, per line, the line's
// header (id, name, timestamp_ns, event count) and its events. So memory is the HostTrace plus one
// read buffer per open stream, whatever the file size. Field numbers: TSL_WIRE.md.
// What counts as a step marker, input wait, launch, sync, collective and memcpy is in
// op_classify.h, shared with the Kineto reader; docs/pod-step-breakdown.md links there.
//
// TIME. The profile start is what xspace::ProfileStartNs says (the first uint64
// `profile_start_time` of a `Task Environment` plane, else 0), every event time goes through
// xspace::EventStartNs/EventEndNs (their raw-field forms), so relative and absolute-line files
// both work, and is moved onto the common timeline as agent time - offset_ns.
//
// WINDOW. [profile_start_time, profile_stop_time] of the `Task Environment` plane. Without a
// profile_start_time (foreign files with absolute line timestamps), the span of every event read
// below; with a start but no stop, from the start to the last event end.
//
// WHAT IS READ
//   `/host:CPU`, every line (one per thread; NVTX ranges land here too):
//     - step markers: `_r` >= 1 with an integer `step_num`, or a name matching the step pattern
//       (StepMarker::thread_id = the line id);
//     - host ops: ClassifyHostOpName, except step markers, `_r` roots without step_num,
//       events with consumer context stats (`_ct`/`_c`: another thread joining a step root) and
//       Python frames (`$...`) that are not input waits, which are wrappers, not host work.
//   `/device:GPU:N`, `/device:CUSTOM:N`: every line except XProf's derived lines (`Steps`,
//     `XLA Modules`, `XLA Ops`, `Framework Ops`, `TensorFlow Ops`, `TensorFlow Name Scope`,
//     `Framework Name Scope`, `Source code`, `Launch Stats`, `_counters_`), i.e. the CUPTI stream
//     lines `Stream #S(...)`: derived lines repeat the same kernels and would count them twice.
//   `/device:TPU:N`: the `XLA Ops` line(s) when present (the other TPU lines nest the same
//     time: steps, modules, framework ops); otherwise every line but the derived ones above.
//   Device events: `memcpy_details` (event or metadata stat) when it names a direction, else
//   ClassifyDeviceOpName. DeviceTrace::id is N, DeviceTrace::name the plane name; a device plane
//   without events still gives a DeviceTrace (an idle device). Other planes are ignored.
//   XSpace `errors`/`warnings` are passed on as warnings.
//
// BAD INPUT never crashes. Bytes that are not a well-formed XSpace (truncated, a length past its
// message, a malformed varint) fail the read with DATA_LOSS naming the byte offset; a source read
// error fails it with the source's error. Fields are accepted in any order and unknown fields are
// skipped, as a protobuf parser would. Nothing else stops the read: events with negative
// duration, unknown metadata ids or times outside +-kMaxAbsTimeNs are dropped, step roots with a
// non-integer step_num and step numbers that do not fit int64 are ignored, device planes with a bad
// ordinal are skipped; each kind of problem is one line in HostTrace::warnings with its count and
// the first place it happened.
//
// ONE PASS FOR EVERYTHING. DecodeXSpaceHost reads, in the same walk, what else a host's trace
// gives the pod's outputs: the hang verdict's record (analysis/hang_verdict.h RankCollectives,
// by its ENTERED / COMPLETED / IDENTITY rules, on the host's own clock), the collective ends that
// alignment matches (alignment.h CollectiveEndsNs), and the counts session.json shows. A saved
// trace is never decoded again for any of them.
//
// SPEED. Names are classified once per event metadata id per plane (never per event), for the
// breakdown and the hang record alike; per event the reader does a table lookup, the time
// conversion, and a scan of the event's own stats only where a plane has `_r`/`step_num` (host),
// `memcpy_details` (device) or, for the hang record, `correlation_id`/`kernel_name` stats. No
// per-event allocation besides the output vectors (the hang record keeps the host's NCCL calls,
// the launches of collective kernels and the collective kernels).
#ifndef PROFCTL_ANALYSIS_READERS_XSPACE_READER_H_
#define PROFCTL_ANALYSIS_READERS_XSPACE_READER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "analysis/hang_verdict.h"
#include "analysis/host_trace.h"
#include "analysis/op_classify.h"
#include "common/byte_source.h"
#include "tensorflow/profiler/xplane.pb.h"

namespace profctl::analysis {

// One host's trace, from the bytes of a serialized XSpace. `host` names it in the result;
// `offset_ns` is the host's clock offset (agent clock - common clock, as alignment.h's
// HostOffset::offset_ns), 0 when the trace is already on the common timeline.
// Errors: INVALID_ARGUMENT for a bad step pattern (ValidateReaderOptions), |offset_ns| >
// kMaxAbsOffsetNs, a profile start/stop outside +-kMaxAbsTimeNs, or a space with neither a
// `/host:CPU` nor a device plane (not a host trace); DATA_LOSS for bytes that are not a
// well-formed XSpace (or over 2 GiB); the source's own error when it cannot be read. Everything
// else is a warning.
absl::StatusOr<HostTrace> ReadXSpaceHost(const ByteSource& bytes, const std::string& host,
                                         int64_t offset_ns, const ReaderOptions& options = {});

// The same with the step pattern already compiled: a caller reading many hosts compiles it once
// (compiling it took about 3 % of a 1,024-host capture's CPU).
absl::StatusOr<HostTrace> ReadXSpaceHost(const ByteSource& bytes, const std::string& host,
                                         int64_t offset_ns, const StepMatcher& matcher);

// What DecodeXSpaceHost reads besides the breakdown's HostTrace.
struct HostDecodeOptions {
  bool breakdown = true;         // HostDecode::trace
  bool collectives = true;       // HostDecode::collectives
  bool collective_ends = false;  // HostDecode::collective_ends
  bool counts = false;           // HostDecode::events and steps
};

// Everything the pod outputs need from one host's trace, read in one pass.
struct HostDecode {
  // The breakdown's input as ReadXSpaceHost returns it, or why there is none (its errors but
  // DATA_LOSS and the source's, which fail the whole decode).
  absl::StatusOr<HostTrace> trace = absl::UnknownError("not read");
  // The hang verdict's record, on the host's own clock (ReadRankCollectives).
  RankCollectives collectives;
  // Alignment's collective ends on the host's own clock (alignment.h CollectiveEndsNs: sorted,
  // deduplicated).
  std::vector<int64_t> collective_ends;
  // Every event of every plane (xspace::CountEvents), and the distinct step numbers of the first
  // `/host:CPU` plane's step roots (`_r` == 1 with a `step_num`).
  int64_t events = 0;
  int64_t steps = 0;
};

// One host's trace in one pass: the breakdown's input (as ReadXSpaceHost: `host`, `offset_ns`,
// `matcher`) and what `options` asks for besides. Fails only for bytes that are not a
// well-formed XSpace (DATA_LOSS, or over 2 GiB) and the source's own errors; the breakdown's
// other errors (offset or window out of range, not a host trace) go into HostDecode::trace while
// the rest is still read.
absl::StatusOr<HostDecode> DecodeXSpaceHost(const ByteSource& bytes, const std::string& host,
                                            int64_t offset_ns, const StepMatcher& matcher,
                                            const HostDecodeOptions& options);

// The hang verdict's record of a decoded XSpace (serialized first, then DecodeXSpaceHost): for
// tests and callers that already hold one. Never fails: a space without collectives gives empty
// lists.
RankCollectives ReadRankCollectives(const tensorflow::profiler::XSpace& space,
                                    const StepMatcher& steps);

// The same from a decoded XSpace (serialized first: for tests and callers that already hold one).
absl::StatusOr<HostTrace> ReadXSpaceHost(const tensorflow::profiler::XSpace& space,
                                         const std::string& host, int64_t offset_ns,
                                         const ReaderOptions& options = {});

}  // namespace profctl::analysis

#endif  // PROFCTL_ANALYSIS_READERS_XSPACE_READER_H_
