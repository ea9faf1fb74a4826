#include "xspace/xspace_merge.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/macros.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "xspace/xspace.h"

namespace profctl::xspace {
namespace {

using tensorflow::profiler::XEvent;
using tensorflow::profiler::XEventMetadata;
using tensorflow::profiler::XLine;
using tensorflow::profiler::XPlane;
using tensorflow::profiler::XSpace;
using tensorflow::profiler::XStat;
using tensorflow::profiler::XStatMetadata;

using IdMap = absl::flat_hash_map<int64_t, int64_t>;

template <typename Map>
std::vector<int64_t> SortedKeys(const Map& map) {
  std::vector<int64_t> keys;
  keys.reserve(map.size());
  for (const auto& [id, unused] : map) keys.push_back(id);
  std::sort(keys.begin(), keys.end());
  return keys;
}

template <typename Map>
int64_t MaxKey(const Map& map) {
  int64_t max_id = 0;
  for (const auto& [id, unused] : map) max_id = std::max(max_id, id);
  return max_id;
}

bool IsPlain(const XEventMetadata& md) {
  return md.stats().empty() && md.child_id().empty() && md.metadata().empty();
}

// Source id -> destination id for stat and event metadata, plus fresh ids for ids the source uses
// without defining them.
class Remapper {
 public:
  Remapper(const XPlane& src, XPlane* dst) : dst_(dst) {
    next_stat_id_ = MaxKey(dst->stat_metadata()) + 1;
    next_event_id_ = MaxKey(dst->event_metadata()) + 1;
    MapStatMetadata(src);
    MapEventMetadata(src);
  }

  int64_t StatId(int64_t src_id) { return Lookup(&stat_ids_, src_id, &next_stat_id_); }
  int64_t EventId(int64_t src_id) { return Lookup(&event_ids_, src_id, &next_event_id_); }

  void RemapStat(XStat* stat) {
    stat->set_metadata_id(StatId(stat->metadata_id()));
    if (stat->value_case() == XStat::kRefValue) {
      stat->set_ref_value(static_cast<uint64_t>(StatId(static_cast<int64_t>(stat->ref_value()))));
    }
  }

  // Copies the source's event metadata that got fresh ids into the destination, remapped.
  void CopyEventMetadata(XPlane* src) {
    for (const int64_t src_id : fresh_event_ids_) {
      XEventMetadata md = std::move((*src->mutable_event_metadata())[src_id]);
      md.set_id(event_ids_.at(src_id));
      for (XStat& s : *md.mutable_stats()) RemapStat(&s);
      for (int64_t& child : *md.mutable_child_id()) child = EventId(child);
      (*dst_->mutable_event_metadata())[md.id()] = std::move(md);
    }
  }

 private:
  void MapStatMetadata(const XPlane& src) {
    absl::flat_hash_map<std::string, int64_t> by_name;
    for (const int64_t id : SortedKeys(dst_->stat_metadata())) {
      by_name.try_emplace(dst_->stat_metadata().at(id).name(), id);
    }
    for (const int64_t src_id : SortedKeys(src.stat_metadata())) {
      const XStatMetadata& md = src.stat_metadata().at(src_id);
      auto it = by_name.find(md.name());
      int64_t dst_id = 0;
      if (it != by_name.end()) {
        dst_id = it->second;
      } else {
        dst_id = next_stat_id_++;
        XStatMetadata copy = md;
        copy.set_id(dst_id);
        (*dst_->mutable_stat_metadata())[dst_id] = std::move(copy);
        by_name.emplace(md.name(), dst_id);
      }
      stat_ids_.emplace(src_id, dst_id);
    }
  }

  void MapEventMetadata(const XPlane& src) {
    absl::flat_hash_map<std::pair<std::string, std::string>, int64_t> plain;
    for (const int64_t id : SortedKeys(dst_->event_metadata())) {
      const XEventMetadata& md = dst_->event_metadata().at(id);
      if (IsPlain(md)) plain.try_emplace(std::make_pair(md.name(), md.display_name()), id);
    }
    for (const int64_t src_id : SortedKeys(src.event_metadata())) {
      const XEventMetadata& md = src.event_metadata().at(src_id);
      int64_t dst_id = 0;
      auto it =
          IsPlain(md) ? plain.find(std::make_pair(md.name(), md.display_name())) : plain.end();
      if (it != plain.end()) {
        dst_id = it->second;
      } else {
        dst_id = next_event_id_++;
        fresh_event_ids_.push_back(src_id);
      }
      event_ids_.emplace(src_id, dst_id);
    }
  }

