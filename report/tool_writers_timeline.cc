// The timeline tool's writers: communication hidden under computation, idle time by cause,
// kernel launch delays and queue length per stream, per host and for the pod (docs/tools.md
// "timeline").

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "report/tool_writers_internal.h"

namespace profctl::report::tool_writers_internal {

using analysis::HostTimeline;
using analysis::HostTools;
using analysis::IdleByCause;
using analysis::LaunchDelayStats;
using analysis::PodTools;
using analysis::StreamTimeline;

namespace {

void PctOrNull(Json& j, double pct) { pct < 0 ? j.Null() : j.Double(pct, 2); }

void IdleJson(Json& j, const IdleByCause& idle) {
  j.BeginObject();
  j.Key("host_wait_ms");
  j.Ms(idle.host_wait_ns);
  j.Key("kernel_wait_ms");
  j.Ms(idle.kernel_wait_ns);
  j.Key("other_ms");
  j.Ms(idle.other_ns);
  j.Key("total_ms");
  j.Ms(idle.total());
  j.Key("host_wait_pct");
  j.Double(Pct(idle.host_wait_ns, idle.total()), 2);
  j.Key("kernel_wait_pct");
  j.Double(Pct(idle.kernel_wait_ns, idle.total()), 2);
  j.Key("other_pct");
  j.Double(Pct(idle.other_ns, idle.total()), 2);
  j.EndObject();
}

void UsOrNull(Json& j, int64_t ns, bool known) { known ? j.Us(ns) : j.Null(); }

void LaunchJson(Json& j, const LaunchDelayStats& l) {
  const bool any = l.launches > 0;
  j.BeginObject();
  j.Key("launches");
  j.Int(l.launches);
  j.Key("mean_us");
  any ? j.Double(l.mean_ns() / 1e3, 3) : j.Null();
  j.Key("min_us");
  UsOrNull(j, l.min_ns, any);
  j.Key("p50_us");
  UsOrNull(j, l.p50_ns, any && l.p50_ns >= 0);
  j.Key("p90_us");
  UsOrNull(j, l.p90_ns, any && l.p90_ns >= 0);
  j.Key("p99_us");
  UsOrNull(j, l.p99_ns, any && l.p99_ns >= 0);
  j.Key("max_us");
  UsOrNull(j, l.max_ns, any);
  j.Key("outliers");
  j.Int(l.outliers);
  j.Key("slow_calls");
  j.Int(l.slow_calls);
  j.Key("shorter_than_launch");
  j.Int(l.shorter_than_launch);
  j.Key("histogram");
  j.BeginArray();
  for (size_t b = 0; b < analysis::kNumLaunchDelayBuckets; ++b) {
    j.BeginObject();
    j.Key("below_us");
    if (b < analysis::kLaunchDelayBucketBoundsNs.size()) {
      j.Us(analysis::kLaunchDelayBucketBoundsNs[b]);
    } else {
      j.Null();
    }
    j.Key("count");
    j.Int(l.histogram[b]);
    j.EndObject();
  }
  j.EndArray();
  j.EndObject();
}

// The keys every timeline object has (the pod's and each host's).
void TimelineKeys(Json& j, const HostTimeline& t) {
  j.Key("communication_ms");
  j.Ms(t.communication_ns);
  j.Key("computation_ms");
  j.Ms(t.computation_ns);
  j.Key("overlap_ms");
  j.Ms(t.overlap_ns);
  j.Key("overlap_pct");
  PctOrNull(j, t.OverlapPct());
  j.Key("idle");
  IdleJson(j, t.idle);
  j.Key("launch_delay");
  LaunchJson(j, t.launch);
}

std::string OverlapText(const HostTimeline& t) {
  return t.OverlapPct() < 0 ? "no communication" : absl::StrFormat("%.2f %%", t.OverlapPct());
}

std::string IdleText(const IdleByCause& i) {
  return absl::StrFormat("%s ms: host wait %.2f %%, kernel wait %.2f %%, other %.2f %%",
                         MsText(i.total()), Pct(i.host_wait_ns, i.total()),
                         Pct(i.kernel_wait_ns, i.total()), Pct(i.other_ns, i.total()));
}

std::string LaunchText(const LaunchDelayStats& l) {
  if (l.launches == 0) return "no launch linked to its device event";
  std::string out = absl::StrFormat("%d launches, mean %.3f us", l.launches, l.mean_ns() / 1e3);
  if (l.p50_ns >= 0) {
    absl::StrAppend(&out, ", p50 ", UsText(l.p50_ns), " us, p90 ", UsText(l.p90_ns), " us, p99 ",
                    UsText(l.p99_ns), " us");
  }
  absl::StrAppend(&out, ", max ", UsText(l.max_ns), " us; ", l.outliers, " over ",
                  analysis::kLaunchDelayOutlierNs / 1000, " us");
  return out;
}

}  // namespace

void TimelineJson(Json& j, const PodTools& p) {
  j.Key("thresholds");
  j.BeginObject();
  j.Key("kernel_wait_us");
  j.Us(analysis::kKernelWaitNs);
  j.Key("launch_delay_outlier_us");
  j.Us(analysis::kLaunchDelayOutlierNs);
  j.Key("slow_launch_call_us");
  j.Us(analysis::kSlowLaunchCallNs);
  j.EndObject();
  j.Key("pod");
  j.BeginObject();
  TimelineKeys(j, p.timeline);
  j.EndObject();
  j.Key("per_host");
  j.BeginArray();
  for (const HostTools& h : p.hosts) {
    j.BeginObject();
    j.Key("host");
    j.String(h.host);
    TimelineKeys(j, h.timeline);
    j.Key("streams");
    j.BeginArray();
    for (const StreamTimeline& s : h.timeline.streams) {
      j.BeginObject();
      j.Key("device");
      j.Int(s.device);
      j.Key("stream");
      j.Int(s.stream);
      j.Key("events");
      j.Int(s.events);
      j.Key("busy_ms");
      j.Ms(s.busy_ns);
      j.Key("host_wait_ms");
      j.Ms(s.idle.host_wait_ns);
      j.Key("kernel_wait_ms");
      j.Ms(s.idle.kernel_wait_ns);
      j.Key("other_ms");
      j.Ms(s.idle.other_ns);
      j.Key("queue_samples");
      j.Int(s.queue_samples);
      j.Key("queue_mean");
      j.Double(s.queue_mean, 2);
      j.Key("queue_p50");
      j.Int(s.queue_p50);
      j.Key("queue_max");
      j.Int(s.queue_max);
      j.EndObject();
    }
    j.EndArray();
    j.EndObject();
  }
  j.EndArray();
}

void TimelineCsv(std::string& out, const PodTools& p) {
  Row(&out, {"host", "device", "stream", "events", "busy_ms", "host_wait_ms", "kernel_wait_ms",
             "other_ms", "queue_mean", "queue_p50", "queue_max", "communication_ms",
             "computation_ms", "overlap_pct", "launches", "launch_delay_mean_us",
             "launch_delay_p50_us", "launch_delay_p99_us", "launch_delay_max_us"});
  for (const HostTools& h : p.hosts) {
    const HostTimeline& t = h.timeline;
    const LaunchDelayStats& l = t.launch;
    const bool any = l.launches > 0;
    // The host's row (device and stream empty), then one per stream.
    Row(&out,
        {h.host, "", "", "", "", MsText(t.idle.host_wait_ns), MsText(t.idle.kernel_wait_ns),
         MsText(t.idle.other_ns), "", "", "", MsText(t.communication_ns), MsText(t.computation_ns),
         t.OverlapPct() < 0 ? "" : absl::StrFormat("%.2f", t.OverlapPct()),
         absl::StrCat(l.launches), any ? absl::StrFormat("%.3f", l.mean_ns() / 1e3) : "",
         any ? UsText(l.p50_ns) : "", any ? UsText(l.p99_ns) : "", any ? UsText(l.max_ns) : ""});
    for (const StreamTimeline& s : t.streams) {
      Row(&out,
          {h.host, absl::StrCat(s.device), absl::StrCat(s.stream), absl::StrCat(s.events),
           MsText(s.busy_ns), MsText(s.idle.host_wait_ns), MsText(s.idle.kernel_wait_ns),
           MsText(s.idle.other_ns), absl::StrFormat("%.2f", s.queue_mean),
           absl::StrCat(s.queue_p50), absl::StrCat(s.queue_max), "", "", "", "", "", "", "", ""});
    }
  }
}

void TimelineTable(std::string& out, const PodTools& p, const TableStyle& style) {
  const int w = style.max_name_width;
  absl::StrAppend(&out, "\npod: communication hidden under computation ", OverlapText(p.timeline),
                  "\n     device idle ", IdleText(p.timeline.idle), "\n     launch delay ",
                  LaunchText(p.timeline.launch), "\n");
  for (const HostTools& h : p.hosts) {
    const HostTimeline& t = h.timeline;
    absl::StrAppend(&out, "\n", Printable(h.host, w), ": communication hidden under computation ",
                    OverlapText(t), " (", MsText(t.overlap_ns), " of ", MsText(t.communication_ns),
                    " ms)\n  device idle ", IdleText(t.idle), "\n  launch delay ",
                    LaunchText(t.launch), "\n");
    if (t.streams.empty()) continue;
    absl::StrAppendFormat(&out, "  %6s %7s %8s %12s %12s %12s %12s %8s %6s\n", "device", "stream",
                          "events", "busy_ms", "host_wait", "kernel_wait", "other_idle", "queue",
                          "max_q");
    size_t shown = 0;
    for (const StreamTimeline& s : t.streams) {
      if (shown++ >= style.limit) break;
      absl::StrAppendFormat(&out, "  %6d %7d %8d %12s %12s %12s %12s %8.2f %6d\n", s.device,
                            s.stream, s.events, MsText(s.busy_ns), MsText(s.idle.host_wait_ns),
                            MsText(s.idle.kernel_wait_ns), MsText(s.idle.other_ns), s.queue_mean,
                            s.queue_max);
    }
    if (t.streams.size() > style.limit) {
      absl::StrAppend(&out, "  ... ", t.streams.size() - style.limit, " more (--json / --csv)\n");
    }
  }
}

}  // namespace profctl::report::tool_writers_internal
