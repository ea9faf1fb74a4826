#include "agent/capture_manager.h"

#include <algorithm>
#include <atomic>
#include <cassert>
#include <cstdlib>

#include "absl/functional/function_ref.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "agent/bounded_text.h"
#include "agent/trace_caps.h"
#include "common/check.h"
#include "common/file_util.h"
#include "common/status_macros.h"
#include "spdlog/spdlog.h"
#include "xspace/xspace.h"
#include "xspace/xspace_merge.h"

namespace profctl::agent {

std::unique_ptr<google::protobuf::Arena> CaptureResult::NewTraceArena() {
  google::protobuf::ArenaOptions o;
  o.start_block_size = 16 << 10;  // a small trace stays small
  o.max_block_size = 1 << 20;
  return std::make_unique<google::protobuf::Arena>(o);
}

namespace {

// A stop timer that fires this late or later puts a warning in the trace (the coordinator's
// default alignment tolerance): later than that the host was busy enough to be worth saying.
constexpr int64_t kLateStopWorthAWarningNs = 5 * kNanosPerMilli;

bool IsStemChar(char c) {
  return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-';
}

// The remembered-cancel key of (origin, id, key): ids and keys never hold '\n'.
std::string CancelKey(SessionOrigin origin, const std::string& id, const std::string& key) {
  return absl::StrCat(static_cast<int>(origin), "\n", id, "\n", key);
}

// How far the wall clock may drift from the monotonic one over `elapsed_ns` without a jump:
// NTP slews at most 500 ppm; 1 ms + 1000 ppm leaves room for reading the two clocks apart.
int64_t ClockAgreementNs(int64_t elapsed_ns) { return kNanosPerMilli + elapsed_ns / 1000; }

// Drops the events that start at or after `end_ns` and clips those running past it to end there,
// marked as cut at the window's edge (xspace::kStatStepCut: readers keep such a step as partial,
// XProf ignores the stat). Returns how many were dropped.
uint64_t DropEventsFrom(int64_t end_ns, tensorflow::profiler::XSpace* space) {
  const int64_t profile_start = xspace::ProfileStartNs(*space);
  uint64_t dropped = 0;
  for (auto& plane : *space->mutable_planes()) {
    int64_t cut_stat = 0;  // the plane's kStatStepCut id, once needed (added if it has none)
    for (auto& line : *plane.mutable_lines()) {
      auto* events = line.mutable_events();
      int kept = 0;
      for (int i = 0; i < events->size(); ++i) {
        tensorflow::profiler::XEvent* e = events->Mutable(i);
        const int64_t start = xspace::EventStartNs(profile_start, line, *e);
        if (start >= end_ns) continue;
        if (xspace::EventEndNs(profile_start, line, *e) > end_ns) {
          e->set_duration_ps((end_ns - start) * 1000);
          if (cut_stat == 0) {
            cut_stat = xspace::XPlaneBuilder(&plane, plane.id(), plane.name(), profile_start)
                           .StatMetadataId(xspace::kStatStepCut);
          }
          const bool marked =
              std::any_of(e->stats().begin(), e->stats().end(),
                          [&](const auto& st) { return st.metadata_id() == cut_stat; });
          if (!marked) {
            tensorflow::profiler::XStat* stat = e->add_stats();
            stat->set_metadata_id(cut_stat);
            stat->set_int64_value(1);
          }
        }
        if (kept != i) events->SwapElements(kept, i);
        ++kept;
      }
      dropped += static_cast<uint64_t>(events->size() - kept);
      events->DeleteSubrange(kept, events->size() - kept);
    }
  }
  return dropped;
}

std::string Seconds(int64_t ns) { return absl::StrFormat("%.3f s", static_cast<double>(ns) / 1e9); }

}  // namespace

absl::Status ValidateSessionId(const std::string& id) {
  if (ValidateFileStem("session id", id).ok()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("session id '", BoundedForLog(id),
                                                 "' must be 1-128 characters of [A-Za-z0-9._-]"));
}

absl::Status ValidateSessionKey(const std::string& key) {
  if (key.empty()) return absl::OkStatus();
  if (key.size() >= 16 && key.size() <= 128 && std::all_of(key.begin(), key.end(), IsStemChar)) {
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(
      absl::StrCat("session_key (", key.size(),
                   " bytes, not shown) must be empty or 16-128 characters of [A-Za-z0-9._-]"));
}

bool SessionKeysEqual(absl::string_view a, absl::string_view b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    diff |= static_cast<unsigned char>(a[i]) ^ static_cast<unsigned char>(b[i]);
  }
  return diff == 0;
}

// One session's state machine. Phase changes happen only in tasks on the timeline executor
// (deps.executor); the collect executor runs Prepare, Collect and on_done. Data is handed from one
// to the other by posting, so each field has one owner at a time and needs no lock; only the stop
// request crosses threads freely (atomic). Tasks hold a shared_ptr, so a stale timer task finds
// the state alive and ignores itself by checking the phase.
class CaptureManager::SessionState : public std::enable_shared_from_this<SessionState> {
 public:
  SessionState(CaptureManager* manager, CaptureSpec spec, std::vector<Collector*> collectors,
               ClockReading synced)
      : manager_(manager),
        spec_(std::move(spec)),
        collectors_(std::move(collectors)),
        ok_(collectors_.size(), true),
        synced_(synced) {}

