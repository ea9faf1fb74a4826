// The agent's capture sessions, independent of any transport.
//
// One capture runs at a time per CaptureManager. Begin() validates a request and claims the single
// slot without blocking. The returned Session's Run() starts it and returns at once: the session
// is a state machine on the injected executors, never a blocked thread, so one process can host
// hundreds of managers (profctl-agent --endpoints) on a couple of threads:
//
//   Run ─> Prepare (collect executor) ─> wait for start_at (a timer task on the executor)
//       ─> Start; on_started(start_ns) ─> timer at start + duration (or Stop/Cancel) ─> Stop
//       ─> Collect (collect executor) ─> slot freed ─> on_done(result)
//
// A snapshot (CaptureSpec::past_ms, docs/flight-recorder.md) skips Prepare, Start and Stop: at
// start_at it calls on_started(instant), then Collector::Snapshot of [instant - past, instant]
// on the collect executor for every collector that records (the others are named in
// XSpace.errors), and delivers that window like a capture's.
//
// Cancel(id, key) stops that session early (Run then delivers what was recorded) and remembers
// the (id, key), so a Capture that Cancel overtook fails at Begin with ABORTED instead of running
// its window. Ownership: a session is started with a key (CaptureSpec::session_key, possibly empty)
// by one service (SessionOrigin); a Cancel reaches it only with the same key from the same service,
// so one client cannot stop another's capture, nor TensorFlow's Terminate a profctl capture.
//
// Threading: Begin, Cancel, CancelActive, busy and Session::Stop are thread-safe. Session state
// is touched only by tasks of the two executors, handed from one to the other by posting, so it
// needs no lock. The manager, its collectors and both executors must outlive every session's
// on_done.
#ifndef PROFCTL_AGENT_CAPTURE_MANAGER_H_
#define PROFCTL_AGENT_CAPTURE_MANAGER_H_

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/functional/any_invocable.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "agent/collectors/collector.h"
#include "common/clock.h"
#include "common/clock_pair.h"
#include "common/executor.h"
#include "common/reservation.h"
#include "google/protobuf/arena.h"
#include "tensorflow/profiler/xplane.pb.h"
#include "xspace/tsl_profile.h"

namespace profctl::agent {

// Why a session stopped before the end of its window (CaptureHeader.cancel_reason).
enum class CancelReason {
  kNone,           // it was not cancelled
  kClient,         // its own client's Cancel, with the session's (non-empty) key
  kAgentShutdown,  // CancelActive (SIGTERM)
  kOtherClient,    // a keyless session cancelled with the empty key, or TensorFlow's Terminate
  kClientGone,     // Session::Stop: the caller's stream ended before the window
};

// The service that started a session; a Cancel stops only sessions of its own service.
enum class SessionOrigin { kAgentService, kTslService };

struct CaptureSpec {
  std::string session_id;
  // Agent wall clock; 0 = at once.
  int64_t start_at_ns = 0;
  int64_t duration_ms = 0;
  // Empty = every collector.
  std::vector<std::string> collectors;
  // Empty, or [A-Za-z0-9._-]{16,128} (ValidateSessionKey): Cancel must present the same one.
  // A secret: never logged, never in an error message.
  std::string session_key = {};
  SessionOrigin origin = SessionOrigin::kAgentService;
  // A snapshot of the flight recorder (CaptureRequest.past_ms): > 0 takes the past
  // [instant - past_ms, instant] at start_at instead of recording; duration_ms must equal it.
  int64_t past_ms = 0;
  // CaptureRequest's tracer levels, validated (tsl::ValidateTracerLevels), for the `tsl` collector.
  tsl::TracerLevels tracer_levels = {};
};

struct CaptureResult {
  std::string session_id;
  // The actual recording window, agent wall clock. A stop timer that fired late (a busy host)
  // does not lengthen it: the trace is trimmed back to start + duration (events that start after
  // it are dropped, counted in a warning), unless the wall clock jumped meanwhile or the stop
  // came more than max_trimmed_late_stop_ms late (then the stop is as measured, and a warning
  // says so).
  int64_t start_ns = 0;
  int64_t stop_ns = 0;
  bool cancelled = false;
  // With cancelled: who stopped it. kNone otherwise.
  CancelReason cancel_reason = CancelReason::kNone;
  // Events TrimToCaps dropped to stay within max_trace_events/max_trace_bytes.
  uint64_t dropped_events = 0;
  // What the trace lacks of what was asked, each with its amount (CaptureHeader.shortfalls; the
  // trace's warnings say the same, "partial: ..."): what the collectors report
  // (Collector::TakeShortfalls), and a wall clock that stepped since the last clock sync before
  // Begin or during the window (by more than 1 ms + 1000 ppm of the time between: NTP slews at
  // most 500 ppm).
  std::vector<profctl::v1::Shortfall> shortfalls;
  // The trace, on an arena of its own: building, serializing and freeing it is a few large
  // blocks instead of one allocation per event and stat (malloc and free were a fifth of the
  // agents' CPU after a 1,024-host window, docs/perf.md). Movable, not copyable: `space` lives
  // in `arena`'s blocks, which stay put when the arena's owner moves. Freed with the arena.
  std::unique_ptr<google::protobuf::Arena> arena = NewTraceArena();
  tensorflow::profiler::XSpace& space =
      *google::protobuf::Arena::CreateMessage<tensorflow::profiler::XSpace>(arena.get());

