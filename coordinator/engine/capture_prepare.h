// Phases 1 and 2 of a capture (capture_session.h): prepare every host on a budget (GetInfo, which
// reserves the agent, then clock-sync samples), wait-die between captures of one pod, and the one
// start instant once preparing ends. Owns every host's prepare round and the session's prepare
// budget; internal to the engine, runs on the session's executor.
#ifndef PROFCTL_COORDINATOR_ENGINE_CAPTURE_PREPARE_H_
#define PROFCTL_COORDINATOR_ENGINE_CAPTURE_PREPARE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/reservation.h"
#include "coordinator/engine/capture_engine.h"
#include "coordinator/engine/prepare_round.h"
#include "coordinator/engine/retry_policy.h"

namespace profctl::coordinator {

class PreparePhase {
 public:
  explicit PreparePhase(CaptureEngine::Session& s);

  // Sends every host its first GetInfo (the session's hosts exist and have clients).
  void Begin();
  // The session-wide prepare phase is open (until End).
  bool active() const { return active_; }
  // Host `i` failed while preparing (Session::Fail): its prepare time, before anything else is
  // said about it.
  void RecordFailure(size_t i);
  // Then, once its failure is recorded: it counts as settled; true when it was the last one to
  // settle, which ended preparing (End).
  bool OnFailed();
  // What host `i`, not ready yet, had done (for its error).
  std::string ProgressOf(size_t i) const;
  // The window closed (RunPhase): hosts still preparing fail, since they can no longer join.
  void OnWindowClosed();

 private:
  struct Host {
    int64_t prepare_started_mono = 0;
    // This round's start (a new one per prepare retry).
    int64_t attempt_started_mono = 0;
    // The current GetInfo + clock-sync round, and its number (answers of an older round are
    // ignored).
    PrepareRound round;
    int prepare_round = 0;
    bool retry_pending = false;
    // It answered an RPC of prepare, in any round: alive, and worth waiting for (DeriveBudget).
    bool answered = false;
    // This round's pace: GetInfo's answer time, the last answer's round trip and when it came,
    // and when the sample in flight was sent (SlowHostsReadyBy, Progress).
    int64_t info_rtt_ns = 0;
    int64_t last_rtt_ns = 0;
    int64_t last_answer_mono = 0;
    int64_t sample_sent_mono = 0;
    // Wait-die: GetInfo rounds that found the agent reserved by a younger session and were asked
    // again (they count as no prepare retry), since when, and the last refusal while it waits.
    int reservation_waits = 0;
    int64_t waiting_since_mono = 0;
    bool waiting_for_reservation = false;
    absl::Status reservation_refusal;
    // The handshake probe of a host silent and not connected at a prepare deadline (once per
    // host) and what it answered: how long its host's kernel took to answer a TCP handshake.
    enum class Probe { kNone, kInFlight, kDone };
    Probe probe = Probe::kNone;
    absl::StatusOr<int64_t> handshake_ns = absl::UnknownError("not probed");
  };

