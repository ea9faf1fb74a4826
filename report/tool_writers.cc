#include "report/tool_writers.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/json_util.h"
#include "common/version.h"
#include "report/json_out.h"

namespace profctl::report {

using analysis::DeviceMemory;
using analysis::HostInputPipeline;
using analysis::HostOverview;
using analysis::HostTools;
using analysis::KernelStat;
using analysis::OpShareRow;
using analysis::OpStat;
using analysis::OverviewCategory;
using analysis::OverviewTimes;
using analysis::PodTools;
using analysis::Tool;

namespace {

// --- JSON ---------------------------------------------------------------------------------------

using Json = JsonOut;

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
  j.BeginArray();
  for (const analysis::PieSlice& s : slices) {
    j.BeginObject();
    j.Key("name");
    j.String(s.name);
    j.Key("self_us");
    j.Us(s.self_ns);
    j.Key("pct");
    j.Double(s.pct, 2);
    j.EndObject();
  }
  j.EndArray();
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

void Categories(Json& j, const OverviewTimes& t, int64_t steps) {
  j.BeginObject();
  for (int c = 0; c < analysis::kNumOverviewCategories; ++c) {
    j.Key(analysis::OverviewCategoryName(static_cast<OverviewCategory>(c)));
    j.Ms(steps == 0 ? 0 : t.ns[static_cast<size_t>(c)] / steps);
  }
  j.EndObject();
}

double Pct(int64_t part, int64_t whole) {
  return whole <= 0 ? 0.0 : 100.0 * static_cast<double>(part) / static_cast<double>(whole);
}

void Environment(Json& j, const analysis::RunEnvironment& env) {
  j.BeginObject();
  j.Key("framework");
  j.String(env.framework);
  j.Key("hostnames");
  j.BeginArray();
  for (const std::string& h : env.hostnames) j.String(h);
  j.EndArray();
  j.Key("devices");
  j.BeginArray();
  for (const analysis::DeviceInfo& d : env.devices) {
    j.BeginObject();
    j.Key("id");
    j.Int(d.id);
    j.Key("name");
    j.String(d.name);
    j.Key("compute_capability");
    j.String(d.compute_major > 0 ? absl::StrCat(d.compute_major, ".", d.compute_minor) : "");
    j.Key("memory_bytes");
    j.Int(d.memory_bytes);
    j.Key("device_type");
    j.String(d.device_type);
    j.Key("peak_teraflops_per_second");
    d.peak_tflops <= 0 ? j.Null() : j.Double(d.peak_tflops, 3);
    j.EndObject();
  }
  j.EndArray();
  j.Key("driver_version");
  j.String(env.driver_version);
  j.Key("cuda_version");
  j.String(env.cuda_version);
  j.EndObject();
}

void TopList(Json& j, const std::vector<analysis::TopEntry>& top) {
  j.BeginArray();
  for (const analysis::TopEntry& e : top) {
    j.BeginObject();
    j.Key("name");
    j.String(e.name);
    j.Key("self_ms");
    j.Ms(e.self_ns);
    j.Key("pct");
    j.Double(e.pct, 1);
    j.Key("cum_pct");
    j.Double(e.cum_pct, 1);
    j.Key("category");
    j.String(e.category);
    j.EndObject();
  }
  j.EndArray();
}

void StepTimeJson(Json& j, const analysis::StepTimeStats& s) {
  j.BeginObject();
  j.Key("steps");
  j.Int(s.steps);
  j.Key("average");
  j.Double(s.average_ns / 1e6, 3);
  j.Key("stddev");
  j.Double(s.stddev_ns / 1e6, 3);
  j.Key("min");
  j.Ms(s.min_ns);
  j.Key("max");
  j.Ms(s.max_ns);
  j.EndObject();
}

void InputRangeJson(Json& j, const analysis::InputWaitRange& r) {
  if (!r.known) {
    j.Null();
    return;
  }
  j.BeginObject();
  j.Key("min_pct");
  j.Double(r.min_pct, 1);
  j.Key("min_at");
  j.String(r.min_at);
  j.Key("max_pct");
  j.Double(r.max_pct, 1);
  j.Key("max_at");
  j.String(r.max_at);
  j.EndObject();
}

void OverviewJson(Json& j, const PodTools& p) {
  j.Key("categories");
  j.BeginArray();
  for (int c = 0; c < analysis::kNumOverviewCategories; ++c) {
    j.String(analysis::OverviewCategoryName(static_cast<OverviewCategory>(c)));
  }
  j.EndArray();
  j.Key("pod");
  j.BeginObject();
  j.Key("steps");
  j.Int(p.overview_steps);
  j.Key("average_step_ms");
  j.Ms(p.overview_steps == 0 ? 0 : p.overview_step_ns / p.overview_steps);
  j.Key("average_ms");
  Categories(j, p.overview_total, p.overview_steps);
  j.Key("compute_16bit_pct");
  j.Double(
      Pct(p.overview_total.compute_16bit_ns, p.overview_total[OverviewCategory::kDeviceCompute]),
      1);
  j.Key("step_time_ms");
  StepTimeJson(j, p.overview_step_time);
  j.Key("input_wait_range");
  InputRangeJson(j, p.overview_input_range);
  j.EndObject();
  j.Key("recommendations");
  j.BeginArray();
  for (const analysis::Recommendation& r : p.recommendations) {
    j.BeginObject();
    j.Key("kind");
    j.String(r.kind);
    j.Key("advice");
    j.String(r.advice);
    j.Key("reason");
    j.String(r.reason);
    j.EndObject();
  }
  j.EndArray();
  j.Key("per_host");
  j.BeginArray();
  for (const HostTools& h : p.hosts) {
    const HostOverview& o = h.overview;
    const auto steps = static_cast<int64_t>(o.steps.size());
    j.BeginObject();
    j.Key("host");
    j.String(h.host);
    j.Key("average_step_ms");
    j.Ms(steps == 0 ? 0 : o.step_ns / steps);
    j.Key("average_ms");
    Categories(j, o.total, steps);
    j.Key("compute_16bit_pct");
    j.Double(Pct(o.total.compute_16bit_ns, o.total[OverviewCategory::kDeviceCompute]), 1);
    j.Key("step_time_ms");
    StepTimeJson(j, o.step_time);
    j.Key("input_wait_range");
    InputRangeJson(j, o.input_range);
    j.Key("input_by_device");
    j.BeginArray();
    for (const analysis::DeviceInputWait& w : o.input_by_device) {
      j.BeginObject();
      j.Key("device");
      j.Int(w.device);
      j.Key("input_ms");
      j.Ms(w.input_ns);
      j.Key("pct");
      j.Double(w.pct, 1);
      j.EndObject();
    }
    j.EndArray();
    j.Key("kernels");
    j.Int(o.kernels);
    j.Key("tensor_core_eligible_ms");
    j.Ms(o.tensor_core_eligible_ns);
    j.Key("tensor_core_used_ms");
    j.Ms(o.tensor_core_used_ns);
    j.Key("top_kernels");
    TopList(j, o.top_kernels);
    j.Key("top_ops");
    TopList(j, o.top_ops);
    j.Key("environment");
    Environment(j, o.environment);
    j.Key("steps");
    j.BeginArray();
    for (const analysis::OverviewStep& s : o.steps) {
      j.BeginObject();
      j.Key("step");
      j.Int(s.step);
      j.Key("step_time_ms");
      j.Ms(s.step_time_ns);
      j.Key("ms");
      Categories(j, s.times, 1);
      j.Key("compute_16bit_ms");
      j.Ms(s.times.compute_16bit_ns);
      j.Key("compute_32bit_ms");
      j.Ms(s.times.compute_32bit_ns);
      j.EndObject();
    }
    j.EndArray();
    j.Key("warnings");
    j.BeginArray();
    for (const std::string& w : o.warnings) j.String(w);
    j.EndArray();
    j.EndObject();
  }
  j.EndArray();
}

constexpr absl::string_view kNoTfData =
    "no tf.data iterator events (Iterator::...) in this trace: the tf.data bottleneck analysis "
    "needs a TensorFlow host trace (PyTorch and JAX traces do not record tf.data)";

void TfDataJson(Json& j, const analysis::TfDataAnalysis& a) {
  j.BeginObject();
  j.Key("missing");
  a.graph.empty() ? j.String(kNoTfData) : j.Null();
  j.Key("calls");
  j.Int(a.calls);
  j.Key("slow_calls");
  j.Int(a.slow_calls);
  j.Key("slow_pct");
  j.Double(Pct(a.slow_calls, a.calls), 1);
  j.Key("slowest");
  if (a.slowest_root.empty()) {
    j.Null();
  } else {
    j.BeginObject();
    j.Key("root");
    j.String(a.slowest_root);
    j.Key("start_ns");
    j.Int(a.slowest_start_ns);
    j.Key("duration_us");
    j.Us(a.slowest_ns);
    j.EndObject();
  }
  j.Key("critical_path");
  j.BeginArray();
  for (const std::string& n : a.critical_path) j.String(n);
  j.EndArray();
  j.Key("bottleneck");
  j.String(a.bottleneck);
  j.Key("graph");
  j.BeginArray();
  for (const analysis::TfDataNode& n : a.graph) {
    j.BeginObject();
    j.Key("name");
    j.String(n.name);
    j.Key("parent");
    j.String(n.parent);
    j.Key("depth");
    j.Int(n.depth);
    j.Key("count");
    j.Int(n.count);
    j.Key("total_us");
    j.Us(n.total_ns);
    j.Key("self_us");
    j.Us(n.self_ns);
    j.Key("max_us");
    j.Us(n.max_ns);
    j.Key("slowest_self_us");
    j.Us(n.slowest_self_ns);
    j.Key("critical_path");
    j.Bool(n.critical_path);
    j.EndObject();
  }
  j.EndArray();
  j.EndObject();
}

void InputJson(Json& j, const PodTools& p) {
  j.Key("per_host");
  j.BeginArray();
  for (const HostTools& h : p.hosts) {
    const HostInputPipeline& in = h.input;
    j.BeginObject();
    j.Key("host");
    j.String(h.host);
    j.Key("input_pct");
    j.Double(Pct(in.input_ns, in.step_ns), 1);
    j.Key("bottleneck");
    j.String(in.bottleneck);
    j.Key("categories_ms");
    j.BeginObject();
    for (int c = 0; c < analysis::kNumInputCategories; ++c) {
      j.Key(analysis::InputCategoryName(static_cast<analysis::InputCategory>(c)));
      j.Ms(in.category_ns[static_cast<size_t>(c)]);
    }
    j.EndObject();
    j.Key("h2d_copy_ms");
    j.Ms(in.h2d_copy_ns);
    j.Key("tf_data");
    TfDataJson(j, in.tf_data);
    j.Key("steps");
    j.BeginArray();
    for (const analysis::InputStep& s : in.steps) {
      j.BeginObject();
      j.Key("step");
      j.Int(s.step);
      j.Key("step_time_ms");
      j.Ms(s.step_time_ns);
      j.Key("device_input_ms");
      j.Ms(s.device_input_ns);
      j.Key("host_input_ms");
      j.Ms(s.host_input_ns);
      j.EndObject();
    }
    j.EndArray();
    j.Key("stages");
    j.BeginArray();
    for (const analysis::InputStage& s : in.stages) {
      j.BeginObject();
      j.Key("name");
      j.String(s.name);
      j.Key("category");
      j.String(analysis::InputCategoryName(s.category));
      j.Key("self_pct");
      j.Double(s.self_pct, 1);
      j.Key("count");
      j.Int(s.count);
      j.Key("total_ms");
      j.Ms(s.total_ns);
      j.Key("self_ms");
      j.Ms(s.self_ns);
      j.Key("max_ms");
      j.Ms(s.max_ns);
      j.Key("consumer");
      j.Bool(s.consumer);
      j.Key("critical_path");
      j.Bool(s.critical_path);
      j.EndObject();
    }
    j.EndArray();
    j.EndObject();
  }
  j.EndArray();
}

void MemoryJson(Json& j, const PodTools& p) {
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
        j.Key("op");
        j.String(a.op);
        j.Key("step");
        int_or_null(a.step);
        j.Key("region_type");
        j.String(a.region_type);
        j.Key("data_type");
        j.String(a.data_type);
        j.Key("shape");
        j.String(a.shape);
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
        j.Key("region_type");
        j.String(r.region_type);
        j.Key("data_type");
        j.String(r.data_type);
        j.Key("shape");
        j.String(r.shape);
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

// --- CSV ----------------------------------------------------------------------------------------

void Field(std::string* out, absl::string_view s) { AppendCsvField(out, s); }
void Row(std::string* out, const std::vector<std::string>& fields) {
  for (size_t i = 0; i < fields.size(); ++i) {
    if (i > 0) out->push_back(',');
    Field(out, fields[i]);
  }
  out->push_back('\n');
}
std::string MsText(int64_t ns) { return absl::StrFormat("%.3f", static_cast<double>(ns) / 1e6); }
std::string UsText(int64_t ns) { return absl::StrFormat("%.3f", static_cast<double>(ns) / 1e3); }
std::string DimsText(const std::array<int32_t, 3>& d) { return absl::StrJoin(d, "x"); }

// --- Terminal -----------------------------------------------------------------------------------

std::string Printable(absl::string_view s, int max_width) {
  std::string p(s);
  for (char& c : p) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f) c = '?';
  }
  const size_t width = static_cast<size_t>(std::max(max_width, 8));
  if (p.size() <= width) return p;
  const size_t head = (width - 3) / 2;
  const size_t tail = width - 3 - head;
  return absl::StrCat(p.substr(0, head), "...", p.substr(p.size() - tail));
}

// --- one writer per tool -----------------------------------------------------------------------

struct TableStyle {
  int max_name_width = 60;
  size_t limit = 20;  // rows per section
};

void OverviewCsv(std::string& out, const PodTools& p) {
  std::vector<std::string> header = {"host", "step", "step_time_ms"};
  for (int c = 0; c < analysis::kNumOverviewCategories; ++c) {
    header.push_back(
        absl::StrCat(analysis::OverviewCategoryName(static_cast<OverviewCategory>(c)), "_ms"));
  }
  header.push_back("compute_16bit_ms");
  header.push_back("compute_32bit_ms");
  Row(&out, header);
  for (const HostTools& h : p.hosts) {
    for (const analysis::OverviewStep& s : h.overview.steps) {
      std::vector<std::string> row = {h.host, absl::StrCat(s.step), MsText(s.step_time_ns)};
      for (const int64_t v : s.times.ns) row.push_back(MsText(v));
      row.push_back(MsText(s.times.compute_16bit_ns));
      row.push_back(MsText(s.times.compute_32bit_ns));
      Row(&out, row);
    }
  }
}

std::string StepTimeText(const analysis::StepTimeStats& s) {
  if (s.steps == 0) return "  step time: no complete steps\n";
  return absl::StrFormat(
      "  step time: average %.3f ms, standard deviation %.3f ms, min %s ms, "
      "max %s ms\n",
      s.average_ns / 1e6, s.stddev_ns / 1e6, MsText(s.min_ns), MsText(s.max_ns));
}

std::string InputRangeText(const analysis::InputWaitRange& r, int w) {
  if (!r.known) return "  input wait across devices: no device in the steps\n";
  return absl::StrFormat("  input wait across devices: %.1f%% (%s) to %.1f%% (%s) of step time\n",
                         r.min_pct, Printable(r.min_at, w), r.max_pct, Printable(r.max_at, w));
}

void OverviewTable(std::string& out, const PodTools& p, const TableStyle& style) {
  const int w = style.max_name_width;
  const size_t limit = style.limit;
  const int64_t n = p.overview_steps;
  absl::StrAppendFormat(&out, "\naverage step time %s ms over %d step(s)\n",
                        MsText(n == 0 ? 0 : p.overview_step_ns / n), n);
  for (int c = 0; c < analysis::kNumOverviewCategories; ++c) {
    const int64_t v = p.overview_total.ns[static_cast<size_t>(c)];
    absl::StrAppendFormat(&out, "  %-17s %10s ms  %5.1f%%\n",
                          analysis::OverviewCategoryName(static_cast<OverviewCategory>(c)),
                          MsText(n == 0 ? 0 : v / n), Pct(v, p.overview_step_ns));
  }
  absl::StrAppendFormat(
      &out, "  device compute in 16-bit: %.1f%%\n",
      Pct(p.overview_total.compute_16bit_ns, p.overview_total[OverviewCategory::kDeviceCompute]));
  out += StepTimeText(p.overview_step_time);
  out += InputRangeText(p.overview_input_range, w);
  for (const HostTools& h : p.hosts) {
    const HostOverview& o = h.overview;
    const auto steps = static_cast<int64_t>(o.steps.size());
    absl::StrAppend(&out, "\nhost ", Printable(h.host, w), ": ", steps, " step(s), average ",
                    MsText(steps == 0 ? 0 : o.step_ns / steps), " ms");
    const analysis::RunEnvironment& env = o.environment;
    if (!env.framework.empty()) absl::StrAppend(&out, ", ", env.framework);
    if (!env.devices.empty()) {
      absl::StrAppend(&out, ", ", env.devices.size(), " x ", Printable(env.devices[0].name, w));
      if (!env.devices[0].device_type.empty()) {
        absl::StrAppend(&out, " (", Printable(env.devices[0].device_type, w), ")");
      }
    }
    if (!env.cuda_version.empty()) absl::StrAppend(&out, ", CUDA ", env.cuda_version);
    if (!env.driver_version.empty()) absl::StrAppend(&out, ", driver ", env.driver_version);
    out += "\n";
    out += StepTimeText(o.step_time);
    out += InputRangeText(o.input_range, w);
    if (!o.top_kernels.empty()) out += "  top kernels by time (ms, %, cumulative %):\n";
    for (size_t i = 0; i < o.top_kernels.size() && i < limit; ++i) {
      const analysis::TopEntry& e = o.top_kernels[i];
      absl::StrAppendFormat(&out, "    %10s ms %5.1f%% %5.1f%%  %s\n", MsText(e.self_ns), e.pct,
                            e.cum_pct, Printable(e.name, w));
    }
    if (!o.top_ops.empty()) out += "  top ops by self time (ms, %, cumulative %, category):\n";
    for (size_t i = 0; i < o.top_ops.size() && i < limit; ++i) {
      const analysis::TopEntry& e = o.top_ops[i];
      absl::StrAppendFormat(&out, "    %10s ms %5.1f%% %5.1f%%  %-16s %s\n", MsText(e.self_ns),
                            e.pct, e.cum_pct, Printable(e.category, 16), Printable(e.name, w));
    }
  }
  out += "\nrecommendations:\n";
  if (p.recommendations.empty()) out += "  none: no category stands out\n";
  for (const analysis::Recommendation& r : p.recommendations) {
    absl::StrAppend(&out, "  - ", r.advice, "\n    because ", Printable(r.reason, 400), "\n");
  }
}

void TopKernelsJson(Json& j, const std::vector<KernelStat>& rows) {
  j.BeginArray();
  for (const analysis::PieSlice& s : analysis::TopKernels(rows, analysis::kMaxTop)) {
    j.BeginObject();
    j.Key("kernel");
    j.String(s.name);
    j.Key("total_us");
    j.Us(s.self_ns);
    j.Key("pct");
    j.Double(s.pct, 2);
    j.EndObject();
  }
  j.EndArray();
}

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
  for (const analysis::PieSlice& s : analysis::TopKernels(p.kernels, analysis::kMaxTop)) {
    absl::StrAppendFormat(&out, "  %12s us %6.2f%%  %s\n", UsText(s.self_ns), s.pct,
                          Printable(s.name, w));
  }
  absl::StrAppendFormat(&out, "\n%12s %6s %6s %7s %10s %10s %5s %7s %6s %3s  %-*s  %s\n",
                        "total_us", "%", "cum%", "count", "avg_us", "max_us", "regs", "shmem",
                        "occ%", "TC", w, "kernel", "op");
  for (size_t i = 0; i < p.kernels.size() && i < limit; ++i) {
    const KernelStat& k = p.kernels[i];
    absl::StrAppendFormat(&out, "%12s %6.2f %6.2f %7d %10s %10s %5s %7s %6s %3s  %-*s  %s\n",
                          UsText(k.total_ns), k.pct, k.cum_pct, k.occurrences, UsText(k.avg_ns()),
                          UsText(k.max_ns),
                          k.registers_per_thread < 0 ? "-" : absl::StrCat(k.registers_per_thread),
                          k.shared_memory_bytes < 0 ? "-" : absl::StrCat(k.shared_memory_bytes),
                          k.occupancy_pct < 0 ? "-" : absl::StrFormat("%.1f", k.occupancy_pct),
                          k.tensor_core_used       ? "yes"
                          : k.tensor_core_eligible ? "elg"
                                                   : "no",
                          w, Printable(k.kernel, w), Printable(k.op.empty() ? "-" : k.op, w));
  }
  if (p.kernels.size() > limit) {
    absl::StrAppend(&out, "... ", p.kernels.size() - limit, " more (--json / --csv)\n");
  }
  out += "TC: yes = uses Tensor Cores, elg = eligible but does not, no = not eligible\n";
}

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

