#include "report/diff_writers.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "analysis/breakdown.h"
#include "report/breakdown_writers.h"
#include "report/html_escape.h"
#include "report/json_out.h"
#include "report/report_assets.h"
#include "report/short_names.h"

namespace profctl::report {

namespace {

using analysis::Category;
using analysis::Change;

// {"a", "b", "delta", "pct"} with times in ms; a side the value is not on is null.
void WriteChange(JsonOut& j, const Change& c, bool ms, bool has_a = true, bool has_b = true) {
  j.BeginObject();
  auto value = [&](int64_t v, bool has) {
    if (!has) {
      j.Null();
    } else if (ms) {
      j.Ms(v);
    } else {
      j.Int(v);
    }
  };
  j.Key("a");
  value(c.a, has_a);
  j.Key("b");
  value(c.b, has_b);
  j.Key("delta");
  value(c.delta(), has_a && has_b);
  j.Key("pct");
  if (has_a && has_b) {
    j.Double(c.pct(), 1);
  } else {
    j.Null();
  }
  j.EndObject();
}

void WriteStraggler(JsonOut& j, const analysis::StragglerSummary& s) {
  if (s.host.empty()) {
    j.Null();
    return;
  }
  j.BeginObject();
  j.Key("host");
  j.String(s.host);
  j.Key("steps");
  j.Int(s.steps);
  j.Key("cause");
  j.String(analysis::CategoryName(s.cause));
  j.EndObject();
}

// "kernel", or the copy/memset's short kind ("copy d2d", "memset"); ops are "op".
absl::string_view RowKind(const analysis::NameDiff& n, bool ops) {
  if (ops) return "op";
  return n.transfer.has_value() ? analysis::TransferKindShortName(*n.transfer) : "kernel";
}

// Occurrences per pod step, for people: "4,608", "0.5".
std::string PerStepCount(int64_t occurrences, int64_t steps) {
  if (steps <= 0) return absl::StrCat(occurrences);
  const double v = static_cast<double>(occurrences) / static_cast<double>(steps);
  if (v < 100 && std::fabs(v - std::round(v)) > 1e-9) return absl::StrFormat("%.1f", v);
  std::string digits = absl::StrCat(static_cast<int64_t>(std::llround(v)));
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out.push_back(',');
    out.push_back(digits[i]);
  }
  return out;
}

void WriteNames(JsonOut& j, const std::vector<analysis::NameDiff>& names, bool ops) {
  j.BeginArray();
  for (const analysis::NameDiff& n : names) {
    j.BeginObject();
    j.Key("name");
    j.String(n.name);
    j.Key("kind");
    j.String(RowKind(n, ops));
    j.Key("ms_per_step");
    WriteChange(j, n.ns_per_step, /*ms=*/true);
    j.Key("total_ms");
    WriteChange(j, n.total_ns, /*ms=*/true);
    j.Key("occurrences");
    WriteChange(j, n.occurrences, /*ms=*/false);
    j.EndObject();
  }
  j.EndArray();
}

absl::string_view HeadlineWhat(analysis::DiffHeadline::What what) {
  switch (what) {
    case analysis::DiffHeadline::What::kNothing:
      return "nothing";
    case analysis::DiffHeadline::What::kCategory:
      return "category";
    case analysis::DiffHeadline::What::kTransfer:
      return "transfer";
    case analysis::DiffHeadline::What::kKernel:
      return "kernel";
    case analysis::DiffHeadline::What::kOp:
      return "op";
  }
  return "nothing";
}

// "by rank (Kineto distributedInfo)" ... for the hosts line.
std::string PairingText(const analysis::Diff& d) {
  std::string s;
  switch (d.pairing) {
    case analysis::HostPairing::kUnpaired:
      s = "not paired";
      break;
    case analysis::HostPairing::kRank:
      s = "paired by rank (the traces' distributedInfo)";
      break;
    case analysis::HostPairing::kName:
      s = "paired by name";
      break;
    case analysis::HostPairing::kSingle:
      s = "paired one to one (each side has one host)";
      break;
    case analysis::HostPairing::kRole:
      s = "paired by role (the names without their numbers, in their numbers' order)";
      break;
    case analysis::HostPairing::kPosition:
      s = "paired by position (each side's host order)";
      break;
  }
  if (!d.pairing_note.empty()) absl::StrAppend(&s, "; ", d.pairing_note);
  return s;
}

void WriteStrings(JsonOut& j, const std::vector<std::string>& v) {
  j.BeginArray();
  for (const std::string& s : v) j.String(s);
  j.EndArray();
}

// Control characters as '?', shortened in the middle beyond `max_width` (at least 5; the
// tools' own Printable keeps at least 8).
std::string DiffPrintable(absl::string_view s, int max_width) {
  std::string p(s);
  for (char& c : p) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = '?';
  }
  const size_t w = static_cast<size_t>(std::max(max_width, 5));
  if (p.size() > w) {
    const size_t head = (w - 3) / 2;
    const size_t tail = w - 3 - head;
    p = absl::StrCat(p.substr(0, head), "...", p.substr(p.size() - tail));
  }
  return p;
}

