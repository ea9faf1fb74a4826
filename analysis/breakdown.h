// The pod step breakdown: where every nanosecond of every step went, on every host, and why.
// Pure code (no I/O): SummarizeHost turns one host's decoded trace into a compact per-step
// summary (call it as each host's trace arrives and drop the trace); BuildPodBreakdown matches
// steps across hosts by step number, finds per step the straggler and its cause, and judges the
// pod's verdicts once (pod_verdict.h).
// docs/pod-step-breakdown.md documents categories, precedence and the pod view for users.
#ifndef PROFCTL_ANALYSIS_BREAKDOWN_H_
#define PROFCTL_ANALYSIS_BREAKDOWN_H_

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"
#include "analysis/category.h"
#include "analysis/host_trace.h"
#include "analysis/pod_verdict.h"

namespace profctl::analysis {

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
  // The job's world size its trace states (HostTrace::world_size); 0: unknown.
  int64_t world_size = 0;
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
  // Every host that has complete steps has this one (matched by number and start time).
  bool on_every_host = false;
  // One of the capture's first steps that ran far longer than the steps after it (warm-up,
  // compilation): shown, never judged (docs/pod-step-breakdown.md "Warm-up steps").
  bool warmup = false;
  // Judged: two hosts or more, on every host when any step is, not warm-up. The pod's
  // statistics and verdicts are over the judged steps (VerdictEvidence::judged_steps).
  bool judged = false;
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
  // median host's pace, but no shorter than the next-slowest host's pace (then that host is the
  // slowest); and had every host run at the median pace (the candidate's excess, named or not; 0
  // with one host).
  int64_t straggler_cost_ns = 0;
  int64_t median_pace_cost_ns = 0;
  // Its category furthest above the median host's (excluding collectives and idle), and by how
  // much; kIdle when nothing exceeds the median.
  Category cause = Category::kIdle;
  int64_t cause_excess_ns = 0;
  // Which device of the named straggler was slow, when it has several: the one with the most
  // time outside collectives, named when its excess over the median of its other devices' passes
  // the devices' own noise floor (PodBreakdown::device_noise_floor_ns) and makes at least half of
  // its host's excess (a host slow as a whole names none); -1 otherwise, and by how much.
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
  // 4: one owner of every verdict (`verdict`), each with its evidence and confidence; new
  // rules for consistently slow, stands out, input-bound, the slow device and the what-if;
  // warm-up steps apart. 3: outliers (every host that stands out, per category). 2: a straggler
  // is named only above the noise floor; noise fields.
  static constexpr int kSchemaVersion = 4;
  std::vector<PodStep> steps;  // time order; steps no host has complete are absent
  std::vector<HostReport> hosts;
  // The step-to-step noise of the hosts' excess (a robust standard deviation: the median over
  // hosts of 1.4826 x the MAD of its successive differences / sqrt 2), and the floor a step's
  // excess must pass to name a straggler: max(z x noise, 0.1 ms, 1 % of the median pod step time)
  // (docs/pod-step-breakdown.md "Stragglers and noise" gives z).
  int64_t noise_ns = 0;
  int64_t noise_floor_ns = 0;
  // The same per category (the excess of a host's category over the other hosts' median): the
  // floor a StepOutlier passes. 0 for collectives and idle (never outliers).
  std::array<int64_t, kNumCategories> category_noise_floor_ns{};
  // The floor a device's excess over its siblings must pass to be named the straggler's slow
  // device: from the devices' own step-to-step noise (0: no host has several devices).
  int64_t device_noise_floor_ns = 0;
  // Per host with several devices, the floor its devices were judged against: the higher of
  // the pod's and its own devices' (docs "Which GPU of the straggler").
  std::map<std::string, int64_t> host_device_floor_ns;
  // Across the judged steps (VerdictEvidence::judged_steps; all steps when none is): the pod
  // step time, and per category the pod view (PodView: each step's straggler's categories, else
  // its slowest host's).
  Stats pod_step_time;
  std::array<Stats, kNumCategories> pod_categories{};
  // Steps on every host (PodStep::on_every_host).
  int64_t steps_on_every_host = 0;
  std::vector<std::string> warnings;
  // Every verdict, judged once over the steps above (pod_verdict.h).
  PodVerdict verdict;
};

// Nearest-rank percentile p/100 (p in 0..100) of `sorted`: p50 of an even count is the lower
// middle, a value that really occurred; 0 for none.
int64_t Percentile(const std::vector<int64_t>& sorted, int p);
// Mean, p50 and p90 (nearest-rank) of `values`; zeros for none.
Stats StatsOf(std::vector<int64_t> values);
// The host whose view stands for the pod in a step: the named straggler, else the slowest host
// (the first of equals); null for a step without hosts.
const PodHostStep* PodView(const PodStep& step);

// Steps are matched across hosts by step number and start time (a host whose step of that
// number starts more than a quarter step away from the others' is left out of it, and warned
// about), in time order. Partial steps are never compared. Pure; `hosts` in the order to report
// them.
PodBreakdown BuildPodBreakdown(const std::vector<HostSummary>& hosts, const PodInputs& inputs = {});

}  // namespace profctl::analysis

#endif  // PROFCTL_ANALYSIS_BREAKDOWN_H_
