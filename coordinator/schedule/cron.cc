#include "coordinator/schedule/cron.h"

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/time.h"
#include "common/status_macros.h"

namespace profctl::coordinator::schedule {
namespace {

struct FieldSpec {
  const char* name;
  int min;
  int max;
  // Lower-case three-letter names for min, min+1, ... (null: none).
  const std::array<const char*, 12>* names;
};

constexpr std::array<const char*, 12> kMonthNames = {"jan", "feb", "mar", "apr", "may", "jun",
                                                     "jul", "aug", "sep", "oct", "nov", "dec"};
constexpr std::array<const char*, 12> kWeekdayNames = {
    "sun", "mon", "tue", "wed", "thu", "fri", "sat", nullptr, nullptr, nullptr, nullptr, nullptr};

constexpr std::array<FieldSpec, 5> kFields = {{
    {"minute", 0, 59, nullptr},
    {"hour", 0, 23, nullptr},
    {"day of month", 1, 31, nullptr},
    {"month", 1, 12, &kMonthNames},
    {"day of week", 0, 7, &kWeekdayNames},
}};

// Eight years of days: every day of month of every month (Feb 29 included, across a skipped
// century leap year) and every weekday occurs inside it.
constexpr int kMaxSearchDays = 8 * 366 + 1;
constexpr size_t kMaxCronChars = 256;  // a cron expression is a few dozen characters

absl::StatusOr<int> ParseValue(const FieldSpec& f, absl::string_view s, absl::string_view field) {
  int v = 0;
  if (absl::SimpleAtoi(s, &v)) {
    if (v < f.min || v > f.max) {
      return absl::InvalidArgumentError(absl::StrCat("cron ", f.name, " field \"", field, "\": ", v,
                                                     " is not in ", f.min, "..", f.max));
    }
    return v;
  }
  if (f.names != nullptr) {
    const std::string lower = absl::AsciiStrToLower(s);
    for (size_t i = 0; i < f.names->size(); ++i) {
      if ((*f.names)[i] != nullptr && lower == (*f.names)[i]) return f.min + static_cast<int>(i);
    }
  }
  return absl::InvalidArgumentError(absl::StrCat("cron ", f.name, " field \"", field, "\": \"", s,
                                                 "\" is not a ",
                                                 f.names != nullptr ? "number or name" : "number"));
}

// Sets the bits of `field` in `bits` (index = value). Returns whether the field starts with '*'.
absl::StatusOr<bool> ParseField(const FieldSpec& f, absl::string_view field,
                                std::vector<bool>* bits) {
  bits->assign(static_cast<size_t>(f.max) + 1, false);
  if (field.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("cron ", f.name, " field is empty"));
  }
  for (absl::string_view part : absl::StrSplit(field, ',')) {
    absl::string_view range = part;
    int step = 1;
    if (const size_t slash = part.find('/'); slash != absl::string_view::npos) {
      range = part.substr(0, slash);
      const absl::string_view step_text = part.substr(slash + 1);
      if (!absl::SimpleAtoi(step_text, &step) || step < 1 || step > f.max + 1) {
        return absl::InvalidArgumentError(absl::StrCat("cron ", f.name, " field \"", field,
                                                       "\": step \"", step_text, "\" is not in 1..",
                                                       f.max + 1));
      }
    }
    int lo = f.min;
    int hi = f.max;
    if (range == "*") {
      // Whole range.
    } else if (const size_t dash = range.find('-'); dash != absl::string_view::npos) {
      PROFCTL_ASSIGN_OR_RETURN(lo, ParseValue(f, range.substr(0, dash), field));
      PROFCTL_ASSIGN_OR_RETURN(hi, ParseValue(f, range.substr(dash + 1), field));
      if (lo > hi) {
        return absl::InvalidArgumentError(absl::StrCat("cron ", f.name, " field \"", field,
                                                       "\": range ", range, " is backwards"));
      }
    } else {
      PROFCTL_ASSIGN_OR_RETURN(lo, ParseValue(f, range, field));
      // "a/n" runs from a to the maximum; a bare "a" is just a.
      if (step == 1 && !absl::StrContains(part, '/')) hi = lo;
    }
    for (int v = lo; v <= hi; v += step) (*bits)[static_cast<size_t>(v)] = true;
  }
  return field.front() == '*';
}

absl::string_view ExpandMacro(absl::string_view text) {
  if (text == "@yearly" || text == "@annually") return "0 0 1 1 *";
  if (text == "@monthly") return "0 0 1 * *";
  if (text == "@weekly") return "0 0 * * 0";
  if (text == "@daily" || text == "@midnight") return "0 0 * * *";
  if (text == "@hourly") return "0 * * * *";
  return text;
}

}  // namespace