// "+5.000" / "-0.250" / "0.000".
std::string SignedMs(int64_t ns) {
  const std::string ms = FormatMs(ns);
  return ns > 0 && ms != "0.000" ? "+" + ms : ms;
}

// "w2 input +22.000 -> +30.000 ms" / "w1 compute +20.000 ms -> no longer" / "w0 input now
// +10.000 ms".
std::string OutlierText(const analysis::OutlierDiff& o, int width) {
  std::string s =
      absl::StrCat(DiffPrintable(o.host, width), " ", analysis::CategoryName(o.category), " ");
  if (o.in_a && o.in_b) {
    absl::StrAppend(&s, SignedMs(o.median_excess_ns.a), " -> ", SignedMs(o.median_excess_ns.b),
                    " ms");
  } else if (o.in_a) {
    absl::StrAppend(&s, SignedMs(o.median_excess_ns.a), " ms -> no longer");
  } else {
    absl::StrAppend(&s, "now ", SignedMs(o.median_excess_ns.b), " ms");
  }
  return s;
}

// "+50.0%", "-" without a base.
std::string Pct(const Change& c) {
  const double p = c.pct();
  if (std::isnan(p)) return c.delta() == 0 ? "0.0%" : "new";
  return absl::StrFormat("%+.1f%%", p);
}

// "w1 (compute, 8 steps)" / "none".
std::string StragglerText(const analysis::StragglerSummary& s, int width) {
  if (s.host.empty()) return "none";
  return absl::StrCat(DiffPrintable(s.host, width), " (", analysis::CategoryName(s.cause), ", ",
                      s.steps, " steps)");
}

void AppendNameTable(std::string* out, absl::string_view title,
                     const std::vector<analysis::NameDiff>& names, const Change& steps, int width,
                     bool ops) {
  if (names.empty()) {
    absl::StrAppend(out, "\n", title, ": no change\n");
    return;
  }
  int name_width = 4;
  for (const analysis::NameDiff& n : names) {
    name_width = std::max(name_width, static_cast<int>(DiffPrintable(n.name, width).size()));
  }
  absl::StrAppend(out, "\n", title, " (ms per step):\n");
  absl::StrAppendFormat(out, "  %-8s %-*s %10s %10s %10s %8s %17s\n", "KIND", name_width, "NAME",
                        "A", "B", "DELTA", "%", "COUNT A->B/STEP");
  for (const analysis::NameDiff& n : names) {
    absl::StrAppendFormat(out, "  %-8s %-*s %10s %10s %10s %8s %17s\n", RowKind(n, ops), name_width,
                          DiffPrintable(n.name, width), FormatMs(n.ns_per_step.a),
                          FormatMs(n.ns_per_step.b), SignedMs(n.ns_per_step.delta()),
                          Pct(n.ns_per_step),
                          absl::StrCat(PerStepCount(n.occurrences.a, steps.a), "->",
                                       PerStepCount(n.occurrences.b, steps.b)));
  }
}

// "12.500" / "" for a side that has no value.
std::string CsvMs(int64_t ns, bool has) { return has ? FormatMs(ns) : ""; }
std::string CsvInt(int64_t v, bool has) { return has ? absl::StrCat(v) : ""; }
std::string CsvPct(const Change& c, bool has) {
  const double p = c.pct();
  return has && !std::isnan(p) ? absl::StrFormat("%.1f", p) : "";
}

void AppendCsvRow(std::string* out, absl::string_view kind, absl::string_view host,
                  absl::string_view name, absl::string_view a, absl::string_view b,
                  absl::string_view delta, absl::string_view pct) {
  const absl::string_view fields[] = {kind, host, name, a, b, delta, pct};
  for (size_t i = 0; i < 7; ++i) {
    if (i > 0) out->push_back(',');
    AppendCsvField(out, fields[i]);
  }
  out->push_back('\n');
}

void AppendCsvChange(std::string* out, absl::string_view kind, absl::string_view host,
                     absl::string_view name, const Change& c, bool ms, bool has_a = true,
                     bool has_b = true) {
  auto v = [ms](int64_t x, bool has) { return ms ? CsvMs(x, has) : CsvInt(x, has); };
  AppendCsvRow(out, kind, host, name, v(c.a, has_a), v(c.b, has_b), v(c.delta(), has_a && has_b),
               CsvPct(c, has_a && has_b));
}

// One "<category>_ms" row per category, A against B (the pod's or one host's).
void AppendCsvCategoryChanges(std::string* out, absl::string_view kind, absl::string_view host,
                              const std::array<Change, analysis::kNumCategories>& categories,
                              bool has_a = true, bool has_b = true) {
  for (int c = 0; c < analysis::kNumCategories; ++c) {
    AppendCsvChange(out, kind, host,
                    absl::StrCat(analysis::CategoryName(static_cast<Category>(c)), "_ms"),
                    categories[static_cast<size_t>(c)], /*ms=*/true, has_a, has_b);
  }
}

