// BuildCuptiXSpace's host passes: API calls and synchronizations on their threads, NVTX ranges
// and steps, the launching threads' step joins, the op of each launch, the flight recorder's
// collective launches (cupti_xspace_internal.h).
#include <algorithm>
#include <iterator>
#include <map>
#include <numeric>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "agent/collectors/cupti/cupti_xspace_internal.h"
#include "agent/collectors/cupti/tf_op_names.h"

namespace profctl::agent::cupti::xspace_internal {
namespace {

using xspace::kApiOpScope;
using xspace::kNvtxOpScope;

// Synchronization events are named as TSL's CUPTI tracer names them
// (xla/backends/profiler/gpu/cupti_buffer_events.cc, AddSynchronizationActivityEvent).
absl::string_view SyncEventName(uint8_t type) {
  switch (static_cast<inject::SyncType>(type)) {
    case inject::SyncType::kEventSynchronize:
      return "cuEventSynchronize";
    case inject::SyncType::kStreamWaitEvent:
      return "cuStreamWaitEvent";
    case inject::SyncType::kStreamSynchronize:
      return "cuStreamSynchronize";
    case inject::SyncType::kContextSynchronize:
      return "cuCtxSynchronize";
    default:
      return "unknown synchronization event";
  }
}

}  // namespace

void CuptiXSpaceBuilder::AddApiCalls() {
  for (const RecordBatch& b : batches_) {
    for (const inject::ApiRecord& a : b.apis) {
      Pending p;
      if (!Place(b, a.start_ns, a.end_ns, &p.start_ns, &p.duration_ns)) continue;
      const absl::string_view name = b.String(a.name);
      p.name = name.empty() ? ApiName(a.cbid) : name;
      const uint64_t corr = HostCorrelation(a.pid != 0 ? a.pid : b.pid, a.correlation_id);
      if (auto it = launch_device_.find(corr); it != launch_device_.end()) {
        const uint64_t device = it->second;
        p.role = Role::kLaunch;
        p.correlation_id = corr;
        p.stats = [corr, device](XPlaneBuilder& plane, xspace::XEvent* e) {
          plane.AddStat(e, plane.StatMetadataId(xspace::kStatCorrelationId), corr);
          plane.AddStat(e, plane.StatMetadataId(xspace::kStatDeviceId), device);
        };
      }
      api_spans_[corr] = ApiSpan{a.tid, p.start_ns, p.start_ns + p.duration_ns};
      auto& thread = threads_[a.tid];
      thread.first = a.pid != 0 ? a.pid : b.pid;
      thread.second.push_back(std::move(p));
      ++stats_.api_calls;
    }
  }
}

void CuptiXSpaceBuilder::AddSynchronizations() {
  for (const RecordBatch& b : batches_) {
    for (const inject::SynchronizationRecord& y : b.syncs) {
      Pending p;
      if (!Place(b, y.start_ns, y.end_ns, &p.start_ns, &p.duration_ns)) continue;
      const uint64_t corr = HostCorrelation(b.pid, y.correlation_id);
      auto api = api_spans_.find(corr);
      if (api == api_spans_.end()) {
        ++stats_.unmatched_synchronizations;
        continue;
      }
      // Clamped into the call, so the line nests even where the two readings disagree.
      const int64_t begin = std::clamp(p.start_ns, api->second.start_ns, api->second.end_ns);
      const int64_t end = std::clamp(p.start_ns + p.duration_ns, begin, api->second.end_ns);
      p.start_ns = begin;
      p.duration_ns = end - begin;
      p.name = SyncEventName(y.type);
      std::optional<uint64_t> device;
      // A correlation id on a host event marks a launch (XProf, and the conformance checker,
      // want its device_id): only when the device is known and the API call does not carry the
      // id already.
      if (auto it = context_device_.find(HostCorrelation(b.pid, y.context_id));
          it != context_device_.end() && !launch_device_.contains(corr)) {
        device = it->second;
        p.role = Role::kLaunch;
        p.correlation_id = corr;
      }
      const uint64_t context = y.context_id;
      const std::optional<uint64_t> stream = y.stream_id != inject::kSyncNotApplicable
                                                 ? std::optional<uint64_t>(y.stream_id)
                                                 : std::nullopt;
      const std::optional<uint64_t> event = y.cuda_event_id != inject::kSyncNotApplicable
                                                ? std::optional<uint64_t>(y.cuda_event_id)
                                                : std::nullopt;
      p.stats = [corr, device, context, stream, event](XPlaneBuilder& plane, xspace::XEvent* e) {
        if (device) {
          plane.AddStat(e, plane.StatMetadataId(xspace::kStatCorrelationId), corr);
          plane.AddStat(e, plane.StatMetadataId(xspace::kStatDeviceId), *device);
        }
        plane.AddStat(e, plane.StatMetadataId("context_id"), context);
        if (stream) plane.AddStat(e, plane.StatMetadataId("stream_id"), *stream);
        if (event) plane.AddStat(e, plane.StatMetadataId("cuda_event_id"), *event);
      };
      threads_[api->second.tid].second.push_back(std::move(p));
      ++stats_.synchronizations;
    }
  }
}

bool CuptiXSpaceBuilder::ClipStepRange(const RecordBatch& b, const inject::NvtxRangeRecord& r,
                                       absl::string_view name, Pending* p) {
  int64_t s = 0, e = 0;
  if (__builtin_sub_overflow(static_cast<int64_t>(r.start_ns), b.gpu_minus_wall_ns, &s) ||
      __builtin_sub_overflow(static_cast<int64_t>(r.end_ns), b.gpu_minus_wall_ns, &e) || e < s ||
      (s >= start_ && e <= stop_) || e <= start_ || s >= stop_) {
    return false;
  }
  int64_t step = 0;
  if (!RE2::PartialMatch(re2::StringPiece(name.data(), name.size()), step_re_, &step) || step < 0) {
    return false;
  }
  p->start_ns = std::max(s, start_);
  p->duration_ns = std::min(e, stop_) - p->start_ns;
  p->cut = true;
  return p->duration_ns > 0;
}

void CuptiXSpaceBuilder::AddNvtxRanges() {
  for (const RecordBatch& b : batches_) {
    for (const inject::NvtxRangeRecord& r : b.ranges) {
      Pending p;
      const absl::string_view name = b.String(r.name);
      // A step cut by the window is kept, clipped to it and marked, so the breakdown keeps it
      // as a partial step (a capture shorter than a step still has its steps).
      if (!ClipStepRange(b, r, name, &p) &&
          !Place(b, r.start_ns, r.end_ns, &p.start_ns, &p.duration_ns)) {
        continue;
      }
      p.name = name.empty() ? absl::string_view("nvtx_range") : name;
      auto& thread = threads_[r.tid];
      thread.first = r.pid != 0 ? r.pid : b.pid;
      int64_t step = 0;
      p.role = Role::kRange;
      if (RE2::PartialMatch(re2::StringPiece(p.name.data(), p.name.size()), step_re_, &step) &&
          step >= 0) {
        p.role = Role::kStep;
        steps_[step].push_back({p.start_ns, p.end_ns(), thread.first, r.tid, thread.second.size()});
      }
      thread.second.push_back(std::move(p));
      ++stats_.nvtx_ranges;
    }
  }
}

void CuptiXSpaceBuilder::LinkSteps() {
  for (auto& [step_num, ranges] : steps_) {
    std::stable_sort(ranges.begin(), ranges.end(), [](const StepRange& a, const StepRange& b) {
      return a.start_ns != b.start_ns ? a.start_ns < b.start_ns : a.tid < b.tid;
    });
    const StepRange& root = ranges.front();
    const auto context = static_cast<int64_t>((uint64_t{root.tid} << 32) |
                                              (static_cast<uint64_t>(step_num) & 0xFFFFFFFF));
    roots_[step_num] = StepRoot{root.tid, root.index, context, /*joined=*/ranges.size() > 1};
    for (size_t i = 1; i < ranges.size(); ++i) {
      threads_[ranges[i].tid].second[ranges[i].index].stats = [context](XPlaneBuilder& plane,
                                                                        xspace::XEvent* e) {
        plane.AddStat(e, plane.StatMetadataId("_ct"), kStepContextType);
        plane.AddStat(e, plane.StatMetadataId("_c"), context);
      };
    }
    for (const StepRange& r : ranges) {
      step_spans_[r.pid].push_back({r.start_ns, r.end_ns, step_num, r.tid});
    }
    ++stats_.steps;
  }
  // A process's steps, in start order and disjoint: of spans that overlap (two threads marking
  // one step), the earliest (longest at equal starts) is kept.
  for (auto& [pid, spans] : step_spans_) {
    std::sort(spans.begin(), spans.end(), [](const StepSpan& a, const StepSpan& b) {
      return std::tie(a.start_ns, b.end_ns, a.tid, a.step) <
             std::tie(b.start_ns, a.end_ns, b.tid, b.step);
    });
    size_t kept = 0;
    for (const StepSpan& s : spans) {
      if (kept == 0 || s.start_ns >= spans[kept - 1].end_ns) spans[kept++] = s;
    }
    spans.resize(kept);
  }
}

void CuptiXSpaceBuilder::JoinLaunchingThreads() {
  for (auto& [tid, thread] : threads_) {
    auto spans = step_spans_.find(thread.first);
    if (spans != step_spans_.end()) JoinThread(tid, spans->second, thread.second);
  }
}

void CuptiXSpaceBuilder::AssignOps() {
  absl::flat_hash_map<uint32_t, std::vector<OpPoint>> timelines;
  for (const auto& [tid, thread] : threads_) {
    std::vector<OpPoint> points = RangeTimeline(thread.second);
    if (!points.empty()) timelines[tid] = std::move(points);
  }
  const auto op_at = [&](uint32_t tid, int64_t t) {
    auto it = timelines.find(tid);
    return it == timelines.end() ? -1 : OpAt(it->second, t);
  };
  for (const auto& [tid, thread] : threads_) {
    const auto spans = step_spans_.find(thread.first);
    for (const Pending& e : thread.second) {
      if (e.role != Role::kLaunch || !launch_device_.contains(e.correlation_id)) continue;
      int32_t op = op_at(tid, e.start_ns);
      if (op < 0 && spans != step_spans_.end()) {
        const size_t s = SpanHolding(spans->second, e.start_ns, e.end_ns());
        if (s != kNone && spans->second[s].tid != tid) {
          op = op_at(spans->second[s].tid, e.start_ns);
        }
      }
      if (op < 0) op = InternOp(TfOp(kApiOpScope, ApiBaseName(e.name)));
      launch_ops_[e.correlation_id] = op;
    }
  }
}

void CuptiXSpaceBuilder::MarkStepRoots() {
  for (const auto& [step_num, root] : roots_) {
    threads_[root.tid].second[root.index].stats = [step = step_num, context = root.context,
                                                   joined = root.joined](XPlaneBuilder& plane,
                                                                         xspace::XEvent* e) {
      plane.AddStat(e, plane.StatMetadataId(xspace::kStatIsRoot), int64_t{1});
      plane.AddStat(e, plane.StatMetadataId(xspace::kStatStepNum), step);
      if (joined) {
        plane.AddStat(e, plane.StatMetadataId("_pt"), kStepContextType);
        plane.AddStat(e, plane.StatMetadataId("_p"), context);
      }
    };
  }
}

void CuptiXSpaceBuilder::AddCollectiveLaunches() {
  for (const CollectiveLaunch& launch : options_.collective_launches) {
    if (launch.wall_ns < start_ || launch.wall_ns > stop_ || launch.kernel_name == nullptr) {
      ++stats_.outside_window;
      continue;
    }
    Pending p;
    p.start_ns = launch.wall_ns;
    p.name =
        launch_names_.try_emplace(*launch.kernel_name, NcclLaunchEventName(*launch.kernel_name))
            .first->second;
    p.stats = [&launch](XPlaneBuilder& plane, xspace::XEvent* e) {
      AddCollectiveLaunchStats(launch, plane, e);
    };
    auto& thread = threads_[launch.tid];
    thread.first = launch.pid;
    thread.second.push_back(std::move(p));
    ++stats_.collective_launches;
  }
}

size_t CuptiXSpaceBuilder::SpanHolding(const std::vector<StepSpan>& spans, int64_t start,
                                       int64_t end) {
  auto it = std::upper_bound(spans.begin(), spans.end(), start,
                             [](int64_t t, const StepSpan& s) { return t < s.start_ns; });
  if (it == spans.begin()) return kNone;
  --it;
  return end <= it->end_ns ? static_cast<size_t>(it - spans.begin()) : kNone;
}

void CuptiXSpaceBuilder::JoinThread(uint32_t tid, const std::vector<StepSpan>& spans,
                                    LineEvents& events) {
  const size_t n = events.size();
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), size_t{0});
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const Pending& x = events[a];
    const Pending& y = events[b];
    if (x.start_ns != y.start_ns) return x.start_ns < y.start_ns;
    if (x.duration_ns != y.duration_ns) return x.duration_ns > y.duration_ns;
    return a < b;
  });
  // The line as a forest, in EmitLine's order: each event's parent (the innermost event
  // holding it), its siblings before and after it, whether a step range holds it (or is it),
  // the step span holding it and its outermost ancestor-or-self held by that same span.
  struct Node {
    size_t parent = kNone;
    size_t prev = kNone;
    size_t next = kNone;
    size_t span = kNone;
    size_t top = kNone;
    bool in_step = false;
  };
  std::vector<Node> nodes(n);
  std::vector<size_t> last_child(n + 1, kNone);  // [n]: the line's top level
  std::vector<size_t> open;
  std::vector<int64_t> step_starts;  // the line's own step ranges, in start order
  for (const size_t i : order) {
    const Pending& e = events[i];
    while (!open.empty() && events[open.back()].end_ns() <= e.start_ns) open.pop_back();
    Node& node = nodes[i];
    if (!open.empty() && events[open.back()].end_ns() >= e.end_ns()) node.parent = open.back();
    size_t& last = last_child[node.parent == kNone ? n : node.parent];
    node.prev = last;
    if (last != kNone) nodes[last].next = i;
    last = i;
    node.in_step = e.role == Role::kStep || (node.parent != kNone && nodes[node.parent].in_step);
    if (e.role == Role::kStep) step_starts.push_back(e.start_ns);
    node.span = SpanHolding(spans, e.start_ns, e.end_ns());
    node.top =
        node.parent != kNone && nodes[node.parent].span == node.span ? nodes[node.parent].top : i;
    open.push_back(i);
  }

  // Consecutive sibling events holding launches of one step, one wrapper each.
  struct Group {
    size_t span = kNone;
    size_t container = kNone;  // their parent
    size_t first = kNone;
    size_t last = kNone;
  };
  std::optional<Group> group;
  LineEvents wrappers;
  const auto close = [&] {
    if (!group) return;
    const StepSpan& s = spans[group->span];
    const Pending& first = events[group->first];
    const Pending& last = events[group->last];
    int64_t lo = s.start_ns;
    int64_t hi = s.end_ns;
    if (group->container != kNone) {
      lo = std::max(lo, events[group->container].start_ns);
      hi = std::min(hi, events[group->container].end_ns());
    }
    if (const size_t prev = nodes[group->first].prev; prev != kNone) {
      lo = std::max(lo, events[prev].end_ns());
    }
    if (const size_t next = nodes[group->last].next; next != kNone) {
      hi = std::min(hi, events[next].start_ns);
    }
    Pending w;
    w.start_ns = first.start_ns - (lo < first.start_ns ? 1 : 0);
    w.duration_ns = last.end_ns() + (hi > last.end_ns() ? 1 : 0) - w.start_ns;
    w.name = kStepJoinName;
    w.role = Role::kJoin;
    StepRoot& root = roots_.at(s.step);
    root.joined = true;
    w.stats = [context = root.context](XPlaneBuilder& plane, xspace::XEvent* e) {
      plane.AddStat(e, plane.StatMetadataId("_ct"), kStepContextType);
      plane.AddStat(e, plane.StatMetadataId("_c"), context);
    };
    wrappers.push_back(std::move(w));
    ++stats_.step_joins;
    group.reset();
  };
  for (const size_t i : order) {
    const Node& node = nodes[i];
    if (events[i].role != Role::kLaunch || node.in_step || node.span == kNone ||
        spans[node.span].tid == tid) {
      continue;  // not a launch, in a step of the thread's own, in no step, or ours
    }
    const size_t item = node.top;
    const size_t container = nodes[item].parent;
    if (group && group->span == node.span && group->container == container) {
      if (item == group->last) continue;
      const int64_t from = events[group->last].end_ns();
      auto own = std::lower_bound(step_starts.begin(), step_starts.end(), from);
      if (own == step_starts.end() || *own >= events[item].start_ns) {
        group->last = item;
        continue;
      }
    }
    close();
    group = Group{node.span, container, item, item};
  }
  close();
  for (Pending& w : wrappers) events.push_back(std::move(w));
}

