#include "tests/xprof_conformance.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <tuple>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/types/span.h"
#include "xspace/xspace.h"

namespace profctl::testkit {
namespace {

using tensorflow::profiler::XEvent;
using tensorflow::profiler::XEventMetadata;
using tensorflow::profiler::XLine;
using tensorflow::profiler::XPlane;
using tensorflow::profiler::XSpace;
using tensorflow::profiler::XStat;

constexpr size_t kMaxPerRule = 5;
constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();
constexpr int64_t kPicosPerNano = 1000;

using xspace::kGpuPlanePrefix;
constexpr absl::string_view kHostPlane = xspace::kHostPlaneName;
constexpr absl::string_view kTaskEnvPlane = xspace::kTaskEnvPlaneName;
constexpr absl::string_view kCuptiPlane = "/host:CUPTI";

// CUPTI's activity kinds in stream line names.
constexpr std::array<absl::string_view, 6> kStreamKinds = {"Compute",   "MemcpyH2D", "MemcpyD2H",
                                                           "MemcpyD2D", "MemcpyP2P", "Memset"};
// CUPTI's memory kinds in memcpy_details, by which side of a copy they are.
constexpr std::array<absl::string_view, 2> kHostMemoryKinds = {"pageable", "pinned"};
constexpr std::array<absl::string_view, 3> kDeviceMemoryKinds = {"device", "array",
                                                                 "device_static"};
constexpr std::array<absl::string_view, 3> kOtherMemoryKinds = {"unknown", "managed",
                                                                "managed_static"};

template <size_t N>
bool OneOf(absl::string_view s, const std::array<absl::string_view, N>& set) {
  return std::find(set.begin(), set.end(), s) != set.end();
}

// The value type XProf reads a stat with.
enum class Want : uint8_t { kInt64, kUint64, kDouble, kStrOrRef };

struct TypeRule {
  absl::string_view stat;
  Want want;
};

// Event (and event metadata) stats.
constexpr std::array<TypeRule, 28> kEventStatTypes = {{
    {"_r", Want::kInt64},
    {"step_num", Want::kInt64},
    {"iter_num", Want::kInt64},
    {"_pt", Want::kInt64},
    {"_ct", Want::kInt64},
    {"_p", Want::kInt64},
    {"_c", Want::kInt64},
    {"correlation_id", Want::kUint64},
    {"device_id", Want::kUint64},
    {"kernel_details", Want::kStrOrRef},
    {"memcpy_details", Want::kStrOrRef},
    {"tf_op", Want::kStrOrRef},
    {"hlo_op", Want::kStrOrRef},
    {"hlo_module", Want::kStrOrRef},
    {"theoretical_occupancy_pct", Want::kDouble},
    // Memory profile (MemoryAllocation / MemoryDeallocation).
    {"bytes_allocated", Want::kInt64},
    {"bytes_reserved", Want::kInt64},
    {"bytes_available", Want::kInt64},
    {"peak_bytes_in_use", Want::kInt64},
    {"requested_bytes", Want::kInt64},
    {"allocation_bytes", Want::kInt64},
    {"addr", Want::kInt64},
    {"device_ordinal", Want::kInt64},
    {"allocator_name", Want::kStrOrRef},
    {"region_type", Want::kStrOrRef},
    {"shape", Want::kStrOrRef},
    {"fragmentation", Want::kDouble},
    {"data_type", Want::kInt64},
}};

// GPU plane stats (device capabilities), as TSL's CUPTI tracer writes them.
constexpr std::array<TypeRule, 8> kDeviceCapabilities = {{
    {"device_vendor", Want::kStrOrRef},
    {"gpu_device_name", Want::kStrOrRef},
    {"clock_rate", Want::kInt64},
    {"core_count", Want::kInt64},
    {"memory_bandwidth", Want::kUint64},
    {"memory_size", Want::kUint64},
    {"compute_cap_major", Want::kInt64},
    {"compute_cap_minor", Want::kInt64},
}};

absl::string_view WantName(Want w) {
  switch (w) {
    case Want::kInt64:
      return "int64";
    case Want::kUint64:
      return "uint64";
    case Want::kDouble:
      return "double";
    case Want::kStrOrRef:
      return "string or ref";
  }
  return "?";
}

absl::string_view ValueName(const XStat& s) {
  switch (s.value_case()) {
    case XStat::kDoubleValue:
      return "double";
    case XStat::kUint64Value:
      return "uint64";
    case XStat::kInt64Value:
      return "int64";
    case XStat::kStrValue:
      return "string";
    case XStat::kBytesValue:
      return "bytes";
    case XStat::kRefValue:
      return "ref";
    case XStat::VALUE_NOT_SET:
      break;
  }
  return "unset";
}

bool Matches(const XStat& s, Want w) {
  switch (w) {
    case Want::kInt64:
      return s.value_case() == XStat::kInt64Value;
    case Want::kUint64:
      return s.value_case() == XStat::kUint64Value;
    case Want::kDouble:
      return s.value_case() == XStat::kDoubleValue;
    case Want::kStrOrRef:
      return s.value_case() == XStat::kStrValue || s.value_case() == XStat::kRefValue;
  }
  return false;
}

// TSL's ids of the derived lines (tsl/profiler/utils/trace_utils.h: `constexpr int
// kThreadIdDerivedMin = 0xdeadbeef`, so int32_t(0xdeadbeef) + n widened to int64), by both of
// XProf's names.
constexpr int64_t kDerivedMin = -559038737;
constexpr std::array<std::pair<absl::string_view, int64_t>, 9> kDerivedLineIds = {{
    {"Steps", kDerivedMin},
    {"Launch Stats", kDerivedMin + 1},
    {"TensorFlow Name Scope", kDerivedMin + 2},
    {"Framework Name Scope", kDerivedMin + 2},
    {"TensorFlow Ops", kDerivedMin + 3},
    {"Framework Ops", kDerivedMin + 3},
    {"XLA Modules", kDerivedMin + 4},
    {"XLA Ops", kDerivedMin + 5},
    {"Source code", kDerivedMin + 7},
}};

// Collects violations, at most kMaxPerRule listed per rule.
class Report {
 public:
  void Add(absl::string_view rule, const std::string& message) {
    int64_t& count = counts_[std::string(rule)];
    if (count == 0) order_.emplace_back(rule);
    if (static_cast<size_t>(count) < kMaxPerRule) {
      lines_.push_back(absl::StrCat("[", rule, "] ", message));
    }
    ++count;
  }
  std::vector<std::string> Finish() && {
    for (const std::string& rule : order_) {
      const int64_t count = counts_[rule];
      if (static_cast<size_t>(count) > kMaxPerRule) {
        lines_.push_back(absl::StrCat("[", rule, "] ... and ", count - kMaxPerRule,
                                      " more violations of this rule"));
      }
    }
    return std::move(lines_);
  }

