#include "analysis/readers/kineto_reader.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <limits>
#include <optional>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/base/attributes.h"
#include "absl/base/optimization.h"
#include "absl/container/flat_hash_map.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "analysis/readers/kineto_json.h"
#include "common/status_macros.h"
#include "rapidjson/error/en.h"
#include "rapidjson/reader.h"

namespace profctl::analysis {
namespace {

// 2001-01-01 in ns since the epoch: earlier "absolute" times are really relative ones.
constexpr int64_t kPlausibleEpochNs = 978'307'200LL * 1'000'000'000;
// Names cached per reader (classification once per distinct name); beyond this many distinct
// names, the rest are classified each time instead of growing the cache.
constexpr size_t kMaxCachedNames = 1 << 16;
constexpr size_t kMaxUnknownCategoriesNamed = 8;

using kineto_json::Cat;
using kineto_json::CategoryOf;
using kineto_json::Field;
using kineto_json::JsonType;
using kineto_json::KeyName;
using kineto_json::ScaledDecimal;
using kineto_json::TypeName;

// Where the parser is.
enum class Slot : uint8_t { kRoot, kTraceEvents, kEvent, kArgs, kDistInfo, kSkip };

// Per distinct event name, what it classifies as (computed on first need).
struct NameInfo {
  bool host_done = false;
  bool device_done = false;
  bool step_done = false;
  bool bad_step = false;
  OpKind host_kind = OpKind::kHostOther;
  OpKind device_kind = OpKind::kDeviceCompute;
  std::optional<int64_t> step;
};

// The SAX handler: keeps one event's fields at a time and appends to the trace. Times are kept
// relative to the file's time base (ns) until Finish.
class Handler : public rapidjson::BaseReaderHandler<rapidjson::UTF8<>, Handler> {
 public:
  Handler(const StepMatcher& matcher, HostTrace* trace) : matcher_(matcher), trace_(trace) {
    stack_.reserve(16);
  }

  // --- rapidjson SAX interface ---
  bool Null() { return Scalar(JsonType::kNull, {}); }
  bool Bool(bool /*b*/) { return Scalar(JsonType::kBool, {}); }
  bool RawNumber(const char* str, rapidjson::SizeType len, bool /*copy*/) {
    return Scalar(JsonType::kNumber, absl::string_view(str, len));
  }
  bool String(const char* str, rapidjson::SizeType len, bool /*copy*/) {
    return Scalar(JsonType::kString, absl::string_view(str, len));
  }
  bool Key(const char* str, rapidjson::SizeType len, bool /*copy*/);
  bool StartObject() { return Start(JsonType::kObject); }
  bool EndObject(rapidjson::SizeType /*members*/) { return End(); }
  bool StartArray() { return Start(JsonType::kArray); }
  bool EndArray(rapidjson::SizeType /*elements*/) { return End(); }

  // Why the handler stopped the parse (empty when it did not).
  const std::string& error() const { return error_; }
  bool saw_trace_events() const { return saw_trace_events_; }
  // The parse stopped at an array or object nested deeper than kMaxJsonDepth.
  bool too_deep() const { return too_deep_; }
  std::optional<int64_t> rank() const { return rank_; }
  std::optional<int64_t> world_size() const { return world_size_; }

  // Moves times onto the common timeline and fills the window; call once after the parse.
  void Finish(int64_t offset_ns);

 private:
  struct Frame {
    Slot slot;
    Field key;
  };

  // One event's fields.
  struct Event {
    bool has_ph = false, x = false;
    bool has_ts = false, has_dur = false;
    Cat cat = Cat::kUnknown;
    bool has_cat = false;
    int64_t ts = 0, dur = 0;
    std::optional<int64_t> pid, tid, device;
    Field bad_key = Field::kNone;  // the first field of the wrong type
    JsonType bad_type = JsonType::kNull;
    bool bad_number = false;  // a ts/dur/pid/tid/device number out of range
  };

  bool Start(JsonType type);
  bool End();
  bool Scalar(JsonType type, absl::string_view text);
  void EventField(Field key, JsonType type, absl::string_view text);
  void FinishEvent();
  bool Fail(std::string message) {
    error_ = std::move(message);
    return false;
  }
  std::string Where() const { return absl::StrCat("traceEvents[", event_index_, "]"); }
  NameInfo& Info(absl::string_view name);
  std::vector<Op>& DeviceOps(int64_t device);

