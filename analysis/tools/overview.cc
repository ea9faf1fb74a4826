#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <optional>
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

// --- overview -----------------------------------------------------------------------------------

absl::string_view OverviewCategoryName(OverviewCategory c) {
  static constexpr absl::string_view kNames[kNumOverviewCategories] = {
      "compilation",      "input",       "output",         "kernel_launch", "host_compute",
      "device_to_device", "collectives", "device_compute", "other"};
  return kNames[static_cast<size_t>(c)];
}

int64_t OverviewTimes::total() const {
  int64_t s = 0;
  for (const int64_t v : ns) s += v;
  return s;
}

namespace {

enum Cnt : uint8_t {
  kC16 = 0,
  kC32,
  kColl,
  kH2D,
  kD2H,
  kD2D,
  kIn,
  kSync,
  kCompile,
  kLaunch,
  kOtherHost,
  kNumCnt,
};

// The breakdown's precedence (breakdown.h), with compute split by precision and `host` split.
OverviewCategory CategoryOfCounts(const std::array<int32_t, kNumCnt>& c, bool* sixteen) {
  *sixteen = false;
  if (c[kC16] > 0 || c[kC32] > 0) {
    *sixteen = c[kC32] == 0;
    return OverviewCategory::kDeviceCompute;
  }
  if (c[kD2H] > 0) return OverviewCategory::kOutput;
  if (c[kD2D] > 0) return OverviewCategory::kDeviceToDevice;
  if (c[kColl] > 0) return OverviewCategory::kCollectives;
  if (c[kH2D] > 0 || c[kIn] > 0) return OverviewCategory::kInput;
  if (c[kSync] == 0) {
    if (c[kCompile] > 0) return OverviewCategory::kCompilation;
    if (c[kLaunch] > 0) return OverviewCategory::kKernelLaunch;
    if (c[kOtherHost] > 0) return OverviewCategory::kHostCompute;
  }
  return OverviewCategory::kOther;
}

Cnt DeviceCounter(const ToolTrace& t, const DeviceEvent& d) {
  switch (d.kind) {
    case OpKind::kCollective:
      return kColl;
    case OpKind::kMemcpyH2D:
      return kH2D;
    case OpKind::kMemcpyD2H:
      return kD2H;
    case OpKind::kMemcpyD2D:
      return kD2D;
    default:
      return Is16BitKernel(t.Str(d.name)) ? kC16 : kC32;
  }
}

Cnt HostCounter(const HostEvent& e) {
  switch (e.kind) {
    case OpKind::kHostInputWait:
      return kIn;
    case OpKind::kHostSync:
      return kSync;
    case OpKind::kHostLaunch:
      return kLaunch;
    default:
      return e.compile ? kCompile : kOtherHost;
  }
}

std::string Pct(double v) { return absl::StrFormat("%.1f %%", v); }
std::string Ms(int64_t ns) { return absl::StrFormat("%.3f ms", static_cast<double>(ns) / 1e6); }
double Share(int64_t part, int64_t whole) {
  return whole <= 0 ? 0.0 : 100.0 * static_cast<double>(part) / static_cast<double>(whole);
}

}  // namespace

StepTimeStats StepTimeStatsOf(const std::vector<int64_t>& step_times_ns) {
  StepTimeStats s;
  s.steps = static_cast<int64_t>(step_times_ns.size());
  if (step_times_ns.empty()) return s;
  double sum = 0;
  s.min_ns = s.max_ns = step_times_ns.front();
  for (const int64_t v : step_times_ns) {
    sum += static_cast<double>(v);
    s.min_ns = std::min(s.min_ns, v);
    s.max_ns = std::max(s.max_ns, v);
  }
  s.average_ns = sum / static_cast<double>(s.steps);
  double squares = 0;
  for (const int64_t v : step_times_ns) {
    const double d = static_cast<double>(v) - s.average_ns;
    squares += d * d;
  }
  s.stddev_ns = std::sqrt(squares / static_cast<double>(s.steps));
  return s;
}