  const std::string& id() const { return spec_.session_id; }
  const std::string& key() const { return spec_.session_key; }
  SessionOrigin origin() const { return spec_.origin; }
  bool run_called() const { return run_called_.load(); }
  // About how long until the window ends (0 once it has): for a busy answer.
  int64_t RemainingNs(int64_t now_mono) const {
    return std::max<int64_t>(0, end_mono_.load() - now_mono);
  }
  CaptureManager* manager() const { return manager_; }
  void set_end_mono(int64_t end_mono) { end_mono_.store(end_mono); }

  // Any thread, once.
  void Run(SessionCallbacks callbacks) {
    [[maybe_unused]] const bool ran_before = run_called_.exchange(true);
    assert(!ran_before && "Session::Run() called twice");
    assert(manager_->deps_.executor != nullptr && "Session::Run() needs Dependencies::executor");
    callbacks_ = std::move(callbacks);
    result_.session_id = spec_.session_id;
    result_.space.add_hostnames(manager_->options_.host_name);
    collect_executor().Post([self = shared_from_this()] { self->Prepare(); });
  }

  // Any thread. Without an executor (a manager used only to hold the slot) only the flag is set.
  // The first stop's reason is the one reported.
  void RequestStop(CancelReason reason) {
    CancelReason none = CancelReason::kNone;
    reason_.compare_exchange_strong(none, reason);
    stop_requested_.store(true);
    if (manager_->deps_.executor != nullptr) {
      manager_->deps_.executor->Post([self = shared_from_this()] { self->OnStopRequested(); });
    }
  }

 private:
  enum class Phase { kPreparing, kWaiting, kRecording, kStopped };

  Executor& timeline() const { return *manager_->deps_.executor; }
  Executor& collect_executor() const {
    return manager_->deps_.collect_executor != nullptr ? *manager_->deps_.collect_executor
                                                       : *manager_->deps_.executor;
  }
  const Clock& clock() const { return *manager_->deps_.clock; }

  // Runs `fn` on every collector still in good standing. A collector that fails a step is
  // reported in XSpace.errors and skipped for the rest of this session.
  void Step(absl::string_view what, absl::FunctionRef<absl::Status(Collector*)> fn) {
    for (size_t i = 0; i < collectors_.size(); ++i) {
      if (!ok_[i]) continue;
      if (absl::Status s = fn(collectors_[i]); !s.ok()) {
        ok_[i] = false;
        result_.space.add_errors(absl::StrCat("collector ", collectors_[i]->name(), ": ", what,
                                              " failed: ", s.ToString()));
        spdlog::warn("session {}: collector {} {} failed: {}", id(),
                     std::string(collectors_[i]->name()), std::string(what), s.ToString());
      }
    }
  }

  // Collect executor.
  void Prepare() {
    PROFCTL_DCHECK_ON_SEQUENCE(collect_executor());
    if (spec_.past_ms > 0) {  // a snapshot prepares nothing
      timeline().Post([self = shared_from_this()] { self->Prepared(); });
      return;
    }
    const CaptureOptions opts{
        spec_.session_id,         spec_.start_at_ns,          spec_.duration_ms * kNanosPerMilli,
        spec_.tracer_levels.host, spec_.tracer_levels.device, spec_.tracer_levels.python};
    Step("prepare", [&](Collector* c) { return c->Prepare(opts); });
    timeline().Post([self = shared_from_this()] { self->Prepared(); });
  }

  // Timeline.
  void Prepared() {
    PROFCTL_DCHECK_ON_SEQUENCE(timeline());
    if (stop_requested_.load()) {
      FinishBeforeStart();
      return;
    }
    const int64_t wait_ns = spec_.start_at_ns == 0 ? 0 : spec_.start_at_ns - clock().WallNs();
    if (wait_ns <= 0) {
      StartRecording();
      return;
    }
    phase_ = Phase::kWaiting;
    timeline().PostAt(clock().MonoNs() + wait_ns, [self = shared_from_this()] {
      if (self->phase_ == Phase::kWaiting) self->StartRecording();
    });
  }