  void StartRound(size_t i);
  void TakeSample(size_t i);
  // TakeSample, adding what starting it cost to warm_send_ns_.
  void TakeWarmSample(size_t i);
  void OnInfo(size_t i, absl::StatusOr<AgentInfo> info);
  void OnSample(size_t i, const absl::StatusOr<ClockReading>& reading);
  // The host answered an RPC of prepare (the first time counts: DeriveBudget's quiet rule).
  void Answered(size_t i);
  // After an answer of the round: the next sample, or see whether the host is ready.
  void OnRoundStep(size_t i, const PrepareRound::Step& step);
  void MaybeReady(size_t i);
  // Records the host's agent instance; false (a host failed) when another listed worker is the
  // same agent and `i` lost.
  bool ClaimInstance(size_t i);
  // Without --prepare-timeout: shortens the prepare budget from the ready hosts' prepare times
  // when half of them, then 90 %, are ready. `answered`: a host whose first answer this is, its
  // projected ready time not followed yet (FollowSlowHost).
  void DeriveBudget(std::optional<size_t> answered = std::nullopt);
  // Host `i` answered GetInfo that it is busy with or reserved for another session: the capture
  // gives up whole. Hosts that answered are failed now; those whose GetInfo is in flight when it
  // comes.
  void GiveUpBusyPod(size_t i, const absl::Status& status);
  // Wait-die: `refused` (ALREADY_EXISTS from GetInfo) came from a reservation of a session younger
  // than this one: asks host `i` again after a short jittered backoff (the last time shortly
  // before the prepare budget's end, where OnDeadline gives up) and returns true. False (the
  // caller gives up whole) for a running capture, an older or unordered session's reservation,
  // or once the budget is spent.
  bool WaitForReservation(size_t i, const absl::Status& refused);
  // Why the pod is busy, for a host whose GetInfo `refused`: says whose reservation it was and,
  // for a host that waited, how long.
  absl::Status BusyReason(size_t i, const absl::Status& refused) const;
  // Without --prepare-timeout: the latest instant a host still preparing whose answers are
  // arriving should be ready (ProjectedReadyNs), within the budget's maximum; 0 if none.
  int64_t SlowHostsReadyBy() const;
  // The same for host `i` alone; 0 when it does not count.
  int64_t HostReadyBy(size_t i) const;
  // After an answer of host `i`: pushes the prepare deadline out to HostReadyBy(i) when that is
  // later. The deadline is never below any other host's projection (each was followed when it
  // answered, and nothing lowers the deadline under SlowHostsReadyBy()), so this is what
  // following SlowHostsReadyBy() would do, without a pass over the pod per answer (about five a
  // host: quadratic in the pod's size).
  void FollowSlowHost(size_t i);
  void ScheduleBudget(int64_t deadline_mono);
  void OnDeadline(uint64_t generation);
  // Until when preparing waits for host `i`, silent (its GetInfo in flight): its GetInfo's
  // timeout, or sooner when it is not connected and its host answered a handshake probe
  // (CaptureEngineOptions::frozen_host_wait_ms); starts that probe the first time.
  int64_t SilentHostWaitUntil(size_t i);
  // Host `i` is silent, not connected, and its host answered a handshake probe long enough ago:
  // its agent is frozen or stuck, not behind a slow link.
  bool LooksFrozen(size_t i) const;
  // Host `i`'s host answered its handshake probe and its channel is not connected (LooksFrozen
  // without the rest; also for a GetInfo that has just timed out).
  bool HandshakeWithoutConnection(size_t i) const;
  // Why host `i` looks frozen, for its messages (only when HandshakeWithoutConnection).
  std::string FrozenNote(size_t i) const;
  void OnHandshake(size_t i, absl::StatusOr<int64_t> handshake_ns);
  // A GetInfo round of a host that is down, retried (CapturePlan::retries), also after preparing
  // ended with --late=capture; false (nothing scheduled) when the failure is final.
  bool Retry(size_t i, const absl::Status& status);
  void OnRetryDue(size_t i, int round);
  // Phase 2: one start instant; then the ready hosts are captured (RunPhase).
  void End();

  CaptureEngine::Session& s_;
  std::vector<Host> hosts_;
  bool active_ = true;
  // A host answered that it is busy with or reserved for another session: nothing is captured
  // (all or nothing); the first such answer.
  absl::Status pod_busy_;
  int64_t deadline_mono_ = 0;  // when preparing ends, unless every host settles first
  // The deadline OnDeadline set to wait for silent hosts' GetInfo, past the budget (-1: none).
  int64_t silent_wait_deadline_ = -1;
  // The latest it may end: the first budget, shrunk by DeriveBudget's rules; the quiet rule
  // ends it sooner, never later.
  int64_t cap_mono_ = 0;
  uint64_t budget_generation_ = 0;
  std::vector<int64_t> ready_prepare_ns_;  // prepare times of hosts ready so far
  int64_t slowest_info_ns_ = 0;  // the longest a GetInfo took to be answered (SilentHostWaitUntil)
  size_t settled_ = 0;           // hosts past the prepare phase (ready or failed)
  absl::flat_hash_map<std::string, size_t> instance_owner_;  // agent instance id -> host index
  // What starting the first GetInfo cost per host (Begin), and what starting the clock samples
  // cost in all (TakeWarmSample): one RPC on a connected channel, as each Capture is.
  int64_t per_host_send_ns_ = 0;
  int64_t warm_send_ns_ = 0;
  int64_t warm_sends_ = 0;
  // Against other sessions' reservations (wait-die): this session's start and a random ticket.
  ReservationPriority priority_;
  // A host waiting for a younger session's reservation waits until this, at most: the prepare
  // budget asked for (or the largest derived one), from the session's start.
  int64_t reservation_wait_cap_mono_ = 0;
  RetryBackoff wait_backoff_;
};

}  // namespace profctl::coordinator

#endif  // PROFCTL_COORDINATOR_ENGINE_CAPTURE_PREPARE_H_