namespace {

void WidenRange(InputWaitRange* r, double pct, const std::string& at) {
  if (!r->known || pct < r->min_pct) {
    r->min_pct = pct;
    r->min_at = at;
  }
  if (!r->known || pct > r->max_pct) {
    r->max_pct = pct;
    r->max_at = at;
  }
  r->known = true;
}

// Per device, its input wait over the complete steps, and their range.
void FillInputByDevice(const HostSummary& summary, HostOverview* o) {
  for (const HostStep& s : summary.steps) {
    for (const auto& [id, times] : s.devices) {
      const int64_t device = id;
      auto it = std::find_if(o->input_by_device.begin(), o->input_by_device.end(),
                             [device](const DeviceInputWait& w) { return w.device == device; });
      if (it == o->input_by_device.end()) {
        o->input_by_device.push_back(DeviceInputWait{device, 0, 0, 0});
        it = o->input_by_device.end() - 1;
      }
      it->input_ns += times[Category::kInput];
      it->step_ns += s.end_ns - s.start_ns;
    }
  }
  for (DeviceInputWait& w : o->input_by_device) {
    w.pct = Share(w.input_ns, w.step_ns);
    WidenRange(&o->input_range, w.pct, absl::StrCat(o->host, " device ", w.device));
  }
}

// A device that ran work but that the trace does not describe (a PyTorch trace without
// deviceProperties, an XSpace without device stats) still counts, named by its id.
void AddUndescribedDevices(const ToolTrace& t, RunEnvironment* env) {
  for (const DeviceEvent& d : t.device_events) {
    const bool known = std::any_of(env->devices.begin(), env->devices.end(),
                                   [&](const DeviceInfo& i) { return i.id == d.device; });
    if (known) continue;
    DeviceInfo info;
    info.id = d.device;
    info.name = absl::StrCat("device ", d.device, " (not described by the trace)");
    env->devices.push_back(std::move(info));
  }
  std::sort(env->devices.begin(), env->devices.end(),
            [](const DeviceInfo& a, const DeviceInfo& b) { return a.id < b.id; });
}

}  // namespace

