// The kernel_stats tool's writers: one row per kernel and launch configuration, pod-wide and per
// host (docs/tools.md "kernel_stats").

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "report/short_names.h"
#include "report/tool_writers_internal.h"

namespace profctl::report::tool_writers_internal {

using analysis::HostTools;
using analysis::KernelStat;
using analysis::PodTools;

namespace {

void Dims(Json& j, const std::array<int32_t, 3>& d) {
  j.BeginArray();
  for (const int32_t v : d) j.Int(v);
  j.EndArray();
}

void KernelRows(Json& j, const std::vector<KernelStat>& rows) {
  j.BeginArray();
  for (const KernelStat& k : rows) {
    j.BeginObject();
    j.Key("kernel");
    j.String(k.kernel);
    j.Key("op");
    j.String(k.op);
    j.Key("registers_per_thread");
    k.registers_per_thread < 0 ? j.Null() : j.Int(k.registers_per_thread);
    j.Key("shared_memory_bytes");
    k.shared_memory_bytes < 0 ? j.Null() : j.Int(k.shared_memory_bytes);
    j.Key("grid");
    Dims(j, k.grid);
    j.Key("block");
    Dims(j, k.block);
    j.Key("occupancy_pct");
    k.occupancy_pct < 0 ? j.Null() : j.Double(k.occupancy_pct, 2);
    j.Key("configs");
    j.Int(k.configs);
    j.Key("tensor_core_eligible");
    j.Bool(k.tensor_core_eligible);
    j.Key("tensor_core_used");
    j.Bool(k.tensor_core_used);
    j.Key("occurrences");
    j.Int(k.occurrences);
    j.Key("total_us");
    j.Us(k.total_ns);
    j.Key("avg_us");
    j.Us(k.avg_ns());
    j.Key("min_us");
    j.Us(k.min_ns);
    j.Key("max_us");
    j.Us(k.max_ns);
    j.Key("pct");
    j.Double(k.pct, 2);
    j.Key("cum_pct");
    j.Double(k.cum_pct, 2);
    j.EndObject();
  }
  j.EndArray();
}

std::string DimsText(const std::array<int32_t, 3>& d) { return absl::StrJoin(d, "x"); }

void TopKernelsJson(Json& j, const std::vector<KernelStat>& rows) {
  SliceRows(j, analysis::TopKernels(rows, analysis::kMaxTop), "kernel", "total_us");
}

}  // namespace

void KernelStatsJson(Json& j, const PodTools& p) {
  j.Key("top_kernels");
  TopKernelsJson(j, p.kernels);
  j.Key("kernels");
  KernelRows(j, p.kernels);
  j.Key("per_host");
  j.BeginArray();
  for (const HostTools& h : p.hosts) {
    j.BeginObject();
    j.Key("host");
    j.String(h.host);
    j.Key("top_kernels");
    TopKernelsJson(j, h.kernels);
    j.Key("kernels");
    KernelRows(j, h.kernels);
    j.EndObject();
  }
  j.EndArray();
}

void KernelStatsCsv(std::string& out, const PodTools& p) {
  Row(&out, {"host", "kernel", "op", "registers_per_thread", "shared_memory_bytes", "grid", "block",
             "occupancy_pct", "tensor_core_eligible", "tensor_core_used", "occurrences", "total_us",
             "avg_us", "min_us", "max_us", "pct", "cum_pct"});
  for (const HostTools& h : p.hosts) {
    for (const KernelStat& k : h.kernels) {
      Row(&out,
          {h.host, k.kernel, k.op,
           k.registers_per_thread < 0 ? "" : absl::StrCat(k.registers_per_thread),
           k.shared_memory_bytes < 0 ? "" : absl::StrCat(k.shared_memory_bytes), DimsText(k.grid),
           DimsText(k.block), k.occupancy_pct < 0 ? "" : absl::StrFormat("%.2f", k.occupancy_pct),
           k.tensor_core_eligible ? "true" : "false", k.tensor_core_used ? "true" : "false",
           absl::StrCat(k.occurrences), UsText(k.total_ns), UsText(k.avg_ns()), UsText(k.min_ns),
           UsText(k.max_ns), absl::StrFormat("%.2f", k.pct), absl::StrFormat("%.2f", k.cum_pct)});
    }
  }
}

void KernelStatsTable(std::string& out, const PodTools& p, const TableStyle& style) {
  const int w = style.max_name_width;
  const size_t limit = style.limit;
  if (p.kernels.empty()) {
    out += "\nno GPU kernels in the trace (a CPU-only or TPU run, or device tracing was off)\n";
    return;
  }
  out += "\ntop kernels by total time:\n";
  const std::vector<analysis::PieSlice> top = analysis::TopKernels(p.kernels, analysis::kMaxTop);
  std::vector<std::string> top_names;
  top_names.reserve(top.size());
  for (const analysis::PieSlice& s : top) top_names.push_back(Printable(s.name, 1 << 20));
  const std::vector<std::string> top_shown = DistinctShortNames(top_names, static_cast<size_t>(w));
  for (size_t i = 0; i < top.size(); ++i) {
    absl::StrAppendFormat(&out, "  %12s ms %6.2f%%  %s\n", MsText(top[i].self_ns), top[i].pct,
                          top_shown[i]);
  }
  // The rows shown, their kernel names shortened so that no two read the same.
  std::vector<std::string> names;
  for (size_t i = 0; i < p.kernels.size() && i < limit; ++i) {
    names.push_back(Printable(p.kernels[i].kernel, 1 << 20));
  }
  const std::vector<std::string> shown = DistinctShortNames(names, static_cast<size_t>(w));
  absl::StrAppendFormat(&out, "\n%12s %6s %6s %7s %10s %10s %5s %7s %6s %3s  %-*s  %s\n",
                        "total_ms", "%", "cum%", "count", "avg_ms", "max_ms", "regs", "shmem",
                        "occ%", "TC", w, "kernel", "op");
  for (size_t i = 0; i < p.kernels.size() && i < limit; ++i) {
    const KernelStat& k = p.kernels[i];
    absl::StrAppendFormat(&out, "%12s %6.2f %6.2f %7d %10s %10s %5s %7s %6s %3s  %-*s  %s\n",
                          MsText(k.total_ns), k.pct, k.cum_pct, k.occurrences, MsText(k.avg_ns()),
                          MsText(k.max_ns),
                          k.registers_per_thread < 0 ? "-" : absl::StrCat(k.registers_per_thread),
                          k.shared_memory_bytes < 0 ? "-" : absl::StrCat(k.shared_memory_bytes),
                          k.occupancy_pct < 0 ? "-" : absl::StrFormat("%.1f", k.occupancy_pct),
                          k.tensor_core_used       ? "yes"
                          : k.tensor_core_eligible ? "elg"
                                                   : "no",
                          w, shown[i], Printable(k.op.empty() ? "-" : k.op, w));
  }
  if (p.kernels.size() > limit) {
    absl::StrAppend(&out, "... ", p.kernels.size() - limit, " more (--json / --csv)\n");
  }
  out += "TC: yes = uses Tensor Cores, elg = eligible but does not, no = not eligible\n";
}

}  // namespace profctl::report::tool_writers_internal
