#include "xspace/xspace.h"

#include <algorithm>
#include <limits>

#include "absl/base/macros.h"
#include "absl/strings/str_cat.h"

namespace profctl::xspace {
namespace {

constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();
constexpr int64_t kInt64Min = std::numeric_limits<int64_t>::min();
constexpr int64_t kPicosPerNano = 1000;

int64_t Saturate(__int128 v) {
  if (v > kInt64Max) return kInt64Max;
  if (v < kInt64Min) return kInt64Min;
  return static_cast<int64_t>(v);
}

__int128 FloorDiv(__int128 a, int64_t b) {
  __int128 q = a / b;
  if ((a % b != 0) && (a < 0)) --q;
  return q;
}

bool FitsInt64(__int128 v) { return v >= kInt64Min && v <= kInt64Max; }

// Start of an event relative to the profile start, in ps (exact: cannot overflow __int128).
__int128 RelativeStartPs(int64_t line_timestamp_ns, int64_t offset_ps) {
  return static_cast<__int128>(line_timestamp_ns) * kPicosPerNano + offset_ps;
}

// The first uint64 value of stat `name` on a Task Environment plane.
std::optional<uint64_t> TaskEnvUintStat(const XSpace& space, absl::string_view name) {
  for (const XPlane& plane : space.planes()) {
    if (plane.name() != kTaskEnvPlaneName) continue;
    for (const XStat& s : plane.stats()) {
      if (s.value_case() != XStat::kUint64Value) continue;
      auto md = plane.stat_metadata().find(s.metadata_id());
      if (md != plane.stat_metadata().end() && md->second.name() == name) return s.uint64_value();
    }
  }
  return std::nullopt;
}

int64_t ClampToInt64(uint64_t v) {
  return v > static_cast<uint64_t>(kInt64Max) ? kInt64Max : static_cast<int64_t>(v);
}

}  // namespace

int64_t ProfileStartNs(const XSpace& space) {
  return ClampToInt64(TaskEnvUintStat(space, kStatProfileStart).value_or(0));
}

std::optional<int64_t> ProfileStopNs(const XSpace& space) {
  std::optional<uint64_t> stop = TaskEnvUintStat(space, kStatProfileStop);
  if (!stop) return std::nullopt;
  return ClampToInt64(*stop);
}

void SetProfileWindow(XSpace* space, int64_t start_ns, int64_t stop_ns) {
  ABSL_ASSERT(start_ns >= 0 && stop_ns >= 0);
  XPlane* env = nullptr;
  for (XPlane& plane : *space->mutable_planes()) {
    if (plane.name() == kTaskEnvPlaneName) {
      env = &plane;
      break;
    }
  }
  if (env == nullptr) env = space->add_planes();
  XPlaneBuilder builder(env, env->id() != 0 ? env->id() : kTaskEnvPlaneId, kTaskEnvPlaneName);
  const int64_t start_id = builder.StatMetadataId(kStatProfileStart);
  const int64_t stop_id = builder.StatMetadataId(kStatProfileStop);
  auto* stats = env->mutable_stats();
  for (int i = stats->size() - 1; i >= 0; --i) {
    const int64_t id = stats->Get(i).metadata_id();
    if (id == start_id || id == stop_id) stats->DeleteSubrange(i, 1);
  }
  builder.AddPlaneStat(start_id, static_cast<uint64_t>(std::max<int64_t>(start_ns, 0)));
  builder.AddPlaneStat(stop_id, static_cast<uint64_t>(std::max<int64_t>(stop_ns, 0)));
}

int64_t EventStartNs(int64_t profile_start_ns, int64_t line_timestamp_ns, int64_t offset_ps) {
  return Saturate(profile_start_ns +
                  FloorDiv(RelativeStartPs(line_timestamp_ns, offset_ps), kPicosPerNano));
}

int64_t EventEndNs(int64_t profile_start_ns, int64_t line_timestamp_ns, int64_t offset_ps,
                   int64_t duration_ps) {
  return Saturate(
      profile_start_ns +
      FloorDiv(RelativeStartPs(line_timestamp_ns, offset_ps) + duration_ps, kPicosPerNano));
}

int64_t EventStartNs(int64_t profile_start_ns, const XLine& line, const XEvent& event) {
  return EventStartNs(profile_start_ns, line.timestamp_ns(), event.offset_ps());
}

int64_t EventEndNs(int64_t profile_start_ns, const XLine& line, const XEvent& event) {
  return EventEndNs(profile_start_ns, line.timestamp_ns(), event.offset_ps(), event.duration_ps());
}

XPlaneBuilder::XPlaneBuilder(XPlane* plane, int64_t id, absl::string_view name,
                             int64_t profile_start_ns)
    : plane_(plane), profile_start_ns_(profile_start_ns) {
  plane_->set_id(id);
  plane_->set_name(std::string(name));
  // An existing plane (a file's, or one another writer filled) keeps its names' ids.
  for (const auto& [mid, md] : plane_->event_metadata()) event_ids_.try_emplace(md.name(), mid);
  for (const auto& [sid, sd] : plane_->stat_metadata()) stat_ids_.try_emplace(sd.name(), sid);
}

namespace {

// The first id from size + 1 on that `metadata` does not use. Ids start at 1 (0 reads as "unset"
// in proto3); a plane's ids need not be dense (a TensorFlow file's often are not), and another
// builder on the same plane may have added some since this one was made.
template <typename Map>
int64_t FreeMetadataId(const Map& metadata) {
  int64_t id = static_cast<int64_t>(metadata.size()) + 1;
  while (metadata.contains(id)) ++id;
  return id;
}

}  // namespace

int64_t XPlaneBuilder::EventMetadataId(absl::string_view name) {
  auto [it, inserted] = event_ids_.try_emplace(name, 0);
  if (inserted) {
    it->second = FreeMetadataId(plane_->event_metadata());
    XEventMetadata& md = (*plane_->mutable_event_metadata())[it->second];
    md.set_id(it->second);
    md.set_name(std::string(name));
  }
  return it->second;
}

int64_t XPlaneBuilder::StatMetadataId(absl::string_view name) {
  auto [it, inserted] = stat_ids_.try_emplace(name, 0);
  if (inserted) {
    it->second = FreeMetadataId(plane_->stat_metadata());
    XStatMetadata& md = (*plane_->mutable_stat_metadata())[it->second];
    md.set_id(it->second);
    md.set_name(std::string(name));
  }
  return it->second;
}

XLine* XPlaneBuilder::AddLine(int64_t id, absl::string_view name, int64_t timestamp_ns) {
  XLine* line = plane_->add_lines();
  line->set_id(id);
  line->set_display_id(id);
  line->set_name(std::string(name));
  line->set_timestamp_ns(timestamp_ns - profile_start_ns_);
  return line;
}

XEvent* XPlaneBuilder::AddEvent(XLine* line, int64_t metadata_id, int64_t start_ns,
                                int64_t duration_ns) {
  XEvent* e = line->add_events();
  e->set_metadata_id(metadata_id);
  e->set_offset_ps((start_ns - profile_start_ns_ - line->timestamp_ns()) * kPicosPerNano);
  e->set_duration_ps(duration_ns * kPicosPerNano);
  return e;
}

void XPlaneBuilder::AddStat(XEvent* event, int64_t stat_id, int64_t v) {
  XStat* s = event->add_stats();
  s->set_metadata_id(stat_id);
  s->set_int64_value(v);
}
void XPlaneBuilder::AddStat(XEvent* event, int64_t stat_id, uint64_t v) {
  XStat* s = event->add_stats();
  s->set_metadata_id(stat_id);
  s->set_uint64_value(v);
}
void XPlaneBuilder::AddStat(XEvent* event, int64_t stat_id, absl::string_view v) {
  XStat* s = event->add_stats();
  s->set_metadata_id(stat_id);
  s->set_str_value(std::string(v));
}
void XPlaneBuilder::AddPlaneStat(int64_t stat_id, int64_t v) {
  XStat* s = plane_->add_stats();
  s->set_metadata_id(stat_id);
  s->set_int64_value(v);
}
void XPlaneBuilder::AddPlaneStat(int64_t stat_id, uint64_t v) {
  XStat* s = plane_->add_stats();
  s->set_metadata_id(stat_id);
  s->set_uint64_value(v);
}

XPlaneReader::XPlaneReader(const XPlane& plane) : plane_(plane) {
  for (const auto& [sid, sd] : plane_.stat_metadata()) stat_ids_[sd.name()] = sid;
}

absl::string_view XPlaneReader::EventName(const XEvent& event) const {
  auto it = plane_.event_metadata().find(event.metadata_id());
  if (it == plane_.event_metadata().end()) return {};
  return it->second.name();
}

std::optional<int64_t> XPlaneReader::StatId(absl::string_view name) const {
  auto it = stat_ids_.find(name);
  if (it == stat_ids_.end()) return std::nullopt;
  return it->second;
}

std::optional<int64_t> XPlaneReader::IntStat(const XEvent& event, absl::string_view name) const {
  const std::optional<int64_t> id = StatId(name);
  if (!id) return std::nullopt;
  for (const XStat& s : event.stats()) {
    if (s.metadata_id() != *id) continue;
    if (s.value_case() == XStat::kInt64Value) return s.int64_value();
    if (s.value_case() == XStat::kUint64Value) return static_cast<int64_t>(s.uint64_value());
  }
  return std::nullopt;
}

std::optional<std::string> XPlaneReader::StrStat(const XEvent& event,
                                                 absl::string_view name) const {
  const std::optional<int64_t> id = StatId(name);
  if (!id) return std::nullopt;
  for (const XStat& s : event.stats()) {
    if (s.metadata_id() == *id && s.value_case() == XStat::kStrValue) return s.str_value();
  }
  return std::nullopt;
}

void XPlaneReader::ForEachEvent(absl::FunctionRef<void(const XLine&, const XEvent&)> fn) const {
  for (const XLine& line : plane_.lines()) {
    for (const XEvent& event : line.events()) fn(line, event);
  }
}

const XPlane* FindPlane(const XSpace& space, absl::string_view name) {
  for (const XPlane& p : space.planes()) {
    if (p.name() == name) return &p;
  }
  return nullptr;
}

int64_t CountEvents(const XSpace& space) {
  int64_t n = 0;
  for (const XPlane& p : space.planes()) {
    for (const XLine& l : p.lines()) n += l.events_size();
  }
  return n;
}

absl::Status Validate(const XSpace& space) {
  for (absl::string_view name : {kStatProfileStart, kStatProfileStop}) {
    const std::optional<uint64_t> v = TaskEnvUintStat(space, name);
    if (v && *v > static_cast<uint64_t>(kInt64Max)) {
      return absl::InvalidArgumentError(absl::StrCat(kTaskEnvPlaneName, " ", name, " ", *v,
                                                     " ns does not fit int64 nanoseconds"));
    }
  }
  const int64_t profile_start_ns = ProfileStartNs(space);
  for (int pi = 0; pi < space.planes_size(); ++pi) {
    const XPlane& plane = space.planes(pi);
    const std::string where_plane = absl::StrCat("plane #", pi, " '", plane.name(), "'");
    if (plane.name().empty()) {
      return absl::InvalidArgumentError(absl::StrCat(where_plane, " has no name"));
    }
    auto check_stats = [&](const auto& stats, const std::string& where) -> absl::Status {
      for (const XStat& s : stats) {
        if (!plane.stat_metadata().contains(s.metadata_id()) &&
            s.value_case() != XStat::VALUE_NOT_SET) {
          return absl::InvalidArgumentError(
              absl::StrCat(where, " has a stat with undefined metadata id ", s.metadata_id()));
        }
      }
      return absl::OkStatus();
    };
    // The scope-range tree's plane stats are id -> parent id pairs, with no metadata to define.
    if (plane.name() != kScopeRangeCallStackPlaneName) {
      if (absl::Status s = check_stats(plane.stats(), where_plane); !s.ok()) return s;
    }
    for (int li = 0; li < plane.lines_size(); ++li) {
      const XLine& line = plane.lines(li);
      const __int128 line_ps = static_cast<__int128>(line.timestamp_ns()) * kPicosPerNano;
      if (!FitsInt64(line_ps)) {
        return absl::InvalidArgumentError(absl::StrCat(
            where_plane, " line ", line.id(), " '", line.name(), "' timestamp_ns ",
            line.timestamp_ns(),
            " overflows int64 picoseconds (timestamp_ns * 1000): line timestamps must be "
            "relative to the profile start"));
      }
      for (int ei = 0; ei < line.events_size(); ++ei) {
        const XEvent& e = line.events(ei);
        const std::string where =
            absl::StrCat(where_plane, " line ", line.id(), " '", line.name(), "' event #", ei);
        if (!plane.event_metadata().contains(e.metadata_id())) {
          return absl::InvalidArgumentError(
              absl::StrCat(where, " has undefined metadata id ", e.metadata_id()));
        }
        if (e.duration_ps() < 0 || (e.data_case() == XEvent::kOffsetPs && e.offset_ps() < 0)) {
          return absl::InvalidArgumentError(
              absl::StrCat(where, " has a negative offset or duration"));
        }
        const __int128 end_ps =
            RelativeStartPs(line.timestamp_ns(), e.offset_ps()) + e.duration_ps();
        if (!FitsInt64(RelativeStartPs(line.timestamp_ns(), e.offset_ps())) || !FitsInt64(end_ps)) {
          return absl::InvalidArgumentError(absl::StrCat(
              where, " (line timestamp_ns ", line.timestamp_ns(), ", offset_ps ", e.offset_ps(),
              ", duration_ps ", e.duration_ps(), ") overflows int64 picoseconds"));
        }
        if (!FitsInt64(profile_start_ns + FloorDiv(end_ps, kPicosPerNano))) {
          return absl::InvalidArgumentError(
              absl::StrCat(where, " ends past int64 nanoseconds (profile start ", profile_start_ns,
                           " ns, line timestamp_ns ", line.timestamp_ns(), ", offset_ps ",
                           e.offset_ps(), ", duration_ps ", e.duration_ps(), ")"));
        }
        if (absl::Status s = check_stats(e.stats(), where); !s.ok()) return s;
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace profctl::xspace
