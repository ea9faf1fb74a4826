#include "analysis/tools/tools.h"

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

namespace profctl::analysis {

namespace {

constexpr ToolInfo kTools[] = {
    {Tool::kOverview, "overview",
     "step time by category, 16/32-bit compute, top kernels and ops, run environment, advice"},
    {Tool::kKernelStats, "kernel_stats",
     "per (kernel, op): launch configuration, occupancy, Tensor Cores, time"},
    {Tool::kOpStats, "op_stats", "per op and op type: self and total time on host and device"},
    {Tool::kInputPipeline, "input_pipeline",
     "per step: device time waiting for input; host input stages and the bottleneck"},
    {Tool::kMemory, "memory", "per device: memory in use over time, peak, live allocations"},
};

bool ContainsAnyIgnoreCase(absl::string_view s, std::initializer_list<absl::string_view> parts) {
  return std::any_of(parts.begin(), parts.end(),
                     [&](absl::string_view p) { return ContainsIgnoreCase(s, p); });
}

}  // namespace

absl::Span<const ToolInfo> AllTools() { return kTools; }

std::optional<Tool> ToolByName(absl::string_view name) {
  for (const ToolInfo& t : kTools) {
    if (t.name == name) return t.tool;
  }
  return std::nullopt;
}

absl::string_view ToolName(Tool tool) {
  for (const ToolInfo& t : kTools) {
    if (t.tool == tool) return t.name;
  }
  return "?";
}

std::string ToolNamesForHelp() {
  return absl::StrJoin(kTools, "|",
                       [](std::string* out, const ToolInfo& t) { absl::StrAppend(out, t.name); });
}

bool UsesTensorCores(absl::string_view k) {
  return ContainsAnyIgnoreCase(
      k, {"hmma", "imma", "gmma", "xmma", "wmma", "tensorop", "tensor_op", "h884", "h1688",
          "h16816", "s1688", "s16816", "i8816", "i16832", "flash_fwd", "flash_bwd", "fmha"});
}

bool Is16BitKernel(absl::string_view k) {
  return ContainsAnyIgnoreCase(
      k, {"fp16", "bf16", "f16", "half", "bfloat16", "hmma", "h884", "h1688", "h16816"});
}

bool IsMatmulOrConv(absl::string_view name) {
  if (ContainsAnyIgnoreCase(name, {"matmul", "gemm", "conv", "einsum", "linear", "aten::mm",
                                   "aten::addmm", "aten::bmm", "aten::baddbmm", "aten::addbmm"})) {
    return true;
  }
  // HLO `dot` / `dot.3` / `dot_general`, TF `Dot`.
  absl::string_view n = name;
  const size_t slash = n.rfind('/');
  if (slash != absl::string_view::npos) n = n.substr(slash + 1);
  return absl::StartsWithIgnoreCase(n, "dot");
}

namespace {

// The innermost dimensions of every input in `Input Dims` ("[[64, 128], [128, 256], []]"):
// false when some input with >= 2 dims has a last or second-last dimension not a multiple of 8.
bool DimsMultipleOf8(absl::string_view dims) {
  // Parse nested arrays of integers, tracking the current innermost list.
  std::vector<int64_t> current;
  int depth = 0;
  bool ok = true;
  std::string number;
  const auto flush_number = [&] {
    if (number.empty()) return;
    int64_t v = 0;
    if (absl::SimpleAtoi(number, &v)) current.push_back(v);
    number.clear();
  };
  for (const char c : dims) {
    if (c == '[') {
      ++depth;
      current.clear();
    } else if (c == ']') {
      flush_number();
      if (current.size() >= 2) {
        const int64_t a = current[current.size() - 1];
        const int64_t b = current[current.size() - 2];
        if (a % 8 != 0 || b % 8 != 0) ok = false;
      }
      current.clear();
      --depth;
    } else if (absl::ascii_isdigit(static_cast<unsigned char>(c))) {
      number.push_back(c);
    } else {
      flush_number();
    }
  }
  return ok;
}

}  // namespace

bool TensorCoreEligible(absl::string_view kernel_name, absl::string_view op_name,
                        absl::string_view op_type, absl::string_view input_types,
                        absl::string_view input_dims) {
  if (UsesTensorCores(kernel_name)) return true;
  if (!IsMatmulOrConv(op_name) && !IsMatmulOrConv(op_type) && !IsMatmulOrConv(kernel_name)) {
    return false;
  }
  bool sixteen = Is16BitKernel(kernel_name);
  if (!input_types.empty()) {
    sixteen = ContainsAnyIgnoreCase(input_types, {"half", "bfloat16", "float16", "bf16", "fp16"});
  }
  if (!sixteen) return false;
  return input_dims.empty() || DimsMultipleOf8(input_dims);
}

// --- linking kernels to ops ---------------------------------------------------------------------

namespace {

bool IsOpRole(HostEventRole r) {
  return r == HostEventRole::kFrameworkOp || r == HostEventRole::kAnnotation;
}

// The host events as per-thread trees (nesting by time), and the links from device events to the
// host event that launched them.
class HostForest {
 public:
  explicit HostForest(const ToolTrace& t) : t_(t) {
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
      const HostEvent& e = t.host_events[i];
      if (e.role == HostEventRole::kStep) continue;
      if (e.link_id >= 0 && IsOpRole(e.role)) by_link_.emplace(e.link_id, static_cast<int32_t>(i));
      if (e.correlation_id >= 0 && e.role == HostEventRole::kRuntime) {
        by_correlation_.emplace(e.correlation_id, static_cast<int32_t>(i));
      }
    }
  }