  const StepMatcher& matcher_;
  HostTrace* trace_;
  ReaderWarnings warnings_;
  std::vector<Frame> stack_;
  std::string error_;
  bool saw_trace_events_ = false;
  bool too_deep_ = false;
  int64_t event_index_ = -1;
  Event event_;
  std::string name_;
  std::string cat_name_;
  std::optional<int64_t> base_ns_;
  std::optional<int64_t> rank_;
  std::optional<int64_t> world_size_;
  absl::flat_hash_map<std::string, NameInfo> names_;
  NameInfo uncached_;
  absl::flat_hash_map<std::string, int64_t> unknown_categories_;
  std::vector<std::pair<int64_t, std::vector<Op>>> devices_;
  size_t last_device_ = 0;
  int64_t min_start_ = std::numeric_limits<int64_t>::max();
  int64_t max_end_ = std::numeric_limits<int64_t>::min();
};

bool Handler::Key(const char* str, rapidjson::SizeType len, bool /*copy*/) {
  const absl::string_view k(str, len);
  Frame& f = stack_.back();
  Field key = Field::kOther;
  switch (f.slot) {
    case Slot::kRoot:
      if (k == "traceEvents") {
        key = Field::kTraceEvents;
      } else if (k == "distributedInfo") {
        key = Field::kDistInfo;
      } else if (k == "baseTimeNanoseconds") {
        key = Field::kBaseTime;
      }
      break;
    case Slot::kEvent:
      if (k == "ph") {
        key = Field::kPh;
      } else if (k == "cat") {
        key = Field::kCat;
      } else if (k == "name") {
        key = Field::kName;
      } else if (k == "ts") {
        key = Field::kTs;
      } else if (k == "dur") {
        key = Field::kDur;
      } else if (k == "pid") {
        key = Field::kPid;
      } else if (k == "tid") {
        key = Field::kTid;
      } else if (k == "args") {
        key = Field::kArgs;
      }
      break;
    case Slot::kArgs:
      if (k == "device") key = Field::kDevice;
      break;
    case Slot::kDistInfo:
      if (k == "rank") key = Field::kRank;
      if (k == "world_size") key = Field::kWorldSize;
      break;
    default:
      break;
  }
  f.key = key;
  return true;
}

bool Handler::Start(JsonType type) {
  if (stack_.size() >= static_cast<size_t>(kMaxJsonDepth)) {
    too_deep_ = true;  // the nesting cap: stop before the parser recurses deeper
    return false;
  }
  if (stack_.empty()) {
    if (type == JsonType::kArray) {  // the Chrome "JSON Array Format": just the events
      saw_trace_events_ = true;
      stack_.push_back({Slot::kTraceEvents, Field::kNone});
    } else {
      stack_.push_back({Slot::kRoot, Field::kNone});
    }
    return true;
  }
  const Frame parent = stack_.back();
  Slot slot = Slot::kSkip;
  switch (parent.slot) {
    case Slot::kRoot:
      if (parent.key == Field::kTraceEvents) {
        if (type != JsonType::kArray) {
          return Fail(absl::StrCat("\"traceEvents\" is ", TypeName(type), ", expected an array"));
        }
        saw_trace_events_ = true;
        slot = Slot::kTraceEvents;
      } else if (parent.key == Field::kDistInfo && type == JsonType::kObject) {
        slot = Slot::kDistInfo;
      }
      break;
    case Slot::kTraceEvents:
      ++event_index_;
      if (type == JsonType::kObject) {
        slot = Slot::kEvent;
        event_ = Event{};
        name_.clear();
      } else {
        warnings_.Note("traceEvents entries that are not objects ignored", [&] { return Where(); });
      }
      break;
    case Slot::kEvent:
      if (parent.key == Field::kArgs && type == JsonType::kObject) {
        slot = Slot::kArgs;
      } else if (parent.key != Field::kOther && parent.key != Field::kArgs) {
        EventField(parent.key, type, {});
      }
      break;
    case Slot::kArgs:
      if (parent.key == Field::kDevice) EventField(parent.key, type, {});
      break;
    case Slot::kDistInfo:
      if (parent.key == Field::kRank || parent.key == Field::kWorldSize) {
        warnings_.Note(parent.key == Field::kRank
                           ? "distributedInfo.rank is not an integer: ignored"
                           : "distributedInfo.world_size is not an integer: ignored",
                       [&] { return std::string(TypeName(type)); });
      }
      break;
    case Slot::kSkip:
      break;
  }
  stack_.push_back({slot, Field::kNone});
  return true;
}

bool Handler::End() {
  const Slot slot = stack_.back().slot;
  stack_.pop_back();
  if (slot == Slot::kEvent) FinishEvent();
  if (!stack_.empty()) stack_.back().key = Field::kNone;
  return true;
}

bool Handler::Scalar(JsonType type, absl::string_view text) {
  if (stack_.empty()) {
    return Fail(absl::StrCat("the document is ", TypeName(type),
                             ", expected an object with \"traceEvents\" or an array of events"));
  }
  Frame& f = stack_.back();
  const Field key = f.key;
  f.key = Field::kNone;
  switch (f.slot) {
    case Slot::kRoot:
      if (key == Field::kTraceEvents) {
        return Fail(absl::StrCat("\"traceEvents\" is ", TypeName(type), ", expected an array"));
      }
      if (key == Field::kBaseTime) {
        int64_t base = 0;
        if ((type == JsonType::kNumber || type == JsonType::kString) &&
            ScaledDecimal(text, 0, &base) && base >= -kMaxAbsTimeNs && base <= kMaxAbsTimeNs) {
          base_ns_ = base;
        } else {
          warnings_.Add(absl::StrCat("baseTimeNanoseconds ", TypeName(type), " '", text,
                                     "' is not a time in ns: ignored"));
        }
      }
      break;
    case Slot::kTraceEvents:
      ++event_index_;
      warnings_.Note("traceEvents entries that are not objects ignored", [&] { return Where(); });
      break;
    case Slot::kEvent:
    case Slot::kArgs:
      if (key != Field::kNone && key != Field::kOther && key != Field::kArgs) {
        EventField(key, type, text);
      }
      break;
    case Slot::kDistInfo:
      if (key == Field::kRank) {
        int64_t rank = 0;
        if ((type == JsonType::kNumber || type == JsonType::kString) &&
            ScaledDecimal(text, 0, &rank) && rank >= 0) {
          rank_ = rank;
        } else {
          warnings_.Add(absl::StrCat("distributedInfo.rank ", TypeName(type), " '", text,
                                     "' is not a rank: ignored"));
        }
      } else if (key == Field::kWorldSize) {
        int64_t size = 0;
        if ((type == JsonType::kNumber || type == JsonType::kString) &&
            ScaledDecimal(text, 0, &size) && size >= 1) {
          world_size_ = size;
        } else {
          warnings_.Add(absl::StrCat("distributedInfo.world_size ", TypeName(type), " '", text,
                                     "' is not a world size: ignored"));
        }
      }
      break;
    case Slot::kSkip:
      break;
  }
  return true;
}

void Handler::EventField(Field key, JsonType type, absl::string_view text) {
  Event& e = event_;
  const bool string_field = key == Field::kPh || key == Field::kCat || key == Field::kName;
  const bool number_field = key == Field::kTs || key == Field::kDur || key == Field::kDevice;
  const bool id_field = key == Field::kPid || key == Field::kTid;  // number or string
  const bool type_ok = (string_field && type == JsonType::kString) ||
                       (number_field && type == JsonType::kNumber) ||
                       (id_field && (type == JsonType::kNumber || type == JsonType::kString));
  if (!type_ok) {
    if (e.bad_key == Field::kNone) {
      e.bad_key = key;
      e.bad_type = type;
    }
    return;
  }
  switch (key) {
    case Field::kPh:
      e.has_ph = true;
      e.x = text == "X";
      break;
    case Field::kCat:
      e.has_cat = true;
      e.cat = CategoryOf(text);
      if (e.cat == Cat::kUnknown) cat_name_.assign(text.data(), text.size());
      break;
    case Field::kName:
      name_.assign(text.data(), text.size());
      break;
    case Field::kTs:
      e.has_ts = ScaledDecimal(text, 3, &e.ts);
      e.bad_number |= !e.has_ts;
      break;
    case Field::kDur:
      e.has_dur = ScaledDecimal(text, 3, &e.dur);
      e.bad_number |= !e.has_dur;
      break;
    case Field::kPid:
    case Field::kTid:
    case Field::kDevice: {
      if (type != JsonType::kNumber) break;  // string pids/tids ("Spans", "stream 7")
      int64_t v = 0;
      if (!ScaledDecimal(text, 0, &v)) {
        e.bad_number = true;
        break;
      }
      (key == Field::kPid ? e.pid : key == Field::kTid ? e.tid : e.device) = v;
      break;
    }
    default:
      break;
  }
}

NameInfo& Handler::Info(absl::string_view name) {
  auto it = names_.find(name);
  if (it != names_.end()) return it->second;
  if (names_.size() >= kMaxCachedNames) {
    uncached_ = NameInfo{};
    return uncached_;
  }
  return names_.try_emplace(name).first->second;
}

std::vector<Op>& Handler::DeviceOps(int64_t device) {
  if (last_device_ < devices_.size() && devices_[last_device_].first == device) {
    return devices_[last_device_].second;
  }
  for (size_t i = 0; i < devices_.size(); ++i) {
    if (devices_[i].first == device) {
      last_device_ = i;
      return devices_[i].second;
    }
  }
  devices_.emplace_back(device, std::vector<Op>{});
  last_device_ = devices_.size() - 1;
  return devices_.back().second;
}

void Handler::FinishEvent() {
  const Event& e = event_;
  if (!e.has_ph) {
    warnings_.Note("events without \"ph\" ignored", [&] { return Where(); });
    return;
  }
  if (e.bad_key != Field::kNone) {
    warnings_.Note("events with a field of the wrong type dropped", [&] {
      return absl::StrCat(Where(), " \"", KeyName(e.bad_key), "\" is ", TypeName(e.bad_type));
    });
    return;
  }
  if (!e.x) return;  // only complete events are activity
  if (e.bad_number) {
    warnings_.Note("events with a number that is not a valid or in-range value dropped",
                   [&] { return absl::StrCat(Where(), " '", name_, "'"); });
    return;
  }
  if (!e.has_ts || !e.has_dur) {
    warnings_.Note("complete events without \"ts\" or \"dur\" dropped",
                   [&] { return absl::StrCat(Where(), " '", name_, "'"); });
    return;
  }
  if (e.dur < 0) {
    warnings_.Note("events with negative duration dropped",
                   [&] { return absl::StrCat(Where(), " '", name_, "' dur ", e.dur, " ns"); });
    return;
  }
  if (e.ts < -kMaxAbsTimeNs || e.ts > kMaxAbsTimeNs || e.dur > kMaxAbsTimeNs) {
    warnings_.Note("events with times out of range dropped", [&] {
      return absl::StrCat(Where(), " '", name_, "' ts ", e.ts, " ns dur ", e.dur, " ns");
    });
    return;
  }
  const int64_t start = e.ts;
  const int64_t end = e.ts + e.dur;  // both within 2^62: no overflow
  min_start_ = std::min(min_start_, start);
  max_end_ = std::max(max_end_, end);

  switch (e.cat) {
    case Cat::kKernel:
    case Cat::kMemcpy:
    case Cat::kMemset: {
      const std::optional<int64_t> device = e.device ? e.device : e.pid;
      if (!device) {
        warnings_.Note("device events without args.device or an integer pid dropped",
                       [&] { return absl::StrCat(Where(), " '", name_, "'"); });
        return;
      }
      OpKind kind = OpKind::kDeviceCompute;
      if (e.cat != Cat::kMemset) {
        NameInfo& info = Info(name_);
        if (!info.device_done) {
          info.device_kind = ClassifyDeviceOpName(name_);
          info.device_done = true;
        }
        kind = info.device_kind;
      }
      DeviceOps(*device).push_back(Op{start, end, kind});
      return;
    }
    case Cat::kStepHost:
    case Cat::kHost:
    case Cat::kPython: {
      NameInfo& info = Info(name_);
      if (e.cat == Cat::kStepHost) {
        if (!info.step_done) {
          info.step = matcher_.Match(name_, &info.bad_step);
          info.step_done = true;
        }
        if (info.step) {
          trace_->steps.push_back(StepMarker{*info.step, start, end, e.tid.value_or(0)});
          return;
        }
        if (info.bad_step) {
          warnings_.Note("events named like step markers with a step number out of range",
                         [&] { return absl::StrCat(Where(), " '", name_, "'"); });
        }
      }
      if (!info.host_done) {
        info.host_kind = ClassifyHostOpName(name_);
        info.host_done = true;
      }
      if (e.cat == Cat::kPython && info.host_kind != OpKind::kHostInputWait) return;
      trace_->host_ops.push_back(Op{start, end, info.host_kind});
      return;
    }
    case Cat::kIgnored:
      return;
    case Cat::kUnknown: {
      const std::string cat = e.has_cat ? cat_name_ : "(none)";
      auto it = unknown_categories_.find(cat);
      if (it != unknown_categories_.end()) {
        ++it->second;
      } else if (unknown_categories_.size() < kMaxUnknownCategoriesNamed) {
        unknown_categories_.emplace(cat, 1);
      } else {
        ++unknown_categories_["(others)"];
      }
      return;
    }
  }
}

void Handler::Finish(int64_t offset_ns) {
  const bool any = min_start_ <= max_end_;
  if (any && !base_ns_ && min_start_ < kPlausibleEpochNs) {
    warnings_.Add(absl::StrCat(
        "timestamps look relative (first event at ", min_start_,
        " ns) and the trace has no baseTimeNanoseconds: times are not wall-clock times and "
        "cannot be lined up with other hosts"));
  }
  // Absolute time = base + ts; common time = absolute - offset. In __int128: no overflow.
  const __int128 shift = static_cast<__int128>(base_ns_.value_or(0)) - offset_ns;
  auto in_range = [](__int128 t) { return t >= -kMaxAbsTimeNs && t <= kMaxAbsTimeNs; };
  int64_t dropped = 0;
  auto move_ops = [&](std::vector<Op>* ops) {
    size_t kept = 0;
    for (const Op& op : *ops) {
      const __int128 s = op.start_ns + shift;
      const __int128 t = op.end_ns + shift;
      if (!in_range(s) || !in_range(t)) {
        ++dropped;
        continue;
      }
      (*ops)[kept++] = Op{static_cast<int64_t>(s), static_cast<int64_t>(t), op.kind};
    }
    ops->resize(kept);
  };
  move_ops(&trace_->host_ops);
  for (auto& [id, ops] : devices_) move_ops(&ops);
  size_t kept = 0;
  for (const StepMarker& m : trace_->steps) {
    const __int128 s = m.start_ns + shift;
    const __int128 t = m.end_ns + shift;
    if (!in_range(s) || !in_range(t)) {
      ++dropped;
      continue;
    }
    StepMarker moved = m;
    moved.start_ns = static_cast<int64_t>(s);
    moved.end_ns = static_cast<int64_t>(t);
    trace_->steps[kept++] = moved;
  }
  trace_->steps.resize(kept);
  if (dropped > 0) {
    warnings_.Add(absl::StrCat(dropped, " events dropped: out of range once moved by base time ",
                               base_ns_.value_or(0), " ns and offset ", offset_ns, " ns"));
  }
  if (any && in_range(min_start_ + shift) && in_range(max_end_ + shift)) {
    trace_->window_start_ns = static_cast<int64_t>(min_start_ + shift);
    trace_->window_end_ns = static_cast<int64_t>(max_end_ + shift);
  }
  if (!any) warnings_.Add("the trace has no complete (\"ph\":\"X\") events");

  std::sort(devices_.begin(), devices_.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  for (auto& [id, ops] : devices_) {
    DeviceTrace d;
    d.id = id;
    d.name = absl::StrCat("/device:GPU:", id);
    d.ops = std::move(ops);
    trace_->devices.push_back(std::move(d));
  }
  std::sort(trace_->steps.begin(), trace_->steps.end(),
            [](const StepMarker& a, const StepMarker& b) {
              return std::tie(a.start_ns, a.step, a.thread_id, a.end_ns) <
                     std::tie(b.start_ns, b.step, b.thread_id, b.end_ns);
            });
  if (!unknown_categories_.empty()) {
    std::vector<std::pair<std::string, int64_t>> cats(unknown_categories_.begin(),
                                                      unknown_categories_.end());
    std::sort(cats.begin(), cats.end());
    warnings_.Add(absl::StrCat("events of unknown categories ignored: ",
                               absl::StrJoin(cats, ", ", [](std::string* out, const auto& c) {
                                 absl::StrAppend(out, "'", c.first, "' (", c.second, ")");
                               })));
  }
  trace_->warnings = std::move(warnings_).Finish();
}

// rapidjson's input stream (Peek/Take/Tell) over a KinetoTextSource, which also enforces the
// string cap and counts lines as the parser goes, so the text is looked at once: rapidjson skips
// whitespace and copies each string's plain runs through SkipWhitespace and CopyStringRun below
// (specializations of its hooks, after this class), which count the line breaks (valid JSON has
// them only between tokens) and measure each string as written between its quotes. A string
// longer than the cap stops the text at the cap's end (nothing more of it is copied); so does a
// source error. The parser then sees '\0', as at the end of a buffer.
class SourceStream {
 public:
  using Ch = char;

  SourceStream(KinetoTextSource& source, const ReaderOptions& options)
      : source_(source), max_string_bytes_(options.max_string_bytes) {}

  // Called for every byte the parser looks at one by one (numbers, punctuation): inline, with
  // the refill out of line (a call that was not inlined cost 5 % of analyze's CPU).
  ABSL_ATTRIBUTE_ALWAYS_INLINE Ch Peek() {
    if (ABSL_PREDICT_FALSE(cur_ == end_) && !Refill()) return '\0';
    return *cur_;
  }
  ABSL_ATTRIBUTE_ALWAYS_INLINE Ch Take() {
    if (ABSL_PREDICT_FALSE(cur_ == end_) && !Refill()) return '\0';
    return *cur_++;
  }
  size_t Tell() const { return static_cast<size_t>(piece_offset_ + (cur_ - begin_)); }
  // Unused: the parse is not in place.
  Ch* PutBegin() {
    RAPIDJSON_ASSERT(false);
    return nullptr;
  }
  void Put(Ch /*c*/) { RAPIDJSON_ASSERT(false); }
  void Flush() { RAPIDJSON_ASSERT(false); }
  size_t PutEnd(Ch* /*begin*/) {
    RAPIDJSON_ASSERT(false);
    return 0;
  }

  // Skips spaces, tabs and line breaks (counting the breaks), across pieces.
  void SkipWhitespace() {
    for (;;) {
      const char* p = cur_;
      for (; p != end_; ++p) {
        const char c = *p;
        if (c == '\n') {
          ++newlines_;
          line_start_ = piece_offset_ + static_cast<uint64_t>(p - begin_) + 1;
        } else if (c != ' ' && c != '\t' && c != '\r') {
          break;
        }
      }
      cur_ = p;
      if (p != end_ || !Refill()) return;
    }
  }

  // Copies the string's bytes from here up to its next quote, backslash or control byte (or the
  // text's end) into `os`, across pieces. `os` holds what was copied of this string so far: empty
  // on the first call for a string, right after its opening quote.
  template <typename Out>
  void CopyStringRun(Out& os) {
    if (os.Length() == 0) {
      string_open_ = Tell() - 1;
      string_line_ = newlines_ + 1;
      string_column_ = string_open_ - line_start_ + 1;
    }
    for (;;) {
      const char* p = cur_;
      while (p != end_ && kPlainStringByte[static_cast<unsigned char>(*p)]) ++p;
      const uint64_t written = piece_offset_ + static_cast<uint64_t>(p - begin_) - string_open_ - 1;
      if (written > max_string_bytes_) {
        breach_ = {kineto_json::LimitBreach::Kind::kString, static_cast<size_t>(string_open_),
                   static_cast<size_t>(string_line_), static_cast<size_t>(string_column_)};
        ended_ = true;
        cur_ = end_;
        return;
      }
      const auto n = static_cast<rapidjson::SizeType>(p - cur_);
      if (n > 0) std::memcpy(os.Push(n), cur_, n);
      cur_ = p;
      if (p != end_ || !Refill()) return;
    }
  }

  // Why the text ended early: a source error (OK if none), or a string over the cap.
  const absl::Status& status() const { return status_; }
  const kineto_json::LimitBreach& breach() const { return breach_; }

  // `offset` (at or a little before the parser's position, on its line) as a LimitBreach's
  // position: its line and column.
  kineto_json::LimitBreach At(kineto_json::LimitBreach::Kind kind, size_t offset) const {
    const uint64_t column = offset >= line_start_ ? offset - line_start_ + 1 : 1;
    return {kind, offset, static_cast<size_t>(newlines_ + 1), static_cast<size_t>(column)};
  }
  // "offset N (line L, column C)" of `offset`, as At.
  std::string Position(size_t offset) const {
    const kineto_json::LimitBreach at = At(kineto_json::LimitBreach::Kind::kNone, offset);
    return kineto_json::Position(at.offset, at.line, at.column);
  }

 private:
  // Bytes a string copies as they are: not a quote, a backslash or a control byte.
  static constexpr std::array<bool, 256> kPlainStringByte = [] {
    std::array<bool, 256> plain{};
    for (int c = 0x20; c < 256; ++c) plain[c] = c != '"' && c != '\\';
    return plain;
  }();

  ABSL_ATTRIBUTE_NOINLINE bool Refill() {
    if (ended_) return false;
    piece_offset_ += static_cast<uint64_t>(end_ - begin_);
    begin_ = cur_ = end_ = nullptr;
    absl::StatusOr<absl::string_view> piece = source_.Next();
    if (!piece.ok()) {
      status_ = piece.status();
      ended_ = true;
      return false;
    }
    if (piece->empty()) {
      ended_ = true;
      return false;
    }
    begin_ = cur_ = piece->data();
    end_ = begin_ + piece->size();
    return true;
  }

  KinetoTextSource& source_;
  const uint64_t max_string_bytes_;
  const char* begin_ = nullptr;
  const char* cur_ = nullptr;
  const char* end_ = nullptr;
  uint64_t piece_offset_ = 0;  // offset of begin_ in the text
  uint64_t newlines_ = 0;      // line breaks before the parser's position
  uint64_t line_start_ = 0;    // offset just after the last of them
  uint64_t string_open_ = 0;   // the open string's quote, its line and column
  uint64_t string_line_ = 0;
  uint64_t string_column_ = 0;
  bool ended_ = false;
  absl::Status status_;
  kineto_json::LimitBreach breach_;
};

}  // namespace
}  // namespace profctl::analysis

// rapidjson's two hooks for a stream, specialized for SourceStream (declared before the parser
// is instantiated with it): skipping whitespace, and copying a string's plain bytes in runs.
namespace rapidjson {

template <>
inline void SkipWhitespace(profctl::analysis::SourceStream& is) {
  is.SkipWhitespace();
}

template <>
template <>
inline void GenericReader<UTF8<>, UTF8<>, CrtAllocator>::ScanCopyUnescapedString(
    profctl::analysis::SourceStream& is,
    GenericReader<UTF8<>, UTF8<>, CrtAllocator>::StackStream<char>& os) {
  is.CopyStringRun(os);
}

}  // namespace rapidjson

namespace profctl::analysis {
namespace {

// A whole text as one piece.
class WholeText : public KinetoTextSource {
 public:
  explicit WholeText(absl::string_view text) : text_(text) {}
  absl::StatusOr<absl::string_view> Next() override { return std::exchange(text_, {}); }

