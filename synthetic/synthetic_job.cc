#include "synthetic/synthetic_job.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <numbers>
#include <string>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/clock.h"
#include "xspace/xspace.h"

namespace profctl::synthetic {
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

// The kernels of one step, in launch order (kernels_per_step cycles through them): names as CUPTI
// reports them, the framework op each belongs to (`tf_op`, XProf's `scope/Name:Type`), and the
// launch configuration CUPTI records (kernel_details).
struct KernelSpec {
  absl::string_view name;
  absl::string_view tf_op;
  int64_t regs = 0;            // registers per thread
  int64_t static_shared = 0;   // bytes per block
  int64_t dynamic_shared = 0;  // bytes per block
  std::array<int64_t, 3> grid = {};
  std::array<int64_t, 3> block = {};
};

constexpr std::array<KernelSpec, 6> kKernels = {{
    {"sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1",
     "model/dense_1/MatMul:MatMul",
     168,
     0,
     215040,
     {132, 1, 1},
     {384, 1, 1}},
    {"void at::native::vectorized_elementwise_kernel<4, at::native::GeluCUDAKernelImpl>",
     "model/dense_1/Gelu:Gelu",
     32,
     0,
     0,
     {4096, 1, 1},
     {128, 1, 1}},
    {"void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<c10::BFloat16, float>",
     "model/layer_norm/LayerNorm:LayerNorm",
     40,
     2048,
     0,
     {2048, 1, 1},
     {256, 1, 1}},
    {"flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128, 64, 4, false, false, "
     "cutlass::bfloat16_t>>",
     "model/attention/FlashAttention:FlashAttention",
     255,
     0,
     98304,
     {16, 32, 8},
     {128, 1, 1}},
    {"sm90_xmma_gemm_bf16bf16_bf16f32_f32_nn_n_tilesize128x256x64_warpgroupsize2x1x1",
     "model/dense_2/MatMul:MatMul",
     168,
     0,
     215040,
     {132, 1, 1},
     {384, 1, 1}},
    {"void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::MeanOps>>",
     "model/loss/Mean:Mean",
     32,
     4096,
     0,
     {264, 1, 1},
     {512, 1, 1}},
}};
constexpr KernelSpec kAllReduce = {"ncclDevKernel_AllReduce_Sum_bf16_RING_LL",
                                   "model/gradients/NcclAllReduce:NcclAllReduce",
                                   96,
                                   9216,
                                   0,
                                   {32, 1, 1},
                                   {640, 1, 1}};

// The simulated GPU: an NVIDIA H100 SXM5 80GB as CUDA reports it (XProf's device capability
// stats, and the limits the theoretical occupancy below is computed for).
constexpr absl::string_view kGpuVendor = "Nvidia";
constexpr absl::string_view kGpuName = "NVIDIA H100 80GB HBM3";
constexpr int64_t kGpuClockRateKhz = 1'980'000;
constexpr int64_t kGpuSmCount = 132;
// As TSL computes it: 2 (DDR) * memory clock 2,619,000 kHz * 1000 * bus width 5120 bits / 8.
constexpr uint64_t kGpuMemoryBandwidth = 3'352'320'000'000;  // bytes/s
constexpr uint64_t kGpuMemorySize = 85'520'809'984;          // bytes (81,559 MiB)
constexpr int64_t kGpuComputeCapMajor = 9;
constexpr int64_t kGpuComputeCapMinor = 0;
constexpr int64_t kSmMaxThreads = 2048;
constexpr int64_t kSmMaxBlocks = 32;
constexpr int64_t kSmRegisters = 65536;
constexpr int64_t kRegisterAllocUnit = 256;  // registers, per warp
constexpr int64_t kSmSharedBytes = 233472;   // 228 KiB
constexpr int64_t kSharedReservedPerBlock = 1024;
constexpr int64_t kSharedAllocUnit = 128;
constexpr int64_t kWarpSize = 32;

int64_t CeilTo(int64_t v, int64_t unit) { return (v + unit - 1) / unit * unit; }

// Theoretical occupancy (% of the SM's thread slots a kernel's resident blocks fill) on the
// simulated GPU, as CUDA's occupancy calculator derives it from threads, registers and shared
// memory per block.
double TheoreticalOccupancyPct(const KernelSpec& k) {
  const int64_t threads = k.block[0] * k.block[1] * k.block[2];
  const int64_t warps = (threads + kWarpSize - 1) / kWarpSize;
  const int64_t by_threads = kSmMaxThreads / (warps * kWarpSize);
  const int64_t regs_per_warp = CeilTo(k.regs * kWarpSize, kRegisterAllocUnit);
  const int64_t by_regs = (kSmRegisters / regs_per_warp) / warps;
  const int64_t shared =
      CeilTo(k.static_shared + k.dynamic_shared, kSharedAllocUnit) + kSharedReservedPerBlock;
  const int64_t by_shared = kSmSharedBytes / shared;
  const int64_t blocks = std::min({kSmMaxBlocks, by_threads, by_regs, by_shared});
  return static_cast<double>(blocks * threads * 100) / static_cast<double>(kSmMaxThreads);
}

// CUPTI's kernel_details: "regs:R static_shared:S dynamic_shared:D grid:x,y,z block:x,y,z
// occ_pct:P" (what XProf's GPU Kernel Stats parse).
std::string KernelDetails(const KernelSpec& k) {
  return absl::StrCat("regs:", k.regs, " static_shared:", k.static_shared,
                      " dynamic_shared:", k.dynamic_shared, " grid:", k.grid[0], ",", k.grid[1],
                      ",", k.grid[2], " block:", k.block[0], ",", k.block[1], ",", k.block[2],
                      " occ_pct:", TheoreticalOccupancyPct(k));
}

// Copies move ~20 GB/s (20 bytes per ns), at most 1 GiB.
constexpr int64_t kCopyBytesPerNs = 20;
constexpr int64_t kMaxCopyBytes = int64_t{1} << 30;
int64_t CopyBytes(int64_t duration_ns) {
  return std::min(duration_ns, kMaxCopyBytes / kCopyBytesPerNs) * kCopyBytesPerNs;
}

// XProf names copies by direction (`MemcpyHToD`...: its Overview's Input/Output split depends on
// it); CUPTI's own kind names (`MemcpyH2D`...) stay in the stream line names and the copy's
// memcpy_details (docs/xprof-compatibility.md, "Memcpy naming").
constexpr absl::string_view kH2DName = "MemcpyHToD";
constexpr absl::string_view kD2HName = "MemcpyDToH";

// Producer/consumer context joining the other GPU threads to GPU 0's step root (TSL's
// ContextType::kGeneric; the id is TSL-style: the root's thread id in the high 32 bits).
constexpr int64_t kStepContextType = 0;

// The model's resident device memory (weights, optimizer state) on each GPU's allocator, beside
// which every step allocates its input batch.
constexpr int64_t kResidentBytes = int64_t{24} << 30;
constexpr int64_t kBatchAddressBase = int64_t{0x7f00} << 32;

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

// A Student-t draw's clip, in jitters, and the smallest multiple of its nominal a jittered time
// can take.
constexpr double kMaxTailJitters = 10.0;
constexpr double kMinJitteredFraction = 0.1;

// Deterministic standard normal from the seed and a tuple (Box-Muller over two uniforms); `n`
// picks one of many draws of the same tuple.
double Normal(int64_t seed, int64_t draw, int64_t k, int64_t rank, int64_t gpu, int64_t n) {
  const double u1 = 1.0 - Uniform(seed, draw * 64 + 2 * n, k, rank, gpu);  // (0, 1]
  const double u2 = Uniform(seed, draw * 64 + 2 * n + 1, k, rank, gpu);
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
}

// The relative variation of one time: uniform in [-jitter, +jitter] (dof 0), or jitter x a
// Student-t(dof) draw, Z / sqrt(chi2(dof) / dof), clipped at +-kMaxTailJitters; never below
// kMinJitteredFraction - 1.
double JitterOf(const SyntheticJobConfig& c, int64_t draw, int64_t k, int64_t rank, int64_t gpu) {
  double x = 0;
  if (c.jitter_dof <= 0) {
    x = 2 * Uniform(c.seed, draw, k, rank, gpu) - 1;
  } else {
    double chi2 = 0;
    for (int64_t i = 1; i <= c.jitter_dof; ++i) {
      const double z = Normal(c.seed, draw, k, rank, gpu, i);
      chi2 += z * z;
    }
    const double t =
        Normal(c.seed, draw, k, rank, gpu, 0) / std::sqrt(chi2 / static_cast<double>(c.jitter_dof));
    x = std::clamp(t, -kMaxTailJitters, kMaxTailJitters);
  }
  return std::max(kMinJitteredFraction - 1.0, c.jitter * x);
}

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
  if (c.straggler_every < 1 || c.straggler_every > 1'000'000) {
    return bad("straggler_every", c.straggler_every, "1..1000000");
  }
  if (c.slow_gpu < -1 || c.slow_gpu >= c.gpus) {
    return bad("slow_gpu", c.slow_gpu, "-1 (every GPU) or 0..gpus-1");
  }
  if (c.slow_gpu >= 0 && c.straggler_rank < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("synthetic job: slow_gpu=", c.slow_gpu,
                     " says which GPU of the straggler is slow: give straggler_rank too"));
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
  if (c.jitter_dof < 0 || c.jitter_dof > 30) {
    return bad("jitter_dof", c.jitter_dof, "0 (uniform) or 1..30");
  }
  // Up to the year 2255: the instant in ns stays far from int64's end.
  if (c.slowdown_at_ms < 0 || c.slowdown_at_ms > 9'000'000'000'000) {
    return bad("slowdown_at_ms", c.slowdown_at_ms, "0 (never) or a Unix time in ms");
  }
  if (!(c.slowdown_factor >= 1.0 && c.slowdown_factor <= 10.0)) {
    return bad("slowdown_factor", c.slowdown_factor, "1..10");
  }
  // Step indices of a 1 ms step up to the year 2255.
  constexpr int64_t kMaxStep = 9'000'000'000'000;
  if (c.slowdown_at_step < 0 || c.slowdown_at_step > kMaxStep) {
    return bad("slowdown_at_step", c.slowdown_at_step, "0 (never) or a global step index");
  }
  if (c.slowdown_at_step > 0 && c.slowdown_at_ms > 0) {
    return absl::InvalidArgumentError(
        "synthetic job: slowdown_at_step and slowdown_at_ms are two ways to say when the "
        "slowdown starts; give one");
  }
  if (c.hang_rank < -1 || c.hang_rank >= c.world) {
    return bad("hang_rank", c.hang_rank, "-1 (none) or 0..world-1");
  }
  if (c.hang_at_step < 0 || c.hang_at_step > kMaxStep) {
    return bad("hang_at_step", c.hang_at_step, "0 (never) or a global step index");
  }
  if ((c.hang_rank >= 0) != (c.hang_at_step > 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("synthetic job: hang_rank=", c.hang_rank, " and hang_at_step=", c.hang_at_step,
                     " go together: a hang needs both a rank (0..world-1) and a step (> 0)"));
  }
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
      {"straggler_every", &c.straggler_every},
      {"slow_gpu", &c.slow_gpu},
      {"jitter_dof", &c.jitter_dof},
      {"input_stall_rank", &c.input_stall_rank},
      {"input_stall_ms", &c.input_stall_ms},
      {"allreduce_ms", &c.allreduce_ms},
      {"slowdown_at_ms", &c.slowdown_at_ms},
      {"slowdown_at_step", &c.slowdown_at_step},
      {"hang_rank", &c.hang_rank},
      {"hang_at_step", &c.hang_at_step},
  };
  const DoubleKnob doubles[] = {{"straggler_factor", &c.straggler_factor},
                                {"jitter", &c.jitter},
                                {"slowdown_factor", &c.slowdown_factor}};
  std::vector<absl::string_view> seen;
  for (absl::string_view item : absl::StrSplit(spec, ',', absl::SkipWhitespace())) {
    const std::pair<absl::string_view, absl::string_view> kv =
        absl::StrSplit(item, absl::MaxSplits('=', 1));
    const absl::string_view key = absl::StripAsciiWhitespace(kv.first);
    const absl::string_view value = absl::StripAsciiWhitespace(kv.second);
    // `rank=1=2` once silently meant rank=1.
    if (!absl::StrContains(item, '=') || value.empty() || absl::StrContains(value, '=')) {
      return absl::InvalidArgumentError(
          absl::StrCat("synthetic job: '", item, "' is not key=value"));
    }
    if (std::find(seen.begin(), seen.end(), key) != seen.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("synthetic job: '", key, "' is given more than once"));
    }
    seen.push_back(key);
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