// --- HTML ---------------------------------------------------------------------------------------

void Html(std::string* out, absl::string_view s) { AppendHtmlEscaped(out, s); }

// A name cell: the whole name in its title, cut by the stylesheet.
// A name cell: `shown` (DistinctShortNames' text), the whole name on hover when it differs.
void NameCell(std::string* out, absl::string_view name, absl::string_view shown) {
  out->append("<td class=\"name\"");
  if (shown != name) {
    out->append(" title=\"");
    Html(out, name);
    out->append("\"");
  }
  out->append(">");
  Html(out, shown);
  out->append("</td>");
}

// The page's numbers: fixed decimals and a unit in every cell.
std::string MsCell(int64_t ns) { return absl::StrCat(FormatMs(ns), " ms"); }
std::string SignedMsCell(int64_t ns) { return absl::StrCat(SignedMs(ns), " ms"); }
std::string PctCell(const Change& c) {
  const double p = c.pct();
  if (std::isnan(p)) return c.delta() == 0 ? "0.0 %" : "new";
  return absl::StrFormat("%+.1f %%", p);
}

// The names a table of the page shows: distinct, at most this many characters.
constexpr size_t kPageNameRoom = 72;

void NumCell(std::string* out, absl::string_view text, int64_t sign = 0) {
  absl::StrAppend(out, "<td class=\"num", sign > 0 ? " up" : sign < 0 ? " down" : "", "\">");
  Html(out, text);
  out->append("</td>");
}

void AppendHtmlNames(std::string* out, absl::string_view title,
                     const std::vector<analysis::NameDiff>& names) {
  absl::StrAppend(out, "<h2>");
  Html(out, title);
  out->append(" (per step)</h2>\n");
  if (names.empty()) {
    out->append("<p class=\"note\">No change.</p>\n");
    return;
  }
  out->append(
      "<div class=\"table-wrap\"><table><thead><tr><th>name</th><th class=\"num\">A</th>"
      "<th class=\"num\">B</th><th class=\"num\">change</th><th class=\"num\">%</th>"
      "<th class=\"num\">count A</th><th class=\"num\">count B</th></tr></thead><tbody>\n");
  std::vector<std::string> full;
  full.reserve(names.size());
  for (const analysis::NameDiff& n : names) full.push_back(n.name);
  const std::vector<std::string> shown = DistinctShortNames(full, kPageNameRoom);
  for (size_t i = 0; i < names.size(); ++i) {
    const analysis::NameDiff& n = names[i];
    out->append("<tr>");
    NameCell(out, n.name, shown[i]);
    NumCell(out, MsCell(n.ns_per_step.a));
    NumCell(out, MsCell(n.ns_per_step.b));
    NumCell(out, SignedMsCell(n.ns_per_step.delta()), n.ns_per_step.delta());
    NumCell(out, PctCell(n.ns_per_step));
    NumCell(out, absl::StrCat(n.occurrences.a));
    NumCell(out, absl::StrCat(n.occurrences.b));
    out->append("</tr>\n");
  }
  out->append("</tbody></table></div>\n");
}

// "categories_ms": each category's time per step, A against B (the pod's or one host's).
void WriteCategoryChanges(JsonOut& j,
                          const std::array<Change, analysis::kNumCategories>& categories,
                          bool has_a = true, bool has_b = true) {
  j.Key("categories_ms");
  j.BeginObject();
  for (int c = 0; c < analysis::kNumCategories; ++c) {
    j.Key(analysis::CategoryName(static_cast<Category>(c)));
    WriteChange(j, categories[static_cast<size_t>(c)], /*ms=*/true, has_a, has_b);
  }
  j.EndObject();
}

// "headline": the one change that matters most, in words and numbers.
void WriteHeadline(JsonOut& j, const analysis::DiffHeadline& headline) {
  j.Key("headline");
  j.BeginObject();
  j.Key("sentence");
  j.String(headline.sentence);
  j.Key("what");
  j.String(HeadlineWhat(headline.what));
  j.Key("name");
  j.StringOrNull(headline.name);
  j.Key("ms_per_step");
  if (headline.what == analysis::DiffHeadline::What::kNothing) {
    j.Null();
  } else {
    WriteChange(j, headline.ns_per_step, /*ms=*/true);
  }
  j.Key("count_per_step");
  if (headline.milli_count_per_step.a < 0) {
    j.Null();
  } else {
    j.BeginObject();
    j.Key("a");
    j.Double(static_cast<double>(headline.milli_count_per_step.a) / 1000.0, 3);
    j.Key("b");
    j.Double(static_cast<double>(headline.milli_count_per_step.b) / 1000.0, 3);
    j.EndObject();
  }
  j.EndObject();
}

// "pairing": how hosts of A were paired with hosts of B.
void WritePairing(JsonOut& j, const analysis::Diff& d) {
  j.Key("pairing");
  j.BeginObject();
  j.Key("method");
  j.StringOrNull(analysis::HostPairingName(d.pairing));
  j.Key("note");
  j.StringOrNull(d.pairing_note);
  j.EndObject();
}