  // Host events in (thread, start, longer first) order: parents before children.
  const std::vector<int32_t>& order() const { return order_; }
  int32_t parent(int32_t i) const { return parent_[static_cast<size_t>(i)]; }

  // The innermost op (framework op or annotation) at or above host event i.
  int32_t EnclosingOp(int32_t i) const {
    while (i >= 0 && !IsOpRole(t_.host_events[static_cast<size_t>(i)].role)) i = parent(i);
    return i;
  }

  // The host op that launched device event d, or -1: Kineto `External id`, else the CUPTI
  // correlation to a runtime call and its innermost enclosing op.
  int32_t LaunchingOp(const DeviceEvent& d) const {
    if (d.link_id >= 0) {
      auto it = by_link_.find(d.link_id);
      if (it != by_link_.end()) return it->second;
    }
    if (d.correlation_id >= 0) {
      auto it = by_correlation_.find(d.correlation_id);
      if (it != by_correlation_.end()) return EnclosingOp(it->second);
    }
    return -1;
  }

 private:
  const ToolTrace& t_;
  std::vector<int32_t> parent_;
  std::vector<int32_t> order_;
  absl::flat_hash_map<int64_t, int32_t> by_link_;
  absl::flat_hash_map<int64_t, int32_t> by_correlation_;
};

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

struct OpRef {
  absl::string_view name;
  absl::string_view type;
  int32_t host = -1;  // host event index when the op is a host event
};

OpRef ResolveOp(const ToolTrace& t, const HostForest& forest, const DeviceEvent& d) {
  if (d.op != StringTable::kEmpty) {
    const absl::string_view name = t.Str(d.op);
    return OpRef{name, OpTypeOf(name), -1};
  }
  const int32_t h = forest.LaunchingOp(d);
  if (h < 0) return OpRef{};
  const HostEvent& e = t.host_events[static_cast<size_t>(h)];
  return OpRef{t.Str(e.name), t.Str(e.type), h};
}

}  // namespace

// --- kernel_stats -------------------------------------------------------------------------------

std::vector<KernelStat> ComputeKernelStats(const ToolTrace& t) {
  const HostForest forest(t);
  std::map<std::pair<absl::string_view, absl::string_view>, size_t> index;
  std::vector<KernelStat> rows;
  // Distinct launch configurations per row (usually one: a linear scan, capped).
  using Config = std::array<int64_t, 9>;
  constexpr size_t kMaxConfigs = 64;
  std::vector<std::vector<Config>> configs;
  for (const DeviceEvent& d : t.device_events) {
    if (!d.is_kernel) continue;
    const OpRef op = ResolveOp(t, forest, d);
    const absl::string_view kernel = t.Str(d.name);
    auto [it, inserted] = index.emplace(std::make_pair(kernel, op.name), rows.size());
    const int64_t dur = d.end_ns - d.start_ns;
    const KernelDetails details =
        d.details >= 0 ? t.kernel_details[static_cast<size_t>(d.details)] : KernelDetails();
    const Config config = {details.registers_per_thread,
                           details.static_shared_bytes,
                           details.dynamic_shared_bytes,
                           details.grid[0],
                           details.grid[1],
                           details.grid[2],
                           details.block[0],
                           details.block[1],
                           details.block[2]};
    if (inserted) {
      KernelStat k;
      k.kernel = std::string(kernel);
      k.op = std::string(op.name);
      k.registers_per_thread = details.registers_per_thread;
      if (details.static_shared_bytes >= 0 || details.dynamic_shared_bytes >= 0) {
        k.shared_memory_bytes = std::max<int64_t>(details.static_shared_bytes, 0) +
                                std::max<int64_t>(details.dynamic_shared_bytes, 0);
      }
      k.grid = details.grid;
      k.block = details.block;
      k.occupancy_pct = details.occupancy_pct;
      k.tensor_core_used = UsesTensorCores(kernel);
      absl::string_view types;
      absl::string_view dims;
      if (op.host >= 0) {
        const HostEvent& h = t.host_events[static_cast<size_t>(op.host)];
        types = t.Str(h.input_types);
        dims = t.Str(h.input_dims);
      }
      k.tensor_core_eligible = TensorCoreEligible(kernel, op.name, op.type, types, dims);
      k.min_ns = dur;
      rows.push_back(std::move(k));
      configs.emplace_back();
    }
    KernelStat& k = rows[it->second];
    std::vector<Config>& seen = configs[it->second];
    if (seen.size() < kMaxConfigs && std::find(seen.begin(), seen.end(), config) == seen.end()) {
      seen.push_back(config);
    }
    ++k.occurrences;
    k.total_ns += dur;
    k.min_ns = std::min(k.min_ns, dur);
    k.max_ns = std::max(k.max_ns, dur);
  }
  for (size_t i = 0; i < rows.size(); ++i)
    rows[i].configs = static_cast<int64_t>(configs[i].size());
  std::sort(rows.begin(), rows.end(), [](const KernelStat& a, const KernelStat& b) {
    return std::tie(b.total_ns, a.kernel, a.op) < std::tie(a.total_ns, b.kernel, b.op);
  });
  return rows;
}

