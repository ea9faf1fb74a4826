#include "analysis/readers/xspace_reader.h"

#include <algorithm>
#include <array>
#include <climits>
#include <limits>
#include <memory>
#include <optional>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "analysis/alignment.h"
#include "analysis/readers/xspace_collectives.h"
#include "analysis/readers/xspace_wire.h"
#include "common/status_macros.h"
#include "xspace/xspace.h"

namespace profctl::analysis {
namespace {

using xspace_wire::Cursor;
using xspace_wire::IdTable;
using xspace_wire::IntValue;
using xspace_wire::kMaxNameBytes;
using xspace_wire::Range;
using xspace_wire::RawStat;
using xspace_wire::ReadStat;

constexpr absl::string_view kXlaOpsLine = "XLA Ops";
// TSL's consumer context stats: a wrapper event on one thread joining a step root on another.
constexpr absl::string_view kStatConsumerType = "_ct";
constexpr absl::string_view kStatConsumerId = "_c";
// An NCCL call's kernel (the cupti light level's launches): the collectives' record.
constexpr absl::string_view kStatKernelName = "kernel_name";
constexpr size_t kMaxPassedOnMessages = 10;

// --- the XSpace's structure ----------------------------------------------------------------

struct PlaneInfo {
  Range range;
  std::string name;
  std::vector<Range> lines;
};

struct LineInfo {
  Range range;
  int64_t id = 0;
  std::string name;
  int64_t timestamp_ns = 0;
  size_t events = 0;
};

// What the reader looks for in stats, by stat metadata name.
enum class StatRole : uint8_t {
  kOther,
  kIsRoot,
  kStepNum,
  kMemcpyDetails,
  kConsumer,
  kStepCut,
  kCorrelationId,  // the collectives' record: launches and kernels
  kKernelName,     // the collectives' record: an NCCL call's kernel
};

// A plane's stat metadata: names (for ref values) and roles.
struct StatTable {
  absl::flat_hash_map<int64_t, std::string> names;
  IdTable<StatRole> roles;
  bool any_root_or_step = false;  // or consumer context stats
  bool any_memcpy_details = false;
  bool any_step_cut = false;
  bool any_correlation = false;  // correlation_id or kernel_name

  StatRole Role(int64_t id) const {
    const StatRole* r = roles.Find(id);
    return r == nullptr ? StatRole::kOther : *r;
  }
  // A string stat value: the string itself, or the name of the stat metadata a ref names.
  absl::string_view StrValue(const RawStat& s, const std::string& str) const {
    if (s.kind == RawStat::Kind::kStr) return str;
    if (s.kind == RawStat::Kind::kRef) {
      auto it = names.find(static_cast<int64_t>(s.bits));
      if (it != names.end()) return it->second;
    }
    return {};
  }
};

// What a host event metadata id is, decided once per plane.
enum class HostRole : uint8_t { kOp, kWrapper, kMarker };
struct HostMeta {
  HostRole role = HostRole::kOp;
  OpKind kind = OpKind::kHostOther;
  bool root = false;      // the metadata itself carries `_r` >= 1
  bool bad_step = false;  // the name matched the step pattern with an unusable number
  int64_t step = 0;       // kMarker: the step number from the name
  std::string name;       // only when bad_step, for the warning
  xspace_collectives::HostMeta collectives;  // read only for the collectives' record
};

// What a device event metadata id is.
struct DeviceMeta {
  OpKind kind = OpKind::kDeviceCompute;
  // For the collectives' record (a collective kernel's kind) and alignment (a collective whose
  // end is one instant on every participant: alignment.h IsCollectiveOpName).
  std::optional<CollectiveKind> kernel_kind;
  bool aligns = false;
};

// What an event's own stats say, for the roles a plane has.
struct EventStats {
  std::optional<bool> root;         // `_r` >= 1, when the event has `_r`
  bool has_step = false;            // the event has `step_num`
  std::optional<int64_t> step_num;  // its integer value
  std::optional<OpKind> memcpy;     // last `memcpy_details` that names a direction
  bool consumer = false;            // `_ct`/`_c`: a wrapper joining another thread's step root
  bool cut = false;                 // xspace::kStatStepCut >= 1: clipped at a window edge
  bool has_cut = false;             // xspace::kStatStepCut present, whatever its value
  // The first integer value of each stat and the first string kernel_name, as the collectives'
  // record reads them (xspace::XPlaneReader::IntStat/StrStat).
  xspace_collectives::EventStats first;
};

struct Event {
  int64_t metadata_id = 0;
  int64_t offset_ps = 0;
  int64_t duration_ps = 0;
  EventStats stats;
};

// What a read gathers besides the breakdown's HostTrace (DecodeXSpaceHost), in the same pass.
struct Extras {
  explicit Extras(const HostDecodeOptions& o) : options(o) {}
  HostDecodeOptions options;
  xspace_collectives::Builder collectives;
  bool host_plane_seen = false;  // the record and the step count read the first `/host:CPU` only
  // The last end of any host or device event (the record's window end without a profile stop).
  int64_t last_end_ns = 0;
  std::vector<int64_t> ends_ns;  // alignment's collective ends, as read
  int64_t events = 0;
  absl::flat_hash_set<int64_t> root_steps;  // step numbers of `_r` == 1 roots
};

// Shared state of one read. `trace` null: only the extras are read.
class Reader {
 public:
  Reader(const ByteSource& source, int64_t offset_ns, const StepMatcher& matcher, HostTrace* trace,
         Extras* extras = nullptr)
      : source_(source), offset_ns_(offset_ns), matcher_(matcher), trace_(trace), extras_(extras) {}

