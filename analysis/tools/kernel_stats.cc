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

// --- kernel_stats -------------------------------------------------------------------------------

namespace {

// Rows by total time descending (then kernel, op), each with its share and cumulative share.
void SortAndShare(std::vector<KernelStat>* rows) {
  std::sort(rows->begin(), rows->end(), [](const KernelStat& a, const KernelStat& b) {
    return std::tie(b.total_ns, a.kernel, a.op) < std::tie(a.total_ns, b.kernel, b.op);
  });
  int64_t whole = 0;
  for (const KernelStat& k : *rows) whole += k.total_ns;
  if (whole <= 0) return;
  int64_t running = 0;
  for (KernelStat& k : *rows) {
    running += k.total_ns;
    k.pct = 100.0 * static_cast<double>(k.total_ns) / static_cast<double>(whole);
    k.cum_pct = 100.0 * static_cast<double>(running) / static_cast<double>(whole);
  }
}

}  // namespace

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
  SortAndShare(&rows);
  return rows;
}

std::vector<PieSlice> TopKernels(const std::vector<KernelStat>& rows, size_t top_n) {
  std::map<std::string, int64_t> per_kernel;
  int64_t whole = 0;
  for (const KernelStat& k : rows) {
    per_kernel[k.kernel] += k.total_ns;
    whole += k.total_ns;
  }
  std::vector<PieSlice> top;
  for (const auto& [name, ns] : per_kernel) {
    if (ns > 0) top.push_back(PieSlice{name, ns, 0});
  }
  std::stable_sort(top.begin(), top.end(),
                   [](const PieSlice& a, const PieSlice& b) { return a.self_ns > b.self_ns; });
  if (top.size() > top_n) {
    PieSlice other{"other", 0, 0};
    for (size_t i = top_n; i < top.size(); ++i) other.self_ns += top[i].self_ns;
    top.resize(top_n);
    top.push_back(std::move(other));
  }
  for (PieSlice& s : top) {
    s.pct = 100.0 * static_cast<double>(s.self_ns) / static_cast<double>(whole);
  }
  return top;
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

void KernelStatsForHost(const ToolTrace& trace, const HostSummary&, HostTools& h) {
  h.kernels = ComputeKernelStats(trace);
}

void KernelStatsForPod(PodTools& pod, const PodBreakdown&) {
  std::map<std::pair<std::string, std::string>, size_t> index;
  for (const HostTools& h : pod.hosts) MergeKernelStats(h.kernels, &pod.kernels, &index);
  SortAndShare(&pod.kernels);
}

}  // namespace profctl::analysis