namespace {

void MergeKernelStats(const std::vector<KernelStat>& from, std::vector<KernelStat>* into,
                      std::map<std::pair<std::string, std::string>, size_t>* index) {
  for (const KernelStat& k : from) {
    auto [it, inserted] = index->emplace(std::make_pair(k.kernel, k.op), into->size());
    if (inserted) {
      into->push_back(k);
      continue;
    }
    KernelStat& m = (*into)[it->second];
    m.min_ns = std::min(m.min_ns, k.min_ns);
    m.max_ns = std::max(m.max_ns, k.max_ns);
    m.occurrences += k.occurrences;
    m.total_ns += k.total_ns;
    m.configs = std::max(m.configs, k.configs);
    m.tensor_core_eligible |= k.tensor_core_eligible;
    m.tensor_core_used |= k.tensor_core_used;
  }
}

}  // namespace

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
}

OpStats Finish(const std::map<std::string, OpStat>& by_op) {
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

}  // namespace

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
      s.type = std::string(OpTypeOf(name));
      s.device_self_ns = dur;
      s.device_total_ns = dur;
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
      AddOp(o, &by_op, /*by_type=*/false);
    }
  }
  return Finish(by_op);
}

// --- memory -------------------------------------------------------------------------------------

std::vector<DeviceMemory> ComputeMemory(const ToolTrace& t) {
  std::map<int64_t, std::vector<size_t>> per_device;
  for (size_t i = 0; i < t.memory.size(); ++i) per_device[t.memory[i].device].push_back(i);
  std::vector<DeviceMemory> out;
  for (auto& [device, events] : per_device) {
    std::stable_sort(events.begin(), events.end(),
                     [&](size_t a, size_t b) { return t.memory[a].time_ns < t.memory[b].time_ns; });
    DeviceMemory m;
    m.host = t.host;
    m.device = device;
    m.window_start_ns = t.window_start_ns;
    // Baseline: memory in use before the first event, from the first reported total.
    int64_t running = 0;
    int64_t baseline = 0;
    for (const size_t i : events) {
      running += t.memory[i].bytes;
      if (t.memory[i].reported_in_use >= 0) {
        baseline = std::max<int64_t>(0, t.memory[i].reported_in_use - running);
        break;
      }
    }
    std::vector<MemoryPoint> points;
    points.reserve(events.size());
    int64_t in_use = baseline;
    size_t peak_at = 0;
    m.peak_bytes = -1;
    for (size_t k = 0; k < events.size(); ++k) {
      const MemoryEvent& e = t.memory[events[k]];
      in_use = std::max<int64_t>(0, in_use + e.bytes);
      (e.bytes >= 0 ? m.allocations : m.frees) += 1;
      points.push_back(MemoryPoint{e.time_ns, in_use});
      if (in_use > m.peak_bytes) {
        m.peak_bytes = in_use;
        peak_at = k;
        m.peak_time_ns = e.time_ns;
      }
    }
    // Live at the peak: replay up to it.
    absl::flat_hash_map<uint64_t, LiveAllocation> live;
    int64_t untracked = 0;
    for (size_t k = 0; k <= peak_at && k < events.size(); ++k) {
      const MemoryEvent& e = t.memory[events[k]];
      if (e.bytes >= 0) {
        if (e.address == 0) {
          ++untracked;
          continue;
        }
        live[e.address] = LiveAllocation{e.address, e.bytes, e.time_ns, std::string(t.Str(e.op))};
      } else {
        live.erase(e.address);
      }
    }
    m.baseline_bytes = baseline;
    m.live_at_peak = static_cast<int64_t>(live.size()) + untracked;
    for (auto& [addr, a] : live) m.largest_live_at_peak.push_back(std::move(a));
    std::sort(m.largest_live_at_peak.begin(), m.largest_live_at_peak.end(),
              [](const LiveAllocation& a, const LiveAllocation& b) {
                return std::tie(b.bytes, a.since_ns, a.address) <
                       std::tie(a.bytes, b.since_ns, b.address);
              });
    if (m.largest_live_at_peak.size() > kMaxLiveShown) m.largest_live_at_peak.resize(kMaxLiveShown);
    if (!events.empty()) {
      const MemoryEvent& e = t.memory[events[peak_at]];
      m.reserved_at_peak = e.reported_reserved;
      if (e.reported_fragmentation >= 0) {
        m.fragmentation_at_peak = e.reported_fragmentation;
      } else if (e.reported_reserved > 0) {
        m.fragmentation_at_peak =
            static_cast<double>(std::max<int64_t>(0, e.reported_reserved - m.peak_bytes)) /
            static_cast<double>(e.reported_reserved);
      }
    }
    // Downsample: the maximum per bucket, so the peak stays.
    if (points.size() <= kMaxMemoryPoints) {
      m.timeline = std::move(points);
    } else {
      const size_t per = (points.size() + kMaxMemoryPoints - 1) / kMaxMemoryPoints;
      for (size_t b = 0; b < points.size(); b += per) {
        MemoryPoint best = points[b];
        for (size_t k = b; k < std::min(points.size(), b + per); ++k) {
          if (points[k].in_use_bytes > best.in_use_bytes) best = points[k];
        }
        m.timeline.push_back(best);
      }
    }
    out.push_back(std::move(m));
  }
  return out;
}