 private:
  std::map<std::string, int64_t> counts_;
  std::vector<std::string> order_;
  std::vector<std::string> lines_;
};

// One plane with its names resolved.
class PlaneView {
 public:
  explicit PlaneView(const XPlane& plane) : plane_(plane) {
    for (const auto& [id, md] : plane.stat_metadata()) stat_names_[id] = md.name();
  }
  const XPlane& plane() const { return plane_; }

  absl::string_view StatName(int64_t id) const {
    auto it = stat_names_.find(id);
    return it == stat_names_.end() ? absl::string_view() : absl::string_view(it->second);
  }
  const XEventMetadata* Metadata(const XEvent& e) const {
    auto it = plane_.event_metadata().find(e.metadata_id());
    return it == plane_.event_metadata().end() ? nullptr : &it->second;
  }
  absl::string_view EventName(const XEvent& e) const {
    const XEventMetadata* md = Metadata(e);
    return md == nullptr ? absl::string_view() : absl::string_view(md->name());
  }
  // The stat named `name` as XProf's XEventVisitor sees it: the event's own, else its
  // metadata's.
  const XStat* Find(const XEvent& e, absl::string_view name) const {
    for (const XStat& s : e.stats()) {
      if (StatName(s.metadata_id()) == name) return &s;
    }
    if (const XEventMetadata* md = Metadata(e)) {
      for (const XStat& s : md->stats()) {
        if (StatName(s.metadata_id()) == name) return &s;
      }
    }
    return nullptr;
  }
  const XStat* FindPlaneStat(absl::string_view name) const {
    for (const XStat& s : plane_.stats()) {
      if (StatName(s.metadata_id()) == name) return &s;
    }
    return nullptr;
  }
  // A string or ref value (a ref names a stat metadata).
  std::optional<std::string> StrOrRef(const XStat* s) const {
    if (s == nullptr) return std::nullopt;
    if (s->value_case() == XStat::kStrValue) return s->str_value();
    if (s->value_case() == XStat::kRefValue) {
      auto it = stat_names_.find(static_cast<int64_t>(s->ref_value()));
      if (it != stat_names_.end()) return it->second;
    }
    return std::nullopt;
  }
  // An integer value of either signedness (what the producer meant, whatever XProf reads).
  static std::optional<int64_t> AnyInt(const XStat* s) {
    if (s == nullptr) return std::nullopt;
    if (s->value_case() == XStat::kInt64Value) return s->int64_value();
    if (s->value_case() == XStat::kUint64Value && s->uint64_value() <= uint64_t{kInt64Max}) {
      return static_cast<int64_t>(s->uint64_value());
    }
    return std::nullopt;
  }

  std::string Where(const XLine& line, int index, const XEvent& e) const {
    return absl::StrCat(plane_.name(), " line ", line.id(), " '", line.name(), "' event #", index,
                        " '", EventName(e), "'");
  }

