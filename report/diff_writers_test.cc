#include "report/diff_writers.h"

#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "rapidjson/document.h"
#include "report/short_names.h"
#include "tests/test_time.h"

namespace profctl::report {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

using ::profctl::test_time::kMs;

// w0 on both sides (step 100 -> 80 ms, compute 60 -> 50, input 10 -> 15), w2 only in A,
// w3 only in B; the straggler moves from w0 (compute) to w3 (input); one kernel and one op.
analysis::Diff SampleDiff() {
  analysis::Diff d;
  d.headline = {.what = analysis::DiffHeadline::What::kTransfer,
                .name = "device-to-device copies",
                .ns_per_step = {kMs / 10, 151 * kMs / 10},
                .milli_count_per_step = {18'000, 4'608'000},
                .sentence = "device-to-device copies +15.0 ms per step (18 -> 4,608 a step)"};
  d.pairing = analysis::HostPairing::kName;
  d.pairing_note = "only in A: w2; only in B: w3";
  d.pod_steps = {10, 20};
  d.pod_step_time_ns = {100 * kMs, 80 * kMs};
  d.pod_hosts = {2, 2};
  d.pod_categories[static_cast<size_t>(analysis::Category::kDeviceToDevice)] = {kMs / 10, 15 * kMs};
  d.straggler_a = {.host = "w0", .steps = 8, .cause = analysis::Category::kCompute};
  d.straggler_b = {.host = "w3", .steps = 12, .cause = analysis::Category::kInput};
  d.straggler_changed = true;
  d.consistently_slow_a = {"w0"};
  d.outliers = {{.host = "w0",
                 .category = analysis::Category::kCompute,
                 .in_a = true,
                 .in_b = false,
                 .median_excess_ns = {20 * kMs, 0}},
                {.host = "w3",
                 .category = analysis::Category::kInput,
                 .in_a = false,
                 .in_b = true,
                 .median_excess_ns = {0, 12 * kMs}}};
  analysis::HostDiff w0;
  w0.host = "w0";
  w0.host_a = w0.host_b = "w0";
  w0.pairing = analysis::HostPairing::kName;
  w0.in_a = w0.in_b = true;
  w0.steps = {10, 20};
  w0.step_time_ns = {100 * kMs, 80 * kMs};
  w0.categories[static_cast<size_t>(analysis::Category::kCompute)] = {60 * kMs, 50 * kMs};
  w0.categories[static_cast<size_t>(analysis::Category::kInput)] = {10 * kMs, 15 * kMs};
  w0.straggler_steps = {8, 0};
  w0.cause_a = analysis::Category::kCompute;
  analysis::HostDiff w2;
  w2.host = "w2";
  w2.in_a = true;
  w2.steps = {10, 0};
  w2.step_time_ns = {90 * kMs, 0};
  analysis::HostDiff w3;
  w3.host = "w3";
  w3.in_b = true;
  w3.steps = {0, 20};
  w3.step_time_ns = {0, 85 * kMs};
  w3.straggler_steps = {0, 12};
  w3.cause_b = analysis::Category::kInput;
  d.hosts = {w0, w2, w3};
  d.has_tools = true;
  analysis::NameDiff k;
  k.name = "volta_sgemm_128x64_nn, \"quoted\"";
  k.ns_per_step = {4 * kMs, 2500 * 1000};
  k.total_ns = {40 * kMs, 50 * kMs};
  k.occurrences = {10, 20};
  analysis::NameDiff copy;
  copy.name = "Memcpy DtoD (Device -> Device)";
  copy.transfer = analysis::TransferKind::kDeviceToDevice;
  copy.ns_per_step = {kMs / 10, 151 * kMs / 10};
  copy.total_ns = {kMs, 302 * kMs};
  copy.occurrences = {180, 92'160};
  d.kernels = {copy, k};
  d.transfers = {{.kind = analysis::TransferKind::kDeviceToDevice,
                  .ns_per_step = {kMs / 10, 151 * kMs / 10},
                  .total_ns = {kMs, 302 * kMs},
                  .occurrences = {180, 92'160}}};
  analysis::NameDiff o;
  o.name = "aten::mm";
  o.ns_per_step = {0, 1 * kMs};
  d.ops = {o};
  return d;
}

const rapidjson::Value& Member(const rapidjson::Value& v, const char* key) {
  EXPECT_TRUE(v.HasMember(key)) << key;
  return v[key];
}

TEST(DiffJsonTest, ParsesAndHoldsTheNumbers) {
  const std::string json = DiffJson(SampleDiff(), {.a = "runs/a", .b = "runs/b"});
  rapidjson::Document doc;
  doc.Parse(json.c_str());
  ASSERT_FALSE(doc.HasParseError()) << json;
  EXPECT_EQ(Member(doc, "schema_version").GetInt(), 2);
  EXPECT_STREQ(Member(doc, "a").GetString(), "runs/a");
  const rapidjson::Value& headline = Member(doc, "headline");
  EXPECT_STREQ(headline["sentence"].GetString(),
               "device-to-device copies +15.0 ms per step (18 -> 4,608 a step)");
  EXPECT_STREQ(headline["what"].GetString(), "transfer");
  EXPECT_DOUBLE_EQ(headline["ms_per_step"]["delta"].GetDouble(), 15.0);
  EXPECT_DOUBLE_EQ(headline["count_per_step"]["b"].GetDouble(), 4608.0);
  EXPECT_STREQ(doc["pairing"]["method"].GetString(), "name");
  EXPECT_STREQ(doc["pairing"]["note"].GetString(), "only in A: w2; only in B: w3");
  EXPECT_EQ(doc["pod"]["hosts"]["a"].GetInt(), 2);
  EXPECT_DOUBLE_EQ(doc["pod"]["categories_ms"]["d2d"]["delta"].GetDouble(), 14.9);
  const rapidjson::Value& pod = Member(doc, "pod");
  EXPECT_EQ(pod["steps"]["delta"].GetInt(), 10);
  EXPECT_DOUBLE_EQ(pod["step_time_ms"]["delta"].GetDouble(), -20.0);
  EXPECT_DOUBLE_EQ(pod["step_time_ms"]["pct"].GetDouble(), -20.0);
  const rapidjson::Value& straggler = Member(doc, "straggler");
  EXPECT_STREQ(straggler["a"]["host"].GetString(), "w0");
  EXPECT_STREQ(straggler["a"]["cause"].GetString(), "compute");
  EXPECT_STREQ(straggler["b"]["cause"].GetString(), "input");
  EXPECT_TRUE(straggler["changed"].GetBool());
  EXPECT_STREQ(doc["consistently_slow"]["a"][0].GetString(), "w0");
  const rapidjson::Value& out = Member(doc, "stands_out");
  ASSERT_EQ(out.Size(), 2u);
  EXPECT_STREQ(out[0]["category"].GetString(), "compute");
  EXPECT_DOUBLE_EQ(out[0]["median_excess_ms"]["a"].GetDouble(), 20.0);
  EXPECT_TRUE(out[0]["median_excess_ms"]["b"].IsNull());
  EXPECT_FALSE(out[1]["in_a"].GetBool());
  const rapidjson::Value& hosts = Member(doc, "hosts");
  ASSERT_EQ(hosts.Size(), 3u);
  const rapidjson::Value& w0 = hosts[0];
  EXPECT_DOUBLE_EQ(w0["step_time_ms"]["a"].GetDouble(), 100.0);
  EXPECT_STREQ(w0["host_a"].GetString(), "w0");
  EXPECT_STREQ(w0["pairing"].GetString(), "name");
  EXPECT_TRUE(w0["rank"]["a"].IsNull());
  EXPECT_DOUBLE_EQ(w0["categories_ms"]["input"]["delta"].GetDouble(), 5.0);
  EXPECT_DOUBLE_EQ(w0["categories_ms"]["input"]["pct"].GetDouble(), 50.0);
  EXPECT_TRUE(w0["categories_ms"]["idle"]["pct"].IsNull());  // 0 -> 0: no base
  EXPECT_STREQ(w0["cause"]["a"].GetString(), "compute");
  EXPECT_TRUE(w0["cause"]["b"].IsNull());
  // One side only: the other side and the change are null.
  const rapidjson::Value& w2 = hosts[1];
  EXPECT_FALSE(w2["in_b"].GetBool());
  EXPECT_DOUBLE_EQ(w2["step_time_ms"]["a"].GetDouble(), 90.0);
  EXPECT_TRUE(w2["step_time_ms"]["b"].IsNull());
  EXPECT_TRUE(w2["step_time_ms"]["delta"].IsNull());
  EXPECT_TRUE(hosts[2]["step_time_ms"]["a"].IsNull());
  const rapidjson::Value& kernels = Member(doc, "kernels");
  ASSERT_EQ(kernels.Size(), 2u);
  EXPECT_STREQ(kernels[0]["kind"].GetString(), "copy d2d");
  EXPECT_STREQ(kernels[1]["kind"].GetString(), "kernel");
  EXPECT_STREQ(kernels[1]["name"].GetString(), "volta_sgemm_128x64_nn, \"quoted\"");
  EXPECT_DOUBLE_EQ(kernels[1]["ms_per_step"]["delta"].GetDouble(), -1.5);
  EXPECT_EQ(kernels[1]["occurrences"]["b"].GetInt(), 20);
  EXPECT_TRUE(doc["ops"][0]["ms_per_step"]["pct"].IsNull());
  EXPECT_STREQ(doc["ops"][0]["kind"].GetString(), "op");
  const rapidjson::Value& transfers = Member(doc, "transfers");
  ASSERT_EQ(transfers.Size(), 1u);
  EXPECT_STREQ(transfers[0]["kind"].GetString(), "device-to-device copies");
  EXPECT_EQ(transfers[0]["occurrences"]["b"].GetInt(), 92'160);
}

TEST(DiffTableTest, SaysWhatChangedAndListsOneSidedHosts) {
  const std::string table = FormatDiffTable(SampleDiff(), {.a = "runs/a", .b = "runs/b"});
  // What changed most comes first.
  EXPECT_TRUE(absl::StartsWith(
      table, "changed most: device-to-device copies +15.0 ms per step (18 -> 4,608 a step)\n"))
      << table;
  EXPECT_THAT(table, HasSubstr("hosts: 2 -> 2, paired by name; only in A: w2; only in B: w3"));
  EXPECT_THAT(table, HasSubstr("pod, average host per step (ms): d2d 0.100 -> 15.000 (+14.900)"));
  EXPECT_THAT(table, HasSubstr("copy d2d Memcpy DtoD (Device -> Device)"));
  EXPECT_THAT(table, HasSubstr("18->4,608"));  // its count a step
  EXPECT_THAT(table, HasSubstr("device-to-device copies: 0.100 -> 15.100 (+15.000); 18 -> 4,608"));
  EXPECT_THAT(table, HasSubstr("A: runs/a"));
  EXPECT_THAT(table,
              HasSubstr("10 -> 20 steps; step time 100.000 -> 80.000 ms (-20.000 ms, -20.0%)"));
  EXPECT_THAT(table, HasSubstr("straggler: w0 (compute, 8 steps) -> w3 (input, 12 steps)  "
                               "[straggler changed]"));
  EXPECT_THAT(table, HasSubstr("w0 compute +20.000 ms -> no longer"));
  EXPECT_THAT(table, HasSubstr("w3 input now +12.000 ms"));
  EXPECT_THAT(table, HasSubstr("+5.000 +50.0%"));   // w0's input
  EXPECT_THAT(table, HasSubstr("-10.000 -16.7%"));  // w0's compute
  EXPECT_THAT(table, HasSubstr("only in A: 10 steps, step 90.000 ms"));
  EXPECT_THAT(table, HasSubstr("only in B: 20 steps, step 85.000 ms"));
  EXPECT_THAT(table, HasSubstr("-1.500"));
  EXPECT_THAT(table, Not(HasSubstr(" d2d\n")));  // no time on any host: no column
  EXPECT_THAT(table, HasSubstr("aten::mm"));
  EXPECT_THAT(table, HasSubstr("new"));  // aten::mm had no time in A
  // Without tools the kernels are said to be missing, not shown empty.
  analysis::Diff no_tools = SampleDiff();
  no_tools.has_tools = false;
  no_tools.kernels.clear();
  no_tools.ops.clear();
  const std::string t2 = FormatDiffTable(no_tools, {});
  EXPECT_THAT(t2, HasSubstr("not compared"));
  EXPECT_THAT(t2, Not(HasSubstr("aten::mm")));
}

TEST(DiffCsvTest, HeaderThenOneRowPerValue) {
  const std::string csv = DiffCsv(SampleDiff());
  const std::vector<std::string> lines = absl::StrSplit(csv, '\n', absl::SkipEmpty());
  ASSERT_FALSE(lines.empty());
  EXPECT_EQ(lines[0], "kind,host,name,a,b,delta,pct");
  // headline + pairing + 10 pod (steps, step time, hosts, 7 categories) + 2 straggler + 2 stands
  // out + 3 hosts x (steps, step time, 7 categories, straggler steps) + 2 kernel list + 1 op +
  // 2 transfer (time, count).
  EXPECT_EQ(lines.size(), 1u + 1 + 1 + 10 + 2 + 2 + 3 * 10 + 2 + 1 + 2);
  EXPECT_EQ(lines[1], "headline,,device-to-device copies,0.100,15.100,15.000,15000.0");
  EXPECT_EQ(lines[2], "pairing,,method,name,,,");
  EXPECT_THAT(lines, ::testing::Contains("pod,,d2d_ms,0.100,15.000,14.900,14900.0"));
  EXPECT_THAT(lines,
              ::testing::Contains(
                  "transfer_row,,Memcpy DtoD (Device -> Device),0.100,15.100,15.000,15000.0"));
  EXPECT_THAT(lines,
              ::testing::Contains("transfer,,device-to-device copies,0.100,15.100,15.000,15000.0"));
  EXPECT_THAT(lines, ::testing::Contains(
                         "transfer,,device-to-device copies count,180,92160,91980,51100.0"));
  EXPECT_THAT(lines, ::testing::Contains("stands_out,w0,compute_excess_ms,20.000,,,"));
  EXPECT_THAT(lines, ::testing::Contains("pod,,steps,10,20,10,100.0"));
  EXPECT_THAT(lines, ::testing::Contains("pod,,step_time_ms,100.000,80.000,-20.000,-20.0"));
  EXPECT_THAT(lines, ::testing::Contains("straggler,,host,w0,w3,,"));
  EXPECT_THAT(lines, ::testing::Contains("straggler,,cause,compute,input,,"));
  EXPECT_THAT(lines, ::testing::Contains("host,w0,input_ms,10.000,15.000,5.000,50.0"));
  EXPECT_THAT(lines, ::testing::Contains("host,w0,idle_ms,0.000,0.000,0.000,"));
  EXPECT_THAT(lines, ::testing::Contains("host,w2,step_time_ms,90.000,,,"));  // only in A
  EXPECT_THAT(lines, ::testing::Contains("host,w3,step_time_ms,,85.000,,"));  // only in B
  EXPECT_THAT(lines,
              ::testing::Contains(
                  "kernel,,\"volta_sgemm_128x64_nn, \"\"quoted\"\"\",4.000,2.500,-1.500,-37.5"));
  EXPECT_THAT(lines, ::testing::Contains("op,,aten::mm,0.000,1.000,1.000,"));
}

TEST(DiffHtmlTest, ASelfContainedPageWithEscapedNames) {
  analysis::Diff d = SampleDiff();
  d.hosts[0].host = "<script>alert(1)</script>";
  const std::string html = DiffHtml(d, {.a = "runs/a&b", .b = "runs/b"});
  EXPECT_TRUE(absl::StartsWith(html, "<!DOCTYPE html>"));
  EXPECT_THAT(html, HasSubstr("</html>"));
  EXPECT_THAT(html, Not(HasSubstr("<script")));  // no script at all, names escaped
  EXPECT_THAT(html, HasSubstr("&lt;script&gt;alert(1)&lt;/script&gt;"));
  EXPECT_THAT(html, HasSubstr("runs/a&amp;b"));
  EXPECT_THAT(html, Not(HasSubstr("://")));  // nothing fetched
  // The empty data: icon (which keeps a browser from asking for /favicon.ico) is the one thing
  // the policy lets the page load; without img-src the browser logs a violation.
  EXPECT_THAT(html, HasSubstr("<link rel=\"icon\" href=\"data:,\">"));
  EXPECT_THAT(
      html, HasSubstr("content=\"default-src 'none'; style-src 'unsafe-inline'; img-src data:\""));
  EXPECT_THAT(html, HasSubstr("straggler changed"));
  EXPECT_THAT(html, HasSubstr("Stands out: w3 input now +12.000 ms"));
  EXPECT_THAT(html, HasSubstr("only in A"));
  EXPECT_THAT(html, HasSubstr("only in B"));
  EXPECT_THAT(html, HasSubstr("device-to-device copies +15.0 ms per step (18 -&gt; 4,608 a step)"));
  EXPECT_THAT(html, HasSubstr("Hosts: paired by name; only in A: w2; only in B: w3"));
  // Every number with fixed decimals and its unit.
  EXPECT_THAT(html, HasSubstr(">+5.000 ms<"));
  EXPECT_THAT(html, HasSubstr(">-20.0 %<"));
  EXPECT_THAT(html, HasSubstr(">-1.500 ms<"));
  EXPECT_THAT(html, HasSubstr(">volta_sgemm_128x64_nn, &quot;quoted&quot;<"));
  // The hosts' chart, inline (no script draws it).
  EXPECT_THAT(html, HasSubstr("<svg class=\"diff-chart\""));
  EXPECT_THAT(html, HasSubstr("<rect class=\"seg\""));
}

// Long template kernel names that differ in their middle stay distinct on the page, each whole
// in its cell's title.
TEST(DiffHtmlTest, LongKernelNamesStayDistinctWithTheWholeNameOnHover) {
  analysis::Diff d = SampleDiff();
  d.kernels.clear();
  for (const char* functor : {"FillFunctor<float>", "CUDAFunctor_add<float>"}) {
    analysis::NameDiff k;
    k.name = absl::StrCat("void at::native::vectorized_elementwise_kernel<4, at::native::", functor,
                          ", at::detail::Array<char*, 3ul> >(int, at::native::", functor,
                          ", at::detail::Array<char*, 3ul>)");
    k.ns_per_step = {kMs, 2 * kMs};
    d.kernels.push_back(k);
  }
  const std::string html = DiffHtml(d, {.a = "a", .b = "b"});
  const auto escaped = [](absl::string_view s) {
    return absl::StrReplaceAll(s, {{"&", "&amp;"}, {"<", "&lt;"}, {">", "&gt;"}, {"\"", "&quot;"}});
  };
  const std::vector<std::string> shown =
      DistinctShortNames({d.kernels[0].name, d.kernels[1].name}, 72);
  EXPECT_NE(shown[0], shown[1]);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_THAT(html, HasSubstr(absl::StrCat("title=\"", escaped(d.kernels[i].name), "\">",
                                             escaped(shown[i]), "</td>")));
  }
  EXPECT_THAT(shown[0], HasSubstr("FillFunctor"));
}

}  // namespace
}  // namespace profctl::report
