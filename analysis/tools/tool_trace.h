// The opt-in detail view of one host's trace that the profiler's own tools (tools.h: overview,
// kernel_stats, op_stats, input_pipeline, memory) work on. The step breakdown never builds it:
// HostTrace (host_trace.h) stays 24 bytes per event with no names, and its readers' hot loops are
// unchanged. tool_readers.h fills a ToolTrace from the same files, with the same time rules
// (xspace/xspace.h, kineto_reader.h) and the same classification (op_classify.h), so a tool's
// step windows and categories line up with the breakdown's to the nanosecond.
//
// Cost: names are interned once (StringTable), an event is ~64 bytes plus its details; readers
// decode the whole file (docs/tools.md "Cost"). Times are int64 ns on the pod's common timeline,
// half-open [start_ns, end_ns), as in HostTrace.
#ifndef PROFCTL_ANALYSIS_TOOLS_TOOL_TRACE_H_
#define PROFCTL_ANALYSIS_TOOLS_TOOL_TRACE_H_

#include <algorithm>
#include <array>
#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/ascii.h"
#include "absl/strings/string_view.h"
#include "analysis/host_trace.h"

namespace profctl::analysis {

// ASCII case-insensitive substring test (Debian's Abseil has no StrContainsIgnoreCase).
inline bool ContainsIgnoreCase(absl::string_view s, absl::string_view part) {
  return std::search(s.begin(), s.end(), part.begin(), part.end(), [](char a, char b) {
           return absl::ascii_tolower(static_cast<unsigned char>(a)) ==
                  absl::ascii_tolower(static_cast<unsigned char>(b));
         }) != s.end();
}

// Interned strings: id 0 is always "" (no name / unknown). Strings live in a deque, so the
// map's keys (views of them) stay valid as it grows and when the table moves. Not thread-safe.
class StringTable {
 public:
  static constexpr uint32_t kEmpty = 0;
  StringTable() { strings_.emplace_back(); }
  StringTable(const StringTable&) = delete;
  StringTable& operator=(const StringTable&) = delete;
  StringTable(StringTable&&) noexcept = default;
  StringTable& operator=(StringTable&&) noexcept = default;

  // A name is kept to its first kMaxBytes bytes (cut on a UTF-8 character boundary) and
  // "...(N bytes)": no name a person reads is that long, and every tool copies the names it
  // shows (an XSpace with a 200 MB event name took 21.6x the file with --tool=all).
  static constexpr size_t kMaxBytes = 4096;

  uint32_t Intern(absl::string_view s) {
    if (s.empty()) return kEmpty;
    std::string cut;
    if (s.size() > kMaxBytes) {
      size_t n = kMaxBytes;
      while (n > 0 && (static_cast<unsigned char>(s[n]) & 0xc0) == 0x80) --n;
      cut = std::string(s.substr(0, n)) + "...(" + std::to_string(s.size()) + " bytes)";
      s = cut;
    }
    auto it = ids_.find(s);
    if (it != ids_.end()) return it->second;
    const auto id = static_cast<uint32_t>(strings_.size());
    strings_.emplace_back(s);
    ids_.emplace(strings_.back(), id);
    return id;
  }
  // kEmpty when `s` was never interned.
  uint32_t Find(absl::string_view s) const {
    auto it = ids_.find(s);
    return it == ids_.end() ? kEmpty : it->second;
  }
  const std::string& Get(uint32_t id) const { return strings_[id]; }
  size_t size() const { return strings_.size(); }

