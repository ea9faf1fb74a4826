#include "report/breakdown_writers.h"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "report/html_report.h"
#include "tests/status_matchers.h"
#include "tests/test_time.h"

using ::profctl::testkit::IsOk;

namespace profctl::report {
namespace {

using analysis::Category;
using analysis::CategoryName;
using analysis::HostReport;
using analysis::kNumCategories;
using analysis::PodBreakdown;
using analysis::PodHostStep;
using analysis::PodStep;
using analysis::Stats;
using google::protobuf::Struct;
using google::protobuf::Value;
using ::testing::HasSubstr;
using ::testing::Not;

using ::profctl::test_time::kMs;
using ::profctl::test_time::kUs;

std::string Worker(int i) { return absl::StrCat("worker-", i); }

// A synchronous data-parallel pod, judged by the analysis: host `straggler` computes 30 ms
// longer than the others' 50 ms, host 2 waits 30 ms per step for input; everyone else waits in
// the all-reduce. Categories add up to the step time exactly.
std::vector<analysis::HostSummary> MakeSummaries(int num_hosts, int num_steps, int straggler) {
  std::vector<analysis::HostSummary> hosts(static_cast<size_t>(num_hosts));
  const int strag = num_hosts > 1 ? straggler % num_hosts : -1;
  for (int h = 0; h < num_hosts; ++h) {
    analysis::HostSummary& summary = hosts[static_cast<size_t>(h)];
    summary.host = Worker(h);
    for (int s = 0; s < num_steps; ++s) {
      analysis::HostStep st;
      st.step = 10 + s;
      st.start_ns = 1'000 * kMs + s * 151 * kMs + h * 3 * kUs;
      st.end_ns =
          st.start_ns + 150 * kMs + s * 100 * kUs + h % 4 * 7 * kUs + (h == strag ? 123'456 : 0);
      auto& c = st.host;
      c[Category::kCompute] = (h == strag ? 80 : 50) * kMs + h * 1'234;
      c[Category::kOutput] = 1 * kMs;
      c[Category::kDeviceToDevice] = 0;
      c[Category::kInput] = h == 2 ? 30 * kMs : 500 * kUs;
      c[Category::kHost] = 2 * kMs;
      c[Category::kIdle] = 1 * kMs;
      c[Category::kCollectives] = (st.end_ns - st.start_ns) - c[Category::kCompute] -
                                  c[Category::kOutput] - c[Category::kInput] - c[Category::kHost] -
                                  c[Category::kIdle];
      summary.steps.push_back(st);
    }
  }
  return hosts;
}

PodBreakdown MakePod(int num_hosts, int num_steps, int straggler = 1,
                     const analysis::PodInputs& inputs = {}) {
  return analysis::BuildPodBreakdown(MakeSummaries(num_hosts, num_steps, straggler), inputs);
}

BreakdownContext Context() {
  BreakdownContext ctx;
  ctx.session = "demo_2026_11_22";
  ctx.source = BreakdownSource::kCapture;
  ctx.host_files["worker-0"] = {"worker-0.xplane.pb"};
  ctx.host_files["worker-1"] = {"worker-1.xplane.pb", "agents/worker-1.log"};
  ctx.session_files = {"pod.trace.json.gz", "session.json"};
  ctx.report_path = "/logs/plugins/profile/demo_2026_11_22/report.html";
  return ctx;
}

Struct ParseStruct(const std::string& json) {
  Struct doc;
  const auto status = google::protobuf::util::JsonStringToMessage(json, &doc);
  EXPECT_THAT(status, IsOk()) << status << "\n" << json.substr(0, 2000);
  return doc;
}

const Value& Field(const Struct& s, const std::string& key) {
  static const Value* const kMissing = new Value();
  auto it = s.fields().find(key);
  EXPECT_NE(it, s.fields().end()) << "missing key " << key;
  return it == s.fields().end() ? *kMissing : it->second;
}

double Ms(int64_t ns) { return static_cast<double>(ns) / kMs; }

// --- FormatMs ------------------------------------------------------------------------------------

TEST(FormatMsTest, ThreeDecimalsRoundedHalfAwayFromZeroToTheMicrosecond) {
  EXPECT_EQ(FormatMs(0), "0.000");
  EXPECT_EQ(FormatMs(1'000'000), "1.000");
  EXPECT_EQ(FormatMs(1'234'567), "1.235");
  EXPECT_EQ(FormatMs(1'234'499), "1.234");
  EXPECT_EQ(FormatMs(1'234'500), "1.235");
  EXPECT_EQ(FormatMs(499), "0.000");
  EXPECT_EQ(FormatMs(500), "0.001");
  EXPECT_EQ(FormatMs(-500), "-0.001");
  EXPECT_EQ(FormatMs(-499), "0.000");
  EXPECT_EQ(FormatMs(-150'123'000), "-150.123");
  EXPECT_EQ(FormatMs(999'999'500), "1000.000");
  EXPECT_EQ(FormatMs(std::numeric_limits<int64_t>::max()), "9223372036854.776");
  EXPECT_EQ(FormatMs(std::numeric_limits<int64_t>::min()), "-9223372036854.776");
}

// --- JSON ----------------------------------------------------------------------------------------

// Each rounded on its own, 30.0006 + 30.0006 + 29.9988 ms print as 30.001 + 30.001 + 29.999 =
// 90.001 for a 90.000 ms step; rounded together they add up.
TEST(RoundCategoriesToUsTest, RoundedCategoriesAddUpToTheRoundedStep) {
  analysis::CategoryTimes t;
  t[Category::kCompute] = 30'000'600;
  t[Category::kCollectives] = 30'000'600;
  t[Category::kInput] = 29'998'800;
  const auto r = RoundCategoriesToUs(t, 90'000'000);
  int64_t sum = 0;
  for (const int64_t ns : r) {
    EXPECT_EQ(ns % 1000, 0);
    sum += ns;
  }
  EXPECT_EQ(sum, 90'000'000);
  EXPECT_EQ(r[static_cast<size_t>(Category::kInput)], 29'999'000);    // the largest remainder
  EXPECT_EQ(r[static_cast<size_t>(Category::kCompute)], 30'001'000);  // then category order
  EXPECT_EQ(r[static_cast<size_t>(Category::kCollectives)], 30'000'000);
  // Random partitions: always the rounded total, each within 1 us of its exact value.
  std::mt19937_64 rng(3);
  for (int trial = 0; trial < 1000; ++trial) {
    analysis::CategoryTimes p;
    int64_t total = 0;
    for (int64_t& ns : p.ns) total += (ns = static_cast<int64_t>(rng() % 50'000'000));
    const auto q = RoundCategoriesToUs(p, total);
    int64_t s = 0;
    for (size_t c = 0; c < q.size(); ++c) {
      s += q[c];
      EXPECT_LT(std::abs(q[c] - p.ns[c]), 1000);
    }
    EXPECT_EQ(FormatMs(s), FormatMs(total));
  }
}

TEST(BreakdownJsonTest, RoundTripsThroughProtobufJsonParser) {
  const PodBreakdown b = MakePod(4, 5);
  const std::string json = BreakdownJson(b, Context());
  const Struct doc = ParseStruct(json);

  EXPECT_EQ(Field(doc, "schema_version").number_value(), PodBreakdown::kSchemaVersion);
  EXPECT_THAT(Field(doc, "producer").string_value(), HasSubstr("profctl "));
  EXPECT_EQ(Field(doc, "session").string_value(), "demo_2026_11_22");
  EXPECT_EQ(Field(doc, "source").string_value(), "capture");
  const auto& cats = Field(doc, "categories").list_value().values();
  ASSERT_EQ(cats.size(), kNumCategories);
  for (int c = 0; c < kNumCategories; ++c) {
    EXPECT_EQ(cats[c].string_value(), CategoryName(static_cast<Category>(c)));
  }

  const auto& steps = Field(doc, "steps").list_value().values();
  ASSERT_EQ(static_cast<size_t>(steps.size()), b.steps.size());
  for (int i = 0; i < steps.size(); ++i) {
    const PodStep& want = b.steps[i];
    const Struct& got = steps[i].struct_value();
    EXPECT_EQ(Field(got, "step").number_value(), want.step);
    EXPECT_DOUBLE_EQ(Field(got, "pod_step_time_ms").number_value(),
                     std::stod(FormatMs(want.pod_step_time_ns)));
    EXPECT_DOUBLE_EQ(Field(got, "spread_ms").number_value(), 0.130);  // 123.456 + 7 us, rounded
    EXPECT_EQ(Field(got, "straggler").string_value(), "worker-1");
    EXPECT_EQ(Field(got, "bottleneck").string_value(), "compute");
    EXPECT_EQ(Field(got, "cause").string_value(), "compute");
    EXPECT_NEAR(Field(got, "cause_excess_ms").number_value(), 30.0, 0.01);
    EXPECT_EQ(Field(got, "why").string_value(), want.why);
    const auto& hosts = Field(got, "hosts").list_value().values();
    ASSERT_EQ(static_cast<size_t>(hosts.size()), want.hosts.size());
    for (int h = 0; h < hosts.size(); ++h) {
      const Struct& hs = hosts[h].struct_value();
      EXPECT_EQ(Field(hs, "host").string_value(), want.hosts[h].host);
      EXPECT_NEAR(Field(hs, "step_time_ms").number_value(), Ms(want.hosts[h].step_time_ns), 5e-4);
      const Struct& cm = Field(hs, "categories_ms").struct_value();
      ASSERT_EQ(cm.fields_size(), kNumCategories);
      for (int c = 0; c < kNumCategories; ++c) {
        EXPECT_NEAR(Field(cm, std::string(CategoryName(static_cast<Category>(c)))).number_value(),
                    Ms(want.hosts[h].categories.ns[c]), 5e-4);
      }
    }
  }

  const auto& hosts = Field(doc, "hosts").list_value().values();
  ASSERT_EQ(hosts.size(), 4);
  const Struct& w1 = hosts[1].struct_value();
  EXPECT_EQ(Field(w1, "host").string_value(), "worker-1");
  EXPECT_EQ(Field(w1, "steps").number_value(), 5);
  EXPECT_EQ(Field(w1, "partial_steps").number_value(), 0);
  EXPECT_TRUE(Field(w1, "has_markers").bool_value());
  EXPECT_EQ(Field(w1, "straggler_steps").number_value(), 5);
  EXPECT_NEAR(Field(Field(w1, "step_time").struct_value(), "mean_ms").number_value(),
              b.hosts[1].step_time.mean_ns / kMs, 5e-4);
  EXPECT_DOUBLE_EQ(Field(Field(w1, "step_time").struct_value(), "p90_ms").number_value(),
                   std::round(b.hosts[1].step_time.p90_ns / 1000.0) / 1000.0);
  const Struct& w1_compute =
      Field(Field(w1, "categories").struct_value(), "compute").struct_value();
  EXPECT_DOUBLE_EQ(Field(w1_compute, "p50_ms").number_value(), 80.001);
  EXPECT_EQ(Field(w1, "files").list_value().values_size(), 2);
  EXPECT_EQ(Field(w1, "files").list_value().values(1).string_value(), "agents/worker-1.log");
  EXPECT_EQ(Field(hosts[3].struct_value(), "files").list_value().values_size(), 0);

  const Struct& pod = Field(doc, "pod").struct_value();
  EXPECT_EQ(Field(pod, "steps").number_value(), 5);
  EXPECT_EQ(Field(pod, "hosts").number_value(), 4);
  // The pod's categories are the straggler's view.
  EXPECT_DOUBLE_EQ(
      Field(Field(Field(pod, "categories").struct_value(), "compute").struct_value(), "mean_ms")
          .number_value(),
      80.001);

  const Struct& summary = Field(doc, "summary").struct_value();
  const Struct& st = Field(summary, "straggler").struct_value();
  EXPECT_EQ(Field(st, "host").string_value(), "worker-1");
  EXPECT_EQ(Field(st, "steps").number_value(), 5);
  EXPECT_EQ(Field(st, "cause").string_value(), "compute");
  EXPECT_NEAR(Field(st, "cause_excess_ms").number_value(), 30.0, 0.01);
  EXPECT_EQ(Field(st, "example_step").number_value(), 14);
  const Struct& in = Field(summary, "input_bound").struct_value();
  EXPECT_EQ(Field(in, "host").string_value(), "worker-2");
  EXPECT_DOUBLE_EQ(Field(in, "input_ms").number_value(), 30.0);
  EXPECT_DOUBLE_EQ(Field(in, "median_input_ms").number_value(), 0.5);
  EXPECT_DOUBLE_EQ(Field(in, "excess_ms").number_value(), 29.5);

  EXPECT_EQ(Field(doc, "straggler_changes").list_value().values_size(), 0);
  ASSERT_EQ(Field(doc, "consistently_slow").list_value().values_size(), 1);
  EXPECT_EQ(Field(doc, "consistently_slow").list_value().values(0).string_value(), "worker-1");
  EXPECT_EQ(Field(doc, "files").list_value().values(0).string_value(), "pod.trace.json.gz");
}

TEST(BreakdownJsonTest, StableKeyOrderAndExactMillisecondText) {
  const std::string json = BreakdownJson(MakePod(2, 1), Context());
  // Top-level keys (indented by two) in the documented order.
  size_t last = 0;
  for (const char* key : {"schema_version\": 4", "producer", "session", "source", "categories",
                          "pod", "verdict", "summary", "hosts", "steps", "straggler_changes",
                          "consistently_slow", "outliers", "warnings", "files"}) {
    const size_t at = json.find(absl::StrCat("\n  \"", key));
    ASSERT_NE(at, std::string::npos) << key;
    EXPECT_GT(at, last) << key;
    last = at;
  }
  // A step's host on one line, ms written from integer ns with exactly three decimals.
  EXPECT_THAT(json, HasSubstr("{\"host\":\"worker-0\",\"step_time_ms\":150.000,\"categories_ms\":{"
                              "\"compute\":50.000,\"output\":1.000,\"d2d\":0.000,\"collectives\":"
                              "95.500,\"input\":0.500,\"host\":2.000,\"idle\":1.000}}"));
  EXPECT_THAT(json, HasSubstr("\"pod_step_time_ms\": 150.130,"));
  EXPECT_EQ(json, BreakdownJson(MakePod(2, 1), Context())) << "deterministic";
  EXPECT_EQ(json.back(), '\n');
}

TEST(BreakdownJsonTest, HostileTextStaysValidJson) {
  PodBreakdown b = MakePod(2, 3);
  const std::string evil = "w\"0\\\n<script>alert(1)</script>\x01\xff";
  for (PodStep& s : b.steps) {
    s.hosts[0].host = evil;
    s.why = evil;
  }
  b.hosts[0].host = evil;
  b.hosts[0].warnings = {evil};
  b.warnings = {evil};
  const Struct doc = ParseStruct(BreakdownJson(b, Context()));
  // Control characters kept (escaped), invalid UTF-8 replaced by U+FFFD.
  const std::string want = "w\"0\\\n<script>alert(1)</script>\x01\xEF\xBF\xBD";
  EXPECT_EQ(Field(Field(doc, "hosts").list_value().values(0).struct_value(), "host").string_value(),
            want);
  EXPECT_EQ(Field(Field(doc, "steps").list_value().values(2).struct_value(), "why").string_value(),
            want);
  EXPECT_EQ(Field(doc, "warnings").list_value().values(0).string_value(), want);
}

TEST(BreakdownJsonTest, EmptyBreakdownIsValid) {
  PodBreakdown b;
  b.warnings = {"no host had a readable trace"};
  BreakdownContext ctx;
  ctx.source = BreakdownSource::kAnalyze;
  const Struct doc = ParseStruct(BreakdownJson(b, ctx));
  EXPECT_EQ(Field(doc, "source").string_value(), "analyze");
  EXPECT_EQ(Field(doc, "steps").list_value().values_size(), 0);
  EXPECT_EQ(Field(doc, "hosts").list_value().values_size(), 0);
  EXPECT_EQ(Field(Field(doc, "summary").struct_value(), "straggler").kind_case(),
            Value::kNullValue);
  EXPECT_EQ(Field(Field(doc, "summary").struct_value(), "input_bound").kind_case(),
            Value::kNullValue);
  EXPECT_EQ(Field(doc, "warnings").list_value().values(0).string_value(),
            "no host had a readable trace");
}

TEST(BreakdownJsonTest, OneHostWithoutMarkersHasNullStragglerAndCause) {
  PodBreakdown b = MakePod(1, 1);
  b.steps[0].step = -1;  // the whole-window pseudo-step
  b.hosts[0].has_markers = false;
  b.hosts[0].warnings = {"no step markers: one whole-window breakdown"};
  const Struct doc = ParseStruct(BreakdownJson(b, Context()));
  const Struct& step = Field(doc, "steps").list_value().values(0).struct_value();
  EXPECT_EQ(Field(step, "step").number_value(), -1);
  EXPECT_EQ(Field(step, "straggler").kind_case(), Value::kNullValue);
  EXPECT_EQ(Field(step, "cause").kind_case(), Value::kNullValue);
  EXPECT_EQ(Field(step, "cause_excess_ms").number_value(), 0);
  EXPECT_EQ(Field(step, "bottleneck").string_value(), "collectives");
  EXPECT_FALSE(
      Field(Field(doc, "hosts").list_value().values(0).struct_value(), "has_markers").bool_value());
}

// --- CSV -----------------------------------------------------------------------------------------

// Splits RFC 4180 text into rows of fields.
std::vector<std::vector<std::string>> ParseCsv(const std::string& text) {
  std::vector<std::vector<std::string>> rows(1);
  std::string field;
  bool quoted = false;
  bool row_open = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (quoted) {
      if (c == '"' && i + 1 < text.size() && text[i + 1] == '"') {
        field.push_back('"');
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        field.push_back(c);
      }
    } else if (c == '"') {
      quoted = true;
      row_open = true;
    } else if (c == ',') {
      rows.back().push_back(field);
      field.clear();
      row_open = true;
    } else if (c == '\n') {
      rows.back().push_back(field);
      field.clear();
      rows.emplace_back();
      row_open = false;
    } else {
      field.push_back(c);
      row_open = true;
    }
  }
  if (row_open) rows.back().push_back(field);
  if (rows.back().empty()) rows.pop_back();
  return rows;
}

TEST(BreakdownCsvTest, OneRowPerStepAndHostWithHeader) {
  PodBreakdown b = MakePod(3, 2);
  const std::string csv = BreakdownCsv(b);
  const auto rows = ParseCsv(csv);
  ASSERT_EQ(rows.size(), 1u + 2 * 3);
  EXPECT_EQ(absl::StrJoin(rows[0], ","),
            "step,host,step_time_ms,compute_ms,output_ms,d2d_ms,collectives_ms,input_ms,host_ms,"
            "idle_ms,straggler,pod_step_time_ms,straggler_cost_ms,stands_out,device_busy_ms");
  for (const auto& r : rows) EXPECT_EQ(r.size(), 15u);
  EXPECT_EQ(absl::StrJoin(rows[2], ","),
            "10,worker-1,150.130,80.001,1.000,0.000,65.629,0.500,2.000,1.000,true,150.130,0.499,"
            "compute+30.000,");
  EXPECT_EQ(rows[1][10], "false");
  EXPECT_EQ(rows[4][0], "11");
  EXPECT_EQ(rows[4][1], "worker-0");
}

TEST(BreakdownCsvTest, QuotesHostNames) {
  PodBreakdown b = MakePod(2, 1);
  b.steps[0].hosts[0].host = "rack 1, \"gpu\"\nhost";
  b.steps[0].hosts[1].host = "plain-host";
  const std::string csv = BreakdownCsv(b);
  EXPECT_THAT(csv, HasSubstr("\n10,\"rack 1, \"\"gpu\"\"\nhost\",150.000,"));
  EXPECT_THAT(csv, HasSubstr("\n10,plain-host,"));
  const auto rows = ParseCsv(csv);
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[1][1], "rack 1, \"gpu\"\nhost");
  EXPECT_EQ(rows[1].size(), 15u);
}

// --- Table ---------------------------------------------------------------------------------------

std::vector<std::string> Lines(const std::string& s) {
  return absl::StrSplit(s, '\n', absl::SkipEmpty());
}

TEST(BreakdownTableTest, SmallPodAnswersWhoIsSlowAndWhy) {
  const PodBreakdown b = MakePod(4, 20);
  const std::string table = FormatBreakdownTable(b, Context());
  EXPECT_THAT(table, HasSubstr("pod step breakdown of demo_2026_11_22: 4 hosts, 20 steps"));
  EXPECT_THAT(table, HasSubstr("last 3 of 20 steps"));
  EXPECT_THAT(table, HasSubstr("straggler: worker-1 is the straggler in 20 of 20 judged steps; "
                               "typical cause compute, +30.0 ms over the median host (median of "
                               "20 steps) (confidence: high)\n"));
  EXPECT_THAT(table, HasSubstr("  step 29: worker-1 is the straggler: compute 80.0 ms"));
  EXPECT_THAT(table, HasSubstr("input-bound: worker-2 waits for input: 30.0 ms per step vs 0.5 ms "
                               "on the median host (+29.5 ms, 19.5 % of its step)"));
  EXPECT_THAT(table, HasSubstr("straggler changes: none\n"));
  EXPECT_THAT(table, HasSubstr("consistently slow: worker-1 (last ready in 20 of 20 steps vs "
                               "25.0 % by chance, named in 20;"));
  // Fixing worker-1 alone saves only down to worker-2's pace, 0.5 ms behind it.
  EXPECT_THAT(table, HasSubstr("what if: stragglers cost 0.5 ms per step"));
  EXPECT_THAT(table, HasSubstr("bottleneck: compute, 80.0 of 151.1 ms per pod step (53.0 %"));
  EXPECT_THAT(table, HasSubstr("report: /logs/plugins/profile/demo_2026_11_22/report.html\n"));
  // The last three steps, one line per host, the straggler marked with its cause.
  EXPECT_THAT(table, HasSubstr("      29  worker-1               *   152.030"));
  EXPECT_THAT(table, HasSubstr("<- straggler: compute +29.999 ms over the median host"));
  EXPECT_THAT(table, Not(HasSubstr("      26  worker-")));
  const auto lines = Lines(table);
  EXPECT_LE(lines.size(), 34u) << table;

  // Columns align: in each section every row ends each numeric column where its header does.
  for (const char* header : {"  HOST ", "    STEP  HOST"}) {
    size_t h = 0;
    while (h < lines.size() && !absl::StartsWith(lines[h], header)) ++h;
    ASSERT_LT(h, lines.size()) << header;
    const size_t end = lines[h].find("IDLE") + 4;
    for (size_t i = h + 1; i < h + 5; ++i) {
      ASSERT_GE(lines[i].size(), end) << lines[i];
      EXPECT_TRUE(absl::ascii_isdigit(lines[i][end - 1])) << lines[i];
      if (lines[i].size() > end) {
        EXPECT_EQ(lines[i][end], ' ') << lines[i];
      }
    }
  }
}

TEST(BreakdownTableTest, LargePodIsBoundedAndSaysWhatItElided) {
  const PodBreakdown b = MakePod(1024, 100, /*straggler=*/777);
  BreakdownContext ctx = Context();
  const std::string table = FormatBreakdownTable(b, ctx);
  const auto lines = Lines(table);
  EXPECT_LE(lines.size(), 60u) << table;
  EXPECT_THAT(table, HasSubstr("1024 hosts, 100 steps"));
  EXPECT_THAT(table, HasSubstr("  ... 1008 more hosts: mean step 154.950..154.971 ms, straggler "
                               "in 0 steps\n"));
  EXPECT_THAT(table, HasSubstr("     109  ... 1016 more hosts: 159.900..159.921 ms\n"));
  EXPECT_THAT(table,
              HasSubstr("straggler: worker-777 is the straggler in 100 of 100 judged steps"));
  EXPECT_THAT(table, HasSubstr("     109  worker-777             * "));
  EXPECT_THAT(table, HasSubstr("input-bound: worker-2"));
}

// Every host that stands out, straggler or not: in the JSON (pod-wide and per step), the CSV's
// stands_out column and the table.
TEST(BreakdownOutliersTest, EveryOutputNamesEveryHostThatStandsOut) {
  PodBreakdown b = MakePod(3, 2);
  b.category_noise_floor_ns[static_cast<int>(Category::kInput)] = 400'000;
  b.verdict.stands_out.finding = analysis::Finding::kFound;
  b.verdict.stands_out.confidence = analysis::Confidence::kHigh;
  b.verdict.stands_out.hosts = {{"worker-1", Category::kCompute, 2, 2, 30 * kMs},
                                {"worker-2", Category::kInput, 2, 2, 4 * kMs + 250'000}};
  for (PodStep& ps : b.steps) {
    ps.outliers = {{"worker-1", Category::kCompute, 30 * kMs},
                   {"worker-2", Category::kInput, 4 * kMs + 250'000}};
  }
  const Struct doc = ParseStruct(BreakdownJson(b, Context()));
  const Struct& floors =
      Field(Field(doc, "pod").struct_value(), "category_noise_floor_ms").struct_value();
  EXPECT_EQ(floors.fields_size(), 5);  // compute, output, d2d, input, host
  EXPECT_DOUBLE_EQ(Field(floors, "input").number_value(), 0.4);
  const auto& pod_outliers = Field(doc, "outliers").list_value();
  ASSERT_EQ(pod_outliers.values_size(), 2);
  const Struct& second = pod_outliers.values(1).struct_value();
  EXPECT_EQ(Field(second, "host").string_value(), "worker-2");
  EXPECT_EQ(Field(second, "category").string_value(), "input");
  EXPECT_EQ(Field(second, "steps").number_value(), 2);
  EXPECT_EQ(Field(second, "steps_beyond_noise").number_value(), 2);
  EXPECT_DOUBLE_EQ(Field(second, "median_excess_ms").number_value(), 4.25);
  const auto& step_outliers =
      Field(Field(doc, "steps").list_value().values(0).struct_value(), "outliers").list_value();
  ASSERT_EQ(step_outliers.values_size(), 2);
  EXPECT_EQ(Field(step_outliers.values(0).struct_value(), "host").string_value(), "worker-1");
  EXPECT_DOUBLE_EQ(Field(step_outliers.values(1).struct_value(), "excess_ms").number_value(), 4.25);
  const auto rows = ParseCsv(BreakdownCsv(b));
  EXPECT_EQ(rows[1][13], "");
  EXPECT_EQ(rows[2][13], "compute+30.000");
  EXPECT_EQ(rows[3][13], "input+4.250");
  const std::string table = FormatBreakdownTable(b, Context());
  EXPECT_THAT(table, HasSubstr("stands out (confidence: high):\n"
                               "  worker-1 compute +30.000 ms per step over the other hosts' "
                               "median (beyond the noise in 2 of 2 steps)\n"
                               "  worker-2 input +4.250 ms per step over the other hosts' median "
                               "(beyond the noise in 2 of 2 steps)\n"));
}

// Steps cut by the window are reported per host, never compared; the pod's statistics are over
// the steps every host has.
TEST(BreakdownPartialTest, PartialStepsAndStepsOnEveryHostAreInEveryOutput) {
  std::vector<analysis::HostSummary> hosts = MakeSummaries(2, 2, 1);
  hosts[1].steps.erase(hosts[1].steps.begin());  // worker-1's step 10 was not traced
  analysis::HostStep cut;
  cut.step = 9;
  cut.start_ns = 0;
  cut.end_ns = 12 * kMs + 400;
  cut.host[Category::kCompute] = 12 * kMs;
  cut.host[Category::kIdle] = 400;
  hosts[0].partial.push_back(cut);
  hosts[0].partial_steps = 1;
  const PodBreakdown b = analysis::BuildPodBreakdown(hosts);
  const Struct doc = ParseStruct(BreakdownJson(b, Context()));
  const Struct& pod = Field(doc, "pod").struct_value();
  EXPECT_EQ(Field(pod, "steps_on_every_host").number_value(), 1);
  const auto& steps = Field(doc, "steps").list_value();
  EXPECT_FALSE(Field(steps.values(0).struct_value(), "on_every_host").bool_value());
  EXPECT_TRUE(Field(steps.values(1).struct_value(), "on_every_host").bool_value());
  // The pod's categories are the steps on every host's: here step 11's alone.
  const Struct& compute = Field(Field(pod, "categories").struct_value(), "compute").struct_value();
  EXPECT_DOUBLE_EQ(Field(compute, "mean_ms").number_value(), 80.001);
  const auto& partial =
      Field(Field(doc, "hosts").list_value().values(0).struct_value(), "partial").list_value();
  ASSERT_EQ(partial.values_size(), 1);
  const Struct& p = partial.values(0).struct_value();
  EXPECT_EQ(Field(p, "step").number_value(), 9);
  EXPECT_DOUBLE_EQ(Field(p, "recorded_ms").number_value(), 12.0);
  EXPECT_DOUBLE_EQ(Field(Field(p, "categories_ms").struct_value(), "compute").number_value(), 12.0);
  const std::string table = FormatBreakdownTable(b, Context());
  EXPECT_THAT(table, HasSubstr("2 hosts, 2 steps (and 1 partial steps cut by the window, not "
                               "compared); 1 steps on every host"));
}

// Which device of the straggler was slow: in the JSON (per step and per host's device), the
// CSV's device_busy_ms and the table's straggler line.
TEST(BreakdownDevicesTest, TheStragglersSlowDeviceIsInEveryOutput) {
  PodBreakdown b = MakePod(2, 1);
  PodHostStep& h = b.steps[0].hosts[1];
  for (int64_t d = 0; d < 2; ++d) {
    analysis::CategoryTimes c = h.categories;
    c[Category::kCompute] -= (1 - d) * 5 * kMs;  // device 1 computes 5 ms longer
    c[Category::kCollectives] += (1 - d) * 5 * kMs;
    h.devices.emplace_back(d, c);
  }
  b.steps[0].straggler_device = 1;
  b.steps[0].straggler_device_excess_ns = 5 * kMs;
  const Struct doc = ParseStruct(BreakdownJson(b, Context()));
  const Struct& step = Field(doc, "steps").list_value().values(0).struct_value();
  const Struct& dev = Field(step, "straggler_device").struct_value();
  EXPECT_EQ(Field(dev, "device").number_value(), 1);
  EXPECT_DOUBLE_EQ(Field(dev, "excess_ms").number_value(), 5.0);
  const auto& hosts = Field(step, "hosts").list_value();
  EXPECT_EQ(hosts.values(0).struct_value().fields().count("devices"), 0u);  // one device
  const auto& devices = Field(hosts.values(1).struct_value(), "devices").list_value();
  ASSERT_EQ(devices.values_size(), 2);
  EXPECT_DOUBLE_EQ(
      Field(Field(devices.values(1).struct_value(), "categories_ms").struct_value(), "compute")
          .number_value(),
      80.001);
  const auto rows = ParseCsv(BreakdownCsv(b));
  EXPECT_EQ(rows[1][14], "");
  EXPECT_EQ(rows[2][14], "0:79.501 1:84.501");  // 150.130 - 65.629 (- 5 on device 0)
  EXPECT_THAT(FormatBreakdownTable(b, Context()),
              HasSubstr("ms over the median host; its device 1 +5.000 ms over its others"));
}

TEST(BreakdownTableTest, ListsStragglerChanges) {
  PodBreakdown b = MakePod(4, 6);
  for (int i : {3, 4}) b.steps[i].straggler = "worker-3";
  b.verdict.straggler.changes = {13, 15};
  const std::string table = FormatBreakdownTable(b, BreakdownContext());
  EXPECT_THAT(table, HasSubstr("straggler changes at 2 steps: 13 (worker-1 -> worker-3), 15 "
                               "(worker-3 -> worker-1)\n"));
  EXPECT_THAT(table, Not(HasSubstr("report:")));
}

TEST(BreakdownTableTest, OneHostNoMarkersAndControlCharacters) {
  PodBreakdown b = MakePod(1, 1);
  b.steps[0].step = -1;
  b.steps[0].hosts[0].host = "evil\x1b[31m";
  b.hosts[0].host = "evil\x1b[31m";
  b.hosts[0].has_markers = false;
  b.hosts[0].warnings = {"no step markers\x07: one whole-window breakdown"};
  const std::string table = FormatBreakdownTable(b, BreakdownContext());
  EXPECT_EQ(table.find('\x1b'), std::string::npos) << table;
  EXPECT_EQ(table.find('\x07'), std::string::npos) << table;
  EXPECT_THAT(table, HasSubstr("evil?[31m"));
  EXPECT_THAT(table, HasSubstr("(no markers)"));
  EXPECT_THAT(table, HasSubstr("     all  evil?[31m"));
  EXPECT_THAT(table, HasSubstr("straggler: cannot tell who the pod waits for: one host: nothing "
                               "to compare it with\n"));
  EXPECT_THAT(table, HasSubstr("input-bound: cannot tell whether a host waits for input more than "
                               "the others: one host"));
  EXPECT_THAT(table, HasSubstr("warnings: 1\n  evil?[31m: no step markers?: one whole-window"));
}

TEST(BreakdownTableTest, WhatATraceLostIsListedBeforeTheCutOfWarnings) {
  // Seven warnings, five shown: the rank whose GPU tracing was held by another tool (a trace
  // error, data missing) comes first, ahead of the pod's and a host's late start.
  PodBreakdown b = MakePod(2, 4);
  b.warnings = {"1 steps are not complete on every host", "the pod's step time is over 3 steps"};
  b.hosts[0].warnings = {"trace warning: capture started 1005 us after the requested start",
                         "trace warning: the stop came 7668 us after the window's end"};
  b.hosts[1].warnings = {"trace warning: capture started 900 us after the requested start",
                         "trace error: cupti pid 7 (rank 3): connection lost during the capture",
                         "trace error: cupti pid 8 (rank 4): GPU tracing unavailable: held by "
                         "another CUPTI subscriber (Nsight Systems)"};
  const std::string table = FormatBreakdownTable(b, BreakdownContext());
  const size_t list =
      table.find("warnings: 7 (5 shown, what traces lost first; all in pod_step_breakdown.json)\n");
  ASSERT_NE(list, std::string::npos) << table;
  const std::string shown = table.substr(list);
  EXPECT_THAT(shown,
              HasSubstr(absl::StrCat("\n  ", b.hosts[1].host,
                                     ": trace error: cupti pid 7 "
                                     "(rank 3): connection lost during the capture\n  ",
                                     b.hosts[1].host, ": trace error: cupti pid 8 (rank 4)")));
  EXPECT_THAT(shown, HasSubstr("held by another CUPTI subscriber (Nsight Systems)"));
  EXPECT_THAT(shown, HasSubstr("1 steps are not complete on every host"));
  // The rest in their order: the pod's, then each host's; the last two left out.
  EXPECT_THAT(shown, HasSubstr("capture started 1005 us"));
  EXPECT_THAT(shown, Not(HasSubstr("the stop came 7668 us")));
  EXPECT_THAT(shown, Not(HasSubstr("capture started 900 us")));
}

TEST(BreakdownTableTest, TracesOfDifferentRunsGiveNoPodStepTime) {
  PodBreakdown b = MakePod(2, 4);
  EXPECT_THAT(FormatBreakdownTable(b, BreakdownContext()), HasSubstr("ms mean"));
  b.verdict.evidence.different_runs = true;
  const std::string table = FormatBreakdownTable(b, BreakdownContext());
  EXPECT_THAT(table, HasSubstr("; not one run: no pod step time (each host's line is its own)\n"));
  EXPECT_THAT(table, Not(HasSubstr("ms mean")));
}

TEST(BreakdownTableTest, EmptyBreakdownSaysSo) {
  PodBreakdown b;
  b.warnings = {"no host had a readable trace"};
  const std::string table = FormatBreakdownTable(b, BreakdownContext());
  EXPECT_THAT(table, HasSubstr("pod step breakdown: 0 hosts, 0 steps\n"));
  EXPECT_THAT(table, HasSubstr("warnings: 1\n  no host had a readable trace\n"));
}

TEST(BreakdownTableTest, ShortensLongHostNames) {
  PodBreakdown b = MakePod(2, 1);
  const std::string long_name(200, 'x');
  b.steps[0].hosts[0].host = long_name;
  b.hosts[0].host = long_name;
  TableOptions opt;
  opt.max_host_width = 20;
  const std::string table = FormatBreakdownTable(b, BreakdownContext(), opt);
  EXPECT_THAT(table, HasSubstr("xxxxxxxx...xxxxxxxxx "));
  EXPECT_THAT(table, Not(HasSubstr(std::string(21, 'x'))));
}

// --- Registry ------------------------------------------------------------------------------------

TEST(BreakdownOutputsTest, NamesEachFileOnce) {
  const PodBreakdown b = MakePod(2, 2);
  const BreakdownContext ctx = Context();
  const auto outputs = BreakdownOutputs();
  ASSERT_EQ(outputs.size(), 3u);
  EXPECT_EQ(outputs[0].file_name, "pod_step_breakdown.json");
  EXPECT_EQ(outputs[0].render(b, ctx), BreakdownJson(b, ctx));
  EXPECT_EQ(outputs[1].file_name, "pod_step_breakdown.csv");
  EXPECT_EQ(outputs[1].render(b, ctx), BreakdownCsv(b));
  EXPECT_EQ(outputs[2].file_name, "report.html");
  EXPECT_EQ(outputs[2].render(b, ctx), HtmlReport(b, ctx));
}

// --- The hang verdict (analysis/hang_verdict.h) -------------------------------------------------

// worker-1 never entered all-reduce #1 of step 5, worker-0 waits in it, worker-2 has no trace.
analysis::HangReport MakeHang() {
  using analysis::CollectiveId;
  using analysis::CollectiveKind;
  using analysis::HangRank;
  const int64_t since = int64_t{1'796'212'867} * 1'000'000'000 + 123 * kMs;  // 12:01:07.123 UTC
  analysis::HangReport h;
  h.verdict = analysis::HangVerdictKind::kHung;
  h.collective = CollectiveId{5, CollectiveKind::kAllReduce, 1};
  h.waiting_ranks = 1;
  h.waiting_since_ns = since;
  h.summary =
      "worker-1 (rank 1) never entered all-reduce #1 of step 5; 1 rank waits in it since "
      "12:01:07.123 UTC";
  const analysis::CollectiveAt step4{CollectiveId{4, CollectiveKind::kAllReduce, 1}, since - 70};
  h.ranks.push_back({"worker-0", 0, HangRank::Role::kWaiting, true,
                     analysis::CollectiveAt{h.collective, since}, step4, false, std::nullopt});
  h.ranks.push_back(
      {"worker-1", 1, HangRank::Role::kNeverEntered, true, step4, step4, false, std::nullopt});
  h.ranks.push_back({"worker-2", 2, HangRank::Role::kUnknown, false, std::nullopt, std::nullopt,
                     false, std::nullopt});
  return h;
}

TEST(BreakdownHangTest, JsonNamesTheHungRanksTheWaitersAndWhereEachStood) {
  const Struct unjudged = ParseStruct(BreakdownJson(MakePod(3, 5), Context()));
  EXPECT_FALSE(unjudged.fields().contains("hang"));  // not judged
  EXPECT_EQ(
      Field(Field(Field(unjudged, "verdict").struct_value(), "hang").struct_value(), "finding")
          .string_value(),
      "cannot_tell");
  analysis::HangReport report = MakeHang();
  const Struct doc = ParseStruct(BreakdownJson(MakePod(3, 5, 1, {report}), Context()));
  const Struct& hang = Field(doc, "hang").struct_value();
  EXPECT_EQ(Field(hang, "verdict").string_value(), "hung");
  EXPECT_EQ(Field(hang, "summary").string_value(), report.summary);
  EXPECT_EQ(Field(Field(Field(doc, "verdict").struct_value(), "hang").struct_value(), "finding")
                .string_value(),
            "found");
  const auto& hung = Field(hang, "hung_ranks").list_value().values();
  ASSERT_EQ(hung.size(), 1);
  EXPECT_EQ(Field(hung[0].struct_value(), "host").string_value(), "worker-1");
  EXPECT_EQ(Field(hung[0].struct_value(), "rank").number_value(), 1);
  const auto& unknown = Field(hang, "unknown_ranks").list_value().values();
  ASSERT_EQ(unknown.size(), 1);
  EXPECT_EQ(Field(unknown[0].struct_value(), "host").string_value(), "worker-2");
  EXPECT_EQ(Field(hang, "waiting_ranks").number_value(), 1);
  EXPECT_EQ(Field(hang, "waiting_since_utc").string_value(), "2026-12-02T12:01:07.123Z");
  const Struct& collective = Field(hang, "collective").struct_value();
  EXPECT_EQ(Field(collective, "step").number_value(), 5);
  EXPECT_EQ(Field(collective, "kind").string_value(), "all-reduce");
  EXPECT_EQ(Field(collective, "index").number_value(), 1);
  EXPECT_EQ(Field(collective, "name").string_value(), "all-reduce #1 of step 5");
  const auto& ranks = Field(hang, "ranks").list_value().values();
  ASSERT_EQ(ranks.size(), 3);
  EXPECT_EQ(Field(ranks[1].struct_value(), "role").string_value(), "never_entered");
  const Struct& entered = Field(ranks[1].struct_value(), "last_entered").struct_value();
  EXPECT_EQ(Field(entered, "step").number_value(), 4);
  EXPECT_EQ(Field(ranks[2].struct_value(), "role").string_value(), "unknown");
  EXPECT_FALSE(Field(ranks[2].struct_value(), "has_trace").bool_value());
  EXPECT_TRUE(Field(ranks[1].struct_value(), "has_trace").bool_value());
  EXPECT_EQ(Field(ranks[2].struct_value(), "last_entered").kind_case(), Value::kNullValue);

  // Judged, no hang: the object says so, with nulls where a verdict would be.
  report.verdict = analysis::HangVerdictKind::kNone;
  report.summary = "no hang: every collective a rank entered completed in the window";
  const Struct none_doc = ParseStruct(BreakdownJson(MakePod(3, 5, 1, {report}), Context()));
  const Struct none = Field(none_doc, "hang").struct_value();
  EXPECT_EQ(
      Field(Field(Field(none_doc, "verdict").struct_value(), "hang").struct_value(), "finding")
          .string_value(),
      "none");
  EXPECT_EQ(Field(none, "verdict").string_value(), "none");
  EXPECT_EQ(Field(none, "collective").kind_case(), Value::kNullValue);
  EXPECT_EQ(Field(none, "waiting_since_ns").kind_case(), Value::kNullValue);
}

TEST(BreakdownHangTest, TableSaysTheVerdictAfterTheStragglerOnlyWhenThereIsOne) {
  analysis::HangReport report = MakeHang();
  const std::string table = FormatBreakdownTable(MakePod(3, 5, 1, {report}), Context());
  const size_t straggler = table.find("straggler: ");
  const size_t hang = table.find(
      "hang: worker-1 (rank 1) never entered all-reduce #1 of step 5; "
      "1 rank waits in it since 12:01:07.123 UTC\n");
  ASSERT_NE(hang, std::string::npos) << table;
  EXPECT_LT(straggler, hang);
  EXPECT_THAT(table, HasSubstr("  worker-1 (rank 1) never entered: last entered all-reduce #1 of "
                               "step 4 at 12:01:07.122 UTC; last completed all-reduce #1 of step "
                               "4 at 12:01:07.122 UTC\n"));
  EXPECT_THAT(table, HasSubstr("  worker-2 (rank 2): no trace\n"));
  EXPECT_THAT(table, HasSubstr("  worker-0 (rank 0) waits: last entered all-reduce #1 of step 5 "
                               "at 12:01:07.123 UTC"));
  EXPECT_THAT(table, HasSubstr("  evidence: "));
  report.verdict = analysis::HangVerdictKind::kNone;
  EXPECT_THAT(FormatBreakdownTable(MakePod(3, 5, 1, {report}), Context()),
              Not(HasSubstr("\nhang: ")));
}

TEST(BreakdownHangTest, CannotTellIsSaidWithWhatWasMissingNoHangIsNot) {
  analysis::HangReport report = MakeHang();
  report.verdict = analysis::HangVerdictKind::kCannotTell;
  report.missing = analysis::HangMissing::kWindowAfterHang;
  report.evidence.signal_hosts = 3;
  report.evidence.stalled = true;
  report.evidence.last_step_end_ns = report.waiting_since_ns;
  report.summary =
      "no step ended on any rank since 12:01:07.123 UTC; the window starts after the hang: take "
      "`capture --last` covering that instant";
  for (analysis::HangRank& r : report.ranks) r.role = analysis::HangRank::Role::kOther;
  const PodBreakdown b = MakePod(3, 5, 1, {report});
  EXPECT_EQ(b.verdict.hang.finding, analysis::Finding::kCannotTell);
  const std::string table = FormatBreakdownTable(b, Context());
  EXPECT_THAT(table, HasSubstr("\nhang: no step ended on any rank since 12:01:07.123 UTC; the "
                               "window starts after the hang: take `capture --last` covering that "
                               "instant\n"));
  EXPECT_THAT(table, Not(HasSubstr("never entered")));  // no rank is judged
  const Struct doc = ParseStruct(BreakdownJson(b, Context()));
  const Struct hang = Field(doc, "hang").struct_value();
  EXPECT_EQ(Field(hang, "verdict").string_value(), "cannot_tell");
  EXPECT_EQ(Field(hang, "missing").string_value(), "window_after_hang");
  EXPECT_EQ(Field(Field(Field(doc, "verdict").struct_value(), "hang").struct_value(), "finding")
                .string_value(),
            "cannot_tell");
  const Struct& evidence = Field(hang, "evidence").struct_value();
  EXPECT_TRUE(Field(evidence, "stalled").bool_value());
  EXPECT_EQ(Field(evidence, "step_signal_ranks").number_value(), 3);
  EXPECT_EQ(Field(evidence, "pace").string_value(), "unknown");
  EXPECT_EQ(Field(evidence, "median_step_ms").kind_case(), Value::kNullValue);
  EXPECT_EQ(Field(evidence, "last_step_end_utc").string_value(), "2026-12-02T12:01:07.123Z");
  EXPECT_EQ(Field(hang, "collective").kind_case(), Value::kNullValue);
  // "No hang": no line, and no `missing`.
  report.verdict = analysis::HangVerdictKind::kNone;
  report.missing = analysis::HangMissing::kNothing;
  const PodBreakdown none = MakePod(3, 5, 1, {report});
  EXPECT_EQ(none.verdict.hang.finding, analysis::Finding::kNone);
  EXPECT_THAT(FormatBreakdownTable(none, Context()), Not(HasSubstr("\nhang: ")));
  EXPECT_EQ(
      Field(Field(ParseStruct(BreakdownJson(none, Context())), "hang").struct_value(), "missing")
          .kind_case(),
      Value::kNullValue);
}

}  // namespace
}  // namespace profctl::report