// --- shared: intervals inside steps -------------------------------------------------------------

namespace {

// Length of the union of [s, e) intervals (sorted in place) clipped to [lo, hi).
int64_t UnionInside(std::vector<std::pair<int64_t, int64_t>>& iv, int64_t lo, int64_t hi) {
  std::sort(iv.begin(), iv.end());
  int64_t total = 0;
  int64_t cur_s = 0;
  int64_t cur_e = std::numeric_limits<int64_t>::min();
  for (auto [s, e] : iv) {
    s = std::max(s, lo);
    e = std::min(e, hi);
    if (s >= e) continue;
    if (s > cur_e) {
      if (cur_e > cur_s) total += cur_e - cur_s;
      cur_s = s;
      cur_e = e;
    } else {
      cur_e = std::max(cur_e, e);
    }
  }
  if (cur_e > cur_s) total += cur_e - cur_s;
  return total;
}

}  // namespace

// --- input_pipeline -----------------------------------------------------------------------------

namespace {

// Asynchronous stages: the consumer only waits on their buffer; the producer runs elsewhere.
bool IsAsyncStage(absl::string_view name) {
  absl::string_view last = name;
  const size_t sep = name.rfind("::");
  if (sep != absl::string_view::npos) last = name.substr(sep + 2);
  return ContainsAnyIgnoreCase(last, {"Prefetch", "ParallelMap", "ParallelInterleave",
                                      "ParallelBatch", "MapAndBatch"}) ||
         absl::StrContains(name, "MultiProcessingDataLoaderIter");
}

}  // namespace

