// The per-capture state machine behind CaptureEngine (capture_engine.h): its declaration, shared
// by the files that define its phases: capture_engine.cc (start, capture, retries of a capture,
// outcomes, finish) and capture_prepare.cc (phases 1 and 2: prepare on a budget, wait-die between
// captures of one pod, the start instant). Internal to the engine.
#ifndef PROFCTL_COORDINATOR_ENGINE_CAPTURE_SESSION_H_
#define PROFCTL_COORDINATOR_ENGINE_CAPTURE_SESSION_H_

#include <atomic>
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "common/check.h"
#include "common/reservation.h"
#include "coordinator/engine/capture_engine.h"
#include "coordinator/engine/clock_sync.h"
#include "coordinator/engine/host_trace.h"
#include "coordinator/engine/prepare_round.h"
#include "coordinator/engine/retry_policy.h"
#include "coordinator/engine/saved_hosts.h"
#include "coordinator/engine/start_policy.h"

namespace profctl::coordinator {

inline double Millis(int64_t ns) { return static_cast<double>(ns) / kNanosPerMilli; }

// ---------------------------------------------------------------------------------------------
// The state machine. All of it runs on the executor (one task at a time), except the
// HostTraceStream callbacks (ForAttempt), which run on transport threads and only post.

class CaptureEngine::Session : public std::enable_shared_from_this<CaptureEngine::Session> {
 public:
  using FailureStep = profctl::v1::FailureStep;
  using HostResult = profctl::v1::HostResult;
  using SessionManifest = profctl::v1::SessionManifest;

  Session(Dependencies deps, CaptureEngineOptions options, CapturePlan plan, DoneCallback done)
      : deps_(std::move(deps)),
        options_(options),
        plan_(std::move(plan)),
        done_(std::move(done)),
        ex_(*deps_.executor),
        clock_(ex_.clock()),
        backoff_(options_.retry_initial_backoff_ms, options_.retry_max_backoff_ms,
                 options_.retry_jitter_seed),
        wait_backoff_(options_.reservation_wait_initial_ms, options_.reservation_wait_max_ms,
                      options_.retry_jitter_seed) {}

  ~Session() {
    // Clients first: each waits for its calls in flight, whose callbacks touch streams.
    for (Host& h : hosts_) h.client.reset();
    absl::MutexLock lock(&released_mu_);
    released_mu_.Await(absl::Condition(
        +[](int* pending) { return *pending == 0; }, &released_pending_));
  }

  // Notified when this session is gone, after every member (ClientsGone is declared first, so
  // it is destroyed last).
  std::shared_ptr<absl::Notification> gone() const { return gone_.notification; }

  void Begin();
  void Interrupt();
  // Whether a cancel came after the session finished (while its outputs are written).
  bool OutputsInterrupted() const { return cancels_.load() > cancels_seen_.load(); }
  // CaptureEngine::Cancel was called (any thread): counted at once, so an interrupt that comes
  // while the outputs are written stops them even though the executor's Interrupt then finds the
  // session finished.
  void NoteCancel() { cancels_.fetch_add(1); }

 private:
  enum class Phase { kPreparing, kReady, kCapturing, kSaving, kDone };

