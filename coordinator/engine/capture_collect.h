// Phase 4 of a capture (capture_session.h): each host's finished stream saved as it arrives
// (validated, renamed into place, decoded once into what the pod outputs need: host_trace.h
// SaveHostTrace), on the work pool; then, once every host is done, the saved hosts on one
// timeline (AlignSavedHosts) and their recordings judged (ClassifyRecording). Owns what each
// saved host contributes to the finish; internal to the engine, runs on the session's executor.
#ifndef PROFCTL_COORDINATOR_ENGINE_CAPTURE_COLLECT_H_
#define PROFCTL_COORDINATOR_ENGINE_CAPTURE_COLLECT_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "absl/status/status.h"
#include "analysis/breakdown.h"
#include "analysis/hang_verdict.h"
#include "analysis/op_classify.h"
#include "coordinator/engine/capture_engine.h"
#include "coordinator/engine/host_trace.h"
#include "coordinator/engine/pod_outputs.h"
#include "profctl/v1/agent.pb.h"

namespace profctl::coordinator {

class CollectPhase {
 public:
  explicit CollectPhase(CaptureEngine::Session& s);

  // Compiles the session's step pattern, once for every host (each host's breakdown says so when
  // it does not compile; the CLI refuses such a pattern first).
  void Begin();
  // Host `i`'s stream ended with a whole trace: saved on the pool (here without one). `reason` is
  // the agent's cancel reason from the stream's header.
  void Save(size_t i, std::unique_ptr<HostTraceStream> stream, profctl::v1::CancelReason reason);
  // Every host is done: the saved hosts aligned, their recordings classified (complete, or
  // INCOMPLETE with what they recorded instead: an unmeasured clock's lateness is known only
  // after alignment).
  void Conclude();
  // What host `i` contributes to the pod outputs (moved out: called once per host, at the
  // hand-off to the finish).
  PodOutputHost TakeOutputs(size_t i);

 private:
  struct Host {
    profctl::v1::CancelReason cancel_reason = profctl::v1::CANCEL_REASON_UNSPECIFIED;
    std::vector<int64_t> collective_ends;  // agent clock, absolute
    // The compact per-step summary for the breakdown (times on the clock-sync timeline until
    // alignment shifts them onto the refined one).
    std::optional<analysis::HostSummary> summary;
    // The hang verdict's record of this host (absent: the step pattern does not compile).
    std::optional<analysis::RankCollectives> collectives;
    // The saved trace, decoded, for the JSON pod trace (within kept_trace_budget_bytes), and the
    // bytes it counts against that budget (its serialized size: reserved when saving starts).
    std::unique_ptr<DecodedTrace> space;
    uint64_t kept_bytes = 0;
    // Its part of the Perfetto pod trace, or why it has none.
    std::unique_ptr<report::PerfettoHostFragment> pod_trace;
    std::string pod_trace_error;
  };

  void OnSaved(size_t i, SaveOutcome out);

  CaptureEngine::Session& s_;
  std::vector<Host> hosts_;
  uint64_t kept_trace_bytes_ = 0;  // reserved by hosts' decoded traces (Host::kept_bytes)
  std::shared_ptr<const analysis::StepMatcher> step_matcher_;  // plan.reader's, compiled
  absl::Status step_matcher_error_;
};

}  // namespace profctl::coordinator

#endif  // PROFCTL_COORDINATOR_ENGINE_CAPTURE_COLLECT_H_