HostInputPipeline ComputeInputPipeline(const ToolTrace& t, const HostSummary& summary) {
  HostInputPipeline out;
  out.host = t.host;
  // Consumer threads: those with step markers or framework ops (the training loop).
  absl::flat_hash_set<int64_t> consumers;
  for (const HostEvent& e : t.host_events) {
    if (e.role == HostEventRole::kStep || e.role == HostEventRole::kFrameworkOp) {
      consumers.insert(e.thread);
    }
  }
  // Input events, per thread, nested: self = duration - nested input events.
  std::vector<size_t> in;
  for (size_t i = 0; i < t.host_events.size(); ++i) {
    const HostEvent& e = t.host_events[i];
    if (e.role != HostEventRole::kStep && e.kind == OpKind::kHostInputWait) in.push_back(i);
  }
  std::sort(in.begin(), in.end(), [&](size_t a, size_t b) {
    const HostEvent& x = t.host_events[a];
    const HostEvent& y = t.host_events[b];
    return std::make_tuple(x.thread, x.start_ns, -x.end_ns, a) <
           std::make_tuple(y.thread, y.start_ns, -y.end_ns, b);
  });
  std::vector<int64_t> self(in.size(), 0);
  std::vector<size_t> stack;
  for (size_t k = 0; k < in.size(); ++k) {
    const HostEvent& e = t.host_events[in[k]];
    while (!stack.empty()) {
      const HostEvent& top = t.host_events[in[stack.back()]];
      if (top.thread != e.thread || top.end_ns < e.end_ns) {
        stack.pop_back();
      } else {
        break;
      }
    }
    self[k] += e.end_ns - e.start_ns;
    if (!stack.empty()) self[stack.back()] -= e.end_ns - e.start_ns;
    stack.push_back(k);
  }
  std::map<std::string, InputStage> stages;
  for (size_t k = 0; k < in.size(); ++k) {
    const HostEvent& e = t.host_events[in[k]];
    InputStage& s = stages[std::string(t.Str(e.name))];
    s.name = std::string(t.Str(e.name));
    ++s.count;
    s.total_ns += e.end_ns - e.start_ns;
    s.self_ns += self[k];
    s.max_ns = std::max(s.max_ns, e.end_ns - e.start_ns);
    s.consumer |= consumers.contains(e.thread);
  }
  for (auto& [name, s] : stages) out.stages.push_back(std::move(s));
  std::sort(out.stages.begin(), out.stages.end(), [](const InputStage& a, const InputStage& b) {
    return std::tie(b.self_ns, a.name) < std::tie(a.self_ns, b.name);
  });
  // The bottleneck: the slowest consumer stage; when it only waits on an asynchronous buffer,
  // the slowest background (producer) stage, which did not keep up.
  InputStage* slowest_consumer = nullptr;
  InputStage* slowest_background = nullptr;
  for (InputStage& s : out.stages) {
    InputStage*& slot = s.consumer ? slowest_consumer : slowest_background;
    if (slot == nullptr) slot = &s;  // stages are sorted by self time
  }
  InputStage* bottleneck = slowest_consumer;
  if (bottleneck != nullptr) bottleneck->critical_path = true;
  if (slowest_consumer != nullptr && IsAsyncStage(slowest_consumer->name) &&
      slowest_background != nullptr) {
    slowest_background->critical_path = true;
    bottleneck = slowest_background;
  } else if (bottleneck == nullptr) {
    bottleneck = slowest_background;
    if (bottleneck != nullptr) bottleneck->critical_path = true;
  }
  if (bottleneck != nullptr) out.bottleneck = bottleneck->name;
  for (InputStage& s : out.stages) s.critical_path |= s.consumer;

  // Per step.
  for (const HostStep& step : summary.steps) {
    InputStep s;
    s.step = step.step;
    s.step_time_ns = step.end_ns - step.start_ns;
    s.device_input_ns = step.host[Category::kInput];
    std::vector<std::pair<int64_t, int64_t>> iv;
    for (const size_t i : in) {
      const HostEvent& e = t.host_events[i];
      if (e.end_ns > step.start_ns && e.start_ns < step.end_ns)
        iv.emplace_back(e.start_ns, e.end_ns);
    }
    s.host_input_ns = UnionInside(iv, step.start_ns, step.end_ns);
    out.input_ns += s.device_input_ns;
    out.step_ns += s.step_time_ns;
    out.steps.push_back(s);
  }
  return out;
}

// --- overview -----------------------------------------------------------------------------------

absl::string_view OverviewCategoryName(OverviewCategory c) {
  static constexpr absl::string_view kNames[kNumOverviewCategories] = {
      "compilation",      "input",       "output",         "kernel_launch", "host_compute",
      "device_to_device", "collectives", "device_compute", "other"};
  return kNames[static_cast<size_t>(c)];
}

int64_t OverviewTimes::total() const {
  int64_t s = 0;
  for (const int64_t v : ns) s += v;
  return s;
}

namespace {

enum Cnt : uint8_t {
  kC16 = 0,
  kC32,
  kColl,
  kH2D,
  kD2H,
  kD2D,
  kIn,
  kSync,
  kCompile,
  kLaunch,
  kOtherHost,
  kNumCnt,
};

// The breakdown's precedence (breakdown.h), with compute split by precision and `host` split.
OverviewCategory CategoryOfCounts(const std::array<int32_t, kNumCnt>& c, bool* sixteen) {
  *sixteen = false;
  if (c[kC16] > 0 || c[kC32] > 0) {
    *sixteen = c[kC32] == 0;
    return OverviewCategory::kDeviceCompute;
  }
  if (c[kD2H] > 0) return OverviewCategory::kOutput;
  if (c[kD2D] > 0) return OverviewCategory::kDeviceToDevice;
  if (c[kColl] > 0) return OverviewCategory::kCollectives;
  if (c[kH2D] > 0 || c[kIn] > 0) return OverviewCategory::kInput;
  if (c[kSync] == 0) {
    if (c[kCompile] > 0) return OverviewCategory::kCompilation;
    if (c[kLaunch] > 0) return OverviewCategory::kKernelLaunch;
    if (c[kOtherHost] > 0) return OverviewCategory::kHostCompute;
  }
  return OverviewCategory::kOther;
}

Cnt DeviceCounter(const ToolTrace& t, const DeviceEvent& d) {
  switch (d.kind) {
    case OpKind::kCollective:
      return kColl;
    case OpKind::kMemcpyH2D:
      return kH2D;
    case OpKind::kMemcpyD2H:
      return kD2H;
    case OpKind::kMemcpyD2D:
      return kD2D;
    default:
      return Is16BitKernel(t.Str(d.name)) ? kC16 : kC32;
  }
}

Cnt HostCounter(const HostEvent& e) {
  switch (e.kind) {
    case OpKind::kHostInputWait:
      return kIn;
    case OpKind::kHostSync:
      return kSync;
    case OpKind::kHostLaunch:
      return kLaunch;
    default:
      return e.compile ? kCompile : kOtherHost;
  }
}

std::string Pct(double v) { return absl::StrFormat("%.1f %%", v); }
std::string Ms(int64_t ns) { return absl::StrFormat("%.3f ms", static_cast<double>(ns) / 1e6); }
double Share(int64_t part, int64_t whole) {
  return whole <= 0 ? 0.0 : 100.0 * static_cast<double>(part) / static_cast<double>(whole);
}

}  // namespace

