#include "analysis/readers/kineto_json.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace profctl::analysis::kineto_json {
namespace {

constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();

}  // namespace

bool ScaledDecimal(absl::string_view text, int scale, int64_t* out) {
  constexpr int kMaxDigits = 36;  // 10^37 < 2^127
  size_t i = 0;
  const size_t n = text.size();
  bool negative = false;
  if (i < n && (text[i] == '-' || text[i] == '+')) negative = text[i++] == '-';
  __int128 mantissa = 0;
  int digits = 0;
  int exp10 = scale;
  bool any = false;
  for (; i < n && absl::ascii_isdigit(static_cast<unsigned char>(text[i])); ++i) {
    any = true;
    if (digits < kMaxDigits) {
      mantissa = mantissa * 10 + (text[i] - '0');
      if (mantissa != 0) ++digits;
    } else {
      ++exp10;  // a digit beyond the precision kept: the value is far out of range anyway
    }
  }
  if (i < n && text[i] == '.') {
    for (++i; i < n && absl::ascii_isdigit(static_cast<unsigned char>(text[i])); ++i) {
      any = true;
      if (digits < kMaxDigits) {
        mantissa = mantissa * 10 + (text[i] - '0');
        if (mantissa != 0) ++digits;
        --exp10;
      }
    }
  }
  if (!any) return false;
  if (i < n && (text[i] == 'e' || text[i] == 'E')) {
    ++i;
    bool exp_negative = false;
    if (i < n && (text[i] == '-' || text[i] == '+')) exp_negative = text[i++] == '-';
    int e = 0;
    bool exp_any = false;
    for (; i < n && absl::ascii_isdigit(static_cast<unsigned char>(text[i])); ++i) {
      exp_any = true;
      e = std::min(e * 10 + (text[i] - '0'), 10000);
    }
    if (!exp_any) return false;
    exp10 += exp_negative ? -e : e;
  }
  if (i != n) return false;
  if (mantissa != 0) {
    if (exp10 > 0) {
      for (int k = 0; k < exp10; ++k) {
        mantissa *= 10;
        if (mantissa > kInt64Max) return false;
      }
    } else if (exp10 < 0) {
      if (-exp10 > kMaxDigits + 1) {
        mantissa = 0;
      } else {
        __int128 divisor = 1;
        for (int k = 0; k < -exp10; ++k) divisor *= 10;
        const __int128 rest = mantissa % divisor;
        mantissa /= divisor;
        if (2 * rest >= divisor) ++mantissa;
      }
    }
  }
  if (mantissa > kInt64Max) return false;
  *out = negative ? -static_cast<int64_t>(mantissa) : static_cast<int64_t>(mantissa);
  return true;
}

Cat CategoryOf(absl::string_view cat) {
  struct Entry {
    absl::string_view name;
    Cat cat;
  };
  static constexpr Entry kCategories[] = {
      {"kernel", Cat::kKernel},
      {"gpu_memcpy", Cat::kMemcpy},
      {"memcpy", Cat::kMemcpy},
      {"gpu_memset", Cat::kMemset},
      {"memset", Cat::kMemset},
      {"cpu_op", Cat::kStepHost},
      {"operator", Cat::kStepHost},
      {"user_annotation", Cat::kStepHost},
      {"cuda_runtime", Cat::kHost},
      {"cuda_driver", Cat::kHost},
      {"runtime", Cat::kHost},
      {"python_function", Cat::kPython},
      {"gpu_user_annotation", Cat::kIgnored},
      {"cuda_sync", Cat::kIgnored},
      {"trace", Cat::kIgnored},
      {"overhead", Cat::kIgnored},
      {"cpu_instant_event", Cat::kIgnored},
      {"ac2g", Cat::kIgnored},
      {"fwdbwd", Cat::kIgnored},
      {"cuda_profiler_range", Cat::kIgnored},
      {"external_correlation", Cat::kIgnored},
  };
  for (const Entry& e : kCategories) {
    if (absl::EqualsIgnoreCase(cat, e.name)) return e.cat;
  }
  if (absl::EndsWithIgnoreCase(cat, "_runtime") || absl::EndsWithIgnoreCase(cat, "_driver")) {
    return Cat::kHost;  // privateuse1_runtime, xpu_runtime, mtia_runtime, ...
  }
  return Cat::kUnknown;
}

absl::string_view KeyName(Field k) {
  switch (k) {
    case Field::kPh:
      return "ph";
    case Field::kCat:
      return "cat";
    case Field::kName:
      return "name";
    case Field::kTs:
      return "ts";
    case Field::kDur:
      return "dur";
    case Field::kPid:
      return "pid";
    case Field::kTid:
      return "tid";
    case Field::kArgs:
      return "args";
    case Field::kDevice:
      return "args.device";
    default:
      return "?";
  }
}

absl::string_view TypeName(JsonType t) {
  switch (t) {
    case JsonType::kNull:
      return "null";
    case JsonType::kBool:
      return "a boolean";
    case JsonType::kNumber:
      return "a number";
    case JsonType::kString:
      return "a string";
    case JsonType::kObject:
      return "an object";
    case JsonType::kArray:
      return "an array";
  }
  return "?";
}

