// The step breakdown. Two parts:
//
// SummarizeHost, in one sort and one sweep over time (linear in the number of ops N, whatever the
// number of steps):
//  1. Steps: markers grouped by step number; a step's window is [min start, max end) of its
//     markers. Steps cut by the recorded window's edges (a marker past an edge, or one its writer
//     clipped there, StepMarker::cut) are partial: kept apart, clipped to the window, summarized
//     like the others but never compared; steps longer than max_step_ns are dropped with a
//     warning.
//  2. Every op becomes two events (+1 at its start, -1 at its end, clipped to the steps' overall
//     range), sorted once by time (radix sort of packed 8-byte keys, see SortByTime). One sweep
//     keeps, per device, a count of active ops per kind, plus counts of the host's active input
//     waits, syncs and launch/other ops, and the sum of all devices' counts (the host view). After
//     every event the affected timelines' current category is re-derived from their counts by the
//     precedence of breakdown.h.
//  3. Each timeline keeps a running sum of ns per category since the sweep began (lazily: time is
//     credited to the old category when the category changes). Exactly one category runs at any
//     instant, so the sums add up to elapsed time. A step's categories are the running sums at its
//     end minus those at its start (step boundaries are queries interleaved with the events), so
//     they add up to the step's wall time exactly, and overlapping steps cost nothing extra.
//
// BuildPodBreakdown, in pod_breakdown.cc, matches the hosts' steps by number and compares them
// (see breakdown.h).
#include "analysis/breakdown.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "analysis/breakdown_internal.h"

namespace profctl::analysis {
namespace {

using breakdown_internal::Ms;

// What a sweep counts. Device counters first (per device and summed over devices), then host.
enum Counter : uint8_t {
  kCntCompute = 0,
  kCntCollective,
  kCntH2D,
  kCntD2H,
  kCntD2D,
  kCntHostInput,  // host waits for input
  kCntHostSync,   // host blocked on the device
  kCntHostBusy,   // host launches work or runs other code
  kNumCounters,
};

using Counts = std::array<int32_t, kNumCounters>;

// The precedence of breakdown.h, from the counts of active ops on one timeline (a device plus
// the host, or all devices plus the host for the host view). A host blocked on the device is not
// overhead, even inside a framework op (readers emit nested host ops: aten::item contains
// cudaStreamSynchronize), so a sync masks launch/other host activity; input waits still win.
Category CategoryOf(const Counts& device, const Counts& host) {
  if (device[kCntCompute] > 0) return Category::kCompute;
  if (device[kCntD2H] > 0) return Category::kOutput;
  if (device[kCntD2D] > 0) return Category::kDeviceToDevice;
  if (device[kCntCollective] > 0) return Category::kCollectives;
  if (device[kCntH2D] > 0 || host[kCntHostInput] > 0) return Category::kInput;
  if (host[kCntHostSync] == 0 && host[kCntHostBusy] > 0) return Category::kHost;
  return Category::kIdle;
}

Counter CounterOf(OpKind kind) {
  switch (kind) {
    case OpKind::kDeviceCompute:
      return kCntCompute;
    case OpKind::kCollective:
      return kCntCollective;
    case OpKind::kMemcpyH2D:
      return kCntH2D;
    case OpKind::kMemcpyD2H:
      return kCntD2H;
    case OpKind::kMemcpyD2D:
      return kCntD2D;
    case OpKind::kHostInputWait:
      return kCntHostInput;
    case OpKind::kHostLaunch:
    case OpKind::kHostOther:
      return kCntHostBusy;
    case OpKind::kHostSync:
      return kCntHostSync;
  }
  return kNumCounters;  // not an OpKind: ignored
}

bool IsHostCounter(Counter c) {
  return c == kCntHostInput || c == kCntHostSync || c == kCntHostBusy;
}

// One edge of an op. source: device index, or kHostSource.
struct Event {
  int64_t t;
  int32_t source;
  Counter counter;
  int8_t delta;
};
constexpr int32_t kHostSource = -1;

// One category timeline (a device or the host view): the category in force since `since`, and
// ns credited to each category before `since`.
struct Timeline {
  Category category = Category::kIdle;
  int64_t since = 0;
  std::array<int64_t, kNumCategories> credited{};

