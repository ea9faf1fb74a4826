// The naming rules the trace readers (xspace_reader.h, kineto_reader.h) share: what a step marker
// is, and which OpKind an event of a host thread or a device gets. One table for every framework,
// so a TensorFlow, JAX and PyTorch trace of the same work classify alike.
// docs/pod-step-breakdown.md links here; change both together.
//
// STEP MARKERS (host events only; never device events)
//   - TSL/JAX/TF step roots (XSpace): an event on a `/host:CPU` line with stat `_r` >= 1 and an
//     integer `step_num` (int64, or uint64 as some writers store it), whatever its name (`train`,
//     `test`, ...): what jax.profiler.StepTraceAnnotation and TF's Trace(..., step_num=, _r=1)
//     emit. The marker's step is step_num.
//   - Any host event whose name matches ReaderOptions::step_pattern (RE2 syntax, searched
//     anywhere in the name; capture group 1 is the step number): NVTX ranges (which TSL records on
//     host lines), PyTorch `ProfilerStep#N` (Kineto categories user_annotation and cpu_op), user
//     annotations. Names longer than kMaxStepNameLength are never markers.
//     kDefaultStepPattern, case-insensitive, matches "step", "ProfilerStep", "StepMarker" (the
//     word not preceded by a letter, so "train_step" yes, "substep" no), then optional blanks and
//     one of `# : _ = -`, then the step number at the end of the name (trailing blanks allowed):
//       yes: "train_step 12", "step#12", "step 12", "ProfilerStep#12", "StepMarker 12",
//            "Step_12", "global_step=12", "epoch 1 step 12"
//       no:  "Optimizer.step#SGD.step", "train_step" (no number), "substep 3", "step 12 of 90"
//   Step markers are not host work: they are never in HostTrace::host_ops.
//
// DEVICE OPS (OpKind for events of GPU/TPU/custom-device timelines), first rule that applies:
//   1. XSpace `memcpy_details` stat (event or event-metadata stat, string or ref), when it names
//      the direction: `kind_src:<k> kind_dst:<k>` as CUPTI writes it, host kinds pageable/pinned,
//      device kinds device/array/device_static (managed/unknown decide nothing), or `kind:HtoD`
//      style. host->device: kMemcpyH2D; device->host: kMemcpyD2H; device->device: kMemcpyD2D;
//      host->host: kDeviceCompute.
//   2. IsCollectiveDeviceOpName: names starting `nccl`/`rccl` (any case, point-to-point
//      send/recv kernels included: they are communication), or naming an all-reduce,
//      all-gather, reduce-scatter, all-to-all or collective-permute in any spelling
//      (IsCollectiveOpName in alignment.h, plus collective-permute), except async `-start`
//      halves: kCollective.
//   3. Memcpy names (case-insensitive, blanks and '_' ignored): `MemcpyHToD`, `MemcpyH2D`,
//      Kineto's `Memcpy HtoD (Pageable -> Device)`: kMemcpyH2D; `MemcpyDToH`, `MemcpyD2H`,
//      `Memcpy DtoH ...`: kMemcpyD2H; `MemcpyDToD`, `MemcpyD2D`, `MemcpyPtoP`, `MemcpyP2P`,
//      `MemcpyPeer`, names starting `P2P`: kMemcpyD2D. TPU `infeed...`: kMemcpyH2D, `outfeed...`:
//      kMemcpyD2H (the host feeding / draining the device, as XProf counts them). Both namings
//      matter: TensorFlow's CUPTI tracer writes `MemcpyH2D`, profctl's collectors write XProf's
//      `MemcpyHToD` with CUPTI's kinds in memcpy_details (docs/xprof-compatibility.md).
//   4. Anything else (kernels, memsets, `Memcpy HtoH`, unknown memcpys): kDeviceCompute.
//
// HOST OPS (OpKind for host events that are not step markers), first rule that applies; names
// compared case-insensitively, except the GPU API prefixes (`cudaX`, `cuX`, `hipX`: X upper case):
//   kHostInputWait: names starting `GetNextBatch`, `IteratorGetNext`, `Iterator::` (tf.data:
//     note TF's background prefetch threads emit these too), `enumerate(DataLoader)`,
//     `MultiDeviceIteratorGetNext`, `InfeedEnqueue`; or containing `IteratorGetNext` (TF op
//     events are `name:IteratorGetNext`), `DataLoader`, `data_loader`, `_next_data`,
//     `next_batch`; or exactly `next` / `__next__`.
//   kHostLaunch: GPU runtime/driver calls that launch or enqueue device work and return. With the
//     API prefix `cuda`, `cu` (driver, next letter upper case) or `hip` removed, names starting
//     `Launch` (cudaLaunchKernel, cuLaunchKernel, cudaLaunchCooperativeKernel, hipLaunchKernel,
//     ...), `GraphLaunch`, `ExtLaunch`, `ModuleLaunch`, `EventRecord`, `StreamWaitEvent`,
//     `Memset` (any), or `Memcpy`/`Memset` names containing `Async` (cudaMemcpyAsync,
//     cuMemcpyHtoDAsync_v2, cudaMemcpy2DAsync, ...). And names starting `nccl`/`rccl` on the host
//     (ncclAllReduce, ncclGroupEnd, PyTorch's `nccl:all_reduce`).
//   kHostSync: the host blocked on the device: with the API prefix removed, names starting
//     `StreamSynchronize`, `DeviceSynchronize`, `EventSynchronize`, `CtxSynchronize`, or
//     synchronous copies (`Memcpy...` without `Async`: cudaMemcpy, cuMemcpyDtoH_v2); and names
//     containing `BlockHostUntilReady` / `BlockHostUntilDone` (JAX/XLA, TF StreamExecutor).
//   kHostOther: every other host event (framework ops, other runtime calls such as cudaMalloc or
//     cudaGetDevice, user annotations), EXCEPT these pure wrappers, which are dropped: step
//     markers and any XSpace event with `_r` >= 1 (a step root spans the whole step: it is not
//     host work), Python stack frames (XSpace names starting `$`, Kineto `python_function`) unless
//     they are input waits by the rules above, and Kineto categories that are not host work at
//     all (see kineto_reader.h).
//   Host ops nest (aten::item contains cudaMemcpyAsync and cudaStreamSynchronize): readers emit
//   every level; the breakdown's precedence decides what an instant counts as.
#ifndef PROFCTL_ANALYSIS_OP_CLASSIFY_H_
#define PROFCTL_ANALYSIS_OP_CLASSIFY_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "analysis/alignment.h"
#include "analysis/host_trace.h"