  // The top level: plane ranges and the space's errors/warnings. Then each plane's header.
  bool ReadStructure();
  // From now on only the extras are read.
  void DropTrace() { trace_ = nullptr; }
  // The profile start/stop from the `Task Environment` plane(s), as xspace::ProfileStartNs.
  bool ReadProfileWindow();
  bool ReadPlanes(bool* any_host_plane);

  int64_t profile_start() const { return profile_start_; }
  std::optional<int64_t> profile_stop() const { return profile_stop_; }
  const std::vector<PlaneInfo>& planes() const { return planes_; }
  ReaderWarnings& warnings() { return warnings_; }
  bool any_event() const { return min_start_ <= max_end_; }
  // The XSpace's own errors (at most kMaxPassedOnMessages), as its writer put them.
  const std::vector<std::string>& space_errors() const { return space_errors_; }
  int64_t min_start() const { return min_start_; }
  int64_t max_end() const { return max_end_; }
  void PassOnSpaceMessages();

  // The malformed-bytes error (DATA_LOSS), or the source's own error when it failed to read.
  absl::Status Error() const {
    absl::Status io = source_.status();
    if (!io.ok()) return io;
    return absl::DataLossError(absl::StrCat("not a valid serialized XSpace: ", error_,
                                            " is malformed or truncated (near byte ", error_at_,
                                            " of ", source_.size(), ")"));
  }

 private:
  bool Fail(absl::string_view what, const Cursor& c) {
    if (error_.empty()) {
      error_ = std::string(what);
      error_at_ = c.Position();
    }
    return false;
  }
  bool ReadPlaneHeader(PlaneInfo* plane);
  bool ReadStatTable(const PlaneInfo& plane, StatTable* table, std::vector<RawStat>* plane_stats);
  template <typename T, typename Make>
  bool ReadEventMetadata(const PlaneInfo& plane, const StatTable& stats, Make&& make,
                         IdTable<T>* table);
  bool ReadLineHeader(const PlaneInfo& plane, Range range, LineInfo* line);
  // `want_stats(event, id_seen)`: whether the event's stats are read, asked at its first stat
  // (`id_seen`: its metadata_id came before it, as protobuf writes fields in number order).
  template <typename WantStats, typename OnEvent>
  bool ReadEvents(const PlaneInfo& plane, const LineInfo& line, const StatTable& stats,
                  WantStats&& want_stats, OnEvent&& on_event);
  bool ReadHostPlane(const PlaneInfo& plane);
  bool ReadDevicePlane(const PlaneInfo& plane, absl::string_view prefix);
  // Counts the events of a plane read for nothing else (HostDecodeOptions::counts).
  bool CountPlaneEvents(const PlaneInfo& plane);
  bool collectives() const { return extras_ != nullptr && extras_->options.collectives; }
  bool ends() const { return extras_ != nullptr && extras_->options.collective_ends; }
  bool counts() const { return extras_ != nullptr && extras_->options.counts; }
  // An event's times on the host's own clock, unchecked (the collectives' record, alignment).
  int64_t RawStart(const LineInfo& line, const Event& e) const {
    return xspace::EventStartNs(profile_start_, line.timestamp_ns, e.offset_ps);
  }
  int64_t RawEnd(const LineInfo& line, const Event& e) const {
    return xspace::EventEndNs(profile_start_, line.timestamp_ns, e.offset_ps, e.duration_ps);
  }

  static std::string Where(const PlaneInfo& plane, const LineInfo& line, int64_t event_index) {
    return absl::StrCat("plane ", plane.name, " line ", line.id, " '", line.name, "' event #",
                        event_index);
  }
  // The event's [start, end) on the common timeline, or false (with a warning) when dropped.
  bool Times(const PlaneInfo& plane, const LineInfo& line, int64_t index, const Event& event,
             int64_t* start, int64_t* end);
  void UnknownMetadata(const PlaneInfo& plane, const LineInfo& line, int64_t index,
                       const Event& event) {
    warnings_.Note("events with an undefined metadata id dropped", [&] {
      return absl::StrCat(Where(plane, line, index), " metadata_id ", event.metadata_id);
    });
  }