  // Timeline.
  void OnStopRequested() {
    PROFCTL_DCHECK_ON_SEQUENCE(timeline());
    switch (phase_) {
      case Phase::kPreparing:  // Prepared() sees the flag
      case Phase::kStopped:
        return;
      case Phase::kWaiting:
        FinishBeforeStart();
        return;
      case Phase::kRecording:
        StopRecording(/*cancelled=*/true);
        return;
    }
  }

  // Timeline. The snapshot's instant: it takes the past at once, on the collect executor.
  void TakeSnapshot() {
    PROFCTL_DCHECK_ON_SEQUENCE(timeline());
    phase_ = Phase::kStopped;
    start_ = ReadClockPair(clock());
    start_mono_ = start_.mono_ns;
    end_mono_.store(start_mono_);
    const int64_t instant = start_.wall_ns;
    WarnIfLate(instant);
    JudgeStepSinceSync();
    result_.stop_ns = instant;
    result_.start_ns = instant - spec_.past_ms * kNanosPerMilli;
    if (callbacks_.on_started) callbacks_.on_started(instant);
    collect_executor().Post([self = shared_from_this()] { self->SnapshotAndDeliver(); });
  }

  void WarnIfLate(int64_t started_ns) {
    if (spec_.start_at_ns != 0 && started_ns - spec_.start_at_ns > kNanosPerMilli) {
      result_.space.add_warnings(
          absl::StrCat(spec_.past_ms > 0 ? "snapshot taken " : "capture started ",
                       (started_ns - spec_.start_at_ns) / kNanosPerMicro,
                       " us after the requested start instant"));
    }
  }

  // Timeline. The wall clock stepped between the last clock sync before this session's Begin
  // (the coordinator measured its offset then) and the window's start: the window the agent
  // opened is off the instant asked for by the step, though its own clock says it is on time.
  // Both readings are pairs (ReadClockPair): a thread preempted between its two clock reads
  // is not a step.
  void JudgeStepSinceSync() {
    if (!synced_.seen) return;  // no clock sync seen: nothing to compare with
    const int64_t elapsed = start_.mono_ns - synced_.pair.mono_ns;
    const WallStep s = WallStepBetween(synced_.pair, start_);
    const int64_t step = s.step_ns;
    if (std::abs(step) <= ClockAgreementNs(elapsed) + s.unsure_ns) return;
    AddShortfall(MakeShortfall(
        profctl::v1::SHORTFALL_KIND_CLOCK_STEP, static_cast<uint64_t>(std::abs(step)),
        absl::StrCat("the agent's wall clock stepped ", Seconds(std::abs(step)),
                     step < 0 ? " back" : " forward", " between its clock sync ", Seconds(elapsed),
                     " before the window and the window's start: the window "
                     "is that far from the instant asked for")));
  }

  // Timeline. The wall clock moved apart from the monotonic one during the window (a step, not
  // NTP's slewing): the recording's length on the wall clock is not the time recorded.
  void JudgeStepInWindow(const ClockPair& stop) {
    const int64_t mono_elapsed = stop.mono_ns - start_.mono_ns;
    const WallStep s = WallStepBetween(start_, stop);
    const int64_t step = s.step_ns;
    if (std::abs(step) <= ClockAgreementNs(mono_elapsed) + s.unsure_ns) return;
    AddShortfall(MakeShortfall(
        profctl::v1::SHORTFALL_KIND_CLOCK_STEP, static_cast<uint64_t>(std::abs(step)),
        absl::StrCat("the agent's wall clock stepped ", Seconds(std::abs(step)),
                     step < 0 ? " back" : " forward", " during the window: ", Seconds(mono_elapsed),
                     " were recorded, the wall clock says ",
                     Seconds(result_.stop_ns - result_.start_ns))));
  }

  // Any executor of this session (one at a time): into the header and, in words, the trace.
  void AddShortfall(profctl::v1::Shortfall s) {
    result_.space.add_warnings(absl::StrCat("partial: ", s.detail()));
    spdlog::warn("session {}: partial: {}", BoundedForLog(id()), s.detail());
    result_.shortfalls.push_back(std::move(s));
  }

  // Collect executor: what the collectors say the trace they just wrote lacks.
  void TakeCollectorShortfalls() {
    for (size_t i = 0; i < collectors_.size(); ++i) {
      if (!ok_[i]) continue;
      std::vector<profctl::v1::Shortfall> found;
      collectors_[i]->TakeShortfalls(&found);
      for (profctl::v1::Shortfall& s : found) {
        s.set_detail(absl::StrCat(collectors_[i]->name(), ": ", s.detail()));
        AddShortfall(std::move(s));
      }
    }
  }

