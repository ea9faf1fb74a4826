#include "report/tool_writers.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "rapidjson/document.h"
#include "report/json_out.h"
#include "tests/test_time.h"

namespace profctl::report {
namespace {

using analysis::HostTools;
using analysis::PodTools;
using analysis::Tool;
using ::testing::HasSubstr;
using ::testing::Not;

using ::profctl::test_time::kMs;
using ::profctl::test_time::kUs;

PodTools KernelTools() {
  PodTools p;
  p.tool = Tool::kKernelStats;
  analysis::KernelStat k;
  k.kernel = "sm80_xmma_gemm, \"quoted\"";
  k.op = "aten::linear";
  k.registers_per_thread = 128;
  k.shared_memory_bytes = 4096;
  k.grid = {64, 2, 1};
  k.block = {256, 1, 1};
  k.occupancy_pct = 25;
  k.tensor_core_used = k.tensor_core_eligible = true;
  k.occurrences = 3;
  k.total_ns = 600 * kUs + 1;  // 600.001 us: rounds to 600.001 in JSON
  k.min_ns = 100 * kUs;
  k.max_ns = 300 * kUs;
  HostTools h;
  h.host = "worker-\x1b[31m0";
  h.kernels = {k};
  h.warnings = {"something dropped"};
  p.kernels = {k};
  p.hosts = {h};
  return p;
}

rapidjson::Document Parse(const std::string& json) {
  rapidjson::Document d;
  d.Parse(json.c_str());
  EXPECT_FALSE(d.HasParseError()) << json;
  return d;
}

// One table of tools (analysis/tools/tools.cc) and one of writers (tool_writers.cc), keyed the
// same way: a tool added to one and not the other fails here, not in a user's hands.
TEST(ToolWritersTest, EveryToolHasItsWritersInTheToolTablesOrder) {
  std::vector<Tool> tools;
  for (const analysis::ToolInfo& t : analysis::AllTools()) tools.push_back(t.tool);
  EXPECT_EQ(ToolsWithWriters(), tools);
  for (const analysis::ToolInfo& t : analysis::AllTools()) {
    PodTools p;
    p.tool = t.tool;
    EXPECT_THAT(ToolJson(p, {"s"}), HasSubstr(absl::StrCat("\"", t.name, "\"")));
    EXPECT_THAT(FormatToolTable(p, {"s"}), HasSubstr(absl::StrCat("profctl ", t.name, ":")));
    EXPECT_THAT(ToolCsv(p), HasSubstr("host,"));
  }
}

TEST(ToolWritersTest, KernelStatsJsonCsvAndTable) {
  const PodTools p = KernelTools();
  const rapidjson::Document d = Parse(ToolJson(p, ToolContext{"run1"}));
  EXPECT_EQ(d["schema_version"].GetInt(), PodTools::kSchemaVersion);
  EXPECT_STREQ(d["tool"].GetString(), "kernel_stats");
  EXPECT_STREQ(d["session"].GetString(), "run1");
  const auto& row = d["kernels"][0];
  EXPECT_EQ(row["kernel"].GetString(), p.kernels[0].kernel);
  EXPECT_EQ(row["registers_per_thread"].GetInt(), 128);
  EXPECT_EQ(row["grid"][1].GetInt(), 2);
  EXPECT_DOUBLE_EQ(row["total_us"].GetDouble(), 600.001);
  EXPECT_DOUBLE_EQ(row["avg_us"].GetDouble(), 200.0);
  EXPECT_TRUE(row["tensor_core_used"].GetBool());
  EXPECT_EQ(d["per_host"][0]["kernels"].Size(), 1u);
  EXPECT_EQ(d["warnings"].Size(), 1u);

  const std::string csv = ToolCsv(p);
  const std::vector<std::string> lines = absl::StrSplit(csv, '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0],
            "host,kernel,op,registers_per_thread,shared_memory_bytes,grid,block,occupancy_pct,"
            "tensor_core_eligible,tensor_core_used,occurrences,total_us,avg_us,min_us,max_us,"
            "pct,cum_pct");
  EXPECT_THAT(lines[1], HasSubstr("\"sm80_xmma_gemm, \"\"quoted\"\"\",aten::linear,128,4096,"
                                  "64x2x1,256x1x1,25.00,true,true,3,600.001,200.000,100.000,"
                                  "300.000"));

  const std::string table = FormatToolTable(p, ToolContext{"run1"});
  EXPECT_THAT(table, HasSubstr("aten::linear"));
  EXPECT_THAT(table, HasSubstr("0.600"));
  EXPECT_THAT(table, Not(HasSubstr("\x1b")));  // control characters never reach the terminal
}

TEST(ToolWritersTest, KernelStatsTopKernelsPercentAndNoKernels) {
  PodTools p = KernelTools();
  p.kernels[0].pct = p.kernels[0].cum_pct = 100;
  p.hosts[0].kernels = p.kernels;
  const rapidjson::Document d = Parse(ToolJson(p, {"s"}));
  ASSERT_EQ(d["top_kernels"].Size(), 1u);
  EXPECT_EQ(d["top_kernels"][0]["kernel"].GetString(), p.kernels[0].kernel);
  EXPECT_DOUBLE_EQ(d["top_kernels"][0]["total_us"].GetDouble(), 600.001);
  EXPECT_DOUBLE_EQ(d["top_kernels"][0]["pct"].GetDouble(), 100);
  EXPECT_DOUBLE_EQ(d["kernels"][0]["cum_pct"].GetDouble(), 100);
  EXPECT_EQ(d["per_host"][0]["top_kernels"].Size(), 1u);
  EXPECT_THAT(ToolCsv(p), HasSubstr(",max_us,pct,cum_pct\n"));
  EXPECT_THAT(ToolCsv(p), HasSubstr(",300.000,100.00,100.00\n"));
  const std::string table = FormatToolTable(p, {"s"});
  EXPECT_THAT(table, HasSubstr("top kernels by total time:\n"));
  EXPECT_THAT(table, HasSubstr("0.600 100.00 100.00       3 "));
  PodTools none;
  none.tool = Tool::kKernelStats;
  EXPECT_THAT(FormatToolTable(none, {"s"}), HasSubstr("no GPU kernels in the trace"));
}

PodTools OpTools(bool include_idle) {
  PodTools p;
  p.tool = Tool::kOpStats;
  p.include_idle = include_idle;
  analysis::OpStat a;
  a.name = "model/dense/MatMul:MatMul";
  a.type = "MatMul";
  a.host = true;
  a.occurrences = 1;
  a.host_total_ns = a.host_self_ns = 100 * kUs;
  a.device_total_ns = a.device_self_ns = 300 * kUs;
  analysis::OpStat b = a;
  b.name = "model/relu/Relu:Relu";
  b.type = "Relu";
  b.host_total_ns = b.host_self_ns = 100 * kUs;
  b.device_total_ns = b.device_self_ns = 100 * kUs;
  p.ops.by_op = {a, b};
  analysis::OpStat ta = a;
  ta.name = "MatMul";
  analysis::OpStat tb = b;
  tb.name = "Relu";
  p.ops.by_type = {ta, tb};
  p.ops.host_idle_ns = 800 * kUs;
  p.ops.device_idle_ns = 600 * kUs;
  HostTools h;
  h.host = "w0";
  h.ops = p.ops;
  p.hosts = {h};
  return p;
}

TEST(ToolWritersTest, OpStatsSharesIdleSwitchAndPies) {
  const rapidjson::Document off = Parse(ToolJson(OpTools(false), {"s"}));
  EXPECT_FALSE(off["include_idle"].GetBool());
  EXPECT_DOUBLE_EQ(off["idle"]["device_us"].GetDouble(), 600);
  EXPECT_DOUBLE_EQ(off["idle"]["host_us"].GetDouble(), 800);
  ASSERT_EQ(off["by_op"].Size(), 2u);
  EXPECT_DOUBLE_EQ(off["by_op"][0]["device_self_pct"].GetDouble(), 75);
  EXPECT_DOUBLE_EQ(off["by_op"][1]["device_self_cum_pct"].GetDouble(), 100);
  EXPECT_DOUBLE_EQ(off["by_op"][0]["host_self_pct"].GetDouble(), 50);
  EXPECT_STREQ(off["pie"]["device_by_type"][0]["name"].GetString(), "MatMul");
  EXPECT_DOUBLE_EQ(off["pie"]["device_by_type"][0]["pct"].GetDouble(), 75);
  EXPECT_EQ(off["pie"]["host_by_op"].Size(), 2u);
  EXPECT_STREQ(off["per_host"][0]["host"].GetString(), "w0");
  EXPECT_EQ(off["per_host"][0]["by_type"].Size(), 2u);

  // Idle included: the IDLE row (600 of 1000 device us) leads and counts in every share.
  const PodTools on_tools = OpTools(true);
  const rapidjson::Document on = Parse(ToolJson(on_tools, {"s"}));
  EXPECT_TRUE(on["include_idle"].GetBool());
  ASSERT_EQ(on["by_op"].Size(), 3u);
  EXPECT_STREQ(on["by_op"][0]["name"].GetString(), "IDLE");
  EXPECT_DOUBLE_EQ(on["by_op"][0]["device_self_pct"].GetDouble(), 60);
  EXPECT_DOUBLE_EQ(on["by_op"][1]["device_self_pct"].GetDouble(), 30);
  EXPECT_DOUBLE_EQ(on["by_op"][1]["device_self_cum_pct"].GetDouble(), 90);
  EXPECT_DOUBLE_EQ(on["by_op"][0]["host_self_pct"].GetDouble(), 80);
  EXPECT_STREQ(on["pie"]["host_by_type"][0]["name"].GetString(), "IDLE");

  const std::string csv = ToolCsv(on_tools);
  EXPECT_THAT(csv, HasSubstr("device_self_us,host_self_pct,host_self_cum_pct,device_self_pct,"
                             "device_self_cum_pct\n"));
  EXPECT_THAT(csv, HasSubstr("w0,IDLE,IDLE,false,0,800.000,800.000,600.000,600.000,80.00,80.00,"
                             "60.00,60.00\n"));
  const std::string table = FormatToolTable(on_tools, {"s"});
  EXPECT_THAT(table, HasSubstr("idle: host 0.800 ms, devices 0.600 ms (counted"));
  EXPECT_THAT(table, HasSubstr(" 60.00  60.00 "));
  EXPECT_THAT(table, HasSubstr("device self time by op type:\n   60.00%  IDLE\n"));
  EXPECT_THAT(FormatToolTable(OpTools(false), {"s"}), HasSubstr("--include-idle adds it"));
  EXPECT_TRUE(off["peak_teraflops_per_second"].IsNull());
  EXPECT_TRUE(off["by_op"][0]["flops_utilization_pct"].IsNull());

  // TPU: flops and the device's peak give the FLOPS utilization (3e9 FLOP in 300 us of a
  // 20 TFLOP/s device: 50 %).
  PodTools tpu = OpTools(false);
  tpu.ops.peak_flops_per_s = 20e12;
  tpu.ops.by_type[0].flops = 3'000'000'000;
  const rapidjson::Document t = Parse(ToolJson(tpu, {"s"}));
  EXPECT_DOUBLE_EQ(t["peak_teraflops_per_second"].GetDouble(), 20);
  EXPECT_EQ(t["by_type"][0]["flops"].GetInt64(), 3'000'000'000);
  EXPECT_DOUBLE_EQ(t["by_type"][0]["flops_utilization_pct"].GetDouble(), 50);
  EXPECT_THAT(FormatToolTable(tpu, {"s"}),
              HasSubstr("FLOPS utilization by op type (peak 20.0 TFLOP/s):\n   50.00%  MatMul\n"));
}

TEST(ToolWritersTest, OverviewJsonHasCategoriesRecommendationsAndSteps) {
  PodTools p;
  p.tool = Tool::kOverview;
  HostTools h;
  h.host = "w0";
  analysis::OverviewStep s;
  s.step = 4;
  s.step_time_ns = 10 * kMs;
  s.times[analysis::OverviewCategory::kInput] = 3 * kMs;
  s.times[analysis::OverviewCategory::kDeviceCompute] = 7 * kMs;
  s.times.compute_16bit_ns = 7 * kMs;
  h.overview.steps = {s};
  h.overview.total = s.times;
  h.overview.step_ns = s.step_time_ns;
  h.overview.environment.framework = "PyTorch";
  h.overview.environment.devices.push_back(analysis::DeviceInfo{0, "NVIDIA H100", 9, 0, 80, "", 0});
  p.hosts = {h};
  p.overview_total = s.times;
  p.overview_step_ns = s.step_time_ns;
  p.overview_steps = 1;
  p.recommendations.push_back({"input", "prefetch", "input 30.0 % of step time"});
  const rapidjson::Document d = Parse(ToolJson(p, ToolContext{"run"}));
  EXPECT_EQ(d["categories"].Size(), static_cast<unsigned>(analysis::kNumOverviewCategories));
  EXPECT_DOUBLE_EQ(d["pod"]["average_ms"]["input"].GetDouble(), 3.0);
  EXPECT_DOUBLE_EQ(d["pod"]["compute_16bit_pct"].GetDouble(), 100.0);
  EXPECT_STREQ(d["recommendations"][0]["reason"].GetString(), "input 30.0 % of step time");
  const auto& host = d["per_host"][0];
  EXPECT_STREQ(host["environment"]["devices"][0]["compute_capability"].GetString(), "9.0");
  EXPECT_EQ(host["steps"][0]["step"].GetInt(), 4);
  EXPECT_DOUBLE_EQ(host["steps"][0]["ms"]["device_compute"].GetDouble(), 7.0);

  const std::vector<std::string> csv = absl::StrSplit(ToolCsv(p), '\n', absl::SkipEmpty());
  ASSERT_EQ(csv.size(), 2u);
  EXPECT_EQ(csv[1],
            "w0,4,10.000,0.000,3.000,0.000,0.000,0.000,0.000,0.000,7.000,0.000,7.000,0.000");
  const std::string table = FormatToolTable(p, ToolContext{"run"});
  EXPECT_THAT(table, HasSubstr("because input 30.0 % of step time"));
  EXPECT_THAT(table, HasSubstr("PyTorch, 1 x NVIDIA H100"));
}

TEST(ToolWritersTest, OverviewStepTimeStatisticsAndInputRange) {
  PodTools p;
  p.tool = Tool::kOverview;
  HostTools h;
  h.host = "w0";
  h.overview.step_time = analysis::StepTimeStatsOf({10 * kMs, 20 * kMs, 30 * kMs});
  h.overview.input_by_device = {{0, 3 * kMs, 60 * kMs, 5.0}, {1, 6 * kMs, 60 * kMs, 10.0}};
  h.overview.input_range = {true, 5.0, 10.0, "w0 device 0", "w0 device 1"};
  analysis::TopEntry top;
  top.name = "model/dense/MatMul:MatMul";
  top.category = "MatMul";
  top.self_ns = 3 * kMs;
  top.pct = 60;
  top.cum_pct = 60;
  h.overview.top_ops = {top};
  p.overview_step_time = h.overview.step_time;
  p.overview_input_range = h.overview.input_range;
  HostTools cpu;  // no steps, no devices
  cpu.host = "w1";
  p.hosts = {h, cpu};
  const rapidjson::Document d = Parse(ToolJson(p, {"s"}));
  EXPECT_EQ(d["pod"]["step_time_ms"]["steps"].GetInt(), 3);
  EXPECT_DOUBLE_EQ(d["pod"]["step_time_ms"]["average"].GetDouble(), 20);
  EXPECT_DOUBLE_EQ(d["pod"]["step_time_ms"]["stddev"].GetDouble(), 8.165);
  EXPECT_DOUBLE_EQ(d["pod"]["step_time_ms"]["min"].GetDouble(), 10);
  EXPECT_DOUBLE_EQ(d["pod"]["step_time_ms"]["max"].GetDouble(), 30);
  EXPECT_DOUBLE_EQ(d["pod"]["input_wait_range"]["max_pct"].GetDouble(), 10);
  EXPECT_STREQ(d["pod"]["input_wait_range"]["min_at"].GetString(), "w0 device 0");
  const auto& host = d["per_host"][0];
  EXPECT_EQ(host["input_by_device"][1]["device"].GetInt(), 1);
  EXPECT_DOUBLE_EQ(host["input_by_device"][1]["input_ms"].GetDouble(), 6);
  EXPECT_STREQ(host["top_ops"][0]["category"].GetString(), "MatMul");
  EXPECT_DOUBLE_EQ(host["top_ops"][0]["cum_pct"].GetDouble(), 60);
  EXPECT_TRUE(d["per_host"][1]["input_wait_range"].IsNull());
  const std::string table = FormatToolTable(p, {"s"});
  EXPECT_THAT(table, HasSubstr("step time: average 20.000 ms, standard deviation 8.165 ms, "
                               "min 10.000 ms, max 30.000 ms"));
  EXPECT_THAT(table, HasSubstr("input wait across devices: 5.0% (w0 device 0) to 10.0% "
                               "(w0 device 1) of step time"));
  EXPECT_THAT(table, HasSubstr("step time: no complete steps"));
  EXPECT_THAT(table, HasSubstr("input wait across devices: no device in the steps"));
  EXPECT_THAT(table, HasSubstr(" 60.0%  60.0%  MatMul           model/dense/MatMul:MatMul"));
}

analysis::DeviceMemory ProfiledMemory() {
  analysis::DeviceMemory m;
  m.host = "w0";
  m.device = 0;
  m.peak_bytes = 4 << 20;
  m.capacity_bytes = 16 << 20;
  m.capacity_from_allocator = true;
  m.peak_heap_since_start_bytes = 5 << 20;
  m.stack_at_peak = 2 << 20;
  m.heap_at_peak = 4 << 20;
  m.free_at_peak = 10 << 20;
  m.fragmentation = {{10, 0.25}, {20, 0.5}};
  m.largest_live_at_peak.push_back(
      {0xb, 1 << 20, 20, "foo/baz", 1000000, 7, "temp", "half", "(16,32)"});
  m.by_op_at_peak.push_back({"foo/baz", 1, 1 << 20, 1000000, "temp", "half", "(16,32)"});
  return m;
}

TEST(ToolWritersTest, MemoryCapacityHeapFragmentationByOpAndWhatIsMissing) {
  PodTools p;
  p.tool = Tool::kMemory;
  HostTools h;
  h.host = "w0";
  analysis::DeviceMemory bare;
  bare.host = "w0";
  bare.device = 1;
  bare.missing = {"fragmentation over time: no allocator fragmentation stat"};
  h.memory = {ProfiledMemory(), bare};
  p.hosts = {h};
  const rapidjson::Document d = Parse(ToolJson(p, {"s"}));
  const auto& m = d["devices"][0];
  EXPECT_EQ(m["capacity_bytes"].GetInt64(), 16 << 20);
  EXPECT_STREQ(m["capacity_from"].GetString(), "allocator");
  EXPECT_EQ(m["peak_heap_since_start_bytes"].GetInt64(), 5 << 20);
  EXPECT_EQ(m["at_peak"]["stack_bytes"].GetInt64(), 2 << 20);
  EXPECT_EQ(m["at_peak"]["free_bytes"].GetInt64(), 10 << 20);
  EXPECT_DOUBLE_EQ(m["fragmentation_timeline"][1][1].GetDouble(), 0.5);
  EXPECT_EQ(m["largest_live_at_peak"][0]["requested_bytes"].GetInt64(), 1000000);
  EXPECT_STREQ(m["largest_live_at_peak"][0]["data_type"].GetString(), "half");
  EXPECT_EQ(m["largest_live_at_peak"][0]["step"].GetInt(), 7);
  EXPECT_STREQ(m["by_op_at_peak"][0]["op"].GetString(), "foo/baz");
  EXPECT_STREQ(m["by_op_at_peak"][0]["shape"].GetString(), "(16,32)");
  EXPECT_EQ(m["missing"].Size(), 0u);
  const auto& b = d["devices"][1];
  EXPECT_TRUE(b["capacity_bytes"].IsNull());
  EXPECT_TRUE(b["capacity_from"].IsNull());
  EXPECT_TRUE(b["at_peak"].IsNull());
  EXPECT_EQ(b["missing"].Size(), 1u);
  const std::string table = FormatToolTable(p, {"s"});
  EXPECT_THAT(table, HasSubstr("capacity 16.00 MiB (allocator); peak heap since start 5.00 MiB"));
  EXPECT_THAT(table, HasSubstr("at the peak: stack 2.00 MiB, heap 4.00 MiB, free 10.00 MiB"));
  EXPECT_THAT(table, HasSubstr("fragmentation over time: 2 point(s), at most 50.0%"));
  EXPECT_THAT(table, HasSubstr("1.00       1           0.95  temp       half       (16,32)        "
                               "foo/baz"));
  EXPECT_THAT(table, HasSubstr("not in this trace: fragmentation over time"));
}

// A host name with ESC, BEL, DEL or a UTF-8 C1 control (U+009B, CSI) reaches the CSV as text
// (\xNN per byte), so `--csv` on a terminal cannot be driven by it; tab, line breaks (quoted, RFC
// 4180) and other UTF-8 (é, a no-break space) pass as they are.
TEST(ToolWritersTest, CsvWritesControlCharactersAsText) {
  const auto field = [](const std::string& s) {
    std::string out;
    AppendCsvField(&out, s);
    return out;
  };
  EXPECT_EQ(field("w\x1b]0;pwned\x07x\x7f"), "w\\x1b]0;pwned\\x07x\\x7f");
  EXPECT_EQ(field("a\xc2\x9b"
                  "31mb"),
            "a\\xc2\\x9b31mb");
  EXPECT_EQ(field("x\x1b,y"), "\"x\\x1b,y\"");  // escaped, then quoted for the comma
  EXPECT_EQ(field("t\tab"), "t\tab");
  EXPECT_EQ(field("a\nb"), "\"a\nb\"");
  EXPECT_EQ(field("caf\xc3\xa9 \xc2\xa0z"), "caf\xc3\xa9 \xc2\xa0z");
  EXPECT_EQ(field("end\xc2"), "end\xc2");  // a lone lead byte is no control

  PodTools p;
  p.tool = Tool::kMemory;
  HostTools h;
  h.host = "w\x1b[2J";
  analysis::DeviceMemory m;
  m.host = h.host;
  m.device = 0;
  m.timeline = {{10, 1}};
  h.memory = {m};
  p.hosts = {h};
  const std::string csv = ToolCsv(p);
  EXPECT_THAT(csv, HasSubstr("\nw\\x1b[2J,0,10,1\n"));
  EXPECT_EQ(csv.find('\x1b'), std::string::npos);
}

TEST(ToolWritersTest, MemoryAndInputPipeline) {
  PodTools p;
  p.tool = Tool::kMemory;
  HostTools h;
  h.host = "w0";
  analysis::DeviceMemory m;
  m.host = "w0";
  m.device = 0;
  m.peak_bytes = 300 << 20;
  m.timeline = {{10, 100 << 20}, {20, 300 << 20}};
  m.largest_live_at_peak.push_back({0xb, 200 << 20, 20, "conv2", -1, -1, "", "", ""});
  h.memory = {m};
  p.hosts = {h};
  const rapidjson::Document d = Parse(ToolJson(p, ToolContext{}));
  EXPECT_EQ(d["devices"][0]["timeline"][1][1].GetInt64(), int64_t{300} << 20);
  EXPECT_TRUE(d["devices"][0]["fragmentation_at_peak"].IsNull());
  EXPECT_EQ(ToolCsv(p), "host,device,time_ns,in_use_bytes\nw0,0,10,104857600\nw0,0,20,314572800\n");
  EXPECT_THAT(FormatToolTable(p, ToolContext{}), HasSubstr("peak 300.00 MiB"));

  p.tool = Tool::kInputPipeline;
  p.hosts[0].input.steps.push_back({1, 10 * kMs, 4 * kMs, 5 * kMs});
  analysis::InputStage stage;
  stage.name = "Iterator::Prefetch::Map";
  stage.category = analysis::InputCategory::kPreprocessing;
  stage.self_pct = 100;
  stage.count = 1;
  stage.total_ns = stage.self_ns = stage.max_ns = 3 * kMs;
  stage.critical_path = true;
  p.hosts[0].input.stages.push_back(stage);
  p.hosts[0].input.category_ns[static_cast<size_t>(analysis::InputCategory::kPreprocessing)] =
      3 * kMs;
  p.hosts[0].input.category_ns[static_cast<size_t>(analysis::InputCategory::kEnqueue)] = kMs;
  p.hosts[0].input.h2d_copy_ns = kMs;
  p.hosts[0].input.bottleneck = "Iterator::Prefetch::Map";
  p.hosts[0].input.input_ns = 4 * kMs;
  p.hosts[0].input.step_ns = 10 * kMs;
  const rapidjson::Document in = Parse(ToolJson(p, ToolContext{}));
  EXPECT_DOUBLE_EQ(in["per_host"][0]["input_pct"].GetDouble(), 40.0);
  EXPECT_STREQ(in["per_host"][0]["bottleneck"].GetString(), "Iterator::Prefetch::Map");
  EXPECT_DOUBLE_EQ(in["per_host"][0]["categories_ms"]["preprocessing"].GetDouble(), 3.0);
  EXPECT_DOUBLE_EQ(in["per_host"][0]["categories_ms"]["enqueue"].GetDouble(), 1.0);
  EXPECT_DOUBLE_EQ(in["per_host"][0]["categories_ms"]["demanded_read"].GetDouble(), 0.0);
  EXPECT_DOUBLE_EQ(in["per_host"][0]["h2d_copy_ms"].GetDouble(), 1.0);
  EXPECT_STREQ(in["per_host"][0]["stages"][0]["category"].GetString(), "preprocessing");
  EXPECT_DOUBLE_EQ(in["per_host"][0]["stages"][0]["self_pct"].GetDouble(), 100.0);
  EXPECT_THAT(FormatToolTable(p, ToolContext{}),
              HasSubstr("host input by category: enqueue 1.000 ms, demanded_read 0.000 ms, "
                        "advanced_read 0.000 ms, preprocessing 3.000 ms, wait 0.000 ms\n"));
  EXPECT_THAT(FormatToolTable(p, ToolContext{}), HasSubstr("  100.0 "));
  // No iterators: the tf.data analysis says what is missing.
  EXPECT_THAT(in["per_host"][0]["tf_data"]["missing"].GetString(),
              HasSubstr("no tf.data iterator events"));
  EXPECT_EQ(in["per_host"][0]["tf_data"]["graph"].Size(), 0u);
  EXPECT_THAT(FormatToolTable(p, ToolContext{}), HasSubstr("tf.data: no tf.data iterator events"));
  analysis::TfDataAnalysis& tf = p.hosts[0].input.tf_data;
  tf.calls = 4;
  tf.slow_calls = 1;
  tf.slowest_root = "Iterator::Root";
  tf.slowest_ns = 200 * kUs;
  tf.critical_path = {"Iterator::Root", "Iterator::Root::Map"};
  tf.bottleneck = "Iterator::Root::Map";
  tf.graph.push_back({"Iterator::Root", "", 1, 4, 300 * kUs, 100 * kUs, 200 * kUs, 10 * kUs, true});
  tf.graph.push_back({"Iterator::Root::Map", "Iterator::Root", 2, 1, 180 * kUs, 180 * kUs,
                      180 * kUs, 180 * kUs, true});
  const rapidjson::Document tfd = Parse(ToolJson(p, ToolContext{}));
  const auto& tj = tfd["per_host"][0]["tf_data"];
  EXPECT_TRUE(tj["missing"].IsNull());
  EXPECT_DOUBLE_EQ(tj["slow_pct"].GetDouble(), 25.0);
  EXPECT_DOUBLE_EQ(tj["slowest"]["duration_us"].GetDouble(), 200.0);
  EXPECT_STREQ(tj["critical_path"][1].GetString(), "Iterator::Root::Map");
  EXPECT_STREQ(tj["graph"][1]["parent"].GetString(), "Iterator::Root");
  EXPECT_DOUBLE_EQ(tj["graph"][1]["slowest_self_us"].GetDouble(), 180.0);
  const std::string table = FormatToolTable(p, ToolContext{});
  EXPECT_THAT(table, HasSubstr("tf.data: 4 root call(s), 1 slow (> 50 us, 25.0%)"));
  EXPECT_THAT(table, HasSubstr("critical path Iterator::Root > Iterator::Root::Map; bottleneck "
                               "Iterator::Root::Map"));
  EXPECT_THAT(table, HasSubstr("180.000       1        180.000    Map *\n"));
  EXPECT_THAT(ToolCsv(p), HasSubstr("w0,1,10.000,4.000,5.000,40.0\n"));
  EXPECT_THAT(FormatToolTable(p, ToolContext{}),
              HasSubstr("Iterator::Prefetch::Map  <- bottleneck"));
  EXPECT_EQ(ToolFileName(Tool::kInputPipeline, "csv"), "tool_input_pipeline.csv");
}

}  // namespace
}  // namespace profctl::report
