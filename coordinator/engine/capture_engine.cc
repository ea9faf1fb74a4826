#include "coordinator/engine/capture_engine.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <limits>
#include <memory>
#include <optional>
#include <random>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "common/check.h"
#include "common/reservation.h"
#include "common/version.h"
#include "coordinator/engine/clock_sync.h"
#include "coordinator/engine/host_trace.h"
#include "coordinator/engine/pod_outputs.h"
#include "coordinator/engine/prepare_round.h"
#include "coordinator/engine/retry_policy.h"
#include "coordinator/engine/saved_hosts.h"
#include "coordinator/engine/start_policy.h"

namespace profctl::coordinator {

using profctl::v1::FailureStep;
using profctl::v1::HostResult;
using profctl::v1::SessionManifest;

namespace {

double Millis(int64_t ns) { return static_cast<double>(ns) / kNanosPerMilli; }

// 32 characters from the OS's random source (CaptureRequest.session_key).
std::string NewSessionKey() {
  static constexpr char kAlphabet[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
  std::random_device random;
  std::uniform_int_distribution<size_t> pick(0, sizeof(kAlphabet) - 2);
  std::string key(32, ' ');
  for (char& c : key) c = kAlphabet[pick(random)];
  return key;
}

// 64 random bits from the OS's random source (ReservationPriority.ticket); never 0.
uint64_t NewReservationTicket() {
  std::random_device random;
  const uint64_t ticket = (static_cast<uint64_t>(random()) << 32) ^ random();
  return ticket != 0 ? ticket : 1;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// The state machine. Everything below runs on the executor (one task at a time), except the
// HostTraceStream callbacks (ForAttempt), which run on transport threads and only post.

class CaptureEngine::Session : public std::enable_shared_from_this<CaptureEngine::Session> {
 public:
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

void CaptureEngine::Session::Begin() {
  PROFCTL_DCHECK_ON_SEQUENCE(ex_);
  manifest_.set_profctl_version(kVersion);
  *manifest_.mutable_request() = SessionRequestFromPlan(plan_);
  if (!plan_.origin.kind().empty()) *manifest_.mutable_origin() = plan_.origin;
  session_key_ = NewSessionKey();
  priority_ = {clock_.WallNs(), options_.reservation_ticket != 0 ? options_.reservation_ticket
                                                                 : NewReservationTicket()};
  if (plan_.reader.step_pattern != analysis::kDefaultStepPattern) {
    manifest_.set_step_pattern(plan_.reader.step_pattern);
  }
  if (absl::StatusOr<analysis::StepMatcher> m =
          analysis::StepMatcher::Create(plan_.reader.step_pattern);
      m.ok()) {
    step_matcher_ = std::make_shared<const analysis::StepMatcher>(*std::move(m));
  } else {
    step_matcher_error_ = m.status();  // each host's breakdown says so (the CLI refuses it first)
  }
  manifest_.set_late_tolerance_ns(ToleranceNs());
  if (deps_.sink != nullptr) {
    manifest_.set_session_dir(deps_.sink->location());
    if (const std::string local = deps_.sink->LocalPath(kManifestFileName); !local.empty()) {
      std::error_code ec;
      const std::filesystem::path session = std::filesystem::absolute(local, ec).parent_path();
      if (!ec) repository_root_ = session.parent_path().string();
    }
  }

  manifest_.set_coordinator_pid(static_cast<int64_t>(getpid()));
  char host_name[256] = {};
  if (gethostname(host_name, sizeof(host_name) - 1) == 0) manifest_.set_coordinator_host(host_name);

  hosts_.resize(plan_.workers.size());
  prepare_started_mono_ = NowMono();
  if (plan_.deadline_ms > 0) {
    deadline_mono_ = prepare_started_mono_ + plan_.deadline_ms * kNanosPerMilli;
    ScheduleDeadline();
  }
  const int64_t budget_ms =
      plan_.prepare_timeout_ms > 0 ? plan_.prepare_timeout_ms : options_.max_prepare_budget_ms;
  manifest_.set_prepare_budget_ms(static_cast<double>(budget_ms));
  prepare_cap_mono_ = prepare_started_mono_ + budget_ms * kNanosPerMilli;
  reservation_wait_cap_mono_ = prepare_cap_mono_;
  ScheduleBudget(prepare_cap_mono_);
  for (size_t i = 0; i < hosts_.size(); ++i) {
    Host& h = hosts_[i];
    h.index = i;
    h.r.set_address(plan_.workers[i].address);
    h.r.set_host(plan_.workers[i].file_stem());
    h.client = deps_.clients->Connect(plan_.workers[i]);
  }
  // session.json exists from the start: a coordinator killed now leaves a folder that says what
  // it is.
  FlushManifest();
  const int64_t fan_out_start = NowMono();
  for (Host& h : hosts_) StartPrepare(h);
  // What starting one host's RPCs costs here (channel set-up, request encoding): sending every
  // Capture costs about as much, and the lead must cover it (EndPrepare).
  per_host_send_ns_ = (NowMono() - fan_out_start) / static_cast<int64_t>(hosts_.size());
}

// --- Phase 1: prepare --------------------------------------------------------------------------

void CaptureEngine::Session::StartPrepare(Host& h) {
  if (h.prepare_round == 0) h.prepare_started_mono = NowMono();
  // A new round (a retry) starts clean; answers of the last one are ignored.
  ++h.prepare_round;
  h.attempt_started_mono = NowMono();
  h.info_rtt_ns = h.last_rtt_ns = h.last_answer_mono = 0;
  h.round = PrepareRound(
      h.client->MeasuresClock(),
      {.max_samples = options_.clock_sync_samples, .min_samples = options_.min_clock_sync_samples});
  // Reserves the agent's slot for this session (not for a dry run): a second capture of the same
  // pod then finds it busy everywhere it got first, and gives up whole.
  Reservation reserve;
  if (!plan_.prepare_only) {
    const int64_t budget_ms =
        plan_.prepare_timeout_ms > 0 ? plan_.prepare_timeout_ms : options_.max_prepare_budget_ms;
    reserve = {plan_.session, session_key_,
               std::min<int64_t>(60'000, budget_ms + options_.rpc_timeout_ms + 3'000), priority_};
  }
  h.client->GetInfo(
      reserve, options_.rpc_timeout_ms,
      Bind([i = h.index, round = h.prepare_round](Session& s, absl::StatusOr<AgentInfo> info) {
        if (s.hosts_[i].prepare_round == round) s.OnInfo(s.hosts_[i], std::move(info));
      }));
}

void CaptureEngine::Session::TakeWarmSample(Host& h) {
  const int64_t sent = NowMono();
  TakeSample(h);
  warm_send_ns_ += NowMono() - sent;
  ++warm_sends_;
}

void CaptureEngine::Session::TakeSample(Host& h) {
  h.sample_sent_mono = NowMono();
  // A link slower than the usual sample timeout still gets its answers: twice what GetInfo took.
  const int64_t timeout_ms =
      std::clamp(2 * h.info_rtt_ns / kNanosPerMilli, options_.sample_timeout_ms,
                 std::max(options_.sample_timeout_ms, options_.max_prepare_budget_ms));
  h.client->SyncClock(timeout_ms, Bind([i = h.index, round = h.prepare_round](
                                           Session& s, const absl::StatusOr<ClockReading>& r) {
                        if (s.hosts_[i].prepare_round == round) s.OnSample(s.hosts_[i], r);
                      }));
}

void CaptureEngine::Session::OnInfo(Host& h, absl::StatusOr<AgentInfo> info) {
  PROFCTL_DCHECK_ON_SEQUENCE(ex_);
  if (h.phase != Phase::kPreparing) {
    // Failed while its GetInfo was in flight (the pod was busy, the budget ran out), and the
    // agent reserved it meanwhile: released with the others unless they already were (then it
    // lapses at its TTL).
    if (h.phase == Phase::kDone && info.ok() && !releases_sent_ && !plan_.prepare_only &&
        h.client != nullptr && h.client->MeasuresClock()) {
      h.reserved = true;
    }
    return;
  }
  const PrepareRound::Step step = h.round.OnInfo(std::move(info));
  if (step.answered && !plan_.prepare_only && h.round.measures_clock()) h.reserved = true;
  if (step.answered && h.waiting_for_reservation) {
    Progress(
        absl::StrFormat("%s: reserved after waiting %.0f ms for a younger capture to let it go",
                        h.r.address(), Millis(NowMono() - h.waiting_since_mono)));
  }
  h.waiting_for_reservation = false;  // set again by WaitForReservation
  if (!pod_busy_.ok()) {
    Fail(h, profctl::v1::FAILURE_STEP_PREPARE, pod_busy_);
    return;
  }
  if (step.answered) {
    h.info_rtt_ns = h.last_rtt_ns = NowMono() - h.attempt_started_mono;
    h.last_answer_mono = NowMono();
    const AgentInfo& agent = h.round.info();
    h.r.set_agent_name(agent.name);
    h.r.set_agent_hostname(agent.hostname);
    h.r.set_agent_version(agent.version);
    h.r.set_agent_busy(agent.busy);
  }
  OnRoundStep(h, step);
}

void CaptureEngine::Session::OnSample(Host& h, const absl::StatusOr<ClockReading>& reading) {
  PROFCTL_DCHECK_ON_SEQUENCE(ex_);
  if (h.phase != Phase::kPreparing) return;
  if (reading.ok()) {
    h.last_rtt_ns = NowMono() - h.sample_sent_mono;
    h.last_answer_mono = NowMono();
  }
  OnRoundStep(h, h.round.OnSample(reading));
}

void CaptureEngine::Session::OnRoundStep(Host& h, const PrepareRound::Step& step) {
  if (step.answered) Answered(h);
  if (step.sample_next) {
    TakeWarmSample(h);
    if (step.answered) FollowSlowHosts();
  } else {
    MaybeReady(h);
  }
}

void CaptureEngine::Session::Answered(Host& h) {
  if (h.answered) return;
  h.answered = true;
  // A host that comes alive during a short quiet end (below) makes it the long one again.
  if (preparing_ && plan_.prepare_timeout_ms <= 0 && !ready_prepare_ns_.empty()) DeriveBudget();
}

bool CaptureEngine::Session::ClaimInstance(Host& h) {
  if (h.round.info().instance_id.empty()) return true;
  auto [it, inserted] = instance_owner_.try_emplace(h.round.info().instance_id, h.index);
  if (inserted || it->second == h.index) return true;
  // One agent under two addresses: the one listed first keeps it, unless it is already past
  // preparing (then the newcomer goes).
  Host& other = hosts_[it->second];
  Host* loser = &h;
  if (h.index < other.index && other.phase == Phase::kReady) {
    loser = &other;
    it->second = h.index;
  }
  const Host& keeper = loser == &h ? other : h;
  Fail(*loser, profctl::v1::FAILURE_STEP_PREPARE,
       absl::InvalidArgumentError(
           absl::StrCat("the same agent as worker ", keeper.r.address(), " (instance id ",
                        h.round.info().instance_id,
                        "): listed twice under different addresses; capturing it once")));
  return loser != &h;
}

void CaptureEngine::Session::MaybeReady(Host& h) {
  // A retry pending: answers still arriving from the failed round change nothing.
  if (h.phase != Phase::kPreparing || h.retry_pending) return;
  const PrepareRound::Verdict verdict = h.round.Decide();
  if (verdict.state == PrepareRound::State::kWaiting) return;
  if (verdict.state == PrepareRound::State::kFailed) {
    if (verdict.status.code() == absl::StatusCode::kAlreadyExists && preparing_) {
      if (!WaitForReservation(h, verdict.status)) GiveUpBusyPod(h, BusyReason(h, verdict.status));
      return;
    }
    absl::Status status = verdict.status;
    // A GetInfo unanswered at its deadline: a hung host, or a round trip longer than the
    // deadline (no budget waits longer for a first answer): say which numbers, not just gRPC's.
    if (verdict.step == profctl::v1::FAILURE_STEP_GET_INFO &&
        status.code() == absl::StatusCode::kDeadlineExceeded) {
      status = absl::DeadlineExceededError(absl::StrFormat(
          "GetInfo unanswered after %.0f ms (its %d ms timeout: the host is hung, or its round "
          "trip is longer than that): %s",
          Millis(NowMono() - h.attempt_started_mono), options_.rpc_timeout_ms, status.message()));
    }
    if (!RetryPrepare(h, status)) Fail(h, verdict.step, status);
    return;
  }
  const bool measured = h.round.measures_clock();
  if (!ClaimInstance(h)) return;
  if (h.round.info().max_duration_ms > 0 && plan_.duration_ms > h.round.info().max_duration_ms) {
    // Said before any Capture, with both numbers and where each comes from.
    Fail(
        h, profctl::v1::FAILURE_STEP_PREPARE,
        absl::InvalidArgumentError(
            plan_.past_ms > 0
                ? absl::StrCat("agent keeps a past of at most ", h.round.info().max_duration_ms,
                               " ms (its --max-duration-ms), asked for ", plan_.past_ms,
                               " ms (--last)")
                : absl::StrCat("agent accepts captures of at most ", h.round.info().max_duration_ms,
                               " ms (its --max-duration-ms), asked for ", plan_.duration_ms,
                               " ms (--duration)")));
    return;
  }
  auto* clock = h.r.mutable_clock();
  h.clock_measured = measured;
  if (measured) {
    const ClockOffset& c = h.round.best();
    clock->set_offset_ns(c.offset_ns);
    clock->set_rtt_offset_ns(c.offset_ns);
    clock->set_rtt_ns(c.rtt_ns);
    clock->set_uncertainty_ns(c.uncertainty_ns());
    clock->set_samples(static_cast<uint32_t>(c.samples));
    clock->set_method(std::string(kClockMethodRtt));
    Progress(absl::StrFormat("%s: clock offset %+.3f ms +- %.3f ms (rtt %.3f ms)", h.r.address(),
                             Millis(c.offset_ns), Millis(c.uncertainty_ns()), Millis(c.rtt_ns)));
  } else {
    // Assumed in sync with ours (as TSL's own clients assume) within kUnmeasuredClockBoundNs,
    // until its collectives say better (Align).
    clock->set_offset_ns(0);
    clock->set_rtt_offset_ns(0);
    clock->set_uncertainty_ns(kUnmeasuredClockBoundNs);
    clock->set_method(std::string(kClockMethodUnmeasured));
    Progress(absl::StrFormat("%s: clock not measurable (%s); assumed in sync", h.r.address(),
                             h.round.info().version));
  }
  const int64_t took = NowMono() - h.prepare_started_mono;
  h.r.set_prepare_ms(Millis(took));
  h.phase = Phase::kReady;
  if (preparing_) {
    ++settled_;
    ready_prepare_ns_.push_back(took);
    if (plan_.prepare_timeout_ms <= 0) DeriveBudget();
    if (settled_ == hosts_.size()) EndPrepare();
  } else if (!cancelled_ && !plan_.prepare_only) {
    // Ready after the budget, with --late=capture: capture it if its window is still open.
    if (NowMono() < window_end_mono_) {
      StartCapture(h);
    } else {
      Fail(h, profctl::v1::FAILURE_STEP_PREPARE_TIMEOUT,
           absl::DeadlineExceededError("ready only after the capture window closed"));
    }
  }
}

void CaptureEngine::Session::GiveUpBusyPod(Host& h, const absl::Status& status) {
  if (!pod_busy_.ok()) {
    Fail(h, profctl::v1::FAILURE_STEP_PREPARE, status);
    return;
  }
  // Set before `h` fails: when it is the last host to settle, its failure ends preparing, which
  // must then capture nothing.
  pod_busy_ = absl::AlreadyExistsError(
      absl::StrCat("not captured: the pod is busy with another capture (", h.r.address(), ": ",
                   status.message(), "); a capture takes the whole pod or none of it"));
  manifest_.add_errors(absl::StrCat("the pod is busy: ", h.r.address(),
                                    " is capturing or reserved for another session (",
                                    status.message(),
                                    "); nothing was captured and this capture's reservations "
                                    "were released"));
  Fail(h, profctl::v1::FAILURE_STEP_PREPARE, status);
  for (Host& o : hosts_) {
    if ((o.phase == Phase::kPreparing && o.round.info_done()) || o.phase == Phase::kReady) {
      Fail(o, profctl::v1::FAILURE_STEP_PREPARE, pod_busy_);
    }
  }
}

bool CaptureEngine::Session::WaitForReservation(Host& h, const absl::Status& refused) {
  const std::optional<ReservationConflict> conflict = ReservationConflictOf(refused);
  if (!conflict.has_value() || !priority_.OlderThan(conflict->holder) || cancelled_ ||
      !pod_busy_.ok()) {
    return false;
  }
  if (NowMono() >= reservation_wait_cap_mono_) return false;
  // The last GetInfo is sent a little before the cap, so that it can be answered inside it; after
  // it the host waits (OnPrepareDeadline gives up at the cap).
  const int64_t at =
      std::min(NowMono() + wait_backoff_.NextNs(h.reservation_waits + 1),
               reservation_wait_cap_mono_ - options_.min_prepare_quiet_ms * kNanosPerMilli);
  if (h.reservation_waits == 0) {
    h.waiting_since_mono = NowMono();
    Progress(absl::StrFormat(
        "%s: reserved for a younger capture; waiting for it to let go (at most %.0f ms more)",
        h.r.address(), Millis(reservation_wait_cap_mono_ - NowMono())));
  }
  ++h.reservation_waits;
  h.waiting_for_reservation = true;
  h.reservation_refusal = refused;
  if (at <= NowMono()) return true;
  h.retry_pending = true;
  ex_.PostAt(at, [weak = weak_from_this(), i = h.index, round = h.prepare_round] {
    std::shared_ptr<Session> s = weak.lock();
    if (s == nullptr) return;
    Host& host = s->hosts_[i];
    if (host.phase != Phase::kPreparing || host.prepare_round != round) return;
    host.retry_pending = false;
    if (!s->cancelled_ && s->pod_busy_.ok()) s->StartPrepare(host);
  });
  return true;
}

absl::Status CaptureEngine::Session::BusyReason(const Host& h, const absl::Status& refused) const {
  const std::optional<ReservationConflict> conflict = ReservationConflictOf(refused);
  if (!conflict.has_value()) return refused;
  if (h.reservation_waits > 0) {
    return absl::AlreadyExistsError(absl::StrFormat(
        "%s; waited %.0f ms for that younger capture to let it go, as long as the prepare budget "
        "allows",
        refused.message(), Millis(NowMono() - h.waiting_since_mono)));
  }
  if (conflict->holder.set() && conflict->holder.OlderThan(priority_)) {
    return absl::AlreadyExistsError(
        absl::StrCat(refused.message(), "; that capture is older and goes first"));
  }
  return refused;
}

void CaptureEngine::Session::DeriveBudget() {
  const bool one_on_its_way = std::any_of(hosts_.begin(), hosts_.end(), [](const Host& o) {
    return o.phase == Phase::kPreparing && o.answered;
  });
  const PrepareBudget budget = NextPrepareBudget(
      {.ready_ns = &ready_prepare_ns_,
       .hosts = hosts_.size(),
       .started = prepare_started_mono_,
       .now = NowMono(),
       .quiet_rule = plan_.late == profctl::v1::LATE_POLICY_CAPTURE && !plan_.prepare_only,
       .one_on_its_way = one_on_its_way},
      prepare_cap_mono_,
      {.min_budget_ns = options_.min_prepare_budget_ms * kNanosPerMilli,
       .max_budget_ns = options_.max_prepare_budget_ms * kNanosPerMilli,
       .min_quiet_ns = options_.min_prepare_quiet_ms * kNanosPerMilli});
  if (budget.cap < prepare_cap_mono_) {
    manifest_.set_prepare_budget_ms(Millis(budget.cap - prepare_started_mono_));
    prepare_cap_mono_ = budget.cap;
  }
  // A host whose answers are arriving is waited for as its round trips say.
  const int64_t deadline = std::max(budget.deadline, SlowHostsReadyBy());
  if (deadline > budget.cap)
    manifest_.set_prepare_budget_ms(Millis(deadline - prepare_started_mono_));
  if (deadline != prepare_deadline_mono_) ScheduleBudget(deadline);
}

int64_t CaptureEngine::Session::SlowHostsReadyBy() const {
  if (plan_.prepare_timeout_ms > 0) return 0;
  int64_t latest = 0;
  for (const Host& h : hosts_) {
    if (h.phase != Phase::kPreparing || h.retry_pending || !h.round.measures_clock()) continue;
    latest = std::max(latest,
                      ProjectedReadyNs(h.last_answer_mono, h.last_rtt_ns, h.round.samples_left()));
  }
  if (latest == 0) return 0;
  return std::min(latest, prepare_started_mono_ + options_.max_prepare_budget_ms * kNanosPerMilli);
}

void CaptureEngine::Session::FollowSlowHosts() {
  if (!preparing_) return;
  const int64_t by = SlowHostsReadyBy();
  if (by <= prepare_deadline_mono_) return;
  manifest_.set_prepare_budget_ms(Millis(by - prepare_started_mono_));
  ScheduleBudget(by);
}

void CaptureEngine::Session::ScheduleBudget(int64_t deadline_mono) {
  prepare_deadline_mono_ = deadline_mono;
  const uint64_t generation = ++budget_generation_;
  std::weak_ptr<Session> weak = weak_from_this();
  ex_.PostAt(deadline_mono, [weak, generation] {
    if (std::shared_ptr<Session> s = weak.lock()) s->OnPrepareDeadline(generation);
  });
}

void CaptureEngine::Session::OnPrepareDeadline(uint64_t generation) {
  PROFCTL_DCHECK_ON_SEQUENCE(ex_);
  if (generation != budget_generation_ || !preparing_) return;
  // A host waiting for a younger capture's reservation (WaitForReservation) keeps preparing open
  // until it gets it; at the wait's cap the capture gives up whole.
  for (Host& h : hosts_) {
    if (h.phase != Phase::kPreparing || !h.waiting_for_reservation) continue;
    if (NowMono() < reservation_wait_cap_mono_) {
      manifest_.set_prepare_budget_ms(Millis(reservation_wait_cap_mono_ - prepare_started_mono_));
      ScheduleBudget(reservation_wait_cap_mono_);
      return;
    }
    GiveUpBusyPod(h, BusyReason(h, h.reservation_refusal));
    EndPrepare();  // fails every host still preparing with the pod's reason
    return;
  }
  // A host whose GetInfo is still in flight (neither answered nor refused) may be alive behind a
  // slow link: its first answer needs the connection's handshake and a round trip, longer than
  // the budget the fast hosts derived (a 600 ms round trip answers GetInfo after about 1 s,
  // before its channel is even connected), and until it answers it cannot be told from a hung
  // one. Preparing waits for that GetInfo (then FollowSlowHosts for its clock samples), at most
  // GetInfo's timeout, within the budget's maximum, for a host whose channel is connected, and
  // for every such host while fewer than 90 % of the pod are ready: a tail of at most a tenth
  // of the pod (dead, hung or slow) is left to the late policy, as the budget's rules leave it.
  if (plan_.prepare_timeout_ms <= 0) {
    const bool tail_only = ready_prepare_ns_.size() * 10 >= hosts_.size() * 9;
    int64_t wait = 0;
    for (const Host& h : hosts_) {
      if (h.phase == Phase::kPreparing && !h.retry_pending && !h.round.info_done() &&
          (!tail_only || h.client->Connected())) {
        wait = std::max(wait, h.attempt_started_mono + options_.rpc_timeout_ms * kNanosPerMilli);
      }
    }
    wait = std::min(wait, prepare_started_mono_ + options_.max_prepare_budget_ms * kNanosPerMilli);
    if (wait > NowMono()) {
      manifest_.set_prepare_budget_ms(Millis(wait - prepare_started_mono_));
      ScheduleBudget(wait);
      return;
    }
  }
  const double budget_ms = Millis(prepare_deadline_mono_ - prepare_started_mono_);
  manifest_.set_prepare_budget_ms(budget_ms);
  for (Host& h : hosts_) {
    if (h.phase != Phase::kPreparing) continue;
    if (plan_.late == profctl::v1::LATE_POLICY_FAIL || plan_.prepare_only) {
      Fail(h, profctl::v1::FAILURE_STEP_PREPARE_TIMEOUT,
           absl::DeadlineExceededError(
               absl::StrFormat("not ready within the prepare budget of %.0f ms (%s)", budget_ms,
                               PrepareProgress(h))));
    } else {
      Progress(absl::StrFormat("%s: not ready within %.0f ms; capturing the others, it joins late",
                               h.r.address(), budget_ms));
    }
  }
  if (preparing_) EndPrepare();
}

// --- Phase 2: one start instant ----------------------------------------------------------------

void CaptureEngine::Session::EndPrepare() {
  PROFCTL_DCHECK_ON_SEQUENCE(ex_);
  if (!preparing_) return;
  preparing_ = false;
  ++budget_generation_;  // a pending budget timer is now moot
  manifest_.set_prepare_ms(Millis(NowMono() - prepare_started_mono_));
  // File stems from agent names, fixed now (hosts joining late keep their address stem).
  std::vector<std::string> names;
  names.reserve(hosts_.size());
  for (const Host& h : hosts_) names.push_back(h.round.info().name);
  const std::vector<std::string> stems = AssignHostStems(plan_.workers, names);
  int64_t max_rtt = 0;
  size_t ready = 0;
  for (Host& h : hosts_) {
    h.r.set_host(stems[h.index]);
    if (h.phase == Phase::kReady) {
      max_rtt = std::max(max_rtt, h.r.clock().rtt_ns());
      ++ready;
    }
  }
  if (!pod_busy_.ok()) {
    for (Host& h : hosts_) {
      if (h.phase == Phase::kReady || h.phase == Phase::kPreparing) {
        Fail(h, profctl::v1::FAILURE_STEP_PREPARE, pod_busy_);
      }
    }
    MaybeFinish();
    return;
  }
  if (plan_.prepare_only || cancelled_) {
    for (Host& h : hosts_) {
      if (h.phase == Phase::kReady) {
        if (cancelled_) {
          Fail(h, profctl::v1::FAILURE_STEP_INTERRUPTED,
               absl::CancelledError("interrupted before capture"));
        } else {
          Succeed(h);
        }
      }
    }
    MaybeFinish();
    return;
  }
  // What sending one Capture costs: one RPC on a connected channel, measured on the clock
  // samples. The fan-out's GetInfo calls also connect each channel and cost about 10 x more; they
  // stand in only when no sample was sent. (The round trips were measured in the prepare storm
  // and are high already: at 1,024 hosts on 2 cores the largest was 5-28 ms, the median
  // 1.2-1.7 ms; twice the send cost came to 1.5-1.8 x what sending took, docs/perf.md.)
  const int64_t per_host_send = warm_sends_ > 0 ? warm_send_ns_ / warm_sends_ : per_host_send_ns_;
  const int64_t prepared_mono = NowMono();
  lead_ns_ = StartLeadNs(options_.min_lead_ms * kNanosPerMilli, max_rtt, ready, per_host_send);
  start_at_ = clock_.WallNs() + lead_ns_;
  manifest_.set_start_at_ns(start_at_);
  manifest_.set_lead_ms(Millis(lead_ns_));
  window_start_mono_ = prepared_mono + lead_ns_;
  // A snapshot's window closes at its instant: the past is taken then.
  window_end_mono_ =
      window_start_mono_ + (plan_.past_ms > 0 ? 0 : plan_.duration_ms) * kNanosPerMilli;
  if (plan_.deadline_ms <= 0) {
    deadline_mono_ = window_end_mono_ + options_.transfer_timeout_ms * kNanosPerMilli;
    ScheduleDeadline();
  }
  manifest_.set_deadline_ns(clock_.WallNs() + (deadline_mono_ - NowMono()));
  // Hosts that can still be saved: the ready ones, and with --late=capture those still
  // preparing (they join late).
  size_t possible = ready;
  for (const Host& h : hosts_) {
    possible += h.phase == Phase::kPreparing && plan_.late == profctl::v1::LATE_POLICY_CAPTURE;
  }
  const absl::Status cannot = CheckCaptureCanStart(possible, hosts_.size(), plan_.min_hosts,
                                                   window_end_mono_, deadline_mono_);
  if (!cannot.ok()) {
    manifest_.add_errors(std::string(cannot.message()));
    for (Host& h : hosts_) {
      if (h.phase == Phase::kReady || h.phase == Phase::kPreparing) {
        Fail(h, profctl::v1::FAILURE_STEP_PREPARE, cannot);
      }
    }
    MaybeFinish();
    return;
  }
  if (ready > 0) {
    Progress(absl::StrFormat("capturing %d of %d workers: window starts in %.0f ms, lasts %d ms",
                             ready, hosts_.size(), Millis(lead_ns_), plan_.duration_ms));
  }
  for (Host& h : hosts_) {
    if (h.phase == Phase::kReady) StartCapture(h);
  }
  manifest_.set_send_ms(Millis(NowMono() - prepared_mono));
  // The window is set: a coordinator killed from now on leaves a folder that says when it was.
  FlushManifest();
  std::weak_ptr<Session> weak = weak_from_this();
  ex_.PostAt(window_end_mono_, [weak] {
    if (std::shared_ptr<Session> s = weak.lock()) s->OnWindowClosed();
  });
  if (options_.progress_tick_ms > 0) Tick(NowMono() + options_.progress_tick_ms * kNanosPerMilli);
  MaybeFinish();
}

// --- Phase 3: capture --------------------------------------------------------------------------

void CaptureEngine::Session::StartCapture(Host& h) {
  h.phase = Phase::kCapturing;
  h.reserved = false;  // the Capture takes the reservation
  h.capture_started_mono = NowMono();
  // Offsets are bounded (clock_sync.h), so this cannot overflow.
  const int64_t agent_start = start_at_ + h.r.clock().rtt_offset_ns();
  h.r.set_requested_start_ns(agent_start);
  StartAttempt(h, /*fetch=*/false);
}

void CaptureEngine::Session::StartAttempt(Host& h, bool fetch) {
  h.retry_pending = false;
  // Every attempt gets what is left of the session's deadline, no more.
  const int64_t timeout_ms = (deadline_mono_ - NowMono()) / kNanosPerMilli;
  if (timeout_ms <= 0) {
    Fail(h, profctl::v1::FAILURE_STEP_CAPTURE,
         absl::DeadlineExceededError("the session deadline passed before the next attempt"));
    return;
  }
  ++h.attempt;
  h.r.set_attempts(static_cast<uint32_t>(h.attempt));
  h.fetching = fetch;
  h.attempt_started_mono = NowMono();
  // A new recording starts anew; a fetched one is the recording that already started.
  if (!fetch) h.started_seen = false;
  h.stream = std::make_unique<HostTraceStream>(
      deps_.sink, XPlaneFileName(h.r.host()),
      ForAttempt(h, [](Session& s, Host& host, int64_t start) { s.OnStarted(host, start); }),
      ForAttempt(h, [](Session& s, Host& host, const absl::Status& status) {
        s.OnCaptureDone(host, status);
      }));
  if (fetch) {
    h.client->Fetch({plan_.session, session_key_}, timeout_ms, h.stream.get());
  } else {
    h.client->Capture({plan_.session, h.r.requested_start_ns(), plan_.duration_ms, repository_root_,
                       session_key_, plan_.past_ms, PlanTracerLevels(plan_)},
                      timeout_ms, h.stream.get());
  }
}

void CaptureEngine::Session::OnStarted(Host& h, int64_t agent_start_ns) {
  PROFCTL_DCHECK_ON_SEQUENCE(ex_);
  if (h.phase != Phase::kCapturing || h.started_seen) return;
  h.started_seen = true;
  if (agent_start_ns < 0 || agent_start_ns > kMaxStampNs) {  // untrusted: keep arithmetic sane
    Fail(h, profctl::v1::FAILURE_STEP_CAPTURE,
         absl::DataLossError(absl::StrCat("Capture: agent reported a start of ", agent_start_ns,
                                          " ns, outside 0..", kMaxStampNs)));
    h.client->AbortCapture();
    return;
  }
  h.r.set_agent_start_ns(agent_start_ns);
  // An unmeasured clock's start says nothing about lateness until the trace aligns it (Align).
  if (!h.clock_measured) return;
  const int64_t lateness = agent_start_ns - h.r.requested_start_ns();
  h.r.set_lateness_ns(lateness);
  h.r.set_late(lateness > ToleranceNs());
  if (!h.r.late()) return;
  if (plan_.late == profctl::v1::LATE_POLICY_FAIL) {
    Fail(h, profctl::v1::FAILURE_STEP_LATE,
         absl::DeadlineExceededError(absl::StrFormat(
             "started %.3f ms after the common start (tolerance %d ms, --late=fail)",
             Millis(lateness), ToleranceNs() / kNanosPerMilli)));
    h.client->AbortCapture();  // the agent stops when its stream is cancelled
  } else {
    Progress(absl::StrFormat("%s: started %.3f ms late", h.r.host(), Millis(lateness)));
  }
}

void CaptureEngine::Session::OnCaptureDone(Host& h, const absl::Status& status) {
  PROFCTL_DCHECK_ON_SEQUENCE(ex_);
  if (h.phase != Phase::kCapturing) {
    h.stream.reset();  // failed meanwhile (late, interrupted): drop the temporary file
    return;
  }
  h.r.set_capture_ms(Millis(NowMono() - h.capture_started_mono));
  const char* kind = h.fetching ? "fetch" : "capture";
  if (!h.stream->file_error().ok()) {
    LogAttempt(h, kind, h.attempt_started_mono, h.stream->file_error(), 0);
    Fail(h, profctl::v1::FAILURE_STEP_WRITE, h.stream->file_error());
    h.stream.reset();
    return;
  }
  if (!status.ok()) {
    absl::Status failure = status;
    // Bytes that arrived damaged (a checksum mismatch, broken framing) are kept for inspection,
    // under a name TensorBoard will not load, never as a valid trace.
    if (status.code() == absl::StatusCode::kDataLoss && h.stream->file() != nullptr &&
        h.stream->file()->size() > 0) {
      absl::StatusOr<std::string> kept =
          h.stream->file()->Commit(RejectedXPlaneFileName(h.r.host()));
      if (kept.ok()) {
        failure = absl::DataLossError(
            absl::StrCat(status.message(), "; the bytes received are kept in ", *kept));
      }
    }
    const bool header_seen = h.stream->header_seen();
    h.stream.reset();
    if (RetryCapture(h, failure, header_seen)) return;
    if (h.fetching && !h.agent_may_hold && !h.last_capture_error.ok()) {
      // The Fetch found nothing: what went wrong is what made us fetch.
      failure = absl::Status(
          h.last_capture_error.code(),
          absl::StrCat(h.last_capture_error.message(), "; the agent holds no copy to fetch (",
                       failure.message(), ")"));
    }
    if (h.attempt > 1) {
      failure = absl::Status(failure.code(), absl::StrCat(failure.message(), " (after ", h.attempt,
                                                          " attempts; see attempt_log)"));
    }
    Fail(h, profctl::v1::FAILURE_STEP_CAPTURE, failure);
    return;
  }
  if (!h.stream->header_seen() || h.stream->file() == nullptr) {
    Fail(h, profctl::v1::FAILURE_STEP_CAPTURE,
         absl::DataLossError("Capture: the stream ended without a header"));
    h.stream.reset();
    return;
  }
  const CaptureHeaderInfo& header = h.stream->header();
  if (header.start_ns < 0 || header.stop_ns < header.start_ns || header.stop_ns > kMaxStampNs) {
    Fail(h, profctl::v1::FAILURE_STEP_CAPTURE,
         absl::DataLossError(absl::StrCat("Capture: agent reported an impossible window ",
                                          header.start_ns, "..", header.stop_ns, " ns")));
    h.stream.reset();
    return;
  }
  if (!h.started_seen) OnStarted(h, header.start_ns);  // agents that send no `started`
  if (h.phase != Phase::kCapturing) {
    h.stream.reset();
    return;
  }
  h.r.set_agent_start_ns(header.start_ns);
  h.r.set_agent_stop_ns(header.stop_ns);
  h.r.set_cancelled(header.cancelled);
  h.cancel_reason = header.cancel_reason;
  h.r.set_dropped_events(header.dropped_events);
  h.r.set_bytes(h.stream->file()->size());
  LogAttempt(h, kind, h.attempt_started_mono, absl::OkStatus(), 0);
  SaveTrace(h);
}

void CaptureEngine::Session::SaveTrace(Host& h) {
  h.phase = Phase::kSaving;
  const bool keep = kept_trace_bytes_ + h.r.bytes() <= options_.kept_trace_budget_bytes;
  if (keep) {
    h.kept_bytes = h.r.bytes();
    kept_trace_bytes_ += h.kept_bytes;
  }
  SaveInput in{h.r.host(),
               h.r.clock().rtt_offset_ns(),
               plan_.align == profctl::v1::ALIGN_MODE_COLLECTIVES,
               options_.max_collective_ends,
               step_matcher_,
               step_matcher_error_,
               keep};
  std::unique_ptr<HostTraceStream> stream = std::move(h.stream);
  if (deps_.pool == nullptr) {
    OnSaved(h, SaveHostTrace(*stream->file(), in));
    return;
  }
  // Parsing, validating and summarizing a trace is the heaviest per-host work: on the pool, so the
  // executor keeps serving the other hosts. The job holds the session (a pool thread is no
  // transport thread: if it ends up with the last reference, nothing waits on itself), so the
  // sink it writes through outlives it.
  deps_.pool->Submit([self = shared_from_this(), index = h.index, stream = std::move(stream),
                      in = std::move(in)]() mutable {
    SaveOutcome out = SaveHostTrace(*stream->file(), in);
    stream.reset();  // the temporary file, if it was not committed
    self->ex_.Post([weak = std::weak_ptr<Session>(self), index, out = std::move(out)]() mutable {
      if (std::shared_ptr<Session> s = weak.lock()) s->OnSaved(s->hosts_[index], std::move(out));
    });
  });
}

void CaptureEngine::Session::OnSaved(Host& h, SaveOutcome out) {
  PROFCTL_DCHECK_ON_SEQUENCE(ex_);
  h.space = std::move(out.space);
  if (h.space == nullptr || h.phase != Phase::kSaving) {  // nothing kept: give its share back
    h.space.reset();
    kept_trace_bytes_ -= h.kept_bytes;
    h.kept_bytes = 0;
  }
  if (h.phase != Phase::kSaving) return;
  if (out.failed_step != profctl::v1::FAILURE_STEP_UNSPECIFIED) {
    Fail(h, out.failed_step, out.status);
    return;
  }
  h.r.set_xplane_file(out.path);
  h.r.set_events(out.events);
  h.r.set_steps(out.steps);
  h.collective_ends = std::move(out.collective_ends);
  h.summary = std::move(out.summary);
  if (!out.breakdown_error.empty()) {
    manifest_.add_errors(
        absl::StrCat("breakdown: ", h.r.host(), " left out: ", out.breakdown_error));
  }
  Progress(absl::StrFormat("%s: saved %s (%d bytes, %d events, %d steps)", h.r.host(), out.path,
                           h.r.bytes(), h.r.events(), h.r.steps()));
  Succeed(h);
}

void CaptureEngine::Session::OnWindowClosed() {
  PROFCTL_DCHECK_ON_SEQUENCE(ex_);
  for (Host& h : hosts_) {
    if (h.phase == Phase::kPreparing) {
      Fail(h, profctl::v1::FAILURE_STEP_PREPARE_TIMEOUT,
           absl::DeadlineExceededError(absl::StrCat("not ready before the capture window closed (",
                                                    PrepareProgress(h), ")")));
    }
  }
}

void CaptureEngine::Session::Tick(int64_t next_mono) {
  PROFCTL_DCHECK_ON_SEQUENCE(ex_);
  std::weak_ptr<Session> weak = weak_from_this();
  ex_.PostAt(next_mono, [weak, next_mono] {
    std::shared_ptr<Session> s = weak.lock();
    if (s == nullptr || s->finished_) return;
    const int64_t now = s->NowMono();
    if (now >= s->window_start_mono_) {
      size_t capturing = 0;
      for (const Host& h : s->hosts_) capturing += h.phase == Phase::kCapturing;
      if (now < s->window_end_mono_) {
        s->Progress(absl::StrFormat("recording: %.0f of %.0f s",
                                    Millis(now - s->window_start_mono_) / 1000,
                                    static_cast<double>(s->plan_.duration_ms) / 1000));
      } else {
        s->Progress(absl::StrFormat("waiting for %d host(s) to send their traces", capturing));
      }
    }
    s->Tick(next_mono + s->options_.progress_tick_ms * kNanosPerMilli);
  });
}

// --- Retries and the deadline ------------------------------------------------------------------

void CaptureEngine::Session::LogAttempt(Host& h, absl::string_view kind, int64_t started_mono,
                                        const absl::Status& status, int64_t backoff_ns) {
  profctl::v1::Attempt* a = h.r.add_attempt_log();
  a->set_kind(std::string(kind));
  a->set_start_ms(Millis(started_mono - prepare_started_mono_));
  a->set_duration_ms(Millis(NowMono() - started_mono));
  a->set_code(static_cast<int32_t>(status.code()));
  a->set_message(std::string(status.message()));
  a->set_backoff_ms(Millis(backoff_ns));
}

bool CaptureEngine::Session::RetryPrepare(Host& h, const absl::Status& status) {
  // Rounds that waited for another session's reservation are no retries.
  const int round = h.prepare_round - h.reservation_waits;
  bool retry = PrepareRetryWanted(status.code(), cancelled_, round, plan_.retries);
  // Once the window is set, a host still down may join until it ends (--late=capture): its
  // rounds left are spread over what is left of it.
  int64_t spread = 0;
  if (retry && !preparing_ && plan_.late == profctl::v1::LATE_POLICY_CAPTURE) {
    spread = SpreadRetryNs(std::min(window_end_mono_, deadline_mono_) - NowMono(),
                           plan_.retries - round + 1);
  }
  const int64_t backoff = retry ? backoff_.NextNs(round, spread) : 0;
  const int64_t at = NowMono() + backoff;
  retry =
      retry && PrepareRetryFits(at, {.preparing = preparing_,
                                     .late_capture = plan_.late == profctl::v1::LATE_POLICY_CAPTURE,
                                     .prepare_deadline = prepare_deadline_mono_,
                                     .window_end = window_end_mono_,
                                     .deadline = deadline_mono_});
  // A host that fails its only round says so in its error; rounds are logged once retried.
  if (retry || round > 1) {
    LogAttempt(h, "get_info", h.attempt_started_mono, status, retry ? backoff : 0);
  }
  if (!retry) return false;
  h.retry_pending = true;
  Progress(absl::StrFormat("%s: %s; trying again in %.0f ms", h.r.address(), status.message(),
                           Millis(backoff)));
  ex_.PostAt(at, [weak = weak_from_this(), i = h.index, round = h.prepare_round] {
    std::shared_ptr<Session> s = weak.lock();
    if (s == nullptr) return;
    Host& host = s->hosts_[i];
    host.retry_pending = false;
    if (host.phase == Phase::kPreparing && host.prepare_round == round && !s->cancelled_) {
      s->StartPrepare(host);
    }
  });
  return true;
}

bool CaptureEngine::Session::RetryCapture(Host& h, const absl::Status& status, bool header_seen) {
  const char* kind = h.fetching ? "fetch" : "capture";
  const CaptureFailureVerdict verdict = JudgeCaptureFailure({.code = status.code(),
                                                             .fetching = h.fetching,
                                                             .header_seen = header_seen,
                                                             .agent_may_hold = h.agent_may_hold,
                                                             .can_fetch = h.client->CanFetch()});
  h.agent_may_hold = verdict.agent_may_hold;
  if (verdict.capture_error) h.last_capture_error = status;
  const bool fetch = verdict.fetch;
  // A Fetch that found nothing is the agent's answer, not a failure to reach it: the recording
  // it calls for gets its attempt even when that Fetch was the last retry.
  const bool found_nothing = h.fetching && (status.code() == absl::StatusCode::kNotFound ||
                                            status.code() == absl::StatusCode::kUnimplemented);
  if (found_nothing) ++h.empty_fetches;
  const int counted = h.attempt - h.empty_fetches;
  // Retried while attempts are left, before the deadline (CaptureRetryFits).
  bool retry = verdict.retryable && counted <= plan_.retries;
  const int64_t cutoff =
      RecordCutoff(plan_.late, window_start_mono_, window_end_mono_, ToleranceNs());
  // An agent that is not there (killed, restarting) may come back while its window is open: the
  // retries left are spread over what is left of it, not spent in the outage's first moments.
  int64_t spread = 0;
  if (retry && SpreadRetryWanted(status.code()) && !cancelled_) {
    spread =
        SpreadRetryNs(std::min(cutoff, deadline_mono_) - NowMono(), plan_.retries - counted + 1);
  }
  // The agent that found nothing is there: record again after the shortest backoff.
  const int64_t backoff =
      !retry ? 0 : backoff_.NextNs(found_nothing ? 1 : std::max(1, counted), spread);
  const int64_t at = NowMono() + backoff;
  retry = retry && CaptureRetryFits(at, fetch, cancelled_, deadline_mono_, cutoff);
  LogAttempt(h, kind, h.attempt_started_mono, status, retry ? backoff : 0);
  if (!retry) return false;
  Progress(absl::StrFormat("%s: %s; %s again in %.0f ms (attempt %d of %d)", h.r.host(),
                           status.message(), fetch ? "fetching it" : "capturing", Millis(backoff),
                           h.attempt + 1, plan_.retries + 1));
  h.retry_pending = true;
  ex_.PostAt(at, [weak = weak_from_this(), i = h.index, attempt = h.attempt, fetch] {
    if (std::shared_ptr<Session> s = weak.lock()) s->OnRetryDue(s->hosts_[i], attempt, fetch);
  });
  return true;
}

void CaptureEngine::Session::OnRetryDue(Host& h, int attempt, bool fetch) {
  PROFCTL_DCHECK_ON_SEQUENCE(ex_);
  if (h.phase != Phase::kCapturing || h.attempt != attempt || !h.retry_pending) return;
  if (cancelled_ && !fetch) {
    Fail(h, profctl::v1::FAILURE_STEP_INTERRUPTED,
         absl::CancelledError("interrupted while waiting to capture again"));
    return;
  }
  StartAttempt(h, fetch);
}

void CaptureEngine::Session::ScheduleDeadline() {
  ex_.PostAt(deadline_mono_, [weak = weak_from_this()] {
    if (std::shared_ptr<Session> s = weak.lock()) s->OnDeadline();
  });
}

void CaptureEngine::Session::OnDeadline() {
  PROFCTL_DCHECK_ON_SEQUENCE(ex_);
  if (finished_ || NowMono() < deadline_mono_) return;
  const absl::Status late = absl::DeadlineExceededError(
      "the session deadline passed (--deadline, or the window's end + the transfer allowance)");
  for (Host& h : hosts_) {
    if (h.phase == Phase::kCapturing) {
      if (!h.retry_pending) h.client->AbortCapture();
      Fail(h, profctl::v1::FAILURE_STEP_CAPTURE, late);
    } else if (h.phase == Phase::kPreparing || h.phase == Phase::kReady) {
      Fail(h, profctl::v1::FAILURE_STEP_PREPARE_TIMEOUT, late);
    }
  }
}

// --- Host outcomes -----------------------------------------------------------------------------

void CaptureEngine::Session::Fail(Host& h, FailureStep step, const absl::Status& status) {
  if (h.phase == Phase::kDone) return;
  const bool was_preparing = h.phase == Phase::kPreparing;
  h.phase = Phase::kDone;
  h.r.set_status(profctl::v1::HOST_STATUS_FAILED);
  auto* e = h.r.mutable_error();
  e->set_step(step);
  e->set_code(static_cast<int32_t>(status.code()));
  e->set_message(status.ok() ? "unknown error" : std::string(status.message()));
  if (was_preparing && h.prepare_started_mono > 0) {
    h.r.set_prepare_ms(Millis(NowMono() - h.prepare_started_mono));
  }
  Progress(absl::StrCat(h.r.host(), ": FAILED (", FailureStepName(step), ") ", e->message()));
  ++terminal_;
  ScheduleManifestFlush();
  if (preparing_ && was_preparing) {
    ++settled_;
    if (settled_ == hosts_.size()) {
      EndPrepare();
      return;
    }
  }
  MaybeFinish();
}

void CaptureEngine::Session::Succeed(Host& h) {
  h.phase = Phase::kDone;
  h.r.set_status(profctl::v1::HOST_STATUS_OK);
  ++terminal_;
  ScheduleManifestFlush();
  MaybeFinish();
}

void CaptureEngine::Session::FlushManifest() {
  manifest_flush_scheduled_ = false;
  if (finished_ || plan_.prepare_only || deps_.sink == nullptr) return;
  auto snapshot = std::make_unique<profctl::v1::SessionManifest>(manifest_);
  snapshot->set_status(profctl::v1::SESSION_STATUS_RUNNING);
  for (const Host& h : hosts_) *snapshot->add_hosts() = h.r;
  if (deps_.pool == nullptr) {
    OnSnapshotWritten(
        deps_.sink->Write(kManifestFileName, RunningManifestJson(*snapshot)).status());
  } else if (snapshot_in_flight_) {
    waiting_snapshot_ = std::move(snapshot);  // replaces an older one still waiting
  } else {
    WriteSnapshotOnPool(std::move(snapshot));
  }
}

void CaptureEngine::Session::WriteSnapshotOnPool(
    std::unique_ptr<profctl::v1::SessionManifest> snapshot) {
  snapshot_in_flight_ = true;
  {
    absl::MutexLock lock(&snapshot_mu_);
    snapshot_writing_ = true;
  }
  // Printing 1,024 hosts' manifest and writing it took ~5 ms of the executor, every flush.
  deps_.pool->Submit([self = shared_from_this(), snapshot = std::move(snapshot)] {
    const absl::Status status =
        self->deps_.sink->Write(kManifestFileName, RunningManifestJson(*snapshot)).status();
    {
      absl::MutexLock lock(&self->snapshot_mu_);
      self->snapshot_writing_ = false;
    }
    self->ex_.Post([weak = std::weak_ptr<Session>(self), status] {
      if (std::shared_ptr<Session> s = weak.lock()) s->OnSnapshotWritten(status);
    });
  });
}

void CaptureEngine::Session::OnSnapshotWritten(const absl::Status& status) {
  snapshot_in_flight_ = false;
  if (finished_) return;  // the finish phase owns the manifest now
  if (!status.ok() && !manifest_write_failed_) {
    manifest_write_failed_ = true;  // said once; the final write reports it in the manifest
    Progress(absl::StrCat("cannot write ", kManifestFileName, ": ", status.message()));
  }
  if (waiting_snapshot_ != nullptr) WriteSnapshotOnPool(std::move(waiting_snapshot_));
}

void CaptureEngine::Session::ScheduleManifestFlush() {
  if (manifest_flush_scheduled_ || finished_ || plan_.prepare_only) return;
  manifest_flush_scheduled_ = true;
  std::weak_ptr<Session> weak = weak_from_this();
  ex_.PostAt(NowMono() + options_.manifest_flush_ms * kNanosPerMilli, [weak] {
    if (std::shared_ptr<Session> s = weak.lock()) s->FlushManifest();
  });
}

void CaptureEngine::Session::Interrupt() {
  PROFCTL_DCHECK_ON_SEQUENCE(ex_);
  if (finished_) return;
  cancels_seen_.fetch_add(1);
  if (cancelled_) return;
  cancelled_ = true;
  for (Host& h : hosts_) {
    if (h.phase != Phase::kCapturing) continue;
    if (h.retry_pending && !(h.agent_may_hold && h.client->CanFetch())) {
      // Waiting to record again: nothing is recorded for it now, and nothing new will be.
      Fail(h, profctl::v1::FAILURE_STEP_INTERRUPTED,
           absl::CancelledError("interrupted while waiting to capture again"));
      continue;
    }
    // All at once; a host that does not answer finishes its window: nothing is lost. One that
    // waits to fetch its trace again is told too: the agent stops and keeps what it has.
    h.client->Cancel(plan_.session, session_key_, options_.rpc_timeout_ms,
                     [](const absl::Status&) {});
  }
  for (Host& h : hosts_) {
    if (h.phase == Phase::kPreparing || h.phase == Phase::kReady) {
      Fail(h, profctl::v1::FAILURE_STEP_INTERRUPTED,
           absl::CancelledError("interrupted before capture"));
    }
  }
  // Whatever the hosts do (hung, stalled mid-transfer), the session ends within the grace.
  std::weak_ptr<Session> weak = weak_from_this();
  ex_.PostAt(NowMono() + options_.interrupt_grace_ms * kNanosPerMilli, [weak] {
    if (std::shared_ptr<Session> s = weak.lock()) s->OnInterruptGraceOver();
  });
}

void CaptureEngine::Session::OnInterruptGraceOver() {
  PROFCTL_DCHECK_ON_SEQUENCE(ex_);
  if (finished_) return;
  for (Host& h : hosts_) {
    if (h.phase != Phase::kCapturing) continue;  // saving hosts finish on their own, quickly
    if (!h.retry_pending) h.client->AbortCapture();
    Fail(h, profctl::v1::FAILURE_STEP_INTERRUPTED,
         absl::DeadlineExceededError(
             absl::StrCat("hung: sent nothing back within ", options_.interrupt_grace_ms,
                          " ms of the interrupt; what it recorded is lost")));
  }
}

// --- Phases 4 and 5 ----------------------------------------------------------------------------

void CaptureEngine::Session::MaybeFinish() {
  PROFCTL_DCHECK_ON_SEQUENCE(ex_);
  if (finished_ || preparing_ || terminal_ < hosts_.size()) return;
  // Reservations no Capture took are released first (a Cancel of this session, which the agent
  // also remembers), so the pod is free for the next capture at once rather than at their TTL.
  if (!releases_sent_) {
    releases_sent_ = true;
    for (Host& h : hosts_) {
      if (!h.reserved || h.client == nullptr) continue;
      h.reserved = false;
      ++releases_pending_;
      h.client->Cancel(plan_.session, session_key_, options_.rpc_timeout_ms,
                       Bind([](Session& s, const absl::Status& /*released*/) {
                         --s.releases_pending_;
                         s.MaybeFinish();
                       }));
    }
  }
  if (releases_pending_ > 0) return;
  finished_ = true;
  ReleaseClients();
  if (!plan_.prepare_only) {
    // 0 when every host was done before the window's end (a snapshot whose hosts all failed).
    if (window_end_mono_ > 0) {
      manifest_.set_collect_ms(Millis(std::max<int64_t>(0, NowMono() - window_end_mono_)));
    }
    Align();
    ClassifyRecordings();
  }
  size_t ok = 0;
  size_t saved = 0;
  for (const Host& h : hosts_) {
    ok += h.r.status() == profctl::v1::HOST_STATUS_OK;
    saved += Saved(h.r);
  }
  manifest_.set_status(ok == hosts_.size() ? profctl::v1::SESSION_STATUS_OK
                       : saved == 0        ? profctl::v1::SESSION_STATUS_FAILED
                                           : profctl::v1::SESSION_STATUS_PARTIAL);
  if (!plan_.prepare_only && saved > 0 && saved < plan_.min_hosts) {
    manifest_.set_status(profctl::v1::SESSION_STATUS_FAILED);
    manifest_.add_errors(absl::StrFormat(
        "only %d of %d hosts saved, %d required (--min-hosts/--require-all); what was saved is "
        "kept",
        saved, hosts_.size(), plan_.min_hosts));
  }
  if (cancelled_) {
    manifest_.add_errors(
        "interrupted: capture was cancelled; saved traces hold what was recorded until then");
  }
  if (plan_.prepare_only || deps_.finisher == nullptr) {
    Finish();
    return;
  }
  // From here every handler of this session returns at once (finished_, or its host is done),
  // so the finisher has the session's state to itself, and the executor is free for others.
  deps_.finisher->Submit([self = shared_from_this()] { self->Finish(); });
}

void CaptureEngine::Session::Finish() {
  if (!plan_.prepare_only) {
    const int64_t outputs_started = NowMono();
    std::vector<PodOutputHost> saved;
    for (Host& h : hosts_) {
      if (Saved(h.r)) saved.push_back({&h.r, std::move(h.space), std::move(h.summary)});
    }
    pod_breakdown_ = WritePodOutputs(std::move(saved),
                                     {.session = plan_.session,
                                      .start_at_ns = start_at_,
                                      .sink = deps_.sink,
                                      .pool = deps_.pool,
                                      .interrupted = [this] { return OutputsInterrupted(); }},
                                     manifest_);
    manifest_.set_outputs_ms(Millis(NowMono() - outputs_started));
    if (OutputsInterrupted()) {
      // The hosts' statuses stand (their traces are saved and synced); what was left out is
      // named above. An error in an OK session makes the exit code 3 and the headline says so.
      manifest_.add_errors(
          "interrupted while the outputs were written: every saved host's trace is kept; "
          "outputs not finished are left out (profctl analyze on this folder rebuilds the "
          "breakdown)");
    }
  }
  for (Host& h : hosts_) *manifest_.add_hosts() = std::move(h.r);
  manifest_.set_finished_ns(clock_.WallNs());
  std::optional<std::string> written;
  if (!plan_.prepare_only) {
    {
      // A running snapshot still being written must not land over the final session.json.
      absl::MutexLock lock(&snapshot_mu_);
      snapshot_mu_.Await(absl::Condition(
          +[](bool* writing) { return !*writing; }, &snapshot_writing_));
    }
    std::string json = ManifestJson(manifest_);
    if (absl::StatusOr<std::string> f = deps_.sink->Write(kManifestFileName, json); !f.ok()) {
      manifest_.add_errors(absl::StrCat("manifest: ", f.status().message()));
    } else {
      written = std::move(json);
    }
  }
  // Reported as a task of its own on the executor (after the current one, when this runs there):
  // whoever waits may tear down its side as soon as it hears, and nothing of this session runs
  // after that but no-ops. The callbacks run there too, in this order.
  ex_.Post([done = std::move(done_), manifest = std::move(manifest_),
            breakdown = std::move(pod_breakdown_), written = std::move(written),
            on_breakdown = deps_.breakdown, on_written = deps_.manifest_written]() mutable {
    if (breakdown.has_value() && on_breakdown) on_breakdown(*breakdown);
    if (written.has_value() && on_written) on_written(*std::move(written));
    std::move(done)(std::move(manifest));
  });
}

void CaptureEngine::Session::ClassifyRecordings() {
  const RecordingRules rules{.requested_ns = plan_.duration_ms * kNanosPerMilli,
                             .tolerance_ns = ToleranceNs(),
                             .interrupted = cancelled_};
  for (Host& h : hosts_) {
    if (Saved(h.r) && ClassifyRecording(h.r, h.cancel_reason, rules)) {
      Progress(absl::StrCat(h.r.host(), ": ", h.r.recording_detail()));
    }
  }
}

void CaptureEngine::Session::Align() {
  std::vector<AlignHost> saved;
  for (Host& h : hosts_) {
    if (Saved(h.r)) {
      saved.push_back({&h.r, h.clock_measured, std::move(h.collective_ends), &h.summary});
    }
  }
  // A snapshot's window ends at the common instant (docs/flight-recorder.md).
  AlignSavedHosts(saved, plan_.align, start_at_ - plan_.past_ms * kNanosPerMilli, ToleranceNs(),
                  manifest_);
}

void CaptureEngine::Session::ReleaseClients() {
  if (deps_.pool == nullptr) return;  // destroyed with the session
  // At 1,024 hosts, tearing down every channel took 0.15 s after the outputs, mostly waiting on
  // gRPC's threads. Nothing uses a done host's client (every handler checks the phase first).
  std::vector<std::unique_ptr<AgentClient>> clients;
  for (Host& h : hosts_) {
    if (h.client != nullptr) clients.push_back(std::move(h.client));
  }
  {
    absl::MutexLock lock(&released_mu_);
    ++released_pending_;
  }
  deps_.pool->Submit([this, clients = std::move(clients)]() mutable {
    clients.clear();
    absl::MutexLock lock(&released_mu_);
    --released_pending_;
  });
}

// ---------------------------------------------------------------------------------------------

CaptureEngine::CaptureEngine(Dependencies deps, CaptureEngineOptions options)
    : deps_(std::move(deps)), options_(options) {}

CaptureEngine::~CaptureEngine() {
  if (session_ == nullptr) return;
  // A task of the session may be running on the executor right now, holding it: then the
  // session ends when that task does. Wait for it, so nothing of it (its clients' callbacks,
  // its sink) outlives the engine and what the caller gave it.
  std::shared_ptr<absl::Notification> gone = session_->gone();
  session_.reset();
  gone->WaitForNotification();
}

void CaptureEngine::Start(const CapturePlan& plan, DoneCallback done) {
  absl::Status bad;
  if (plan.workers.empty()) bad = absl::InvalidArgumentError("no workers to capture");
  if (plan.duration_ms < 1) {
    bad = absl::InvalidArgumentError(absl::StrCat("duration_ms=", plan.duration_ms, " < 1"));
  }
  if (!bad.ok()) {
    deps_.executor->Post([done = std::move(done), bad]() mutable { std::move(done)(bad); });
    return;
  }
  session_ = std::make_shared<Session>(deps_, options_, plan, std::move(done));
  deps_.executor->Post([weak = std::weak_ptr<Session>(session_)] {
    if (std::shared_ptr<Session> s = weak.lock()) s->Begin();
  });
}

void CaptureEngine::Cancel() {
  if (session_ != nullptr) session_->NoteCancel();
  deps_.executor->Post([weak = std::weak_ptr<Session>(session_)] {
    if (std::shared_ptr<Session> s = weak.lock()) s->Interrupt();
  });
}

}  // namespace profctl::coordinator
