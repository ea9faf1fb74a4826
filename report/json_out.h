// Text helpers of the report files (pod_step_breakdown.json/.csv, tool_<name>.json/.csv).
// JsonOut: a small streaming JSON writer: commas and nesting handled; containers opened at depth
// <= pretty_depth put each element on its own indented line, deeper ones are written inline.
// Times are written exactly from integer nanoseconds (no floating point), rounded half away from
// zero. AppendCsvField: one RFC 4180 field, control characters written as text.
#ifndef PROFCTL_REPORT_JSON_OUT_H_
#define PROFCTL_REPORT_JSON_OUT_H_

#include <charconv>
#include <cmath>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"
#include "common/json_util.h"

namespace profctl::report {

// RFC 4180: a field with a comma, quote, CR or LF is quoted, its quotes doubled. Other control
// characters (C0 but tab, CR and LF; DEL; C1 encoded in UTF-8, e.g. U+009B, a terminal's CSI) are
// written as the text \xNN per byte, so a hostile name printed with --csv cannot drive the
// terminal that shows it.
inline bool CsvControlByte(absl::string_view s, size_t i) {
  const auto c = static_cast<unsigned char>(s[i]);
  if (c < 0x20) return c != '\t' && c != '\r' && c != '\n';
  if (c == 0x7f) return true;
  if (c == 0xc2 && i + 1 < s.size()) {
    const auto next = static_cast<unsigned char>(s[i + 1]);
    return next >= 0x80 && next <= 0x9f;
  }
  return false;
}

inline void AppendCsvField(std::string* out, absl::string_view s) {
  bool control = false;
  for (size_t i = 0; i < s.size() && !control; ++i) control = CsvControlByte(s, i);
  if (control) {
    std::string escaped;
    escaped.reserve(s.size() + 8);
    for (size_t i = 0; i < s.size(); ++i) {
      if (CsvControlByte(s, i)) {
        const size_t n = static_cast<unsigned char>(s[i]) == 0xc2 ? 2 : 1;
        for (size_t k = 0; k < n; ++k) {
          absl::StrAppendFormat(&escaped, "\\x%02x", static_cast<unsigned char>(s[i + k]));
        }
        i += n - 1;
      } else {
        escaped.push_back(s[i]);
      }
    }
    AppendCsvField(out, escaped);
    return;
  }
  if (s.find_first_of(",\"\r\n") == absl::string_view::npos) {
    out->append(s.data(), s.size());
    return;
  }
  out->push_back('"');
  for (const char c : s) {
    if (c == '"') out->push_back('"');
    out->push_back(c);
  }
  out->push_back('"');
}

class JsonOut {
 public:
  explicit JsonOut(int pretty_depth) : pretty_depth_(pretty_depth) {}

