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
#include "coordinator/engine/capture_session.h"
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
