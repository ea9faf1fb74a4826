// One host's trace: received into a temporary file as the agent streams it (HostTraceStream, on
// a transport thread), then saved (SaveHostTrace: validated, renamed into place or kept as
// .invalid, and reduced to the compact per-step summary the session keeps; pure over the file,
// safe on any thread: the engine runs it on its work pool).
#ifndef PROFCTL_COORDINATOR_ENGINE_HOST_TRACE_H_
#define PROFCTL_COORDINATOR_ENGINE_HOST_TRACE_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "analysis/breakdown.h"
#include "analysis/hang_verdict.h"
#include "analysis/op_classify.h"
#include "analysis/readers/xspace_reader.h"
#include "common/byte_source.h"
#include "coordinator/clients/agent_client.h"
#include "coordinator/session/session_writer.h"
#include "google/protobuf/arena.h"
#include "profctl/v1/session.pb.h"
#include "report/pod_perfetto_trace.h"
#include "xspace/xspace.h"

namespace profctl::coordinator {

// Receives one Capture or Fetch stream into a file of the sink. Runs on a transport thread and
// touches only its own file and header; `started` and `done` are called there too and must only
// post to the session. The file is made when recording starts, while the window leaves this
// process idle: creating a file costs a file system far more than writing 20 KB into it (at
// 1,024 hosts, a quarter of the CPU after the window went to creating them). Not before the
// window, so a big pod holds no file per host while it waits for its start and sending Capture
// stays cheap. A Fetch stream (no `started`) makes it at the header.
class HostTraceStream final : public CaptureStream {
 public:
  using StartedFn = absl::AnyInvocable<void(int64_t agent_start_ns)>;
  using DoneFn = absl::AnyInvocable<void(absl::Status)>;
  HostTraceStream(TraceSink* sink, std::string name, StartedFn started, DoneFn done);

  void OnStarted(int64_t agent_start_ns) override;
  void OnHeader(const CaptureHeaderInfo& header) override;
  absl::Status OnData(std::string_view chunk) override;
  void OnDone(absl::Status status) override;

  // Read once `done` was posted (the post orders them).
  const CaptureHeaderInfo& header() const { return header_; }
  // Creating or writing the file failed (the disk, not the agent).
  const absl::Status& file_error() const { return file_error_; }
  // Null until recording started (or, for a Fetch, the header came).
  TraceFile* file() { return file_.get(); }
  bool header_seen() const { return header_seen_; }
  // Any thread, while the stream runs: the bytes the header announced (0: no header yet) and the
  // bytes received so far.
  uint64_t announced_bytes() const { return announced_.load(std::memory_order_relaxed); }
  uint64_t received_bytes() const { return received_.load(std::memory_order_relaxed); }

 private:
  void CreateFile();

  TraceSink* sink_;
  std::string name_;
  StartedFn started_;
  DoneFn done_;
  std::unique_ptr<TraceFile> file_;
  absl::Status file_error_;
  CaptureHeaderInfo header_;
  bool header_seen_ = false;
  std::atomic<uint64_t> announced_{0};
  std::atomic<uint64_t> received_{0};
};

// A decoded trace on an arena of its own: decoding and freeing it is a few large allocations
// instead of one per event and stat (malloc and free were a fifth of the save pool's CPU at 1,024
// hosts, docs/perf.md). Not movable: held by unique_ptr.
class DecodedTrace {
 public:
  DecodedTrace();
  DecodedTrace(const DecodedTrace&) = delete;
  DecodedTrace& operator=(const DecodedTrace&) = delete;

  bool Parse(const std::string& bytes) { return space_->ParseFromString(bytes); }
  const tensorflow::profiler::XSpace& space() const { return *space_; }

 private:
  google::protobuf::Arena arena_;
  tensorflow::profiler::XSpace* space_;  // on arena_
};

// Reads one host's trace in one pass (analysis::DecodeXSpaceHost's signature): the seam through
// which tests count how often a host is decoded.
using HostDecoder = std::function<absl::StatusOr<analysis::HostDecode>(
    const ByteSource& bytes, const std::string& host, int64_t offset_ns,
    const analysis::StepMatcher& matcher, const analysis::HostDecodeOptions& options)>;

// What saving one host's trace needs, copied: SaveHostTrace runs on a pool thread.
struct SaveInput {
  std::string host;
  int64_t rtt_offset_ns = 0;
  bool collectives = false;
  size_t max_collective_ends = 0;
  // The session's step pattern, compiled once; null when it does not compile.
  std::shared_ptr<const analysis::StepMatcher> steps;
  absl::Status steps_error;
  bool keep_space = false;  // return the decoded trace (SaveOutcome::space) for the JSON pod trace
  HostDecoder decode;       // null: analysis::DecodeXSpaceHost
  // >= 0: render this host's part of the Perfetto pod trace (SaveOutcome::pod_trace) as this host
  // of it (report::RenderPerfettoHost's host_index: the worker's position in the request).
  int64_t pod_trace_index = -1;
};

struct SaveOutcome {
  // FAILURE_STEP_UNSPECIFIED when saved.
  profctl::v1::FailureStep failed_step = profctl::v1::FAILURE_STEP_UNSPECIFIED;
  absl::Status status;
  std::string path;
  uint64_t events = 0;
  uint64_t steps = 0;                    // distinct step numbers on the host plane
  std::vector<int64_t> collective_ends;  // at most SaveInput::max_collective_ends
  std::optional<analysis::HostSummary> summary;
  std::string breakdown_error;  // why the summary is missing, when it is
  // The hang verdict's record of the host (absent when the step pattern does not compile).
  std::optional<analysis::RankCollectives> collectives;
  std::unique_ptr<DecodedTrace> space;  // with SaveInput::keep_space, once saved
  // With SaveInput::pod_trace_index, once saved: the host's part of the Perfetto pod trace on its
  // own clock (a fraction of the trace's size), or why it has none.
  std::unique_ptr<report::PerfettoHostFragment> pod_trace;
  std::string pod_trace_error;
};

// Reads `file`, validates it as an XSpace, reduces it in one pass of `in.decode` to everything
// the session keeps (the breakdown's summary, the hang verdict's record, alignment's collective
// ends, the counts), renders its part of the Perfetto pod trace from the decoded XSpace
// (SaveOutcome::pod_trace: the decoded trace is not kept for it) and commits it as
// XPlaneFileName(host); an invalid trace is committed as RejectedXPlaneFileName(host) and
// reported as FAILURE_STEP_VALIDATE, a file that cannot be read or committed as
// FAILURE_STEP_WRITE.
SaveOutcome SaveHostTrace(TraceFile& file, const SaveInput& in);

}  // namespace profctl::coordinator

#endif  // PROFCTL_COORDINATOR_ENGINE_HOST_TRACE_H_