  void BeginObject() { Open('{'); }
  void EndObject() { Close('}'); }
  void BeginArray() { Open('['); }
  void EndArray() { Close(']'); }
  void Key(absl::string_view key) {
    BeginElement();
    AppendJsonString(&out_, key);
    out_.append(Pretty() ? ": " : ":");
    after_key_ = true;
  }
  void String(absl::string_view s) {
    BeforeValue();
    AppendJsonString(&out_, s);
  }
  void StringOrNull(absl::string_view s) {
    if (s.empty()) {
      Null();
    } else {
      String(s);
    }
  }
  void Int(int64_t v) {
    BeforeValue();
    absl::StrAppend(&out_, v);
  }
  void Uint(uint64_t v) {
    BeforeValue();
    absl::StrAppend(&out_, v);
  }
  void Bool(bool v) {
    BeforeValue();
    out_.append(v ? "true" : "false");
  }
  void Null() {
    BeforeValue();
    out_.append("null");
  }
  // `decimals` places; NaN and infinities are written as null.
  void Double(double v, int decimals = 3) {
    BeforeValue();
    if (!std::isfinite(v)) {
      out_.append("null");
      return;
    }
    absl::StrAppendFormat(&out_, "%.*f", decimals, v);
  }
  // Nanoseconds as milliseconds or microseconds with 3 decimals ("12.346", "-0.500", "0.000").
  void Ms(int64_t ns) { Fixed(ns, 1'000'000); }
  void Us(int64_t ns) { Fixed(ns, 1'000); }

  // The text, with a final newline. The writer is empty afterwards.
  std::string Take() {
    out_.push_back('\n');
    return std::move(out_);
  }

  // "12.346": `ns` in units of `unit` ns (a multiple of 1000) with 3 decimals.
  static std::string FormatFixed(int64_t ns, int64_t unit) {
    std::string out;
    AppendFixed(&out, ns, unit);
    return out;
  }
  // The same appended to `out`, without a format string or a temporary: a 1,024-host breakdown
  // writes hundreds of thousands of these (absl::StrFormat was ~3 % of `profctl analyze` there).
  static void AppendFixed(std::string* out, int64_t ns, int64_t unit) {
    const uint64_t step = static_cast<uint64_t>(unit / 1000);
    uint64_t mag = static_cast<uint64_t>(ns);
    if (ns < 0) mag = ~mag + 1;  // |ns|, also for INT64_MIN
    const uint64_t q = mag / step + (mag % step * 2 >= step ? 1 : 0);
    if (q == 0) {
      out->append("0.000");
      return;
    }
    char buf[32];  // "-" + 20 digits + ".000"
    char* p = buf;
    if (ns < 0) *p++ = '-';
    p = std::to_chars(p, buf + sizeof(buf), q / 1000).ptr;
    const auto frac = static_cast<unsigned>(q % 1000);
    *p++ = '.';
    *p++ = static_cast<char>('0' + frac / 100);
    *p++ = static_cast<char>('0' + frac / 10 % 10);
    *p++ = static_cast<char>('0' + frac % 10);
    out->append(buf, static_cast<size_t>(p - buf));
  }

 private:
  void Fixed(int64_t ns, int64_t unit) {
    BeforeValue();
    AppendFixed(&out_, ns, unit);
  }
  // Depth of the container the next element goes into.
  int Depth() const { return static_cast<int>(first_.size()); }
  bool Pretty() const { return Depth() <= pretty_depth_; }

  void Newline(int depth) {
    out_.push_back('\n');
    out_.append(2 * static_cast<size_t>(depth), ' ');
  }
  void BeginElement() {
    if (first_.empty()) return;
    if (!first_.back()) out_.push_back(',');
    first_.back() = false;
    if (Pretty()) Newline(Depth());
  }
  void BeforeValue() {
    if (after_key_) {
      after_key_ = false;
      return;
    }
    BeginElement();
  }
  void Open(char c) {
    BeforeValue();
    out_.push_back(c);
    first_.push_back(true);
  }
  void Close(char c) {
    const bool empty = first_.back();
    const bool pretty = Pretty();
    first_.pop_back();
    if (!empty && pretty) Newline(Depth());
    out_.push_back(c);
  }

  int pretty_depth_;
  std::string out_;
  std::vector<bool> first_;  // per open container: no element yet
  bool after_key_ = false;
};

// A file `profctl analyze` could not analyse, and why (the reader's message, without the path).
struct FailedFile {
  std::string path;
  std::string error;
};

// `"failed_files": [{"path": ..., "error": ...}, ...]`, in the order given.
inline void WriteFailedFiles(JsonOut& j, const std::vector<FailedFile>& files) {
  j.Key("failed_files");
  j.BeginArray();
  for (const FailedFile& f : files) {
    j.BeginObject();
    j.Key("path");
    j.String(f.path);
    j.Key("error");
    j.String(f.error);
    j.EndObject();
  }
  j.EndArray();
}

}  // namespace profctl::report

#endif  // PROFCTL_REPORT_JSON_OUT_H_