 private:
  const XPlane& plane_;
  absl::flat_hash_map<int64_t, std::string> stat_names_;
};

// An event's span relative to the profile start, in ps.
struct Span {
  __int128 start = 0;
  __int128 end = 0;
};

Span SpanOf(const XLine& line, const XEvent& e) {
  const __int128 start =
      static_cast<__int128>(line.timestamp_ns()) * kPicosPerNano +
      (e.data_case() == XEvent::kOffsetPs ? static_cast<__int128>(e.offset_ps()) : 0);
  return {start, start + e.duration_ps()};
}

bool FitsInt64(__int128 v) {
  return v >= std::numeric_limits<int64_t>::min() && v <= std::numeric_limits<int64_t>::max();
}

// "x,y,z" with positive integers.
bool ParseDims(absl::string_view s) {
  const std::vector<absl::string_view> parts = absl::StrSplit(s, ',');
  if (parts.size() != 3) return false;
  for (absl::string_view p : parts) {
    uint64_t v = 0;
    if (!absl::SimpleAtoi(p, &v) || v == 0) return false;
  }
  return true;
}

// The `key:value` tokens of a details string, which must be exactly `keys`, in order.
std::optional<std::vector<absl::string_view>> DetailsValues(
    absl::string_view details, absl::Span<const absl::string_view> keys) {
  const std::vector<absl::string_view> tokens = absl::StrSplit(details, ' ');
  if (tokens.size() != keys.size()) return std::nullopt;
  std::vector<absl::string_view> values;
  for (size_t i = 0; i < tokens.size(); ++i) {
    absl::string_view token = tokens[i];
    if (!absl::ConsumePrefix(&token, keys[i]) || !absl::ConsumePrefix(&token, ":") ||
        token.empty()) {
      return std::nullopt;
    }
    values.push_back(token);
  }
  return values;
}

constexpr absl::string_view kKernelDetailsFormat =
    "regs:R static_shared:S dynamic_shared:D grid:x,y,z block:x,y,z occ_pct:P";

// The occupancy in a well-formed kernel_details, else nullopt.
std::optional<double> ParseKernelDetails(absl::string_view details) {
  static constexpr std::array<absl::string_view, 6> kKeys = {
      "regs", "static_shared", "dynamic_shared", "grid", "block", "occ_pct"};
  std::optional<std::vector<absl::string_view>> v = DetailsValues(details, kKeys);
  if (!v) return std::nullopt;
  uint64_t n = 0;
  for (size_t i = 0; i < 3; ++i) {
    if (!absl::SimpleAtoi((*v)[i], &n)) return std::nullopt;
  }
  if (!ParseDims((*v)[3]) || !ParseDims((*v)[4])) return std::nullopt;
  double occ = 0;
  if (!absl::SimpleAtod((*v)[5], &occ) || !(occ >= 0 && occ <= 100)) return std::nullopt;
  return occ;
}

// `scope/Name:Type`: a name with at least one scope, no blanks, and an op type.
bool IsTfOpForm(absl::string_view tf_op) {
  const size_t colon = tf_op.rfind(':');
  if (colon == absl::string_view::npos) return false;
  const absl::string_view name = tf_op.substr(0, colon);
  const absl::string_view type = tf_op.substr(colon + 1);
  if (type.empty() || name.empty() || !absl::StrContains(name, '/')) return false;
  for (absl::string_view part : absl::StrSplit(name, '/')) {
    if (part.empty()) return false;
  }
  for (const char c : tf_op) {
    if (absl::ascii_isspace(static_cast<unsigned char>(c))) return false;
  }
  for (const char c : type) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '_') return false;
  }
  return true;
}

enum class Copy : uint8_t { kNone, kHToD, kDToH, kDToD, kUnclassified };

// What XProf's classifier (name prefix, case-insensitive) makes of a memcpy's name.
Copy XProfCopyClass(absl::string_view name) {
  if (absl::StartsWithIgnoreCase(name, "MemcpyHToD")) return Copy::kHToD;
  if (absl::StartsWithIgnoreCase(name, "MemcpyDToH")) return Copy::kDToH;
  if (absl::StartsWithIgnoreCase(name, "MemcpyDToD")) return Copy::kDToD;
  return Copy::kUnclassified;
}

// The kinds a stream line name may list for an event of this class (any one will do); empty
// for copies XProf does not classify (they fail memcpy-name instead).
std::vector<absl::string_view> StreamKindsFor(Copy copy, bool memset) {
  if (memset) return {"Memset"};
  switch (copy) {
    case Copy::kNone:
      return {"Compute"};
    case Copy::kHToD:
      return {"MemcpyH2D"};
    case Copy::kDToH:
      return {"MemcpyD2H"};
    case Copy::kDToD:
      return {"MemcpyD2D", "MemcpyP2P"};
    case Copy::kUnclassified:
      break;
  }
  return {};
}

class Checker {
 public:
  Checker(const XSpace& space, absl::string_view file_stem)
      : space_(space), file_stem_(file_stem) {}

  std::vector<std::string> Run() && {
    CheckHostnames();
    CheckTaskEnvironment();
    for (const XPlane& plane : space_.planes()) {
      const PlaneView view(plane);
      CheckPlaneCommon(view);
      if (plane.name() == kHostPlane) {
        CheckHostPlane(view);
      } else if (absl::StartsWith(plane.name(), kGpuPlanePrefix)) {
        CheckGpuPlane(view);
      }
    }
    CheckCorrelation();
    return std::move(report_).Finish();
  }

 private:
  // A device event's link to its launch.
  struct DeviceEvent {
    uint64_t correlation_id = 0;
    int64_t device = 0;
    std::string where;
  };
  struct Launch {
    std::optional<int64_t> device_id;
    int count = 0;
  };

  void CheckHostnames() {
    if (space_.hostnames_size() != 1) {
      report_.Add("hostnames", absl::StrCat("XSpace.hostnames has ", space_.hostnames_size(),
                                            " entries (", absl::StrJoin(space_.hostnames(), ", "),
                                            "); XProf takes the host's name from exactly one"));
      return;
    }
    const std::string& host = space_.hostnames(0);
    if (host.empty() || !absl::StrContains(file_stem_, host)) {
      report_.Add("hostnames",
                  absl::StrCat("XSpace.hostnames '", host, "' is not contained in the file stem '",
                               file_stem_,
                               "': XProf rejects a preloaded XSpace whose host name does not "
                               "match its file"));
    }
  }

