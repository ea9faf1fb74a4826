#include "coordinator/service/daemon.h"

#include <netdb.h>
#include <sys/socket.h>

#include <algorithm>
#include <set>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/check.h"
#include "common/clock.h"
#include "common/file_util.h"
#include "common/net/metrics_http.h"
#include "coordinator/schedule/retention.h"
#include "coordinator/service/session_index.h"
#include "coordinator/session/session_writer.h"
#include "google/protobuf/util/json_util.h"

namespace profctl::coordinator::service {
namespace {

uint64_t Fnv1a(absl::string_view s) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (const char c : s) {
    h ^= static_cast<unsigned char>(c);
    h *= 0x100000001b3ULL;
  }
  return h;
}

absl::StatusOr<std::vector<WorkerAddress>> ResolveDns(const std::string& source) {
  absl::StatusOr<WorkerAddress> named = ParseWorker(source);
  if (!named.ok()) return named.status();
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const int rc = getaddrinfo(named->host.c_str(), nullptr, &hints, &found);
  if (rc != 0) {
    return absl::UnavailableError(absl::StrCat("targets ", source, ": cannot resolve '",
                                               named->host, "': ", gai_strerror(rc)));
  }
  std::set<std::string> addresses;
  for (const addrinfo* a = found; a != nullptr; a = a->ai_next) {
    char host[NI_MAXHOST] = {};
    if (getnameinfo(a->ai_addr, a->ai_addrlen, host, sizeof(host), nullptr, 0, NI_NUMERICHOST) !=
        0) {
      continue;
    }
    const std::string h(host);
    addresses.insert(absl::StrContains(h, ':') ? absl::StrCat("[", h, "]:", named->port)
                                               : absl::StrCat(h, ":", named->port));
  }
  freeaddrinfo(found);
  if (addresses.empty()) {
    return absl::NotFoundError(absl::StrCat("targets ", source, ": no addresses"));
  }
  const std::string scheme =
      named->protocol == WorkerAddress::Protocol::kTsl ? "grpc://" : std::string();
  std::vector<std::string> list;
  list.reserve(addresses.size());
  for (const std::string& a : addresses) list.push_back(scheme + a);
  return ParseWorkers(list);
}

// The same file `profctl capture --workers=@FILE` reads (ParseWorkerFile), refused by its size
// before it is read.
absl::StatusOr<std::vector<WorkerAddress>> ReadTargetsFile(const std::string& path) {
  absl::StatusOr<std::string> text = ReadFile(path, kMaxWorkerFileBytes, "a targets file may hold");
  if (!text.ok()) {
    return absl::Status(text.status().code(),
                        absl::StrCat("targets file ", path, ": ", text.status().message()));
  }
  return ParseWorkerFile(*text, absl::StrCat("targets file ", path));
}

std::string Timing(const schedule::ScheduleConfig& s) {
  if (s.trigger.has_value()) return absl::StrCat("trigger ", TriggerTiming(*s.trigger));
  if (s.cron.has_value()) return absl::StrCat("cron ", s.cron->text());
  std::string t = absl::StrCat("every ", s.interval_ns / 1'000'000'000, "s");
  if (s.jitter_ns > 0) absl::StrAppend(&t, " + jitter up to ", s.jitter_ns / 1'000'000, "ms");
  return t;
}

std::vector<std::string> TargetStrings(const schedule::Targets& t) {
  if (t.kind == schedule::TargetsKind::kList) return t.list;
  return {absl::StrCat(t.kind == schedule::TargetsKind::kDns ? "dns " : "file ", t.source)};
}

}  // namespace

absl::StatusOr<std::vector<WorkerAddress>> ResolveTargets(const schedule::Targets& targets) {
  switch (targets.kind) {
    case schedule::TargetsKind::kList:
      return ParseWorkers(targets.list);
    case schedule::TargetsKind::kDns:
      return ResolveDns(targets.source);
    case schedule::TargetsKind::kFile:
      return ReadTargetsFile(targets.source);
  }
  return absl::InternalError("unknown targets kind");
}

std::string ScheduleStatePath(const std::string& logdir) {
  return JoinPath(JoinPath(logdir, ".profctl"), "schedules.json");
}

absl::StatusOr<std::unique_ptr<Daemon>> Daemon::Start(Dependencies deps,
                                                      const std::string& config_path) {
  absl::StatusOr<schedule::CoordinatorConfig> config = schedule::LoadCoordinatorConfig(config_path);
  if (!config.ok()) return config.status();
  if (config->logdir.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(config_path, ": logdir: missing"));
  }
  if (absl::Status s = MakeDirs(JoinPath(JoinPath(config->logdir, "plugins"), "profile"));
      !s.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(config_path, ": logdir ", config->logdir, ": ", s.message()));
  }
  if (deps.jitter_seed == 0) deps.jitter_seed = Fnv1a(config_path) | 1;
  for (const std::string& w : schedule::OverlapWarnings(config->schedules)) {
    if (deps.log) deps.log(absl::StrCat(config_path, ": warning: ", w));
  }
  std::unique_ptr<Daemon> d(new Daemon(std::move(deps), config_path, *std::move(config)));
  for (const std::string& line : CleanAbandonedSessions(d->logdir_)) d->Log(line);

  // Last runs, as the previous daemon recorded them.
  std::map<std::string, int64_t> last_runs;
  if (absl::StatusOr<std::string> json = ReadFile(ScheduleStatePath(d->logdir_)); json.ok()) {
    v1::SchedulePersistedState state;
    google::protobuf::util::JsonParseOptions options;
    options.ignore_unknown_fields = true;
    if (google::protobuf::util::JsonStringToMessage(*json, &state, options).ok()) {
      absl::MutexLock lock(&d->mu_);
      for (const auto& s : state.schedules()) {
        d->persisted_[s.name()] = s;
        last_runs[s.name()] = s.last_run_wall_ns();
      }
    } else {
      d->Log(absl::StrCat(ScheduleStatePath(d->logdir_),
                          ": unreadable, schedules start as if new (nothing counts as missed)"));
    }
  }
  d->Arm(last_runs);
  return d;
}

