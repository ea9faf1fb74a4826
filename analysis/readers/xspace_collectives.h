// The hang verdict's record of one host (analysis/hang_verdict.h RankCollectives), built from the
// events the XSpace wire reader walks (xspace_reader.cc), in the same pass that reads the
// breakdown's inputs: names are classified once per event metadata id (CollectiveMeta), and per
// event only what may matter is kept (step markers, NCCL calls, launches, collective kernels).
// The rules are hang_verdict.h's ENTERED / COMPLETED / IDENTITY / LAUNCHES ONLY. Internal to
// analysis/readers: users include xspace_reader.h.
#ifndef PROFCTL_ANALYSIS_READERS_XSPACE_COLLECTIVES_H_
#define PROFCTL_ANALYSIS_READERS_XSPACE_COLLECTIVES_H_

#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/functional/function_ref.h"
#include "absl/strings/string_view.h"
#include "analysis/hang_verdict.h"
#include "analysis/op_classify.h"

namespace profctl::analysis::xspace_collectives {

// What a host event metadata is, for the record (decided once per id).
struct HostMeta {
  bool nccl_api = false;  // an NCCL/RCCL API call (named nccl*/rccl*, any case)
  // Its own name's collective kind (an NCCL call's `kernel_name` stat, when it has one, wins).
  std::optional<CollectiveKind> name_kind;
  bool launch = false;               // ClassifyHostOpName: kHostLaunch
  std::optional<int64_t> name_step;  // the step pattern's number for its name, when >= 0
};
HostMeta ClassifyHostMeta(absl::string_view name, const StepMatcher& matcher);

// The collective kind of a device event metadata, when it is a collective kernel (op_classify.h's
// IsCollectiveDeviceOpName naming a kind).
std::optional<CollectiveKind> DeviceKernelKind(absl::string_view name);

// What one event's own stats say, for the record: the first integer value of `_r`, `step_num`,
// the step-cut stat and `correlation_id`, and whether it has a string `kernel_name` with the
// collective kind that names (as xspace::XPlaneReader::IntStat/StrStat read them; the reader
// classifies each distinct kernel name once).
struct EventStats {
  std::optional<int64_t> root;
  std::optional<int64_t> step_num;
  std::optional<int64_t> cut;
  std::optional<int64_t> correlation_id;
  bool kernel_name = false;
  std::optional<CollectiveKind> kernel_name_kind;
};

// One step of the host: the union of its markers of one number.
struct StepSpan {
  int64_t step = 0;
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  bool cut = false;
};

// Collects one host's events and makes its record. Times are the host's own clock (absolute ns).
// The device planes come first (BeginDevice, DeviceEvent), then the first `/host:CPU` plane's
// events (HostEvent): a launch is kept only when it launches a collective kernel, which the
// devices have said by then, so what is kept per event is the NCCL calls, the launches of
// collective kernels and the collective kernels, never every launch.
class Builder {
 public:
  // An event's start and end on the host's own clock: asked only for the events the record keeps
  // (converting an event's picoseconds to nanoseconds is most of what looking at it costs).
  using Times = absl::FunctionRef<std::pair<int64_t, int64_t>()>;

  // A device plane begins (`/device:GPU|TPU|CUSTOM:*`): its kernels are numbered on their own.
  void BeginDevice();
  // Every event of the current device plane's lines that are not XProf's derived ones.
  // `kind`: DeviceKernelKind of its metadata (nullopt: not a collective kernel, or undefined).
  void DeviceEvent(std::optional<CollectiveKind> kind, std::optional<int64_t> correlation_id,
                   Times times);
  // Every event of the first `/host:CPU` plane, after every device event, with its metadata's
  // classification (null: an undefined id). `line` numbers the plane's lines from 0.
  void HostEvent(size_t line, const HostMeta* meta, const EventStats& stats, Times times);
  // The record. `window_start_ns`: the profile start time; `window_end_ns`: the profile stop
  // time, else the last end of any host or device event (0: none).
  RankCollectives Finish(int64_t window_start_ns, int64_t window_end_ns) &&;

 private:
  // A host event that enters a collective, or may (a launch, once its kernel is known).
  struct Entry {
    int64_t start_ns = 0;
    int64_t end_ns = 0;
    std::optional<CollectiveKind> api_kind;  // an NCCL call's kind; nullopt: a launch
    std::optional<int64_t> correlation_id;
  };
  struct Kernel {
    int64_t start_ns = 0;
    int64_t end_ns = 0;
    CollectiveKind kind = CollectiveKind::kAllReduce;
    std::optional<int64_t> correlation_id;
  };

  std::map<int64_t, StepSpan> steps_by_num_;
  std::vector<std::vector<Entry>> entries_;  // per host line, in stored order
  std::vector<std::vector<Kernel>> devices_;
  absl::flat_hash_map<int64_t, CollectiveKind> kernel_corr_;
  int64_t device_events_ = 0;
};

}  // namespace profctl::analysis::xspace_collectives

#endif  // PROFCTL_ANALYSIS_READERS_XSPACE_COLLECTIVES_H_