  void CheckTaskEnvironment() {
    std::vector<const XPlane*> envs;
    for (const XPlane& plane : space_.planes()) {
      if (plane.name() == kTaskEnvPlane) envs.push_back(&plane);
    }
    if (envs.size() != 1) {
      report_.Add("task-environment",
                  absl::StrCat("the XSpace has ", envs.size(), " '", kTaskEnvPlane,
                               "' planes, not one: the profile start of relative line "
                               "timestamps is unknown"));
      return;
    }
    const PlaneView env(*envs[0]);
    std::optional<uint64_t> start, stop;
    for (const auto& [name, out] :
         {std::pair<absl::string_view, std::optional<uint64_t>*>{"profile_start_time", &start},
          {"profile_stop_time", &stop}}) {
      int found = 0;
      for (const XStat& s : envs[0]->stats()) {
        if (env.StatName(s.metadata_id()) != name) continue;
        ++found;
        if (s.value_case() != XStat::kUint64Value) {
          report_.Add("task-environment",
                      absl::StrCat(kTaskEnvPlane, " ", name, " is ", ValueName(s),
                                   ", not uint64 (absolute ns): TSL writes and reads uint64"));
        } else {
          *out = s.uint64_value();
        }
      }
      if (found != 1) {
        report_.Add("task-environment",
                    absl::StrCat(kTaskEnvPlane, " has ", found, " ", name, " stats, not one"));
      }
    }
    if (!start || !stop) return;
    if (*start == 0 || *start > *stop || *stop > uint64_t{kInt64Max}) {
      report_.Add("task-environment",
                  absl::StrCat(kTaskEnvPlane, " window [", *start, ", ", *stop,
                               "] ns is not 0 < profile_start_time <= profile_stop_time <= "
                               "INT64_MAX"));
      return;
    }
    window_ps_ = static_cast<__int128>(*stop - *start) * kPicosPerNano;
  }

  void CheckStatTypes(const PlaneView& view, const google::protobuf::RepeatedPtrField<XStat>& stats,
                      const std::string& where) {
    for (const XStat& s : stats) {
      const absl::string_view name = view.StatName(s.metadata_id());
      if (name.empty() && !view.plane().stat_metadata().contains(s.metadata_id())) {
        report_.Add("well-formed", absl::StrCat(where, " has a stat with undefined metadata id ",
                                                s.metadata_id()));
        continue;
      }
      if (s.value_case() == XStat::kRefValue &&
          !view.plane().stat_metadata().contains(static_cast<int64_t>(s.ref_value()))) {
        report_.Add("well-formed", absl::StrCat(where, " stat ", name, " is a ref to undefined ",
                                                "stat metadata id ", s.ref_value()));
      }
      if (name == "group_id") {
        report_.Add("group-id", absl::StrCat(where,
                                             " has a group_id: XProf skips its own step grouping "
                                             "when a file has them"));
        continue;
      }
      for (const TypeRule& rule : kEventStatTypes) {
        if (rule.stat == name && !Matches(s, rule.want)) {
          report_.Add("stat-type", absl::StrCat(where, " stat ", name, " is ", ValueName(s),
                                                ", XProf reads ", WantName(rule.want)));
        }
      }
    }
  }

  // Rules for every plane: metadata, stat types, times, nesting.
  void CheckPlaneCommon(const PlaneView& view) {
    const XPlane& plane = view.plane();
    if (plane.name() == kCuptiPlane) {
      report_.Add("no-cupti-plane",
                  absl::StrCat("plane '", kCuptiPlane,
                               "' is there: TSL merges CUPTI's host events into /host:CPU "
                               "lines by thread id before saving"));
    }
    for (const auto& [id, md] : plane.event_metadata()) {
      CheckStatTypes(view, md.stats(),
                     absl::StrCat(plane.name(), " event metadata ", id, " '", md.name(), "'"));
    }
    if (plane.name() != kTaskEnvPlane) {
      CheckStatTypes(view, plane.stats(), absl::StrCat(plane.name(), " plane stats"));
    }
    for (const XLine& line : plane.lines()) {
      const __int128 line_ps = static_cast<__int128>(line.timestamp_ns()) * kPicosPerNano;
      if (!FitsInt64(line_ps) || line.timestamp_ns() < 0 || (window_ps_ && line_ps > *window_ps_)) {
        report_.Add("relative-time",
                    absl::StrCat(plane.name(), " line ", line.id(), " '", line.name(),
                                 "' timestamp_ns ", line.timestamp_ns(),
                                 " is not relative to the profile start (0..window length): "
                                 "XProf's timestamp_ns * 1000 + offset_ps overflows or is off"));
      }
      std::vector<std::pair<Span, int>> spans;
      spans.reserve(static_cast<size_t>(line.events_size()));
      for (int i = 0; i < line.events_size(); ++i) {
        const XEvent& e = line.events(i);
        if (view.Metadata(e) == nullptr) {
          report_.Add("well-formed", absl::StrCat(plane.name(), " line ", line.id(), " event #", i,
                                                  " has undefined metadata id ", e.metadata_id()));
        }
        CheckStatTypes(view, e.stats(), view.Where(line, i, e));
        if (e.data_case() == XEvent::kNumOccurrences) continue;  // aggregated, no time
        const Span span = SpanOf(line, e);
        if (!FitsInt64(span.start) || !FitsInt64(span.end) || e.duration_ps() < 0) {
          report_.Add("relative-time",
                      absl::StrCat(view.Where(line, i, e), ": timestamp_ns ", line.timestamp_ns(),
                                   " * 1000 + offset_ps ", e.offset_ps(), " + duration_ps ",
                                   e.duration_ps(), " does not fit int64 ps"));
          continue;
        }
        if (window_ps_ && (span.start < 0 || span.end > *window_ps_)) {
          report_.Add("window", absl::StrCat(view.Where(line, i, e), " at [",
                                             static_cast<int64_t>(span.start), ", ",
                                             static_cast<int64_t>(span.end),
                                             "] ps after the profile start is outside the "
                                             "profile window [0, ",
                                             static_cast<int64_t>(*window_ps_), "] ps"));
        }
        spans.emplace_back(span, i);
      }
      CheckNesting(view, line, spans);
    }
  }