  const ByteSource& source_;
  int64_t offset_ns_;
  const StepMatcher& matcher_;
  HostTrace* trace_;
  Extras* extras_;
  ReaderWarnings warnings_;
  std::vector<PlaneInfo> planes_;
  std::vector<std::string> space_errors_;
  std::vector<std::string> space_warnings_;
  size_t space_errors_total_ = 0;
  size_t space_warnings_total_ = 0;
  int64_t profile_start_ = 0;
  std::optional<int64_t> profile_stop_;
  int64_t min_start_ = std::numeric_limits<int64_t>::max();
  int64_t max_end_ = std::numeric_limits<int64_t>::min();
  std::string error_;
  uint64_t error_at_ = 0;
  std::string scratch_;  // string stat values
  // The collective kind each distinct `kernel_name` value names (CollectiveKindOfName, once).
  absl::flat_hash_map<std::string, std::optional<CollectiveKind>> kernel_name_kinds_;
};

bool Reader::ReadStructure() {
  Cursor c(source_, Range{0, source_.size()});
  std::string message;
  const bool ok = c.Fields([&](uint32_t field, uint32_t wire, uint32_t tag) {
    if (wire != xspace_wire::kLengthDelimited) return c.Skip(tag);
    switch (field) {
      case xspace_wire::kSpacePlanes: {
        PlaneInfo plane;
        if (!c.SkipRange(&plane.range)) return false;
        planes_.push_back(std::move(plane));
        return true;
      }
      case xspace_wire::kSpaceErrors:
      case xspace_wire::kSpaceWarnings: {
        const bool error = field == xspace_wire::kSpaceErrors;
        (error ? space_errors_total_ : space_warnings_total_) += 1;
        std::vector<std::string>& kept = error ? space_errors_ : space_warnings_;
        if (kept.size() == kMaxPassedOnMessages) return c.Skip(tag);
        if (!c.String(&message, kMaxNameBytes)) return false;
        kept.push_back(message);
        return true;
      }
      default:
        return c.Skip(tag);
    }
  });
  if (!ok) return Fail("the XSpace", c);
  for (PlaneInfo& plane : planes_) {
    if (!ReadPlaneHeader(&plane)) return false;
  }
  return true;
}

bool Reader::ReadPlaneHeader(PlaneInfo* plane) {
  Cursor c(source_, plane->range);
  const bool ok = c.Fields([&](uint32_t field, uint32_t wire, uint32_t tag) {
    if (wire == xspace_wire::kLengthDelimited && field == xspace_wire::kPlaneName)
      return c.String(&plane->name);
    if (wire == xspace_wire::kLengthDelimited && field == xspace_wire::kPlaneLines) {
      Range line;
      if (!c.SkipRange(&line)) return false;
      plane->lines.push_back(line);
      return true;
    }
    return c.Skip(tag);
  });
  return ok || Fail("an XPlane", c);
}

bool Reader::ReadStatTable(const PlaneInfo& plane, StatTable* table,
                           std::vector<RawStat>* plane_stats) {
  Cursor c(source_, plane.range);
  std::vector<std::pair<int64_t, StatRole>> roles;
  std::string name;
  const bool ok = c.Fields([&](uint32_t field, uint32_t wire, uint32_t tag) {
    if (wire != xspace_wire::kLengthDelimited) return c.Skip(tag);
    if (field == xspace_wire::kPlaneStats && plane_stats != nullptr) {
      RawStat s;
      if (!ReadStat(c, &s, &scratch_)) return false;
      plane_stats->push_back(s);
      return true;
    }
    if (field != xspace_wire::kPlaneStatMetadata) return c.Skip(tag);
    int64_t key = 0;
    name.clear();
    // map<int64, XStatMetadata> entry: the key is the id (XStatMetadata.id is not used).
    const bool entry_ok = c.Message([&](uint32_t f, uint32_t w, uint32_t t) {
      if (f == xspace_wire::kMapKey && w == xspace_wire::kVarint) return c.Int64(&key);
      if (f == xspace_wire::kMapValue && w == xspace_wire::kLengthDelimited) {
        return c.Message([&](uint32_t vf, uint32_t vw, uint32_t vt) {
          if (vf == xspace_wire::kStatMetadataName && vw == xspace_wire::kLengthDelimited) {
            return c.String(&name, kMaxNameBytes);
          }
          return c.Skip(vt);
        });
      }
      return c.Skip(t);
    });
    if (!entry_ok) return false;
    StatRole role = StatRole::kOther;
    if (name == xspace::kStatIsRoot) {
      role = StatRole::kIsRoot;
      table->any_root_or_step = true;
    } else if (name == xspace::kStatStepNum) {
      role = StatRole::kStepNum;
      table->any_root_or_step = true;
    } else if (name == xspace::kStatMemcpyDetails) {
      role = StatRole::kMemcpyDetails;
      table->any_memcpy_details = true;
    } else if (name == xspace::kStatStepCut) {
      role = StatRole::kStepCut;
      table->any_root_or_step = true;
      table->any_step_cut = true;
    } else if (name == kStatConsumerType || name == kStatConsumerId) {
      role = StatRole::kConsumer;
      table->any_root_or_step = true;
    } else if (name == xspace::kStatCorrelationId) {
      role = StatRole::kCorrelationId;
      table->any_correlation = true;
    } else if (name == kStatKernelName) {
      role = StatRole::kKernelName;
      table->any_correlation = true;
    }
    roles.emplace_back(key, role);
    table->names.insert_or_assign(key, name);
    return true;
  });
  if (!ok) return Fail(absl::StrCat("the stat metadata of plane '", plane.name, "'"), c);
  table->roles = IdTable<StatRole>(std::move(roles));
  return true;
}

// Every event metadata entry of the plane, through make(name, stats) -> T.
template <typename T, typename Make>
bool Reader::ReadEventMetadata(const PlaneInfo& plane, const StatTable& stats, Make&& make,
                               IdTable<T>* table) {
  Cursor c(source_, plane.range);
  std::vector<std::pair<int64_t, T>> entries;
  std::string name;
  std::vector<std::pair<RawStat, std::string>> md_stats;
  const bool ok = c.Fields([&](uint32_t field, uint32_t wire, uint32_t tag) {
    if (field != xspace_wire::kPlaneEventMetadata || wire != xspace_wire::kLengthDelimited)
      return c.Skip(tag);
    int64_t key = 0;
    name.clear();
    md_stats.clear();
    const bool entry_ok = c.Message([&](uint32_t f, uint32_t w, uint32_t t) {
      if (f == xspace_wire::kMapKey && w == xspace_wire::kVarint) return c.Int64(&key);
      if (f != xspace_wire::kMapValue || w != xspace_wire::kLengthDelimited) return c.Skip(t);
      return c.Message([&](uint32_t vf, uint32_t vw, uint32_t vt) {
        if (vw != xspace_wire::kLengthDelimited) return c.Skip(vt);
        if (vf == xspace_wire::kEventMetadataName) return c.String(&name, kMaxNameBytes);
        if (vf == xspace_wire::kEventMetadataStats) {
          RawStat s;
          if (!ReadStat(c, &s, &scratch_)) return false;
          // Only stats the reader looks at are kept.
          if (stats.Role(s.metadata_id) != StatRole::kOther) md_stats.emplace_back(s, scratch_);
          return true;
        }
        return c.Skip(vt);
      });
    });
    if (!entry_ok) return false;
    entries.emplace_back(key, make(absl::string_view(name), md_stats));
    return true;
  });
  if (!ok) return Fail(absl::StrCat("the event metadata of plane '", plane.name, "'"), c);
  *table = IdTable<T>(std::move(entries));
  return true;
}

bool Reader::ReadLineHeader(const PlaneInfo& plane, Range range, LineInfo* line) {
  line->range = range;
  Cursor c(source_, range);
  const bool ok = c.Fields([&](uint32_t field, uint32_t wire, uint32_t tag) {
    if (wire == xspace_wire::kVarint && field == xspace_wire::kLineId) return c.Int64(&line->id);
    if (wire == xspace_wire::kVarint && field == xspace_wire::kLineTimestampNs)
      return c.Int64(&line->timestamp_ns);
    if (wire == xspace_wire::kLengthDelimited && field == xspace_wire::kLineName)
      return c.String(&line->name, kMaxNameBytes);
    if (wire == xspace_wire::kLengthDelimited && field == xspace_wire::kLineEvents) ++line->events;
    return c.Skip(tag);
  });
  return ok || Fail(absl::StrCat("a line of plane '", plane.name, "'"), c);
}

template <typename WantStats, typename OnEvent>
bool Reader::ReadEvents(const PlaneInfo& plane, const LineInfo& line, const StatTable& stats,
                        WantStats&& want_stats, OnEvent&& on_event) {
  Cursor c(source_, line.range);
  Event e;
  int64_t index = -1;
  RawStat s;
  bool id_seen = false;
  std::optional<bool> parse_stats;  // decided at the event's first stat
  // The first integer value of a stat, as xspace::XPlaneReader::IntStat reads it (a uint64 cast).
  const auto first_int = [](std::optional<int64_t>& first, const RawStat& stat) {
    if (first.has_value()) return;
    if (stat.kind == RawStat::Kind::kInt64 || stat.kind == RawStat::Kind::kUint64) {
      first = static_cast<int64_t>(stat.bits);
    }
  };
  const auto read_stat = [&]() {
    if (!ReadStat(c, &s, &scratch_)) return false;
    switch (stats.Role(s.metadata_id)) {
      case StatRole::kIsRoot:
        e.stats.root = IntValue(s).value_or(0) >= 1;
        first_int(e.stats.first.root, s);
        break;
      case StatRole::kStepNum:
        e.stats.has_step = true;
        e.stats.step_num = IntValue(s);
        first_int(e.stats.first.step_num, s);
        break;
      case StatRole::kMemcpyDetails:
        if (std::optional<OpKind> k = MemcpyKindFromDetails(stats.StrValue(s, scratch_))) {
          e.stats.memcpy = k;
        }
        break;
      case StatRole::kConsumer:
        e.stats.consumer = true;
        break;
      case StatRole::kStepCut:
        e.stats.cut = IntValue(s).value_or(0) >= 1;
        e.stats.has_cut = true;
        first_int(e.stats.first.cut, s);
        break;
      case StatRole::kCorrelationId:
        first_int(e.stats.first.correlation_id, s);
        break;
      case StatRole::kKernelName:
        if (!e.stats.first.kernel_name && s.kind == RawStat::Kind::kStr) {
          e.stats.first.kernel_name = true;
          auto it = kernel_name_kinds_.find(scratch_);
          if (it == kernel_name_kinds_.end()) {
            it = kernel_name_kinds_.emplace(scratch_, CollectiveKindOfName(scratch_)).first;
          }
          e.stats.first.kernel_name_kind = it->second;
        }
        break;
      case StatRole::kOther:
        break;
    }
    return true;
  };
  const bool ok = c.Fields([&](uint32_t field, uint32_t wire, uint32_t tag) {
    if (field != xspace_wire::kLineEvents || wire != xspace_wire::kLengthDelimited)
      return c.Skip(tag);
    e = Event();
    ++index;
    id_seen = false;
    parse_stats.reset();
    const bool event_ok = c.Message([&](uint32_t f, uint32_t w, uint32_t t) {
      if (w == xspace_wire::kVarint) {
        switch (f) {
          case xspace_wire::kEventMetadataId:
            id_seen = true;
            return c.Int64(&e.metadata_id);
          case xspace_wire::kEventOffsetPs:
            return c.Int64(&e.offset_ps);
          case xspace_wire::kEventDurationPs:
            return c.Int64(&e.duration_ps);
          case xspace_wire::kEventNumOccurrences:
            e.offset_ps = 0;  // the other member of the `data` oneof
            return c.Skip(t);
          default:
            return c.Skip(t);
        }
      }
      if (w == xspace_wire::kLengthDelimited && f == xspace_wire::kEventStats) {
        if (!parse_stats.has_value())
          parse_stats = want_stats(static_cast<const Event&>(e), id_seen);
        if (*parse_stats) return read_stat();
      }
      return c.Skip(t);
    });
    if (!event_ok) return false;
    on_event(index, e);
    return true;
  });
  return ok || Fail(absl::StrCat(Where(plane, line, index)), c);
}

bool Reader::Times(const PlaneInfo& plane, const LineInfo& line, int64_t index, const Event& event,
                   int64_t* start, int64_t* end) {
  if (event.duration_ps < 0) {
    warnings_.Note("events with negative duration dropped", [&] {
      return absl::StrCat(Where(plane, line, index), " duration_ps ", event.duration_ps);
    });
    return false;
  }
  const int64_t s = xspace::EventStartNs(profile_start_, line.timestamp_ns, event.offset_ps);
  const int64_t e =
      xspace::EventEndNs(profile_start_, line.timestamp_ns, event.offset_ps, event.duration_ps);
  if (s < -kMaxAbsTimeNs || e > kMaxAbsTimeNs || s > e) {
    warnings_.Note("events with times out of range dropped", [&] {
      return absl::StrCat(Where(plane, line, index), " start ", s, " ns end ", e, " ns");
    });
    return false;
  }
  *start = s - offset_ns_;
  *end = e - offset_ns_;
  min_start_ = std::min(min_start_, *start);
  max_end_ = std::max(max_end_, *end);
  return true;
}

bool Reader::ReadProfileWindow() {
  std::optional<uint64_t> start;
  std::optional<uint64_t> stop;
  for (const PlaneInfo& plane : planes_) {
    if (plane.name != xspace::kTaskEnvPlaneName) continue;
    StatTable table;
    std::vector<RawStat> stats;
    if (!ReadStatTable(plane, &table, &stats)) return false;
    for (const RawStat& s : stats) {
      if (s.kind != RawStat::Kind::kUint64) continue;
      auto name = table.names.find(s.metadata_id);
      if (name == table.names.end()) continue;
      if (!start && name->second == xspace::kStatProfileStart) start = s.bits;
      if (!stop && name->second == xspace::kStatProfileStop) stop = s.bits;
    }
  }
  constexpr auto kMax = static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
  profile_start_ = static_cast<int64_t>(std::min(start.value_or(0), kMax));
  if (stop) profile_stop_ = static_cast<int64_t>(std::min(*stop, kMax));
  return true;
}

bool Reader::ReadHostPlane(const PlaneInfo& plane) {
  // The collectives' record and the step count read the first host plane; a second one only
  // ends events (the record's window) and is counted.
  const bool first = extras_ != nullptr && !extras_->host_plane_seen;
  if (extras_ != nullptr) extras_->host_plane_seen = true;
  const bool record = first && collectives();
  const bool count_steps = first && counts();
  // The record's window ends at the profile stop; only a trace without one ends at its last event.
  const bool window_from_events = collectives() && !profile_stop_.has_value();
  StatTable stats;
  if (!ReadStatTable(plane, &stats, nullptr)) return false;
  IdTable<HostMeta> table;
  const auto make = [&](absl::string_view name,
                        const std::vector<std::pair<RawStat, std::string>>& md_stats) {
    HostMeta m;
    if (record) m.collectives = xspace_collectives::ClassifyHostMeta(name, matcher_);
    for (const auto& [s, str] : md_stats) {
      if (stats.Role(s.metadata_id) == StatRole::kIsRoot) m.root = IntValue(s).value_or(0) >= 1;
    }
    if (std::optional<int64_t> step = matcher_.Match(name, &m.bad_step)) {
      m.role = HostRole::kMarker;
      m.step = *step;
      return m;
    }
    if (m.bad_step) m.name = std::string(name);
    m.kind = ClassifyHostOpName(name);
    if (absl::StartsWith(name, "$") && m.kind != OpKind::kHostInputWait) {
      m.role = HostRole::kWrapper;  // a Python stack frame
    }
    return m;
  };
  if (!ReadEventMetadata(plane, stats, make, &table)) return false;

  std::vector<LineInfo> lines(plane.lines.size());
  size_t events = 0;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (!ReadLineHeader(plane, plane.lines[i], &lines[i])) return false;
    events += lines[i].events;
  }
  if (extras_ != nullptr) extras_->events += static_cast<int64_t>(events);
  if (trace_ != nullptr) trace_->host_ops.reserve(trace_->host_ops.size() + events);
  // Stats are read for step roots and consumer contexts wherever a plane has them, and for the
  // record only on NCCL calls and launches (their correlation id and kernel name).
  const bool record_stats = record && stats.any_correlation;
  const auto want_stats = [&](const Event& event, bool id_seen) {
    if (stats.any_root_or_step) return true;
    if (!record_stats) return false;
    if (!id_seen) return true;  // its metadata is not known yet
    const HostMeta* meta = table.Find(event.metadata_id);
    return meta != nullptr && (meta->collectives.nccl_api || meta->collectives.launch);
  };
  for (size_t li = 0; li < lines.size(); ++li) {
    const LineInfo& line = lines[li];
    const auto on_event = [&](int64_t index, const Event& event) {
      const HostMeta* meta = table.Find(event.metadata_id);
      if (extras_ != nullptr) {
        if (window_from_events) {
          extras_->last_end_ns = std::max(extras_->last_end_ns, RawEnd(line, event));
        }
        if (record) {
          extras_->collectives.HostEvent(
              li, meta == nullptr ? nullptr : &meta->collectives, event.stats.first,
              [&] { return std::pair(RawStart(line, event), RawEnd(line, event)); });
        }
        if (count_steps && event.stats.first.root == 1 && event.stats.first.step_num) {
          extras_->root_steps.insert(*event.stats.first.step_num);
        }
      }
      if (trace_ == nullptr) return;
      if (meta == nullptr) return UnknownMetadata(plane, line, index, event);
      int64_t start = 0;
      int64_t end = 0;
      if (!Times(plane, line, index, event, &start, &end)) return;
      if (event.stats.root.value_or(meta->root)) {
        // A step root spans the step: a marker when it has a step number, a wrapper anyway.
        const std::optional<int64_t>& step = event.stats.step_num;
        if (event.stats.has_step && step && *step >= 0) {
          trace_->steps.push_back(StepMarker{*step, start, end, line.id, event.stats.cut});
        } else {
          warnings_.Note("step roots (_r) without a non-negative integer step_num ignored",
                         [&] { return Where(plane, line, index); });
        }
        return;
      }
      switch (meta->role) {
        case HostRole::kMarker:
          trace_->steps.push_back(StepMarker{meta->step, start, end, line.id, event.stats.cut});
          break;
        case HostRole::kWrapper:
          break;
        case HostRole::kOp:
          // A thread's wrapper joining another thread's step root (TSL's consumer context): it
          // spans the step, it is not host work.
          if (event.stats.consumer) break;
          if (meta->bad_step) {
            warnings_.Note("events named like step markers with a step number out of range", [&] {
              return absl::StrCat(Where(plane, line, index), " '", meta->name, "'");
            });
          }
          trace_->host_ops.push_back(Op{start, end, meta->kind});
          break;
      }
    };
    if (!ReadEvents(plane, line, stats, want_stats, on_event)) return false;
  }
  return true;
}

bool Reader::ReadDevicePlane(const PlaneInfo& plane, absl::string_view prefix) {
  int64_t ordinal = 0;
  const bool breakdown =
      trace_ != nullptr &&
      absl::SimpleAtoi(absl::string_view(plane.name).substr(prefix.size()), &ordinal);
  if (trace_ != nullptr && !breakdown) {
    warnings_.Note("device planes with a bad ordinal skipped",
                   [&] { return absl::StrCat("plane '", plane.name, "'"); });
  }
  if (!breakdown && extras_ == nullptr) return true;
  DeviceTrace device;
  device.id = ordinal;
  device.name = plane.name;

  StatTable stats;
  if (!ReadStatTable(plane, &stats, nullptr)) return false;
  IdTable<DeviceMeta> table;
  const bool record = collectives();
  const bool ends = this->ends();
  const bool window_from_events = record && !profile_stop_.has_value();
  bool any_aligning = false;
  const auto make = [&](absl::string_view name,
                        const std::vector<std::pair<RawStat, std::string>>& md_stats) {
    DeviceMeta m;
    std::optional<OpKind> from_details;
    for (const auto& [s, str] : md_stats) {
      if (stats.Role(s.metadata_id) == StatRole::kMemcpyDetails) {
        from_details = MemcpyKindFromDetails(stats.StrValue(s, str));
      }
    }
    m.kind = from_details.value_or(ClassifyDeviceOpName(name));
    if (record) m.kernel_kind = xspace_collectives::DeviceKernelKind(name);
    if (ends) m.aligns = IsCollectiveOpName(name);
    any_aligning |= m.aligns;
    return m;
  };
  if (!ReadEventMetadata(plane, stats, make, &table)) return false;

  // Which lines hold the device's activity (see the header).
  std::vector<LineInfo> lines(plane.lines.size());
  bool has_xla_ops = false;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (!ReadLineHeader(plane, plane.lines[i], &lines[i])) return false;
    has_xla_ops |= lines[i].name == kXlaOpsLine;
    if (extras_ != nullptr) extras_->events += static_cast<int64_t>(lines[i].events);
  }
  const bool tpu = prefix == xspace::kTpuPlanePrefix;
  const auto use_line = [&](const LineInfo& line) {
    if (!breakdown) return false;
    if (tpu && has_xla_ops) return line.name == kXlaOpsLine;
    return !xspace::IsDerivedLine(line.name);
  };
  size_t events = 0;
  for (const LineInfo& line : lines) {
    if (use_line(line)) events += line.events;
  }
  device.ops.reserve(events);
  // The collectives' record: every line but XProf's derived ones (and those too for the window's
  // end of a trace without a profile stop); alignment: every line of a plane with collectives.
  const bool read_all = record || (ends && any_aligning);
  if (record) extras_->collectives.BeginDevice();
  for (const LineInfo& line : lines) {
    const bool for_breakdown = use_line(line);
    const bool derived = xspace::IsDerivedLine(line.name);
    if (!for_breakdown && !(ends && any_aligning) &&
        !(record && (!derived || window_from_events))) {
      continue;
    }
    // Stats are read for the breakdown's memcpy directions, and else only on the events that
    // need them: a collective kernel's correlation id (the record), an aligning collective's
    // step-cut stat (alignment). Most kernels are neither, and their stats are skipped.
    const bool kernel_ids = record && !derived && stats.any_correlation;
    const bool cut_stats = ends && any_aligning && stats.any_step_cut;
    const bool line_stats = for_breakdown && stats.any_memcpy_details;
    const auto want_stats = [&](const Event& event, bool id_seen) {
      if (line_stats) return true;
      if (!kernel_ids && !cut_stats) return false;
      if (!id_seen) return true;  // its metadata is not known yet
      const DeviceMeta* meta = table.Find(event.metadata_id);
      return meta != nullptr &&
             ((kernel_ids && meta->kernel_kind.has_value()) || (cut_stats && meta->aligns));
    };
    const auto on_event = [&](int64_t index, const Event& event) {
      const DeviceMeta* meta = table.Find(event.metadata_id);
      if (read_all) {
        if (window_from_events) {
          extras_->last_end_ns = std::max(extras_->last_end_ns, RawEnd(line, event));
        }
        if (record && !derived) {
          extras_->collectives.DeviceEvent(
              meta == nullptr ? std::nullopt : meta->kernel_kind, event.stats.first.correlation_id,
              [&] { return std::pair(RawStart(line, event), RawEnd(line, event)); });
        }
        // A collective clipped at the window's end did not end there (alignment.h).
        if (ends && meta != nullptr && meta->aligns && !event.stats.has_cut) {
          extras_->ends_ns.push_back(RawEnd(line, event));
        }
      }
      if (!for_breakdown) return;
      if (meta == nullptr) return UnknownMetadata(plane, line, index, event);
      int64_t start = 0;
      int64_t end = 0;
      if (!Times(plane, line, index, event, &start, &end)) return;
      device.ops.push_back(Op{start, end, event.stats.memcpy.value_or(meta->kind)});
    };
    if (!ReadEvents(plane, line, stats, want_stats, on_event)) return false;
  }
  if (breakdown) trace_->devices.push_back(std::move(device));
  return true;
}