  void Set(Category c, int64_t t) {
    if (c == category) return;
    credited[static_cast<int>(category)] += t - since;
    since = t;
    category = c;
  }
  // Adds sign * (ns per category from the sweep's start to t) to `out`; t >= since.
  void AddUpTo(int64_t t, int64_t sign, CategoryTimes& out) const {
    for (int c = 0; c < kNumCategories; ++c) out.ns[c] += sign * credited[c];
    out.ns[static_cast<int>(category)] += sign * (t - since);
  }
};

struct StepWindow {
  int64_t step = 0;
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  bool partial = false;  // cut by a window edge; start/end clipped to the window
};

// A step boundary to read the timelines at.
struct Query {
  int64_t t;
  size_t step_index;
  bool is_end;
};

// Steps from markers: grouped by number, windows checked against [window_start, window_end); a
// step with a marker its writer clipped at an edge (StepMarker::cut) is partial too.
std::vector<StepWindow> StepsFromMarkers(const HostTrace& trace, int64_t window_start,
                                         int64_t window_end, const BreakdownOptions& options,
                                         HostSummary& summary) {
  std::vector<StepMarker> markers;
  markers.reserve(trace.steps.size());
  int64_t inverted = 0;
  for (const StepMarker& m : trace.steps) {
    if (m.end_ns < m.start_ns) {
      ++inverted;
      continue;
    }
    markers.push_back(m);
  }
  if (inverted > 0) {
    summary.warnings.push_back(
        absl::StrCat(inverted, " step markers end before they start: ignored"));
  }
  std::sort(markers.begin(), markers.end(),
            [](const StepMarker& a, const StepMarker& b) { return a.step < b.step; });
  std::vector<StepWindow> steps;
  std::vector<int64_t> too_long;
  for (size_t i = 0; i < markers.size();) {
    StepWindow w{markers[i].step, markers[i].start_ns, markers[i].end_ns};
    bool cut = markers[i].cut;
    size_t j = i + 1;
    for (; j < markers.size() && markers[j].step == w.step; ++j) {
      w.start_ns = std::min(w.start_ns, markers[j].start_ns);
      w.end_ns = std::max(w.end_ns, markers[j].end_ns);
      cut = cut || markers[j].cut;
    }
    i = j;
    if (cut || w.start_ns < window_start || w.end_ns > window_end) {
      ++summary.partial_steps;
      w.start_ns = std::clamp(w.start_ns, window_start, window_end);
      w.end_ns = std::clamp(w.end_ns, window_start, window_end);
      w.partial = true;
      if (w.end_ns > w.start_ns) steps.push_back(w);
    } else if (w.end_ns - w.start_ns > options.max_step_ns) {
      too_long.push_back(w.step);
    } else {
      steps.push_back(w);
    }
  }
  if (!too_long.empty()) {
    constexpr size_t kMaxListed = 10;
    const size_t listed = std::min(too_long.size(), kMaxListed);
    summary.warnings.push_back(absl::StrCat(
        too_long.size(), " steps longer than ", Ms(options.max_step_ns),
        " ms dropped (a marker left open?): step ",
        absl::StrJoin(too_long.begin(), too_long.begin() + static_cast<ptrdiff_t>(listed), ", "),
        too_long.size() > listed ? ", ..." : ""));
  }
  if (std::none_of(steps.begin(), steps.end(), [](const StepWindow& w) { return !w.partial; })) {
    summary.warnings.push_back(
        absl::StrCat("no complete step: ", summary.partial_steps,
                     " cut by the recorded window's edges (kept as partial, not compared), ",
                     too_long.size(), " too long; capture a longer window (three steps or more)"));
  }
  return steps;
}

// Events are sorted in one of two forms. Packed (the usual case): one uint64 per event, the time
// since `lo` above kPayloadBits bits of source, counter and delta, so the sort moves 8-byte
// integers; it needs the steps' range under 2^47 ns (39 hours) and fewer than kHostCode devices.
// Otherwise wide: a 16-byte Event sorted by time.
constexpr int kPayloadBits = 16;
constexpr int64_t kMaxPackedRange = int64_t{1} << (63 - kPayloadBits);
constexpr uint64_t kHostCode = (1 << 12) - 1;  // 12 bits of source: devices 0..4094, host

uint64_t Pack(const Event& e, int64_t lo) {
  const uint64_t source = e.source == kHostSource ? kHostCode : static_cast<uint64_t>(e.source);
  return (static_cast<uint64_t>(e.t - lo) << kPayloadBits) | (source << 4) |
         (static_cast<uint64_t>(e.counter) << 1) | (e.delta > 0 ? 1 : 0);
}

Event Unpack(uint64_t key, int64_t lo) {
  const uint64_t source = (key >> 4) & kHostCode;
  return Event{lo + static_cast<int64_t>(key >> kPayloadBits),
               source == kHostCode ? kHostSource : static_cast<int32_t>(source),
               static_cast<Counter>((key >> 1) & 7), static_cast<int8_t>((key & 1) != 0 ? 1 : -1)};
}

// Sorts packed keys by time (their payload bits in no particular order) with an LSD radix sort
// over the time bits only, in as few passes of at most 12 bits as cover them (a range under
// 2^47 ns: at most 4), each one counting and one scattering pass, skipped when every key has the
// same digit. About 3x faster than std::sort on a million ops; costs one scratch copy of the keys.
void SortByTime(std::vector<uint64_t>& keys, int64_t range) {
  constexpr size_t kSmall = 1024;
  if (keys.size() < kSmall) {
    std::sort(keys.begin(), keys.end());
    return;
  }
  constexpr int kMaxDigitBits = 12;
  const int time_bits = std::bit_width(static_cast<uint64_t>(range));
  const int passes = (time_bits + kMaxDigitBits - 1) / kMaxDigitBits;
  if (passes == 0) return;  // all at one instant
  const int digit_bits = (time_bits + passes - 1) / passes;
  const uint64_t mask = (uint64_t{1} << digit_bits) - 1;
  std::vector<uint64_t> scratch(keys.size());
  std::vector<size_t> count(size_t{1} << digit_bits);
  for (int shift = kPayloadBits; shift < kPayloadBits + time_bits; shift += digit_bits) {
    std::fill(count.begin(), count.end(), 0);
    for (uint64_t k : keys) ++count[(k >> shift) & mask];
    if (count[(keys.front() >> shift) & mask] == keys.size()) continue;
    size_t sum = 0;
    for (size_t& c : count) {
      const size_t n = c;
      c = sum;
      sum += n;
    }
    for (uint64_t k : keys) scratch[count[(k >> shift) & mask]++] = k;
    keys.swap(scratch);
  }
}

// Calls emit(Event) for both edges of every op that counts, clipped to [lo, hi); warns about
// ops that cannot count.
template <typename Emit>
void ForEachEdge(const HostTrace& trace, int64_t lo, int64_t hi, HostSummary& summary, Emit emit) {
  auto edges = [&](const Op& op, int32_t source, Counter counter) {
    const int64_t s = std::max(op.start_ns, lo);
    const int64_t e = std::min(op.end_ns, hi);
    if (s >= e) return;
    emit(Event{s, source, counter, 1});
    emit(Event{e, source, counter, -1});
  };
  int64_t inverted = 0;
  int64_t misplaced_device_ops = 0;
  for (size_t d = 0; d < trace.devices.size(); ++d) {
    for (const Op& op : trace.devices[d].ops) {
      if (op.end_ns < op.start_ns) {
        ++inverted;
        continue;
      }
      const Counter c = CounterOf(op.kind);
      if (c == kNumCounters) continue;  // not an OpKind
      // A host kind filed under a device is still host activity.
      edges(op, IsHostCounter(c) ? kHostSource : static_cast<int32_t>(d), c);
    }
  }
  for (const Op& op : trace.host_ops) {
    if (op.end_ns < op.start_ns) {
      ++inverted;
      continue;
    }
    const Counter c = CounterOf(op.kind);
    if (!IsHostCounter(c)) {
      ++misplaced_device_ops;  // no device to charge it to
      continue;
    }
    edges(op, kHostSource, c);
  }
  if (inverted > 0) {
    summary.warnings.push_back(absl::StrCat(inverted, " ops end before they start: ignored"));
  }
  if (misplaced_device_ops > 0) {
    summary.warnings.push_back(absl::StrCat(
        misplaced_device_ops, " device ops among the host ops (no device to charge): ignored"));
  }
}

// The sweep over `num_events` time-sorted events, event(i) giving the i-th: fills each step's
// host view and per-device categories.
template <typename EventAt>
void SweepSorted(size_t num_events, EventAt event, size_t num_devices, int64_t lo,
                 std::vector<HostStep>& steps) {
  std::vector<Query> queries;
  queries.reserve(2 * steps.size());
  for (size_t i = 0; i < steps.size(); ++i) {
    queries.push_back(Query{steps[i].start_ns, i, false});
    queries.push_back(Query{steps[i].end_ns, i, true});
  }
  std::sort(queries.begin(), queries.end(),
            [](const Query& a, const Query& b) { return a.t < b.t; });

  std::vector<Counts> device_counts(num_devices, Counts{});
  Counts all_devices{};
  Counts host{};
  // Timelines 0..num_devices-1: the devices; num_devices: the host view.
  std::vector<Timeline> timelines(num_devices + 1);
  for (Timeline& tl : timelines) tl.since = lo;
  Timeline& host_view = timelines[num_devices];

  auto answer = [&](const Query& q) {
    HostStep& step = steps[q.step_index];
    const int64_t sign = q.is_end ? 1 : -1;
    for (size_t d = 0; d < num_devices; ++d) {
      timelines[d].AddUpTo(q.t, sign, step.devices[d].second);
    }
    host_view.AddUpTo(q.t, sign, step.host);
  };

  size_t next_query = 0;
  for (size_t i = 0; i < num_events; ++i) {
    const Event e = event(i);
    // All events before q.t are applied; events at q.t change nothing before q.t.
    while (next_query < queries.size() && queries[next_query].t <= e.t) {
      answer(queries[next_query++]);
    }
    if (e.source == kHostSource) {
      host[e.counter] += e.delta;
      for (size_t d = 0; d < num_devices; ++d) {
        timelines[d].Set(CategoryOf(device_counts[d], host), e.t);
      }
    } else {
      const auto d = static_cast<size_t>(e.source);
      device_counts[d][e.counter] += e.delta;
      all_devices[e.counter] += e.delta;
      timelines[d].Set(CategoryOf(device_counts[d], host), e.t);
    }
    host_view.Set(CategoryOf(all_devices, host), e.t);
  }
  while (next_query < queries.size()) answer(queries[next_query++]);
}

// Frees the trace's ops (a consumed trace, once its edges are extracted).
void ReleaseOps(HostTrace* trace) {
  if (trace == nullptr) return;
  std::vector<Op>().swap(trace->host_ops);
  for (DeviceTrace& d : trace->devices) std::vector<Op>().swap(d.ops);
}

// Fills each step's host view and per-device categories. steps[i] has start/end set and
// `devices` sized to trace.devices. With `consumed` (== &trace), the trace's ops are freed as
// soon as their edges are extracted, before the sort.
void Sweep(const HostTrace& trace, std::vector<HostStep>& steps, HostSummary& summary,
           HostTrace* consumed) {
  if (steps.empty()) return;
  int64_t lo = steps.front().start_ns;
  int64_t hi = steps.front().end_ns;
  for (const HostStep& s : steps) {
    lo = std::min(lo, s.start_ns);
    hi = std::max(hi, s.end_ns);
  }
  size_t num_ops = trace.host_ops.size();
  for (const DeviceTrace& d : trace.devices) num_ops += d.ops.size();
  const size_t num_devices = trace.devices.size();

  // Steps lie inside the recorded window, whose span fits int64: hi - lo does not overflow.
  if (hi - lo < kMaxPackedRange && num_devices < kHostCode) {
    std::vector<uint64_t> keys;
    keys.reserve(2 * num_ops);
    ForEachEdge(trace, lo, hi, summary, [&](const Event& e) { keys.push_back(Pack(e, lo)); });
    ReleaseOps(consumed);
    SortByTime(keys, hi - lo);
    SweepSorted(
        keys.size(), [&](size_t i) { return Unpack(keys[i], lo); }, num_devices, lo, steps);
  } else {
    std::vector<Event> events;
    events.reserve(2 * num_ops);
    ForEachEdge(trace, lo, hi, summary, [&](const Event& e) { events.push_back(e); });
    ReleaseOps(consumed);
    std::sort(events.begin(), events.end(),
              [](const Event& a, const Event& b) { return a.t < b.t; });
    SweepSorted(
        events.size(), [&](size_t i) { return events[i]; }, num_devices, lo, steps);
  }
}

}  // namespace

absl::string_view CategoryName(Category c) {
  switch (c) {
    case Category::kCompute:
      return "compute";
    case Category::kOutput:
      return "output";
    case Category::kDeviceToDevice:
      return "d2d";
    case Category::kCollectives:
      return "collectives";
    case Category::kInput:
      return "input";
    case Category::kHost:
      return "host";
    case Category::kIdle:
      return "idle";
  }
  return "unknown";
}

int64_t CategoryTimes::total() const {
  int64_t sum = 0;
  for (int64_t v : ns) sum += v;
  return sum;
}

namespace {

HostSummary Summarize(const HostTrace& trace, const BreakdownOptions& options,
                      HostTrace* consumed) {
  HostSummary summary;
  summary.host = trace.host;
  summary.world_size = trace.world_size;
  // The trace is dropped after this: its reader's warnings live on in the summary.
  summary.warnings = trace.warnings;

  int64_t window_start = trace.window_start_ns;
  int64_t window_end = trace.window_end_ns;
  if (window_end <= window_start) {
    // No recorded window: the trace's own extent stands in for it.
    bool any = false;
    auto extend = [&](int64_t s, int64_t e) {
      if (e < s) return;
      window_start = any ? std::min(window_start, s) : s;
      window_end = any ? std::max(window_end, e) : e;
      any = true;
    };
    for (const StepMarker& m : trace.steps) extend(m.start_ns, m.end_ns);
    for (const Op& op : trace.host_ops) extend(op.start_ns, op.end_ns);
    for (const DeviceTrace& d : trace.devices) {
      for (const Op& op : d.ops) extend(op.start_ns, op.end_ns);
    }
    if (!any) window_end = window_start;
    summary.warnings.push_back(absl::StrCat(
        "no recorded window (start ", trace.window_start_ns, " ns, end ", trace.window_end_ns,
        " ns): using the trace's extent; partial first/last steps cannot be detected"));
  }

  // Every duration below is at most the window's span: keep it within int64.
  constexpr int64_t kMaxSpan = std::numeric_limits<int64_t>::max();
  if (window_end > 0 && window_start < window_end - kMaxSpan) {
    summary.warnings.push_back(absl::StrCat("recorded window [", window_start, ", ", window_end,
                                            ") ns is longer than int64 ns: its start is clamped"));
    window_start = window_end - kMaxSpan;
  }

  std::vector<StepWindow> windows;
  if (trace.steps.empty()) {
    summary.has_markers = false;
    windows.push_back(StepWindow{-1, window_start, window_end});
    summary.warnings.push_back(absl::StrCat(
        "no step markers: the whole recorded window (", Ms(window_end - window_start),
        " ms) is analysed as one pseudo-step (-1); mark steps (e.g. "
        "jax.profiler.StepTraceAnnotation, torch.profiler's step()) for per-step results"));
  } else {
    windows = StepsFromMarkers(trace, window_start, window_end, options, summary);
  }

  // One sweep for complete and partial steps, then apart.
  std::vector<HostStep> all(windows.size());
  for (size_t i = 0; i < windows.size(); ++i) {
    HostStep& s = all[i];
    s.step = windows[i].step;
    s.start_ns = windows[i].start_ns;
    s.end_ns = windows[i].end_ns;
    s.devices.reserve(trace.devices.size());
    for (const DeviceTrace& d : trace.devices) s.devices.emplace_back(d.id, CategoryTimes{});
  }
  Sweep(trace, all, summary, consumed);
  ReleaseOps(consumed);  // also when there was nothing to sweep
  for (size_t i = 0; i < windows.size(); ++i) {
    (windows[i].partial ? summary.partial : summary.steps).push_back(std::move(all[i]));
  }
  return summary;
}

}  // namespace

HostSummary SummarizeHost(const HostTrace& trace, const BreakdownOptions& options) {
  return Summarize(trace, options, nullptr);
}

HostSummary SummarizeHost(HostTrace&& trace, const BreakdownOptions& options) {
  return Summarize(trace, options, &trace);
}

namespace breakdown_internal {

std::string Ms(int64_t ns) {
  // To 0.1 ms, rounded half away from zero, without floating point.
  const bool negative = ns < 0;
  const uint64_t abs_ns =
      negative ? uint64_t{0} - static_cast<uint64_t>(ns) : static_cast<uint64_t>(ns);
  const uint64_t tenths = (abs_ns + 50'000) / 100'000;
  return absl::StrCat(negative && tenths != 0 ? "-" : "", tenths / 10, ".", tenths % 10);
}

}  // namespace breakdown_internal

}  // namespace profctl::analysis
