#include "inject/step_names.h"

#include <cstddef>

namespace profctl::inject {
namespace {

// RE2's \s (Perl class, ASCII): [\t\n\f\r ].
bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\f' || c == '\r'; }
bool IsDigit(char c) { return c >= '0' && c <= '9'; }
bool IsAsciiLetter(char c) {
  const char lower = static_cast<char>(c | 0x20);
  return lower >= 'a' && lower <= 'z';
}
bool IsSeparator(char c) { return c == '#' || c == ':' || c == '_' || c == '=' || c == '-'; }

// The two non-ASCII characters that RE2's UTF-8 case folding maps onto ASCII letters.
constexpr std::string_view kLongS = "\xC5\xBF";       // U+017F, folds to 's'
constexpr std::string_view kKelvin = "\xE2\x84\xAA";  // U+212A, folds to 'k'

bool EndsWithAt(std::string_view name, size_t end, std::string_view suffix) {
  return end >= suffix.size() && name.substr(end - suffix.size(), suffix.size()) == suffix;
}

// Whether `word` (lowercase ASCII letters) ends at name[end], compared as RE2's (?i) does; if so
// moves *end to where it starts.
bool EndsWithWord(std::string_view name, std::string_view word, size_t* end) {
  size_t at = *end;
  for (size_t i = word.size(); i-- > 0;) {
    const char w = word[i];
    if (at > 0 && static_cast<char>(name[at - 1] | 0x20) == w) {  // only letters fold onto letters
      --at;
    } else if (w == 's' && EndsWithAt(name, at, kLongS)) {
      at -= kLongS.size();
    } else if (w == 'k' && EndsWithAt(name, at, kKelvin)) {
      at -= kKelvin.size();
    } else {
      return false;
    }
  }
  *end = at;
  return true;
}

// (?:^|[^a-z]) under (?i), right before name[at].
bool BoundaryBefore(std::string_view name, size_t at) {
  if (at == 0) return true;
  if (IsAsciiLetter(name[at - 1])) return false;
  return !EndsWithAt(name, at, kLongS) && !EndsWithAt(name, at, kKelvin);
}

}  // namespace

bool MatchStepName(std::string_view name, int64_t* step_num) {
  // The pattern is anchored at the end: read it backwards. \s*$
  size_t end = name.size();
  while (end > 0 && IsSpace(name[end - 1])) --end;
  // (\d+): the whole run of digits (nothing before it in the pattern takes digits).
  const size_t digits_end = end;
  while (end > 0 && IsDigit(name[end - 1])) --end;
  const size_t digits_begin = end;
  if (digits_begin == digits_end) return false;
  // \s*[#:_=-]?\s*
  while (end > 0 && IsSpace(name[end - 1])) --end;
  if (end > 0 && IsSeparator(name[end - 1])) {
    --end;
    while (end > 0 && IsSpace(name[end - 1])) --end;
  }
  // step(?:marker)?: a name ending in "stepmarker" can only match with the marker.
  size_t keyword = end;
  if (!(EndsWithWord(name, "marker", &keyword) && EndsWithWord(name, "step", &keyword))) {
    keyword = end;
    if (!EndsWithWord(name, "step", &keyword)) return false;
  }
  // (?:^|[^a-z])(?:profiler)?
  size_t profiler = keyword;
  const bool bounded =
      (EndsWithWord(name, "profiler", &profiler) && BoundaryBefore(name, profiler)) ||
      BoundaryBefore(name, keyword);
  if (!bounded) return false;
  // Group 1 as an int64: leading zeros are free, more than 19 significant digits or a value
  // over INT64_MAX is no number (RE2's parse fails too).
  size_t first = digits_begin;
  while (first + 1 < digits_end && name[first] == '0') ++first;
  if (digits_end - first > 19) return false;
  uint64_t value = 0;
  for (size_t i = first; i < digits_end; ++i) {
    value = value * 10 + static_cast<uint64_t>(name[i] - '0');
  }
  if (value > static_cast<uint64_t>(INT64_MAX)) return false;
  if (step_num != nullptr) *step_num = static_cast<int64_t>(value);
  return true;
}

}  // namespace profctl::inject