// "pod": steps, step time, hosts and categories of the whole pod, A against B.
void WritePod(JsonOut& j, const analysis::Diff& d) {
  j.Key("pod");
  j.BeginObject();
  j.Key("steps");
  WriteChange(j, d.pod_steps, /*ms=*/false);
  j.Key("step_time_ms");
  WriteChange(j, d.pod_step_time_ns, /*ms=*/true);
  j.Key("hosts");
  WriteChange(j, d.pod_hosts, /*ms=*/false);
  WriteCategoryChanges(j, d.pod_categories);
  j.EndObject();
}

// "straggler" and "consistently_slow".
void WriteStragglers(JsonOut& j, const analysis::Diff& d) {
  j.Key("straggler");
  j.BeginObject();
  j.Key("a");
  WriteStraggler(j, d.straggler_a);
  j.Key("b");
  WriteStraggler(j, d.straggler_b);
  j.Key("changed");
  j.Bool(d.straggler_changed);
  j.Key("cause_changed");
  j.Bool(d.cause_changed);
  j.EndObject();
  j.Key("consistently_slow");
  j.BeginObject();
  j.Key("a");
  WriteStrings(j, d.consistently_slow_a);
  j.Key("b");
  WriteStrings(j, d.consistently_slow_b);
  j.EndObject();
}

// "stands_out": hosts whose category stood out, in A, in B or both.
void WriteStandsOut(JsonOut& j, const std::vector<analysis::OutlierDiff>& outliers) {
  j.Key("stands_out");
  j.BeginArray();
  for (const analysis::OutlierDiff& o : outliers) {
    j.BeginObject();
    j.Key("host");
    j.String(o.host);
    j.Key("category");
    j.String(analysis::CategoryName(o.category));
    j.Key("in_a");
    j.Bool(o.in_a);
    j.Key("in_b");
    j.Bool(o.in_b);
    j.Key("median_excess_ms");
    WriteChange(j, o.median_excess_ns, /*ms=*/true, o.in_a, o.in_b);
    j.EndObject();
  }
  j.EndArray();
}

// One host of "hosts", A against B.
void WriteHostDiff(JsonOut& j, const analysis::HostDiff& h) {
  j.BeginObject();
  j.Key("host");
  j.String(h.host);
  j.Key("host_a");
  j.StringOrNull(h.host_a);
  j.Key("host_b");
  j.StringOrNull(h.host_b);
  j.Key("pairing");
  j.StringOrNull(analysis::HostPairingName(h.pairing));
  j.Key("rank");
  j.BeginObject();
  j.Key("a");
  if (h.in_a && h.rank_a >= 0) {
    j.Int(h.rank_a);
  } else {
    j.Null();
  }
  j.Key("b");
  if (h.in_b && h.rank_b >= 0) {
    j.Int(h.rank_b);
  } else {
    j.Null();
  }
  j.EndObject();
  j.Key("in_a");
  j.Bool(h.in_a);
  j.Key("in_b");
  j.Bool(h.in_b);
  j.Key("steps");
  WriteChange(j, h.steps, /*ms=*/false, h.in_a, h.in_b);
  j.Key("step_time_ms");
  WriteChange(j, h.step_time_ns, /*ms=*/true, h.in_a, h.in_b);
  WriteCategoryChanges(j, h.categories, h.in_a, h.in_b);
  j.Key("straggler_steps");
  WriteChange(j, h.straggler_steps, /*ms=*/false, h.in_a, h.in_b);
  j.Key("cause");
  j.BeginObject();
  j.Key("a");
  j.StringOrNull(h.in_a && h.straggler_steps.a > 0 ? analysis::CategoryName(h.cause_a) : "");
  j.Key("b");
  j.StringOrNull(h.in_b && h.straggler_steps.b > 0 ? analysis::CategoryName(h.cause_b) : "");
  j.EndObject();
  j.EndObject();
}

// "transfers": memcpy and memset kinds, per step and in all.
void WriteTransfers(JsonOut& j, const std::vector<analysis::TransferDiff>& transfers) {
  j.Key("transfers");
  j.BeginArray();
  for (const analysis::TransferDiff& t : transfers) {
    j.BeginObject();
    j.Key("kind");
    j.String(analysis::TransferKindName(t.kind));
    j.Key("ms_per_step");
    WriteChange(j, t.ns_per_step, /*ms=*/true);
    j.Key("total_ms");
    WriteChange(j, t.total_ns, /*ms=*/true);
    j.Key("occurrences");
    WriteChange(j, t.occurrences, /*ms=*/false);
    j.EndObject();
  }
  j.EndArray();
}

}  // namespace

