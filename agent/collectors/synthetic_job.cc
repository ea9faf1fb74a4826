#include "agent/collectors/synthetic_job.h"

#include <algorithm>
#include <array>
#include <cmath>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/clock.h"
#include "common/xspace.h"

namespace profctl::agent {
namespace {

using xspace::XPlaneBuilder;

// Fixed host-side costs: one CUDA API call and the gap before the next one.
constexpr int64_t kApiCallNs = 8 * kNanosPerMicro;
constexpr int64_t kApiGapNs = 2 * kNanosPerMicro;
constexpr int64_t kSyncTailNs = 5 * kNanosPerMicro;
constexpr int64_t kMinKernelNs = 1 * kNanosPerMicro;
// Phase fractions of step_ms for a healthy rank.
constexpr double kInputFraction = 0.10;
constexpr double kH2DFraction = 0.05;
constexpr double kComputeFraction = 0.50;
constexpr double kD2HFraction = 0.02;
constexpr double kAllReduceFraction = 0.15;
constexpr int64_t kStepNumModulus = 1'000'000;

constexpr int64_t kHostPlaneId = 49;  // as TSL numbers its host plane
constexpr int64_t kHostLineBase = 1000;
constexpr int64_t kComputeStream = 7;
constexpr int64_t kH2DStream = 13;
constexpr int64_t kD2HStream = 14;
constexpr int64_t kNcclStream = 21;

constexpr std::array<absl::string_view, 6> kKernelNames = {
    "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1",
    "void at::native::vectorized_elementwise_kernel<4, at::native::GeluCUDAKernelImpl>",
    "void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<c10::BFloat16, float>",
    "flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128, 64, 4, false, false, cutlass::bfloat16_t>>",
    "sm90_xmma_gemm_bf16bf16_bf16f32_f32_nn_n_tilesize128x256x64_warpgroupsize2x1x1",
    "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::MeanOps>>",
};
constexpr absl::string_view kAllReduceKernel = "ncclDevKernel_AllReduce_Sum_bf16_RING_LL";

uint64_t Mix(uint64_t x) {  // splitmix64 finalizer
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// Deterministic uniform [0, 1) from the seed and a tuple: identical in every process.
double Uniform(int64_t seed, int64_t a, int64_t b = 0, int64_t c = 0, int64_t d = 0) {
  uint64_t h = Mix(static_cast<uint64_t>(seed));
  for (int64_t v : {a, b, c, d}) h = Mix(h ^ static_cast<uint64_t>(v));
  return static_cast<double>(h >> 11) * 0x1p-53;
}

enum Draw : int64_t { kDrawInput = 1, kDrawCompute = 2, kDrawWeight = 3, kDrawPhase = 4 };

int64_t Ms(double ms) { return static_cast<int64_t>(std::llround(ms * kNanosPerMilli)); }

}  // namespace

struct SyntheticJob::Durations {
  int64_t input, h2d, compute, d2h, allreduce;
  static Durations Of(const SyntheticJobConfig& c) {
    const auto step = static_cast<double>(c.step_ms);
    return {Ms(step * kInputFraction), Ms(step * kH2DFraction), Ms(step * kComputeFraction),
            Ms(step * kD2HFraction),
            c.allreduce_ms >= 0 ? c.allreduce_ms * kNanosPerMilli : Ms(step * kAllReduceFraction)};
  }
};

absl::Status ValidateSyntheticJobConfig(const SyntheticJobConfig& c) {
  auto bad = [](absl::string_view key, auto value, absl::string_view want) {
    return absl::InvalidArgumentError(
        absl::StrCat("synthetic job: ", key, "=", value, " is out of range (", want, ")"));
  };
  if (c.world < 1 || c.world > 4096) return bad("world", c.world, "1..4096");
  if (c.rank < 0 || c.rank >= c.world) return bad("rank", c.rank, "0..world-1");
  if (c.step_ms < 1 || c.step_ms > 600000) return bad("step_ms", c.step_ms, "1..600000");
  if (c.gpus < 1 || c.gpus > 16) return bad("gpus", c.gpus, "1..16");
  if (c.kernels_per_step < 1 || c.kernels_per_step > 256) {
    return bad("kernels_per_step", c.kernels_per_step, "1..256");
  }
  if (c.straggler_rank < -1 || c.straggler_rank >= c.world) {
    return bad("straggler_rank", c.straggler_rank, "-1 (none) or 0..world-1");
  }
  if (!(c.straggler_factor >= 1.0 && c.straggler_factor <= 100.0)) {
    return bad("straggler_factor", c.straggler_factor, "1..100");
  }
  if (c.input_stall_rank < -1 || c.input_stall_rank >= c.world) {
    return bad("input_stall_rank", c.input_stall_rank, "-1 (none) or 0..world-1");
  }
  if (c.input_stall_ms < 0 || c.input_stall_ms > 600000) {
    return bad("input_stall_ms", c.input_stall_ms, "0..600000");
  }
  if (c.allreduce_ms < -1 || c.allreduce_ms > 600000) {
    return bad("allreduce_ms", c.allreduce_ms, "-1 (15% of step_ms) or 0..600000");
  }
  if (!(c.jitter >= 0.0 && c.jitter <= 0.5)) return bad("jitter", c.jitter, "0..0.5");
  return absl::OkStatus();
}

absl::StatusOr<SyntheticJobConfig> ParseSyntheticJobConfig(absl::string_view spec,
                                                           SyntheticJobConfig base) {
  SyntheticJobConfig c = base;
  struct IntKnob {
    absl::string_view key;
    int64_t* field;
  };
  struct DoubleKnob {
    absl::string_view key;
    double* field;
  };
  const IntKnob ints[] = {
      {"rank", &c.rank},
      {"world", &c.world},
      {"seed", &c.seed},
      {"step_ms", &c.step_ms},
      {"gpus", &c.gpus},
      {"kernels_per_step", &c.kernels_per_step},
      {"straggler_rank", &c.straggler_rank},
      {"input_stall_rank", &c.input_stall_rank},
      {"input_stall_ms", &c.input_stall_ms},
      {"allreduce_ms", &c.allreduce_ms},
  };
  const DoubleKnob doubles[] = {{"straggler_factor", &c.straggler_factor}, {"jitter", &c.jitter}};
  for (absl::string_view item : absl::StrSplit(spec, ',', absl::SkipWhitespace())) {
    const std::pair<absl::string_view, absl::string_view> kv = absl::StrSplit(item, '=');
    const absl::string_view key = absl::StripAsciiWhitespace(kv.first);
    const absl::string_view value = absl::StripAsciiWhitespace(kv.second);
    if (!absl::StrContains(item, '=') || value.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("synthetic job: '", item, "' is not key=value"));
    }
    bool found = false;
    for (const IntKnob& k : ints) {
      if (k.key != key) continue;
      found = true;
      if (!absl::SimpleAtoi(value, k.field)) {
        return absl::InvalidArgumentError(
            absl::StrCat("synthetic job: ", key, " must be a whole number, got '", value, "'"));
      }
    }
    for (const DoubleKnob& k : doubles) {
      if (k.key != key) continue;
      found = true;
      if (!absl::SimpleAtod(value, k.field)) {
        return absl::InvalidArgumentError(
            absl::StrCat("synthetic job: ", key, " must be a number, got '", value, "'"));
      }
    }
    if (!found) {
      std::vector<absl::string_view> known;
      for (const IntKnob& k : ints) known.push_back(k.key);
      for (const DoubleKnob& k : doubles) known.push_back(k.key);
      return absl::InvalidArgumentError(absl::StrCat(
          "synthetic job: unknown knob '", key, "' (known: ", absl::StrJoin(known, ", "), ")"));
    }
  }
  if (absl::Status s = ValidateSyntheticJobConfig(c); !s.ok()) return s;
  return c;
}

SyntheticJob::SyntheticJob(const SyntheticJobConfig& config) : config_(config) {
  const Durations d = Durations::Of(config_);
  double weight_sum = 0;
  for (int64_t i = 0; i < config_.kernels_per_step; ++i) {
    kernel_weights_.push_back(0.5 + Uniform(config_.seed, kDrawWeight, i));
    weight_sum += kernel_weights_.back();
  }
  for (double& w : kernel_weights_) w /= weight_sum;

  // The period bounds the slowest possible rank's step, so steps never overlap and the grid
  // (hence the schedule) follows from the knobs alone.
  const double worst = 1.0 + config_.jitter;
  const double straggle = config_.straggler_rank >= 0 ? config_.straggler_factor : 1.0;
  const int64_t stall = config_.input_stall_rank >= 0 ? config_.input_stall_ms * kNanosPerMilli : 0;
  const int64_t calls = config_.kernels_per_step + 4;
  const int64_t bound = static_cast<int64_t>(std::ceil(d.input * worst)) + stall +
                        calls * (kApiCallNs + kApiGapNs) + d.h2d +
                        static_cast<int64_t>(std::ceil(d.compute * straggle * worst)) +
                        config_.kernels_per_step * kMinKernelNs + d.allreduce + d.d2h +
                        kSyncTailNs + config_.step_ms * kNanosPerMilli / 100;
  period_ns_ = std::max(config_.step_ms * kNanosPerMilli, bound);
  period_ns_ = (period_ns_ + kNanosPerMicro - 1) / kNanosPerMicro * kNanosPerMicro;
  // A whole number of microseconds in [0, period).
  const int64_t period_us = period_ns_ / kNanosPerMicro;
  phase_ns_ =
      static_cast<int64_t>(Uniform(config_.seed, kDrawPhase) * static_cast<double>(period_us)) *
      kNanosPerMicro;
}

int64_t SyntheticJob::StepIndexAt(int64_t true_ns) const {
  const int64_t rel = true_ns - phase_ns_;
  return rel >= 0 ? rel / period_ns_ : -((-rel + period_ns_ - 1) / period_ns_);
}

// Fills `plan` (if given) up to the all-reduce launch and returns when this (rank, gpu) is ready
// to start the all-reduce.
int64_t SyntheticJob::ReadyNs(int64_t k, int64_t rank, int64_t gpu, StepPlan* plan) const {
  const Durations d = Durations::Of(config_);
  const double j = config_.jitter;
  const int64_t s = StepStartNs(k);
  int64_t input =
      static_cast<int64_t>(static_cast<double>(d.input) *
                           (1.0 + j * (2 * Uniform(config_.seed, kDrawInput, k, rank) - 1)));
  if (rank == config_.input_stall_rank) input += config_.input_stall_ms * kNanosPerMilli;
  const double factor = rank == config_.straggler_rank ? config_.straggler_factor : 1.0;
  const double compute = static_cast<double>(d.compute) * factor *
                         (1.0 + j * (2 * Uniform(config_.seed, kDrawCompute, k, rank, gpu) - 1));

  int64_t t = s + input;
  auto call = [&](absl::string_view name) {
    const StepPlan::Op op{name, t, t + kApiCallNs};
    t += kApiCallNs + kApiGapNs;
    if (plan != nullptr) plan->host_calls.push_back(op);
    return op.end_ns;
  };
  if (plan != nullptr) plan->input_end_ns = t;
  int64_t launched = call("cudaMemcpyAsync");
  int64_t prev_end = launched + d.h2d;
  if (plan != nullptr) plan->device_ops.push_back({"MemcpyH2D", launched, prev_end});
  for (int64_t i = 0; i < config_.kernels_per_step; ++i) {
    launched = call("cudaLaunchKernel");
    const int64_t start = std::max(prev_end, launched);
    const int64_t dur = std::max(
        kMinKernelNs, static_cast<int64_t>(compute * kernel_weights_[static_cast<size_t>(i)]));
    if (plan != nullptr) {
      plan->device_ops.push_back(
          {kKernelNames[static_cast<size_t>(i) % kKernelNames.size()], start, start + dur});
    }
    prev_end = start + dur;
  }
  launched = call("ncclAllReduce");
  return std::max(prev_end, launched);
}

StepPlan SyntheticJob::Plan(int64_t k, int64_t rank, int64_t gpu) const {
  // The all-reduce ends when the slowest (rank, gpu) of the whole job is ready, plus its time.
  int64_t slowest = 0;
  for (int64_t r = 0; r < config_.world; ++r) {
    for (int64_t g = 0; g < config_.gpus; ++g)
      slowest = std::max(slowest, ReadyNs(k, r, g, nullptr));
  }
  const Durations d = Durations::Of(config_);
  StepPlan plan;
  plan.index = k;
  plan.step_num = ((k % kStepNumModulus) + kStepNumModulus) % kStepNumModulus;
  plan.start_ns = StepStartNs(k);
  plan.end_ns = plan.start_ns + period_ns_;
  plan.allreduce_start_ns = ReadyNs(k, rank, gpu, &plan);
  plan.allreduce_end_ns = slowest + d.allreduce;
  plan.device_ops.push_back({kAllReduceKernel, plan.allreduce_start_ns, plan.allreduce_end_ns});

  int64_t t = plan.host_calls.back().end_ns + kApiGapNs;
  plan.host_calls.push_back({"cudaMemcpyAsync", t, t + kApiCallNs});
  const int64_t d2h_start = std::max(plan.allreduce_end_ns, t + kApiCallNs);
  plan.device_ops.push_back({"MemcpyD2H", d2h_start, d2h_start + d.d2h});
  t += kApiCallNs + kApiGapNs;
  plan.host_calls.push_back(
      {"cudaStreamSynchronize", t, std::max(t, d2h_start + d.d2h) + kSyncTailNs});
  return plan;
}

int64_t SyntheticJob::HostEventsPerStep() const {
  // Per GPU: step root, GetNextBatch, and (kernels + 4) API calls.
  return config_.gpus * (config_.kernels_per_step + 6);
}

int64_t SyntheticJob::DeviceEventsPerStep() const {
  // Per GPU: H2D, kernels, all-reduce, D2H.
  return config_.gpus * (config_.kernels_per_step + 3);
}

void SyntheticJob::Generate(int64_t true_start_ns, int64_t true_stop_ns,
                            tensorflow::profiler::XSpace* space) const {
  const int64_t skew = config_.clock_skew_ns;
  // Lines start at the profile start and are stored relative to it (xspace.h).
  const int64_t profile_start = true_start_ns + skew;
  const int64_t line_ts = profile_start;
  auto inside = [&](int64_t start, int64_t end) {
    return start >= true_start_ns && end <= true_stop_ns;
  };

  XPlaneBuilder host(space->add_planes(), kHostPlaneId, xspace::kHostPlaneName, profile_start);
  const int64_t root_id = host.EventMetadataId("train");
  const int64_t input_id = host.EventMetadataId("GetNextBatch");
  const int64_t h_is_root = host.StatMetadataId(xspace::kStatIsRoot);
  const int64_t h_step_num = host.StatMetadataId(xspace::kStatStepNum);
  const int64_t h_corr = host.StatMetadataId(xspace::kStatCorrelationId);

  struct Gpu {
    XPlaneBuilder plane;
    tensorflow::profiler::XLine *compute, *h2d, *d2h, *nccl;
    int64_t corr, device_id, kernel_details, memcpy_details;
  };
  std::vector<Gpu> gpus;
  std::vector<tensorflow::profiler::XLine*> host_lines;
  for (int64_t g = 0; g < config_.gpus; ++g) {
    host_lines.push_back(
        host.AddLine(kHostLineBase + g, absl::StrCat("python3 main (GPU ", g, ")"), line_ts));
    XPlaneBuilder p(space->add_planes(), g, absl::StrCat(xspace::kGpuPlanePrefix, g),
                    profile_start);
    Gpu gpu{p,
            p.AddLine(kComputeStream, "Stream #7(Compute)", line_ts),
            p.AddLine(kH2DStream, "Stream #13(MemcpyH2D)", line_ts),
            p.AddLine(kD2HStream, "Stream #14(MemcpyD2H)", line_ts),
            p.AddLine(kNcclStream, "Stream #21(NCCL)", line_ts),
            p.StatMetadataId(xspace::kStatCorrelationId),
            p.StatMetadataId(xspace::kStatDeviceId),
            p.StatMetadataId(xspace::kStatKernelDetails),
            p.StatMetadataId(xspace::kStatMemcpyDetails)};
    gpus.push_back(std::move(gpu));
  }

  const int64_t ops_per_step = config_.kernels_per_step + 4;
  const Durations d = Durations::Of(config_);
  for (int64_t k = StepIndexAt(true_start_ns); k <= StepIndexAt(true_stop_ns - 1); ++k) {
    for (int64_t g = 0; g < config_.gpus; ++g) {
      const StepPlan plan = Plan(k, config_.rank, g);
      tensorflow::profiler::XLine* line = host_lines[static_cast<size_t>(g)];
      if (inside(plan.start_ns, plan.end_ns)) {
        auto* e = host.AddEvent(line, root_id, plan.start_ns + skew, period_ns_);
        host.AddStat(e, h_is_root, int64_t{1});
        host.AddStat(e, h_step_num, plan.step_num);
      }
      if (inside(plan.start_ns, plan.input_end_ns)) {
        host.AddEvent(line, input_id, plan.start_ns + skew, plan.input_end_ns - plan.start_ns);
      }
      // Correlation ids are unique per host: (step, gpu, call).
      const uint64_t corr_base =
          static_cast<uint64_t>(1 + ((plan.step_num * config_.gpus) + g) * ops_per_step);
      for (size_t i = 0; i < plan.host_calls.size(); ++i) {
        const StepPlan::Op& op = plan.host_calls[i];
        if (!inside(op.start_ns, op.end_ns)) continue;
        auto* e = host.AddEvent(line, host.EventMetadataId(op.name), op.start_ns + skew,
                                op.end_ns - op.start_ns);
        host.AddStat(e, h_corr, corr_base + i);
      }
      Gpu& gpu = gpus[static_cast<size_t>(g)];
      for (size_t i = 0; i < plan.device_ops.size(); ++i) {
        const StepPlan::Op& op = plan.device_ops[i];
        if (!inside(op.start_ns, op.end_ns)) continue;
        const bool first = i == 0, last = i + 1 == plan.device_ops.size();
        const bool nccl = i + 2 == plan.device_ops.size();
        tensorflow::profiler::XLine* dest = first  ? gpu.h2d
                                            : last ? gpu.d2h
                                            : nccl ? gpu.nccl
                                                   : gpu.compute;
        auto* e = gpu.plane.AddEvent(dest, gpu.plane.EventMetadataId(op.name), op.start_ns + skew,
                                     op.end_ns - op.start_ns);
        gpu.plane.AddStat(e, gpu.corr, corr_base + i);
        gpu.plane.AddStat(e, gpu.device_id, g);
        if (first || last) {
          const int64_t bytes = (first ? d.h2d : d.d2h) / 20;  // ~20 GB/s
          gpu.plane.AddStat(e, gpu.memcpy_details,
                            absl::StrCat("kind:", first ? "HtoD" : "DtoH", " size:", bytes));
        } else {
          gpu.plane.AddStat(
              e, gpu.kernel_details,
              absl::StrCat("regs:", 64 + 8 * static_cast<int64_t>(i % 4),
                           " static_shared:0 dynamic_shared:", nccl ? 0 : 49152,
                           nccl ? " grid:32,1,1 block:512,1,1" : " grid:1024,1,1 block:256,1,1"));
        }
      }
    }
  }
  xspace::SetProfileWindow(space, profile_start, true_stop_ns + skew);
}

}  // namespace profctl::agent
