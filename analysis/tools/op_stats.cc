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
#include "analysis/tools/tools.h"

namespace profctl::analysis {

// --- op_stats -----------------------------------------------------------------------------------

namespace {

void SortOps(std::vector<OpStat>* ops) {
  std::sort(ops->begin(), ops->end(), [](const OpStat& a, const OpStat& b) {
    return std::tie(b.device_self_ns, b.host_self_ns, a.name) <
           std::tie(a.device_self_ns, a.host_self_ns, b.name);
  });
}

void AddOp(const OpStat& s, std::map<std::string, OpStat>* into, bool by_type) {
  const std::string& key = by_type ? s.type : s.name;
  auto [it, inserted] = into->emplace(key, OpStat());
  OpStat& m = it->second;
  if (inserted) {
    m.name = key;
    m.type = s.type;
  }
  m.host |= s.host;
  m.occurrences += s.occurrences;
  m.host_total_ns += s.host_total_ns;
  m.host_self_ns += s.host_self_ns;
  m.device_total_ns += s.device_total_ns;
  m.device_self_ns += s.device_self_ns;
  if (s.flops >= 0) m.flops = std::max<int64_t>(m.flops, 0) + s.flops;
}

OpStats FinishOpStats(const std::map<std::string, OpStat>& by_op) {
  OpStats out;
  std::map<std::string, OpStat> by_type;
  out.by_op.reserve(by_op.size());
  for (const auto& [name, s] : by_op) {
    AddOp(s, &by_type, /*by_type=*/true);
    out.by_op.push_back(s);
  }
  for (auto& [type, s] : by_type) out.by_type.push_back(std::move(s));
  SortOps(&out.by_op);
  SortOps(&out.by_type);
  return out;
}

// The length of the union of `spans`, clipped to [lo, hi).
int64_t UnionLength(std::vector<std::pair<int64_t, int64_t>>& spans, int64_t lo, int64_t hi) {
  std::sort(spans.begin(), spans.end());
  int64_t covered = 0;
  int64_t end = lo;
  for (auto [a, b] : spans) {
    a = std::max(a, end);
    b = std::min(b, hi);
    if (a >= b) continue;
    covered += b - a;
    end = b;
  }
  return covered;
}

// Host idle: the window with no host event on any thread; device idle: summed over the devices
// that ran anything, the window with nothing on the device.
void ComputeIdle(const ToolTrace& t, OpStats* out) {
  const int64_t lo = t.window_start_ns;
  const int64_t hi = t.window_end_ns;
  if (hi <= lo) return;
  std::vector<std::pair<int64_t, int64_t>> spans;
  for (const HostEvent& e : t.host_events) {
    if (e.role != HostEventRole::kStep) spans.emplace_back(e.start_ns, e.end_ns);
  }
  out->host_idle_ns = (hi - lo) - UnionLength(spans, lo, hi);
  std::map<int64_t, std::vector<std::pair<int64_t, int64_t>>> per_device;
  for (const DeviceEvent& d : t.device_events) {
    per_device[d.device].emplace_back(d.start_ns, d.end_ns);
  }
  for (auto& [device, busy] : per_device)
    out->device_idle_ns += (hi - lo) - UnionLength(busy, lo, hi);
}

}  // namespace

std::vector<OpShareRow> OpShares(const std::vector<OpStat>& rows, int64_t host_idle_ns,
                                 int64_t device_idle_ns, bool include_idle) {
  std::vector<OpShareRow> out;
  out.reserve(rows.size() + 1);
  for (const OpStat& s : rows) out.push_back(OpShareRow{s});
  if (include_idle) {
    OpShareRow idle;
    idle.idle = true;
    idle.stat.name = std::string(kIdleOpName);
    idle.stat.type = std::string(kIdleOpName);
    idle.stat.host_self_ns = idle.stat.host_total_ns = host_idle_ns;
    idle.stat.device_self_ns = idle.stat.device_total_ns = device_idle_ns;
    // In its sorted place (SortOps' order: device self, then host self, descending).
    const auto at = std::find_if(out.begin(), out.end(), [&](const OpShareRow& r) {
      return std::tie(r.stat.device_self_ns, r.stat.host_self_ns) <
             std::tie(device_idle_ns, host_idle_ns);
    });
    out.insert(at, std::move(idle));
  }
  // Cumulative down the table as it is sorted (device self, then host self), on each side; a row
  // without self time on a side has 0 % and 0 cumulative % there (the guide's device-only rows).
  const auto shares = [&](int64_t OpStat::*self, double OpShareRow::*pct, double OpShareRow::*cum) {
    int64_t whole = 0;
    for (const OpShareRow& r : out) whole += r.stat.*self;
    if (whole <= 0) return;
    int64_t running = 0;
    for (OpShareRow& r : out) {
      if (r.stat.*self <= 0) continue;
      running += r.stat.*self;
      r.*pct = 100.0 * static_cast<double>(r.stat.*self) / static_cast<double>(whole);
      r.*cum = 100.0 * static_cast<double>(running) / static_cast<double>(whole);
    }
  };
  shares(&OpStat::host_self_ns, &OpShareRow::host_self_pct, &OpShareRow::host_self_cum_pct);
  shares(&OpStat::device_self_ns, &OpShareRow::device_self_pct, &OpShareRow::device_self_cum_pct);
  return out;
}

std::vector<PieSlice> SelfTimePie(const std::vector<OpShareRow>& rows, bool device, size_t top_n) {
  std::vector<PieSlice> slices;
  for (const OpShareRow& r : rows) {
    const int64_t v = device ? r.stat.device_self_ns : r.stat.host_self_ns;
    if (v > 0)
      slices.push_back(PieSlice{r.stat.name, v, device ? r.device_self_pct : r.host_self_pct});
  }
  std::stable_sort(slices.begin(), slices.end(),
                   [](const PieSlice& a, const PieSlice& b) { return a.self_ns > b.self_ns; });
  if (slices.size() > top_n) {
    PieSlice other{"other", 0, 0};
    for (size_t i = top_n; i < slices.size(); ++i) {
      other.self_ns += slices[i].self_ns;
      other.pct += slices[i].pct;
    }
    slices.resize(top_n);
    slices.push_back(std::move(other));
  }
  return slices;
}

OpStats ComputeOpStats(const ToolTrace& t) {
  const HostForest forest(t);
  const size_t n = t.host_events.size();
  std::vector<int64_t> host_self(n, 0);
  std::vector<int64_t> dev_self(n, 0);
  std::vector<int64_t> dev_total(n, 0);
  for (const int32_t i : forest.order()) {
    const HostEvent& e = t.host_events[static_cast<size_t>(i)];
    host_self[static_cast<size_t>(i)] += e.end_ns - e.start_ns;
    if (const int32_t p = forest.parent(i); p >= 0) {
      host_self[static_cast<size_t>(p)] -= e.end_ns - e.start_ns;
    }
  }
  std::map<std::string, OpStat> by_op;
  // Device time: kernels linked to a host op count for it; kernels naming an op (tf_op/hlo_op)
  // count for that op; with neither but `XLA Ops`/`Framework Ops` spans, the spans do.
  bool named_device_ops = false;
  std::map<std::string, int64_t> device_events;  // per op named by its kernels
  for (const DeviceEvent& d : t.device_events) {
    const int64_t dur = d.end_ns - d.start_ns;
    if (d.op != StringTable::kEmpty) {
      named_device_ops = true;
      const absl::string_view name = t.Str(d.op);
      OpStat s;
      s.name = std::string(name);
      s.type = std::string(d.op_type != StringTable::kEmpty ? t.Str(d.op_type) : OpTypeOf(name));
      s.device_self_ns = dur;
      s.device_total_ns = dur;
      s.flops = d.flops;
      AddOp(s, &by_op, /*by_type=*/false);
      ++device_events[s.name];
      continue;
    }
    const int32_t h = forest.LaunchingOp(d);
    if (h >= 0) dev_self[static_cast<size_t>(h)] += dur;
  }
  // Totals bottom-up: children come after parents in order().
  for (auto it = forest.order().rbegin(); it != forest.order().rend(); ++it) {
    const auto i = static_cast<size_t>(*it);
    dev_total[i] += dev_self[i];
    if (const int32_t p = forest.parent(*it); p >= 0)
      dev_total[static_cast<size_t>(p)] += dev_total[i];
  }
  for (const int32_t i : forest.order()) {
    const HostEvent& e = t.host_events[static_cast<size_t>(i)];
    OpStat s;
    s.name = std::string(t.Str(e.name));
    s.type = std::string(t.Str(e.type));
    if (s.type.empty()) s.type = s.name;
    s.host = true;
    s.occurrences = 1;
    s.host_total_ns = e.end_ns - e.start_ns;
    s.host_self_ns = host_self[static_cast<size_t>(i)];
    s.device_self_ns = dev_self[static_cast<size_t>(i)];
    // An op nested in another of the same name (recursion) would count twice in total: only the
    // outermost one's total counts.
    int32_t p = forest.parent(i);
    bool nested_same = false;
    for (; p >= 0; p = forest.parent(p)) {
      if (t.host_events[static_cast<size_t>(p)].name == e.name) nested_same = true;
    }
    s.device_total_ns = nested_same ? 0 : dev_total[static_cast<size_t>(i)];
    if (nested_same) s.host_total_ns = 0;
    AddOp(s, &by_op, /*by_type=*/false);
  }
  // An op seen only on a device occurs once per kernel that names it.
  for (const auto& [name, count] : device_events) {
    OpStat& s = by_op[name];
    if (!s.host) s.occurrences = count;
  }
  if (!named_device_ops && !t.device_ops.empty()) {
    // Spans on a device's op line: self = duration - nested spans on the same line.
    std::vector<size_t> idx(t.device_ops.size());
    for (size_t i = 0; i < idx.size(); ++i) idx[i] = i;
    std::sort(idx.begin(), idx.end(), [&](size_t a, size_t b) {
      const DeviceOpSpan& x = t.device_ops[a];
      const DeviceOpSpan& y = t.device_ops[b];
      return std::make_tuple(x.device, x.line, x.start_ns, -x.end_ns, a) <
             std::make_tuple(y.device, y.line, y.start_ns, -y.end_ns, b);
    });
    std::vector<int64_t> self(idx.size(), 0);
    std::vector<size_t> stack;
    for (size_t k = 0; k < idx.size(); ++k) {
      const DeviceOpSpan& s = t.device_ops[idx[k]];
      while (!stack.empty()) {
        const DeviceOpSpan& top = t.device_ops[idx[stack.back()]];
        if (top.device != s.device || top.line != s.line || top.end_ns < s.end_ns) {
          stack.pop_back();
        } else {
          break;
        }
      }
      self[k] += s.end_ns - s.start_ns;
      if (!stack.empty()) self[stack.back()] -= s.end_ns - s.start_ns;
      stack.push_back(k);
    }
    for (size_t k = 0; k < idx.size(); ++k) {
      const DeviceOpSpan& s = t.device_ops[idx[k]];
      OpStat o;
      o.name = std::string(t.Str(s.name));
      o.type = std::string(t.Str(s.type));
      o.occurrences = 1;
      o.device_total_ns = s.end_ns - s.start_ns;
      o.device_self_ns = self[k];
      o.flops = s.flops;
      AddOp(o, &by_op, /*by_type=*/false);
    }
  }
  OpStats out = FinishOpStats(by_op);
  ComputeIdle(t, &out);
  for (const DeviceInfo& d : t.environment.devices) {
    out.peak_flops_per_s = std::max(out.peak_flops_per_s, d.peak_tflops * 1e12);
  }
  return out;
}

double FlopsUtilizationPct(const OpStat& row, double peak_flops_per_s) {
  if (row.flops < 0 || peak_flops_per_s <= 0 || row.device_self_ns <= 0) return -1;
  return 100.0 * static_cast<double>(row.flops) / (static_cast<double>(row.device_self_ns) * 1e-9) /
         peak_flops_per_s;
}

void OpStatsForHost(const ToolTrace& trace, const HostSummary&, HostTools& h) {
  h.ops = ComputeOpStats(trace);
}

void OpStatsForPod(PodTools& pod, const PodBreakdown&) {
  std::map<std::string, OpStat> by_op;
  for (const HostTools& h : pod.hosts) {
    for (const OpStat& s : h.ops.by_op) AddOp(s, &by_op, /*by_type=*/false);
  }
  pod.ops = FinishOpStats(by_op);
  for (const HostTools& h : pod.hosts) {
    pod.ops.host_idle_ns += h.ops.host_idle_ns;
    pod.ops.device_idle_ns += h.ops.device_idle_ns;
    pod.ops.peak_flops_per_s = std::max(pod.ops.peak_flops_per_s, h.ops.peak_flops_per_s);
  }
}

}  // namespace profctl::analysis