std::string PctText(double v) { return absl::StrFormat("%.2f", v); }

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
                          "dev_self_us", "%", "cum%", "dev_total_us", "host_self_us", "%", "cum%",
                          "host_total_us", "count", "type", "name");
    for (size_t i = 0; i < rows.size() && i < limit; ++i) {
      const OpShareRow& r = rows[i];
      const OpStat& s = r.stat;
      absl::StrAppendFormat(&out, "%14s %6.2f %6.2f %14s %14s %6.2f %6.2f %14s %7d  %-16s %s\n",
                            UsText(s.device_self_ns), r.device_self_pct, r.device_self_cum_pct,
                            UsText(s.device_total_ns), UsText(s.host_self_ns), r.host_self_pct,
                            r.host_self_cum_pct, UsText(s.host_total_ns), s.occurrences,
                            Printable(s.type, 16), Printable(s.name, w));
    }
    if (rows.size() > limit) absl::StrAppend(&out, "... ", rows.size() - limit, " more\n");
  };
  absl::StrAppendFormat(&out, "\nidle: host %s us, devices %s us (%s)\n", UsText(ops.host_idle_ns),
                        UsText(ops.device_idle_ns),
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

void InputPipelineCsv(std::string& out, const PodTools& p) {
  Row(&out, {"host", "step", "step_time_ms", "device_input_ms", "host_input_ms", "input_pct"});
  for (const HostTools& h : p.hosts) {
    for (const analysis::InputStep& s : h.input.steps) {
      Row(&out, {h.host, absl::StrCat(s.step), MsText(s.step_time_ns), MsText(s.device_input_ns),
                 MsText(s.host_input_ns),
                 absl::StrFormat("%.1f", Pct(s.device_input_ns, s.step_time_ns))});
    }
  }
}

void TfDataTable(std::string& out, const analysis::TfDataAnalysis& a, const TableStyle& style) {
  const int w = style.max_name_width;
  if (a.graph.empty()) {
    absl::StrAppend(&out, "  tf.data: ", kNoTfData, "\n");
    return;
  }
  absl::StrAppendFormat(&out, "  tf.data: %d root call(s), %d slow (> 50 us, %.1f%%)\n", a.calls,
                        a.slow_calls, Pct(a.slow_calls, a.calls));
  if (!a.slowest_root.empty()) {
    absl::StrAppend(&out, "  slowest execution: ", Printable(a.slowest_root, w), ", ",
                    UsText(a.slowest_ns), " us; critical path ",
                    Printable(absl::StrJoin(a.critical_path, " > "), 4 * w), "; bottleneck ",
                    Printable(a.bottleneck, w), "\n");
  }
  absl::StrAppendFormat(&out, "  pipeline graph:\n  %12s %12s %7s %14s  %s\n", "self_us",
                        "total_us", "count", "slowest_self", "iterator (* critical path)");
  for (size_t i = 0; i < a.graph.size() && i < style.limit; ++i) {
    const analysis::TfDataNode& n = a.graph[i];
    const size_t sep = n.name.rfind("::");
    absl::StrAppendFormat(&out, "  %12s %12s %7d %14s  %s%s%s\n", UsText(n.self_ns),
                          UsText(n.total_ns), n.count, UsText(n.slowest_self_ns),
                          std::string(2 * static_cast<size_t>(std::max(n.depth - 1, 0)), ' '),
                          Printable(n.depth <= 1 ? n.name : n.name.substr(sep + 2), w),
                          n.critical_path ? " *" : "");
  }
  if (a.graph.size() > style.limit) {
    absl::StrAppend(&out, "  ... ", a.graph.size() - style.limit, " more (--json)\n");
  }
}

void InputPipelineTable(std::string& out, const PodTools& p, const TableStyle& style) {
  const int w = style.max_name_width;
  const size_t limit = style.limit;
  for (const HostTools& h : p.hosts) {
    const HostInputPipeline& in = h.input;
    absl::StrAppendFormat(&out, "\nhost %s: devices wait for input %.1f%% of step time\n",
                          Printable(h.host, w), Pct(in.input_ns, in.step_ns));
    absl::StrAppendFormat(&out, "  %10s %14s %16s %14s\n", "step", "step_time_ms",
                          "device_input_ms", "host_input_ms");
    const size_t first = in.steps.size() > limit ? in.steps.size() - limit : 0;
    for (size_t i = first; i < in.steps.size(); ++i) {
      const analysis::InputStep& s = in.steps[i];
      absl::StrAppendFormat(&out, "  %10d %14s %16s %14s\n", s.step, MsText(s.step_time_ns),
                            MsText(s.device_input_ns), MsText(s.host_input_ns));
    }
    if (!in.stages.empty() || in.h2d_copy_ns > 0) {
      out += "  host input by category:";
      for (int c = 0; c < analysis::kNumInputCategories; ++c) {
        absl::StrAppend(&out, " ",
                        analysis::InputCategoryName(static_cast<analysis::InputCategory>(c)), " ",
                        MsText(in.category_ns[static_cast<size_t>(c)]), " ms");
        out += c + 1 < analysis::kNumInputCategories ? "," : "\n";
      }
    }
    if (!in.stages.empty()) {
      absl::StrAppendFormat(&out, "  host input stages:\n  %12s %6s %12s %7s %8s %-13s  %s\n",
                            "self_ms", "%", "total_ms", "count", "where", "category", "stage");
    }
    for (size_t i = 0; i < in.stages.size() && i < limit; ++i) {
      const analysis::InputStage& s = in.stages[i];
      absl::StrAppendFormat(&out, "  %12s %6.1f %12s %7d %8s %-13s  %s%s\n", MsText(s.self_ns),
                            s.self_pct, MsText(s.total_ns), s.count,
                            s.consumer ? "loop" : "backgrnd",
                            analysis::InputCategoryName(s.category), Printable(s.name, w),
                            s.name == in.bottleneck ? "  <- bottleneck" : "");
    }
    if (in.stages.empty()) out += "  no tf.data / DataLoader events in the trace\n";
    TfDataTable(out, in.tf_data, style);
  }
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
                      ": no memory allocation events in the trace\n");
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
      for (const std::string& s : m.missing)
        absl::StrAppend(&out, "  not in this trace: ", s, "\n");
    }
  }
}

