// The pod's verdicts: who the pod waits for and why, which device, which hosts are consistently
// slow or stand out, who waits for input, what the stragglers cost, where the pod's time goes,
// and whether it hangs. Each is computed once, by BuildPodBreakdown (breakdown.h), from the
// judged steps and what the steps cannot show (the hang report, the job's world size), and each
// carries its evidence, a confidence in words, and "cannot tell" apart from "nothing wrong".
// Writers (terminal, JSON, CSV, report.html, the overview's advice, diff) format it and decide
// nothing. docs/pod-step-breakdown.md "Verdicts" gives every rule, its evidence and its limits.
#ifndef PROFCTL_ANALYSIS_POD_VERDICT_H_
#define PROFCTL_ANALYSIS_POD_VERDICT_H_

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "analysis/category.h"
#include "analysis/hang_verdict.h"

namespace profctl::analysis {

// What a verdict found.
enum class Finding : uint8_t {
  kFound = 0,   // it names something: a straggler, a slow device, a hang...
  kNone,        // it looked, with evidence able to see it, and found nothing wrong
  kCannotTell,  // the evidence cannot answer (no judged step, one host, traces of different
                // runs, no trace with collectives...): never an all-clear
};
// "found", "none", "cannot_tell".
absl::string_view FindingName(Finding f);

// How far a finding (or a "none") can be trusted, in words.
enum class Confidence : uint8_t { kHigh = 0, kMedium, kLow };
// "high", "medium", "low".
absl::string_view ConfidenceName(Confidence c);

// What every verdict carries.
struct Judgement {
  Finding finding = Finding::kCannotTell;
  Confidence confidence = Confidence::kLow;
  // One sentence for people: the answer and the evidence it rests on.
  std::string sentence;
  // Why the confidence is not high (or why it cannot tell), each a short phrase naming the
  // evidence missing: "3 judged steps", "2 hosts", "2 of 128 ranks traced".
  std::vector<std::string> limits;