  void CheckNesting(const PlaneView& view, const XLine& line,
                    std::vector<std::pair<Span, int>>& spans) {
    std::sort(spans.begin(), spans.end(), [](const auto& a, const auto& b) {
      return std::make_tuple(a.first.start, -a.first.end, a.second) <
             std::make_tuple(b.first.start, -b.first.end, b.second);
    });
    std::vector<std::pair<Span, int>> open;
    for (const auto& [span, index] : spans) {
      while (!open.empty() && open.back().first.end <= span.start) open.pop_back();
      if (!open.empty() && span.end > open.back().first.end) {
        const XEvent& outer = line.events(open.back().second);
        report_.Add("nesting", absl::StrCat(view.Where(line, index, line.events(index)),
                                            " partly overlaps event #", open.back().second, " '",
                                            view.EventName(outer),
                                            "' on its line: events on one line must nest"));
        continue;
      }
      open.emplace_back(span, index);
    }
  }

  // A host event as the step rules need it.
  struct HostEvent {
    const XLine* line = nullptr;
    int index = 0;
    Span span;
  };

  void CheckHostPlane(const PlaneView& view) {
    const XPlane& plane = view.plane();
    struct Root {
      HostEvent event;
      int64_t step = 0;
    };
    std::vector<Root> roots;
    // (type, id) -> producer events.
    std::map<std::pair<int64_t, int64_t>, std::vector<HostEvent>> producers;
    struct Consumer {
      HostEvent event;
      std::pair<int64_t, int64_t> context;
    };
    std::vector<Consumer> consumers;
    std::vector<HostEvent> launches;
    for (const XLine& line : plane.lines()) {
      for (int i = 0; i < line.events_size(); ++i) {
        const XEvent& e = line.events(i);
        if (e.data_case() == XEvent::kNumOccurrences) continue;
        const HostEvent he{&line, i, SpanOf(line, e)};
        const std::string where = view.Where(line, i, e);
        const absl::string_view name = view.EventName(e);
        // Step roots.
        if (PlaneView::AnyInt(view.Find(e, "_r")).value_or(0) >= 1) {
          const XStat* step = view.Find(e, "step_num");
          if (step == nullptr || step->value_case() != XStat::kInt64Value) {
            report_.Add("step-root", absl::StrCat(where,
                                                  " is a step root (_r) without an int64 step_num: "
                                                  "XProf cannot number its step"));
          } else {
            roots.push_back({he, step->int64_value()});
          }
        }
        // Context stats.
        const std::optional<int64_t> pt = PlaneView::AnyInt(view.Find(e, "_pt"));
        const std::optional<int64_t> p = PlaneView::AnyInt(view.Find(e, "_p"));
        const std::optional<int64_t> ct = PlaneView::AnyInt(view.Find(e, "_ct"));
        const std::optional<int64_t> c = PlaneView::AnyInt(view.Find(e, "_c"));
        if (pt.has_value() != p.has_value() || ct.has_value() != c.has_value()) {
          report_.Add("step-join", absl::StrCat(where,
                                                " has half a context (_pt/_p and "
                                                "_ct/_c come in pairs)"));
        }
        if (pt && p) producers[{*pt, *p}].push_back(he);
        if (ct && c) consumers.push_back({he, {*ct, *c}});
        // Launches.
        if (const XStat* corr = view.Find(e, "correlation_id")) {
          launches.push_back(he);
          const XStat* device = view.Find(e, "device_id");
          if (device == nullptr) {
            report_.Add("device-id", absl::StrCat(where,
                                                  " is a launch (it has a correlation_id) without "
                                                  "device_id"));
          }
          if (std::optional<int64_t> id = PlaneView::AnyInt(corr)) {
            Launch& launch = host_launches_[static_cast<uint64_t>(*id)];
            ++launch.count;
            launch.device_id = PlaneView::AnyInt(device);
          }
        }
        // Memory profile events.
        if (name == "MemoryAllocation" || name == "MemoryDeallocation") {
          std::vector<absl::string_view> missing;
          for (absl::string_view stat : {"bytes_allocated", "allocation_bytes", "addr"}) {
            if (view.Find(e, stat) == nullptr) missing.push_back(stat);
          }
          if (view.Find(e, "allocator_name") == nullptr &&
              view.Find(e, "device_ordinal") == nullptr) {
            missing.push_back("allocator_name or device_ordinal");
          }
          if (!missing.empty()) {
            report_.Add("memory-event", absl::StrCat(where, " lacks ", absl::StrJoin(missing, ", "),
                                                     ": XProf's Memory Profile needs them"));
          }
        }
      }
    }

    // One root per step.
    std::map<int64_t, std::vector<const Root*>> by_step;
    for (const Root& r : roots) by_step[r.step].push_back(&r);
    for (const auto& [step, list] : by_step) {
      if (list.size() < 2) continue;
      std::vector<std::string> lines;
      for (const Root* r : list) lines.push_back(absl::StrCat(r->event.line->id()));
      report_.Add("step-root",
                  absl::StrCat(plane.name(), " step ", step, " has ", list.size(),
                               " roots (on lines ", absl::StrJoin(lines, ", "),
                               "): XProf makes each root its own step; mark a step once per "
                               "host and join other threads with _pt/_p -> _ct/_c"));
    }

    // Consumers need producers.
    for (const Consumer& c : consumers) {
      if (!producers.contains(c.context)) {
        report_.Add("step-join", absl::StrCat(view.Where(*c.event.line, c.event.index,
                                                         c.event.line->events(c.event.index)),
                                              " consumes context (_ct ", c.context.first, ", _c ",
                                              c.context.second, ") that no event produces"));
      }
    }

    // Launches on other threads during a step root join it through a consumer wrapper. Roots
    // and consumers are sorted by start; the events containing a launch start at most the
    // longest one's duration before it.
    const auto contains = [](const Span& outer, const Span& inner) {
      return outer.start <= inner.start && inner.end <= outer.end;
    };
    const auto by_start = [](const auto& a, const auto& b) {
      return a.event.span.start < b.event.span.start;
    };
    std::sort(roots.begin(), roots.end(), by_start);
    std::sort(consumers.begin(), consumers.end(), by_start);
    __int128 longest = 0;
    for (const Root& r : roots) longest = std::max(longest, r.event.span.end - r.event.span.start);
    for (const Consumer& c : consumers) {
      longest = std::max(longest, c.event.span.end - c.event.span.start);
    }
    // Calls fn(element) for the elements of `sorted` that may contain `span`.
    const auto for_candidates = [&](const auto& sorted, const Span& span, auto&& fn) {
      auto it = std::upper_bound(sorted.begin(), sorted.end(), span.start,
                                 [](__int128 t, const auto& x) { return t < x.event.span.start; });
      while (it != sorted.begin()) {
        --it;
        if (it->event.span.start < span.start - longest) break;
        fn(*it);
      }
    };
    // The contexts each root joins others to: produced by the root or by what nests in it on its
    // own line.
    std::vector<std::set<std::pair<int64_t, int64_t>>> joined(roots.size());
    for (size_t r = 0; r < roots.size(); ++r) {
      for (const auto& [context, events] : producers) {
        for (const HostEvent& p : events) {
          if (p.line == roots[r].event.line && contains(roots[r].event.span, p.span)) {
            joined[r].insert(context);
          }
        }
      }
    }
    for (const HostEvent& launch : launches) {
      bool own_root = false;
      for_candidates(roots, launch.span, [&](const Root& r) {
        own_root |= r.event.line == launch.line && contains(r.event.span, launch.span);
      });
      if (own_root) continue;
      std::optional<int64_t> unjoined;  // the step of a root it should have joined
      int64_t unjoined_line = 0;
      for_candidates(roots, launch.span, [&](const Root& r) {
        if (r.event.line == launch.line || !contains(r.event.span, launch.span)) return;
        const auto& contexts = joined[static_cast<size_t>(&r - roots.data())];
        bool in_wrapper = false;
        for_candidates(consumers, launch.span, [&](const Consumer& c) {
          in_wrapper |= c.event.line == launch.line && contains(c.event.span, launch.span) &&
                        contexts.contains(c.context);
        });
        if (!in_wrapper) {
          unjoined = r.step;
          unjoined_line = r.event.line->id();
        }
      });
      if (unjoined) {
        report_.Add(
            "step-join",
            absl::StrCat(view.Where(*launch.line, launch.index, launch.line->events(launch.index)),
                         " launches during step ", *unjoined, " (root on line ", unjoined_line,
                         ") outside any consumer wrapper joined to that root: XProf "
                         "leaves its device work out of the step"));
      }
    }
  }