std::string DiffCsv(const analysis::Diff& d) {
  std::string out = "kind,host,name,a,b,delta,pct\n";
  if (d.headline.what != analysis::DiffHeadline::What::kNothing) {
    AppendCsvChange(&out, "headline", "", d.headline.name, d.headline.ns_per_step, /*ms=*/true);
  }
  AppendCsvRow(&out, "pairing", "", "method", analysis::HostPairingName(d.pairing), "", "", "");
  AppendCsvChange(&out, "pod", "", "steps", d.pod_steps, /*ms=*/false);
  AppendCsvChange(&out, "pod", "", "step_time_ms", d.pod_step_time_ns, /*ms=*/true);
  AppendCsvChange(&out, "pod", "", "hosts", d.pod_hosts, /*ms=*/false);
  AppendCsvCategoryChanges(&out, "pod", "", d.pod_categories);
  AppendCsvRow(&out, "straggler", "", "host", d.straggler_a.host, d.straggler_b.host, "", "");
  AppendCsvRow(&out, "straggler", "", "cause",
               d.straggler_a.host.empty() ? "" : analysis::CategoryName(d.straggler_a.cause),
               d.straggler_b.host.empty() ? "" : analysis::CategoryName(d.straggler_b.cause), "",
               "");
  for (const analysis::OutlierDiff& o : d.outliers) {
    AppendCsvChange(&out, "stands_out", o.host,
                    absl::StrCat(analysis::CategoryName(o.category), "_excess_ms"),
                    o.median_excess_ns, /*ms=*/true, o.in_a, o.in_b);
  }
  for (const analysis::HostDiff& h : d.hosts) {
    AppendCsvChange(&out, "host", h.host, "steps", h.steps, /*ms=*/false, h.in_a, h.in_b);
    AppendCsvChange(&out, "host", h.host, "step_time_ms", h.step_time_ns, /*ms=*/true, h.in_a,
                    h.in_b);
    AppendCsvCategoryChanges(&out, "host", h.host, h.categories, h.in_a, h.in_b);
    AppendCsvChange(&out, "host", h.host, "straggler_steps", h.straggler_steps, /*ms=*/false,
                    h.in_a, h.in_b);
  }
  for (const analysis::NameDiff& k : d.kernels) {
    AppendCsvChange(&out, k.transfer.has_value() ? "transfer_row" : "kernel", "", k.name,
                    k.ns_per_step, /*ms=*/true);
  }
  for (const analysis::NameDiff& o : d.ops) {
    AppendCsvChange(&out, "op", "", o.name, o.ns_per_step, /*ms=*/true);
  }
  for (const analysis::TransferDiff& t : d.transfers) {
    AppendCsvChange(&out, "transfer", "", analysis::TransferKindName(t.kind), t.ns_per_step,
                    /*ms=*/true);
    AppendCsvChange(&out, "transfer", "",
                    absl::StrCat(analysis::TransferKindName(t.kind), " count"), t.occurrences,
                    /*ms=*/false);
  }
  return out;
}