Daemon::Daemon(Dependencies deps, std::string config_path, schedule::CoordinatorConfig config)
    : deps_(std::move(deps)),
      config_path_(std::move(config_path)),
      logdir_(config.logdir),
      runner_(std::make_unique<SessionRunner>(
          SessionRunner::Dependencies{.executor = deps_.executor,
                                      .pool = deps_.pool,
                                      .clients = deps_.clients,
                                      .engine_options = deps_.engine_options},
          config.logdir)),
      schedules_(std::move(config.schedules)) {
  absl::MutexLock lock(&mu_);
  loaded_wall_ns_ = deps_.executor->clock().WallNs();
}

void Daemon::Arm(const std::map<std::string, int64_t>& last_runs) {
  deps_.executor->Post([this, last_runs] {
    scheduler_ = std::make_unique<schedule::Scheduler>(
        schedule::Scheduler::Dependencies{
            .executor = deps_.executor,
            .run_capture =
                [this](const schedule::ScheduleConfig& s, const schedule::ScheduledRun& run,
                       schedule::Scheduler::DoneCallback done) {
                  v1::SessionOrigin origin;
                  origin.set_kind("schedule");
                  origin.set_schedule(s.name);
                  RunScheduled(s, run, origin, std::move(done));
                }},
        schedule::SchedulerOptions{.jitter_seed = deps_.jitter_seed});
    triggers_ = std::make_unique<TriggerWatcher>(TriggerWatcher::Dependencies{
        .executor = deps_.executor,
        .clients = deps_.clients,
        .blocking = [this](Executor::Task job) { Blocking(std::move(job)); },
        .resolve = deps_.resolve ? deps_.resolve
                                 : std::function<absl::StatusOr<std::vector<WorkerAddress>>(
                                       const schedule::Targets&)>(ResolveTargets),
        .run_capture =
            [this](const schedule::ScheduleConfig& s, const schedule::ScheduledRun& run,
                   const v1::SessionOrigin& origin, schedule::Scheduler::DoneCallback done) {
              {
                absl::MutexLock lock(&mu_);
                ++counters_.triggers_fired;
              }
              const int64_t past_ms = s.trigger->past_ns / kNanosPerMilli;
              schedule::ScheduleConfig snapshot = s;
              snapshot.capture.past_ms = past_ms;
              snapshot.capture.duration_ms = past_ms;
              if (s.trigger->signal == "hang") {
                // A hung job has no next window worth recording: its past is the evidence.
                RunScheduled(snapshot, run, origin, std::move(done));
                return;
              }
              if (past_ms == 0) {
                RunScheduled(s, run, origin, std::move(done));
                return;
              }
              // A slowdown is noticed after it happened and the next window may be normal
              // again: first the past that fired the trigger, then the next window. The two
              // sessions name each other; the snapshot failing (agents without
              // --flight-recorder) does not stop the window.
              schedule::ScheduledRun past_run = run;
              past_run.run_id = absl::StrCat(run.run_id, "-past");
              v1::SessionOrigin past_origin = origin;
              past_origin.set_trigger_part("past");
              past_origin.set_trigger_linked_session(run.run_id);
              v1::SessionOrigin next_origin = origin;
              next_origin.set_trigger_part("next");
              next_origin.set_trigger_linked_session(past_run.run_id);
              RunScheduled(snapshot, past_run, past_origin,
                           [this, s, run, next_origin, done = std::move(done)]() mutable {
                             RunScheduled(s, run, next_origin, std::move(done));
                           });
            },
        .on_poll =
            [this](int64_t errors) {
              absl::MutexLock lock(&mu_);
              ++counters_.trigger_polls;
              counters_.trigger_poll_errors += errors;
            },
        .log = deps_.log});
    std::vector<schedule::ScheduleConfig> timed;
    for (const schedule::ScheduleConfig& s : schedules_) {
      if (!s.trigger.has_value()) timed.push_back(s);
    }
    scheduler_->Start(timed, last_runs);
    triggers_->Start(schedules_);
  });
}

