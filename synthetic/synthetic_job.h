// A simulated data-parallel training job, the same on every host of one job.
//
// Every agent of a job is given the same knobs and derives the same global schedule from
// (seed, world, true time): step k starts at true time phase + k * period on every rank, and each
// step's NCCL all-reduce ends at the same true instant on every rank (fast ranks wait inside it for
// the slowest). Each agent emits only its own rank's events, stamped with its own (possibly
// skewed) wall clock. docs/synthetic-job.md describes the model; it is the ground truth for the
// analysis and alignment tests.
#ifndef PROFCTL_SYNTHETIC_SYNTHETIC_JOB_H_
#define PROFCTL_SYNTHETIC_SYNTHETIC_JOB_H_

#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "tensorflow/profiler/xplane.pb.h"

namespace profctl::synthetic {

struct SyntheticJobConfig {
  int64_t rank = 0;
  int64_t world = 1;
  int64_t seed = 1;
  // Nominal step period of a healthy job, ms. Phases are fractions of it (see synthetic-job.md).
  int64_t step_ms = 100;
  // Simulated GPUs per host; each runs the host's schedule with its own jitter.
  int64_t gpus = 1;
  int64_t kernels_per_step = 8;
  // Rank whose compute is straggler_factor times slower (-1: none), in the global steps k with
  // k mod straggler_every == 0 (1: every step; 5: one step in five, an intermittent straggler),
  // on every GPU of it, or on its GPU slow_gpu alone (-1: every GPU; one slow GPU of a host).
  int64_t straggler_rank = -1;
  double straggler_factor = 1.0;
  int64_t straggler_every = 1;
  int64_t slow_gpu = -1;
  // Rank whose input pipeline stalls input_stall_ms extra every step (-1: none).
  int64_t input_stall_rank = -1;
  int64_t input_stall_ms = 0;
  // All-reduce time once every rank is ready; -1 means 15% of step_ms.
  int64_t allreduce_ms = -1;
  // Relative per-step random variation of input and compute time, in [0, 0.5]: uniform in
  // [-jitter, +jitter] (jitter_dof 0), or jitter x a Student-t draw of jitter_dof (1..30) degrees
  // of freedom (heavy tails), clipped at +-10 x jitter and so that no time falls below 0.1 x its
  // nominal.
  double jitter = 0.05;
  int64_t jitter_dof = 0;
  // A regression: from the first step that starts at or after this true instant (Unix ms; 0:
  // never), the job runs as if step_ms (and a given allreduce_ms) were slowdown_factor times
  // larger: every phase and the period grow. The same instant on every rank keeps the ranks in
  // step. For condition-triggered capture tests and demos (docs/schedules.md).
  int64_t slowdown_at_ms = 0;
  double slowdown_factor = 1.0;
  // The same regression from global step index k = slowdown_at_step on (0: never; not with
  // slowdown_at_ms). Step k starts at phase + k * period (SyntheticJob::StepIndexAt).
  int64_t slowdown_at_step = 0;
  // A hang: rank hang_rank (-1: none) does step hang_at_step's compute but never enters its
  // all-reduce; every other rank enters it and waits there forever. No step ends from that step
  // on (hang_at_step: a global step index, > 0 with hang_rank).
  int64_t hang_rank = -1;
  int64_t hang_at_step = 0;
  // Not a knob: the agent's injected clock skew. Events are stamped true_time + clock_skew_ns.
  int64_t clock_skew_ns = 0;

  bool operator==(const SyntheticJobConfig&) const = default;
};

// Whether `a` and `b` are ranks of one job: every knob but rank and clock_skew_ns equal.
bool SameSyntheticJob(const SyntheticJobConfig& a, const SyntheticJobConfig& b);

// Parses "key=value,key=value" on top of `base`. Unknown keys, bad numbers and out-of-range
// values are errors naming the key and value.
absl::StatusOr<SyntheticJobConfig> ParseSyntheticJobConfig(absl::string_view spec,
                                                           SyntheticJobConfig base = {});
absl::Status ValidateSyntheticJobConfig(const SyntheticJobConfig& config);

// One step of one (rank, GPU) in true time (ns since the epoch).
struct StepPlan {
  int64_t index = 0;     // global step index k
  int64_t step_num = 0;  // k mod 1e6, the step_num stat
  int64_t start_ns = 0;
  int64_t end_ns = 0;  // start of the next step
  int64_t input_end_ns = 0;
  struct Op {
    absl::string_view name;
    int64_t start_ns = 0;
    int64_t end_ns = 0;
  };
  // Host API calls in order: H2D memcpy, kernel launches, NCCL launch, D2H memcpy, sync.
  std::vector<Op> host_calls;
  // Device ops in order: H2D (`MemcpyHToD`), kernels..., all-reduce, D2H (`MemcpyDToH`)
  // (host_calls[i] launches device_ops[i]).
  std::vector<Op> device_ops;
  int64_t allreduce_start_ns = 0;
  int64_t allreduce_end_ns = 0;
};

// When the last (rank, GPU) of a job is ready for step k's all-reduce: the same for every rank,
// and O(world x gpus) to compute, which an agent serving many ranks (--endpoints) would
// otherwise pay for every rank and GPU of every step: O(world^2) per capture of the pod. Ranks of
// one job in one process share one memo (PlanEndpoints); a job without one keeps its own.
// Thread-safe; holds at most kMaxSteps steps (emptied when full).
class SyntheticStepMemo {
 public:
  static constexpr size_t kMaxSteps = 1 << 14;