  // Timeline.
  void StartRecording() {
    PROFCTL_DCHECK_ON_SEQUENCE(timeline());
    if (spec_.past_ms > 0) {
      TakeSnapshot();
      return;
    }
    phase_ = Phase::kRecording;
    start_ = ReadClockPair(clock());
    start_mono_ = start_.mono_ns;
    end_mono_.store(start_mono_ + spec_.duration_ms * kNanosPerMilli);
    result_.start_ns = start_.wall_ns;
    WarnIfLate(result_.start_ns);
    JudgeStepSinceSync();
    Step("start", [&](Collector* c) { return c->Start(result_.start_ns); });
    if (callbacks_.on_started) callbacks_.on_started(result_.start_ns);
    timeline().PostAt(start_mono_ + spec_.duration_ms * kNanosPerMilli,
                      [self = shared_from_this()] {
                        if (self->phase_ == Phase::kRecording) {
                          self->StopRecording(/*cancelled=*/false);
                        }
                      });
  }

  // Timeline. Only the cheap Stop runs here; Collect goes to the collect executor, so a long
  // Collect never delays another session's start or stop on a shared timeline.
  void StopRecording(bool cancelled) {
    PROFCTL_DCHECK_ON_SEQUENCE(timeline());
    phase_ = Phase::kStopped;
    const ClockPair stop = ReadClockPair(clock());
    end_mono_.store(stop.mono_ns);
    result_.cancelled = cancelled;
    if (cancelled) result_.cancel_reason = reason_.load();
    result_.stop_ns = stop.wall_ns;
    JudgeStepInWindow(stop);
    if (!cancelled) JudgeLateStop(stop);
    // The collectors stop now, having recorded until now; a late stop's extra is dropped after
    // Collect (CollectAndDeliver).
    Step("stop", [&](Collector* c) { return c->Stop(result_.stop_ns); });
    collect_executor().Post([self = shared_from_this()] { self->CollectAndDeliver(); });
  }

  // Timeline. The stop timer fired late (a busy host: 100-120 ms with 256 agents on 2 cores):
  // the collectors recorded the whole window and more, so the trace is trimmed back to the window
  // asked for (trim_stop_ns_), which keeps the hosts aligned. The stop is kept as measured, with a
  // warning, when the wall clock moved differently from the monotonic one (a clock jump), or when
  // it came more than max_trimmed_late_stop_ms late: the agent did not run for that long (frozen,
  // a paused VM), so its collectors may hold a gap. The coordinator then reports the recording
  // overlong or truncated.
  void JudgeLateStop(const ClockPair& stop) {
    const int64_t now_mono = stop.mono_ns;
    const int64_t window_ns = spec_.duration_ms * kNanosPerMilli;
    const int64_t late_ns = now_mono - (start_mono_ + window_ns);
    if (late_ns <= 0) return;
    if (late_ns > manager_->options_.max_trimmed_late_stop_ms * kNanosPerMilli) {
      result_.space.add_warnings(
          absl::StrCat("the agent did not run for ", late_ns / kNanosPerMicro,
                       " us at the window's end (frozen?): the recording's stop is kept as "
                       "measured"));
      return;
    }
    const int64_t mono_elapsed = now_mono - start_mono_;
    const WallStep s = WallStepBetween(start_, stop);
    const int64_t drift = s.step_ns;
    if (std::abs(drift) > ClockAgreementNs(mono_elapsed) + s.unsure_ns) {
      result_.space.add_warnings(absl::StrCat(
          "the wall clock moved ", drift / kNanosPerMicro,
          " us more than the monotonic clock during the window (a clock jump): the recording's "
          "stop is kept as measured"));
      return;
    }
    trim_stop_ns_ = result_.start_ns + window_ns;
    late_stop_ns_ = late_ns;
  }

  // Timeline.
  void FinishBeforeStart() {
    PROFCTL_DCHECK_ON_SEQUENCE(timeline());
    phase_ = Phase::kStopped;
    end_mono_.store(clock().MonoNs());
    result_.cancelled = true;
    result_.cancel_reason = reason_.load();
    result_.start_ns = result_.stop_ns = clock().WallNs();
    result_.space.add_warnings("capture cancelled before its start instant; nothing was recorded");
    for (size_t i = 0; i < collectors_.size(); ++i) {
      if (ok_[i] && spec_.past_ms == 0) collectors_[i]->Abort();  // a snapshot prepared nothing
    }
    xspace::SetProfileWindow(&result_.space, result_.start_ns, result_.stop_ns);
    collect_executor().Post([self = shared_from_this()] { self->Deliver(); });
  }

