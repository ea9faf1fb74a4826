// The per-capture state machine behind CaptureEngine (capture_engine.h), split by phase, each
// phase a class that owns its own state (per host and session-wide):
//   PreparePhase (capture_prepare.h): GetInfo and clock sync on a budget, wait-die between
//     captures of one pod, then the one start instant;
//   RunPhase (capture_run.h): the Capture/Fetch attempts of each host, their retries, the
//     window's progress, the end of an interrupt's grace;
//   CollectPhase (capture_collect.h): each host's trace saved and decoded once as it arrives, on
//     the work pool, then the saved hosts aligned and their recordings judged;
//   FinishJob (finish_job.h): the pod outputs and session.json, from a FinishInput the session
//     moves into it and never touches again.
// The Session here holds what they share: the plan, the hosts' records (status, client,
// reservation), the window's instants and deadline, the manifest, and every host's outcome
// (Fail/Succeed), the interrupt and the hand-off to the finish. Internal to the engine.
//
// Threading: all of it runs on the executor, one task at a time (each phase's entry points check
// PROFCTL_DCHECK_ON_SEQUENCE), except the HostTraceStream callbacks, which run on transport
// threads and only post, and the work the phases hand to the pool with its own copy of what it
// needs.
#ifndef PROFCTL_COORDINATOR_ENGINE_CAPTURE_SESSION_H_
#define PROFCTL_COORDINATOR_ENGINE_CAPTURE_SESSION_H_

#include <atomic>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "common/check.h"
#include "coordinator/engine/capture_collect.h"
#include "coordinator/engine/capture_engine.h"
#include "coordinator/engine/capture_prepare.h"
#include "coordinator/engine/capture_run.h"
#include "coordinator/engine/manifest_snapshots.h"
#include "coordinator/engine/reservation_leases.h"
#include "coordinator/engine/retry_policy.h"

namespace profctl::coordinator {

inline double Millis(int64_t ns) { return static_cast<double>(ns) / kNanosPerMilli; }

// Where a host stands. Each phase acts only on hosts in its own stages and ignores callbacks for
// the others.
enum class HostStage { kPreparing, kReady, kCapturing, kSaving, kDone };

// One host as every phase sees it.
struct SessionHost {
  size_t index = 0;
  profctl::v1::HostResult r;
  HostStage stage = HostStage::kPreparing;
  std::unique_ptr<AgentClient> client;
  // GetInfo reserved the agent's slot for this session and the agent has not said that its
  // capture started (which takes the reservation): the session renews it meanwhile
  // (ReservationLeases) and releases it (Cancel) before it finishes.
  bool reserved = false;
  bool clock_measured = true;  // false: a peer whose clock cannot be asked (TSL)
};

// The window's instants, set when preparing ends (PreparePhase::End), and the session's deadline.
struct SessionTimes {
  int64_t prepare_started_mono = 0;
  int64_t start_at = 0;  // wall, coordinator clock
  int64_t lead_ns = 0;
  int64_t window_start_mono = 0;
  int64_t window_end_mono = 0;
  // CapturePlan::deadline_ms, or derived when preparing ends.
  int64_t deadline_mono = std::numeric_limits<int64_t>::max();
};

// Owned by the engine and its session; the session notifies it when it is destroyed and the
// finish job when it ends: ~CaptureEngine waits for both (`done` of a session torn down early
// included).
class SessionLifetime {
 public:
  SessionLifetime() = default;
  SessionLifetime(const SessionLifetime&) = delete;
  SessionLifetime& operator=(const SessionLifetime&) = delete;
  ~SessionLifetime() { gone_->Notify(); }
  std::shared_ptr<absl::Notification> gone() const { return gone_; }

 private:
  std::shared_ptr<absl::Notification> gone_ = std::make_shared<absl::Notification>();
};

class CaptureEngine::Session : public std::enable_shared_from_this<CaptureEngine::Session> {
 public:
  using FailureStep = profctl::v1::FailureStep;
  using HostResult = profctl::v1::HostResult;
  using SessionManifest = profctl::v1::SessionManifest;

  // `cancels`: CaptureEngine::Cancel's count, bumped on any thread as it is called.
  Session(Dependencies deps, CaptureEngineOptions options, CapturePlan plan, DoneCallback done,
          std::shared_ptr<const std::atomic<int>> cancels);
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  // Notified once this session is gone and its finish job ended.
  std::shared_ptr<absl::Notification> gone() const { return lifetime_->gone(); }

  void Begin();
  // CaptureEngine::Cancel, on the executor: hosts still capturing are asked to stop and send what
  // they recorded (RunPhase::Interrupt); hosts not capturing yet fail; the session ends within
  // options.interrupt_grace_ms. After the hand-off to the finish: only counted there.
  void Interrupt();

  // --- What the phases share -------------------------------------------------------------------
  const CapturePlan& plan() const { return plan_; }
  const CaptureEngineOptions& options() const { return options_; }
  const Dependencies& deps() const { return deps_; }
  Executor& ex() const { return ex_; }
  int64_t NowMono() const { return clock_.MonoNs(); }
  int64_t WallNs() const { return clock_.WallNs(); }
  std::vector<SessionHost>& hosts() { return hosts_; }
  SessionHost& host(size_t i) { return hosts_[i]; }
  SessionManifest& manifest() { return manifest_; }
  SessionTimes& times() { return times_; }
  const SessionTimes& times() const { return times_; }
  bool cancelled() const { return cancelled_; }
  bool finished() const { return finished_; }
  // MaybeFinish sent the Cancels that release the reservations no Capture took.
  bool releases_sent() const { return releases_sent_; }
  const std::string& session_key() const { return session_key_; }
  const std::string& repository_root() const { return repository_root_; }
  int64_t ToleranceNs() const {
    return (plan_.tolerance_ms > 0 ? plan_.tolerance_ms : options_.late_tolerance_ms) *
           kNanosPerMilli;
  }
  PreparePhase& prepare() { return prepare_; }
  RunPhase& run() { return run_; }
  CollectPhase& collect() { return collect_; }
  RetryBackoff& backoff() { return backoff_; }
  ReservationLeases& leases() { return leases_; }