  static std::unique_ptr<google::protobuf::Arena> NewTraceArena();
};

// The agent's two clocks read together (NoteClockSync).
struct ClockReading {
  bool seen = false;
  ClockPair pair;
};

struct CaptureManagerOptions {
  int64_t min_duration_ms = 1;
  int64_t max_duration_ms = 60'000;
  // How far in the future start_at may be.
  int64_t max_start_delay_ms = 60'000;
  // Goes into XSpace.hostnames: the agent's --name, else the machine's hostname.
  std::string host_name;
  // Cancelled ids are remembered for cancelled_id_ttl_ms after their first Cancel (monotonic
  // time), and at most max_cancelled_ids of them (the oldest is forgotten first). The TTL is ten
  // times the longest allowed start delay, far longer than a Capture can trail its own Cancel;
  // the count bounds memory at about 4096 * (2 * 128 + 64) bytes whatever a client sends.
  int64_t cancelled_id_ttl_ms = 600'000;
  int64_t max_cancelled_ids = 4096;
  // Per-capture caps applied after collect (TrimToCaps in trace_caps.h): events beyond them are
  // dropped, counted in CaptureResult::dropped_events and explained in XSpace.warnings.
  int64_t max_trace_events = 50'000'000;
  int64_t max_trace_bytes = int64_t{256} << 20;
  // A stop timer that fires at most this late (a busy host) is trimmed back to the window asked
  // for (CaptureResult::stop_ns); later, the agent did not run (frozen) and the stop is kept.
  int64_t max_trimmed_late_stop_ms = 500;
  // Reservations (Reserve) are short leases: one lapses this long after it was granted or last
  // renewed, whatever ttl its client asked for, so a dead coordinator's is gone within it; the
  // live one renews.
  int64_t reservation_lease_ms = 2'000;
  // Renewals keep one reservation at most this long from its first grant (a capture's prepare
  // and lead fit well inside); a peer whose reservation lapsed without its capture starting is
  // then on probation this long: its reservations yield to any other session's Reserve or Begin.
  int64_t max_reservation_ms = 10'000;
  // A reservation's priority (its session's start, on its coordinator's clock) is judged on this
  // agent's clock: one more than this far in the future, or older than this plus
  // max_reservation_ms, is kept unset (nobody waits for that reservation), so a peer cannot
  // declare itself first, and an honest host whose clock is far off is still reserved.
  int64_t max_priority_skew_ms = 10'000;
};

// What a running session reports, in this order.
struct SessionCallbacks {
  // Optional. Called at most once, on the executor, the moment recording begins, with the actual
  // start on the agent's wall clock; not called when the session is stopped before its start
  // instant. Must not block (it runs on the session timeline of every endpoint).
  absl::AnyInvocable<void(int64_t start_ns)> on_started;
  // Required. Called exactly once, last, on the collect executor, after the capture slot was
  // freed. May do heavy work (serializing the trace).
  absl::AnyInvocable<void(CaptureResult result) &&> on_done;
};

class CaptureManager {
 public:
  struct Dependencies {
    // Wall time for the recording window; its MonoNs() must be the executors' monotonic time.
    const Clock* clock = nullptr;
    // Not owned; outlive the manager.
    std::vector<Collector*> collectors;
    // The session timeline: waits, Start, Stop and on_started. Only cheap tasks run here, so one
    // executor can keep many managers' windows exact. Needed by Session::Run only.
    Executor* executor = nullptr;
    // Prepare, Collect and on_done: work that may take a while. Null: `executor`.
    Executor* collect_executor = nullptr;
  };

