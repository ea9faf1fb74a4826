#include "coordinator/engine/capture_prepare.h"

#include <algorithm>
#include <memory>
#include <optional>
#include <random>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/check.h"
#include "common/reservation.h"
#include "coordinator/engine/capture_session.h"
#include "coordinator/engine/clock_sync.h"
#include "coordinator/engine/start_policy.h"

namespace profctl::coordinator {

using Session = CaptureEngine::Session;

namespace {

// 64 random bits from the OS's random source (ReservationPriority.ticket); never 0.
uint64_t NewReservationTicket() {
  std::random_device random;
  const uint64_t ticket = (static_cast<uint64_t>(random()) << 32) ^ random();
  return ticket != 0 ? ticket : 1;
}

}  // namespace

PreparePhase::PreparePhase(Session& s)
    : s_(s),
      wait_backoff_(s.options().reservation_wait_initial_ms, s.options().reservation_wait_max_ms,
                    s.options().retry_jitter_seed) {}

// --- Phase 1: prepare --------------------------------------------------------------------------

void PreparePhase::Begin() {
  PROFCTL_DCHECK_ON_SEQUENCE(s_.ex());
  const CapturePlan& plan = s_.plan();
  const CaptureEngineOptions& options = s_.options();
  priority_ = {s_.WallNs(), options.reservation_ticket != 0 ? options.reservation_ticket
                                                            : NewReservationTicket()};
  s_.leases().Begin(priority_);
  hosts_.resize(s_.hosts().size());
  const int64_t started = s_.times().prepare_started_mono;
  const int64_t budget_ms =
      plan.prepare_timeout_ms > 0 ? plan.prepare_timeout_ms : options.max_prepare_budget_ms;
  s_.manifest().set_prepare_budget_ms(static_cast<double>(budget_ms));
  cap_mono_ = started + budget_ms * kNanosPerMilli;
  reservation_wait_cap_mono_ = cap_mono_;
  ScheduleBudget(cap_mono_);
  // session.json exists from the start: a coordinator killed now leaves a folder that says what
  // it is.
  s_.FlushManifest();
  const int64_t fan_out_start = s_.NowMono();
  for (size_t i = 0; i < hosts_.size(); ++i) StartRound(i);
  // What starting one host's RPCs costs here (channel set-up, request encoding): sending every
  // Capture costs about as much, and the lead must cover it (End).
  per_host_send_ns_ = (s_.NowMono() - fan_out_start) / static_cast<int64_t>(hosts_.size());
}

void PreparePhase::StartRound(size_t i) {
  Host& p = hosts_[i];
  SessionHost& h = s_.host(i);
  const CaptureEngineOptions& options = s_.options();
  if (p.prepare_round == 0) p.prepare_started_mono = s_.NowMono();
  // A new round (a retry) starts clean; answers of the last one are ignored.
  ++p.prepare_round;
  p.attempt_started_mono = s_.NowMono();
  p.info_rtt_ns = p.last_rtt_ns = p.last_answer_mono = 0;
  p.round = PrepareRound(
      h.client->MeasuresClock(),
      {.max_samples = options.clock_sync_samples, .min_samples = options.min_clock_sync_samples});
  // Reserves the agent's slot for this session (not for a dry run): a second capture of the same
  // pod then finds it busy everywhere it got first, and gives up whole.
  h.client->GetInfo(
      s_.leases().Request(), options.rpc_timeout_ms,
      s_.Bind([i, round = p.prepare_round](Session& s, absl::StatusOr<AgentInfo> info) {
        PreparePhase& prepare = s.prepare();
        if (prepare.hosts_[i].prepare_round == round) {
          prepare.OnInfo(i, std::move(info));
        }
      }));
}

void PreparePhase::TakeWarmSample(size_t i) {
  const int64_t sent = s_.NowMono();
  TakeSample(i);
  warm_send_ns_ += s_.NowMono() - sent;
  ++warm_sends_;
}

void PreparePhase::TakeSample(size_t i) {
  Host& p = hosts_[i];
  const CaptureEngineOptions& options = s_.options();
  p.sample_sent_mono = s_.NowMono();
  // A link slower than the usual sample timeout still gets its answers: twice what GetInfo took.
  const int64_t timeout_ms =
      std::clamp(2 * p.info_rtt_ns / kNanosPerMilli, options.sample_timeout_ms,
                 std::max(options.sample_timeout_ms, options.max_prepare_budget_ms));
  s_.host(i).client->SyncClock(
      timeout_ms,
      s_.Bind([i, round = p.prepare_round](Session& s, const absl::StatusOr<ClockReading>& r) {
        PreparePhase& prepare = s.prepare();
        if (prepare.hosts_[i].prepare_round == round) prepare.OnSample(i, r);
      }));
}

void PreparePhase::OnInfo(size_t i, absl::StatusOr<AgentInfo> info) {
  PROFCTL_DCHECK_ON_SEQUENCE(s_.ex());
  Host& p = hosts_[i];
  SessionHost& h = s_.host(i);
  const bool dry_run = s_.plan().prepare_only;
  if (h.stage != HostStage::kPreparing) {
    // Failed while its GetInfo was in flight (the pod was busy, the budget ran out), and the
    // agent reserved it meanwhile: released with the others unless they already were (then it
    // lapses at its TTL).
    if (h.stage == HostStage::kDone && info.ok() && !s_.releases_sent() && !dry_run &&
        h.client != nullptr && h.client->MeasuresClock()) {
      h.reserved = true;
    }
    return;
  }
  const PrepareRound::Step step = p.round.OnInfo(std::move(info));
  if (step.answered && !dry_run && p.round.measures_clock()) {
    s_.leases().Granted(i, p.attempt_started_mono);
  }
  if (step.answered && p.waiting_for_reservation) {
    s_.Progress(
        absl::StrFormat("%s: reserved after waiting %.0f ms for a younger capture to let it go",
                        h.r.address(), Millis(s_.NowMono() - p.waiting_since_mono)));
  }
  p.waiting_for_reservation = false;  // set again by WaitForReservation
  if (!pod_busy_.ok()) {
    s_.Fail(h, profctl::v1::FAILURE_STEP_PREPARE, pod_busy_);
    return;
  }
  if (step.answered) {
    p.info_rtt_ns = p.last_rtt_ns = s_.NowMono() - p.attempt_started_mono;
    p.last_answer_mono = s_.NowMono();
    slowest_info_ns_ = std::max(slowest_info_ns_, p.info_rtt_ns);
    const AgentInfo& agent = p.round.info();
    h.r.set_agent_name(agent.name);
    h.r.set_agent_hostname(agent.hostname);
    h.r.set_agent_version(agent.version);
    h.r.set_agent_busy(agent.busy);
  }
  OnRoundStep(i, step);
}

void PreparePhase::OnSample(size_t i, const absl::StatusOr<ClockReading>& reading) {
  PROFCTL_DCHECK_ON_SEQUENCE(s_.ex());
  Host& p = hosts_[i];
  if (s_.host(i).stage != HostStage::kPreparing) return;
  if (reading.ok()) {
    p.last_rtt_ns = s_.NowMono() - p.sample_sent_mono;
    p.last_answer_mono = s_.NowMono();
  }
  OnRoundStep(i, p.round.OnSample(reading));
}

void PreparePhase::OnRoundStep(size_t i, const PrepareRound::Step& step) {
  if (step.answered) Answered(i);
  if (step.sample_next) {
    TakeWarmSample(i);
    if (step.answered) FollowSlowHost(i);
  } else {
    MaybeReady(i);
  }
}

void PreparePhase::Answered(size_t i) {
  Host& p = hosts_[i];
  if (p.answered) return;
  p.answered = true;
  // A host that comes alive during a short quiet end (below) makes it the long one again.
  if (active_ && s_.plan().prepare_timeout_ms <= 0 && !ready_prepare_ns_.empty()) DeriveBudget(i);
}

bool PreparePhase::ClaimInstance(size_t i) {
  const std::string& instance = hosts_[i].round.info().instance_id;
  if (instance.empty()) return true;
  auto [it, inserted] = instance_owner_.try_emplace(instance, i);
  if (inserted || it->second == i) return true;
  // One agent under two addresses: the one listed first keeps it, unless it is already past
  // preparing (then the newcomer goes).
  SessionHost& h = s_.host(i);
  SessionHost& other = s_.host(it->second);
  SessionHost* loser = &h;
  if (h.index < other.index && other.stage == HostStage::kReady) {
    loser = &other;
    it->second = h.index;
  }
  const SessionHost& keeper = loser == &h ? other : h;
  s_.Fail(*loser, profctl::v1::FAILURE_STEP_PREPARE,
          absl::InvalidArgumentError(absl::StrCat(
              "the same agent as worker ", keeper.r.address(), " (instance id ", instance,
              "): listed twice under different addresses; capturing it once")));
  return loser != &h;
}

void PreparePhase::MaybeReady(size_t i) {
  Host& p = hosts_[i];
  SessionHost& h = s_.host(i);
  const CapturePlan& plan = s_.plan();
  // A retry pending: answers still arriving from the failed round change nothing.
  if (h.stage != HostStage::kPreparing || p.retry_pending) return;
  const PrepareRound::Verdict verdict = p.round.Decide();
  if (verdict.state == PrepareRound::State::kWaiting) return;
  if (verdict.state == PrepareRound::State::kFailed) {
    if (verdict.status.code() == absl::StatusCode::kAlreadyExists && active_) {
      if (!WaitForReservation(i, verdict.status)) GiveUpBusyPod(i, BusyReason(i, verdict.status));
      return;
    }
    absl::Status status = verdict.status;
    // A GetInfo unanswered at its deadline: a hung host, or a round trip longer than the
    // deadline (no budget waits longer for a first answer): say which numbers, not just gRPC's.
    if (verdict.step == profctl::v1::FAILURE_STEP_GET_INFO &&
        status.code() == absl::StatusCode::kDeadlineExceeded) {
      status = absl::DeadlineExceededError(absl::StrFormat(
          "GetInfo unanswered after %.0f ms (its %d ms timeout: %s): %s",
          Millis(s_.NowMono() - p.attempt_started_mono), s_.options().rpc_timeout_ms,
          HandshakeWithoutConnection(i) ? FrozenNote(i)
                                        : "the host is hung, or its round trip is longer than that",
          status.message()));
    }
    if (!Retry(i, status)) s_.Fail(h, verdict.step, status);
    return;
  }
  const bool measured = p.round.measures_clock();
  if (!ClaimInstance(i)) return;
  const AgentInfo& info = p.round.info();
  if (info.max_duration_ms > 0 && plan.duration_ms > info.max_duration_ms) {
    // Said before any Capture, with both numbers and where each comes from.
    s_.Fail(h, profctl::v1::FAILURE_STEP_PREPARE,
            absl::InvalidArgumentError(
                plan.past_ms > 0
                    ? absl::StrCat("agent keeps a past of at most ", info.max_duration_ms,
                                   " ms (its --max-duration-ms), asked for ", plan.past_ms,
                                   " ms (--last)")
                    : absl::StrCat("agent accepts captures of at most ", info.max_duration_ms,
                                   " ms (its --max-duration-ms), asked for ", plan.duration_ms,
                                   " ms (--duration)")));
    return;
  }
  auto* clock = h.r.mutable_clock();
  h.clock_measured = measured;
  if (measured) {
    const ClockOffset& c = p.round.best();
    clock->set_offset_ns(c.offset_ns);
    clock->set_rtt_offset_ns(c.offset_ns);
    clock->set_rtt_ns(c.rtt_ns);
    clock->set_uncertainty_ns(c.uncertainty_ns());
    clock->set_samples(static_cast<uint32_t>(c.samples));
    clock->set_method(std::string(kClockMethodRtt));
    s_.Progress(absl::StrFormat("%s: clock offset %+.3f ms +- %.3f ms (rtt %.3f ms)", h.r.address(),
                                Millis(c.offset_ns), Millis(c.uncertainty_ns()), Millis(c.rtt_ns)));
  } else {
    // Assumed in sync with ours (as TSL's own clients assume) within kUnmeasuredClockBoundNs,
    // until its collectives say better (alignment).
    clock->set_offset_ns(0);
    clock->set_rtt_offset_ns(0);
    clock->set_uncertainty_ns(kUnmeasuredClockBoundNs);
    clock->set_method(std::string(kClockMethodUnmeasured));
    s_.Progress(absl::StrFormat("%s: clock not measurable (%s); assumed in sync", h.r.address(),
                                info.version));
  }
  const int64_t took = s_.NowMono() - p.prepare_started_mono;
  h.r.set_prepare_ms(Millis(took));
  h.stage = HostStage::kReady;
  if (active_) {
    ++settled_;
    ready_prepare_ns_.push_back(took);
    if (plan.prepare_timeout_ms <= 0) DeriveBudget();
    if (settled_ == hosts_.size()) End();
  } else if (!s_.cancelled() && !plan.prepare_only) {
    // Ready after the budget, with --late=capture: capture it if its window is still open.
    if (s_.NowMono() < s_.times().window_end_mono) {
      s_.run().StartCapture(i);
    } else {
      s_.Fail(h, profctl::v1::FAILURE_STEP_PREPARE_TIMEOUT,
              absl::DeadlineExceededError("ready only after the capture window closed"));
    }
  }
}

void PreparePhase::RecordFailure(size_t i) {
  const Host& p = hosts_[i];
  if (p.prepare_started_mono > 0) {
    s_.host(i).r.set_prepare_ms(Millis(s_.NowMono() - p.prepare_started_mono));
  }
}

bool PreparePhase::OnFailed() {
  if (!active_) return false;
  ++settled_;
  if (settled_ < hosts_.size()) return false;
  End();
  return true;
}

std::string PreparePhase::ProgressOf(size_t i) const {
  const Host& p = hosts_[i];
  std::string text =
      PrepareProgressText(p.round.info_done(), p.info_rtt_ns, p.round.samples_answered(),
                          p.last_rtt_ns, s_.NowMono() - p.attempt_started_mono);
  if (LooksFrozen(i)) absl::StrAppend(&text, "; ", FrozenNote(i));
  return text;
}

void PreparePhase::GiveUpBusyPod(size_t i, const absl::Status& status) {
  SessionHost& h = s_.host(i);
  if (!pod_busy_.ok()) {
    s_.Fail(h, profctl::v1::FAILURE_STEP_PREPARE, status);
    return;
  }
  // Set before `h` fails: when it is the last host to settle, its failure ends preparing, which
  // must then capture nothing.
  pod_busy_ = absl::AlreadyExistsError(
      absl::StrCat("not captured: the pod is busy with another capture (", h.r.address(), ": ",
                   status.message(), "); a capture takes the whole pod or none of it"));
  s_.manifest().add_errors(absl::StrCat("the pod is busy: ", h.r.address(),
                                        " is capturing or reserved for another session (",
                                        status.message(),
                                        "); nothing was captured and this capture's reservations "
                                        "were released"));
  s_.Fail(h, profctl::v1::FAILURE_STEP_PREPARE, status);
  for (size_t o = 0; o < hosts_.size(); ++o) {
    SessionHost& other = s_.host(o);
    if ((other.stage == HostStage::kPreparing && hosts_[o].round.info_done()) ||
        other.stage == HostStage::kReady) {
      s_.Fail(other, profctl::v1::FAILURE_STEP_PREPARE, pod_busy_);
    }
  }
}

bool PreparePhase::WaitForReservation(size_t i, const absl::Status& refused) {
  Host& p = hosts_[i];
  const std::optional<ReservationConflict> conflict = ReservationConflictOf(refused);
  if (!conflict.has_value() || !priority_.OlderThan(conflict->holder) || s_.cancelled() ||
      !pod_busy_.ok()) {
    return false;
  }
  const int64_t now = s_.NowMono();
  if (now >= reservation_wait_cap_mono_) return false;
  // The last GetInfo is sent a little before the cap, so that it can be answered inside it; after
  // it the host waits (OnDeadline gives up at the cap).
  const int64_t at =
      std::min(now + wait_backoff_.NextNs(p.reservation_waits + 1),
               reservation_wait_cap_mono_ - s_.options().min_prepare_quiet_ms * kNanosPerMilli);
  if (p.reservation_waits == 0) {
    p.waiting_since_mono = now;
    s_.Progress(absl::StrFormat(
        "%s: reserved for a younger capture; waiting for it to let go (at most %.0f ms more)",
        s_.host(i).r.address(), Millis(reservation_wait_cap_mono_ - now)));
  }
  ++p.reservation_waits;
  p.waiting_for_reservation = true;
  p.reservation_refusal = refused;
  if (at <= now) return true;
  p.retry_pending = true;
  s_.PostAt(at, [i, round = p.prepare_round](Session& s) {
    PreparePhase& prepare = s.prepare();
    Host& host = prepare.hosts_[i];
    if (s.host(i).stage != HostStage::kPreparing || host.prepare_round != round) return;
    host.retry_pending = false;
    if (!s.cancelled() && prepare.pod_busy_.ok()) prepare.StartRound(i);
  });
  return true;
}

absl::Status PreparePhase::BusyReason(size_t i, const absl::Status& refused) const {
  const Host& p = hosts_[i];
  const std::optional<ReservationConflict> conflict = ReservationConflictOf(refused);
  if (!conflict.has_value()) return refused;
  if (p.reservation_waits > 0) {
    return absl::AlreadyExistsError(absl::StrFormat(
        "%s; waited %.0f ms for that younger capture to let it go, as long as the prepare budget "
        "allows",
        refused.message(), Millis(s_.NowMono() - p.waiting_since_mono)));
  }
  if (conflict->holder.set() && conflict->holder.OlderThan(priority_)) {
    return absl::AlreadyExistsError(
        absl::StrCat(refused.message(), "; that capture is older and goes first"));
  }
  return refused;
}

void PreparePhase::DeriveBudget(std::optional<size_t> answered) {
  const CapturePlan& plan = s_.plan();
  const CaptureEngineOptions& options = s_.options();
  const int64_t started = s_.times().prepare_started_mono;
  const bool quiet_rule = plan.late == profctl::v1::LATE_POLICY_CAPTURE && !plan.prepare_only;
  // This runs as each host gets ready, so a pass over the pod here is quadratic (4,096 hosts:
  // about a tenth of the executor's time in preparing): only where the rules read it, the quiet
  // rule once 90 % are ready (NextPrepareBudget).
  bool one_on_its_way = false;
  if (quiet_rule && ready_prepare_ns_.size() * 10 >= hosts_.size() * 9) {
    for (size_t i = 0; i < hosts_.size() && !one_on_its_way; ++i) {
      one_on_its_way = s_.host(i).stage == HostStage::kPreparing && hosts_[i].answered;
    }
  }
  const PrepareBudget budget =
      NextPrepareBudget({.ready_ns = &ready_prepare_ns_,
                         .hosts = hosts_.size(),
                         .started = started,
                         .now = s_.NowMono(),
                         .quiet_rule = quiet_rule,
                         .one_on_its_way = one_on_its_way},
                        cap_mono_,
                        {.min_budget_ns = options.min_prepare_budget_ms * kNanosPerMilli,
                         .max_budget_ns = options.max_prepare_budget_ms * kNanosPerMilli,
                         .min_quiet_ns = options.min_prepare_quiet_ms * kNanosPerMilli});
  if (budget.cap < cap_mono_) {
    s_.manifest().set_prepare_budget_ms(Millis(budget.cap - started));
    cap_mono_ = budget.cap;
  }
  // A host whose answers are arriving is waited for as its round trips say. The deadline set
  // so far is never before that (FollowSlowHost keeps it so, as each answer arrives), but for
  // the host that `answered` just now, not followed yet: the pass over the pod is needed only
  // when the rules would end preparing sooner.
  const int64_t deadline =
      budget.deadline >= deadline_mono_
          ? std::max(budget.deadline, answered.has_value() ? HostReadyBy(*answered) : 0)
          : std::max(budget.deadline, SlowHostsReadyBy());
  PROFCTL_DCHECK(deadline >= SlowHostsReadyBy());
  if (deadline > budget.cap) s_.manifest().set_prepare_budget_ms(Millis(deadline - started));
  if (deadline != deadline_mono_) ScheduleBudget(deadline);
}

int64_t PreparePhase::HostReadyBy(size_t i) const {
  const Host& p = hosts_[i];
  if (s_.plan().prepare_timeout_ms > 0 || s_.host(i).stage != HostStage::kPreparing ||
      p.retry_pending || !p.round.measures_clock()) {
    return 0;
  }
  const int64_t by = ProjectedReadyNs(p.last_answer_mono, p.last_rtt_ns, p.round.samples_left());
  if (by == 0) return 0;
  return std::min(
      by, s_.times().prepare_started_mono + s_.options().max_prepare_budget_ms * kNanosPerMilli);
}

int64_t PreparePhase::SlowHostsReadyBy() const {
  int64_t latest = 0;
  for (size_t i = 0; i < hosts_.size(); ++i) latest = std::max(latest, HostReadyBy(i));
  return latest;
}

void PreparePhase::FollowSlowHost(size_t i) {
  if (!active_) return;
  const int64_t by = HostReadyBy(i);
  if (by > deadline_mono_) {
    s_.manifest().set_prepare_budget_ms(Millis(by - s_.times().prepare_started_mono));
    ScheduleBudget(by);
  }
  // The invariant that makes one host enough (a pass over the pod: debug builds only).
  PROFCTL_DCHECK(deadline_mono_ >= SlowHostsReadyBy());
}

void PreparePhase::ScheduleBudget(int64_t deadline_mono) {
  deadline_mono_ = deadline_mono;
  const uint64_t generation = ++budget_generation_;
  s_.PostAt(deadline_mono, [generation](Session& s) { s.prepare().OnDeadline(generation); });
}

void PreparePhase::OnDeadline(uint64_t generation) {
  PROFCTL_DCHECK_ON_SEQUENCE(s_.ex());
  if (generation != budget_generation_ || !active_) return;
  const CapturePlan& plan = s_.plan();
  const CaptureEngineOptions& options = s_.options();
  const int64_t started = s_.times().prepare_started_mono;
  // A host waiting for a younger capture's reservation (WaitForReservation) keeps preparing open
  // until it gets it; at the wait's cap the capture gives up whole.
  for (size_t i = 0; i < hosts_.size(); ++i) {
    if (s_.host(i).stage != HostStage::kPreparing || !hosts_[i].waiting_for_reservation) continue;
    if (s_.NowMono() < reservation_wait_cap_mono_) {
      s_.manifest().set_prepare_budget_ms(Millis(reservation_wait_cap_mono_ - started));
      ScheduleBudget(reservation_wait_cap_mono_);
      return;
    }
    GiveUpBusyPod(i, BusyReason(i, hosts_[i].reservation_refusal));
    End();  // fails every host still preparing with the pod's reason
    return;
  }
  // A host whose GetInfo is still in flight (neither answered nor refused) may be alive behind a
  // slow link: its first answer needs the connection's handshake and a round trip, longer than
  // the budget the fast hosts derived (a 600 ms round trip answers GetInfo after about 1 s,
  // before its channel is even connected), and until it answers it cannot be told from a hung
  // one. Preparing waits for that GetInfo (then FollowSlowHost for its clock samples), at most
  // GetInfo's timeout, within the budget's maximum, for a host whose channel is connected, and
  // for every such host while fewer than 90 % of the pod are ready: a tail of at most a tenth
  // of the pod (dead, hung or slow) is left to the late policy, as the budget's rules leave it.
  // A host neither connected nor answering whose host's kernel answered a TCP handshake long
  // ago is frozen, not slow (SilentHostWaitUntil): it is not waited for past that.
  if (plan.prepare_timeout_ms <= 0) {
    const bool tail_only = ready_prepare_ns_.size() * 10 >= hosts_.size() * 9;
    int64_t wait = 0;
    for (size_t i = 0; i < hosts_.size(); ++i) {
      const Host& p = hosts_[i];
      const SessionHost& h = s_.host(i);
      if (h.stage == HostStage::kPreparing && !p.retry_pending && !p.round.info_done() &&
          (!tail_only || h.client->Connected())) {
        wait = std::max(wait, SilentHostWaitUntil(i));
      }
    }
    wait = std::min(wait, started + options.max_prepare_budget_ms * kNanosPerMilli);
    if (wait > s_.NowMono()) {
      s_.manifest().set_prepare_budget_ms(Millis(wait - started));
      ScheduleBudget(wait);
      silent_wait_deadline_ = wait;
      return;
    }
  }
  const double budget_ms = Millis(deadline_mono_ - started);
  s_.manifest().set_prepare_budget_ms(budget_ms);
  for (size_t i = 0; i < hosts_.size(); ++i) {
    SessionHost& h = s_.host(i);
    if (h.stage != HostStage::kPreparing) continue;
    if (plan.late == profctl::v1::LATE_POLICY_FAIL || plan.prepare_only) {
      s_.Fail(
          h, profctl::v1::FAILURE_STEP_PREPARE_TIMEOUT,
          absl::DeadlineExceededError(absl::StrFormat(
              "not ready within the prepare budget of %.0f ms (%s)", budget_ms, ProgressOf(i))));
    } else if (LooksFrozen(i)) {
      s_.Progress(absl::StrFormat(
          "%s: not ready within %.0f ms: its host answered a TCP handshake in %.1f ms but its "
          "agent has answered nothing (frozen or stuck?); capturing the others, it joins late "
          "if it wakes",
          h.r.address(), budget_ms, Millis(*hosts_[i].handshake_ns)));
    } else {
      s_.Progress(
          absl::StrFormat("%s: not ready within %.0f ms; capturing the others, it joins late",
                          h.r.address(), budget_ms));
    }
  }
  if (active_) End();
}

int64_t PreparePhase::SilentHostWaitUntil(size_t i) {
  Host& p = hosts_[i];
  const SessionHost& h = s_.host(i);
  const CaptureEngineOptions& options = s_.options();
  const int64_t timeout_at = p.attempt_started_mono + options.rpc_timeout_ms * kNanosPerMilli;
  if (h.client->Connected()) return timeout_at;
  if (p.probe == Host::Probe::kNone) {
    p.probe = Host::Probe::kInFlight;
    const int64_t left_ms = std::max<int64_t>(1, (timeout_at - s_.NowMono()) / kNanosPerMilli);
    s_.host(i).client->ProbeHandshake(left_ms, s_.Bind([i](Session& s, absl::StatusOr<int64_t> r) {
      s.prepare().OnHandshake(i, std::move(r));
    }));
  }
  if (p.probe != Host::Probe::kDone || !p.handshake_ns.ok()) return timeout_at;
  // At least what the pod's slowest GetInfo took, 4 times over: a coordinator too busy to
  // finish its handshakes in time (a large pod on few cores) shows in every host's answers.
  const int64_t frozen_after =
      std::max({options.frozen_host_wait_ms * kNanosPerMilli,
                options.frozen_host_handshakes * std::max<int64_t>(*p.handshake_ns, 0),
                4 * slowest_info_ns_});
  return std::min(timeout_at, p.attempt_started_mono + frozen_after);
}

bool PreparePhase::HandshakeWithoutConnection(size_t i) const {
  const Host& p = hosts_[i];
  return p.probe == Host::Probe::kDone && p.handshake_ns.ok() && !s_.host(i).client->Connected();
}

bool PreparePhase::LooksFrozen(size_t i) const {
  return s_.host(i).stage == HostStage::kPreparing && !hosts_[i].round.info_done() &&
         HandshakeWithoutConnection(i);
}

std::string PreparePhase::FrozenNote(size_t i) const {
  return absl::StrFormat(
      "its host answered a TCP handshake in %.1f ms, its agent nothing: "
      "frozen or stuck?",
      Millis(*hosts_[i].handshake_ns));
}

void PreparePhase::OnHandshake(size_t i, absl::StatusOr<int64_t> handshake_ns) {
  PROFCTL_DCHECK_ON_SEQUENCE(s_.ex());
  Host& p = hosts_[i];
  p.probe = Host::Probe::kDone;
  p.handshake_ns = std::move(handshake_ns);
  if (!active_ || s_.host(i).stage != HostStage::kPreparing || p.round.info_done() ||
      !p.handshake_ns.ok()) {
    return;
  }
  // When preparing's budget ran out and it waits only for silent hosts' GetInfo (OnDeadline),
  // look again once this one counts as frozen: OnDeadline weighs it with every other wait.
  if (deadline_mono_ != silent_wait_deadline_) return;
  const int64_t again = std::max({s_.NowMono(), SilentHostWaitUntil(i), SlowHostsReadyBy()});
  if (again < deadline_mono_) {
    ScheduleBudget(again);
    silent_wait_deadline_ = again;
  }
}

// --- Phase 2: one start instant ----------------------------------------------------------------

void PreparePhase::End() {
  PROFCTL_DCHECK_ON_SEQUENCE(s_.ex());
  if (!active_) return;
  active_ = false;
  ++budget_generation_;  // a pending budget timer is now moot
  const CapturePlan& plan = s_.plan();
  const CaptureEngineOptions& options = s_.options();
  SessionTimes& times = s_.times();
  profctl::v1::SessionManifest& manifest = s_.manifest();
  manifest.set_prepare_ms(Millis(s_.NowMono() - times.prepare_started_mono));
  // File stems from agent names, fixed now (hosts joining late keep their address stem).
  std::vector<std::string> names;
  names.reserve(hosts_.size());
  for (const Host& p : hosts_) names.push_back(p.round.info().name);
  const std::vector<std::string> stems = AssignHostStems(plan.workers, names);
  int64_t max_rtt = 0;
  size_t ready = 0;
  for (SessionHost& h : s_.hosts()) {
    h.r.set_host(stems[h.index]);
    if (h.stage == HostStage::kReady) {
      max_rtt = std::max(max_rtt, h.r.clock().rtt_ns());
      ++ready;
    }
  }
  if (!pod_busy_.ok()) {
    for (SessionHost& h : s_.hosts()) {
      if (h.stage == HostStage::kReady || h.stage == HostStage::kPreparing) {
        s_.Fail(h, profctl::v1::FAILURE_STEP_PREPARE, pod_busy_);
      }
    }
    s_.MaybeFinish();
    return;
  }
  if (plan.prepare_only || s_.cancelled()) {
    for (SessionHost& h : s_.hosts()) {
      if (h.stage != HostStage::kReady) continue;
      if (s_.cancelled()) {
        s_.Fail(h, profctl::v1::FAILURE_STEP_INTERRUPTED,
                absl::CancelledError("interrupted before capture"));
      } else {
        s_.Succeed(h);
      }
    }
    s_.MaybeFinish();
    return;
  }
  // What sending one Capture costs: one RPC on a connected channel, measured on the clock
  // samples. The fan-out's GetInfo calls also connect each channel and cost about 10 x more; they
  // stand in only when no sample was sent. (The round trips were measured in the prepare storm
  // and are high already: at 1,024 hosts on 2 cores the largest was 5-28 ms, the median
  // 1.2-1.7 ms; twice the send cost came to 1.5-1.8 x what sending took, docs/perf.md.)
  const int64_t per_host_send = warm_sends_ > 0 ? warm_send_ns_ / warm_sends_ : per_host_send_ns_;
  const int64_t prepared_mono = s_.NowMono();
  times.lead_ns = StartLeadNs(options.min_lead_ms * kNanosPerMilli, max_rtt, ready, per_host_send);
  times.start_at = s_.WallNs() + times.lead_ns;
  manifest.set_start_at_ns(times.start_at);
  manifest.set_lead_ms(Millis(times.lead_ns));
  times.window_start_mono = prepared_mono + times.lead_ns;
  // A snapshot's window closes at its instant: the past is taken then.
  times.window_end_mono =
      times.window_start_mono + (plan.past_ms > 0 ? 0 : plan.duration_ms) * kNanosPerMilli;
  if (plan.deadline_ms <= 0) {
    times.deadline_mono = times.window_end_mono + options.transfer_timeout_ms * kNanosPerMilli;
    s_.ScheduleDeadline();
  }
  manifest.set_deadline_ns(s_.WallNs() + (times.deadline_mono - s_.NowMono()));
  // Hosts that can still be saved: the ready ones, and with --late=capture those still
  // preparing (they join late).
  size_t possible = ready;
  for (const SessionHost& h : s_.hosts()) {
    possible += h.stage == HostStage::kPreparing && plan.late == profctl::v1::LATE_POLICY_CAPTURE;
  }
  const absl::Status cannot = CheckCaptureCanStart(possible, hosts_.size(), plan.min_hosts,
                                                   times.window_end_mono, times.deadline_mono);
  if (!cannot.ok()) {
    manifest.add_errors(std::string(cannot.message()));
    for (SessionHost& h : s_.hosts()) {
      if (h.stage == HostStage::kReady || h.stage == HostStage::kPreparing) {
        s_.Fail(h, profctl::v1::FAILURE_STEP_PREPARE, cannot);
      }
    }
    s_.MaybeFinish();
    return;
  }
  if (ready > 0 && plan.past_ms > 0) {
    s_.Progress(absl::StrFormat("snapshotting %d of %d workers in %.0f ms: the past %d ms of each",
                                ready, hosts_.size(), Millis(times.lead_ns), plan.past_ms));
  } else if (ready > 0) {
    s_.Progress(absl::StrFormat("capturing %d of %d workers: window starts in %.0f ms, lasts %d ms",
                                ready, hosts_.size(), Millis(times.lead_ns), plan.duration_ms));
  }
  for (SessionHost& h : s_.hosts()) {
    if (h.stage == HostStage::kReady) s_.run().StartCapture(h.index);
  }
  manifest.set_send_ms(Millis(s_.NowMono() - prepared_mono));
  // The window is set: a coordinator killed from now on leaves a folder that says when it was.
  s_.FlushManifest();
  s_.run().Begin();
  s_.MaybeFinish();
}

void PreparePhase::OnWindowClosed() {
  for (size_t i = 0; i < hosts_.size(); ++i) {
    SessionHost& h = s_.host(i);
    if (h.stage != HostStage::kPreparing) continue;
    s_.Fail(h, profctl::v1::FAILURE_STEP_PREPARE_TIMEOUT,
            absl::DeadlineExceededError(
                absl::StrCat("not ready before the capture window closed (", ProgressOf(i), ")")));
  }
}

// --- Retries of prepare ------------------------------------------------------------------------

bool PreparePhase::Retry(size_t i, const absl::Status& status) {
  Host& p = hosts_[i];
  SessionHost& h = s_.host(i);
  const CapturePlan& plan = s_.plan();
  const SessionTimes& times = s_.times();
  // Rounds that waited for another session's reservation are no retries.
  const int round = p.prepare_round - p.reservation_waits;
  bool retry = PrepareRetryWanted(status.code(), s_.cancelled(), round, plan.retries);
  // Once the window is set, a host still down may join until it ends (--late=capture): its
  // rounds left are spread over what is left of it.
  int64_t spread = 0;
  if (retry && !active_ && plan.late == profctl::v1::LATE_POLICY_CAPTURE) {
    spread = SpreadRetryNs(std::min(times.window_end_mono, times.deadline_mono) - s_.NowMono(),
                           plan.retries - round + 1);
  }
  const int64_t backoff = retry ? s_.backoff().NextNs(round, spread) : 0;
  const int64_t at = s_.NowMono() + backoff;
  retry =
      retry && PrepareRetryFits(at, {.preparing = active_,
                                     .late_capture = plan.late == profctl::v1::LATE_POLICY_CAPTURE,
                                     .prepare_deadline = deadline_mono_,
                                     .window_end = times.window_end_mono,
                                     .deadline = times.deadline_mono});
  // A host that fails its only round says so in its error; rounds are logged once retried.
  if (retry || round > 1) {
    s_.LogAttempt(h, "get_info", p.attempt_started_mono, status, retry ? backoff : 0);
  }
  if (!retry) return false;
  p.retry_pending = true;
  s_.Progress(absl::StrFormat("%s: %s; trying again in %.0f ms", h.r.address(), status.message(),
                              Millis(backoff)));
  s_.PostAt(at, [i, round = p.prepare_round](Session& s) { s.prepare().OnRetryDue(i, round); });
  return true;
}

void PreparePhase::OnRetryDue(size_t i, int round) {
  PROFCTL_DCHECK_ON_SEQUENCE(s_.ex());
  Host& p = hosts_[i];
  p.retry_pending = false;
  if (s_.host(i).stage == HostStage::kPreparing && p.prepare_round == round && !s_.cancelled()) {
    StartRound(i);
  }
}

}  // namespace profctl::coordinator