HostOverview ComputeOverview(const ToolTrace& t, const HostSummary& summary) {
  HostOverview o;
  o.host = t.host;
  o.environment = t.environment;
  AddUndescribedDevices(t, &o.environment);
  o.warnings = summary.warnings;
  FillInputByDevice(summary, &o);
  struct Edge {
    int64_t t;
    int8_t delta;
    Cnt c;
  };
  std::vector<Edge> edges;
  edges.reserve(2 * (t.device_events.size() + t.host_events.size()));
  for (const DeviceEvent& d : t.device_events) {
    if (d.end_ns <= d.start_ns) continue;
    if (d.is_kernel && d.kind != OpKind::kCollective) {
      ++o.compute_kernels;
      o.compute_kernel_ns += d.end_ns - d.start_ns;
    }
    const Cnt c = DeviceCounter(t, d);
    edges.push_back(Edge{d.start_ns, 1, c});
    edges.push_back(Edge{d.end_ns, -1, c});
  }
  for (const HostEvent& e : t.host_events) {
    if (e.role == HostEventRole::kStep || e.end_ns <= e.start_ns) continue;
    const Cnt c = HostCounter(e);
    edges.push_back(Edge{e.start_ns, 1, c});
    edges.push_back(Edge{e.end_ns, -1, c});
  }
  std::sort(edges.begin(), edges.end(), [](const Edge& a, const Edge& b) { return a.t < b.t; });
  std::vector<size_t> steps(summary.steps.size());
  for (size_t i = 0; i < steps.size(); ++i) steps[i] = i;
  std::sort(steps.begin(), steps.end(), [&](size_t a, size_t b) {
    return summary.steps[a].start_ns < summary.steps[b].start_ns;
  });
  o.steps.resize(summary.steps.size());
  for (size_t i = 0; i < summary.steps.size(); ++i) {
    const HostStep& s = summary.steps[i];
    o.steps[i].step = s.step;
    o.steps[i].start_ns = s.start_ns;
    o.steps[i].step_time_ns = s.end_ns - s.start_ns;
  }
  std::array<int32_t, kNumCnt> counts{};
  size_t first = 0;  // first step (in start order) that may still overlap what comes
  const auto add_segment = [&](int64_t a, int64_t b) {
    if (a >= b) return;
    bool sixteen = false;
    const OverviewCategory cat = CategoryOfCounts(counts, &sixteen);
    if (cat == OverviewCategory::kOther) return;  // the remainder, below
    for (size_t k = first; k < steps.size(); ++k) {
      const HostStep& s = summary.steps[steps[k]];
      if (s.start_ns >= b) break;
      const int64_t lo = std::max(a, s.start_ns);
      const int64_t hi = std::min(b, s.end_ns);
      if (lo >= hi) continue;
      OverviewTimes& times = o.steps[steps[k]].times;
      times[cat] += hi - lo;
      if (cat == OverviewCategory::kDeviceCompute) {
        (sixteen ? times.compute_16bit_ns : times.compute_32bit_ns) += hi - lo;
      }
    }
  };
  for (size_t i = 0; i < edges.size();) {
    const int64_t now = edges[i].t;
    while (i < edges.size() && edges[i].t == now) {
      counts[edges[i].c] += edges[i].delta;
      ++i;
    }
    // A step that ended by `now` overlaps no later segment (segments only move forward).
    while (first < steps.size() && summary.steps[steps[first]].end_ns <= now) ++first;
    if (i < edges.size()) add_segment(now, edges[i].t);
  }
  for (OverviewStep& s : o.steps) {
    s.times[OverviewCategory::kOther] = std::max<int64_t>(0, s.step_time_ns - s.times.total());
    for (int c = 0; c < kNumOverviewCategories; ++c)
      o.total.ns[static_cast<size_t>(c)] += s.times.ns[static_cast<size_t>(c)];
    o.total.compute_16bit_ns += s.times.compute_16bit_ns;
    o.total.compute_32bit_ns += s.times.compute_32bit_ns;
    o.step_ns += s.step_time_ns;
  }
  std::vector<int64_t> step_times;
  step_times.reserve(o.steps.size());
  for (const OverviewStep& s : o.steps) step_times.push_back(s.step_time_ns);
  o.step_time = StepTimeStatsOf(step_times);
  return o;
}

