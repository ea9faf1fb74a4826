// The memory tool's writers: per device, the peak, what was live at it (by op and the largest
// allocations), fragmentation and the in-use timeline (docs/tools.md "memory").

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "report/tool_writers_internal.h"

namespace profctl::report::tool_writers_internal {

using analysis::DeviceMemory;
using analysis::HostTools;
using analysis::PodTools;

namespace {

// What a trace without allocation events lacks, and how each source records them.
constexpr absl::string_view kHowToRecord =
    "PyTorch records allocations with torch.profiler.profile(profile_memory=True) ([memory] "
    "events); TensorFlow and JAX write MemoryAllocation events to the host plane when their "
    "profiler runs; profctl's CUPTI collector records them when the agent's cupti collector "
    "traces memory (docs/cupti.md)";

}  // namespace

void MemoryJson(Json& j, const PodTools& p) {
  j.Key("how_to_record");
  j.String(kHowToRecord);
  j.Key("hosts_without_events");
  j.BeginArray();
  for (const HostTools& h : p.hosts) {
    if (h.memory.empty()) j.String(h.host);
  }
  j.EndArray();
  j.Key("devices");
  j.BeginArray();
  for (const HostTools& h : p.hosts) {
    for (const DeviceMemory& m : h.memory) {
      j.BeginObject();
      j.Key("host");
      j.String(m.host);
      j.Key("device");
      j.Int(m.device);
      j.Key("allocations");
      j.Int(m.allocations);
      j.Key("frees");
      j.Int(m.frees);
      j.Key("peak_bytes");
      j.Int(m.peak_bytes);
      j.Key("peak_time_ns");
      j.Int(m.peak_time_ns);
      j.Key("peak_time_ms");  // after the host's window start
      j.Ms(m.peak_time_ns - m.window_start_ns);
      j.Key("baseline_bytes");
      j.Int(m.baseline_bytes);
      j.Key("live_at_peak");
      j.Int(m.live_at_peak);
      j.Key("fragmentation_at_peak");
      m.fragmentation_at_peak < 0 ? j.Null() : j.Double(m.fragmentation_at_peak, 4);
      j.Key("reserved_at_peak");
      m.reserved_at_peak < 0 ? j.Null() : j.Int(m.reserved_at_peak);
      const auto int_or_null = [&j](int64_t v) { v < 0 ? j.Null() : j.Int(v); };
      // What an allocation (or an op's allocations) held, as the allocator described it.
      const auto allocation_kind = [&j](const auto& a) {
        j.Key("region_type");
        j.String(a.region_type);
        j.Key("data_type");
        j.String(a.data_type);
        j.Key("shape");
        j.String(a.shape);
      };
      j.Key("capacity_bytes");
      int_or_null(m.capacity_bytes);
      j.Key("capacity_from");
      if (m.capacity_bytes < 0) {
        j.Null();
      } else {
        j.String(m.capacity_from_allocator ? "allocator" : "device");
      }
      j.Key("peak_heap_since_start_bytes");
      int_or_null(m.peak_heap_since_start_bytes);
      j.Key("at_peak");
      if (m.heap_at_peak < 0) {
        j.Null();
      } else {
        j.BeginObject();
        j.Key("stack_bytes");
        j.Int(m.stack_at_peak);
        j.Key("heap_bytes");
        j.Int(m.heap_at_peak);
        j.Key("free_bytes");
        j.Int(m.free_at_peak);
        j.EndObject();
      }
      j.Key("largest_live_at_peak");
      j.BeginArray();
      for (const analysis::LiveAllocation& a : m.largest_live_at_peak) {
        j.BeginObject();
        j.Key("address");
        j.Uint(a.address);
        j.Key("bytes");
        j.Int(a.bytes);
        j.Key("requested_bytes");
        int_or_null(a.requested_bytes);
        j.Key("since_ns");
        j.Int(a.since_ns);
        j.Key("since_ms");
        j.Ms(a.since_ns - m.window_start_ns);
        j.Key("op");
        j.String(a.op);
        j.Key("step");
        int_or_null(a.step);
        allocation_kind(a);
        j.EndObject();
      }
      j.EndArray();
      j.Key("by_op_at_peak");
      j.BeginArray();
      for (const analysis::PeakOpMemory& r : m.by_op_at_peak) {
        j.BeginObject();
        j.Key("op");
        j.String(r.op);
        j.Key("allocations");
        j.Int(r.allocations);
        j.Key("bytes");
        j.Int(r.bytes);
        j.Key("requested_bytes");
        int_or_null(r.requested_bytes);
        allocation_kind(r);
        j.EndObject();
      }
      j.EndArray();
      j.Key("fragmentation_timeline");
      j.BeginArray();
      for (const analysis::FragmentationPoint& f : m.fragmentation) {
        j.BeginArray();
        j.Int(f.time_ns);
        j.Double(f.fragmentation, 4);
        j.EndArray();
      }
      j.EndArray();
      j.Key("missing");
      j.BeginArray();
      for (const std::string& s : m.missing) j.String(s);
      j.EndArray();
      j.Key("timeline");
      j.BeginArray();
      for (const analysis::MemoryPoint& pt : m.timeline) {
        j.BeginArray();
        j.Int(pt.time_ns);
        j.Int(pt.in_use_bytes);
        j.EndArray();
      }
      j.EndArray();
      j.EndObject();
    }
  }
  j.EndArray();
}

void MemoryCsv(std::string& out, const PodTools& p) {
  Row(&out, {"host", "device", "time_ns", "in_use_bytes"});
  for (const HostTools& h : p.hosts) {
    for (const DeviceMemory& m : h.memory) {
      for (const analysis::MemoryPoint& pt : m.timeline) {
        Row(&out, {m.host, absl::StrCat(m.device), absl::StrCat(pt.time_ns),
                   absl::StrCat(pt.in_use_bytes)});
      }
    }
  }
}

void MemoryTable(std::string& out, const PodTools& p, const TableStyle& style) {
  const int w = style.max_name_width;
  const size_t limit = style.limit;
  for (const HostTools& h : p.hosts) {
    if (h.memory.empty()) {
      absl::StrAppend(&out, "\nhost ", Printable(h.host, w),
                      ": no memory allocation events in the trace. ", kHowToRecord, "\n");
    }
    for (const DeviceMemory& m : h.memory) {
      absl::StrAppend(
          &out, "\nhost ", Printable(h.host, w), " ",
          m.device < 0 ? std::string("host memory") : absl::StrCat("device ", m.device), ": peak ",
          absl::StrFormat("%.2f", static_cast<double>(m.peak_bytes) / (1 << 20)), " MiB at +",
          MsText(m.peak_time_ns - m.window_start_ns), " ms; ", m.allocations, " allocations, ",
          m.frees, " frees; ", m.live_at_peak, " live at the peak");
      if (m.baseline_bytes > 0) {
        absl::StrAppendFormat(&out, "; %.2f MiB in use before the trace",
                              static_cast<double>(m.baseline_bytes) / (1 << 20));
      }
      if (m.fragmentation_at_peak >= 0) {
        absl::StrAppendFormat(&out, "; fragmentation %.1f%%", 100 * m.fragmentation_at_peak);
      }
      out += "\n";
      const auto mib = [](int64_t b) {
        return absl::StrFormat("%.2f MiB", static_cast<double>(b) / (1 << 20));
      };
      if (m.capacity_bytes >= 0) {
        absl::StrAppend(&out, "  capacity ", mib(m.capacity_bytes), " (",
                        m.capacity_from_allocator ? "allocator" : "device", ")");
        if (m.peak_heap_since_start_bytes >= 0) {
          absl::StrAppend(&out, "; peak heap since start ", mib(m.peak_heap_since_start_bytes));
        }
        out += "\n";
      } else if (m.peak_heap_since_start_bytes >= 0) {
        absl::StrAppend(&out, "  peak heap since start ", mib(m.peak_heap_since_start_bytes), "\n");
      }
      if (m.heap_at_peak >= 0) {
        absl::StrAppend(&out, "  at the peak: stack ", mib(m.stack_at_peak), ", heap ",
                        mib(m.heap_at_peak), ", free ", mib(m.free_at_peak), "\n");
      }
      if (!m.fragmentation.empty()) {
        double most = 0;
        for (const analysis::FragmentationPoint& f : m.fragmentation) {
          most = std::max(most, f.fragmentation);
        }
        absl::StrAppendFormat(&out, "  fragmentation over time: %d point(s), at most %.1f%%\n",
                              m.fragmentation.size(), 100 * most);
      }
      if (!m.by_op_at_peak.empty()) {
        absl::StrAppendFormat(&out, "  at the peak by op:\n  %14s %7s %14s  %-10s %-10s %-14s %s\n",
                              "MiB", "allocs", "requested MiB", "region", "type", "shape", "op");
      }
      for (size_t i = 0; i < m.by_op_at_peak.size() && i < limit; ++i) {
        const analysis::PeakOpMemory& r = m.by_op_at_peak[i];
        absl::StrAppendFormat(
            &out, "  %14.2f %7d %14s  %-10s %-10s %-14s %s\n",
            static_cast<double>(r.bytes) / (1 << 20), r.allocations,
            r.requested_bytes < 0
                ? std::string("-")
                : absl::StrFormat("%.2f", static_cast<double>(r.requested_bytes) / (1 << 20)),
            Printable(r.region_type.empty() ? "-" : r.region_type, 10),
            Printable(r.data_type.empty() ? "-" : r.data_type, 10),
            Printable(r.shape.empty() ? "-" : r.shape, 14),
            Printable(r.op.empty() ? "-" : r.op, w));
      }
      if (!m.largest_live_at_peak.empty()) out += "  largest allocations live at the peak:\n";
      for (size_t i = 0; i < m.largest_live_at_peak.size() && i < limit; ++i) {
        const analysis::LiveAllocation& a = m.largest_live_at_peak[i];
        absl::StrAppendFormat(&out, "  %12.2f MiB  0x%x  %s\n",
                              static_cast<double>(a.bytes) / (1 << 20), a.address,
                              Printable(a.op.empty() ? "-" : a.op, w));
      }
      for (const std::string& s : m.missing) {
        absl::StrAppend(&out, "  not in this trace: ", s, "\n");
      }
    }
  }
}

}  // namespace profctl::report::tool_writers_internal
