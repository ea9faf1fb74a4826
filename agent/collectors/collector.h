// The Collector seam: one source of trace data on the agent's host (synthetic job, CUPTI, TSL
// profiler server, /proc). The agent's capture session drives every collector through one
// lifecycle and does not know which collectors exist.
#ifndef PROFCTL_AGENT_COLLECTORS_COLLECTOR_H_
#define PROFCTL_AGENT_COLLECTORS_COLLECTOR_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "profctl/v1/shortfall.pb.h"
#include "tensorflow/profiler/xplane.pb.h"

namespace profctl::agent {

// One finished training step seen between captures (the step signal that condition-triggered
// captures watch, docs/schedules.md): times on the agent's wall clock.
struct StepSample {
  int64_t end_wall_ns = 0;
  int64_t duration_ns = 0;
  int64_t step_num = -1;  // -1: unknown
  std::string source;     // "synthetic", "cupti pid 4242 rank 3", ...
};

// The flight recorder's bounds for one collector (profctl-agent --flight-recorder,
// --flight-recorder-mb; docs/flight-recorder.md).
struct RecorderLimits {
  int64_t keep_ns = 0;    // the past to keep
  int64_t max_bytes = 0;  // the memory it may hold
};

struct RecorderStats {
  int64_t records = 0;
  int64_t bytes = 0;
  int64_t evicted = 0;
  int64_t since_ns = 0;  // agent clock: the oldest instant held (0: nothing yet)
};

struct CaptureOptions {
  std::string session_id;
  // Planned recording window on the agent's wall clock.
  int64_t start_wall_ns = 0;
  int64_t duration_ns = 0;
  // What the `tsl` collector asks of framework profiler servers (CaptureRequest's levels,
  // validated; the defaults are tsl::TracerLevels'); other collectors ignore them.
  uint32_t host_tracer_level = 2;
  uint32_t device_tracer_level = 1;
  uint32_t python_tracer_level = 0;
};

// Lifecycle, in order and never concurrently (a session's calls run as tasks on its executors,
// not on one dedicated thread): Prepare (before the start instant;
// may allocate or connect), Start (at the start instant), Stop (at the end, or early on cancel),
// Collect (adds this collector's planes to the session's XSpace). Collect writes times as XProf
// reads them (xspace/xspace.h): line timestamps relative to the profile start, which is the
// `wall_ns` given to Start, and it records the window with xspace::SetProfileWindow(space,
// start wall_ns, stop wall_ns) (idempotent, so every collector of a session may call it). After a
// failed Prepare or Start the session skips the collector's remaining calls for that session and
// reports the error in XSpace.errors. A session stopped after Prepare but before its start instant
// calls Abort instead of Start, Stop and Collect. Collect may add planes whose names the space
// already has (it should merge them, xspace/xspace_merge.h); the session merges any duplicates
// left after the last Collect. A collector is reused for later sessions, one at a time.
class Collector {
 public:
  virtual ~Collector() = default;
  virtual absl::string_view name() const = 0;
  virtual absl::Status Prepare(const CaptureOptions& options) = 0;
  // `wall_ns`: the agent-clock instant recording actually starts.
  virtual absl::Status Start(int64_t wall_ns) = 0;
  virtual absl::Status Stop(int64_t wall_ns) = 0;
  virtual absl::Status Collect(tensorflow::profiler::XSpace* space) = 0;
  // The session ended before Start (cancelled while waiting for its start instant): release what
  // Prepare set up, and tell whatever it started (a remote profiler) to stop. Must not block.
  virtual void Abort() {}
  // The step signal: appends the steps this collector saw end in (since_wall_ns, now_wall_ns]
  // (agent clock), oldest first, at most `max` of them (the latest). Cheap, never blocks on I/O,
  // and thread-safe: it is called from RPC threads at any time, also during a capture. The
  // default: this collector has no step signal.
  virtual void RecentSteps(int64_t /*since_wall_ns*/, int64_t /*now_wall_ns*/, size_t /*max*/,
                           std::vector<StepSample>* /*out*/) const {}
  // Whether RecentSteps can ever return something (GetStepSignal lists these collectors).
  virtual bool HasStepSignal() const { return false; }

  // The flight recorder (docs/flight-recorder.md): keeping the most recent past at all times, so
  // that a snapshot can serve it after the fact. Independent of the capture lifecycle above (a
  // snapshot may run during a capture). StartRecorder begins at `now_wall_ns` and is called once,
  // before any other recorder call; UNIMPLEMENTED (the default) says this collector can keep no
  // past. RecordUntil brings the ring up to `now_wall_ns` (called periodically by the agent, and
  // by Snapshot itself). Snapshot writes what the ring holds of [from_wall_ns, to_wall_ns] into
  // `space` as Collect writes a window (profile window set to it), and says in XSpace.warnings
  // when the ring's past starts later than from_wall_ns. RecordUntil, Snapshot and recorder_stats
  // are thread-safe and never block on I/O.
  virtual absl::Status StartRecorder(const RecorderLimits& /*limits*/, int64_t /*now_wall_ns*/) {
    return absl::UnimplementedError("this collector keeps no past");
  }
  virtual bool Recording() const { return false; }
  virtual void RecordUntil(int64_t /*now_wall_ns*/) {}
  virtual absl::Status Snapshot(int64_t /*from_wall_ns*/, int64_t /*to_wall_ns*/,
                                tensorflow::profiler::XSpace* /*space*/) {
    return absl::UnimplementedError("this collector keeps no past");
  }
  virtual RecorderStats recorder_stats() const { return {}; }

  // What the trace the last Collect or Snapshot wrote lacks of what was asked (dropped records,
  // a recorder shorter than the past asked for, ...), each with its amount: appended to `out`
  // and forgotten. The session puts them in CaptureHeader.shortfalls and, in words, in
  // XSpace.warnings. Thread-safe. The default: nothing is ever missing.
  virtual void TakeShortfalls(std::vector<profctl::v1::Shortfall>* /*out*/) {}
};

inline profctl::v1::Shortfall MakeShortfall(profctl::v1::ShortfallKind kind, uint64_t amount,
                                            std::string detail) {
  profctl::v1::Shortfall s;
  s.set_kind(kind);
  s.set_amount(amount);
  s.set_detail(std::move(detail));
  return s;
}

// A snapshot of [from_wall_ns, to_wall_ns] whose recorder holds the past from since_wall_ns on.
inline profctl::v1::Shortfall ShortRecorderShortfall(int64_t from_wall_ns, int64_t to_wall_ns,
                                                     int64_t since_wall_ns) {
  constexpr int64_t kNanosPerMs = 1'000'000;
  return MakeShortfall(
      profctl::v1::SHORTFALL_KIND_SHORT_RECORDER,
      static_cast<uint64_t>(since_wall_ns - from_wall_ns),
      absl::StrCat("the flight recorder held the last ", (to_wall_ns - since_wall_ns) / kNanosPerMs,
                   " ms only of the ", (to_wall_ns - from_wall_ns) / kNanosPerMs,
                   " ms asked: the first ", (since_wall_ns - from_wall_ns) / kNanosPerMs,
                   " ms are missing"));
}

}  // namespace profctl::agent

#endif  // PROFCTL_AGENT_COLLECTORS_COLLECTOR_H_
