#include "coordinator/service/trigger_watcher.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/time.h"
#include "common/check.h"
#include "coordinator/schedule/trigger.h"

namespace profctl::coordinator::service {
namespace {

constexpr int64_t kMaxRpcTimeoutMs = 2000;

std::string Dur(int64_t ns) { return absl::FormatDuration(absl::Nanoseconds(ns)); }

}  // namespace

std::string TriggerTiming(const schedule::TriggerConfig& t) {
  if (t.signal == "hang") {
    return absl::StrFormat(
        "hang (an agent reports stopped steps), snapshot of the past %s, poll "
        "%s, cooldown %s",
        Dur(t.past_ns), Dur(t.poll_ns), Dur(t.cooldown_ns));
  }
  return absl::StrFormat("%s > %.3gx its %s baseline (median over %s), poll %s, cooldown %s",
                         t.signal, t.threshold, Dur(t.baseline_ns), Dur(t.window_ns),
                         Dur(t.poll_ns), Dur(t.cooldown_ns));
}

struct TriggerWatcher::Impl : std::enable_shared_from_this<TriggerWatcher::Impl> {
  struct Watch {
    explicit Watch(const schedule::ScheduleConfig& c) : config(c), judge(*c.trigger) {}
    schedule::ScheduleConfig config;
    schedule::StepTimeWatch judge;
    uint64_t generation = 0;  // its timers; a replaced watch's are ignored
    uint64_t poll_seq = 0;    // answers of an older poll are ignored
    int64_t pending = 0;      // answers the current poll still waits for
    int64_t poll_start_mono = 0;
    int64_t poll_errors_now = 0;
    std::map<std::string, std::unique_ptr<AgentClient>> clients;  // by worker address
    int64_t consecutive = 0;  // polls in a row over the threshold
    int64_t cooldown_until_wall = 0;
    schedule::TriggerJudgment last;
    std::string waiting;
    TriggerState state;
  };

  explicit Impl(Dependencies d) : deps(std::move(d)) {}

  const Clock& clock() const { return deps.executor->clock(); }
  void Log(const std::string& line) const {
    if (deps.log) deps.log(line);
  }

  // Posts `f(impl, watch)` for watch `name` of `generation`, if both still exist then.
  template <typename F>
  static void OnWatch(const std::weak_ptr<Impl>& weak, const std::string& name, uint64_t generation,
                      F f) {
    std::shared_ptr<Impl> self = weak.lock();
    if (self == nullptr) return;
    PROFCTL_DCHECK_ON_SEQUENCE(*self->deps.executor);
    auto it = self->watches.find(name);
    if (it == self->watches.end() || it->second->generation != generation) return;
    f(*self, *it->second);
  }

  void Add(const schedule::ScheduleConfig& s) {
    auto w = std::make_shared<Watch>(s);
    w->generation = ++generations;
    w->state.schedule.name = s.name;
    w->state.trigger.set_signal(s.trigger->signal);
    w->state.trigger.set_threshold(s.trigger->threshold);
    watches[s.name] = w;
    ArmPoll(*w, clock().MonoNs());
  }

  void ArmPoll(Watch& w, int64_t at_mono) {
    w.state.schedule.next_fire_wall_ns = clock().WallNs() + (at_mono - clock().MonoNs());
    deps.executor->PostAt(
        at_mono, [weak = weak_from_this(), name = w.config.name, gen = w.generation] {
          OnWatch(weak, name, gen, [](Impl& self, Watch& watch) { self.Poll(watch); });
        });
  }

  void Poll(Watch& w) {
    const int64_t now = clock().MonoNs();
    if (!w.state.schedule.running_run_id.empty()) {
      // Our own capture runs: neither judge it nor pile polls on its agents.
      ArmPoll(w, now + w.config.trigger->poll_ns);
      return;
    }
    w.poll_start_mono = now;
    const uint64_t seq = ++w.poll_seq;
    deps.blocking([weak = weak_from_this(), name = w.config.name, gen = w.generation, seq,
                   targets = w.config.targets, resolve = deps.resolve,
                   executor = deps.executor]() mutable {
      absl::StatusOr<std::vector<WorkerAddress>> workers = resolve(targets);
      executor->Post([weak, name, gen, seq, workers = std::move(workers)]() mutable {
        OnWatch(weak, name, gen, [&](Impl& self, Watch& watch) {
          if (watch.poll_seq == seq) self.Resolved(watch, std::move(workers));
        });
      });
    });
  }