  // A derived line of a GPU plane (XProf's, or one a writer made as XProf would): TSL's id for
  // its name, events in start order, and only in a file XProf will not derive again.
  void CheckDerivedLine(const PlaneView& view, const XLine& line) {
    const XPlane& plane = view.plane();
    const auto want = std::find_if(kDerivedLineIds.begin(), kDerivedLineIds.end(),
                                   [&](const auto& row) { return row.first == line.name(); });
    if (want != kDerivedLineIds.end() && line.id() != want->second) {
      report_.Add("derived-line",
                  absl::StrCat(plane.name(), " line '", line.name(), "' has id ", line.id(),
                               ", not TSL's ", want->second,
                               ": XProf knows derived lines by id and counts this one's events as "
                               "device work a second time"));
    }
    for (int i = 1; i < line.events_size(); ++i) {
      if (SpanOf(line, line.events(i)).start < SpanOf(line, line.events(i - 1)).start) {
        report_.Add("derived-line", absl::StrCat(view.Where(line, i, line.events(i)),
                                                 " starts before the event before it: a derived "
                                                 "line is in start order"));
        break;
      }
    }
    if (!grouped_) {
      report_.Add("derived-line",
                  absl::StrCat(plane.name(), " line '", line.name(),
                               "' is in a file without group_id: XProf groups the file and "
                               "derives its own lines into the same ids, so every event of "
                               "this line shows twice in its trace viewer"));
    }
  }

