#include <algorithm>
#include <limits>
#include <map>
#include <tuple>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "analysis/tools/tool_internal.h"
#include "analysis/tools/tools.h"

namespace profctl::analysis {

// --- shared: intervals inside steps -------------------------------------------------------------

namespace {

// Length of the union of [s, e) intervals (sorted in place) clipped to [lo, hi).
int64_t UnionInside(std::vector<std::pair<int64_t, int64_t>>& iv, int64_t lo, int64_t hi) {
  std::sort(iv.begin(), iv.end());
  int64_t total = 0;
  int64_t cur_s = 0;
  int64_t cur_e = std::numeric_limits<int64_t>::min();
  for (auto [s, e] : iv) {
    s = std::max(s, lo);
    e = std::min(e, hi);
    if (s >= e) continue;
    if (s > cur_e) {
      if (cur_e > cur_s) total += cur_e - cur_s;
      cur_s = s;
      cur_e = e;
    } else {
      cur_e = std::max(cur_e, e);
    }
  }
  if (cur_e > cur_s) total += cur_e - cur_s;
  return total;
}

}  // namespace

// --- input_pipeline -----------------------------------------------------------------------------

namespace {

// Asynchronous stages: the consumer only waits on their buffer; the producer runs elsewhere.
bool IsAsyncStage(absl::string_view name) {
  absl::string_view last = name;
  const size_t sep = name.rfind("::");
  if (sep != absl::string_view::npos) last = name.substr(sep + 2);
  return ContainsAnyIgnoreCase(last, {"Prefetch", "ParallelMap", "ParallelInterleave",
                                      "ParallelBatch", "MapAndBatch"}) ||
         absl::StrContains(name, "MultiProcessingDataLoaderIter");
}

}  // namespace

absl::string_view InputCategoryName(InputCategory c) {
  static constexpr absl::string_view kNames[kNumInputCategories] = {
      "enqueue", "demanded_read", "advanced_read", "preprocessing", "wait"};
  return kNames[static_cast<size_t>(c)];
}

InputCategory InputCategoryOf(absl::string_view name) {
  if (absl::StartsWith(name, "Iterator::")) {
    if (absl::EndsWith(name, "::TFRecord") || absl::EndsWith(name, "::TextLine") ||
        absl::EndsWith(name, "::FixedLengthRecord") || absl::EndsWith(name, "::SSTable") ||
        absl::EndsWith(name, "::RecordIO")) {
      return absl::StrContains(name, "::MemoryReader") ||
                     absl::StrContains(name, "::MemoryWriter") ||
                     absl::StrContains(name, "::Interleave") ||
                     absl::StrContains(name, "::Prefetch") ||
                     absl::StrContains(name, "::ParallelMap")
                 ? InputCategory::kAdvancedRead
                 : InputCategory::kDemandedRead;
    }
    return InputCategory::kPreprocessing;
  }
  if (ContainsAnyIgnoreCase(name, {"enqueue", "pin_memory", "htod"})) {
    return InputCategory::kEnqueue;
  }
  if (ContainsAnyIgnoreCase(
          name, {"getnext", "next_batch", "__next__", "_next_data", "dataloader", "data_loader"}) ||
      name == "next") {
    return InputCategory::kWait;
  }
  return InputCategory::kPreprocessing;
}

TfDataAnalysis ComputeTfDataAnalysis(const ToolTrace& t) {
  TfDataAnalysis out;
  constexpr absl::string_view kPrefix = "Iterator::";
  // Iterator events per thread, nested by time: self = duration - nested iterator events.
  std::vector<size_t> it;
  for (size_t i = 0; i < t.host_events.size(); ++i) {
    if (absl::StartsWith(t.Str(t.host_events[i].name), kPrefix)) it.push_back(i);
  }
  if (it.empty()) return out;
  std::sort(it.begin(), it.end(), [&](size_t a, size_t b) {
    const HostEvent& x = t.host_events[a];
    const HostEvent& y = t.host_events[b];
    return std::make_tuple(x.thread, x.start_ns, -x.end_ns, a) <
           std::make_tuple(y.thread, y.start_ns, -y.end_ns, b);
  });
  std::vector<int64_t> self(it.size(), 0);
  std::vector<size_t> stack;
  for (size_t k = 0; k < it.size(); ++k) {
    const HostEvent& e = t.host_events[it[k]];
    while (!stack.empty() && (t.host_events[it[stack.back()]].thread != e.thread ||
                              t.host_events[it[stack.back()]].end_ns < e.end_ns)) {
      stack.pop_back();
    }
    self[k] += e.end_ns - e.start_ns;
    if (!stack.empty()) self[stack.back()] -= e.end_ns - e.start_ns;
    stack.push_back(k);
  }
  // The graph: a node per long name and per prefix of one.
  std::map<std::string, TfDataNode> nodes;
  const auto node = [&](absl::string_view name) -> TfDataNode& {
    TfDataNode& n = nodes[std::string(name)];
    if (n.name.empty()) {
      n.name = std::string(name);
      const absl::string_view rest = name.substr(kPrefix.size());
      n.depth = static_cast<int32_t>(std::count(rest.begin(), rest.end(), ':') / 2 + 1);
      const size_t sep = name.rfind("::");
      if (n.depth > 1) n.parent = std::string(name.substr(0, sep));
    }
    return n;
  };
  size_t slowest = it.size();
  for (size_t k = 0; k < it.size(); ++k) {
    const HostEvent& e = t.host_events[it[k]];
    TfDataNode& n = node(t.Str(e.name));
    ++n.count;
    n.total_ns += e.end_ns - e.start_ns;
    n.self_ns += self[k];
    n.max_ns = std::max(n.max_ns, e.end_ns - e.start_ns);
    if (n.depth == 1) {
      ++out.calls;
      if (e.end_ns - e.start_ns > kSlowTfDataCallNs) ++out.slow_calls;
      if (slowest == it.size() || e.end_ns - e.start_ns > out.slowest_ns) {
        slowest = k;
        out.slowest_ns = e.end_ns - e.start_ns;
      }
    }
  }
  // Every prefix of a long name is a node too (an iterator that recorded no event itself).
  std::vector<std::string> unseen;
  do {
    unseen.clear();
    for (const auto& [name, n] : nodes) {
      if (!n.parent.empty() && !nodes.contains(n.parent)) unseen.push_back(n.parent);
    }
    for (const std::string& name : unseen) node(name);
  } while (!unseen.empty());
  // The slowest execution: the longest root call; each node's self time in it (its events that
  // start inside it, on any thread); the critical path follows the busiest input down.
  if (slowest < it.size()) {
    const HostEvent& root = t.host_events[it[slowest]];
    out.slowest_root = std::string(t.Str(root.name));
    out.slowest_start_ns = root.start_ns;
    std::map<std::string, int64_t> total_in;
    for (size_t k = 0; k < it.size(); ++k) {
      const HostEvent& e = t.host_events[it[k]];
      if (e.start_ns < root.start_ns || e.start_ns >= root.end_ns) continue;
      const std::string name(t.Str(e.name));
      nodes[name].slowest_self_ns += self[k];
      total_in[name] += std::min(e.end_ns, root.end_ns) - e.start_ns;
    }
    std::string at = out.slowest_root;
    int64_t most_self = -1;
    while (!at.empty()) {
      TfDataNode& n = nodes[at];
      n.critical_path = true;
      out.critical_path.push_back(at);
      if (n.slowest_self_ns > most_self) {
        most_self = n.slowest_self_ns;
        out.bottleneck = at;
      }
      std::string next;
      int64_t busiest = 0;
      for (const auto& [name, m] : nodes) {
        if (m.parent == at && total_in[name] > busiest) {
          busiest = total_in[name];
          next = name;
        }
      }
      at = next;
    }
  }
  for (auto& [name, n] : nodes) out.graph.push_back(std::move(n));
  return out;
}

HostInputPipeline ComputeInputPipeline(const ToolTrace& t, const HostSummary& summary) {
  HostInputPipeline out;
  out.host = t.host;
  out.tf_data = ComputeTfDataAnalysis(t);
  // Consumer threads: those with step markers or framework ops (the training loop).
  absl::flat_hash_set<int64_t> consumers;
  for (const HostEvent& e : t.host_events) {
    if (e.role == HostEventRole::kStep || e.role == HostEventRole::kFrameworkOp) {
      consumers.insert(e.thread);
    }
  }
  // Input events, per thread, nested: self = duration - nested input events.
  std::vector<size_t> in;
  for (size_t i = 0; i < t.host_events.size(); ++i) {
    const HostEvent& e = t.host_events[i];
    if (e.role != HostEventRole::kStep && e.kind == OpKind::kHostInputWait) in.push_back(i);
  }
  std::sort(in.begin(), in.end(), [&](size_t a, size_t b) {
    const HostEvent& x = t.host_events[a];
    const HostEvent& y = t.host_events[b];
    return std::make_tuple(x.thread, x.start_ns, -x.end_ns, a) <
           std::make_tuple(y.thread, y.start_ns, -y.end_ns, b);
  });
  std::vector<int64_t> self(in.size(), 0);
  std::vector<size_t> stack;
  for (size_t k = 0; k < in.size(); ++k) {
    const HostEvent& e = t.host_events[in[k]];
    while (!stack.empty()) {
      const HostEvent& top = t.host_events[in[stack.back()]];
      if (top.thread != e.thread || top.end_ns < e.end_ns) {
        stack.pop_back();
      } else {
        break;
      }
    }
    self[k] += e.end_ns - e.start_ns;
    if (!stack.empty()) self[stack.back()] -= e.end_ns - e.start_ns;
    stack.push_back(k);
  }
  std::map<std::string, InputStage> stages;
  for (size_t k = 0; k < in.size(); ++k) {
    const HostEvent& e = t.host_events[in[k]];
    InputStage& s = stages[std::string(t.Str(e.name))];
    s.name = std::string(t.Str(e.name));
    ++s.count;
    s.total_ns += e.end_ns - e.start_ns;
    s.self_ns += self[k];
    s.max_ns = std::max(s.max_ns, e.end_ns - e.start_ns);
    s.consumer |= consumers.contains(e.thread);
  }
  int64_t all_self = 0;
  for (auto& [name, s] : stages) {
    s.category = InputCategoryOf(s.name);
    out.category_ns[static_cast<size_t>(s.category)] += s.self_ns;
    all_self += s.self_ns;
    out.stages.push_back(std::move(s));
  }
  for (InputStage& s : out.stages) {
    s.self_pct = all_self <= 0
                     ? 0.0
                     : 100.0 * static_cast<double>(s.self_ns) / static_cast<double>(all_self);
  }
  for (const DeviceEvent& d : t.device_events) {
    if (d.kind == OpKind::kMemcpyH2D) out.h2d_copy_ns += d.end_ns - d.start_ns;
  }
  out.category_ns[static_cast<size_t>(InputCategory::kEnqueue)] += out.h2d_copy_ns;
  std::sort(out.stages.begin(), out.stages.end(), [](const InputStage& a, const InputStage& b) {
    return std::tie(b.self_ns, a.name) < std::tie(a.self_ns, b.name);
  });
  // The bottleneck: the slowest consumer stage; when it only waits on an asynchronous buffer,
  // the slowest background (producer) stage, which did not keep up.
  InputStage* slowest_consumer = nullptr;
  InputStage* slowest_background = nullptr;
  for (InputStage& s : out.stages) {
    InputStage*& slot = s.consumer ? slowest_consumer : slowest_background;
    if (slot == nullptr) slot = &s;  // stages are sorted by self time
  }
  InputStage* bottleneck = slowest_consumer;
  if (bottleneck != nullptr) bottleneck->critical_path = true;
  if (slowest_consumer != nullptr && IsAsyncStage(slowest_consumer->name) &&
      slowest_background != nullptr) {
    slowest_background->critical_path = true;
    bottleneck = slowest_background;
  } else if (bottleneck == nullptr) {
    bottleneck = slowest_background;
    if (bottleneck != nullptr) bottleneck->critical_path = true;
  }
  if (bottleneck != nullptr) out.bottleneck = bottleneck->name;
  for (InputStage& s : out.stages) s.critical_path |= s.consumer;

  // Per step.
  for (const HostStep& step : summary.steps) {
    InputStep s;
    s.step = step.step;
    s.step_time_ns = step.end_ns - step.start_ns;
    s.device_input_ns = step.host[Category::kInput];
    std::vector<std::pair<int64_t, int64_t>> iv;
    for (const size_t i : in) {
      const HostEvent& e = t.host_events[i];
      if (e.end_ns > step.start_ns && e.start_ns < step.end_ns)
        iv.emplace_back(e.start_ns, e.end_ns);
    }
    s.host_input_ns = UnionInside(iv, step.start_ns, step.end_ns);
    out.input_ns += s.device_input_ns;
    out.step_ns += s.step_time_ns;
    out.steps.push_back(s);
  }
  return out;
}

void InputPipelineForHost(const ToolTrace& trace, const HostSummary& summary, HostTools& h) {
  h.input = ComputeInputPipeline(trace, summary);
}

}  // namespace profctl::analysis
