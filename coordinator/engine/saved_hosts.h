// What the session concludes about the hosts it saved, once every host is done: one timeline
// (AlignSavedHosts: clock-sync offsets, step-number estimates for clocks that could not be
// measured, refined by collectives) and whether each recording holds the window asked for
// (ClassifyRecording). Functions over the saved hosts' results, no session state.
#ifndef PROFCTL_COORDINATOR_ENGINE_SAVED_HOSTS_H_
#define PROFCTL_COORDINATOR_ENGINE_SAVED_HOSTS_H_

#include <cstdint>
#include <optional>
#include <vector>

#include "analysis/breakdown.h"
#include "profctl/v1/agent.pb.h"
#include "profctl/v1/session.pb.h"

namespace profctl::coordinator {

// The host's trace was saved (OK, or INCOMPLETE: another window than asked for).
inline bool IsSavedHost(const profctl::v1::HostResult& r) {
  return r.status() == profctl::v1::HOST_STATUS_OK ||
         r.status() == profctl::v1::HOST_STATUS_INCOMPLETE;
}

// One saved host, as alignment sees it.
struct AlignHost {
  profctl::v1::HostResult* r = nullptr;  // clock.* and aligned_* are set here
  bool clock_measured = true;            // false: a peer whose clock cannot be asked (TSL)
  std::vector<int64_t> collective_ends;  // agent clock, absolute; consumed
  // Made with the clock-sync offset: moved onto the refined timeline here. May be empty.
  std::optional<analysis::HostSummary>* summary = nullptr;
};

// Places every host on the coordinator's timeline: with ALIGN_MODE_COLLECTIVES, unmeasured
// clocks are first estimated from step numbers (clock.method "steps") and every clock refined
// from collective ends ("collectives"); then aligned start/stop, lateness against `start_at_ns`
// and, for a clock only alignment could place, `late` (beyond `tolerance_ns`). A refinement that
// fails is named in manifest.errors; manifest.start_spread_ns is set. When collectives refined
// some hosts but not others, each of the others gets clock.warning (why, and the offset it keeps
// +- its bound) and the same line among its summary's warnings.
void AlignSavedHosts(std::vector<AlignHost>& hosts, profctl::v1::AlignMode mode,
                     int64_t start_at_ns, int64_t tolerance_ns,
                     profctl::v1::SessionManifest& manifest);

struct RecordingRules {
  int64_t requested_ns = 0;  // the window asked for
  int64_t tolerance_ns = 0;  // the late tolerance: shorter than asked by more is truncated
  bool interrupted = false;  // the session was cancelled here
};

// Sets r's recording (complete, truncated, overlong, late, dropped events), its detail and
// durations; any but complete makes the host INCOMPLETE. `reason` is the agent's cancel reason.
// Returns false when the recording is complete.
bool ClassifyRecording(profctl::v1::HostResult& r, profctl::v1::CancelReason reason,
                       const RecordingRules& rules);

}  // namespace profctl::coordinator

#endif  // PROFCTL_COORDINATOR_ENGINE_SAVED_HOSTS_H_
