// The step signal at a window's end, for the hang verdict (analysis/hang_verdict.h): every
// capture asks each host that recorded for its agent's step signal (AgentService.GetStepSignal)
// once its window ends, keeps the answer reduced per step source in session.json
// (HostResult.step_signal), and the verdict, at capture and in `profctl analyze`, reads it from
// there. Pure conversions, no I/O.
#ifndef PROFCTL_COORDINATOR_ENGINE_STEP_SIGNAL_H_
#define PROFCTL_COORDINATOR_ENGINE_STEP_SIGNAL_H_

#include <cstdint>
#include <optional>

#include "absl/status/statusor.h"
#include "analysis/hang_verdict.h"
#include "coordinator/clients/agent_client.h"
#include "profctl/v1/agent.pb.h"
#include "profctl/v1/session.pb.h"

namespace profctl::coordinator {

// What a capture asks at the window's end: each step source's state and its stalls, a few dozen
// bytes a source. An agent older than summary_only answers its latest steps instead (enough for
// a median per source: a rank of 8 processes gets 16 each), ~8 KB a host, reduced here.
inline constexpr StepSignalQuery kStepSignalAtEndQuery = {
    .since_ns = 0, .max_samples = 128, .summary_only = true};
// Steps a source needs for a median (agent/hang_detector.h's kMinSteps).
inline constexpr uint32_t kStepSignalMinSteps = 3;

// The answer (or the error) reduced for HostResult.step_signal: per source its last step, the
// median of its samples (the stall's median when the agent reported it stalled), and its stall;
// from the agent's summaries where it sent them (then its samples are not read). Sources in name
// order.
profctl::v1::StepSignalAtEnd StepSignalAtEndOf(
    const absl::StatusOr<profctl::v1::GetStepSignalResponse>& answer);

// The hang verdict's input from a host's record; nullopt when the host was not asked or did not
// answer.
std::optional<analysis::StepSignal> HangSignalOf(const profctl::v1::StepSignalAtEnd& record);

}  // namespace profctl::coordinator

#endif  // PROFCTL_COORDINATOR_ENGINE_STEP_SIGNAL_H_