HostOverview ComputeOverview(const ToolTrace& t, const HostSummary& summary) {
  HostOverview o;
  o.host = t.host;
  o.environment = t.environment;
  o.warnings = summary.warnings;
  struct Edge {
    int64_t t;
    int8_t delta;
    Cnt c;
  };
  std::vector<Edge> edges;
  edges.reserve(2 * (t.device_events.size() + t.host_events.size()));
  for (const DeviceEvent& d : t.device_events) {
    if (d.end_ns <= d.start_ns) continue;
    const Cnt c = DeviceCounter(t, d);
    edges.push_back(Edge{d.start_ns, 1, c});
    edges.push_back(Edge{d.end_ns, -1, c});
  }
  for (const HostEvent& e : t.host_events) {
    if (e.role == HostEventRole::kStep || e.end_ns <= e.start_ns) continue;
    const Cnt c = HostCounter(e);
    edges.push_back(Edge{e.start_ns, 1, c});
    edges.push_back(Edge{e.end_ns, -1, c});
  }
  std::sort(edges.begin(), edges.end(), [](const Edge& a, const Edge& b) { return a.t < b.t; });
  std::vector<size_t> steps(summary.steps.size());
  for (size_t i = 0; i < steps.size(); ++i) steps[i] = i;
  std::sort(steps.begin(), steps.end(), [&](size_t a, size_t b) {
    return summary.steps[a].start_ns < summary.steps[b].start_ns;
  });
  o.steps.resize(summary.steps.size());
  for (size_t i = 0; i < summary.steps.size(); ++i) {
    const HostStep& s = summary.steps[i];
    o.steps[i].step = s.step;
    o.steps[i].start_ns = s.start_ns;
    o.steps[i].step_time_ns = s.end_ns - s.start_ns;
  }
  std::array<int32_t, kNumCnt> counts{};
  size_t first = 0;  // first step (in start order) that may still overlap what comes
  const auto add_segment = [&](int64_t a, int64_t b) {
    if (a >= b) return;
    bool sixteen = false;
    const OverviewCategory cat = CategoryOfCounts(counts, &sixteen);
    if (cat == OverviewCategory::kOther) return;  // the remainder, below
    for (size_t k = first; k < steps.size(); ++k) {
      const HostStep& s = summary.steps[steps[k]];
      if (s.start_ns >= b) break;
      const int64_t lo = std::max(a, s.start_ns);
      const int64_t hi = std::min(b, s.end_ns);
      if (lo >= hi) continue;
      OverviewTimes& times = o.steps[steps[k]].times;
      times[cat] += hi - lo;
      if (cat == OverviewCategory::kDeviceCompute) {
        (sixteen ? times.compute_16bit_ns : times.compute_32bit_ns) += hi - lo;
      }
    }
  };
  for (size_t i = 0; i < edges.size();) {
    const int64_t now = edges[i].t;
    while (i < edges.size() && edges[i].t == now) {
      counts[edges[i].c] += edges[i].delta;
      ++i;
    }
    // A step that ended by `now` overlaps no later segment (segments only move forward).
    while (first < steps.size() && summary.steps[steps[first]].end_ns <= now) ++first;
    if (i < edges.size()) add_segment(now, edges[i].t);
  }
  for (OverviewStep& s : o.steps) {
    s.times[OverviewCategory::kOther] = std::max<int64_t>(0, s.step_time_ns - s.times.total());
    for (int c = 0; c < kNumOverviewCategories; ++c)
      o.total.ns[static_cast<size_t>(c)] += s.times.ns[static_cast<size_t>(c)];
    o.total.compute_16bit_ns += s.times.compute_16bit_ns;
    o.total.compute_32bit_ns += s.times.compute_32bit_ns;
    o.step_ns += s.step_time_ns;
  }
  return o;
}