namespace {

// The period of a job with knobs `c`: it bounds the slowest possible rank's step, so steps never
// overlap and the grid (hence the schedule) follows from the knobs alone. Whole microseconds.
int64_t PeriodOf(const SyntheticJobConfig& c, int64_t input, int64_t h2d, int64_t compute,
                 int64_t d2h, int64_t allreduce) {
  const double worst = 1.0 + (c.jitter_dof > 0 ? kMaxTailJitters : 1.0) * c.jitter;
  const double straggle = c.straggler_rank >= 0 ? c.straggler_factor : 1.0;
  const int64_t stall = c.input_stall_rank >= 0 ? c.input_stall_ms * kNanosPerMilli : 0;
  const int64_t calls = c.kernels_per_step + 4;
  const int64_t bound =
      static_cast<int64_t>(std::ceil(static_cast<double>(input) * worst)) + stall +
      calls * (kApiCallNs + kApiGapNs) + h2d +
      static_cast<int64_t>(std::ceil(static_cast<double>(compute) * straggle * worst)) +
      c.kernels_per_step * kMinKernelNs + allreduce + d2h + kSyncTailNs +
      c.step_ms * kNanosPerMilli / 100;
  const int64_t period = std::max(c.step_ms * kNanosPerMilli, bound);
  return (period + kNanosPerMicro - 1) / kNanosPerMicro * kNanosPerMicro;
}

}  // namespace

