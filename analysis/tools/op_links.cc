#include <algorithm>
#include <limits>
#include <map>
#include <tuple>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "analysis/tools/tool_internal.h"

namespace profctl::analysis {

bool IsOpRole(HostEventRole r) {
  return r == HostEventRole::kFrameworkOp || r == HostEventRole::kAnnotation;
}

HostForest::HostForest(const ToolTrace& t) : t_(t) {
  const size_t n = t.host_events.size();
  parent_.assign(n, -1);
  order_.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    if (t.host_events[i].role != HostEventRole::kStep) order_.push_back(static_cast<int32_t>(i));
  }
  std::sort(order_.begin(), order_.end(), [&](int32_t a, int32_t b) {
    const HostEvent& x = t.host_events[static_cast<size_t>(a)];
    const HostEvent& y = t.host_events[static_cast<size_t>(b)];
    return std::make_tuple(x.thread, x.start_ns, -x.end_ns, a) <
           std::make_tuple(y.thread, y.start_ns, -y.end_ns, b);
  });
  std::vector<int32_t> stack;
  int64_t thread = std::numeric_limits<int64_t>::min();
  for (const int32_t i : order_) {
    const HostEvent& e = t.host_events[static_cast<size_t>(i)];
    if (e.thread != thread) {
      stack.clear();
      thread = e.thread;
    }
    while (!stack.empty() &&
           t.host_events[static_cast<size_t>(stack.back())].end_ns <= e.start_ns) {
      stack.pop_back();
    }
    // A partial overlap is not nesting: pop until the top contains e.
    while (!stack.empty() && t.host_events[static_cast<size_t>(stack.back())].end_ns < e.end_ns) {
      stack.pop_back();
    }
    parent_[static_cast<size_t>(i)] = stack.empty() ? -1 : stack.back();
    stack.push_back(i);
  }
  for (size_t i = 0; i < n; ++i) {
    if (IsOpRole(t.host_events[i].role)) ops_by_start_.push_back(static_cast<int32_t>(i));
  }
  std::sort(ops_by_start_.begin(), ops_by_start_.end(), [&](int32_t a, int32_t b) {
    return t.host_events[static_cast<size_t>(a)].start_ns <
           t.host_events[static_cast<size_t>(b)].start_ns;
  });
  for (size_t i = 0; i < n; ++i) {
    const HostEvent& e = t.host_events[i];
    if (e.role == HostEventRole::kStep) continue;
    if (e.link_id >= 0 && IsOpRole(e.role)) by_link_.emplace(e.link_id, static_cast<int32_t>(i));
    if (e.correlation_id >= 0 && e.role == HostEventRole::kRuntime) {
      by_correlation_.emplace(e.correlation_id, static_cast<int32_t>(i));
    }
  }
}

absl::string_view OpTypeOf(absl::string_view op) {
  // TF `scope/Name:Type`.
  const size_t colon = op.rfind(':');
  if (colon != absl::string_view::npos && colon + 1 < op.size() && op[colon - 1] != ':' &&
      !absl::StrContains(op, "::")) {
    return op.substr(colon + 1);
  }
  // HLO `fusion.12`.
  const size_t dot = op.rfind('.');
  if (dot != absl::string_view::npos && dot > 0 && dot + 1 < op.size() &&
      std::all_of(op.begin() + static_cast<std::ptrdiff_t>(dot) + 1, op.end(),
                  [](char c) { return absl::ascii_isdigit(static_cast<unsigned char>(c)); })) {
    return op.substr(0, dot);
  }
  return op;
}

int32_t HostForest::OpElsewhereAtLaunch(const DeviceEvent& d) const {
  if (d.correlation_id < 0 || d.link_id >= 0) return -1;
  auto it = by_correlation_.find(d.correlation_id);
  if (it == by_correlation_.end() || EnclosingOp(it->second) >= 0) return -1;
  const HostEvent& call = t_.host_events[static_cast<size_t>(it->second)];
  // From the last op that started at or before the call back: the first one on another thread
  // that still runs then (bounded: a walk of at most kMaxWalk ops).
  constexpr int kMaxWalk = 256;
  auto at = std::upper_bound(ops_by_start_.begin(), ops_by_start_.end(), call.start_ns,
                             [&](int64_t time, int32_t i) {
                               return time < t_.host_events[static_cast<size_t>(i)].start_ns;
                             });
  for (int walked = 0; at != ops_by_start_.begin() && walked < kMaxWalk; ++walked) {
    --at;
    const HostEvent& op = t_.host_events[static_cast<size_t>(*at)];
    if (op.thread != call.thread && op.end_ns > call.start_ns) return *at;
  }
  return -1;
}

OpRef ResolveOp(const ToolTrace& t, const HostForest& forest, const DeviceEvent& d) {
  if (d.op != StringTable::kEmpty) {
    const absl::string_view name = t.Str(d.op);
    return OpRef{name, OpTypeOf(name), -1};
  }
  int32_t h = forest.LaunchingOp(d);
  if (h < 0) h = forest.OpElsewhereAtLaunch(d);
  if (h < 0) return OpRef{};
  const HostEvent& e = t.host_events[static_cast<size_t>(h)];
  return OpRef{t.Str(e.name), t.Str(e.type), h};
}

}  // namespace profctl::analysis