  void CheckGpuPlane(const PlaneView& view) {
    const XPlane& plane = view.plane();
    const absl::string_view suffix = absl::string_view(plane.name()).substr(kGpuPlanePrefix.size());
    int64_t ordinal = -1;
    if (!absl::SimpleAtoi(suffix, &ordinal) || ordinal < 0) {
      report_.Add("device-capabilities",
                  absl::StrCat("plane '", plane.name(), "' does not end in a device ordinal"));
    } else if (plane.id() != ordinal) {
      report_.Add("device-capabilities",
                  absl::StrCat("plane '", plane.name(), "' has id ", plane.id(), ", not ", ordinal,
                               ": XProf takes the device's id from the plane id"));
    }
    for (const TypeRule& cap : kDeviceCapabilities) {
      const XStat* s = view.FindPlaneStat(cap.stat);
      if (s == nullptr) {
        report_.Add("device-capabilities",
                    absl::StrCat(plane.name(), " lacks the stat ", cap.stat,
                                 ": XProf's peak FLOPs and bandwidth need every capability"));
        continue;
      }
      if (!Matches(*s, cap.want)) {
        report_.Add("device-capabilities",
                    absl::StrCat(plane.name(), " stat ", cap.stat, " is ", ValueName(*s),
                                 ", TSL writes ", WantName(cap.want)));
        continue;
      }
      const bool positive = cap.want == Want::kStrOrRef ? !view.StrOrRef(s).value_or("").empty()
                            : cap.want == Want::kInt64  ? s->int64_value() > 0
                                                        : s->uint64_value() > 0;
      if (!positive && cap.stat != "compute_cap_minor") {
        report_.Add("device-capabilities",
                    absl::StrCat(plane.name(), " stat ", cap.stat, " is empty or zero"));
      }
    }

    for (const XLine& line : plane.lines()) {
      const absl::string_view line_name = line.name();
      if (xspace::IsDerivedLine(line_name)) {
        CheckDerivedLine(view, line);
        continue;
      }
      // Stream #<id>(<kinds>)
      std::set<std::string> kinds;
      absl::string_view rest = line_name;
      std::string id_text;
      bool named = absl::ConsumePrefix(&rest, "Stream #") && absl::ConsumeSuffix(&rest, ")");
      if (named) {
        const size_t paren = rest.find('(');
        named = paren != absl::string_view::npos;
        if (named) {
          id_text = std::string(rest.substr(0, paren));
          for (absl::string_view k : absl::StrSplit(rest.substr(paren + 1), ',')) {
            named &= OneOf(k, kStreamKinds) && kinds.insert(std::string(k)).second;
          }
          int64_t id = 0;
          named &= absl::SimpleAtoi(id_text, &id) && id == line.id();
        }
      }
      if (!named) {
        report_.Add("stream-line",
                    absl::StrCat(plane.name(), " line ", line.id(), " is named '", line_name,
                                 "', not 'Stream #", line.id(), "(<kinds>)' with kinds from ",
                                 absl::StrJoin(kStreamKinds, ", ")));
      }
      std::set<std::string> missing_kinds;
      for (int i = 0; i < line.events_size(); ++i) {
        const XEvent& e = line.events(i);
        const std::string where = view.Where(line, i, e);
        const absl::string_view name = view.EventName(e);
        const XStat* memcpy_details = view.Find(e, "memcpy_details");
        const bool memset =
            absl::StartsWithIgnoreCase(name, "Memset") || view.Find(e, "memset_details") != nullptr;
        const bool memcpy = absl::StartsWithIgnoreCase(name, "Memcpy") || memcpy_details != nullptr;
        Copy copy = Copy::kNone;
        if (memcpy) {
          copy = XProfCopyClass(name);
          CheckMemcpy(view, e, where, copy);
        } else if (!memset) {
          CheckKernel(view, e, where);
        }
        const std::vector<absl::string_view> wanted = StreamKindsFor(copy, memset);
        if (named && !wanted.empty() &&
            std::none_of(wanted.begin(), wanted.end(),
                         [&](absl::string_view k) { return kinds.contains(std::string(k)); })) {
          missing_kinds.insert(std::string(wanted.front()));
        }
        if (view.Find(e, "device_id") != nullptr) {
          report_.Add("device-id", absl::StrCat(where,
                                                " is a device event with device_id: XProf takes a "
                                                "device_id as the mark of a host launch"));
        }
        const XStat* corr = view.Find(e, "correlation_id");
        const std::optional<int64_t> id = PlaneView::AnyInt(corr);
        if (!id) {
          report_.Add("correlation",
                      absl::StrCat(where,
                                   " has no correlation_id: XProf cannot link it to its "
                                   "launch, so it gets no step"));
        } else {
          device_events_.push_back({static_cast<uint64_t>(*id), ordinal, where});
        }
      }
      if (!missing_kinds.empty()) {
        report_.Add("stream-line",
                    absl::StrCat(plane.name(), " line '", line_name, "' does not list ",
                                 absl::StrJoin(missing_kinds, ", "), " for events it holds"));
      }
    }
  }