bool SameSyntheticJob(const SyntheticJobConfig& a, const SyntheticJobConfig& b) {
  SyntheticJobConfig x = a, y = b;
  x.rank = y.rank = 0;
  x.clock_skew_ns = y.clock_skew_ns = 0;
  return x == y;
}

int64_t SyntheticStepMemo::Get(int64_t k, absl::FunctionRef<int64_t()> compute) {
  {
    absl::MutexLock lock(&mu_);
    if (auto it = slowest_.find(k); it != slowest_.end()) return it->second;
  }
  // Outside the lock: another thread may compute the same step meanwhile, to the same value.
  const int64_t value = compute();
  absl::MutexLock lock(&mu_);
  ++computed_;
  if (slowest_.size() >= kMaxSteps) slowest_.clear();
  slowest_.emplace(k, value);
  return value;
}

int64_t SyntheticStepMemo::computed() const {
  absl::MutexLock lock(&mu_);
  return computed_;
}

SyntheticJob::SyntheticJob(const SyntheticJobConfig& config,
                           std::shared_ptr<SyntheticStepMemo> memo)
    : config_(config), memo_(std::move(memo)) {
  if (memo_ == nullptr || !SameSyntheticJob(memo_->job(), config_)) {
    memo_ = std::make_shared<SyntheticStepMemo>(config_);
  }
  double weight_sum = 0;
  for (int64_t i = 0; i < config_.kernels_per_step; ++i) {
    kernel_weights_.push_back(0.5 + Uniform(config_.seed, kDrawWeight, i));
    weight_sum += kernel_weights_.back();
  }
  for (double& w : kernel_weights_) w /= weight_sum;

  const Durations d = Durations::Of(config_);
  period_ns_ = PeriodOf(config_, d.input, d.h2d, d.compute, d.d2h, d.allreduce);
  // A whole number of microseconds in [0, period).
  const int64_t period_us = period_ns_ / kNanosPerMicro;
  phase_ns_ =
      static_cast<int64_t>(Uniform(config_.seed, kDrawPhase) * static_cast<double>(period_us)) *
      kNanosPerMicro;

  // The slowdown: the same job with longer phases, from the first step starting at or after it.
  slow_config_ = config_;
  slow_period_ns_ = period_ns_;
  slow_from_step_ = std::numeric_limits<int64_t>::max();
  if ((config_.slowdown_at_ms > 0 || config_.slowdown_at_step > 0) &&
      config_.slowdown_factor > 1.0) {
    const double f = config_.slowdown_factor;
    slow_config_.step_ms =
        std::max<int64_t>(1, std::llround(static_cast<double>(config_.step_ms) * f));
    if (config_.allreduce_ms >= 0) {
      slow_config_.allreduce_ms = std::llround(static_cast<double>(config_.allreduce_ms) * f);
    }
    const Durations s = Durations::Of(slow_config_);
    slow_period_ns_ = PeriodOf(slow_config_, s.input, s.h2d, s.compute, s.d2h, s.allreduce);
    const int64_t at = config_.slowdown_at_ms * kNanosPerMilli - phase_ns_;
    slow_from_step_ = config_.slowdown_at_step > 0 ? config_.slowdown_at_step
                      : at <= 0                    ? -((-at) / period_ns_)
                                                   : (at + period_ns_ - 1) / period_ns_;
  }
  if (config_.hang_rank >= 0) hang_step_ = config_.hang_at_step;
}

