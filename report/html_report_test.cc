#include "report/html_report.h"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <regex>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "common/file_util.h"
#include "gmock/gmock.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"
#include "report/breakdown_writers.h"
#include "report/report_assets.h"
#include "report/tool_writers.h"
#include "tests/status_matchers.h"
#include "tests/temp_dir.h"
#include "tests/test_time.h"

using ::profctl::testkit::IsOk;

namespace profctl::report {
namespace {

using analysis::Category;
using analysis::kNumCategories;
using analysis::PodBreakdown;
using analysis::PodHostStep;
using analysis::PodStep;
using google::protobuf::Struct;

using ::profctl::test_time::kMs;
using ::profctl::test_time::kUs;

// A 4-host, 6-step pod with `names`, judged by the analysis: host 1 straggles on compute, host 2
// waits for input.
PodBreakdown MakePod(const std::vector<std::string>& names, int num_steps,
                     const analysis::PodInputs& inputs = {}) {
  const int n = static_cast<int>(names.size());
  std::vector<analysis::HostSummary> hosts(static_cast<size_t>(n));
  for (int h = 0; h < n; ++h) {
    hosts[static_cast<size_t>(h)].host = names[h];
    for (int s = 0; s < num_steps; ++s) {
      analysis::HostStep st;
      st.step = 100 + s;
      st.start_ns = s * 130 * kMs;
      st.end_ns = st.start_ns + 120 * kMs + s * 250 * kUs + h * 11 * kUs + (h == 1 ? 345 : 0);
      auto& c = st.host;
      c[Category::kCompute] = (h == 1 ? 70 : 45) * kMs;
      c[Category::kOutput] = 2 * kMs;
      c[Category::kDeviceToDevice] = h == 3 ? 1 * kMs : 0;  // one host has no d2d segment
      c[Category::kInput] = h == 2 ? 25 * kMs : 1 * kMs;
      c[Category::kHost] = 3 * kMs;
      c[Category::kIdle] = 500 * kUs;
      int64_t rest = st.end_ns - st.start_ns;
      for (int k = 0; k < kNumCategories; ++k) rest -= c.ns[k];
      c[Category::kCollectives] = rest;
      hosts[static_cast<size_t>(h)].steps.push_back(st);
    }
  }
  PodBreakdown b = analysis::BuildPodBreakdown(hosts, inputs);
  b.warnings.push_back("2 partial steps dropped");
  return b;
}

BreakdownContext Context(const std::vector<std::string>& names) {
  BreakdownContext ctx;
  ctx.session = "demo_2026_11_22";
  for (const std::string& n : names) ctx.host_files[n] = {absl::StrCat(n, ".xplane.pb")};
  ctx.host_files[names[0]].push_back("javascript:alert(1)");
  ctx.session_files = {"pod.trace.json.gz", "session.json"};
  return ctx;
}

const std::vector<std::string>& Workers() {
  static const auto* const kNames =
      new std::vector<std::string>{"worker-0", "worker-1", "worker-2", "worker-3"};
  return *kNames;
}

// Hosts named to break out of every context the page has: the JSON script element, markup,
// attributes, and the script itself.
const std::vector<std::string>& HostileNames() {
  static const auto* const kNames = new std::vector<std::string>{
      "worker-0",
      "</script><script>document.body.setAttribute('data-pwned','1')</script>",
      "<img src=x onerror=\"document.body.setAttribute('data-pwned','2')\">",
      "w3'\"&amp;<!--",
  };
  return *kNames;
}

// Checks on a DOM of ~40 KB that print what was looked for, not the whole DOM.
#define EXPECT_TEXT(dom, needle) \
  EXPECT_TRUE(absl::StrContains(dom, needle)) << "missing: " << (needle)
#define EXPECT_NO_TEXT(dom, needle) \
  EXPECT_FALSE(absl::StrContains(dom, needle)) << "unexpected: " << (needle)

int Count(absl::string_view haystack, absl::string_view needle) {
  int n = 0;
  for (size_t at = haystack.find(needle); at != absl::string_view::npos;
       at = haystack.find(needle, at + needle.size())) {
    ++n;
  }
  return n;
}

// The text of <script type="application/json" id="breakdown-data">.
std::string EmbeddedJson(const std::string& html) {
  const std::string open = "<script type=\"application/json\" id=\"breakdown-data\">\n";
  const size_t begin = html.find(open);
  EXPECT_NE(begin, std::string::npos);
  if (begin == std::string::npos) return "";
  const size_t end = html.find("</script>", begin);
  return html.substr(begin + open.size(), end - begin - open.size());
}

// The CSS and JavaScript of report/assets/ are inlined whole, and none can close its element.
TEST(HtmlReportTest, InlinesItsAssetsWhichCannotCloseTheirElements) {
  const absl::string_view all[] = {assets::kReportCss,   assets::kErrorCatcherJs, assets::kFormatJs,
                                   assets::kBreakdownJs, assets::kToolsCss,       assets::kToolsJs,
                                   assets::kDiffCss};
  for (const absl::string_view a : all) {
    EXPECT_GT(a.size(), 100u);
    const std::string lower = absl::AsciiStrToLower(a);
    EXPECT_FALSE(absl::StrContains(lower, "</script")) << a.substr(0, 80);
    EXPECT_FALSE(absl::StrContains(lower, "</style")) << a.substr(0, 80);
  }
  const std::string html = HtmlReport(MakePod(Workers(), 2), Context(Workers()));
  for (const absl::string_view a :
       {assets::kReportCss, assets::kErrorCatcherJs, assets::kFormatJs, assets::kBreakdownJs}) {
    EXPECT_TRUE(absl::StrContains(html, a)) << a.substr(0, 80);
  }
  // The error catcher runs first: before the helpers and every other script.
  EXPECT_LT(html.find(std::string(assets::kErrorCatcherJs)),
            html.find(std::string(assets::kFormatJs)));
  EXPECT_LT(html.find(std::string(assets::kFormatJs)),
            html.find(std::string(assets::kBreakdownJs)));
}

// A snapshot's page says what past it covers; any other page says none.
TEST(HtmlReportTest, ASnapshotsPastIsInThePageData) {
  BreakdownContext ctx = Context(Workers());
  EXPECT_TEXT(HtmlReport(MakePod(Workers(), 2), ctx), "{\"snapshot_past_ms\": 0}");
  ctx.snapshot_past_ms = 30'000;
  EXPECT_TEXT(HtmlReport(MakePod(Workers(), 2), ctx), "{\"snapshot_past_ms\": 30000}");
}

TEST(HtmlReportTest, EmbedsExactlyTheJson) {
  const PodBreakdown b = MakePod(Workers(), 6);
  const BreakdownContext ctx = Context(Workers());
  const std::string html = HtmlReport(b, ctx);
  const std::string json = BreakdownJson(b, ctx);
  // Byte for byte (no host name here has '<', '>' or '&').
  EXPECT_EQ(EmbeddedJson(html), json);
  EXPECT_TEXT(html, "<title>profctl pod step breakdown: demo_2026_11_22</title>");
}

TEST(HtmlReportTest, HostileTextCannotLeaveItsContext) {
  const PodBreakdown b = MakePod(HostileNames(), 3);
  BreakdownContext ctx = Context(HostileNames());
  ctx.session = "<b>s</b>";
  const std::string html = HtmlReport(b, ctx);
  // Only the page's own six script elements (the error catcher, the helpers, three data
  // elements, the drawing); no markup from the trace.
  EXPECT_EQ(Count(absl::AsciiStrToLower(html), "<script"), 6);
  EXPECT_EQ(Count(html, "</script>"), 6);
  EXPECT_NO_TEXT(html, "<img");
  EXPECT_NO_TEXT(html, "<!--");
  EXPECT_NO_TEXT(html, "<b>s</b>");
  EXPECT_TEXT(html, "<title>profctl pod step breakdown: &lt;b&gt;s&lt;/b&gt;</title>");
  // The embedded JSON still parses to exactly what the file holds.
  Struct embedded;
  Struct file;
  ASSERT_THAT(google::protobuf::util::JsonStringToMessage(EmbeddedJson(html), &embedded), IsOk());
  ASSERT_THAT(google::protobuf::util::JsonStringToMessage(BreakdownJson(b, ctx), &file), IsOk());
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(embedded, file));
  EXPECT_EQ(absl::StrReplaceAll(EmbeddedJson(html),
                                {{"\\u003c", "<"}, {"\\u003e", ">"}, {"\\u0026", "&"}}),
            BreakdownJson(b, ctx));
}

TEST(HtmlReportTest, SelfContained) {
  const std::string html = HtmlReport(MakePod(Workers(), 2), Context(Workers()));
  // The only URL is the SVG namespace; nothing is fetched and the policy forbids fetching.
  EXPECT_EQ(Count(html, "http://") + Count(html, "https://"), 1);
  EXPECT_TEXT(html, "'http://www.w3.org/2000/svg'");
  EXPECT_TEXT(html, "content=\"default-src 'none'");
  EXPECT_NO_TEXT(html, " src=");
  EXPECT_NO_TEXT(html, "@import");
  EXPECT_NO_TEXT(html, "url(");
}

// --- Long sessions: the page's size bound (html_report.h) -------------------------------------

std::vector<std::string> ManyHosts(int n) {
  std::vector<std::string> names;
  for (int h = 0; h < n; ++h)
    names.push_back(absl::StrFormat("host-%04d.rack-17.pod-a.example.com", h));
  return names;
}

TEST(HtmlReportTest, PageStaysUnder3MbAt10000StepsAnd64Hosts) {
  const std::vector<std::string> names = ManyHosts(64);
  const PodBreakdown b = MakePod(names, 10'000);
  const std::string html = HtmlReport(b, Context(names));
  EXPECT_LT(html.size(), 3'000'000u);
  // Without the bound the page would hold the whole breakdown (the JSON file keeps it).
  const size_t whole = BreakdownJson(b, Context(names)).size();
  EXPECT_GT(whole, 5 * html.size());
  RecordProperty("html_bytes", static_cast<int>(html.size()));
  RecordProperty("breakdown_json_bytes", static_cast<int>(whole));
  // 100 steps in full (6,400 host-steps / 64 hosts), the series: 400 points of 25 steps.
  EXPECT_EQ(ReportStepIndices(b).size(), kReportMaxHostSteps / 64);
  EXPECT_EQ(Count(html, "\"on_every_host\""), 100);
  EXPECT_TEXT(html, "\"steps_total\": 10000");
  EXPECT_TEXT(html, "\"per_point\": 25");
  EXPECT_EQ(Count(html, "\"pod_max_ms\""), 400);
  // The last point: steps 10075..10099 (MakePod numbers steps from 100).
  EXPECT_TEXT(html, "{\"first\":10075,\"last\":10099,");
}

TEST(HtmlReportTest, SampledStepsAreEvenlySpacedWithTheFirstLastAndSlowest) {
  const PodBreakdown small = MakePod(Workers(), 300);
  std::vector<size_t> all(300);
  for (size_t i = 0; i < all.size(); ++i) all[i] = i;
  EXPECT_EQ(ReportStepIndices(small), all);  // up to kReportMaxSteps: every step

  PodBreakdown b = MakePod(Workers(), 1'000);
  b.steps[500].pod_step_time_ns = 10'000 * kMs;  // the slowest, off the even grid
  const std::vector<size_t> picked = ReportStepIndices(b);
  ASSERT_EQ(picked.size() <= kReportMaxSteps, true);
  EXPECT_GE(picked.size(), kReportMaxSteps * 3 / 4);
  EXPECT_TRUE(std::is_sorted(picked.begin(), picked.end()));
  EXPECT_EQ(picked.front(), 0u);
  EXPECT_EQ(picked.back(), 999u);
  EXPECT_TRUE(std::binary_search(picked.begin(), picked.end(), 500u));
  // MakePod's steps grow longer: the slowest quarter (75) are step 500 and the last 74 steps.
  for (size_t i = 926; i < 1'000; ++i)
    EXPECT_TRUE(std::binary_search(picked.begin(), picked.end(), i)) << i;
  // The page says what it shows.
  const std::string html = HtmlReport(b, Context(Workers()));
  EXPECT_EQ(Count(html, "\"on_every_host\""), static_cast<int>(picked.size()));
  EXPECT_TEXT(html, "\"per_point\": 3");
}

// --- In a real browser -----------------------------------------------------------------------

// Chromium: $PROFCTL_CHROMIUM when set (empty when that is not executable), else Debian's or
// Google's binary; empty when none is installed.
std::string FindChromium() {
  if (const char* env = std::getenv("PROFCTL_CHROMIUM"); env != nullptr && *env != '\0') {
    return access(env, X_OK) == 0 ? env : "";
  }
  for (const char* path : {"/usr/bin/chromium", "/usr/bin/chromium-browser",
                           "/usr/bin/google-chrome", "/usr/bin/google-chrome-stable"}) {
    if (access(path, X_OK) == 0) return path;
  }
  return "";
}

#define SKIP_WITHOUT_CHROMIUM()                                                               \
  if (FindChromium().empty()) {                                                               \
    GTEST_SKIP() << "headless Chromium not found (/usr/bin/chromium; set PROFCTL_CHROMIUM): " \
                    "install it with scripts/bootstrap.sh --test";                            \
  }

struct BrowserRun {
  int exit_code = -1;
  std::string dom;  // --dump-dom: the DOM after the scripts ran
  std::string log;  // stderr: console messages are "...:CONSOLE(line)] "message", source: ..."
};

// Loads `html_path` in headless Chromium with a 60 s bound (timeout kills its process group)
// and returns the DOM after 5 s of virtual time; its profile lives in `scratch`. `fragment`
// (e.g. "#step=3") is appended to the file URL; paths and fragment must not contain quotes.
BrowserRun RunChromium(const std::string& chromium, const std::string& scratch,
                       const std::string& html_path, const std::string& fragment = "") {
  const std::string dom_path = scratch + "/dom.html";
  const std::string log_path = scratch + "/chromium.log";
  const std::string cmd = absl::StrCat(
      "timeout --kill-after=5 60 '", chromium,
      "' --headless=new --no-sandbox --disable-gpu --disable-dev-shm-usage "
      "--disable-background-networking --no-first-run --user-data-dir='",
      scratch,
      "/profile' --enable-logging=stderr --v=0 --virtual-time-budget=5000 --dump-dom 'file://",
      html_path, fragment, "' >'", dom_path, "' 2>'", log_path, "' </dev/null");
  BrowserRun run;
  const int status = std::system(cmd.c_str());
  run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  run.dom = ReadFile(dom_path).value_or("");
  run.log = ReadFile(log_path).value_or("");
  return run;
}

// Console lines and uncaught errors from the page (Chromium's own noise, e.g. D-Bus, is not).
std::vector<std::string> ConsoleLines(const std::string& log) {
  std::vector<std::string> out;
  for (absl::string_view line : absl::StrSplit(log, '\n')) {
    if (absl::StrContains(line, ":CONSOLE") || absl::StrContains(line, "Uncaught")) {
      out.emplace_back(line);
    }
  }
  return out;
}

// Renders `b` in Chromium (at report.html`fragment`) and checks the page drew without any error;
// returns the DOM.
std::string RenderOrFail(const PodBreakdown& b, const BreakdownContext& ctx,
                         const std::string& fragment = "") {
  const std::string chromium = FindChromium();
  profctl::testkit::TempDir dir;
  const std::string html_path = dir.path() + "/report.html";
  EXPECT_THAT(WriteFileAtomically(html_path, HtmlReport(b, ctx)), IsOk());
  const BrowserRun run = RunChromium(chromium, dir.path(), html_path, fragment);
  EXPECT_EQ(run.exit_code, 0) << run.log;
  EXPECT_THAT(ConsoleLines(run.log), ::testing::IsEmpty()) << run.log;
  EXPECT_TEXT(run.dom, "data-rendered=\"ok\"") << run.dom.substr(0, 4000);
  // #errors stays empty and hidden.
  EXPECT_TRUE(std::regex_search(run.dom, std::regex("<div id=\"errors\" hidden=\"\"></div>")))
      << run.dom.substr(0, 4000);
  return run.dom;
}

TEST(HtmlReportChromiumTest, RendersTheJsonNumbersWithoutErrors) {
  SKIP_WITHOUT_CHROMIUM();
  PodBreakdown b = MakePod(Workers(), 6);
  const std::string dom = RenderOrFail(b, Context(Workers()));
  // Every host that stands out, the straggler or not: the verdict's sentence.
  EXPECT_TEXT(dom,
              "worker-2 input +24.0 ms per step over the other hosts' median (beyond the "
              "noise in 6 of 6 steps)");

  // The answer names the straggler and the input-bound host, in the verdicts' words.
  EXPECT_TEXT(dom,
              "id=\"answer-straggler\">worker-1</span> is the straggler in 6 of 6 judged steps; "
              "typical cause compute, +25.0 ms");
  EXPECT_TEXT(dom, "id=\"answer-input\">worker-2</span> waits for input: 25.0 ms");
  // The bars show the last step, one segment per non-zero category of each host.
  const PodStep& last = b.steps.back();
  int segments = 0;
  for (const PodHostStep& h : last.hosts) {
    for (int k = 0; k < kNumCategories; ++k) segments += h.categories.ns[k] > 0;
  }
  EXPECT_EQ(segments, 4 * 6 + 1);
  EXPECT_EQ(Count(dom, "class=\"seg\""), segments);
  EXPECT_EQ(Count(dom, "class=\"straggler-mark\""), 1);
  // The numbers are the JSON's, as the JSON writes them.
  EXPECT_TEXT(dom,
              absl::StrCat("id=\"caption-pod-time\">", FormatMs(last.pod_step_time_ns), " ms</b>"));
  EXPECT_TEXT(dom, absl::StrCat("<title>worker-1, step 105\ncompute: 70.000 ms of ",
                                FormatMs(last.hosts[1].step_time_ns), " ms</title>"));
  // The straggler table: one row per step, with its numbers and why.
  EXPECT_EQ(Count(dom, "data-index=\""), 6);
  EXPECT_TEXT(dom, absl::StrCat("<td class=\"num\">102</td><td class=\"num\">",
                                FormatMs(b.steps[2].pod_step_time_ns), " ms</td><td class=\"num\">",
                                FormatMs(b.steps[2].spread_ns),
                                " ms</td><td class=\"straggler\">worker-1</td>"));
  // Step time over steps: a line per host, the straggler circled in every step.
  EXPECT_EQ(Count(dom, "class=\"host-line\""), 4);
  EXPECT_EQ(Count(dom, "class=\"straggler-point\""), 6);
  // Per-host files are relative links; a URL is not linked.
  EXPECT_TEXT(dom, "<a href=\"worker-3.xplane.pb\">worker-3.xplane.pb</a>");
  EXPECT_NO_TEXT(dom, "href=\"javascript");
  EXPECT_TEXT(dom, "<a href=\"pod.trace.json.gz\">");
  EXPECT_TEXT(dom, "<li>2 partial steps dropped</li>");
}

TEST(HtmlReportChromiumTest, DeepLinkPicksStepAndCategory) {
  SKIP_WITHOUT_CHROMIUM();
  const PodBreakdown b = MakePod(Workers(), 6);
  const std::string dom = RenderOrFail(b, Context(Workers()), "#step=102&metric=input");
  EXPECT_TEXT(dom, "<span id=\"step-label\">step 102 (3 of 6)</span>");
  EXPECT_TEXT(dom, absl::StrCat("id=\"caption-pod-time\">", FormatMs(b.steps[2].pod_step_time_ns),
                                " ms</b>"));
  EXPECT_TEXT(dom, "<tr data-index=\"2\" class=\"selected\">");
  EXPECT_TEXT(dom, ">input (ms)</text>");
  EXPECT_TEXT(dom, "<title>worker-2, step 104: input 25.000 ms</title>");
  EXPECT_EQ(Count(dom, "class=\"straggler-point\""), 6);
}

TEST(HtmlReportChromiumTest, LongSessionDrawsEveryStepFromTheSeries) {
  SKIP_WITHOUT_CHROMIUM();
  const std::vector<std::string> names = ManyHosts(64);
  const std::string dom = RenderOrFail(MakePod(names, 2'000), Context(names));
  // The slider and the table hold the sample, the charts over steps every step in 400 points.
  EXPECT_EQ(Count(dom, "data-index=\""), 100);
  EXPECT_TEXT(dom, "show 100 of the 2000 steps");
  EXPECT_EQ(Count(dom, "class=\"cell\""), 64 * 400);
  EXPECT_TEXT(dom, "each bar: the mean of 5 steps");
  EXPECT_TEXT(dom, "<title>host-0001.rack-17.pod-a.example.com, steps 2095\u20132099: ");
  // Long host names are elided in the middle in the table, whole in the title.
  EXPECT_TEXT(dom,
              "title=\"host-0001.rack-17.pod-a.example.com\">host-0001.rack\u2026a.example.com");
}

TEST(HtmlReportChromiumTest, HostileHostNamesRenderAsText) {
  SKIP_WITHOUT_CHROMIUM();
  const PodBreakdown b = MakePod(HostileNames(), 3);
  const std::string dom = RenderOrFail(b, Context(HostileNames()));
  // The names are text (they contain "data-pwned'"), never an attribute.
  EXPECT_TEXT(dom, "<body data-rendered=\"ok\">");
  EXPECT_NO_TEXT(dom, "data-pwned=");
  EXPECT_NO_TEXT(dom, "<img");
  EXPECT_TEXT(dom, "&lt;/script&gt;&lt;script&gt;document.body.setAttribute(");
  EXPECT_TEXT(dom, "&lt;img src=x onerror=\"document.body");
  EXPECT_EQ(Count(dom, "class=\"seg\""), 3 * 6 + 1 + 6);
}

TEST(HtmlReportChromiumTest, ReportsScriptErrorsInThePage) {
  // The error catcher itself works: a page whose data does not parse shows the error.
  SKIP_WITHOUT_CHROMIUM();
  std::string html = HtmlReport(MakePod(Workers(), 2), Context(Workers()));
  const size_t at = html.find("\"schema_version\"");
  ASSERT_NE(at, std::string::npos);
  html.insert(at, "oops");
  profctl::testkit::TempDir dir;
  const std::string html_path = dir.path() + "/report.html";
  ASSERT_THAT(WriteFileAtomically(html_path, html), IsOk());
  const BrowserRun run = RunChromium(FindChromium(), dir.path(), html_path);
  EXPECT_EQ(run.exit_code, 0) << run.log;
  EXPECT_NO_TEXT(run.dom, "data-rendered=\"ok\"");
  EXPECT_TEXT(run.dom, "<div id=\"errors\"><div>error: Uncaught SyntaxError");
  EXPECT_THAT(ConsoleLines(run.log), Not(::testing::IsEmpty())) << run.log;
}

// Tools' tabs (docs/tools.md): kernel stats with a hostile kernel name and an overview, drawn from
// their embedded JSON next to the breakdown, without errors; #tab= opens one.
analysis::PodTools KernelTabTools() {
  analysis::PodTools p;
  p.tool = analysis::Tool::kKernelStats;
  for (int i = 0; i < 3; ++i) {
    analysis::KernelStat k;
    k.kernel = i == 0 ? "<img src=x onerror=\"document.body.setAttribute('data-pwned',1)\">"
                      : absl::StrCat("kernel_", i);
    k.op = "aten::mm";
    k.occurrences = i + 1;
    k.total_ns = (i + 1) * 100 * kUs;
    k.min_ns = k.max_ns = 100 * kUs;
    p.kernels.push_back(k);
  }
  analysis::HostTools h;
  h.host = "worker-0";
  h.kernels = p.kernels;
  p.hosts = {h};
  return p;
}

analysis::PodTools OverviewTabTools() {
  analysis::PodTools p;
  p.tool = analysis::Tool::kOverview;
  analysis::HostTools h;
  h.host = "worker-0";
  for (int i = 0; i < 4; ++i) {
    analysis::OverviewStep s;
    s.step = 100 + i;
    s.step_time_ns = 10 * kMs;
    s.times[analysis::OverviewCategory::kDeviceCompute] = 6 * kMs;
    s.times[analysis::OverviewCategory::kInput] = 3 * kMs;
    s.times[analysis::OverviewCategory::kOther] = kMs;
    h.overview.steps.push_back(s);
    for (size_t c = 0; c < s.times.ns.size(); ++c) h.overview.total.ns[c] += s.times.ns[c];
    h.overview.step_ns += s.step_time_ns;
  }
  p.overview_total = h.overview.total;
  p.overview_step_ns = h.overview.step_ns;
  p.overview_steps = 4;
  p.recommendations.push_back({"input", "prefetch", "input 30.0 % of step time"});
  p.hosts = {h};
  return p;
}

TEST(HtmlReportTest, WithoutToolsThePageIsUnchanged) {
  const PodBreakdown b = MakePod(Workers(), 2);
  EXPECT_EQ(HtmlReport(b, Context(Workers()), {}), HtmlReport(b, Context(Workers())));
  EXPECT_NO_TEXT(HtmlReport(b, Context(Workers())), "tool-data");
}

TEST(HtmlReportChromiumTest, ToolTabsRenderFromTheirJson) {
  SKIP_WITHOUT_CHROMIUM();
  const PodBreakdown b = MakePod(Workers(), 3);
  const std::vector<std::string> tools = {ToolJson(KernelTabTools(), ToolContext{"run"}),
                                          ToolJson(OverviewTabTools(), ToolContext{"run"})};
  profctl::testkit::TempDir dir;
  const std::string html_path = dir.path() + "/report.html";
  ASSERT_THAT(WriteFileAtomically(html_path, HtmlReport(b, Context(Workers()), tools)), IsOk());
  const BrowserRun run = RunChromium(FindChromium(), dir.path(), html_path, "#tab=kernel_stats");
  EXPECT_EQ(run.exit_code, 0) << run.log;
  EXPECT_THAT(ConsoleLines(run.log), ::testing::IsEmpty()) << run.log;
  EXPECT_TEXT(run.dom, "data-rendered=\"ok\"");
  EXPECT_TRUE(std::regex_search(run.dom, std::regex("<div id=\"errors\" hidden=\"\"></div>")))
      << run.dom.substr(0, 4000);
  // Three tabs; the deep link opened kernel_stats, the breakdown still drew (its bars exist).
  EXPECT_EQ(Count(run.dom, "data-tab=\""), 3);
  EXPECT_TEXT(run.dom, "<button type=\"button\" data-tab=\"kernel_stats\" class=\"active\">");
  EXPECT_TEXT(run.dom, "<section id=\"tool-kernel_stats\" class=\"tool-tab\">");
  EXPECT_TEXT(run.dom, "<section id=\"tool-overview\" class=\"tool-tab\" hidden=\"\">");
  EXPECT_GT(Count(run.dom, "class=\"seg\""), 0);
  // One row per kernel, numbers as the JSON writes them; the hostile name is text.
  EXPECT_EQ(Count(run.dom, "<td class=\"name\">aten::mm</td>"), 3);
  EXPECT_TEXT(run.dom, "<td class=\"num\">300.0 \u00b5s</td>");  // one unit per column
  EXPECT_NO_TEXT(run.dom, "data-pwned=");
  EXPECT_TEXT(run.dom, "<td class=\"name\" title=\"&lt;img src=x onerror=");
  // The overview: its recommendation with the reason, a stacked bar segment per step and category.
  EXPECT_TEXT(run.dom, "because input 30.0 % of step time");
  EXPECT_EQ(Count(run.dom, "class=\"tool-seg\""), 4 * 3);
}

TEST(HtmlReportChromiumTest, LongOverviewIsEmbeddedAsRunsOfSteps) {
  // 10,000 steps of one host: the page embeds 239 runs of 42 steps (the last of 4), each the
  // mean of its steps; tool_overview.json keeps every step.
  analysis::PodTools p = OverviewTabTools();
  analysis::HostTools& h = p.hosts[0];
  const analysis::OverviewStep one = h.overview.steps[0];
  h.overview.steps.clear();
  for (int i = 0; i < 10'000; ++i) {
    analysis::OverviewStep s = one;
    s.step = i;
    s.step_time_ns = (i % 2 == 0 ? 10 : 12) * kMs;  // runs of 42 steps: a mean of 11 ms
    h.overview.steps.push_back(s);
  }
  const std::string doc = ToolJson(p, ToolContext{"run"});
  const PodBreakdown b = MakePod(Workers(), 3);
  const std::string html = HtmlReport(b, Context(Workers()), {doc});
  EXPECT_LT(html.size(), doc.size() / 10);
  EXPECT_EQ(Count(html, "\"last_step\""), 239);
  EXPECT_TEXT(html, "{\"step\":0,\"last_step\":41,\"steps\":42,\"step_time_ms\":11.0,");
  EXPECT_TEXT(html, "{\"step\":9996,\"last_step\":9999,\"steps\":4,");
  if (FindChromium().empty()) return;  // the rest needs a browser
  profctl::testkit::TempDir dir;
  const std::string html_path = dir.path() + "/report.html";
  ASSERT_THAT(WriteFileAtomically(html_path, html), IsOk());
  const BrowserRun run = RunChromium(FindChromium(), dir.path(), html_path, "#tab=overview");
  EXPECT_THAT(ConsoleLines(run.log), ::testing::IsEmpty()) << run.log;
  EXPECT_TEXT(run.dom, "data-rendered=\"ok\"");
  EXPECT_EQ(Count(run.dom, "class=\"tool-seg\""), 239 * 3);
  EXPECT_TEXT(run.dom, "<title>steps 9996\u20139999 (mean of 4)\ndevice_compute: 6.000 ms</title>");
  EXPECT_TEXT(run.dom, "each bar: the mean of 42 steps");
}

// The guide's rows in the tools' tabs: op_stats' shares, the IDLE row and the pie tables.
TEST(HtmlReportChromiumTest, GuideRowsRenderInTheToolTabs) {
  SKIP_WITHOUT_CHROMIUM();
  const PodBreakdown b = MakePod(Workers(), 2);
  analysis::PodTools ops;
  ops.tool = analysis::Tool::kOpStats;
  ops.include_idle = true;
  analysis::OpStat op;
  op.name = "model/dense/MatMul:MatMul";
  op.type = "MatMul";
  op.host = true;
  op.occurrences = 1;
  op.host_total_ns = op.host_self_ns = 200 * kUs;
  op.device_total_ns = op.device_self_ns = 400 * kUs;
  ops.ops.by_op = {op};
  op.name = "MatMul";
  ops.ops.by_type = {op};
  ops.ops.host_idle_ns = 800 * kUs;
  ops.ops.device_idle_ns = 600 * kUs;
  analysis::HostTools h;
  h.host = "worker-0";
  h.ops = ops.ops;
  ops.hosts = {h};
  analysis::PodTools kernels = KernelTabTools();  // 100, 200, 300 us: 300 leads with 50 %
  kernels.kernels[2].pct = 50;
  analysis::PodTools overview = OverviewTabTools();  // four 10 ms steps
  overview.overview_step_time = analysis::StepTimeStatsOf({10 * kMs, 10 * kMs, 10 * kMs, 10 * kMs});
  overview.overview_input_range = {true, 30.0, 32.5, "worker-0 device 0", "worker-0 device 1"};
  overview.hosts[0].overview.input_by_device = {{0, 12 * kMs, 40 * kMs, 30.0},
                                                {1, 13 * kMs, 40 * kMs, 32.5}};
  analysis::PodTools memory;
  memory.tool = analysis::Tool::kMemory;
  analysis::DeviceMemory m;
  m.host = "worker-0";
  m.device = 0;
  m.peak_bytes = 4 << 20;
  m.capacity_bytes = 16 << 20;
  m.capacity_from_allocator = true;
  m.stack_at_peak = 2 << 20;
  m.heap_at_peak = 4 << 20;
  m.free_at_peak = 10 << 20;
  m.timeline = {{10, 1 << 20}, {20, 4 << 20}};
  m.fragmentation = {{10, 0.25}, {20, 0.5}};
  m.by_op_at_peak.push_back({"foo/baz", 1, 1 << 20, 1000000, "temp", "half", "(16,32)"});
  m.missing = {"peak heap since the program started: no peak_bytes_in_use stat"};
  memory.hosts.emplace_back();
  memory.hosts[0].host = "worker-0";
  memory.hosts[0].memory = {m};
  analysis::PodTools input;
  input.tool = analysis::Tool::kInputPipeline;
  input.hosts.resize(2);
  input.hosts[0].host = "worker-0";
  analysis::InputStage stage;
  stage.name = "Iterator::Map::TFRecord";
  stage.category = analysis::InputCategory::kDemandedRead;
  stage.self_pct = 75;
  stage.count = 1;
  stage.self_ns = stage.total_ns = 3 * kMs;
  input.hosts[0].input.stages = {stage};
  input.hosts[0].input.category_ns[1] = 3 * kMs;
  analysis::TfDataAnalysis& tf = input.hosts[0].input.tf_data;
  tf.calls = 4;
  tf.slow_calls = 1;
  tf.slowest_root = "Iterator::Root";
  tf.slowest_ns = 200 * kUs;
  tf.critical_path = {"Iterator::Root", "Iterator::Root::Map::TFRecord"};
  tf.bottleneck = "Iterator::Root::Map::TFRecord";
  tf.graph.push_back({"Iterator::Root", "", 1, 4, 300 * kUs, 100 * kUs, 200 * kUs, 10 * kUs, true});
  input.hosts[1].host = "worker-1";  // nothing recorded
  const std::vector<std::string> tools = {
      ToolJson(ops, ToolContext{"run"}), ToolJson(kernels, ToolContext{"run"}),
      ToolJson(overview, ToolContext{"run"}), ToolJson(memory, ToolContext{"run"}),
      ToolJson(input, ToolContext{"run"})};
  profctl::testkit::TempDir dir;
  const std::string html_path = dir.path() + "/report.html";
  ASSERT_THAT(WriteFileAtomically(html_path, HtmlReport(b, Context(Workers()), tools)), IsOk());
  const BrowserRun run = RunChromium(FindChromium(), dir.path(), html_path, "#tab=op_stats");
  EXPECT_EQ(run.exit_code, 0) << run.log;
  EXPECT_THAT(ConsoleLines(run.log), ::testing::IsEmpty()) << run.log;
  EXPECT_TEXT(run.dom, "<section id=\"tool-op_stats\" class=\"tool-tab\">");
  EXPECT_TEXT(run.dom, "counted as the IDLE row");
  // IDLE leads the device pie (600 of 1000 us) and the op table; MatMul is 40 %, cumulative 100.
  EXPECT_TEXT(run.dom, "<table id=\"tool-pie-device_by_type\">");
  EXPECT_TEXT(run.dom,
              "<td class=\"name\">IDLE</td><td class=\"num\">600.0 \u00b5s</td>"
              "<td class=\"num\">60.00 %</td>");
  // The same slices drawn as a donut beside the table, named for screen readers: IDLE's slice
  // is 60 % of the ring, a large arc; MatMul's the remaining 40 %.
  EXPECT_TEXT(run.dom,
              "role=\"img\" aria-labelledby=\"tool-pie-chart-device_by_type-title\" "
              "id=\"tool-pie-chart-device_by_type\"><title "
              "id=\"tool-pie-chart-device_by_type-title\">Device self time by op type: share of "
              "self time, top 10 and other</title>");
  EXPECT_TRUE(std::regex_search(
      run.dom,
      std::regex("<path d=\"M 80\\.00 10\\.00 A 70 70 0 1 1 [^\"]+\" fill=\"#4e79a7\" "
                 "class=\"slice\"><title>IDLE: 600\\.0 \u00b5s \\(60\\.00 %\\)</title></path>")))
      << run.dom.substr(0, 4000);
  EXPECT_TEXT(run.dom, "class=\"slice\"><title>MatMul: 400.0 \u00b5s (40.00 %)</title></path>");
  EXPECT_TEXT(run.dom,
              "<td class=\"num\">400.0 \u00b5s</td><td class=\"num\">40.00 %</td>"
              "<td class=\"num\">100.00 %</td>");
  // Kernel stats: the top kernels (summed per kernel, % of all kernel time) and the % columns.
  // The overview: step-time statistics, the input-wait range and the per-device table.
  EXPECT_TEXT(run.dom,
              "Step time: average 10.000 ms, standard deviation 0.000 ms, min 10.000 ms, "
              "max 10.000 ms. Input wait across devices: 30.00 % (worker-0 device 0) to "
              "32.50 % (worker-0 device 1) of step time.");
  EXPECT_TEXT(run.dom,
              "<td class=\"num\">1</td><td class=\"num\">13.000 ms</td>"
              "<td class=\"num\">32.50 %</td>");
  EXPECT_TEXT(run.dom, "<table id=\"tool-top-kernels\">");
  EXPECT_TEXT(run.dom,
              "<td class=\"name\">kernel_2</td><td class=\"num\">300.0 \u00b5s</td>"
              "<td class=\"num\">50.00 %</td>");
  EXPECT_TEXT(run.dom,
              "<td class=\"num\">300.0 \u00b5s</td><td class=\"num\">50.00 %</td>"
              "<td class=\"num\">0.00 %</td>");

  // Memory: the allocator's view at the peak, fragmentation over time, the table by op, what is
  // missing.
  EXPECT_TEXT(run.dom,
              "capacity 16.00 MiB (allocator); at the peak: stack 2.00 MiB, heap 4.00 "
              "MiB, free 10.00 MiB");
  EXPECT_EQ(Count(run.dom, "class=\"memory-line\""), 2);
  EXPECT_TEXT(run.dom, "<table id=\"tool-memory-by-op\">");
  EXPECT_TEXT(run.dom,
              "<td class=\"name\">foo/baz</td><td class=\"num\">1</td>"
              "<td class=\"num\">1.00 MiB</td><td class=\"num\">976.56 KiB</td>"
              "<td class=\"name\">temp</td><td class=\"name\">half</td>"
              "<td class=\"name\">(16,32)</td>");
  EXPECT_TEXT(run.dom, "Not in this trace: peak heap since the program started");

  // Input pipeline: the host input categories and each stage's category and share; a host
  // without input events says so.
  EXPECT_TEXT(run.dom, "<td class=\"name\">demanded_read</td><td class=\"num\">3.000 ms</td>");
  EXPECT_TEXT(run.dom,
              "<td class=\"name\">Iterator::Map::TFRecord</td><td class=\"name\">demanded_read</td>"
              "<td class=\"num\">3.000 ms</td><td class=\"num\">75.00 %</td>");
  EXPECT_TEXT(run.dom,
              "4 root iterator call(s), 1 slow (&gt; 50 \u00b5s, 25.00 %). Slowest execution: "
              "Iterator::Root, 200.0 \u00b5s; critical path Iterator::Root &gt; "
              "Iterator::Root::Map::TFRecord; bottleneck Iterator::Root::Map::TFRecord.");
  EXPECT_TEXT(run.dom, "<table id=\"tool-tf-data-graph\">");
  // One host at a time: the other host (picked by a deep link) has no input events.
  const BrowserRun other =
      RunChromium(FindChromium(), dir.path(), html_path, "#tab=input_pipeline&host=worker-1");
  EXPECT_THAT(ConsoleLines(other.log), ::testing::IsEmpty()) << other.log;
  EXPECT_TEXT(other.dom, "the host side of the input pipeline is not recorded");
  EXPECT_TEXT(other.dom, "tf.data bottleneck analysis: no tf.data iterator events");

  // No kernels: a sentence, not an empty table.
  analysis::PodTools none;
  none.tool = analysis::Tool::kKernelStats;
  ASSERT_THAT(WriteFileAtomically(html_path, HtmlReport(b, Context(Workers()),
                                                        {ToolJson(none, ToolContext{"run"})})),
              IsOk());
  const BrowserRun empty = RunChromium(FindChromium(), dir.path(), html_path, "#tab=kernel_stats");
  EXPECT_THAT(ConsoleLines(empty.log), ::testing::IsEmpty()) << empty.log;
  EXPECT_TEXT(empty.dom, "No GPU kernels in the trace");
  EXPECT_NO_TEXT(empty.dom, "<table id=\"tool-kernels\">");
}

TEST(HtmlReportTest, HangSectionOnlyWithAVerdictAndEveryNameEscaped) {
  EXPECT_NO_TEXT(HtmlReport(MakePod(Workers(), 3), Context(Workers())), "<section id=\"hang\">");
  analysis::HangReport h;
  h.verdict = analysis::HangVerdictKind::kHung;
  h.waiting_ranks = 1;
  h.summary = "<img src=x> (rank 1) never entered all-reduce #1 of step 5; 1 rank waits in it";
  const analysis::CollectiveAt at{{5, analysis::CollectiveKind::kAllReduce, 1}, 0};
  h.ranks.push_back(
      {"w&0", 0, analysis::HangRank::Role::kWaiting, true, at, std::nullopt, false, std::nullopt});
  h.ranks.push_back({"<img src=x>", 1, analysis::HangRank::Role::kNeverEntered, true, std::nullopt,
                     std::nullopt, false, std::nullopt});
  const std::string html = HtmlReport(MakePod(Workers(), 3, {h}), Context(Workers()));
  const size_t section = html.find("<section id=\"hang\">");
  ASSERT_NE(section, std::string::npos);
  EXPECT_LT(section, html.find("<section id=\"answer\">"));  // above the answer
  EXPECT_NO_TEXT(html, "<img");
  EXPECT_TEXT(html, "<strong>&lt;img src=x&gt; (rank 1) never entered all-reduce #1 of step 5");
  EXPECT_TEXT(
      html,
      "<tr><td class=\"num\">0</td><td>w&amp;0</td><td>waits</td><td>all-reduce #1 of step 5 at "
      "00:00:00.000 UTC</td><td>none</td></tr>");
  EXPECT_TEXT(html, "<tr><td class=\"num\">1</td><td>&lt;img src=x&gt;</td><td>never entered</td>");
  // "Cannot tell": the section says so, with its evidence, and judges no rank.
  h.verdict = analysis::HangVerdictKind::kCannotTell;
  h.summary = "cannot tell: ranks wait in all-reduce #1 of step 5 since <x>";
  const std::string cannot = HtmlReport(MakePod(Workers(), 3, {h}), Context(Workers()));
  const size_t at_section = cannot.find("<section id=\"hang\">");
  ASSERT_NE(at_section, std::string::npos);
  const std::string part =
      cannot.substr(at_section, cannot.find("</section>", at_section) - at_section);
  EXPECT_TEXT(part, "cannot tell: ranks wait in all-reduce #1 of step 5 since &lt;x&gt;");
  EXPECT_TEXT(part, "no step signal from the agents");  // its evidence
  EXPECT_NO_TEXT(part, "<table");
  h.verdict = analysis::HangVerdictKind::kNone;
  EXPECT_NO_TEXT(HtmlReport(MakePod(Workers(), 3, {h}), Context(Workers())),
                 "<section id=\"hang\">");
}

}  // namespace
}  // namespace profctl::report