  int64_t Lookup(IdMap* map, int64_t src_id, int64_t* next) {
    auto [it, inserted] = map->try_emplace(src_id, 0);
    if (inserted) it->second = (*next)++;  // undefined in the source: stays undefined
    return it->second;
  }

  XPlane* dst_;
  IdMap stat_ids_;
  IdMap event_ids_;
  std::vector<int64_t> fresh_event_ids_;
  int64_t next_stat_id_ = 1;
  int64_t next_event_id_ = 1;
};

int64_t DisplayId(const XLine& line) {
  return line.display_id() != 0 ? line.display_id() : line.id();
}

}  // namespace

void MergePlaneInto(XPlane* src, XPlane* dst) {
  ABSL_ASSERT(src != dst);
  Remapper remap(*src, dst);
  remap.CopyEventMetadata(src);

  absl::flat_hash_set<int64_t> line_ids;
  int64_t max_line_id = 0;
  for (const XLine& line : dst->lines()) {
    line_ids.insert(line.id());
    line_ids.insert(DisplayId(line));
    max_line_id = std::max({max_line_id, line.id(), DisplayId(line)});
  }
  for (XLine& line : *src->mutable_lines()) {
    if (line_ids.contains(line.id()) || line_ids.contains(DisplayId(line))) {
      const int64_t id = ++max_line_id;
      line.set_id(id);
      line.set_display_id(id);
    }
    line_ids.insert(line.id());
    line_ids.insert(DisplayId(line));
    max_line_id = std::max({max_line_id, line.id(), DisplayId(line)});
    for (XEvent& event : *line.mutable_events()) {
      event.set_metadata_id(remap.EventId(event.metadata_id()));
      for (XStat& s : *event.mutable_stats()) remap.RemapStat(&s);
    }
    *dst->add_lines() = std::move(line);
  }
  src->clear_lines();

  absl::flat_hash_set<int64_t> plane_stat_ids;
  for (const XStat& s : dst->stats()) plane_stat_ids.insert(s.metadata_id());
  // The scope-range tree's plane stats are scope id -> parent id pairs, not stats with metadata
  // (kScopeRangeCallStackPlaneName): kept as they are, the first of an id winning.
  const bool id_pairs = dst->name() == kScopeRangeCallStackPlaneName;
  for (XStat& s : *src->mutable_stats()) {
    if (!id_pairs) remap.RemapStat(&s);
    if (plane_stat_ids.insert(s.metadata_id()).second) *dst->add_stats() = std::move(s);
  }
  src->clear_stats();
  src->clear_event_metadata();
  src->clear_stat_metadata();
}

void AddOrMergePlane(XPlane* plane, XSpace* space) {
  int64_t max_id = 0;
  bool id_taken = false;
  for (XPlane& existing : *space->mutable_planes()) {
    if (existing.name() == plane->name()) {
      MergePlaneInto(plane, &existing);
      plane->Clear();
      return;
    }
    id_taken = id_taken || existing.id() == plane->id();
    max_id = std::max(max_id, existing.id());
  }
  XPlane* added = space->add_planes();
  *added = std::move(*plane);
  if (id_taken) added->set_id(max_id + 1);
  plane->Clear();
}

int MergeDuplicatePlanes(XSpace* space) {
  absl::flat_hash_map<std::string, int> first;
  std::vector<int> merged;
  auto* planes = space->mutable_planes();
  for (int i = 0; i < planes->size(); ++i) {
    auto [it, inserted] = first.try_emplace(planes->Get(i).name(), i);
    if (inserted) continue;
    MergePlaneInto(planes->Mutable(i), planes->Mutable(it->second));
    merged.push_back(i);
  }
  for (auto it = merged.rbegin(); it != merged.rend(); ++it) planes->DeleteSubrange(*it, 1);
  return static_cast<int>(merged.size());
}

}  // namespace profctl::xspace