// Each tool's writers, in the order of analysis::AllTools() (ToolsWithWriters, tested).
struct ToolWriter {
  Tool tool;
  void (*json)(Json& j, const PodTools& p);  // the tool's payload, after the common keys
  void (*csv)(std::string& out, const PodTools& p);
  void (*table)(std::string& out, const PodTools& p, const TableStyle& style);
};

constexpr ToolWriter kWriters[] = {
    {Tool::kOverview, OverviewJson, OverviewCsv, OverviewTable},
    {Tool::kKernelStats, KernelStatsJson, KernelStatsCsv, KernelStatsTable},
    {Tool::kOpStats, OpStatsJson, OpStatsCsv, OpStatsTable},
    {Tool::kInputPipeline, InputJson, InputPipelineCsv, InputPipelineTable},
    {Tool::kMemory, MemoryJson, MemoryCsv, MemoryTable},
};

const ToolWriter& WriterFor(Tool tool) {
  for (const ToolWriter& w : kWriters) {
    if (w.tool == tool) return w;
  }
  return kWriters[0];  // unreachable: every tool has its writers (ToolsWithWriters)
}

}  // namespace

std::vector<Tool> ToolsWithWriters() {
  std::vector<Tool> tools;
  for (const ToolWriter& w : kWriters) tools.push_back(w.tool);
  return tools;
}