  struct Host {
    size_t index = 0;
    HostResult r;
    Phase phase = Phase::kPreparing;
    // Declared before `client`: destroyed after it, since the client's destructor waits for the
    // stream's last callback.
    std::unique_ptr<HostTraceStream> stream;
    std::unique_ptr<AgentClient> client;
    int64_t prepare_started_mono = 0;
    // The current GetInfo + clock-sync round (a new one per prepare retry).
    PrepareRound round;
    // It answered an RPC of prepare, in any round: alive, and worth waiting for (DeriveBudget).
    bool answered = false;
    // This round's pace: GetInfo's answer time, the last answer's round trip and when it came,
    // and when the sample in flight was sent (SlowHostsReadyBy, PrepareProgress).
    int64_t info_rtt_ns = 0;
    int64_t last_rtt_ns = 0;
    int64_t last_answer_mono = 0;
    int64_t sample_sent_mono = 0;
    // GetInfo reserved the agent's slot for this session and no Capture has taken it yet: the
    // session releases it (Cancel) before it ends.
    bool reserved = false;
    // Wait-die: GetInfo rounds that found the agent reserved by a younger session and were asked
    // again (they count as no prepare retry), since when, and the last refusal while it waits.
    int reservation_waits = 0;
    int64_t waiting_since_mono = 0;
    bool waiting_for_reservation = false;
    absl::Status reservation_refusal;
    bool started_seen = false;
    bool clock_measured = true;  // false: a peer whose clock cannot be asked (TSL)
    int64_t capture_started_mono = 0;
    // Capture/Fetch attempts: the current one's number (1-based; 0 before the first), kind and
    // start; whether the agent may hold our session (a Capture that may have reached it failed):
    // then the next attempt is a Fetch; and a retry waiting for its backoff.
    int attempt = 0;
    bool fetching = false;
    int64_t attempt_started_mono = 0;
    bool agent_may_hold = false;
    bool retry_pending = false;
    // Fetches that found nothing (the agent answered: record it again): they use up no retry.
    int empty_fetches = 0;
    // The last Capture attempt's error: what a host whose Fetch found nothing reports.
    absl::Status last_capture_error;
    // GetInfo rounds of a host that was down when the session started (prepare retries), and
    // the round whose answers count.
    int prepare_round = 0;
    profctl::v1::CancelReason cancel_reason = profctl::v1::CANCEL_REASON_UNSPECIFIED;
    std::vector<int64_t> collective_ends;  // agent clock, absolute
    // The compact per-step summary for the breakdown (times on the clock-sync timeline until
    // Align shifts them onto the refined one).
    std::optional<analysis::HostSummary> summary;
    // The saved trace, decoded, for the pod trace (within kept_trace_budget_bytes), and the bytes
    // it counts against that budget (its serialized size: reserved when saving starts).
    std::unique_ptr<DecodedTrace> space;
    uint64_t kept_bytes = 0;
  };

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

  // Like Bind, for one Capture/Fetch attempt of `h`: `fn(session, host, args...)`, ignored when
  // it comes from an earlier attempt's stream (there should be none once it is done).
  template <typename Fn>
  auto ForAttempt(const Host& h, Fn fn) {
    return [weak = weak_from_this(), ex = &ex_, index = h.index, attempt = h.attempt,
            fn = std::move(fn)](auto... args) {
      ex->Post([weak, index, attempt, fn, args...]() mutable {
        std::shared_ptr<Session> s = weak.lock();
        if (s != nullptr && s->hosts_[index].attempt == attempt) {
          fn(*s, s->hosts_[index], std::move(args)...);
        }
      });
    };
  }