Daemon::~Daemon() {
  Shutdown();
  {
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(
        +[](int* n) { return *n == 0; }, &in_flight_));
  }
  runner_.reset();  // waits for sessions not started by a schedule (they were cancelled)
}

void Daemon::Shutdown() {
  {
    absl::MutexLock lock(&mu_);
    if (shut_down_) return;
    shut_down_ = true;
    ++in_flight_;  // until the scheduler is destroyed on the executor
  }
  deps_.executor->Post([this] {
    scheduler_.reset();
    triggers_.reset();
    absl::MutexLock lock(&mu_);
    --in_flight_;
  });
  runner_->Shutdown();
}

bool Daemon::Idle() const {
  absl::MutexLock lock(&mu_);
  return in_flight_ == 0;
}

void Daemon::Log(const std::string& line) const {
  if (deps_.log) deps_.log(line);
}

void Daemon::Blocking(Executor::Task job) {
  if (deps_.pool != nullptr) {
    deps_.pool->Submit(std::move(job));
  } else {
    std::move(job)();
  }
}

void Daemon::RunScheduled(const schedule::ScheduleConfig& schedule,
                          const schedule::ScheduledRun& run, const v1::SessionOrigin& origin,
                          schedule::Scheduler::DoneCallback done) {
  PROFCTL_DCHECK_ON_SEQUENCE(*deps_.executor);  // called by the scheduler and the triggers
  const int64_t now = deps_.executor->clock().WallNs();
  {
    absl::MutexLock lock(&mu_);
    ++in_flight_;
    v1::SchedulePersistedState::Schedule& p = persisted_[schedule.name];
    p.set_name(schedule.name);
    p.set_last_run_wall_ns(run.fire_wall_ns);
    counters_.last_schedule_lag_ns = std::max<int64_t>(0, now - run.fire_wall_ns);
  }
  auto shared_done = std::make_shared<schedule::Scheduler::DoneCallback>(std::move(done));
  RequestPersist();
  Blocking([this, schedule, run, origin, shared_done] {
    RunResolved(schedule, run, origin, shared_done);
  });
}