int64_t SyntheticJob::StepStartNs(int64_t k) const {
  if (k <= slow_from_step_) return phase_ns_ + k * period_ns_;
  return phase_ns_ + slow_from_step_ * period_ns_ + (k - slow_from_step_) * slow_period_ns_;
}

int64_t SyntheticJob::StepIndexAt(int64_t true_ns) const {
  if (slow_from_step_ != std::numeric_limits<int64_t>::max()) {
    const int64_t slow_start = StepStartNs(slow_from_step_);
    if (true_ns >= slow_start) {
      return std::min(hang_step_, slow_from_step_ + (true_ns - slow_start) / slow_period_ns_);
    }
  }
  const int64_t rel = true_ns - phase_ns_;
  return std::min(hang_step_,
                  rel >= 0 ? rel / period_ns_ : -((-rel + period_ns_ - 1) / period_ns_));
}

// Fills `plan` (if given) up to the all-reduce launch and returns when this (rank, gpu) is ready
// to start the all-reduce.
int64_t SyntheticJob::ReadyNs(int64_t k, int64_t rank, int64_t gpu, StepPlan* plan) const {
  const Durations d = Durations::Of(ConfigOf(k));
  const int64_t s = StepStartNs(k);
  // The input draw is the host's (gpu 0's tuple for every GPU), the compute draw each GPU's.
  int64_t input = static_cast<int64_t>(static_cast<double>(d.input) *
                                       (1.0 + JitterOf(config_, kDrawInput, k, rank, 0)));
  if (rank == config_.input_stall_rank) input += config_.input_stall_ms * kNanosPerMilli;
  const bool straggles = rank == config_.straggler_rank && k % config_.straggler_every == 0 &&
                         (config_.slow_gpu < 0 || gpu == config_.slow_gpu);
  const double factor = straggles ? config_.straggler_factor : 1.0;
  const double compute = static_cast<double>(d.compute) * factor *
                         (1.0 + JitterOf(config_, kDrawCompute, k, rank, gpu));

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
  if (plan != nullptr) plan->device_ops.push_back({kH2DName, launched, prev_end});
  for (int64_t i = 0; i < config_.kernels_per_step; ++i) {
    launched = call("cudaLaunchKernel");
    const int64_t start = std::max(prev_end, launched);
    const int64_t dur = std::max(
        kMinKernelNs, static_cast<int64_t>(compute * kernel_weights_[static_cast<size_t>(i)]));
    if (plan != nullptr) {
      plan->device_ops.push_back(
          {kKernels[static_cast<size_t>(i) % kKernels.size()].name, start, start + dur});
    }
    prev_end = start + dur;
  }
  // The hung rank never calls into the collective: ready never.
  if (k == hang_step_ && rank == config_.hang_rank) return kNever;
  launched = call("ncclAllReduce");
  return std::max(prev_end, launched);
}

