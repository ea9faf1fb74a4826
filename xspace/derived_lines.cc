#include "xspace/derived_lines.h"

#include <algorithm>
#include <limits>
#include <string>
#include <tuple>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace profctl::xspace {
namespace {

constexpr absl::string_view kStatHloOp = "hlo_op";
constexpr absl::string_view kStatTfOp = "tf_op";

bool IsKernelName(absl::string_view name) {
  return !absl::StartsWith(name, "Memcpy") && !absl::StartsWith(name, "Memset") &&
         !absl::StartsWith(name, "Memory");
}

// One device event as the derivation needs it.
struct DeviceWork {
  int64_t start_ns;
  int64_t end_ns;
  std::optional<int64_t> step;
  absl::string_view tf_op;   // empty: none, or not a kernel
  absl::string_view hlo_op;  // empty: none, or not a kernel
};

// Start order, longer first at equal starts.
bool Before(const DerivedEvent& a, const DerivedEvent& b) {
  return std::tie(a.start_ns, b.end_ns) < std::tie(b.start_ns, a.end_ns);
}

// Makes `events` (in start order) nest: see RULES in the header.
std::vector<DerivedEvent> Nest(std::vector<DerivedEvent> events) {
  std::stable_sort(events.begin(), events.end(), Before);
  std::vector<DerivedEvent> out;
  out.reserve(events.size());
  std::vector<int64_t> open;  // ends of the enclosing events kept, innermost last
  for (DerivedEvent& e : events) {
    while (!open.empty() && open.back() <= e.start_ns) open.pop_back();
    while (!open.empty() && e.end_ns > open.back()) {
      e.start_ns = open.back();
      open.pop_back();
    }
    if (e.end_ns <= e.start_ns) continue;
    open.push_back(e.end_ns);
    out.push_back(e);
  }
  // Clipping can move a start past a later event's: keep the line in start order.
  std::stable_sort(out.begin(), out.end(), Before);
  return out;
}

// The op line of `work` (in start order) for the op `op_of` picks.
std::vector<DerivedEvent> OpLine(const std::vector<DeviceWork>& work,
                                 absl::string_view DeviceWork::*op_of) {
  std::vector<DerivedEvent> events;
  for (const DeviceWork& w : work) {
    const absl::string_view op = w.*op_of;
    if (op.empty()) continue;  // not a kernel, or none of this op: no event, no break
    if (!events.empty() && events.back().name == op && events.back().step == w.step) {
      events.back().end_ns = std::max(events.back().end_ns, w.end_ns);
      continue;
    }
    events.push_back(DerivedEvent{op, w.start_ns, w.end_ns, w.step});
  }
  return Nest(std::move(events));
}

}  // namespace

DerivedLinesBuilder::DerivedLinesBuilder(const XSpace& space)
    : profile_start_ns_(ProfileStartNs(space)) {
  const XPlane* host = FindPlane(space, kHostPlaneName);
  if (host == nullptr) return;
  const XPlaneReader reader(*host);
  reader.ForEachEvent([&](const XLine& line, const XEvent& event) {
    if (event.data_case() == XEvent::kNumOccurrences) return;
    const int64_t start = EventStartNs(profile_start_ns_, line, event);
    if (std::optional<int64_t> corr = reader.IntStat(event, kStatCorrelationId)) {
      launch_.emplace_back(static_cast<uint64_t>(*corr), start);
    }
    const std::optional<int64_t> root = reader.IntStat(event, kStatIsRoot);
    const std::optional<int64_t> step = reader.IntStat(event, kStatStepNum);
    if (root.value_or(0) >= 1 && step.has_value()) {
      steps_.push_back(Span{start, EventEndNs(profile_start_ns_, line, event), *step});
    }
  });
  std::sort(launch_.begin(), launch_.end());
  std::sort(steps_.begin(), steps_.end(), [](const Span& a, const Span& b) {
    return std::tie(a.start_ns, a.step) < std::tie(b.start_ns, b.step);
  });
  max_end_.reserve(steps_.size());
  for (const Span& s : steps_) {
    max_end_.push_back(max_end_.empty() ? s.end_ns : std::max(max_end_.back(), s.end_ns));
  }
}

std::optional<int64_t> DerivedLinesBuilder::StepAt(int64_t t_ns) const {
  // The latest-starting root that starts at or before t and still holds it: back from the last
  // root starting by t while an earlier root may still reach t (max_end_).
  auto it = std::upper_bound(steps_.begin(), steps_.end(), t_ns,
                             [](int64_t t, const Span& s) { return t < s.start_ns; });
  for (auto i = static_cast<size_t>(it - steps_.begin()); i > 0 && max_end_[i - 1] > t_ns; --i) {
    if (t_ns < steps_[i - 1].end_ns) return steps_[i - 1].step;
  }
  return std::nullopt;
}