namespace {

void FillTop(HostTools* h) {
  HostOverview& o = h->overview;
  int64_t kernel_total = 0;
  for (const KernelStat& k : h->kernels) {
    kernel_total += k.total_ns;
    o.kernels += k.occurrences;
    if (k.tensor_core_eligible) o.tensor_core_eligible_ns += k.total_ns;
    if (k.tensor_core_used) o.tensor_core_used_ns += k.total_ns;
  }
  o.kernel_ns = kernel_total;
  // Top kernels by total time, summed over launching ops.
  std::map<std::string, int64_t> per_kernel;
  for (const KernelStat& k : h->kernels) per_kernel[k.kernel] += k.total_ns;
  std::vector<std::pair<std::string, int64_t>> kernels(per_kernel.begin(), per_kernel.end());
  std::sort(kernels.begin(), kernels.end(), [](const auto& a, const auto& b) {
    return std::tie(b.second, a.first) < std::tie(a.second, b.first);
  });
  for (size_t i = 0; i < kernels.size() && i < kMaxTop; ++i) {
    o.top_kernels.push_back(TopEntry{kernels[i].first, kernels[i].second,
                                     Share(kernels[i].second, kernel_total), 0, ""});
  }
  int64_t device_self = 0;
  int64_t host_self = 0;
  for (const OpStat& s : h->ops.by_op) {
    device_self += s.device_self_ns;
    host_self += s.host_self_ns;
  }
  const bool device = device_self > 0;
  for (const OpStat& s : h->ops.by_op) {
    if (o.top_ops.size() == kMaxTop) break;
    const int64_t v = device ? s.device_self_ns : s.host_self_ns;
    if (v <= 0) continue;
    o.top_ops.push_back(TopEntry{s.name, v, Share(v, device ? device_self : host_self), 0, s.type});
  }
  if (!device) {
    std::sort(o.top_ops.begin(), o.top_ops.end(), [](const TopEntry& a, const TopEntry& b) {
      return std::tie(b.self_ns, a.name) < std::tie(a.self_ns, b.name);
    });
  }
  const auto cumulative = [](std::vector<TopEntry>* top, int64_t whole) {
    int64_t running = 0;
    for (TopEntry& e : *top) {
      running += e.self_ns;
      e.cum_pct = Share(running, whole);
    }
  };
  cumulative(&o.top_kernels, kernel_total);
  cumulative(&o.top_ops, device ? device_self : host_self);
}

}  // namespace

// Of every host's step time, the share spent communicating in collectives: in each step the
// host that waited least (the least collective time) stands for the communication every host
// did; the rest of the others' collective time is waiting. Absent without steps.
std::optional<double> CommunicatingShare(const PodBreakdown& breakdown) {
  int64_t communicating = 0;
  int64_t step_ns = 0;
  for (const PodStep& s : breakdown.steps) {
    if (s.hosts.empty()) continue;
    int64_t least = s.hosts.front().categories[Category::kCollectives];
    for (const PodHostStep& h : s.hosts) {
      least = std::min(least, h.categories[Category::kCollectives]);
      step_ns += h.step_time_ns;
    }
    communicating += least * static_cast<int64_t>(s.hosts.size());
  }
  if (step_ns <= 0) return std::nullopt;
  return Share(communicating, step_ns);
}

// The advice for the consistently slow hosts of the pod's verdict (analysis/pod_verdict.h).
// A step that shows it: the first where its first host straggled with its cause.
std::string StragglerExample(const PodBreakdown& breakdown, const ConsistentlySlowVerdict& slow) {
  const SlowHost& first = slow.hosts.front();
  for (const PodStep& s : breakdown.steps) {
    if (s.straggler == first.host && (!first.cause.has_value() || s.cause == *first.cause)) {
      return absl::StrCat("step ", s.step, ": ", s.why);
    }
  }
  return slow.Text();
}

std::string StragglerAdvice(const ConsistentlySlowVerdict& slow) {
  const SlowHost& first = slow.hosts.front();
  const Category cause = first.cause.value_or(Category::kIdle);
  const std::string where =
      cause == Category::kHost   ? "its host code (launches, Python, the framework)"
      : cause == Category::kIdle ? "what runs outside its trace (network, other processes)"
                                 : absl::StrCat("its ", CategoryName(cause));
  const std::vector<std::string> names = slow.HostNames();
  return absl::StrCat("stragglers: ", absl::StrJoin(names, ", "),
                      names.size() == 1 ? " holds" : " hold", " the pod back, mostly in ",
                      CategoryName(cause), "; look at ", where,
                      names.size() == 1 ? "" : " on those hosts");
}

void OverviewForHost(const ToolTrace& trace, const HostSummary& summary, HostTools& h) {
  h.kernels = ComputeKernelStats(trace);
  h.ops = ComputeOpStats(trace);
  h.overview = ComputeOverview(trace, summary);
  FillTop(&h);
  // Per-host detail rows are not needed past the top lists.
  h.kernels.clear();
  h.ops = OpStats();
}

