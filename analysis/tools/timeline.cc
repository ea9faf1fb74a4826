#include <algorithm>
#include <cstdint>
#include <map>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"
#include "analysis/breakdown.h"
#include "analysis/tools/tool_internal.h"
#include "analysis/tools/tools.h"

namespace profctl::analysis {

// --- timeline -----------------------------------------------------------------------------------

namespace {

using Span = std::pair<int64_t, int64_t>;

// `spans` merged into disjoint ones, in order.
std::vector<Span> Merged(std::vector<Span> spans) {
  std::sort(spans.begin(), spans.end());
  std::vector<Span> out;
  for (const Span& s : spans) {
    if (s.second <= s.first) continue;
    if (!out.empty() && s.first <= out.back().second) {
      out.back().second = std::max(out.back().second, s.second);
    } else {
      out.push_back(s);
    }
  }
  return out;
}

int64_t Length(const std::vector<Span>& merged) {
  int64_t n = 0;
  for (const Span& s : merged) n += s.second - s.first;
  return n;
}

// The length of the intersection of two merged span lists.
int64_t Intersection(const std::vector<Span>& a, const std::vector<Span>& b) {
  int64_t n = 0;
  size_t i = 0;
  size_t j = 0;
  while (i < a.size() && j < b.size()) {
    const int64_t lo = std::max(a[i].first, b[j].first);
    const int64_t hi = std::min(a[i].second, b[j].second);
    if (hi > lo) n += hi - lo;
    if (a[i].second < b[j].second) {
      ++i;
    } else {
      ++j;
    }
  }
  return n;
}

// The runtime and driver calls that put one device event on a stream (HTA's launch events).
bool IsLaunchCall(absl::string_view name) {
  static constexpr absl::string_view kLaunches[] = {
      "cudaLaunchKernel", "cudaLaunchKernelExC", "cuLaunchKernel",  "cuLaunchKernelEx",
      "cudaMemcpyAsync",  "cudaMemsetAsync",     "hipLaunchKernel", "hipExtLaunchKernel",
      "hipMemcpyAsync",   "hipMemsetAsync",
  };
  return std::find(std::begin(kLaunches), std::end(kLaunches), name) != std::end(kLaunches);
}

size_t BucketOf(int64_t delay_ns) {
  size_t b = 0;
  while (b < kLaunchDelayBucketBoundsNs.size() && delay_ns >= kLaunchDelayBucketBoundsNs[b]) ++b;
  return b;
}

// The nearest-rank percentile `p` (0..100) of sorted `v` (breakdown.h Percentile); -1 for none.
int64_t PercentileOrNone(const std::vector<int64_t>& v, int p) {
  return v.empty() ? -1 : Percentile(v, p);
}

void AddIdle(IdleByCause& into, const IdleByCause& from) {
  into.host_wait_ns += from.host_wait_ns;
  into.kernel_wait_ns += from.kernel_wait_ns;
  into.other_ns += from.other_ns;
}

}  // namespace

HostTimeline ComputeTimeline(const ToolTrace& t) {
  HostTimeline out;
  // The launch calls by correlation id (host events of the runtime role).
  absl::flat_hash_map<int64_t, const HostEvent*> calls;
  for (const HostEvent& h : t.host_events) {
    if (h.role == HostEventRole::kRuntime && h.correlation_id >= 0) {
      calls.emplace(h.correlation_id, &h);
    }
  }
  std::vector<Span> communication;
  std::vector<Span> computation;
  std::map<std::pair<int64_t, int64_t>, std::vector<const DeviceEvent*>> by_stream;
  std::vector<int64_t> delays;
  for (const DeviceEvent& d : t.device_events) {
    if (d.is_kernel) {
      (d.kind == OpKind::kCollective ? communication : computation)
          .emplace_back(d.start_ns, d.end_ns);
    }
    by_stream[{d.device, d.stream}].push_back(&d);
    const auto call = d.correlation_id >= 0 ? calls.find(d.correlation_id) : calls.end();
    if (call == calls.end() || !IsLaunchCall(t.Str(call->second->name))) continue;
    const HostEvent& c = *call->second;
    const int64_t delay = std::max<int64_t>(0, d.start_ns - c.end_ns);
    LaunchDelayStats& l = out.launch;
    l.min_ns = l.launches == 0 ? delay : std::min(l.min_ns, delay);
    l.max_ns = l.launches == 0 ? delay : std::max(l.max_ns, delay);
    ++l.launches;
    l.sum_ns += delay;
    l.outliers += delay > kLaunchDelayOutlierNs ? 1 : 0;
    l.slow_calls += c.end_ns - c.start_ns > kSlowLaunchCallNs ? 1 : 0;
    l.shorter_than_launch += d.end_ns - d.start_ns < c.end_ns - c.start_ns ? 1 : 0;
    ++l.histogram[BucketOf(delay)];
    delays.push_back(delay);
  }
  std::sort(delays.begin(), delays.end());
  out.launch.p50_ns = PercentileOrNone(delays, 50);
  out.launch.p90_ns = PercentileOrNone(delays, 90);
  out.launch.p99_ns = PercentileOrNone(delays, 99);

  const std::vector<Span> comm = Merged(std::move(communication));
  const std::vector<Span> comp = Merged(std::move(computation));
  out.communication_ns = Length(comm);
  out.computation_ns = Length(comp);
  out.overlap_ns = Intersection(comm, comp);

  for (auto& [key, events] : by_stream) {
    StreamTimeline s;
    s.device = key.first;
    s.stream = key.second;
    std::stable_sort(events.begin(), events.end(), [](const DeviceEvent* a, const DeviceEvent* b) {
      return a->start_ns < b->start_ns;
    });
    s.events = static_cast<int64_t>(events.size());
    std::vector<Span> busy;
    // The queue: +1 at each launch call's start, -1 at its event's start (launches first on
    // ties: work is queued before it starts).
    std::vector<std::tuple<int64_t, int, int>> changes;  // time, order, +1/-1
    for (size_t i = 0; i < events.size(); ++i) {
      const DeviceEvent& d = *events[i];
      busy.emplace_back(d.start_ns, d.end_ns);
      const auto call = d.correlation_id >= 0 ? calls.find(d.correlation_id) : calls.end();
      const bool launched = call != calls.end() && IsLaunchCall(t.Str(call->second->name));
      if (launched) {
        changes.emplace_back(call->second->start_ns, 0, 1);
        changes.emplace_back(d.start_ns, 1, -1);
      }
      if (i == 0) continue;
      const int64_t prev_end = events[i - 1]->end_ns;
      const int64_t gap = d.start_ns - prev_end;
      if (gap <= 0) continue;
      if (call != calls.end() && call->second->start_ns > prev_end) {
        s.idle.host_wait_ns += gap;
      } else if (gap < kKernelWaitNs) {
        s.idle.kernel_wait_ns += gap;
      } else {
        s.idle.other_ns += gap;
      }
    }
    s.busy_ns = Length(Merged(std::move(busy)));
    std::sort(changes.begin(), changes.end());
    std::vector<int64_t> samples;
    samples.reserve(changes.size());
    int64_t queue = 0;
    int64_t sum = 0;
    for (const auto& [time, order, delta] : changes) {
      queue += delta;
      samples.push_back(queue);
      sum += queue;
      s.queue_max = std::max(s.queue_max, queue);
    }
    s.queue_samples = static_cast<int64_t>(samples.size());
    if (!samples.empty()) {
      s.queue_mean = static_cast<double>(sum) / static_cast<double>(samples.size());
      std::sort(samples.begin(), samples.end());
      s.queue_p50 = PercentileOrNone(samples, 50);
    }
    AddIdle(out.idle, s.idle);
    out.streams.push_back(s);
  }
  return out;
}

HostTimeline MergeTimelines(const std::vector<HostTimeline>& hosts) {
  HostTimeline pod;
  LaunchDelayStats& l = pod.launch;
  for (const HostTimeline& h : hosts) {
    pod.communication_ns += h.communication_ns;
    pod.computation_ns += h.computation_ns;
    pod.overlap_ns += h.overlap_ns;
    AddIdle(pod.idle, h.idle);
    if (h.launch.launches == 0) continue;
    l.min_ns = l.launches == 0 ? h.launch.min_ns : std::min(l.min_ns, h.launch.min_ns);
    l.max_ns = l.launches == 0 ? h.launch.max_ns : std::max(l.max_ns, h.launch.max_ns);
    l.launches += h.launch.launches;
    l.sum_ns += h.launch.sum_ns;
    l.outliers += h.launch.outliers;
    l.slow_calls += h.launch.slow_calls;
    l.shorter_than_launch += h.launch.shorter_than_launch;
    for (size_t b = 0; b < kNumLaunchDelayBuckets; ++b) l.histogram[b] += h.launch.histogram[b];
  }
  return pod;
}

void TimelineForHost(const ToolTrace& trace, const HostSummary&, HostTools& h) {
  h.timeline = ComputeTimeline(trace);
}

void TimelineForPod(PodTools& pod, const PodBreakdown&) {
  std::vector<HostTimeline> hosts;
  hosts.reserve(pod.hosts.size());
  for (const HostTools& h : pod.hosts) hosts.push_back(h.timeline);
  pod.timeline = MergeTimelines(hosts);
}

}  // namespace profctl::analysis