LimitBreach LimitScanner::Feed(absl::string_view piece) {
  if (breach_.kind != LimitBreach::Kind::kNone) return breach_;
  const char* const begin = piece.data();
  const char* const end = begin + piece.size();
  const uint64_t base = offset_;
  offset_ += piece.size();
  const auto at = [&](const char* p) { return base + static_cast<uint64_t>(p - begin); };
  const char* p = begin;
  while (p < end) {
    if (in_string_) {
      if (escaped_) {  // the byte after a backslash is never the closing quote
        escaped_ = false;
        ++p;
        continue;
      }
      // The first unescaped quote: each quote and each backslash is looked at once.
      const char* quote = nullptr;
      for (;;) {
        quote = static_cast<const char*>(std::memchr(p, '"', end - p));
        const char* const stop = quote == nullptr ? end : quote;
        const char* backslash = static_cast<const char*>(std::memchr(p, '\\', stop - p));
        while (backslash != nullptr && backslash + 1 < stop) {
          p = backslash + 2;  // skip the escaped byte
          backslash = static_cast<const char*>(std::memchr(p, '\\', stop - p));
        }
        if (backslash == nullptr) break;  // `quote` (or the piece's end) is unescaped
        if (backslash + 1 == end) {       // the escaped byte is in the next piece
          escaped_ = true;
          quote = nullptr;
          break;
        }
        p = quote + 1;  // an escaped quote: look on after it
      }
      if (quote == nullptr) break;  // the string goes on in the next piece
      in_string_ = false;
      if (at(quote) - string_open_ - 1 > max_string_bytes_) {
        breach_ = {LimitBreach::Kind::kString, static_cast<size_t>(string_open_),
                   static_cast<size_t>(string_line_), static_cast<size_t>(string_column_)};
        return breach_;
      }
      p = quote + 1;
      continue;
    }
    const char c = *p;
    if (c == '"') {
      in_string_ = true;
      string_open_ = at(p);
      string_line_ = newlines_ + 1;
      string_column_ = string_open_ - line_start_ + 1;
    } else if (c == '[' || c == '{') {
      if (++depth_ > max_depth_) {
        const uint64_t o = at(p);
        breach_ = {LimitBreach::Kind::kDepth, static_cast<size_t>(o),
                   static_cast<size_t>(newlines_ + 1), static_cast<size_t>(o - line_start_ + 1)};
        return breach_;
      }
    } else if (c == ']' || c == '}') {
      --depth_;
    } else if (c == '\n') {
      ++newlines_;
      line_start_ = at(p) + 1;
    }
    ++p;
  }
  // An open string longer than the cap already (or unterminated at the document's end).
  if (in_string_ && offset_ - string_open_ - 1 > max_string_bytes_) {
    breach_ = {LimitBreach::Kind::kString, static_cast<size_t>(string_open_),
               static_cast<size_t>(string_line_), static_cast<size_t>(string_column_)};
  }
  return breach_;
}

LimitBreach ScanLimits(absl::string_view text, int max_depth, uint64_t max_string_bytes) {
  return LimitScanner(max_depth, max_string_bytes).Feed(text);
}

std::string Position(absl::string_view text, size_t offset) {
  offset = std::min(offset, text.size());
  const absl::string_view before = text.substr(0, offset);
  const size_t line = static_cast<size_t>(std::count(before.begin(), before.end(), '\n')) + 1;
  const size_t last_newline = before.rfind('\n');
  const size_t column =
      last_newline == absl::string_view::npos ? offset + 1 : offset - last_newline;
  return absl::StrCat("offset ", offset, " (line ", line, ", column ", column, ")");
}

std::string Position(size_t offset, size_t line, size_t column) {
  return absl::StrCat("offset ", offset, " (line ", line, ", column ", column, ")");
}

namespace {

absl::Status BreachError(const LimitBreach& breach, const std::string& where, int max_depth,
                         uint64_t max_string_bytes) {
  switch (breach.kind) {
    case LimitBreach::Kind::kNone:
      return absl::OkStatus();
    case LimitBreach::Kind::kDepth:
      return absl::InvalidArgumentError(
          absl::StrCat("arrays/objects nested deeper than ", max_depth, " levels at ", where,
                       ": refused (the nesting cap; a trace nests a few levels)"));
    case LimitBreach::Kind::kString:
      return absl::InvalidArgumentError(
          absl::StrCat("a string longer than ", max_string_bytes, " bytes at ", where,
                       ": refused (the string cap, --max-string-kb)"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status LimitError(const LimitBreach& breach, int max_depth, uint64_t max_string_bytes) {
  return BreachError(breach, Position(breach.offset, breach.line, breach.column), max_depth,
                     max_string_bytes);
}

absl::Status LimitError(const LimitBreach& breach, absl::string_view text, int max_depth,
                        uint64_t max_string_bytes) {
  if (breach.kind == LimitBreach::Kind::kNone) return absl::OkStatus();
  return BreachError(breach, Position(text, breach.offset), max_depth, max_string_bytes);
}

}  // namespace profctl::analysis::kineto_json