  // Phase 1.
  void StartPrepare(Host& h);
  void TakeSample(Host& h);
  // TakeSample, adding what starting it cost to warm_send_ns_.
  void TakeWarmSample(Host& h);
  void OnInfo(Host& h, absl::StatusOr<AgentInfo> info);
  void OnSample(Host& h, const absl::StatusOr<ClockReading>& reading);
  // The host answered an RPC of prepare (the first time counts: DeriveBudget's quiet rule).
  void Answered(Host& h);
  // After an answer of the round: the next sample, or see whether the host is ready.
  void OnRoundStep(Host& h, const PrepareRound::Step& step);
  void MaybeReady(Host& h);
  // Without --prepare-timeout: shortens the prepare budget from the ready hosts' prepare times
  // when half of them, then 90 %, are ready.
  void DeriveBudget();
  // `h` answered GetInfo that it is busy with or reserved for another session: the capture gives
  // up whole. Hosts that answered are failed now; those whose GetInfo is in flight when it comes.
  void GiveUpBusyPod(Host& h, const absl::Status& status);
  // Wait-die: `refused` (ALREADY_EXISTS from GetInfo) came from a reservation of a session younger
  // than this one: asks `h` again after a short jittered backoff (the last time shortly before the
  // prepare budget's end, where OnPrepareDeadline gives up) and returns true. False (the caller
  // gives up whole) for a running capture, an older or unordered session's reservation, or once
  // the budget is spent.
  bool WaitForReservation(Host& h, const absl::Status& refused);
  // Why the pod is busy, for a host whose GetInfo `refused`: says whose reservation it was and,
  // for a host that waited, how long.
  absl::Status BusyReason(const Host& h, const absl::Status& refused) const;
  // Without --prepare-timeout: the latest instant a host still preparing whose answers are
  // arriving should be ready (ProjectedReadyNs), within the budget's maximum; 0 if none.
  int64_t SlowHostsReadyBy() const;
  // Pushes the prepare deadline out to SlowHostsReadyBy() when that is later.
  void FollowSlowHosts();
  // What a host not ready yet had done (for its error).
  std::string PrepareProgress(const Host& h) const {
    return PrepareProgressText(h.round.info_done(), h.info_rtt_ns, h.round.samples_answered(),
                               h.last_rtt_ns, NowMono() - h.attempt_started_mono);
  }
  void ScheduleBudget(int64_t deadline_mono);
  void OnPrepareDeadline(uint64_t generation);
  // Phase 2.
  void EndPrepare();
  // Retries (CapturePlan::retries): a GetInfo round of a host that is down, a Capture that may
  // pass, a transfer to fetch again. Each returns false (nothing scheduled) when the failure is
  // final; every attempt goes into the host's attempt_log.
  bool RetryPrepare(Host& h, const absl::Status& status);
  bool RetryCapture(Host& h, const absl::Status& status, bool header_seen);
  void OnRetryDue(Host& h, int attempt, bool fetch);
  void LogAttempt(Host& h, absl::string_view kind, int64_t started_mono, const absl::Status& status,
                  int64_t backoff_ns);
  void ScheduleDeadline();
  void OnDeadline();
  // Phase 3.
  void StartCapture(Host& h);
  void StartAttempt(Host& h, bool fetch);
  void OnStarted(Host& h, int64_t agent_start_ns);
  void OnCaptureDone(Host& h, const absl::Status& status);
  void SaveTrace(Host& h);
  void OnSaved(Host& h, SaveOutcome out);
  void OnWindowClosed();
  void Tick(int64_t next_mono);
  // Phases 4 and 5.
  void MaybeFinish();
  // Records h's agent instance; false (h failed) when another listed worker is the same agent.
  bool ClaimInstance(Host& h);
  // Saved hosts: complete, or INCOMPLETE with what they recorded instead (after Align: an
  // unmeasured clock's lateness is known only then).
  void ClassifyRecordings();
  int64_t ToleranceNs() const {
    return (plan_.tolerance_ms > 0 ? plan_.tolerance_ms : options_.late_tolerance_ms) *
           kNanosPerMilli;
  }
  static bool Saved(const HostResult& r) {
    return r.status() == profctl::v1::HOST_STATUS_OK ||
           r.status() == profctl::v1::HOST_STATUS_INCOMPLETE;
  }
  // Every saved host on one timeline (saved_hosts.h AlignSavedHosts).
  void Align();
  // Every host is done: their clients (channels, connections) are torn down by one pool job
  // while the outputs are written, instead of one after another when the session ends.
  void ReleaseClients();
  // The finish phase after MaybeFinish: pod outputs, session.json, then `done` posted to the
  // executor. On Dependencies::finisher when there is one (nothing else of the session runs
  // then), else on the executor.
  void Finish();

  void Fail(Host& h, FailureStep step, const absl::Status& status);
  void Succeed(Host& h);
  // session.json as it stands (status RUNNING), now; and at most every manifest_flush_ms. Printed
  // and written on the pool (without one, here), one snapshot at a time: a newer one waits
  // behind the one in flight, replacing any older one waiting.
  void FlushManifest();
  void WriteSnapshotOnPool(std::unique_ptr<profctl::v1::SessionManifest> snapshot);
  void OnSnapshotWritten(const absl::Status& status);
  void ScheduleManifestFlush();
  void OnInterruptGraceOver();
  void Progress(const std::string& line) {
    if (deps_.progress) deps_.progress(line);
  }
  int64_t NowMono() const { return clock_.MonoNs(); }

