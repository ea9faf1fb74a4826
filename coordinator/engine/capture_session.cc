#include "coordinator/engine/capture_session.h"

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <memory>
#include <random>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/check.h"
#include "common/version.h"
#include "coordinator/engine/finish_job.h"
#include "coordinator/engine/saved_hosts.h"

namespace profctl::coordinator {

using Session = CaptureEngine::Session;
using profctl::v1::FailureStep;

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

}  // namespace

Session::Session(Dependencies deps, CaptureEngineOptions options, CapturePlan plan,
                 DoneCallback done, std::shared_ptr<const std::atomic<int>> cancels)
    : deps_(std::move(deps)),
      options_(options),
      plan_(std::move(plan)),
      done_(std::move(done)),
      ex_(*deps_.executor),
      clock_(ex_.clock()),
      backoff_(options_.retry_initial_backoff_ms, options_.retry_max_backoff_ms,
               options_.retry_jitter_seed),
      prepare_(*this),
      run_(*this),
      collect_(*this),
      leases_(*this),
      cancels_(std::move(cancels)) {}

Session::~Session() {
  // Clients first: each waits for its calls in flight, whose callbacks touch streams.
  for (SessionHost& h : hosts_) h.client.reset();
  absl::MutexLock lock(&released_mu_);
  released_mu_.Await(absl::Condition(
      +[](int* pending) { return *pending == 0; }, &released_pending_));
}

void Session::Begin() {
  PROFCTL_DCHECK_ON_SEQUENCE(ex_);
  manifest_.set_profctl_version(kVersion);
  *manifest_.mutable_request() = SessionRequestFromPlan(plan_);
  if (!plan_.origin.kind().empty()) *manifest_.mutable_origin() = plan_.origin;
  session_key_ = NewSessionKey();
  if (plan_.reader.step_pattern != analysis::kDefaultStepPattern) {
    manifest_.set_step_pattern(plan_.reader.step_pattern);
  }
  collect_.Begin();
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
  if (!plan_.prepare_only && deps_.sink != nullptr) {
    snapshots_ = std::make_shared<ManifestSnapshots>(
        deps_.sink, deps_.pool, [weak = weak_from_this(), ex = &ex_](const absl::Status& status) {
          ex->Post([weak, status] {
            std::shared_ptr<Session> s = weak.lock();
            if (s == nullptr || s->finished_) return;  // the finish phase owns the manifest now
            s->Progress(absl::StrCat("cannot write ", kManifestFileName, ": ", status.message()));
          });
        });
  }

  hosts_.resize(plan_.workers.size());
  times_.prepare_started_mono = NowMono();
  if (plan_.deadline_ms > 0) {
    times_.deadline_mono = times_.prepare_started_mono + plan_.deadline_ms * kNanosPerMilli;
    ScheduleDeadline();
  }
  for (size_t i = 0; i < hosts_.size(); ++i) {
    SessionHost& h = hosts_[i];
    h.index = i;
    h.r.set_address(plan_.workers[i].address);
    h.r.set_host(plan_.workers[i].file_stem());
    h.client = deps_.clients->Connect(plan_.workers[i]);
  }
  prepare_.Begin();
}

// --- Host outcomes -----------------------------------------------------------------------------

void Session::Fail(SessionHost& h, FailureStep step, const absl::Status& status) {
  if (h.stage == HostStage::kDone) return;
  const bool was_preparing = h.stage == HostStage::kPreparing;
  h.stage = HostStage::kDone;
  h.r.set_status(profctl::v1::HOST_STATUS_FAILED);
  auto* e = h.r.mutable_error();
  e->set_step(step);
  e->set_code(static_cast<int32_t>(status.code()));
  e->set_message(status.ok() ? "unknown error" : std::string(status.message()));
  if (was_preparing) prepare_.RecordFailure(h.index);
  // Its reservation, if it holds one, is let go now rather than lapse unrenewed.
  ReleaseReservation(h);
  Progress(absl::StrCat(h.r.host(), ": FAILED (", FailureStepName(step), ") ", e->message()));
  ++terminal_;
  ScheduleManifestFlush();
  // The last host to settle ends preparing, which goes on to finish when it can.
  if (was_preparing && prepare_.OnFailed()) return;
  MaybeFinish();
}

void Session::Succeed(SessionHost& h) {
  h.stage = HostStage::kDone;
  h.r.set_status(profctl::v1::HOST_STATUS_OK);
  ++terminal_;
  ScheduleManifestFlush();
  MaybeFinish();
}

void Session::LogAttempt(SessionHost& h, absl::string_view kind, int64_t started_mono,
                         const absl::Status& status, int64_t backoff_ns) {
  profctl::v1::Attempt* a = h.r.add_attempt_log();
  a->set_kind(std::string(kind));
  a->set_start_ms(Millis(started_mono - times_.prepare_started_mono));
  a->set_duration_ms(Millis(NowMono() - started_mono));
  a->set_code(static_cast<int32_t>(status.code()));
  a->set_message(std::string(status.message()));
  a->set_backoff_ms(Millis(backoff_ns));
}

// --- The manifest while the session runs -------------------------------------------------------

void Session::FlushManifest() {
  manifest_flush_scheduled_ = false;
  if (finished_ || snapshots_ == nullptr) return;
  auto snapshot = std::make_unique<SessionManifest>(manifest_);
  snapshot->set_status(profctl::v1::SESSION_STATUS_RUNNING);
  for (const SessionHost& h : hosts_) *snapshot->add_hosts() = h.r;
  snapshots_->Write(std::move(snapshot));
}

