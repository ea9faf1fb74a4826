#include "report/html_tool_tabs.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/types/span.h"
#include "rapidjson/document.h"
#include "rapidjson/stringbuffer.h"
#include "rapidjson/writer.h"
#include "report/html_escape.h"
#include "report/report_assets.h"

namespace profctl::report {
namespace {

// `v`'s member `key`; nullptr when `v` is no object or has none.
const rapidjson::Value* Find(const rapidjson::Value& v, const char* key) {
  return v.IsObject() && v.HasMember(key) ? &v[key] : nullptr;
}

double NumberOr0(const rapidjson::Value* v) {
  return v != nullptr && v->IsNumber() ? v->GetDouble() : 0.0;
}

// The runs of `per` consecutive steps of an overview host's "steps": {"step": first,
// "last_step": last, "steps": count, "step_time_ms" and each "ms" category: the run's mean}.
rapidjson::Value StepRuns(const rapidjson::Value& in, size_t per,
                          rapidjson::Document::AllocatorType& alloc) {
  rapidjson::Value out(rapidjson::kArrayType);
  const size_t n = in.Size();
  for (size_t at = 0; at < n; at += per) {
    const size_t end = std::min(n, at + per);
    const double count = static_cast<double>(end - at);
    rapidjson::Value run(rapidjson::kObjectType);
    run.AddMember("step", static_cast<int64_t>(NumberOr0(Find(in[at], "step"))), alloc);
    run.AddMember("last_step", static_cast<int64_t>(NumberOr0(Find(in[end - 1], "step"))), alloc);
    run.AddMember("steps", static_cast<int64_t>(end - at), alloc);
    double time = 0;
    for (size_t i = at; i < end; ++i) time += NumberOr0(Find(in[i], "step_time_ms"));
    run.AddMember("step_time_ms", time / count, alloc);
    rapidjson::Value ms(rapidjson::kObjectType);
    if (const rapidjson::Value* first = Find(in[at], "ms"); first != nullptr && first->IsObject()) {
      for (const auto& cat : first->GetObject()) {
        double sum = 0;
        for (size_t i = at; i < end; ++i) {
          if (const rapidjson::Value* m = Find(in[i], "ms")) {
            sum += NumberOr0(Find(*m, cat.name.GetString()));
          }
        }
        rapidjson::Value key(cat.name, alloc);
        rapidjson::Value mean(sum / count);
        ms.AddMember(key, mean, alloc);
      }
    }
    run.AddMember("ms", ms, alloc);
    out.PushBack(run, alloc);
  }
  return out;
}

// The overview's per-host "steps" beyond kMaxToolChartSteps become StepRuns. Other documents,
// and overviews short enough, are returned as they are.
std::string DownsampledForPage(const std::string& tool_json) {
  rapidjson::Document d;
  d.Parse(tool_json.data(), tool_json.size());
  const rapidjson::Value* tool = Find(d, "tool");
  if (d.HasParseError() || tool == nullptr || !tool->IsString() ||
      std::string(tool->GetString()) != "overview" || !d.HasMember("per_host") ||
      !d["per_host"].IsArray()) {
    return tool_json;
  }
  bool changed = false;
  for (auto& host : d["per_host"].GetArray()) {
    if (!host.IsObject() || !host.HasMember("steps")) continue;
    rapidjson::Value& steps = host["steps"];
    if (!steps.IsArray() || steps.Size() <= kMaxToolChartSteps) continue;
    const size_t per = (steps.Size() + kMaxToolChartSteps - 1) / kMaxToolChartSteps;
    steps = StepRuns(steps, per, d.GetAllocator());
    changed = true;
  }
  if (!changed) return tool_json;
  rapidjson::StringBuffer buffer;
  rapidjson::Writer<rapidjson::StringBuffer> writer(buffer);
  writer.SetMaxDecimalPlaces(3);
  d.Accept(writer);
  return std::string(buffer.GetString(), buffer.GetSize());
}

}  // namespace

void AppendToolTabs(std::string* out, absl::Span<const std::string> tool_jsons) {
  for (const std::string& tool_json : tool_jsons) {
    out->append("<script type=\"application/json\" class=\"tool-data\">\n");
    AppendJsonForScript(out, DownsampledForPage(tool_json));
    out->append("</script>\n");
  }
  // The tabs (report/assets/tools.js, docs/tools.md): one per embedded document, drawn from it
  // with plain DOM. It runs before the breakdown's script, so a failure here is reported in
  // #errors and the breakdown still draws.
  if (!tool_jsons.empty()) {
    AppendInlineStyle(out, assets::kToolsCss);
    AppendInlineScript(out, assets::kToolsJs);
  }
}

}  // namespace profctl::report
