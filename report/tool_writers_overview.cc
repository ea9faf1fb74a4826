// The overview tool's writers: the pod's and each host's average step by category, step time,
// input wait, top kernels and ops, run environment and recommendations (docs/tools.md "overview").

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "report/tool_writers_internal.h"

namespace profctl::report::tool_writers_internal {

using analysis::HostOverview;
using analysis::HostTools;
using analysis::OverviewCategory;
using analysis::OverviewTimes;
using analysis::PodTools;

namespace {

void Categories(Json& j, const OverviewTimes& t, int64_t steps) {
  j.BeginObject();
  for (int c = 0; c < analysis::kNumOverviewCategories; ++c) {
    j.Key(analysis::OverviewCategoryName(static_cast<OverviewCategory>(c)));
    j.Ms(steps == 0 ? 0 : t.ns[static_cast<size_t>(c)] / steps);
  }
  j.EndObject();
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

}  // namespace

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
  j.Int(p.pod_steps);
  j.Key("host_steps");
  j.Int(p.overview_steps);
  j.Key("warmup_steps");
  j.BeginArray();
  for (const int64_t step : p.overview_warmup_steps) j.Int(step);
  j.EndArray();
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

void OverviewTable(std::string& out, const PodTools& p, const TableStyle& style) {
  const int w = style.max_name_width;
  const size_t limit = style.limit;
  const int64_t n = p.overview_steps;
  absl::StrAppendFormat(&out, "\naverage step time %s ms over %d steps (%d host-steps",
                        MsText(n == 0 ? 0 : p.overview_step_ns / n), p.pod_steps, n);
  if (!p.overview_warmup_steps.empty()) {
    absl::StrAppend(&out, "; warm-up steps ", absl::StrJoin(p.overview_warmup_steps, ", "),
                    " left out");
  }
  absl::StrAppend(&out, ")\n");
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

}  // namespace profctl::report::tool_writers_internal
