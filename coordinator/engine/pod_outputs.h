// The session's outputs over its saved hosts, written once every host is done: the hang verdict
// (judged once, from every saved host's record), the aligned pod timeline (pod.trace.json.gz),
// the pod step breakdown's files (rendered once), and the saved traces made durable. Functions
// over the saved hosts; the engine's FinishJob runs them on its finisher (or executor).
#ifndef PROFCTL_COORDINATOR_ENGINE_POD_OUTPUTS_H_
#define PROFCTL_COORDINATOR_ENGINE_POD_OUTPUTS_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "analysis/breakdown.h"
#include "analysis/hang_verdict.h"
#include "common/executor.h"
#include "coordinator/engine/host_trace.h"
#include "coordinator/session/session_writer.h"
#include "profctl/v1/session.pb.h"
#include "report/pod_perfetto_trace.h"

namespace profctl::coordinator {

// One saved host (status OK or INCOMPLETE), aligned, in the session's host order.
struct PodOutputHost {
  const profctl::v1::HostResult* r = nullptr;
  // Its trace kept decoded from saving it; null: read back from the sink and decoded.
  std::unique_ptr<DecodedTrace> space;
  // Its part of the Perfetto pod trace, rendered as it was saved, or why it has none.
  std::unique_ptr<report::PerfettoHostFragment> pod_trace;
  std::string pod_trace_error;
  // Its per-step summary; absent when the breakdown left it out (manifest.errors says why).
  std::optional<analysis::HostSummary> summary;
  // Its record for the hang verdict, made as it was saved; absent when the step pattern does
  // not compile (then there is no breakdown either).
  std::optional<analysis::RankCollectives> collectives;
};

struct PodOutputsInput {
  std::string session;      // the session's name, for the breakdown's files
  int64_t start_at_ns = 0;  // the common start: the pod trace's time base
  TraceSink* sink = nullptr;
  // Where hosts are rendered, the breakdown built and the traces synced; null: here.
  WorkPool* pool = nullptr;
  // Asked before each output and between hosts of the pod trace (any thread may make it true):
  // the session was interrupted. Outputs not yet written are then skipped (the pod trace stops
  // between two hosts and is not written; no breakdown file is rendered); the traces' sync still
  // happens. Null: never.
  std::function<bool()> interrupted;
};

// Makes every committed trace durable, judges the hang once from the hosts' records, writes the
// pod trace (a host that cannot be read back is left out of it) and the breakdown's files,
// rendered once the pod trace's fate is known (naming it only when it was written). Files
// written go into manifest.pod_trace_file / breakdown_files, problems into manifest.errors; an
// interrupt's skipped outputs are named there in one line, with the `profctl analyze` command
// that builds them from the saved traces (InterruptedOutputsError). Returns the pod step
// breakdown, absent when no host has a summary or the interrupt came first.
std::optional<analysis::PodBreakdown> WritePodOutputs(std::vector<PodOutputHost> hosts,
                                                      const PodOutputsInput& in,
                                                      profctl::v1::SessionManifest& manifest);

// The line manifest.errors gets when an interrupt skipped `skipped` (file names) in the session
// folder `session_dir`: which, that every saved host's trace is kept, and the command that
// builds them ("profctl analyze DIR", with --pod-trace when the pod trace is one of them).
std::string InterruptedOutputsError(const std::vector<std::string>& skipped,
                                    const std::string& session_dir);

// One saved host of a pod trace, in the session's host order.
struct PodTraceHost {
  std::string host;
  int64_t offset_ns = 0;  // the clock offset it was aligned with (HostResult clock.offset_ns)
  // Its saved trace (named in errors), read back with `read` and decoded when `space` is null;
  // `read` is called on the pool.
  std::string file;
  std::function<absl::StatusOr<std::string>()> read;
  std::unique_ptr<DecodedTrace> space;
  // Perfetto: its part rendered already (then nothing is decoded), or why it could not be
  // (then it is left out with that reason); neither: rendered from `space` or `read`.
  std::unique_ptr<report::PerfettoHostFragment> fragment;
  std::string fragment_error;
};

// Perfetto's protobuf trace (report/pod_perfetto_trace.h, pod.perfetto-trace.gz) or Chrome
// trace-event JSON (report/pod_trace_writer.h, pod.trace.json.gz).
enum class PodTraceFormat { kPerfetto, kChromeJson };

struct PodTraceOutcome {
  bool written = false;
  bool interrupted = false;         // stopped by `interrupted` (then not written)
  std::vector<std::string> errors;  // "pod trace: ..." lines: hosts left out, write errors
};

// Writes the pod trace of `hosts` to `path` (a gzip file, via a temporary one renamed on
// success), times relative to `start_at_ns`: each host rendered and compressed on `pool` (null:
// here), at most 8 at once, joined in host order; a host that cannot be read back is left out.
// `interrupted` (may be null) is asked between hosts; `breakdown` is asked after the last host
// for the pod's step track (null: none). The capture's finish and `profctl analyze --pod-trace`
// write the same file this way, in `format`.
PodTraceOutcome WritePodTraceFile(std::vector<PodTraceHost> hosts, const std::string& path,
                                  int64_t start_at_ns, WorkPool* pool,
                                  const std::function<bool()>& interrupted,
                                  absl::FunctionRef<const analysis::PodBreakdown*()> breakdown,
                                  PodTraceFormat format = PodTraceFormat::kPerfetto);

}  // namespace profctl::coordinator

#endif  // PROFCTL_COORDINATOR_ENGINE_POD_OUTPUTS_H_
