// Reads a Perfetto trace as profctl's pod trace writer makes it (pod_perfetto_trace.h) back into
// slices and counter samples on the trace's clock, checking on the way the rules of Perfetto's
// import that the file relies on, as Perfetto's documentation and trace processor state them:
//   - clocks: a sequence-scoped clock (64..127) is used only on a sequence that snapshotted it
//     earlier in the file together with BOOTTIME (or REALTIME); an incremental clock's first
//     packet counts from the snapshot, each later one from the packet before; the trace's
//     primary clock is BOOTTIME;
//   - incremental state: a sequence's TracePacketDefaults and interned data come in or after a
//     packet with SEQ_INCREMENTAL_STATE_CLEARED, every packet that uses them says
//     SEQ_NEEDS_INCREMENTAL_STATE, every interning id is defined earlier on its sequence and never
//     redefined with another value, and an interned name is never 0;
//   - tracks: every uuid is described once, before its first event; a parent is described before
//     its child; a process track has a pid unique in the trace; slices go on non-counter tracks,
//     counter samples on counter tracks; tracks merged by sibling_merge_key share their parent,
//     name and rank;
//   - slices: BEGIN and END pair up per track as a stack (an END closes the innermost open slice;
//     nothing is left open), and a track's events never go back in time;
//   - flows: every flow id starts on exactly one slice and terminates on exactly one.
// Not checked (nothing here runs Perfetto's trace processor): how its UI draws the result.
// FAILED_PRECONDITION naming the packet (its index in the file) and the rule it breaks;
// DATA_LOSS for bytes that are not a Trace. For tests and tools.
#ifndef PROFCTL_REPORT_PERFETTO_TRACE_CHECK_H_
#define PROFCTL_REPORT_PERFETTO_TRACE_CHECK_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace profctl::report {

struct PerfettoTrackInfo {
  uint64_t uuid = 0;
  uint64_t parent = 0;     // 0: none
  std::string name;        // the process name for a process track
  int64_t pid = -1;        // a process track's pid; -1 otherwise
  int64_t rank = 0;        // sibling_order_rank
  uint64_t merge_key = 0;  // sibling_merge_key_int (merged by key when set)
  bool merged_by_key = false;
  bool counter = false;
  bool children_in_order = false;  // child_ordering EXPLICIT
};

struct PerfettoSliceInfo {
  std::string process;  // the name of the process track above its track
  std::string track;    // its track's name
  uint64_t track_uuid = 0;
  std::string name;
  int64_t start_ns = 0;  // trace clock (BOOTTIME: the coordinator's clock)
  int64_t end_ns = 0;
  int depth = 0;  // open slices around it on its track
  // Debug annotations, values as text: integers in decimal, doubles as %.17g, bools true/false.
  std::map<std::string, std::string> args;
  std::vector<uint64_t> flows_out;  // flow_ids
  std::vector<uint64_t> flows_in;   // terminating_flow_ids
};

struct PerfettoCounterInfo {
  std::string process;
  std::string track;
  int64_t ts_ns = 0;
  int64_t value = 0;
};

struct PerfettoTraceModel {
  int64_t base_ns = 0;  // the head snapshot's BOOTTIME
  bool processes_in_order = false;
  std::map<uint64_t, PerfettoTrackInfo> tracks;
  std::vector<PerfettoSliceInfo> slices;  // in the order their BEGINs come in the file
  std::vector<PerfettoCounterInfo> counters;
  int64_t sequences = 0;
  int64_t packets = 0;
};

// `trace`: the uncompressed bytes of the file.
absl::StatusOr<PerfettoTraceModel> ReadPerfettoTrace(absl::string_view trace);

}  // namespace profctl::report

#endif  // PROFCTL_REPORT_PERFETTO_TRACE_CHECK_H_
