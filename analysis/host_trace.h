// The decoded, framework-neutral view of one host's trace that the step breakdown works on.
// Readers (XSpace, PyTorch/Kineto JSON) produce it; the breakdown consumes one host at a time and
// keeps only a compact per-step summary, so a pod's memory is bounded by its largest host.
//
// All times are int64 ns on the pod's common timeline (the coordinator's clock: agent time minus
// the host's aligned clock offset). Intervals are half-open [start_ns, end_ns) with
// start_ns <= end_ns; readers drop (and count in `warnings`) events that violate it.
#ifndef PROFCTL_ANALYSIS_HOST_TRACE_H_
#define PROFCTL_ANALYSIS_HOST_TRACE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace profctl::analysis {

// How a host warning that passes on the trace's own error starts (an XSpace's `errors`: a
// rank whose GPU tracing was held by another tool, a process lost mid-capture): data the trace
// lacks, which the terminal summary lists before any other warning.
inline constexpr absl::string_view kTraceErrorWarningPrefix = "trace error: ";

// What an interval of device or host activity is, for the breakdown. Readers classify; the
// breakdown only combines (docs/pod-step-breakdown.md has the naming rules per framework).
enum class OpKind : uint8_t {
  // Device activity (one device's timeline).
  kDeviceCompute,  // kernels that are not collectives, memsets
  kCollective,     // NCCL/RCCL/XLA collectives: all-reduce, all-gather, reduce-scatter, ...
  kMemcpyH2D,      // host-to-device copies (input)
  kMemcpyD2H,      // device-to-host copies (output)
  kMemcpyD2D,      // device-to-device and peer-to-peer copies
  // Host activity (any host thread).
  kHostInputWait,  // the host waiting for input: GetNextBatch, tf.data / DataLoader next, ...
  kHostLaunch,     // runtime/driver API that launches or enqueues device work (cudaLaunchKernel,
                   // cudaMemcpyAsync, ncclAllReduce, ...)
  kHostSync,       // the host blocked on the device (cudaStreamSynchronize, ...): not overhead
  kHostOther,      // any other host activity (framework ops, Python)
};

struct Op {
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  OpKind kind = OpKind::kDeviceCompute;
};

// A step marker as found in the trace: a TSL/JAX/TF step root (`_r`=1 with `step_num`), an NVTX
// range or PyTorch `ProfilerStep#N` whose name matches the step pattern. A host that marks its
// steps on several threads (one per GPU process) has several markers per step number.
struct StepMarker {
  int64_t step = 0;
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  int64_t thread_id = 0;  // for diagnostics only
  // The writer clipped this marker at an edge of the recorded window (the step began before it
  // or ended after it): its step is partial. XSpace: the int64 stat kCutStepStat on the event.
  bool cut = false;
};

struct DeviceTrace {
  int64_t id = 0;    // device ordinal (GPU/TPU number)
  std::string name;  // e.g. "/device:GPU:0"
  std::vector<Op> ops;
};

struct HostTrace {
  // File stem / host name as shown to users ("worker-1", "rank-3").
  std::string host;
  // The job's rank the trace states (Kineto distributedInfo.rank); -1: it states none.
  int64_t rank = -1;
  // The job's world size the trace states (Kineto distributedInfo.world_size); 0: it states none.
  int64_t world_size = 0;
  // The recorded window on the common timeline; steps not wholly inside are partial.
  int64_t window_start_ns = 0;
  int64_t window_end_ns = 0;
  std::vector<StepMarker> steps;
  std::vector<DeviceTrace> devices;
  // Host-side activity of every thread (order unspecified; may overlap).
  std::vector<Op> host_ops;
  // Problems a reader met that did not stop it (dropped events, unknown units, ...), for people.
  std::vector<std::string> warnings;
};

}  // namespace profctl::analysis

#endif  // PROFCTL_ANALYSIS_HOST_TRACE_H_
