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

void MemoryForHost(const ToolTrace& trace, const HostSummary&, HostTools& h) {
  h.memory = ComputeMemory(trace);
}

}  // namespace profctl::analysis