void Daemon::RunResolved(const schedule::ScheduleConfig& schedule,
                         const schedule::ScheduledRun& run, const v1::SessionOrigin& origin,
                         std::shared_ptr<schedule::Scheduler::DoneCallback> done) {
  auto not_started = [&](const absl::Status& why) {
    Log(absl::StrCat("schedule ", schedule.name, ": run ", run.run_id,
                     " not started: ", why.message()));
    {
      absl::MutexLock lock(&mu_);
      ++counters_.runs_not_started;
    }
    Finished(schedule.name, absl::StrCat("not started: ", why.message()));
    std::move (*done)();
    absl::MutexLock lock(&mu_);
    --in_flight_;
  };
  absl::StatusOr<std::vector<WorkerAddress>> workers =
      deps_.resolve ? deps_.resolve(schedule.targets) : ResolveTargets(schedule.targets);
  if (!workers.ok()) return not_started(workers.status());
  CapturePlan plan = schedule.capture.ToPlan();
  plan.workers = *std::move(workers);
  plan.session = run.run_id;
  absl::StatusOr<v1::StartCaptureResponse> started = runner_->Start(
      std::move(plan),
      {.make_unique = true,
       .origin = origin,
       .on_finished =
           [this, schedule, done](const absl::StatusOr<v1::SessionManifest>& result) {
             const std::string outcome = result.ok()
                                             ? OutcomeLine(*result)
                                             : absl::StrCat("failed: ", result.status().message());
             Log(absl::StrCat("schedule ", schedule.name, ": session ",
                              result.ok() ? result->request().session() : "?", ": ", outcome));
             Finished(schedule.name, outcome);
             std::move (*done)();
             Blocking([this, schedule] {
               ApplyRetention(schedule);
               absl::MutexLock lock(&mu_);
               --in_flight_;
             });
           },
       .skip_if_hosts_busy = true});
  if (started.status().code() == absl::StatusCode::kAborted) {
    // Our own session holds a host: this run would only fail on busy agents. Skipped, counted.
    Log(absl::StrCat("schedule ", schedule.name, ": run ", run.run_id,
                     " skipped: ", started.status().message()));
    {
      absl::MutexLock lock(&mu_);
      ++counters_.runs_skipped_hosts_busy;
      ++skipped_hosts_busy_[schedule.name];
    }
    Finished(schedule.name, absl::StrCat("skipped: ", started.status().message()));
    std::move (*done)();
    absl::MutexLock lock(&mu_);
    --in_flight_;
    return;
  }
  if (!started.ok()) return not_started(started.status());
  Log(absl::StrCat("schedule ", schedule.name, ": session ", started->session(), " started (",
                   schedule.capture.duration_ms, " ms)"));
}

void Daemon::Finished(const std::string& schedule, const std::string& outcome) {
  {
    absl::MutexLock lock(&mu_);
    persisted_[schedule].set_name(schedule);
    persisted_[schedule].set_last_outcome(outcome);
  }
  RequestPersist();
}

void Daemon::RequestPersist() {
  {
    absl::MutexLock lock(&mu_);
    if (persist_queued_) return;
    persist_queued_ = true;
    ++in_flight_;  // the destructor waits for the write
  }
  Blocking([this] {
    Persist();
    absl::MutexLock lock(&mu_);
    --in_flight_;
  });
}

void Daemon::ApplyRetention(const schedule::ScheduleConfig& schedule) {
  const schedule::RetentionConfig& r = schedule.retention;
  schedule::RetentionResult result;
  if (r.keep_last > 0 || r.max_age_ns > 0 || r.max_bytes > 0) {
    result = schedule::ApplyRetention(logdir_, schedule.name, r, deps_.executor->clock().WallNs());
    for (const std::string& name : result.deleted) {
      Log(absl::StrCat("schedule ", schedule.name, ": retention deleted ", name));
    }
    for (const std::string& e : result.errors) Log(absl::StrCat("retention: ", e));
  }
  const int64_t kept = CountSessions(logdir_);
  absl::MutexLock lock(&mu_);
  counters_.retention_deleted += static_cast<int64_t>(result.deleted.size());
  counters_.retention_bytes_freed += result.bytes_freed;
  counters_.retention_errors += static_cast<int64_t>(result.errors.size());
  counters_.sessions_kept = kept;
}