  void CheckKernel(const PlaneView& view, const XEvent& e, const std::string& where) {
    const std::optional<std::string> details = view.StrOrRef(view.Find(e, "kernel_details"));
    std::optional<double> occ_pct;
    if (!details) {
      report_.Add("kernel-details",
                  absl::StrCat(where, " is a kernel without kernel_details (", kKernelDetailsFormat,
                               "): GPU Kernel Stats cannot list it"));
    } else if (occ_pct = ParseKernelDetails(*details); !occ_pct) {
      report_.Add("kernel-details", absl::StrCat(where, " kernel_details '", *details, "' is not '",
                                                 kKernelDetailsFormat, "'"));
    }
    const XStat* occupancy = view.Find(e, "theoretical_occupancy_pct");
    if (occupancy == nullptr || occupancy->value_case() != XStat::kDoubleValue) {
      report_.Add("kernel-details",
                  absl::StrCat(where, " has no double theoretical_occupancy_pct"));
    } else if (occ_pct && std::abs(occupancy->double_value() - *occ_pct) > 0.01) {
      report_.Add("kernel-details",
                  absl::StrCat(where, " theoretical_occupancy_pct ", occupancy->double_value(),
                               " differs from kernel_details occ_pct ", *occ_pct));
    }
    const std::optional<std::string> tf_op = view.StrOrRef(view.Find(e, "tf_op"));
    if (tf_op) {
      if (!IsTfOpForm(*tf_op)) {
        report_.Add("kernel-op",
                    absl::StrCat(where, " tf_op '", *tf_op,
                                 "' is not 'scope/Name:Type': XProf's op stats parse it so"));
      }
    } else if (!view.StrOrRef(view.Find(e, "hlo_op"))) {
      report_.Add("kernel-op", absl::StrCat(where,
                                            " is a kernel with neither tf_op nor hlo_op: Framework "
                                            "Op Stats and the op profile leave it out"));
    }
  }

  void CheckMemcpy(const PlaneView& view, const XEvent& e, const std::string& where, Copy copy) {
    if (copy == Copy::kUnclassified) {
      report_.Add("memcpy-name",
                  absl::StrCat(where,
                               ": XProf classifies copies by the name prefixes "
                               "MemcpyHToD, MemcpyDToH, MemcpyDToD and counts this one "
                               "as device compute (CUPTI's MemcpyH2D style names belong "
                               "in memcpy_details and stream line names)"));
    }
    const std::optional<std::string> details = view.StrOrRef(view.Find(e, "memcpy_details"));
    if (!details) {
      report_.Add("memcpy-details", absl::StrCat(where, " is a memcpy without memcpy_details"));
      return;
    }
    static constexpr std::array<absl::string_view, 5> kKeys = {"kind_src", "kind_dst", "size",
                                                               "dest", "async"};
    const std::optional<std::vector<absl::string_view>> v = DetailsValues(*details, kKeys);
    const auto is_kind = [](absl::string_view k) {
      return OneOf(k, kHostMemoryKinds) || OneOf(k, kDeviceMemoryKinds) ||
             OneOf(k, kOtherMemoryKinds);
    };
    uint64_t n = 0;
    if (!v || !is_kind((*v)[0]) || !is_kind((*v)[1]) || !absl::SimpleAtoi((*v)[2], &n) ||
        !absl::SimpleAtoi((*v)[3], &n) || ((*v)[4] != "0" && (*v)[4] != "1")) {
      report_.Add("memcpy-details",
                  absl::StrCat(where, " memcpy_details '", *details,
                               "' is not CUPTI's 'kind_src:<k> kind_dst:<k> size:<n> "
                               "dest:<device> async:<0|1>'"));
      return;
    }
    const bool src_host = OneOf((*v)[0], kHostMemoryKinds);
    const bool src_device = OneOf((*v)[0], kDeviceMemoryKinds);
    const bool dst_host = OneOf((*v)[1], kHostMemoryKinds);
    const bool dst_device = OneOf((*v)[1], kDeviceMemoryKinds);
    const bool agrees = (copy == Copy::kHToD && src_host && dst_device) ||
                        (copy == Copy::kDToH && src_device && dst_host) ||
                        (copy == Copy::kDToD && src_device && dst_device) ||
                        copy == Copy::kUnclassified || (!src_host && !src_device) ||
                        (!dst_host && !dst_device);
    if (!agrees) {
      report_.Add("memcpy-details", absl::StrCat(where, " memcpy_details '", *details,
                                                 "' contradicts the copy direction its name "
                                                 "gives"));
    }
  }

  void CheckCorrelation() {
    for (const auto& [id, launch] : host_launches_) {
      if (launch.count > 1) {
        report_.Add("correlation",
                    absl::StrCat("correlation_id ", id, " is on ", launch.count,
                                 " /host:CPU events: which one launched the device work is "
                                 "ambiguous"));
      }
    }
    for (const DeviceEvent& d : device_events_) {
      auto it = host_launches_.find(d.correlation_id);
      if (it == host_launches_.end()) {
        report_.Add("correlation",
                    absl::StrCat(d.where, " correlation_id ", d.correlation_id,
                                 " is on no /host:CPU event: XProf finds no launch, so the "
                                 "event gets no step"));
      } else if (it->second.device_id && *it->second.device_id != d.device) {
        report_.Add("correlation",
                    absl::StrCat(d.where, " was launched (correlation_id ", d.correlation_id,
                                 ") by a host event with device_id ", *it->second.device_id,
                                 ", not ", d.device));
      }
    }
  }

  const XSpace& space_;
  // Whether a stat is named group_id: XProf then neither groups the file nor derives lines.
  const bool grouped_ =
      std::any_of(space_.planes().begin(), space_.planes().end(), [](const XPlane& p) {
        return std::any_of(p.stat_metadata().begin(), p.stat_metadata().end(),
                           [](const auto& md) { return md.second.name() == "group_id"; });
      });
  const std::string file_stem_;
  Report report_;
  // The profile window's length in ps, when the Task Environment is right.
  std::optional<__int128> window_ps_;
  std::map<uint64_t, Launch> host_launches_;
  std::vector<DeviceEvent> device_events_;
};

}  // namespace

std::vector<std::string> CheckXProfConformance(const tensorflow::profiler::XSpace& space,
                                               absl::string_view file_stem) {
  return Checker(space, file_stem).Run();
}

}  // namespace profctl::testkit