namespace {

void FillTop(HostTools* h) {
  HostOverview& o = h->overview;
  int64_t kernel_total = 0;
  for (const KernelStat& k : h->kernels) {
    kernel_total += k.total_ns;
    o.kernels += k.occurrences;
    if (k.tensor_core_eligible) o.tensor_core_eligible_ns += k.total_ns;
    if (k.tensor_core_used) o.tensor_core_used_ns += k.total_ns;
  }
  o.kernel_ns = kernel_total;
  // Top kernels by total time, summed over launching ops.
  std::map<std::string, int64_t> per_kernel;
  for (const KernelStat& k : h->kernels) per_kernel[k.kernel] += k.total_ns;
  std::vector<std::pair<std::string, int64_t>> kernels(per_kernel.begin(), per_kernel.end());
  std::sort(kernels.begin(), kernels.end(), [](const auto& a, const auto& b) {
    return std::tie(b.second, a.first) < std::tie(a.second, b.first);
  });
  for (size_t i = 0; i < kernels.size() && i < kMaxTop; ++i) {
    o.top_kernels.push_back(
        TopEntry{kernels[i].first, kernels[i].second, Share(kernels[i].second, kernel_total)});
  }
  int64_t device_self = 0;
  int64_t host_self = 0;
  for (const OpStat& s : h->ops.by_op) {
    device_self += s.device_self_ns;
    host_self += s.host_self_ns;
  }
  const bool device = device_self > 0;
  for (const OpStat& s : h->ops.by_op) {
    if (o.top_ops.size() == kMaxTop) break;
    const int64_t v = device ? s.device_self_ns : s.host_self_ns;
    if (v <= 0) continue;
    o.top_ops.push_back(TopEntry{s.name, v, Share(v, device ? device_self : host_self)});
  }
  if (!device) {
    std::sort(o.top_ops.begin(), o.top_ops.end(), [](const TopEntry& a, const TopEntry& b) {
      return std::tie(b.self_ns, a.name) < std::tie(a.self_ns, b.name);
    });
  }
}

}  // namespace

HostTools ComputeHostTools(Tool tool, const ToolTrace& trace, const HostSummary& summary) {
  HostTools h;
  h.host = trace.host;
  h.warnings = trace.warnings;
  switch (tool) {
    case Tool::kOverview:
      h.kernels = ComputeKernelStats(trace);
      h.ops = ComputeOpStats(trace);
      h.overview = ComputeOverview(trace, summary);
      FillTop(&h);
      // Per-host detail rows are not needed past the top lists.
      h.kernels.clear();
      h.ops = OpStats();
      break;
    case Tool::kKernelStats:
      h.kernels = ComputeKernelStats(trace);
      break;
    case Tool::kOpStats:
      h.ops = ComputeOpStats(trace);
      break;
    case Tool::kInputPipeline:
      h.input = ComputeInputPipeline(trace, summary);
      break;
    case Tool::kMemory:
      h.memory = ComputeMemory(trace);
      break;
  }
  return h;
}