StepPlan SyntheticJob::Plan(int64_t k, int64_t rank, int64_t gpu) const {
  if (k == hang_step_) return HungPlan(k, rank, gpu);
  // The all-reduce ends when the slowest (rank, gpu) of the whole job is ready, plus its time.
  const int64_t slowest = memo_->Get(k, [&] {
    int64_t latest = 0;
    for (int64_t r = 0; r < config_.world; ++r) {
      for (int64_t g = 0; g < config_.gpus; ++g)
        latest = std::max(latest, ReadyNs(k, r, g, nullptr));
    }
    return latest;
  });
  const Durations d = Durations::Of(ConfigOf(k));
  StepPlan plan;
  plan.index = k;
  plan.step_num = ((k % kStepNumModulus) + kStepNumModulus) % kStepNumModulus;
  plan.start_ns = StepStartNs(k);
  plan.end_ns = plan.start_ns + PeriodNs(k);
  plan.allreduce_start_ns = ReadyNs(k, rank, gpu, &plan);
  plan.allreduce_end_ns = slowest + d.allreduce;
  plan.device_ops.push_back({kAllReduce.name, plan.allreduce_start_ns, plan.allreduce_end_ns});

  int64_t t = plan.host_calls.back().end_ns + kApiGapNs;
  plan.host_calls.push_back({"cudaMemcpyAsync", t, t + kApiCallNs});
  const int64_t d2h_start = std::max(plan.allreduce_end_ns, t + kApiCallNs);
  plan.device_ops.push_back({kD2HName, d2h_start, d2h_start + d.d2h});
  t += kApiCallNs + kApiGapNs;
  plan.host_calls.push_back(
      {"cudaStreamSynchronize", t, std::max(t, d2h_start + d.d2h) + kSyncTailNs});
  return plan;
}

StepPlan SyntheticJob::HungPlan(int64_t k, int64_t rank, int64_t gpu) const {
  StepPlan plan;
  plan.index = k;
  plan.step_num = ((k % kStepNumModulus) + kStepNumModulus) % kStepNumModulus;
  plan.start_ns = StepStartNs(k);
  plan.end_ns = kNever;
  plan.allreduce_start_ns = ReadyNs(k, rank, gpu, &plan);
  plan.allreduce_end_ns = kNever;
  // Launched, entered, never done: CUPTI records no activity for a kernel that never completes,
  // so the writer leaves it out; the ncclAllReduce launch on the host says it was entered.
  if (plan.allreduce_start_ns != kNever) {
    plan.device_ops.push_back({kAllReduce.name, plan.allreduce_start_ns, kNever});
  }
  return plan;
}

int64_t SyntheticJob::HostEventsPerStep() const {
  // Per GPU: step root (GPU 0) or its wrapper, IteratorGetNext, (kernels + 4) API calls, and the
  // input batch's MemoryAllocation and MemoryDeallocation.
  return config_.gpus * (config_.kernels_per_step + 8);
}

int64_t SyntheticJob::DeviceEventsPerStep() const {
  // Per GPU: H2D, kernels, all-reduce, D2H.
  return config_.gpus * (config_.kernels_per_step + 3);
}