absl::StatusOr<CronExpr> CronExpr::Parse(absl::string_view text) {
  if (text.size() > kMaxCronChars) {
    return absl::InvalidArgumentError(absl::StrCat("cron expression of ", text.size(),
                                                   " bytes; at most ", kMaxCronChars, " are read"));
  }
  const absl::string_view trimmed = absl::StripAsciiWhitespace(text);
  const absl::string_view expanded = ExpandMacro(trimmed);
  if (!expanded.empty() && expanded.front() == '@') {
    return absl::InvalidArgumentError(
        absl::StrCat("cron \"", trimmed,
                     "\": unknown macro (known: @yearly, @monthly, @weekly, @daily, "
                     "@hourly)"));
  }
  const std::vector<absl::string_view> fields =
      absl::StrSplit(expanded, absl::ByAnyChar(" \t"), absl::SkipEmpty());
  if (fields.size() != kFields.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("cron \"", trimmed, "\" has ", fields.size(),
                     " fields; expected 5: minute hour day-of-month month day-of-week"));
  }
  CronExpr e;
  e.text_ = std::string(trimmed);
  std::vector<bool> bits;
  for (size_t i = 0; i < kFields.size(); ++i) {
    PROFCTL_ASSIGN_OR_RETURN(const bool star, ParseField(kFields[i], fields[i], &bits));
    for (size_t v = 0; v < bits.size(); ++v) {
      if (!bits[v]) continue;
      switch (i) {
        case 0:
          e.minutes_.set(v);
          break;
        case 1:
          e.hours_.set(v);
          break;
        case 2:
          e.days_.set(v);
          break;
        case 3:
          e.months_.set(v);
          break;
        default:
          e.weekdays_.set(v % 7);
          break;  // 7 is Sunday too
      }
    }
    if (i == 2) e.days_star_ = star;
    if (i == 4) e.weekdays_star_ = star;
  }
  if (!e.NextAfter(0).ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("cron \"", trimmed, "\" never fires (no such day in any month it allows)"));
  }
  return e;
}

bool CronExpr::DayMatches(absl::CivilDay day) const {
  if (!months_.test(static_cast<size_t>(day.month()))) return false;
  const bool dom = days_.test(static_cast<size_t>(day.day()));
  // absl::Weekday is monday = 0 ... sunday = 6; cron's Sunday is 0.
  const int wd = (static_cast<int>(absl::GetWeekday(day)) + 1) % 7;
  const bool dow = weekdays_.test(static_cast<size_t>(wd));
  if (!days_star_ && !weekdays_star_) return dom || dow;
  return dom && dow;
}

bool CronExpr::Matches(absl::CivilMinute minute) const {
  return minutes_.test(static_cast<size_t>(minute.minute())) &&
         hours_.test(static_cast<size_t>(minute.hour())) && DayMatches(absl::CivilDay(minute));
}

absl::StatusOr<int64_t> CronExpr::NextAfter(int64_t wall_ns) const {
  const absl::TimeZone utc = absl::UTCTimeZone();
  const absl::CivilMinute start = absl::ToCivilMinute(absl::FromUnixNanos(wall_ns), utc) + 1;
  absl::CivilDay day(start);
  for (int i = 0; i < kMaxSearchDays; ++i, ++day) {
    if (!DayMatches(day)) continue;
    const int first_hour = i == 0 ? start.hour() : 0;
    for (int h = first_hour; h < 24; ++h) {
      if (!hours_.test(static_cast<size_t>(h))) continue;
      const int first_minute = (i == 0 && h == start.hour()) ? start.minute() : 0;
      for (int m = first_minute; m < 60; ++m) {
        if (!minutes_.test(static_cast<size_t>(m))) continue;
        const absl::CivilMinute hit(day.year(), day.month(), day.day(), h, m);
        return absl::ToUnixNanos(absl::FromCivil(hit, utc));
      }
    }
  }
  return absl::NotFoundError(
      absl::StrCat("cron \"", text_, "\" does not fire within ", kMaxSearchDays, " days"));
}

}  // namespace profctl::coordinator::schedule