void OverviewForPod(PodTools& pod, const PodBreakdown& breakdown) {
  int64_t eligible = 0;
  int64_t used = 0;
  int64_t kernel_ns = 0;
  int64_t compute_kernels = 0;
  int64_t compute_kernel_ns = 0;
  std::vector<int64_t> step_times;
  const std::vector<int64_t>& warmup = breakdown.verdict.evidence.warmup_steps;
  pod.overview_warmup_steps = warmup;
  for (const HostTools& h : pod.hosts) {
    const HostOverview& o = h.overview;
    for (size_t c = 0; c < o.total.ns.size(); ++c) pod.overview_total.ns[c] += o.total.ns[c];
    pod.overview_total.compute_16bit_ns += o.total.compute_16bit_ns;
    pod.overview_total.compute_32bit_ns += o.total.compute_32bit_ns;
    pod.overview_step_ns += o.step_ns;
    pod.overview_steps += static_cast<int64_t>(o.steps.size());
    for (const OverviewStep& s : o.steps) {
      if (std::find(warmup.begin(), warmup.end(), s.step) == warmup.end()) {
        step_times.push_back(s.step_time_ns);
        continue;
      }
      // Warm-up steps are shown apart, as in the breakdown, never averaged in.
      for (size_t c = 0; c < s.times.ns.size(); ++c) pod.overview_total.ns[c] -= s.times.ns[c];
      pod.overview_total.compute_16bit_ns -= s.times.compute_16bit_ns;
      pod.overview_total.compute_32bit_ns -= s.times.compute_32bit_ns;
      pod.overview_step_ns -= s.step_time_ns;
      --pod.overview_steps;
    }
    if (o.input_range.known) {
      WidenRange(&pod.overview_input_range, o.input_range.min_pct, o.input_range.min_at);
      WidenRange(&pod.overview_input_range, o.input_range.max_pct, o.input_range.max_at);
    }
    eligible += o.tensor_core_eligible_ns;
    used += o.tensor_core_used_ns;
    kernel_ns += o.kernel_ns;
    compute_kernels += o.compute_kernels;
    compute_kernel_ns += o.compute_kernel_ns;
  }
  pod.overview_step_time = StepTimeStatsOf(step_times);
  pod.pod_steps = breakdown.verdict.evidence.steps;
  const OverviewTimes& tot = pod.overview_total;
  const int64_t step_ns = pod.overview_step_ns;
  const auto share = [&](OverviewCategory c) { return Share(tot[c], step_ns); };
  const auto add = [&](std::string kind, std::string advice, std::string reason) {
    pod.recommendations.push_back(
        Recommendation{std::move(kind), std::move(advice), std::move(reason)});
  };
  // The pod's step by category is the verdict's (the pod view over its judged steps, warm-up
  // steps apart), so the advice names the same categories with the same numbers as the
  // breakdown, and calls the pod "-bound" only in the verdict's bottleneck.
  const BottleneckVerdict& bottleneck = breakdown.verdict.bottleneck;
  const bool shares = bottleneck.finding == Finding::kFound;
  const auto pod_share = [&](Category c) {
    return shares ? bottleneck.share_pct[static_cast<size_t>(c)] : 0.0;
  };
  const auto bound = [&](Category c) { return shares && bottleneck.category == c; };
  const std::string of_step = shares ? absl::StrCat(" of the pod's step time (bottleneck ",
                                                    CategoryName(bottleneck.category), " ",
                                                    Pct(pod_share(bottleneck.category)), ")")
                                     : std::string();
  if (shares) {
    const double input = pod_share(Category::kInput);
    if (input >= 5.0) {
      add("input",
          absl::StrCat(bound(Category::kInput) ? "input-bound" : "input waits",
                       ": overlap input with compute (prefetch), parallelise "
                       "preprocessing (num_parallel_calls / DataLoader num_workers), cache or "
                       "pre-process the data once"),
          absl::StrCat("input ", Pct(input), of_step));
    }
  }
  if (step_ns > 0) {
    // Launch overhead (part of `host`): from compute kernels only (collective kernels are long
    // and few).
    const double launch = share(OverviewCategory::kKernelLaunch);
    const int64_t avg_kernel = compute_kernels == 0 ? 0 : compute_kernel_ns / compute_kernels;
    if (launch >= 10.0 || (compute_kernels > 0 && avg_kernel < 10'000 &&
                           share(OverviewCategory::kDeviceCompute) < 50.0 &&
                           tot[OverviewCategory::kKernelLaunch] > 0)) {
      add("launch",
          absl::StrCat(bound(Category::kHost) ? "launch-bound" : "launch overhead",
                       ": many tiny kernels; fuse them (XLA/torch.compile), use CUDA graphs, "
                       "or raise the batch size"),
          absl::StrCat("host: kernel launch ", Pct(launch), " of the hosts' step time; ",
                       compute_kernels, " compute kernels averaging ",
                       absl::StrFormat("%.1f", static_cast<double>(avg_kernel) / 1e3),
                       " us (collectives left out)"));
    }
    // Collective-bound: from communication only. Time spent inside a collective waiting for a
    // straggler is the straggler's problem, not the interconnect's.
    const double coll =
        shares ? pod_share(Category::kCollectives) : share(OverviewCategory::kCollectives);
    const std::optional<double> communicating = CommunicatingShare(breakdown);
    const double comm = communicating.value_or(coll);
    if (comm >= 20.0) {
      add("collectives",
          absl::StrCat(bound(Category::kCollectives) ? "collective-bound" : "communication",
                       ": overlap communication with compute (bucketing, async collectives), "
                       "reduce what is exchanged, check the interconnect"),
          communicating.has_value()
              ? absl::StrCat("communicating in collectives ", Pct(comm),
                             " of step time (in collectives ", Pct(coll),
                             ", the rest waiting for the slowest host)", of_step)
              : absl::StrCat("collectives ", Pct(coll), of_step));
    }
    const double compile = share(OverviewCategory::kCompilation);
    if (compile >= 10.0) {
      add("compilation",
          "compilation in the steps: warm up before profiling, avoid recompiles "
          "(static shapes)",
          absl::StrCat("host: compilation ", Pct(compile), " of the hosts' step time"));
    }
  }
  if (shares && pod_share(Category::kHost) >= 20.0) {
    add("host",
        absl::StrCat(bound(Category::kHost) ? "host-bound" : "host code",
                     ": the devices wait for host code between launches; move work to "
                     "the device or off the training thread"),
        absl::StrCat("host ", Pct(pod_share(Category::kHost)), of_step));
  }
  if (eligible > 0 && used < eligible / 2) {
    add("tensor_cores",
        "low Tensor Core use: compute matmuls/convolutions in 16-bit (mixed precision) and keep "
        "their dimensions multiples of 8",
        absl::StrCat("Tensor Cores run ", Pct(Share(used, eligible)),
                     " of the time of eligible kernels (", Ms(used), " of ", Ms(eligible), ")"));
  } else if (kernel_ns > 0 && tot.compute_32bit_ns > tot.compute_16bit_ns * 4 &&
             tot[OverviewCategory::kDeviceCompute] > 0 && used == 0) {
    add("tensor_cores",
        "device compute is 32-bit and no kernel uses Tensor Cores: try mixed precision",
        absl::StrCat("16-bit ",
                     Pct(Share(tot.compute_16bit_ns, tot[OverviewCategory::kDeviceCompute])),
                     " of device compute"));
  }
  const ConsistentlySlowVerdict& slow = breakdown.verdict.consistently_slow;
  if (slow.finding == Finding::kFound) {
    add("stragglers", StragglerAdvice(slow), StragglerExample(breakdown, slow));
  }
}

}  // namespace profctl::analysis
