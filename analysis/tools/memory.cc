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

namespace {

// At most kMaxMemoryPoints: the maximum (by `value`) of each bucket, so the peak stays.
template <typename Point, typename Value>
std::vector<Point> Downsample(std::vector<Point> points, Value value) {
  if (points.size() <= kMaxMemoryPoints) return points;
  std::vector<Point> out;
  const size_t per = (points.size() + kMaxMemoryPoints - 1) / kMaxMemoryPoints;
  for (size_t b = 0; b < points.size(); b += per) {
    size_t best = b;
    for (size_t k = b; k < std::min(points.size(), b + per); ++k) {
      if (value(points[k]) > value(points[best])) best = k;
    }
    out.push_back(points[best]);
  }
  return out;
}

// The live allocations (largest first) grouped by op, by bytes descending; past kMaxPeakOps
// one "other" row.
std::vector<PeakOpMemory> GroupByOp(const std::vector<LiveAllocation>& live) {
  std::vector<PeakOpMemory> rows;
  absl::flat_hash_map<std::string, size_t> index;
  for (const LiveAllocation& a : live) {
    auto [it, inserted] = index.emplace(a.op, rows.size());
    if (inserted) {
      PeakOpMemory r;
      r.op = a.op;
      r.region_type = a.region_type;  // the largest allocation's: `live` is largest first
      r.data_type = a.data_type;
      r.shape = a.shape;
      rows.push_back(std::move(r));
    }
    PeakOpMemory& r = rows[it->second];
    ++r.allocations;
    r.bytes += a.bytes;
    if (a.requested_bytes >= 0)
      r.requested_bytes = std::max<int64_t>(r.requested_bytes, 0) + a.requested_bytes;
  }
  std::stable_sort(rows.begin(), rows.end(),
                   [](const PeakOpMemory& a, const PeakOpMemory& b) { return a.bytes > b.bytes; });
  if (rows.size() > kMaxPeakOps) {
    PeakOpMemory other;
    other.op = "other";
    for (size_t i = kMaxPeakOps; i < rows.size(); ++i) {
      other.allocations += rows[i].allocations;
      other.bytes += rows[i].bytes;
      if (rows[i].requested_bytes >= 0) {
        other.requested_bytes =
            std::max<int64_t>(other.requested_bytes, 0) + rows[i].requested_bytes;
      }
    }
    rows.resize(kMaxPeakOps);
    rows.push_back(std::move(other));
  }
  return rows;
}

}  // namespace

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
        LiveAllocation a;
        a.address = e.address;
        a.bytes = e.bytes;
        a.since_ns = e.time_ns;
        a.op = std::string(t.Str(e.op));
        a.requested_bytes = e.requested_bytes;
        a.step = e.step;
        a.region_type = std::string(t.Str(e.region_type));
        a.data_type = std::string(t.Str(e.data_type));
        a.shape = std::string(t.Str(e.shape));
        live[e.address] = std::move(a);
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
    m.by_op_at_peak = GroupByOp(m.largest_live_at_peak);
    if (m.largest_live_at_peak.size() > kMaxLiveShown) m.largest_live_at_peak.resize(kMaxLiveShown);
    std::vector<FragmentationPoint> fragmentation;
    for (const size_t i : events) {
      const MemoryEvent& e = t.memory[i];
      m.peak_heap_since_start_bytes = std::max(m.peak_heap_since_start_bytes, e.reported_peak);
      if (e.reported_fragmentation >= 0) {
        fragmentation.push_back(FragmentationPoint{e.time_ns, e.reported_fragmentation});
      }
    }
    m.fragmentation = Downsample(std::move(fragmentation),
                                 [](const FragmentationPoint& p) { return p.fragmentation; });
    if (!events.empty()) {
      const MemoryEvent& e = t.memory[events[peak_at]];
      if (e.reported_available >= 0) {
        m.stack_at_peak = std::max<int64_t>(e.reported_reserved, 0);
        m.heap_at_peak = std::max<int64_t>(e.reported_in_use, 0);
        m.free_at_peak = e.reported_available;
        m.capacity_bytes = m.stack_at_peak + m.heap_at_peak + m.free_at_peak;
        m.capacity_from_allocator = true;
      }
      m.reserved_at_peak = e.reported_reserved;
      if (e.reported_fragmentation >= 0) {
        m.fragmentation_at_peak = e.reported_fragmentation;
      } else if (e.reported_reserved > 0) {
        m.fragmentation_at_peak =
            static_cast<double>(std::max<int64_t>(0, e.reported_reserved - m.peak_bytes)) /
            static_cast<double>(e.reported_reserved);
      }
    }
    if (m.capacity_bytes < 0 && device >= 0) {
      for (const DeviceInfo& d : t.environment.devices) {
        if (d.id == device && d.memory_bytes > 0) m.capacity_bytes = d.memory_bytes;
      }
    }
    m.timeline = Downsample(std::move(points), [](const MemoryPoint& p) { return p.in_use_bytes; });
    if (!m.capacity_from_allocator) {
      m.missing.push_back(
          "stack/heap/free at the peak: the allocator's bytes_reserved/bytes_allocated/"
          "bytes_available stats (TensorFlow/JAX XSpace memory profile) are not recorded");
    }
    if (m.capacity_bytes < 0) {
      m.missing.push_back(
          "capacity: neither the allocator nor the device's memory size is recorded");
    }
    if (m.peak_heap_since_start_bytes < 0) {
      m.missing.push_back(
          "peak heap since the program started: no peak_bytes_in_use stat (the peak shown is the "
          "trace's own)");
    }
    if (m.fragmentation.empty()) {
      m.missing.push_back(
          "fragmentation over time: no allocator fragmentation stat (1 - largest free chunk / "
          "total free)");
    }
    const bool details = std::any_of(events.begin(), events.end(), [&](size_t i) {
      const MemoryEvent& e = t.memory[i];
      return e.requested_bytes >= 0 || e.step >= 0 || e.region_type != StringTable::kEmpty ||
             e.data_type != StringTable::kEmpty || e.shape != StringTable::kEmpty;
    });
    if (!details) {
      m.missing.push_back(
          "per-event details: no requested size, step, region type, data type or shape");
    }
    out.push_back(std::move(m));
  }
  return out;
}

void MemoryForHost(const ToolTrace& trace, const HostSummary&, HostTools& h) {
  h.memory = ComputeMemory(trace);
}

}  // namespace profctl::analysis
