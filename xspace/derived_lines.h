// The lines a trace viewer shows beside a GPU's stream lines, derived from the device work's
// annotations: "Steps" (which step the device was working on), "TensorFlow Ops" (the framework
// op of its kernels, `tf_op`) and "XLA Ops" (`hlo_op`), with the line ids TSL gives them
// (tsl/profiler/utils/trace_utils.h: kThreadIdStepInfo, kThreadIdTfOp, kThreadIdHloOp).
//
// RULES (learned from XProf's derived timeline, written from its observable behaviour)
//   Kernels: events on the plane's own lines (not derived ones) whose name does not start with
//     Memcpy, Memset or Memory, and whose duration is > 0. Copies and memsets have no op lines,
//     as in XProf; they do count for "Steps".
//   Step of a device event: the step root (`_r` >= 1 with `step_num`, any line of `/host:CPU`)
//     whose span holds the start of its launch (the host event with the same `correlation_id`),
//     else the one holding the device event's own start; none when neither is held.
//   Steps: per step, one event "step <n>" from the first start to the last end of its device
//     events (kernels and copies), with stat `step_num`.
//   TensorFlow Ops / XLA Ops: the kernels with an op (`tf_op`, resp. `hlo_op`) in start order
//     (all streams merged, as XProf does); one with the same op and step as the line's last event
//     extends that event to its end (kernels without the op, and copies, in between do not break
//     it); any other starts a new event named by the op, with stat `step_num` when it has a step.
//   Nesting: every derived line nests (events on one line never partly overlap): events in
//     start order, longer first at equal starts; one that starts inside another and ends past
//     it starts at that one's end instead (kernels of several streams overlap), one left with no
//     time is dropped.
//   Empty lines are not made: a plane whose kernels have no `tf_op` gets no "TensorFlow Ops", one
//   without `hlo_op` no "XLA Ops", one without steps no "Steps".
// Times are absolute ns on the recording host's clock (xspace::EventStartNs).
#ifndef PROFCTL_XSPACE_DERIVED_LINES_H_
#define PROFCTL_XSPACE_DERIVED_LINES_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"
#include "xspace/xspace.h"

namespace profctl::xspace {

// TSL's derived line ids and XProf's names for them. TSL declares `constexpr int
// kThreadIdDerivedMin = 0xdeadbeef`, an int: the ids in its files are that value as a signed
// 32-bit number, -559038737 + n, widened to int64.
inline constexpr int64_t kDerivedLineIdMin = -559038737;         // int32_t(0xdeadbeef)
inline constexpr int64_t kStepsLineId = kDerivedLineIdMin;       // kThreadIdStepInfo
inline constexpr int64_t kTfOpsLineId = kDerivedLineIdMin + 3;   // kThreadIdTfOp
inline constexpr int64_t kXlaOpsLineId = kDerivedLineIdMin + 5;  // kThreadIdHloOp
inline constexpr absl::string_view kStepsLineName = "Steps";
inline constexpr absl::string_view kTfOpsLineName = "TensorFlow Ops";
inline constexpr absl::string_view kXlaOpsLineName = "XLA Ops";

struct DerivedEvent {
  absl::string_view name;  // into the space, or a DerivedLine's step_names
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  std::optional<int64_t> step;
};

struct DerivedLine {
  int64_t id = 0;
  absl::string_view name;
  std::vector<DerivedEvent> events;  // in start order, nested
  // Owns the "step <n>" names a Steps line's events point into.
  std::vector<std::unique_ptr<std::string>> step_names;
};

// Derives the lines of every GPU plane of one space; the space must outlive what it returns.
class DerivedLinesBuilder {
 public:
  // Indexes the space's step roots and launches once (memory: 24 bytes per launch).
  explicit DerivedLinesBuilder(const XSpace& space);
  // The derived lines of `device` (a plane of the space), in the order Steps, TensorFlow Ops,
  // XLA Ops, each only when it has events. Empty for a plane that already has a derived line
  // (IsDerivedLine): its writer derived them.
  std::vector<DerivedLine> Derive(const XPlane& device) const;

 private:
  struct Span {
    int64_t start_ns;
    int64_t end_ns;
    int64_t step;
  };
  std::optional<int64_t> StepAt(int64_t t_ns) const;

  int64_t profile_start_ns_ = 0;
  std::vector<Span> steps_;                           // by start
  std::vector<int64_t> max_end_;                      // per steps_ prefix, its latest end
  std::vector<std::pair<uint64_t, int64_t>> launch_;  // (correlation id, launch start), sorted
};

// Adds the derived lines to every `/device:GPU:` plane of `space` that has none, as lines with
// the ids and names above (timestamp: the profile start), events named by interned metadata.
// Returns the number of events added.
int64_t AddDerivedLines(XSpace* space);

}  // namespace profctl::xspace

#endif  // PROFCTL_XSPACE_DERIVED_LINES_H_