// The hosts' mean step in A and in B, stacked by category, one pair of bars per host (inline
// SVG, drawn here: the page holds no script). As wide as the page (a viewBox scaled to 100 %);
// at most kMaxChartHosts hosts, the ones whose step changed most, in the table's order.
void AppendHostChart(std::string* out, const analysis::Diff& d) {
  constexpr size_t kMaxChartHosts = 32;
  static constexpr const char* kColors[analysis::kNumCategories] = {
      "#4e79a7", "#f28e2b", "#edc948", "#e15759", "#b07aa1", "#59a14f", "#c9c3bf"};
  std::vector<const analysis::HostDiff*> hosts;
  hosts.reserve(d.hosts.size());
  for (const analysis::HostDiff& h : d.hosts) hosts.push_back(&h);
  if (hosts.size() > kMaxChartHosts) {
    std::stable_sort(hosts.begin(), hosts.end(), [](const auto* x, const auto* y) {
      return std::abs(x->step_time_ns.delta()) > std::abs(y->step_time_ns.delta());
    });
    hosts.resize(kMaxChartHosts);
  }
  if (hosts.empty()) return;
  int64_t max_ns = 1;
  for (const analysis::HostDiff* h : hosts) {
    max_ns = std::max({max_ns, h->step_time_ns.a, h->step_time_ns.b});
  }
  std::vector<std::string> names;
  names.reserve(hosts.size());
  for (const analysis::HostDiff* h : hosts) names.push_back(h->host);
  const std::vector<std::string> shown = DistinctShortNames(names, 24);
  constexpr int kWidth = 1200;
  constexpr int kLabel = 200;
  constexpr int kValue = 130;
  constexpr int kBar = 14;
  constexpr int kRow = 2 * kBar + 12;
  const int height = 34 + static_cast<int>(hosts.size()) * kRow;
  const double plot = kWidth - kLabel - kValue;
  absl::StrAppend(out,
                  "<h2>Step time per host, A and B, by category</h2>\n<div class=\"chart\">"
                  "<div class=\"legend\">");
  for (int c = 0; c < analysis::kNumCategories; ++c) {
    absl::StrAppend(out, "<span><span class=\"sw\" style=\"background:", kColors[c], "\"></span>",
                    analysis::CategoryName(static_cast<Category>(c)), "</span>");
  }
  absl::StrAppend(out, "<span>upper bar: A, lower bar: B (mean per step)</span></div>\n",
                  "<svg class=\"diff-chart\" role=\"img\" viewBox=\"0 0 ", kWidth, " ", height,
                  "\" width=\"100%\" preserveAspectRatio=\"xMinYMin meet\">"
                  "<title>Each host's mean step in A and B, stacked by category</title>\n");
  for (size_t i = 0; i < hosts.size(); ++i) {
    const analysis::HostDiff& h = *hosts[i];
    const int y = 8 + static_cast<int>(i) * kRow;
    absl::StrAppend(out, "<text x=\"", kLabel - 8, "\" y=\"", y + kBar + 4,
                    "\" text-anchor=\"end\"><title>");
    Html(out, h.host);
    out->append("</title>");
    Html(out, shown[i]);
    out->append("</text>\n");
    for (int side = 0; side < 2; ++side) {
      const bool present = side == 0 ? h.in_a : h.in_b;
      const int by = y + side * (kBar + 2);
      double x = kLabel;
      if (present) {
        for (int c = 0; c < analysis::kNumCategories; ++c) {
          const int64_t v = side == 0 ? h.categories[static_cast<size_t>(c)].a
                                      : h.categories[static_cast<size_t>(c)].b;
          if (v <= 0) continue;
          const double w = plot * static_cast<double>(v) / static_cast<double>(max_ns);
          absl::StrAppendFormat(out,
                                "<rect class=\"seg\" x=\"%.1f\" y=\"%d\" width=\"%.1f\" "
                                "height=\"%d\" fill=\"%s\"><title>",
                                x, by, w, kBar, kColors[c]);
          Html(out, absl::StrCat(h.host, side == 0 ? ", A: " : ", B: ",
                                 analysis::CategoryName(static_cast<Category>(c)), " ", MsCell(v)));
          out->append("</title></rect>");
          x += w;
        }
      }
      absl::StrAppendFormat(out, "<text class=\"value\" x=\"%.1f\" y=\"%d\">", x + 6,
                            by + kBar - 3);
      Html(out, absl::StrCat(side == 0 ? "A " : "B ",
                             present ? MsCell(side == 0 ? h.step_time_ns.a : h.step_time_ns.b)
                                     : std::string("not in this side")));
      out->append("</text>\n");
    }
  }
  out->append("</svg></div>\n");
}