 private:
  std::deque<std::string> strings_;
  absl::flat_hash_map<absl::string_view, uint32_t> ids_;
};

// A kernel's launch configuration (XSpace `kernel_details` / `theoretical_occupancy_pct`, Kineto
// kernel args). -1 / 0 mean unknown.
struct KernelDetails {
  int32_t registers_per_thread = -1;
  int64_t static_shared_bytes = -1;
  int64_t dynamic_shared_bytes = -1;
  std::array<int32_t, 3> grid = {0, 0, 0};
  std::array<int32_t, 3> block = {0, 0, 0};
  double occupancy_pct = -1;  // theoretical (XSpace) or Kineto's "est. achieved occupancy %"
};

// One device event: kernel, memcpy, memset, collective.
struct DeviceEvent {
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  int64_t device = 0;
  uint32_t name = StringTable::kEmpty;
  OpKind kind = OpKind::kDeviceCompute;
  bool is_kernel = false;  // a kernel launch (not a memcpy/memset)
  // The launching op when the event names it (XSpace `tf_op` / `hlo_op`), else kEmpty.
  uint32_t op = StringTable::kEmpty;
  // The stream (queue) it ran on: Kineto `args.stream` (else its `tid`), the XSpace line's id.
  int32_t stream = 0;
  int64_t correlation_id = -1;  // CUPTI correlation (XSpace `correlation_id`, Kineto `correlation`)
  int64_t link_id = -1;         // Kineto `External id`: the cpu_op that launched it
  int32_t details = -1;         // index into ToolTrace::kernel_details, -1: none
  // TPU `XLA Ops` events: the op's `hlo_category` and `flops` stats, when written.
  uint32_t op_type = StringTable::kEmpty;
  int64_t flops = -1;
};

// What a host event is to the tools.
enum class HostEventRole : uint8_t {
  kFrameworkOp,  // PyTorch cpu_op, TF op (`name:Type`), host `Framework Ops`/`TensorFlow Ops` lines
  kRuntime,      // CUDA/HIP runtime or driver API, NCCL host calls
  kAnnotation,   // user annotations, NVTX ranges, anything else named
  kStep,         // step markers (never ops)
};

struct HostEvent {
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  int64_t thread = 0;
  uint32_t name = StringTable::kEmpty;
  uint32_t type = StringTable::kEmpty;  // op type: TF `Type` of `name:Type`, else the name
  OpKind kind = OpKind::kHostOther;     // op_classify.h's class
  HostEventRole role = HostEventRole::kAnnotation;
  bool compile = false;                        // XLA/TF/torch compilation (see docs/tools.md)
  int64_t correlation_id = -1;                 // runtime calls: CUPTI correlation
  int64_t link_id = -1;                        // Kineto `External id`
  uint32_t input_dims = StringTable::kEmpty;   // Kineto `Input Dims` as written, when recorded
  uint32_t input_types = StringTable::kEmpty;  // Kineto `Input type`
};

// An op span on a device's derived line (`XLA Ops`, `Framework Ops`, `TensorFlow Ops`).
struct DeviceOpSpan {
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  int64_t device = 0;
  int64_t line = 0;
  uint32_t name = StringTable::kEmpty;
  uint32_t type = StringTable::kEmpty;
  int64_t flops = -1;  // XProf's `flops` stat of the op, when written
};

// One allocation or free of device (or host) memory.
struct MemoryEvent {
  int64_t time_ns = 0;
  int64_t device = -1;  // device ordinal; -1: host memory
  int64_t bytes = 0;    // > 0 allocation, < 0 free
  uint64_t address = 0;
  uint32_t op = StringTable::kEmpty;         // `tf_op` / the enclosing cpu_op, when known
  uint32_t allocator = StringTable::kEmpty;  // `allocator_name`
  int64_t reported_in_use = -1;              // `bytes_allocated` / Kineto `Total Allocated`
  int64_t reported_reserved = -1;            // `bytes_reserved` / Kineto `Total Reserved`
  double reported_fragmentation = -1;        // `fragmentation` (0..1), when written
  // XProf's MemoryProfile stats, when written (XSpace only; -1 / kEmpty: not recorded).
  int64_t reported_available = -1;  // `bytes_available`: the allocator's free memory
  int64_t reported_peak = -1;       // `peak_bytes_in_use`: the heap's peak since it started
  int64_t requested_bytes = -1;     // `requested_bytes` (allocation_bytes may round it up)
  int64_t step = -1;                // `step_id`
  uint32_t region_type = StringTable::kEmpty;  // `region_type`: output, temp, persist, ...
  uint32_t data_type = StringTable::kEmpty;    // `data_type`: float, half, ... (TF's names)
  uint32_t shape = StringTable::kEmpty;        // `shape`: the tensor's shape as written
};

struct DeviceInfo {
  int64_t id = 0;
  std::string name;  // "NVIDIA H100 80GB HBM3", or the plane name
  int32_t compute_major = 0;
  int32_t compute_minor = 0;
  int64_t memory_bytes = 0;
  std::string device_type;  // `device_type_string` (TPU type, e.g. "TPU v4"), when written
  double peak_tflops = 0;   // `peak_teraflops_per_second`, 0: unknown
};

struct RunEnvironment {
  std::string framework;  // "PyTorch", "TensorFlow", "JAX", "profctl", or "" when unknown
  std::vector<std::string> hostnames;
  std::vector<DeviceInfo> devices;
  std::string driver_version;
  std::string cuda_version;
};

struct ToolTrace {
  std::string host;
  int64_t window_start_ns = 0;
  int64_t window_end_ns = 0;
  StringTable strings;
  std::vector<DeviceEvent> device_events;
  std::vector<KernelDetails> kernel_details;
  std::vector<HostEvent> host_events;
  std::vector<DeviceOpSpan> device_ops;
  std::vector<MemoryEvent> memory;
  RunEnvironment environment;
  std::vector<std::string> warnings;

  absl::string_view Str(uint32_t id) const { return strings.Get(id); }
};

}  // namespace profctl::analysis

#endif  // PROFCTL_ANALYSIS_TOOLS_TOOL_TRACE_H_