  // Collect executor.
  void SnapshotAndDeliver() {
    PROFCTL_DCHECK_ON_SEQUENCE(collect_executor());
    for (Collector* c : collectors_) {
      if (!c->Recording()) {
        result_.space.add_errors(absl::StrCat("collector ", c->name(),
                                              ": keeps no past, so nothing of it is in this "
                                              "snapshot (docs/flight-recorder.md)"));
      }
    }
    Step("snapshot", [&](Collector* c) {
      return c->Recording() ? c->Snapshot(result_.start_ns, result_.stop_ns, &result_.space)
                            : absl::OkStatus();
    });
    TakeCollectorShortfalls();
    Finalize();
  }

  // Collect executor.
  void CollectAndDeliver() {
    PROFCTL_DCHECK_ON_SEQUENCE(collect_executor());
    Step("collect", [&](Collector* c) { return c->Collect(&result_.space); });
    TakeCollectorShortfalls();
    Finalize();
  }

  // Collect executor: what every delivered trace gets.
  void Finalize() {
    PROFCTL_DCHECK_ON_SEQUENCE(collect_executor());
    // One plane per name, whichever order the collectors added theirs in.
    xspace::MergeDuplicatePlanes(&result_.space);
    if (trim_stop_ns_ > 0) {
      // Lines are relative to the window's start: set it before reading event times.
      xspace::SetProfileWindow(&result_.space, result_.start_ns, trim_stop_ns_);
      const uint64_t extra = DropEventsFrom(trim_stop_ns_, &result_.space);
      // Every stop timer fires a little late (tens of µs on an idle host): that is trimmed
      // silently. A stop late by the alignment tolerance or more, or one that dropped events,
      // is news about the host, so the trace says it.
      if (extra > 0 || late_stop_ns_ >= kLateStopWorthAWarningNs) {
        result_.space.add_warnings(absl::StrCat(
            "the stop came ", late_stop_ns_ / kNanosPerMicro,
            " us after the window's end (a busy host); the trace is trimmed to the window asked "
            "for: ",
            extra, " event(s) recorded after its end dropped"));
      }
      spdlog::info("session {}: stopped {} us late; trimmed to the window, {} event(s) dropped",
                   BoundedForLog(id()), late_stop_ns_ / kNanosPerMicro, extra);
      result_.stop_ns = trim_stop_ns_;
    }
    result_.dropped_events = TrimToCaps(
        {manager_->options_.max_trace_events, manager_->options_.max_trace_bytes}, &result_.space);
    if (result_.dropped_events > 0) {
      spdlog::warn("session {}: dropped {} events to stay within the per-capture caps",
                   BoundedForLog(id()), result_.dropped_events);
    }
    if (result_.cancelled) {
      result_.space.add_warnings(absl::StrCat("capture cancelled after ",
                                              (result_.stop_ns - result_.start_ns) / kNanosPerMilli,
                                              " ms of ", spec_.duration_ms, " ms"));
    }
    // The session's window is the authority, whatever a collector recorded (idempotent).
    xspace::SetProfileWindow(&result_.space, result_.start_ns, result_.stop_ns);
    Deliver();
  }

  // Collect executor: frees the slot, then reports. `this` stays alive through the task's
  // shared_ptr.
  void Deliver() {
    PROFCTL_DCHECK_ON_SEQUENCE(collect_executor());
    manager_->Release(this);
    std::move(callbacks_.on_done)(std::move(result_));
  }