  class SessionState;

  // A claimed capture slot. Destroying a Session that was never Run() frees the slot; once Run()
  // was called the session keeps itself alive until its on_done, and destroying the handle earlier
  // neither stops it nor cancels its callbacks.
  class Session {
   public:
    ~Session();
    Session(const Session&) = delete;
    Session& operator=(const Session&) = delete;

    // Starts the session and returns at once; see SessionCallbacks. Call at most once.
    void Run(SessionCallbacks callbacks);
    // Stops the session now (an executor task): a wait for start_at ends at once with nothing
    // recorded, a recording stops early and is still collected (cancel_reason kClientGone).
    // Unlike CaptureManager::Cancel it does not remember the id (use it when the client went
    // away: its retry may reuse the id).
    // Thread-safe, idempotent, harmless after the session ended.
    void Stop();
    const std::string& id() const;

   private:
    friend class CaptureManager;
    explicit Session(std::shared_ptr<SessionState> state) : state_(std::move(state)) {}
    std::shared_ptr<SessionState> state_;
  };

  CaptureManager(Dependencies deps, CaptureManagerOptions options);
  ~CaptureManager();

  // INVALID_ARGUMENT for a bad request (never retry), ABORTED when the (id, key, origin) was
  // cancelled (Cancel overtook this Capture; never retry), ALREADY_EXISTS while another session
  // holds the slot (the message says about how long it has left, never its id). Error messages
  // quote client strings only bounded (BoundedForLog).
  absl::StatusOr<std::unique_ptr<Session>> Begin(CaptureSpec spec);
  // For a running session of `origin` with this id: with the same key, stops it (cancel_reason
  // kClient, or kOtherClient for an empty key) and remembers (id, key, origin); with another key,
  // PERMISSION_DENIED and nothing happens. For any other id: remembers (id, key, origin), so only
  // a Capture with that same id, key and origin is aborted (see CaptureManagerOptions for the
  // bound), and returns OK. INVALID_ARGUMENT for an invalid id or key.
  absl::Status Cancel(const std::string& session_id, const std::string& session_key = "",
                      SessionOrigin origin = SessionOrigin::kAgentService);
  // Stops whatever session holds the slot (agent shutdown, cancel_reason kAgentShutdown), without
  // remembering its id; it still delivers what it recorded.
  void CancelActive();
  // Holds the capture slot for (session_id, session_key) for ttl_ms (at most 60 s; refreshed by
  // the same pair): meanwhile Begin refuses every other session ALREADY_EXISTS, and the session's
  // own Begin takes the reservation. ALREADY_EXISTS when another session runs or holds an
  // unexpired reservation (naming neither; for a reservation, the status carries its priority
  // and remaining time: ReservationConflictOf), INVALID_ARGUMENT for a bad id, an empty or bad
  // key, or a ttl out of range. Cancel with the same id and key releases it. `priority` is kept
  // with the reservation (the last one given by its session).
  //
  // A lease (CaptureManagerOptions): held min(ttl_ms, reservation_lease_ms) from each grant or
  // renewal, never past max_reservation_ms from the first; `peer` (the caller's address without
  // its port; empty: unknown) is put on probation when its reservation lapses without its
  // capture. A priority beyond max_priority_skew_ms of this agent's clock is kept unset.
  // *granted_ms (if given) gets how long the reservation is now held. The session whose capture
  // began last (a renewal that crossed its Capture) gets OK and 0 ms: nothing is reserved.
  absl::Status Reserve(const std::string& session_id, const std::string& session_key,
                       int64_t ttl_ms, ReservationPriority priority = {},
                       const std::string& peer = "", int64_t* granted_ms = nullptr);
  // A clock sync sample was answered now (SyncClock): the wall and monotonic clocks are noted,
  // and a session begun later reports a wall clock that stepped since (CaptureResult::shortfalls).
  // Thread-safe.
  void NoteClockSync();
  bool busy() const;
  std::vector<std::string> collector_names() const;
  const CaptureManagerOptions& options() const { return options_; }

