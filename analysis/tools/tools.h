// The profiler's own tools, as TensorFlow's profiler guide describes them, for one host and for
// the pod: overview, kernel_stats, op_stats, input_pipeline and memory. Pure (no I/O): each host's
// ToolTrace (tool_trace.h) and its breakdown summary (breakdown.h) go in, compact per-host results
// come out (the trace can be dropped), and BuildPodTools merges hosts. docs/tools.md documents
// every number, the events it comes from per framework, and the heuristics.
#ifndef PROFCTL_ANALYSIS_TOOLS_TOOLS_H_
#define PROFCTL_ANALYSIS_TOOLS_TOOLS_H_

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "analysis/breakdown.h"
#include "analysis/tools/tool_trace.h"

namespace profctl::analysis {

enum class Tool : uint8_t { kOverview, kKernelStats, kOpStats, kInputPipeline, kMemory, kTimeline };

struct HostTools;
struct PodTools;

// The tools, named once (the CLI's --tool values, the JSON's "tool", docs/tools.md), with what
// each computes: one descriptor table (tools.cc).
struct ToolInfo {
  Tool tool;
  absl::string_view name;
  absl::string_view summary;
  // Fills what the tool needs of one host into `h` (ComputeHostTools).
  void (*compute_host)(const ToolTrace& trace, const HostSummary& summary, HostTools& h);
  // Merges pod.hosts into the pod-wide fields (BuildPodTools); null when the tool has none.
  void (*merge_pod)(PodTools& pod, const PodBreakdown& breakdown);
};
absl::Span<const ToolInfo> AllTools();
std::optional<Tool> ToolByName(absl::string_view name);
absl::string_view ToolName(Tool tool);
// "overview|kernel_stats|op_stats|input_pipeline|memory|timeline".
std::string ToolNamesForHelp();

// --- Heuristics (docs/tools.md "Heuristics") --------------------------------------------------

// The kernel runs on Tensor Cores, by name: hmma/imma/wgmma/gmma/xmma/wmma, tensorop/tensor_op,
// cuBLAS tile names h884/h1688/h16816/s1688/s16816/i8816/i16832, FlashAttention's
// flash_fwd/flash_bwd and fmha kernels (case-insensitive).
bool UsesTensorCores(absl::string_view kernel_name);
// The kernel computes in 16-bit precision, by name: fp16, bf16, f16, half, bfloat16, hmma,
// h884/h1688/h16816 (case-insensitive).
bool Is16BitKernel(absl::string_view kernel_name);
// A matrix multiply or convolution (op name, op type or kernel name): matmul, gemm, conv, dot,
// einsum, linear, aten::mm/addmm/bmm/baddbmm/addbmm.
bool IsMatmulOrConv(absl::string_view name);
// Eligible for Tensor Cores: a matmul/convolution (by op or kernel name) whose inputs are 16-bit
// (op `Input type` when recorded, else the kernel name; unknown precision counts as eligible when
// the kernel already uses Tensor Cores) and whose last dimensions are multiples of 8 when the op's
// `Input Dims` are recorded. A kernel that uses Tensor Cores is eligible.
bool TensorCoreEligible(absl::string_view kernel_name, absl::string_view op_name,
                        absl::string_view op_type, absl::string_view input_types,
                        absl::string_view input_dims);

// --- kernel_stats -------------------------------------------------------------------------------

// A slice of the guide's charts of top kernels and of self time per op / op type.
struct PieSlice {
  std::string name;  // "other": the rows past the top N, summed
  int64_t self_ns = 0;
  double pct = 0;  // of the chart's whole
};

struct KernelStat {
  std::string kernel;
  std::string op;  // the launching op ("" when the trace does not say)
  // Launch configuration of the first occurrence (-1 / 0: unknown); `configs` counts distinct ones
  // (at most 64).
  int32_t registers_per_thread = -1;
  int64_t shared_memory_bytes = -1;  // static + dynamic
  std::array<int32_t, 3> grid = {0, 0, 0};
  std::array<int32_t, 3> block = {0, 0, 0};
  double occupancy_pct = -1;
  int64_t configs = 0;
  bool tensor_core_eligible = false;
  bool tensor_core_used = false;
  int64_t occurrences = 0;
  int64_t total_ns = 0;
  int64_t min_ns = 0;
  int64_t max_ns = 0;
  // Of all rows' total time: this row's, and this row's and those above it (rows in order).
  double pct = 0;
  double cum_pct = 0;
  int64_t avg_ns() const { return occurrences == 0 ? 0 : total_ns / occurrences; }
};

// One row per (kernel, launching op), by total time descending (then kernel, op), with pct and
// cum_pct.
std::vector<KernelStat> ComputeKernelStats(const ToolTrace& trace);

// The guide's top kernels: per kernel name (summed over launching ops), the `top_n` with the
// most total time, then one "other" slice for the rest (when any); pct of all kernel time.
std::vector<PieSlice> TopKernels(const std::vector<KernelStat>& rows, size_t top_n);

// --- op_stats -----------------------------------------------------------------------------------

struct OpStat {
  std::string name;  // by type: the type
  std::string type;
  bool host = false;  // seen as a host event (else only on a device)
  int64_t occurrences = 0;
  int64_t host_total_ns = 0;
  int64_t host_self_ns = 0;
  int64_t device_total_ns = 0;  // its kernels and its children's
  int64_t device_self_ns = 0;   // the kernels it launched itself
  int64_t flops = -1;           // XProf's `flops` of its device op spans, summed; -1: not recorded
};
struct OpStats {
  std::vector<OpStat> by_op;    // by device self time, then host self time, descending
  std::vector<OpStat> by_type;  // the same summed per type
  // The guide's IDLE: the recorded window's time with no host event running on any thread, and
  // summed over the devices that ran anything, each device's time with nothing running on it.
  int64_t host_idle_ns = 0;
  int64_t device_idle_ns = 0;
  // The devices' peak FLOP/s (`peak_teraflops_per_second`; the largest when they differ), 0:
  // unknown. FLOPS utilization of a row = flops / device self time / this.
  double peak_flops_per_s = 0;
};
OpStats ComputeOpStats(const ToolTrace& trace);
// A row's FLOPS utilization in % (the guide's TPU op profile), or -1 when the trace lacks the
// `flops` stats, the device's peak or the time.
double FlopsUtilizationPct(const OpStat& row, double peak_flops_per_s);

// The name and type of the row the idle switch adds.
inline constexpr absl::string_view kIdleOpName = "IDLE";

// A row of an op table with its shares: % of all rows' self time on that side (host or device)
// and the cumulative % of its and the rows above it in the table's order (device self, then
// host self, descending), so that both cumulative columns rise down the table; a row without
// self time on a side has 0 and 0 there.
struct OpShareRow {
  OpStat stat;
  bool idle = false;  // the IDLE row
  double host_self_pct = 0;
  double host_self_cum_pct = 0;
  double device_self_pct = 0;
  double device_self_cum_pct = 0;
};
// `rows` (OpStats::by_op or by_type) with their shares. With `include_idle` an IDLE row (the
// host and device idle time) is added in its sorted place and counts in every percentage (the
// guide's include/exclude IDLE switch); without, idle time counts nowhere.
std::vector<OpShareRow> OpShares(const std::vector<OpStat>& rows, int64_t host_idle_ns,
                                 int64_t device_idle_ns, bool include_idle);

// The top `top_n` rows by device (or host) self time and one "other" slice for the rest (when
// it is not empty); rows without self time on that side are left out.
std::vector<PieSlice> SelfTimePie(const std::vector<OpShareRow>& rows, bool device, size_t top_n);

// --- memory -------------------------------------------------------------------------------------

struct MemoryPoint {
  int64_t time_ns = 0;
  int64_t in_use_bytes = 0;
};
struct LiveAllocation {
  uint64_t address = 0;
  int64_t bytes = 0;
  int64_t since_ns = 0;
  std::string op;
  // XProf's per-event details, when the trace writes them (-1 / "": not recorded).
  int64_t requested_bytes = -1;
  int64_t step = -1;
  std::string region_type;
  std::string data_type;
  std::string shape;
};
// The allocations live at the peak of one op (the guide's memory breakdown table).
struct PeakOpMemory {
  std::string op;  // "" when the trace does not say; "other": the ops past kMaxPeakOps
  int64_t allocations = 0;
  int64_t bytes = 0;
  int64_t requested_bytes = -1;  // summed where recorded, -1: never
  // Of the op's largest allocation.
  std::string region_type;
  std::string data_type;
  std::string shape;
};
struct FragmentationPoint {
  int64_t time_ns = 0;
  double fragmentation = 0;  // 0..1
};
struct DeviceMemory {
  std::string host;
  int64_t device = -1;          // -1: host memory
  int64_t window_start_ns = 0;  // the host's recorded window start, for relative times
  int64_t allocations = 0;
  int64_t frees = 0;
  // In use after each event, at most kMaxMemoryPoints (the maximum of each time bucket: the peak
  // is always kept).
  std::vector<MemoryPoint> timeline;
  int64_t peak_bytes = 0;
  int64_t peak_time_ns = 0;
  int64_t baseline_bytes = 0;  // in use before the trace's first event (not listed as live)
  int64_t live_at_peak = 0;    // allocations made during the trace and live at the peak
  std::vector<LiveAllocation> largest_live_at_peak;  // the kMaxLiveShown largest
  double fragmentation_at_peak = -1;                 // 0..1, -1: not derivable
  int64_t reserved_at_peak = -1;
  // The allocator's view (XProf's MemoryProfile stats, TensorFlow/JAX XSpace; -1: not
  // recorded): capacity = stack + heap + free of the event at the peak, else the device's
  // memory size from the run environment.
  int64_t capacity_bytes = -1;
  bool capacity_from_allocator = false;
  int64_t peak_heap_since_start_bytes = -1;  // the largest `peak_bytes_in_use`
  int64_t stack_at_peak = -1;                // `bytes_reserved`
  int64_t heap_at_peak = -1;                 // `bytes_allocated`
  int64_t free_at_peak = -1;                 // `bytes_available`
  // The allocator's `fragmentation` (1 - largest free chunk / total free) over time, at most
  // kMaxMemoryPoints (the maximum of each bucket); empty when the trace does not write it.
  std::vector<FragmentationPoint> fragmentation;
  std::vector<PeakOpMemory> by_op_at_peak;  // by bytes descending, at most kMaxPeakOps + other
  // What the guide's memory profile shows that this trace does not record, one line each.
  std::vector<std::string> missing;
};
inline constexpr size_t kMaxMemoryPoints = 1000;
inline constexpr size_t kMaxLiveShown = 20;
inline constexpr size_t kMaxPeakOps = 50;
std::vector<DeviceMemory> ComputeMemory(const ToolTrace& trace);

// --- input_pipeline -----------------------------------------------------------------------------

struct InputStep {
  int64_t step = 0;
  int64_t step_time_ns = 0;
  int64_t device_input_ns = 0;  // the breakdown's `input`: the devices wait for input
  int64_t host_input_ns = 0;    // union of the host's input-wait events inside the step
};
// The guide's host-side input categories, and the training loop's wait for input.
enum class InputCategory : uint8_t {
  kEnqueue = 0,    // enqueuing data to the device (InfeedEnqueue, pin memory, H2D copies)
  kDemandedRead,   // reading data from files on demand
  kAdvancedRead,   // reading data from files in advance (caching, prefetch, interleave)
  kPreprocessing,  // everything else the input pipeline does
  kWait,           // the consumer waiting for input (IteratorGetNext, DataLoader __next__)
};
inline constexpr int kNumInputCategories = 5;
// "enqueue", "demanded_read", "advanced_read", "preprocessing", "wait".
absl::string_view InputCategoryName(InputCategory c);
// The category of a host input event by name: XProf's classification of tf.data iterators
// (`Iterator::...::TFRecord` etc. read files, in advance under MemoryReader/MemoryWriter/
// Interleave/Prefetch/ParallelMap; any other iterator preprocesses), InfeedEnqueue and pin
// memory enqueue, IteratorGetNext/DataLoader `__next__` wait; else preprocessing.
InputCategory InputCategoryOf(absl::string_view name);

struct InputStage {
  std::string name;
  InputCategory category = InputCategory::kPreprocessing;
  double self_pct = 0;  // of all stages' self time on the host
  int64_t count = 0;
  int64_t total_ns = 0;
  int64_t self_ns = 0;
  int64_t max_ns = 0;
  bool consumer = false;       // runs on a training-loop thread (synchronous with the step)
  bool critical_path = false;  // the bottleneck analysis put it on the critical path
};
// The guide's tf.data bottleneck analysis, from tf.data's iterator events (long names
// `Iterator::A::B`: B is an input of A).
struct TfDataNode {
  std::string name;    // the long name
  std::string parent;  // "" for a root iterator
  int32_t depth = 0;   // 1: a root
  int64_t count = 0;
  int64_t total_ns = 0;
  int64_t self_ns = 0;
  int64_t max_ns = 0;
  int64_t slowest_self_ns = 0;  // its self time inside the slowest execution
  bool critical_path = false;
};
inline constexpr int64_t kSlowTfDataCallNs = 50'000;  // the guide's slow call: > 50 us
struct TfDataAnalysis {
  std::vector<TfDataNode> graph;  // parents before their inputs, by name
  int64_t calls = 0;              // root iterator calls
  int64_t slow_calls = 0;         // of them longer than kSlowTfDataCallNs
  // The longest root call and what ran in it.
  std::string slowest_root;
  int64_t slowest_start_ns = 0;
  int64_t slowest_ns = 0;
  std::vector<std::string> critical_path;  // root to leaf: at each node its busiest input
  std::string bottleneck;  // the node on the critical path with the most self time in it
};
TfDataAnalysis ComputeTfDataAnalysis(const ToolTrace& trace);

struct HostInputPipeline {
  std::string host;
  TfDataAnalysis tf_data;  // empty graph: the trace has no tf.data iterators
  std::vector<InputStep> steps;
  std::vector<InputStage> stages;  // by self time descending
  std::string bottleneck;          // the slowest stage on the critical path ("" when none)
  int64_t input_ns = 0;            // sum over steps of device_input_ns
  int64_t step_ns = 0;             // sum of step times
  // Self time of the stages per InputCategory, plus host-to-device copies as enqueue.
  std::array<int64_t, kNumInputCategories> category_ns{};
  int64_t h2d_copy_ns = 0;  // the device copies counted in enqueue
};
HostInputPipeline ComputeInputPipeline(const ToolTrace& trace, const HostSummary& summary);

// --- overview -----------------------------------------------------------------------------------

// The guide's step-time categories. Precedence (first that applies wins, per instant of a step,
// over all the host's devices): device compute, output, device-to-device, collectives, input,
// then with the devices idle and no host thread blocked on them: compilation, kernel launch,
// host compute; else other. Compilation + kernel launch + host compute == the breakdown's
// `host`; the others equal the breakdown's compute, output, d2d, collectives, input and idle.
enum class OverviewCategory : uint8_t {
  kCompilation = 0,
  kInput,
  kOutput,
  kKernelLaunch,
  kHostCompute,
  kDeviceToDevice,
  kCollectives,
  kDeviceCompute,
  kOther,
};
inline constexpr int kNumOverviewCategories = 9;
// "compilation", "input", "output", "kernel_launch", "host_compute", "device_to_device",
// "collectives", "device_compute", "other".
absl::string_view OverviewCategoryName(OverviewCategory c);

struct OverviewTimes {
  std::array<int64_t, kNumOverviewCategories> ns{};
  int64_t compute_16bit_ns = 0;  // of device_compute
  int64_t compute_32bit_ns = 0;
  int64_t& operator[](OverviewCategory c) { return ns[static_cast<size_t>(c)]; }
  int64_t operator[](OverviewCategory c) const { return ns[static_cast<size_t>(c)]; }
  int64_t total() const;
};

struct OverviewStep {
  int64_t step = 0;
  int64_t start_ns = 0;
  int64_t step_time_ns = 0;
  OverviewTimes times;
};

struct TopEntry {
  std::string name;
  int64_t self_ns = 0;
  double pct = 0;        // of all device (kernels) or host (ops) self time
  double cum_pct = 0;    // of this entry and those above it
  std::string category;  // ops: the op type; kernels: ""
};

// The guide's step-time statistics over complete steps (population standard deviation).
struct StepTimeStats {
  int64_t steps = 0;
  double average_ns = 0;
  double stddev_ns = 0;
  int64_t min_ns = 0;
  int64_t max_ns = 0;
};
StepTimeStats StepTimeStatsOf(const std::vector<int64_t>& step_times_ns);

// One device's wait for input (the breakdown's per-device `input`) over a host's steps.
struct DeviceInputWait {
  int64_t device = 0;
  int64_t input_ns = 0;  // summed over steps
  int64_t step_ns = 0;
  double pct = 0;  // input_ns of step_ns
};
// The range of input wait across devices (the guide's per-core range); known = some device.
struct InputWaitRange {
  bool known = false;
  double min_pct = 0;
  double max_pct = 0;
  std::string min_at;  // "<host> device <id>"
  std::string max_at;
};

struct HostOverview {
  std::string host;
  std::vector<OverviewStep> steps;
  OverviewTimes total;  // summed over steps
  int64_t step_ns = 0;  // summed over steps
  int64_t kernels = 0;  // kernel launches in steps' windows
  int64_t kernel_ns = 0;
  // The kernels that are not collectives (a long all-reduce kernel says nothing of launch
  // overhead), over the whole trace.
  int64_t compute_kernels = 0;
  int64_t compute_kernel_ns = 0;
  int64_t tensor_core_eligible_ns = 0;
  int64_t tensor_core_used_ns = 0;
  std::vector<TopEntry> top_kernels;  // kMaxTop by total time
  std::vector<TopEntry> top_ops;      // kMaxTop by device self time, else host self time
  RunEnvironment environment;         // devices: also those that ran kernels but are not described
  StepTimeStats step_time;
  std::vector<DeviceInputWait> input_by_device;  // in the breakdown's device order
  InputWaitRange input_range;
  std::vector<std::string> warnings;
};
inline constexpr size_t kMaxTop = 10;

HostOverview ComputeOverview(const ToolTrace& trace, const HostSummary& summary);

struct Recommendation {
  std::string kind;    // "input", "launch", "collectives", "tensor_cores", "stragglers", ...
  std::string advice;  // what to do
  std::string reason;  // the numbers behind it
};

// --- timeline: what Holistic Trace Analysis (HTA) reads off the device timeline ----------------

// HTA's thresholds (its defaults): a gap between two events of a stream shorter than this, with
// the next one already launched, is the launch overhead between back-to-back kernels.
inline constexpr int64_t kKernelWaitNs = 30'000;
// A launch delay (the launch call's end to the device event's start) beyond this is an outlier.
inline constexpr int64_t kLaunchDelayOutlierNs = 100'000;
// A launch call (cudaLaunchKernel, ...) longer than this is an outlier.
inline constexpr int64_t kSlowLaunchCallNs = 50'000;

// Idle time between the events of a stream, by cause (HTA's idle time breakdown): the gap before
// each event (after the one before it on its stream ended) is a host wait when the event's
// launch call started after that end (the host did not enqueue work in time), else a kernel wait
// when it is shorter than kKernelWaitNs (back-to-back launch overhead), else other (waiting on
// another stream, a synchronization, ...).
struct IdleByCause {
  int64_t host_wait_ns = 0;
  int64_t kernel_wait_ns = 0;
  int64_t other_ns = 0;
  int64_t total() const { return host_wait_ns + kernel_wait_ns + other_ns; }
};

// The launch-to-start distribution's buckets, by upper bound (ns, exclusive); the last bucket
// has none.
inline constexpr std::array<int64_t, 10> kLaunchDelayBucketBoundsNs = {
    1'000, 2'000, 5'000, 10'000, 20'000, 50'000, 100'000, 1'000'000, 10'000'000, 100'000'000};
inline constexpr size_t kNumLaunchDelayBuckets = kLaunchDelayBucketBoundsNs.size() + 1;

// The delay of each launched device event after its launch call (HTA's kernel launch
// statistics): the event's start minus the call's end, 0 when it started before the call
// returned (as HTA clips it), over device events whose correlated host call is a launch
// (cudaLaunchKernel[ExC], cuLaunchKernel[Ex], cudaMemcpyAsync, cudaMemsetAsync and the HIP names of
// these).
struct LaunchDelayStats {
  int64_t launches = 0;
  int64_t sum_ns = 0;
  int64_t min_ns = 0;
  int64_t max_ns = 0;
  // Exact percentiles of one host's delays (nearest rank); -1 for the pod (merged hosts keep
  // only the histogram).
  int64_t p50_ns = -1;
  int64_t p90_ns = -1;
  int64_t p99_ns = -1;
  int64_t outliers = 0;             // delay > kLaunchDelayOutlierNs
  int64_t slow_calls = 0;           // launch calls > kSlowLaunchCallNs
  int64_t shorter_than_launch = 0;  // device events shorter than their launch call
  std::array<int64_t, kNumLaunchDelayBuckets> histogram{};
  double mean_ns() const {
    return launches == 0 ? 0 : static_cast<double>(sum_ns) / static_cast<double>(launches);
  }
};

// One stream of one device: its events, busy time, idle by cause, and its queue length: work
// launched to it and not yet started (HTA's: +1 at each launch call's start, -1 at each launched
// event's start), sampled at every change.
struct StreamTimeline {
  int64_t device = 0;
  int64_t stream = 0;
  int64_t events = 0;
  int64_t busy_ns = 0;
  IdleByCause idle;
  int64_t queue_samples = 0;
  double queue_mean = 0;
  int64_t queue_p50 = 0;
  int64_t queue_max = 0;
};

struct HostTimeline {
  // Communication (collective kernels) and computation (other kernels), each the union of its
  // kernels over the host's devices, and their intersection: communication hidden under
  // computation (HTA's comm/comp overlap = overlap / communication).
  int64_t communication_ns = 0;
  int64_t computation_ns = 0;
  int64_t overlap_ns = 0;
  IdleByCause idle;  // summed over streams
  LaunchDelayStats launch;
  std::vector<StreamTimeline> streams;  // by device, then stream
  // The % of communication time overlapped by computation; -1 when there is no communication.
  double OverlapPct() const {
    return communication_ns <= 0
               ? -1
               : 100.0 * static_cast<double>(overlap_ns) / static_cast<double>(communication_ns);
  }
};
HostTimeline ComputeTimeline(const ToolTrace& trace);
// The pod's: the hosts' times and counts summed, histograms merged, the lowest min and highest
// max; no percentiles and no streams (they stay per host).
HostTimeline MergeTimelines(const std::vector<HostTimeline>& hosts);

// --- per host and pod ---------------------------------------------------------------------------

struct HostTools {
  std::string host;
  HostOverview overview;
  std::vector<KernelStat> kernels;
  OpStats ops;
  std::vector<DeviceMemory> memory;
  HostInputPipeline input;
  HostTimeline timeline;
  std::vector<std::string> warnings;  // the reader's
};

struct PodTools {
  static constexpr int kSchemaVersion = 1;
  Tool tool = Tool::kOverview;
  std::vector<HostTools> hosts;
  // Pod-wide merges (kernel_stats/op_stats: summed over hosts; overview: over all hosts' steps).
  std::vector<KernelStat> kernels;
  OpStats ops;
  // Over every host's steps but the pod's warm-up steps (PodVerdict's evidence), which are
  // listed apart: the same steps the breakdown's means are over.
  OverviewTimes overview_total;
  int64_t overview_step_ns = 0;
  std::vector<int64_t> overview_warmup_steps;
  int64_t overview_steps = 0;  // host-steps: every host's complete steps
  // The pod's steps (the breakdown's step count, VerdictEvidence::steps): the one step count
  // every output names; overview_steps counts each of them once per host that has it.
  int64_t pod_steps = 0;
  StepTimeStats overview_step_time;     // over every host's complete steps
  InputWaitRange overview_input_range;  // over every host's devices
  std::vector<Recommendation> recommendations;
  HostTimeline timeline;  // timeline: MergeTimelines of the hosts'
  // op_stats: count idle time as an IDLE row in the shares (OpShares); --include-idle.
  bool include_idle = false;
};

// What `tool` needs of one host (the overview needs kernel and op stats too).
HostTools ComputeHostTools(Tool tool, const ToolTrace& trace, const HostSummary& summary);
// Merges hosts (in report order); `breakdown` gives the stragglers for recommendations.
PodTools BuildPodTools(Tool tool, std::vector<HostTools> hosts, const PodBreakdown& breakdown);

}  // namespace profctl::analysis

#endif  // PROFCTL_ANALYSIS_TOOLS_TOOLS_H_