  CaptureManager* const manager_;
  const CaptureSpec spec_;
  const std::vector<Collector*> collectors_;
  std::atomic<bool> run_called_{false};
  std::atomic<bool> stop_requested_{false};
  std::atomic<CancelReason> reason_{CancelReason::kNone};
  // Monotonic end of the window as best known: estimated at Begin, exact once recording.
  std::atomic<int64_t> end_mono_{0};
  // Owned by whichever executor runs the session's current task (see the class comment).
  Phase phase_ = Phase::kPreparing;  // timeline only
  SessionCallbacks callbacks_;
  CaptureResult result_;
  std::vector<bool> ok_;
  // The agent's clocks at the last clock sync before Begin.
  const ClockReading synced_;
  // The clocks at the window's start (or a snapshot's instant), read as one pair.
  ClockPair start_;
  int64_t start_mono_ = 0;
  // A late stop to trim back to (agent wall clock; 0: none) and how late it came (JudgeLateStop).
  int64_t trim_stop_ns_ = 0;
  int64_t late_stop_ns_ = 0;
};

CaptureManager::CaptureManager(Dependencies deps, CaptureManagerOptions options)
    : deps_(std::move(deps)), options_(std::move(options)) {}

CaptureManager::~CaptureManager() = default;

std::vector<std::string> CaptureManager::collector_names() const {
  std::vector<std::string> names;
  for (const Collector* c : deps_.collectors) names.emplace_back(c->name());
  return names;
}

std::vector<StepSample> CaptureManager::RecentSteps(int64_t since_wall_ns, int64_t now_wall_ns,
                                                    size_t max,
                                                    std::vector<std::string>* sources) const {
  std::vector<StepSample> steps;
  const auto older = [](const StepSample& a, const StepSample& b) {
    return a.end_wall_ns < b.end_wall_ns;
  };
  // Oldest first over every collector (ties in collector order); the latest `max` of them. Each
  // collector's run is oldest first already (Collector::RecentSteps), so the runs are merged, not
  // sorted again: a hang detector's first poll asks for 4,096 steps of every endpoint.
  for (const Collector* c : deps_.collectors) {
    if (!c->HasStepSignal()) continue;
    if (sources != nullptr) sources->emplace_back(c->name());
    const auto run = static_cast<std::ptrdiff_t>(steps.size());
    c->RecentSteps(since_wall_ns, now_wall_ns, max, &steps);
    if (!std::is_sorted(steps.begin() + run, steps.end(), older)) {  // a collector out of order
      std::stable_sort(steps.begin() + run, steps.end(), older);
    }
    std::inplace_merge(steps.begin(), steps.begin() + run, steps.end(), older);
  }
  if (steps.size() > max) {
    steps.erase(steps.begin(), steps.end() - static_cast<std::ptrdiff_t>(max));
  }
  return steps;
}

absl::StatusOr<std::unique_ptr<CaptureManager::Session>> CaptureManager::Begin(CaptureSpec spec) {
  if (absl::Status s = ValidateSessionId(spec.session_id); !s.ok()) return s;
  if (absl::Status s = ValidateSessionKey(spec.session_key); !s.ok()) return s;
  if (spec.duration_ms < options_.min_duration_ms || spec.duration_ms > options_.max_duration_ms) {
    return absl::InvalidArgumentError(absl::StrCat("duration_ms=", spec.duration_ms,
                                                   " is outside [", options_.min_duration_ms, ", ",
                                                   options_.max_duration_ms, "] ms"));
  }
  if (spec.start_at_ns < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("start_at_ns=", spec.start_at_ns, " is negative"));
  }
  if (spec.past_ms < 0 || (spec.past_ms > 0 && spec.past_ms != spec.duration_ms)) {
    return absl::InvalidArgumentError(
        absl::StrCat("past_ms=", spec.past_ms, " must be 0 (a recording) or equal duration_ms=",
                     spec.duration_ms, " (a snapshot of the past that long)"));
  }
  const int64_t now = deps_.clock->WallNs();
  if (spec.start_at_ns != 0 &&
      spec.start_at_ns - now > options_.max_start_delay_ms * kNanosPerMilli) {
    return absl::InvalidArgumentError(
        absl::StrCat("start_at_ns is ", (spec.start_at_ns - now) / kNanosPerMilli,
                     " ms in the future on this agent's clock; at most ",
                     options_.max_start_delay_ms, " ms is allowed (are the clocks far apart?)"));
  }
  std::vector<Collector*> chosen;
  if (spec.collectors.empty()) {
    chosen = deps_.collectors;
  } else {
    for (const std::string& name : spec.collectors) {
      auto it = std::find_if(deps_.collectors.begin(), deps_.collectors.end(),
                             [&](const Collector* c) { return c->name() == name; });
      if (it == deps_.collectors.end()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "collector '", BoundedForLog(name), "' is not enabled on this agent (enabled: ",
            absl::StrJoin(collector_names(), ", "), ")"));
      }
      if (std::find(chosen.begin(), chosen.end(), *it) == chosen.end()) chosen.push_back(*it);
    }
  }
  if (spec.past_ms > 0 && std::none_of(chosen.begin(), chosen.end(),
                                       [](const Collector* c) { return c->Recording(); })) {
    return absl::FailedPreconditionError(
        "this agent keeps no past to snapshot: start it with --flight-recorder=SECONDS (and a "
        "collector that can keep one, docs/flight-recorder.md)");
  }
  absl::MutexLock lock(&mu_);
  // Checked under the same lock as the slot: a Cancel either comes first (and is seen here) or
  // finds this session active and stops it.
  PruneCancelled(deps_.clock->MonoNs());
  if (cancelled_.contains(CancelKey(spec.origin, spec.session_id, spec.session_key))) {
    return absl::AbortedError(absl::StrCat(
        "session '", spec.session_id, "' was cancelled before it started (this agent remembers ",
        "cancelled ids for ", options_.cancelled_id_ttl_ms / 1000, " s)"));
  }
  ExpireReservation(deps_.clock->MonoNs());
  if (reserved_until_mono_ > 0 && reserved_yields_ &&
      (reserved_id_ != spec.session_id || !SessionKeysEqual(reserved_key_, spec.session_key))) {
    reserved_until_mono_ = 0;  // a reservation on probation yields to any capture
  }
  if (reserved_until_mono_ > deps_.clock->MonoNs()) {
    if (reserved_id_ != spec.session_id || !SessionKeysEqual(reserved_key_, spec.session_key)) {
      return absl::AlreadyExistsError(
          absl::StrCat("the agent is reserved for another capture for ~",
                       (reserved_until_mono_ - deps_.clock->MonoNs()) / kNanosPerMilli,
                       " ms more (unless it starts or is released); retry later"));
    }
    reserved_until_mono_ = 0;  // taken by its own session
  }
  if (active_ != nullptr) {
    // Never the running session's id: it belongs to another client.
    return absl::AlreadyExistsError(
        absl::StrCat("the agent is busy with another capture for ~",
                     active_->RemainingNs(deps_.clock->MonoNs()) / kNanosPerMilli,
                     " ms more (plus its "
                     "collection); retry when it ends"));
  }
  if (!spec.session_key.empty()) {
    begun_id_ = spec.session_id;
    begun_key_ = spec.session_key;
  }
  const int64_t wait_ns = spec.start_at_ns == 0 ? 0 : std::max<int64_t>(0, spec.start_at_ns - now);
  const int64_t end_mono = deps_.clock->MonoNs() + wait_ns + spec.duration_ms * kNanosPerMilli;
  active_ = std::make_shared<SessionState>(this, std::move(spec), std::move(chosen), synced_);
  active_->set_end_mono(end_mono);
  return std::unique_ptr<Session>(new Session(active_));
}