// Range limits shared with alignment (alignment.h): readers accept clock offsets within
// +-kMaxAbsOffsetNs and drop (with a warning) events whose times, on either clock, fall outside
// +-kMaxAbsTimeNs, so no later arithmetic on HostTrace times overflows int64.

namespace re2 {
class RE2;
}  // namespace re2

namespace profctl::analysis {

// See "STEP MARKERS" above. RE2 syntax.
inline constexpr absl::string_view kDefaultStepPattern =
    R"re((?i)(?:^|[^a-z])(?:profiler)?step(?:marker)?\s*[#:_=-]?\s*(\d+)\s*$)re";
// Longer names are never step markers (kernel and Python frame names can be kilobytes long).
inline constexpr size_t kMaxStepNameLength = 512;

// The defaults of ReaderOptions' limits on hostile or broken files (docs/tools.md "Limits").
inline constexpr uint64_t kDefaultMaxInflatedBytes = uint64_t{4} << 30;  // 4 GiB
inline constexpr uint64_t kDefaultMaxInflateRatio = 100;
inline constexpr uint64_t kDefaultMaxStringBytes = uint64_t{1} << 20;  // 1 MiB
// A Kineto file's text is held whole while it is parsed (and the tools' reader needs about 4.5x
// a file's size in all), so a file over 2 GiB would need ~9 GiB: refused unless asked for.
inline constexpr uint64_t kDefaultMaxFileBytes = uint64_t{2} << 30;  // 2 GiB
// Arrays and objects nested deeper than this are refused (a Chrome trace nests about 4 levels;
// the JSON parsers recurse once per level).
inline constexpr int kMaxJsonDepth = 1000;

// Options shared by every trace reader.
struct ReaderOptions {
  // RE2 pattern with at least one capture group; group 1 must capture the step number (decimal
  // digits). Searched anywhere in a host event's name: anchor with ^ / $ as needed.
  std::string step_pattern = std::string(kDefaultStepPattern);
  // A gzipped trace is refused (RESOURCE_EXHAUSTED naming the file and the cap) as soon as its
  // inflated text passes either cap, before the rest is inflated: max_inflated_bytes bytes in
  // all, or max_inflate_ratio times the compressed size (0: no ratio cap).
  uint64_t max_inflated_bytes = kDefaultMaxInflatedBytes;
  uint64_t max_inflate_ratio = kDefaultMaxInflateRatio;
  // A JSON string (a key or a value, as written, escapes included) longer than this refuses the
  // whole file (INVALID_ARGUMENT naming the cap and the offset), before it is parsed.
  uint64_t max_string_bytes = kDefaultMaxStringBytes;
  // A trace file larger than this is refused (RESOURCE_EXHAUSTED naming the file, its size and
  // the cap) before any of it is read (trace_file.h).
  uint64_t max_file_bytes = kDefaultMaxFileBytes;
};

// INVALID_ARGUMENT naming the pattern and RE2's complaint when step_pattern does not compile or
// has no capture group.
absl::Status ValidateReaderOptions(const ReaderOptions& options);

// A compiled step pattern. Immutable after Create; safe to share between threads.
class StepMatcher {
 public:
  static absl::StatusOr<StepMatcher> Create(absl::string_view pattern);
  StepMatcher(StepMatcher&&) noexcept;
  StepMatcher& operator=(StepMatcher&&) noexcept;
  ~StepMatcher();

