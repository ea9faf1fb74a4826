#include "report/html_report.h"

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "common/version.h"
#include "report/html_escape.h"
#include "report/html_tool_tabs.h"
#include "report/json_out.h"
#include "report/report_assets.h"

namespace profctl::report {
namespace {

// Before the data: the page's frame, styles, and the error catcher (its own script, so that even a
// script that fails to parse is reported in #errors).
constexpr char kHead[] = R"html(<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data:">
<meta name="viewport" content="width=device-width, initial-scale=1">
<link rel="icon" href="data:,">
)html";

// After the style and the head's scripts (the error catcher runs first, in its own element, so
// that even a script that fails to parse is reported in #errors; then the shared helpers): the
// page's frame, which the scripts fill.
constexpr char kBody[] = R"html(</head>
<body>
<div id="errors" hidden></div>
<header>
<h1>Pod step breakdown</h1>
<div class="meta" id="meta"></div>
<p id="snapshot" hidden></p>
<noscript><p>This report draws with JavaScript; the same data is in pod_step_breakdown.json.</p></noscript>
</header>
<section id="answer"></section>
<section>
<h2>Where each host's step went</h2>
<div class="controls">
<button type="button" id="step-prev" aria-label="previous step">&#9664;</button>
<input type="range" id="step-slider" min="0" max="0" value="0" aria-label="step">
<button type="button" id="step-next" aria-label="next step">&#9654;</button>
<span id="step-label"></span>
</div>
<div class="legend" id="category-legend"></div>
<div class="chart" id="bars"></div>
<div id="step-caption"></div>
<p class="note" id="sample-note" hidden></p>
</section>
<section>
<h2>Step time over steps, by category</h2>
<p class="note">The mean host's step, stacked by category in every step (a bar is the mean of a
run of steps when there are more steps than room); the red tick marks the steps whose straggler is
named.</p>
<div class="legend" id="stack-legend"></div>
<div class="chart" id="step-stack"></div>
</section>
<section>
<h2>Pod view: every host over every step</h2>
<p class="note">One row per host, one column per step (or run of steps): the darker, the longer the
host was busy (neither in collectives nor idle) compared with the other hosts in that step. The
straggler, which the others wait for, is usually the darkest.</p>
<div class="chart" id="pod-view"></div>
</section>
<section>
<h2>Step time over steps, per host</h2>
<p class="note">In synchronous data parallelism every host's step lasts about as long as the
straggler's (the others wait in the collective): pick a category to see where the hosts differ.</p>
<div class="controls"><label>show <select id="line-metric"></select></label></div>
<div class="legend" id="host-legend"></div>
<div class="chart" id="lines"></div>
</section>
<section>
<h2>Stragglers</h2>
<p class="note">The straggler is the host the others wait for in the collective: it spends the
least time in collectives. Its cause is its category furthest above the median host's. Click a
row to show that step above.</p>
<div class="table-wrap"><table id="stragglers"></table></div>
</section>
<section>
<h2>Hosts</h2>
<p class="note">Mean over steps, in ms. Files are relative to this report.</p>
<div class="table-wrap"><table id="hosts"></table></div>
</section>
<section>
<h2>Warnings</h2>
<ul id="warnings"></ul>
</section>
<section>
<h2>Files</h2>
<ul id="files"></ul>
</section>
<footer id="footer"></footer>
)html";