absl::Status CaptureManager::Cancel(const std::string& session_id, const std::string& session_key,
                                    SessionOrigin origin) {
  PROFCTL_RETURN_IF_ERROR(ValidateSessionId(session_id));
  PROFCTL_RETURN_IF_ERROR(ValidateSessionKey(session_key));
  absl::MutexLock lock(&mu_);
  const bool running =
      active_ != nullptr && active_->origin() == origin && active_->id() == session_id;
  if (running && !SessionKeysEqual(active_->key(), session_key)) {
    return absl::PermissionDeniedError(
        "session_key does not match the running session's: only the client that started a "
        "capture can cancel it");
  }
  const int64_t now = deps_.clock->MonoNs();
  if (reserved_until_mono_ > 0 && reserved_id_ == session_id &&
      SessionKeysEqual(reserved_key_, session_key)) {
    reserved_until_mono_ = 0;  // released
  }
  PruneCancelled(now);
  std::string key = CancelKey(origin, session_id, session_key);
  if (!cancelled_.contains(key)) {
    while (!cancelled_order_.empty() &&
           static_cast<int64_t>(cancelled_.size()) >= options_.max_cancelled_ids) {
      cancelled_.erase(cancelled_order_.front().second);
      cancelled_order_.pop_front();
    }
    cancelled_.emplace(key, now);
    cancelled_order_.emplace_back(now, std::move(key));
  }
  if (running) {
    active_->RequestStop(session_key.empty() ? CancelReason::kOtherClient : CancelReason::kClient);
  }
  return absl::OkStatus();
}