std::vector<CuptiXSpaceBuilder::OpPoint> CuptiXSpaceBuilder::RangeTimeline(
    const LineEvents& events) {
  std::vector<size_t> ranges;
  for (size_t i = 0; i < events.size(); ++i) {
    if (events[i].role == Role::kRange) ranges.push_back(i);
  }
  std::sort(ranges.begin(), ranges.end(), [&](size_t a, size_t b) {
    const Pending& x = events[a];
    const Pending& y = events[b];
    if (x.start_ns != y.start_ns) return x.start_ns < y.start_ns;
    if (x.duration_ns != y.duration_ns) return x.duration_ns > y.duration_ns;
    return a < b;
  });
  std::vector<OpPoint> points;
  std::vector<std::pair<int64_t, int32_t>> open;  // (end, op)
  const auto close_until = [&](int64_t t) {
    while (!open.empty() && open.back().first <= t) {
      // Never before the last point (ranges that partly overlap close late).
      const int64_t at = std::max(open.back().first, points.back().time_ns);
      open.pop_back();
      points.push_back({at, open.empty() ? -1 : open.back().second});
    }
  };
  for (const size_t i : ranges) {
    close_until(events[i].start_ns);
    const int32_t op = InternOp(TfOp(kNvtxOpScope, events[i].name));
    open.emplace_back(events[i].end_ns(), op);
    points.push_back({events[i].start_ns, op});
  }
  close_until(std::numeric_limits<int64_t>::max());
  return points;
}

int32_t CuptiXSpaceBuilder::OpAt(const std::vector<OpPoint>& points, int64_t t) {
  auto it = std::upper_bound(points.begin(), points.end(), t,
                             [](int64_t v, const OpPoint& p) { return v < p.time_ns; });
  return it == points.begin() ? -1 : std::prev(it)->op;
}

int32_t CuptiXSpaceBuilder::InternOp(const std::string& op) {
  auto [it, added] = op_index_.try_emplace(op, static_cast<int32_t>(ops_.size()));
  if (added) ops_.push_back(it->first);
  return it->second;
}

absl::string_view CuptiXSpaceBuilder::OpOf(uint64_t correlation_id) const {
  auto it = launch_ops_.find(correlation_id);
  return it == launch_ops_.end() ? kUnrecordedLaunchOp
                                 : absl::string_view(ops_[static_cast<size_t>(it->second)]);
}

}  // namespace profctl::agent::cupti::xspace_internal