namespace {

// Stat kinds XPlaneBuilder has no overload for.
void AddDoubleStat(xspace::XEvent* event, int64_t stat_id, double v) {
  xspace::XStat* s = event->add_stats();
  s->set_metadata_id(stat_id);
  s->set_double_value(v);
}
// A ref value: the id of a stat metadata whose name is the value, as TSL stores repeated strings
// (kernel_details, memcpy_details, tf_op).
void AddRefStat(XPlaneBuilder& plane, xspace::XEvent* event, int64_t stat_id, absl::string_view v) {
  xspace::XStat* s = event->add_stats();
  s->set_metadata_id(stat_id);
  s->set_ref_value(static_cast<uint64_t>(plane.StatMetadataId(v)));
}
void AddPlaneStrStat(XPlaneBuilder& plane, absl::string_view name, absl::string_view v) {
  xspace::XStat* s = plane.plane()->add_stats();
  s->set_metadata_id(plane.StatMetadataId(name));
  s->set_str_value(std::string(v));
}

// XProf's GPU device capability stats, with the value types TSL's CUPTI tracer writes.
void AddDeviceCapabilities(XPlaneBuilder& p) {
  AddPlaneStrStat(p, "device_vendor", kGpuVendor);
  AddPlaneStrStat(p, "gpu_device_name", kGpuName);
  p.AddPlaneStat(p.StatMetadataId("clock_rate"), kGpuClockRateKhz);
  p.AddPlaneStat(p.StatMetadataId("core_count"), kGpuSmCount);
  p.AddPlaneStat(p.StatMetadataId("memory_bandwidth"), kGpuMemoryBandwidth);
  p.AddPlaneStat(p.StatMetadataId("memory_size"), kGpuMemorySize);
  p.AddPlaneStat(p.StatMetadataId("compute_cap_major"), kGpuComputeCapMajor);
  p.AddPlaneStat(p.StatMetadataId("compute_cap_minor"), kGpuComputeCapMinor);
}

// CUPTI's memcpy_details: "kind_src:<k> kind_dst:<k> size:<n> dest:<device> async:<0|1>".
std::string MemcpyDetails(bool to_device, int64_t bytes, int64_t device) {
  return absl::StrCat("kind_src:", to_device ? "pinned" : "device",
                      " kind_dst:", to_device ? "device" : "pinned", " size:", bytes,
                      " dest:", device, " async:1");
}

// Writes one host's window of the simulated job as TSL's CUPTI tracer would: the host plane with
// one thread line per GPU, and one plane per GPU with its stream lines. Construct it (which names
// every plane, line and metadata, in the order that fixes their ids), then AddStep each (step,
// GPU) plan in order. Events outside the true window [true_start_ns, true_stop_ns] are left out
// (step markers cut by it are clipped and marked cut); times are written on the host's clock (true
// time + skew_ns).
class SyntheticSpaceWriter {
 public:
  SyntheticSpaceWriter(tensorflow::profiler::XSpace* space, int64_t gpus, int64_t kernels_per_step,
                       int64_t true_start_ns, int64_t true_stop_ns, int64_t skew_ns)
      : gpu_count_(gpus),
        kernels_per_step_(kernels_per_step),
        true_start_ns_(true_start_ns),
        true_stop_ns_(true_stop_ns),
        skew_(skew_ns),
        host_(space->add_planes(), kHostPlaneId, xspace::kHostPlaneName, true_start_ns + skew_ns),
        ids_(HostIds::Of(host_)),
        m_(MemoryStats::Of(host_)) {
    // Lines start at the profile start and are stored relative to it (xspace.h).
    const int64_t profile_start = true_start_ns + skew_ns;
    const int64_t line_ts = profile_start;
    for (int64_t g = 0; g < gpus; ++g) {
      host_lines_.push_back(
          host_.AddLine(kHostLineBase + g, absl::StrCat("python3 main (GPU ", g, ")"), line_ts));
      XPlaneBuilder p(space->add_planes(), g, absl::StrCat(xspace::kGpuPlanePrefix, g),
                      profile_start);
      AddDeviceCapabilities(p);
      // Stream lines as CUPTI names them: the stream id and the kinds of activity on it (NCCL
      // kernels are kernels: Compute).
      Gpu gpu{
          p,
          p.AddLine(kComputeStream, absl::StrCat("Stream #", kComputeStream, "(Compute)"), line_ts),
          p.AddLine(kH2DStream, absl::StrCat("Stream #", kH2DStream, "(MemcpyH2D)"), line_ts),
          p.AddLine(kD2HStream, absl::StrCat("Stream #", kD2HStream, "(MemcpyD2H)"), line_ts),
          p.AddLine(kNcclStream, absl::StrCat("Stream #", kNcclStream, "(Compute)"), line_ts),
          p.StatMetadataId(xspace::kStatCorrelationId),
          p.StatMetadataId(xspace::kStatKernelDetails),
          p.StatMetadataId("theoretical_occupancy_pct"),
          p.StatMetadataId("tf_op"),
          p.StatMetadataId(xspace::kStatMemcpyDetails)};
      gpus_.push_back(std::move(gpu));
    }
  }

  // GPU `g`'s part of one step: its thread's step event, input wait, API calls and the input
  // batch's memory events, and the device ops those calls launched. `batch_bytes`: the size of
  // the step's input batch; `ops_per_step`: API calls per step and GPU (for correlation ids).
  void AddStep(const StepPlan& plan, int64_t g, int64_t batch_bytes, int64_t ops_per_step) {
    // Correlation ids are unique per host: (step, gpu, call).
    const uint64_t corr_base =
        static_cast<uint64_t>(1 + ((plan.step_num * gpu_count_) + g) * ops_per_step);
    AddHostEvents(plan, g, batch_bytes, corr_base);
    AddDeviceOps(plan, g, corr_base);
  }

 private:
  struct HostIds {
    int64_t root, input, alloc, free, is_root, step_num, producer_type, producer_id, consumer_type,
        consumer_id, corr, device_id;
    static HostIds Of(XPlaneBuilder& host) {
      HostIds ids{};
      ids.root = host.EventMetadataId("train");
      // tf.data's name: XProf counts host time in events named IteratorGetNext... as waiting for
      // input (HOST_WAIT_INPUT), any other host event as compute.
      ids.input = host.EventMetadataId("IteratorGetNext");
      ids.alloc = host.EventMetadataId("MemoryAllocation");
      ids.free = host.EventMetadataId("MemoryDeallocation");
      ids.is_root = host.StatMetadataId(xspace::kStatIsRoot);
      ids.step_num = host.StatMetadataId(xspace::kStatStepNum);
      ids.producer_type = host.StatMetadataId("_pt");
      ids.producer_id = host.StatMetadataId("_p");
      ids.consumer_type = host.StatMetadataId("_ct");
      ids.consumer_id = host.StatMetadataId("_c");
      ids.corr = host.StatMetadataId(xspace::kStatCorrelationId);
      ids.device_id = host.StatMetadataId(xspace::kStatDeviceId);
      return ids;
    }
  };
  struct MemoryStats {
    int64_t allocator, device_ordinal, bytes_allocated, bytes_reserved, bytes_available,
        peak_bytes_in_use, requested_bytes, allocation_bytes, addr, fragmentation, tf_op,
        region_type, shape;
    static MemoryStats Of(XPlaneBuilder& host) {
      return {host.StatMetadataId("allocator_name"),
              host.StatMetadataId("device_ordinal"),
              host.StatMetadataId("bytes_allocated"),
              host.StatMetadataId("bytes_reserved"),
              host.StatMetadataId("bytes_available"),
              host.StatMetadataId("peak_bytes_in_use"),
              host.StatMetadataId("requested_bytes"),
              host.StatMetadataId("allocation_bytes"),
              host.StatMetadataId("addr"),
              host.StatMetadataId("fragmentation"),
              host.StatMetadataId("tf_op"),
              host.StatMetadataId("region_type"),
              host.StatMetadataId("shape")};
    }
  };
  struct Gpu {
    XPlaneBuilder plane;
    tensorflow::profiler::XLine *compute, *h2d, *d2h, *nccl;
    int64_t corr, kernel_details, occupancy, tf_op, memcpy_details;
  };

