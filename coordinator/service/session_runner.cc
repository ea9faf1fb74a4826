#include "coordinator/service/session_runner.h"

#include <malloc.h>
#include <unistd.h>

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/check.h"
#include "common/file_util.h"
#include "coordinator/session/session_writer.h"

namespace profctl::coordinator::service {

bool EventQueue::Next(v1::SessionEvent* event, absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  mu_.AwaitWithTimeout(absl::Condition(this, &EventQueue::Ready), timeout);
  if (events_.empty()) return false;
  *event = std::move(events_.front());
  events_.pop_front();
  return true;
}

bool EventQueue::closed() const {
  absl::MutexLock lock(&mu_);
  return closed_ && events_.empty();
}

int64_t EventQueue::dropped() const {
  absl::MutexLock lock(&mu_);
  return dropped_;
}

void EventQueue::Push(const v1::SessionEvent& event) {
  if (!filter_.empty() && event.session() != filter_) return;
  absl::MutexLock lock(&mu_);
  if (closed_) return;
  if (events_.size() >= capacity_) {
    // Make room: the oldest progress line goes; if there is none, the oldest event.
    auto it = events_.begin();
    while (it != events_.end() && it->kind() != v1::SESSION_EVENT_KIND_PROGRESS) ++it;
    events_.erase(it != events_.end() ? it : events_.begin());
    ++dropped_;
  }
  events_.push_back(event);
}

void EventQueue::Close() {
  absl::MutexLock lock(&mu_);
  closed_ = true;
}

std::string OutcomeLine(const v1::SessionManifest& manifest) {
  int saved = 0;
  for (const v1::HostResult& h : manifest.hosts()) {
    saved += h.status() == v1::HOST_STATUS_OK || h.status() == v1::HOST_STATUS_INCOMPLETE;
  }
  return absl::StrFormat("%s, %d/%d hosts captured", SessionStatusName(manifest.status()), saved,
                         manifest.hosts_size());
}

SessionRunner::SessionRunner(Dependencies deps, std::string logdir)
    : deps_(deps),
      logdir_(std::move(logdir)),
      reaper_(std::make_unique<ThreadWorkPool>(/*threads=*/1)),
      // Sessions finish side by side, off the executor: one session's pod outputs never hold up
      // another's timers. Not with a fake executor's tests (no pool): everything runs inline.
      finisher_(deps_.pool != nullptr ? std::make_unique<ThreadWorkPool>(/*threads=*/2) : nullptr) {
}

SessionRunner::~SessionRunner() {
  Shutdown();
  {
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(
        +[](std::map<std::string, Entry>* running) { return running->empty(); }, &running_));
  }
  reaper_.reset();  // joins: every engine is destroyed before the rest of the runner
}

