#include "coordinator/schedule/scheduler.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/time/time.h"
#include "common/check.h"

namespace profctl::coordinator::schedule {
namespace {

constexpr int64_t kNever = std::numeric_limits<int64_t>::max();
// Cron times skipped one by one after a late timer or downtime, at most; past that the count
// is a lower bound and the next time is found from now.
constexpr int64_t kMaxCountedCronTimes = 100'000;

uint64_t SplitMix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

uint64_t Fnv1a(const std::string& s) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (const char c : s) {
    h ^= static_cast<unsigned char>(c);
    h *= 0x100000001b3ULL;
  }
  return h;
}

// From `first` (a nominal time), the nominal times <= wall_ns: returns how many, and sets
// *next to the first nominal time after wall_ns.
int64_t SkipPassed(const ScheduleConfig& s, int64_t first, int64_t wall_ns, int64_t* next) {
  if (first > wall_ns) {
    *next = first;
    return 0;
  }
  if (s.interval_ns > 0) {
    const int64_t k = (wall_ns - first) / s.interval_ns + 1;
    *next = first + k * s.interval_ns;
    return k;
  }
  int64_t count = 0;
  int64_t n = first;
  while (n <= wall_ns && count < kMaxCountedCronTimes) {
    ++count;
    n = Scheduler::NextNominal(s, n);
  }
  *next = n <= wall_ns ? Scheduler::NextNominal(s, wall_ns) : n;
  return count;
}

}  // namespace

std::string RunId(const std::string& schedule, int64_t wall_ns) {
  return schedule + "_" +
         absl::FormatTime("%Y%m%dT%H%M%SZ", absl::FromUnixNanos(wall_ns), absl::UTCTimeZone());
}

int64_t Scheduler::NextNominal(const ScheduleConfig& schedule, int64_t wall_ns) {
  if (schedule.interval_ns > 0) {
    // Multiples of the interval since the epoch (wall_ns >= 0 on any real clock).
    return (wall_ns / schedule.interval_ns + 1) * schedule.interval_ns;
  }
  if (!schedule.cron.has_value()) return kNever;
  const absl::StatusOr<int64_t> next = schedule.cron->NextAfter(wall_ns);
  return next.ok() ? *next : kNever;  // CronExpr::Parse rejected expressions that never fire
}

int64_t Scheduler::JitterNs(uint64_t seed, const ScheduleConfig& schedule,
                            int64_t nominal_wall_ns) {
  if (schedule.jitter_ns <= 0) return 0;
  const uint64_t h =
      SplitMix64(seed ^ Fnv1a(schedule.name) ^ SplitMix64(static_cast<uint64_t>(nominal_wall_ns)));
  return static_cast<int64_t>(h % (static_cast<uint64_t>(schedule.jitter_ns) + 1));
}

struct Scheduler::Impl : std::enable_shared_from_this<Scheduler::Impl> {
  struct Entry {
    ScheduleConfig config;
    ScheduleState state;
    int64_t next_nominal = 0;
    uint64_t timer_gen = 0;  // a timer task fires only while it matches
  };

  Impl(Dependencies d, SchedulerOptions o) : deps(std::move(d)), options(o) {}

  int64_t WallNow() const { return deps.executor->clock().WallNs(); }

  void PostTimer(const std::string& name, uint64_t gen, int64_t fire_wall_ns) {
    const Clock& clock = deps.executor->clock();
    const int64_t wait = std::max<int64_t>(0, fire_wall_ns - clock.WallNs());
    deps.executor->PostAt(clock.MonoNs() + wait, [weak = weak_from_this(), name, gen] {
      if (const std::shared_ptr<Impl> self = weak.lock()) self->OnTimer(name, gen);
    });
  }

  // Arms `e` for the nominal time `nominal` (plus its jitter).
  void ArmAt(Entry& e, int64_t nominal) {
    e.next_nominal = nominal;
    e.timer_gen = ++next_gen;
    if (nominal == kNever) {
      e.state.next_fire_wall_ns = 0;
      return;
    }
    e.state.next_fire_wall_ns = nominal + JitterNs(options.jitter_seed, e.config, nominal);
    PostTimer(e.config.name, e.timer_gen, e.state.next_fire_wall_ns);
  }

  void OnTimer(const std::string& name, uint64_t gen) {
    PROFCTL_DCHECK_ON_SEQUENCE(*deps.executor);
    auto it = entries.find(name);
    if (it == entries.end() || it->second.timer_gen != gen) return;  // removed or re-armed
    Entry& e = it->second;
    const int64_t wall = WallNow();
    if (wall < e.state.next_fire_wall_ns) {  // the wall clock went back: wait again
      PostTimer(name, gen, e.state.next_fire_wall_ns);
      return;
    }
    const int64_t nominal = e.next_nominal;
    int64_t next = 0;
    e.state.missed_late += SkipPassed(e.config, NextNominal(e.config, nominal), wall, &next);
    ArmAt(e, next);
    if (running.contains(name)) {
      ++e.state.skipped_busy;
      return;
    }
    Fire(e, ScheduledRun{RunId(name, wall), nominal, wall, /*catch_up=*/false});
  }

