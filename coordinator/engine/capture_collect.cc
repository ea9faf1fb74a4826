#include "coordinator/engine/capture_collect.h"

#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/check.h"
#include "coordinator/engine/capture_session.h"
#include "coordinator/engine/saved_hosts.h"

namespace profctl::coordinator {

using Session = CaptureEngine::Session;

CollectPhase::CollectPhase(Session& s) : s_(s), hosts_(s.plan().workers.size()) {}

void CollectPhase::Begin() {
  if (absl::StatusOr<analysis::StepMatcher> m =
          analysis::StepMatcher::Create(s_.plan().reader.step_pattern);
      m.ok()) {
    step_matcher_ = std::make_shared<const analysis::StepMatcher>(*std::move(m));
  } else {
    step_matcher_error_ = m.status();
  }
}

void CollectPhase::Save(size_t i, std::unique_ptr<HostTraceStream> stream,
                        profctl::v1::CancelReason reason) {
  PROFCTL_DCHECK_ON_SEQUENCE(s_.ex());
  Host& c = hosts_[i];
  SessionHost& h = s_.host(i);
  h.stage = HostStage::kSaving;
  c.cancel_reason = reason;
  // An interrupted session writes no pod trace: nothing to keep or render for it. A decoded trace
  // is kept only for the JSON pod trace; the Perfetto one is rendered as the host is saved.
  const bool keep = !s_.cancelled() && s_.plan().pod_trace_json &&
                    kept_trace_bytes_ + h.r.bytes() <= s_.options().kept_trace_budget_bytes;
  const bool render =
      !s_.cancelled() && static_cast<int64_t>(i) < report::PodPerfettoWriter::kMaxHosts;
  if (keep) {
    c.kept_bytes = h.r.bytes();
    kept_trace_bytes_ += c.kept_bytes;
  }
  SaveInput in{h.r.host(),
               h.r.clock().rtt_offset_ns(),
               s_.plan().align == profctl::v1::ALIGN_MODE_COLLECTIVES,
               s_.options().max_collective_ends,
               step_matcher_,
               step_matcher_error_,
               keep,
               s_.deps().decode,
               render ? static_cast<int64_t>(i) : -1};
  WorkPool* pool = s_.deps().pool;
  if (pool == nullptr) {
    OnSaved(i, SaveHostTrace(*stream->file(), in));
    return;
  }
  // Parsing, validating and summarizing a trace is the heaviest per-host work: on the pool, so the
  // executor keeps serving the other hosts. The job holds the session (a pool thread is no
  // transport thread: if it ends up with the last reference, nothing waits on itself), so the
  // sink it writes through outlives it.
  pool->Submit(
      [self = s_.shared_from_this(), i, stream = std::move(stream), in = std::move(in)]() mutable {
        SaveOutcome out = SaveHostTrace(*stream->file(), in);
        stream.reset();  // the temporary file, if it was not committed
        self->ex().Post([weak = std::weak_ptr<Session>(self), i, out = std::move(out)]() mutable {
          if (std::shared_ptr<Session> s = weak.lock()) s->collect().OnSaved(i, std::move(out));
        });
      });
}

void CollectPhase::OnSaved(size_t i, SaveOutcome out) {
  PROFCTL_DCHECK_ON_SEQUENCE(s_.ex());
  Host& c = hosts_[i];
  SessionHost& h = s_.host(i);
  c.space = std::move(out.space);
  if (c.space == nullptr || h.stage != HostStage::kSaving) {  // nothing kept: give its share back
    c.space.reset();
    kept_trace_bytes_ -= c.kept_bytes;
    c.kept_bytes = 0;
  }
  if (h.stage != HostStage::kSaving) return;
  if (out.failed_step != profctl::v1::FAILURE_STEP_UNSPECIFIED) {
    s_.Fail(h, out.failed_step, out.status);
    return;
  }
  h.r.set_xplane_file(out.path);
  h.r.set_events(out.events);
  h.r.set_steps(out.steps);
  c.collective_ends = std::move(out.collective_ends);
  c.summary = std::move(out.summary);
  c.collectives = std::move(out.collectives);
  c.pod_trace = std::move(out.pod_trace);
  c.pod_trace_error = std::move(out.pod_trace_error);
  if (!out.breakdown_error.empty()) {
    s_.manifest().add_errors(
        absl::StrCat("breakdown: ", h.r.host(), " left out: ", out.breakdown_error));
  }
  s_.Progress(absl::StrFormat("%s: saved %s (%d bytes, %d events, %d steps)", h.r.host(), out.path,
                              h.r.bytes(), h.r.events(), h.r.steps()));
  s_.Succeed(h);
}

void CollectPhase::Conclude() {
  PROFCTL_DCHECK_ON_SEQUENCE(s_.ex());
  const CapturePlan& plan = s_.plan();
  std::vector<AlignHost> saved;
  for (size_t i = 0; i < hosts_.size(); ++i) {
    SessionHost& h = s_.host(i);
    if (IsSavedHost(h.r)) {
      saved.push_back(
          {&h.r, h.clock_measured, std::move(hosts_[i].collective_ends), &hosts_[i].summary});
    }
  }
  // A snapshot's window ends at the common instant (docs/flight-recorder.md).
  AlignSavedHosts(saved, plan.align, s_.times().start_at - plan.past_ms * kNanosPerMilli,
                  s_.ToleranceNs(), s_.manifest());
  const RecordingRules rules{.requested_ns = plan.duration_ms * kNanosPerMilli,
                             .tolerance_ns = s_.ToleranceNs(),
                             .interrupted = s_.cancelled()};
  for (size_t i = 0; i < hosts_.size(); ++i) {
    profctl::v1::HostResult& r = s_.host(i).r;
    if (IsSavedHost(r) && ClassifyRecording(r, hosts_[i].cancel_reason, rules)) {
      s_.Progress(absl::StrCat(r.host(), ": ", r.recording_detail()));
    }
  }
}

PodOutputHost CollectPhase::TakeOutputs(size_t i) {
  Host& c = hosts_[i];
  PodOutputHost out;
  out.space = std::move(c.space);
  out.summary = std::move(c.summary);
  out.collectives = std::move(c.collectives);
  out.pod_trace = std::move(c.pod_trace);
  out.pod_trace_error = std::move(c.pod_trace_error);
  c.summary.reset();
  c.collectives.reset();
  return out;
}

}  // namespace profctl::coordinator
