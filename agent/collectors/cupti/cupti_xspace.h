// Compact CUPTI records (record_batch.h, one batch or more per process) -> one host's XSpace in
// the shape XProf reads (TSL_WIRE.md, "How XProf reads an XSpace") and profctl's breakdown reader
// expects; the same shape the synthetic job writes (synthetic/synthetic_job.cc).
//
// WHAT GOES WHERE
//   /device:GPU:<n> (plane id n = the record's device id): one line per stream, id = stream id,
//     named `Stream #<id>(<kinds>)`. Kernels (demangled name; uint64 correlation_id; ref
//     kernel_details "regs:R static_shared:S dynamic_shared:D grid:x,y,z block:x,y,z occ_pct:P"
//     and double theoretical_occupancy_pct when the batch has the device's DeviceRecord, else
//     kernel_details without occ_pct); memcpys named by direction as XProf classifies them
//     (MemcpyHToD, MemcpyDToH, MemcpyDToD; peer copies are MemcpyDToD on a MemcpyP2P line) with
//     ref memcpy_details "kind_src:<k> kind_dst:<k> size:<n> dest:<device> async:<0|1>"; memsets
//     named Memset with memset_details "kind:<k> size:<n> async:<0|1>". Each kernel, memcpy and
//     memset names the framework op it belongs to (ref tf_op, "scope/Name:Type" as XProf parses a
//     TensorFlow op; see OPS below). Device capability stats from the DeviceRecord when there is
//     one.
//   /host:CPU (plane id 49): one line per thread, id = tid. CUDA API calls (named from the
//     record's name, else `cuda_api_<cbid>`), with uint64 correlation_id and device_id when device
//     activity with that correlation id was recorded (a launch), neither otherwise. NVTX ranges by
//     name; a range whose name matches the step pattern is a step: the earliest range of each step
//     number on the host is its root (int64 `_r`=1, `step_num`), and when other threads mark the
//     same step they join it as consumers (`_ct`/`_c`, the root gets `_pt`/`_p`), as XProf wants
//     one root per step per host. A thread that launches device work inside a step that another
//     thread of its process marks, outside any step range of its own, joins that step through
//     consumer wrappers named "launches in step" on its own line (see STEP JOINS below). Device
//     memory allocations and releases as
//     MemoryAllocation/MemoryDeallocation instants on the process's main thread line (tid = pid).
//     Synchronization (CUPTI_ACTIVITY_KIND_SYNCHRONIZATION) on the thread line of the API call
//     with the same correlation id, inside that call, named as TSL names them: cuStreamSynchronize,
//     cuEventSynchronize, cuStreamWaitEvent, cuCtxSynchronize, "unknown synchronization event";
//     uint64 context_id, stream_id and cuda_event_id where CUPTI gives them, and correlation_id
//     with device_id when the context's device is known from device activity (a correlation id
//     on a host event marks a launch, which needs its device). Without a matching API call they
//     are left out and counted. Never on a device plane: a synchronization is the host waiting,
//     not device work (docs/cupti.md says why, and what TSL does).
//     The flight recorder's NCCL launches (CuptiXSpaceOptions::collective_launches) as 0 ns
//     events "nccl<Op>" on their launching thread's line (collective_launches.h).
//   Task Environment: the window. XSpace.hostnames: the host.
// STEP JOINS. XProf gives a host event a step only through a step root or a consumer wrapper on
//   its own line; a launch outside both gets none, nor does the device work it launched. PyTorch
//   runs the backward pass on its autograd engine thread, which marks no step while the Python
//   main thread is inside "train_step N": without more, XProf leaves all backward-pass device
//   work out of the steps. So, per process, the steps its threads mark (one span per
//   step: of spans that overlap, the earliest) hold the launches of its other threads: each run
//   of consecutive launches of one step gets a wrapper (`_ct`/`_c` of the step's root, which then
//   gets `_pt`/`_p`) from the first to the last of the outermost events holding them that lie
//   wholly inside the step's span. Those are siblings on the line, so the wrapper nests with
//   everything there and never reaches into another step; it is 1 ns wider at each end where the
//   line leaves room, so it encloses even a lone launch strictly, and a step range of the
//   thread's own between launches ends it. Launches outside every step of their process stay as
//   they are. The name has no digits: no step pattern takes it for a step.
// OPS. The tf_op of device work is its launch's op: the innermost NVTX range that is not a step
//   holding the launch's start on the launching thread; else the one on the thread marking the
//   process's step that holds the launch (the autograd thread's launches get the main thread's
//   "forward_backward"); else the launching API call without CUPTI's version suffix. Written
//   "nvtx/<range>:<Type>" or "cuda/<call>:<Type>": the name's characters outside
//   [A-Za-z0-9_.>-] become '_' (a run of them one), the type is its alphanumeric words
//   capitalized ("nvtx/forward_backward:ForwardBackward",
//   "cuda/cudaLaunchKernel:CudaLaunchKernel"); device work whose launch was not recorded gets
//   "cuda/unrecorded_launch:UnrecordedLaunch".
// CORRELATION IDS are per process in CUPTI; here they are (pid << 32) | id, unique on the host.
// TIME: every record time is on its process's GPU clock; wall = gpu - gpu_minus_wall_ns of its
// batch. Events not wholly inside the window are left out and counted, except step ranges: a step
// cut by the window is clipped to it and marked with xspace::kStatStepCut, so the breakdown keeps
// it as a partial step (a capture shorter than a step still has its steps).
#ifndef PROFCTL_AGENT_COLLECTORS_CUPTI_CUPTI_XSPACE_H_
#define PROFCTL_AGENT_COLLECTORS_CUPTI_CUPTI_XSPACE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "agent/collectors/cupti/collective_launches.h"
#include "agent/collectors/cupti/record_batch.h"
#include "tensorflow/profiler/xplane.pb.h"