  void OnCatchUp(const std::string& name) {
    PROFCTL_DCHECK_ON_SEQUENCE(*deps.executor);
    auto it = entries.find(name);
    if (it == entries.end() || running.contains(name)) return;
    const int64_t wall = WallNow();
    Fire(it->second, ScheduledRun{RunId(name, wall), wall, wall, /*catch_up=*/true});
  }

  // Starts a run; touches nothing of `e` after run_capture (it may Reload).
  void Fire(Entry& e, const ScheduledRun& run) {
    const std::string& name = e.config.name;
    running[name] = run.run_id;
    e.state.running_run_id = run.run_id;
    e.state.last_run_wall_ns = run.fire_wall_ns;
    ++e.state.runs_started;
    const ScheduleConfig config = e.config;
    Executor* executor = deps.executor;
    deps.run_capture(config, run,
                     [weak = weak_from_this(), executor, name = config.name, id = run.run_id] {
                       executor->Post([weak, name, id] {
                         if (const std::shared_ptr<Impl> self = weak.lock()) {
                           self->OnDone(name, id);
                         }
                       });
                     });
  }

  void OnDone(const std::string& name, const std::string& run_id) {
    PROFCTL_DCHECK_ON_SEQUENCE(*deps.executor);
    if (auto r = running.find(name); r != running.end() && r->second == run_id) running.erase(r);
    auto it = entries.find(name);
    if (it != entries.end() && it->second.state.running_run_id == run_id) {
      it->second.state.running_run_id.clear();
      ++it->second.state.runs_finished;
    }
  }

  Entry NewEntry(const ScheduleConfig& s) {
    Entry e;
    e.config = s;
    e.state.name = s.name;
    if (auto r = running.find(s.name); r != running.end()) e.state.running_run_id = r->second;
    return e;
  }

  Dependencies deps;
  SchedulerOptions options;
  std::map<std::string, Entry> entries;
  // Schedule name -> its running run: outlives the schedule's removal by Reload.
  std::map<std::string, std::string> running;
  uint64_t next_gen = 0;
};

Scheduler::Scheduler(Dependencies deps, SchedulerOptions options)
    : impl_(std::make_shared<Impl>(std::move(deps), options)) {}

Scheduler::~Scheduler() = default;

void Scheduler::Start(const std::vector<ScheduleConfig>& schedules,
                      const std::map<std::string, int64_t>& last_run_wall_ns) {
  const int64_t wall = impl_->WallNow();
  for (const ScheduleConfig& s : schedules) {
    Impl::Entry& e = impl_->entries.emplace(s.name, impl_->NewEntry(s)).first->second;
    int64_t next = NextNominal(s, wall);
    if (auto lr = last_run_wall_ns.find(s.name); lr != last_run_wall_ns.end()) {
      e.state.last_run_wall_ns = lr->second;
      e.state.missed_down = SkipPassed(s, NextNominal(s, lr->second), wall, &next);
      if (e.state.missed_down > 0 && s.missed == MissedPolicy::kRunOnce) {
        impl_->deps.executor->Post([weak = impl_->weak_from_this(), name = s.name] {
          if (const std::shared_ptr<Impl> self = weak.lock()) self->OnCatchUp(name);
        });
      }
    }
    impl_->ArmAt(e, next);
  }
}

void Scheduler::Reload(const std::vector<ScheduleConfig>& schedules) {
  const int64_t wall = impl_->WallNow();
  std::map<std::string, Impl::Entry> entries;
  for (const ScheduleConfig& s : schedules) {
    auto old = impl_->entries.find(s.name);
    if (old != impl_->entries.end() && old->second.config.SameTiming(s)) {
      Impl::Entry& e = entries.emplace(s.name, std::move(old->second)).first->second;
      e.config = s;  // the pending timer (same generation) stays valid
      continue;
    }
    Impl::Entry e = impl_->NewEntry(s);
    if (old != impl_->entries.end()) e.state = old->second.state;  // counters survive a re-time
    Impl::Entry& added = entries.emplace(s.name, std::move(e)).first->second;
    impl_->ArmAt(added, NextNominal(s, wall));
  }
  impl_->entries = std::move(entries);
}

std::vector<ScheduleState> Scheduler::States() const {
  std::vector<ScheduleState> out;
  out.reserve(impl_->entries.size());
  for (const auto& [name, e] : impl_->entries) out.push_back(e.state);
  return out;
}

}  // namespace profctl::coordinator::schedule