  bool Inside(int64_t start, int64_t end) const {
    return start >= true_start_ns_ && end <= true_stop_ns_;
  }

  // The step event: one step root per step per host (XProf groups each root on its own): GPU
  // 0's thread holds it; every other GPU thread joins it through a consumer wrapper spanning the
  // same step, named as a step marker so that readers which take names for steps (profctl's own
  // step pattern) see the same step there.
  // The step's marker; a step cut by the window is clipped to it and says so (xspace::kStatStepCut,
  // created on first use so that uncut files keep their ids), so readers keep it as partial
  // instead of never seeing it.
  void AddStepEvent(const StepPlan& plan, int64_t g, tensorflow::profiler::XLine* line) {
    const int64_t context_id = (kHostLineBase << 32) | plan.step_num;
    const int64_t start = std::max(plan.start_ns, true_start_ns_);
    const int64_t end = std::min(plan.end_ns, true_stop_ns_);
    if (end <= start) return;
    tensorflow::profiler::XEvent* e = nullptr;
    if (g == 0) {
      e = host_.AddEvent(line, ids_.root, start + skew_, end - start);
      host_.AddStat(e, ids_.is_root, int64_t{1});
      host_.AddStat(e, ids_.step_num, plan.step_num);
      if (gpu_count_ > 1) {
        host_.AddStat(e, ids_.producer_type, kStepContextType);
        host_.AddStat(e, ids_.producer_id, context_id);
      }
    } else {
      e = host_.AddEvent(line, host_.EventMetadataId(absl::StrCat("train_step ", plan.step_num)),
                         start + skew_, end - start);
      host_.AddStat(e, ids_.consumer_type, kStepContextType);
      host_.AddStat(e, ids_.consumer_id, context_id);
    }
    if (start != plan.start_ns || end != plan.end_ns) {
      host_.AddStat(e, host_.StatMetadataId(xspace::kStatStepCut), int64_t{1});
    }
  }

  // The input batch lives from its H2D copy's launch until the step's final sync returns: one
  // allocation on this GPU's allocator, instants inside those two API calls.
  void AddMemoryEvent(tensorflow::profiler::XLine* line, int64_t g, bool alloc, int64_t at,
                      int64_t batch_bytes, int64_t batch_addr) {
    auto* e = host_.AddEvent(line, alloc ? ids_.alloc : ids_.free, at + skew_, 0);
    const int64_t in_use = kResidentBytes + (alloc ? batch_bytes : 0);
    host_.AddStat(e, m_.allocator, absl::StrCat("GPU_", g, "_bfc"));
    host_.AddStat(e, m_.device_ordinal, g);
    host_.AddStat(e, m_.bytes_allocated, in_use);
    host_.AddStat(e, m_.bytes_reserved, int64_t{0});
    host_.AddStat(e, m_.bytes_available, static_cast<int64_t>(kGpuMemorySize) - in_use);
    host_.AddStat(e, m_.peak_bytes_in_use, kResidentBytes + batch_bytes);
    host_.AddStat(e, m_.requested_bytes, batch_bytes);
    host_.AddStat(e, m_.allocation_bytes, batch_bytes);
    host_.AddStat(e, m_.addr, batch_addr);
    AddDoubleStat(e, m_.fragmentation, 0.0);
    host_.AddStat(e, m_.tf_op, "model/input/IteratorGetNext:IteratorGetNext");
    host_.AddStat(e, m_.region_type, "output");
    host_.AddStat(e, m_.shape, absl::StrCat("[", batch_bytes / 2, "]"));
  }