void Session::ScheduleManifestFlush() {
  if (manifest_flush_scheduled_ || finished_ || plan_.prepare_only) return;
  manifest_flush_scheduled_ = true;
  PostAt(NowMono() + options_.manifest_flush_ms * kNanosPerMilli,
         [](Session& s) { s.FlushManifest(); });
}

// --- The interrupt and the deadline ------------------------------------------------------------

void Session::Interrupt() {
  PROFCTL_DCHECK_ON_SEQUENCE(ex_);
  if (finished_) return;
  ++cancels_seen_;
  if (cancelled_) return;
  cancelled_ = true;
  run_.Interrupt();
  for (SessionHost& h : hosts_) {
    if (h.stage == HostStage::kPreparing || h.stage == HostStage::kReady) {
      Fail(h, profctl::v1::FAILURE_STEP_INTERRUPTED,
           absl::CancelledError("interrupted before capture"));
    }
  }
  // Whatever the hosts do (hung, stalled mid-transfer), the session ends within the grace.
  PostAt(NowMono() + options_.interrupt_grace_ms * kNanosPerMilli,
         [](Session& s) { s.run().OnInterruptGraceOver(); });
}

void Session::ScheduleDeadline() {
  PostAt(times_.deadline_mono, [](Session& s) { s.OnDeadline(); });
}

void Session::OnDeadline() {
  PROFCTL_DCHECK_ON_SEQUENCE(ex_);
  if (finished_ || NowMono() < times_.deadline_mono) return;
  const absl::Status late = absl::DeadlineExceededError(
      "the session deadline passed (--deadline, or the window's end + the transfer allowance)");
  for (SessionHost& h : hosts_) {
    if (h.stage == HostStage::kCapturing) {
      run_.Abort(h.index, profctl::v1::FAILURE_STEP_CAPTURE, late);
    } else if (h.stage == HostStage::kPreparing || h.stage == HostStage::kReady) {
      Fail(h, profctl::v1::FAILURE_STEP_PREPARE_TIMEOUT, late);
    }
  }
}

// --- The end: conclusion and hand-off ----------------------------------------------------------

void Session::MaybeFinish() {
  PROFCTL_DCHECK_ON_SEQUENCE(ex_);
  if (finished_ || prepare_.active() || terminal_ < hosts_.size()) return;
  // Reservations no Capture took are released first (a Cancel of this session, which the agent
  // also remembers), so the pod is free for the next capture at once rather than at their TTL.
  if (!releases_sent_) {
    for (SessionHost& h : hosts_) ReleaseReservation(h);
    releases_sent_ = true;
  }
  run_.AskStepSignals();
  // The step signals are the hang verdict's evidence, which an interrupted session does not
  // judge (it writes no pod output): it does not wait for them.
  if (releases_pending_ > 0 || (step_signals_pending_ > 0 && !cancelled_)) return;
  finished_ = true;
  ReleaseClients();
  if (!plan_.prepare_only) {
    // 0 when every host was done before the window's end (a snapshot whose hosts all failed).
    if (times_.window_end_mono > 0) {
      manifest_.set_collect_ms(Millis(std::max<int64_t>(0, NowMono() - times_.window_end_mono)));
    }
    collect_.Conclude();
  }
  size_t ok = 0;
  size_t saved = 0;
  for (const SessionHost& h : hosts_) {
    ok += h.r.status() == profctl::v1::HOST_STATUS_OK;
    saved += IsSavedHost(h.r);
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
  HandOffFinish();
}

void Session::ReleaseReservation(SessionHost& h) {
  if (!h.reserved || h.client == nullptr || releases_sent_) return;
  h.reserved = false;
  ++releases_pending_;
  h.client->Cancel(plan_.session, session_key_, options_.rpc_timeout_ms,
                   Bind([](Session& s, const absl::Status& /*released*/) {
                     --s.releases_pending_;
                     s.MaybeFinish();
                   }));
}

void Session::HandOffFinish() {
  FinishInput in;
  in.session = plan_.session;
  in.start_at_ns = times_.start_at;
  in.prepare_only = plan_.prepare_only;
  in.results.reserve(hosts_.size());
  in.outputs.reserve(hosts_.size());
  for (SessionHost& h : hosts_) {
    in.outputs.push_back(collect_.TakeOutputs(h.index));
    in.results.push_back(std::move(h.r));
  }
  in.manifest = std::move(manifest_);
  in.sink = deps_.sink;
  in.pool = deps_.pool;
  in.executor = &ex_;
  // Interrupted before the hand-off, or while the outputs are written.
  in.interrupted = [cancels = cancels_] { return cancels->load() > 0; };
  in.snapshots = std::move(snapshots_);
  in.done = std::move(done_);
  in.on_breakdown = deps_.breakdown;
  in.on_manifest_written = deps_.manifest_written;
  in.lifetime = lifetime_;
  FinishJob job(std::move(in));
  if (plan_.prepare_only || deps_.finisher == nullptr) {
    std::move(job).Run();
    return;
  }
  // The job owns all it uses: the executor is free for other sessions meanwhile.
  deps_.finisher->Submit([job = std::move(job)]() mutable { std::move(job).Run(); });
}

void Session::ReleaseClients() {
  if (deps_.pool == nullptr) return;  // destroyed with the session
  // At 1,024 hosts, tearing down every channel took 0.15 s after the outputs, mostly waiting on
  // gRPC's threads. Nothing uses a done host's client (every handler checks the stage first).
  std::vector<std::unique_ptr<AgentClient>> clients;
  for (SessionHost& h : hosts_) {
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

}  // namespace profctl::coordinator
