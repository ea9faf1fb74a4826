#include "coordinator/engine/capture_run.h"

#include <algorithm>
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/check.h"
#include "coordinator/engine/capture_session.h"
#include "coordinator/engine/clock_sync.h"
#include "coordinator/engine/retry_policy.h"
#include "coordinator/engine/saved_hosts.h"
#include "coordinator/engine/step_signal.h"

namespace profctl::coordinator {

using Session = CaptureEngine::Session;

RunPhase::RunPhase(Session& s) : s_(s), hosts_(s.plan().workers.size()) {}

RunPhase::~RunPhase() = default;

template <typename Fn>
auto RunPhase::ForAttempt(size_t i, Fn fn) {
  return [weak = s_.weak_from_this(), ex = &s_.ex(), i, attempt = hosts_[i].attempt,
          fn = std::move(fn)](auto... args) {
    ex->Post([weak, i, attempt, fn, args...]() mutable {
      std::shared_ptr<Session> s = weak.lock();
      if (s != nullptr && s->run().hosts_[i].attempt == attempt) {
        fn(s->run(), i, std::move(args)...);
      }
    });
  };
}

void RunPhase::Begin() {
  s_.PostAt(s_.times().window_end_mono, [](Session& s) { s.run().OnWindowClosed(); });
  const int64_t tick_ms = s_.options().progress_tick_ms;
  if (tick_ms > 0) Tick(s_.NowMono() + tick_ms * kNanosPerMilli);
}

void RunPhase::OnWindowClosed() {
  PROFCTL_DCHECK_ON_SEQUENCE(s_.ex());
  s_.prepare().OnWindowClosed();
  AskStepSignals();
}

void RunPhase::AskStepSignals() {
  PROFCTL_DCHECK_ON_SEQUENCE(s_.ex());
  if (step_signals_asked_ || s_.finished() || s_.cancelled() || s_.plan().prepare_only) return;
  step_signals_asked_ = true;
  for (SessionHost& h : s_.hosts()) {
    const bool recording = h.stage == HostStage::kCapturing || h.stage == HostStage::kSaving;
    if (h.client == nullptr || !(recording || (h.stage == HostStage::kDone && IsSavedHost(h.r)))) {
      continue;
    }
    s_.StepSignalAsked();
    h.client->GetStepSignal(
        kStepSignalAtEndQuery, s_.options().rpc_timeout_ms,
        s_.Bind([i = h.index](Session& s,
                              const absl::StatusOr<profctl::v1::GetStepSignalResponse>& answer) {
          *s.host(i).r.mutable_step_signal() = StepSignalAtEndOf(answer);
          s.StepSignalAnswered();
        }));
  }
}

void RunPhase::StartCapture(size_t i) {
  SessionHost& h = s_.host(i);
  h.stage = HostStage::kCapturing;
  hosts_[i].capture_started_mono = s_.NowMono();
  // Offsets are bounded (clock_sync.h), so this cannot overflow.
  h.r.set_requested_start_ns(s_.times().start_at + h.r.clock().rtt_offset_ns());
  StartAttempt(i, /*fetch=*/false);
}

void RunPhase::StartAttempt(size_t i, bool fetch) {
  Host& a = hosts_[i];
  SessionHost& h = s_.host(i);
  const CapturePlan& plan = s_.plan();
  a.retry_pending = false;
  // Every attempt gets what is left of the session's deadline, no more.
  const int64_t timeout_ms = (s_.times().deadline_mono - s_.NowMono()) / kNanosPerMilli;
  if (timeout_ms <= 0) {
    s_.Fail(h, profctl::v1::FAILURE_STEP_CAPTURE,
            absl::DeadlineExceededError("the session deadline passed before the next attempt"));
    return;
  }
  ++a.attempt;
  h.r.set_attempts(static_cast<uint32_t>(a.attempt));
  a.fetching = fetch;
  a.attempt_started_mono = s_.NowMono();
  // A new recording starts anew; a fetched one is the recording that already started.
  if (!fetch) a.started_seen = false;
  a.stream = std::make_unique<HostTraceStream>(
      s_.deps().sink, XPlaneFileName(h.r.host()),
      ForAttempt(i, [](RunPhase& run, size_t host, int64_t start) { run.OnStarted(host, start); }),
      ForAttempt(i, [](RunPhase& run, size_t host, const absl::Status& status) {
        run.OnCaptureDone(host, status);
      }));
  if (fetch) {
    h.client->Fetch({plan.session, s_.session_key()}, timeout_ms, a.stream.get());
  } else {
    h.client->Capture(
        {plan.session, h.r.requested_start_ns(), plan.duration_ms, s_.repository_root(),
         s_.session_key(), plan.past_ms, PlanTracerLevels(plan)},
        timeout_ms, a.stream.get());
  }
}

void RunPhase::OnStarted(size_t i, int64_t agent_start_ns) {
  PROFCTL_DCHECK_ON_SEQUENCE(s_.ex());
  Host& a = hosts_[i];
  SessionHost& h = s_.host(i);
  s_.leases().Taken(i);  // the capture holds the slot now
  if (h.stage != HostStage::kCapturing || a.started_seen) return;
  a.started_seen = true;
  if (agent_start_ns < 0 || agent_start_ns > kMaxStampNs) {  // untrusted: keep arithmetic sane
    s_.Fail(h, profctl::v1::FAILURE_STEP_CAPTURE,
            absl::DataLossError(absl::StrCat("Capture: agent reported a start of ", agent_start_ns,
                                             " ns, outside 0..", kMaxStampNs)));
    h.client->AbortCapture();
    return;
  }
  h.r.set_agent_start_ns(agent_start_ns);
  // An unmeasured clock's start says nothing about lateness until the trace aligns it.
  if (!h.clock_measured) return;
  const int64_t lateness = agent_start_ns - h.r.requested_start_ns();
  const int64_t tolerance = s_.ToleranceNs();
  h.r.set_lateness_ns(lateness);
  h.r.set_late(lateness > tolerance);
  if (!h.r.late()) return;
  if (s_.plan().late == profctl::v1::LATE_POLICY_FAIL) {
    s_.Fail(h, profctl::v1::FAILURE_STEP_LATE,
            absl::DeadlineExceededError(absl::StrFormat(
                "started %.3f ms after the common start (tolerance %d ms, --late=fail)",
                Millis(lateness), tolerance / kNanosPerMilli)));
    h.client->AbortCapture();  // the agent stops when its stream is cancelled
  } else {
    s_.Progress(absl::StrFormat("%s: started %.3f ms late", h.r.host(), Millis(lateness)));
  }
}

void RunPhase::OnCaptureDone(size_t i, const absl::Status& status) {
  PROFCTL_DCHECK_ON_SEQUENCE(s_.ex());
  Host& a = hosts_[i];
  SessionHost& h = s_.host(i);
  if (h.stage != HostStage::kCapturing) {
    a.stream.reset();  // failed meanwhile (late, interrupted): drop the temporary file
    return;
  }
  h.r.set_capture_ms(Millis(s_.NowMono() - a.capture_started_mono));
  const char* kind = a.fetching ? "fetch" : "capture";
  if (!a.stream->file_error().ok()) {
    s_.LogAttempt(h, kind, a.attempt_started_mono, a.stream->file_error(), 0);
    s_.Fail(h, profctl::v1::FAILURE_STEP_WRITE, a.stream->file_error());
    a.stream.reset();
    return;
  }
  if (!status.ok()) {
    absl::Status failure = status;
    // Bytes that arrived damaged (a checksum mismatch, broken framing) are kept for inspection,
    // under a name TensorBoard will not load, never as a valid trace.
    if (status.code() == absl::StatusCode::kDataLoss && a.stream->file() != nullptr &&
        a.stream->file()->size() > 0) {
      absl::StatusOr<std::string> kept =
          a.stream->file()->Commit(RejectedXPlaneFileName(h.r.host()));
      if (kept.ok()) {
        failure = absl::DataLossError(
            absl::StrCat(status.message(), "; the bytes received are kept in ", *kept));
      }
    }
    const bool header_seen = a.stream->header_seen();
    a.stream.reset();
    if (Retry(i, failure, header_seen)) return;
    if (a.fetching && !a.agent_may_hold && !a.last_capture_error.ok()) {
      // The Fetch found nothing: what went wrong is what made us fetch.
      failure = absl::Status(
          a.last_capture_error.code(),
          absl::StrCat(a.last_capture_error.message(), "; the agent holds no copy to fetch (",
                       failure.message(), ")"));
    }
    if (a.attempt > 1) {
      failure = absl::Status(failure.code(), absl::StrCat(failure.message(), " (after ", a.attempt,
                                                          " attempts; see attempt_log)"));
    }
    s_.Fail(h, profctl::v1::FAILURE_STEP_CAPTURE, failure);
    return;
  }
  if (!a.stream->header_seen() || a.stream->file() == nullptr) {
    s_.Fail(h, profctl::v1::FAILURE_STEP_CAPTURE,
            absl::DataLossError("Capture: the stream ended without a header"));
    a.stream.reset();
    return;
  }
  const CaptureHeaderInfo& header = a.stream->header();
  if (header.start_ns < 0 || header.stop_ns < header.start_ns || header.stop_ns > kMaxStampNs) {
    s_.Fail(h, profctl::v1::FAILURE_STEP_CAPTURE,
            absl::DataLossError(absl::StrCat("Capture: agent reported an impossible window ",
                                             header.start_ns, "..", header.stop_ns, " ns")));
    a.stream.reset();
    return;
  }
  if (!a.started_seen) OnStarted(i, header.start_ns);  // agents that send no `started`
  if (h.stage != HostStage::kCapturing) {
    a.stream.reset();
    return;
  }
  h.r.set_agent_start_ns(header.start_ns);
  h.r.set_agent_stop_ns(header.stop_ns);
  h.r.set_cancelled(header.cancelled);
  h.r.set_dropped_events(header.dropped_events);
  for (const profctl::v1::Shortfall& f : header.shortfalls) *h.r.add_shortfalls() = f;
  h.r.set_bytes(a.stream->file()->size());
  s_.LogAttempt(h, kind, a.attempt_started_mono, absl::OkStatus(), 0);
  s_.collect().Save(i, std::move(a.stream), header.cancel_reason);
}

bool RunPhase::Retry(size_t i, const absl::Status& status, bool header_seen) {
  Host& a = hosts_[i];
  SessionHost& h = s_.host(i);
  const CapturePlan& plan = s_.plan();
  const SessionTimes& times = s_.times();
  const char* kind = a.fetching ? "fetch" : "capture";
  const CaptureFailureVerdict verdict = JudgeCaptureFailure({.code = status.code(),
                                                             .fetching = a.fetching,
                                                             .header_seen = header_seen,
                                                             .agent_may_hold = a.agent_may_hold,
                                                             .can_fetch = h.client->CanFetch()});
  a.agent_may_hold = verdict.agent_may_hold;
  if (verdict.capture_error) a.last_capture_error = status;
  const bool fetch = verdict.fetch;
  // A Fetch that found nothing is the agent's answer, not a failure to reach it: the recording
  // it calls for gets its attempt even when that Fetch was the last retry.
  const bool found_nothing = a.fetching && (status.code() == absl::StatusCode::kNotFound ||
                                            status.code() == absl::StatusCode::kUnimplemented);
  if (found_nothing) ++a.empty_fetches;
  const int counted = a.attempt - a.empty_fetches;
  // Retried while attempts are left, before the deadline (CaptureRetryFits).
  bool retry = verdict.retryable && counted <= plan.retries;
  const int64_t cutoff =
      RecordCutoff(plan.late, times.window_start_mono, times.window_end_mono, s_.ToleranceNs());
  // An agent that is not there (killed, restarting) may come back while its window is open: the
  // retries left are spread over what is left of it, not spent in the outage's first moments.
  int64_t spread = 0;
  if (retry && SpreadRetryWanted(status.code()) && !s_.cancelled()) {
    spread = SpreadRetryNs(std::min(cutoff, times.deadline_mono) - s_.NowMono(),
                           plan.retries - counted + 1);
  }
  // The agent that found nothing is there: record again after the shortest backoff.
  const int64_t backoff =
      !retry ? 0 : s_.backoff().NextNs(found_nothing ? 1 : std::max(1, counted), spread);
  const int64_t at = s_.NowMono() + backoff;
  retry = retry && CaptureRetryFits(at, fetch, s_.cancelled(), times.deadline_mono, cutoff);
  s_.LogAttempt(h, kind, a.attempt_started_mono, status, retry ? backoff : 0);
  if (!retry) return false;
  s_.Progress(absl::StrFormat("%s: %s; %s again in %.0f ms (attempt %d of %d)", h.r.host(),
                              status.message(), fetch ? "fetching it" : "capturing",
                              Millis(backoff), a.attempt + 1, plan.retries + 1));
  a.retry_pending = true;
  s_.PostAt(at,
            [i, attempt = a.attempt, fetch](Session& s) { s.run().OnRetryDue(i, attempt, fetch); });
  return true;
}

void RunPhase::OnRetryDue(size_t i, int attempt, bool fetch) {
  PROFCTL_DCHECK_ON_SEQUENCE(s_.ex());
  Host& a = hosts_[i];
  SessionHost& h = s_.host(i);
  if (h.stage != HostStage::kCapturing || a.attempt != attempt || !a.retry_pending) return;
  if (s_.cancelled() && !fetch) {
    s_.Fail(h, profctl::v1::FAILURE_STEP_INTERRUPTED,
            absl::CancelledError("interrupted while waiting to capture again"));
    return;
  }
  StartAttempt(i, fetch);
}

void RunPhase::Tick(int64_t next_mono) {
  PROFCTL_DCHECK_ON_SEQUENCE(s_.ex());
  s_.PostAt(next_mono, [next_mono](Session& s) {
    if (s.finished()) return;
    const SessionTimes& times = s.times();
    const int64_t now = s.NowMono();
    if (now >= times.window_start_mono) {
      size_t capturing = 0;
      for (const SessionHost& h : s.hosts()) capturing += h.stage == HostStage::kCapturing;
      if (now < times.window_end_mono) {
        s.Progress(absl::StrFormat("recording: %.0f of %.0f s",
                                   Millis(now - times.window_start_mono) / 1000,
                                   static_cast<double>(s.plan().duration_ms) / 1000));
      } else {
        s.Progress(absl::StrFormat("waiting for %d host(s) to send their traces", capturing));
      }
    }
    s.run().Tick(next_mono + s.options().progress_tick_ms * kNanosPerMilli);
  });
}

void RunPhase::Interrupt() {
  PROFCTL_DCHECK_ON_SEQUENCE(s_.ex());
  for (size_t i = 0; i < hosts_.size(); ++i) {
    const Host& a = hosts_[i];
    SessionHost& h = s_.host(i);
    if (h.stage != HostStage::kCapturing) continue;
    if (a.retry_pending && !(a.agent_may_hold && h.client->CanFetch())) {
      // Waiting to record again: nothing is recorded for it now, and nothing new will be.
      s_.Fail(h, profctl::v1::FAILURE_STEP_INTERRUPTED,
              absl::CancelledError("interrupted while waiting to capture again"));
      continue;
    }
    // All at once; a host that does not answer finishes its window: nothing is lost. One that
    // waits to fetch its trace again is told too: the agent stops and keeps what it has.
    h.client->Cancel(s_.plan().session, s_.session_key(), s_.options().rpc_timeout_ms,
                     [](const absl::Status&) {});
  }
}

void RunPhase::Abort(size_t i, profctl::v1::FailureStep step, const absl::Status& status) {
  SessionHost& h = s_.host(i);
  PROFCTL_DCHECK(h.stage == HostStage::kCapturing);
  if (!hosts_[i].retry_pending) h.client->AbortCapture();
  s_.Fail(h, step, status);
}

void RunPhase::OnInterruptGraceOver() {
  PROFCTL_DCHECK_ON_SEQUENCE(s_.ex());
  if (s_.finished()) return;
  const int64_t grace = s_.options().interrupt_grace_ms;
  for (size_t i = 0; i < hosts_.size(); ++i) {
    // Saving hosts finish on their own, quickly.
    if (s_.host(i).stage != HostStage::kCapturing) continue;
    const HostTraceStream* stream = hosts_[i].stream.get();
    const uint64_t announced = stream != nullptr ? stream->announced_bytes() : 0;
    if (announced > 0) {
      // Its trace is on its way but would keep the interrupt waiting: an interrupt stops within
      // the grace, with what was saved by then.
      Abort(i, profctl::v1::FAILURE_STEP_INTERRUPTED,
            absl::DeadlineExceededError(absl::StrFormat(
                "interrupted: still sending its trace %d ms after the interrupt (%.1f of %.1f MiB "
                "received); not saved",
                grace, static_cast<double>(stream->received_bytes()) / (1 << 20),
                static_cast<double>(announced) / (1 << 20))));
    } else {
      Abort(i, profctl::v1::FAILURE_STEP_INTERRUPTED,
            absl::DeadlineExceededError(
                absl::StrCat("hung: sent nothing back within ", grace,
                             " ms of the interrupt; what it recorded is lost")));
    }
  }
}

}  // namespace profctl::coordinator