absl::Status CaptureManager::Reserve(const std::string& session_id, const std::string& session_key,
                                     int64_t ttl_ms, ReservationPriority priority,
                                     const std::string& peer, int64_t* granted_ms) {
  PROFCTL_RETURN_IF_ERROR(ValidateSessionId(session_id));
  PROFCTL_RETURN_IF_ERROR(ValidateSessionKey(session_key));
  if (session_key.empty()) {
    return absl::InvalidArgumentError("a reservation needs a session_key");
  }
  constexpr int64_t kMaxReservationMs = 60'000;
  if (ttl_ms < 1 || ttl_ms > kMaxReservationMs) {
    return absl::InvalidArgumentError(
        absl::StrCat("reservation ttl_ms=", ttl_ms, " is outside [1, ", kMaxReservationMs, "]"));
  }
  if (priority.set()) {
    // Judged on this agent's clock: an honest session's start is its coordinator's instant just
    // before this request, off by that clock's skew. One beyond the bounds is kept unset (the
    // reservation is granted but ordered against no one: nobody waits for it), never refused,
    // so an honest host whose clock is far off is still reserved.
    const int64_t skew_ns = options_.max_priority_skew_ms * kNanosPerMilli;
    const int64_t ahead = priority.session_start_ns - deps_.clock->WallNs();
    if (ahead > skew_ns || ahead < -(skew_ns + options_.max_reservation_ms * kNanosPerMilli)) {
      priority = {};
    }
  }
  absl::MutexLock lock(&mu_);
  const int64_t now = deps_.clock->MonoNs();
  ExpireReservation(now);
  if (session_id == begun_id_ && SessionKeysEqual(begun_key_, session_key)) {
    // A renewal that crossed its own Capture: the capture holds the slot (or held it and is
    // done); nothing is reserved, so nothing lapses after it.
    if (granted_ms != nullptr) *granted_ms = 0;
    return absl::OkStatus();
  }
  if (active_ != nullptr &&
      (active_->id() != session_id || !SessionKeysEqual(active_->key(), session_key))) {
    return absl::AlreadyExistsError(absl::StrCat("the agent is busy with another capture for ~",
                                                 active_->RemainingNs(now) / kNanosPerMilli,
                                                 " ms more"));
  }
  const bool renewal = reserved_until_mono_ > now && reserved_id_ == session_id &&
                       SessionKeysEqual(reserved_key_, session_key);
  if (!renewal && ReservationHolds(now)) {
    const int64_t remaining_ms = (reserved_until_mono_ - now) / kNanosPerMilli;
    return WithReservationConflict(
        absl::AlreadyExistsError(absl::StrCat("the agent is reserved for another capture for ~",
                                              remaining_ms, " ms more")),
        {reserved_priority_, remaining_ms});
  }
  if (!renewal) {
    reserved_id_ = session_id;
    reserved_key_ = session_key;
    reserved_since_mono_ = now;
    reserved_peer_ = peer;
    reserved_yields_ = !peer.empty() && probation_.contains(peer);
  }
  // A lease from now, never past the reservation's longest life.
  const int64_t lease_ns = std::min(ttl_ms, options_.reservation_lease_ms) * kNanosPerMilli;
  reserved_until_mono_ =
      std::min(now + lease_ns, reserved_since_mono_ + options_.max_reservation_ms * kNanosPerMilli);
  reserved_priority_ = priority;
  if (granted_ms != nullptr) *granted_ms = (reserved_until_mono_ - now) / kNanosPerMilli;
  return absl::OkStatus();
}

void CaptureManager::ExpireReservation(int64_t now_mono) {
  if (reserved_until_mono_ != 0 && reserved_until_mono_ <= now_mono) {
    // Lapsed without its capture (Begin clears it when taken, Cancel when released).
    if (!reserved_peer_.empty()) {
      constexpr size_t kMaxProbations = 4096;
      if (probation_.size() >= kMaxProbations) probation_.clear();
      probation_[reserved_peer_] = now_mono + options_.max_reservation_ms * kNanosPerMilli;
      spdlog::warn(
          "a reservation from {} lapsed without its capture: its reservations yield to "
          "other sessions for {} ms",
          BoundedForLog(reserved_peer_), options_.max_reservation_ms);
    }
    reserved_until_mono_ = 0;
  }
  absl::erase_if(probation_, [now_mono](const auto& p) { return p.second <= now_mono; });
}

bool CaptureManager::ReservationHolds(int64_t now_mono) const {
  return reserved_until_mono_ > now_mono && !reserved_yields_;
}

void CaptureManager::NoteClockSync() {
  absl::MutexLock lock(&mu_);
  // Read as one pair: their difference is what a step moves.
  synced_.seen = true;
  synced_.pair = ReadClockPair(*deps_.clock);
}

void CaptureManager::PruneCancelled(int64_t now_mono) {
  const int64_t ttl_ns = options_.cancelled_id_ttl_ms * kNanosPerMilli;
  while (!cancelled_order_.empty() && now_mono - cancelled_order_.front().first >= ttl_ns) {
    cancelled_.erase(cancelled_order_.front().second);
    cancelled_order_.pop_front();
  }
}

size_t CaptureManager::cancelled_ids_for_testing() const {
  absl::MutexLock lock(&mu_);
  return cancelled_.size();
}

std::string CaptureManager::active_id_for_testing() const {
  absl::MutexLock lock(&mu_);
  return active_ == nullptr ? std::string() : active_->id();
}

void CaptureManager::CancelActive() {
  absl::MutexLock lock(&mu_);
  if (active_ != nullptr) active_->RequestStop(CancelReason::kAgentShutdown);
}

bool CaptureManager::busy() const {
  absl::MutexLock lock(&mu_);
  return active_ != nullptr;
}

void CaptureManager::Release(const SessionState* session) {
  absl::MutexLock lock(&mu_);
  if (active_.get() == session) active_.reset();
}

CaptureManager::Session::~Session() {
  if (!state_->run_called()) state_->manager()->Release(state_.get());
}

void CaptureManager::Session::Run(SessionCallbacks callbacks) { state_->Run(std::move(callbacks)); }

void CaptureManager::Session::Stop() { state_->RequestStop(CancelReason::kClientGone); }

const std::string& CaptureManager::Session::id() const { return state_->id(); }

}  // namespace profctl::agent