std::string DiffHtml(const analysis::Diff& d, const DiffContext& context) {
  std::string out =
      "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
      "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; "
      "style-src 'unsafe-inline'; img-src data:\">\n<meta name=\"viewport\" "
      "content=\"width=device-width, "
      "initial-scale=1\">\n<link rel=\"icon\" href=\"data:,\">\n<title>profctl diff</title>\n";
  AppendInlineStyle(&out, assets::kDiffCss);
  out += "</head><body>\n<h1>profctl diff</h1>\n<p class=\"meta\">A: ";
  Html(&out, context.a);
  out += "<br>B: ";
  Html(&out, context.b);
  out += "<br>Changes are B - A, per step; % of A.</p>\n<div id=\"answer\">\n<p><strong>";
  Html(&out, d.headline.sentence);
  out += "</strong></p>\n<p>Hosts: ";
  Html(&out, PairingText(d));
  out += "</p>\n<p>Pod: ";
  absl::StrAppend(&out, d.pod_steps.a, " &rarr; ", d.pod_steps.b, " steps; step time ",
                  FormatMs(d.pod_step_time_ns.a), " &rarr; ", FormatMs(d.pod_step_time_ns.b),
                  " ms (", SignedMs(d.pod_step_time_ns.delta()), " ms, ");
  Html(&out, Pct(d.pod_step_time_ns));
  out += ")</p>\n<p>Straggler: ";
  Html(&out, StragglerText(d.straggler_a, 200));
  out += " &rarr; ";
  Html(&out, StragglerText(d.straggler_b, 200));
  if (d.straggler_changed || d.cause_changed) {
    absl::StrAppend(&out, " <span class=\"changed\">",
                    d.straggler_changed ? "straggler changed" : "cause changed", "</span>");
  }
  out += "</p>\n";
  if (!d.consistently_slow_a.empty() || !d.consistently_slow_b.empty()) {
    out += "<p>Consistently slow: ";
    Html(&out, d.consistently_slow_a.empty() ? "none" : absl::StrJoin(d.consistently_slow_a, ", "));
    out += " &rarr; ";
    Html(&out, d.consistently_slow_b.empty() ? "none" : absl::StrJoin(d.consistently_slow_b, ", "));
    out += "</p>\n";
  }
  for (const analysis::OutlierDiff& o : d.outliers) {
    out += "<p>Stands out: ";
    Html(&out, OutlierText(o, 200));
    out += "</p>\n";
  }
  out += "</div>\n";
  AppendHostChart(&out, d);
  out +=
      "<h2>Hosts (mean per step)</h2>\n<div class=\"table-wrap\"><table><thead><tr>"
      "<th>host</th><th class=\"num\">steps A</th><th class=\"num\">steps B</th>"
      "<th class=\"num\">step A</th><th class=\"num\">step B</th>"
      "<th class=\"num\">change</th><th class=\"num\">%</th>"
      "<th class=\"num\">straggler steps</th>";
  for (int c = 0; c < analysis::kNumCategories; ++c) {
    absl::StrAppend(&out, "<th class=\"num\">", analysis::CategoryName(static_cast<Category>(c)),
                    "</th>");
  }
  out += "</tr></thead><tbody>\n";
  std::vector<std::string> hosts;
  hosts.reserve(d.hosts.size());
  for (const analysis::HostDiff& h : d.hosts) hosts.push_back(h.host);
  const std::vector<std::string> shown_hosts = DistinctShortNames(hosts, kPageNameRoom);
  for (size_t i = 0; i < d.hosts.size(); ++i) {
    const analysis::HostDiff& h = d.hosts[i];
    out += "<tr>";
    NameCell(&out, h.host, shown_hosts[i]);
    const bool both = h.in_a && h.in_b;
    NumCell(&out, h.in_a ? absl::StrCat(h.steps.a) : "-");
    NumCell(&out, h.in_b ? absl::StrCat(h.steps.b) : "-");
    NumCell(&out, h.in_a ? MsCell(h.step_time_ns.a) : "-");
    NumCell(&out, h.in_b ? MsCell(h.step_time_ns.b) : "-");
    if (both) {
      NumCell(&out, SignedMsCell(h.step_time_ns.delta()), h.step_time_ns.delta());
      NumCell(&out, PctCell(h.step_time_ns));
      NumCell(&out, absl::StrCat(h.straggler_steps.a, " \u2192 ", h.straggler_steps.b));
      for (const Change& c : h.categories) {
        NumCell(&out, SignedMsCell(c.delta()), c.delta());
      }
    } else {
      absl::StrAppend(&out, "<td colspan=\"", 3 + analysis::kNumCategories,
                      "\" class=\"note\">only in ", h.in_a ? "A" : "B", "</td>");
    }
    out += "</tr>\n";
  }
  out += "</tbody></table></div>\n";
  if (!d.has_tools) {
    out +=
        "<p class=\"note\">Kernels and ops: not compared (kernel_stats/op_stats missing on a "
        "side).</p>\n";
  } else {
    AppendHtmlNames(&out, "Kernels whose time changed most", d.kernels);
    AppendHtmlNames(&out, "Ops whose time changed most", d.ops);
  }
  out += "</body></html>\n";
  return out;
}

std::string DiffJson(const analysis::Diff& d, const DiffContext& context) {
  JsonOut j(/*pretty_depth=*/2);
  j.BeginObject();
  j.Key("schema_version");
  j.Int(analysis::Diff::kSchemaVersion);
  j.Key("producer");
  j.String("profctl diff");
  j.Key("a");
  j.String(context.a);
  j.Key("b");
  j.String(context.b);
  WriteHeadline(j, d.headline);
  WritePairing(j, d);
  WritePod(j, d);
  WriteStragglers(j, d);
  WriteStandsOut(j, d.outliers);
  j.Key("hosts");
  j.BeginArray();
  for (const analysis::HostDiff& h : d.hosts) WriteHostDiff(j, h);
  j.EndArray();
  j.Key("has_tools");
  j.Bool(d.has_tools);
  j.Key("kernels");
  WriteNames(j, d.kernels, /*ops=*/false);
  j.Key("ops");
  WriteNames(j, d.ops, /*ops=*/true);
  WriteTransfers(j, d.transfers);
  j.EndObject();
  return j.Take();
}