namespace profctl::agent::cupti {

// The breakdown reader's default step pattern (analysis/op_classify.h
// kDefaultStepPattern; a test keeps the two equal): "step 5", "train_step 5", "ProfilerStep#5".
inline constexpr absl::string_view kDefaultNvtxStepPattern =
    R"re((?i)(?:^|[^a-z])(?:profiler)?step(?:marker)?\s*[#:_=-]?\s*(\d+)\s*$)re";

struct CuptiXSpaceOptions {
  std::string hostname;
  // The capture window, wall-clock ns since the epoch: 0 < start <= stop.
  int64_t profile_start_ns = 0;
  int64_t profile_stop_ns = 0;
  // RE2, searched in NVTX range names; group 1 captures the step number.
  std::string step_pattern = std::string(kDefaultNvtxStepPattern);
  // The flight recorder's NCCL launches (collective_launches.h), on the window's clock already
  // (no batch offset applies): each one inside the window becomes a 0 ns event on its thread's
  // /host:CPU line, named NcclLaunchEventName, with kernel_name and nccl_launch_seq.
  std::vector<CollectiveLaunch> collective_launches;
};

// What went into the space, and what did not.
struct CuptiXSpaceStats {
  int64_t kernels = 0;
  int64_t memcpys = 0;
  int64_t memsets = 0;
  int64_t api_calls = 0;
  int64_t nvtx_ranges = 0;
  int64_t steps = 0;  // step roots
  // Consumer wrappers joining a thread's launches to a step that another thread of its process
  // marks (PyTorch's autograd thread in the main thread's step).
  int64_t step_joins = 0;
  int64_t memory_events = 0;
  int64_t collective_launches = 0;
  int64_t synchronizations = 0;
  // Synchronization records left out: no API call with their correlation id (a program that
  // calls the driver API directly: DRIVER records are not recorded).
  int64_t unmatched_synchronizations = 0;
  int64_t outside_window = 0;    // records left out: not wholly inside the window
  int64_t launched_outside = 0;  // device work left out with its launch (an API call not wholly
                                 // inside the window)
  uint64_t dropped_records = 0;  // as the batches report them
  // Of launched_outside: device work inside the window whose launch no batch holds at all (its
  // API records were lost), not merely launched before or after the window.
  int64_t unrecorded_launches = 0;
};

// Whether device work without a recorded launch (unrecorded_launches) is a shortfall of the
// window rather than a few records at its edges (CUPTI on an H100 recorded the first kernels of
// a window whose launches came before it was enabled): more than 100 of them, and more than 1 %
// of the device work placed.
bool UnrecordedLaunchesAreAShortfall(const CuptiXSpaceStats& stats);

// Appends the host's planes to `space` (which should be empty) and sets its window and hostname.
// INVALID_ARGUMENT for a bad window or a step pattern that does not compile or has no group.
absl::StatusOr<CuptiXSpaceStats> BuildCuptiXSpace(const std::vector<RecordBatch>& batches,
                                                  const CuptiXSpaceOptions& options,
                                                  tensorflow::profiler::XSpace* space);

// Theoretical occupancy (% of the SM's warp slots filled by resident blocks) of a kernel on a
// device, from threads, registers and shared memory per block (allocation granularities of
// compute capability 7.0 and later). nullopt when the device limits are missing (zero) or the
// block is not a possible launch (a dimension <= 0, more than 1024 threads).
std::optional<double> TheoreticalOccupancyPct(const inject::KernelRecord& kernel,
                                              const inject::DeviceRecord& device);

}  // namespace profctl::agent::cupti

#endif  // PROFCTL_AGENT_COLLECTORS_CUPTI_CUPTI_XSPACE_H_