// The series over every step (html_report.h): points of `per` consecutive steps each, with the
// pod's step time (mean and max), its mean host's categories, the most frequent straggler, and
// each host's mean busy time: neither in collectives nor idle (null where the host has none of
// those steps).
std::string SeriesJson(const analysis::PodBreakdown& b) {
  const size_t n = b.steps.size();
  const size_t per = std::max<size_t>(1, (n + kReportMaxSeriesPoints - 1) / kReportMaxSeriesPoints);
  std::map<std::string, size_t> host_at;
  for (size_t h = 0; h < b.hosts.size(); ++h) host_at.emplace(b.hosts[h].host, h);
  JsonOut j(/*pretty_depth=*/2);
  j.BeginObject();
  j.Key("steps_total");
  j.Int(static_cast<int64_t>(n));
  j.Key("per_point");
  j.Int(static_cast<int64_t>(per));
  j.Key("hosts");
  j.BeginArray();
  for (const analysis::HostReport& h : b.hosts) j.String(h.host);
  j.EndArray();
  std::vector<std::vector<std::pair<int64_t, int64_t>>> busy(b.hosts.size());  // sum ns, count
  j.Key("points");
  j.BeginArray();
  for (size_t at = 0; at < n; at += per) {
    const size_t end = std::min(n, at + per);
    int64_t pod_sum = 0;
    int64_t pod_max = 0;
    std::array<int64_t, analysis::kNumCategories> cats{};
    int64_t host_steps = 0;
    std::map<std::string, int64_t> stragglers;
    for (auto& v : busy) v.emplace_back(0, 0);
    for (size_t i = at; i < end; ++i) {
      const analysis::PodStep& s = b.steps[i];
      pod_sum += s.pod_step_time_ns;
      pod_max = std::max(pod_max, s.pod_step_time_ns);
      if (!s.straggler.empty()) ++stragglers[s.straggler];
      for (const analysis::PodHostStep& h : s.hosts) {
        for (int c = 0; c < analysis::kNumCategories; ++c) cats[c] += h.categories.ns[c];
        ++host_steps;
        if (auto it = host_at.find(h.host); it != host_at.end()) {
          busy[it->second].back().first +=
              h.categories.outside_collectives() - h.categories[analysis::Category::kIdle];
          ++busy[it->second].back().second;
        }
      }
    }
    const int64_t count = static_cast<int64_t>(end - at);
    j.BeginObject();
    j.Key("first");
    j.Int(b.steps[at].step);
    j.Key("last");
    j.Int(b.steps[end - 1].step);
    j.Key("pod_ms");
    j.Ms(pod_sum / count);
    j.Key("pod_max_ms");
    j.Ms(pod_max);
    j.Key("categories_ms");
    j.BeginArray();
    for (int c = 0; c < analysis::kNumCategories; ++c)
      j.Ms(host_steps > 0 ? cats[c] / host_steps : 0);
    j.EndArray();
    j.Key("straggler");
    const auto top =
        std::max_element(stragglers.begin(), stragglers.end(),
                         [](const auto& x, const auto& y) { return x.second < y.second; });
    j.StringOrNull(top == stragglers.end() ? "" : top->first);
    j.EndObject();
  }
  j.EndArray();
  j.Key("busy_ms");
  j.BeginArray();
  for (const auto& host : busy) {
    j.BeginArray();
    for (const auto& [sum, count] : host) {
      if (count == 0) {
        j.Null();
      } else {
        j.Ms(sum / count);
      }
    }
    j.EndArray();
  }
  j.EndArray();
  j.EndObject();
  return j.Take();
}

}  // namespace

std::vector<size_t> ReportStepIndices(const analysis::PodBreakdown& breakdown) {
  const size_t n = breakdown.steps.size();
  const size_t hosts = std::max<size_t>(1, breakdown.hosts.size());
  const size_t limit =
      std::clamp(kReportMaxHostSteps / hosts, std::min(kReportMinSampledSteps, kReportMaxSteps),
                 kReportMaxSteps);
  std::vector<size_t> out;
  if (n <= limit) {
    out.resize(n);
    for (size_t i = 0; i < n; ++i) out[i] = i;
    return out;
  }
  // The slowest quarter (by pod step time, earlier first on ties), then evenly spaced steps with
  // the first and the last; where those coincide, the next slowest until the limit.
  std::vector<size_t> by_time(n);
  for (size_t i = 0; i < n; ++i) by_time[i] = i;
  std::partial_sort(by_time.begin(), by_time.begin() + static_cast<ptrdiff_t>(limit), by_time.end(),
                    [&](size_t a, size_t c) {
                      const int64_t ta = breakdown.steps[a].pod_step_time_ns;
                      const int64_t tc = breakdown.steps[c].pod_step_time_ns;
                      return ta != tc ? ta > tc : a < c;
                    });
  const size_t slowest = limit / 4;
  std::set<size_t> chosen(by_time.begin(), by_time.begin() + static_cast<ptrdiff_t>(slowest));
  const size_t even = limit - slowest;
  for (size_t k = 0; k < even; ++k) chosen.insert(k * (n - 1) / (even - 1));
  for (size_t k = slowest; chosen.size() < limit && k < limit; ++k) chosen.insert(by_time[k]);
  out.assign(chosen.begin(), chosen.end());
  return out;
}