  // What one read of the step signal covers at most, whoever reads it (GetStepSignal, the hang
  // detector's first poll): the last 10 minutes, 4096 steps.
  static constexpr int64_t kStepSignalWindowNs = int64_t{600} * kNanosPerSecond;
  static constexpr size_t kMaxStepSignalSamples = 4096;
  // The step signal of every collector that keeps one (Collector::RecentSteps): steps that ended
  // in (since_wall_ns, now_wall_ns], oldest first, at most `max` (the latest). `sources` (if
  // given) gets the names of those collectors. Thread-safe, cheap, never waits for a capture.
  std::vector<StepSample> RecentSteps(int64_t since_wall_ns, int64_t now_wall_ns, size_t max,
                                      std::vector<std::string>* sources = nullptr) const;

  // How many cancelled ids are remembered now (expired ones not yet forgotten may count).
  size_t cancelled_ids_for_testing() const;
  // The id of the session holding the slot; empty when none does.
  std::string active_id_for_testing() const;

 private:
  void Release(const SessionState* session);
  // Forgets expired ids. Requires mu_.
  void PruneCancelled(int64_t now_mono) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Ends a reservation that lapsed by `now_mono` (its peer goes on probation) and forgets
  // probations that are over.
  void ExpireReservation(int64_t now_mono) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Whether a reservation holds the slot against another session now (unexpired, and not from
  // a peer on probation).
  bool ReservationHolds(int64_t now_mono) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const Dependencies deps_;
  const CaptureManagerOptions options_;
  mutable absl::Mutex mu_;
  std::shared_ptr<SessionState> active_ ABSL_GUARDED_BY(mu_);
  // Remembered cancels: CancelKey(origin, id, key) -> monotonic time of its first Cancel, and the
  // same keys in that order (oldest first), so pruning and eviction are O(1) per id.
  absl::flat_hash_map<std::string, int64_t> cancelled_ ABSL_GUARDED_BY(mu_);
  // The reservation (Reserve): its session id and key, and until when (monotonic; 0: none).
  std::string reserved_id_ ABSL_GUARDED_BY(mu_);
  std::string reserved_key_ ABSL_GUARDED_BY(mu_);
  int64_t reserved_until_mono_ ABSL_GUARDED_BY(mu_) = 0;
  ReservationPriority reserved_priority_ ABSL_GUARDED_BY(mu_);
  // When the reservation was first granted (monotonic), by whom, and whether that peer was on
  // probation then (its reservation yields).
  int64_t reserved_since_mono_ ABSL_GUARDED_BY(mu_) = 0;
  std::string reserved_peer_ ABSL_GUARDED_BY(mu_);
  bool reserved_yields_ ABSL_GUARDED_BY(mu_) = false;
  // The session (id and key) of the last capture begun with a key: its renewals reserve nothing.
  std::string begun_id_ ABSL_GUARDED_BY(mu_);
  std::string begun_key_ ABSL_GUARDED_BY(mu_);
  // Peers on probation -> until when (monotonic); at most kMaxProbations, the oldest dropped.
  absl::flat_hash_map<std::string, int64_t> probation_ ABSL_GUARDED_BY(mu_);
  std::deque<std::pair<int64_t, std::string>> cancelled_order_ ABSL_GUARDED_BY(mu_);
  // The clocks at the last NoteClockSync.
  ClockReading synced_ ABSL_GUARDED_BY(mu_);
};

// A safe file stem ([A-Za-z0-9._-]{1,128}). The error quotes the id bounded (BoundedForLog).
absl::Status ValidateSessionId(const std::string& id);
// Empty, or [A-Za-z0-9._-]{16,128}. The error never quotes the key (a secret), only its length.
absl::Status ValidateSessionKey(const std::string& key);
// Whether two keys are equal, in time that depends on their lengths only.
bool SessionKeysEqual(absl::string_view a, absl::string_view b);

}  // namespace profctl::agent

#endif  // PROFCTL_AGENT_CAPTURE_MANAGER_H_
