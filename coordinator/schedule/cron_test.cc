#include "coordinator/schedule/cron.h"

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/civil_time.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/status_matchers.h"

using ::profctl::testkit::IsOk;

namespace profctl::coordinator::schedule {
namespace {

using ::testing::HasSubstr;

int64_t Ns(const absl::CivilMinute& m) {
  return absl::ToUnixNanos(absl::FromCivil(m, absl::UTCTimeZone()));
}
absl::CivilMinute Civil(int64_t ns) {
  return absl::ToCivilMinute(absl::FromUnixNanos(ns), absl::UTCTimeZone());
}

absl::CivilMinute Next(const std::string& expr, absl::CivilMinute from) {
  absl::StatusOr<CronExpr> e = CronExpr::Parse(expr);
  EXPECT_THAT(e, IsOk());
  absl::StatusOr<int64_t> n = e->NextAfter(Ns(from));
  EXPECT_THAT(n, IsOk());
  return Civil(*n);
}

TEST(CronTest, NextAfterIsStrictlyAfter) {
  EXPECT_EQ(Next("0 * * * *", absl::CivilMinute(2026, 1, 1, 0, 0)),
            absl::CivilMinute(2026, 1, 1, 1, 0));
  EXPECT_EQ(Next("* * * * *", absl::CivilMinute(2026, 1, 1, 0, 0)),
            absl::CivilMinute(2026, 1, 1, 0, 1));
  // Within a minute: still the next minute.
  absl::StatusOr<CronExpr> every = CronExpr::Parse("* * * * *");
  ASSERT_THAT(every, IsOk());
  EXPECT_EQ(*every->NextAfter(Ns(absl::CivilMinute(2026, 1, 1, 0, 0)) + 59'999'999'999),
            Ns(absl::CivilMinute(2026, 1, 1, 0, 1)));
}

TEST(CronTest, MonthEndsAndLeapYears) {
  EXPECT_EQ(Next("0 0 31 * *", absl::CivilMinute(2026, 4, 1, 0, 0)),
            absl::CivilMinute(2026, 5, 31, 0, 0));
  EXPECT_EQ(Next("0 0 29 2 *", absl::CivilMinute(2026, 3, 1, 0, 0)),
            absl::CivilMinute(2028, 2, 29, 0, 0));
  // 2100 is not a leap year: the next Feb 29 after 2096 is in 2104.
  EXPECT_EQ(Next("0 0 29 2 *", absl::CivilMinute(2096, 3, 1, 0, 0)),
            absl::CivilMinute(2104, 2, 29, 0, 0));
  EXPECT_EQ(Next("59 23 31 12 *", absl::CivilMinute(2026, 12, 31, 23, 59)),
            absl::CivilMinute(2027, 12, 31, 23, 59));
}

TEST(CronTest, DayOfMonthOrDayOfWeek) {
  // 2026-01-01 is a Thursday. Both restricted: the 1st OR a Monday.
  EXPECT_EQ(Next("0 0 1 * mon", absl::CivilMinute(2026, 1, 1, 0, 0)),
            absl::CivilMinute(2026, 1, 5, 0, 0));
  EXPECT_EQ(Next("0 0 1 * mon", absl::CivilMinute(2026, 1, 26, 0, 0)),
            absl::CivilMinute(2026, 2, 1, 0, 0));
  // Day of week `*`: only the 1st.
  EXPECT_EQ(Next("0 0 1 * *", absl::CivilMinute(2026, 1, 1, 0, 0)),
            absl::CivilMinute(2026, 2, 1, 0, 0));
  // `*/2` starts with `*`: both must match (odd days that are Mondays): Jan 5 is odd.
  EXPECT_EQ(Next("0 0 */2 * 1", absl::CivilMinute(2026, 1, 1, 0, 0)),
            absl::CivilMinute(2026, 1, 5, 0, 0));
  // 7 and sun are Sunday (Jan 4).
  EXPECT_EQ(Next("0 0 * * 7", absl::CivilMinute(2026, 1, 1, 0, 0)),
            absl::CivilMinute(2026, 1, 4, 0, 0));
  EXPECT_EQ(Next("0 0 * * SUN", absl::CivilMinute(2026, 1, 1, 0, 0)),
            absl::CivilMinute(2026, 1, 4, 0, 0));
}

TEST(CronTest, NamesStepsListsAndMacros) {
  EXPECT_EQ(Next("30 9 * jul mon-fri", absl::CivilMinute(2026, 1, 1, 0, 0)),
            absl::CivilMinute(2026, 7, 1, 9, 30));  // Wednesday
  EXPECT_EQ(Next("10-50/20 3,5 * * *", absl::CivilMinute(2026, 1, 1, 3, 30)),
            absl::CivilMinute(2026, 1, 1, 3, 50));
  EXPECT_EQ(Next("45/5 * * * *", absl::CivilMinute(2026, 1, 1, 0, 55)),
            absl::CivilMinute(2026, 1, 1, 1, 45));
  EXPECT_EQ(Next("@daily", absl::CivilMinute(2026, 1, 1, 0, 0)),
            absl::CivilMinute(2026, 1, 2, 0, 0));
  EXPECT_EQ(Next("@hourly", absl::CivilMinute(2026, 1, 1, 0, 0)),
            absl::CivilMinute(2026, 1, 1, 1, 0));
}

TEST(CronTest, Errors) {
  struct Case {
    const char* expr;
    const char* error;
  };
  for (const Case& c : std::vector<Case>{
           {"0 0 30 2 *", "never fires"},
           {"0 0 31 4,6,9,11 *", "never fires"},
           {"60 * * * *", "60 is not in 0..59"},
           {"* 24 * * *", "24 is not in 0..23"},
           {"* * 0 * *", "0 is not in 1..31"},
           {"* * * 13 *", "13 is not in 1..12"},
           {"* * * * 8", "8 is not in 0..7"},
           {"* * *", "has 3 fields"},
           {"5-1 * * * *", "backwards"},
           {"*/0 * * * *", "step \"0\""},
           {"x * * * *", "\"x\" is not a number"},
           {"* * * foo *", "\"foo\" is not a number or name"},
           {"1,,2 * * * *", "is not a number"},
           {"@often", "unknown macro"},
       }) {
    absl::StatusOr<CronExpr> e = CronExpr::Parse(c.expr);
    ASSERT_FALSE(e.ok()) << c.expr;
    EXPECT_THAT(e.status().message(), HasSubstr(c.error)) << c.expr;
  }
}

// A work-hours schedule over a month, against a reference written from the expression's meaning.
TEST(CronTest, WorkHoursEveryQuarterMatchesBruteForceOverAMonth) {
  absl::StatusOr<CronExpr> e = CronExpr::Parse("*/15 9-17 * * 1-5");
  ASSERT_THAT(e, IsOk());
  const absl::CivilMinute begin(2026, 1, 1, 0, 0);
  const absl::CivilMinute end(2026, 2, 1, 0, 0);
  std::vector<absl::CivilMinute> expected;
  for (absl::CivilMinute m = begin + 1; m < end; ++m) {
    const absl::Weekday wd = absl::GetWeekday(absl::CivilDay(m));
    const bool weekday = wd != absl::Weekday::saturday && wd != absl::Weekday::sunday;
    if (m.minute() % 15 == 0 && m.hour() >= 9 && m.hour() <= 17 && weekday) {
      expected.push_back(m);
    }
  }
  std::vector<absl::CivilMinute> got;
  for (int64_t t = Ns(begin);;) {
    t = *e->NextAfter(t);
    if (Civil(t) >= end) break;
    got.push_back(Civil(t));
  }
  EXPECT_EQ(got, expected);
  EXPECT_EQ(got.size(), 22u * 9 * 4);  // 22 weekdays, 9 hours, 4 quarters
}

std::string RandomField(std::mt19937_64& rng, int lo, int hi) {
  auto pick = [&](int a, int b) { return std::uniform_int_distribution<int>(a, b)(rng); };
  switch (pick(0, 5)) {
    case 0:
      return "*";
    case 1:
      return absl::StrCat("*/", pick(1, hi - lo + 1));
    case 2:
      return absl::StrCat(pick(lo, hi));
    case 3: {
      const int a = pick(lo, hi);
      return absl::StrCat(a, "-", pick(a, hi));
    }
    case 4: {
      const int a = pick(lo, hi);
      return absl::StrCat(a, "-", pick(a, hi), "/", pick(1, 5));
    }
    default:
      return absl::StrCat(pick(lo, hi), ",", pick(lo, hi), ",", pick(lo, hi));
  }
}

// NextAfter against a minute-by-minute scan with Matches over random expressions and times.
TEST(CronTest, RandomExpressionsMatchBruteForce) {
  std::mt19937_64 rng(20260101);
  constexpr int kLimitMinutes = 40 * 24 * 60;
  int checked = 0;
  for (int iter = 0; iter < 150; ++iter) {
    const std::string expr = absl::StrCat(RandomField(rng, 0, 59), " ", RandomField(rng, 0, 23),
                                          " ", RandomField(rng, 1, 31), " ",
                                          RandomField(rng, 1, 12), " ", RandomField(rng, 0, 7));
    absl::StatusOr<CronExpr> e = CronExpr::Parse(expr);
    if (!e.ok()) {
      EXPECT_THAT(e.status().message(), HasSubstr("never fires")) << expr;
      continue;
    }
    const int64_t start =
        Ns(absl::CivilMinute(2026, 1, 1, 0, 0)) +
        std::uniform_int_distribution<int64_t>(0, int64_t{4} * 365 * 86'400)(rng) * 1'000'000'000;
    int64_t t = start;
    for (int hop = 0; hop < 3; ++hop) {
      const absl::CivilMinute from = Civil(t);
      absl::CivilMinute brute = from + 1;
      int scanned = 0;
      while (!e->Matches(brute) && scanned < kLimitMinutes) ++brute, ++scanned;
      const absl::StatusOr<int64_t> next = e->NextAfter(t);
      ASSERT_THAT(next, IsOk()) << expr;
      if (scanned == kLimitMinutes) {
        EXPECT_GT(Civil(*next), from + kLimitMinutes) << expr;
        break;
      }
      ASSERT_EQ(Civil(*next), brute) << expr << " after " << from;
      ++checked;
      t = *next;
    }
  }
  EXPECT_GT(checked, 150);
}

}  // namespace
}  // namespace profctl::coordinator::schedule