absl::StatusOr<v1::StartCaptureResponse> SessionRunner::Start(CapturePlan plan,
                                                              StartOptions options) {
  std::vector<std::string> targets;
  targets.reserve(plan.workers.size());
  for (const WorkerAddress& w : plan.workers) targets.push_back(w.target());
  {
    absl::MutexLock lock(&mu_);
    if (shut_down_) {
      return absl::FailedPreconditionError("the coordinator is shutting down");
    }
    if (options.skip_if_hosts_busy) {
      for (const std::string& t : targets) {
        if (auto it = busy_targets_.find(t); it != busy_targets_.end()) {
          return absl::AbortedError(
              absl::StrCat("host ", t, " is busy with session ", it->second.second));
        }
      }
    }
    // Claimed now, before the folder exists: two starts at once cannot both find the hosts free.
    ClaimTargets(targets, plan.session);
  }
  absl::StatusOr<std::unique_ptr<RunningSession>> running =
      RunningSession::Open(logdir_, plan.session, {.make_unique = options.make_unique});
  if (!running.ok()) {
    absl::MutexLock lock(&mu_);
    ReleaseTargets(targets);
    ++counters_.start_errors;
    return running.status();
  }
  plan.logdir = logdir_;
  plan.session = (*running)->session();
  plan.origin = options.origin;
  const std::string session = plan.session;

  v1::StartCaptureResponse response;
  response.set_session(session);
  response.set_session_dir((*running)->dir().location());

  std::shared_ptr<RunningSession> sink = *std::move(running);
  RunningSession* const folder = sink.get();  // held by the entry until OnDone
  auto engine = std::make_unique<CaptureEngine>(
      CaptureEngine::Dependencies{
          .executor = deps_.executor,
          .pool = deps_.pool,
          .finisher = finisher_.get(),
          .clients = deps_.clients,
          .sink = &sink->dir(),
          .progress = [this, session](const std::string& line) { OnProgress(session, line); },
          .breakdown = nullptr,
          .manifest_written = [folder](const std::string& /*json*/) { folder->MarkFinal(); }},
      deps_.engine_options);
  CaptureEngine* started = engine.get();
  {
    absl::MutexLock lock(&mu_);
    Entry& e = running_[session];
    e.info.set_session(session);
    e.info.set_session_dir(response.session_dir());
    e.info.set_running(true);
    *e.info.mutable_origin() = options.origin;
    e.engine = std::move(engine);
    e.sink = std::move(sink);
    e.targets = std::move(targets);
    ++counters_.started;
    v1::SessionEvent event;
    event.set_kind(v1::SESSION_EVENT_KIND_STARTED);
    event.set_session(session);
    event.set_wall_ns(deps_.executor->clock().WallNs());
    event.set_message(absl::StrCat(plan.workers.size(), " workers, ", plan.duration_ms, " ms"));
    *event.mutable_origin() = options.origin;
    e.started_mono_ns = deps_.executor->clock().MonoNs();
    Publish(event);
  }
  started->Start(plan, [this, session, folder, on_finished = std::move(options.on_finished)](
                           absl::StatusOr<v1::SessionManifest> result) mutable {
    folder->Close();  // the entry keeps the folder until OnDone has taken it
    OnDone(session, std::move(result), on_finished);
  });
  return response;
}

void SessionRunner::OnProgress(const std::string& session, const std::string& line) {
  absl::MutexLock lock(&mu_);
  auto it = running_.find(session);
  if (it == running_.end()) return;
  it->second.info.set_progress(line);
  v1::SessionEvent event;
  event.set_kind(v1::SESSION_EVENT_KIND_PROGRESS);
  event.set_session(session);
  event.set_wall_ns(deps_.executor->clock().WallNs());
  event.set_message(line);
  Publish(event);
}

void SessionRunner::OnDone(
    const std::string& session, absl::StatusOr<v1::SessionManifest> result,
    const std::function<void(const absl::StatusOr<v1::SessionManifest>&)>& on_finished) {
  auto finished = std::make_shared<Entry>();
  {
    absl::MutexLock lock(&mu_);
    auto it = running_.find(session);
    if (it != running_.end()) {
      *finished = std::move(it->second);
      running_.erase(it);
      ReleaseTargets(finished->targets);
    }
    v1::SessionEvent event;
    event.set_kind(v1::SESSION_EVENT_KIND_FINISHED);
    event.set_session(session);
    event.set_wall_ns(deps_.executor->clock().WallNs());
    *event.mutable_origin() = finished->info.origin();
    if (result.ok()) {
      const v1::SessionManifest& m = *result;
      event.set_message(OutcomeLine(m));
      *event.mutable_manifest() = m;
      switch (m.status()) {
        case v1::SESSION_STATUS_OK:
          ++counters_.finished_ok;
          break;
        case v1::SESSION_STATUS_PARTIAL:
          ++counters_.finished_partial;
          break;
        default:
          ++counters_.finished_failed;
      }
      for (const v1::HostResult& h : m.hosts()) {
        counters_.hosts_failed += h.status() == v1::HOST_STATUS_FAILED;
        counters_.host_retries += std::max(0, h.attempt_log_size() - 1);
        counters_.bytes_saved += static_cast<int64_t>(h.bytes());
      }
    } else {
      event.set_message(absl::StrCat("failed: ", result.status().message()));
      ++counters_.finished_failed;
    }
    counters_.capture_seconds_sum +=
        static_cast<double>(deps_.executor->clock().MonoNs() - finished->started_mono_ns) / 1e9;
    Publish(event);
    if (shut_down_ && running_.empty()) {
      for (const auto& w : watchers_) w->Close();
    }
    // The engine called us: it must be destroyed elsewhere, after this returns. Queued under
    // the lock: once running_ is empty the destructor may go on to join the reaper.
    ++releasing_;
    reaper_->Submit([this, finished]() mutable {
      finished->engine.reset();  // the per-host traces, results and pod buffers
      finished.reset();          // the session folder handle
      // A big session is millions of small blocks (host traces, their events, the pod trace)
      // freed from several threads: glibc keeps them in its per-thread arenas, so the daemon
      // stayed at its peak RSS (334 MB after a 10,000-worker capture) with nothing live. Hand
      // the free pages back now; this walks the arenas (milliseconds), here on the reaper,
      // never on the executor.
      malloc_trim(0);
      absl::MutexLock released(&mu_);
      --releasing_;
      ++counters_.sessions_released;
    });
  }
  // Touches nothing of the runner: the destructor may already be waiting for the reaper.
  if (on_finished) on_finished(result);
}

