// The pod step breakdown: where every nanosecond of every step went, on every host, and why.
// Pure code (no I/O): SummarizeHost turns one host's decoded trace into a compact per-step
// summary (call it as each host's trace arrives and drop the trace); BuildPodBreakdown matches
// steps across hosts by step number and finds, per step, the straggler and its cause.
// docs/pod-step-breakdown.md documents categories, precedence and the pod view for users.
#ifndef PROFCTL_ANALYSIS_BREAKDOWN_H_
#define PROFCTL_ANALYSIS_BREAKDOWN_H_

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"
#include "analysis/hang_verdict.h"
#include "analysis/host_trace.h"

namespace profctl::analysis {

// Where a step's time went. Every instant of a step's window on a device is given exactly one
// category, by this precedence (first that applies wins), so the categories of a step add up to
// its wall time to the nanosecond:
//   compute      the device runs a non-collective kernel;
//   output       the device copies device-to-host;
//   d2d          the device copies device-to-device / peer;
//   collectives  the device runs a collective;
//   input        the device copies host-to-device, or the device is idle while the host waits
//                for input;
//   host         the device is idle while the host launches work or runs other host code, and
//                no host thread is blocked on the device (cudaStreamSynchronize is not
//                overhead, even nested in a framework op such as aten::item);
//   idle         nothing of the above.
enum class Category : uint8_t {
  kCompute = 0,
  kOutput,
  kDeviceToDevice,
  kCollectives,
  kInput,
  kHost,
  kIdle,
};
inline constexpr int kNumCategories = 7;
// "compute", "output", "d2d", "collectives", "input", "host", "idle".
absl::string_view CategoryName(Category c);

struct CategoryTimes {
  std::array<int64_t, kNumCategories> ns{};
  int64_t& operator[](Category c) { return ns[static_cast<int>(c)]; }
  int64_t operator[](Category c) const { return ns[static_cast<int>(c)]; }
  int64_t total() const;
  // Time outside collectives: the timeline's own work, not waiting for the others.
  int64_t outside_collectives() const { return total() - (*this)[Category::kCollectives]; }
};

// One step of one host.
struct HostStep {
  int64_t step = 0;
  // The step's window on the common timeline: the union of its markers on this host (a step
  // marked on several threads is one step).
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  // The host view: per instant, the highest-precedence category of any of its devices (an
  // instant counts as compute if any GPU computes). Hosts without devices: host activity only
  // (host / input / idle). total() == end_ns - start_ns.
  CategoryTimes host;
  // Per device, in DeviceTrace order; each total() == end_ns - start_ns.
  std::vector<std::pair<int64_t, CategoryTimes>> devices;
};

struct BreakdownOptions {
  // Steps longer than this are not believed (a marker left open): dropped with a warning.
  int64_t max_step_ns = int64_t{3600} * 1'000'000'000;
};

// The compact per-host result: a few hundred bytes per step, whatever the trace size.
struct HostSummary {
  std::string host;
  // Complete steps (markers wholly inside the recorded window), in step order.
  std::vector<HostStep> steps;
  // Steps cut by the window's start or end (a marker past an edge, or clipped there by its
  // writer: StepMarker::cut), clipped to the window and summarized over their recorded part, in
  // step order: kept apart, never compared with other hosts (a cut step's time says nothing of
  // its pace). partial_steps counts them (also those with nothing recorded).
  std::vector<HostStep> partial;
  int64_t partial_steps = 0;
  // False when the trace has no step markers at all: then `steps` holds one pseudo-step
  // (step = -1) covering the whole recorded window, and a warning says so.
  bool has_markers = true;
  std::vector<std::string> warnings;
};

HostSummary SummarizeHost(const HostTrace& trace, const BreakdownOptions& options = {});
// The same, consuming the trace: its ops are freed as soon as they are extracted for the sweep,
// so a host's peak is its ops or the sweep's sort keys, not both (the trace is left with its
// steps and devices but no ops).
HostSummary SummarizeHost(HostTrace&& trace, const BreakdownOptions& options = {});

// --- The pod view ------------------------------------------------------------------------------

struct PodHostStep {
  std::string host;
  int64_t start_ns = 0;
  int64_t step_time_ns = 0;
  CategoryTimes categories;  // the host view
  // Per device, kept only for a host with several whose devices' times outside collectives
  // spread beyond the noise floor this step, or the step's named straggler (empty otherwise: the
  // host view says it all): the device id and its categories this step, in the host's order.
  std::vector<std::pair<int64_t, CategoryTimes>> devices;
};

// The categories a host can stand out in: its own work (collectives and idle are waiting).
inline constexpr Category kOutlierCategories[] = {Category::kCompute, Category::kOutput,
                                                  Category::kDeviceToDevice, Category::kInput,
                                                  Category::kHost};

// A host whose time in one category stands out of the other hosts' beyond the noise (any host,
// the straggler or not): its excess over the median of the other hosts' in that category.
struct StepOutlier {
  std::string host;
  Category category = Category::kCompute;
  int64_t excess_ns = 0;
};

struct PodStep {
  int64_t step = 0;
  // The slowest host's step time (the pod advances at its pace), and max - min over hosts.
  int64_t pod_step_time_ns = 0;
  int64_t spread_ns = 0;
  std::vector<PodHostStep> hosts;  // hosts that have this step, in host order
  // Every host that has complete steps has this one (matched by number and start time). The
  // pod's statistics (pod_step_time, what_if) are over these steps when there are any.
  bool on_every_host = false;
  // The host the others wait for: in synchronous data parallelism every rank waits inside the
  // collective for the last one to arrive, so the candidate is the host with the least
  // collective time. Named only when its excess stands out of the pod's noise
  // (PodBreakdown::noise_floor_ns); empty otherwise, and with a single host.
  std::string straggler;
  // The candidate's time outside collectives minus the median of the other hosts' (0 with a
  // single host): how long it held the others back, named or not.
  int64_t straggler_excess_ns = 0;
  // What-if (synchronous data parallelism: the pod advances at its slowest host's pace): how much
  // shorter this step would have been had the named straggler run its cause category at the
  // median host's pace (at most its excess: then another host is the slowest), and had every
  // host run at the median pace (the candidate's excess, named or not; 0 with one host).
  int64_t straggler_cost_ns = 0;
  int64_t median_pace_cost_ns = 0;
  // Its category furthest above the median host's (excluding collectives and idle), and by how
  // much; kIdle when nothing exceeds the median.
  Category cause = Category::kIdle;
  int64_t cause_excess_ns = 0;
  // Which device of the named straggler was slow, when it has several: the one with the most
  // time outside collectives, named when that exceeds the median of its other devices' by more
  // than the noise floor (-1 otherwise), and by how much.
  int64_t straggler_device = -1;
  int64_t straggler_device_excess_ns = 0;
  // The pod's bottleneck this step: the largest category of the straggler (of the only host).
  Category bottleneck = Category::kIdle;
  // One sentence for people, e.g. "worker-1 is the straggler: compute 75.0 ms vs 50.0 ms median
  // (+25.0 ms); the other hosts wait for it in collectives (median 26.1 ms): waiting, not
  // communicating".
  std::string why;
  // Every (host, category) whose excess over the other hosts' median is above that category's
  // noise floor (PodBreakdown::category_noise_floor_ns), largest excess first; categories compute,
  // output, d2d, input and host (collectives and idle are waiting, not work).
  std::vector<StepOutlier> outliers;
};

struct Stats {
  double mean_ns = 0;
  int64_t p50_ns = 0;
  int64_t p90_ns = 0;
};

struct HostReport {
  std::string host;
  int64_t steps = 0;
  int64_t partial_steps = 0;
  // Its steps cut by the window's edges (HostSummary::partial): reported, never compared.
  std::vector<HostStep> partial;
  bool has_markers = true;
  Stats step_time;
  std::array<Stats, kNumCategories> categories;
  int64_t straggler_steps = 0;  // steps in which it was the straggler
  std::vector<std::string> warnings;
};

struct PodBreakdown {
  // 2: a straggler is named only above the noise floor; noise fields; consistently_slow by a
  // binomial test. 3: outliers (every host that stands out, per category).
  static constexpr int kSchemaVersion = 3;
  std::vector<PodStep> steps;  // time order; steps no host has complete are absent
  std::vector<HostReport> hosts;
  // Steps in which the straggler differs from the previous step's.
  std::vector<int64_t> straggler_changes;
  // Hosts named the straggler in more of their steps than chance among their peers allows (a
  // one-sided binomial test at 1 %, at least 3 steps) and slower than the others on the median.
  std::vector<std::string> consistently_slow;
  // The step-to-step noise of the hosts' excess (a robust standard deviation: the median over
  // hosts of 1.4826 x the MAD of its successive differences / sqrt 2), and the floor a step's
  // excess must pass to name a straggler: max(z x noise, 0.1 ms, 1 % of the median pod step time),
  // z = max(3, the normal quantile leaving 1 % over all hosts).
  int64_t noise_ns = 0;
  int64_t noise_floor_ns = 0;
  // The same per category (the excess of a host's category over the other hosts' median): the
  // floor a StepOutlier passes. 0 for collectives and idle (never outliers).
  std::array<int64_t, kNumCategories> category_noise_floor_ns{};
  // A host that stands out in a category across the capture: beyond the category's floor in at
  // least half of the steps it shared with another host (and in 3 or more), whatever the
  // straggler is: "worker-2 input +40.0 ms in 100 % of steps" while worker-1 is the straggler.
  struct HostOutlier {
    std::string host;
    Category category = Category::kCompute;
    int64_t steps = 0;             // steps it shared with another host
    int64_t steps_beyond = 0;      // of those, steps beyond the category's floor
    int64_t median_excess_ns = 0;  // over all those steps
  };
  // Largest median excess first.
  std::vector<HostOutlier> outliers;
  // The what-if over the steps with at least two hosts (of those, the steps on every host when
  // there are any): their pod step time in all, and what the steps' straggler_cost_ns and
  // median_pace_cost_ns add up to.
  struct WhatIf {
    int64_t steps = 0;
    int64_t pod_time_ns = 0;
    int64_t straggler_cost_ns = 0;
    int64_t median_pace_cost_ns = 0;
  };
  WhatIf what_if;
  // Across steps: the pod step time (mean/p50/p90 over the steps on every host, or over all
  // steps when none is), for the summary line.
  Stats pod_step_time;
  // Steps on every host (PodStep::on_every_host): what pod_step_time and what_if are over.
  int64_t steps_on_every_host = 0;
  std::vector<std::string> warnings;
  // The hang verdict over the same traces (hang_verdict.h), set by whoever had the traces
  // decoded (BuildPodBreakdown never sets it): absent when it was not judged.
  std::optional<HangReport> hang;
};

// Steps are matched across hosts by step number and start time (a host whose step of that
// number starts more than a quarter step away from the others' is left out of it, and warned
// about), in time order. Partial steps are never compared. Pure; `hosts` in the order to report
// them.
PodBreakdown BuildPodBreakdown(const std::vector<HostSummary>& hosts);

}  // namespace profctl::analysis

#endif  // PROFCTL_ANALYSIS_BREAKDOWN_H_
