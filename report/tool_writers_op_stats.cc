// The op_stats tool's writers: ops by name and by type with host and device self time, idle time,
// FLOPS utilization and the self-time pies (docs/tools.md "op_stats").

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "report/short_names.h"
#include "report/tool_writers_internal.h"

namespace profctl::report::tool_writers_internal {

using analysis::HostTools;
using analysis::OpShareRow;
using analysis::OpStat;
using analysis::PodTools;

namespace {

void OpRows(Json& j, const std::vector<analysis::OpShareRow>& rows, double peak_flops_per_s) {
  j.BeginArray();
  for (const analysis::OpShareRow& r : rows) {
    const OpStat& s = r.stat;
    j.BeginObject();
    j.Key("name");
    j.String(s.name);
    j.Key("type");
    j.String(s.type);
    j.Key("on_host");
    j.Bool(s.host);
    j.Key("occurrences");
    j.Int(s.occurrences);
    j.Key("host_total_us");
    j.Us(s.host_total_ns);
    j.Key("host_self_us");
    j.Us(s.host_self_ns);
    j.Key("device_total_us");
    j.Us(s.device_total_ns);
    j.Key("device_self_us");
    j.Us(s.device_self_ns);
    j.Key("host_self_pct");
    j.Double(r.host_self_pct, 2);
    j.Key("host_self_cum_pct");
    j.Double(r.host_self_cum_pct, 2);
    j.Key("device_self_pct");
    j.Double(r.device_self_pct, 2);
    j.Key("device_self_cum_pct");
    j.Double(r.device_self_cum_pct, 2);
    j.Key("flops");
    s.flops < 0 ? j.Null() : j.Int(s.flops);
    j.Key("flops_utilization_pct");
    const double util = analysis::FlopsUtilizationPct(s, peak_flops_per_s);
    util < 0 ? j.Null() : j.Double(util, 2);
    j.EndObject();
  }
  j.EndArray();
}

void Pie(Json& j, const std::vector<analysis::PieSlice>& slices) {
  SliceRows(j, slices, "name", "self_us");
}

// The op tables of one OpStats (the pod's or a host's) with their shares, the idle time and the
// guide's four pie charts.
void OpTables(Json& j, const analysis::OpStats& ops, bool include_idle) {
  const std::vector<analysis::OpShareRow> by_op =
      analysis::OpShares(ops.by_op, ops.host_idle_ns, ops.device_idle_ns, include_idle);
  const std::vector<analysis::OpShareRow> by_type =
      analysis::OpShares(ops.by_type, ops.host_idle_ns, ops.device_idle_ns, include_idle);
  j.Key("idle");
  j.BeginObject();
  j.Key("host_us");
  j.Us(ops.host_idle_ns);
  j.Key("device_us");
  j.Us(ops.device_idle_ns);
  j.EndObject();
  j.Key("peak_teraflops_per_second");
  ops.peak_flops_per_s <= 0 ? j.Null() : j.Double(ops.peak_flops_per_s / 1e12, 3);
  j.Key("by_op");
  OpRows(j, by_op, ops.peak_flops_per_s);
  j.Key("by_type");
  OpRows(j, by_type, ops.peak_flops_per_s);
  j.Key("pie");
  j.BeginObject();
  j.Key("host_by_op");
  Pie(j, analysis::SelfTimePie(by_op, /*device=*/false, analysis::kMaxTop));
  j.Key("host_by_type");
  Pie(j, analysis::SelfTimePie(by_type, /*device=*/false, analysis::kMaxTop));
  j.Key("device_by_op");
  Pie(j, analysis::SelfTimePie(by_op, /*device=*/true, analysis::kMaxTop));
  j.Key("device_by_type");
  Pie(j, analysis::SelfTimePie(by_type, /*device=*/true, analysis::kMaxTop));
  j.EndObject();
}

std::string PctText(double v) { return absl::StrFormat("%.2f", v); }

}  // namespace

void OpStatsJson(Json& j, const PodTools& p) {
  j.Key("include_idle");
  j.Bool(p.include_idle);
  OpTables(j, p.ops, p.include_idle);
  j.Key("per_host");
  j.BeginArray();
  for (const HostTools& h : p.hosts) {
    j.BeginObject();
    j.Key("host");
    j.String(h.host);
    OpTables(j, h.ops, p.include_idle);
    j.EndObject();
  }
  j.EndArray();
}

void OpStatsCsv(std::string& out, const PodTools& p) {
  Row(&out, {"host", "name", "type", "on_host", "occurrences", "host_total_us", "host_self_us",
             "device_total_us", "device_self_us", "host_self_pct", "host_self_cum_pct",
             "device_self_pct", "device_self_cum_pct"});
  for (const HostTools& h : p.hosts) {
    for (const analysis::OpShareRow& r : analysis::OpShares(h.ops.by_op, h.ops.host_idle_ns,
                                                            h.ops.device_idle_ns, p.include_idle)) {
      const OpStat& s = r.stat;
      Row(&out, {h.host, s.name, s.type, s.host ? "true" : "false", absl::StrCat(s.occurrences),
                 UsText(s.host_total_ns), UsText(s.host_self_ns), UsText(s.device_total_ns),
                 UsText(s.device_self_ns), PctText(r.host_self_pct), PctText(r.host_self_cum_pct),
                 PctText(r.device_self_pct), PctText(r.device_self_cum_pct)});
    }
  }
}

void OpStatsTable(std::string& out, const PodTools& p, const TableStyle& style) {
  const int w = style.max_name_width;
  const size_t limit = style.limit;
  const analysis::OpStats& ops = p.ops;
  const auto table = [&](absl::string_view title, const std::vector<OpStat>& stats) {
    const std::vector<analysis::OpShareRow> rows =
        analysis::OpShares(stats, ops.host_idle_ns, ops.device_idle_ns, p.include_idle);
    absl::StrAppendFormat(&out, "\n%s\n%14s %6s %6s %14s %14s %6s %6s %14s %7s  %-16s %s\n", title,
                          "dev_self_ms", "%", "cum%", "dev_total_ms", "host_self_ms", "%", "cum%",
                          "host_total_ms", "count", "type", "name");
    std::vector<std::string> names;
    for (size_t i = 0; i < rows.size() && i < limit; ++i) {
      names.push_back(Printable(rows[i].stat.name, 1 << 20));
    }
    const std::vector<std::string> shown = DistinctShortNames(names, static_cast<size_t>(w));
    for (size_t i = 0; i < rows.size() && i < limit; ++i) {
      const OpShareRow& r = rows[i];
      const OpStat& s = r.stat;
      absl::StrAppendFormat(&out, "%14s %6.2f %6.2f %14s %14s %6.2f %6.2f %14s %7d  %-16s %s\n",
                            MsText(s.device_self_ns), r.device_self_pct, r.device_self_cum_pct,
                            MsText(s.device_total_ns), MsText(s.host_self_ns), r.host_self_pct,
                            r.host_self_cum_pct, MsText(s.host_total_ns), s.occurrences,
                            Printable(s.type, 16), shown[i]);
    }
    if (rows.size() > limit) absl::StrAppend(&out, "... ", rows.size() - limit, " more\n");
  };
  absl::StrAppendFormat(&out, "\nidle: host %s ms, devices %s ms (%s)\n", MsText(ops.host_idle_ns),
                        MsText(ops.device_idle_ns),
                        p.include_idle ? "counted as the IDLE row"
                                       : "not counted; --include-idle adds it as an IDLE row");
  table("by op:", ops.by_op);
  table("by op type:", ops.by_type);
  if (ops.peak_flops_per_s > 0) {
    absl::StrAppendFormat(&out, "\nFLOPS utilization by op type (peak %.1f TFLOP/s):\n",
                          ops.peak_flops_per_s / 1e12);
    for (size_t i = 0; i < ops.by_type.size() && i < limit; ++i) {
      const double util = analysis::FlopsUtilizationPct(ops.by_type[i], ops.peak_flops_per_s);
      if (util >= 0) {
        absl::StrAppendFormat(&out, "  %6.2f%%  %s\n", util, Printable(ops.by_type[i].name, w));
      }
    }
  }
  const auto pie = [&](absl::string_view title, const std::vector<OpStat>& stats, bool device) {
    const std::vector<analysis::PieSlice> slices = analysis::SelfTimePie(
        analysis::OpShares(stats, ops.host_idle_ns, ops.device_idle_ns, p.include_idle), device,
        analysis::kMaxTop);
    absl::StrAppend(&out, "\n", title, ":");
    if (slices.empty()) absl::StrAppend(&out, " no self time on the ", device ? "devices" : "host");
    out += "\n";
    for (const analysis::PieSlice& s : slices) {
      absl::StrAppendFormat(&out, "  %6.2f%%  %s\n", s.pct, Printable(s.name, w));
    }
  };
  pie("device self time by op type", ops.by_type, /*device=*/true);
  pie("host self time by op type", ops.by_type, /*device=*/false);
}

}  // namespace profctl::report::tool_writers_internal