  struct NotifyOnDestruction {
    std::shared_ptr<absl::Notification> notification = std::make_shared<absl::Notification>();
    ~NotifyOnDestruction() { notification->Notify(); }
  };
  NotifyOnDestruction gone_;  // first member: destroyed last
  Dependencies deps_;
  const CaptureEngineOptions options_;
  const CapturePlan plan_;
  DoneCallback done_;
  Executor& ex_;
  const Clock& clock_;
  SessionManifest manifest_;
  std::vector<Host> hosts_;

  bool preparing_ = true;  // the session-wide prepare phase
  // A host answered that it is busy with or reserved for another session: nothing is captured
  // (all or nothing); the first such answer.
  absl::Status pod_busy_;
  // Release Cancels sent by MaybeFinish and not yet answered.
  int releases_pending_ = 0;
  bool releases_sent_ = false;
  bool cancelled_ = false;
  bool finished_ = false;
  // Cancels asked for, and those Interrupt saw before the session finished (the capture's own):
  // more asked than seen means one came while the outputs were written.
  std::atomic<int> cancels_{0};
  std::atomic<int> cancels_seen_{0};
  // The pod step breakdown, from FinishBreakdown to `done`'s task.
  std::optional<analysis::PodBreakdown> pod_breakdown_;
  int64_t prepare_started_mono_ = 0;
  int64_t prepare_deadline_mono_ = 0;  // when preparing ends, unless every host settles first
  // The latest it may end: the first budget, shrunk by DeriveBudget's rules; the quiet rule
  // ends it sooner, never later.
  int64_t prepare_cap_mono_ = 0;
  uint64_t budget_generation_ = 0;
  std::vector<int64_t> ready_prepare_ns_;  // prepare times of hosts ready so far
  size_t settled_ = 0;                     // hosts past the prepare phase (ready or failed)
  size_t terminal_ = 0;                    // hosts with a final status
  int64_t start_at_ = 0;                   // wall, coordinator clock
  std::string repository_root_;  // CaptureArgs::repository_root: the session folder's parent
  absl::flat_hash_map<std::string, size_t> instance_owner_;  // agent instance id -> host index
  bool manifest_flush_scheduled_ = false;
  bool manifest_write_failed_ = false;
  bool snapshot_in_flight_ = false;
  std::unique_ptr<profctl::v1::SessionManifest> waiting_snapshot_;
  // A snapshot is being written on the pool; Finish waits for it before the final write.
  absl::Mutex snapshot_mu_;
  bool snapshot_writing_ ABSL_GUARDED_BY(snapshot_mu_) = false;
  int64_t lead_ns_ = 0;
  uint64_t kept_trace_bytes_ = 0;  // reserved by hosts' decoded traces (Host::kept_bytes)
  std::shared_ptr<const analysis::StepMatcher> step_matcher_;  // plan_.reader's, compiled
  absl::Status step_matcher_error_;
  int64_t per_host_send_ns_ = 0;  // measured in Begin
  // ReleaseClients' jobs not yet done; ~Session waits for them (their calls' callbacks touch
  // hosts' streams and the caller's clock).
  absl::Mutex released_mu_;
  int released_pending_ ABSL_GUARDED_BY(released_mu_) = 0;
  // What starting the clock samples cost, in all (TakeWarmSample): one RPC on a connected
  // channel, as each Capture is.
  int64_t warm_send_ns_ = 0;
  int64_t warm_sends_ = 0;
  int64_t window_start_mono_ = 0;
  int64_t window_end_mono_ = 0;
  // The session's deadline (CapturePlan::deadline_ms, or derived when preparing ends).
  int64_t deadline_mono_ = std::numeric_limits<int64_t>::max();
  // CaptureRequest.session_key: only this coordinator can cancel or fetch its session.
  std::string session_key_;
  // Against other sessions' reservations (wait-die): this session's start and a random ticket.
  ReservationPriority priority_;
  // A host waiting for a younger session's reservation waits until this, at most: the prepare
  // budget asked for (or the largest derived one), from the session's start.
  int64_t reservation_wait_cap_mono_ = 0;
  RetryBackoff backoff_;
  RetryBackoff wait_backoff_;
};

}  // namespace profctl::coordinator

#endif  // PROFCTL_COORDINATOR_ENGINE_CAPTURE_SESSION_H_