void Daemon::Persist() {
  absl::MutexLock write(&persist_mu_);
  v1::SchedulePersistedState state;
  {
    absl::MutexLock lock(&mu_);
    persist_queued_ = false;  // a change from now on queues another write
    ++counters_.state_writes;
    for (const auto& [name, s] : persisted_) *state.add_schedules() = s;
  }
  const std::string json = ProtoJson(state);
  const std::string path = ScheduleStatePath(logdir_);
  absl::Status s = MakeDirs(JoinPath(logdir_, ".profctl"));
  if (s.ok()) s = WriteFileAtomically(path, json);
  if (!s.ok()) Log(absl::StrCat(path, ": ", s.message(), " (missed-run policy after a restart)"));
}

absl::Status Daemon::Reload() {
  absl::StatusOr<schedule::CoordinatorConfig> config =
      schedule::LoadCoordinatorConfig(config_path_);
  absl::Status bad;
  if (!config.ok()) {
    bad = config.status();
  } else if (config->logdir != logdir_) {
    bad = absl::InvalidArgumentError(
        absl::StrCat(config_path_, ": logdir changed from ", logdir_, " to ", config->logdir,
                     ": restart the coordinator to move its sessions"));
  }
  absl::MutexLock lock(&mu_);
  if (!bad.ok()) {
    ++counters_.reload_errors;
    return bad;
  }
  if (shut_down_) return absl::FailedPreconditionError("the coordinator is shutting down");
  for (const std::string& w : schedule::OverlapWarnings(config->schedules)) {
    Log(absl::StrCat(config_path_, ": warning: ", w));
  }
  ++counters_.reloads;
  loaded_wall_ns_ = deps_.executor->clock().WallNs();
  deps_.executor->Post([this, schedules = std::move(config->schedules)]() mutable {
    schedules_ = std::move(schedules);
    if (scheduler_ != nullptr) {
      std::vector<schedule::ScheduleConfig> timed;
      for (const schedule::ScheduleConfig& s : schedules_) {
        if (!s.trigger.has_value()) timed.push_back(s);
      }
      scheduler_->Reload(timed);
    }
    if (triggers_ != nullptr) triggers_->Reload(schedules_);
  });
  return absl::OkStatus();
}

void Daemon::Schedules(std::function<void(v1::ListSchedulesResponse)> done) {
  deps_.executor->Post([this, done = std::move(done)] {
    v1::ListSchedulesResponse response;
    response.set_config(config_path_);
    std::map<std::string, const schedule::ScheduleConfig*> configs;
    for (const auto& s : schedules_) configs[s.name] = &s;
    absl::MutexLock lock(&mu_);
    response.set_loaded_wall_ns(loaded_wall_ns_);
    // Read under the lock here: clang's thread-safety analysis does not follow it into the lambda.
    const std::map<std::string, int64_t> skipped_hosts_busy = skipped_hosts_busy_;
    // One entry per schedule, timed (the scheduler's) or triggered (the watcher's).
    auto add = [&](const schedule::ScheduleState& st) {
      v1::ScheduleInfo* info = response.add_schedules();
      info->set_name(st.name);
      if (auto it = configs.find(st.name); it != configs.end()) {
        info->set_timing(Timing(*it->second));
        for (const std::string& t : TargetStrings(it->second->targets)) info->add_targets(t);
      }
      info->set_next_fire_wall_ns(st.next_fire_wall_ns);
      info->set_last_run_wall_ns(st.last_run_wall_ns);
      info->set_running_session(st.running_run_id);
      info->set_runs_started(st.runs_started);
      info->set_runs_finished(st.runs_finished);
      info->set_skipped_busy(st.skipped_busy);
      info->set_missed_down(st.missed_down);
      info->set_missed_late(st.missed_late);
      if (auto it = skipped_hosts_busy.find(st.name); it != skipped_hosts_busy.end()) {
        info->set_skipped_hosts_busy(it->second);
      }
      return info;
    };
    if (scheduler_ != nullptr) {
      for (const schedule::ScheduleState& st : scheduler_->States()) add(st);
    }
    if (triggers_ != nullptr) {
      for (const TriggerState& t : triggers_->States()) {
        *add(t.schedule)->mutable_trigger() = t.trigger;
      }
    }
    for (v1::ScheduleInfo& info : *response.mutable_schedules()) {
      if (auto p = persisted_.find(info.name()); p != persisted_.end()) {
        info.set_last_outcome(p->second.last_outcome());
      }
    }
    done(std::move(response));
  });
}