namespace {

// The hang verdict's section (id "hang"), above the answer, unless there is no hang: its sentence,
// its evidence, and (hung, all waiting) where each rank stood; "cannot tell" shows what was
// missing. Drawn here, without the script; every name is escaped.
std::string HangSection(const analysis::PodBreakdown& breakdown) {
  // A hang, or a judged "cannot tell" (what was missing); neither "none" nor "not judged".
  const analysis::HangJudgement& hang = breakdown.verdict.hang;
  if (hang.finding == analysis::Finding::kNone || !hang.report.has_value()) return "";
  const analysis::HangReport& h = *hang.report;
  std::string out = "<section id=\"hang\">\n<h2>Hang</h2>\n<p class=\"straggler\"><strong>";
  AppendHtmlEscaped(&out, h.summary);
  out.append("</strong></p>\n<p>");
  AppendHtmlEscaped(&out, analysis::FormatHangEvidence(h));
  out.append("</p>\n");
  // "Cannot tell" judges no rank: its sentence and evidence alone.
  if (h.verdict == analysis::HangVerdictKind::kCannotTell) {
    out.append("</section>\n");
    return out;
  }
  out.append(
      "<table>\n<thead><tr><th class=\"num\">rank</th><th>host</th><th>role</th>"
      "<th>last entered</th><th>last completed</th></tr></thead>\n<tbody>\n");
  const auto cell = [&out](const std::optional<analysis::CollectiveAt>& c) {
    out.append("<td>");
    if (c.has_value()) {
      AppendHtmlEscaped(&out, absl::StrCat(analysis::FormatCollectiveId(c->id), " at ",
                                           analysis::FormatUtcTime(c->time_ns)));
    } else {
      out.append("none");
    }
    out.append("</td>");
  };
  // The bound of the page: the ranks blamed, unknown and waiting are all listed up to this many.
  constexpr size_t kMaxRows = 64;
  size_t rows = 0;
  for (const analysis::HangRank& r : h.ranks) {
    if (r.role == analysis::HangRank::Role::kOther || rows++ >= kMaxRows) continue;
    absl::StrAppend(&out, "<tr><td class=\"num\">", r.rank, "</td><td>");
    AppendHtmlEscaped(&out, r.host);
    out.append("</td><td>");
    AppendHtmlEscaped(&out, r.role == analysis::HangRank::Role::kNeverEntered ? "never entered"
                            : r.role == analysis::HangRank::Role::kWaiting    ? "waits"
                            : r.has_trace ? "no collective in its trace"
                                          : "no trace");
    out.append("</td>");
    cell(r.last_entered);
    cell(r.last_completed);
    out.append("</tr>\n");
  }
  out.append("</tbody>\n</table>\n");
  if (rows > kMaxRows) {
    absl::StrAppend(&out, "<p>", rows - kMaxRows, " more ranks in ", kBreakdownJsonFile,
                    " (\"hang\").</p>\n");
  }
  out.append("</section>\n");
  return out;
}

}  // namespace

std::string HtmlReport(const analysis::PodBreakdown& breakdown, const BreakdownContext& context) {
  return HtmlReport(breakdown, context, {});
}

std::string HtmlReport(const analysis::PodBreakdown& breakdown, const BreakdownContext& context,
                       absl::Span<const std::string> tool_jsons) {
  const std::string json = BreakdownJsonOfSteps(breakdown, context, ReportStepIndices(breakdown));
  const std::string series = SeriesJson(breakdown);
  std::string out;
  out.reserve(json.size() + series.size() + sizeof(kHead) + sizeof(kBody) +
              assets::kReportCss.size() + assets::kErrorCatcherJs.size() +
              assets::kFormatJs.size() + assets::kBreakdownJs.size() + 256);
  out.append(kHead);
  out.append("<title>");
  AppendHtmlEscaped(&out, context.session.empty()
                              ? std::string("profctl pod step breakdown")
                              : absl::StrCat("profctl pod step breakdown: ", context.session));
  out.append("</title>\n<meta name=\"generator\" content=\"profctl ");
  AppendHtmlEscaped(&out, kVersion);
  out.append("\">\n");
  AppendInlineStyle(&out, assets::kReportCss);
  AppendInlineScript(&out, assets::kErrorCatcherJs);
  AppendInlineScript(&out, assets::kFormatJs);
  // The hang section goes above the answer.
  const std::string_view frame = kBody;
  const size_t answer = frame.find("<section id=\"answer\">");
  out.append(frame.substr(0, answer));
  out.append(HangSection(breakdown));
  out.append(frame.substr(answer));
  out.append("<script type=\"application/json\" id=\"breakdown-data\">\n");
  AppendJsonForScript(&out, json);
  out.append("</script>\n<script type=\"application/json\" id=\"series-data\">\n");
  AppendJsonForScript(&out, series);
  // What the page says of itself beyond the breakdown: a snapshot's past.
  absl::StrAppend(&out, "</script>\n<script type=\"application/json\" id=\"page-data\">\n",
                  "{\"snapshot_past_ms\": ", std::max<int64_t>(0, context.snapshot_past_ms),
                  "}\n</script>\n");
  AppendToolTabs(&out, tool_jsons);
  AppendInlineScript(&out, assets::kBreakdownJs);
  out.append("</body>\n</html>\n");
  return out;
}

}  // namespace profctl::report