  void Resolved(Watch& w, absl::StatusOr<std::vector<WorkerAddress>> workers) {
    if (!workers.ok()) {
      w.waiting = absl::StrCat("targets: ", workers.status().message());
      w.poll_errors_now = 1;
      Conclude(w, /*judge=*/false);
      return;
    }
    std::set<std::string> names;
    for (const WorkerAddress& a : *workers) names.insert(a.address);
    for (auto it = w.clients.begin(); it != w.clients.end();) {
      it = names.contains(it->first) ? std::next(it) : w.clients.erase(it);
    }
    w.judge.Retain(names);
    w.judge.BeginPoll();
    w.pending = static_cast<int64_t>(workers->size());
    w.poll_errors_now = 0;
    const int64_t timeout_ms =
        std::max<int64_t>(1, std::min(kMaxRpcTimeoutMs, w.config.trigger->poll_ns / 2'000'000));
    for (const WorkerAddress& a : *workers) {
      std::unique_ptr<AgentClient>& client = w.clients[a.address];
      if (client == nullptr) client = deps.clients->Connect(a);
      // The most an agent gives: a first poll fills a baseline.
      client->GetStepSignal(
          {.since_ns = w.judge.SinceNs(a.address), .max_samples = 4096}, timeout_ms,
          [weak = weak_from_this(), executor = deps.executor, name = w.config.name,
           gen = w.generation, seq = w.poll_seq,
           address = a.address](absl::StatusOr<profctl::v1::GetStepSignalResponse> r) mutable {
            executor->Post([weak, name, gen, seq, address, r = std::move(r)]() mutable {
              OnWatch(weak, name, gen, [&](Impl& self, Watch& watch) {
                if (watch.poll_seq == seq) self.Answered(watch, address, r);
              });
            });
          });
    }
    if (workers->empty()) Conclude(w, /*judge=*/true);
  }

  void Answered(Watch& w, const std::string& address,
                const absl::StatusOr<profctl::v1::GetStepSignalResponse>& r) {
    if (r.ok()) {
      if (const int64_t dropped = w.judge.Add(address, *r); dropped > 0) {
        Log(absl::StrCat("trigger ", w.config.name, ": ", address, ": dropped ", dropped,
                         " implausible step samples"));
      }
    } else if (r.status().code() == absl::StatusCode::kUnimplemented) {
      w.judge.NoSignal(address);  // a peer without a step signal, not a failure
    } else {
      ++w.poll_errors_now;
    }
    if (--w.pending == 0) Conclude(w, /*judge=*/true);
  }

  void Conclude(Watch& w, bool judge) {
    v1::TriggerInfo& info = w.state.trigger;
    info.set_polls(info.polls() + 1);
    info.set_poll_errors(info.poll_errors() + w.poll_errors_now);
    if (deps.on_poll) deps.on_poll(w.poll_errors_now);
    if (judge) {
      w.last = w.judge.Judge();
      w.waiting = w.last.waiting;
      info.set_baseline(w.last.baseline_ns);
      info.set_observed(w.last.observed_ns);
      w.consecutive = w.last.regressed ? w.consecutive + 1 : 0;
    }
    info.set_waiting(w.waiting);
    const int64_t wall = clock().WallNs();
    if (w.consecutive >= w.config.trigger->sustain) {
      if (wall < w.cooldown_until_wall) {
        info.set_suppressed_cooldown(info.suppressed_cooldown() + 1);
      } else {
        Fire(w, wall);
      }
    }
    ArmPoll(w, std::max(clock().MonoNs(), w.poll_start_mono + w.config.trigger->poll_ns));
  }