std::string FormatDiffTable(const analysis::Diff& d, const DiffContext& context,
                            const DiffTableOptions& options) {
  const int width = options.max_name_width;
  std::string out = absl::StrCat("changed most: ", DiffPrintable(d.headline.sentence, 400),
                                 "\nprofctl diff\n  A: ", DiffPrintable(context.a, 200),
                                 "\n  B: ", DiffPrintable(context.b, 200), "\n");
  absl::StrAppend(&out, "hosts: ", d.pod_hosts.a, " -> ", d.pod_hosts.b, ", ",
                  DiffPrintable(PairingText(d), 400), "\n");
  absl::StrAppend(&out, "pod: ", d.pod_steps.a, " -> ", d.pod_steps.b, " steps; step time ",
                  FormatMs(d.pod_step_time_ns.a), " -> ", FormatMs(d.pod_step_time_ns.b), " ms (",
                  SignedMs(d.pod_step_time_ns.delta()), " ms, ", Pct(d.pod_step_time_ns), ")\n");
  absl::StrAppend(&out, "straggler: ", StragglerText(d.straggler_a, width), " -> ",
                  StragglerText(d.straggler_b, width),
                  d.straggler_changed ? "  [straggler changed]"
                  : d.cause_changed   ? "  [cause changed]"
                                      : "",
                  "\n");
  if (!d.consistently_slow_a.empty() || !d.consistently_slow_b.empty()) {
    absl::StrAppend(
        &out, "consistently slow: ",
        d.consistently_slow_a.empty() ? "none" : absl::StrJoin(d.consistently_slow_a, ", "), " -> ",
        d.consistently_slow_b.empty() ? "none" : absl::StrJoin(d.consistently_slow_b, ", "), "\n");
  }
  {
    // The pod's categories on the average host, those with time on a side.
    std::vector<std::string> cells;
    for (int c = 0; c < analysis::kNumCategories; ++c) {
      const Change& ch = d.pod_categories[static_cast<size_t>(c)];
      if (ch.a == 0 && ch.b == 0) continue;
      cells.push_back(absl::StrCat(analysis::CategoryName(static_cast<Category>(c)), " ",
                                   FormatMs(ch.a), " -> ", FormatMs(ch.b), " (",
                                   SignedMs(ch.delta()), ")"));
    }
    if (!cells.empty()) {
      absl::StrAppend(&out, "pod, average host per step (ms): ", absl::StrJoin(cells, "; "), "\n");
    }
  }
  if (!d.outliers.empty()) {
    out += "stands out (median excess per step over the other hosts):\n";
    for (const analysis::OutlierDiff& o : d.outliers) {
      absl::StrAppend(&out, "  ", OutlierText(o, width), "\n");
    }
  }

  int host_width = 4;
  for (const analysis::HostDiff& h : d.hosts) {
    host_width = std::max(host_width, static_cast<int>(DiffPrintable(h.host, width).size()));
  }
  // The categories with time on some host and side (the others say nothing).
  std::vector<size_t> shown;
  for (size_t c = 0; c < analysis::kNumCategories; ++c) {
    for (const analysis::HostDiff& h : d.hosts) {
      if (h.in_a && h.in_b && (h.categories[c].a != 0 || h.categories[c].b != 0)) {
        shown.push_back(c);
        break;
      }
    }
  }
  absl::StrAppend(&out, "\nper host, mean per step (ms; category cells: change, % of A):\n");
  absl::StrAppendFormat(&out, "  %-*s %11s %10s %10s %10s %8s %10s", host_width, "HOST",
                        "STEPS A->B", "STEP A", "STEP B", "DELTA", "%", "STRAGGLER");
  for (const size_t c : shown) {
    absl::StrAppendFormat(&out, " %16s", analysis::CategoryName(static_cast<Category>(c)));
  }
  out += "\n";
  std::vector<std::string> one_side;
  for (const analysis::HostDiff& h : d.hosts) {
    const std::string name = DiffPrintable(h.host, width);
    if (!(h.in_a && h.in_b)) {
      const bool a = h.in_a;
      one_side.push_back(absl::StrFormat("  %-*s only in %s: %d steps, step %s ms", host_width,
                                         name, a ? "A" : "B", a ? h.steps.a : h.steps.b,
                                         FormatMs(a ? h.step_time_ns.a : h.step_time_ns.b)));
      continue;
    }
    absl::StrAppendFormat(&out, "  %-*s %11s %10s %10s %10s %8s %10s", host_width, name,
                          absl::StrCat(h.steps.a, "->", h.steps.b), FormatMs(h.step_time_ns.a),
                          FormatMs(h.step_time_ns.b), SignedMs(h.step_time_ns.delta()),
                          Pct(h.step_time_ns),
                          absl::StrCat(h.straggler_steps.a, "->", h.straggler_steps.b));
    for (const size_t c : shown) {
      const Change& ch = h.categories[c];
      absl::StrAppendFormat(
          &out, " %16s",
          ch.delta() == 0 ? "0.000" : absl::StrCat(SignedMs(ch.delta()), " ", Pct(ch)));
    }
    out += "\n";
  }
  for (const std::string& line : one_side) absl::StrAppend(&out, line, "\n");

  if (!d.has_tools) {
    out += "\nkernels and ops: not compared (kernel_stats/op_stats missing on a side)\n";
  } else {
    AppendNameTable(&out, "kernels, copies and memsets whose time changed most", d.kernels,
                    d.pod_steps, width, /*ops=*/false);
    AppendNameTable(&out, "ops whose time changed most", d.ops, d.pod_steps, width,
                    /*ops=*/true);
    if (!d.transfers.empty()) {
      out += "\ncopies and memsets (ms per step; count a step):\n";
      for (const analysis::TransferDiff& t : d.transfers) {
        absl::StrAppend(&out, "  ", analysis::TransferKindName(t.kind), ": ",
                        FormatMs(t.ns_per_step.a), " -> ", FormatMs(t.ns_per_step.b), " (",
                        SignedMs(t.ns_per_step.delta()), "); ",
                        PerStepCount(t.occurrences.a, d.pod_steps.a), " -> ",
                        PerStepCount(t.occurrences.b, d.pod_steps.b), "\n");
      }
    }
  }
  return out;
}

}  // namespace profctl::report
