// The vocabulary of a Kineto (PyTorch profiler) trace as kineto_reader.cc reads it: exact
// decimal numbers, what an event's category means, the keys the reader knows and JSON value
// types, with their names for warnings. Internal to analysis/readers: users include
// kineto_reader.h.
#ifndef PROFCTL_ANALYSIS_READERS_KINETO_JSON_H_
#define PROFCTL_ANALYSIS_READERS_KINETO_JSON_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace profctl::analysis::kineto_json {

// `text` (a JSON number: -?digits[.digits][(e|E)[+-]digits]) times 10^scale, rounded to the
// nearest integer (halves away from zero), exactly: no double in between. False when it is not a
// number or the result does not fit in int64.
bool ScaledDecimal(absl::string_view text, int scale, int64_t* out);

// What a Kineto category means here.
enum class Cat : uint8_t {
  kKernel,
  kMemcpy,
  kMemset,
  kStepHost,  // cpu_op, user_annotation: host ops that may be step markers
  kHost,      // runtime / driver calls
  kPython,    // python_function
  kIgnored,   // known, not activity
  kUnknown,
};

// The meaning of category `cat` (case-insensitive; `*_runtime`/`*_driver` are kHost; kUnknown when
// not known).
Cat CategoryOf(absl::string_view cat);

// The keys of the document, of an event and of its args the reader acts on.
enum class Field : uint8_t {
  kNone,
  kOther,
  kTraceEvents,
  kDistInfo,
  kBaseTime,
  kPh,
  kCat,
  kName,
  kTs,
  kDur,
  kPid,
  kTid,
  kArgs,
  kDevice,
  kRank,
  kWorldSize,
};

// `k` as written in the document, for warnings ("?" for keys not named in them).
absl::string_view KeyName(Field k);

enum class JsonType : uint8_t { kNull, kBool, kNumber, kString, kObject, kArray };

// "null", "a number", ...: for warnings.
absl::string_view TypeName(JsonType t);

// What ScanLimits found first in a document.
struct LimitBreach {
  enum class Kind : uint8_t { kNone, kDepth, kString };
  Kind kind = Kind::kNone;
  size_t offset = 0;  // where the too-deep bracket or the too-long string starts
  // Where `offset` is (1-based), counting the line breaks outside strings (a JSON string holds
  // none): what Position says of the same offset in a valid document.
  size_t line = 0;
  size_t column = 0;
};

// ScanLimits on a document given in pieces (a file as it is read or inflated), with the same
// result as one scan of the whole: offsets count from the document's start. A string's length is
// checked at each piece's end too, so a string longer than the cap is found as soon as that
// many bytes of it have been fed, not at its end. Holds nothing of the text.
class LimitScanner {
 public:
  LimitScanner(int max_depth, uint64_t max_string_bytes)
      : max_depth_(max_depth), max_string_bytes_(max_string_bytes) {}

  // Scans the next piece; the first breach so far (sticky: later pieces are not scanned).
  LimitBreach Feed(absl::string_view piece);
  // Bytes fed so far.
  uint64_t offset() const { return offset_; }
  // Line breaks outside strings fed so far, and the offset just after the last of them (0: none).
  uint64_t newlines() const { return newlines_; }
  uint64_t line_start() const { return line_start_; }

 private:
  const int max_depth_;
  const uint64_t max_string_bytes_;
  uint64_t offset_ = 0;
  int depth_ = 0;
  bool in_string_ = false;
  bool escaped_ = false;      // in a string, the last byte fed was an escaping backslash
  uint64_t string_open_ = 0;  // the offset of the open string's quote
  uint64_t string_line_ = 0;  // its line and column
  uint64_t string_column_ = 0;
  uint64_t newlines_ = 0;
  uint64_t line_start_ = 0;
  LimitBreach breach_;
};

// One pass over `text`, allocating nothing: the first array/object bracket nested deeper than
// `max_depth`, or the first string (key or value; its bytes as written between the quotes)
// longer than `max_string_bytes`. Brackets and quotes inside strings are skipped; the text need
// not be valid JSON (the parser reports that). Run before a parser that recurses per level or
// copies strings whole.
LimitBreach ScanLimits(absl::string_view text, int max_depth, uint64_t max_string_bytes);

// "offset N (line L, column C)" (1-based) of a byte offset in `text`, for error messages.
std::string Position(absl::string_view text, size_t offset);
// The same words for a position already known.
std::string Position(size_t offset, size_t line, size_t column);

// OK when `breach` is none, else INVALID_ARGUMENT naming the cap and where in `text` (which holds
// the document at least up to the breach): "a string longer than N bytes at offset ... (line,
// column): refused (the string cap, --max-string-kb)", or the nesting cap's.
absl::Status LimitError(const LimitBreach& breach, absl::string_view text, int max_depth,
                        uint64_t max_string_bytes);
// The same, where the text is no longer at hand (it was read in pieces): the position is the
// breach's own line and column.
absl::Status LimitError(const LimitBreach& breach, int max_depth, uint64_t max_string_bytes);

}  // namespace profctl::analysis::kineto_json

#endif  // PROFCTL_ANALYSIS_READERS_KINETO_JSON_H_