void SessionRunner::ClaimTargets(const std::vector<std::string>& targets,
                                 const std::string& session) {
  for (const std::string& t : targets) {
    auto& [count, latest] = busy_targets_[t];
    ++count;
    latest = session;
  }
}

void SessionRunner::ReleaseTargets(const std::vector<std::string>& targets) {
  for (const std::string& t : targets) {
    auto it = busy_targets_.find(t);
    PROFCTL_DCHECK(it != busy_targets_.end());
    if (it == busy_targets_.end()) continue;
    if (--it->second.first == 0) busy_targets_.erase(it);
  }
}

void SessionRunner::Publish(const v1::SessionEvent& event) {
  for (const auto& w : watchers_) w->Push(event);
}

std::optional<v1::SessionInfo> SessionRunner::Running(const std::string& session) const {
  absl::MutexLock lock(&mu_);
  auto it = running_.find(session);
  if (it == running_.end()) return std::nullopt;
  return it->second.info;
}

std::vector<v1::SessionInfo> SessionRunner::RunningSessions() const {
  absl::MutexLock lock(&mu_);
  std::vector<v1::SessionInfo> out;
  out.reserve(running_.size());
  for (const auto& [name, e] : running_) out.push_back(e.info);
  return out;
}

std::shared_ptr<EventQueue> SessionRunner::Watch(const std::string& session) {
  auto queue = std::make_shared<EventQueue>(session);
  absl::MutexLock lock(&mu_);
  if (!session.empty()) {
    if (auto it = running_.find(session); it != running_.end()) {
      v1::SessionEvent event;
      event.set_kind(v1::SESSION_EVENT_KIND_STARTED);
      event.set_session(session);
      event.set_wall_ns(deps_.executor->clock().WallNs());
      event.set_message(it->second.info.progress());
      *event.mutable_origin() = it->second.info.origin();
      queue->Push(event);
    }
  }
  if (shut_down_ && running_.empty()) queue->Close();
  watchers_.push_back(queue);
  return queue;
}

void SessionRunner::Unwatch(const std::shared_ptr<EventQueue>& queue) {
  absl::MutexLock lock(&mu_);
  std::erase(watchers_, queue);
}

void SessionRunner::Shutdown() {
  absl::MutexLock lock(&mu_);
  if (shut_down_) return;
  shut_down_ = true;
  for (auto& [name, e] : running_) e.engine->Cancel();
  if (running_.empty()) {
    for (const auto& w : watchers_) w->Close();
  }
}

bool SessionRunner::WaitIdle(absl::Duration timeout) const {
  absl::MutexLock lock(&mu_);
  return mu_.AwaitWithTimeout(absl::Condition(this, &SessionRunner::Idle), timeout);
}

RunnerCounters SessionRunner::counters() const {
  absl::MutexLock lock(&mu_);
  RunnerCounters c = counters_;
  c.running = static_cast<int64_t>(running_.size());
  return c;
}

}  // namespace profctl::coordinator::service
