// The input_pipeline tool's writers: input wait per step, host input stages by category and the
// tf.data bottleneck analysis (docs/tools.md "input_pipeline").

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "report/tool_writers_internal.h"

namespace profctl::report::tool_writers_internal {

using analysis::HostInputPipeline;
using analysis::HostTools;
using analysis::PodTools;

namespace {

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

}  // namespace

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

}  // namespace profctl::report::tool_writers_internal
