#include "report/diff_writers.h"

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "analysis/breakdown.h"
#include "report/breakdown_writers.h"
#include "report/json_out.h"

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

void WriteNames(JsonOut& j, const std::vector<analysis::NameDiff>& names) {
  j.BeginArray();
  for (const analysis::NameDiff& n : names) {
    j.BeginObject();
    j.Key("name");
    j.String(n.name);
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

void WriteStrings(JsonOut& j, const std::vector<std::string>& v) {
  j.BeginArray();
  for (const std::string& s : v) j.String(s);
  j.EndArray();
}

// Control characters as '?', shortened in the middle beyond `max_width`.
std::string Printable(absl::string_view s, int max_width) {
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

// "+50.0%", "-" without a base.
std::string Pct(const Change& c) {
  const double p = c.pct();
  if (std::isnan(p)) return c.delta() == 0 ? "0.0%" : "new";
  return absl::StrFormat("%+.1f%%", p);
}

// "w1 (compute, 8 steps)" / "none".
std::string StragglerText(const analysis::StragglerSummary& s, int width) {
  if (s.host.empty()) return "none";
  return absl::StrCat(Printable(s.host, width), " (", analysis::CategoryName(s.cause), ", ",
                      s.steps, " steps)");
}

void AppendNameTable(std::string* out, absl::string_view title,
                     const std::vector<analysis::NameDiff>& names, int width) {
  if (names.empty()) {
    absl::StrAppend(out, "\n", title, ": no change\n");
    return;
  }
  int name_width = 4;
  for (const analysis::NameDiff& n : names) {
    name_width = std::max(name_width, static_cast<int>(Printable(n.name, width).size()));
  }
  absl::StrAppend(out, "\n", title, " (ms per step):\n");
  absl::StrAppendFormat(out, "  %-*s %10s %10s %10s %8s\n", name_width, "NAME", "A", "B", "DELTA",
                        "%");
  for (const analysis::NameDiff& n : names) {
    absl::StrAppendFormat(out, "  %-*s %10s %10s %10s %8s\n", name_width, Printable(n.name, width),
                          FormatMs(n.ns_per_step.a), FormatMs(n.ns_per_step.b),
                          SignedMs(n.ns_per_step.delta()), Pct(n.ns_per_step));
  }
}

}  // namespace

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
  j.Key("pod");
  j.BeginObject();
  j.Key("steps");
  WriteChange(j, d.pod_steps, /*ms=*/false);
  j.Key("step_time_ms");
  WriteChange(j, d.pod_step_time_ns, /*ms=*/true);
  j.EndObject();
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
  j.Key("hosts");
  j.BeginArray();
  for (const analysis::HostDiff& h : d.hosts) {
    j.BeginObject();
    j.Key("host");
    j.String(h.host);
    j.Key("in_a");
    j.Bool(h.in_a);
    j.Key("in_b");
    j.Bool(h.in_b);
    j.Key("steps");
    WriteChange(j, h.steps, /*ms=*/false, h.in_a, h.in_b);
    j.Key("step_time_ms");
    WriteChange(j, h.step_time_ns, /*ms=*/true, h.in_a, h.in_b);
    j.Key("categories_ms");
    j.BeginObject();
    for (int c = 0; c < analysis::kNumCategories; ++c) {
      j.Key(analysis::CategoryName(static_cast<Category>(c)));
      WriteChange(j, h.categories[static_cast<size_t>(c)], /*ms=*/true, h.in_a, h.in_b);
    }
    j.EndObject();
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
  j.EndArray();
  j.Key("has_tools");
  j.Bool(d.has_tools);
  j.Key("kernels");
  WriteNames(j, d.kernels);
  j.Key("ops");
  WriteNames(j, d.ops);
  j.EndObject();
  return j.Take();
}

std::string FormatDiffTable(const analysis::Diff& d, const DiffContext& context,
                            const DiffTableOptions& options) {
  const int width = options.max_name_width;
  std::string out = absl::StrCat("profctl diff\n  A: ", Printable(context.a, 200),
                                 "\n  B: ", Printable(context.b, 200), "\n");
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

  int host_width = 4;
  for (const analysis::HostDiff& h : d.hosts) {
    host_width = std::max(host_width, static_cast<int>(Printable(h.host, width).size()));
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
    const std::string name = Printable(h.host, width);
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
    AppendNameTable(&out, "kernels whose time changed most", d.kernels, width);
    AppendNameTable(&out, "ops whose time changed most", d.ops, width);
  }
  return out;
}

}  // namespace profctl::report