bool Reader::CountPlaneEvents(const PlaneInfo& plane) {
  for (const Range& range : plane.lines) {
    LineInfo line;
    if (!ReadLineHeader(plane, range, &line)) return false;
    extras_->events += static_cast<int64_t>(line.events);
  }
  return true;
}

bool Reader::ReadPlanes(bool* any_host_plane) {
  const auto device_prefix = [](const PlaneInfo& plane) -> std::optional<absl::string_view> {
    for (const absl::string_view prefix :
         {xspace::kGpuPlanePrefix, xspace::kTpuPlanePrefix, xspace::kCustomPlanePrefix}) {
      if (absl::StartsWith(plane.name, prefix)) return prefix;
    }
    return std::nullopt;
  };
  // The device planes first, whatever their place in the file: the hang record keeps a host
  // launch only when it launches a collective kernel, which the devices have said by then.
  for (const PlaneInfo& plane : planes_) {
    if (std::optional<absl::string_view> prefix = device_prefix(plane)) {
      *any_host_plane = true;  // a host trace after all, if only of its devices
      if (!ReadDevicePlane(plane, *prefix)) return false;
    }
  }
  for (const PlaneInfo& plane : planes_) {
    if (plane.name == xspace::kHostPlaneName) {
      *any_host_plane = true;
      if (!ReadHostPlane(plane)) return false;
    } else if (!device_prefix(plane).has_value() && counts() && !CountPlaneEvents(plane)) {
      return false;
    }
  }
  return true;
}

