#include "coordinator/schedule/scheduler.h"

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/time/civil_time.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/fake_clock.h"
#include "tests/fake_executor.h"
#include "tests/test_time.h"

namespace profctl::coordinator::schedule {
namespace {

using profctl::testkit::FakeClock;
using profctl::testkit::FakeExecutor;

using ::profctl::test_time::kDay;
using ::profctl::test_time::kHour;
using ::profctl::test_time::kMinute;
constexpr int64_t kStart = FakeClock::kDefaultWallNs;  // 2026-01-01T00:00:00Z, a Thursday

ScheduleConfig Interval(const std::string& name, int64_t interval, int64_t jitter = 0) {
  ScheduleConfig s;
  s.name = name;
  s.targets.list = {"h:1"};
  s.interval_ns = interval;
  s.jitter_ns = jitter;
  return s;
}

ScheduleConfig Cron(const std::string& name, const std::string& expr) {
  ScheduleConfig s;
  s.name = name;
  s.targets.list = {"h:1"};
  s.cron = *CronExpr::Parse(expr);
  return s;
}

// Records every run; finishes it at once unless `hold` is set, in which case the test calls
// Finish().
class Harness {
 public:
  explicit Harness(uint64_t seed = 1, int64_t wall_ns = kStart)
      : clock_(wall_ns),
        executor_(&clock_),
        scheduler_({&executor_,
                    [this](const ScheduleConfig& s, const ScheduledRun& run,
                           Scheduler::DoneCallback done) {
                      runs.push_back({s.name, run, s.capture.duration_ms});
                      if (hold) {
                        held.emplace(run.run_id, std::move(done));
                      } else {
                        std::move(done)();
                      }
                    }},
                   SchedulerOptions{seed}) {}

  struct Run {
    std::string schedule;
    ScheduledRun run;
    int64_t duration_ms;
  };

  void Advance(int64_t ns) { executor_.Advance(ns); }
  void Finish(const std::string& run_id) {
    auto it = held.find(run_id);
    ASSERT_NE(it, held.end()) << run_id;
    std::move(it->second)();
    held.erase(it);
    executor_.RunUntilIdle();
  }
  ScheduleState State(const std::string& name) const {
    for (const ScheduleState& s : scheduler_.States()) {
      if (s.name == name) return s;
    }
    ADD_FAILURE() << "no schedule " << name;
    return {};
  }
  std::vector<int64_t> FireTimes(const std::string& name) const {
    std::vector<int64_t> out;
    for (const Run& r : runs) {
      if (r.schedule == name) out.push_back(r.run.fire_wall_ns);
    }
    return out;
  }

