// Phases 1 and 2 of a capture (capture_session.h): prepare every host on a budget, wait-die
// between captures of one pod, and the one start instant.
#include <algorithm>
#include <memory>
#include <optional>
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

using profctl::v1::FailureStep;
using profctl::v1::HostResult;
using profctl::v1::SessionManifest;

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

// --- Retries of prepare ------------------------------------------------------------------------

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

}  // namespace profctl::coordinator