PodTools BuildPodTools(Tool tool, std::vector<HostTools> hosts, const PodBreakdown& breakdown) {
  PodTools pod;
  pod.tool = tool;
  pod.hosts = std::move(hosts);
  if (tool == Tool::kKernelStats) {
    std::map<std::pair<std::string, std::string>, size_t> index;
    for (const HostTools& h : pod.hosts) MergeKernelStats(h.kernels, &pod.kernels, &index);
    std::sort(pod.kernels.begin(), pod.kernels.end(), [](const KernelStat& a, const KernelStat& b) {
      return std::tie(b.total_ns, a.kernel, a.op) < std::tie(a.total_ns, b.kernel, b.op);
    });
  }
  if (tool == Tool::kOpStats) {
    std::map<std::string, OpStat> by_op;
    for (const HostTools& h : pod.hosts) {
      for (const OpStat& s : h.ops.by_op) AddOp(s, &by_op, /*by_type=*/false);
    }
    pod.ops = Finish(by_op);
  }
  if (tool != Tool::kOverview) return pod;

  int64_t eligible = 0;
  int64_t used = 0;
  int64_t kernels = 0;
  int64_t kernel_ns = 0;
  for (const HostTools& h : pod.hosts) {
    const HostOverview& o = h.overview;
    for (size_t c = 0; c < o.total.ns.size(); ++c) pod.overview_total.ns[c] += o.total.ns[c];
    pod.overview_total.compute_16bit_ns += o.total.compute_16bit_ns;
    pod.overview_total.compute_32bit_ns += o.total.compute_32bit_ns;
    pod.overview_step_ns += o.step_ns;
    pod.overview_steps += static_cast<int64_t>(o.steps.size());
    eligible += o.tensor_core_eligible_ns;
    used += o.tensor_core_used_ns;
    kernels += o.kernels;
    kernel_ns += o.kernel_ns;
  }
  const OverviewTimes& tot = pod.overview_total;
  const int64_t step_ns = pod.overview_step_ns;
  const auto share = [&](OverviewCategory c) { return Share(tot[c], step_ns); };
  const auto avg = [&](int64_t ns) {
    return pod.overview_steps == 0 ? 0 : ns / pod.overview_steps;
  };
  const auto add = [&](std::string kind, std::string advice, std::string reason) {
    pod.recommendations.push_back(
        Recommendation{std::move(kind), std::move(advice), std::move(reason)});
  };
  if (step_ns > 0) {
    const double input = share(OverviewCategory::kInput);
    if (input >= 5.0) {
      add("input",
          absl::StrCat(input >= 20.0 ? "highly" : "moderately",
                       " input-bound: overlap input with compute (prefetch), parallelise "
                       "preprocessing (num_parallel_calls / DataLoader num_workers), cache or "
                       "pre-process the data once"),
          absl::StrCat("input ", Pct(input), " of step time (",
                       Ms(avg(tot[OverviewCategory::kInput])), " of ", Ms(avg(step_ns)),
                       " per step)"));
    }
    const double launch = share(OverviewCategory::kKernelLaunch);
    const int64_t avg_kernel = kernels == 0 ? 0 : kernel_ns / kernels;
    if (launch >= 10.0 ||
        (kernels > 0 && avg_kernel < 10'000 && share(OverviewCategory::kDeviceCompute) < 50.0 &&
         tot[OverviewCategory::kKernelLaunch] > 0)) {
      add("launch",
          "launch-bound: many tiny kernels; fuse them (XLA/torch.compile), use CUDA graphs, "
          "or raise the batch size",
          absl::StrCat("kernel launch ", Pct(launch), " of step time; ", kernels,
                       " kernels averaging ",
                       absl::StrFormat("%.1f", static_cast<double>(avg_kernel) / 1e3), " us"));
    }
    const double coll = share(OverviewCategory::kCollectives);
    if (coll >= 20.0) {
      add("collectives",
          "collective-bound: overlap communication with compute (bucketing, async collectives), "
          "reduce what is exchanged, check the interconnect",
          absl::StrCat("collectives ", Pct(coll), " of step time"));
    }
    const double compile = share(OverviewCategory::kCompilation);
    if (compile >= 10.0) {
      add("compilation",
          "compilation in the steps: warm up before profiling, avoid recompiles "
          "(static shapes)",
          absl::StrCat("compilation ", Pct(compile), " of step time"));
    }
    const double host = share(OverviewCategory::kHostCompute);
    if (host >= 20.0) {
      add("host",
          "host-bound: the devices wait for host code between launches; move work to "
          "the device or off the training thread",
          absl::StrCat("host compute ", Pct(host), " of step time"));
    }
  }
  if (eligible > 0 && used < eligible / 2) {
    add("tensor_cores",
        "low Tensor Core use: compute matmuls/convolutions in 16-bit (mixed precision) and keep "
        "their dimensions multiples of 8",
        absl::StrCat("Tensor Cores run ", Pct(Share(used, eligible)),
                     " of the time of eligible kernels (", Ms(used), " of ", Ms(eligible), ")"));
  } else if (kernel_ns > 0 && tot.compute_32bit_ns > tot.compute_16bit_ns * 4 &&
             tot[OverviewCategory::kDeviceCompute] > 0 && used == 0) {
    add("tensor_cores",
        "device compute is 32-bit and no kernel uses Tensor Cores: try mixed precision",
        absl::StrCat("16-bit ",
                     Pct(Share(tot.compute_16bit_ns, tot[OverviewCategory::kDeviceCompute])),
                     " of device compute"));
  }
  if (!breakdown.consistently_slow.empty()) {
    std::map<std::string, int64_t> causes;
    std::string why;
    for (const PodStep& s : breakdown.steps) {
      if (s.straggler == breakdown.consistently_slow.front()) {
        ++causes[std::string(CategoryName(s.cause))];
        if (why.empty()) why = s.why;
      }
    }
    std::string cause;
    int64_t most = 0;
    for (const auto& [c, n] : causes) {
      if (n > most) {
        most = n;
        cause = c;
      }
    }
    add("stragglers",
        absl::StrCat("stragglers: ", absl::StrJoin(breakdown.consistently_slow, ", "),
                     " hold the pod back, mostly in ", cause, "; look at that host's ", cause),
        why);
  }
  return pod;
}

}  // namespace profctl::analysis