  // The sentence with its confidence, as every output prints it: "<sentence> (confidence:
  // medium: 2 hosts)"; "<sentence>" alone when it cannot tell (its limits are in the sentence).
  std::string Text() const;
};

// What the evidence as a whole allows: the ceiling of every verdict's confidence.
struct VerdictEvidence {
  // Hosts compared (with complete steps shared with another host), and the job's world size
  // when a trace states it (Kineto's distributedInfo.world_size; 0: unknown).
  int64_t hosts = 0;
  int64_t world_size = 0;
  // The pod's steps (PodBreakdown::steps: the one step count of every output), and of those
  // the steps judged: two hosts or more, on every host when any step is, not warm-up.
  int64_t steps = 0;
  int64_t judged_steps = 0;
  // Warm-up or compile steps: the capture's first steps that run far longer than the others,
  // excluded from every mean and verdict and shown apart.
  std::vector<int64_t> warmup_steps;
  // Steps compared though their hosts' starts disagree (no majority): their verdicts doubtful.
  int64_t doubtful_steps = 0;
  // The traces are not one run (start times far apart, or different step grids): nothing is
  // pooled across them; `different_runs_reason` says what showed it.
  bool different_runs = false;
  std::string different_runs_reason;
  // The step-to-step noise has heavier tails than a normal distribution (the floors are raised
  // to keep false stragglers rare): the fitted Student-t degrees of freedom (0: normal).
  double noise_tail_dof = 0;
  Confidence ceiling = Confidence::kHigh;
  std::vector<std::string> limits;  // why the ceiling is below high
};

// The straggler across steps: the host named most often (ties: host order).
struct StragglerVerdict : Judgement {
  std::string host;
  int64_t steps = 0;              // steps it was named in
  int64_t named_steps = 0;        // steps that named any straggler
  int64_t judged_steps = 0;       // steps judged
  std::optional<Category> cause;  // its most frequent cause (absent: never one)
  int64_t cause_steps = 0;        // steps it straggled with that cause
  int64_t cause_excess_ns = 0;    // their median cause excess
  int64_t example_step = 0;       // the last such step (or of its steps), with its why
  std::string example_why;
  // Steps whose named straggler differs from the previous named step's.
  std::vector<int64_t> changes;
};

// The slow device of the straggler across steps: the device named most often in the steps its
// host was named, judged against device-level noise (docs "Which GPU of the straggler").
struct SlowDeviceVerdict : Judgement {
  std::string host;
  int64_t device = -1;
  int64_t steps = 0;     // steps it was named in
  int64_t of_steps = 0;  // steps its host was the named straggler with several devices
  int64_t median_excess_ns = 0;
};

// A host slower than its peers across the capture.
struct SlowHost {
  std::string host;
  int64_t steps = 0;              // judged steps it shared with another host
  int64_t last_ready_steps = 0;   // of those, steps it was the last one ready (the candidate)
  int64_t named_steps = 0;        // steps it was named the straggler
  int64_t median_excess_ns = 0;   // its median excess over the other hosts' median
  double slowdown_pct = 0;        // that excess, in % of the other hosts' median busy time
  double p_value = 1;             // of the test that named it
  std::optional<Category> cause;  // its most frequent cause in the steps it was named
};

struct ConsistentlySlowVerdict : Judgement {
  std::vector<SlowHost> hosts;  // largest median excess first
  // The smallest steady slowdown this capture could have detected (80 % power), per step and in
  // % of the median host's busy time; 0 when unknown (no noise estimate).
  int64_t detectable_excess_ns = 0;
  double detectable_pct = 0;
  std::vector<std::string> HostNames() const;
};

// A host whose time in one category stands out of the other hosts' across the capture.
struct HostOutlier {
  std::string host;
  Category category = Category::kCompute;
  int64_t steps = 0;             // judged steps it shared with another host
  int64_t steps_beyond = 0;      // of those, steps beyond the category's noise floor
  int64_t median_excess_ns = 0;  // over all those steps
};

struct StandsOutVerdict : Judgement {
  std::vector<HostOutlier> hosts;  // largest median excess first
};

// The host that waits for input the most beyond the others (the largest `input` outlier).
struct InputBoundVerdict : Judgement {
  std::string host;
  int64_t input_ns = 0;         // its mean input per judged step
  int64_t median_input_ns = 0;  // the median host's
  int64_t excess_ns = 0;        // its median excess over the other hosts' (the outlier's)
  int64_t step_time_ns = 0;     // its mean step time
  int64_t median_step_ns = 0;   // the median host's mean step time
};

// What stragglers cost, over the judged steps (docs "What stragglers cost").
struct WhatIfVerdict : Judgement {
  int64_t steps = 0;
  int64_t pod_time_ns = 0;
  // Had each step's named straggler run its cause at the median pace: at most down to the next
  // slowest host's pace.
  int64_t straggler_cost_ns = 0;
  // Had every host run at the median host's pace.
  int64_t median_pace_cost_ns = 0;
};

// Where the pod's time goes: the largest category of the pod view over the judged steps.
struct BottleneckVerdict : Judgement {
  Category category = Category::kIdle;
  // Per category, its mean over the judged steps in % of the mean pod step time.
  std::array<double, kNumCategories> share_pct{};
};

// The hang verdict (hang_verdict.h) as one of the pod's: found (hung, all waiting), none, or
// cannot tell (not judged, or no rank has a trace with collectives).
struct HangJudgement : Judgement {
  std::optional<HangReport> report;  // absent: not judged
};

struct PodVerdict {
  VerdictEvidence evidence;
  StragglerVerdict straggler;
  SlowDeviceVerdict slow_device;
  ConsistentlySlowVerdict consistently_slow;
  StandsOutVerdict stands_out;
  InputBoundVerdict input_bound;
  WhatIfVerdict what_if;
  BottleneckVerdict bottleneck;
  HangJudgement hang;
};

// What the pod's verdicts need beyond the hosts' summaries.
struct PodInputs {
  // The hang verdict over the same traces (JudgeHang), judged by whoever had them decoded;
  // absent: not judged (then the hang verdict cannot tell).
  std::optional<HangReport> hang;
};

}  // namespace profctl::analysis

#endif  // PROFCTL_ANALYSIS_POD_VERDICT_H_
