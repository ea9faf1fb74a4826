// Phase 3 of a capture (capture_session.h): each ready host's Capture at the common start, its
// stream into a temporary file (HostTraceStream), retries (a Fetch when the agent may hold the
// recording, a new Capture while the window can still be caught), the window's progress lines,
// and the end of an interrupt's grace. A finished stream goes to CollectPhase. Owns every host's
// attempts; internal to the engine, runs on the session's executor.
#ifndef PROFCTL_COORDINATOR_ENGINE_CAPTURE_RUN_H_
#define PROFCTL_COORDINATOR_ENGINE_CAPTURE_RUN_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "coordinator/engine/capture_engine.h"
#include "coordinator/engine/host_trace.h"
#include "profctl/v1/session.pb.h"

namespace profctl::coordinator {

class RunPhase {
 public:
  explicit RunPhase(CaptureEngine::Session& s);
  ~RunPhase();
  RunPhase(const RunPhase&) = delete;
  RunPhase& operator=(const RunPhase&) = delete;

  // The window is set (PreparePhase::End): progress lines while it runs, and its close.
  void Begin();
  // Host `i` is ready and its window open: its Capture, for the common start translated into its
  // clock.
  void StartCapture(size_t i);
  // The interrupt: every host capturing is sent AgentService.Cancel (it stops and sends what it
  // recorded), except one waiting to record again, which fails now.
  void Interrupt();
  // Host `i` (capturing) fails with `status` at `step`; its stream in flight is cancelled.
  void Abort(size_t i, profctl::v1::FailureStep step, const absl::Status& status);
  // The interrupt's grace is over: every host still capturing is abandoned (reported hung).
  void OnInterruptGraceOver();
  // The step signal of every host recording or saved, asked once: when the window closes, or
  // when the last host is done if that came first (hang verdict evidence: step_signal.h). Each
  // answer lands in the host's HostResult.step_signal; Session::MaybeFinish waits for them.
  void AskStepSignals();

 private:
  struct Host {
    // Capture/Fetch attempts: the current one's number (1-based; 0 before the first), kind and
    // start; whether the agent may hold our session (a Capture that may have reached it failed):
    // then the next attempt is a Fetch; and a retry waiting for its backoff.
    std::unique_ptr<HostTraceStream> stream;
    int attempt = 0;
    bool fetching = false;
    int64_t attempt_started_mono = 0;
    bool agent_may_hold = false;
    bool retry_pending = false;
    // Fetches that found nothing (the agent answered: record it again): they use up no retry.
    int empty_fetches = 0;
    // The last Capture attempt's error: what a host whose Fetch found nothing reports.
    absl::Status last_capture_error;
    bool started_seen = false;
    int64_t capture_started_mono = 0;
  };

  void StartAttempt(size_t i, bool fetch);
  void OnStarted(size_t i, int64_t agent_start_ns);
  void OnCaptureDone(size_t i, const absl::Status& status);
  // A Capture or Fetch that failed: retried (true) while attempts are left and the retry can still
  // do its job; every attempt goes into the host's attempt_log.
  bool Retry(size_t i, const absl::Status& status, bool header_seen);
  void OnRetryDue(size_t i, int attempt, bool fetch);
  void Tick(int64_t next_mono);
  void OnWindowClosed();
  // Like Session::Bind, for one Capture/Fetch attempt of host `i`: `fn(run, i, args...)`, ignored
  // when it comes from an earlier attempt's stream.
  template <typename Fn>
  auto ForAttempt(size_t i, Fn fn);

  CaptureEngine::Session& s_;
  std::vector<Host> hosts_;
  bool step_signals_asked_ = false;
};

}  // namespace profctl::coordinator

#endif  // PROFCTL_COORDINATOR_ENGINE_CAPTURE_RUN_H_