  explicit SyntheticStepMemo(const SyntheticJobConfig& job) : job_(job) {}
  // The job the memo answers for (rank and clock_skew_ns are not part of it).
  const SyntheticJobConfig& job() const { return job_; }
  // The memoized value of step k, computed by `compute` (outside the lock) the first time.
  int64_t Get(int64_t k, absl::FunctionRef<int64_t()> compute);
  // How many times `compute` ran (tests).
  int64_t computed() const;

 private:
  const SyntheticJobConfig job_;
  mutable absl::Mutex mu_;
  absl::flat_hash_map<int64_t, int64_t> slowest_ ABSL_GUARDED_BY(mu_);
  int64_t computed_ ABSL_GUARDED_BY(mu_) = 0;
};

class SyntheticJob {
 public:
  // `config` must be valid (ValidateSyntheticJobConfig). `memo`, if given, is shared with the
  // other ranks of the same job (SameSyntheticJob with memo->job()); one of another job is not
  // used.
  explicit SyntheticJob(const SyntheticJobConfig& config,
                        std::shared_ptr<SyntheticStepMemo> memo = nullptr);

  const SyntheticJobConfig& config() const { return config_; }
  // The healthy period (before any slowdown).
  int64_t period_ns() const { return period_ns_; }
  // The period of step k (longer from the slowdown on).
  int64_t PeriodNs(int64_t k) const { return k >= slow_from_step_ ? slow_period_ns_ : period_ns_; }
  // True start of step k.
  int64_t StepStartNs(int64_t k) const;
  // Index of the step running at true time t (after a hang: the hung step, forever).
  int64_t StepIndexAt(int64_t true_ns) const;
  // The step that never ends (hang_at_step), or INT64_MAX without a hang.
  int64_t hang_step() const { return hang_step_; }
  // StepPlan::end_ns and allreduce_end_ns of what never ends.
  static constexpr int64_t kNever = std::numeric_limits<int64_t>::max();
  // Step k of (rank, gpu). Of the hung step (hang_step()): end_ns is kNever; the hung rank's plan
  // ends with its last kernel (no ncclAllReduce call, no all-reduce); another rank's ends with its
  // ncclAllReduce launch and an all-reduce that never ends (allreduce_end_ns kNever). k must not
  // be past the hung step.
  StepPlan Plan(int64_t k, int64_t rank, int64_t gpu) const;

  // Appends this rank's planes ("/host:CPU" and one "/device:GPU:<g>" per GPU) with every event
  // that lies wholly inside the true window [true_start_ns, true_stop_ns), stamped with the agent
  // clock (true + clock_skew_ns), and records that window on the agent clock as the profile
  // window (xspace::SetProfileWindow, creating or updating the "Task Environment" plane). Line
  // timestamps are relative to the profile start true_start_ns + clock_skew_ns, as XProf expects;
  // read times with xspace::ProfileStartNs and xspace::EventStartNs. What is written follows
  // XProf's conventions (docs/xprof-compatibility.md): one step root per step per host, on GPU
  // 0's thread, which the other GPUs' threads join through producer/consumer context stats.
  // XSpace.hostnames is left to the caller (the agent adds its name).
  void Generate(int64_t true_start_ns, int64_t true_stop_ns,
                tensorflow::profiler::XSpace* space) const;
  // Generate's writer over given plans: `steps[i]` holds one step's plan of every GPU (index g),
  // in step order; what lies outside the window is left out as Generate leaves it out. Generate
  // is WriteSteps over Plan(k, rank, g) for the window's steps (the flight recorder keeps plans
  // and writes them at a snapshot).
  void WriteSteps(const std::vector<std::vector<StepPlan>>& steps, int64_t true_start_ns,
                  int64_t true_stop_ns, tensorflow::profiler::XSpace* space) const;

  // Events per complete step on one host: host-plane events (per GPU: the step root or its
  // wrapper, IteratorGetNext, kernels_per_step + 4 API calls, one MemoryAllocation and one
  // MemoryDeallocation) and device-plane events.
  int64_t HostEventsPerStep() const;
  int64_t DeviceEventsPerStep() const;

 private:
  struct Durations;
  // kNever for the hung rank at the hung step.
  int64_t ReadyNs(int64_t k, int64_t rank, int64_t gpu, StepPlan* plan) const;
  StepPlan HungPlan(int64_t k, int64_t rank, int64_t gpu) const;
  // The knobs step k runs with: config_, or slow_config_ from the slowdown on.
  const SyntheticJobConfig& ConfigOf(int64_t k) const {
    return k >= slow_from_step_ ? slow_config_ : config_;
  }

  SyntheticJobConfig config_;
  SyntheticJobConfig slow_config_;
  int64_t period_ns_ = 0;
  int64_t slow_period_ns_ = 0;
  int64_t slow_from_step_ = 0;  // the first slow step (INT64_MAX: none)
  int64_t hang_step_ = kNever;  // the step that never ends
  int64_t phase_ns_ = 0;
  std::vector<double> kernel_weights_;       // sums to 1
  std::shared_ptr<SyntheticStepMemo> memo_;  // never null
};

}  // namespace profctl::synthetic

#endif  // PROFCTL_SYNTHETIC_SYNTHETIC_JOB_H_