  void AddHostEvents(const StepPlan& plan, int64_t g, int64_t batch_bytes, uint64_t corr_base) {
    tensorflow::profiler::XLine* line = host_lines_[static_cast<size_t>(g)];
    AddStepEvent(plan, g, line);
    if (Inside(plan.start_ns, plan.input_end_ns)) {
      host_.AddEvent(line, ids_.input, plan.start_ns + skew_, plan.input_end_ns - plan.start_ns);
    }
    const int64_t batch_addr = kBatchAddressBase + (g << 36) + (plan.step_num % 2) * batch_bytes;
    for (size_t i = 0; i < plan.host_calls.size(); ++i) {
      const StepPlan::Op& op = plan.host_calls[i];
      if (!Inside(op.start_ns, op.end_ns)) continue;
      auto* e = host_.AddEvent(line, host_.EventMetadataId(op.name), op.start_ns + skew_,
                               op.end_ns - op.start_ns);
      host_.AddStat(e, ids_.corr, corr_base + i);
      host_.AddStat(e, ids_.device_id, static_cast<uint64_t>(g));
      if (i == 0) {
        AddMemoryEvent(line, g, /*alloc=*/true, op.start_ns + kNanosPerMicro, batch_bytes,
                       batch_addr);
      }
      if (i + 1 == plan.host_calls.size() && plan.end_ns != SyntheticJob::kNever) {
        AddMemoryEvent(line, g, /*alloc=*/false, op.end_ns - kNanosPerMicro, batch_bytes,
                       batch_addr);
      }
    }
  }

  void AddDeviceOps(const StepPlan& plan, int64_t g, uint64_t corr_base) {
    Gpu& gpu = gpus_[static_cast<size_t>(g)];
    for (size_t i = 0; i < plan.device_ops.size(); ++i) {
      const StepPlan::Op& op = plan.device_ops[i];
      // As CUPTI, which records device activity only for work launched while it records:
      // a device op is kept only with its launch (so every one links to a host event).
      const StepPlan::Op& launch = plan.host_calls[i];
      if (!Inside(op.start_ns, op.end_ns) || !Inside(launch.start_ns, launch.end_ns)) continue;
      // H2D, kernels_per_step kernels, the all-reduce, D2H (a hung step's plan stops early).
      const size_t kernels = static_cast<size_t>(kernels_per_step_);
      const bool first = i == 0, last = i == kernels + 2;
      const bool nccl = i == kernels + 1;
      tensorflow::profiler::XLine* dest = first  ? gpu.h2d
                                          : last ? gpu.d2h
                                          : nccl ? gpu.nccl
                                                 : gpu.compute;
      auto* e = gpu.plane.AddEvent(dest, gpu.plane.EventMetadataId(op.name), op.start_ns + skew_,
                                   op.end_ns - op.start_ns);
      gpu.plane.AddStat(e, gpu.corr, corr_base + i);
      if (first || last) {
        AddRefStat(gpu.plane, e, gpu.memcpy_details,
                   MemcpyDetails(/*to_device=*/first, CopyBytes(op.end_ns - op.start_ns), g));
      } else {
        const KernelSpec& spec = nccl ? kAllReduce : kKernels[(i - 1) % kKernels.size()];
        AddRefStat(gpu.plane, e, gpu.kernel_details, KernelDetails(spec));
        AddDoubleStat(e, gpu.occupancy, TheoreticalOccupancyPct(spec));
        AddRefStat(gpu.plane, e, gpu.tf_op, spec.tf_op);
      }
    }
  }

  const int64_t gpu_count_;
  const int64_t kernels_per_step_;
  const int64_t true_start_ns_;
  const int64_t true_stop_ns_;
  const int64_t skew_;
  XPlaneBuilder host_;
  const HostIds ids_;
  const MemoryStats m_;
  std::vector<Gpu> gpus_;
  std::vector<tensorflow::profiler::XLine*> host_lines_;
};

}  // namespace

void SyntheticJob::Generate(int64_t true_start_ns, int64_t true_stop_ns,
                            tensorflow::profiler::XSpace* space) const {
  std::vector<std::vector<StepPlan>> steps;
  for (int64_t k = StepIndexAt(true_start_ns); k <= StepIndexAt(true_stop_ns - 1); ++k) {
    std::vector<StepPlan>& gpus = steps.emplace_back();
    for (int64_t g = 0; g < config_.gpus; ++g) gpus.push_back(Plan(k, config_.rank, g));
  }
  WriteSteps(steps, true_start_ns, true_stop_ns, space);
}

void SyntheticJob::WriteSteps(const std::vector<std::vector<StepPlan>>& steps,
                              int64_t true_start_ns, int64_t true_stop_ns,
                              tensorflow::profiler::XSpace* space) const {
  const int64_t skew = config_.clock_skew_ns;
  SyntheticSpaceWriter writer(space, config_.gpus, config_.kernels_per_step, true_start_ns,
                              true_stop_ns, skew);
  const int64_t ops_per_step = config_.kernels_per_step + 4;
  for (const std::vector<StepPlan>& gpus : steps) {
    if (gpus.empty()) continue;
    const Durations d = Durations::Of(ConfigOf(gpus.front().index));
    for (size_t g = 0; g < gpus.size(); ++g) {
      writer.AddStep(gpus[g], static_cast<int64_t>(g), CopyBytes(d.h2d), ops_per_step);
    }
  }
  xspace::SetProfileWindow(space, true_start_ns + skew, true_stop_ns + skew);
}

}  // namespace profctl::synthetic