  void Fire(Watch& w, int64_t wall) {
    const schedule::TriggerConfig& t = *w.config.trigger;
    v1::SessionOrigin origin;
    origin.set_kind("trigger");
    origin.set_schedule(w.config.name);
    origin.set_trigger_signal(t.signal);
    origin.set_trigger_baseline(w.last.baseline_ns);
    origin.set_trigger_observed(w.last.observed_ns);
    origin.set_trigger_threshold(t.threshold);
    origin.set_trigger_host(w.last.host);
    origin.set_trigger_source(w.last.stall_source);
    const schedule::ScheduledRun run{.run_id = schedule::RunId(w.config.name, wall),
                                     .nominal_wall_ns = wall,
                                     .fire_wall_ns = wall,
                                     .catch_up = false};
    if (t.signal == "hang") {
      Log(absl::StrFormat(
          "trigger %s: %s: %s stopped stepping %.3f s ago (last step %d, median step %.3f ms; %d "
          "polls): snapshot of the pod's past %s as %s",
          w.config.name, w.last.host, w.last.stall_source, w.last.stalled_for_ns / 1e9,
          w.last.stall_last_step, w.last.baseline_ns / 1e6, w.consecutive, Dur(t.past_ns),
          run.run_id));
    } else {
      Log(absl::StrFormat(
          "trigger %s: %s step time %.3f ms is %.2fx its baseline %.3f ms (threshold %.3gx, %d "
          "polls): capturing %s",
          w.config.name, w.last.host, w.last.observed_ns / 1e6, w.last.ratio,
          w.last.baseline_ns / 1e6, t.threshold, w.consecutive, run.run_id));
    }
    w.consecutive = 0;
    w.cooldown_until_wall = wall + t.cooldown_ns;
    w.state.trigger.set_fired(w.state.trigger.fired() + 1);
    w.state.trigger.set_cooldown_until_wall_ns(w.cooldown_until_wall);
    w.state.schedule.running_run_id = run.run_id;
    w.state.schedule.last_run_wall_ns = wall;
    ++w.state.schedule.runs_started;
    deps.run_capture(w.config, run, origin,
                     [weak = weak_from_this(), executor = deps.executor, name = w.config.name,
                      gen = w.generation, run_id = run.run_id]() mutable {
                       executor->Post([weak, name, gen, run_id] {
                         OnWatch(weak, name, gen, [&](Impl&, Watch& watch) {
                           if (watch.state.schedule.running_run_id == run_id) {
                             watch.state.schedule.running_run_id.clear();
                           }
                           ++watch.state.schedule.runs_finished;
                         });
                       });
                     });
  }

  Dependencies deps;
  std::map<std::string, std::shared_ptr<Watch>> watches;
  uint64_t generations = 0;
};

TriggerWatcher::TriggerWatcher(Dependencies deps)
    : impl_(std::make_shared<Impl>(std::move(deps))) {}

TriggerWatcher::~TriggerWatcher() = default;

void TriggerWatcher::Start(const std::vector<schedule::ScheduleConfig>& schedules) {
  for (const schedule::ScheduleConfig& s : schedules) {
    if (s.trigger.has_value()) impl_->Add(s);
  }
}

void TriggerWatcher::Reload(const std::vector<schedule::ScheduleConfig>& schedules) {
  std::map<std::string, std::shared_ptr<Impl::Watch>> old = std::move(impl_->watches);
  impl_->watches.clear();
  for (const schedule::ScheduleConfig& s : schedules) {
    if (!s.trigger.has_value()) continue;
    auto it = old.find(s.name);
    if (it != old.end() && it->second->config.SameTiming(s)) {
      it->second->config = s;  // its pending poll (same generation) stays valid
      impl_->watches[s.name] = std::move(it->second);
      continue;
    }
    impl_->Add(s);
  }
}

std::vector<TriggerState> TriggerWatcher::States() const {
  std::vector<TriggerState> states;
  for (const auto& [name, w] : impl_->watches) states.push_back(w->state);
  return states;
}

}  // namespace profctl::coordinator::service