std::string ToolFileName(Tool tool, absl::string_view extension) {
  return absl::StrCat("tool_", analysis::ToolName(tool), ".", extension);
}

std::string ToolJson(const PodTools& p, const ToolContext& context) {
  Json j(/*pretty_depth=*/3);
  j.BeginObject();
  j.Key("schema_version");
  j.Int(PodTools::kSchemaVersion);
  j.Key("producer");
  j.String(absl::StrCat("profctl ", kVersion));
  j.Key("tool");
  j.String(analysis::ToolName(p.tool));
  j.Key("session");
  j.String(context.session);
  j.Key("hosts");
  j.BeginArray();
  for (const HostTools& h : p.hosts) j.String(h.host);
  j.EndArray();
  WriterFor(p.tool).json(j, p);
  j.Key("warnings");
  j.BeginArray();
  for (const HostTools& h : p.hosts) {
    for (const std::string& w : h.warnings) j.String(absl::StrCat(h.host, ": ", w));
  }
  j.EndArray();
  WriteFailedFiles(j, context.failed_files);
  j.EndObject();
  return j.Take();
}

std::string ToolCsv(const PodTools& p) {
  std::string out;
  WriterFor(p.tool).csv(out, p);
  return out;
}

std::string FormatToolTable(const PodTools& p, const ToolContext& context,
                            const ToolTableOptions& options) {
  std::string out;
  const TableStyle style{options.max_name_width,
                         static_cast<size_t>(std::max(options.max_rows, 1))};
  const int w = style.max_name_width;
  absl::StrAppend(&out, "profctl ", analysis::ToolName(p.tool), ": ", Printable(context.session, w),
                  ", ", p.hosts.size(), " host(s)\n");
  WriterFor(p.tool).table(out, p, style);
  for (const HostTools& h : p.hosts) {
    for (const std::string& warning : h.warnings) {
      absl::StrAppend(&out, "warning: ", Printable(h.host, w), ": ", Printable(warning, 400), "\n");
    }
  }
  return out;
}

}  // namespace profctl::report
