// Five-field cron expressions ("*/15 9-17 * * 1-5"), evaluated in UTC.
//
// Fields: minute (0-59), hour (0-23), day of month (1-31), month (1-12 or jan-dec), day of week
// (0-7 or sun-sat; 0 and 7 are Sunday). Each field is `*`, a value, a range `a-b`, a step `*/n`,
// `a-b/n` or `a/n` (a to the field's maximum), or a comma list of those. Names are
// case-insensitive. Macros: @yearly (@annually), @monthly, @weekly, @daily (@midnight), @hourly.
//
// Day of month and day of week follow classic (Vixie) cron: when both fields are restricted
// (neither starts with `*`), a day matches if EITHER matches ("0 0 1 * mon" = the 1st and every
// Monday); otherwise both must match (a `*` field matches every day).
//
// Time zone: always UTC. A coordinator serves hosts in many zones and its sessions are named in
// UTC; UTC has no daylight-saving gaps or repeated hours, so every expression fires exactly once
// per matching minute.
#ifndef PROFCTL_COORDINATOR_SCHEDULE_CRON_H_
#define PROFCTL_COORDINATOR_SCHEDULE_CRON_H_

#include <bitset>
#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/civil_time.h"

namespace profctl::coordinator::schedule {

class CronExpr {
 public:
  // INVALID_ARGUMENT naming the bad field, or saying the expression never fires
  // ("0 0 30 2 *").
  static absl::StatusOr<CronExpr> Parse(absl::string_view text);

  // The first matching minute strictly after `wall_ns` (ns since the Unix epoch, UTC), in ns.
  // The search is bounded (eight years of days: a Feb 29 always falls inside); NOT_FOUND past
  // it, which Parse rules out for every expression it accepts.
  absl::StatusOr<int64_t> NextAfter(int64_t wall_ns) const;

  // Whether `minute` (UTC) matches: the reference NextAfter is tested against.
  bool Matches(absl::CivilMinute minute) const;

  const std::string& text() const { return text_; }

 private:
  CronExpr() = default;
  bool DayMatches(absl::CivilDay day) const;

  std::string text_;
  std::bitset<60> minutes_;
  std::bitset<24> hours_;
  std::bitset<32> days_;     // 1..31
  std::bitset<13> months_;   // 1..12
  std::bitset<7> weekdays_;  // 0 = Sunday
  bool days_star_ = false;
  bool weekdays_star_ = false;
};

}  // namespace profctl::coordinator::schedule

#endif  // PROFCTL_COORDINATOR_SCHEDULE_CRON_H_