  // Host outcomes: each host reaches exactly one (later calls for a done host do nothing); a host
  // failing while preparing settles it (PreparePhase::OnFailed). Both may end the session.
  void Fail(SessionHost& h, FailureStep step, const absl::Status& status);
  void Succeed(SessionHost& h);
  // An attempt (GetInfo round, Capture, Fetch) into h's attempt_log.
  void LogAttempt(SessionHost& h, absl::string_view kind, int64_t started_mono,
                  const absl::Status& status, int64_t backoff_ns);
  // Once every host has its outcome and preparing is over: releases reservations no Capture took,
  // waits for the step signals asked at the window's end (RunPhase::AskStepSignals; not once
  // interrupted), concludes (alignment, recordings, status) and hands the rest to a FinishJob.
  void MaybeFinish();
  // A step signal asked (RunPhase::AskStepSignals), and its answer recorded.
  void StepSignalAsked() { ++step_signals_pending_; }
  void StepSignalAnswered() {
    --step_signals_pending_;
    MaybeFinish();
  }
  // session.json as it stands (status RUNNING): now, or at most every manifest_flush_ms.
  void FlushManifest();
  void ScheduleManifestFlush();
  // Fails every host still working at the session's deadline.
  void ScheduleDeadline();
  void Progress(const std::string& line) const {
    if (deps_.progress) deps_.progress(line);
  }

  // Posts `fn(session, args...)` to the executor, holding only a weak reference: a callback that
  // arrives after the session is gone does nothing. The callback runs on a transport thread and
  // only posts: the last reference to the session must never end up on a gRPC thread (its
  // destructor waits for the clients' callbacks, this one included). The executor outlives the
  // session (~CaptureEngine waits for it).
  template <typename Fn>
  auto Bind(Fn fn) {
    return [weak = weak_from_this(), ex = &ex_, fn = std::move(fn)](auto&&... args) mutable {
      ex->Post([weak, fn = std::move(fn),
                tup = std::make_tuple(std::forward<decltype(args)>(args)...)]() mutable {
        if (std::shared_ptr<Session> s = weak.lock()) {
          std::apply([&](auto&&... a) { fn(*s, std::move(a)...); }, std::move(tup));
        }
      });
    };
  }
  // Runs `fn(session)` on the executor at `at` (monotonic), if the session is still there.
  template <typename Fn>
  void PostAt(int64_t at, Fn fn) {
    ex_.PostAt(at, [weak = weak_from_this(), fn = std::move(fn)]() mutable {
      if (std::shared_ptr<Session> s = weak.lock()) fn(*s);
    });
  }

 private:
  void OnDeadline();
  // Host h's reservation (SessionHost::reserved), if any, released now (a Cancel of this session,
  // which the agent also remembers): the agent is free for the next capture at once rather than
  // when the lease lapses. MaybeFinish waits for the answers.
  void ReleaseReservation(SessionHost& h);
  // Every host is done: their clients (channels, connections) are torn down by one pool job
  // while the outputs are written, instead of one after another when the session ends.
  void ReleaseClients();
  // Moves what the finish needs out of the session and runs the FinishJob: on
  // Dependencies::finisher when there is one, else here.
  void HandOffFinish();

  // First member: destroyed last, after every other member (the clients' callbacks included).
  std::shared_ptr<SessionLifetime> lifetime_ = std::make_shared<SessionLifetime>();
  Dependencies deps_;
  const CaptureEngineOptions options_;
  const CapturePlan plan_;
  DoneCallback done_;
  Executor& ex_;
  const Clock& clock_;
  SessionManifest manifest_;
  std::vector<SessionHost> hosts_;
  SessionTimes times_;
  std::shared_ptr<ManifestSnapshots> snapshots_;  // null for a dry run, and once finished
  // Retries of prepare and of capture draw their jitter from one sequence.
  RetryBackoff backoff_;
  // The phases, after what they reference.
  PreparePhase prepare_;
  RunPhase run_;
  CollectPhase collect_;
  ReservationLeases leases_;

  // Release Cancels sent by MaybeFinish and not yet answered; step signals asked and not yet
  // answered.
  int releases_pending_ = 0;
  int step_signals_pending_ = 0;
  bool releases_sent_ = false;
  bool cancelled_ = false;
  bool finished_ = false;
  // CaptureEngine::Cancel's count (any thread), and how many of them Interrupt saw before the
  // hand-off: more asked than seen means one came while the outputs were written.
  std::shared_ptr<const std::atomic<int>> cancels_;
  int cancels_seen_ = 0;
  size_t terminal_ = 0;          // hosts with a final status
  std::string repository_root_;  // CaptureArgs::repository_root: the session folder's parent
  bool manifest_flush_scheduled_ = false;
  // CaptureRequest.session_key: only this coordinator can cancel or fetch its session.
  std::string session_key_;
  // ReleaseClients' jobs not yet done; ~Session waits for them (their calls' callbacks touch
  // hosts' streams and the caller's clock).
  absl::Mutex released_mu_;
  int released_pending_ ABSL_GUARDED_BY(released_mu_) = 0;
};

}  // namespace profctl::coordinator

#endif  // PROFCTL_COORDINATOR_ENGINE_CAPTURE_SESSION_H_