void Reader::PassOnSpaceMessages() {
  const auto pass_on = [&](absl::string_view what, const std::vector<std::string>& kept,
                           size_t total) {
    for (const std::string& message : kept)
      warnings_.Add(absl::StrCat("trace ", what, ": ", message));
    if (total > kept.size()) {
      warnings_.Add(absl::StrCat("trace ", what, ": ", total - kept.size(), " more not shown"));
    }
  };
  static_assert(kTraceErrorWarningPrefix == "trace error: ");  // what pass_on("error") writes
  pass_on("error", space_errors_, space_errors_total_);
  pass_on("warning", space_warnings_, space_warnings_total_);
}

}  // namespace

absl::StatusOr<HostTrace> ReadXSpaceHost(const ByteSource& bytes, const std::string& host,
                                         int64_t offset_ns, const ReaderOptions& options) {
  PROFCTL_ASSIGN_OR_RETURN(const StepMatcher matcher, StepMatcher::Create(options.step_pattern));
  return ReadXSpaceHost(bytes, host, offset_ns, matcher);
}

absl::StatusOr<HostTrace> ReadXSpaceHost(const ByteSource& bytes, const std::string& host,
                                         int64_t offset_ns, const StepMatcher& matcher) {
  PROFCTL_ASSIGN_OR_RETURN(
      HostDecode decoded,
      DecodeXSpaceHost(bytes, host, offset_ns, matcher, {.breakdown = true, .collectives = false}));
  return std::move(decoded.trace);
}