  FakeClock clock_;
  FakeExecutor executor_;
  Scheduler scheduler_;
  bool hold = false;
  std::vector<Run> runs;
  std::map<std::string, Scheduler::DoneCallback> held;
};

TEST(SchedulerTest, HourlyForAWeekFires168TimesOnTheHour) {
  Harness h;
  h.scheduler_.Start({Interval("hourly", kHour)}, {});
  h.Advance(7 * kDay);
  const std::vector<int64_t> times = h.FireTimes("hourly");
  ASSERT_EQ(times.size(), 168u);
  for (size_t i = 0; i < times.size(); ++i) {
    EXPECT_EQ(times[i], kStart + static_cast<int64_t>(i + 1) * kHour);
  }
  EXPECT_EQ(h.runs[0].run.run_id, "hourly_20260101T010000Z");
  const ScheduleState st = h.State("hourly");
  EXPECT_EQ(st.runs_started, 168);
  EXPECT_EQ(st.runs_finished, 168);
  EXPECT_EQ(st.skipped_busy + st.missed_late + st.missed_down, 0);
  EXPECT_EQ(st.next_fire_wall_ns, kStart + 169 * kHour);
}

TEST(SchedulerTest, CronOverAMonthMatchesBruteForce) {
  Harness h;
  h.scheduler_.Start({Cron("work", "*/15 9-17 * * 1-5")}, {});
  h.Advance(31 * kDay);
  std::vector<int64_t> expected;
  const absl::TimeZone utc = absl::UTCTimeZone();
  for (int64_t t = kStart + kMinute; t <= kStart + 31 * kDay; t += kMinute) {
    const absl::CivilMinute m = absl::ToCivilMinute(absl::FromUnixNanos(t), utc);
    const absl::Weekday wd = absl::GetWeekday(absl::CivilDay(m));
    if (m.minute() % 15 == 0 && m.hour() >= 9 && m.hour() <= 17 && wd != absl::Weekday::saturday &&
        wd != absl::Weekday::sunday) {
      expected.push_back(t);
    }
  }
  EXPECT_EQ(h.FireTimes("work"), expected);
  EXPECT_EQ(expected.size(), 22u * 36);
}

TEST(SchedulerTest, JitterIsBoundedAndDeterministicPerSeed) {
  auto fire_times = [](uint64_t seed) {
    Harness h(seed);
    h.scheduler_.Start({Interval("j", kHour, /*jitter=*/10 * kMinute)}, {});
    h.Advance(2 * kDay);
    for (const Harness::Run& r : h.runs) {
      EXPECT_GE(r.run.fire_wall_ns, r.run.nominal_wall_ns);
      EXPECT_LE(r.run.fire_wall_ns, r.run.nominal_wall_ns + 10 * kMinute);
      EXPECT_EQ(r.run.nominal_wall_ns % kHour, 0);
    }
    return h.FireTimes("j");
  };
  const std::vector<int64_t> a = fire_times(7);
  EXPECT_TRUE(a.size() == 47u || a.size() == 48u) << a.size();  // 48th: jittered past the end?
  EXPECT_EQ(fire_times(7), a);
  EXPECT_NE(fire_times(8), a);
  std::map<int64_t, int> distinct;
  for (const int64_t t : a) ++distinct[t % kHour];
  EXPECT_GT(distinct.size(), 40u);  // spread, not one offset
}

TEST(SchedulerTest, SkipsRunsDueWhileThePreviousIsRunning) {
  Harness h;
  h.hold = true;
  h.scheduler_.Start({Interval("m", kMinute)}, {});
  h.Advance(5 * kMinute);
  ASSERT_EQ(h.runs.size(), 1u);
  ScheduleState st = h.State("m");
  EXPECT_EQ(st.skipped_busy, 4);
  EXPECT_EQ(st.running_run_id, "m_20260101T000100Z");
  h.Finish("m_20260101T000100Z");
  EXPECT_TRUE(h.State("m").running_run_id.empty());
  h.Advance(kMinute);
  ASSERT_EQ(h.runs.size(), 2u);
  EXPECT_EQ(h.runs[1].run.fire_wall_ns, kStart + 6 * kMinute);
}

// The coordinator was down from 19:00 to 00:30: five hourly runs (20:00 .. 00:00) were missed.
TEST(SchedulerTest, MissedRunsAfterDowntimeSkip) {
  const int64_t now = kStart + 30 * kMinute;
  Harness h(/*seed=*/1, now);
  h.scheduler_.Start({Interval("hourly", kHour)}, {{"hourly", kStart - 5 * kHour}});
  h.executor_.RunUntilIdle();
  EXPECT_TRUE(h.runs.empty());
  EXPECT_EQ(h.State("hourly").missed_down, 5);
  h.Advance(kHour);
  ASSERT_EQ(h.runs.size(), 1u);
  EXPECT_EQ(h.runs[0].run.fire_wall_ns, kStart + kHour);
}

TEST(SchedulerTest, MissedRunsAfterDowntimeRunOnce) {
  const int64_t now = kStart + 30 * kMinute;
  Harness h(/*seed=*/1, now);
  ScheduleConfig s = Interval("hourly", kHour);
  s.missed = MissedPolicy::kRunOnce;
  ScheduleConfig fresh = Interval("fresh", kHour);  // never ran: nothing missed
  fresh.missed = MissedPolicy::kRunOnce;
  h.scheduler_.Start({s, fresh}, {{"hourly", kStart - 5 * kHour}});
  h.executor_.RunUntilIdle();
  ASSERT_EQ(h.runs.size(), 1u);
  EXPECT_TRUE(h.runs[0].run.catch_up);
  EXPECT_EQ(h.runs[0].run.fire_wall_ns, now);
  EXPECT_EQ(h.State("hourly").missed_down, 5);
  h.Advance(kHour);
  EXPECT_EQ(h.FireTimes("hourly"), (std::vector<int64_t>{now, kStart + kHour}));
  EXPECT_EQ(h.FireTimes("fresh"), (std::vector<int64_t>{kStart + kHour}));
}

TEST(SchedulerTest, NothingMissedWhenTheLastRunIsRecent) {
  Harness h(/*seed=*/1, kStart + 30 * kMinute);
  ScheduleConfig s = Interval("hourly", kHour);
  s.missed = MissedPolicy::kRunOnce;
  h.scheduler_.Start({s}, {{"hourly", kStart + 10 * kNanosPerSecond}});
  h.executor_.RunUntilIdle();
  EXPECT_TRUE(h.runs.empty());
  EXPECT_EQ(h.State("hourly").missed_down, 0);
}

TEST(SchedulerTest, ReloadKeepsRunningCaptureAndNextTimes) {
  Harness h;
  h.hold = true;
  h.scheduler_.Start(
      {Interval("keep", kHour, 5 * kMinute), Interval("gone", kHour), Interval("retimed", kHour)},
      {});
  h.Advance(kHour + 10 * kMinute);  // every one ran once and is still running
  ASSERT_EQ(h.runs.size(), 3u);
  const ScheduleState keep_before = h.State("keep");
  ASSERT_FALSE(keep_before.running_run_id.empty());

  ScheduleConfig keep = Interval("keep", kHour, 5 * kMinute);
  keep.capture.duration_ms = 9000;  // not timing: applies from the next run
  h.scheduler_.Reload({keep, Interval("retimed", 30 * kMinute), Interval("new", kHour)});
  const ScheduleState keep_after = h.State("keep");
  EXPECT_EQ(keep_after.running_run_id, keep_before.running_run_id);
  EXPECT_EQ(keep_after.next_fire_wall_ns, keep_before.next_fire_wall_ns);
  EXPECT_EQ(keep_after.runs_started, 1);
  EXPECT_EQ(h.State("retimed").next_fire_wall_ns, kStart + kHour + 30 * kMinute);
  EXPECT_EQ(h.scheduler_.States().size(), 3u);

  // The running captures finish normally; "gone" is forgotten.
  ASSERT_EQ(h.held.size(), 3u);
  for (const Harness::Run& r : std::vector<Harness::Run>(h.runs)) h.Finish(r.run.run_id);
  EXPECT_EQ(h.State("keep").runs_finished, 1);
  h.hold = false;
  h.Advance(kHour);
  EXPECT_EQ(h.FireTimes("gone").size(), 1u);
  EXPECT_EQ(h.FireTimes("new"), (std::vector<int64_t>{kStart + 2 * kHour}));
  EXPECT_EQ(
      h.FireTimes("retimed"),
      (std::vector<int64_t>{kStart + kHour, kStart + kHour + 30 * kMinute, kStart + 2 * kHour}));
  ASSERT_EQ(h.FireTimes("keep").size(), 2u);
  EXPECT_EQ(h.FireTimes("keep")[1], keep_before.next_fire_wall_ns);
  EXPECT_EQ(h.runs.back().schedule, "keep");
  EXPECT_EQ(h.runs.back().duration_ms, 9000);
}

TEST(SchedulerTest, ReaddedScheduleStillSkipsWhileItsOldRunRuns) {
  Harness h;
  h.hold = true;
  h.scheduler_.Start({Interval("a", kMinute)}, {});
  h.Advance(kMinute);
  ASSERT_EQ(h.runs.size(), 1u);
  h.scheduler_.Reload({});
  h.scheduler_.Reload({Interval("a", kMinute)});
  h.Advance(kMinute);
  EXPECT_EQ(h.runs.size(), 1u);
  EXPECT_EQ(h.State("a").skipped_busy, 1);
  h.Finish(h.runs[0].run.run_id);
  h.Advance(kMinute);
  EXPECT_EQ(h.runs.size(), 2u);
}

TEST(SchedulerTest, LateTimerSkipsAndCountsPassedTimes) {
  Harness h;
  h.scheduler_.Start({Interval("m", kMinute)}, {});
  // The host was suspended: wall and monotonic time jump 10 minutes with no task run.
  h.clock_.Advance(10 * kMinute + 30 * kNanosPerSecond);
  h.executor_.RunUntilIdle();
  ASSERT_EQ(h.runs.size(), 1u);
  EXPECT_EQ(h.State("m").missed_late, 9);
  EXPECT_EQ(h.State("m").next_fire_wall_ns, kStart + 11 * kMinute);
}

}  // namespace
}  // namespace profctl::coordinator::schedule