 private:
  absl::string_view text_;
};

constexpr unsigned kParseFlags =
    rapidjson::kParseNumbersAsStringsFlag | rapidjson::kParseTrailingCommasFlag;

}  // namespace

absl::StatusOr<HostTrace> ReadKinetoTraceFrom(KinetoTextSource& source,
                                              const std::string& default_host, int64_t offset_ns,
                                              const ReaderOptions& options) {
  PROFCTL_ASSIGN_OR_RETURN(const StepMatcher matcher, StepMatcher::Create(options.step_pattern));
  if (offset_ns < -kMaxAbsOffsetNs || offset_ns > kMaxAbsOffsetNs) {
    return absl::InvalidArgumentError(absl::StrCat("host ", default_host, ": clock offset ",
                                                   offset_ns,
                                                   " ns is out of range (|offset| <= 2^61 ns)"));
  }
  HostTrace trace;
  Handler handler(matcher, &trace);
  rapidjson::Reader reader;
  SourceStream stream(source, options);
  const rapidjson::ParseResult result = reader.Parse<kParseFlags>(stream, handler);
  if (!stream.status().ok()) return stream.status();
  kineto_json::LimitBreach breach = stream.breach();
  if (handler.too_deep()) {  // stopped right after the bracket
    breach = stream.At(kineto_json::LimitBreach::Kind::kDepth, result.Offset() - 1);
  }
  if (breach.kind != kineto_json::LimitBreach::Kind::kNone) {
    const absl::Status s = kineto_json::LimitError(breach, kMaxJsonDepth, options.max_string_bytes);
    return absl::Status(s.code(),
                        absl::StrCat("Kineto trace of ", default_host, ": ", s.message()));
  }
  if (result.IsError()) {
    const std::string why =
        result.Code() == rapidjson::kParseErrorTermination && !handler.error().empty()
            ? handler.error()
            : rapidjson::GetParseError_En(result.Code());
    return absl::InvalidArgumentError(absl::StrCat("Kineto trace of ", default_host,
                                                   ": invalid JSON at ",
                                                   stream.Position(result.Offset()), ": ", why));
  }
  if (!handler.saw_trace_events()) {
    return absl::InvalidArgumentError(
        absl::StrCat("Kineto trace of ", default_host,
                     ": no \"traceEvents\" array: not a PyTorch profiler (Chrome trace) file"));
  }
  handler.Finish(offset_ns);
  trace.host = handler.rank() ? absl::StrCat("rank-", *handler.rank()) : default_host;
  trace.rank = handler.rank().value_or(-1);
  trace.world_size = handler.world_size().value_or(0);
  return trace;
}

absl::StatusOr<HostTrace> ReadKinetoTrace(absl::string_view json_text,
                                          const std::string& default_host, int64_t offset_ns,
                                          const ReaderOptions& options) {
  WholeText source(json_text);
  return ReadKinetoTraceFrom(source, default_host, offset_ns, options);
}

absl::Status CheckKinetoJsonLimits(absl::string_view json_text, const ReaderOptions& options) {
  return kineto_json::LimitError(
      kineto_json::ScanLimits(json_text, kMaxJsonDepth, options.max_string_bytes), json_text,
      kMaxJsonDepth, options.max_string_bytes);
}

absl::StatusOr<HostTrace> ReadKinetoTraceFile(absl::string_view contents, absl::string_view path,
                                              int64_t offset_ns, const ReaderOptions& options) {
  std::string inflated;
  absl::StatusOr<absl::string_view> text = GunzipIfCompressed(contents, path, &inflated, options);
  if (!text.ok()) return text.status();
  contents = *text;
  absl::StatusOr<HostTrace> trace =
      ReadKinetoTrace(contents, KinetoFileStem(path), offset_ns, options);
  if (!trace.ok()) {
    return absl::Status(trace.status().code(), absl::StrCat(path, ": ", trace.status().message()));
  }
  return trace;
}

std::string KinetoFileStem(absl::string_view path) {
  const size_t slash = path.rfind('/');
  absl::string_view name = slash == absl::string_view::npos ? path : path.substr(slash + 1);
  for (const absl::string_view ext : {".pt.trace.json.gz", ".pt.trace.json", ".trace.json.gz",
                                      ".trace.json", ".json.gz", ".json", ".gz"}) {
    if (absl::EndsWithIgnoreCase(name, ext) && name.size() > ext.size()) {
      name.remove_suffix(ext.size());
      break;
    }
  }
  return std::string(name);
}

std::string KinetoHostName(int64_t rank, absl::string_view path) {
  return rank >= 0 ? absl::StrCat("rank-", rank) : KinetoFileStem(path);
}

}  // namespace profctl::analysis