absl::StatusOr<HostDecode> DecodeXSpaceHost(const ByteSource& bytes, const std::string& host,
                                            int64_t offset_ns, const StepMatcher& matcher,
                                            const HostDecodeOptions& options) {
  if (bytes.size() > static_cast<uint64_t>(INT_MAX)) {
    return absl::DataLossError(
        absl::StrCat("not a valid serialized XSpace: ", bytes.size(),
                     " bytes is over the 2 GiB limit of a protobuf message"));
  }
  HostDecode out;
  absl::Status trace_error;
  if (!options.breakdown) {
    trace_error = absl::FailedPreconditionError("the breakdown's inputs were not asked for");
  } else if (offset_ns < -kMaxAbsOffsetNs || offset_ns > kMaxAbsOffsetNs) {
    trace_error = absl::InvalidArgumentError(absl::StrCat(
        "host ", host, ": clock offset ", offset_ns, " ns is out of range (|offset| <= 2^61 ns)"));
  }
  const bool extras_wanted = options.collectives || options.collective_ends || options.counts;
  if (!trace_error.ok() && !extras_wanted) return trace_error;
  HostTrace trace;
  trace.host = host;
  Extras extras(options);
  Reader reader(bytes, trace_error.ok() ? offset_ns : 0, matcher,
                trace_error.ok() ? &trace : nullptr, extras_wanted ? &extras : nullptr);
  if (!reader.ReadStructure() || !reader.ReadProfileWindow()) return reader.Error();
  const int64_t profile_start = reader.profile_start();
  const std::optional<int64_t> profile_stop = reader.profile_stop();
  if (trace_error.ok() &&
      (profile_start > kMaxAbsTimeNs || (profile_stop && *profile_stop > kMaxAbsTimeNs))) {
    trace_error = absl::InvalidArgumentError(
        absl::StrCat("host ", host, ": profile window [", profile_start, ", ",
                     profile_stop.value_or(0), "] ns is out of range (<= 2^62 ns)"));
    if (!extras_wanted) return trace_error;
    reader.DropTrace();  // the rest is still read
  }
  bool host_plane = false;
  if (!reader.ReadPlanes(&host_plane)) return reader.Error();
  // A read error can end a stream at a field boundary, which looks like a clean end.
  if (absl::Status io = bytes.status(); !io.ok()) return io;

  if (extras_wanted) {
    if (options.collectives) {
      out.collectives = std::move(extras.collectives)
                            .Finish(profile_start, profile_stop.value_or(extras.last_end_ns));
    }
    if (options.collective_ends) {
      out.collective_ends = DedupeCollectiveEnds(std::move(extras.ends_ns));
    }
    out.events = extras.events;
    out.steps = static_cast<int64_t>(extras.root_steps.size());
  }
  if (trace_error.ok() && !host_plane) {
    // A trace whose sources all failed has no such plane; its own first error says why.
    trace_error = absl::InvalidArgumentError(absl::StrCat(
        "host ", host, ": the XSpace has no /host:CPU and no /device:{GPU,TPU,CUSTOM}:N plane (",
        reader.planes().size(), " planes): not a host trace",
        reader.space_errors().empty() ? "" : "; the trace says: ",
        reader.space_errors().empty() ? "" : reader.space_errors().front()));
  }
  if (!trace_error.ok()) {
    out.trace = trace_error;
    return out;
  }

  // The window.
  if (profile_start > 0) {
    trace.window_start_ns = profile_start - offset_ns;
    if (profile_stop && *profile_stop >= profile_start) {
      trace.window_end_ns = *profile_stop - offset_ns;
    } else {
      if (profile_stop) {
        reader.warnings().Add(absl::StrCat("profile_stop_time ", *profile_stop,
                                           " is before profile_start_time ", profile_start,
                                           ": window ends at the last event"));
      }
      trace.window_end_ns = std::max(trace.window_start_ns, reader.max_end());
    }
  } else if (reader.any_event()) {
    trace.window_start_ns = reader.min_start();
    trace.window_end_ns = reader.max_end();
  }
  if (!reader.any_event()) reader.warnings().Add("the trace has no events");

  std::sort(trace.steps.begin(), trace.steps.end(), [](const StepMarker& a, const StepMarker& b) {
    return std::tie(a.start_ns, a.step, a.thread_id, a.end_ns) <
           std::tie(b.start_ns, b.step, b.thread_id, b.end_ns);
  });
  reader.PassOnSpaceMessages();
  trace.warnings = std::move(reader.warnings()).Finish();
  out.trace = std::move(trace);
  return out;
}

RankCollectives ReadRankCollectives(const tensorflow::profiler::XSpace& space,
                                    const StepMatcher& steps) {
  const std::string bytes = space.SerializeAsString();
  absl::StatusOr<HostDecode> decoded = DecodeXSpaceHost(StringByteSource(bytes), "", 0, steps,
                                                        {.breakdown = false, .collectives = true});
  // A decoded message always serializes to well-formed bytes under 2 GiB.
  if (!decoded.ok()) return {};
  return std::move(decoded->collectives);
}

absl::StatusOr<HostTrace> ReadXSpaceHost(const tensorflow::profiler::XSpace& space,
                                         const std::string& host, int64_t offset_ns,
                                         const ReaderOptions& options) {
  const std::string bytes = space.SerializeAsString();
  return ReadXSpaceHost(StringByteSource(bytes), host, offset_ns, options);
}

}  // namespace profctl::analysis