  // The step number when `name` is a step marker name. std::nullopt when it does not match, is
  // longer than kMaxStepNameLength, or group 1 is not a number in [0, INT64_MAX] (then
  // *bad_number is set, if given, so readers can warn).
  std::optional<int64_t> Match(absl::string_view name, bool* bad_number = nullptr) const;

 private:
  explicit StepMatcher(std::unique_ptr<re2::RE2> re);
  std::unique_ptr<re2::RE2> re_;
};

// Host event -> kHostInputWait, kHostLaunch, kHostSync or kHostOther (see "HOST OPS").
OpKind ClassifyHostOpName(absl::string_view name);

// Device event name -> kCollective, kMemcpyH2D/D2H/D2D or kDeviceCompute (rules 2-4 of
// "DEVICE OPS").
OpKind ClassifyDeviceOpName(absl::string_view name);

// Rule 2 of "DEVICE OPS".
bool IsCollectiveDeviceOpName(absl::string_view name);

// Rule 1 of "DEVICE OPS": the copy direction a memcpy_details value states, if it states one.
std::optional<OpKind> MemcpyKindFromDetails(absl::string_view details);

// Collects a reader's problems as one line per kind of problem ("dropped 3 events with negative
// duration; first: ..."), however many events have it, so a bad 1 M-event trace yields a few
// lines, not a million. Not thread-safe.
class ReaderWarnings {
 public:
  // Counts one occurrence of `what` (a fixed description, e.g. "events with negative duration
  // dropped"); `where` describes the first occurrence and is only called then.
  void Note(absl::string_view what, absl::FunctionRef<std::string()> where);
  // Adds a one-off warning as is.
  void Add(std::string warning);
  // The Add()ed warnings, then one line per Note()d kind in first-seen order:
  // "<what>: <count> (first: <where>)".
  std::vector<std::string> Finish() &&;

 private:
  struct Entry {
    std::string what;
    std::string first;
    int64_t count = 0;
  };
  std::vector<Entry> entries_;
  std::vector<std::string> plain_;
};

}  // namespace profctl::analysis

#endif  // PROFCTL_ANALYSIS_OP_CLASSIFY_H_