DaemonCounters Daemon::counters() const {
  absl::MutexLock lock(&mu_);
  return counters_;
}

std::string RenderMetrics(const Daemon& daemon) {
  const RunnerCounters r = daemon.runner().counters();
  const DaemonCounters d = daemon.counters();
  PromText m;
  m.Counter("profctl_coordinator_captures_started_total", "Capture sessions started.",
            static_cast<double>(r.started));
  m.Gauge("profctl_coordinator_captures_running", "Capture sessions running now.",
          static_cast<double>(r.running));
  const char* kFinished = "Capture sessions finished, by outcome.";
  m.Counter("profctl_coordinator_captures_finished_total", kFinished,
            static_cast<double>(r.finished_ok), {{"outcome", "ok"}});
  m.Counter("profctl_coordinator_captures_finished_total", kFinished,
            static_cast<double>(r.finished_partial), {{"outcome", "partial"}});
  m.Counter("profctl_coordinator_captures_finished_total", kFinished,
            static_cast<double>(r.finished_failed), {{"outcome", "failed"}});
  const char* kFailed = "Captures that could not start, by cause.";
  m.Counter("profctl_coordinator_capture_start_failures_total", kFailed,
            static_cast<double>(r.start_errors), {{"cause", "session"}});
  m.Counter("profctl_coordinator_capture_start_failures_total", kFailed,
            static_cast<double>(d.runs_not_started), {{"cause", "schedule_run"}});
  m.Counter("profctl_coordinator_runs_skipped_hosts_busy_total",
            "Scheduled runs skipped: a host was busy with another of this coordinator's sessions.",
            static_cast<double>(d.runs_skipped_hosts_busy));
  m.Counter("profctl_coordinator_hosts_failed_total", "Hosts that failed in finished sessions.",
            static_cast<double>(r.hosts_failed));
  m.Counter("profctl_coordinator_host_retries_total",
            "Attempts after the first, over every host of finished sessions.",
            static_cast<double>(r.host_retries));
  m.Counter("profctl_coordinator_trace_bytes_total", "Trace bytes saved by finished sessions.",
            static_cast<double>(r.bytes_saved));
  m.Counter("profctl_coordinator_capture_seconds_total",
            "Wall seconds from session start to session.json, summed over finished sessions.",
            r.capture_seconds_sum);
  m.Counter("profctl_coordinator_sessions_released_total",
            "Finished sessions whose engine was freed and its memory handed back to the system.",
            static_cast<double>(r.sessions_released));
  m.Counter("profctl_coordinator_retention_deleted_total", "Session folders deleted by retention.",
            static_cast<double>(d.retention_deleted));
  m.Counter("profctl_coordinator_retention_bytes_freed_total", "Bytes freed by retention.",
            static_cast<double>(d.retention_bytes_freed));
  m.Counter("profctl_coordinator_retention_errors_total", "Folders retention could not delete.",
            static_cast<double>(d.retention_errors));
  m.Gauge("profctl_coordinator_sessions_kept", "Session folders in the log dir after retention.",
          static_cast<double>(d.sessions_kept));
  m.Counter("profctl_coordinator_config_reloads_total", "Config reloads, by result.",
            static_cast<double>(d.reloads), {{"result", "ok"}});
  m.Counter("profctl_coordinator_config_reloads_total", "Config reloads, by result.",
            static_cast<double>(d.reload_errors), {{"result", "error"}});
  m.Counter("profctl_coordinator_trigger_polls_total",
            "Polls of the step signal by condition-triggered schedules.",
            static_cast<double>(d.trigger_polls));
  m.Counter("profctl_coordinator_trigger_poll_errors_total",
            "Targets that did not answer a trigger's poll.",
            static_cast<double>(d.trigger_poll_errors));
  m.Counter("profctl_coordinator_triggers_fired_total",
            "Captures started by condition-triggered schedules.",
            static_cast<double>(d.triggers_fired));
  m.Gauge("profctl_coordinator_schedule_lag_seconds",
          "How late the latest scheduled run started after its time.",
          static_cast<double>(d.last_schedule_lag_ns) / 1e9);
  return m.text();
}

}  // namespace profctl::coordinator::service