std::vector<DerivedLine> DerivedLinesBuilder::Derive(const XPlane& device) const {
  std::vector<DerivedLine> lines;
  for (const XLine& line : device.lines()) {
    if (IsDerivedLine(line.name())) return lines;
  }
  const XPlaneReader reader(device);
  std::vector<DeviceWork> work;
  reader.ForEachEvent([&](const XLine& line, const XEvent& event) {
    if (event.data_case() == XEvent::kNumOccurrences) return;
    DeviceWork w;
    w.start_ns = EventStartNs(profile_start_ns_, line, event);
    w.end_ns = EventEndNs(profile_start_ns_, line, event);
    int64_t step_at = w.start_ns;
    if (std::optional<int64_t> corr = reader.IntStat(event, kStatCorrelationId)) {
      auto it = std::lower_bound(
          launch_.begin(), launch_.end(),
          std::make_pair(static_cast<uint64_t>(*corr), std::numeric_limits<int64_t>::min()));
      if (it != launch_.end() && it->first == static_cast<uint64_t>(*corr)) step_at = it->second;
    }
    w.step = StepAt(step_at);
    if (w.end_ns > w.start_ns && IsKernelName(reader.EventName(event))) {
      for (const XStat& s : event.stats()) {
        auto md = device.stat_metadata().find(s.metadata_id());
        if (md == device.stat_metadata().end()) continue;
        const std::string& stat = md->second.name();
        if (stat != kStatTfOp && stat != kStatHloOp) continue;
        absl::string_view value;
        if (s.value_case() == XStat::kStrValue) {
          value = s.str_value();
        } else if (s.value_case() == XStat::kRefValue) {
          auto ref = device.stat_metadata().find(static_cast<int64_t>(s.ref_value()));
          if (ref != device.stat_metadata().end()) value = ref->second.name();
        }
        (stat == kStatTfOp ? w.tf_op : w.hlo_op) = value;
      }
    }
    work.push_back(w);
  });
  std::stable_sort(work.begin(), work.end(), [](const DeviceWork& a, const DeviceWork& b) {
    return std::tie(a.start_ns, b.end_ns) < std::tie(b.start_ns, a.end_ns);
  });

  DerivedLine steps{kStepsLineId, kStepsLineName, {}, {}};
  absl::flat_hash_map<int64_t, size_t> step_event;  // step -> index in steps.events
  for (const DeviceWork& w : work) {
    if (!w.step.has_value()) continue;
    auto [it, added] = step_event.try_emplace(*w.step, steps.events.size());
    if (added) {
      steps.step_names.push_back(std::make_unique<std::string>(absl::StrCat("step ", *w.step)));
      steps.events.push_back(DerivedEvent{*steps.step_names.back(), w.start_ns, w.end_ns, w.step});
    } else {
      DerivedEvent& e = steps.events[it->second];
      e.start_ns = std::min(e.start_ns, w.start_ns);
      e.end_ns = std::max(e.end_ns, w.end_ns);
    }
  }
  steps.events = Nest(std::move(steps.events));
  if (!steps.events.empty()) lines.push_back(std::move(steps));

  DerivedLine tf_ops{kTfOpsLineId, kTfOpsLineName, OpLine(work, &DeviceWork::tf_op), {}};
  if (!tf_ops.events.empty()) lines.push_back(std::move(tf_ops));
  DerivedLine xla_ops{kXlaOpsLineId, kXlaOpsLineName, OpLine(work, &DeviceWork::hlo_op), {}};
  if (!xla_ops.events.empty()) lines.push_back(std::move(xla_ops));
  return lines;
}

int64_t AddDerivedLines(XSpace* space) {
  const int64_t profile_start = ProfileStartNs(*space);
  // Derived first, over the space as it is; written after, copying the names out first (adding
  // metadata may move what the views point into).
  struct Pending {
    XPlane* plane;
    int64_t id;
    std::string line_name;
    std::vector<std::tuple<std::string, int64_t, int64_t, std::optional<int64_t>>> events;
  };
  std::vector<Pending> pending;
  {
    const DerivedLinesBuilder builder(*space);
    for (XPlane& plane : *space->mutable_planes()) {
      if (!absl::StartsWith(plane.name(), kGpuPlanePrefix)) continue;
      for (DerivedLine& line : builder.Derive(plane)) {
        Pending p{&plane, line.id, std::string(line.name), {}};
        for (const DerivedEvent& e : line.events) {
          p.events.emplace_back(std::string(e.name), e.start_ns, e.end_ns, e.step);
        }
        pending.push_back(std::move(p));
      }
    }
  }
  int64_t added = 0;
  for (Pending& p : pending) {
    XPlaneBuilder b(p.plane, p.plane->id(), p.plane->name(), profile_start);
    XLine* line = b.AddLine(p.id, p.line_name, profile_start);
    for (const auto& [name, start, end, step] : p.events) {
      XEvent* e = b.AddEvent(line, b.EventMetadataId(name), start, end - start);
      if (step.has_value()) b.AddStat(e, b.StatMetadataId(kStatStepNum), *step);
      ++added;
    }
  }
  return added;
}

}  // namespace profctl::xspace
